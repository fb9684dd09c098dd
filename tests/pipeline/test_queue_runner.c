/* test_queue_runner.c - QueueRunners as tasks, collections,
 * start_queue_runners, runner definitions and the looper
 * (qf_queue_runner.h; spec 124-146).
 *
 * Tests synchronise on observable state (queue sizes, op counters, task and
 * Coordinator joins); sleeps never order anything. Where a test needs a task
 * to be exactly in one state (suspended, never polled), it uses a runtime of
 * 0 workers driven by the test thread. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_queue_runner.h"
#include "qf_test_park.h"
#define QFT_RT_NAME "qr"
#include "qf_test.h"
#include "qf_test_runner.h"

/* ---------------------------------------------------------------- helpers */

static qf_queue *mkq(const char *name, int64_t cap, qf_dtype dt)
{
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = cap, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = name};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

static qf_element *elem_i64(int64_t v)
{
    qf_tensor *t = qf_tensor_new_i64(v);
    return qf_element_of(1, &t);
}

static qf_element *elem_f32(float v)
{
    qf_tensor *t = qf_tensor_new_f32(v);
    return qf_element_of(1, &t);
}

static int64_t get_i64(const qf_element *e)
{
    return *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
}

static qf_code deq_i64(qf_queue *q, int64_t *v)
{
    qf_element *e = NULL;
    qf_code rc = qf_queue_dequeue_until(q, qf_deadline_in_s(20), &e);
    if (rc == QF_OK) {
        *v = get_i64(e);
        qf_element_free(e);
    }
    return rc;
}

/* Wait for a task with a bound that only a broken run reaches. */
static qf_code join_task(qf_task *t)
{
    qf_code rc = qf_task_join(t, qf_deadline_in_s(20), NULL);
    cr_assert(qf_task_is_done(t), "task '%s' did not finish", qf_task_name(t));
    return rc;
}

/* Yield until the counter reaches `want` (state, not time, orders the
 * test; the deadline only bounds a broken run). */
static void wait_ge(atomic_long *v, long want)
{
    qf_deadline d = qf_deadline_in_s(20);
    while (atomic_load(v) < want) {
        cr_assert_not(qf_deadline_passed(d), "counter stuck at %ld < %ld", atomic_load(v), want);
        sched_yield();
    }
}

static void wait_size(qf_queue *q, int64_t want)
{
    qf_deadline d = qf_deadline_in_s(20);
    while (qf_queue_size(q) != want) {
        cr_assert_not(qf_deadline_passed(d), "queue size stuck at %lld, want %lld",
                      (long long)qf_queue_size(q), (long long)want);
        sched_yield();
    }
}

/* A produce op counting up to `limit` (negative: forever), producing 1, 2,
 * ...; at the limit it fails with OUT_OF_RANGE like TensorFlow's
 * count_up_to. Its state is touched by one task at a time. */
typedef struct {
    atomic_long n;    /* values produced */
    atomic_long runs; /* calls */
    long limit;
} counter;

