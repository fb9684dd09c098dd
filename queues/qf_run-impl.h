/* qf_run-impl.h - runs of (key, value) rows: how a reader's records travel
 * through a queue without one object each (never installed).
 *
 * A text pipeline moves millions of tiny records. As elements, each is an
 * element and two string tensors: ~450 bytes of headers written by the
 * reader and read back by the consumer, for ~70 bytes of line. A run holds
 * up to QF__RUN_MAX records in one allocation: a table of rows, then their
 * bytes; the keys share one prefix (a TextLineReader's "<file>:") and each
 * row keeps only its own suffix (the line number).
 *
 * In a queue, row i of run r is the slot value `r + 2i + 1` (runs are
 * aligned to QF__RUN_ALIGN, so no element pointer, tombstone or inline
 * value looks like one). A row slot is an element in every way a user can
 * see: size and capacity count it, it keeps its place, and wherever a slot
 * leaves a queue as an element (dequeue, a padded batch) it becomes one
 * (qf__slot_element()). Batches of scalar components are built from rows
 * directly (qf__stack_scalars()). Only queues of exactly two scalar string
 * components, not inline, ever hold row slots (runtime/qf_batch.c checks
 * this before it enqueues any).
 *
 * Lifetime: the run counts the rows not yet consumed; releasing the last
 * frees it (qf__rows_release(), any thread).
 */
#ifndef QF_RUN_IMPL_H
#define QF_RUN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_tensor.h"

#define QF__RUN_MAX 64
#define QF__RUN_ALIGN 128

typedef struct qf__run qf__run;

/* A run for `rows` rows (1..QF__RUN_MAX) holding `bytes` bytes of key
 * suffixes and values, with the key prefix key_prefix[0..prefix_len)
 * followed by `sep` (a TextLineReader's ':'; none when sep is -1). NULL
 * with RESOURCE_EXHAUSTED recorded. */
qf__run *qf__run_new(size_t rows, size_t bytes, const char *key_prefix, size_t prefix_len, int sep);
/* Set the next row (rows are set in order, each exactly once, before any
 * slot is published): key = prefix + suffix[0..suffix_len), value =
 * value[0..value_len). */
void qf__run_append(qf__run *r, const char *suffix, size_t suffix_len, const char *value,
                    size_t value_len);
/* The slot of row i. */
void *qf__run_slot(const qf__run *r, size_t i);
/* Free a run none of whose slots was handed out. */
void qf__run_discard(qf__run *r);

static inline bool qf__slot_is_row(const void *slot)
{
    return ((uintptr_t)slot & 1) != 0;
}

/* Component c (0: key, 1: value) of a row slot: the key in two parts
 * (prefix, suffix), the value in the first part with *len1 = 0. */
void qf__row_string(const void *slot, size_t c, const char **s0, size_t *len0, const char **s1,
                    size_t *len1);

/* Batches of rows, for qf__stack_scalars(). qf__rows_string_bytes(): when
 * every slot is a row, true with the bytes component c of them takes in a
 * string arena (each non-empty string and its NUL); false otherwise.
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
