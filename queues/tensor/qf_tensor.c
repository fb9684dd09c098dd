/* qf_tensor.c - dtypes, shapes and reference-counted tensors.
 *
 * A tensor is one allocation: the header followed by its buffer. A QF_PTR
 * buffer holds the user's pointers. String bytes (an empty string has data
 * NULL) live either in the tensor's "arena", a tail of the same allocation
 * after the buffer sized when the tensor is made, or in a malloc'd block of
 * their own. The arena is what keeps the per-string cost of a text pipeline
 * down: a scalar string is one allocation instead of two, a stacked batch of
 * strings one instead of one per row, and freeing either is one free().
 * Whether a string is in the arena is decided by its address (in_arena()),
 * so a tensor may mix both kinds: qf_tensor_set_string() and strings stolen
 * from a consumed source are separate blocks.
 *
 * A QF_SPARSE buffer holds references to sparse tensors (qf_sparse.h).
 * They are immutable, so copying one is taking a reference: copies, slices
 * and stacks share them, and moving one out of a consumed source leaves
 * NULL behind, as for owned pointers.
 *
 * Stack and unstack consume references. When the consumed reference is the
 * last one nobody else can observe the source any more, so separately
 * allocated strings and owned pointers are moved instead of copied, and the
 * source is left holding empty strings and NULL pointers so that destroying
 * it frees nothing twice. Strings in the source's arena die with the source
 * and are copied into the destination's arena, which the caller sizes for
 * exactly those (string_copy_bytes()). Owned
 * pointers cannot be copied, so a still-shared source that owns pointers is
 * an error (FAILED_PRECONDITION).
 */
#include "qf_tensor.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_blockcache-impl.h"
#include "qf_sparse.h"
#include "qf_strblock-impl.h"
#include "qf_tensor-impl.h"
#include "qf_tsan-impl.h"
#include "qf_status-impl.h"

/* Longest text qf_shape_format() can produce: 8 dims of up to 19 digits,
 * commas, brackets and the NUL. */
#define SHAPE_TEXT 192

/* ------------------------------------------------------------------ dtypes */

static inline size_t dtype_bytes(qf_dtype dt);

bool qf_dtype_is_valid(qf_dtype dt)
{
    return dtype_bytes(dt) != 0;
}

const char *qf_dtype_name(qf_dtype dt)
{
    switch (dt) {
    case QF_FLOAT32:
        return "float";
    case QF_FLOAT64:
        return "double";
    case QF_INT32:
        return "int32";
    case QF_UINT8:
        return "uint8";
    case QF_INT16:
        return "int16";
    case QF_INT8:
        return "int8";
    case QF_STRING:
        return "string";
    case QF_COMPLEX64:
        return "complex64";
    case QF_INT64:
        return "int64";
    case QF_BOOL:
        return "bool";
    case QF_UINT16:
        return "uint16";
    case QF_COMPLEX128:
        return "complex128";
    case QF_FLOAT16:
        return "half";
    case QF_UINT32:
        return "uint32";
    case QF_UINT64:
        return "uint64";
    case QF_PTR:
        return "ptr";
    case QF_SPARSE:
        return "sparse";
    case QF_DT_INVALID:
        break;
    }
    return "invalid";
}

/* qf_dtype_size(), which the library's own callers may inline: a table
 * lookup inside qf_tensor_new() where an exported function is a call. */
static inline size_t dtype_bytes(qf_dtype dt)
{
    switch (dt) {
    case QF_FLOAT32:
        return sizeof(float);
    case QF_FLOAT64:
        return sizeof(double);
    case QF_INT32:
        return sizeof(int32_t);
    case QF_UINT8:
        return sizeof(uint8_t);
    case QF_INT16:
        return sizeof(int16_t);
    case QF_INT8:
        return sizeof(int8_t);
    case QF_STRING:
        return sizeof(qf_string);
    case QF_COMPLEX64:
        return 2 * sizeof(float);
    case QF_INT64:
        return sizeof(int64_t);
    case QF_BOOL:
        return sizeof(bool);
    case QF_UINT16:
        return sizeof(uint16_t);
    case QF_COMPLEX128:
        return 2 * sizeof(double);
    case QF_FLOAT16:
        return sizeof(uint16_t);
    case QF_UINT32:
        return sizeof(uint32_t);
    case QF_UINT64:
        return sizeof(uint64_t);
    case QF_PTR:
    case QF_SPARSE:
        return sizeof(void *);
    case QF_DT_INVALID:
        break;
    }
    return 0;
}

size_t qf_dtype_size(qf_dtype dt)
{
    return dtype_bytes(dt);
}

/* ------------------------------------------------------------------ shapes */

static qf_shape shape_invalid(void)
{
    qf_shape s = {QF_UNKNOWN_RANK - 1, {0}};
    return s;
}

qf_shape qf_shape_scalar(void)
{
    qf_shape s = {0, {0}};
    return s;
}

qf_shape qf_shape_unknown(void)
{
    qf_shape s = {QF_UNKNOWN_RANK, {0}};
    return s;
}

/* Dimension i of a shape of `rank` dims, 0 past the rank. */
static inline int64_t dim_or_zero(int rank, const int64_t *dims, int i)
{
    return i < rank ? dims[i] : 0;
}

_Static_assert(QF_MAX_RANK == 8, "qf_shape_make() names every dimension");

qf_shape qf_shape_make(int rank, const int64_t *dims)
{
    if (rank < 0 || rank > QF_MAX_RANK || (rank > 0 && !dims))
        return shape_invalid();
    for (int i = 0; i < rank; i++)
        if (dims[i] < QF_UNKNOWN_DIM)
            return shape_invalid();
    /* Each field goes from a register to the caller's shape, one store
     * each. Built in a local by a loop and then returned, the shape was
     * copied with 16-byte loads that each spanned two of the loop's 8-byte
     * stores, which the processor cannot forward: every QF_SHAPE() waited
     * for its stores to retire (perf: 10% of a producer making (int64,
     * float32 [16]) elements, all on the copy's loads). */
    return (qf_shape){rank,
                      {dim_or_zero(rank, dims, 0), dim_or_zero(rank, dims, 1),
                       dim_or_zero(rank, dims, 2), dim_or_zero(rank, dims, 3),
                       dim_or_zero(rank, dims, 4), dim_or_zero(rank, dims, 5),
                       dim_or_zero(rank, dims, 6), dim_or_zero(rank, dims, 7)}};
}

bool qf_shape_is_valid(const qf_shape *s)
{
    if (!s)
        return false;
    if (s->rank == QF_UNKNOWN_RANK)
        return true;
    if (s->rank < 0 || s->rank > QF_MAX_RANK)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < QF_UNKNOWN_DIM)
            return false;
    return true;
}

bool qf_shape_is_fully_defined(const qf_shape *s)
{
    if (!qf_shape_is_valid(s) || s->rank == QF_UNKNOWN_RANK)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] == QF_UNKNOWN_DIM)
            return false;
    return true;
}