static qf_code count_up_to(void *arg, qf_element **ret)
{
    counter *c = arg;
    atomic_fetch_add(&c->runs, 1);
    long v = atomic_load(&c->n);
    if (c->limit >= 0 && v >= c->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", c->limit);
    *ret = elem_i64(v + 1);
    atomic_store(&c->n, v + 1);
    return QF_OK;
}

static qf_code bad_op(void *arg, qf_element **ret)
{
    (void)ret;
    if (arg)
        atomic_fetch_add((atomic_long *)arg, 1);
    return qf_set_error(QF_INVALID_ARGUMENT, "Operation not in the graph");
}

static qf_enqueue_op produce_op(const char *name, qf_produce_fn fn, void *arg)
{
    return (qf_enqueue_op){.name = name, .kind = QF_OP_PRODUCE, .produce = fn, .arg = arg};
}

static qf_enqueue_op transform_op(const char *name, qf_queue *input, qf_transform_fn fn, void *arg)
{
    return (qf_enqueue_op){
        .name = name, .kind = QF_OP_TRANSFORM, .input = input, .transform = fn, .arg = arg};
}

/* A close or cancel op that counts its calls, optionally closes `q`, and
 * returns `ret`. */
typedef struct {
    qf_queue *q;
    bool cancel;
    qf_code ret;
    atomic_int calls;
} action_arg;

static qf_code counting_action(void *arg)
{
    action_arg *a = arg;
    atomic_fetch_add(&a->calls, 1);
    if (a->q)
        qf_queue_close(a->q, a->cancel);
    return a->ret == QF_OK ? QF_OK : qf_set_error(a->ret, "action failed");
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* ------------------------------------------------------ construction (127) */

Test(queue_runner, new_without_queue_or_ops_is_invalid)
{
    /* spec 127 */
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter c = {.limit = 1};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r = NULL;
    cr_expect_eq(qf_queue_runner_new(NULL, &op, 1, NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Must provide queue and enqueue_ops.");
    cr_expect_eq(qf_queue_runner_new(q, NULL, 0, NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Must provide queue and enqueue_ops.");
    cr_expect_eq(qf_queue_runner_new(q, &op, 0, NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_null(r, "*ret untouched on failure");
    qf_queue_unref(q);
}

Test(queue_runner, new_rejects_op_without_function_or_input)
{
    /* spec 127 */
    qf_queue *q = mkq("q", 4, QF_INT64);
    qf_queue_runner *r = NULL;
    qf_enqueue_op produce = {.name = "p", .kind = QF_OP_PRODUCE};
    qf_enqueue_op transform = {.name = "t", .kind = QF_OP_TRANSFORM};
    qf_enqueue_op poll = {.name = "x", .kind = QF_OP_POLL};
    cr_expect_eq(qf_queue_runner_new(q, &produce, 1, NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_runner_new(q, &transform, 1, NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_runner_new(q, &poll, 1, NULL, &r), QF_INVALID_ARGUMENT);
    counter c = {.limit = 1};
    qf_enqueue_op ops[2] = {produce_op("good", count_up_to, &c), produce};
    cr_expect_eq(qf_queue_runner_new(q, ops, 2, NULL, &r), QF_INVALID_ARGUMENT,
                 "one bad op among good ones");
    cr_expect_null(r);
    qf_queue_unref(q);
}

Test(queue_runner, closed_codes_must_be_canonical_error_codes)
{
    /* spec 127: TensorFlow raises TypeError for non-OpError types */
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter c = {.limit = 1};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r = NULL;
    const qf_code bad[] = {(qf_code)99, QF_OK, (qf_code)-1, (qf_code)QF_CODE_COUNT};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        qf_code codes[2] = {QF_OUT_OF_RANGE, bad[i]};
        qf_queue_runner_options o = {.closed_codes = codes, .n_closed_codes = 2};
        cr_expect_eq(qf_queue_runner_new(q, &op, 1, &o, &r), QF_INVALID_ARGUMENT, "closed code %d",
                     (int)bad[i]);
    }
    qf_queue_runner_options o = {.closed_codes = NULL, .n_closed_codes = 2};
    cr_expect_eq(qf_queue_runner_new(q, &op, 1, &o, &r), QF_INVALID_ARGUMENT);
    cr_expect_null(r);
    qf_queue_unref(q);
}

Test(queue_runner, defaults_name_ops_and_closed_codes)
{
    /* spec 127, 144: closed codes default to {OUT_OF_RANGE}; name = queue */
    qf_queue *q = mkq("scope/queue", 4, QF_INT64);
    counter c = {.limit = 1};
    qf_enqueue_op ops[3] = {produce_op("a", count_up_to, &c), produce_op("b", count_up_to, &c),
                            produce_op("c", count_up_to, &c)};
    qf_queue_runner *r = mkrunner(q, ops, 3, NULL);
    cr_expect_str_eq(qf_queue_runner_name(r), "scope/queue");
    cr_expect_eq(qf_queue_runner_queue(r), q);
    cr_expect_eq(qf_queue_runner_num_ops(r), 3);
    qf_code codes[4] = {0};
    cr_expect_eq(qf_queue_runner_closed_codes(r, codes, 4), 1);
    cr_expect_eq(codes[0], QF_OUT_OF_RANGE);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    cr_expect_null(qf_queue_runner_exception(r, 0));
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_queue_unref(q);
}

Test(queue_runner, custom_closed_codes_are_kept_in_order)
{
    /* spec 127 */
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter c = {.limit = 1};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_code in[2] = {QF_OUT_OF_RANGE, QF_CANCELLED};
    qf_queue_runner_options o = {.closed_codes = in, .n_closed_codes = 2};
    qf_queue_runner *r = mkrunner(q, &op, 1, &o);
    qf_code out[1] = {0};
    cr_expect_eq(qf_queue_runner_closed_codes(r, out, 1), 2, "count even beyond cap");
    cr_expect_eq(out[0], QF_OUT_OF_RANGE);
    qf_code all[2] = {0};
    qf_queue_runner_closed_codes(r, all, 2);
    cr_expect_eq(all[1], QF_CANCELLED);
    qf_queue_runner_free(r);
    qf_queue_unref(q);
}

Test(queue_runner, runner_keeps_its_queue_alive)
{
    /* spec 127: the runner holds a reference to the queue */
    qf_runtime *rt = mkrt(1);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter c = {.limit = 2};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_queue_unref(q);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(qf_queue_size(qf_queue_runner_queue(r)), 2);
    qf_tasks_free(ts, n);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_runtime_free(rt);
}

Test(queue_runner, free_refuses_while_tasks_are_counted)
{
    /* qf_queue_runner_free(): FAILED_PRECONDITION while tasks run */
    qf_runtime *rt = mkrt(0);
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter c = {.limit = 0};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, 0, &ts, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(qf_queue_runner_free(r), QF_FAILED_PRECONDITION);
    qf_task_wake(ts[0]);
    drive(rt, ts, n);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    qf_tasks_free(ts, n);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* ---------------------------------------------------- tasks (128-131) */

Test(queue_runner, count_up_to_3_ends_cleanly_without_exceptions)
{
    /* spec 128: the 4th run fails with OUT_OF_RANGE; clean end, counter 3 */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("fifo_queue", -1, QF_INT64);
    counter c = {.limit = 3};
    qf_enqueue_op op = produce_op("CountUpTo:0", count_up_to, &c);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 1, "one task per enqueue op");
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    cr_expect_eq(atomic_load(&c.n), 3);
    cr_expect_eq(atomic_load(&c.runs), 4, "the 4th run ended it");
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    for (int64_t i = 1; i <= 3; i++) {
        int64_t v = 0;
        cr_expect_eq(deq_i64(q, &v), QF_OK);
        cr_expect_eq(v, i);
    }
    int64_t v;
    cr_expect_eq(deq_i64(q, &v), QF_OUT_OF_RANGE, "the last task closed the queue");
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, two_ops_count_to_3_and_30)
{
    /* spec 129 */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("fifo_queue", -1, QF_INT64);
    counter c3 = {.limit = 3}, c30 = {.limit = 30};
    qf_enqueue_op ops[2] = {produce_op("CountUpTo:0", count_up_to, &c3),
                            produce_op("CountUpTo_1:0", count_up_to, &c30)};
    qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_neq(ts[0], ts[1]);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(join_task(ts[i]), QF_OK);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    cr_expect_eq(atomic_load(&c3.n), 3);
    cr_expect_eq(atomic_load(&c30.n), 30);
    cr_expect_eq(qf_queue_size(q), 33);
    cr_expect(qf_queue_is_closed(q));
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, one_task_per_op)
{
    /* spec 128 */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter cs[5];
    qf_enqueue_op ops[5];
    for (int i = 0; i < 5; i++) {
        cs[i] = (counter){.limit = i};
        ops[i] = produce_op(NULL, count_up_to, &cs[i]);
    }
    qf_queue_runner *r = mkrunner(q, ops, 5, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 5);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(join_task(ts[i]), QF_OK);
        for (size_t j = 0; j < i; j++)
            cr_expect_neq(ts[i], ts[j]);
    }
    for (int i = 0; i < 5; i++)
        cr_expect_eq(atomic_load(&cs[i].n), i);
    cr_expect_eq(qf_queue_size(q), 0 + 1 + 2 + 3 + 4);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, transform_end_of_input_closes_queue_after_draining)
{
    /* spec 130: q1 fed from q0.dequeue(); 10.0 twice, close q0 */
    qf_runtime *rt = mkrt(2);
    qf_queue *q0 = mkq("q0", 10, QF_FLOAT32);
    qf_queue *q1 = mkq("q1", 10, QF_FLOAT32);
    cr_assert_eq(qf_queue_enqueue(q0, elem_f32(10.0f)), QF_OK);
    cr_assert_eq(qf_queue_enqueue(q0, elem_f32(10.0f)), QF_OK);
    cr_assert_eq(qf_queue_close(q0, false), QF_OK);
    qf_enqueue_op op = transform_op("q0_Dequeue", q0, NULL, NULL);
    qf_queue_runner *r = mkrunner(q1, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(join_task(ts[0]), QF_OK, "the runner stops cleanly");
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    for (int i = 0; i < 2; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(q1, &e), QF_OK);
        cr_expect_float_eq(*(const float *)qf_tensor_cdata(qf_element_get(e, 0)), 10.0f, 1e-6);
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue(q1, &e), QF_OUT_OF_RANGE);
    cr_expect(contains(qf_last_message(), "is closed"), "message: %s", qf_last_message());
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q0);
    qf_queue_unref(q1);
}

Test(queue_runner, queue_stays_open_until_last_task_retires)
{
    /* spec 131: only the last task to finish runs the close op */
    qf_runtime *rt = mkrt(2);
    qf_queue *q0 = mkq("q0", 10, QF_INT64);
    qf_queue *q1 = mkq("q1", 10, QF_INT64);
    action_arg close = {.q = q1};
    qf_queue_runner_options o = {.close_op = counting_action, .close_arg = &close};
    counter done = {.limit = 0};
    qf_enqueue_op ops[2] = {produce_op("ends_at_once", count_up_to, &done),
                            transform_op("q0_Dequeue", q0, NULL, NULL)};
    qf_queue_runner *r = mkrunner(q1, ops, 2, &o);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(qf_queue_runner_running(r, rt), 1);
    cr_expect_not(qf_queue_is_closed(q1), "another producer is still running");
    cr_expect_eq(atomic_load(&close.calls), 0);
    cr_assert_eq(qf_queue_enqueue(q0, elem_i64(7)), QF_OK);
    cr_assert_eq(qf_queue_close(q0, false), QF_OK);
    cr_expect_eq(join_task(ts[1]), QF_OK);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    cr_expect_eq(atomic_load(&close.calls), 1);
    cr_expect(qf_queue_is_closed(q1));
    int64_t v = 0;
    cr_expect_eq(deq_i64(q1, &v), QF_OK);
    cr_expect_eq(v, 7);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q0);
    qf_queue_unref(q1);
}

Test(queue_runner, close_op_runs_once_and_its_error_is_ignored)
{
    /* spec 130-131 */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("q", -1, QF_INT64);
    action_arg close = {.q = q, .ret = QF_INTERNAL};
    qf_queue_runner_options o = {.close_op = counting_action, .close_arg = &close};
    counter cs[3] = {{.limit = 5}, {.limit = 10}, {.limit = 0}};
    qf_enqueue_op ops[3] = {produce_op("a", count_up_to, &cs[0]),
                            produce_op("b", count_up_to, &cs[1]),
                            produce_op("c", count_up_to, &cs[2])};
    qf_queue_runner *r = mkrunner(q, ops, 3, &o);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(join_task(ts[i]), QF_OK);
    cr_expect_eq(atomic_load(&close.calls), 1);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0, "close op errors are ignored");
    cr_expect(qf_queue_is_closed(q));
    cr_expect_eq(qf_queue_size(q), 15);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

static qf_code cancelled_op(void *arg, qf_element **ret)
{
    (void)arg;
    (void)ret;
    return qf_set_error(QF_CANCELLED, "Enqueue operation was cancelled");
}

Test(queue_runner, any_configured_closed_code_retires_cleanly)
{
    /* spec 127, 130: with closed codes {OUT_OF_RANGE, CANCELLED} an op
     * failing with CANCELLED retires cleanly and closes the queue; with the
     * default codes the same op is an error */
    qf_runtime *rt = mkrt(1);
    qf_code codes[2] = {QF_OUT_OF_RANGE, QF_CANCELLED};
    qf_queue_runner_options o = {.closed_codes = codes, .n_closed_codes = 2};
    qf_enqueue_op op = produce_op("cancelled", cancelled_op, NULL);
    for (int pass = 0; pass < 2; pass++) {
        qf_queue *q = mkq("q", -1, QF_INT64);
        qf_queue_runner *r = mkrunner(q, &op, 1, pass == 0 ? &o : NULL);
        qf_task **ts = NULL;
        size_t n = 0;
        cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
        cr_assert_eq(n, 1);
        if (pass == 0) {
            cr_expect_eq(join_task(ts[0]), QF_OK);
            cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
            cr_expect(qf_queue_is_closed(q));
        } else {
            cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
            cr_expect_eq(qf_queue_runner_num_exceptions(r), 1);
            cr_expect_not(qf_queue_is_closed(q));
        }
        qf_tasks_free(ts, n);
        qf_queue_runner_free(r);
        qf_queue_unref(q);
    }
    qf_runtime_free(rt);
}

/* A produce op with `many`: batches [3k+1, 3k+2, 3k+3] for k < limit. */
static qf_code produce_batch(void *arg, qf_element **ret)
{
    counter *c = arg;
    long k = atomic_load(&c->n);
    if (k >= c->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "no more batches");
    int64_t data[3] = {3 * k + 1, 3 * k + 2, 3 * k + 3};
    int64_t dims[1] = {3};
    qf_shape sh = qf_shape_make(1, dims);
    qf_tensor *t = qf_tensor_new_from(QF_INT64, &sh, data, sizeof(data));
    *ret = qf_element_of(1, &t);
    atomic_store(&c->n, k + 1);
    return QF_OK;
}

Test(queue_runner, produce_many_enqueues_rows_in_order)
{
    /* qf_enqueue_op.many: the rows of a produced batch go in one by one */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("q", 2, QF_INT64);
    counter c = {.limit = 4};
    qf_enqueue_op op = produce_op("batch", produce_batch, &c);
    op.many = true;
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    for (int64_t i = 1; i <= 12; i++) {
        int64_t v = 0;
        cr_assert_eq(deq_i64(q, &v), QF_OK, "%s", qf_last_message());
        cr_expect_eq(v, i);
    }
    int64_t v;
    cr_expect_eq(deq_i64(q, &v), QF_OUT_OF_RANGE);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* A produce op with `many` whose batch's components disagree on rows:
 * [1, 2, 3] beside [0.5, 1.5]. */
static qf_code produce_ragged_batch(void *arg, qf_element **ret)
{
    (void)arg;
    int64_t iv[3] = {1, 2, 3};
    float fv[2] = {0.5f, 1.5f};
    qf_shape s3 = QF_SHAPE(3), s2 = QF_SHAPE(2);
    qf_tensor *t[2] = {qf_tensor_new_from(QF_INT64, &s3, iv, sizeof(iv)),
                       qf_tensor_new_from(QF_FLOAT32, &s2, fv, sizeof(fv))};
    *ret = qf_element_of(2, t);
    return QF_OK;
}

/* spec 18: a runner's batch is checked against the queue as a whole, as
 * TensorFlow's enqueue_many op checks it: with shapes, a component whose
 * rows differ from component 0's is a shape mismatch, and nothing of the
 * batch goes in. */
Test(queue_runner, produce_many_of_a_ragged_batch_fails_as_a_shape_mismatch)
{
    qf_runtime *rt = mkrt(2);
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options o = {
        .capacity = 10, .num_components = 2, .dtypes = dt, .shapes = sh, .name = "q"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    qf_enqueue_op op = produce_op("ragged", produce_ragged_batch, NULL);
    op.many = true;
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_queue_runner_num_exceptions(r), 1);
    qf_status *st = qf_queue_runner_exception(r, 0);
    cr_expect(strstr(qf_status_message(st), "Shape mismatch in tuple component 1. Expected [3], "
                                            "got [2]"),
              "%s", qf_status_message(st));
    qf_status_free(st);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, produced_element_is_held_while_queue_is_full)
{
    /* the runtime holds a produced element while the queue is full: nothing
     * is lost or reordered through a capacity-1 queue */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("q", 1, QF_INT64);
    counter c = {.limit = 200};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    for (int64_t i = 1; i <= 200; i++) {
        int64_t v = 0;
        cr_assert_eq(deq_i64(q, &v), QF_OK, "%s", qf_last_message());
        cr_assert_eq(v, i);
    }
    int64_t v;
    cr_expect_eq(deq_i64(q, &v), QF_OUT_OF_RANGE);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

static qf_element *times10(int64_t v)
{
    return elem_i64(v * 10);
}

static qf_code transform_times10(void *arg, qf_element *in, qf_element **ret_out)
{
    (void)arg;
    int64_t v = get_i64(in);
    qf_element_free(in);
    *ret_out = v % 2 ? times10(v) : NULL; /* NULL drops even values */
    return QF_OK;
}

Test(queue_runner, transform_op_maps_and_drops_elements)
{
    /* QF_OP_TRANSFORM with a function: NULL output drops the element */
    qf_runtime *rt = mkrt(2);
    qf_queue *q0 = mkq("q0", 4, QF_INT64), *q1 = mkq("q1", -1, QF_INT64);
    qf_enqueue_op op = transform_op("times10", q0, transform_times10, NULL);
    qf_queue_runner *r = mkrunner(q1, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    for (int64_t i = 1; i <= 20; i++)
        cr_assert_eq(qf_queue_enqueue(q0, elem_i64(i)), QF_OK);
    cr_assert_eq(qf_queue_close(q0, false), QF_OK);
    for (int64_t i = 1; i <= 20; i += 2) {
        int64_t v = 0;
        cr_assert_eq(deq_i64(q1, &v), QF_OK);
        cr_expect_eq(v, i * 10);
    }
    int64_t v;
    cr_expect_eq(deq_i64(q1, &v), QF_OUT_OF_RANGE);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q0);
    qf_queue_unref(q1);
}

typedef struct {
    qf_queue *in, *out;
    atomic_long runs;
} poll_arg;

/* A poll op doing everything itself: move one element from `in` to `out`
 * (unbounded), parking on `in` with the task's waker. */
static qf_code poll_move(qf_task *t, void *arg)
{
    poll_arg *p = arg;
    qf_element *e = NULL;
    qf_code rc = qf_queue_poll_dequeue(p->in, qf_task_waker(t), &e);
    if (rc != QF_OK)
        return rc; /* QF_PENDING, or OUT_OF_RANGE at the end of input */
    qf_element *o = times10(get_i64(e));
    qf_element_free(e);
    rc = qf_queue_try_enqueue(p->out, o);
    if (rc != QF_OK)
        qf_element_free(o);
    atomic_fetch_add(&p->runs, 1);
    return rc;
}

Test(queue_runner, poll_op_runs_until_its_input_ends)
{
    /* QF_OP_POLL: parks through its own waker registration */
    qf_runtime *rt = mkrt(2);
    qf_queue *q0 = mkq("q0", 2, QF_INT64), *q1 = mkq("q1", -1, QF_INT64);
    poll_arg pa = {.in = q0, .out = q1};
    qf_enqueue_op op = {.name = "move", .kind = QF_OP_POLL, .poll = poll_move, .arg = &pa};
    qf_queue_runner *r = mkrunner(q1, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    for (int64_t i = 1; i <= 50; i++)
        cr_assert_eq(qf_queue_enqueue(q0, elem_i64(i)), QF_OK);
    cr_assert_eq(qf_queue_close(q0, false), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(atomic_load(&pa.runs), 50);
    cr_expect(qf_queue_is_closed(q1), "end of input closed the runner's queue");
    for (int64_t i = 1; i <= 50; i++) {
        int64_t v = 0;
        cr_assert_eq(deq_i64(q1, &v), QF_OK);
        cr_expect_eq(v, i * 10);
    }
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q0);
    qf_queue_unref(q1);
}

/* ------------------------------------------------------ errors (132-133) */

Test(queue_runner, errors_without_coordinator_are_collected)
{
    /* spec 132: two bad ops give 2 exceptions; the queue is not closed */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("q", 4, QF_INT64);
    action_arg close = {.q = q};
    qf_queue_runner_options o = {.close_op = counting_action, .close_arg = &close};
    atomic_long calls = 0;
    qf_enqueue_op ops[2] = {produce_op("bad_0", bad_op, &calls),
                            produce_op("bad_1", bad_op, &calls)};
    qf_queue_runner *r = mkrunner(q, ops, 2, &o);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        qf_status *st = NULL;
        cr_expect_eq(qf_task_join(ts[i], qf_deadline_in_s(20), &st), QF_INVALID_ARGUMENT,
                     "the error is re-raised in its task");
        cr_expect_str_eq(qf_status_message(st), "Operation not in the graph");
        qf_status_free(st);
    }
    cr_expect_eq(atomic_load(&calls), 2, "each bad op ran once");
    cr_assert_eq(qf_queue_runner_num_exceptions(r), 2);
    for (size_t i = 0; i < 2; i++) {
        qf_status *st = qf_queue_runner_exception(r, i);
        cr_assert_not_null(st);
        cr_expect_eq(qf_status_code(st), QF_INVALID_ARGUMENT);
        cr_expect_str_eq(qf_status_message(st), "Operation not in the graph");
        qf_status_free(st);
    }
    cr_expect_null(qf_queue_runner_exception(r, 2));
    cr_expect_not(qf_queue_is_closed(q), "spec 132: an error does not close the queue");
    cr_expect_eq(atomic_load(&close.calls), 0);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* An op whose last failing qflow call was something it handled (an
 * OUT_OF_RANGE from a drained, closed side queue), and which then fails
 * with its own code without a message. */
static qf_code bare_code_op(void *arg, qf_element **ret)
{
    qf_queue *side = arg;
    qf_element *e = NULL;
    if (qf_queue_try_dequeue(side, &e) == QF_OK) {
        *ret = e;
        return QF_OK;
    }
    return QF_DATA_LOSS;
}

static qf_queue *closed_empty_queue(void)
{
    qf_queue *side = mkq("side", 1, QF_INT64);
    cr_assert_eq(qf_queue_close(side, false), QF_OK);
    return side;
}

Test(queue_runner, error_code_without_message_is_collected_with_its_code)
{
    /* spec 132: the op returns QF_DATA_LOSS without qf_set_error (the
     * produce contract asks only for a code); the collected exception must
     * carry DATA_LOSS, not the thread's stale last error */
    qf_runtime *rt = mkrt(1);
    qf_queue *q = mkq("q", 4, QF_INT64);
    qf_queue *side = closed_empty_queue();
    qf_enqueue_op op = produce_op("bare", bare_code_op, side);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_DATA_LOSS);
    cr_assert_eq(qf_queue_runner_num_exceptions(r), 1);
    qf_status *st = qf_queue_runner_exception(r, 0);
    cr_expect_eq(qf_status_code(st), QF_DATA_LOSS, "recorded %s: %s",
                 qf_code_name(qf_status_code(st)), qf_status_message(st));
    qf_status_free(st);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
    qf_queue_unref(side);
}

Test(queue_runner, errors_with_coordinator_go_to_request_stop)
{
    /* spec 133: join returns the error; nothing kept in the runner */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 4, QF_INT64);
    qf_enqueue_op op = produce_op("bad", bad_op, NULL);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Operation not in the graph");
    cr_expect(qf_coord_should_stop(c));
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0, "not kept in exceptions_raised");
    cr_expect_eq(join_task(ts[0]), QF_INVALID_ARGUMENT);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(queue_runner, error_code_without_message_reaches_join_with_its_code)
{
    /* spec 133: as above with a Coordinator. The op's stale last error is a
     * clean OUT_OF_RANGE, so reporting it instead of DATA_LOSS would turn
     * the failure into a clean stop */
    qf_runtime *rt = mkrt(1);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 4, QF_INT64);
    qf_queue *side = closed_empty_queue();
    qf_enqueue_op op = produce_op("bare", bare_code_op, side);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    qf_code rc = qf_coord_join(c, NULL, 0, 10.0, false, NULL);
    cr_expect_eq(rc, QF_DATA_LOSS, "join returned %s", qf_code_name(rc));
    cr_expect_eq(join_task(ts[0]), QF_DATA_LOSS);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
    qf_queue_unref(side);
}

Test(queue_runner, first_error_wins_and_later_cancellations_are_dropped)
{
    /* spec 133, 136: a bad op stops everything; the producer's CANCELLED
     * that follows is not recorded */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 1, QF_INT64);
    counter prod = {.limit = -1};
    qf_enqueue_op ops[2] = {produce_op("forever", count_up_to, &prod),
                            produce_op("bad", bad_op, NULL)};
    qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Operation not in the graph");
    cr_expect_eq(join_task(ts[1]), QF_INVALID_ARGUMENT);
    qf_code rc0 = join_task(ts[0]);
    cr_expect(rc0 == QF_OK || rc0 == QF_CANCELLED, "producer ended with %s", qf_code_name(rc0));
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

/* ------------------------------------------------ stop and cancel (134-138) */

Test(queue_runner, stop_runs_cancel_op_so_parked_enqueue_ends)
{
    /* spec 135: capacity 2, the producer parks; one dequeue, request_stop,
     * join with grace 1.0 returns OK */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 2, QF_INT64);
    counter prod = {.limit = -1};
    qf_enqueue_op op = produce_op("forever", count_up_to, &prod);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    wait_ge(&prod.n, 3); /* two in the queue, the third held: parked */
    int64_t v = 0;
    cr_assert_eq(deq_i64(q, &v), QF_OK);
    cr_expect_eq(v, 1);
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_neq(join_task(ts[0]), QF_DEADLINE_EXCEEDED);
    cr_expect(qf_queue_is_closed(q), "the default cancel op closed the queue");
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(queue_runner, cancelled_enqueue_after_stop_is_not_recorded)
{
    /* spec 136: the parked enqueue fails with CANCELLED after the stop; the
     * report is dropped and join does not raise it */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 2, QF_INT64);
    counter prod = {.limit = -1};
    qf_enqueue_op op = produce_op("forever", count_up_to, &prod);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    wait_ge(&prod.n, 3);
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 5.0, false, &rep), QF_OK);
    cr_expect_eq(rep.n_dropped, 1, "the CANCELLED report was dropped");
    cr_expect_eq(rep.n_finished, 1);
    cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    cr_expect_eq(qf_queue_size(q), 2, "the held element was not enqueued");
    qf_coord_join_report_clear(&rep);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(queue_runner, custom_cancel_op_runs_once_per_stop_and_errors_are_ignored)
{
    /* spec 134: the cancel op runs on stop, errors ignored */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 1, QF_INT64);
    action_arg cancel = {.q = q, .cancel = true, .ret = QF_INTERNAL};
    qf_queue_runner_options o = {.cancel_op = counting_action, .cancel_arg = &cancel};
    counter prod = {.limit = -1};
    qf_enqueue_op op = produce_op("forever", count_up_to, &prod);
    qf_queue_runner *r = mkrunner(q, &op, 1, &o);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    wait_ge(&prod.n, 2);
    cr_expect_eq(atomic_load(&cancel.calls), 0, "no cancel before the stop");
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 5.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&cancel.calls), 1);
    cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

static qf_code noop_action(void *arg)
{
    (void)arg;
    return QF_OK;
}

Test(queue_runner, tasks_are_coordinator_members_and_join_names_laggards)
{
    /* spec 134, 143: every task is registered; with a cancel op that does
     * not cancel, the parked producer lags and join names it */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("lag_queue", 1, QF_INT64);
    qf_queue_runner_options o = {.cancel_op = noop_action};
    counter prod = {.limit = -1};
    qf_enqueue_op op = produce_op("produce", count_up_to, &prod);
    qf_queue_runner *r = mkrunner(q, &op, 1, &o);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    wait_ge(&prod.n, 2); /* the second element is held: the task is parked */
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 0.05, false, &rep), QF_DEADLINE_EXCEEDED);
    cr_expect(contains(qf_last_message(), "threads still running"), "%s", qf_last_message());
    cr_expect(contains(qf_last_message(), "QueueRunnerThread-lag_queue-produce"), "%s",
              qf_last_message());
    cr_assert_eq(rep.n_running, 1);
    cr_expect_str_eq(rep.running[0], "QueueRunnerThread-lag_queue-produce");
    qf_coord_join_report_clear(&rep);
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

/* A transform that holds its worker (it blocks, as an op doing blocking
 * I/O would) until the test releases it. */
typedef struct {
    atomic_int entered;
    atomic_int release;
} stuck_arg;

static qf_code stuck_transform(void *arg, qf_element *in, qf_element **ret_out)
{
    stuck_arg *a = arg;
    qf_element_free(in);
    atomic_store(&a->entered, 1);
    while (!atomic_load(&a->release))
        sched_yield();
    *ret_out = NULL;
    return QF_OK;
}

Test(queue_runner, op_blocking_its_worker_at_a_stop_makes_only_its_runner_lag, .timeout = 60)
{
    /* Issue 24 (5): the worker woken to run the blocking op kept the
     * pool's "a wake is under way" flag while the op blocked, so the stop's
     * wakes of the other (parked) runners woke no sleeping worker and join
     * named every runner as a laggard. Only the stuck one lags. */
    qf_runtime *rt = mkrt(4);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("lagq", 1, QF_INT64), *in = mkq("lagq_in", 1, QF_INT64);
    enum { NP = 4 };
    counter prod[NP] = {{.limit = -1}, {.limit = -1}, {.limit = -1}, {.limit = -1}};
    static const char *names[NP] = {"p0", "p1", "p2", "p3"};
    stuck_arg sa = {0};
    qf_enqueue_op ops[NP + 1];
    ops[0] = transform_op("stuck", in, stuck_transform, &sa);
    for (int i = 0; i < NP; i++)
        ops[i + 1] = produce_op(names[i], count_up_to, &prod[i]);
    qf_queue_runner *r = mkrunner(q, ops, NP + 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, (size_t)NP + 1);
    /* Every producer has produced and, the queue holding one element,
     * parks with its next one; the stuck op's task parks on `in`. */
    for (int i = 0; i < NP; i++)
        wait_ge(&prod[i].runs, 1);
    /* ... and every worker sleeps, so a wake-up runs the stuck op. */
    cr_assert_neq(qft_wait_named_parked("qr-", 4, 10 * 1000000000LL), 0,
                  "the workers never went to sleep");
    cr_assert_eq(qf_queue_enqueue(in, elem_i64(1)), QF_OK); /* wakes the stuck op's task */
    qf_deadline d = qf_deadline_in_s(20);
    while (!atomic_load(&sa.entered)) {
        cr_assert_not(qf_deadline_passed(d), "the stuck op never ran");
        sched_yield();
    }
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    /* The stop's wakes must reach idle workers: the producers end while
     * the stuck op still blocks its worker. */
    d = qf_deadline_in_s(10);
    size_t done = 0;
    while (!qf_deadline_passed(d)) {
        done = 0;
        for (size_t i = 1; i < n; i++)
            done += qf_task_is_done(ts[i]);
        if (done == NP)
            break;
        sched_yield();
    }
    cr_expect_eq(done, (size_t)NP, "%zu of %d producers ended after the stop", done, NP);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 0.05, false, &rep), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(rep.n_running, 1, "laggards named: %s", qf_last_message());
    if (rep.n_running >= 1)
        cr_expect_str_eq(rep.running[0], "QueueRunnerThread-lagq-stuck");
    qf_coord_join_report_clear(&rep);
    atomic_store(&sa.release, 1);
    for (size_t i = 0; i < n; i++)
        (void)join_task(ts[i]);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
    qf_queue_unref(in);
}

