/* qf_ring-impl.h - internal: ring operations on a Concurrency Kit ck_ring.
 *
 * Implementation notes.
 *
 * The data structure is ck_ring_t: a power-of-two array of pointer slots,
 * c_head (next slot to consume) on its own cache line, p_head (next slot to
 * reserve) and p_tail (end of the published slots) together on another.
 * The protocol is ck_ring's: producers reserve by advancing p_head and
 * publish in ticket order by advancing p_tail; consumers advance c_head.
 * What qflow adds, and why:
 *
 *  1. Capacity from the indices. A reservation succeeds only while
 *     p_head - c_head < capacity (the queue's exact capacity, any value up
 *     to the ring's size - 1), so no separate element counter is written by
 *     both sides: per element the producer writes only the producer line
 *     and the consumer only the consumer line.
 *  2. Cached opposite index. Each side keeps the last value it read of the
 *     other side's index and re-reads the real one only when the cached
 *     value says "full" (producer) or "empty" (consumer). In the steady
 *     state a producer does not touch the consumer's line at all. The cache
 *     is published with release and read with acquire, so the hand-off of
 *     slot contents stays ordered through it.
 *  3. Fences. A multi-producer publishes p_tail with a seq_cst RMW and a
 *     multi-consumer advances c_head with a seq_cst CAS, so a waiter on
 *     the other side (an RMW on the queue's state word, then seq_cst loads
 *     of the indices) pairs with them under the C11 model alone: one of the
 *     two sees the other, with no extra fence on either side. A declared
 *     single producer or single consumer updates its index with a plain
 *     store and runs qf__fence_light(); the waiters of the other side then
 *     run qf__fence_heavy() (coord/qf_fence-impl.h) before re-checking. The
 *     light fence is a compiler barrier where membarrier(2) works, so a
 *     single-producer, single-consumer hand-off has no locked instruction
 *     at all; the process-wide barrier is paid only by a waiter facing a
 *     declared single side, never on the multi-producer, multi-consumer
 *     path, which parks most often when threads outnumber cores.
 *  4. No commit wait: producers carry each other. ck_ring makes a
 *     multi-producer wait until every earlier reservation is published;
 *     with more producers than cores the earlier producer is often
 *     preempted, and everyone behind it waits a time slice (a convoy: each
 *     publish then wakes the next waiter, one context switch per element;
 *     measured 100-250 k items/s at 8x8 on 2 cores). Here a producer whose
 *     turn it is not yet (p_tail != its first slot) marks its slots
 *     written and leaves; whoever moves p_tail up to a marked slot moves it
 *     on over it too. The marks array holds, per slot, i + 1 once slot
 *     index i is written and waiting to be carried; any other value means
 *     "not waiting" (initially the slot number; a carrier that moves p_tail
 *     past a marked slot resets it to i with a CAS, so a mark from an
 *     earlier lap never reads as current: i and i + k * slots + 1 differ in
 *     parity, slots being a power of two).
 *       producer     write values; CAS p_tail start -> start + k: done, and
 *                    it is a carrier from start + k. Else store marks
 *                    (seq_cst), then load p_tail (seq_cst) and be a
 *                    carrier from there.
 *       carrier at t while mark[t] == t + 1, ... : CAS p_tail t -> t + n
 *                    (seq_cst); on success reset those marks and go on from
 *                    t + n (seq_cst loads of the marks); on failure stop:
 *                    the CAS's winner carries on from where it put p_tail.
 *     No slot is stranded: of "marker stores mark[X], then loads p_tail"
 *     and "carrier moves p_tail to X, then loads mark[X]", one sees the
 *     other under the seq_cst total order, so the marker carries itself or
 *     the carrier carries it. Values reach consumers through the chain
 *     value store -> mark (release) -> carrier's load (acquire) -> its CAS
 *     on p_tail (release) -> the consumer's acquire load of p_tail.
 *     tests/model/ring_carry.pml checks the protocol with spin.
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
 *     them: per slot index i it stores tombs[i & mask] = i + 1 (and counts
 *     it in tomb_n) before publishing. Any value may be a real element (a
 *     queue of int64 stores the numbers themselves), so no slot value can
 *     mean "abandoned". A consumer, while some tombstone is out (tomb_n !=
 *     0), reads the tags of the slots it takes together with their values,
 *     before its claim (after it, a later lap may tag the slot), drops the
 *     tagged ones, and after the claim resets each tag with a CAS from
 *     i + 1 to i (a later lap's tag stays). As with the marks, i and
 *     i + k * slots + 1 differ in parity, so a reset or initial tag never
 *     reads as current. Ordering: tag and count stores, then the publish
 *     (release, or the mark a carrier acquires) -> the consumer's acquire
 *     of p_tail (or of its cached copy, stored with release by a consumer
 *     that acquired p_tail) -> its loads of tomb_n and the tags. tomb_n
 *     cannot read 0 while an unclaimed tombstone the consumer can see is
 *     out: that tombstone's increment happens before the look and its
 *     decrement after its claim. tests/model/ring_tombs.pml checks it
 *     with spin (a thread stalled between claim and untag while 2^32
 *     indices pass is outside it, as for every CAS on a 32-bit index).
 */
