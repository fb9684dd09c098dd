/* qf_strblock-impl.h - string blocks: storage that string tensors borrow
 * their bytes from (never installed).
 *
 * A string block is one aligned buffer plus a table of rows cut from it.
 * Its filler (one thread at a time: in qflow, a TextLineReader) writes bytes
 * into the buffer and adds rows: row i is (offset, length, number) of a
 * string lying in the buffer, whose end the filler overwrote with a NUL.
 * Each row is a (key, value) pair of scalar strings: the value is the bytes
 * in place, never copied; the key is the block's prefix followed by the
 * row's number in decimal, made only when someone asks for it. Moving
 * millions of tiny (key, value) records this way costs no element, no
 * tensor and no copy each (~450 bytes of headers saved per ~70-byte value).
 *
 * In a queue, row i of block b is the slot value `b + 2i + 1` (blocks are
 * aligned to QF__STRBLOCK_ALIGN and hold fewer than QF__STRBLOCK_ALIGN/2
 * rows, so no element pointer, tombstone or inline value looks like one). A
 * row slot is an element in every way a user can see: size and capacity
 * count it, it keeps its place, and wherever a slot leaves a queue as an
 * element (dequeue, a padded batch) it becomes one (qf__slot_element()).
 * Batches of scalar components are built from rows directly
 * (qf__stack_scalars(), qf__stack_rows_borrowed()): their string tensors
 * borrow the values and hold the rows until freed. Only queues of exactly
 * two scalar string components, not inline, ever hold row slots (the
 * enqueuer checks this before it enqueues any).
 *
 * Lifetime: the block counts its filler's hold and the rows handed out and
 * not yet consumed; the last release frees it (any thread). The filler may
 * overwrite the buffer only while no row is out (qf__strblock_in_use());
 * else it moves on to a fresh block.
 */
#ifndef QF_RUN_IMPL_H
#define QF_RUN_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_asan-impl.h"
#include "qf_tensor.h"
#include "qf_tsan-impl.h"

/* A row writer's table stores are streaming stores (qf__row_writer_add())
 * on x86-64, except under the sanitizers, which do not see GCC's. */
#if defined(__x86_64__) && defined(__SSE2__) && !defined(QF_TSAN) && !defined(QF_ASAN)
#define QF__ROWS_STREAM 1
#include <emmintrin.h>
#endif

/* The most rows one call hands out (callers keep them on the stack). */
#define QF__ROWS_MAX 256
/* Blocks are aligned to this; a block has fewer than QF__STRBLOCK_ALIGN / 2 rows. */
#define QF__STRBLOCK_ALIGN 16384

typedef struct qf__strblock qf__strblock;
typedef struct qf__strblock_pool qf__strblock_pool;

/* The layout, here only so that a filler's loop can add rows inline
 * (qf__strblock_add_row()); everything else goes through qf_strblock.c. */
typedef struct qf__block_row {
    uint32_t off; /* of the value in the buffer */
    uint32_t len; /* value length; the NUL follows */
    uint64_t line;
} qf__block_row;

struct qf__strblock {
    _Atomic uint32_t live; /* see the top of qf_strblock.c */
    uint32_t rows_cap;
    uint32_t n; /* rows added since the last reuse */
    uint32_t prefix_len;
    size_t prefix_cap;
    char *prefix;
    char *buf;
    size_t cap;
    qf__strblock_pool *pool; /* NULL: freed when retired */
    qf__strblock *next;      /* in a pool's stack or spare list */
    /* Every row's value is followed by the byte its source ended it with
     * (a TextLineReader's '\n' or '\r'), not by a NUL: the rows were
     * written for a queue whose consumers read values by their length
     * (qf__queue_rows_by_length()). Set by the filler when the block's
     * first row is added, cleared by a later row added with its NUL (a
     * filler that changed its mind: no reader does). Consumers of rows
     * already out read it meanwhile, so it is atomic and stored only when
     * it changes; relaxed: the ring's publication of a row orders the
     * store before it ahead of a consumer's look, and a consumer that
     * sees it cleared early only writes ends that are already there. */
    _Atomic bool bare_ends;
    /* On lines of their own, four rows a line: a row writer's streaming
     * stores then fill whole lines, none shared with the header that
     * consumers read (bare_ends) and write (live). */
    _Alignas(64) qf__block_row rows[];
};
/* qf__row_writer_add() writes a row as two words: off | len << 32, line. */
_Static_assert(offsetof(qf__block_row, off) == 0 && offsetof(qf__block_row, len) == 4 &&
                   offsetof(qf__block_row, line) == 8 && sizeof(qf__block_row) == 16,
               "a row is the two words qf__row_writer_add() stores");

