/* test_tensor.c - dtypes, shapes, tensors, stack / padded stack / unstack. */
#include <criterion/criterion.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "qf_blockcache-impl.h"
#include "qf_sparse.h"
#include "qf_tensor-impl.h"
#include "qf_tensor.h"
#include "qf_test_asan.h"

/* ------------------------------------------------------------ test helpers */

static const qf_dtype all_dtypes[] = {
    QF_FLOAT32, QF_FLOAT64,   QF_INT32,  QF_UINT8, QF_INT16,  QF_INT8,
    QF_STRING,  QF_COMPLEX64, QF_INT64,  QF_BOOL,  QF_UINT16, QF_COMPLEX128,
    QF_FLOAT16, QF_UINT32,    QF_UINT64, QF_PTR,   QF_SPARSE,
};
#define N_DTYPES (sizeof(all_dtypes) / sizeof(all_dtypes[0]))

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic data, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static char shape_text[192];

static const char *fmt(const qf_shape *s)
{
    return qf_shape_format(s, shape_text, sizeof(shape_text));
}

/* Owned objects that count their destruction, so tests can check that
 * every object is destroyed exactly once whatever path it takes. */
#define MAX_OBJS 64
static int destroyed[MAX_OBJS];

typedef struct obj {
    int id;
} obj;

static void obj_reset(void)
{
    memset(destroyed, 0, sizeof(destroyed));
}

static obj *obj_new(int id)
{
    obj *o = malloc(sizeof(*o));
    cr_assert_not_null(o);
    o->id = id;
    return o;
}

static void obj_dtor(void *p)
{
    obj *o = p;
    destroyed[o->id]++;
    free(o);
}

static void other_dtor(void *p)
{
    obj_dtor(p);
}

static void assert_destroyed_once(int n)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(destroyed[i], 1, "object %d destroyed %d times", i, destroyed[i]);
}

static void assert_none_destroyed(int n)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(destroyed[i], 0, "object %d destroyed %d times", i, destroyed[i]);
}

static qf_tensor *i32_vec(int n, const int32_t *v)
{
    qf_shape s = qf_shape_make(1, (const int64_t[]){n});
    qf_tensor *t = qf_tensor_new_from(QF_INT32, &s, v, (size_t)n * sizeof(int32_t));
    cr_assert_not_null(t);
    return t;
}

static qf_tensor *str_vec(int n, const char *const *v)
{
    qf_shape s = qf_shape_make(1, (const int64_t[]){n});
    qf_tensor *t = qf_tensor_new(QF_STRING, &s);
    cr_assert_not_null(t);
    for (int i = 0; i < n; i++)
        cr_assert_eq(qf_tensor_set_string(t, i, v[i], strlen(v[i])), QF_OK);
    return t;
}

static void assert_str_at(const qf_tensor *t, int64_t i, const char *want)
{
    size_t len = 99;
    const char *got = qf_tensor_string(t, i, &len);
    cr_assert_not_null(got, "element %lld", (long long)i);
    cr_assert_eq(len, strlen(want), "element %lld: length %zu, want %zu", (long long)i, len,
                 strlen(want));
    cr_assert_str_eq(got, want, "element %lld", (long long)i);
}

/* A tensor of `shape` filled with random contents valid for its dtype. */
static qf_tensor *random_tensor(qf_dtype dt, const qf_shape *shape)
{
    qf_tensor *t = qf_tensor_new(dt, shape);
    cr_assert_not_null(t, "%s: %s", qf_dtype_name(dt), qf_last_message());
    int64_t n = qf_tensor_num_elements(t);
    if (dt == QF_STRING) {
        char buf[8];
        for (int64_t i = 0; i < n; i++) {
            size_t len = (size_t)(rng() % sizeof(buf)); /* 0..7, NULs included */
            for (size_t j = 0; j < len; j++)
                buf[j] = (char)(rng() % 4);
            cr_assert_eq(qf_tensor_set_string(t, i, buf, len), QF_OK);
        }
    } else if (dt == QF_BOOL) {
        bool *b = qf_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            b[i] = rng() & 1;
    } else if (dt == QF_PTR) {
        void **p = qf_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            p[i] = (void *)(uintptr_t)(rng() & ~(uint64_t)7);
    } else if (dt == QF_SPARSE) { /* a small sparse vector, or none */
        for (int64_t i = 0; i < n; i++) {
            if (rng() % 4 == 0)
                continue;
            int64_t dense = 1 + (int64_t)(rng() % 4), idx = (int64_t)(rng() % (uint64_t)dense);
            int64_t v = (int64_t)rng();
            qf_sparse *sp = NULL;
            cr_assert_eq(qf_sparse_new_from(QF_INT64, 1, 1, &idx, &v, &dense, &sp), QF_OK);
            cr_assert_eq(qf_tensor_set_sparse(t, i, sp), QF_OK);
        }
    } else {
        unsigned char *d = qf_tensor_data(t);
        size_t bytes = (size_t)n * qf_dtype_size(dt);
        for (size_t i = 0; i < bytes; i++)
            d[i] = (unsigned char)rng();
    }
    return t;
}

/* ------------------------------------------------------------------ dtypes */

Test(tensor, every_dtype_has_tensorflow_name_and_size)
{
    static const struct {
        qf_dtype dt;
        int value;
        size_t size;
        const char *name;
    } want[] = {
        {QF_FLOAT32, 1, 4, "float"},
        {QF_FLOAT64, 2, 8, "double"},
        {QF_INT32, 3, 4, "int32"},
        {QF_UINT8, 4, 1, "uint8"},
        {QF_INT16, 5, 2, "int16"},
        {QF_INT8, 6, 1, "int8"},
        {QF_STRING, 7, sizeof(qf_string), "string"},
        {QF_COMPLEX64, 8, 8, "complex64"},
        {QF_INT64, 9, 8, "int64"},
        {QF_BOOL, 10, 1, "bool"},
        {QF_UINT16, 17, 2, "uint16"},
        {QF_COMPLEX128, 18, 16, "complex128"},
        {QF_FLOAT16, 19, 2, "half"},
        {QF_UINT32, 22, 4, "uint32"},
        {QF_UINT64, 23, 8, "uint64"},
        {QF_PTR, 100, sizeof(void *), "ptr"},
        {QF_SPARSE, 101, sizeof(void *), "sparse"},
    };
    cr_assert_eq(sizeof(want) / sizeof(want[0]), N_DTYPES);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        cr_assert_eq((int)want[i].dt, want[i].value, "enum value of %s", want[i].name);
        cr_assert(qf_dtype_is_valid(want[i].dt), "%s valid", want[i].name);
        cr_assert_eq(qf_dtype_size(want[i].dt), want[i].size, "size of %s", want[i].name);
        cr_assert_str_eq(qf_dtype_name(want[i].dt), want[i].name);
    }
}

Test(tensor, values_outside_the_enum_are_invalid_dtypes)
{
    static const int bad[] = {0, -1, 11, 12, 16, 20, 21, 24, 99, 102, 1000};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        qf_dtype dt = (qf_dtype)bad[i];
        cr_assert_not(qf_dtype_is_valid(dt), "%d", bad[i]);
        cr_assert_eq(qf_dtype_size(dt), 0);
        cr_assert_str_eq(qf_dtype_name(dt), "invalid");
    }
}

/* ------------------------------------------------------------------ shapes */

