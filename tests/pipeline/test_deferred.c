/* test_deferred.c - deferred tensors, match_filenames_once and the input
 * producers that read them (qf_deferred.h; spec 150-153, 155).
 *
 * The file tests make their own mkdtemp() directory. Every test uses a
 * scope of its own; ordering comes from observable state (queue contents,
 * joins, counters); nothing sleeps; every wait has a deadline only a broken
 * run reaches.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qflow.h"
#define QFT_RT_NAME "deferred"
#include "qf_test.h"

#define OK(x) cr_assert_eq((x), QF_OK, "%s: %s", #x, qf_last_message())

/* ---------------------------------------------------------------- helpers */

static bool contains(const char *s, const char *sub)
{
    return s && strstr(s, sub) != NULL;
}

static const char *str_at(const qf_tensor *t, int64_t i)
{
    const char *s = qf_tensor_string(t, i, NULL);
    cr_assert_not_null(s);
    return s;
}

/* A temporary directory, removed (two levels deep) by tdir_remove(). */
typedef struct tdir {
    char path[64];
} tdir;

static void tdir_make(tdir *d)
{
    const char *base = getenv("TMPDIR");
    snprintf(d->path, sizeof(d->path), "%s/qf_defer_XXXXXX",
             base && strlen(base) < 40 ? base : "/tmp");
    cr_assert_not_null(mkdtemp(d->path), "mkdtemp: %s", strerror(errno));
}

static void rm_tree(const char *path, int depth)
{
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
            if (unlink(p) != 0 && depth > 0)
                rm_tree(p, depth - 1);
        }
        closedir(dir);
    }
    rmdir(path);
}

static void tdir_remove(tdir *d)
{
    rm_tree(d->path, 2);
}

static const char *tpath(const tdir *d, const char *name)
{
    static char bufs[16][256];
    static int next;
    char *b = bufs[next++ % 16];
    snprintf(b, 256, "%s/%s", d->path, name);
    return b;
}

static void touch(const tdir *d, const char *name)
{
    FILE *f = fopen(tpath(d, name), "w");
    cr_assert_not_null(f, "%s: %s", name, strerror(errno));
    fputs(name, f);
    fclose(f);
}

/* The value of a deferred string vector, compared with want[0..n) (paths
 * relative to d). */
static void expect_names(const tdir *d, qf_deferred *m, const char *const *want, size_t n)
{
    qf_tensor *t = NULL;
    OK(qf_deferred_value(m, &t));
    cr_assert_eq(qf_tensor_shape(t)->rank, 1);
    cr_assert_eq(qf_tensor_shape(t)->dims[0], (int64_t)n, "matches: %lld",
                 (long long)qf_tensor_shape(t)->dims[0]);
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(str_at(t, (int64_t)i), tpath(d, want[i]));
    qf_tensor_unref(t);
}

/* ------------------------------------------------------- deferred tensors */

typedef struct counted {
    atomic_int calls;
    atomic_int freed;
    qf_code fail; /* QF_OK: give a [3] int32 tensor */
    qf_dtype dt;  /* what to give (default int32) */
} counted;

static qf_code counted_fn(void *arg, qf_tensor **ret)
{
    counted *c = arg;
    atomic_fetch_add(&c->calls, 1);
    if (c->fail != QF_OK)
        return qf_set_error(c->fail, "the value is not there");
    int32_t v[3] = {1, 2, 3};
    *ret = qf_tensor_new_from(c->dt ? c->dt : QF_INT32, &(qf_shape){1, {3}}, v, sizeof(v));
    return QF_OK;
}

static void counted_free(void *arg)
{
    counted *c = arg;
    atomic_fetch_add(&c->freed, 1);
}

Test(deferred, computed_once_and_shared)
{
    counted c = {0};
    qf_deferred *d = NULL;
    qf_shape st = QF_SHAPE(QF_UNKNOWN_DIM);
    OK(qf_deferred_new(QF_INT32, &st, counted_fn, &c, counted_free, "three", &d));
    cr_expect_eq(atomic_load(&c.calls), 0, "nothing runs at creation");
    cr_expect_eq(qf_deferred_dtype(d), QF_INT32);
    cr_expect_eq(qf_deferred_static_shape(d)->dims[0], QF_UNKNOWN_DIM);
    cr_expect_str_eq(qf_deferred_name(d), "three");
    qf_tensor *a = NULL, *b = NULL;
    OK(qf_deferred_value(d, &a));
    OK(qf_deferred_value(d, &b));
    cr_expect_eq(a, b, "the same tensor every time");
    cr_expect_eq(atomic_load(&c.calls), 1);
    qf_tensor_unref(a);
    qf_tensor_unref(b);
    qf_deferred_ref(d);
    qf_deferred_unref(d);
    cr_expect_eq(atomic_load(&c.freed), 0);
    qf_deferred_unref(d);
    cr_expect_eq(atomic_load(&c.freed), 1, "free_arg with the last reference");
}

