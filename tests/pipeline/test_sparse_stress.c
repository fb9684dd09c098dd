/* test_sparse_stress.c - sparse components under contention: 16 sources
 * (one task each) on a 2-worker runtime feed a shuffle_batch_join with a
 * keep function, and 16 consumer threads (half with the thread form, half
 * polling with thread wakers) take odd-sized batches: 18 threads on the
 * machine's 2 cores. Every batch's sparse tensor
 * must pair with its dense counters (spec 171-172), every kept example must
 * arrive exactly once, and a Coordinator stop at a random moment must end
 * everything cleanly, with nothing delivered twice and nothing leaked (the
 * sanitizer builds run this too).
 *
 * Bounded in count (QF_STRESS_SCALE divides it) and in time: every wait has
 * a deadline, so a lost wake-up is a failure, not a hang; the suite's
 * timeout is the last resort.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_test_stress.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(sparse_stress, .timeout = 600);
#endif

#define NSRC 16
#define NCONS 16
#define BATCH 7
#define SEQ_BITS 32

static qf_deadline patience(void)
{
    return qf_deadline_in_s(60);
}

typedef struct src {
    atomic_long next;
    long limit;
    int64_t id;
} src;

/* (id << 32 | seq, SparseTensor([[v % 3]], [v], [3])) */
static qf_code produce(void *arg, qf_element **ret)
{
    src *s = arg;
    long seq = atomic_fetch_add(&s->next, 1);
    if (seq >= s->limit)
        return QF_OUT_OF_RANGE;
    int64_t v = s->id << SEQ_BITS | seq;
    int64_t idx[1] = {v % 3}, dense[1] = {3};
    qf_sparse *sp = NULL;
    qf_code rc = qf_sparse_new_from(QF_INT64, 1, 1, idx, &v, dense, &sp);
    if (rc != QF_OK)
        return rc;
    qf_tensor *t[2] = {qf_tensor_new_i64(v), qf_tensor_new_sparse(sp)};
    *ret = qf_element_of(2, t);
    return *ret ? QF_OK : qf_last_code();
}

static bool keep(void *arg, const qf_element *e, int64_t row, size_t source)
{
    (void)arg;
    (void)row;
    (void)source;
    int64_t v = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
    return (v & ((1ll << SEQ_BITS) - 1)) % 7 != 3;
}

typedef struct run {
    qf_batcher *b;
    long per_src;
    uint8_t *seen; /* NSRC * per_src */
    atomic_long received;
    atomic_long batches;
    atomic_int errors;
} run;

/* One batch: the sparse rows pair with the counters; mark each example. */
static void check_batch(run *r, const qf_element *e)
{
    const qf_tensor *ct = qf_element_get(e, 0);
    int64_t k = qf_tensor_shape(ct)->dims[0];
    const int64_t *c = qf_tensor_cdata(ct);
    qf_sparse *sp = qf_tensor_sparse(qf_element_get(e, 1), 0);
    bool ok = sp && qf_sparse_rank(sp) == 2 && qf_sparse_nnz(sp) == k &&
              qf_sparse_dim(sp, 0) == k && qf_sparse_dim(sp, 1) == 3;
    const int64_t *idx = ok ? qf_tensor_cdata(qf_sparse_indices(sp)) : NULL;
    const int64_t *val = ok ? qf_tensor_cdata(qf_sparse_values(sp)) : NULL;
    for (int64_t i = 0; ok && i < k; i++)
        ok = idx[2 * i] == i && idx[2 * i + 1] == c[i] % 3 && val[i] == c[i];
    for (int64_t i = 0; ok && i < k; i++) {
        int64_t id = c[i] >> SEQ_BITS, seq = c[i] & ((1ll << SEQ_BITS) - 1);
        ok = id >= 0 && id < NSRC && seq < r->per_src && seq % 7 != 3 &&
             !__atomic_exchange_n(&r->seen[id * r->per_src + seq], 1, __ATOMIC_RELAXED);
    }
    if (!ok)
        atomic_fetch_add(&r->errors, 1);
    atomic_fetch_add(&r->received, k);
    atomic_fetch_add(&r->batches, 1);
}

static void *consume_thread(void *arg)
{
    run *r = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(r->b, patience(), &e);
        if (rc == QF_OUT_OF_RANGE)
            return NULL;
        if (rc != QF_OK) {
            atomic_fetch_add(&r->errors, 1); /* a deadline: a lost wake-up */
            return NULL;
        }
        check_batch(r, e);
        qf_element_free(e);
    }
}