Test(tensor, shape_constructors)
{
    qf_shape s = qf_shape_scalar();
    cr_assert_eq(s.rank, 0);
    cr_assert(qf_shape_is_valid(&s));
    cr_assert(qf_shape_is_fully_defined(&s));
    cr_assert_eq(qf_shape_num_elements(&s), 1);

    qf_shape u = qf_shape_unknown();
    cr_assert_eq(u.rank, QF_UNKNOWN_RANK);
    cr_assert(qf_shape_is_valid(&u));
    cr_assert_not(qf_shape_is_fully_defined(&u));
    cr_assert_eq(qf_shape_num_elements(&u), -1);

    qf_shape m = QF_SHAPE(3, 4);
    cr_assert_eq(m.rank, 2);
    cr_assert_eq(m.dims[0], 3);
    cr_assert_eq(m.dims[1], 4);
    for (int i = 2; i < QF_MAX_RANK; i++)
        cr_assert_eq(m.dims[i], 0, "unused dims are 0");
    cr_assert_eq(qf_shape_num_elements(&m), 12);

    qf_shape p = QF_SHAPE(QF_UNKNOWN_DIM, 3);
    cr_assert(qf_shape_is_valid(&p));
    cr_assert_not(qf_shape_is_fully_defined(&p));
    cr_assert_eq(qf_shape_num_elements(&p), -1);

    qf_shape z = QF_SHAPE(0, 5);
    cr_assert_eq(qf_shape_num_elements(&z), 0);

    qf_shape r0 = qf_shape_make(0, NULL);
    cr_assert(qf_shape_equal(&r0, &s));

    int64_t eight[QF_MAX_RANK] = {1, 2, 1, 2, 1, 2, 1, 2};
    qf_shape full = qf_shape_make(QF_MAX_RANK, eight);
    cr_assert(qf_shape_is_fully_defined(&full));
    cr_assert_eq(qf_shape_num_elements(&full), 16);
}

/* Every rank keeps its dims and reads 0 past them, whatever lies in the
 * caller's array beyond the rank (qf_shape_make() names each dimension). */
Test(tensor, shape_make_keeps_each_rank_and_zeroes_the_rest)
{
    int64_t dims[QF_MAX_RANK] = {7, 6, 5, 4, 3, 2, 1, QF_UNKNOWN_DIM};
    for (int rank = 0; rank <= QF_MAX_RANK; rank++) {
        qf_shape s = qf_shape_make(rank, dims);
        cr_assert_eq(s.rank, rank);
        for (int i = 0; i < QF_MAX_RANK; i++)
            cr_assert_eq(s.dims[i], i < rank ? dims[i] : 0, "rank %d dim %d", rank, i);
    }
}

Test(tensor, shape_make_rejects_bad_rank_and_dims)
{
    int64_t dims[QF_MAX_RANK + 1] = {0};
    qf_shape bad[] = {
        qf_shape_make(-1, dims),
        qf_shape_make(QF_MAX_RANK + 1, dims),
        qf_shape_make(2, (const int64_t[]){3, -2}),
        qf_shape_make(1, NULL),
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(bad[i].rank, QF_UNKNOWN_RANK - 1, "case %zu", i);
        cr_assert_not(qf_shape_is_valid(&bad[i]));
        cr_assert_not(qf_shape_is_fully_defined(&bad[i]));
        cr_assert_eq(qf_shape_num_elements(&bad[i]), -1);
        cr_assert_not(qf_shape_equal(&bad[i], &bad[i]));
        cr_assert_not(qf_shape_compatible(&bad[i], &bad[i]));
        cr_assert_str_eq(fmt(&bad[i]), "<invalid>");
    }
    cr_assert_not(qf_shape_is_valid(NULL));
}

Test(tensor, shape_num_elements_overflow_is_minus_one)
{
    qf_shape s = QF_SHAPE(INT64_MAX / 2, 3);
    cr_assert(qf_shape_is_fully_defined(&s));
    cr_assert_eq(qf_shape_num_elements(&s), -1);
}

Test(tensor, shape_equal_and_compatible)
{
    qf_shape a = QF_SHAPE(2, 3), b = QF_SHAPE(2, 3), c = QF_SHAPE(3, 2);
    qf_shape p = QF_SHAPE(QF_UNKNOWN_DIM, 3), q = QF_SHAPE(2, QF_UNKNOWN_DIM);
    qf_shape v = QF_SHAPE(6), u = qf_shape_unknown(), u2 = qf_shape_unknown();
    qf_shape sc = qf_shape_scalar();

    cr_assert(qf_shape_equal(&a, &b));
    cr_assert_not(qf_shape_equal(&a, &c));
    cr_assert_not(qf_shape_equal(&a, &p));
    cr_assert_not(qf_shape_equal(&a, &v));
    cr_assert(qf_shape_equal(&u, &u2), "unknown equals only unknown");
    cr_assert_not(qf_shape_equal(&u, &sc));
    cr_assert(qf_shape_equal(&p, &p));

    cr_assert(qf_shape_compatible(&a, &b));
    cr_assert(qf_shape_compatible(&a, &p));
    cr_assert(qf_shape_compatible(&p, &q));
    cr_assert(qf_shape_compatible(&a, &u));
    cr_assert(qf_shape_compatible(&u, &sc));
    cr_assert_not(qf_shape_compatible(&a, &c));
    cr_assert_not(qf_shape_compatible(&c, &p));
    cr_assert_not(qf_shape_compatible(&a, &v));
}