typedef struct racer {
    qf_deferred *d;
    atomic_int *go;
    qf_tensor *got;
    qf_code rc;
} racer;

static void *race_value(void *arg)
{
    racer *r = arg;
    while (!atomic_load(r->go))
        ;                                     /* start together */
    r->rc = qf_deferred_value(r->d, &r->got); /* checked on the test's thread */
    return NULL;
}

Test(deferred, concurrent_first_calls_compute_once)
{
    counted c = {0};
    qf_deferred *d = NULL;
    OK(qf_deferred_new(QF_INT32, NULL, counted_fn, &c, NULL, NULL, &d));
    cr_expect_str_eq(qf_deferred_name(d), "deferred");
    atomic_int go = 0;
    racer r[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (racer){.d = d, .go = &go};
        cr_assert_eq(pthread_create(&t[i], NULL, race_value, &r[i]), 0);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(atomic_load(&c.calls), 1);
    for (int i = 0; i < 8; i++) {
        cr_expect_eq(r[i].rc, QF_OK);
        cr_expect_eq(r[i].got, r[0].got);
        qf_tensor_unref(r[i].got);
    }
    qf_deferred_unref(d);
}

Test(deferred, a_failure_is_kept_and_a_value_must_fit_its_declaration)
{
    counted c = {.fail = QF_NOT_FOUND};
    qf_deferred *d = NULL;
    OK(qf_deferred_new(QF_INT32, NULL, counted_fn, &c, NULL, "x", &d));
    qf_tensor *t = (qf_tensor *)(uintptr_t)0x1;
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(qf_deferred_value(d, &t), QF_NOT_FOUND);
        cr_expect_str_eq(qf_last_message(), "the value is not there");
    }
    cr_expect_eq(atomic_load(&c.calls), 1, "the error is the value");
    cr_expect_eq(t, (qf_tensor *)(uintptr_t)0x1, "untouched");
    qf_deferred_unref(d);

    /* another dtype, another shape */
    counted wrong = {.dt = QF_FLOAT32};
    OK(qf_deferred_new(QF_INT32, NULL, counted_fn, &wrong, NULL, "x", &d));
    cr_expect_eq(qf_deferred_value(d, &t), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "deferred 'x' evaluated to float [3], declared int32 <unknown>");
    qf_deferred_unref(d);
    counted ok = {0};
    qf_shape four = QF_SHAPE(4);
    OK(qf_deferred_new(QF_INT32, &four, counted_fn, &ok, NULL, "x", &d));
    cr_expect_eq(qf_deferred_value(d, &t), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "deferred 'x' evaluated to int32 [3], declared int32 [4]");
    qf_deferred_unref(d);

    /* bad creation: the argument is still released */
    counted gone = {0};
    cr_expect_eq(qf_deferred_new(QF_DT_INVALID, NULL, counted_fn, &gone, counted_free, NULL, &d),
                 QF_INVALID_ARGUMENT);
    cr_expect_eq(atomic_load(&gone.freed), 1);
    cr_expect_eq(qf_deferred_new(QF_INT32, NULL, NULL, NULL, NULL, NULL, &d), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_deferred_value(NULL, &t), QF_INVALID_ARGUMENT);
}

/* -------------------------------------------------- match_filenames_once */

