/* qf_tensor.h - dtypes, shapes, reference-counted tensors.
 *
 * A tensor is a dtype, a fully defined shape and a dense row-major buffer.
 * Tensors are reference counted and immutable once shared: mutate only a
 * tensor whose reference count is 1 (one you just made).
 *
 * Element storage by dtype:
 *   numbers, bool, float16 (raw uint16 bits), complex (pairs of floats):
 *       plain arrays, qf_tensor_data() gives the pointer;
 *   QF_STRING: each element an owned byte string (length + bytes, may hold
 *       NULs); access with qf_tensor_string() / qf_tensor_set_string();
 *   QF_PTR: each element an opaque void*; when the tensor has a destructor
 *       it owns the objects and calls the destructor on every non-NULL
 *       element when the last reference goes;
 *   QF_SPARSE: each element a reference to a sparse tensor (qf_sparse.h),
 *       NULL until set; copies, slices and stacks share them (they are
 *       immutable); access with qf_tensor_sparse() / qf_tensor_set_sparse().
 *
 * Synchronization table
 *   dtype/shape helpers          pure, any thread, wait-free
 *   qf_tensor_ref / unref        any thread, lock-free (one atomic RMW)
 *   readers of a shared tensor   any threads concurrently
 *   writers (set_*)              only the sole owner (refcount 1)
 *
 * Bad input. The shape functions treat NULL as an invalid shape (false, -1,
 * an invalid shape, "<invalid>"), quietly. A NULL tensor or element given
 * to a call that returns a qf_code is QF_INVALID_ARGUMENT naming it; the
 * accessors return a neutral value (NULL, 0, -1, QF_DT_INVALID, false) and
 * record that error; ref/unref/free accept NULL quietly. Calls documented
 * to take a reference "also on failure" take it on these failures too.
 */
#ifndef QF_TENSOR_H
#define QF_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"

QF_BEGIN_DECLS

/* Values match TensorFlow's DataType enum where TensorFlow has the type,
 * so a dtype written out reads the same in both systems. */
typedef enum qf_dtype {
    QF_DT_INVALID = 0,
    QF_FLOAT32 = 1,
    QF_FLOAT64 = 2,
    QF_INT32 = 3,
    QF_UINT8 = 4,
    QF_INT16 = 5,
    QF_INT8 = 6,
    QF_STRING = 7,
    QF_COMPLEX64 = 8,
    QF_INT64 = 9,
    QF_BOOL = 10,
    QF_UINT16 = 17,
    QF_COMPLEX128 = 18,
    QF_FLOAT16 = 19,
    QF_UINT32 = 22,
    QF_UINT64 = 23,
    QF_PTR = 100,    /* qflow only: opaque user object */
    QF_SPARSE = 101, /* qflow only: a sparse tensor (qf_sparse.h) */
} qf_dtype;

/* A sparse tensor, TensorFlow's SparseTensor (qf_sparse.h). */
typedef struct qf_sparse qf_sparse;

/** qf_dtype_is_valid() - true for every value listed above except INVALID. */
QF_API bool qf_dtype_is_valid(qf_dtype dt);
/** qf_dtype_name() - TensorFlow's name ("float", "double", "int32",
 *  "string", "half", "complex64", "bool", ...; "ptr" for QF_PTR, "sparse"
 *  for QF_SPARSE; "invalid" otherwise). Static string. */
QF_API const char *qf_dtype_name(qf_dtype dt);
/** qf_dtype_size() - bytes per element in the buffer: sizeof(qf_string)
 *  for QF_STRING, sizeof(void*) for QF_PTR and QF_SPARSE, 0 for invalid. */
QF_API size_t qf_dtype_size(qf_dtype dt);

/* One element of a QF_STRING tensor's buffer. Owned by the tensor. */
typedef struct qf_string {
    size_t len;
    char *data; /* NUL-terminated for convenience; may contain NULs;
                 * may be NULL when len is 0 */
} qf_string;

/* ------------------------------------------------------------------ shapes */

#define QF_MAX_RANK 8
#define QF_UNKNOWN_DIM ((int64_t)-1)
#define QF_UNKNOWN_RANK ((int32_t)-1)