Test(tensor, shape_prepend_adds_a_batch_dimension)
{
    qf_shape s = QF_SHAPE(3, QF_UNKNOWN_DIM);
    qf_shape b = qf_shape_prepend(5, &s);
    qf_shape want = QF_SHAPE(5, 3, QF_UNKNOWN_DIM);
    cr_assert(qf_shape_equal(&b, &want), "got %s", fmt(&b));

    qf_shape sc = qf_shape_scalar();
    qf_shape v = qf_shape_prepend(0, &sc);
    qf_shape want_v = QF_SHAPE(0);
    cr_assert(qf_shape_equal(&v, &want_v));

    int64_t eight[QF_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    qf_shape full = qf_shape_make(QF_MAX_RANK, eight);
    qf_shape u = qf_shape_unknown();
    qf_shape too_big = qf_shape_prepend(2, &full);
    qf_shape of_unknown = qf_shape_prepend(2, &u);
    qf_shape bad_dim = qf_shape_prepend(-5, &s);
    cr_assert_not(qf_shape_is_valid(&too_big));
    cr_assert_not(qf_shape_is_valid(&of_unknown));
    cr_assert_not(qf_shape_is_valid(&bad_dim));

    /* Every rank below the most: the batch dim, then the row's, then 0s. */
    int64_t dims[QF_MAX_RANK] = {7, 6, 5, 4, 3, 2, 1, 9};
    for (int rank = 0; rank < QF_MAX_RANK; rank++) {
        qf_shape row = qf_shape_make(rank, dims);
        qf_shape p = qf_shape_prepend(11, &row);
        cr_assert_eq(p.rank, rank + 1);
        cr_assert_eq(p.dims[0], 11);
        for (int i = 1; i < QF_MAX_RANK; i++)
            cr_assert_eq(p.dims[i], i <= rank ? dims[i - 1] : 0, "rank %d dim %d", rank, i);
    }
}

Test(tensor, shape_format_uses_tensorflow_text)
{
    qf_shape a = QF_SHAPE(3, 4), p = QF_SHAPE(QF_UNKNOWN_DIM, 3), sc = qf_shape_scalar();
    qf_shape u = qf_shape_unknown(), big = QF_SHAPE(INT64_MAX, 0);
    cr_assert_str_eq(fmt(&a), "[3,4]");
    cr_assert_str_eq(fmt(&p), "[?,3]");
    cr_assert_str_eq(fmt(&sc), "[]");
    cr_assert_str_eq(fmt(&u), "<unknown>");
    cr_assert_str_eq(fmt(&big), "[9223372036854775807,0]");

    char small[4] = "xyz";
    cr_assert_eq(qf_shape_format(&a, small, 3), small);
    cr_assert_str_eq(small, "[3", "truncated to cap bytes including the NUL");
    small[0] = 'x';
    qf_shape_format(&a, small, 0);
    cr_assert_eq(small[0], 'x', "cap 0 writes nothing");
}

/* ----------------------------------------------------------------- tensors */

Test(tensor, new_tensor_is_zero_filled_for_every_dtype)
{
    qf_shape s = QF_SHAPE(2, 3);
    for (size_t d = 0; d < N_DTYPES; d++) {
        qf_dtype dt = all_dtypes[d];
        qf_tensor *t = qf_tensor_new(dt, &s);
        cr_assert_not_null(t, "%s", qf_dtype_name(dt));
        cr_assert_eq(qf_tensor_dtype(t), dt);
        cr_assert(qf_shape_equal(qf_tensor_shape(t), &s));
        cr_assert_eq(qf_tensor_num_elements(t), 6);
        cr_assert_eq(qf_tensor_refcount(t), 1);
        cr_assert_eq(qf_tensor_cdata(t), qf_tensor_data(t));
        cr_assert_null(qf_tensor_ptr_dtor(t));
        if (dt == QF_STRING) {
            for (int i = 0; i < 6; i++)
                assert_str_at(t, i, "");
        } else if (dt == QF_PTR) {
            for (int i = 0; i < 6; i++)
                cr_assert_null(qf_tensor_ptr(t, i));
        } else {
            const unsigned char *b = qf_tensor_cdata(t);
            for (size_t i = 0; i < 6 * qf_dtype_size(dt); i++)
                cr_assert_eq(b[i], 0, "%s byte %zu", qf_dtype_name(dt), i);
        }
        qf_tensor_unref(t);
    }
}

Test(tensor, buffer_is_aligned_for_every_dtype)
{
    qf_shape s = QF_SHAPE(3);
    for (size_t d = 0; d < N_DTYPES; d++) {
        qf_tensor *t = qf_tensor_new(all_dtypes[d], &s);
        cr_assert_eq((uintptr_t)qf_tensor_data(t) % 16, 0, "%s", qf_dtype_name(all_dtypes[d]));
        qf_tensor_unref(t);
    }
}

Test(tensor, new_rejects_invalid_dtype_and_shapes)
{
    qf_shape ok = QF_SHAPE(2);
    cr_assert_null(qf_tensor_new(QF_DT_INVALID, &ok));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_new((qf_dtype)42, &ok));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "Invalid dtype 42");

    qf_shape partial = QF_SHAPE(QF_UNKNOWN_DIM, 3);
    cr_assert_null(qf_tensor_new(QF_FLOAT32, &partial));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "Tensor shape [?,3] is not fully defined");

    qf_shape u = qf_shape_unknown();
    cr_assert_null(qf_tensor_new(QF_FLOAT32, &u));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);

    qf_shape bad = qf_shape_make(-3, NULL);
    cr_assert_null(qf_tensor_new(QF_FLOAT32, &bad));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);

    cr_assert_null(qf_tensor_new(QF_FLOAT32, NULL));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_new_ptr(&partial, obj_dtor));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
}

Test(tensor, new_reports_size_overflow_as_resource_exhausted)
{
    qf_shape elems = QF_SHAPE(INT64_MAX / 2, 3);
    cr_assert_null(qf_tensor_new(QF_INT8, &elems));
    cr_assert_eq(qf_last_code(), QF_RESOURCE_EXHAUSTED);

    qf_shape bytes = QF_SHAPE((int64_t)1 << 40, (int64_t)1 << 22);
    cr_assert_null(qf_tensor_new(QF_COMPLEX128, &bytes));
    cr_assert_eq(qf_last_code(), QF_RESOURCE_EXHAUSTED);
    cr_assert(strstr(qf_last_message(), "complex128") != NULL, "%s", qf_last_message());
}

Test(tensor, zero_element_tensors_are_valid)
{
    qf_shape s = QF_SHAPE(0, 4);
    qf_tensor *t = qf_tensor_new(QF_STRING, &s);
    cr_assert_not_null(t);
    cr_assert_eq(qf_tensor_num_elements(t), 0);
    cr_assert_null(qf_tensor_string(t, 0, NULL));
    qf_tensor *f = qf_tensor_new_from(QF_FLOAT32, &s, NULL, 0);
    cr_assert_not_null(f);
    qf_tensor_unref(t);
    qf_tensor_unref(f);
}

Test(tensor, ref_and_unref_count_references)
{
    qf_tensor *t = qf_tensor_new_i32(7);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    cr_assert_eq(qf_tensor_ref(t), t);
    qf_tensor_ref(t);
    cr_assert_eq(qf_tensor_refcount(t), 3);
    qf_tensor_unref(t);
    qf_tensor_unref(t);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    qf_tensor_unref(t);

    cr_assert_null(qf_tensor_ref(NULL));
    qf_tensor_unref(NULL);
}

#define REF_THREADS 4
#define REF_ROUNDS 100000

static void *ref_worker(void *arg)
{
    qf_tensor *t = arg;
    for (int i = 0; i < REF_ROUNDS; i++) {
        qf_tensor_ref(t);
        qf_tensor_unref(t);
    }
    qf_tensor_unref(t); /* the reference main handed to this thread */
    return NULL;
}

Test(tensor, concurrent_ref_unref_frees_exactly_once)
{
    obj_reset();
    qf_tensor *t = qf_tensor_new_scalar_ptr(obj_new(0), obj_dtor);
    pthread_t th[REF_THREADS];
    for (int i = 0; i < REF_THREADS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, ref_worker, qf_tensor_ref(t)), 0);
    qf_tensor_unref(t);
    for (int i = 0; i < REF_THREADS; i++)
        pthread_join(th[i], NULL);
    assert_destroyed_once(1);
}

Test(tensor, scalar_constructors_hold_their_values)
{
    qf_tensor *b = qf_tensor_new_bool(true);
    qf_tensor *i = qf_tensor_new_i32(-123);
    qf_tensor *l = qf_tensor_new_i64(INT64_MIN);
    qf_tensor *f = qf_tensor_new_f32(1.5f);
    qf_tensor *d = qf_tensor_new_f64(-2.25);
    qf_tensor *s = qf_tensor_new_cstr("hello");
    int x;
    qf_tensor *p = qf_tensor_new_scalar_ptr(&x, NULL);
    qf_tensor *all[] = {b, i, l, f, d, s, p};
    qf_dtype types[] = {QF_BOOL, QF_INT32, QF_INT64, QF_FLOAT32, QF_FLOAT64, QF_STRING, QF_PTR};
    qf_shape sc = qf_shape_scalar();
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
        cr_assert_not_null(all[k]);
        cr_assert_eq(qf_tensor_dtype(all[k]), types[k]);
        cr_assert(qf_shape_equal(qf_tensor_shape(all[k]), &sc));
        cr_assert_eq(qf_tensor_num_elements(all[k]), 1);
    }
    cr_assert_eq(*(const bool *)qf_tensor_cdata(b), true);
    cr_assert_eq(*(const int32_t *)qf_tensor_cdata(i), -123);
    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(l), INT64_MIN);
    cr_assert_eq(*(const float *)qf_tensor_cdata(f), 1.5f);
    cr_assert_eq(*(const double *)qf_tensor_cdata(d), -2.25);
    assert_str_at(s, 0, "hello");
    cr_assert_eq(qf_tensor_ptr(p, 0), &x);
    cr_assert_null(qf_tensor_ptr_dtor(p));
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
        qf_tensor_unref(all[k]);

    cr_assert_null(qf_tensor_new_cstr(NULL));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_new_string(NULL, 3));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
}