static void *consume_poller(void *arg)
{
    run *r = arg;
    qf_batcher_poller *p = NULL;
    if (qf_batcher_poller_new(r->b, &p) != QF_OK) {
        atomic_fetch_add(&r->errors, 1);
        return NULL;
    }
    for (;;) {
        qf_waker w;
        qf_waker_init_thread(&w);
        qf_element *e = NULL;
        qf_code rc = qf_batcher_poll_next(p, &w, &e);
        if (rc == QF_PENDING) {
            if (qf_waker_wait_until(&w, patience()) != QF_OK) {
                atomic_fetch_add(&r->errors, 1); /* never woken */
                break;
            }
            continue;
        }
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc != QF_OK) {
            atomic_fetch_add(&r->errors, 1);
            break;
        }
        check_batch(r, e);
        qf_element_free(e);
    }
    qf_batcher_poller_free(p);
    return NULL;
}

/* One round; stop_after >= 0: request a stop once that many batches were
 * taken. */
static void round_trip(long stop_after, unsigned seed)
{
    run r = {.per_src = qft_stress_scale(2000, 50)};
    atomic_init(&r.received, 0);
    atomic_init(&r.batches, 0);
    atomic_init(&r.errors, 0);
    r.seen = calloc((size_t)(NSRC * r.per_src), 1);
    cr_assert_not_null(r.seen);
    qf_runtime_options ro = {.workers = 2, .name = "sparse_stress"};
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&ro, &rt), QF_OK);
    qf_scope *s = NULL;
    cr_assert_eq(qf_scope_new(&s), QF_OK);
    qf_coord *co = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &co), QF_OK);

    src g[NSRC];
    qf_batch_source *srcs[NSRC];
    qf_dtype dt[2] = {QF_INT64, QF_SPARSE};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(QF_UNKNOWN_DIM)};
    qf_components c = {.n = 2, .dtypes = dt, .shapes = sh};
    for (int i = 0; i < NSRC; i++) {
        g[i].limit = r.per_src;
        g[i].id = i;
        atomic_init(&g[i].next, 0);
        cr_assert_eq(qf_batch_source_produce(&c, produce, &g[i], &srcs[i]), QF_OK);
    }
    qf_keep_input k = {.kind = QF_KEEP_FN, .fn = keep};
    qf_batch_options o = {
        .capacity = 64, .min_after_dequeue = 16, .seed = seed, .allow_smaller_final_batch = true};
    cr_assert_eq(qf_maybe_shuffle_batch_join(s, srcs, NSRC, &k, BATCH, &o, &r.b), QF_OK, "%s",
                 qf_last_message());
    qf_task **tasks = NULL;
    size_t nt = 0;
    cr_assert_eq(qf_start_queue_runners(rt, co, s, NULL, QF_RUNNER_START, &tasks, &nt), QF_OK);
    pthread_t th[NCONS];
    for (int i = 0; i < NCONS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, i % 2 ? consume_poller : consume_thread, &r), 0);
    if (stop_after >= 0) {
        /* wait for the batch count on a deadline; then stop mid-stream */
        qf_deadline until = patience();
        while (atomic_load(&r.batches) < stop_after && qf_now_ns() < until &&
               !qf_coord_should_stop(co))
            sched_yield();
        qf_coord_request_stop(co, NULL);
    }
    for (int i = 0; i < NCONS; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(qf_coord_join(co, NULL, 0, 30.0, false, NULL), QF_OK, "%s", qf_last_message());
    for (size_t i = 0; i < nt; i++)
        qf_task_join(tasks[i], patience(), NULL);
    cr_expect_eq(atomic_load(&r.errors), 0, "mismatched, duplicated or lost batches");
    if (stop_after < 0) { /* every kept example, once */
        long kept = 0;
        for (long seq = 0; seq < r.per_src; seq++)
            kept += seq % 7 != 3;
        cr_expect_eq(atomic_load(&r.received), kept * NSRC);
    }
    qf_tasks_free(tasks, nt);
    qf_batcher_free(r.b);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_coord_free(co);
    free(r.seen);
}

Test(sparse_stress, sixteen_sources_four_consumers_every_kept_example_once)
{
    for (unsigned i = 0; i < 3; i++)
        round_trip(-1, 17 + i);
}

Test(sparse_stress, a_stop_at_a_random_moment_ends_everything_cleanly)
{
    unsigned x = 12345;
    for (int i = 0; i < 6; i++) {
        x = x * 1664525u + 1013904223u;
        round_trip((long)(x >> 8) % 40, x);
    }
}
