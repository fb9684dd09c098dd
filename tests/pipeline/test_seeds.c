/* test_seeds.c - the seeds' programs, in C, as tests.
 *
 *   threading-and-queues-guide.txt: the incrementer (a FIFOQueue filled
 *       with zeros; dequeue, add one, enqueue back) and the training loop
 *       (runners feed a queue; should_stop / request_stop(e) / join);
 *   queuerunners-blog.txt: queues in series fed by runners, where the end
 *       of input travels down the chain as OUT_OF_RANGE and the consumer
 *       ends cleanly with request_stop(e) on the final OutOfRangeError.
 *
 * Ordering comes from observable state (op counters, queues, joins). */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_queue_runner.h"
#define QFT_RT_NAME "seeds"
#include "qf_test.h"

static qf_queue *mkq(const char *name, int64_t cap, qf_dtype dt)
{
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = cap, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = name};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

static qf_queue_runner *mkrunner(qf_queue *q, const qf_enqueue_op *ops, size_t n)
{
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_queue_runner_new(q, ops, n, NULL, &r), QF_OK, "%s", qf_last_message());
    return r;
}

static void wait_ge(atomic_long *v, long want)
{
    qf_deadline d = qf_deadline_in_s(20);
    while (atomic_load(v) < want) {
        cr_assert_not(qf_deadline_passed(d), "stuck at %ld < %ld", atomic_load(v), want);
        sched_yield();
    }
}

static qf_code join_task(qf_task *t)
{
    qf_code rc = qf_task_join(t, qf_deadline_in_s(20), NULL);
    cr_assert(qf_task_is_done(t), "task '%s' did not finish", qf_task_name(t));
    return rc;
}

static qf_element *elem_i64(int64_t v)
{
    qf_tensor *t = qf_tensor_new_i64(v);
    return qf_element_of(1, &t);
}

static int64_t get_i64(const qf_element *e, int64_t row)
{
    return ((const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)))[row];
}

/* ------------------------------------------------------- the incrementer */

typedef struct {
    qf_dtype dt;
    atomic_long steps;
} inc_arg;

/* y = x + 1 */
static qf_code add_one(void *arg, qf_element *in, qf_element **ret_out)
{
    inc_arg *a = arg;
    qf_tensor *x = qf_element_get(in, 0);
    qf_tensor *y = a->dt == QF_FLOAT32
                       ? qf_tensor_new_f32(*(const float *)qf_tensor_cdata(x) + 1.0f)
                       : qf_tensor_new_i32(*(const int32_t *)qf_tensor_cdata(x) + 1);
    qf_element_free(in);
    *ret_out = qf_element_of(1, &y);
    atomic_fetch_add(&a->steps, 1);
    return QF_OK;
}

static double value_at(qf_element *e, qf_dtype dt)
{
    const void *p = qf_tensor_cdata(qf_element_get(e, 0));
    return dt == QF_FLOAT32 ? (double)*(const float *)p : (double)*(const int32_t *)p;
}

/* q = FIFOQueue(3, dt); init = q.enqueue_many(([0, 0, 0],));
 * x = q.dequeue(); y = x + 1; q_inc = q.enqueue([y]);
 * a runner runs q_inc in n_ops tasks until stopped. */
static void incrementer(qf_dtype dt, size_t n_ops)
{
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq(NULL, 3, dt);
    cr_expect_str_eq(qf_queue_name(q), "fifo_queue");
    int64_t dims[1] = {3};
    qf_shape sh = qf_shape_make(1, dims);
    qf_tensor *zeros = qf_tensor_new(dt, &sh);
    qf_element *init = qf_element_of(1, &zeros);
    cr_assert_eq(qf_queue_enqueue_many(q, init, NULL), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_queue_size(q), 3);

    inc_arg a = {.dt = dt};
    qf_enqueue_op ops[2];
    for (size_t i = 0; i < n_ops; i++)
        ops[i] = (qf_enqueue_op){
            .name = "q_inc", .kind = QF_OP_TRANSFORM, .input = q, .transform = add_one, .arg = &a};
    qf_queue_runner *r = mkrunner(q, ops, n_ops);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, n_ops);

    wait_ge(&a.steps, 300); /* "slowly, the numbers on the queue increase" */
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    for (size_t i = 0; i < n; i++)
        join_task(ts[i]);
    long steps = atomic_load(&a.steps);

    /* The stop closed the queue (cancel op); a task holding an element
     * when it came drops it. What is left went round and round. */
    double sum = 0, min = 1e18, max = -1;
    int left = 0;
    qf_element *e = NULL;
    while (qf_queue_try_dequeue(q, &e) == QF_OK) {
        double v = value_at(e, dt);
        sum += v;
        min = v < min ? v : min;
        max = v > max ? v : max;
        left++;
        qf_element_free(e);
    }
    cr_expect_geq(left, 3 - (int)n_ops, "at most one element in flight per task");
    cr_expect_leq(left, 3);
    cr_expect_geq(min, 1.0, "every element was incremented");
    cr_expect_leq(sum, (double)steps, "no increment counted twice");
    if (n_ops == 1) {
        /* one task, FIFO order: the elements take turns */
        cr_expect_geq(min, 99.0, "min %g after %ld steps", min, steps);
        cr_expect_leq(max - min, 1.0, "values %g..%g", min, max);
        cr_expect_geq(sum + (3 - left) * (max + 1), (double)steps);
    }
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(seeds, incrementer_float_queue_of_zeros_counts_up)
{
    incrementer(QF_FLOAT32, 1);
}

