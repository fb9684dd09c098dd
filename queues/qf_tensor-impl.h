/* qf_tensor-impl.h - internals shared by qf_tensor.c, qf_element.c and the
 * readers (never installed).
 *
 * A "home block" lets one allocation hold an element together with the
 * tensors it starts out with. Readers make one small (key, value) element
 * per record and a consumer on another thread frees it, so every separate
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

typedef struct qf__home {
    _Atomic uint32_t live; /* objects in the block not yet destroyed */
} qf__home;

/* One object of the block is gone; the last frees the block. Any thread. */
void qf__home_release(qf__home *h);

/* Bytes a scalar string tensor of `len` bytes takes inside a block, a
 * multiple of alignof(max_align_t). */
size_t qf__string_scalar_size(size_t len);
/* Build a scalar string tensor (refcount 1) holding a copy of s[0..len) at
 * `mem` (qf__string_scalar_size(len) bytes, aligned for max_align_t) inside
 * block `home`; destroying it releases one object of `home`. */
qf_tensor *qf__string_scalar_place(void *mem, const char *s, size_t len, qf__home *home);

/* A two-component element of scalar strings (a reader's key and value) in
 * one home block. NULL with RESOURCE_EXHAUSTED recorded on failure. */
qf_element *qf__element_of_two_strings(const char *s0, size_t len0, const char *s1, size_t len1);

#endif