/* A value type. rank QF_UNKNOWN_RANK means "any shape"; a dimension of
 * QF_UNKNOWN_DIM means "any size" (padding queues). Unused dims are 0. */
typedef struct qf_shape {
    int32_t rank;
    int64_t dims[QF_MAX_RANK];
} qf_shape;

/** qf_shape_scalar() - the shape [] (rank 0). */
QF_API qf_shape qf_shape_scalar(void);
/** qf_shape_unknown() - unknown rank. */
QF_API qf_shape qf_shape_unknown(void);
/** qf_shape_make() - a shape from `rank` dims (QF_UNKNOWN_DIM allowed).
 *  rank outside 0..QF_MAX_RANK or a dim < -1 gives an unknown-rank shape
 *  with rank set to QF_UNKNOWN_RANK - 1 (-2), which every function here
 *  treats as invalid (qf_shape_is_valid() is false). */
QF_API qf_shape qf_shape_make(int rank, const int64_t *dims);
/* QF_SHAPE(3, 2) -> the shape [3,2]. Use qf_shape_scalar() for []. In C
 * a compound literal; C++ has none (g++ -Wpedantic warns), so there it is
 * a small inline function template at the end of this header. */
#ifdef __cplusplus
#define QF_SHAPE(...) qf__shape_of(__VA_ARGS__)
#else
#define QF_SHAPE(...)                                                                              \
    qf_shape_make((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                       \
                  (const int64_t[]){__VA_ARGS__})
#endif

QF_API bool qf_shape_is_valid(const qf_shape *s);
/** Known rank and no unknown dimension. */
QF_API bool qf_shape_is_fully_defined(const qf_shape *s);
/** Product of dims (1 for a scalar); -1 if not fully defined or the
 *  product overflows int64_t. */
QF_API int64_t qf_shape_num_elements(const qf_shape *s);
/** Same rank and same dims (unknown equals only unknown). */
QF_API bool qf_shape_equal(const qf_shape *a, const qf_shape *b);
/** Compatible: either rank unknown, or same rank and every pair of dims
 *  equal or at least one unknown. */
QF_API bool qf_shape_compatible(const qf_shape *a, const qf_shape *b);
/** qf_shape_prepend() - [d] + s (for batch shapes). s must have known rank
 *  below QF_MAX_RANK; otherwise returns an invalid shape. */
QF_API qf_shape qf_shape_prepend(int64_t d, const qf_shape *s);
/** qf_shape_format() - TensorFlow's text: "[3,4]", "[]", "[?,3]", "<unknown>".
 *  Writes at most `cap` bytes including the NUL; returns `buf`. */
QF_API char *qf_shape_format(const qf_shape *s, char *buf, size_t cap);

/* ----------------------------------------------------------------- tensors */

typedef struct qf_tensor qf_tensor;
typedef void (*qf_ptr_dtor)(void *obj);

/**
 * qf_tensor_new() - a zero-filled tensor (strings empty, pointers NULL).
 *
 * Ownership:   the caller holds the only reference.
 * Blocking:    never (allocates). Concurrency: any thread.
 * Returns:     the tensor, or NULL with qf_last_code() INVALID_ARGUMENT
 *              (invalid dtype, shape not fully defined or invalid) or
 *              RESOURCE_EXHAUSTED (allocation failed or size overflows).
 */
QF_API qf_tensor *qf_tensor_new(qf_dtype dt, const qf_shape *shape);
/** qf_tensor_new_ptr() - a QF_PTR tensor; a non-NULL `dtor` makes the
 *  tensor own the objects stored in it. */
QF_API qf_tensor *qf_tensor_new_ptr(const qf_shape *shape, qf_ptr_dtor dtor);
/** qf_tensor_new_from() - a tensor holding a copy of `n_bytes` of raw data
 *  (numeric and bool dtypes only; n_bytes must equal the buffer size). */
QF_API qf_tensor *qf_tensor_new_from(qf_dtype dt, const qf_shape *shape, const void *data,
                                     size_t n_bytes);

/* Scalars, the common case. Same ownership and errors as qf_tensor_new(). */
QF_API qf_tensor *qf_tensor_new_bool(bool v);
QF_API qf_tensor *qf_tensor_new_i32(int32_t v);
QF_API qf_tensor *qf_tensor_new_i64(int64_t v);
QF_API qf_tensor *qf_tensor_new_f32(float v);
QF_API qf_tensor *qf_tensor_new_f64(double v);
/** A scalar string holding a copy of `len` bytes of `s` (len may be 0). */
QF_API qf_tensor *qf_tensor_new_string(const char *s, size_t len);
/** Convenience: a scalar string from a NUL-terminated C string. */
QF_API qf_tensor *qf_tensor_new_cstr(const char *s);
/** A scalar pointer; with a dtor the tensor owns `p`. */
QF_API qf_tensor *qf_tensor_new_scalar_ptr(void *p, qf_ptr_dtor dtor);

/** qf_tensor_ref() - add a reference; returns t. NULL-safe. Lock-free. */
QF_API qf_tensor *qf_tensor_ref(qf_tensor *t);
/** qf_tensor_unref() - drop a reference; the last frees the tensor (and runs
 *  the pointer destructor on owned objects). NULL-safe. Lock-free. */
QF_API void qf_tensor_unref(qf_tensor *t);
/** Current reference count (a snapshot). */
QF_API uint32_t qf_tensor_refcount(const qf_tensor *t);

QF_API qf_dtype qf_tensor_dtype(const qf_tensor *t);
/** The shape, owned by the tensor, valid while a reference is held. */
QF_API const qf_shape *qf_tensor_shape(const qf_tensor *t);
QF_API int64_t qf_tensor_num_elements(const qf_tensor *t);
/** The buffer: n elements of qf_dtype_size() bytes. For strings an array of
 *  qf_string (read-only unless sole owner), for QF_PTR an array of void*. */
QF_API void *qf_tensor_data(qf_tensor *t);
QF_API const void *qf_tensor_cdata(const qf_tensor *t);
/** The pointer destructor of a QF_PTR tensor (NULL otherwise). */
QF_API qf_ptr_dtor qf_tensor_ptr_dtor(const qf_tensor *t);

/** Element i of a string tensor; *ret_len gets its length when non-NULL.
 *  NULL (and INVALID_ARGUMENT) for a non-string tensor or i out of range. */
QF_API const char *qf_tensor_string(const qf_tensor *t, int64_t i, size_t *ret_len);
/** Replace element i of a string tensor with a copy of `len` bytes.
 *  Returns QF_OK, INVALID_ARGUMENT, or FAILED_PRECONDITION when shared. */
QF_API qf_code qf_tensor_set_string(qf_tensor *t, int64_t i, const char *s, size_t len);
/** Element i of a QF_PTR tensor (NULL if out of range). */
QF_API void *qf_tensor_ptr(const qf_tensor *t, int64_t i);
/** Store a pointer (the tensor owns it if it has a dtor; an object already
 *  there is destroyed). Sole owner only. */
QF_API qf_code qf_tensor_set_ptr(qf_tensor *t, int64_t i, void *p);
/** Take element i out of a QF_PTR tensor, leaving NULL: ownership of the
 *  object moves to the caller. Sole owner only (else FAILED_PRECONDITION). */
QF_API qf_code qf_tensor_take_ptr(qf_tensor *t, int64_t i, void **ret_p);

/** qf_tensor_equal() - same dtype, shape and contents (strings by bytes,
 *  pointers by address, floats bitwise). */
QF_API bool qf_tensor_equal(const qf_tensor *a, const qf_tensor *b);

/**
 * qf_tensor_copy() - a deep copy with refcount 1.
 * Errors:      FAILED_PRECONDITION for a QF_PTR tensor that owns its objects
 *              (they cannot be duplicated); NULL is returned then.
 */
QF_API qf_tensor *qf_tensor_copy(const qf_tensor *t);

/**
 * qf_tensor_stack() - stack n tensors of one dtype and shape along a new
 * first dimension: the result has shape [n] + shape.
 *
 * Ownership:   consumes one reference of every part (also on failure: the
 *              parts are released either way, so a caller never leaks).
 *              Owned QF_PTR objects move into the result when a part's
 *              reference was the last one; if a part with a destructor is
 *              still shared, the call fails with FAILED_PRECONDITION.
 * n == 0:      `elem_shape` (fully defined) and `dt` give the result [0]+shape;
 *              otherwise they may be NULL / QF_DT_INVALID, or are checked.
 * Returns:     QF_OK and *ret_batch; INVALID_ARGUMENT when dtypes or shapes
 *              differ ("... Expected [2], got [3]"), for a NULL part, or
 *              NULL parts (n > 0) or ret_batch. *ret_batch untouched on
 *              failure.
 */
QF_API qf_code qf_tensor_stack(qf_tensor **parts, size_t n, qf_dtype dt, const qf_shape *elem_shape,
                               qf_tensor **ret_batch);

/**
 * qf_tensor_stack_padded() - like qf_tensor_stack() but the parts may differ
 * in the dimensions that `pad_shape` leaves unknown: each unknown dimension
 * is padded to the largest size among the parts (0 for numbers, false, NULL
 * pointers, "" for strings). Known dimensions of pad_shape must match. With
 * n == 0 the unknown dimensions become 0. Any rank up to QF_MAX_RANK.
 */
QF_API qf_code qf_tensor_stack_padded(qf_tensor **parts, size_t n, qf_dtype dt,
                                      const qf_shape *pad_shape, qf_tensor **ret_batch);

/**
 * qf_tensor_unstack() - split a tensor of rank >= 1 along its first
 * dimension into dims[0] tensors of shape dims[1..].
 *
 * Ownership:   consumes one reference of `batch` (also on failure); owned
 *              QF_PTR objects move out only if that was the last reference,
 *              else FAILED_PRECONDITION. ret_parts must have room for
 *              dims[0] pointers; each written part has refcount 1.
 * Returns:     QF_OK; INVALID_ARGUMENT for a scalar.
 */
QF_API qf_code qf_tensor_unstack(qf_tensor *batch, qf_tensor **ret_parts);

/** qf_tensor_slice() - a new tensor holding row i of t (rank >= 1).
 *  Does not consume t. NULL and INVALID_ARGUMENT if out of range;
 *  FAILED_PRECONDITION for an owning QF_PTR tensor. */
QF_API qf_tensor *qf_tensor_slice(const qf_tensor *t, int64_t i);

/* ---------------------------------------------------------------- elements */

/* An element: a tuple of tensors, optionally with component names. */
typedef struct qf_element qf_element;

/** qf_element_new() - an element of n empty (NULL) components, n >= 1.
 *  NULL with INVALID_ARGUMENT for n == 0 or n > 4096. */
QF_API qf_element *qf_element_new(size_t n);
/** qf_element_of() - an element from n tensors; takes ownership of one
 *  reference of each (also on failure). */
QF_API qf_element *qf_element_of(size_t n, qf_tensor *const *tensors);
/** qf_element_free() - release the element and its references. NULL-safe. */
QF_API void qf_element_free(qf_element *e);
QF_API size_t qf_element_size(const qf_element *e);
/** Put t at i, taking ownership of one reference (also on failure); a
 *  tensor already there is released. INVALID_ARGUMENT if i is out of range. */
QF_API qf_code qf_element_set(qf_element *e, size_t i, qf_tensor *t);
/** The tensor at i, borrowed (valid while e holds it); NULL if none. */
QF_API qf_tensor *qf_element_get(const qf_element *e, size_t i);
/** Move the tensor at i out (the caller owns that reference); NULL if none. */
QF_API qf_tensor *qf_element_take(qf_element *e, size_t i);
/** Name the components (copies the strings). names == NULL clears them.
 *  Names must be distinct and non-empty (else INVALID_ARGUMENT). */
QF_API qf_code qf_element_set_names(qf_element *e, const char *const *names);
/** Component names: true when the element carries names. */
QF_API bool qf_element_has_names(const qf_element *e);
/** Name of component i, NULL when unnamed. */
QF_API const char *qf_element_name(const qf_element *e, size_t i);
/** The component called `name`, borrowed; NULL if none. */
QF_API qf_tensor *qf_element_get_by_name(const qf_element *e, const char *name);

QF_END_DECLS

#ifdef __cplusplus
/* QF_SHAPE in C++ (outside extern "C": a template has C++ linkage). */
template <typename... Dims> inline qf_shape qf__shape_of(Dims... dims)
{
    const int64_t d[] = {static_cast<int64_t>(dims)...};
    return qf_shape_make(static_cast<int>(sizeof...(Dims)), d);
}
#endif

#endif