/* Element count of a fully defined shape; false if the product overflows. */
static bool checked_num_elements(const qf_shape *s, int64_t *ret)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dims[i], &n))
            return false;
    *ret = n;
    return true;
}

int64_t qf_shape_num_elements(const qf_shape *s)
{
    int64_t n;
    if (!qf_shape_is_fully_defined(s) || !checked_num_elements(s, &n))
        return -1;
    return n;
}

bool qf_shape_equal(const qf_shape *a, const qf_shape *b)
{
    if (!qf_shape_is_valid(a) || !qf_shape_is_valid(b) || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

bool qf_shape_compatible(const qf_shape *a, const qf_shape *b)
{
    if (!qf_shape_is_valid(a) || !qf_shape_is_valid(b))
        return false;
    if (a->rank == QF_UNKNOWN_RANK || b->rank == QF_UNKNOWN_RANK)
        return true;
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i] && a->dims[i] != QF_UNKNOWN_DIM &&
            b->dims[i] != QF_UNKNOWN_DIM)
            return false;
    return true;
}

qf_shape qf_shape_prepend(int64_t d, const qf_shape *s)
{
    if (!qf_shape_is_valid(s) || s->rank == QF_UNKNOWN_RANK || s->rank >= QF_MAX_RANK ||
        d < QF_UNKNOWN_DIM)
        return shape_invalid();
    /* Field by field from registers, as qf_shape_make() (a batch's shape
     * is made and read at once). */
    int r = s->rank;
    const int64_t *x = s->dims;
    return (qf_shape){r + 1,
                      {d, dim_or_zero(r, x, 0), dim_or_zero(r, x, 1), dim_or_zero(r, x, 2),
                       dim_or_zero(r, x, 3), dim_or_zero(r, x, 4), dim_or_zero(r, x, 5),
                       dim_or_zero(r, x, 6)}};
}

char *qf_shape_format(const qf_shape *s, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return buf;
    if (!qf_shape_is_valid(s)) {
        snprintf(buf, cap, "<invalid>");
        return buf;
    }
    if (s->rank == QF_UNKNOWN_RANK) {
        snprintf(buf, cap, "<unknown>");
        return buf;
    }
    /* Format in full first so truncation to `cap` is a plain prefix. */
    char text[SHAPE_TEXT];
    size_t pos = 0;
    text[pos++] = '[';
    for (int i = 0; i < s->rank; i++) {
        if (i > 0)
            text[pos++] = ',';
        if (s->dims[i] == QF_UNKNOWN_DIM)
            text[pos++] = '?';
        else
            pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "%lld", (long long)s->dims[i]);
    }
    text[pos++] = ']';
    text[pos] = '\0';
    snprintf(buf, cap, "%s", text);
    return buf;
}

/* ----------------------------------------------------------------- tensors */

static bool is_sole_owner(const qf_tensor *t)
{
    /* Acquire pairs with the release decrements of earlier owners, so their
     * reads of the contents happen before the caller's writes. */
    return atomic_load_explicit(&((qf_tensor *)t)->refs, memory_order_acquire) == 1;
}

/* Validates dt and shape and allocates a tensor, zero-filled (empty
 * strings, NULL pointers) when zero_buf, with `arena` bytes of string
 * storage (QF_STRING only). NULL with the error recorded on failure. */
static qf_tensor *tensor_alloc_buf(qf_dtype dt, const qf_shape *shape, qf_ptr_dtor dtor,
                                   size_t arena, bool zero_buf);

static qf_tensor *tensor_alloc(qf_dtype dt, const qf_shape *shape, qf_ptr_dtor dtor, size_t arena)
{
    return tensor_alloc_buf(dt, shape, dtor, arena, true);
}

/* The element count of shape when it is fully defined (a rank of 0 to
 * QF_MAX_RANK, every dimension >= 0) and the count does not overflow, in
 * one pass over the dimensions (a typed producer makes a tensor per item);
 * false otherwise. */
static bool plain_count(const qf_shape *shape, int64_t *ret_n)
{
    if (!shape || (uint32_t)shape->rank > QF_MAX_RANK)
        return false;
    int64_t n = 1;
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] < 0 || __builtin_mul_overflow(n, shape->dims[i], &n))
            return false;
    *ret_n = n;
    return true;
}

/* Records why dt and shape (refused by tensor_alloc_buf()'s checks) make
 * no tensor: an invalid dtype, a NULL or not fully defined shape, or a
 * size that overflows. Always NULL. Out of line: the hot path's frame
 * holds no text buffer. */
__attribute__((noinline, cold)) static qf_tensor *refuse_tensor(qf_dtype dt, const qf_shape *shape)
{
    char sh[SHAPE_TEXT];
    if (!qf_dtype_is_valid(dt))
        qf_set_error(QF_INVALID_ARGUMENT, "Invalid dtype %d", (int)dt);
    else if (!shape)
        qf_set_error(QF_INVALID_ARGUMENT, "Tensor shape is NULL");
    else if (!qf_shape_is_fully_defined(shape))
        qf_set_error(QF_INVALID_ARGUMENT, "Tensor shape %s is not fully defined",
                     qf_shape_format(shape, sh, sizeof(sh)));
    else
        qf_set_error(QF_RESOURCE_EXHAUSTED,
                     "OOM when allocating tensor with shape%s and type %s: size overflows",
                     qf_shape_format(shape, sh, sizeof(sh)), qf_dtype_name(dt));
    return NULL;
}

/* The out-of-memory error of a tensor of dt and shape. Always NULL. */
__attribute__((noinline, cold)) static qf_tensor *tensor_oom(qf_dtype dt, const qf_shape *shape)
{
    char sh[SHAPE_TEXT];
    qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating tensor with shape%s and type %s",
                 qf_shape_format(shape, sh, sizeof(sh)), qf_dtype_name(dt));
    return NULL;
}

/* tensor_alloc(), and with zero_buf false the buffer left unwritten: for a
 * caller that writes every entry itself (a batch of rows: a batch of 1024
 * lines would otherwise clear 16 KiB per component only to overwrite it). */
