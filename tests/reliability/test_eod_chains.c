/* test_eod_chains.c - end of data through chained pipelines (reliability
 * suite): every row arrives exactly once.
 *
 * A chain is an inner batcher (its examples from a counter, a range
 * producer queue or a shuffle batch) read by an outer batcher with
 * enqueue_many through one qf_batcher_poller per outer task (TensorFlow's
 * keep_input test pattern: the outer op's run is the inner dequeue_many),
 * taken by a mix of blocking consumer threads (qf_batcher_next_until) and
 * consumer tasks (their own pollers). Each round draws its sizes, thread
 * counts and allow_smaller_final_batch settings from a seeded generator,
 * runs to the end of the data and checks:
 *   - no value arrives twice, and every value is one the source made;
 *   - the number of rows is exactly what TensorFlow delivers: everything
 *     with allow_smaller_final_batch, else whole batches only, so each
 *     batcher strands fewer than its batch_size rows (counted once for the
 *     batcher, not once per poller: spec 163);
 *   - every consumer sees end of data, and the pipeline's tasks finish.
 * Nothing sleeps to order anything; a consumer that waits longer than the
 * watchdog (QF_EOD_WATCHDOG_S, default 30 s) is a hang and fails the round
 * with the state of both queues.
 *
 * The outer batch fits its queue (batch_size <= capacity: the FIFO engine
 * takes it at once) in most tests; chains_with_batches_above_capacity has
 * outer batches larger than the queue (the engine gathers them while it
 * waits) and two or more blocking consumers. The last two tests are the
 * same end of data on a bare FIFO queue.
 *
 * Bounded: QF_RELIABILITY_ROUNDS rounds per test (default 1000) and at most
 * QF_RELIABILITY_SECONDS seconds per test (default 20); the sanitizer runs
 * divide the rounds by QF_STRESS_SCALE like the stress suites. Set the two
 * variables higher to run longer. QF_EOD_SEED fixes the first round's seed.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_test_stress.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(eod_chains, .timeout = 600);
#endif

/* ---------------------------------------------------------------- bounds */

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    long v = s ? atol(s) : 0;
    return v > 0 ? v : dflt;
}

static long rounds(void)
{
    return qft_stress_scale(env_long("QF_RELIABILITY_ROUNDS", 1000), 1);
}

static double budget_s(void)
{
    return (double)env_long("QF_RELIABILITY_SECONDS", 20);
}

static qf_deadline watchdog(void)
{
    return qf_deadline_in_s((double)env_long("QF_EOD_WATCHDOG_S", 30));
}

/* xorshift64*: each round's parameters from its seed. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static int64_t pick(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

/* ---------------------------------------------------------------- sources */

static const qf_dtype I64 = QF_INT64;

static qf_components i64_comps(void)
{
    static const qf_shape sh = {0, {0}};
    return (qf_components){.n = 1, .dtypes = &I64, .shapes = &sh};
}

/* The counter source: values 0..limit-1, once each, from any thread. */
typedef struct counter {
    atomic_long next;
    long limit;
} counter;

static qf_code count_produce(void *arg, qf_element **ret)
{
    counter *c = arg;
    long v = atomic_fetch_add(&c->next, 1);
    if (v >= c->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", c->limit);
    qf_tensor *t = qf_tensor_new_i64(v);
    *ret = qf_element_of(1, &t);
    return *ret ? QF_OK : qf_last_code();
}

/* A range producer's elements are int32: widen them for the batch. */
static qf_code widen(void *arg, qf_element *in, qf_element **ret_out)
{
    (void)arg;
    int32_t v = ((const int32_t *)qf_tensor_cdata(qf_element_get(in, 0)))[0];
    qf_element_free(in);
    qf_tensor *t = qf_tensor_new_i64(v);
    *ret_out = qf_element_of(1, &t);
    return *ret_out ? QF_OK : qf_last_code();
}

/* The outer batcher's source: each outer task takes whole inner batches
 * through a poller of its own (made on the task's first run). */
#define MAX_POLLERS 16

typedef struct poller_src {
    pthread_mutex_t mu;
    qf_batcher *inner;
    qf_task *task[MAX_POLLERS];
    qf_batcher_poller *p[MAX_POLLERS];
    int n;
} poller_src;

static qf_code poller_src_poll(qf_task *t, void *arg, qf_element **ret)
{
    poller_src *ps = arg;
    qf_batcher_poller *p = NULL;
    pthread_mutex_lock(&ps->mu);
    for (int i = 0; i < ps->n && !p; i++)
        if (ps->task[i] == t)
            p = ps->p[i];
    if (!p && ps->n < MAX_POLLERS && qf_batcher_poller_new(ps->inner, &p) == QF_OK) {
        ps->task[ps->n] = t;
        ps->p[ps->n++] = p;
    }
    pthread_mutex_unlock(&ps->mu);
    if (!p)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "no poller for this task");
    return qf_batcher_poll_next(p, qf_task_waker(t), ret);
}