#ifndef QF_RING_IMPL_H
#define QF_RING_IMPL_H

#include <ck_ring.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_fence-impl.h"
#include "qf_futex.h"
#include "qf_lock-impl.h"

typedef struct qf__ring {
    ck_ring_t ring; /* c_head | p_tail, p_head | size, mask: own lines */
    ck_ring_buffer_t *buf;
    unsigned mask;
    unsigned cap;                         /* most slots in use at once (<= mask) */
    bool sym;                             /* full fences on both sides (qf__ring_set_symmetric()) */
    _Alignas(64) unsigned prod_cached_c;  /* producers' copy of c_head */
    _Alignas(64) unsigned cons_cached_p;  /* consumers' copy of p_tail */
    _Atomic uint32_t *marks;              /* slots written, waiting to be carried (note 4) */
    _Atomic uint32_t *tombs;              /* slots abandoned by their producer (note 7) */
    _Alignas(64) _Atomic uint32_t tomb_n; /* tombstones published or about to be, not taken */
} qf__ring;

#ifdef QF_RACE_WIDENING
#define QF_WIDEN() sched_yield()
#else
#define QF_WIDEN() ((void)0)
#endif

#define QF__LD(p, mo) __atomic_load_n((p), __ATOMIC_##mo)
#define QF__ST(p, v, mo) __atomic_store_n((p), (v), __ATOMIC_##mo)

/* Bytes a ring of `slots` needs besides the ck_ring struct: the value
 * slots and, for a queue's ring, the marks and tombstone tags
 * (qf__ring_init()). */
static inline size_t qf__ring_storage_bytes(unsigned slots)
{
    return (size_t)slots * (sizeof(ck_ring_buffer_t) + 2 * sizeof(uint32_t));
}

/* `buf`: qf__ring_storage_bytes(slots) bytes for a queue's ring, which any
 * number of producers may use and which may hold tombstones, or just the
 * value slots for a single-producer ring of values that are never
 * abandoned (multi_producer false: the runtime's run queues). */