Test(tensor, strings_keep_embedded_nuls_and_may_be_empty)
{
    static const char bytes[] = {'a', '\0', 'b', '\0'};
    qf_tensor *t = qf_tensor_new_string(bytes, sizeof(bytes));
    size_t len = 0;
    const char *s = qf_tensor_string(t, 0, &len);
    cr_assert_eq(len, 4);
    cr_assert_eq(memcmp(s, bytes, 4), 0);
    cr_assert_eq(s[4], '\0', "NUL-terminated");
    cr_assert_neq(s, bytes, "copied");

    qf_tensor *e = qf_tensor_new_string(NULL, 0);
    cr_assert_not_null(e);
    s = qf_tensor_string(e, 0, &len);
    cr_assert_not_null(s, "empty string is \"\", never NULL");
    cr_assert_eq(len, 0);
    cr_assert_str_eq(s, "");
    qf_tensor *e2 = qf_tensor_new_cstr("");
    cr_assert(qf_tensor_equal(e, e2));
    cr_assert_not(qf_tensor_equal(e, t));

    /* the raw view: an empty element may hold data NULL */
    const qf_string *raw = qf_tensor_cdata(t);
    cr_assert_eq(raw[0].len, 4);
    cr_assert_eq(memcmp(raw[0].data, bytes, 4), 0);

    cr_assert_str_eq(qf_tensor_string(t, 0, NULL), "a");
    qf_tensor_unref(t);
    qf_tensor_unref(e);
    qf_tensor_unref(e2);
}

Test(tensor, set_string_replaces_and_checks_ownership)
{
    qf_shape s = QF_SHAPE(3);
    qf_tensor *t = qf_tensor_new(QF_STRING, &s);
    cr_assert_eq(qf_tensor_set_string(t, 1, "first", 5), QF_OK);
    cr_assert_eq(qf_tensor_set_string(t, 1, "x\0y", 3), QF_OK);
    size_t len;
    const char *got = qf_tensor_string(t, 1, &len);
    cr_assert_eq(len, 3);
    cr_assert_eq(memcmp(got, "x\0y", 3), 0);
    cr_assert_eq(qf_tensor_set_string(t, 1, "", 0), QF_OK);
    assert_str_at(t, 1, "");
    cr_assert_eq(qf_tensor_set_string(t, 2, NULL, 0), QF_OK);

    cr_assert_eq(qf_tensor_set_string(t, 3, "a", 1), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_tensor_set_string(t, -1, "a", 1), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_tensor_set_string(t, 0, NULL, 1), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_string(t, 3, NULL));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);

    qf_tensor_ref(t);
    cr_assert_eq(qf_tensor_set_string(t, 0, "a", 1), QF_FAILED_PRECONDITION);
    assert_str_at(t, 0, "");
    qf_tensor_unref(t);
    cr_assert_eq(qf_tensor_set_string(t, 0, "a", 1), QF_OK);
    qf_tensor_unref(t);

    qf_tensor *i = qf_tensor_new_i32(1);
    cr_assert_eq(qf_tensor_set_string(i, 0, "a", 1), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_string(i, 0, NULL));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    qf_tensor_unref(i);
}

Test(tensor, new_from_copies_exactly_the_buffer_size)
{
    const double v[] = {1.0, -2.0, 3.5, 4.25, 0.0, -0.0};
    qf_shape s = QF_SHAPE(2, 3);
    qf_tensor *t = qf_tensor_new_from(QF_FLOAT64, &s, v, sizeof(v));
    cr_assert_not_null(t);
    cr_assert_neq(qf_tensor_cdata(t), (const void *)v);
    cr_assert_eq(memcmp(qf_tensor_cdata(t), v, sizeof(v)), 0);
    qf_tensor_unref(t);

    cr_assert_null(qf_tensor_new_from(QF_FLOAT64, &s, v, sizeof(v) - 1));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_new_from(QF_FLOAT64, &s, NULL, sizeof(v)));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_new_from(QF_STRING, &s, v, 6 * sizeof(qf_string)));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_new_from(QF_PTR, &s, v, 6 * sizeof(void *)));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
}

Test(tensor, ptr_tensor_with_dtor_destroys_each_object_once)
{
    obj_reset();
    qf_shape s = QF_SHAPE(4);
    qf_tensor *t = qf_tensor_new_ptr(&s, obj_dtor);
    cr_assert_eq(qf_tensor_ptr_dtor(t), obj_dtor);
    obj *o0 = obj_new(0), *o2 = obj_new(2);
    cr_assert_eq(qf_tensor_set_ptr(t, 0, o0), QF_OK);
    cr_assert_eq(qf_tensor_set_ptr(t, 1, obj_new(1)), QF_OK);
    cr_assert_eq(qf_tensor_set_ptr(t, 2, o2), QF_OK);
    /* slot 3 stays NULL: never passed to the dtor */

    cr_assert_eq(qf_tensor_set_ptr(t, 0, o0), QF_OK);
    cr_assert_eq(destroyed[0], 0, "storing the same object again keeps it");
    cr_assert_eq(qf_tensor_set_ptr(t, 1, obj_new(3)), QF_OK);
    cr_assert_eq(destroyed[1], 1, "replaced object destroyed");

    void *taken = NULL;
    cr_assert_eq(qf_tensor_take_ptr(t, 2, &taken), QF_OK);
    cr_assert_eq(taken, o2);
    cr_assert_null(qf_tensor_ptr(t, 2));

    qf_tensor_ref(t);
    cr_assert_eq(qf_tensor_set_ptr(t, 3, o2), QF_FAILED_PRECONDITION);
    cr_assert_eq(qf_tensor_take_ptr(t, 0, &taken), QF_FAILED_PRECONDITION);
    qf_tensor_unref(t);
    cr_assert_eq(qf_tensor_set_ptr(t, 4, o2), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_tensor_take_ptr(t, 0, NULL), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_ptr(t, 4));

    qf_tensor_unref(t);
    cr_assert_eq(destroyed[0], 1);
    cr_assert_eq(destroyed[1], 1);
    cr_assert_eq(destroyed[2], 0, "taken object belongs to the caller");
    cr_assert_eq(destroyed[3], 1);
    obj_dtor(o2);
    assert_destroyed_once(4);
}

Test(tensor, ptr_tensor_without_dtor_owns_nothing)
{
    int a, b;
    qf_shape s = QF_SHAPE(2);
    qf_tensor *t = qf_tensor_new_ptr(&s, NULL);
    cr_assert_eq(qf_tensor_set_ptr(t, 0, &a), QF_OK);
    cr_assert_eq(qf_tensor_set_ptr(t, 0, &b), QF_OK);
    cr_assert_eq(qf_tensor_ptr(t, 0), &b);
    qf_tensor_unref(t);

    qf_tensor *i = qf_tensor_new_i32(0);
    cr_assert_eq(qf_tensor_set_ptr(i, 0, &a), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_ptr(i, 0));
    cr_assert_null(qf_tensor_ptr_dtor(i));
    qf_tensor_unref(i);
}

