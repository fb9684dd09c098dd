/* test_runtime_stress.c - QueueRunners at scale (issue 5's scale test).
 *
 * 10,000 runners on a 2-worker runtime each produce 100 elements into one
 * queue; all 1,000,000 arrive exactly once and in per-runner order; start,
 * stop and join succeed. QF_STRESS_SCALE divides the number of runners (the
 * sanitizer runs set it). Each element encodes (runner id << 32 | seq).
 *
 * All runners share one queue, so each runner's close op only counts down:
 * the last runner to retire closes the queue (a per-runner default close
 * would end the stream for everybody at the first retirement). */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_queue_runner.h"

static long scale(long n)
{
    const char *s = getenv("QF_STRESS_SCALE");
    long d = s ? atol(s) : 1;
    return d > 1 ? n / d : n;
}

typedef struct {
    qf_queue *q;
    long n_runners;
    int64_t per_runner; /* < 0: forever */
    atomic_long live;   /* runners that have not retired through end of input */
} stress;

typedef struct {
    int64_t id, next; /* touched only by the runner's one task */
    stress *s;
} prod;

static qf_code produce(void *arg, qf_element **ret)
{
    prod *p = arg;
    if (p->s->per_runner >= 0 && p->next >= p->s->per_runner)
        return QF_OUT_OF_RANGE; /* end of this runner's input */
    qf_tensor *t = qf_tensor_new_i64((p->id << 32) | p->next++);
    *ret = qf_element_of(1, &t);
    return *ret ? QF_OK : qf_last_code();
}

static qf_code countdown_close(void *arg)
{
    stress *s = arg;
    if (atomic_fetch_sub(&s->live, 1) == 1)
        return qf_queue_close(s->q, false);
    return QF_OK;
}

typedef struct {
    qf_runtime *rt;
    qf_coord *c;
    qf_scope *scope;
    prod *prods;
    qf_task **ts;
    size_t n;
    stress s;
} fixture;

static void setup(fixture *f, long n_runners, int64_t per_runner, int64_t capacity)
{
    memset(f, 0, sizeof(*f));
    f->s.n_runners = n_runners;
    f->s.per_runner = per_runner;
    atomic_init(&f->s.live, n_runners);
    qf_runtime_options ro = {.workers = 2, .name = "stress"};
    cr_assert_eq(qf_runtime_new(&ro, &f->rt), QF_OK);
    cr_assert_eq(qf_coord_new(NULL, 0, &f->c), QF_OK);
    cr_assert_eq(qf_scope_new(&f->scope), QF_OK);
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options qo = {
        .capacity = capacity, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "stress"};
    cr_assert_eq(qf_fifo_queue_new(&qo, &f->s.q), QF_OK);
    f->prods = calloc((size_t)n_runners, sizeof(*f->prods));
    cr_assert_not_null(f->prods);
    qf_queue_runner_options o = {.close_op = countdown_close, .close_arg = &f->s};
    for (long i = 0; i < n_runners; i++) {
        f->prods[i] = (prod){.id = i, .s = &f->s};
        qf_enqueue_op op = {
            .name = "produce", .kind = QF_OP_PRODUCE, .produce = produce, .arg = &f->prods[i]};
        qf_queue_runner *r = NULL;
        cr_assert_eq(qf_queue_runner_new(f->s.q, &op, 1, &o, &r), QF_OK);
        cr_assert_eq(qf_scope_add_queue_runner(f->scope, r, NULL), QF_OK);
    }
}

static void teardown(fixture *f)
{
    qf_tasks_free(f->ts, f->n);
    qf_runtime_free(f->rt);
    qf_scope_free(f->scope); /* frees the runners */
    qf_coord_free(f->c);
    qf_queue_unref(f->s.q);
    free(f->prods);
}

/* Dequeue in batches until `stop_after` elements (or the end of the
 * stream), checking that every runner's elements arrive once and in order.
 * Returns the number received; *ret_errors counts violations. */
static long consume(fixture *f, long stop_after, long *ret_errors)
{
    int64_t *next = calloc((size_t)f->s.n_runners, sizeof(*next));
    cr_assert_not_null(next);
    long got = 0, errors = 0;
    while (got < stop_after) {
        qf_element *b = NULL;
        qf_code rc = qf_queue_dequeue_up_to_until(f->s.q, 256, qf_deadline_in_s(60), &b);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "after %ld elements: %s", got, qf_last_message());
        const qf_tensor *t = qf_element_get(b, 0);
        const int64_t *v = qf_tensor_cdata(t);
        int64_t rows = qf_tensor_shape(t)->dims[0];
        for (int64_t i = 0; i < rows; i++) {
            int64_t id = v[i] >> 32, seq = v[i] & 0xffffffff;
            if (id < 0 || id >= f->s.n_runners || seq != next[id]) {
                if (errors++ < 5)
                    cr_log_error("runner %lld: got seq %lld, expected %lld", (long long)id,
                                 (long long)seq,
                                 (long long)(id >= 0 && id < f->s.n_runners ? next[id] : -1));
                continue;
            }
            next[id]++;
        }
        got += rows;
        qf_element_free(b);
    }
    if (f->s.per_runner >= 0)
        for (long i = 0; i < f->s.n_runners; i++)
            if (next[i] != f->s.per_runner && errors++ < 10)
                cr_log_error("runner %ld delivered %lld of %lld", i, (long long)next[i],
                             (long long)f->s.per_runner);
    free(next);
    *ret_errors = errors;
    return got;
}