Test(queue_runner, stop_wakes_task_parked_on_input_queue)
{
    /* qf_queue_runner_start(): a stop also wakes tasks parked on an input
     * queue, which is never closed */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q0 = mkq("q0", 4, QF_INT64), *q1 = mkq("q1", 4, QF_INT64);
    qf_enqueue_op op = transform_op("q0_Dequeue", q0, NULL, NULL);
    qf_queue_runner *r = mkrunner(q1, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(qf_queue_enqueue(q0, elem_i64(5)), QF_OK);
    wait_size(q1, 1); /* the task went through once, then waits on q0 */
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 5.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_not(qf_queue_is_closed(q0));
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q0);
    qf_queue_unref(q1);
}

Test(queue_runner, join_without_stop_returns_once_input_ends)
{
    /* spec 137, documented difference: no close_on_stop thread, so join
     * without request_stop returns when the runners retire */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter prod = {.limit = 5};
    qf_enqueue_op op = produce_op("count", count_up_to, &prod);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, &rep), QF_OK);
    cr_expect_not(rep.stop_requested);
    cr_assert_eq(rep.n_finished, 1);
    cr_expect_str_eq(rep.finished[0], "QueueRunnerThread-q-count");
    cr_expect_eq(qf_queue_size(q), 5);
    cr_expect(qf_queue_is_closed(q));
    qf_coord_join_report_clear(&rep);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(queue_runner, coordinator_join_returns_after_the_tasks_are_done)
{
    /* spec 134, 114: tasks are members "until they finish", so once join
     * returned every runner task has finished (qf_task_is_done) */
    qf_runtime *rt = mkrt(2);
    for (int round = 0; round < 200; round++) {
        qf_coord *c = mkcoord();
        qf_queue *q = mkq("q", -1, QF_INT64);
        counter a = {.limit = 1}, b = {.limit = 2};
        qf_enqueue_op ops[2] = {produce_op("a", count_up_to, &a), produce_op("b", count_up_to, &b)};
        qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
        qf_task **ts = NULL;
        size_t n = 0;
        cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
        cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK);
        bool done = qf_task_is_done(ts[0]) && qf_task_is_done(ts[1]);
        for (size_t i = 0; i < n; i++)
            join_task(ts[i]);
        qf_tasks_free(ts, n);
        qf_queue_runner_free(r);
        qf_coord_free(c);
        qf_queue_unref(q);
        cr_assert(done, "round %d: join returned before a member task was done", round);
    }
    qf_runtime_free(rt);
}