Test(seeds, incrementer_int_queue_two_tasks)
{
    incrementer(QF_INT32, 2);
}

/* ----------------------------------------------------- the training loop */

typedef struct {
    atomic_long next; /* examples drawn so far */
    long fail_at;     /* > 0: the draw with this number fails */
} examples;

/* example = ...ops to create one example...; enqueue_op = queue.enqueue(example) */
static qf_code make_example(void *arg, qf_element **ret)
{
    examples *x = arg;
    long v = atomic_fetch_add(&x->next, 1) + 1;
    if (x->fail_at > 0 && v >= x->fail_at)
        return qf_set_error(QF_DATA_LOSS, "corrupted record %ld", v);
    *ret = elem_i64(v);
    return QF_OK;
}

Test(seeds, training_loop_with_should_stop_request_stop_and_join)
{
    /* qr = QueueRunner(queue, [enqueue_op] * 4); threads = create_threads(
     * sess, coord, start=True); for step: if coord.should_stop(): break;
     * sess.run(train_op); coord.request_stop(); coord.join(threads) */
    enum { STEPS = 100, BATCH = 8 };
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("examples", 32, QF_INT64);
    examples x = {.fail_at = 0};
    qf_enqueue_op op = {
        .name = "enqueue", .kind = QF_OP_PRODUCE, .produce = make_example, .arg = &x};
    qf_enqueue_op ops[4] = {op, op, op, op};
    qf_queue_runner *r = mkrunner(q, ops, 4);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 4);

    uint8_t *seen = calloc(STEPS * BATCH * 4 + 1024, 1);
    int step = 0, trained = 0, dup = 0;
    while (!qf_coord_should_stop(c) && step < STEPS) {
        qf_element *batch = NULL; /* inputs = queue.dequeue_many(batch_size) */
        if (qf_coord_report(c, qf_queue_dequeue_many(q, BATCH, &batch)) != QF_OK)
            break;
        for (int64_t i = 0; i < BATCH; i++) { /* train_op */
            int64_t v = get_i64(batch, i);
            if (v > 0 && v < STEPS * BATCH * 4 + 1024)
                dup += seen[v]++ != 0;
            trained++;
        }
        qf_element_free(batch);
        step++;
    }
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK); /* innocuous twice */
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_eq(step, STEPS);
    cr_expect_eq(trained, STEPS * BATCH);
    cr_expect_eq(dup, 0, "every example dequeued once");
    for (size_t i = 0; i < n; i++)
        join_task(ts[i]);
    free(seen);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(seeds, training_loop_error_from_a_runner_surfaces_in_join)
{
    /* try: ... except Exception as e: coord.request_stop(e)
     * finally: coord.request_stop(); coord.join(threads) -- a runner's
     * error stops the loop and join raises it */
    enum { BATCH = 8 };
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = mkq("examples", 32, QF_INT64);
    examples x = {.fail_at = 50};
    qf_enqueue_op op = {
        .name = "enqueue", .kind = QF_OP_PRODUCE, .produce = make_example, .arg = &x};
    qf_enqueue_op ops[4] = {op, op, op, op};
    qf_queue_runner *r = mkrunner(q, ops, 4);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    long trained = 0;
    qf_code loop_rc = QF_OK;
    while (!qf_coord_should_stop(c)) {
        qf_element *batch = NULL;
        loop_rc = qf_coord_report(c, qf_queue_dequeue_many(q, BATCH, &batch));
        if (loop_rc != QF_OK)
            break; /* the stop closed the queue: OUT_OF_RANGE, a clean report */
        trained += BATCH;
        qf_element_free(batch);
    }
    cr_expect(loop_rc == QF_OK || loop_rc == QF_OUT_OF_RANGE, "loop ended with %s",
              qf_code_name(loop_rc));
    cr_expect_lt(trained, 50, "examples after the bad record never arrive");
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_DATA_LOSS);
    cr_expect(strstr(qf_last_message(), "corrupted record") != NULL, "%s", qf_last_message());
    for (size_t i = 0; i < n; i++)
        join_task(ts[i]);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