static qf_tensor *tensor_alloc_buf(qf_dtype dt, const qf_shape *shape, qf_ptr_dtor dtor,
                                   size_t arena, bool zero_buf)
{
    /* Checks first, with the errors out of line (refuse_tensor()). */
    size_t esz = dtype_bytes(dt), nbytes, total;
    int64_t n;
    if (esz == 0 || !plain_count(shape, &n) || (uint64_t)n > SIZE_MAX ||
        __builtin_mul_overflow((size_t)n, esz, &nbytes) ||
        __builtin_add_overflow(nbytes, sizeof(qf_tensor), &total) ||
        __builtin_add_overflow(total, dt == QF_STRING ? arena : 0, &total) || total > PTRDIFF_MAX)
        return refuse_tensor(dt, shape);
    /* Only the header and buffer need zeroing: the arena is written before
     * it is read. */
    uint8_t cls;
    qf_tensor *t = qf__block_alloc(total, &cls);
    if (!t)
        return tensor_oom(dt, shape);
    /* Field by field, and the buffer zeroed only when asked: the typed
     * element path makes one of these per item, and a batch's string table
     * is written before it is read. */
    if (zero_buf)
        memset(t->buf, 0, nbytes);
    t->block_class = cls;
    atomic_init(&t->refs, 1);
    t->dtype = dt;
    t->dtor = dt == QF_PTR ? dtor : NULL;
    t->n = n;
    t->nbytes = nbytes;
    t->home = NULL;
    t->held = NULL;
    t->all_borrowed = false;
    t->arena_used = 0;
    t->arena_cap = dt == QF_STRING ? arena : 0;
    /* Every dimension past the rank reads 0, whatever the caller's held.
     * A fixed count of selects, where a copy and a tail loop called
     * memset() for each tensor. */
    int rank = shape->rank;
    t->shape.rank = rank;
    for (int i = 0; i < QF_MAX_RANK; i++)
        t->shape.dims[i] = i < rank ? shape->dims[i] : 0;
    return t;
}

/* True when p points into t's arena (and so must not be freed on its own).
 * Compared as integers: p usually points into another object. */
static bool in_arena(const qf_tensor *t, const char *p)
{
    uintptr_t a = (uintptr_t)(t->buf + t->nbytes);
    return (uintptr_t)p - a < t->arena_cap;
}

/* True when string i of t is a block of its own that t must free: not in
 * the arena, not borrowed from a held row. */
static bool string_owned(const qf_tensor *t, int64_t i)
{
    const qf_string *s = &((const qf_string *)t->buf)[i];
    if (!s->data || in_arena(t, s->data))
        return false;
    return !t->held || s->data != qf__row_value(t->held[i]);
}

/* Scalars of up to this many bytes (every numeric and bool dtype) are
 * kept made on the dying thread's block stash (qf_blockcache-impl.h), and
 * new_scalar() takes them back writing only what differs: a typed
 * producer makes two or three such tensors per item and frees them in the
 * put (measured: one thread making (int64, int64) elements and putting
 * them, 39 -> 34.6 ns an element). All of them share one block class. */
#define STASH_SCALAR_BYTES 16

/* The block class of every scalar the stash holds: what qf__block_alloc()
 * gives for sizeof(qf_tensor) + 1 to + STASH_SCALAR_BYTES bytes (its small
 * classes are multiples of QF__BLOCK_GRAIN), so that a block taken back
 * always holds the largest scalar. new_scalar() takes only blocks of this
 * class from the stash. */
#define SCALAR_CLASS                                                                               \
    ((uint8_t)((sizeof(qf_tensor) + STASH_SCALAR_BYTES + QF__BLOCK_GRAIN - 1) / QF__BLOCK_GRAIN))
_Static_assert((sizeof(qf_tensor) + 1 + QF__BLOCK_GRAIN - 1) / QF__BLOCK_GRAIN == SCALAR_CLASS,
               "every stashed scalar fits every other's block");

void qf__tensor_free_block(qf_tensor *t)
{
    /* What new_scalar() leaves as it is must be what it would write: a
     * numeric or bool scalar of its own block (no home, no destructor, no
     * strings; a QF_PTR scalar without a destructor has the same header,
     * so it may go too). Shapes are set once, with every dim past the
     * rank 0. */
    bool made_scalar = t->n == 1 && t->shape.rank == 0 && t->nbytes <= STASH_SCALAR_BYTES &&
                       t->block_class == SCALAR_CLASS && !t->home && !t->dtor &&
                       t->dtype != QF_STRING && t->dtype != QF_SPARSE;
    if (!made_scalar || !qf__block_stash_push(t, t->block_class))
        qf__block_free(t, t->block_class);
}

static void tensor_destroy(qf_tensor *t)
{
    if (t->dtype == QF_STRING) {
        qf_string *s = (qf_string *)t->buf;
        if (!t->all_borrowed)
            for (int64_t i = 0; i < t->n; i++)
                if (string_owned(t, i))
                    free(s[i].data);
        if (t->held)
            qf__rows_release(t->held, (size_t)t->n);
    } else if (t->dtype == QF_PTR && t->dtor) {
        void **p = (void **)t->buf;
        for (int64_t i = 0; i < t->n; i++)
            if (p[i])
                t->dtor(p[i]);
    } else if (t->dtype == QF_SPARSE) {
        qf_sparse **p = (qf_sparse **)t->buf;
        for (int64_t i = 0; i < t->n; i++)
            qf_sparse_unref(p[i]);
    }
    if (t->home)
        qf__home_release(t->home);
    else
        qf__tensor_free_block(t);
}

void qf__home_release(qf__home *h)
{
    qf__home_release_n(h, 1);
}

void qf__home_release_n(qf__home *h, uint32_t k)
{
    /* All that is left of the block is ours (the usual case: a consumer's
     * element and its tensors go together): the count only ever falls, so
     * nobody else can touch it and no RMW is needed (a locked instruction
     * per typed dequeue). The acquire load pairs with the release
     * decrements of earlier holders, as in qf_tensor_unref(). */
    if (atomic_load_explicit(&h->live, memory_order_acquire) == k) {
        qf__block_free(h, h->block_class);
        return;
    }
    if (atomic_fetch_sub_explicit(&h->live, k, memory_order_release) != k)
        return;
#ifdef QF_TSAN
    /* As in qf_tensor_unref(): TSan understands the load, not the fence. */
    (void)atomic_load_explicit(&h->live, memory_order_acquire);
#else
    atomic_thread_fence(memory_order_acquire);
#endif
    qf__block_free(h, h->block_class);
}

qf_tensor *qf_tensor_new(qf_dtype dt, const qf_shape *shape)
{
    return tensor_alloc(dt, shape, NULL, 0);
}

qf_tensor *qf_tensor_new_ptr(const qf_shape *shape, qf_ptr_dtor dtor)
{
    return tensor_alloc(QF_PTR, shape, dtor, 0);
}

qf_tensor *qf_tensor_new_from(qf_dtype dt, const qf_shape *shape, const void *data, size_t n_bytes)
{
    if (dt == QF_STRING || dt == QF_PTR || dt == QF_SPARSE) {
        qf_set_error(QF_INVALID_ARGUMENT,
                     "qf_tensor_new_from takes numeric and bool dtypes only, got %s",
                     qf_dtype_name(dt));
        return NULL;
    }
    qf_tensor *t = tensor_alloc(dt, shape, NULL, 0);
    if (!t)
        return NULL;
    if (n_bytes != t->nbytes || (n_bytes > 0 && !data)) {
        char sh[SHAPE_TEXT];
        qf_set_error(QF_INVALID_ARGUMENT,
                     "Expected %zu bytes of data for a %s tensor of shape %s, got %zu%s", t->nbytes,
                     qf_dtype_name(dt), qf_shape_format(shape, sh, sizeof(sh)), n_bytes,
                     data ? "" : " (NULL)");
        qf__block_free(t, t->block_class);
        return NULL;
    }
    if (n_bytes > 0)
        memcpy(t->buf, data, n_bytes);
    return t;
}