/* ---------------------------------------------------------------- a round */

typedef enum { SRC_COUNTER, SRC_RANGE, SRC_SHUFFLE } src_kind;

typedef struct params {
    uint64_t seed;
    src_kind kind;
    long n;              /* values made */
    int64_t b1, b2;      /* inner, outer batch sizes */
    int t1, t2;          /* inner, outer enqueue tasks */
    bool small1, small2; /* allow_smaller_final_batch */
    int k_threads;       /* blocking consumer threads */
    int k_tasks;         /* consumer tasks (pollers) */
    int64_t cap1, cap2;
} params;

typedef struct round_state {
    const params *p;
    qf_batcher *outer;
    atomic_int *seen;      /* per value */
    atomic_long rows;      /* rows delivered */
    atomic_long dups;      /* values seen twice */
    atomic_long strangers; /* values never made */
    atomic_int hangs;      /* consumers past the watchdog */
    atomic_int bad_ends;   /* consumers ending other than OUT_OF_RANGE */
    char hang_msg[256];
} round_state;

static void take_batch(round_state *rs, qf_element *e)
{
    const qf_tensor *t = qf_element_get(e, 0);
    int64_t n = qf_tensor_shape(t)->dims[0];
    const int64_t *v = qf_tensor_cdata(t);
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= rs->p->n)
            atomic_fetch_add(&rs->strangers, 1);
        else if (atomic_fetch_add(&rs->seen[v[i]], 1) > 0)
            atomic_fetch_add(&rs->dups, 1);
    }
    atomic_fetch_add(&rs->rows, (long)n);
    qf_element_free(e);
}

static void *consumer_thread(void *arg)
{
    round_state *rs = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(rs->outer, watchdog(), &e);
        if (rc == QF_OK) {
            take_batch(rs, e);
            continue;
        }
        if (rc == QF_DEADLINE_EXCEEDED) {
            atomic_fetch_add(&rs->hangs, 1);
            snprintf(rs->hang_msg, sizeof(rs->hang_msg),
                     "a blocking consumer waited past the "
                     "watchdog");
        } else if (rc != QF_OUT_OF_RANGE) {
            atomic_fetch_add(&rs->bad_ends, 1);
        }
        return NULL;
    }
}

typedef struct consumer_task {
    round_state *rs;
    qf_batcher_poller *p;
    qf_code end;
} consumer_task;

static qf_code consume_poll(qf_task *t, void *arg)
{
    consumer_task *c = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_poll_next(c->p, qf_task_waker(t), &e);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc != QF_OK) {
            c->end = rc;
            return QF_OK;
        }
        take_batch(c->rs, e);
    }
}

/* The rows TensorFlow delivers through one batcher. */
static long through(long rows, int64_t batch, bool smaller)
{
    return smaller ? rows : rows / batch * batch;
}

static void describe(const params *p, char *buf, size_t cap)
{
    static const char *kinds[] = {"counter", "range producer", "shuffle_batch"};
    snprintf(buf, cap,
             "seed %" PRIu64 ": %s of %ld -> batch(%" PRId64
             ", threads %d, smaller %d, cap %" PRId64 ") -> poller batch(%" PRId64
             ", threads %d, smaller %d, cap %" PRId64 ") -> %d threads + %d tasks",
             p->seed, kinds[p->kind], p->n, p->b1, p->t1, p->small1, p->cap1, p->b2, p->t2,
             p->small2, p->cap2, p->k_threads, p->k_tasks);
}

