/* qf_queue_packed-impl.h - internal: FIFO queues whose slots carry the
 * values of an element, not the element (issue 27).
 *
 * An element of small dense tensors (an int64 label and a float32 row)
 * passed by pointer moves its element and every tensor (a header of three
 * cache lines each) from the producer's core to the consumer's, and the
 * consumer's frees send the blocks back: most of a typed hand-off's time
 * went to those misses. A packed queue copies the components' values into
 * one small block per slot instead (from the producer's block cache), frees
 * the producer's element and tensors on the producer's thread, and builds
 * the consumer's from the consumer's own cache: one block of values, not
 * the three objects, crosses between the cores. The element API is
 * unchanged; only the identity of the tensors is (a dequeue gives copies,
 * as TensorFlow's queues do).
 *
 * Where the values live. When the FIFO engine can hold them in its ring
 * (values of at most 248 bytes in a ring that does not spill and whose
 * cells take at most 4 MiB: queues/engine/qf_ring-impl.h, note 9), they
 * are copied into the ring's cells: a put packs them on the caller's
 * stack (qf__packed_pack_into()) and a take copies them into the caller's
 * buffer, so no block is made at all (`cells` below). Otherwise a slot is
 * a block of the values as described above. Measured on queue.tput.p1c1
 * (qflow-bench --quick --reps 5, three rounds, builds of the tree before
 * and after, in two code layouts): the two-int64 queue 9.3-10.4 -> 11.2-13.5 M
 * items/s, the (int64, float32 [16]) queue (aligned blocks, 8.9-9.3 M)
 * 9.0-10.5 M.
 *
 * A queue is packed when it is a FIFOQueue (not padding, shuffle or
 * priority: those read or reorder their slots as elements) that is not
 * inline, every component has a numeric or bool dtype and a fully defined
 * shape of rank below QF_MAX_RANK (so batches of it can be made), there are
 * at most QF__PACKED_MAX_COMPONENTS components, and all values take at most
 * QF__PACKED_MAX_BYTES (bigger values are cheaper to move by pointer than
 * to copy twice). */
#ifndef QF_QUEUE_PACKED_IMPL_H
#define QF_QUEUE_PACKED_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_queue-impl.h"
#include "qf_tensor-impl.h"

#define QF__PACKED_MAX_BYTES 512
#define QF__PACKED_MAX_COMPONENTS 16

typedef struct qf__packed {
    size_t bytes; /* a slot's block */
    /* The queue's ring holds the values in its cells (qf_ring-impl.h, note
     * 9): a slot is then a buffer of the caller's (the stack of the call,
     * room bytes), not a block, and is never freed. */
    bool cells;
    size_t room;
    /* Every component's values fill whole words: no padding between or
     * after them, so a put need not zero a cell's room first. */
    bool gapless;
    uint8_t cls;       /* its qf__block_alloc() class */
    size_t home_bytes; /* a dequeued element's home block (qf__dense_layout()) */
    /* Each component: where its values lie in a slot (off), its tensor in
     * a dequeued element's home block, its shape with dims past its rank 0. */
    qf__dense_comp comp[];
} qf__packed;

/* Why q cannot be packed (the rule above it breaks, for a message), or
 * NULL when it can. */
const char *qf__packed_refusal(const qf_queue *q);
/* At creation, after the dtypes and shapes are copied: sets q->packed
 * when the queue qualifies. False only when out of memory. */
bool qf__packed_init(qf_queue *q);
/* Frees q->packed (NULL: nothing). */
void qf__packed_destroy(qf_queue *q);

/* A slot for validated element e (its values copied; e is untouched).
 * NULL with RESOURCE_EXHAUSTED recorded when out of memory. */
void *qf__packed_pack(const qf_queue *q, const qf_element *e);
/* Element e's values into `room` bytes at dst (a queue of cells). */
void qf__packed_pack_into(const qf_queue *q, const qf_element *e, void *dst);
/* Rows [from, from + n) of validated batch b into n buffers of `room`
 * bytes from stage on, and ret_slots[i] pointing to each (a queue of
 * cells). */
void qf__packed_pack_rows_into(const qf_queue *q, const qf_element *b, int64_t from, size_t n,
                               char *stage, void **ret_slots);
/* Rows [from, from + n) of validated batch b as n slots; b is untouched.
 * RESOURCE_EXHAUSTED (recorded, nothing allocated) when out of memory. */
qf_code qf__packed_pack_rows(const qf_queue *q, const qf_element *b, int64_t from, size_t n,
                             void **ret_slots);
/* The element of a slot, which frees the slot: the element and its tensors
 * in one home block from the calling thread's cache (qf__element_of_dense()). NULL when out of
 * memory: the slot is kept. */
qf_element *qf__packed_unpack(const qf_queue *q, void *slot);
/* Component batches of slots[0..n) into b's components (b has q->ncomp
 * empty ones). On QF_OK the slots are freed; on RESOURCE_EXHAUSTED they
 * are kept and b's components stay empty. */
qf_code qf__packed_batch(const qf_queue *q, void *const *slots, size_t n, qf_element *b);
/* Replace each component of batch b (rows rows) by its rows [from, rows):
 * what is left with the caller after a partial enqueue_many. A component
 * that cannot be copied (out of memory) stays as it was. */
void qf__packed_keep_rows(const qf_queue *q, qf_element *b, int64_t from, int64_t rows);
/* The values of the _values calls (vals[c]: component c's, checked non-NULL)
 * into `room` bytes at dst (a queue of cells), or into a new slot (NULL
 * with RESOURCE_EXHAUSTED recorded when out of memory). */
void qf__packed_pack_values_into(const qf_queue *q, const void *const *vals, void *dst);
void *qf__packed_pack_values(const qf_queue *q, const void *const *vals);
/* A slot's values into outs[c] (checked non-NULL); frees a block slot. */
void qf__packed_unpack_values(const qf_queue *q, void *slot, void *const *outs);
/* Free slots[0..n). Any thread. */
void qf__packed_free(const qf_queue *q, void *const *slots, size_t n);

#endif