/* A scalar of a numeric or bool dtype: nothing to validate, and the header
 * is written field by field (no memset of the whole block): the typed
 * element path makes one of these per item. */
static inline qf_tensor *new_scalar(qf_dtype dt, const void *v, size_t sz)
{
    /* One this thread kept made (qf__tensor_free_block()): its shape,
     * count, class and empty fields are a scalar's already. */
    qf_tensor *k = sz <= STASH_SCALAR_BYTES ? qf__block_stash_pop(SCALAR_CLASS) : NULL;
    if (k) {
        atomic_init(&k->refs, 1);
        k->dtype = dt;
        k->nbytes = sz;
        memcpy(k->buf, v, sz);
        return k;
    }
    uint8_t cls;
    qf_tensor *t = qf__block_alloc(sizeof(qf_tensor) + sz, &cls);
    if (!t) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a scalar tensor of type %s",
                     qf_dtype_name(dt));
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->dtype = dt;
    t->dtor = NULL;
    t->n = 1;
    t->nbytes = sz;
    t->arena_cap = 0;
    t->arena_used = 0;
    t->home = NULL;
    t->held = NULL;
    t->all_borrowed = false;
    t->block_class = cls;
    memset(&t->shape, 0, sizeof(t->shape));
    memcpy(t->buf, v, sz);
    return t;
}

qf_tensor *qf__tensor_new_scalar(qf_dtype dt, const void *v)
{
    return new_scalar(dt, v, qf_dtype_size(dt));
}

qf_tensor *qf__tensor_new_dense(qf_dtype dt, const qf_shape *shape, int64_t n, size_t nbytes,
                                const void *data)
{
    uint8_t cls;
    qf_tensor *t = qf__block_alloc(sizeof(qf_tensor) + nbytes, &cls);
    if (!t) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a tensor of type %s",
                     qf_dtype_name(dt));
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->dtype = dt;
    t->dtor = NULL;
    t->n = n;
    t->nbytes = nbytes;
    t->arena_cap = 0;
    t->arena_used = 0;
    t->home = NULL;
    t->held = NULL;
    t->all_borrowed = false;
    t->block_class = cls;
    t->shape = *shape; /* the caller's dims past its rank are 0 */
    if (data && nbytes > 0)
        memcpy(t->buf, data, nbytes);
    return t;
}

qf_tensor *qf_tensor_new_bool(bool v)
{
    return new_scalar(QF_BOOL, &v, sizeof v);
}

qf_tensor *qf_tensor_new_i32(int32_t v)
{
    return new_scalar(QF_INT32, &v, sizeof v);
}

qf_tensor *qf_tensor_new_i64(int64_t v)
{
    return new_scalar(QF_INT64, &v, sizeof v);
}

qf_tensor *qf_tensor_new_f32(float v)
{
    return new_scalar(QF_FLOAT32, &v, sizeof v);
}

qf_tensor *qf_tensor_new_f64(double v)
{
    return new_scalar(QF_FLOAT64, &v, sizeof v);
}

/* Fills *dst (assumed empty) with a copy of s; an empty string stays NULL. */
static qf_code string_assign(qf_string *dst, const char *s, size_t len)
{
    if (len == 0) {
        dst->len = 0;
        dst->data = NULL;
        return QF_OK;
    }
    char *d = len < SIZE_MAX ? malloc(len + 1) : NULL;
    if (!d)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a string of %zu bytes",
                            len);
    memcpy(d, s, len);
    d[len] = '\0';
    dst->len = len;
    dst->data = d;
    return QF_OK;
}

/* Fills the empty slot *dst of t with a copy of s: in t's arena when it has
 * room, else in a block of its own. */
static qf_code string_fill(qf_tensor *t, qf_string *dst, const char *s, size_t len)
{
    if (len == 0 || t->arena_cap - t->arena_used <= len)
        return string_assign(dst, s, len);
    char *d = (char *)t->buf + t->nbytes + t->arena_used;
    memcpy(d, s, len);
    d[len] = '\0';
    t->arena_used += len + 1;
    dst->len = len;
    dst->data = d;
    return QF_OK;
}

/* A scalar string at `mem`, which has room for header, slot and bytes. The
 * shape is known valid, so tensor_alloc()'s checks are not needed. */
static qf_tensor *string_scalar_init(void *mem, const char *s, size_t len, qf__home *home)
{
    qf_tensor *t = mem;
    memset(t, 0, sizeof(qf_tensor) + sizeof(qf_string));
    atomic_init(&t->refs, 1);
    t->dtype = QF_STRING;
    t->n = 1;
    t->nbytes = sizeof(qf_string);
    t->arena_cap = len > 0 ? len + 1 : 0;
    t->home = home;
    (void)string_fill(t, (qf_string *)t->buf, s, len); /* fits: cannot fail */
    return t;
}

size_t qf__string_scalar_size(size_t len)
{
    size_t a = alignof(max_align_t);
    size_t n = sizeof(qf_tensor) + sizeof(qf_string) + (len > 0 ? len + 1 : 0);
    return (n + a - 1) / a * a;
}

qf_tensor *qf__string_scalar_place(void *mem, const char *s, size_t len, qf__home *home)
{
    return string_scalar_init(mem, s, len, home);
}

qf_tensor *qf_tensor_new_string(const char *s, size_t len)
{
    if (!s && len > 0) {
        qf_set_error(QF_INVALID_ARGUMENT, "String data is NULL but length is %zu", len);
        return NULL;
    }
    /* One allocation holding header, slot and bytes. */
    if (len > PTRDIFF_MAX - sizeof(qf_tensor) - sizeof(qf_string) - 1) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a string of %zu bytes", len);
        return NULL;
    }
    void *mem = malloc(sizeof(qf_tensor) + sizeof(qf_string) + (len > 0 ? len + 1 : 0));
    if (!mem) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a string of %zu bytes", len);
        return NULL;
    }
    return string_scalar_init(mem, s, len, NULL);
}

qf_tensor *qf_tensor_new_cstr(const char *s)
{
    if (!s) {
        qf_set_error(QF_INVALID_ARGUMENT, "String is NULL");
        return NULL;
    }
    return qf_tensor_new_string(s, strlen(s));
}

qf_tensor *qf_tensor_new_scalar_ptr(void *p, qf_ptr_dtor dtor)
{
    qf_shape sh = qf_shape_scalar();
    qf_tensor *t = tensor_alloc(QF_PTR, &sh, dtor, 0);
    if (t)
        ((void **)t->buf)[0] = p;
    return t;
}

qf_tensor *qf_tensor_ref(qf_tensor *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void qf_tensor_unref(qf_tensor *t)
{
    if (!t)
        return;
    /* The last reference: nobody else can take a new one (references are
     * only made from references), so no RMW is needed. The acquire load
     * pairs with the release decrements of earlier owners. */
    if (atomic_load_explicit(&t->refs, memory_order_acquire) == 1) {
        tensor_destroy(t);
        return;
    }
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_release) != 1)
        return;