static void run_round(qf_runtime *rt, const params *p)
{
    char what[512];
    describe(p, what, sizeof(what));
    qf_scope *s = NULL;
    cr_assert_eq(qf_scope_new(&s), QF_OK);
    counter cnt = {.limit = p->n};
    qf_components comps = i64_comps();

    /* ---- the inner batcher */
    qf_batch_source *src = NULL;
    qf_batcher *inner = NULL;
    qf_batch_options o1 = {.num_threads = p->t1,
                           .capacity = p->cap1,
                           .allow_smaller_final_batch = p->small1,
                           .name = "inner"};
    if (p->kind == SRC_COUNTER) {
        cr_assert_eq(qf_batch_source_produce(&comps, count_produce, &cnt, &src), QF_OK);
        cr_assert_eq(qf_batch(s, src, p->b1, &o1, &inner), QF_OK, "%s: %s", what,
                     qf_last_message());
    } else if (p->kind == SRC_RANGE) {
        qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF, .capacity = 8};
        qf_queue *ints = NULL;
        cr_assert_eq(qf_range_input_producer(s, (int32_t)p->n, &po, &ints), QF_OK);
        cr_assert_eq(qf_batch_source_queue(ints, &src), QF_OK);
        cr_assert_eq(qf_batch_source_map(src, &comps, widen, NULL, &src), QF_OK);
        cr_assert_eq(qf_batch(s, src, p->b1, &o1, &inner), QF_OK, "%s: %s", what,
                     qf_last_message());
        qf_queue_unref(ints);
    } else {
        cr_assert_eq(qf_batch_source_produce(&comps, count_produce, &cnt, &src), QF_OK);
        o1.min_after_dequeue = p->cap1 / 2;
        o1.seed = (int64_t)p->seed;
        cr_assert_eq(qf_shuffle_batch(s, src, p->b1, &o1, &inner), QF_OK, "%s: %s", what,
                     qf_last_message());
    }

    /* ---- the outer batcher, fed through pollers */
    poller_src ps = {.mu = PTHREAD_MUTEX_INITIALIZER, .inner = inner};
    qf_batch_source *osrc = NULL;
    cr_assert_eq(qf_batch_source_poll(&comps, poller_src_poll, &ps, &osrc), QF_OK);
    qf_batcher *outer = NULL;
    qf_batch_options o2 = {.num_threads = p->t2,
                           .capacity = p->cap2,
                           .enqueue_many = true,
                           .allow_smaller_final_batch = p->small2,
                           .name = "outer"};
    cr_assert_eq(qf_batch(s, osrc, p->b2, &o2, &outer), QF_OK, "%s: %s", what, qf_last_message());

    /* ---- consumers */
    round_state rs = {.p = p, .outer = outer};
    rs.seen = calloc((size_t)p->n + 1, sizeof(*rs.seen));
    cr_assert_not_null(rs.seen);
    consumer_task ct[8];
    qf_task *ctask[8];
    for (int i = 0; i < p->k_tasks; i++) {
        ct[i] = (consumer_task){.rs = &rs};
        cr_assert_eq(qf_batcher_poller_new(outer, &ct[i].p), QF_OK);
        cr_assert_eq(qf_task_spawn(rt, consume_poll, &ct[i], &(qf_task_options){.name = "consumer"},
                                   &ctask[i]),
                     QF_OK);
    }
    pthread_t th[8];
    for (int i = 0; i < p->k_threads; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, consumer_thread, &rs), 0);

    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    qf_task **tasks = NULL;
    size_t nt = 0;
    cr_assert_eq(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &tasks, &nt), QF_OK);

    /* ---- the end */
    for (int i = 0; i < p->k_threads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < p->k_tasks; i++) {
        qf_code jr = qf_task_join(ctask[i], watchdog(), NULL);
        if (jr == QF_DEADLINE_EXCEEDED) {
            atomic_fetch_add(&rs.hangs, 1);
            snprintf(rs.hang_msg, sizeof(rs.hang_msg), "a consumer task waited past the watchdog");
        } else if (ct[i].end != QF_OUT_OF_RANGE) {
            atomic_fetch_add(&rs.bad_ends, 1);
        }
    }
    if (atomic_load(&rs.hangs))
        cr_assert_fail("%s: HANG (%s): inner queue size %" PRId64 " closed %d, outer queue size "
                       "%" PRId64 " closed %d, %ld rows so far",
                       what, rs.hang_msg, qf_queue_size(qf_batcher_queue(inner)),
                       qf_queue_is_closed(qf_batcher_queue(inner)),
                       qf_queue_size(qf_batcher_queue(outer)),
                       qf_queue_is_closed(qf_batcher_queue(outer)), atomic_load(&rs.rows));
    qf_code jc = qf_coord_join(c, NULL, 0, 30.0, false, NULL);
    cr_expect_eq(jc, QF_OK, "%s: join: %s", what, qf_last_message());
    for (size_t i = 0; i < nt; i++)
        cr_expect_eq(qf_task_join(tasks[i], watchdog(), NULL), QF_OK, "%s: runner task %s", what,
                     qf_task_name(tasks[i]));

    /* ---- what arrived */
    long expected = through(through(p->n, p->b1, p->small1), p->b2, p->small2);
    long rows = atomic_load(&rs.rows);
    cr_expect_eq(atomic_load(&rs.dups), 0, "%s: rows delivered twice", what);
    cr_expect_eq(atomic_load(&rs.strangers), 0, "%s: rows never made", what);
    cr_expect_eq(atomic_load(&rs.bad_ends), 0, "%s: a consumer ended without OUT_OF_RANGE", what);
    cr_expect_eq(rows, expected,
                 "%s: %ld rows arrived, TensorFlow delivers %ld (%ld lost, %ld stranded "
                 "in the inner queue, %ld in the outer)",
                 what, rows, expected, expected - rows,
                 (long)qf_queue_size(qf_batcher_queue(inner)),
                 (long)qf_queue_size(qf_batcher_queue(outer)));
    if (p->small1 && p->small2) /* then every value, exactly once */
        for (long v = 0; v < p->n; v++)
            if (atomic_load(&rs.seen[v]) != 1) {
                cr_expect_fail("%s: value %ld arrived %d times", what, v, atomic_load(&rs.seen[v]));
                break;
            }

    /* ---- tear down: pollers before the tasks their wakers live in */
    for (int i = 0; i < p->k_tasks; i++) {
        qf_batcher_poller_free(ct[i].p);
        qf_task_unref(ctask[i]);
    }
    for (int i = 0; i < ps.n; i++)
        qf_batcher_poller_free(ps.p[i]);
    qf_tasks_free(tasks, nt);
    qf_batcher_free(inner);
    qf_batcher_free(outer);
    qf_coord_free(c);
    qf_scope_free(s);
    free(rs.seen);
}