Test(deferred, match_filenames_once_globs_sorts_and_keeps_duplicates)
{
    tdir d;
    tdir_make(&d);
    touch(&d, "b.txt");
    touch(&d, "a.txt");
    touch(&d, ".hidden.txt");
    touch(&d, "c.csv");
    cr_assert_eq(mkdir(tpath(&d, "sub"), 0700), 0);
    touch(&d, "sub/a1.txt");
    touch(&d, "sub/a2.txt");

    char p1[256], p2[256], p3[256];
    snprintf(p1, sizeof(p1), "%s", tpath(&d, "*.txt"));
    qf_deferred *m = NULL;
    OK(qf_match_filenames_once((const char *[]){p1}, 1, NULL, &m));
    cr_expect(contains(qf_deferred_name(m), "match_filenames_once('"), "%s", qf_deferred_name(m));
    cr_expect_eq(qf_deferred_static_shape(m)->rank, 1);
    cr_expect_eq(qf_deferred_static_shape(m)->dims[0], QF_UNKNOWN_DIM);
    /* '*' matches a leading dot, as TensorFlow's fnmatch without FNM_PERIOD */
    expect_names(&d, m, (const char *[]){".hidden.txt", "a.txt", "b.txt"}, 3);
    /* evaluated once: a new file does not join */
    touch(&d, "a0.txt");
    expect_names(&d, m, (const char *[]){".hidden.txt", "a.txt", "b.txt"}, 3);
    qf_deferred_unref(m);

    /* several patterns: matches put together and sorted, duplicates kept;
     * wildcards in a directory component; '?' and [...] */
    snprintf(p1, sizeof(p1), "%s", tpath(&d, "s?b/a[12].txt"));
    snprintf(p2, sizeof(p2), "%s", tpath(&d, "*.csv"));
    snprintf(p3, sizeof(p3), "%s", tpath(&d, "a.txt")); /* no wildcard: itself */
    const char *pats[4] = {p1, p2, p3, p3};
    OK(qf_match_filenames_once(pats, 4, "mine", &m));
    cr_expect_str_eq(qf_deferred_name(m), "mine");
    expect_names(&d, m, (const char *[]){"a.txt", "a.txt", "c.csv", "sub/a1.txt", "sub/a2.txt"}, 5);
    qf_deferred_unref(m);

    /* "." and ".." never come from a wildcard; directories do */
    snprintf(p1, sizeof(p1), "%s", tpath(&d, "*"));
    OK(qf_match_filenames_once((const char *[]){p1}, 1, NULL, &m));
    expect_names(&d, m, (const char *[]){".hidden.txt", "a.txt", "a0.txt", "b.txt", "c.csv", "sub"},
                 6);
    qf_deferred_unref(m);

    /* no match: an empty value, no error (the producer fails at run time) */
    snprintf(p1, sizeof(p1), "%s", tpath(&d, "*.none"));
    snprintf(p2, sizeof(p2), "%s", tpath(&d, "missing/*"));
    OK(qf_match_filenames_once((const char *[]){p1, p2}, 2, NULL, &m));
    expect_names(&d, m, NULL, 0);
    qf_deferred_unref(m);

    cr_expect_eq(qf_match_filenames_once((const char *[]){NULL}, 1, NULL, &m), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_match_filenames_once(pats, 0, NULL, &m), QF_INVALID_ARGUMENT);
    tdir_remove(&d);
}

Test(deferred, string_input_producer_reads_the_matched_files)
{
    /* spec 152 over match_filenames_once: the sorted names, num_epochs 2,
     * no shuffle: the list twice, then OutOfRange */
    tdir d;
    tdir_make(&d);
    touch(&d, "part-2");
    touch(&d, "part-0");
    touch(&d, "part-1");
    touch(&d, "other");
    char pat[256];
    snprintf(pat, sizeof(pat), "%s", tpath(&d, "part-*"));
    qf_deferred *m = NULL;
    OK(qf_match_filenames_once((const char *[]){pat}, 1, NULL, &m));
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 2, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *q = NULL;
    OK(qf_string_input_producer_deferred(s, m, &o, &q));
    qf_deferred_unref(m); /* the producer holds its own */
    cr_expect_eq(qf_queue_shape(q, 0)->rank, 0, "element_shape []");
    cr_expect_str_eq(qf_queue_name(q), "input_producer");
    started st = start(rt, NULL, s);
    qf_element *e = NULL;
    OK(qf_queue_dequeue_many_until(q, 6, soon(), &e));
    const char *want[3] = {"part-0", "part-1", "part-2"};
    for (int i = 0; i < 6; i++)
        cr_expect_str_eq(str_at(qf_element_get(e, 0), i), tpath(&d, want[i % 3]));
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_queue_unref(q);
    qf_runtime_free(rt);
    qf_scope_free(s);
    tdir_remove(&d);
}