#ifdef QF_TSAN
    /* TSan does not model standalone fences; an acquire load of the same
     * counter gives the same ordering in a form it understands. */
    (void)atomic_load_explicit(&t->refs, memory_order_acquire);
#else
    atomic_thread_fence(memory_order_acquire);
#endif
    tensor_destroy(t);
}

/* The accessors' answer to a NULL tensor: a neutral value, and the error
 * recorded (a static message: these are called per element). */
static bool null_tensor(const qf_tensor *t, const char *msg)
{
    if (t)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

uint32_t qf_tensor_refcount(const qf_tensor *t)
{
    if (null_tensor(t, "qf_tensor_refcount: tensor (t) is NULL"))
        return 0;
    return atomic_load_explicit(&((qf_tensor *)t)->refs, memory_order_acquire);
}

qf_dtype qf_tensor_dtype(const qf_tensor *t)
{
    return null_tensor(t, "qf_tensor_dtype: tensor (t) is NULL") ? QF_DT_INVALID : t->dtype;
}

const qf_shape *qf_tensor_shape(const qf_tensor *t)
{
    return null_tensor(t, "qf_tensor_shape: tensor (t) is NULL") ? NULL : &t->shape;
}

int64_t qf_tensor_num_elements(const qf_tensor *t)
{
    return null_tensor(t, "qf_tensor_num_elements: tensor (t) is NULL") ? -1 : t->n;
}

void *qf_tensor_data(qf_tensor *t)
{
    return null_tensor(t, "qf_tensor_data: tensor (t) is NULL") ? NULL : t->buf;
}

const void *qf_tensor_cdata(const qf_tensor *t)
{
    return null_tensor(t, "qf_tensor_cdata: tensor (t) is NULL") ? NULL : t->buf;
}

qf_ptr_dtor qf_tensor_ptr_dtor(const qf_tensor *t)
{
    return null_tensor(t, "qf_tensor_ptr_dtor: tensor (t) is NULL") ? NULL : t->dtor;
}

/* Checks that t has dtype dt and i indexes an element. */
static qf_code check_index(const qf_tensor *t, qf_dtype dt, int64_t i)
{
    if (!t)
        return qf_set_error(QF_INVALID_ARGUMENT, "Tensor is NULL");
    if (t->dtype != dt)
        return qf_set_error(QF_INVALID_ARGUMENT, "Expected a %s tensor, got %s", qf_dtype_name(dt),
                            qf_dtype_name(t->dtype));
    if (i < 0 || i >= t->n)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Element index %lld out of range for a tensor of %lld elements",
                            (long long)i, (long long)t->n);
    return QF_OK;
}

static qf_code check_sole_owner(const qf_tensor *t)
{
    if (!is_sole_owner(t))
        return qf_set_error(QF_FAILED_PRECONDITION, "Cannot modify a shared tensor (refcount %u)",
                            qf_tensor_refcount(t));
    return QF_OK;
}

const char *qf_tensor_string(const qf_tensor *t, int64_t i, size_t *ret_len)
{
    if (check_index(t, QF_STRING, i) != QF_OK)
        return NULL;
    const qf_string *s = &((const qf_string *)t->buf)[i];
    if (ret_len)
        *ret_len = s->len;
    return s->data ? s->data : "";
}

qf_code qf_tensor_set_string(qf_tensor *t, int64_t i, const char *s, size_t len)
{
    qf_code rc = check_index(t, QF_STRING, i);
    if (rc != QF_OK)
        return rc;
    if (!s && len > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "String data is NULL but length is %zu", len);
    if ((rc = check_sole_owner(t)) != QF_OK)
        return rc;
    qf_string fresh;
    if ((rc = string_assign(&fresh, s, len)) != QF_OK)
        return rc;
    qf_string *slot = &((qf_string *)t->buf)[i];
    /* Arena bytes are not reused: the arena only ever grows. */
    if (string_owned(t, i))
        free(slot->data);
    *slot = fresh;
    t->all_borrowed = false;
    return QF_OK;
}

void *qf_tensor_ptr(const qf_tensor *t, int64_t i)
{
    if (check_index(t, QF_PTR, i) != QF_OK)
        return NULL;
    return ((void *const *)t->buf)[i];
}

qf_code qf_tensor_set_ptr(qf_tensor *t, int64_t i, void *p)
{
    qf_code rc = check_index(t, QF_PTR, i);
    if (rc != QF_OK || (rc = check_sole_owner(t)) != QF_OK)
        return rc;
    void **slot = &((void **)t->buf)[i];
    void *old = *slot;
    *slot = p;
    /* Storing the object that is already there must not destroy it. */
    if (t->dtor && old && old != p)
        t->dtor(old);
    return QF_OK;
}

qf_code qf_tensor_take_ptr(qf_tensor *t, int64_t i, void **ret_p)
{
    if (!ret_p)
        return qf_set_error(QF_INVALID_ARGUMENT, "ret_p is NULL");
    qf_code rc = check_index(t, QF_PTR, i);
    if (rc != QF_OK || (rc = check_sole_owner(t)) != QF_OK)
        return rc;
    void **slot = &((void **)t->buf)[i];
    *ret_p = *slot;
    *slot = NULL;
    return QF_OK;
}

bool qf_tensor_equal(const qf_tensor *a, const qf_tensor *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->dtype != b->dtype || !qf_shape_equal(&a->shape, &b->shape))
        return false;
    if (a->dtype == QF_SPARSE) {
        qf_sparse *const *pa = (qf_sparse *const *)a->buf, *const *pb = (qf_sparse *const *)b->buf;
        for (int64_t i = 0; i < a->n; i++)
            if (pa[i] != pb[i] && (!pa[i] || !pb[i] || !qf_sparse_equal(pa[i], pb[i])))
                return false;
        return true;
    }
    if (a->dtype != QF_STRING)
        return a->nbytes == 0 || memcmp(a->buf, b->buf, a->nbytes) == 0;
    const qf_string *sa = (const qf_string *)a->buf, *sb = (const qf_string *)b->buf;
    for (int64_t i = 0; i < a->n; i++)
        if (sa[i].len != sb[i].len ||
            (sa[i].len > 0 && memcmp(sa[i].data, sb[i].data, sa[i].len) != 0))
            return false;
    return true;
}

/* With `move`, string i of src is stolen (not copied) when it has a block
 * of its own; arena strings die with src, and borrowed ones with the rows
 * it holds, so they must be copied. */
static bool can_steal(const qf_tensor *src, int64_t i, bool move)
{
    return move && string_owned(src, i);
}

/* Arena bytes that transfer() will copy for `count` strings of src from
 * soff; 0 if the sum overflows (the copies then fall back to blocks of their
 * own, which fail as they would have). */