static void start(fixture *f)
{
    cr_assert_eq(
        qf_start_queue_runners(f->rt, f->c, f->scope, NULL, QF_RUNNER_START, &f->ts, &f->n), QF_OK,
        "%s", qf_last_message());
    cr_assert_eq(f->n, (size_t)f->s.n_runners, "one task per runner");
}

Test(runtime_stress, ten_thousand_runners_deliver_every_element_once, .timeout = 300)
{
    /* the scale test: 10,000 runners x 100 elements through one
     * queue of capacity 1,000 on 2 workers */
    fixture f;
    setup(&f, scale(10000), 100, 1000);
    start(&f);
    long errors = 0;
    long got = consume(&f, LONG_MAX, &errors);
    cr_expect_eq(got, f.s.n_runners * 100, "every element arrived");
    cr_expect_eq(errors, 0, "duplicates, losses or reorderings");
    cr_expect(qf_queue_is_closed(f.s.q), "the last runner closed the queue");
    cr_expect_eq(atomic_load(&f.s.live), 0);

    int64_t t0 = qf_now_ns();
    cr_assert_eq(qf_coord_request_stop(f.c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(f.c, NULL, 0, 10.0, false, &rep), QF_OK, "%s", qf_last_message());
    cr_log_info("stop + join of %ld finished runners: %.3f ms", f.s.n_runners,
                (qf_now_ns() - t0) / 1e6);
    cr_expect_eq(rep.n_running, 0);
    qf_coord_join_report_clear(&rep);
    for (size_t i = 0; i < f.n; i++) {
        qf_code rc = qf_task_join(f.ts[i], qf_deadline_in_s(10), NULL);
        if (rc != QF_OK) {
            cr_expect_eq(rc, QF_OK, "task %zu ended with %s", i, qf_code_name(rc));
            break;
        }
    }
    cr_expect_eq(qf_runtime_num_tasks(f.rt), 0);
    teardown(&f);
}

Test(runtime_stress, ten_thousand_parked_runners_stop_and_join, .timeout = 300)
{
    /* endless producers: most of the 10,000 tasks are parked on the full
     * queue when the stop comes; the cancel ops end them all and join
     * returns without laggards */
    fixture f;
    setup(&f, scale(10000), -1, 100);
    start(&f);
    long errors = 0;
    long want = scale(200000);
    long got = consume(&f, want, &errors);
    cr_expect_geq(got, want);
    cr_expect_eq(errors, 0, "duplicates or reorderings");

    int64_t t0 = qf_now_ns();
    cr_assert_eq(qf_coord_request_stop(f.c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    qf_code rc = qf_coord_join(f.c, NULL, 0, 10.0, false, &rep);
    double ms = (qf_now_ns() - t0) / 1e6;
    cr_expect_eq(rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(rep.n_running, 0);
    cr_expect_eq(rep.n_finished, (size_t)f.s.n_runners);
    cr_log_info("stop + join of %ld parked runners: %.3f ms", f.s.n_runners, ms);
    qf_coord_join_report_clear(&rep);
    cr_expect(qf_queue_is_closed(f.s.q));
    size_t bad = 0;
    for (size_t i = 0; i < f.n; i++) {
        qf_code trc = qf_task_join(f.ts[i], qf_deadline_in_s(10), NULL);
        bad += trc != QF_OK && trc != QF_CANCELLED;
    }
    cr_expect_eq(bad, 0, "tasks end with OK (stop seen) or CANCELLED (enqueue cancelled)");
    teardown(&f);
}

/* A cancel that lands while a task is being polled, after the task's own
 * check, must reach the task's code: it is polled once more (a runner task
 * then leave()s its runner), not ended by the runtime's safety net. */
typedef struct {
    atomic_int polls, cleanups, in_poll;
} cancel_probe;

static qf_code cancel_probe_fn(qf_task *t, void *arg)
{
    cancel_probe *p = arg;
    if (qf_task_is_cancelled(t)) {
        atomic_fetch_add(&p->cleanups, 1);
        return QF_CANCELLED;
    }
    if (atomic_fetch_add(&p->polls, 1) == 0) {
        atomic_store(&p->in_poll, 1);
        while (!qf_task_is_cancelled(t)) /* the shutdown lands now */
            ;
    }
    return QF_PENDING;
}

Test(runtime_stress, cancel_during_poll_reaches_the_task)
{
    qf_runtime *rt = NULL;
    qf_runtime_options ro = {.workers = 2, .name = "cancel"};
    cr_assert_eq(qf_runtime_new(&ro, &rt), QF_OK);
    cancel_probe p = {0};
    qf_task *t = NULL;
    cr_assert_eq(qf_task_spawn(rt, cancel_probe_fn, &p, NULL, &t), QF_OK);
    while (!atomic_load(&p.in_poll))
        ;
    cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(10)), QF_OK);
    cr_expect_eq(qf_task_join(t, qf_deadline_in_s(10), NULL), QF_CANCELLED);
    cr_expect_eq(atomic_load(&p.cleanups), 1, "the task's own code saw the cancel");
    qf_task_unref(t);
    qf_runtime_free(rt);
}