Test(tensor, equal_compares_dtype_shape_and_bits)
{
    const float v[] = {1, 2, 3, 4};
    qf_shape s22 = QF_SHAPE(2, 2), s4 = QF_SHAPE(4);
    qf_tensor *a = qf_tensor_new_from(QF_FLOAT32, &s22, v, sizeof(v));
    qf_tensor *b = qf_tensor_new_from(QF_FLOAT32, &s22, v, sizeof(v));
    qf_tensor *c = qf_tensor_new_from(QF_FLOAT32, &s4, v, sizeof(v));
    qf_tensor *d = qf_tensor_new_from(QF_INT32, &s22, v, sizeof(v));
    cr_assert(qf_tensor_equal(a, b));
    cr_assert(qf_tensor_equal(a, a));
    cr_assert_not(qf_tensor_equal(a, c), "shape differs");
    cr_assert_not(qf_tensor_equal(a, d), "dtype differs");
    cr_assert_not(qf_tensor_equal(a, NULL));
    cr_assert(qf_tensor_equal(NULL, NULL));
    ((float *)qf_tensor_data(b))[3] = 5;
    cr_assert_not(qf_tensor_equal(a, b));

    /* bitwise: NaN equals the same NaN, 0.0 differs from -0.0 */
    qf_tensor *n1 = qf_tensor_new_f32(NAN), *n2 = qf_tensor_new_f32(NAN);
    qf_tensor *z = qf_tensor_new_f32(0.0f), *nz = qf_tensor_new_f32(-0.0f);
    cr_assert(qf_tensor_equal(n1, n2));
    cr_assert_not(qf_tensor_equal(z, nz));

    qf_tensor *all[] = {a, b, c, d, n1, n2, z, nz};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        qf_tensor_unref(all[i]);
}

Test(tensor, copy_is_deep_and_independent)
{
    rng_state = 99;
    qf_shape s = QF_SHAPE(3, 5);
    for (size_t d = 0; d < N_DTYPES; d++) {
        qf_tensor *t = random_tensor(all_dtypes[d], &s);
        qf_tensor *c = qf_tensor_copy(t);
        cr_assert_not_null(c, "%s: %s", qf_dtype_name(all_dtypes[d]), qf_last_message());
        cr_assert_neq(c, t);
        cr_assert_eq(qf_tensor_refcount(c), 1);
        cr_assert(qf_tensor_equal(c, t), "%s", qf_dtype_name(all_dtypes[d]));
        qf_tensor_unref(t);
        /* t's strings are gone; c must still read its own */
        if (all_dtypes[d] == QF_STRING)
            cr_assert_not_null(qf_tensor_string(c, 14, NULL));
        qf_tensor_unref(c);
    }
}

Test(tensor, copy_of_owning_ptr_tensor_fails_without_destroying)
{
    obj_reset();
    qf_tensor *t = qf_tensor_new_scalar_ptr(obj_new(0), obj_dtor);
    cr_assert_null(qf_tensor_copy(t));
    cr_assert_eq(qf_last_code(), QF_FAILED_PRECONDITION);
    assert_none_destroyed(1);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    qf_tensor_unref(t);
    assert_destroyed_once(1);
}

/* ------------------------------------------------------- stack and unstack */

/* spec 40: a 32x4x128 random tensor of every dtype survives unstack + stack
 * exactly. */
Test(tensor, stack_unstack_round_trip_for_every_dtype)
{
    rng_state = 40;
    qf_shape s = QF_SHAPE(32, 4, 128);
    qf_shape row = QF_SHAPE(4, 128);
    for (size_t d = 0; d < N_DTYPES; d++) {
        qf_dtype dt = all_dtypes[d];
        qf_tensor *orig = random_tensor(dt, &s);
        qf_tensor *parts[32];
        qf_tensor *slices[32];
        for (int i = 0; i < 32; i++) {
            slices[i] = qf_tensor_slice(orig, i);
            cr_assert_not_null(slices[i], "%s", qf_last_message());
        }
        cr_assert_eq(qf_tensor_unstack(qf_tensor_ref(orig), parts), QF_OK, "%s: %s",
                     qf_dtype_name(dt), qf_last_message());
        cr_assert_eq(qf_tensor_refcount(orig), 1, "unstack consumed its reference");
        for (int i = 0; i < 32; i++) {
            cr_assert_eq(qf_tensor_refcount(parts[i]), 1);
            cr_assert(qf_shape_equal(qf_tensor_shape(parts[i]), &row));
            cr_assert(qf_tensor_equal(parts[i], slices[i]), "%s row %d", qf_dtype_name(dt), i);
            qf_tensor_unref(slices[i]);
        }
        qf_tensor *back = NULL;
        cr_assert_eq(qf_tensor_stack(parts, 32, dt, &row, &back), QF_OK, "%s: %s",
                     qf_dtype_name(dt), qf_last_message());
        cr_assert(qf_tensor_equal(back, orig), "%s", qf_dtype_name(dt));
        qf_tensor_unref(back);
        qf_tensor_unref(orig);
    }
}

Test(tensor, stack_infers_dtype_and_shape_from_the_first_part)
{
    const int32_t a[] = {1, 2}, b[] = {3, 4};
    qf_tensor *parts[] = {i32_vec(2, a), i32_vec(2, b)};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 2, QF_DT_INVALID, NULL, &batch), QF_OK);
    qf_shape want = QF_SHAPE(2, 2);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want));
    cr_assert_eq(qf_tensor_dtype(batch), QF_INT32);
    const int32_t *v = qf_tensor_cdata(batch);
    cr_assert(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4);
    qf_tensor_unref(batch);
}

Test(tensor, stack_of_shared_strings_copies_them)
{
    qf_tensor *a = qf_tensor_new_cstr("shared"), *b = qf_tensor_new_cstr("sole");
    qf_tensor *parts[] = {qf_tensor_ref(a), b};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 2, QF_STRING, NULL, &batch), QF_OK);
    cr_assert_eq(qf_tensor_refcount(a), 1);
    assert_str_at(a, 0, "shared");
    assert_str_at(batch, 0, "shared");
    assert_str_at(batch, 1, "sole");
    cr_assert_neq(qf_tensor_string(a, 0, NULL), qf_tensor_string(batch, 0, NULL));
    qf_tensor_unref(a);
    qf_tensor_unref(batch);
}

Test(tensor, stack_and_unstack_move_owned_pointers)
{
    obj_reset();
    qf_tensor *parts[3];
    for (int i = 0; i < 3; i++)
        parts[i] = qf_tensor_new_scalar_ptr(obj_new(i), obj_dtor);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 3, QF_PTR, NULL, &batch), QF_OK);
    assert_none_destroyed(3);
    cr_assert_eq(qf_tensor_ptr_dtor(batch), obj_dtor);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(((obj *)qf_tensor_ptr(batch, i))->id, i);

    qf_tensor *out[3];
    cr_assert_eq(qf_tensor_unstack(batch, out), QF_OK);
    assert_none_destroyed(3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(qf_tensor_ptr_dtor(out[i]), obj_dtor);
        cr_assert_eq(((obj *)qf_tensor_ptr(out[i], 0))->id, i);
        qf_tensor_unref(out[i]);
    }
    assert_destroyed_once(3);
}

Test(tensor, stack_of_shared_owning_part_fails_and_consumes_references)
{
    obj_reset();
    qf_tensor *parts[3];
    for (int i = 0; i < 3; i++)
        parts[i] = qf_tensor_new_scalar_ptr(obj_new(i), obj_dtor);
    qf_tensor *keep = qf_tensor_ref(parts[1]);
    qf_tensor *batch = (qf_tensor *)1;
    cr_assert_eq(qf_tensor_stack(parts, 3, QF_PTR, NULL, &batch), QF_FAILED_PRECONDITION);
    cr_assert_eq(batch, (qf_tensor *)1, "untouched on failure");
    cr_assert_eq(destroyed[0], 1, "sole part released");
    cr_assert_eq(destroyed[1], 0, "shared part still alive");
    cr_assert_eq(destroyed[2], 1);
    cr_assert_eq(qf_tensor_refcount(keep), 1);
    qf_tensor_unref(keep);
    assert_destroyed_once(3);
}

