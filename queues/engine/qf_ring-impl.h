/* qf_ring-impl.h - internal: ring operations on a Concurrency Kit ck_ring.
 *
 * Implementation notes.
 *
 * The data structure is ck_ring_t: a power-of-two array of pointer slots,
 * c_head (next slot to consume) on its own cache line, p_head (next slot to
 * reserve) and p_tail (end of the published slots) together on another.
 * Producers reserve by advancing p_head, consumers claim by advancing
 * c_head, as in ck_ring; a queue's ring publishes each slot with a turn of
 * its own instead of ck_ring's p_tail (note 4). What qflow adds, and why:
 *
 *  1. Capacity from the indices. A reservation succeeds only while
 *     p_head - c_head < capacity (the queue's exact capacity, any value up
 *     to the ring's size - 1), so no separate element counter is written by
 *     both sides: per element the producer writes only the producer line
 *     and the consumer only the consumer line.
 *  2. Cached opposite index. Each side keeps the last value it read of the
 *     other side's index and re-reads the real one only when the cached
 *     value says "full" (producer) or "empty" (consumer of a ring without
 *     turns; with turns a consumer reads the turns instead). In the steady
 *     state a producer does not touch the consumer's line at all. The cache
 *     is published with release and read with acquire, so the hand-off of
 *     slot contents stays ordered through it.
 *  3. Fences. A multi-producer publishes its slots' turns (note 4) with a
 *     seq_cst store, or release stores and a full fence, and a
 *     multi-consumer advances c_head with a seq_cst CAS, so a waiter on
 *     the other side (an RMW on the queue's state word, then seq_cst loads
 *     of the turns and indices) pairs with them under the C11 model alone:
 *     one of the two sees the other. A declared single producer or single
 *     consumer publishes with plain (release) stores and runs
 *     qf__fence_light(); the waiters of the other side then
 *     run qf__fence_heavy() (coord/qf_fence-impl.h) before re-checking. The
 *     light fence is a compiler barrier where membarrier(2) works, so a
 *     single-producer, single-consumer hand-off has no locked instruction
 *     at all; the process-wide barrier is paid only by a waiter facing a
 *     declared single side, never on the multi-producer, multi-consumer
 *     path, which parks most often when threads outnumber cores.
 *  4. A turn per slot: no shared tail. A queue's ring (one made with
 *     multi_producer true, which every queue's is) publishes each slot on
 *     its own: marks[pos(i)] == i + 1 says "index i is written and
 *     published" (initially marks[pos(k)] = k; i and i + k * slots + 1 differ
 *     in parity, slots being a power of two, so neither the initial value
 *     nor a mark from an earlier lap reads as current). There is no
 *     p_tail to move in index order, so a producer never waits for, nor
 *     carries, an earlier one, and a consumer never reads a line that
 *     every producer writes: per element the producer writes its slot and
 *     its mark, the consumer reads them (the fast bounded queues' design:
 *     folly's turns, atomic_queue's states). ck_ring moved p_tail with a
 *     commit wait; with more producers than cores a preempted producer
 *     held up every one behind it (100-250 k items/s at 8x8 on 2 cores),
 *     and qflow's carry protocol that replaced the wait still put a
 *     locked instruction on a line the consumers read in every put.
 *       producer   reserve on p_head (CAS, or a declared single
 *                  producer's store); write the values (or tombstones,
 *                  note 7); store the marks (release); then a full fence
 *                  (a single store of one mark is itself seq_cst), or the
 *                  light one of a declared single producer (note 3).
 *       consumer   from c_head, count the marks that say published, in a
 *                  row (seq_cst loads, qf__ring_run_end(); acquire would
 *                  do, and is the same instruction on x86 and
 *                  AArch64); fewer than `min`: empty (a
 *                  multi-consumer re-reads c_head first: it may be stale);
 *                  read the values, then claim with the c_head CAS (store).
 *                  A pointer take with min 1 reads each value right after
 *                  its mark in the same pass (qf__ring_run_read_ptrs());
 *                  a take of at least min > 1 first loads the mark of
 *                  the last index it needs and, unpublished, is empty
 *                  without the scan (qf__ring_min_unpublished()).
 *     A consumer sees only the published run from c_head, so a slot
 *     published out of turn becomes takeable when the slots before it are.
 *     Waking: whoever makes slots takeable must count them in its wake
 *     (qf__fifo_wake_consumers()), or a consumer that woke too early for
 *     an out-of-turn slot and went back to sleep could be left asleep
 *     with it. So a multi-producer publish also counts the published run
 *     right after its own slots (seq_cst loads after its fence): of two
 *     producers whose slots touch, the one publishing last sees the
 *     other's marks (the fences' total order), and counts them
 *     (tests/model/fifo_consumers.pml: with a wake for its own slots only,
 *     RUN=0, spin finds a consumer asleep for good beside a takeable slot).
 *     The count of what is published (a waiter's re-check, the size) is a
 *     scan of the marks from c_head; run_hint keeps where the run was last
 *     seen to end (advanced with a CAS by whoever scans past it, or finds it
 *     2^30 indices behind c_head, on a line of its own, never read by the
 *     fast paths), so repeated counts of a large ring scan only what is
 *     new. Nothing moves the hint while nobody counts, so after 2^32 indices a
 *     stale hint can read as current: a count from it may overstate (a
 *     waiter then retries instead of sleeping, until the slot under it is
 *     published), which is harmless, but the decisions that must not
 *     overstate (nothing in flight, so the queue is settled closed; every
 *     earlier slot takeable, before the overflow list) scan from c_head
 *     without it. tests/model/ring_turns.pml checks the protocol.
 *     A ring made with multi_producer false (the runtime's run queues) has
 *     no marks and keeps ck_ring's p_tail, moved by its one producer.
 *  5. Bulk reserve and take: one CAS moves k indices. A take claims at
 *     least `min` values or none, so a batch that is not there yet is never
 *     taken in part (nothing to give back).
 *  6. Every index and slot access is a C11 __atomic operation (ck_pr's are
 *     inline assembly, invisible to ThreadSanitizer), so TSan checks the
 *     real happens-before edges; a multi-consumer's stale read of a slot
 *     that is being rewritten is an atomic relaxed load whose value is
 *     discarded when its CAS fails.
 *  7. Tombstones are tags, not values. A producer that reserved slots and
 *     then finds its queue closed cannot give them back, so it abandons
 *     them: per slot index i it stores tombs[pos(i)] = i + 1 (and counts
 *     it in tomb_n) before publishing. Any value may be a real element (a
 *     queue of int64 stores the numbers themselves), so no slot value can
 *     mean "abandoned". A consumer, while some tombstone is out (tomb_n !=
 *     0), reads the tags of the slots it takes together with their values,
 *     before its claim (after it, a later lap may tag the slot), drops the
 *     tagged ones, and after the claim resets each tag with a CAS from
 *     i + 1 to i (a later lap's tag stays). As with the marks, i and
 *     i + k * slots + 1 differ in parity, so a reset or initial tag never
 *     reads as current. Ordering: tag and count stores, then the release
 *     store of the slot's turn (note 4) -> the consumer's acquire load of
 *     that turn -> its loads of tomb_n and the tags. tomb_n
 *     cannot read 0 while an unclaimed tombstone the consumer can see is
 *     out: that tombstone's increment happens before the look and its
 *     decrement after its claim. tests/model/ring_tombs.pml checks it
 *     with spin (a thread stalled between claim and untag while 2^32
 *     indices pass is outside it, as for every CAS on a 32-bit index).
 *  8. Spread indices. In a queue's ring, index i lives at pos(i) =
 *     qf__ring_pos(): the low `spread` bits of i & mask trade places with
 *     the `spread` bits above them (4 and 4 in a ring of 256 slots or
 *     more, fewer in smaller rings, none in the run queues' rings), so
 *     in a ring of 256 slots or more consecutive indices sit at least 16
 *     positions apart (239 where the low four bits roll over),
 *     and each position's slot and mark (a cell, note 10) shares its line
 *     only with indices 16 or more away from it (atomic_queue
 *     remaps its indices the same way; folly spreads its tickets with a
 *     stride). Laid out in order, two producers putting i and i + 1 wrote
 *     the same slot and mark lines, and a consumer reading index i held
 *     the line that the producer of i + 1 was writing; each put's locked
 *     publish then waited for the other core's copy to be invalidated.
 *     Measured against the same tree in order (qflow-bench --quick,
 *     --reps 5, one run each): queue.tput 11.8 -> 19.4 M items/s at
 *     p1c1, 8.7 -> 17.3 M at p4c4, 6.0 -> 10.4 M at p16c16;
 *     queue.tput.tasks.p4c4 10.3 -> 16.5 M; runners.tput.1000 6.5 ->
 *     13.8 M; spsc unchanged (26.8-30.6 M against 27.8-29.6 M). Batches
 *     pay: 32 values spanned 16 mark lines and 16-32 slot lines rather than
 *     2 and 4 (16 cell lines since note 10), and queue.tput.batch32 ran
 *     0.71-0.99x the unspread build in six rounds (README, Measured, "The
 *     ring's spread indices").
 *     pos() is a permutation within each aligned block of 2^(2*spread)
 *     indices and is its own inverse, so the ring's storage, wrap and
 *     laps are as before.
 *     A ring of cells of 64 bytes or more (note 9) is not spread: no two
 *     of its cells share a line, so there is nothing to keep apart, and
 *     spread they alias in the cache. Index i + 1 sat 16 cells after i,
 *     2 KiB on for 128-byte cells, so the 32 lines of 16 consecutive
 *     indices fell into 4 of the L1's 64 sets (8 ways each), and the
 *     elements' and tensors' lines were evicted with them. The (int64,
 *     float32 [16]) queue ran 2.9 M items/s at p1c1 (queue.tput.p1c1/
 *     qflow_tuple, medians of six rounds, the builds in turn) and 10.5 M
 *     laid out in order; 3.3 against 15.5 M through the values calls;
 *     3.6 against 5.5 M at p4c4. Cells of 32 and 64 bytes ran the same
 *     either way within the noise (six rounds); cells of 16 bytes (the
 *     pointer ring, note 10) lose without the spread (p1c1 15.0 against
 *     8.9 M, p4c4 8.5 against 5.5 M).
 *     A batching queue's ring is not spread either
 *     (qf__ring_lay_in_order()): its producers put runs of rows and its
 *     consumers take batches of hundreds, so each call writes or reads a
 *     stretch of consecutive indices, and in order that stretch is a run
 *     of whole lines read front to back (four cells a line), where spread
 *     it touched every line of a 4 KiB block four times, 256 bytes apart,
 *     in an order the hardware prefetcher does not follow. The cost that
 *     the spread avoids (neighbouring indices put by different producers
 *     at once) is paid once per run there, not once per value. Measured
 *     in README, Measured, "A batching queue's cells in order". A bulk
 *     put there asks for the next run's lines when it is done
 *     (qf__ring_prefetch_next_run()).
 *  9. Values in cells. A queue of small dense values (a packed queue,
 *     queues/qf_queue_packed-impl.h) can keep them in the ring itself:
 *     qf__ring_init_cells() lays the ring out as one array of cells, a
 *     cell per position, each a power of two of 16 to 256 bytes
 *     (qf__ring_cell_bytes()) holding the position's mark (word 0), its
 *     tombstone tag (word 1) and then the value's 8-byte words. There are
 *     no pointer slots; marks and tags are the cells' words 0 and 1, 2^shift
 *     words apart, so notes 4, 7 and 8 hold as written. A put's value
 *     is the address of the bytes, which qf__ring_write() (a put of one:
 *     qf__ring_put_one_cell()) copies in, and
 *     a take's out[i] is the address of the caller's buffer, which the
 *     take fills (and drop_tombs() may permute: each buffer stays in out[]
 *     once). Why: by pointer, a value travelled in a block of its own, so
 *     a consumer missed on the mark, the slot and the block the producer
 *     had just written (and the block went back to the producer's cache
 *     later, missing again there); in a cell the mark and up to 56 bytes
 *     of value share a line, one transfer per element. The cells are
 *     aligned to 128 bytes: with 64 the two lines of a 128-byte cell fell
 *     in different pairs of the adjacent-line prefetcher, and the (int64,
 *     float32 [16]) queue ran 8.2-8.5 M items/s instead of 9.6-10.2 M.
 *     Ordering is the pointer slot's: the value's words are relaxed
 *     stores before the mark's release store, and a consumer reads them
 *     with relaxed loads after its load of the mark and before its claim
 *     (a consumer whose claim fails may have read words a later lap was
 *     writing: atomic loads, and the copy is discarded, as in note 6).
 * 10. A pointer's cell. A queue's ring of pointers (multi_producer true
 *     and no cells of values: a queue of element pointers or inline
 *     values, or a packed queue whose cells could not be had) keeps each
 *     position's mark, tag and pointer side by side in a cell of 16 bytes,
 *     the layout of note 9 with one word of value stored as it is
 *     (position p's mark at word 4p, its tag at 4p + 1, its pointer at
 *     buf[2p + 1]: qf__ring_slot_at(), shift QF__RING_PTR_SHIFT), where it
 *     kept three arrays (marks[pos(i)] and tombs[pos(i)] in notes 4 and 7
 *     are now words of the cells). The storage is the same 16 bytes a
 *     slot (8-byte pointers: a static assertion says so). With the
 *     arrays, a put wrote two lines (the slot's and the mark's) that the
 *     consumer had read, and a take read both back, two transfers between
 *     cores per element; in a cell they are one. Spread (note 8) still
 *     keeps consecutive indices on different lines (a line holds four
 *     cells, 16 indices apart). Measured against the tree before, release
 *     builds, turn about (`qflow-bench --quick --reps 5`, medians, M
 *     items/s; README, Measured, "A pointer's cell"): queue.tput p1c1
 *     7.1-7.5 -> 12.7-16.8 and spsc 10.3-10.9 -> 14.8-18.5 in six pairs
 *     of runs, p2c2 8.0-8.1 -> 12.1-13.1 (Go's channel 8.1-8.6), p4c4
 *     5.4-6.6 -> 10.0-11.3 (Go 8.1-8.7), p8c8 4.0-5.1 -> 6.3-8.3 (Go
 *     8.2-8.7) in three; thread ping-pong p50 982-1192 -> 631-812 ns;
 *     pointer batches of 32 lost about a tenth (57.3-65.8 -> 43.1-63.0)
 *     in those six pairs and gained in three others (20.1-20.5 ->
 *     24.8-46.3).
 */