Test(queue_runner, stop_before_start_runs_no_op)
{
    /* spec 138: should_stop is checked first; no op run, no close op, no
     * exceptions */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("q", 4, QF_INT64);
    action_arg close = {.q = q};
    qf_queue_runner_options o = {.close_op = counting_action, .close_arg = &close};
    counter a = {.limit = 3}, b = {.limit = 30};
    qf_enqueue_op ops[2] = {produce_op("a", count_up_to, &a), produce_op("b", count_up_to, &b)};
    qf_queue_runner *r = mkrunner(q, ops, 2, &o);
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 5.0, false, NULL), QF_OK);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(join_task(ts[i]), QF_OK);
    cr_expect_eq(atomic_load(&a.runs), 0);
    cr_expect_eq(atomic_load(&b.runs), 0);
    cr_expect_eq(atomic_load(&close.calls), 0, "leaving through should_stop does not close");
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

/* ------------------------------------------------- runtimes (139-143) */

Test(queue_runner, start_while_counted_returns_no_tasks)
{
    /* spec 139: even if the first tasks were never started */
    qf_runtime *rt = mkrt(0);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter a = {.limit = 1}, b = {.limit = 2};
    qf_enqueue_op ops[2] = {produce_op("a", count_up_to, &a), produce_op("b", count_up_to, &b)};
    qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
    qf_task *dummy = NULL;
    qf_task **ts = NULL, **ts2 = &dummy;
    size_t n = 0, n2 = 99;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, 0, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_eq(qf_queue_runner_running(r, rt), 2);
    cr_expect_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts2, &n2), QF_OK);
    cr_expect_eq(n2, 0);
    cr_expect_null(ts2);
    for (size_t i = 0; i < n; i++)
        qf_task_wake(ts[i]);
    drive(rt, ts, n);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    cr_expect_eq(qf_queue_size(q), 3);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, separate_runtimes_get_separate_task_sets)
{
    /* spec 140 */
    qf_runtime *rt1 = mkrt(0), *rt2 = mkrt(0);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter a = {.limit = 0}, b = {.limit = 0};
    qf_enqueue_op ops[2] = {produce_op("a", count_up_to, &a), produce_op("b", count_up_to, &b)};
    qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
    qf_task **t1 = NULL, **t2 = NULL;
    size_t n1 = 0, n2 = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt1, NULL, 0, &t1, &n1), QF_OK);
    cr_assert_eq(qf_queue_runner_start(r, rt2, NULL, 0, &t2, &n2), QF_OK);
    cr_assert_eq(n1, 2);
    cr_assert_eq(n2, 2);
    cr_expect_eq(qf_queue_runner_running(r, rt1), 2);
    cr_expect_eq(qf_queue_runner_running(r, rt2), 2);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            cr_expect_neq(t1[i], t2[j]);
    for (size_t i = 0; i < 2; i++) {
        qf_task_wake(t1[i]);
        qf_task_wake(t2[i]);
    }
    drive(rt1, t1, n1);
    cr_expect_eq(qf_queue_runner_running(r, rt1), 0);
    cr_expect_eq(qf_queue_runner_running(r, rt2), 2, "rt2's tasks have not run yet");
    drive(rt2, t2, n2);
    cr_expect_eq(qf_queue_runner_running(r, rt2), 0);
    qf_tasks_free(t1, n1);
    qf_tasks_free(t2, n2);
    qf_queue_runner_free(r);
    qf_runtime_free(rt1);
    qf_runtime_free(rt2);
    qf_queue_unref(q);
}