static inline void qf__ring_init(qf__ring *r, ck_ring_buffer_t *buf, unsigned slots, unsigned cap,
                                 bool multi_producer)
{
    ck_ring_init(&r->ring, slots);
    r->buf = buf;
    r->mask = slots - 1;
    r->cap = cap;
    qf__fence_init();
    r->sym = false;
    r->prod_cached_c = 0;
    r->cons_cached_p = 0;
    r->marks = NULL;
    r->tombs = NULL;
    atomic_init(&r->tomb_n, 0);
    if (multi_producer) {
        r->marks = (_Atomic uint32_t *)(void *)(buf + slots);
        r->tombs = r->marks + slots;
        for (unsigned i = 0; i < slots; i++) {
            atomic_init(&r->marks[i], i);
            atomic_init(&r->tombs[i], i);
        }
    }
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

/* Published and not yet consumed. */
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

static inline void qf__ring_write(qf__ring *r, unsigned idx, void *v)
{
    QF__ST(&r->buf[idx & r->mask].value, v, RELAXED);
}

/* Carry p_tail, which was t, over the run of marked slots from t (note
 * 4). Returns how many slots this call made visible. */
static inline unsigned qf__ring_carry(qf__ring *r, unsigned t)
{
    unsigned total = 0;
    for (;;) {
        unsigned n = 0;
        while (n <= r->mask && atomic_load_explicit(&r->marks[(t + n) & r->mask],
                                                    memory_order_seq_cst) == t + n + 1)
            n++;
        if (n == 0)
            return total;
        unsigned expect = t;
        if (!__atomic_compare_exchange_n(&r->ring.p_tail, &expect, t + n, false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_RELAXED))
            return total; /* another carrier moved it; it goes on from there */
        for (unsigned i = 0; i < n; i++) {
            uint32_t m = t + i + 1;
            atomic_compare_exchange_strong_explicit(&r->marks[(t + i) & r->mask], &m, t + i,
                                                    memory_order_relaxed, memory_order_relaxed);
        }
        total += n;
        t += n;
    }
}

/* Publish [start, start + k). Multi-producer: a seq_cst CAS when it is
 * this reservation's turn, else marks that the producer before carries
 * (note 4); never waits. Returns how many slots became visible to
 * consumers by this call (its own and others' it carried; 0 when its own
 * wait for an earlier producer to carry them): the count to wake for. */
static inline unsigned qf__ring_publish(qf__ring *r, unsigned start, unsigned k,
                                        bool single_producer)
{
    unsigned *tail = &r->ring.p_tail;
    QF_WIDEN();
    if (single_producer) {
        /* Release for the slots; the fence orders it before the look at
         * the consumers' wait bit. */
        QF__ST(tail, start + k, RELEASE);
        qf__ring_fence_light(r);
        return k;
    }
    unsigned expect = start;
    if (__atomic_compare_exchange_n(tail, &expect, start + k, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
        return k + qf__ring_carry(r, start + k);
    for (unsigned i = 0; i < k; i++)
        atomic_store_explicit(&r->marks[(start + i) & r->mask], start + i + 1,
                              memory_order_seq_cst);
    QF_WIDEN();
    return qf__ring_carry(r, QF__LD(tail, SEQ_CST));
}

/* Slot index idx is abandoned: its producer reserved it and then found
 * the queue closed (note 7). Before the slot is published; the publish
 * orders these stores before a consumer's look. */
static inline void qf__ring_write_tombstone(qf__ring *r, unsigned idx)
{
    atomic_fetch_add_explicit(&r->tomb_n, 1, memory_order_relaxed);
    QF__ST(&r->buf[idx & r->mask].value, NULL, RELAXED);
    atomic_store_explicit(&r->tombs[idx & r->mask], idx + 1, memory_order_relaxed);
}

/* Of the k values just read from [c, c + k) into out, drop the tombstones
 * (before the claim: once c_head moves a later lap may tag the slots);
 * returns how many values are left. Only while some tombstone is out. */
static inline unsigned qf__ring_drop_tombs(qf__ring *r, void **out, unsigned c, unsigned k)
{
    if (!r->tombs || atomic_load_explicit(&r->tomb_n, memory_order_relaxed) == 0)
        return k;
    unsigned j = 0;
    for (unsigned i = 0; i < k; i++)
        if (atomic_load_explicit(&r->tombs[(c + i) & r->mask], memory_order_relaxed) != c + i + 1)
            out[j++] = out[i];
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
        atomic_compare_exchange_strong_explicit(&r->tombs[(c + i) & r->mask], &t, c + i,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&r->tomb_n, k - real, memory_order_relaxed);
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
            out[i] = QF__LD(&r->buf[(c + i) & r->mask].value, RELAXED);
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

/* Published and not yet consumed, by seq_cst loads (a waiter's re-check). */
static inline unsigned qf__ring_published(qf__ring *r)
{
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    unsigned p = QF__LD(&r->ring.p_tail, SEQ_CST);
    return p - c;
}

/* A reservation is not published yet (seq_cst loads). */
static inline bool qf__ring_in_flight(qf__ring *r)
{
    return QF__LD(&r->ring.p_head, SEQ_CST) != QF__LD(&r->ring.p_tail, SEQ_CST);
}

/* Wait until every reservation made before this call is visible to
 * consumers (p_tail has reached the p_head read here). Multi-producer only;
 * the owners are between reserve and publish, which never waits (note 4),
 * so this ends; a descheduled owner is waited for by yielding. The FIFO
 * engine calls it before it puts anything behind the ring (the overflow
 * list), so that no producer's later elements overtake its own earlier
 * ones that are marked but not yet carried. */
static inline void qf__ring_wait_carried(qf__ring *r)
{
    unsigned h = QF__LD(&r->ring.p_head, SEQ_CST);
    for (unsigned spins = 0; (int)(h - QF__LD(&r->ring.p_tail, SEQ_CST)) > 0; spins++) {
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
     * run straight after. */
    return true;
}

#endif