#ifndef QF_RING_IMPL_H
#define QF_RING_IMPL_H

#include <ck_ring.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "qf_fence-impl.h"
#include "qf_futex.h"
#include "qf_lock-impl.h"
#include "qf_prefetch-impl.h"

typedef struct qf__ring {
    ck_ring_t ring; /* c_head | p_tail, p_head | size, mask: own lines */
    ck_ring_buffer_t *buf;
    unsigned mask;
    unsigned spread;                      /* index bits swapped (note 8); 0: none */
    unsigned spread_low;                  /* (1 << spread) - 1 */
    unsigned cap;                         /* most slots in use at once (<= mask) */
    bool sym;                             /* full fences on both sides (qf__ring_set_symmetric()) */
    _Alignas(64) unsigned prod_cached_c;  /* producers' copy of c_head */
    _Alignas(64) unsigned cons_cached_p;  /* consumers' copy of p_tail */
    _Atomic uint32_t *marks;              /* turns: i + 1 once index i is published (note 4) */
    _Atomic uint32_t *tombs;              /* slots abandoned by their producer (note 7) */
    unsigned shift;                       /* of marks and tombs: 1 << shift words apart (note 9) */
    unsigned cell_words;                  /* a cell's value words (note 9); 0: pointer slots */
    _Alignas(64) _Atomic uint32_t tomb_n; /* tombstones published or about to be, not taken */
    /* Where the published run was last seen to end (note 4): on its own
     * line, since whoever counts writes it and producers own p_head's. */
    _Alignas(64) unsigned run_hint;
} qf__ring;