#define NRT 8

typedef struct {
    qf_queue_runner *r;
    qf_runtime *rt;
    qf_coord *c;
    pthread_barrier_t *bar;
    qf_task **ts;
    size_t n;
    qf_code rc;
} starter;

static void *start_on_own_runtime(void *arg)
{
    starter *st = arg;
    pthread_barrier_wait(st->bar);
    st->rc = qf_queue_runner_start(st->r, st->rt, st->c, 0, &st->ts, &st->n);
    return NULL;
}

Test(queue_runner, concurrent_starts_on_many_runtimes)
{
    /* spec 140 and the header's "any thread" for qf_queue_runner_start:
     * 8 threads start one runner on 8 runtimes at once. Each runtime gets
     * its task, and once all retired no stop action of the runner is left
     * behind (a later stop does not run its cancel op) */
    qf_runtime *rts[NRT];
    for (int i = 0; i < NRT; i++)
        rts[i] = mkrt(0);
    for (int round = 0; round < 1000; round++) {
        qf_coord *c = mkcoord();
        qf_queue *q = mkq("q", -1, QF_INT64);
        action_arg cancel = {.q = NULL};
        qf_queue_runner_options o = {.cancel_op = counting_action, .cancel_arg = &cancel};
        counter a = {.limit = 0};
        qf_enqueue_op op = produce_op("a", count_up_to, &a);
        qf_queue_runner *r = mkrunner(q, &op, 1, &o);
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, NRT);
        starter st[NRT];
        pthread_t th[NRT];
        for (int i = 0; i < NRT; i++) {
            st[i] = (starter){.r = r, .rt = rts[i], .c = c, .bar = &bar};
            cr_assert_eq(pthread_create(&th[i], NULL, start_on_own_runtime, &st[i]), 0);
        }
        for (int i = 0; i < NRT; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&bar);
        for (int i = 0; i < NRT; i++) {
            cr_assert_eq(st[i].rc, QF_OK);
            cr_assert_eq(st[i].n, 1, "round %d runtime %d", round, i);
            cr_expect_eq(qf_queue_runner_running(r, rts[i]), 1);
            qf_task_wake(st[i].ts[0]);
            drive(rts[i], st[i].ts, 1);
            cr_expect_eq(qf_queue_runner_running(r, rts[i]), 0);
            qf_tasks_free(st[i].ts, st[i].n);
        }
        cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
        cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
        int calls = atomic_load(&cancel.calls);
        qf_coord_free(c);
        qf_queue_runner_free(r);
        qf_queue_unref(q);
        cr_assert_eq(calls, 0, "round %d: a stop action outlived the runner's tasks", round);
    }
    for (int i = 0; i < NRT; i++)
        qf_runtime_free(rts[i]);
}

Test(queue_runner, restart_after_finish_clears_exceptions)
{
    /* spec 141: one good op and one bad op give 1 exception, both times */
    qf_runtime *rt = mkrt(0);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter good = {.limit = 0};
    qf_enqueue_op ops[2] = {produce_op("good", count_up_to, &good),
                            produce_op("bad", bad_op, NULL)};
    qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
    for (int round = 0; round < 2; round++) {
        qf_task **ts = NULL;
        size_t n = 0;
        cr_assert_eq(qf_queue_runner_start(r, rt, NULL, 0, &ts, &n), QF_OK);
        cr_assert_eq(n, 2, "round %d", round);
        cr_expect_eq(qf_queue_runner_num_exceptions(r), 0, "start cleared the old errors");
        for (size_t i = 0; i < n; i++)
            qf_task_wake(ts[i]);
        drive(rt, ts, n);
        cr_expect_eq(qf_queue_runner_num_exceptions(r), 1, "round %d", round);
        qf_tasks_free(ts, n);
    }
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, start_flag_off_creates_suspended_tasks)
{
    /* spec 142: without QF_RUNNER_START the tasks wait for qf_task_wake */
    qf_runtime *rt = mkrt(0);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter a = {.limit = 2};
    qf_enqueue_op op = produce_op("a", count_up_to, &a);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, 0, &ts, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), 0, "nothing runnable");
    cr_expect_eq(atomic_load(&a.runs), 0);
    cr_expect_not(qf_task_is_done(ts[0]));
    cr_expect_not(qf_task_is_daemon(ts[0]));
    qf_task_wake(ts[0]);
    drive(rt, ts, n);
    cr_expect_eq(atomic_load(&a.n), 2);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, start_flag_on_runs_tasks_and_daemon_flag_is_recorded)
{
    /* spec 142 */
    qf_runtime *rt = mkrt(0);
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter a = {.limit = 2};
    qf_enqueue_op op = produce_op("a", count_up_to, &a);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START | QF_RUNNER_DAEMON, &ts, &n),
                 QF_OK);
    cr_assert_eq(n, 1);
    cr_expect(qf_task_is_daemon(ts[0]));
    drive(rt, ts, n); /* no wake needed */
    cr_expect_eq(atomic_load(&a.n), 2);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(queue_runner, task_names_name_queue_and_op)
{
    /* spec 143 */
    qf_runtime *rt = mkrt(0);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("fifo_queue", -1, QF_INT64);
    counter a = {.limit = 0}, b = {.limit = 0};
    qf_enqueue_op ops[2] = {produce_op("CountUpTo:0", count_up_to, &a),
                            produce_op("CountUpTo_1:0", count_up_to, &b)};
    qf_queue_runner *r = mkrunner(q, ops, 2, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, 0, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(qf_task_name(ts[0]), "QueueRunnerThread-fifo_queue-CountUpTo:0");
    cr_expect_str_eq(qf_task_name(ts[1]), "QueueRunnerThread-fifo_queue-CountUpTo_1:0");
    for (size_t i = 0; i < n; i++)
        qf_task_wake(ts[i]);
    drive(rt, ts, n);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, &rep), QF_OK);
    cr_assert_eq(rep.n_finished, 2, "the tasks were Coordinator members");
    cr_expect_str_eq(rep.finished[0], "QueueRunnerThread-fifo_queue-CountUpTo:0");
    cr_expect_str_eq(rep.finished[1], "QueueRunnerThread-fifo_queue-CountUpTo_1:0");
    qf_coord_join_report_clear(&rep);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(queue_runner, shutdown_cancels_parked_runner_tasks)
{
    /* runtime shutdown wakes parked runner tasks with CANCELLED; they stop
     * being counted and the runner can be freed */
    qf_runtime *rt = mkrt(2);
    qf_queue *q = mkq("q", 1, QF_INT64);
    counter prod = {.limit = -1};
    qf_enqueue_op op = produce_op("forever", count_up_to, &prod);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    wait_ge(&prod.n, 2);
    cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(10)), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* ------------------------------------------- scopes and collections (144-145) */

Test(queue_runner, collection_lookup_by_name_scope)
{
    /* spec 144: qr.name is the queue name; get_collection(QUEUE_RUNNERS,
     * "scope") finds it */
    qf_scope *s = mkscope();
    qf_queue *q1 = mkq("scope/queue", 4, QF_INT64), *q2 = mkq("other/queue", 4, QF_INT64);
    counter c = {.limit = 0};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r1 = mkrunner(q1, &op, 1, NULL), *r2 = mkrunner(q2, &op, 1, NULL);
    cr_expect_str_eq(qf_queue_runner_name(r1), "scope/queue");
    cr_assert_eq(qf_scope_add_queue_runner(s, r1, NULL), QF_OK);
    cr_assert_eq(qf_scope_add_queue_runner(s, r2, QF_QUEUE_RUNNERS), QF_OK);
    qf_queue_runner *out[4] = {NULL};
    cr_expect_eq(qf_scope_get_collection(s, QF_QUEUE_RUNNERS, "scope", out, 4), 1);
    cr_expect_eq(out[0], r1);
    cr_expect_eq(qf_scope_get_collection(s, NULL, "other", out, 4), 1);
    cr_expect_eq(out[0], r2);
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, out, 4), 2);
    cr_expect_eq(out[0], r1, "insertion order");
    cr_expect_eq(out[1], r2);
    cr_expect_eq(qf_scope_get_collection(s, NULL, "", out, 4), 2);
    cr_expect_eq(qf_scope_get_collection(s, NULL, "nowhere", out, 4), 0);
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, NULL, 0), 2, "count only");
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, out, 1), 2, "count beyond cap");
    cr_expect_eq(qf_scope_get_collection(s, "my_runners", NULL, out, 4), 0);
    qf_scope_free(s); /* frees r1 and r2 (ASan checks) */
    qf_queue_unref(q1);
    qf_queue_unref(q2);
}

Test(queue_runner, named_collections_are_separate)
{
    /* spec 144-145: a collection argument other than QUEUE_RUNNERS */
    qf_scope *s = mkscope();
    qf_queue *q1 = mkq("a", 4, QF_INT64), *q2 = mkq("b", 4, QF_INT64);
    counter c = {.limit = 0};
    qf_enqueue_op op = produce_op("op", count_up_to, &c);
    qf_queue_runner *r1 = mkrunner(q1, &op, 1, NULL), *r2 = mkrunner(q2, &op, 1, NULL);
    cr_assert_eq(qf_scope_add_queue_runner(s, r1, "mine"), QF_OK);
    cr_assert_eq(qf_scope_add_queue_runner(s, r2, NULL), QF_OK);
    qf_queue_runner *out[2] = {NULL};
    cr_expect_eq(qf_scope_get_collection(s, "mine", NULL, out, 2), 1);
    cr_expect_eq(out[0], r1);
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, out, 2), 1);
    cr_expect_eq(out[0], r2);
    qf_scope_free(s);
    qf_queue_unref(q1);
    qf_queue_unref(q2);
}