/* A filler's pool of blocks (one owner thread at a time): blocks it gets from
 * the pool go back to it when retired, so a filler reuses a few warm
 * buffers instead of mapping fresh ones. qf__strblock_pool_get(): a block held by
 * the caller with no rows (its old key prefix kept: see
 * qf__strblock_has_prefix()); NULL with RESOURCE_EXHAUSTED recorded.
 * qf__strblock_pool_close(): the owner is done (its blocks still out stay valid
 * and are freed when retired). */
qf__strblock_pool *qf__strblock_pool_new(size_t data_cap);
qf__strblock *qf__strblock_pool_get(qf__strblock_pool *p);
void qf__strblock_pool_close(qf__strblock_pool *p);
/* Blocks of closed pools wait, up to 32 MiB and 256 blocks for the whole
 * process, oldest pushed out first, for the next pool of their size
 * (qf_strblock.c). qf__strblock_idle_bytes(): the bytes of the blocks
 * waiting now (whole allocations; *ret_blocks, when not NULL, their
 * number); qf__strblock_bytes(): the allocation of one block of data_cap
 * buffer bytes; qf__strblock_idle_release(): frees them all now. Any
 * thread. */
size_t qf__strblock_idle_bytes(size_t *ret_blocks);
size_t qf__strblock_bytes(size_t data_cap);
void qf__strblock_idle_release(void);

/* The buffer (the pool's data_cap bytes). The filler writes it only while
 * !qf__strblock_in_use(). */
char *qf__strblock_data(qf__strblock *r);
/* Whether a row handed out is not consumed yet (acquire: when false, every
 * consumer's reads of the buffer happened before). Filler only. */
bool qf__strblock_in_use(const qf__strblock *r);
/* Rows that may still be added before the table is full. Filler only. */
size_t qf__strblock_rows_left(const qf__strblock *r);
/* Forget the rows (all consumed: !qf__strblock_in_use()) so the buffer and the
 * table can be reused. Filler only. */
void qf__strblock_reuse(qf__strblock *r);
/* Set the key prefix to prefix[0..len) followed by `sep` (none when -1).
 * Only while !qf__strblock_in_use(). RESOURCE_EXHAUSTED on OOM (prefix kept). */
qf_code qf__strblock_set_prefix(qf__strblock *r, const char *prefix, size_t len, int sep);
/* Whether the key prefix is prefix[0..len) followed by sep. */
bool qf__strblock_has_prefix(const qf__strblock *r, const char *prefix, size_t len, int sep);
/* The rows about to be added keep their source's ends (bare) or get NULs:
 * bare_ends as the block's first rows set it, or cleared by NUL rows after
 * bare ones. Filler only; stores only a change (see bare_ends). */
static inline void qf__strblock_set_bare(qf__strblock *r, bool bare)
{
    if (r->n == 0 ? atomic_load_explicit(&r->bare_ends, memory_order_relaxed) != bare
                  : !bare && atomic_load_explicit(&r->bare_ends, memory_order_relaxed))
        atomic_store_explicit(&r->bare_ends, bare, memory_order_relaxed);
}

/* Add a row for buf[off..off+len) with line number `line` and write its
 * NUL at buf[off+len] (off + len < capacity; len < 2^31; the caller has
 * checked qf__strblock_rows_left()). Returns its slot, handed out at once. */
static inline void *qf__strblock_add_row(qf__strblock *r, size_t off, size_t len, uint64_t line)
{
    qf__strblock_set_bare(r, false);
    uint32_t i = r->n++;
    r->rows[i] = (qf__block_row){(uint32_t)off, (uint32_t)len, line};
    r->buf[off + len] = '\0';
    return (void *)((uintptr_t)r + 2 * (uintptr_t)i + 1);
}

/* Many rows in a loop, as qf__strblock_add_row() adds them: the writer is a
 * local copy of what the loop changes (each row's NUL is stored through a
 * char pointer, which the compiler must assume may change any field it
 * reads through a pointer, so a loop over the block's own fields reloads
 * them every row). begin, add as often as rows_left allows, end. */
typedef struct qf__row_writer {
    qf__strblock *blk;
    qf__block_row *rows;
    char *buf;
    uint32_t n;
    bool nul; /* false: the values keep their source's ends (bare_ends) */
} qf__row_writer;

/* nul false: leave each value's end byte as it is (the block's bare_ends,
 * when these are its first rows), for a consumer that reads by length. */
static inline qf__row_writer qf__row_writer_begin(qf__strblock *r, bool nul)
{
    qf__strblock_set_bare(r, !nul);
    return (qf__row_writer){r, r->rows, r->buf, r->n, nul};
}