Test(tensor, stack_rejects_mixed_pointer_destructors)
{
    obj_reset();
    qf_tensor *parts[] = {qf_tensor_new_scalar_ptr(obj_new(0), obj_dtor),
                          qf_tensor_new_scalar_ptr(obj_new(1), other_dtor)};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 2, QF_PTR, NULL, &batch), QF_INVALID_ARGUMENT);
    assert_destroyed_once(2);
}

Test(tensor, unstack_of_shared_owning_tensor_fails_and_consumes_reference)
{
    obj_reset();
    qf_shape s = QF_SHAPE(2);
    qf_tensor *t = qf_tensor_new_ptr(&s, obj_dtor);
    qf_tensor_set_ptr(t, 0, obj_new(0));
    qf_tensor_set_ptr(t, 1, obj_new(1));
    qf_tensor_ref(t);
    qf_tensor *out[2] = {NULL, NULL};
    cr_assert_eq(qf_tensor_unstack(t, out), QF_FAILED_PRECONDITION);
    cr_assert_null(out[0]);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    assert_none_destroyed(2);
    qf_tensor_unref(t);
    assert_destroyed_once(2);
}

Test(tensor, unstack_of_shared_strings_copies_them)
{
    const char *v[] = {"x", "yy"};
    qf_tensor *t = str_vec(2, v);
    qf_tensor *out[2];
    cr_assert_eq(qf_tensor_unstack(qf_tensor_ref(t), out), QF_OK);
    assert_str_at(t, 0, "x");
    assert_str_at(t, 1, "yy");
    assert_str_at(out[0], 0, "x");
    assert_str_at(out[1], 0, "yy");
    qf_tensor_unref(t);
    qf_tensor_unref(out[0]);
    qf_tensor_unref(out[1]);
}

Test(tensor, stack_of_unowned_pointers_copies_them_from_shared_parts)
{
    int x, y;
    qf_tensor *a = qf_tensor_new_scalar_ptr(&x, NULL), *b = qf_tensor_new_scalar_ptr(&y, NULL);
    qf_tensor *parts[] = {qf_tensor_ref(a), b};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 2, QF_PTR, NULL, &batch), QF_OK);
    cr_assert_eq(qf_tensor_ptr(batch, 0), &x);
    cr_assert_eq(qf_tensor_ptr(batch, 1), &y);
    cr_assert_eq(qf_tensor_ptr(a, 0), &x, "shared part untouched");
    qf_tensor_unref(a);
    qf_tensor_unref(batch);
}

Test(tensor, stack_reports_dtype_mismatch_and_consumes_parts)
{
    qf_tensor *f = qf_tensor_new_f32(1);
    qf_tensor *parts[] = {qf_tensor_new_i32(1), qf_tensor_ref(f)};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 2, QF_INT32, NULL, &batch), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(),
                     "Type mismatch in stack component 1. Expected int32, got float");
    cr_assert_null(batch);
    cr_assert_eq(qf_tensor_refcount(f), 1);
    qf_tensor_unref(f);
}

Test(tensor, stack_reports_shape_mismatch_like_tensorflow)
{
    const int32_t a[] = {1, 2}, b[] = {1, 2, 3};
    qf_tensor *keep = i32_vec(3, b);
    qf_tensor *parts[] = {i32_vec(2, a), qf_tensor_ref(keep)};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 2, QF_INT32, NULL, &batch), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(),
                     "Shape mismatch in stack component 1. Expected [2], got [3]");
    cr_assert_eq(qf_tensor_refcount(keep), 1);

    qf_shape want = QF_SHAPE(2);
    qf_tensor *one[] = {keep};
    cr_assert_eq(qf_tensor_stack(one, 1, QF_DT_INVALID, &want, &batch), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(),
                     "Shape mismatch in stack component 0. Expected [2], got [3]");
}

Test(tensor, stack_argument_errors)
{
    qf_tensor *batch = NULL;
    qf_shape partial = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_shape s1 = QF_SHAPE(1);

    qf_tensor *p1[] = {qf_tensor_new_i32(1)};
    cr_assert_eq(qf_tensor_stack(p1, 1, QF_INT32, &partial, &batch), QF_INVALID_ARGUMENT,
                 "element shape must be fully defined");
    cr_assert_str_eq(qf_last_message(), "Stack element shape [?] is not fully defined");

    qf_tensor *p2[] = {qf_tensor_new_i32(1), NULL};
    cr_assert_eq(qf_tensor_stack(p2, 2, QF_INT32, NULL, &batch), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "Stack component 1 is NULL");

    qf_tensor *p3[] = {qf_tensor_new_i32(1)};
    cr_assert_eq(qf_tensor_stack(p3, 1, (qf_dtype)55, NULL, &batch), QF_INVALID_ARGUMENT);

    qf_tensor *p4[] = {qf_tensor_new_i32(1)};
    cr_assert_eq(qf_tensor_stack(p4, 1, QF_INT32, NULL, NULL), QF_INVALID_ARGUMENT);

    cr_assert_eq(qf_tensor_stack(NULL, 0, QF_DT_INVALID, &s1, &batch), QF_INVALID_ARGUMENT,
                 "zero parts need a dtype");
    cr_assert_eq(qf_tensor_stack(NULL, 0, QF_INT32, NULL, &batch), QF_INVALID_ARGUMENT,
                 "zero parts need a shape");
    cr_assert_eq(qf_tensor_stack(NULL, 0, QF_INT32, &partial, &batch), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_tensor_stack(NULL, 2, QF_INT32, &s1, &batch), QF_INVALID_ARGUMENT);

    /* the batch would need rank QF_MAX_RANK + 1 */
    int64_t ones[QF_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    qf_shape full = qf_shape_make(QF_MAX_RANK, ones);
    qf_tensor *p5[] = {qf_tensor_new(QF_INT8, &full)};
    cr_assert_eq(qf_tensor_stack(p5, 1, QF_INT8, NULL, &batch), QF_INVALID_ARGUMENT);
}

Test(tensor, stack_of_zero_parts_has_batch_size_zero)
{
    qf_shape s = QF_SHAPE(2, 3);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(NULL, 0, QF_FLOAT32, &s, &batch), QF_OK);
    qf_shape want = QF_SHAPE(0, 2, 3);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want), "got %s", fmt(qf_tensor_shape(batch)));
    cr_assert_eq(qf_tensor_num_elements(batch), 0);
    cr_assert_eq(qf_tensor_dtype(batch), QF_FLOAT32);

    qf_tensor *out[1] = {NULL};
    cr_assert_eq(qf_tensor_unstack(batch, out), QF_OK);
    cr_assert_null(out[0], "nothing written for zero rows");

    qf_shape sc = qf_shape_scalar();
    cr_assert_eq(qf_tensor_stack(NULL, 0, QF_STRING, &sc, &batch), QF_OK);
    qf_shape want0 = QF_SHAPE(0);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want0));
    qf_tensor_unref(batch);
}

Test(tensor, stack_of_scalars_gives_a_vector)
{
    qf_tensor *parts[] = {qf_tensor_new_i64(10), qf_tensor_new_i64(20), qf_tensor_new_i64(30)};
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack(parts, 3, QF_INT64, NULL, &batch), QF_OK);
    qf_shape want = QF_SHAPE(3);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want));
    const int64_t *v = qf_tensor_cdata(batch);
    cr_assert(v[0] == 10 && v[1] == 20 && v[2] == 30);
    qf_tensor_unref(batch);
}