Test(deferred, spec_155_an_empty_match_fails_the_producer_when_it_starts)
{
    /* spec 155 over match_filenames_once: nothing matches; the runner's op
     * fails when it starts, the Coordinator reports it, the stop closes the
     * queue and the consumer gets OutOfRange */
    tdir d;
    tdir_make(&d);
    char pat[256];
    snprintf(pat, sizeof(pat), "%s", tpath(&d, "*.csv"));
    qf_deferred *m = NULL;
    OK(qf_match_filenames_once((const char *[]){pat}, 1, NULL, &m));
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    qf_queue *q = NULL;
    OK(qf_string_input_producer_deferred(s, m, NULL, &q));
    started st = start(rt, c, s);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "string_input_producer requires a non-null input tensor"),
              "%s", qf_last_message());
    cr_expect(contains(qf_last_message(), "evaluated to no strings"), "%s", qf_last_message());
    cr_expect(contains(qf_last_message(), pat), "the message names the pattern: %s",
              qf_last_message());
    join_all(&st);
    /* the caller can look before starting anything, as with
     * local_variables_initializer() */
    qf_tensor *t = NULL;
    OK(qf_deferred_value(m, &t));
    cr_expect_eq(qf_tensor_num_elements(t), 0);
    qf_tensor_unref(t);
    qf_deferred_unref(m);
    qf_queue_unref(q);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    tdir_remove(&d);
}

Test(deferred, string_producer_shuffles_the_matched_names_per_epoch)
{
    /* spec 153 over a deferred input: every epoch a permutation */
    tdir d;
    tdir_make(&d);
    touch(&d, "a");
    touch(&d, "b");
    touch(&d, "c");
    char pat[256];
    snprintf(pat, sizeof(pat), "%s", tpath(&d, "?"));
    qf_deferred *m = NULL;
    OK(qf_match_filenames_once((const char *[]){pat}, 1, NULL, &m));
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 30, .seed = 271828};
    qf_queue *q = NULL;
    OK(qf_string_input_producer_deferred(s, m, &o, &q));
    started st = start(rt, NULL, s);
    int orders = 0;
    char first[3] = {0};
    for (int ep = 0; ep < 30; ep++) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue_many_until(q, 3, soon(), &e));
        int seen = 0;
        char order[3];
        for (int i = 0; i < 3; i++) {
            const char *n = str_at(qf_element_get(e, 0), i);
            order[i] = n[strlen(n) - 1];
            seen |= 1 << (order[i] - 'a');
        }
        cr_expect_eq(seen, 7, "epoch %d is a permutation", ep);
        if (ep == 0)
            memcpy(first, order, 3);
        else if (memcmp(first, order, 3) != 0)
            orders++;
        qf_element_free(e);
    }
    cr_expect_gt(orders, 0, "the order changes from epoch to epoch");
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_deferred_unref(m);
    qf_queue_unref(q);
    qf_runtime_free(rt);
    qf_scope_free(s);
    tdir_remove(&d);
}

/* ------------------------------------------- input_producer, spec 150-151 */

static qf_code rows_3x4(void *arg, qf_tensor **ret)
{
    int cols = arg ? *(const int *)arg : 4;
    int32_t v[12];
    for (int i = 0; i < 12; i++)
        v[i] = i + 1;
    *ret = qf_tensor_new_from(QF_INT32, &(qf_shape){2, {12 / cols, cols}}, v, sizeof(v));
    return QF_OK;
}

/* Run a producer over a 3x4 deferred value with the given static shape and
 * element_shape: spec 150's rows twice, then OutOfRange. */