Test(queue_runner, start_queue_runners_starts_every_collected_runner)
{
    /* spec 145: one call, one array of tasks, with a non-default scope */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_scope *s = mkscope();
    qf_queue *q1 = mkq("q1", -1, QF_INT64), *q2 = mkq("q2", -1, QF_INT64);
    counter a = {.limit = 3}, b = {.limit = 4}, d = {.limit = 5};
    qf_enqueue_op op1 = produce_op("a", count_up_to, &a);
    qf_enqueue_op ops2[2] = {produce_op("b", count_up_to, &b), produce_op("d", count_up_to, &d)};
    cr_assert_eq(qf_scope_add_queue_runner(s, mkrunner(q1, &op1, 1, NULL), NULL), QF_OK);
    cr_assert_eq(qf_scope_add_queue_runner(s, mkrunner(q2, ops2, 2, NULL), NULL), QF_OK);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 3);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 5.0, false, NULL), QF_OK);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(join_task(ts[i]), QF_OK);
    cr_expect_eq(qf_queue_size(q1), 3);
    cr_expect_eq(qf_queue_size(q2), 9);
    cr_expect(qf_queue_is_closed(q1));
    cr_expect(qf_queue_is_closed(q2));
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_coord_free(c);
    qf_queue_unref(q1);
    qf_queue_unref(q2);
}