/* ------------------------------------------- three queues in series (blog) */

typedef struct {
    long per_epoch, num_epochs;
    atomic_long i;
} producer;

/* input_producer(range(per_epoch), num_epochs=...): OUT_OF_RANGE at the end
 * of the last epoch */
static qf_code input_producer(void *arg, qf_element **ret)
{
    producer *p = arg;
    long i = atomic_load(&p->i);
    if (i >= p->per_epoch * p->num_epochs)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", p->num_epochs);
    *ret = elem_i64(i % p->per_epoch);
    atomic_store(&p->i, i + 1);
    return QF_OK;
}

static qf_code square(void *arg, qf_element *in, qf_element **ret_out)
{
    (void)arg;
    int64_t v = get_i64(in, 0);
    qf_element_free(in);
    *ret_out = elem_i64(v * v);
    return QF_OK;
}

Test(seeds, three_queues_in_series_end_of_input_travels_down)
{
    /* producer(num_epochs=3) -> q1 -> q2 (squares, two tasks) -> q3 ->
     * consumer: while True: tot = sess.run(update_total) except
     * OutOfRangeError as e: coord.request_stop(e) finally:
     * coord.request_stop(); coord.join(threads) */
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_scope *s = NULL;
    cr_assert_eq(qf_scope_new(&s), QF_OK);
    qf_queue *q1 = mkq("input_producer", 4, QF_INT64);
    qf_queue *q2 = mkq("fifo_queue", 4, QF_INT64);
    qf_queue *q3 = mkq("batch/fifo_queue", 4, QF_INT64);
    producer p = {.per_epoch = 10, .num_epochs = 3};
    qf_enqueue_op op1 = {.name = "input_producer/limit_epochs",
                         .kind = QF_OP_PRODUCE,
                         .produce = input_producer,
                         .arg = &p};
    qf_enqueue_op op2 = {
        .name = "square", .kind = QF_OP_TRANSFORM, .input = q1, .transform = square};
    qf_enqueue_op ops2[2] = {op2, op2};
    qf_enqueue_op op3 = {.name = "batch/fifo_queue_enqueue", .kind = QF_OP_TRANSFORM, .input = q2};
    cr_assert_eq(qf_scope_add_queue_runner(s, mkrunner(q1, &op1, 1), NULL), QF_OK);
    cr_assert_eq(qf_scope_add_queue_runner(s, mkrunner(q2, ops2, 2), NULL), QF_OK);
    cr_assert_eq(qf_scope_add_queue_runner(s, mkrunner(q3, &op3, 1), NULL), QF_OK);

    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, 4);

    int64_t total = 0;
    long count = 0, batches = 0;
    for (;;) {
        qf_element *b = NULL;
        qf_code rc = qf_queue_dequeue_up_to(q3, 4, &b); /* tf.train.batch */
        if (rc == QF_OUT_OF_RANGE) {
            qf_coord_request_stop(c, qf_last_status()); /* request_stop(e) */
            break;
        }
        if (qf_coord_report(c, rc) != QF_OK)
            break;
        int64_t rows = qf_tensor_shape(qf_element_get(b, 0))->dims[0];
        for (int64_t i = 0; i < rows; i++)
            total += get_i64(b, i);
        count += rows;
        batches++;
        qf_element_free(b);
    }
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_eq(count, 30);
    cr_expect_eq(total, 3 * 285, "3 epochs of the squares of 0..9");
    cr_expect_geq(batches, 8);
    cr_expect(qf_queue_is_closed(q1));
    cr_expect(qf_queue_is_closed(q2));
    cr_expect(qf_queue_is_closed(q3));
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(join_task(ts[i]), QF_OK, "%s retired cleanly", qf_task_name(ts[i]));
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_coord_free(c);
    qf_queue_unref(q1);
    qf_queue_unref(q2);
    qf_queue_unref(q3);
}