#ifdef QF_RACE_WIDENING
#define QF_WIDEN() sched_yield()
#else
#define QF_WIDEN() ((void)0)
#endif

#define QF__LD(p, mo) __atomic_load_n((p), __ATOMIC_##mo)
#define QF__ST(p, v, mo) __atomic_store_n((p), (v), __ATOMIC_##mo)

/* Where index i lives among the positions (cells, slots) (note 8): the
 * low `spread` bits of i & mask trade places with the `spread` above
 * them. Its own inverse; identity when spread is 0. qf__ring_pos_of()
 * takes the ring's fields as arguments, for a caller that loads them once
 * for many indices. */
static inline unsigned qf__ring_pos_of(unsigned i, unsigned mask, unsigned spread, unsigned low)
{
    unsigned x = i & mask;
    unsigned mix = (x ^ (x >> spread)) & low;
    return x ^ mix ^ (mix << spread);
}

static inline unsigned qf__ring_pos(const qf__ring *r, unsigned i)
{
    return qf__ring_pos_of(i, r->mask, r->spread, r->spread_low);
}

/* Index i + 1 lies 2^spread positions after index i until the low
 * `spread` bits of i wrap (note 8), and with no spread until the ring
 * wraps: a run of indices from i (at most `left` of them) whose positions
 * are i's and then a step apart. Returns the run's length, *ret_pos i's
 * position. The ring's fields come as arguments, loaded once by a caller
 * that walks many indices: worked out per index, the position cost a bulk
 * put or take 10 instructions a value (callgrind). */
static inline __attribute__((always_inline)) unsigned
qf__ring_stretch(unsigned i, unsigned left, unsigned mask, unsigned spread, unsigned low,
                 size_t *ret_pos)
{
    unsigned field = spread ? low : mask, run = field - (i & field) + 1;
    *ret_pos = qf__ring_pos_of(i, mask, spread, low);
    return run < left ? run : left;
}

/* A queue's ring of pointers (marks, no value cells) keeps a position's
 * mark, tag and pointer in a cell of 16 bytes, 4 words (note 10): its
 * shift. The layout takes 8-byte pointers. */
#define QF__RING_PTR_SHIFT 2u
_Static_assert(sizeof(ck_ring_buffer_t) == 8, "a pointer's cell (note 10) holds an 8-byte slot");

/* The pointer slot of position pos (not index: qf__ring_pos() first) in
 * a ring of pointers whose shift is `shift`: QF__RING_PTR_SHIFT (cells,
 * note 10) for a queue's ring, 0 (one array) for a run queue's. */
static inline ck_ring_buffer_t *qf__ring_slot_at(const qf__ring *r, unsigned pos, unsigned shift)
{
    return shift ? &r->buf[2 * (size_t)pos + 1] : &r->buf[pos];
}

static inline ck_ring_buffer_t *qf__ring_slot(const qf__ring *r, unsigned pos)
{
    return qf__ring_slot_at(r, pos, r->shift);
}

/* Index i's mark and tombstone tag (note 4, 7, 9, 10). The _at forms take
 * the ring's shift as an argument, so that a path split on
 * r->cell_words can give the pointer ring's as a constant
 * (QF__RING_PTR_SHIFT). */
static inline _Atomic uint32_t *qf__ring_mark_at(const qf__ring *r, unsigned i, unsigned shift)
{
    return r->marks + ((size_t)qf__ring_pos(r, i) << shift);
}

static inline _Atomic uint32_t *qf__ring_mark(const qf__ring *r, unsigned i)
{
    return qf__ring_mark_at(r, i, r->shift);
}

static inline _Atomic uint32_t *qf__ring_tomb(const qf__ring *r, unsigned i)
{
    return r->tombs + ((size_t)qf__ring_pos(r, i) << r->shift);
}

/* Index i's value words in a ring of cells (note 9). */
static inline uint64_t *qf__ring_cell_at(const qf__ring *r, unsigned i, unsigned shift)
{
    return (uint64_t *)(void *)qf__ring_mark_at(r, i, shift) + 1;
}

static inline uint64_t *qf__ring_cell(const qf__ring *r, unsigned i)
{
    return qf__ring_cell_at(r, i, r->shift);
}

/* Bytes a ring of `slots` needs besides the ck_ring struct: the value
 * slots and, for a queue's ring, the marks and tombstone tags, 16 bytes a
 * position (qf__ring_init(), note 10). */
static inline size_t qf__ring_storage_bytes(unsigned slots)
{
    return (size_t)slots << (QF__RING_PTR_SHIFT + 2);
}

/* Index i's mark and tag start at i: never i + 1 (note 4). */
static inline void qf__ring_init_turns(qf__ring *r, unsigned slots)
{
    for (unsigned i = 0; i < slots; i++) {
        atomic_init(qf__ring_mark(r, i), i);
        atomic_init(qf__ring_tomb(r, i), i);
    }
}

/* `buf`: qf__ring_storage_bytes(slots) bytes for a queue's ring, which any
 * number of producers may use and which may hold tombstones (laid out as
 * cells of 16 bytes, note 10; best 64-byte aligned, at least 16), or just
 * the value slots for a single-producer ring of values that are never
 * abandoned (multi_producer false: the runtime's run queues). */
static inline void qf__ring_init(qf__ring *r, ck_ring_buffer_t *buf, unsigned slots, unsigned cap,
                                 bool multi_producer)
{
    ck_ring_init(&r->ring, slots);
    r->buf = buf;
    r->mask = slots - 1;
    r->spread = 0;
    while (multi_producer && r->spread < 4 && (4u << (2 * r->spread)) <= slots)
        r->spread++;
    r->spread_low = (1u << r->spread) - 1u;
    r->cap = cap;
    qf__fence_init();
    r->sym = false;
    r->prod_cached_c = 0;
    r->cons_cached_p = 0;
    r->run_hint = 0;
    r->marks = NULL;
    r->tombs = NULL;
    r->shift = 0;
    r->cell_words = 0;
    atomic_init(&r->tomb_n, 0);
    if (multi_producer) {
        /* Cells of 16 bytes (note 10): the mark, the tag, the pointer. */
        r->marks = (_Atomic uint32_t *)(void *)buf;
        r->tombs = r->marks + 1;
        r->shift = QF__RING_PTR_SHIFT;
        qf__ring_init_turns(r, slots);
    }
}

/* Bytes of a cell that holds a mark, a tag and `value_bytes` (note 9): a
 * power of two, so that no cell of a line or less straddles two lines and
 * a cell's address is a shift away from its position. 0: more than
 * QF__RING_CELL_MAX bytes, which go by pointer. */
#define QF__RING_CELL_MAX 256
static inline size_t qf__ring_cell_bytes(size_t value_bytes)
{
    size_t b = 8 + ((value_bytes + 7) & ~(size_t)7);
    if (b > QF__RING_CELL_MAX)
        return 0;
    size_t c = 16;
    while (c < b)
        c <<= 1;
    return c;
}

/* A queue's ring of cells (note 9): `cells` is slots * cell_bytes bytes,
 * 128-byte aligned (qf__ring_cell_bytes(value_bytes) each), and holds the
 * marks, tags and values; there are no pointer slots. */
static inline void qf__ring_init_cells(qf__ring *r, void *cells, unsigned slots, unsigned cap,
                                       size_t value_bytes)
{
    qf__ring_init(r, (ck_ring_buffer_t *)cells, slots, cap, false);
    r->spread = 0;
    /* Cells of a line or more share no line: laid out in order (note 8). */
    bool spread = qf__ring_cell_bytes(value_bytes) < 64;
    while (spread && r->spread < 4 && (4u << (2 * r->spread)) <= slots)
        r->spread++;
    r->spread_low = (1u << r->spread) - 1u;
    r->marks = cells;
    r->tombs = r->marks + 1;
    size_t words = qf__ring_cell_bytes(value_bytes) / sizeof(uint32_t);
    while ((1u << r->shift) < words)
        r->shift++;
    r->cell_words = (unsigned)((value_bytes + 7) / 8);
    qf__ring_init_turns(r, slots);
}