/* The row's two words go out as streaming stores: the table of a reused
 * block was read last by the consumer's core, and a plain store waited for
 * its line to be fetched and that copy invalidated. In qflow-lines that
 * was the reader's loop's stall (text_next_rows() 32% of all samples, 6%
 * with the table stores taken out; prefetchw of the lines, a row at a time
 * 16 or 64 rows ahead or a round's lines before the search, did not hide
 * it). A streaming store fills the line in a write-combining buffer and
 * writes it whole, with no read for ownership; the rows of a round are
 * consecutive, so their lines fill in order. x86's ordering does not cover
 * these stores: qf__row_writer_end() fences them before the rows can be
 * published. qflow-lines 62.2-63.7 -> 52.0-53.1 ms (cat 23.8-25.2). */
static inline void *qf__row_writer_add(qf__row_writer *w, size_t off, size_t len, uint64_t line)
{
    uint32_t i = w->n++;
#ifdef QF__ROWS_STREAM
    long long *p = (long long *)(void *)&w->rows[i];
    _mm_stream_si64(p, (long long)((uint64_t)(uint32_t)off | (uint64_t)len << 32));
    _mm_stream_si64(p + 1, (long long)line);
#else
    w->rows[i] = (qf__block_row){(uint32_t)off, (uint32_t)len, line};
#endif
    if (w->nul)
        w->buf[off + len] = '\0';
    return (void *)((uintptr_t)w->blk + 2 * (uintptr_t)i + 1);
}

/* The rows' table stores ordered before anything after (the ring's
 * publication of their slots). */
static inline void qf__row_writer_end(const qf__row_writer *w)
{
#ifdef QF__ROWS_STREAM
    _mm_sfence();
#endif
    w->blk->n = w->n;
}
/* The filler lets go of its block; freed now if no row is out. */
void qf__strblock_drop(qf__strblock *r);

static inline bool qf__slot_is_row(const void *slot)
{
    return ((uintptr_t)slot & 1) != 0;
}

/* n in decimal at out (up to 20 bytes, no NUL); returns the digits. */
static inline size_t qf__format_u64(char *out, uint64_t n)
{
    char tmp[20];
    size_t nd = 0;
    do {
        tmp[nd++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    for (size_t i = 0; i < nd; i++)
        out[i] = tmp[nd - 1 - i];
    return nd;
}

/* Room for a row's line number as text. */
#define QF__ROW_DIGITS 24

/* Component c (0: key, 1: value) of a row slot: the key in two parts
 * (prefix, and the line number written to digits[]), the value in the
 * first part with *len1 = 0. */
void qf__row_string(const void *slot, size_t c, char digits[QF__ROW_DIGITS], const char **s0,
                    size_t *len0, const char **s1, size_t *len1);

/* Row values are NUL-terminated in place, but in blocks with bare_ends. qf__row_value(): the value
 * of a row slot (NULL for any other slot). qf__rows_all(): whether every one of slots[0..n) is a
 * row. qf__rows_values(): dst[i] = slot i's value, not copied: valid while the row is not consumed
 * ({0, NULL} when empty), all of them rows; returns whether every one is of a block with bare_ends
 * (each non-empty value's next byte is its source's end, not a NUL), found in the same pass with
 * one look per stretch of rows of the same block: a pass of its own over a batch of 1024 lines
 * was 5% of qflow-lines' instructions. */
const char *qf__row_value(const void *slot);
bool qf__rows_all(void *const *slots, size_t n);
bool qf__rows_values(void *const *slots, size_t n, qf_string *dst);

/* Batches of rows, for qf__stack_scalars(). qf__rows_string_bytes(): when
 * every slot is a row, true with the bytes component c of them takes in a
 * string arena (each non-empty string and its NUL; for keys an upper bound,
 * counting 20 digits each, and the copy's slack); false otherwise.
 * qf__rows_string_copy(): write them: dst[i] for slot i, bytes from `arena`
 * on; returns the end of what it wrote. */
bool qf__rows_string_bytes(void *const *slots, size_t n, size_t c, size_t *ret_bytes);
char *qf__rows_string_copy(void *const *slots, size_t n, size_t c, qf_string *dst, char *arena);

/* Consume row slots (any blocks, any order): one atomic per stretch of rows
 * of the same block. */
void qf__rows_release(void *const *slots, size_t n);

/* A slot as an element, consuming it: an element slot is returned as it
 * is, a row becomes a new (key, value) element. NULL with RESOURCE_EXHAUSTED
 * recorded when that allocation fails; the slot is then not consumed. */
qf_element *qf__slot_element(void *slot);
/* Free a slot of a non-inline queue (element or row); slots[0..n). */
void qf__slot_free(void *slot);
void qf__slots_free(void *const *slots, size_t n);

#endif
