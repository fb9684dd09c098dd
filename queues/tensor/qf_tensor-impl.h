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

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_tensor.h"

/* The layouts, here so that the queue's per-element checks and the scalar
 * fast paths read fields instead of calling an accessor per field. Only
 * qf_tensor.c and qf_element.c write them. */
typedef struct qf__home {
    _Atomic uint32_t live; /* objects in the block not yet destroyed */
    uint8_t block_class;   /* qf__block_alloc()'s class of the block (0: malloc()) */
} qf__home;

struct qf_tensor {
    /* What every owner touches (refcount, destroy, the block's return)
     * shares the first cache line; the shape and string-arena bookkeeping
     * come after, so a consumer that only reads a scalar's value and frees
     * it leaves the producer's copy of the middle line alone. */
    _Atomic uint32_t refs;
    qf_dtype dtype;
    qf_ptr_dtor dtor;
    int64_t n; /* number of elements */
    size_t nbytes;
    /* NULL: the tensor is its own allocation. Else it lives in a block
     * shared with other objects (see qf_tensor-impl.h), released instead
     * of freed. */
    qf__home *home;
    /* NULL, or (QF_STRING built by qf__stack_rows_borrowed()) the n row
     * slots whose values string i borrows while s[i].data still points at
     * them; released when the tensor is destroyed. */
    void **held;
    /* No string was replaced since the tensor borrowed them all, or since
     * a batch of rows wrote them all into its arena: destroying it frees
     * none. */
    bool all_borrowed;
    /* qf__block_alloc()'s class of this tensor's own allocation (0: plain
     * malloc()). */
    uint8_t block_class;
    /* With held: every held row is of a block with bare_ends (found as the
     * values were filled in, qf__rows_values()). Read only when held is
     * set, which only qf__stack_rows_borrowed() does. */
    bool held_bare;
    /* QF_STRING: string storage at buf + nbytes: arena_cap bytes, of which
     * arena_used are handed out. Both 0 for other dtypes. */
    size_t arena_cap;
    size_t arena_used;
    qf_shape shape;
    alignas(max_align_t) unsigned char buf[];
};

struct qf_element {
    size_t n;
    char **names;        /* NULL, or n distinct non-empty strings */
    qf__home *home;      /* NULL, or the block it shares with its first tensors */
    uint8_t block_class; /* qf__block_alloc()'s, when home is NULL */
    qf_tensor *comps[];
};

/* Components an element holds at most (qf_element_new()); queues hold
 * elements, so it bounds their num_components too. */
#define QF__MAX_COMPONENTS 4096

/* A scalar of numeric or bool dtype dt (not QF_STRING, QF_PTR or
 * QF_SPARSE: the caller knows) holding qf_dtype_size(dt) bytes from v,
 * built without the checks qf_tensor_new_from() makes. NULL with
 * RESOURCE_EXHAUSTED recorded when out of memory. */
qf_tensor *qf__tensor_new_scalar(qf_dtype dt, const void *v);

/* A tensor of numeric or bool dtype dt (not QF_STRING, QF_PTR or
 * QF_SPARSE), of the fully defined `shape` (dims past its rank 0), n
 * elements and nbytes bytes (the caller computed both), its buffer a copy
 * of data[0..nbytes) or, with data NULL, left for the caller to fill:
 * built without the checks and the zeroing qf_tensor_new() makes (the
 * packed queues' dequeues make one per component). NULL with
 * RESOURCE_EXHAUSTED recorded when out of memory. */
qf_tensor *qf__tensor_new_dense(qf_dtype dt, const qf_shape *shape, int64_t n, size_t nbytes,
                                const void *data);

/* Frees the block of t, a tensor of its own block (no home) that nothing
 * else owns and whose values own nothing (destroyed, or numeric or bool):
 * a scalar goes to this thread's block stash, made, for the next scalar
 * (qf_tensor.c's new_scalar()), anything else to qf__block_free(). */