Test(tensor, unstack_of_a_scalar_fails_and_consumes_reference)
{
    qf_tensor *t = qf_tensor_new_i32(3);
    qf_tensor *out[1] = {NULL};
    cr_assert_eq(qf_tensor_unstack(qf_tensor_ref(t), out), QF_INVALID_ARGUMENT);
    cr_assert_null(out[0]);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    cr_assert_eq(qf_tensor_unstack(qf_tensor_ref(t), NULL), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    qf_tensor_unref(t);
    cr_assert_eq(qf_tensor_unstack(NULL, out), QF_INVALID_ARGUMENT);
}

Test(tensor, slice_returns_one_row_and_checks_range)
{
    const int32_t v[] = {1, 2, 3, 4, 5, 6};
    qf_shape s = QF_SHAPE(3, 2);
    qf_tensor *t = qf_tensor_new_from(QF_INT32, &s, v, sizeof(v));
    qf_tensor *r = qf_tensor_slice(t, 2);
    qf_shape want = QF_SHAPE(2);
    cr_assert(qf_shape_equal(qf_tensor_shape(r), &want));
    const int32_t *rv = qf_tensor_cdata(r);
    cr_assert(rv[0] == 5 && rv[1] == 6);
    cr_assert_eq(qf_tensor_refcount(t), 1, "slice does not consume");
    qf_tensor_unref(r);

    cr_assert_null(qf_tensor_slice(t, 3));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_tensor_slice(t, -1));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    qf_tensor_unref(t);

    qf_tensor *sc = qf_tensor_new_i32(1);
    cr_assert_null(qf_tensor_slice(sc, 0));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    qf_tensor_unref(sc);

    obj_reset();
    qf_shape p = QF_SHAPE(1);
    qf_tensor *owning = qf_tensor_new_ptr(&p, obj_dtor);
    qf_tensor_set_ptr(owning, 0, obj_new(0));
    cr_assert_null(qf_tensor_slice(owning, 0));
    cr_assert_eq(qf_last_code(), QF_FAILED_PRECONDITION);
    qf_tensor_unref(owning);
    assert_destroyed_once(1);
}

/* -------------------------------------------------------------- padded stack */

/* spec 90: strings padded with "" to the longest in the batch. */
Test(tensor, stack_padded_pads_strings_with_empty)
{
    const char *e0[] = {"a"}, *e1[] = {"ab"}, *e2[] = {"abc"}, *e3[] = {"abc", "d"},
               *e4[] = {"abc", "d", "e"};
    qf_tensor *parts[] = {str_vec(1, e0), str_vec(1, e1), str_vec(1, e2), str_vec(2, e3),
                          str_vec(3, e4)};
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 5, QF_STRING, &pad, &batch), QF_OK, "%s",
                 qf_last_message());
    qf_shape want = QF_SHAPE(5, 3);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want), "got %s", fmt(qf_tensor_shape(batch)));
    static const char *const expect[] = {"a", "",    "",  "ab", "",    "",  "abc", "",
                                         "",  "abc", "d", "",   "abc", "d", "e"};
    for (int i = 0; i < 15; i++)
        assert_str_at(batch, i, expect[i]);
    qf_tensor_unref(batch);
}

/* spec 90: ints of pad shape (1,None) padded with 0. */
Test(tensor, stack_padded_pads_numbers_with_zero)
{
    qf_shape s1 = QF_SHAPE(1, 1), s2 = QF_SHAPE(1, 2), s3 = QF_SHAPE(1, 3);
    qf_tensor *parts[] = {
        qf_tensor_new_from(QF_INT32, &s1, (const int32_t[]){1}, 4),
        qf_tensor_new_from(QF_INT32, &s1, (const int32_t[]){2}, 4),
        qf_tensor_new_from(QF_INT32, &s1, (const int32_t[]){3}, 4),
        qf_tensor_new_from(QF_INT32, &s2, (const int32_t[]){1, 2}, 8),
        qf_tensor_new_from(QF_INT32, &s3, (const int32_t[]){1, 2, 3}, 12),
    };
    qf_shape pad = QF_SHAPE(1, QF_UNKNOWN_DIM);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 5, QF_INT32, &pad, &batch), QF_OK, "%s",
                 qf_last_message());
    qf_shape want = QF_SHAPE(5, 1, 3);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want), "got %s", fmt(qf_tensor_shape(batch)));
    static const int32_t expect[] = {1, 0, 0, 2, 0, 0, 3, 0, 0, 1, 2, 0, 1, 2, 3};
    cr_assert_arr_eq(qf_tensor_cdata(batch), expect, sizeof(expect));
    qf_tensor_unref(batch);
}

/* Element k of a part of shape p lands at the same multi-index in the
 * padded block; everything else is 0. Checked for rank 5. */
Test(tensor, stack_padded_handles_rank_five)
{
    rng_state = 5;
    const int64_t pdims[3][5] = {{2, 3, 1, 4, 2}, {1, 3, 2, 2, 3}, {2, 3, 0, 1, 1}};
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM, 3, QF_UNKNOWN_DIM, QF_UNKNOWN_DIM, QF_UNKNOWN_DIM);
    const int64_t odims[5] = {2, 3, 2, 4, 3};
    qf_tensor *parts[3], *keep[3];
    for (int i = 0; i < 3; i++) {
        qf_shape ps = qf_shape_make(5, pdims[i]);
        keep[i] = parts[i] = random_tensor(QF_INT16, &ps);
        qf_tensor_ref(keep[i]);
    }
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 3, QF_INT16, &pad, &batch), QF_OK, "%s",
                 qf_last_message());
    qf_shape want = QF_SHAPE(3, 2, 3, 2, 4, 3);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want), "got %s", fmt(qf_tensor_shape(batch)));

    const int16_t *out = qf_tensor_cdata(batch);
    int64_t block = 2 * 3 * 2 * 4 * 3;
    for (int i = 0; i < 3; i++) {
        const int16_t *in = qf_tensor_cdata(keep[i]);
        int64_t idx[5];
        for (int64_t o = 0; o < block; o++) {
            int64_t rem = o, src = 0;
            bool inside = true;
            for (int k = 4; k >= 0; k--) {
                idx[k] = rem % odims[k];
                rem /= odims[k];
            }
            for (int k = 0; k < 5; k++) {
                if (idx[k] >= pdims[i][k])
                    inside = false;
                src = src * pdims[i][k] + idx[k];
            }
            int16_t want_v = inside ? in[src] : 0;
            cr_assert_eq(out[i * block + o], want_v, "part %d offset %lld", i, (long long)o);
        }
        qf_tensor_unref(keep[i]);
    }
    qf_tensor_unref(batch);
}

/* spec 93: no parts with pad shape (None,) gives shape [0,0]. */
Test(tensor, stack_padded_of_zero_parts_sets_unknown_dims_to_zero)
{
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(NULL, 0, QF_INT32, &pad, &batch), QF_OK);
    qf_shape want = QF_SHAPE(0, 0);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want), "got %s", fmt(qf_tensor_shape(batch)));
    qf_tensor_unref(batch);

    qf_shape pad2 = QF_SHAPE(QF_UNKNOWN_DIM, 3);
    cr_assert_eq(qf_tensor_stack_padded(NULL, 0, QF_STRING, &pad2, &batch), QF_OK);
    qf_shape want2 = QF_SHAPE(0, 0, 3);
    cr_assert(qf_shape_equal(qf_tensor_shape(batch), &want2));
    qf_tensor_unref(batch);
}