Test(queue_runner, start_queue_runners_with_null_runtime_uses_default)
{
    /* spec 145: sess=None means the default session; here the default
     * runtime */
    qf_scope *s = mkscope();
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter a = {.limit = 3};
    qf_enqueue_op op = produce_op("a", count_up_to, &a);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    cr_assert_eq(qf_scope_add_queue_runner(s, r, NULL), QF_OK);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_start_queue_runners(NULL, NULL, s, NULL, 0, &ts, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(qf_queue_runner_running(r, qf_runtime_default()), 1,
                 "counted on the default runtime");
    qf_task_wake(ts[0]);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(qf_queue_runner_running(r, qf_runtime_default()), 0);
    cr_expect_eq(qf_queue_size(q), 3);
    qf_tasks_free(ts, n);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(queue_runner, start_queue_runners_with_nothing_collected)
{
    /* spec 145: no runners collected: no tasks, no error */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    qf_task *dummy = NULL;
    qf_task **ts = &dummy;
    size_t n = 99;
    cr_expect_eq(qf_start_queue_runners(rt, NULL, s, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(n, 0);
    qf_tasks_free(ts, n);
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter a = {.limit = 0};
    qf_enqueue_op op = produce_op("a", count_up_to, &a);
    cr_assert_eq(qf_scope_add_queue_runner(s, mkrunner(q, &op, 1, NULL), "elsewhere"), QF_OK);
    ts = &dummy;
    n = 99;
    cr_expect_eq(qf_start_queue_runners(rt, NULL, s, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(n, 0, "the default collection is still empty");
    qf_tasks_free(ts, n);
    cr_expect_eq(atomic_load(&a.runs), 0);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(queue_runner, start_queue_runners_with_default_scope)
{
    /* spec 144-145: s NULL is the default scope (the default graph). The
     * collection name is unique because the default scope outlives tests
     * that share a process. */
    const char *coll = "test_queue_runner/default_scope";
    qf_runtime *rt = mkrt(1);
    qf_queue *q = mkq("default_scope_q", -1, QF_INT64);
    counter a = {.limit = 2};
    qf_enqueue_op op = produce_op("a", count_up_to, &a);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    cr_assert_not_null(qf_scope_default());
    cr_assert_eq(qf_scope_add_queue_runner(NULL, r, coll), QF_OK);
    qf_queue_runner *out[1] = {NULL};
    cr_expect_eq(qf_scope_get_collection(qf_scope_default(), coll, NULL, out, 1), 1);
    cr_expect_eq(out[0], r);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_start_queue_runners(rt, NULL, NULL, coll, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(qf_queue_size(q), 2);
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* ------------------------------------------------------ definitions (146) */

Test(queue_runner, def_round_trip_keeps_ops_and_codes)
{
    /* spec 146: codes as numbers (OUT_OF_RANGE=11, CANCELLED=1), restored */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_queue *q = mkq("q", -1, QF_INT64);
    counter a = {.limit = 3}, b = {.limit = 4};
    qf_enqueue_op ops[2] = {produce_op("op_a", count_up_to, &a),
                            produce_op("op_b", count_up_to, &b)};
    qf_code codes[2] = {QF_OUT_OF_RANGE, QF_CANCELLED};
    qf_queue_runner_options o = {.closed_codes = codes, .n_closed_codes = 2};
    qf_queue_runner *r = mkrunner(q, ops, 2, &o);
    char *text = NULL;
    cr_assert_eq(qf_queue_runner_to_def(r, NULL, &text), QF_OK);
    cr_assert_not_null(text);
    cr_expect(contains(text, "queue_closed_exception_types: 11\n"), "%s", text);
    cr_expect(contains(text, "queue_closed_exception_types: 1\n"), "%s", text);
    cr_expect(contains(text, "\"op_a\""), "%s", text);
    cr_expect(contains(text, "\"op_b\""), "%s", text);
    cr_expect(contains(text, "\"q_Close\""), "%s", text);
    cr_expect(contains(text, "\"q_Close_1\""), "%s", text);

    cr_assert_eq(qf_scope_register_queue(s, q), QF_OK);
    cr_assert_eq(qf_scope_register_op(s, &ops[0]), QF_OK);
    cr_assert_eq(qf_scope_register_op(s, &ops[1]), QF_OK);
    qf_queue_runner *r2 = NULL;
    cr_assert_eq(qf_queue_runner_from_def(s, text, NULL, &r2), QF_OK, "%s", qf_last_message());
    cr_expect_str_eq(qf_queue_runner_name(r2), "q");
    cr_expect_eq(qf_queue_runner_queue(r2), q);
    cr_expect_eq(qf_queue_runner_num_ops(r2), 2);
    qf_code got[4] = {0};
    cr_expect_eq(qf_queue_runner_closed_codes(r2, got, 4), 2);
    cr_expect_eq(got[0], QF_OUT_OF_RANGE);
    cr_expect_eq(got[1], QF_CANCELLED);
    char *text2 = NULL;
    cr_assert_eq(qf_queue_runner_to_def(r2, NULL, &text2), QF_OK);
    cr_expect_str_eq(text2, text);

    /* the restored runner runs the registered ops */
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r2, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(join_task(ts[i]), QF_OK);
    cr_expect_eq(atomic_load(&a.n), 3);
    cr_expect_eq(atomic_load(&b.n), 4);
    cr_expect(qf_queue_is_closed(q), "the default close op by its default name");
    qf_tasks_free(ts, n);
    free(text);
    free(text2);
    qf_queue_runner_free(r);
    qf_queue_runner_free(r2);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(queue_runner, def_without_codes_restores_out_of_range)
{
    /* spec 146: an empty type list restores (OutOfRangeError,) */
    qf_scope *s = mkscope();
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter a = {.limit = 0};
    qf_enqueue_op op = produce_op("op_a", count_up_to, &a);
    cr_assert_eq(qf_scope_register_queue(s, q), QF_OK);
    cr_assert_eq(qf_scope_register_op(s, &op), QF_OK);
    const char *text = "queue_name: \"q\"\n"
                       "enqueue_op_name: \"op_a\"\n"
                       "close_op_name: \"q_Close\"\n"
                       "cancel_op_name: \"q_Close_1\"\n";
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_queue_runner_from_def(s, text, NULL, &r), QF_OK, "%s", qf_last_message());
    qf_code got[4] = {0};
    cr_expect_eq(qf_queue_runner_closed_codes(r, got, 4), 1);
    cr_expect_eq(got[0], QF_OUT_OF_RANGE);
    cr_expect_eq(qf_queue_runner_num_ops(r), 1);
    qf_queue_runner_free(r);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(queue_runner, def_export_scope_strips_and_import_scope_restores)
{
    /* spec 146: export_scope strips; another scope gives NULL */
    qf_scope *s = mkscope();
    qf_queue *q = mkq("scope/q", 4, QF_INT64), *other = mkq("other/q", 4, QF_INT64);
    counter a = {.limit = 0};
    qf_enqueue_op op = produce_op("scope/op", count_up_to, &a);
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL), *ro = mkrunner(other, &op, 1, NULL);
    char *text = NULL;
    cr_assert_eq(qf_queue_runner_to_def(r, "scope/", &text), QF_OK);
    cr_assert_not_null(text);
    cr_expect(contains(text, "queue_name: \"q\"\n"), "%s", text);
    cr_expect(contains(text, "enqueue_op_name: \"op\"\n"), "%s", text);
    cr_expect(contains(text, "close_op_name: \"q_Close\"\n"), "%s", text);
    cr_expect(contains(text, "cancel_op_name: \"q_Close_1\"\n"), "%s", text);
    cr_expect_not(contains(text, "scope/"), "%s", text);

    char *none = (char *)"untouched";
    cr_expect_eq(qf_queue_runner_to_def(ro, "scope/", &none), QF_OK);
    cr_expect_null(none, "a runner outside the export scope gives NULL");

    cr_assert_eq(qf_scope_register_queue(s, q), QF_OK);
    cr_assert_eq(qf_scope_register_op(s, &op), QF_OK);
    qf_queue_runner *r2 = NULL;
    cr_assert_eq(qf_queue_runner_from_def(s, text, "scope/", &r2), QF_OK, "%s", qf_last_message());
    cr_expect_str_eq(qf_queue_runner_name(r2), "scope/q");
    char *full = NULL, *full2 = NULL;
    cr_assert_eq(qf_queue_runner_to_def(r, NULL, &full), QF_OK);
    cr_assert_eq(qf_queue_runner_to_def(r2, NULL, &full2), QF_OK);
    cr_expect_str_eq(full2, full);
    free(text);
    free(full);
    free(full2);
    qf_queue_runner_free(r);
    qf_queue_runner_free(ro);
    qf_queue_runner_free(r2);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_queue_unref(other);
}

Test(queue_runner, def_with_registered_close_and_cancel_actions)
{
    /* spec 146: close_op_name and cancel_op_name resolve to registered
     * actions */
    qf_runtime *rt = mkrt(1);
    qf_coord *c = mkcoord();
    qf_scope *s = mkscope();
    qf_queue *q = mkq("q", -1, QF_INT64);
    action_arg close = {.q = q}, cancel = {.q = q, .cancel = true};
    qf_queue_runner_options o = {.close_op = counting_action,
                                 .close_arg = &close,
                                 .close_op_name = "my_close",
                                 .cancel_op = counting_action,
                                 .cancel_arg = &cancel,
                                 .cancel_op_name = "my_cancel"};
    counter a = {.limit = 2};
    qf_enqueue_op op = produce_op("op", count_up_to, &a);
    qf_queue_runner *r = mkrunner(q, &op, 1, &o);
    char *text = NULL;
    cr_assert_eq(qf_queue_runner_to_def(r, NULL, &text), QF_OK);
    cr_expect(contains(text, "close_op_name: \"my_close\"\n"), "%s", text);
    cr_expect(contains(text, "cancel_op_name: \"my_cancel\"\n"), "%s", text);
    qf_queue_runner_free(r);

    cr_assert_eq(qf_scope_register_queue(s, q), QF_OK);
    cr_assert_eq(qf_scope_register_op(s, &op), QF_OK);
    qf_queue_runner *r2 = NULL;
    cr_expect_eq(qf_queue_runner_from_def(s, text, NULL, &r2), QF_NOT_FOUND,
                 "actions not registered yet");
    cr_assert_eq(qf_scope_register_action(s, "my_close", counting_action, &close), QF_OK);
    cr_assert_eq(qf_scope_register_action(s, "my_cancel", counting_action, &cancel), QF_OK);
    cr_assert_eq(qf_queue_runner_from_def(s, text, NULL, &r2), QF_OK, "%s", qf_last_message());
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r2, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_OK);
    cr_expect_eq(atomic_load(&close.calls), 1, "the registered close op ran");
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    cr_expect_eq(atomic_load(&cancel.calls), 0, "the runner had retired: no stop action");
    qf_tasks_free(ts, n);
    free(text);
    qf_queue_runner_free(r2);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(queue_runner, def_errors_name_what_is_missing)
{
    /* qf_queue_runner_from_def(): NOT_FOUND and INVALID_ARGUMENT */
    qf_scope *s = mkscope();
    qf_queue *q = mkq("q", 4, QF_INT64);
    counter a = {.limit = 0};
    qf_enqueue_op op = produce_op("op_a", count_up_to, &a);
    qf_queue_runner *r = NULL;
    const char *text = "queue_name: \"q\"\nenqueue_op_name: \"op_a\"\n";
    cr_expect_eq(qf_queue_runner_from_def(s, text, NULL, &r), QF_NOT_FOUND);
    cr_expect(contains(qf_last_message(), "'q'"), "%s", qf_last_message());
    cr_assert_eq(qf_scope_register_queue(s, q), QF_OK);
    cr_expect_eq(qf_queue_runner_from_def(s, text, NULL, &r), QF_NOT_FOUND);
    cr_expect(contains(qf_last_message(), "op_a"), "%s", qf_last_message());
    cr_assert_eq(qf_scope_register_op(s, &op), QF_OK);
    cr_expect_eq(qf_queue_runner_from_def(s, "garbage line\n", NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_runner_from_def(s, "color: \"red\"\n", NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_runner_from_def(s,
                                          "queue_name: \"q\"\nenqueue_op_name: \"op_a\"\n"
                                          "queue_closed_exception_types: 99\n",
                                          NULL, &r),
                 QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_runner_from_def(s, "enqueue_op_name: \"op_a\"\n", NULL, &r),
                 QF_INVALID_ARGUMENT, "no queue_name");
    cr_expect_null(r);
    cr_assert_eq(qf_queue_runner_from_def(s, text, NULL, &r), QF_OK, "%s", qf_last_message());
    qf_queue_runner_free(r);
    qf_scope_free(s);
    qf_queue_unref(q);
}

/* ------------------------------------------------------------- looper (124-126) */

typedef struct {
    qf_coord *c;
    atomic_int n;
} countdown;

static qf_code countdown_fn(void *arg)
{
    countdown *d = arg;
    if (atomic_fetch_sub(&d->n, 1) - 1 == 0)
        qf_coord_request_stop(d->c, NULL);
    return QF_OK;
}

Test(queue_runner, looper_counts_down_and_stops)
{
    /* spec 124: interval 0, n from 3 to 0, request_stop at 0 */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    countdown d = {.c = c, .n = 3};
    qf_task *t = NULL;
    cr_assert_eq(qf_looper_start(rt, c, 0.0, countdown_fn, &d, NULL, &t), QF_OK);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, &rep), QF_OK);
    cr_expect_eq(atomic_load(&d.n), 0);
    cr_assert_eq(rep.n_finished, 1, "the looper registers with the Coordinator");
    cr_expect_str_eq(rep.finished[0], "LooperThread");
    cr_expect_eq(join_task(t), QF_OK);
    cr_expect_str_eq(qf_task_name(t), "LooperThread");
    qf_coord_join_report_clear(&rep);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

Test(queue_runner, looper_back_to_back_with_interval_zero)
{
    /* spec 125: timer_interval_secs=None: calls back to back (interval 0;
     * negative, NaN and infinite intervals are refused) */
    qf_runtime *rt = mkrt(1);
    qf_coord *c = mkcoord();
    countdown d = {.c = c, .n = 1000};
    qf_task *t = NULL;
    cr_expect_eq(qf_looper_start(rt, c, -1.0, countdown_fn, &d, "busy", &t), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_looper_start(rt, c, 0.0, countdown_fn, &d, "busy", &t), QF_OK);
    cr_expect_str_eq(qf_task_name(t), "busy");
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK);
    cr_expect_eq(atomic_load(&d.n), 0);
    cr_expect_eq(join_task(t), QF_OK);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

typedef struct {
    qf_coord *c;
    int stop_after;
    atomic_int calls;
    int64_t at[8];
} ticker;

static qf_code tick(void *arg)
{
    ticker *k = arg;
    int i = atomic_load(&k->calls);
    if (i < 8)
        k->at[i] = qf_now_ns();
    atomic_store(&k->calls, i + 1);
    if (i + 1 == k->stop_after)
        qf_coord_request_stop(k->c, NULL);
    return QF_OK;
}

Test(queue_runner, looper_calls_on_interval_boundaries)
{
    /* spec 125: the first call at once, then on fixed boundaries: call k
     * never comes before start + k * interval */
    const int64_t interval = 20 * 1000 * 1000;
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    ticker k = {.c = c, .stop_after = 4};
    int64_t start = qf_now_ns();
    qf_task *t = NULL;
    cr_assert_eq(qf_looper_start(rt, c, interval / 1e9, tick, &k, NULL, &t), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK);
    cr_expect_eq(join_task(t), QF_OK);
    cr_assert_eq(atomic_load(&k.calls), 4, "no call after the stop");
    for (int i = 1; i < 4; i++)
        cr_expect_geq(k.at[i] - start, i * interval, "call %d came %lld ns after the start", i,
                      (long long)(k.at[i] - start));
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

Test(queue_runner, looper_first_call_is_immediate_and_stop_ends_it_at_once)
{
    /* spec 125: with a 10 s interval the first call does not wait for a
     * boundary, and a stop ends the looper without waiting for the next */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    ticker k = {.c = c, .stop_after = -1};
    int64_t start = qf_now_ns();
    qf_task *t = NULL;
    cr_assert_eq(qf_looper_start(rt, c, 10.0, tick, &k, NULL, &t), QF_OK);
    qf_deadline d = qf_deadline_in_s(20);
    while (atomic_load(&k.calls) < 1 && !qf_deadline_passed(d))
        sched_yield();
    cr_assert_eq(atomic_load(&k.calls), 1);
    cr_expect_lt(k.at[0] - start, 5 * 1000 * 1000 * 1000LL, "the first call waited");
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 2.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_lt(qf_now_ns() - start, 5 * 1000 * 1000 * 1000LL, "the stop waited for a tick");
    cr_expect_eq(atomic_load(&k.calls), 1);
    cr_expect_eq(join_task(t), QF_OK);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

static qf_code fail_on_second(void *arg)
{
    atomic_int *n = arg;
    if (atomic_fetch_add(n, 1) + 1 == 2)
        return qf_set_error(QF_DATA_LOSS, "looper target failed");
    return QF_OK;
}

Test(queue_runner, looper_error_is_reported_and_ends_it)
{
    /* spec 125 */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    atomic_int calls = 0;
    qf_task *t = NULL;
    cr_assert_eq(qf_looper_start(rt, c, 0.0, fail_on_second, &calls, NULL, &t), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_DATA_LOSS);
    cr_expect_str_eq(qf_last_message(), "looper target failed");
    cr_expect_eq(join_task(t), QF_DATA_LOSS);
    cr_expect_eq(atomic_load(&calls), 2, "no call after the error");
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

typedef struct {
    qf_queue *side; /* closed and empty */
    atomic_int calls;
} bare_looper;

static qf_code bare_looper_fn(void *arg)
{
    bare_looper *b = arg;
    atomic_fetch_add(&b->calls, 1);
    qf_element *e = NULL;
    if (qf_queue_try_dequeue(b->side, &e) == QF_OK) /* OUT_OF_RANGE, handled */
        qf_element_free(e);
    return QF_INTERNAL;
}

Test(queue_runner, looper_error_code_without_message_reaches_join)
{
    /* spec 125: the target returns QF_INTERNAL without qf_set_error; join
     * must return INTERNAL, not the thread's stale (clean) OUT_OF_RANGE */
    qf_runtime *rt = mkrt(1);
    qf_coord *c = mkcoord();
    bare_looper b = {.side = closed_empty_queue()};
    qf_task *t = NULL;
    cr_assert_eq(qf_looper_start(rt, c, 0.0, bare_looper_fn, &b, NULL, &t), QF_OK);
    qf_code rc = qf_coord_join(c, NULL, 0, 10.0, false, NULL);
    cr_expect_eq(rc, QF_INTERNAL, "join returned %s", qf_code_name(rc));
    cr_expect_eq(join_task(t), QF_INTERNAL);
    cr_expect_eq(atomic_load(&b.calls), 1);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(b.side);
}

Test(queue_runner, looper_needs_coordinator_and_function)
{
    /* spec 126 */
    qf_runtime *rt = mkrt(1);
    qf_coord *c = mkcoord();
    countdown d = {.c = c, .n = 1};
    qf_task *t = NULL;
    cr_expect_eq(qf_looper_start(rt, NULL, 0.0, countdown_fn, &d, NULL, &t), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_looper_start(rt, c, 0.0, NULL, &d, NULL, &t), QF_INVALID_ARGUMENT,
                 "args without a target");
    cr_expect_null(t);
    cr_expect_eq(qf_runtime_num_tasks(rt), 0);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* ------------------------------------------------- pointer produce ops */

static atomic_long dtor_calls;
static void count_dtor(void *p)
{
    (void)p;
    atomic_fetch_add(&dtor_calls, 1);
}

/* A QF_OP_PRODUCE_PTR op moves bare pointers into a pointer queue, in
 * order, and its end of input closes the queue as a produce op's does. */
Test(queue_runner, produce_ptr_op_moves_pointers_and_closes_at_end)
{
    qf_runtime *rt = mkrt(2);
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(4, "pq", 0, NULL, &q), QF_OK);
    ptr_counter c = {.limit = 1000};
    qf_enqueue_op op = {
        .name = "ptrs", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce_ptr, .arg = &c};
    qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    for (uintptr_t want = 1; want <= 1000; want++) {
        void *p = NULL;
        cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK, "%s", qf_last_message());
        cr_assert_eq((uintptr_t)p, want);
    }
    void *p = NULL;
    cr_expect_eq(qf_queue_dequeue_ptr(q, &p), QF_OUT_OF_RANGE, "the runner closed the queue");
    cr_expect_eq(join_task(ts[0]), QF_OK);
    qf_tasks_free(ts, n);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* A pointer op needs a pointer queue; a pointer still held when the task
 * is cancelled goes to the queue's destructor. */
Test(queue_runner, produce_ptr_op_checks_its_queue_and_releases_what_it_holds)
{
    qf_queue *iq = mkq("ints", 4, QF_INT32);
    qf_enqueue_op op = {.name = "ptrs", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce_ptr};
    qf_queue_runner *r = NULL;
    cr_expect_eq(qf_queue_runner_new(iq, &op, 1, NULL, &r), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "not a queue of one scalar QF_PTR") != NULL, "%s",
              qf_last_message());
    qf_queue_unref(iq);

    atomic_store(&dtor_calls, 0);
    qf_runtime *rt = mkrt(2);
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(1, "pq", 0, count_dtor, &q), QF_OK);
    ptr_counter c = {.limit = -1};
    op.arg = &c;
    r = mkrunner(q, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    while (atomic_load(&c.next) < 2) /* one in the queue, one held */
        sched_yield();
    cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(10)), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
    cr_expect_eq(atomic_load(&dtor_calls), 1, "the held pointer was released");
    qf_tasks_free(ts, n);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_runtime_free(rt);
    qf_queue_unref(q);
    cr_expect_eq(atomic_load(&dtor_calls), 2, "and the queued one with the queue");
}

/* A consumer that finishes a runner task's enqueue in line (its ticket)
 * stores the final state and then wakes the task through the task's own
 * waker. A task that sees the state first (here: cancelled by a shutdown,
 * it takes its ticket back and waits for that state) may end, and without
 * a Coordinator nothing else holds it: the wake must not touch a freed
 * task. Rounds of: a runner on a full queue of capacity 1, a thread
 * dequeuing, a shutdown meanwhile. */
typedef struct {
    qf_queue *q;
    atomic_int stop;
    long got;
} ticket_consumer;

static void *ticket_consume(void *arg)
{
    ticket_consumer *c = arg;
    while (!atomic_load(&c->stop)) {
        void *p;
        if (qf_queue_dequeue_ptr_until(c->q, qf_deadline_in_ns(1000000), &p) == QF_OK)
            c->got++;
    }
    return NULL;
}

Test(queue_runner, ticket_finished_while_its_task_ends_is_not_touched_after, .timeout = 120)
{
    for (int round = 0; round < 50; round++) {
        qf_runtime *rt = mkrt(2);
        qf_queue *q = NULL;
        cr_assert_eq(qf_ptr_queue_new(1, "tq", 0, NULL, &q), QF_OK);
        ptr_counter pc = {.limit = -1};
        qf_enqueue_op op = {
            .name = "ptrs", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce_ptr, .arg = &pc};
        qf_queue_runner *r = mkrunner(q, &op, 1, NULL);
        cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, NULL, NULL), QF_OK);
        ticket_consumer c = {.q = q};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, ticket_consume, &c), 0);
        while (atomic_load(&pc.next) < 100)
            sched_yield();
        cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(30)), QF_OK);
        atomic_store(&c.stop, 1);
        pthread_join(th, NULL);
        qf_runtime_free(rt);
        cr_expect_eq(qf_queue_runner_free(r), QF_OK);
        qf_queue_unref(q);
    }
}

/* A runtime shut down while one op of a runner is inside its poll (past
 * the runner's cancel check) and finds its input ended only after the other
 * op left through the cancel: that op leaves last, through a closed code,
 * but the cancelled op's input has not ended, so the queue stays open and a
 * start on a new runtime goes on (spec 139-141). Once closed the queue was,
 * and a reader pipeline restarted this way lost every row after the
 * shutdown (CI, reader_runs, threads=4: the spare reader of three files). */
typedef struct shutdown_race {
    qf_queue *q;
    int64_t next;     /* fill's next value */
    qf_element *held; /* fill's element not yet in */
    _Atomic(qf_task *) fill_task;
    atomic_int end_entered;
    atomic_int end_saw_both; /* end saw its cancel and fill's exit first */
    atomic_int second_start; /* the start on the new runtime */
} shutdown_race;

static qf_code race_fill(qf_task *t, void *arg)
{
    shutdown_race *s = arg;
    if (atomic_load(&s->second_start) && s->next >= 4 && !s->held)
        return qf_set_error(QF_OUT_OF_RANGE, "fill: end of input");
    if (!s->held)
        s->held = elem_i64(s->next++);
    qf_code rc = qf_queue_poll_enqueue(s->q, s->held, qf_task_waker(t));
    if (rc == QF_OK)
        s->held = NULL;
    return rc;
}

static qf_code race_end(qf_task *t, void *arg)
{
    shutdown_race *s = arg;
    if (!atomic_load(&s->second_start)) {
        /* Inside the poll when the runtime shuts down: end only after the
         * cancel reached this task and the fill task left. */
        atomic_store(&s->end_entered, 1);
        qf_deadline d = qf_deadline_in_s(60);
        while (!qf_task_is_cancelled(t) && !qf_deadline_passed(d))
            sched_yield();
        qf_task *f;
        while ((!(f = atomic_load(&s->fill_task)) || !qf_task_is_done(f)) && !qf_deadline_passed(d))
            sched_yield();
        atomic_store(&s->end_saw_both, qf_task_is_cancelled(t) && f && qf_task_is_done(f));
    }
    return qf_set_error(QF_OUT_OF_RANGE, "end: end of input");
}

Test(queue_runner, shutdown_while_an_op_ends_leaves_the_queue_open_for_a_restart, .timeout = 120)
{
    shutdown_race s = {.q = mkq("race", 1, QF_INT64)};
    qf_enqueue_op ops[2] = {
        {.name = "fill", .kind = QF_OP_POLL, .poll = race_fill, .arg = &s},
        {.name = "end", .kind = QF_OP_POLL, .poll = race_end, .arg = &s},
    };
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_queue_runner_new(s.q, ops, 2, NULL, &r), QF_OK, "%s", qf_last_message());
    qf_runtime *rt = mkrt(2);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK, "%s",
                 qf_last_message());
    cr_assert_eq(n, 2);
    atomic_store(&s.fill_task, ts[0]);
    qf_deadline d = qf_deadline_in_s(60);
    while ((qf_queue_size(s.q) != 1 || !atomic_load(&s.end_entered)) && !qf_deadline_passed(d))
        sched_yield();
    cr_assert(atomic_load(&s.end_entered), "the end op never ran");
    cr_assert_eq(qf_queue_size(s.q), 1, "fill never filled the queue");
    cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(60)), QF_OK, "%s", qf_last_message());
    cr_assert(atomic_load(&s.end_saw_both),
              "the end op did not leave last: the race was not set up");
    cr_assert_not(qf_queue_is_closed(s.q), "a shutdown closed the queue of a cancelled runner");
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);

    /* Again on a new runtime: fill goes on from where it stopped, both
     * ops end, and then the queue closes. */
    atomic_store(&s.second_start, 1);
    rt = mkrt(2);
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK, "%s",
                 qf_last_message());
    for (int64_t want = 0;; want++) {
        qf_element *e = NULL;
        qf_code rc = qf_queue_dequeue_until(s.q, qf_deadline_in_s(60), &e);
        if (rc == QF_OUT_OF_RANGE) {
            cr_assert_eq(want, 4, "the queue closed after %lld values", (long long)want);
            break;
        }
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)), want);
        qf_element_free(e);
    }
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(qf_task_join(ts[i], qf_deadline_in_s(60), NULL), QF_OK, "%s",
                     qf_last_message());
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);
    qf_queue_runner_free(r);
    qf_queue_unref(s.q);
}

