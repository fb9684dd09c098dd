/* qf_run-impl.h - runs of (key, value) rows: how a reader's records travel
 * through a queue without one object, or one copy, each (never installed).
 *
 * A text pipeline moves millions of tiny records. As elements, each is an
 * element and two string tensors: ~450 bytes of headers written by the
 * reader and read back by the consumer, for ~70 bytes of line. A run is
 * instead the reader's read buffer itself, with a table of the rows cut
 * from it: row i is (offset, length, line number) of a line lying in the
 * buffer, whose end the reader overwrote with a NUL. The reader reads the
 * file into the run, finds the lines and hands out rows: no line is copied
 * on its way into the queue. The key is the run's prefix (a TextLineReader's
 * "<file>:") and the row's line number, made when a consumer needs it.
 *
 * In a queue, row i of run r is the slot value `r + 2i + 1` (runs are
 * aligned to QF__RUN_ALIGN and hold fewer than QF__RUN_ALIGN/2 rows, so no
 * element pointer, tombstone or inline value looks like one). A row slot is
 * an element in every way a user can see: size and capacity count it, it
 * keeps its place, and wherever a slot leaves a queue as an element
 * (dequeue, a padded batch) it becomes one (qf__slot_element()). Batches of
 * scalar components are built from rows directly (qf__stack_scalars(),
 * qf__stack_rows_borrowed()). Only queues of exactly two scalar string
 * components, not inline, ever hold row slots (runtime/qf_batch.c checks
 * this before it enqueues any).
 *
 * Lifetime: the run counts its reader's hold and the rows handed out and
 * not yet consumed; the last release frees it (any thread). The reader may
 * overwrite the buffer only while no row is out (qf__run_in_use()); else it
 * moves on to a fresh run.
 */
#ifndef QF_RUN_IMPL_H
#define QF_RUN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_tensor.h"

/* The most rows one call hands out (callers keep them on the stack). */
#define QF__RUN_MAX 64
/* Runs are aligned to this; a run has fewer than QF__RUN_ALIGN / 2 rows. */
#define QF__RUN_ALIGN 16384

typedef struct qf__run qf__run;

/* A reader's pool of runs (one owner thread at a time): runs it gets from
 * the pool go back to it when retired, so a reader reuses a few warm
 * buffers instead of mapping fresh ones. qf__run_pool_get(): a run held by
 * the caller with no rows (its old key prefix kept: see
 * qf__run_has_prefix()); NULL with RESOURCE_EXHAUSTED recorded.
 * qf__run_pool_close(): the owner is done (its runs still out stay valid
 * and are freed when retired). */
typedef struct qf__run_pool qf__run_pool;
qf__run_pool *qf__run_pool_new(size_t data_cap);
qf__run *qf__run_pool_get(qf__run_pool *p);
void qf__run_pool_close(qf__run_pool *p);

/* The buffer (the pool's data_cap bytes). The reader writes it only while
 * !qf__run_in_use(). */
char *qf__run_data(qf__run *r);
/* Whether a row handed out is not consumed yet (acquire: when false, every
 * consumer's reads of the buffer happened before). Reader only. */
bool qf__run_in_use(const qf__run *r);
/* Rows that may still be added before the table is full. Reader only. */
size_t qf__run_rows_left(const qf__run *r);
/* Forget the rows (all consumed: !qf__run_in_use()) so the buffer and the
 * table can be reused. Reader only. */
void qf__run_reuse(qf__run *r);
/* Set the key prefix to prefix[0..len) followed by `sep` (none when -1).
 * Only while !qf__run_in_use(). RESOURCE_EXHAUSTED on OOM (prefix kept). */
qf_code qf__run_set_prefix(qf__run *r, const char *prefix, size_t len, int sep);
/* Whether the key prefix is prefix[0..len) followed by sep. */
bool qf__run_has_prefix(const qf__run *r, const char *prefix, size_t len, int sep);
/* Add a row for buf[off..off+len) with line number `line` and write its
 * NUL at buf[off+len] (off + len < capacity; len < 2^31; the caller has
 * checked qf__run_rows_left()). Returns its slot, handed out at once. */
void *qf__run_add_row(qf__run *r, size_t off, size_t len, uint64_t line);
/* The reader lets go of its run; freed now if no row is out. */
void qf__run_drop(qf__run *r);

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

/* Row values are NUL-terminated in place. qf__row_value(): the value of a
 * row slot (NULL for any other slot). qf__rows_all(): whether every one of
 * slots[0..n) is a row. qf__rows_values(): dst[i] = slot i's value, not
 * copied: valid while the row is not consumed ({0, NULL} when empty). */
const char *qf__row_value(const void *slot);
bool qf__rows_all(void *const *slots, size_t n);
void qf__rows_values(void *const *slots, size_t n, qf_string *dst);

/* Batches of rows, for qf__stack_scalars(). qf__rows_string_bytes(): when
 * every slot is a row, true with the bytes component c of them takes in a
 * string arena (each non-empty string and its NUL; for keys an upper bound,
 * counting 20 digits each); false otherwise.
 * qf__rows_string_copy(): write them: dst[i] for slot i, bytes from `arena`
 * on; returns the end of what it wrote. */
bool qf__rows_string_bytes(void *const *slots, size_t n, size_t c, size_t *ret_bytes);
char *qf__rows_string_copy(void *const *slots, size_t n, size_t c, qf_string *dst, char *arena);

/* Consume row slots (any runs, any order): one atomic per stretch of rows
 * of the same run. */
void qf__rows_release(void *const *slots, size_t n);

/* A slot as an element, consuming it: an element slot is returned as it
 * is, a row becomes a new (key, value) element. NULL with RESOURCE_EXHAUSTED
 * recorded when that allocation fails; the slot is then not consumed. */
qf_element *qf__slot_element(void *slot);
/* Free a slot of a non-inline queue (element or row); slots[0..n). */
void qf__slot_free(void *slot);
void qf__slots_free(void *const *slots, size_t n);

#endif