static size_t string_copy_bytes(const qf_tensor *src, int64_t soff, int64_t count, bool move)
{
    const qf_string *ss = (const qf_string *)src->buf + soff;
    size_t total = 0;
    for (int64_t j = 0; j < count; j++)
        if (ss[j].len > 0 && !can_steal(src, soff + j, move) &&
            __builtin_add_overflow(total, ss[j].len + 1, &total))
            return 0;
    return total;
}

/* Copies `count` elements from src at soff to dst at doff; with `move`
 * (the caller holds src's last reference) separately allocated strings and
 * pointers are stolen and src keeps empty strings and NULLs in their place.
 * Other strings are copied, into dst's arena while it has room. dst's slots
 * must be empty. On a failed string copy, what was copied so far stays in
 * dst. */
static qf_code transfer(qf_tensor *dst, int64_t doff, qf_tensor *src, int64_t soff, int64_t count,
                        bool move)
{
    size_t es = qf_dtype_size(dst->dtype);
    unsigned char *d = dst->buf + (size_t)doff * es;
    unsigned char *s = src->buf + (size_t)soff * es;
    if (dst->dtype == QF_STRING) {
        qf_string *ds = (qf_string *)d;
        qf_string *ss = (qf_string *)s;
        for (int64_t j = 0; j < count; j++) {
            if (can_steal(src, soff + j, move)) {
                ds[j] = ss[j];
                ss[j] = (qf_string){0, NULL};
                continue;
            }
            qf_code rc = string_fill(dst, &ds[j], ss[j].data, ss[j].len);
            if (rc != QF_OK)
                return rc;
        }
        return QF_OK;
    }
    memcpy(d, s, (size_t)count * es);
    if (move && (dst->dtype == QF_PTR || dst->dtype == QF_SPARSE))
        memset(s, 0, (size_t)count * es);
    else if (dst->dtype == QF_SPARSE) /* a copy shares: one more reference */
        for (int64_t j = 0; j < count; j++)
            qf_sparse_ref(((qf_sparse **)d)[j]);
    return QF_OK;
}

static qf_code check_copyable(const qf_tensor *t, const char *what)
{
    if (t->dtype == QF_PTR && t->dtor)
        return qf_set_error(QF_FAILED_PRECONDITION,
                            "Cannot %s a ptr tensor that owns its objects (they cannot be "
                            "duplicated)",
                            what);
    return QF_OK;
}

qf_tensor *qf_tensor_copy(const qf_tensor *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "Tensor is NULL");
        return NULL;
    }
    if (check_copyable(t, "copy") != QF_OK)
        return NULL;
    size_t arena = t->dtype == QF_STRING ? string_copy_bytes(t, 0, t->n, false) : 0;
    qf_tensor *c = tensor_alloc(t->dtype, &t->shape, NULL, arena);
    if (c && transfer(c, 0, (qf_tensor *)t, 0, t->n, false) != QF_OK) {
        qf_tensor_unref(c);
        return NULL;
    }
    return c;
}

/* Copies (or moves) all of `part` into the block of `out` that starts at
 * element `base` and has shape `elem`. part's dims are each <= elem's; the
 * rest of the block keeps its zero padding. Walks the part's rows (its last
 * dimension) with an odometer over the leading dimensions, so every rank is
 * handled by the same loop. */
static qf_code place_part(qf_tensor *out, int64_t base, const qf_shape *elem, qf_tensor *part,
                          bool move)
{
    const qf_shape *ps = &part->shape;
    int r = ps->rank;
    if (part->n == 0)
        return QF_OK;
    /* Both shapes are known valid with rank r: compare the dims directly
     * (qf_shape_equal() re-validates both, per part). */
    if (r == elem->rank && memcmp(ps->dims, elem->dims, (size_t)r * sizeof(ps->dims[0])) == 0)
        return transfer(out, base, part, 0, part->n, move);

    int64_t ostride[QF_MAX_RANK], idx[QF_MAX_RANK] = {0};
    ostride[r - 1] = 1;
    for (int k = r - 2; k >= 0; k--)
        ostride[k] = ostride[k + 1] * elem->dims[k + 1];
    int64_t row = ps->dims[r - 1], soff = 0;
    for (;;) {
        int64_t doff = base;
        for (int k = 0; k < r - 1; k++)
            doff += idx[k] * ostride[k];
        qf_code rc = transfer(out, doff, part, soff, row, move);
        if (rc != QF_OK)
            return rc;
        soff += row;
        int k = r - 2;
        while (k >= 0 && ++idx[k] == ps->dims[k])
            idx[k--] = 0;
        if (k < 0)
            return QF_OK;
    }
}

/* Checks part i against the reference shape. Without `pad` the shapes must
 * be equal; with it the known dims of ref must match and *elem grows to the
 * largest size seen in each unknown dim. */
static qf_code check_part_shape(size_t i, const qf_tensor *p, const qf_shape *ref, bool pad,
                                qf_shape *elem)
{
    bool ok = p->shape.rank == ref->rank;
    for (int k = 0; ok && k < ref->rank; k++) {
        int64_t d = p->shape.dims[k];
        if (pad && ref->dims[k] == QF_UNKNOWN_DIM) {
            if (d > elem->dims[k])
                elem->dims[k] = d;
        } else if (d != ref->dims[k]) {
            ok = false;
        }
    }
    if (ok)
        return QF_OK;
    char want[SHAPE_TEXT], got[SHAPE_TEXT];
    return qf_set_error(
        QF_INVALID_ARGUMENT, "Shape mismatch in stack component %zu. Expected %s, got %s", i,
        qf_shape_format(ref, want, sizeof(want)), qf_shape_format(&p->shape, got, sizeof(got)));
}

/* Validates the parts and works out the dtype, destructor and element shape
 * of the batch. */