/* spec 88: known dims of the pad shape are still checked. */
Test(tensor, stack_padded_checks_known_dims)
{
    qf_shape ok_s = QF_SHAPE(2, 3), bad_s = QF_SHAPE(3, 4);
    qf_tensor *bad = qf_tensor_new(QF_FLOAT32, &bad_s);
    qf_tensor *parts[] = {qf_tensor_new(QF_FLOAT32, &ok_s), qf_tensor_ref(bad)};
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM, 3);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 2, QF_FLOAT32, &pad, &batch), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(),
                     "Shape mismatch in stack component 1. Expected [?,3], got [3,4]");
    cr_assert_null(batch);
    cr_assert_eq(qf_tensor_refcount(bad), 1);

    qf_shape v = QF_SHAPE(3);
    qf_tensor *rank[] = {qf_tensor_new(QF_FLOAT32, &v)};
    cr_assert_eq(qf_tensor_stack_padded(rank, 1, QF_FLOAT32, &pad, &batch), QF_INVALID_ARGUMENT,
                 "rank must match");

    qf_shape u = qf_shape_unknown();
    qf_tensor *p2[] = {bad};
    cr_assert_eq(qf_tensor_stack_padded(p2, 1, QF_FLOAT32, &u, &batch), QF_INVALID_ARGUMENT,
                 "pad shape needs a rank");
    cr_assert_eq(qf_tensor_stack_padded(NULL, 0, QF_FLOAT32, NULL, &batch), QF_INVALID_ARGUMENT);
}

Test(tensor, stack_padded_with_known_shape_matches_stack)
{
    rng_state = 92;
    qf_shape s = QF_SHAPE(4, 4, 4, 4);
    qf_shape pad = QF_SHAPE(4, QF_UNKNOWN_DIM, 4, QF_UNKNOWN_DIM);
    qf_tensor *a[10], *b[10];
    for (int i = 0; i < 10; i++) {
        a[i] = random_tensor(QF_INT32, &s);
        b[i] = qf_tensor_ref(a[i]);
    }
    qf_tensor *x = NULL, *y = NULL;
    cr_assert_eq(qf_tensor_stack(a, 10, QF_INT32, &s, &x), QF_OK);
    cr_assert_eq(qf_tensor_stack_padded(b, 10, QF_INT32, &pad, &y), QF_OK);
    cr_assert(qf_tensor_equal(x, y));
    qf_tensor_unref(x);
    qf_tensor_unref(y);
}

Test(tensor, stack_padded_moves_owned_pointers_and_pads_with_null)
{
    obj_reset();
    qf_shape s1 = QF_SHAPE(1), s2 = QF_SHAPE(2);
    qf_tensor *a = qf_tensor_new_ptr(&s1, obj_dtor), *b = qf_tensor_new_ptr(&s2, obj_dtor);
    qf_tensor_set_ptr(a, 0, obj_new(0));
    qf_tensor_set_ptr(b, 0, obj_new(1));
    qf_tensor_set_ptr(b, 1, obj_new(2));
    qf_tensor *parts[] = {a, b};
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 2, QF_PTR, &pad, &batch), QF_OK);
    assert_none_destroyed(3);
    cr_assert_eq(((obj *)qf_tensor_ptr(batch, 0))->id, 0);
    cr_assert_null(qf_tensor_ptr(batch, 1), "padding");
    cr_assert_eq(((obj *)qf_tensor_ptr(batch, 2))->id, 1);
    cr_assert_eq(((obj *)qf_tensor_ptr(batch, 3))->id, 2);
    qf_tensor_unref(batch);
    assert_destroyed_once(3);
}

Test(tensor, stack_padded_pads_bools_with_false)
{
    qf_shape s1 = QF_SHAPE(1), s3 = QF_SHAPE(3);
    qf_tensor *parts[] = {qf_tensor_new_from(QF_BOOL, &s1, (const bool[]){true}, 1),
                          qf_tensor_new_from(QF_BOOL, &s3, (const bool[]){true, true, true}, 3)};
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 2, QF_BOOL, &pad, &batch), QF_OK);
    const bool *v = qf_tensor_cdata(batch);
    cr_assert(v[0] && !v[1] && !v[2] && v[3] && v[4] && v[5]);
    qf_tensor_unref(batch);
}

Test(tensor, stack_padded_of_scalars_is_a_plain_stack)
{
    qf_tensor *parts[] = {qf_tensor_new_cstr("p"), qf_tensor_new_cstr("q")};
    qf_shape pad = qf_shape_scalar();
    qf_tensor *batch = NULL;
    cr_assert_eq(qf_tensor_stack_padded(parts, 2, QF_DT_INVALID, &pad, &batch), QF_OK);
    assert_str_at(batch, 0, "p");
    assert_str_at(batch, 1, "q");
    qf_tensor_unref(batch);
}

/* A scalar that dies comes back made for the next scalar of any numeric
 * dtype (the block stash): whatever it was, the new one has its own dtype,
 * value, one element, rank 0 and one reference. Tensors that are not such
 * scalars ([1], a string) are never kept. White-box (the stash and the
 * tensor's block class); under AddressSanitizer there is no stash. */
Test(tensor, a_reused_scalar_is_a_whole_new_scalar)
{
    /* This thread's cache made live, and its stash emptied of what earlier
     * tests in this process may have left (the stash holds scalars only). */
    qf_tensor *warm = qf_tensor_new_i64(0);
    cr_assert_not_null(warm);
    uint8_t cls = warm->block_class;
    qf_tensor_unref(warm);
    for (void *p; (p = qf__block_stash_pop(cls)) != NULL;)
        qf__block_free(p, cls);
    qf_tensor *a = qf_tensor_new_i64(-5);
    cr_assert_not_null(a);
    qf_tensor_unref(a);
    qf_tensor *b = qf_tensor_new_f32(2.5f);
    cr_assert_not_null(b);
    if (!QFT_ASAN)
        cr_assert_eq(b, a, "the int64 scalar's block, taken back from the stash");
    cr_assert_eq(qf_tensor_dtype(b), QF_FLOAT32);
    cr_assert_eq(*(const float *)qf_tensor_cdata(b), 2.5f);
    cr_assert_eq(qf_tensor_num_elements(b), 1);
    cr_assert_eq(qf_tensor_shape(b)->rank, 0);
    cr_assert_eq(qf_tensor_refcount(b), 1);
    qf_tensor_ref(b);
    qf_tensor_unref(b);
    cr_assert_eq(qf_tensor_refcount(b), 1);
    qf_tensor_unref(b);

    qf_shape one = QF_SHAPE(1);
    qf_tensor *v = qf_tensor_new(QF_INT64, &one);
    qf_tensor *s = qf_tensor_new_string("xy", 2);
    cr_assert(v && s);
    qf_tensor_unref(v);
    qf_tensor_unref(s);
    if (!QFT_ASAN) {
        cr_assert_eq(qf__block_stash_pop(cls), b, "only the scalar was kept");
        cr_assert_null(qf__block_stash_pop(cls), "[1] and a string are not kept");
        qf__block_free(b, cls);
    }
    for (int i = 0; i < 4; i++) {
        qf_tensor *t = qf_tensor_new_bool(i & 1);
        cr_assert_not_null(t);
        cr_assert_eq(qf_tensor_dtype(t), QF_BOOL);
        cr_assert_eq(*(const bool *)qf_tensor_cdata(t), (bool)(i & 1));
        cr_assert_eq(qf_tensor_shape(t)->rank, 0);
        for (int d = 0; d < QF_MAX_RANK; d++)
            cr_assert_eq(qf_tensor_shape(t)->dims[d], 0);
        cr_assert_eq(qf_tensor_num_elements(t), 1);
        qf_tensor_unref(t);
    }
}