/* Fences of this ring. A ring whose every operation moves many values (a
 * batching queue: rows of records in, batches out) and whose sides park
 * often is better off with a full fence on each side, once per call, than
 * with a compiler barrier per call and a membarrier(2) per park. Set before
 * the ring is used, never changed: both sides then pair full fences. */
static inline void qf__ring_set_symmetric(qf__ring *r)
{
    r->sym = true;
}

/* Lay the ring's cells in index order, index i at position i (note 8's
 * spread off): for a ring whose producers put runs and whose consumers
 * take batches. Only before anyone uses the ring: the turns are laid
 * again. Never changed back. */
static inline void qf__ring_lay_in_order(qf__ring *r)
{
    r->spread = 0;
    r->spread_low = 0;
    if (r->marks)
        qf__ring_init_turns(r, r->mask + 1);
}

static inline void qf__ring_fence_light(const qf__ring *r)
{
    if (r->sym)
        qf__fence_full();
    else
        qf__fence_light();
}

static inline void qf__ring_fence_heavy(const qf__ring *r)
{
    if (r->sym)
        qf__fence_full();
    else
        qf__fence_heavy();
}

/* Published and not yet consumed: a ring without marks (the run queues). */
static inline unsigned qf__ring_size(qf__ring *r)
{
    unsigned c = QF__LD(&r->ring.c_head, ACQUIRE);
    unsigned p = QF__LD(&r->ring.p_tail, ACQUIRE);
    return p - c;
}

/* Reserved (published or not) and not yet consumed; seq_cst so it can be
 * the re-check of a waiter. */
static inline unsigned qf__ring_reserved(qf__ring *r)
{
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    unsigned p = QF__LD(&r->ring.p_head, SEQ_CST);
    return p - c;
}

/* Room for how many more, by the real indices (seq_cst: a waiter's
 * re-check). */
static inline unsigned qf__ring_room(qf__ring *r)
{
    unsigned p = QF__LD(&r->ring.p_head, SEQ_CST);
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    unsigned used = p - c;
    return used >= r->cap ? 0 : r->cap - used;
}

/* Reserve up to n slots (exactly n or none when all_or_nothing) while at
 * most `cap` (<= r->cap) are in use; returns how many, 0 when full.
 * *ret_ticket is the first index. */
