/* qf_tensor-impl.h - internals shared by qf_tensor.c, qf_element.c and the
 * layers that build elements in bulk (never installed).
 *
 * A "home block" lets one allocation hold an element together with the
 * tensors it starts out with. A source of records makes one small (key, value)
 * element per record and a consumer on another thread frees it, so every separate
 * allocation is a cross-thread malloc/free pair; with a home block there is
 * one per record instead of three. Each object inside keeps its own
 * lifetime (a tensor taken out of the element may outlive it): the block
 * counts its live objects and is freed when the last one goes.
 */
#ifndef QF_TENSOR_IMPL_H
#define QF_TENSOR_IMPL_H

#include <stdatomic.h>
#include <stddef.h>

#include "qf_tensor.h"

/* Components an element holds at most (qf_element_new()); queues hold
 * elements, so it bounds their num_components too. */
#define QF__MAX_COMPONENTS 4096

typedef struct qf__home {
    _Atomic uint32_t live; /* objects in the block not yet destroyed */
} qf__home;

/* One object (k objects) of the block is gone; the last frees the block.
 * Any thread. */
void qf__home_release(qf__home *h);
void qf__home_release_n(qf__home *h, uint32_t k);

/* True when destroying t is nothing but releasing its object of block h:
 * t lives in h, the caller holds its only reference, and it owns nothing
 * outside h (no strings of their own, no pointers with a destructor). The
 * caller may then count t into one qf__home_release_n() instead of
 * qf_tensor_unref(t). */
bool qf__tensor_dies_with_home(qf_tensor *t, const qf__home *h);

/* Bytes a scalar string tensor of `len` bytes takes inside a block, a
 * multiple of alignof(max_align_t). */
size_t qf__string_scalar_size(size_t len);
/* Build a scalar string tensor (refcount 1) holding a copy of s[0..len) at
 * `mem` (qf__string_scalar_size(len) bytes, aligned for max_align_t) inside
 * block `home`; destroying it releases one object of `home`. */
qf_tensor *qf__string_scalar_place(void *mem, const char *s, size_t len, qf__home *home);

/* A two-component element of scalar strings (a record's key and value) in
 * one home block. NULL with RESOURCE_EXHAUSTED recorded on failure. */
qf_element *qf__element_of_two_strings(const char *s0, size_t len0, const char *s1, size_t len1);

/* The batch of component c of slots[0..n) (elements, or rows of string blocks, see
 * qf_strblock-impl.h) when every one of them is a scalar of dtype dt (not
 * QF_PTR): values are copied (strings into the batch's one arena, sparse
 * tensors shared by reference), the slots are left as they are.
 * QF_UNIMPLEMENTED, with no error recorded, when some slot does not
 * qualify: the caller then takes the general path (qf_tensor_stack()),
 * which reports or handles it. */
qf_code qf__stack_scalars(void *const *slots, size_t n, size_t c, qf_dtype dt,
                          qf_tensor **ret_batch);

/* The batch of the values of row slots[0..n) (every slot a row, see
 * qf_strblock-impl.h) without copying them: string i points at row i's value,
 * and the tensor takes over the slots (it consumes the rows when it is
 * destroyed; a string replaced with qf_tensor_set_string() is owned as
 * usual). QF_UNIMPLEMENTED, nothing recorded and nothing taken, when some
 * slot is not a row; RESOURCE_EXHAUSTED (nothing taken) on OOM. */
qf_code qf__stack_rows_borrowed(void **slots, size_t n, qf_tensor **ret_batch);

#endif