static qf_code stack_check(qf_tensor *const *parts, size_t n, qf_dtype *dt, const qf_shape *ref,
                           bool pad, qf_shape *elem, qf_ptr_dtor *dtor)
{
    char sh[SHAPE_TEXT];
    if (*dt != QF_DT_INVALID && !qf_dtype_is_valid(*dt))
        return qf_set_error(QF_INVALID_ARGUMENT, "Invalid dtype %d", (int)*dt);
    if (n == 0 && *dt == QF_DT_INVALID)
        return qf_set_error(QF_INVALID_ARGUMENT, "Stacking zero tensors needs a dtype");
    if (n > (uint64_t)INT64_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "Too many tensors to stack: %zu", n);
    for (size_t i = 0; i < n; i++)
        if (!parts[i])
            return qf_set_error(QF_INVALID_ARGUMENT, "Stack component %zu is NULL", i);

    if (pad) {
        if (!ref || !qf_shape_is_valid(ref) || ref->rank == QF_UNKNOWN_RANK)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Padded stack needs a pad shape with a defined rank, got %s",
                                ref ? qf_shape_format(ref, sh, sizeof(sh)) : "NULL");
    } else if (!ref) {
        if (n == 0)
            return qf_set_error(QF_INVALID_ARGUMENT, "Stacking zero tensors needs a shape");
        ref = &parts[0]->shape;
    } else if (!qf_shape_is_fully_defined(ref)) {
        return qf_set_error(QF_INVALID_ARGUMENT, "Stack element shape %s is not fully defined",
                            qf_shape_format(ref, sh, sizeof(sh)));
    }
    if (ref->rank >= QF_MAX_RANK)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Cannot stack tensors of rank %d: the batch would exceed rank %d",
                            (int)ref->rank, QF_MAX_RANK);

    /* Unknown dims start at 0: the size of an empty batch, and the
     * identity for the maximum over the parts. */
    *elem = *ref;
    for (int k = 0; k < elem->rank; k++)
        if (elem->dims[k] == QF_UNKNOWN_DIM)
            elem->dims[k] = 0;
    if (n == 0)
        return QF_OK;

    if (*dt == QF_DT_INVALID)
        *dt = parts[0]->dtype;
    *dtor = parts[0]->dtor;
    for (size_t i = 0; i < n; i++) {
        const qf_tensor *p = parts[i];
        if (p->dtype != *dt)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Type mismatch in stack component %zu. Expected %s, got %s", i,
                                qf_dtype_name(*dt), qf_dtype_name(p->dtype));
        qf_code rc = check_part_shape(i, p, ref, pad, elem);
        if (rc != QF_OK)
            return rc;
        /* The batch has a single destructor, so it can only own the
         * objects if every part agrees on who destroys them. */
        if (p->dtor != *dtor)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Pointer destructor mismatch in stack component %zu", i);
        if (p->dtor && !is_sole_owner(p))
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "Cannot stack component %zu: it owns its pointers and is still "
                                "shared (refcount %u)",
                                i, qf_tensor_refcount(p));
    }
    return QF_OK;
}

qf_code qf__tensor_stack_check(qf_tensor *const *parts, size_t n, qf_dtype dt,
                               const qf_shape *shape, bool pad)
{
    if (n > 0 && !parts)
        return qf_set_error(QF_INVALID_ARGUMENT, "parts is NULL");
    qf_shape elem;
    qf_ptr_dtor dtor = NULL;
    return stack_check(parts, n, &dt, shape, pad, &elem, &dtor);
}

static qf_code stack_impl(qf_tensor **parts, size_t n, qf_dtype dt, const qf_shape *ref, bool pad,
                          qf_tensor **ret_batch)
{
    qf_tensor *out = NULL;
    qf_shape elem, batch_shape;
    qf_ptr_dtor dtor = NULL;
    qf_code rc;
    if (n > 0 && !parts)
        return qf_set_error(QF_INVALID_ARGUMENT, "parts is NULL");
    if (!ret_batch) {
        rc = qf_set_error(QF_INVALID_ARGUMENT, "ret_batch is NULL");
        goto done;
    }
    if ((rc = stack_check(parts, n, &dt, ref, pad, &elem, &dtor)) != QF_OK)
        goto done;
    batch_shape = qf_shape_prepend((int64_t)n, &elem);
    /* One arena for every string that is copied rather than stolen, so a
     * batch of strings is a single allocation and a single free. */
    size_t arena = 0;
    for (size_t i = 0; dt == QF_STRING && i < n; i++) {
        size_t b = string_copy_bytes(parts[i], 0, parts[i]->n, is_sole_owner(parts[i]));
        if (__builtin_add_overflow(arena, b, &arena)) {
            arena = 0; /* too big for one block: strings get their own */
            break;
        }
    }
    if (!(out = tensor_alloc(dt, &batch_shape, dtor, arena))) {
        rc = qf_last_code();
        goto done;
    }
    int64_t elem_n = n > 0 ? out->n / (int64_t)n : 0;
    for (size_t i = 0; i < n && rc == QF_OK; i++)
        rc = place_part(out, (int64_t)i * elem_n, &elem, parts[i], is_sole_owner(parts[i]));
done:
    for (size_t i = 0; i < n; i++)
        qf_tensor_unref(parts[i]);
    if (rc != QF_OK)
        qf_tensor_unref(out);
    else
        *ret_batch = out;
    return rc;
}

/* The string of a slot's component c: one part, or a row's key in two. */
static void slot_string(void *slot, size_t c, char digits[QF__ROW_DIGITS], const char **s0,
                        size_t *len0, const char **s1, size_t *len1)
{
    if (qf__slot_is_row(slot)) {
        qf__row_string(slot, c, digits, s0, len0, s1, len1);
        return;
    }
    const qf_string *ss = (const qf_string *)qf_element_get(slot, c)->buf;
    *s0 = ss->data;
    *len0 = ss->len;
    *s1 = NULL;
    *len1 = 0;
}

/* Does component c of an element slot qualify for qf__stack_scalars()? A
 * string allocated on its own does not: qf_tensor_stack() moves it into
 * the batch instead of copying it. */
static bool scalar_of(void *slot, size_t c, qf_dtype dt)
{
    const qf_tensor *t = qf_element_get(slot, c);
    if (!t || t->dtype != dt || t->shape.rank != 0)
        return false;
    const qf_string *ss = (const qf_string *)t->buf;
    return dt != QF_STRING || ss->len == 0 || in_arena(t, ss->data);
}

qf_code qf__stack_rows_borrowed(void **slots, size_t n, qf_tensor **ret_batch)
{
    if (n == 0 || n > INT64_MAX / 2 || !qf__rows_all(slots, n))
        return QF_UNIMPLEMENTED;
    qf_shape sh = qf_shape_make(1, (const int64_t[]){(int64_t)n});
    /* The held slots go where the arena would be: tensor_alloc() sizes it
     * and leaves it unwritten. */
    qf_tensor *out = tensor_alloc_buf(QF_STRING, &sh, NULL, n * sizeof(void *), false);
    if (!out)
        return qf_last_code();
    out->held = (void **)(out->buf + out->nbytes);
    out->arena_cap = 0;
    memcpy(out->held, slots, n * sizeof(void *));
    out->held_bare = qf__rows_values(slots, n, (qf_string *)out->buf);
    out->all_borrowed = true;
    *ret_batch = out;
    return QF_OK;
}

bool qf__strings_keep_ends(const qf_tensor *t)
{
    return t && t->dtype == QF_STRING && t->held && t->all_borrowed && t->n > 0 && t->held_bare;
}