static inline size_t qf__ring_reserve(qf__ring *r, size_t n, bool single_producer,
                                      bool all_or_nothing, unsigned cap, unsigned *ret_ticket)
{
    unsigned p = QF__LD(&r->ring.p_head, RELAXED);
    for (;;) {
        unsigned c = QF__LD(&r->prod_cached_c, ACQUIRE);
        unsigned used = p - c;
        if (used >= cap || (all_or_nothing && cap - used < n)) {
            c = QF__LD(&r->ring.c_head, ACQUIRE);
            QF__ST(&r->prod_cached_c, c, RELEASE);
            used = p - c;
            if (used > r->cap) { /* stale p (other producers moved on) */
                p = QF__LD(&r->ring.p_head, RELAXED);
                continue;
            }
            if (used >= cap || (all_or_nothing && cap - used < n))
                return 0;
        }
        unsigned room = cap - used;
        unsigned k = room < n ? room : (unsigned)n;
        if (single_producer) {
            /* Fenced: the closed check that follows must not be satisfied
             * before consumers can see the reservation. */
            QF__ST(&r->ring.p_head, p + k, RELAXED);
            qf__ring_fence_light(r);
            *ret_ticket = p;
            return k;
        }
        if (__atomic_compare_exchange_n(&r->ring.p_head, &p, p + k, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
            *ret_ticket = p;
            return k;
        }
    }
}

/* After a reservation that ends before index idx: ask for the line that
 * the next put writes (its cell, note 10; before the cells, its slot's and
 * its mark's) in the owned state (coord/qf_prefetch-impl.h). Consumers
 * read that line last, so without it each put's store waits for their
 * copies to be invalidated and the fence or locked instruction after it
 * waits for the store. In a spread ring (note 8) the next index's cell
 * lies on another line than this one's: ask for that of idx + 1 (idx's
 * own was asked for too late
 * to gain: 12.7-13.2 -> 14.5-15.3 M items/s at p4c4, the same elsewhere).
 * Those lines also hold indices 16 apart, which a consumer of a nearly
 * empty queue may be reading: the prefetch then takes a line it will ask
 * for again, which is what the store would have done anyway. A batching
 * ring's cells, in order (note 8), get idx + 1's cell too: given the rule
 * below, its buf[idx + 7] was a word of the cell array near cell idx / 2, a
 * line a consumer may have been reading (and a bulk put's next run is
 * asked for after it, qf__ring_prefetch_next_run()). Unspread (a
 * ring without marks), the line holding idx + 7 (before the cells, also
 * the marks' at idx + 15): this line's rest, else the next line;
 * measured before the spread, in builds
 * of three code layouts (README, Measured): the pointer queue's queue.tput
 * 8.0-9.5 -> 11.3-11.8 M items/s at p1c1, 6.3-7.4 -> 8.9-10.0 M at p4c4,
 * 11 -> 29-37 M for a single producer and consumer. Two lines further
 * ahead gained nothing. */
static inline void qf__ring_prefetch_ahead(qf__ring *r, unsigned idx)
{
    /* In a small ring the next lines are the ones its consumers read now. */
    if (r->mask < 63)
        return;
    if (r->cell_words) {
        /* The mark and the first value words share the cell's first line. */
        qf__prefetch_for_write(qf__ring_mark(r, idx + 1));
        if (r->shift > 4)
            qf__prefetch_for_write((const char *)qf__ring_mark(r, idx + 1) + 64);
        return;
    }
    if (r->marks) { /* cells of 16 bytes, spread or (a batching ring) in order */
        qf__prefetch_for_write(qf__ring_slot_at(r, qf__ring_pos(r, idx + 1), QF__RING_PTR_SHIFT));
        return;
    }
    qf__prefetch_for_write(&r->buf[(idx + 7) & r->mask]);
}

/* After a bulk put of k values into a ring laid out in order (note 8: a
 * batching queue's, whose producers put runs of rows): ask for the lines
 * of the next k cells in the owned state, for this producer's next put.
 * The consumer read those lines a lap ago, so without this each of the
 * next put's stores waited for its line to come from the consumer's core,
 * 64 lines for a run of 256 rows, more than the store buffer keeps in
 * flight, and the fence at that put's end waited for all of them
 * (qflow-lines FILE: the put was a quarter of the reader thread's
 * samples). Asked for here, the transfers overlap the producer's next
 * pull (the reader's newline search and rows) instead of its stores.
 * Earlier tries asked for the lines of the run about to be put, before
 * its pull or its search, and moved the samples but not the wall time
 * (README, Measured); this asks a whole pull earlier (README, Measured,
 * "The next run's ring lines, asked for after each put": qflow-lines FILE
 * 1-8% faster in most sets, 5% slower in one). The cells start at
 * p_head, not after our run: a run reserved after ours is another
 * producer's, which is writing it now (the first line may still hold the
 * end of such a run). Only cells whose previous lap the consumers have
 * taken, as far as the producers' cached c_head knows (a stale one knows
 * fewer), and not the line of the next cell a consumer reads, so no line a
 * consumer has yet to read is taken from it (a consumer that claimed a
 * cell may still reset its tombstone tag, note 7: a rare line taken back);
 * fewer than 8 cells are not worth a look. Only pointer cells reach here
 * (qf__ring_put_run()). */
static inline void qf__ring_prefetch_next_run(qf__ring *r, unsigned k)
{
    unsigned idx = QF__LD(&r->ring.p_head, RELAXED);
    unsigned c = QF__LD(&r->prod_cached_c, RELAXED);
    int room = (int)(c + r->mask + 1 - idx);
    unsigned n = room <= 0 ? 0 : (unsigned)room < k ? (unsigned)room : k;
    if (n < 8)
        return;
    /* Whole lines of four cells; when the consumers bound the window, not
     * the line holding the next cell they read. */
    unsigned pos = idx & r->mask, line0 = pos & ~3u;
    unsigned lines = n == (unsigned)room ? (pos + n - line0) / 4 : (pos + n - line0 + 3) / 4;
    unsigned to_end = (r->mask + 1 - line0) / 4;
    const _Atomic uint32_t *m = r->marks;
    qf__prefetch_lines_for_write(m + ((size_t)line0 << QF__RING_PTR_SHIFT),
                                 lines < to_end ? lines : to_end);
    if (lines > to_end)
        qf__prefetch_lines_for_write(m, lines - to_end);
}

/* A cell's value words from src, and back out to dst: relaxed atomic
 * accesses (a consumer whose claim fails may read words a later lap is
 * writing, note 9), two words a round. GCC keeps the one-word loop rolled,
 * and it cost 9 instructions a word, 84 for an (int64, float32 [16])
 * cell (callgrind). */
static inline void qf__ring_cell_store(uint64_t *cell, const char *src, unsigned words)
{
    unsigned w = 0;
    for (; w + 2 <= words; w += 2) {
        uint64_t x0, x1;
        memcpy(&x0, src + 8 * w, sizeof x0);
        memcpy(&x1, src + 8 * w + 8, sizeof x1);
        QF__ST(&cell[w], x0, RELAXED);
        QF__ST(&cell[w + 1], x1, RELAXED);
    }
    if (w < words) {
        uint64_t x;
        memcpy(&x, src + 8 * w, sizeof x);
        QF__ST(&cell[w], x, RELAXED);
    }
}

static inline void qf__ring_cell_load(const uint64_t *cell, char *dst, unsigned words)
{
    unsigned w = 0;
    for (; w + 2 <= words; w += 2) {
        uint64_t x0 = QF__LD(&cell[w], RELAXED), x1 = QF__LD(&cell[w + 1], RELAXED);
        memcpy(dst + 8 * w, &x0, sizeof x0);
        memcpy(dst + 8 * w + 8, &x1, sizeof x1);
    }
    if (w < words) {
        uint64_t x = QF__LD(&cell[w], RELAXED);
        memcpy(dst + 8 * w, &x, sizeof x);
    }
}

/* Index idx's value: the pointer v, or in a ring of cells the cell_words
 * words at v (note 9). */
static inline void qf__ring_write(qf__ring *r, unsigned idx, void *v)
{
    if (r->cell_words) {
        qf__ring_cell_store(qf__ring_cell(r, idx), v, r->cell_words);
        return;
    }
    QF__ST(&qf__ring_slot(r, qf__ring_pos(r, idx))->value, v, RELAXED);
}

/* Index idx's value into out: the pointer, or in a ring of cells its
 * words copied to the buffer *out points to (note 9). */
static inline __attribute__((always_inline)) void
qf__ring_read_at(const qf__ring *r, unsigned idx, void **out, unsigned cell_words, unsigned shift)
{
    if (cell_words) {
        qf__ring_cell_load(qf__ring_cell_at(r, idx, shift), *out, cell_words);
        return;
    }
    *out = QF__LD(&qf__ring_slot_at(r, qf__ring_pos(r, idx), shift)->value, RELAXED);
}

static inline bool qf__ring_is_published(qf__ring *r, unsigned i, memory_order mo)
{
    return atomic_load_explicit(qf__ring_mark(r, i), mo) == i + 1;
}

/* The end of the published run from `from` (at most `end`): seq_cst
 * loads, in the order of the indices. Four marks at a time: the four
 * loads are issued before any is compared, so a long run (a count after
 * a bulk put of hundreds) does not wait a load's latency per mark; the
 * first unpublished one is then found one by one. */
static inline __attribute__((always_inline)) unsigned
qf__ring_run_end_at(qf__ring *r, unsigned from, unsigned end, unsigned shift)
{
    while (end - from >= 4) {
        uint32_t m0 = atomic_load_explicit(qf__ring_mark_at(r, from, shift), memory_order_seq_cst);
        uint32_t m1 =
            atomic_load_explicit(qf__ring_mark_at(r, from + 1, shift), memory_order_seq_cst);
        uint32_t m2 =
            atomic_load_explicit(qf__ring_mark_at(r, from + 2, shift), memory_order_seq_cst);
        uint32_t m3 =
            atomic_load_explicit(qf__ring_mark_at(r, from + 3, shift), memory_order_seq_cst);
        if ((m0 != from + 1) | (m1 != from + 2) | (m2 != from + 3) | (m3 != from + 4))
            break;
        from += 4;
    }
    while (from != end &&
           atomic_load_explicit(qf__ring_mark_at(r, from, shift), memory_order_seq_cst) == from + 1)
        from++;
    return from;
}

static inline unsigned qf__ring_run_end(qf__ring *r, unsigned from, unsigned end)
{
    return qf__ring_run_end_at(r, from, end, r->shift);
}

/* The end of a publish of [start, start + k), its marks stored: the fence
 * that pairs with the other side's waiters (note 3; none when `fenced`,
 * the one mark's store being seq_cst itself), then the count to wake for:
 * k, and with other producers the published run after them (note 4). */
static inline unsigned qf__ring_publish_end(qf__ring *r, unsigned start, unsigned k,
                                            bool single_producer, bool fenced)
{
    if (single_producer) {
        qf__ring_fence_light(r);
        return k; /* in order: nothing waits behind it */
    }
    if (!fenced)
        qf__fence_full();
    QF_WIDEN();
    unsigned end = start + k;
    unsigned head = QF__LD(&r->ring.p_head, SEQ_CST);
    return k + (qf__ring_run_end(r, end, head) - end);
}

/* Publish [start, start + k) (note 4). Returns how many slots this call may
 * have made takeable, the count to wake for: its own, and with other
 * producers the published run after them. Never waits. */
static inline unsigned qf__ring_publish(qf__ring *r, unsigned start, unsigned k,
                                        bool single_producer)
{
    QF_WIDEN();
    if (!r->marks) {
        /* A ring of one producer without marks: p_tail. Release for the
         * slots; the fence orders it before the look at a wait bit. */
        QF__ST(&r->ring.p_tail, start + k, RELEASE);
        qf__ring_fence_light(r);
        return k;
    }
    if (k == 1 && !single_producer) {
        atomic_store_explicit(qf__ring_mark(r, start), start + 1, memory_order_seq_cst);
        return qf__ring_publish_end(r, start, 1, false, true);
    }
    for (unsigned i = 0; i < k; i++)
        atomic_store_explicit(qf__ring_mark(r, start + i), start + i + 1, memory_order_release);
    return qf__ring_publish_end(r, start, k, single_producer, false);
}

/* qf__ring_prefetch_ahead(), qf__ring_write() of each value and
 * qf__ring_publish() for [start, start + k), k >= 1 (a bulk put: a reader's
 * run of rows, a batch). In a pointer ring with marks each position is
 * worked out once, from the ring's fields loaded once, and its value and
 * mark are stored together: the mark's release store still follows its
 * own value's store, and the fence (or the light one) still follows the
 * last mark, so a consumer that sees a mark sees its value, and a waiter
 * pairs with the fence, as before (note 4). The separate loops worked out
 * every position twice and reloaded the ring's fields after each atomic
 * store: qflow-lines spent 48 instructions a line in this put (callgrind). */
static inline unsigned qf__ring_put_run(qf__ring *r, unsigned start, void *const *v, unsigned k,
                                        bool single_producer)
{
    qf__ring_prefetch_ahead(r, start + k);
    if (!r->marks || r->cell_words) {
        for (unsigned i = 0; i < k; i++)
            qf__ring_write(r, start + i, v[i]);
        return qf__ring_publish(r, start, k, single_producer);
    }
    QF_WIDEN();
    const unsigned mask = r->mask, spread = r->spread, low = r->spread_low;
    ck_ring_buffer_t *const buf = r->buf;
    _Atomic uint32_t *const marks = r->marks;
    /* Marks and slots a step apart in a stretch (a batch of 32: 20 -> 13
     * instructions a value) */
    const size_t ms = (size_t)1 << (spread + QF__RING_PTR_SHIFT), vs = (size_t)2 << spread;
    unsigned n = 0;
    while (n < k) {
        size_t pos;
        unsigned i = start + n, run = qf__ring_stretch(i, k - n, mask, spread, low, &pos);
        ck_ring_buffer_t *const s = &buf[2 * pos + 1]; /* qf__ring_slot_at() */
        _Atomic uint32_t *const m = marks + (pos << QF__RING_PTR_SHIFT);
        for (unsigned j = 0; j < run; j++) {
            QF__ST(&s[j * vs].value, v[n + j], RELAXED);
            atomic_store_explicit(m + j * ms, i + j + 1, memory_order_release);
        }
        n += run;
    }
    unsigned woke = qf__ring_publish_end(r, start, k, single_producer, false);
    if (!spread)
        qf__ring_prefetch_next_run(r, k);
    return woke;
}

/* qf__ring_prefetch_ahead(), qf__ring_write() and qf__ring_publish() for
 * one value of a multi-producer pointer ring (marks, spread indices, no
 * cells), index t reserved: the same stores and loads in the same order,
 * with each position worked out once (the three calls worked out four). */
static inline unsigned qf__ring_put_one_ptr(qf__ring *r, unsigned t, void *v)
{
    if (r->mask >= 63) /* see qf__ring_prefetch_ahead() */
        qf__prefetch_for_write(qf__ring_slot_at(r, qf__ring_pos(r, t + 2), QF__RING_PTR_SHIFT));
    unsigned pos = qf__ring_pos(r, t);
    QF__ST(&qf__ring_slot_at(r, pos, QF__RING_PTR_SHIFT)->value, v, RELAXED);
    QF_WIDEN();
    atomic_store_explicit(r->marks + ((size_t)pos << QF__RING_PTR_SHIFT), t + 1,
                          memory_order_seq_cst);
    QF_WIDEN();
    unsigned end = t + 1;
    unsigned head = QF__LD(&r->ring.p_head, SEQ_CST);
    return head == end ? 1 : 1 + (qf__ring_run_end(r, end, head) - end);
}

/* qf__ring_put_one_ptr() for a ring of cells (note 9): the stores and
 * loads of qf__ring_prefetch_ahead(t + 1), qf__ring_write() and
 * qf__ring_publish() in their order (the lines of index t + 2's cell asked
 * for, the value's words, the mark, p_head), with index t's cell found
 * once; the calls found it twice and t + 2's once, reloading the ring's
 * fields after each atomic (the ring's part of put_one_now(): 182 -> 113 instructions for
 * an (int64, float32 [16]) element, callgrind; with the take's cell found
 * once too, 1,745 -> 1,648 instructions for a put and a take). */
static inline unsigned qf__ring_put_one_cell(qf__ring *r, unsigned t, const void *v)
{
    unsigned shift = r->shift;
    if (r->mask >= 63) { /* see qf__ring_prefetch_ahead() */
        const char *next = (const char *)qf__ring_mark_at(r, t + 2, shift);
        qf__prefetch_for_write(next);
        if (shift > 4)
            qf__prefetch_for_write(next + 64);
    }
    _Atomic uint32_t *mark = qf__ring_mark_at(r, t, shift);
    qf__ring_cell_store((uint64_t *)(void *)mark + 1, v, r->cell_words);
    QF_WIDEN();
    atomic_store_explicit(mark, t + 1, memory_order_seq_cst);
    QF_WIDEN();
    unsigned end = t + 1;
    unsigned head = QF__LD(&r->ring.p_head, SEQ_CST);
    return head == end ? 1 : 1 + (qf__ring_run_end_at(r, end, head, shift) - end);
}

/* Slot index idx is abandoned: its producer reserved it and then found
 * the queue closed (note 7). Before the slot is published; the publish
 * orders these stores before a consumer's look. */
static inline void qf__ring_write_tombstone(qf__ring *r, unsigned idx)
{
    atomic_fetch_add_explicit(&r->tomb_n, 1, memory_order_relaxed);
    if (!r->cell_words)
        QF__ST(&qf__ring_slot_at(r, qf__ring_pos(r, idx), QF__RING_PTR_SHIFT)->value, NULL,
               RELAXED);
    atomic_store_explicit(qf__ring_tomb(r, idx), idx + 1, memory_order_relaxed);
}

/* Of the k values just read from [c, c + k) into out, drop the tombstones
 * (before the claim: once c_head moves a later lap may tag the slots);
 * returns how many values are left. Only while some tombstone is out. */
static inline unsigned qf__ring_drop_tombs(qf__ring *r, void **out, unsigned c, unsigned k)
{
    if (!r->tombs || atomic_load_explicit(&r->tomb_n, memory_order_relaxed) == 0)
        return k;
    /* Swapped, not copied over: in a ring of cells out[] holds the
     * caller's buffers, each of which must stay in it once. */
    unsigned j = 0;
    for (unsigned i = 0; i < k; i++)
        if (atomic_load_explicit(qf__ring_tomb(r, c + i), memory_order_relaxed) != c + i + 1) {
            void *v = out[j];
            out[j++] = out[i];
            out[i] = v;
        }
    return j;
}

/* After claiming [c, c + k), of which k - real were tombstones: untag them
 * (a tag a later lap wrote already stays: the CAS fails) and count them
 * gone. */
static inline void qf__ring_untag(qf__ring *r, unsigned c, unsigned k, unsigned real)
{
    if (real == k)
        return;
    for (unsigned i = 0; i < k; i++) {
        uint32_t t = c + i + 1;
        atomic_compare_exchange_strong_explicit(qf__ring_tomb(r, c + i), &t, c + i,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&r->tomb_n, k - real, memory_order_relaxed);
}

/* Claim [c, c + k) whose values are in out (read before the claim: after
 * it a producer of the next lap may write the slots). False: another
 * consumer moved c_head (*c is then its new value). */
static inline bool qf__ring_claim(qf__ring *r, unsigned *c, unsigned k, bool single_consumer)
{
    if (single_consumer) {
        QF__ST(&r->ring.c_head, *c + k, RELEASE);
        qf__ring_fence_light(r); /* before the look at producers' wait bit */
        return true;
    }
    return __atomic_compare_exchange_n(&r->ring.c_head, c, *c + k, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED);
}

/* For a pointer ring with marks: the published run from `from` (at most
 * lim indices) and its values into out[], as qf__ring_run_end_at() and then
 * qf__ring_read_at() of each would, with each position worked out once
 * from the ring's fields loaded once. Marks are still loaded four at a
 * time before any is compared (a spread ring's marks are a line each);
 * each value is loaded after its mark's seq_cst load (program order), so a
 * published mark's value is the one its producer stored before it. The
 * two passes worked out every position twice: qflow-lines' batch take
 * spent 50 instructions a line (callgrind). With out NULL (a constant:
 * inlined) it only counts: the first pass of an all-or-nothing take,
 * which must leave out[] as it was when it fails. */
static inline __attribute__((always_inline)) unsigned
qf__ring_run_read_ptrs(qf__ring *r, unsigned from, unsigned lim, void **out)
{
    const unsigned mask = r->mask, spread = r->spread, low = r->spread_low;
    const ck_ring_buffer_t *const buf = r->buf;
    _Atomic uint32_t *const marks = r->marks;
    /* marks and slots a step apart in a stretch (qf__ring_stretch()) */
    const size_t ms = (size_t)1 << (spread + QF__RING_PTR_SHIFT), vs = (size_t)2 << spread;
    unsigned n = 0;
    while (n < lim) {
        size_t p;
        unsigned i = from + n, run = qf__ring_stretch(i, lim - n, mask, spread, low, &p);
        _Atomic uint32_t *const m = marks + (p << QF__RING_PTR_SHIFT);
        const ck_ring_buffer_t *const v = &buf[2 * p + 1]; /* qf__ring_slot_at() */
        unsigned j = 0;
        for (; run - j >= 4; j += 4) {
            uint32_t m0 = atomic_load_explicit(m + j * ms, memory_order_seq_cst);
            uint32_t m1 = atomic_load_explicit(m + (j + 1) * ms, memory_order_seq_cst);
            uint32_t m2 = atomic_load_explicit(m + (j + 2) * ms, memory_order_seq_cst);
            uint32_t m3 = atomic_load_explicit(m + (j + 3) * ms, memory_order_seq_cst);
            if ((m0 != i + j + 1) | (m1 != i + j + 2) | (m2 != i + j + 3) | (m3 != i + j + 4))
                break; /* the first unpublished one is found below */
            if (out) {
                out[n + j] = QF__LD(&v[j * vs].value, RELAXED);
                out[n + j + 1] = QF__LD(&v[(j + 1) * vs].value, RELAXED);
                out[n + j + 2] = QF__LD(&v[(j + 2) * vs].value, RELAXED);
                out[n + j + 3] = QF__LD(&v[(j + 3) * vs].value, RELAXED);
            }
        }
        for (; j < run; j++) {
            if (atomic_load_explicit(m + j * ms, memory_order_seq_cst) != i + j + 1)
                return n + j;
            if (out)
                out[n + j] = QF__LD(&v[j * vs].value, RELAXED);
        }
        n += run;
    }
    return n;
}

/* The values of [from, from + k) into out[], in a pointer ring with marks,
 * every mark of them seen published by qf__ring_run_read_ptrs(r, from, lim,
 * NULL) before (so each value load follows its mark's seq_cst load in
 * program order, as in qf__ring_read_at()), with the ring's fields loaded
 * once and a position worked out once per stretch (qf__ring_stretch()). Per value,
 * qf__ring_read_at() reloaded the fields and worked the position out
 * again, as the count before it did: a dequeue_many of 32 pointers spent
 * 37 instructions a value in the take (callgrind). */
static inline __attribute__((always_inline)) void
qf__ring_read_ptrs(const qf__ring *r, unsigned from, unsigned k, void **out)
{
    const unsigned mask = r->mask, spread = r->spread, low = r->spread_low;
    const ck_ring_buffer_t *const buf = r->buf;
    const size_t vs = (size_t)2 << spread;
    unsigned n = 0;
    while (n < k) {
        size_t p;
        unsigned run = qf__ring_stretch(from + n, k - n, mask, spread, low, &p);
        const ck_ring_buffer_t *const v = &buf[2 * p + 1];
        for (unsigned j = 0; j < run; j++)
            out[n + j] = QF__LD(&v[j * vs].value, RELAXED);
        n += run;
    }
}

/* A take of at least min (> 1) from c cannot succeed: index c + min - 1,
 * the last it needs, is not published (one seq_cst load, as the scan's).
 * Why look there first: a consumer waiting for a batch to fill (a
 * dequeue_many of 1024 in a spin) scanned every mark from c_head on each
 * look, hundreds of lines the producer had just written, ending on the
 * line it was writing: in qflow-lines the batch's consumer spent most of
 * its time there, and the reader's stores waited for those lines to come
 * back. */
static inline __attribute__((always_inline)) bool
qf__ring_min_unpublished(qf__ring *r, unsigned c, size_t min, unsigned shift)
{
    if (min <= 1)
        return false;
    unsigned last = c + (unsigned)min - 1;
    return atomic_load_explicit(qf__ring_mark_at(r, last, shift), memory_order_seq_cst) != last + 1;
}

/* qf__ring_take_turns() for a ring of r->cell_words and r->shift, given
 * as arguments: constants in the pointer ring's copy (0 and
 * QF__RING_PTR_SHIFT). */
static inline __attribute__((always_inline)) size_t
qf__ring_take_turns_at(qf__ring *r, void **out, unsigned c, size_t min, size_t max,
                       bool single_consumer, size_t *ret_slots, unsigned cell_words, unsigned shift)
{
    size_t lim = max < (size_t)r->mask + 1 ? max : (size_t)r->mask + 1;
    /* A pointer ring reads values as it counts marks, into out[]: only
     * when min is 1, where a take that finds nothing has written nothing;
     * an all-or-nothing take that fails leaves the caller's array as it
     * was (qf_queue.h: "untouched on failure"). */
    bool ptrs = !cell_words && shift == QF__RING_PTR_SHIFT, fused = ptrs && min == 1;
    for (;;) {
        /* The marks' loads issued four at a time: in a spread ring (note
         * 8) each is a line of its own, and one by one a batch waited a
         * miss per mark. */
        unsigned k = fused ? qf__ring_run_read_ptrs(r, c, (unsigned)lim, out)
                     : qf__ring_min_unpublished(r, c, min, shift) ? 0
                     : ptrs ? qf__ring_run_read_ptrs(r, c, (unsigned)lim, NULL)
                            : qf__ring_run_end_at(r, c, c + (unsigned)lim, shift) - c;
        if (k < min) {
            unsigned now = single_consumer ? c : QF__LD(&r->ring.c_head, RELAXED);
            if (now == c)
                return 0;
            c = now; /* stale: other consumers took these */
            continue;
        }
        if (ptrs && !fused)
            qf__ring_read_ptrs(r, c, k, out);
        else if (!fused)
            for (unsigned i = 0; i < k; i++)
                qf__ring_read_at(r, c + i, &out[i], cell_words, shift);
        unsigned real = qf__ring_drop_tombs(r, out, c, k);
        if (!qf__ring_claim(r, &c, k, single_consumer))
            continue;
        qf__ring_untag(r, c, k, real);
        if (ret_slots)
            *ret_slots = k;
        return real;
    }
}

/* A take of one found index c unpublished: true when another consumer
 * took it (*c is then c_head: look again), false when nothing is there. */
static inline bool qf__ring_one_stale(qf__ring *r, unsigned *c, bool single_consumer)
{
    unsigned now = single_consumer ? *c : QF__LD(&r->ring.c_head, RELAXED);
    if (now == *c)
        return false;
    *c = now;
    return true;
}

/* The end of a take of one, index c's value and tag read: the claim. -1:
 * another consumer claimed first (*c is c_head: look again); 0: c was a
 * tombstone (claimed, untagged); 1: a value. */
static inline int qf__ring_one_claim(qf__ring *r, unsigned *c, bool tomb, bool single_consumer,
                                     size_t *ret_slots)
{
    if (!qf__ring_claim(r, c, 1, single_consumer))
        return -1;
    if (ret_slots)
        *ret_slots = 1;
    if (tomb) {
        qf__ring_untag(r, *c, 1, 0);
        return 0;
    }
    return 1;
}

/* qf__ring_take_turns_at() for one value of a pointer ring, the dequeue
 * of one element: the same loads in the same order (the mark, seq_cst;
 * the value and the tag, relaxed; then the claim), with the position
 * worked out once for all three. The general loop spent 117 instructions
 * on this (callgrind, a thread putting and taking one pointer at a time). */
static inline __attribute__((always_inline)) size_t
qf__ring_take_one_ptr(qf__ring *r, void **out, unsigned c, bool single_consumer, size_t *ret_slots)
{
    for (;;) {
        unsigned pos = qf__ring_pos(r, c);
        size_t turn = (size_t)pos << QF__RING_PTR_SHIFT;
        if (atomic_load_explicit(r->marks + turn, memory_order_seq_cst) != c + 1) {
            if (qf__ring_one_stale(r, &c, single_consumer))
                continue;
            return 0;
        }
        void *v = QF__LD(&qf__ring_slot_at(r, pos, QF__RING_PTR_SHIFT)->value, RELAXED);
        bool tomb = atomic_load_explicit(&r->tomb_n, memory_order_relaxed) != 0 &&
                    atomic_load_explicit(r->tombs + turn, memory_order_relaxed) == c + 1;
        int got = qf__ring_one_claim(r, &c, tomb, single_consumer, ret_slots);
        if (got < 0)
            continue;
        if (got)
            *out = v;
        return (size_t)got;
    }
}

/* qf__ring_take_one_ptr() for a ring of cells: the mark, the cell's words
 * into the caller's buffer (*out), the tag, then the claim; on a tombstone
 * or a lost claim the buffer stays the caller's, its words meaningless
 * (as in the general loop). The general loop spent
 * 185 instructions on this (callgrind, one thread putting and taking a
 * packed (int64, float32 [16]) element at a time). Not inlined: the
 * pointer rings that share qf__ring_take() (the scheduler's) never get
 * here, which the compiler cannot see, and it would warn about their
 * *out, which only a ring of cells reads. */
static __attribute__((noinline, unused)) size_t
qf__ring_take_one_cell(qf__ring *r, void **out, unsigned c, bool single_consumer, size_t *ret_slots)
{
    unsigned shift = r->shift, words = r->cell_words;
    for (;;) {
        /* The cell's mark, tag and words from one position (note 9). */
        _Atomic uint32_t *mark = qf__ring_mark_at(r, c, shift);
        if (atomic_load_explicit(mark, memory_order_seq_cst) != c + 1) {
            if (qf__ring_one_stale(r, &c, single_consumer))
                continue;
            return 0;
        }
        qf__ring_cell_load((const uint64_t *)(const void *)mark + 1, *out, words);
        bool tomb = atomic_load_explicit(&r->tomb_n, memory_order_relaxed) != 0 &&
                    atomic_load_explicit(mark + 1, memory_order_relaxed) == c + 1;
        int got = qf__ring_one_claim(r, &c, tomb, single_consumer, ret_slots);
        if (got < 0)
            continue;
        return (size_t)got;
    }
}

/* qf__ring_take() on a ring with marks (note 4), from c (c_head as read). */
static inline size_t qf__ring_take_turns(qf__ring *r, void **out, unsigned c, size_t min,
                                         size_t max, bool single_consumer, size_t *ret_slots)
{
    if (max == 1 && !r->cell_words)
        return qf__ring_take_one_ptr(r, out, c, single_consumer, ret_slots);
    if (max == 1)
        return qf__ring_take_one_cell(r, out, c, single_consumer, ret_slots);
    if (r->cell_words)
        return qf__ring_take_turns_at(r, out, c, min, max, single_consumer, ret_slots,
                                      r->cell_words, r->shift);
    return qf__ring_take_turns_at(r, out, c, min, max, single_consumer, ret_slots, 0,
                                  QF__RING_PTR_SHIFT);
}

/* Take between min (>= 1) and max published slots, or none: one claim.
 * Returns how many values (the slots less the tombstones among them, note
 * 7); *ret_slots (when not NULL) gets how many slots were claimed, which
 * is what the room grew by. */
static inline size_t qf__ring_take(qf__ring *r, void **out, size_t min, size_t max,
                                   bool single_consumer, size_t *ret_slots)
{
    if (ret_slots)
        *ret_slots = 0;
    unsigned c = QF__LD(&r->ring.c_head, RELAXED);
    if (r->marks)
        return qf__ring_take_turns(r, out, c, min, max, single_consumer, ret_slots);
    for (;;) {
        unsigned p = QF__LD(&r->cons_cached_p, ACQUIRE);
        unsigned avail = p - c;
        if (avail < min || avail > r->mask + 1u) {
            p = QF__LD(&r->ring.p_tail, ACQUIRE);
            QF__ST(&r->cons_cached_p, p, RELEASE);
            avail = p - c;
            if (avail > r->mask + 1u) { /* stale c */
                c = QF__LD(&r->ring.c_head, RELAXED);
                continue;
            }
            /* A stale c only overstates what is there. */
            if (avail < min)
                return 0;
        }
        unsigned k = avail < max ? avail : (unsigned)max;
        for (unsigned i = 0; i < k; i++)
            out[i] = QF__LD(&qf__ring_slot_at(r, qf__ring_pos(r, c + i), 0)->value, RELAXED);
        unsigned real = qf__ring_drop_tombs(r, out, c, k);
        if (single_consumer) {
            QF__ST(&r->ring.c_head, c + k, RELEASE);
            qf__ring_fence_light(r); /* before the look at producers' wait bit */
        } else if (!__atomic_compare_exchange_n(&r->ring.c_head, &c, c + k, false, __ATOMIC_SEQ_CST,
                                                __ATOMIC_RELAXED)) {
            continue;
        }
        qf__ring_untag(r, c, k, real);
        if (ret_slots)
            *ret_slots = k;
        return real;
    }
}

/* The end of the published run from c_head, and c_head, at one look
 * (seq_cst loads: a waiter's re-check). A ring with marks starts the scan
 * at run_hint when it lies in [c_head, p_head] (note 4) and moves the hint
 * to where the run ends, when that is past where the scan began. */
static inline unsigned qf__ring_published_end(qf__ring *r, unsigned *ret_c)
{
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    *ret_c = c;
    if (!r->marks)
        return QF__LD(&r->ring.p_tail, SEQ_CST);
    unsigned head = QF__LD(&r->ring.p_head, SEQ_CST);
    /* Acquire, pairing with the release of the CAS that moved it: the
     * marks its mover saw are then visible here too, so a run counted from
     * the hint is one a take finds. */
    unsigned hint = QF__LD(&r->run_hint, ACQUIRE);
    unsigned from = hint - c <= head - c ? hint : c;
    unsigned end = qf__ring_run_end(r, from, head);
    /* A scan that found nothing (from c_head, on an empty queue: a
     * waiter's usual re-check) leaves the hint: a count that starts from
     * c_head scans nothing the hint would save, and the CAS was a tenth of
     * that re-check (two tasks ping-ponging through two queues). Unless
     * the hint has fallen 2^30 indices behind: it is brought to c_head
     * then, so that it cannot lap round into [c_head, p_head] while every
     * count finds the queue empty (note 4: a count from such a hint
     * overstates). */
    if (end != hint && (end != from || c - hint > (1u << 30)))
        __atomic_compare_exchange_n(&r->run_hint, &hint, end, false, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED);
    return end;
}

/* qf__ring_published_end() without the hint: exact however long nobody
 * counted (note 4), at the cost of a scan of what is published. */
static inline unsigned qf__ring_published_end_exact(qf__ring *r, unsigned *ret_c)
{
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    *ret_c = c;
    if (!r->marks)
        return QF__LD(&r->ring.p_tail, SEQ_CST);
    return qf__ring_run_end(r, c, QF__LD(&r->ring.p_head, SEQ_CST));
}

/* Published and not yet consumed, by seq_cst loads (a waiter's re-check). */
static inline unsigned qf__ring_published(qf__ring *r)
{
    unsigned c;
    unsigned end = qf__ring_published_end(r, &c);
    return end - c;
}

/* A reservation is not published yet (seq_cst loads). */
static inline bool qf__ring_in_flight(qf__ring *r)
{
    unsigned c;
    unsigned end = qf__ring_published_end_exact(r, &c);
    unsigned head = QF__LD(&r->ring.p_head, SEQ_CST);
    return (int)(head - end) > 0;
}

/* Wait until every reservation made before this call is takeable (the
 * published run has reached the p_head read here). Multi-producer only;
 * the owners are between reserve and publish, which never waits (note 4),
 * so this ends; a descheduled owner is waited for by yielding. The FIFO
 * engine calls it before it puts anything behind the ring (the overflow
 * list), so that no producer's later elements overtake its own earlier
 * ones that are behind another producer's unpublished slot. */
static inline void qf__ring_wait_carried(qf__ring *r)
{
    unsigned h = QF__LD(&r->ring.p_head, SEQ_CST);
    for (unsigned spins = 0;; spins++) {
        unsigned c;
        unsigned end = qf__ring_published_end_exact(r, &c);
        if ((int)(h - end) <= 0 || (int)(h - c) <= 0)
            return;
        if (spins < 64)
            qf__cpu_relax();
        else
            sched_yield();
    }
}

/* One value, single producer (the runtime's local run queues). */
static inline bool qf__ring_push_sp(qf__ring *r, void *v)
{
    unsigned t;
    if (qf__ring_reserve(r, 1, true, false, r->cap, &t) == 0)
        return false;
    qf__ring_write(r, t, v);
    qf__ring_publish(r, t, 1, true);
    /* No heavy side pairs with this push: the runtime's idle protocol
     * relies on qf_eventcount_notify()'s own full fence, which its callers
     * run straight after, or (a worker's push into its own ring that wakes
     * nobody) on the pusher taking the task itself (qf_scheduler.c,
     * "Sleeping"). */
    return true;
}

#endif