static params draw(uint64_t seed, src_kind kind, bool above_capacity)
{
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    params p = {.seed = seed, .kind = kind};
    p.n = (long)pick(&st, 1, 400);
    p.b1 = pick(&st, 1, 8);
    p.b2 = pick(&st, above_capacity ? 2 : 1, 12);
    p.t1 = kind == SRC_RANGE ? 1 : (int)pick(&st, 1, 4);
    p.t2 = (int)pick(&st, 1, 6);
    p.small1 = rnd(&st) & 1;
    p.small2 = rnd(&st) & 1;
    p.cap1 = pick(&st, 2, 24);
    if (kind == SRC_SHUFFLE && p.cap1 < 4)
        p.cap1 = 4;
    p.cap2 = above_capacity ? pick(&st, 1, p.b2 - 1) : pick(&st, p.b2, 24);
    p.k_threads = (int)pick(&st, above_capacity ? 2 : 0, 3);
    p.k_tasks = (int)pick(&st, p.k_threads ? 0 : 1, 3);
    return p;
}

static void run_many(src_kind kind, int workers, bool above_capacity)
{
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = workers, .name = "eod"}, &rt),
                 QF_OK);
    uint64_t seed0 = (uint64_t)env_long("QF_EOD_SEED", 1);
    long n = rounds();
    qf_deadline stop = qf_deadline_in_s(budget_s());
    long done = 0;
    for (long r = 0; r < n && !qf_deadline_passed(stop); r++, done++) {
        params p = draw(seed0 + (uint64_t)r, kind, above_capacity);
        run_round(rt, &p);
    }
    cr_log_info("%ld rounds", done);
    qf_runtime_free(rt);
}

/* ------------------------------------------------------------------ tests */

/* The case, exactly: an inner batch(4) over 0..39 read by an outer
 * batch(enqueue_many, num_threads=5) fed through one poller per task. It
 * lost 4-12 rows in about 1% of runs (4% on a 2-core machine). */
Test(eod_chains, keep_input_pattern_delivers_all_forty)
{
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2, .name = "eod"}, &rt), QF_OK);
    long n = rounds() * 4;
    qf_deadline stop = qf_deadline_in_s(budget_s());
    for (long r = 0; r < n && !qf_deadline_passed(stop); r++) {
        params p = {.seed = (uint64_t)r,
                    .kind = SRC_COUNTER,
                    .n = 40,
                    .b1 = 4,
                    .b2 = 5,
                    .t1 = 1,
                    .t2 = 5,
                    .small1 = false,
                    .small2 = true,
                    .cap1 = 32,
                    .cap2 = 32,
                    .k_threads = 1,
                    .k_tasks = 0};
        run_round(rt, &p);
    }
    qf_runtime_free(rt);
}

Test(eod_chains, counter_chains_with_mixed_consumers)
{
    run_many(SRC_COUNTER, 2, false);
}