qf_code qf__stack_scalars(void *const *slots, size_t n, size_t c, qf_dtype dt,
                          qf_tensor **ret_batch)
{
    if (dt == QF_PTR || n == 0 || n > INT64_MAX)
        return QF_UNIMPLEMENTED;
    qf_shape sh = qf_shape_make(1, (const int64_t[]){(int64_t)n});
    size_t arena = 0;
    if (dt == QF_STRING && c <= 1 && qf__rows_string_bytes(slots, n, c, &arena)) {
        /* Rows of string blocks only: the common case of a text pipeline. */
        qf_tensor *out = tensor_alloc_buf(dt, &sh, NULL, arena, false);
        if (!out)
            return qf_last_code();
        char *a = (char *)out->buf + out->nbytes;
        char *end = qf__rows_string_copy(slots, n, c, (qf_string *)out->buf, a);
        out->arena_used = (size_t)(end - a);
        /* Every string is in the arena: destroying it frees none (and need
         * not look at each). */
        out->all_borrowed = true;
        *ret_batch = out;
        return QF_OK;
    }
    for (size_t i = 0; i < n; i++) {
        bool row = qf__slot_is_row(slots[i]);
        if (row ? (dt != QF_STRING || c > 1) : !scalar_of(slots[i], c, dt))
            return QF_UNIMPLEMENTED; /* the general path reports or handles it */
        if (dt == QF_STRING) {
            const char *s0, *s1;
            char digits[QF__ROW_DIGITS];
            size_t len0, len1;
            slot_string(slots[i], c, digits, &s0, &len0, &s1, &len1);
            size_t len = len0 + len1;
            if (len > 0 && __builtin_add_overflow(arena, len + 1, &arena))
                return QF_UNIMPLEMENTED;
        }
    }
    qf_tensor *out = tensor_alloc(dt, &sh, NULL, arena);
    if (!out)
        return qf_last_code();
    if (dt == QF_STRING) {
        qf_string *ds = (qf_string *)out->buf;
        char *d = (char *)out->buf + out->nbytes;
        for (size_t i = 0; i < n; i++) {
            const char *s0, *s1;
            char digits[QF__ROW_DIGITS];
            size_t len0, len1;
            slot_string(slots[i], c, digits, &s0, &len0, &s1, &len1);
            if (len0 + len1 == 0)
                continue; /* empty: {0, NULL}, as tensor_alloc() left it */
            /* Sized above: every string fits in the arena. */
            memcpy(d, s0, len0);
            if (len1)
                memcpy(d + len0, s1, len1);
            ds[i] = (qf_string){len0 + len1, d};
            d += len0 + len1;
            *d++ = '\0';
        }
        out->arena_used = (size_t)(d - ((char *)out->buf + out->nbytes));
    } else {
        size_t es = qf_dtype_size(dt);
        for (size_t i = 0; i < n; i++)
            memcpy(out->buf + i * es, qf_element_get(slots[i], c)->buf, es);
        if (dt == QF_SPARSE) /* the slots keep theirs: the batch shares */
            for (size_t i = 0; i < n; i++)
                qf_sparse_ref(((qf_sparse **)out->buf)[i]);
    }
    *ret_batch = out;
    return QF_OK;
}

bool qf__tensor_dies_with_home(qf_tensor *t, const qf__home *h)
{
    if (t->home != h || !is_sole_owner(t))
        return false;
    if (t->dtype == QF_STRING) {
        const qf_string *ss = (const qf_string *)t->buf;
        if (t->held)
            return false;
        for (int64_t i = 0; i < t->n; i++)
            if (ss[i].len > 0 && !in_arena(t, ss[i].data))
                return false;
    }
    return (t->dtype != QF_PTR || !t->dtor) && t->dtype != QF_SPARSE;
}

qf_code qf_tensor_stack(qf_tensor **parts, size_t n, qf_dtype dt, const qf_shape *elem_shape,
                        qf_tensor **ret_batch)
{
    return stack_impl(parts, n, dt, elem_shape, false, ret_batch);
}

qf_code qf_tensor_stack_padded(qf_tensor **parts, size_t n, qf_dtype dt, const qf_shape *pad_shape,
                               qf_tensor **ret_batch)
{
    return stack_impl(parts, n, dt, pad_shape, true, ret_batch);
}

/* Row i of t as a new tensor; t must not own pointers unless `move`. */
static qf_tensor *row_of(qf_tensor *t, int64_t i, const qf_shape *row_shape, int64_t row_n,
                         bool move)
{
    size_t arena = t->dtype == QF_STRING ? string_copy_bytes(t, i * row_n, row_n, move) : 0;
    qf_tensor *r = tensor_alloc(t->dtype, row_shape, t->dtor, arena);
    if (r && transfer(r, 0, t, i * row_n, row_n, move) != QF_OK) {
        qf_tensor_unref(r);
        return NULL;
    }
    return r;
}

/* The shape of one row of t; false (error recorded) for a scalar. */
static bool row_shape_of(const qf_tensor *t, const char *what, qf_shape *ret)
{
    if (t->shape.rank < 1) {
        qf_set_error(QF_INVALID_ARGUMENT, "Cannot %s a scalar: the tensor must have rank >= 1",
                     what);
        return false;
    }
    *ret = qf_shape_make(t->shape.rank - 1, t->shape.dims + 1);
    return true;
}

qf_code qf_tensor_unstack(qf_tensor *batch, qf_tensor **ret_parts)
{
    if (!batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "Tensor to unstack is NULL");
    qf_code rc = QF_OK;
    qf_shape rs;
    if (!ret_parts) {
        rc = qf_set_error(QF_INVALID_ARGUMENT, "ret_parts is NULL");
        goto done;
    }
    if (!row_shape_of(batch, "unstack", &rs)) {
        rc = qf_last_code();
        goto done;
    }
    bool move = is_sole_owner(batch);
    if (batch->dtor && !move) {
        rc = qf_set_error(QF_FAILED_PRECONDITION,
                          "Cannot unstack a ptr tensor that owns its objects while it is shared "
                          "(refcount %u)",
                          qf_tensor_refcount(batch));
        goto done;
    }
    int64_t rows = batch->shape.dims[0];
    int64_t row_n = rows > 0 ? batch->n / rows : 0;
    for (int64_t i = 0; i < rows; i++) {
        if (!(ret_parts[i] = row_of(batch, i, &rs, row_n, move))) {
            rc = qf_last_code();
            /* Rows already moved out are destroyed with their parts, the
             * rest with the batch: every owned object exactly once. */
            for (int64_t j = 0; j < i; j++) {
                qf_tensor_unref(ret_parts[j]);
                ret_parts[j] = NULL;
            }
            break;
        }
    }
done:
    qf_tensor_unref(batch);
    return rc;
}

qf_tensor *qf_tensor_slice(const qf_tensor *t, int64_t i)
{
    qf_shape rs;
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "Tensor to slice is NULL");
        return NULL;
    }
    if (!row_shape_of(t, "slice", &rs))
        return NULL;
    if (i < 0 || i >= t->shape.dims[0]) {
        char sh[SHAPE_TEXT];
        qf_set_error(QF_INVALID_ARGUMENT, "Slice index %lld is not in [0, %lld) for shape %s",
                     (long long)i, (long long)t->shape.dims[0],
                     qf_shape_format(&t->shape, sh, sizeof(sh)));
        return NULL;
    }
    if (check_copyable(t, "slice") != QF_OK)
        return NULL;
    int64_t row_n = t->n / t->shape.dims[0];
    return row_of((qf_tensor *)t, i, &rs, row_n, false);
}