void qf__tensor_free_block(qf_tensor *t);

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

/* qf_element_free() of an element whose components are all numeric or
 * bool (the elements a packed queue admits, once their values are copied
 * out): what it holds goes back to the block cache without a look at each
 * tensor's dtype. Any other element must go through qf_element_free(). */
void qf__element_free_plain(qf_element *e);

/* Bytes a scalar string tensor of `len` bytes takes inside a block, a
 * multiple of alignof(max_align_t). */
size_t qf__string_scalar_size(size_t len);
/* Build a scalar string tensor (refcount 1) holding a copy of s[0..len) at
 * `mem` (qf__string_scalar_size(len) bytes, aligned for max_align_t) inside
 * block `home`; destroying it releases one object of `home`. */
qf_tensor *qf__string_scalar_place(void *mem, const char *s, size_t len, qf__home *home);

/* One component of an element built from packed values
 * (qf__element_of_dense()): a numeric or bool dtype (not QF_STRING, QF_PTR
 * or QF_SPARSE), a fully defined shape (dims past its rank 0) of n values
 * taking nbytes, found at `off` in the packed values; home_off is its
 * tensor's place in the element's home block (qf__dense_layout()). */
typedef struct qf__dense_comp {
    qf_dtype dtype;
    int64_t n;
    size_t nbytes;
    size_t off;
    size_t home_off;
    qf_shape shape;
} qf__dense_comp;

/* Places the tensors of an element of comps[0..n) in one home block: sets
 * each home_off and returns the block's size. */
size_t qf__dense_layout(size_t n, qf__dense_comp *comps);

/* An element of n dense tensors holding copies of their values from
 * `values` (at each comp's off; NULL: left unwritten, for a caller that
 * writes every value itself), the element and its tensors in one home
 * block of home_bytes (qf__dense_layout()) from the calling thread's block
 * cache: one allocation and, when the element is freed with its tensors,
 * one release. NULL with RESOURCE_EXHAUSTED recorded when out of memory. */
qf_element *qf__element_of_dense(size_t n, const qf__dense_comp *comps, size_t home_bytes,
                                 const void *values);

/* An element of one dense tensor of dtype dt (numeric or bool) and shape
 * sh (fully defined, its dims past its rank 0) of n values in nbytes, the
 * element and the tensor in one home block (qf__element_of_dense()); the
 * caller writes the values. What a dequeue of an inline queue of numbers
 * returns: one block from the consumer's cache and, when the element is
 * freed, one release, where a tensor and an element were two of each.
 * NULL with RESOURCE_EXHAUSTED recorded when out of memory. */
qf_element *qf__element_of_one_dense(qf_dtype dt, const qf_shape *sh, int64_t n, size_t nbytes);

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
/* Whether t is a string tensor all of whose values still are the rows it
 * borrowed (qf__stack_rows_borrowed(); none set since with
 * qf_tensor_set_string(), which the internal callers, qflow-lines, never
 * write behind the tensor's back) from blocks written without NULs
 * (qf__queue_rows_by_length()): each non-empty value's next byte is the
 * end its source gave it ('\n', or the '\r' of "\r\n"), and the bytes
 * between consecutive rows of a block are the source's. False for any
 * other tensor, whose values may be NUL-terminated anywhere. */
bool qf__strings_keep_ends(const qf_tensor *t);

/* Whether qf_tensor_stack() (pad false) or qf_tensor_stack_padded() (pad
 * true) would accept these parts, without consuming or changing them: the
 * same checks and errors, recorded the same way. What it cannot foresee is
 * running out of memory. A caller that must not lose its parts to a refused
 * stack (a queue building a batch from elements it took) checks every
 * component first and moves the parts only after. */
qf_code qf__tensor_stack_check(qf_tensor *const *parts, size_t n, qf_dtype dt,
                               const qf_shape *shape, bool pad);

#endif