Test(eod_chains, range_producer_chains_with_mixed_consumers)
{
    run_many(SRC_RANGE, 2, false);
}

Test(eod_chains, shuffle_batch_chains_with_mixed_consumers)
{
    run_many(SRC_SHUFFLE, 2, false);
}

Test(eod_chains, chains_on_an_oversubscribed_pool)
{
    /* 8 workers on however few cores: tasks interleave at every step */
    run_many(SRC_COUNTER, 8, false);
}

Test(eod_chains, chains_with_batches_above_capacity)
{
    /* outer batch_size > its queue's capacity, two or three blocking
     * consumers: the engine gathers each batch while it waits */
    run_many(SRC_COUNTER, 2, true);
}

/* The same end of data on a bare FIFO queue: consumer threads in
 * dequeue_many(n) (or dequeue_up_to) while elements go in and the queue
 * closes. Every consumer must see end of data, and once all have, fewer
 * than n may be left (what TensorFlow leaves). */
typedef struct many_consumer {
    qf_queue *q;
    int64_t n;
    bool up_to;
    atomic_long *got;
} many_consumer;

static void *dequeue_many_until_end(void *arg)
{
    many_consumer *m = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = m->up_to ? qf_queue_dequeue_up_to_until(m->q, m->n, watchdog(), &e)
                              : qf_queue_dequeue_many_until(m->q, m->n, watchdog(), &e);
        if (rc != QF_OK)
            return (void *)(intptr_t)rc;
        atomic_fetch_add(m->got, (long)qf_tensor_shape(qf_element_get(e, 0))->dims[0]);
        qf_element_free(e);
    }
}

static void bare_queue_rounds(int64_t capacity, int64_t n, int consumers, long n_rounds)
{
    qf_deadline stop = qf_deadline_in_s(budget_s());
    qf_shape sh = qf_shape_scalar();
    for (long r = 0; r < n_rounds && !qf_deadline_passed(stop); r++) {
        qf_queue_options o = {
            .capacity = capacity, .num_components = 1, .dtypes = &I64, .shapes = &sh};
        qf_queue *q = NULL;
        cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
        atomic_long got = 0;
        many_consumer m = {q, n, r % 2 == 1, &got};
        pthread_t t[4];
        for (int i = 0; i < consumers; i++)
            cr_assert_eq(pthread_create(&t[i], NULL, dequeue_many_until_end, &m), 0);
        long made = 10 * n + r % n;
        for (long v = 0; v < made; v++) {
            qf_tensor *x = qf_tensor_new_i64(v);
            cr_assert_eq(qf_queue_enqueue(q, qf_element_of(1, &x)), QF_OK);
        }
        cr_assert_eq(qf_queue_close(q, false), QF_OK);
        int hung = 0;
        for (int i = 0; i < consumers; i++) {
            void *rc = NULL;
            pthread_join(t[i], &rc);
            if ((qf_code)(intptr_t)rc == QF_DEADLINE_EXCEEDED)
                hung++;
            else
                cr_expect_eq((qf_code)(intptr_t)rc, QF_OUT_OF_RANGE);
        }
        cr_assert_eq(hung, 0,
                     "round %ld (capacity %lld, %s(%lld), %d consumers): %d consumer(s) still "
                     "asleep after the close; %ld of %ld taken, %lld left",
                     r, (long long)capacity, m.up_to ? "dequeue_up_to" : "dequeue_many",
                     (long long)n, consumers, hung, atomic_load(&got), made,
                     (long long)qf_queue_size(q));
        if (m.up_to)
            cr_expect_eq(atomic_load(&got), made, "round %ld: dequeue_up_to takes everything", r);
        else
            cr_expect_lt(qf_queue_size(q), n,
                         "round %ld: %lld left in the closed queue after every dequeue_many(%lld) "
                         "saw end of data (%ld of %ld taken)",
                         r, (long long)qf_queue_size(q), (long long)n, atomic_load(&got), made);
        qf_queue_unref(q);
    }
}

Test(eod_chains, fifo_dequeue_many_at_close_leaves_fewer_than_n)
{
    /* batches that fit the queue; before the engine's rework two holders
     * could both give their part back at the close (1 in 20,000 rounds) */
    bare_queue_rounds(8, 4, 3, rounds() * 4);
}

Test(eod_chains, fifo_dequeue_many_above_capacity_at_close)
{
    /* batches larger than the queue, gathered while waiting */
    bare_queue_rounds(2, 3, 2, rounds());
}