static void rows_twice(qf_shape static_shape, const qf_shape *element_shape)
{
    qf_deferred *d = NULL;
    OK(qf_deferred_new(QF_INT32, &static_shape, rows_3x4, NULL, NULL, "input_tensor", &d));
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {
        .num_epochs = 2, .shuffle = QF_SHUFFLE_OFF, .element_shape = element_shape};
    qf_queue *q = NULL;
    OK(qf_input_producer_deferred(s, d, &o, &q));
    qf_deferred_unref(d);
    cr_expect_eq(qf_queue_shape(q, 0)->rank, 1);
    cr_expect_eq(qf_queue_shape(q, 0)->dims[0], 4);
    started st = start(rt, NULL, s);
    qf_element *e = NULL;
    OK(qf_queue_dequeue_many_until(q, 6, soon(), &e));
    const int32_t *v = qf_tensor_cdata(qf_element_get(e, 0));
    for (int i = 0; i < 24; i++)
        cr_expect_eq(v[i], i % 12 + 1);
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_queue_unref(q);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(deferred, spec_150_input_producer_with_element_shape_when_the_shape_is_unknown)
{
    /* spec 150: the input's static shape is unknown and element_shape=[4]
     * gives the rows twice in order, then OutOfRange; a static shape that
     * already tells the rows ([?,4]) needs no element_shape, and a partial
     * one merges with it ([?,?] + [4]) */
    qf_shape four = QF_SHAPE(4), any = QF_SHAPE(QF_UNKNOWN_DIM);
    rows_twice(qf_shape_unknown(), &four);
    rows_twice(QF_SHAPE(QF_UNKNOWN_DIM, 4), NULL);
    rows_twice(QF_SHAPE(QF_UNKNOWN_DIM, QF_UNKNOWN_DIM), &four);
    rows_twice(QF_SHAPE(3, 4), &any);
}

Test(deferred, spec_151_rows_of_unknown_shape_need_element_shape)
{
    /* spec 151: "Either `input_tensor` must have a fully defined shape or
     * `element_shape` must be specified"; nothing is created */
    qf_scope *s = mkscope();
    qf_deferred *d = NULL;
    qf_shape partial = QF_SHAPE(QF_UNKNOWN_DIM, QF_UNKNOWN_DIM);
    OK(qf_deferred_new(QF_INT32, &partial, rows_3x4, NULL, NULL, NULL, &d));
    qf_queue *q = NULL;
    cr_expect_eq(qf_input_producer_deferred(s, d, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Either `input_tensor` must have a fully defined shape or "
                                        "`element_shape` must be specified");
    qf_shape still_partial = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_input_producer_options o = {.element_shape = &still_partial};
    cr_expect_eq(qf_input_producer_deferred(s, d, &o, &q), QF_INVALID_ARGUMENT);
    qf_shape three = QF_SHAPE(3), two_dims = QF_SHAPE(2, 2);
    qf_deferred *d4 = NULL;
    qf_shape st4 = QF_SHAPE(QF_UNKNOWN_DIM, 4);
    OK(qf_deferred_new(QF_INT32, &st4, rows_3x4, NULL, NULL, NULL, &d4));
    o.element_shape = &three;
    cr_expect_eq(qf_input_producer_deferred(s, d4, &o, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "element_shape [3] is not compatible with the input's rows [4]");
    o.element_shape = &two_dims;
    cr_expect_eq(qf_input_producer_deferred(s, d4, &o, &q), QF_INVALID_ARGUMENT);
    /* a declared scalar has no rows; strings need a 1-D string input */
    qf_deferred *sc = NULL;
    qf_shape scalar = qf_shape_scalar();
    OK(qf_deferred_new(QF_INT32, &scalar, rows_3x4, NULL, NULL, NULL, &sc));
    cr_expect_eq(qf_input_producer_deferred(s, sc, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_string_input_producer_deferred(s, d4, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_input_producer_deferred(s, NULL, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_null(q);
    qf_queue_runner *rs[2];
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, rs, 2), 0, "nothing was added");
    qf_deferred_unref(sc);
    qf_deferred_unref(d4);
    qf_deferred_unref(d);
    qf_scope_free(s);
}

/* Run a producer whose value turns out wrong and return the op's error. */
static void value_refused_at_run(qf_deferred *d, const qf_shape *element_shape, const char *want)
{
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    qf_input_producer_options o = {.element_shape = element_shape};
    qf_queue *q = NULL;
    OK(qf_input_producer_deferred(s, d, &o, &q));
    started st = start(rt, c, s);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), want), "'%s' lacks '%s'", qf_last_message(), want);
    join_all(&st);
    qf_queue_unref(q);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
}

static qf_code scalar_fn(void *arg, qf_tensor **ret)
{
    (void)arg;
    *ret = qf_tensor_new_i32(5);
    return QF_OK;
}

static qf_code empty_rows_fn(void *arg, qf_tensor **ret)
{
    (void)arg;
    *ret = qf_tensor_new(QF_INT32, &(qf_shape){2, {0, 4}});
    return QF_OK;
}

Test(deferred, values_that_do_not_fit_fail_the_op_when_it_runs)
{
    /* spec 18 at run time: rows of another shape than the queue's; a
     * scalar; no rows */
    qf_shape four = QF_SHAPE(4);
    int three_cols = 3;
    qf_deferred *d = NULL;
    OK(qf_deferred_new(QF_INT32, NULL, rows_3x4, &three_cols, NULL, "t", &d));
    value_refused_at_run(d, &four,
                         "Shape mismatch in tuple component 0. Expected [4,4], got [4,3]");
    qf_deferred_unref(d);
    OK(qf_deferred_new(QF_INT32, NULL, scalar_fn, NULL, NULL, "t", &d));
    value_refused_at_run(d, &four, "Input tensor must be at least rank 1");
    qf_deferred_unref(d);
    OK(qf_deferred_new(QF_INT32, NULL, empty_rows_fn, NULL, NULL, "t", &d));
    value_refused_at_run(d, &four, "input_producer requires a non-empty input tensor");
    qf_deferred_unref(d);
}