/* spec 37, 139: a shutdown while a runner's op waits on an empty input
 * ends the task as cancelled. The input's poll answers QF_CANCELLED "Dequeue
 * operation was cancelled" to a cancelled task (qf_queue.h, poll forms);
 * that is the shutdown, not a failure of the op: nothing is reported to
 * the Coordinator or recorded, and neither queue is closed. */
Test(queue_runner, a_shutdown_while_waiting_on_the_input_is_no_error_of_the_op)
{
    qf_runtime *rt = mkrt(2);
    qf_coord *coord = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &coord), QF_OK);
    qf_queue *in = mkq("in", 4, QF_INT64), *out = mkq("out", 4, QF_INT64);
    qf_enqueue_op op = transform_op("pass", in, NULL, NULL);
    qf_queue_runner *r = mkrunner(out, &op, 1, NULL);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, coord, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(qf_queue_enqueue(in, elem_i64(5)), QF_OK);
    int64_t v = 0;
    cr_assert_eq(deq_i64(out, &v), QF_OK); /* the op ran; now it waits on `in` */
    cr_expect_eq(v, 5);
    cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(10)), QF_OK);
    cr_expect_eq(join_task(ts[0]), QF_CANCELLED);
    cr_expect_not(qf_coord_should_stop(coord), "the shutdown was reported as the op's error");
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    cr_expect_not(qf_queue_is_closed(out));
    cr_expect_not(qf_queue_is_closed(in));
    qf_tasks_free(ts, n);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_runtime_free(rt);
    qf_coord_free(coord);
    qf_queue_unref(in);
    qf_queue_unref(out);
}
