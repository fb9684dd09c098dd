/* test_input.c - fill gauges, limit_epochs and the input producers
 * (qf_input.h; spec 147-160).
 *
 * Every test uses a scope of its own (never the default one), so runners
 * do not leak from one test into the next when the suites run in one
 * process (the TSan runner). Ordering comes from observable state (queue
 * contents, task and Coordinator joins); nothing sleeps to order anything,
 * and every wait has a deadline only a broken run reaches.
 *
 * Item 151 (an input of unknown static shape) is tested with deferred
 * inputs in test_deferred.c; a qflow tensor always has a fully defined
 * shape, so the test here checks the nearest C errors, a scalar input or
 * an incompatible element_shape. The local-variable initialisation note of 148 has no C
 * counterpart (the counter is initialised at creation; qf_limit_epochs_reset
 * plays local_variables_initializer).
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#define QFT_RT_NAME "input"
#include "qf_test.h"

/* ---------------------------------------------------------------- helpers */

static const char *str_at(const qf_element *e, size_t comp, int64_t i)
{
    const char *s = qf_tensor_string(qf_element_get(e, comp), i, NULL);
    cr_assert_not_null(s);
    return s;
}

static int32_t i32_at(const qf_element *e, size_t comp, int64_t i)
{
    return ((const int32_t *)qf_tensor_cdata(qf_element_get(e, comp)))[i];
}

static size_t collection_size(qf_scope *s, const char *coll)
{
    qf_queue_runner *rs[8];
    return qf_scope_get_collection(s, coll, NULL, rs, 8);
}

/* ------------------------------------------------------------ limit_epochs */

Test(input, spec_147_limit_epochs_without_limit_returns_the_tensor_every_time)
{
    /* spec 147: limit_epochs(t, None): 100 evaluations of 7 all give 7 */
    qf_tensor *seven = qf_tensor_new_i32(7);
    qf_limit_epochs *l = NULL;
    cr_assert_eq(qf_limit_epochs_new(seven, 0, &l), QF_OK);
    for (int i = 0; i < 100; i++) {
        qf_tensor *t = NULL;
        cr_assert_eq(qf_limit_epochs_next(l, &t), QF_OK);
        cr_expect_eq(*(const int32_t *)qf_tensor_cdata(t), 7);
        qf_tensor_unref(t);
    }
    cr_expect_eq(qf_limit_epochs_count(l), 100);
    qf_limit_epochs_free(l);
    qf_tensor_unref(seven);
}

Test(input, spec_148_limit_epochs_two_then_out_of_range)
{
    /* spec 148: limit_epochs(t, 2) gives t twice, the 3rd raises
     * OutOfRange; the counter stops at num_epochs */
    qf_tensor *love = qf_tensor_new_cstr("Love Me");
    qf_limit_epochs *l = NULL;
    cr_assert_eq(qf_limit_epochs_new(love, 2, &l), QF_OK);
    for (int i = 0; i < 2; i++) {
        qf_tensor *t = NULL;
        cr_assert_eq(qf_limit_epochs_next(l, &t), QF_OK);
        cr_expect_str_eq(qf_tensor_string(t, 0, NULL), "Love Me");
        qf_tensor_unref(t);
    }
    qf_tensor *t = NULL;
    cr_expect_eq(qf_limit_epochs_next(l, &t), QF_OUT_OF_RANGE);
    cr_expect_null(t, "output untouched on failure");
    cr_expect_str_eq(qf_last_message(), "Reached limit of 2");
    cr_expect_eq(qf_limit_epochs_next(l, &t), QF_OUT_OF_RANGE, "and every later call");
    cr_expect_eq(qf_limit_epochs_count(l), 2, "the 'epochs' variable stops at the limit");
    /* local_variables_initializer() */
    qf_limit_epochs_reset(l);
    cr_expect_eq(qf_limit_epochs_next(l, &t), QF_OK);
    qf_tensor_unref(t);
    qf_limit_epochs_free(l);
    qf_tensor_unref(love);
}

Test(input, spec_148_limit_epochs_refuses_negative_epochs)
{
    /* spec 148: num_epochs <= 0 raises "num_epochs must be > 0 not N"
     * (0 means None in C) */
    qf_tensor *t = qf_tensor_new_i32(1);
    qf_limit_epochs *l = NULL;
    cr_expect_eq(qf_limit_epochs_new(t, -1, &l), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "num_epochs must be > 0 not -1");
    cr_expect_null(l);
    cr_expect_eq(qf_limit_epochs_new(NULL, 1, &l), QF_INVALID_ARGUMENT);
    qf_tensor_unref(t);
}

typedef struct racer {
    qf_limit_epochs *l;
    atomic_int ok;
} racer;

static void *race_next(void *arg)
{
    racer *r = arg;
    for (;;) {
        qf_tensor *t = NULL;
        if (qf_limit_epochs_next(r->l, &t) != QF_OK)
            return NULL;
        atomic_fetch_add(&r->ok, 1);
        qf_tensor_unref(t);
    }
}

Test(input, spec_148_limit_epochs_counts_exactly_under_contention)
{
    /* spec 148: exactly num_epochs evaluations succeed, whoever makes them */
    qf_tensor *t = qf_tensor_new_i32(1);
    racer r = {0};
    cr_assert_eq(qf_limit_epochs_new(t, 5000, &r.l), QF_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, race_next, &r);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(atomic_load(&r.ok), 5000);
    cr_expect_eq(qf_limit_epochs_count(r.l), 5000);
    qf_limit_epochs_free(r.l);
    qf_tensor_unref(t);
}

Test(input, spec_148_limit_epochs_as_a_runner_op_closes_the_queue)
{
    /* spec 148-149: as an enqueue op, the end of epochs retires the op and
     * the runner closes the queue: 3 elements, then OUT_OF_RANGE */
    qf_runtime *rt = mkrt(1);
    qf_tensor *t = qf_tensor_new_i32(42);
    qf_limit_epochs *l = NULL;
    cr_assert_eq(qf_limit_epochs_new(t, 3, &l), QF_OK);
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options qo = {
        .capacity = 8, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "q"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&qo, &q), QF_OK);
    qf_enqueue_op op = {.kind = QF_OP_PRODUCE, .produce = qf_limit_epochs_produce, .arg = l};
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_queue_runner_new(q, &op, 1, NULL, &r), QF_OK);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runner_start(r, rt, NULL, QF_RUNNER_START, &ts, &n), QF_OK);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue_many_until(q, 3, soon(), &e), QF_OK);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(i32_at(e, 0, i), 42);
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    qf_task_join(ts[0], soon(), NULL);
    qf_tasks_free(ts, n);
    qf_queue_runner_free(r);
    qf_runtime_free(rt);
    qf_queue_unref(q);
    qf_limit_epochs_free(l);
    qf_tensor_unref(t);
}

/* ---------------------------------------------------- producer structure */

static qf_tensor *rows_3x4(void)
{
    int32_t v[12];
    for (int i = 0; i < 12; i++)
        v[i] = i + 1;
    qf_shape sh = QF_SHAPE(3, 4);
    return qf_tensor_new_from(QF_INT32, &sh, v, sizeof(v));
}

Test(input, spec_149_producer_is_a_fifo_queue_and_one_runner_in_the_collection)
{
    /* spec 149: a FIFOQueue and one enqueue op registered as a QueueRunner
     * in "queue_runners"; the runner's name is the queue's */
    qf_scope *s = mkscope();
    const char *names[] = {"a", "b"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer(s, names, 2, NULL, &q), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_get_kind(q), QF_QUEUE_FIFO);
    cr_expect_str_eq(qf_queue_name(q), "input_producer");
    qf_queue_runner *rs[4];
    cr_assert_eq(qf_scope_get_collection(s, QF_QUEUE_RUNNERS, NULL, rs, 4), 1);
    cr_expect_eq(qf_queue_runner_queue(rs[0]), q);
    cr_expect_eq(qf_queue_runner_num_ops(rs[0]), 1);
    cr_expect_str_eq(qf_queue_runner_name(rs[0]), "input_producer");
    /* name and collection options */
    qf_input_producer_options o = {.name = "files/input_producer", .collection = "mine"};
    qf_queue *q2 = NULL;
    cr_assert_eq(qf_string_input_producer(s, names, 2, &o, &q2), QF_OK);
    cr_expect_eq(qf_scope_get_collection(s, "mine", "files/", rs, 4), 1);
    cr_expect_eq(collection_size(s, QF_QUEUE_RUNNERS), 1);
    /* ret_queue is optional */
    cr_expect_eq(qf_string_input_producer(s, names, 2, NULL, NULL), QF_OK);
    cr_expect_eq(collection_size(s, QF_QUEUE_RUNNERS), 2);
    qf_queue_unref(q);
    qf_queue_unref(q2);
    qf_scope_free(s);
}

Test(input, spec_149_end_of_epochs_closes_the_queue_after_the_data)
{
    /* spec 149: consumers drain what is left, then get OUT_OF_RANGE; the
     * runner's task ends cleanly (no exception) */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF, .capacity = 2};
    qf_queue *q = NULL;
    cr_assert_eq(qf_range_input_producer(s, 7, &o, &q), QF_OK);
    started st = start(rt, NULL, s);
    for (int i = 0; i < 7; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OK);
        cr_expect_eq(i32_at(e, 0, 0), i);
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_queue_runner *r;
    cr_assert_eq(qf_scope_get_collection(s, NULL, NULL, &r, 1), 1);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    /* a restart finds the epochs used up (the counter is state, spec 148) */
    st = start(rt, NULL, s);
    join_all(&st);
    cr_expect_eq(qf_queue_runner_num_exceptions(r), 0);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(input, spec_149_unlimited_producer_stops_with_the_coordinator)
{
    /* spec 149 (num_epochs None) + 134: an endless producer parks on its
     * full queue; a stop runs the cancel op and the task ends */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    const char *names[] = {"x", "y", "z"};
    qf_input_producer_options o = {.capacity = 4, .seed = 5};
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer(s, names, 3, &o, &q), QF_OK);
    started st = start(rt, c, s);
    /* 30 elements means ten epochs went through a queue of 4 */
    for (int i = 0; i < 30; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OK);
        qf_element_free(e);
    }
    qf_deadline d = soon();
    while (qf_queue_size(q) < 4)
        cr_assert_not(qf_deadline_passed(d), "the producer never filled its queue");
    cr_expect_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect(qf_queue_is_closed(q), "the cancel op closed the queue");
    join_all(&st);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(q);
}

/* --------------------------------------------------------- input_producer */

static void expect_rows_twice(qf_queue *q)
{
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue_many_until(q, 6, soon(), &e), QF_OK, "%s", qf_last_message());
    const qf_shape *sh = qf_tensor_shape(qf_element_get(e, 0));
    cr_expect_eq(sh->rank, 2);
    cr_expect_eq(sh->dims[0], 6);
    cr_expect_eq(sh->dims[1], 4);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++)
            cr_expect_eq(i32_at(e, 0, r * 4 + c), (r % 3) * 4 + c + 1, "row %d col %d", r, c);
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
}

Test(input, spec_150_input_producer_gives_the_rows_twice_in_order)
{
    /* spec 150: rows of [[1..4],[5..8],[9..12]], 2 epochs, no shuffle:
     * dequeue_many(6) returns them twice in order, then OutOfRange */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_tensor *in = rows_3x4();
    qf_input_producer_options o = {.num_epochs = 2, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *q = NULL;
    cr_assert_eq(qf_input_producer(s, in, &o, &q), QF_OK, "%s", qf_last_message());
    qf_shape four = QF_SHAPE(4);
    cr_expect(qf_shape_equal(qf_queue_shape(q, 0), &four));
    started st = start(rt, NULL, s);
    expect_rows_twice(q);
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_tensor_unref(in);
}

Test(input, spec_150_element_shape_gives_the_same_result)
{
    /* spec 150: element_shape=[4] gives the same rows */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    qf_tensor *in = rows_3x4();
    qf_shape es = QF_SHAPE(4);
    qf_input_producer_options o = {
        .num_epochs = 2, .shuffle = QF_SHUFFLE_OFF, .element_shape = &es};
    qf_queue *q = NULL;
    cr_assert_eq(qf_input_producer(s, in, &o, &q), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    expect_rows_twice(q);
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_tensor_unref(in);
}

Test(input, spec_151_input_without_rows_or_with_a_wrong_element_shape_is_refused)
{
    /* spec 151 (C counterpart): a scalar has no rows, an element_shape that
     * does not fit is refused; nothing is added to the collection */
    qf_scope *s = mkscope();
    qf_tensor *scalar = qf_tensor_new_i32(3);
    qf_queue *q = NULL;
    cr_expect_eq(qf_input_producer(s, scalar, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Input tensor must be at least rank 1");
    qf_tensor *in = rows_3x4();
    qf_shape es = QF_SHAPE(5);
    qf_input_producer_options o = {.element_shape = &es};
    cr_expect_eq(qf_input_producer(s, in, &o, &q), QF_INVALID_ARGUMENT);
    qf_shape empty_sh = QF_SHAPE(0, 4);
    qf_tensor *empty = qf_tensor_new(QF_INT32, &empty_sh);
    cr_expect_eq(qf_input_producer(s, empty, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_input_producer(s, NULL, NULL, &q), QF_INVALID_ARGUMENT);
    qf_input_producer_options neg = {.num_epochs = -2};
    cr_expect_eq(qf_input_producer(s, in, &neg, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "num_epochs must be > 0 not -2");
    cr_expect_null(q);
    cr_expect_eq(collection_size(s, QF_QUEUE_RUNNERS), 0);
    qf_tensor_unref(scalar);
    qf_tensor_unref(in);
    qf_tensor_unref(empty);
    qf_scope_free(s);
}

/* -------------------------------------------------- string_input_producer */

static const char *const TOBE[] = {"to", "be", "or", "not", "to", "be"};

Test(input, spec_152_strings_three_epochs_in_order)
{
    /* spec 152: num_epochs 3, no shuffle: dequeue_many(18) is the list 3
     * times in order, then OutOfRange; the element is a string scalar */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 3, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer(s, TOBE, 6, &o, &q), QF_OK);
    cr_expect_eq(qf_queue_num_components(q), 1);
    cr_expect_eq(qf_queue_dtype(q, 0), QF_STRING);
    cr_expect_eq(qf_queue_shape(q, 0)->rank, 0);
    started st = start(rt, NULL, s);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue_many_until(q, 18, soon(), &e), QF_OK, "%s", qf_last_message());
    for (int i = 0; i < 18; i++)
        cr_expect_str_eq(str_at(e, 0, i), TOBE[i % 6]);
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(input, spec_152_defaults_capacity_32_shuffle_on_no_end)
{
    /* spec 152: capacity 32; shuffle on by default; num_epochs None: the
     * producer does not end (it fills the queue and waits) */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    const char *const abc[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    qf_input_producer_options o = {.seed = 99}; /* shuffle left at its default */
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer(s, abc, 8, &o, &q), QF_OK);
    cr_expect_eq(qf_queue_capacity(q), 32);
    started st = start(rt, c, s);
    qf_deadline d = soon();
    while (qf_queue_size(q) < 32)
        cr_assert_not(qf_deadline_passed(d), "queue never filled");
    bool shuffled = false;
    for (int ep = 0; ep < 4; ep++) { /* 4 epochs of 8 are in the queue */
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_many_until(q, 8, soon(), &e), QF_OK);
        int seen = 0;
        for (int i = 0; i < 8; i++) {
            const char *v = str_at(e, 0, i);
            seen |= 1 << (v[0] - 'a');
            shuffled = shuffled || v[0] != abc[i][0];
        }
        cr_expect_eq(seen, 0xff, "each epoch holds every string once");
        qf_element_free(e);
    }
    cr_expect(shuffled, "4 epochs of 8, none shuffled: shuffle is not on by default");
    cr_expect_not(qf_queue_is_closed(q), "no end without num_epochs");
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK);
    join_all(&st);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(q);
}

static int perm_index3(const char *a, const char *b, const char *c)
{
    /* the 6 orders of "abc", numbered */
    char k[4] = {a[0], b[0], c[0], 0};
    static const char *orders[] = {"abc", "acb", "bac", "bca", "cab", "cba"};
    for (int i = 0; i < 6; i++)
        if (strcmp(k, orders[i]) == 0)
            return i;
    return -1;
}

static void shuffle_abc(int64_t seed, int *ret_order /* 600 */)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    const char *const abc[] = {"a", "b", "c"};
    qf_input_producer_options o = {.num_epochs = 600, .shuffle = QF_SHUFFLE_ON, .seed = seed};
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer(s, abc, 3, &o, &q), QF_OK);
    started st = start(rt, NULL, s);
    for (int i = 0; i < 600; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_many_until(q, 3, soon(), &e), QF_OK, "epoch %d", i);
        ret_order[i] = perm_index3(str_at(e, 0, 0), str_at(e, 0, 1), str_at(e, 0, 2));
        cr_assert_geq(ret_order[i], 0, "epoch %d is not a permutation of abc", i);
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE, "the 601st dequeue");
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

Test(input, spec_153_shuffle_within_epochs_each_order_about_equally)
{
    /* spec 153: 600 epochs of abc with seed 271828: every dequeue_many(3)
     * is a permutation; each of the 6 orders occurs 100 +- 40% times */
    static int order[600];
    shuffle_abc(271828, order);
    int count[6] = {0};
    for (int i = 0; i < 600; i++)
        count[order[i]]++;
    for (int k = 0; k < 6; k++)
        cr_expect(count[k] >= 60 && count[k] <= 140, "order %d occurred %d times", k, count[k]);
}

Test(input, spec_153_a_fixed_seed_reproduces_the_permutations)
{
    /* spec 153: the seed makes the shuffle reproducible */
    static int a[600], b[600];
    shuffle_abc(271828, a);
    shuffle_abc(271828, b);
    cr_expect_arr_eq(a, b, sizeof(a));
}

Test(input, spec_154_empty_list_is_refused_at_construction)
{
    /* spec 154: an empty list raises when the graph is built */
    qf_scope *s = mkscope();
    qf_queue *q = NULL;
    cr_expect_eq(qf_string_input_producer(s, TOBE, 0, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "string_input_producer requires a non-null input tensor");
    cr_expect_null(q);
    cr_expect_eq(collection_size(s, QF_QUEUE_RUNNERS), 0);
    qf_scope_free(s);
}

static qf_tensor *empty_strings(void)
{
    qf_shape sh = QF_SHAPE(0);
    return qf_tensor_new(QF_STRING, &sh);
}

Test(input, spec_155_empty_tensor_fails_in_the_runner_and_the_consumer_sees_the_end)
{
    /* spec 155: the runner reports the error, stop is requested, the cancel
     * op closes the queue, the consumer's dequeue raises OutOfRange */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    qf_tensor *t = empty_strings();
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer_tensor(s, t, NULL, &q), QF_OK, "built lazily");
    started st = start(rt, c, s);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    cr_expect(qf_coord_should_stop(c));
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "string_input_producer requires a non-null input tensor");
    join_all(&st);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_tensor_unref(t);
}

Test(input, spec_155_without_coordinator_the_error_is_kept_by_the_runner)
{
    /* spec 155 + 132: no coordinator: the runner keeps the error */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    qf_tensor *t = empty_strings();
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer_tensor(s, t, NULL, &q), QF_OK);
    started st = start(rt, NULL, s);
    join_all(&st);
    qf_queue_runner *r;
    cr_assert_eq(qf_scope_get_collection(s, NULL, NULL, &r, 1), 1);
    cr_assert_eq(qf_queue_runner_num_exceptions(r), 1);
    qf_status *ex = qf_queue_runner_exception(r, 0);
    cr_expect_eq(qf_status_code(ex), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_status_message(ex),
                     "string_input_producer requires a non-null input tensor");
    qf_status_free(ex);
    /* a non-string or 2-D tensor is refused at once */
    qf_tensor *i = qf_tensor_new_i32(1);
    cr_expect_eq(qf_string_input_producer_tensor(s, i, NULL, &q), QF_INVALID_ARGUMENT);
    qf_tensor_unref(i);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_tensor_unref(t);
}

Test(input, spec_156_shared_name_reaches_the_queue)
{
    /* spec 156: shared_name ends up in the queue's shared_name attribute,
     * and a second producer with it feeds the same queue */
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.shared_name = "SHARED_NAME_XYZ", .name = "Q"};
    qf_queue *q = NULL, *q2 = NULL;
    cr_assert_eq(qf_string_input_producer(s, TOBE, 6, &o, &q), QF_OK);
    cr_expect_str_eq(qf_queue_shared_name(q), "SHARED_NAME_XYZ");
    cr_assert_eq(qf_string_input_producer(s, TOBE, 6, &o, &q2), QF_OK);
    cr_expect_eq(q, q2);
    cr_expect_eq(collection_size(s, QF_QUEUE_RUNNERS), 2);
    qf_queue *found = qf_queue_registry_lookup(qf_scope_registry(s), "SHARED_NAME_XYZ");
    cr_expect_eq(found, q);
    qf_queue_unref(found);
    qf_queue_unref(q);
    qf_queue_unref(q2);
    qf_scope_free(s);
}

Test(input, spec_157_fraction_of_capacity_full_gauge)
{
    /* spec 157: "fraction_of_C_full" in the producer's name scope, value
     * size * (1/C); input_producer names its own summary */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 2, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *q = NULL;
    cr_assert_eq(qf_string_input_producer(s, TOBE, 4, &o, &q), QF_OK);
    qf_fill_gauge g;
    cr_assert_eq(qf_input_producer_gauge(q, NULL, &g), QF_OK);
    cr_expect_str_eq(g.name, "input_producer/fraction_of_32_full");
    cr_expect_float_eq(qf_fill_gauge_value(&g), 0.0, 1e-12);
    started st = start(rt, NULL, s);
    join_all(&st); /* 8 elements are in, the queue is closed */
    cr_expect_float_eq(qf_fill_gauge_value(&g), 8.0 / 32.0, 1e-12);
    cr_expect_float_eq(qf_input_producer_fraction_full(q), 0.25, 1e-12);
    /* another capacity, and input_producer's summary_name */
    qf_input_producer_options o10 = {.capacity = 10, .name = "p10"};
    qf_queue *q10 = NULL;
    cr_assert_eq(qf_range_input_producer(s, 3, &o10, &q10), QF_OK);
    cr_assert_eq(qf_input_producer_gauge(q10, NULL, &g), QF_OK);
    cr_expect_str_eq(g.name, "p10/fraction_of_10_full");
    cr_assert_eq(qf_input_producer_gauge(q10, "queue/size", &g), QF_OK);
    cr_expect_str_eq(g.name, "p10/queue/size");
    cr_expect_eq(qf_input_producer_gauge(NULL, NULL, &g), QF_INVALID_ARGUMENT);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_queue_unref(q10);
}

/* ------------------------------------------------- range and slice */

Test(input, spec_158_range_three_epochs_in_order)
{
    /* spec 158: range_input_producer(5, 3 epochs, no shuffle): [0..4] x 3 as
     * int32, then OutOfRange */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 3, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *q = NULL;
    cr_assert_eq(qf_range_input_producer(s, 5, &o, &q), QF_OK);
    cr_expect_eq(qf_queue_dtype(q, 0), QF_INT32);
    started st = start(rt, NULL, s);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue_many_until(q, 15, soon(), &e), QF_OK);
    for (int i = 0; i < 15; i++)
        cr_expect_eq(i32_at(e, 0, i), i % 5);
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    cr_expect_eq(qf_range_input_producer(s, 0, NULL, &q), QF_INVALID_ARGUMENT);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

/* The orders of `epochs` shuffled epochs of range_input_producer(limit)
 * with `seed`, into out (epochs * limit values). */
static void range_orders(int32_t limit, int64_t seed, int epochs, int32_t *out)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = epochs, .shuffle = QF_SHUFFLE_ON, .seed = seed};
    qf_queue *q = NULL;
    cr_assert_eq(qf_range_input_producer(s, limit, &o, &q), QF_OK);
    started st = start(rt, NULL, s);
    for (int ep = 0; ep < epochs; ep++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_many_until(q, limit, soon(), &e), QF_OK);
        for (int32_t i = 0; i < limit; i++)
            out[ep * limit + i] = i32_at(e, 0, i);
        qf_element_free(e);
    }
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

/* The shuffles are TensorFlow's, draw for draw (qf_input.c): these orders
 * come from a reference written apart from qflow's code after TensorFlow's
 * kernel (Philox4x32-10 keyed 87654321 and counting from the op seed mod
 * 2^31 - 1, n - 1 words reserved per epoch, row i swapped with row
 * i + word mod (n - i)), so a change to any of those steps shows here. */
Test(input, shuffled_orders_are_tensorflows)
{
    int32_t got[5 * 4];
    static const int32_t seed_161803[5 * 4] = {3, 1, 2, 0, 2, 0, 3, 1, 1, 2,
                                               0, 3, 3, 0, 2, 1, 2, 0, 1, 3};
    range_orders(4, 161803, 5, got);
    for (int i = 0; i < 20; i++)
        cr_expect_eq(got[i], seed_161803[i], "seed 161803, epoch %d, row %d: %d", i / 4 + 1, i % 4,
                     got[i]);
    int32_t got10[10];
    static const int32_t seed_minus_5[10] = {2, 6, 0, 7, 9, 5, 3, 4, 8, 1};
    range_orders(10, -5, 1, got10); /* Python's -5 % (2^31 - 1): 2147483642 */
    for (int i = 0; i < 10; i++)
        cr_expect_eq(got10[i], seed_minus_5[i], "seed -5, row %d: %d", i, got10[i]);
}

Test(input, spec_158_range_shuffle_orders_about_equally)
{
    /* spec 158: limit 2, 200 epochs, seed 314159: [0,1] and [1,0] each
     * 100 +- 40% times */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options o = {.num_epochs = 200, .shuffle = QF_SHUFFLE_ON, .seed = 314159};
    qf_queue *q = NULL;
    cr_assert_eq(qf_range_input_producer(s, 2, &o, &q), QF_OK);
    started st = start(rt, NULL, s);
    int forward = 0, backward = 0;
    for (int i = 0; i < 200; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_many_until(q, 2, soon(), &e), QF_OK);
        int a = i32_at(e, 0, 0), b = i32_at(e, 0, 1);
        cr_assert((a == 0 && b == 1) || (a == 1 && b == 0), "epoch %d: %d %d", i, a, b);
        if (a == 0)
            forward++;
        else
            backward++;
        qf_element_free(e);
    }
    cr_expect(forward >= 60 && forward <= 140, "[0,1] %d times", forward);
    cr_expect(backward >= 60 && backward <= 140, "[1,0] %d times", backward);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
}

static void slice_inputs(const char *const *strs, const int32_t *ints, qf_tensor **ret)
{
    qf_shape sh = QF_SHAPE(4);
    ret[0] = qf_tensor_new(QF_STRING, &sh);
    for (int i = 0; i < 4; i++)
        qf_tensor_set_string(ret[0], i, strs[i], strlen(strs[i]));
    ret[1] = qf_tensor_new_from(QF_INT32, &sh, ints, 4 * sizeof(int32_t));
}

Test(input, spec_159_slices_stay_aligned_in_order)
{
    /* spec 159: [strings, ints], 3 epochs, no shuffle: 12 aligned
     * (string, int) slices in order, then OutOfRange */
    static const char *const strs[] = {"Alpha", "Beta", "Delta", "Gamma"};
    static const int32_t ints[] = {2, 3, 5, 7};
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_tensor *in[2];
    slice_inputs(strs, ints, in);
    qf_input_producer_options o = {.num_epochs = 3, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *q = NULL;
    cr_assert_eq(qf_slice_input_producer(s, (const qf_tensor *const *)in, 2, &o, &q), QF_OK, "%s",
                 qf_last_message());
    cr_expect_eq(qf_queue_num_components(q), 2);
    started st = start(rt, NULL, s);
    for (int i = 0; i < 12; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OK);
        cr_expect_str_eq(str_at(e, 0, 0), strs[i % 4]);
        cr_expect_eq(i32_at(e, 1, 0), ints[i % 4]);
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_tensor_unref(in[0]);
    qf_tensor_unref(in[1]);
}

static int perm_index4(const char *k)
{
    /* rank of the permutation of "ABDG" spelled by k (Lehmer code) */
    static const char base[] = "ABDG";
    int idx = 0;
    bool used[4] = {false};
    for (int i = 0; i < 4; i++) {
        const char *p = strchr(base, k[i]);
        if (!p)
            return -1;
        int pos = (int)(p - base), smaller = 0;
        if (used[pos])
            return -1;
        for (int j = 0; j < pos; j++)
            smaller += !used[j];
        used[pos] = true;
        static const int fact[] = {6, 2, 1, 1};
        idx += smaller * fact[i];
    }
    return idx;
}

/* Run 1200 shuffled epochs of A7 B3 D5 G2 with `seed`; count the orders. */
static void joint_shuffle(int64_t seed, int *count /* 24 */)
{
    static const char *const strs[] = {"A", "B", "D", "G"};
    static const int32_t ints[] = {7, 3, 5, 2};
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_tensor *in[2];
    slice_inputs(strs, ints, in);
    qf_input_producer_options o = {.num_epochs = 1200, .shuffle = QF_SHUFFLE_ON, .seed = seed};
    qf_queue *q = NULL;
    cr_assert_eq(qf_slice_input_producer(s, (const qf_tensor *const *)in, 2, &o, &q), QF_OK);
    started st = start(rt, NULL, s);
    for (int ep = 0; ep < 1200; ep++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue_many_until(q, 4, soon(), &e), QF_OK);
        char key[5] = {0};
        for (int i = 0; i < 4; i++) {
            key[i] = str_at(e, 0, i)[0];
            const char *at = strchr("ABDG", key[i]);
            cr_assert_not_null(at, "epoch %d: unknown string", ep);
            cr_assert_eq(i32_at(e, 1, i), ints[at - "ABDG"], "pair split in epoch %d", ep);
        }
        int k = perm_index4(key);
        cr_assert_geq(k, 0, "epoch %d is not a permutation: %s", ep, key);
        count[k]++;
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(q);
    qf_tensor_unref(in[0]);
    qf_tensor_unref(in[1]);
}

Test(input, spec_160_joint_shuffle_never_splits_pairs)
{
    /* spec 160, as TensorFlow's test has it: seed 161803, 1200 epochs of
     * A7 B3 D5 G2; every epoch is a joint permutation (pairs never split)
     * and each of the 24 orders occurs within 50 +- 40%. The shuffles are
     * TensorFlow's own draws (qf_input.c, shuffle_epoch()), so this seed
     * gives TensorFlow's counts; with an unrelated generator one order of
     * this seed came 27 times, a uniform shuffle's counts leaving that
     * band about one time in ten. */
    int count[24] = {0};
    joint_shuffle(161803, count);
    for (int k = 0; k < 24; k++)
        cr_expect(count[k] > 30 && count[k] < 70, "order %d occurred %d times", k, count[k]);
}

/* And as statistics, for seeds beside spec 160's: a chi-square test of
 * uniformity per seed (23 degrees of freedom, p = 0.001: 49.73). */
Test(input, joint_shuffles_are_uniform_for_other_seeds)
{
    for (int64_t seed = 161804; seed < 161808; seed++) {
        int count[24] = {0};
        joint_shuffle(seed, count);
        double chi2 = 0;
        for (int k = 0; k < 24; k++)
            chi2 += (count[k] - 50.0) * (count[k] - 50.0) / 50.0;
        cr_expect_lt(chi2, 49.73, "seed %lld: chi-square %.1f", (long long)seed, chi2);
    }
}

Test(input, spec_160_empty_or_misaligned_tensor_lists_are_refused)
{
    /* spec 160: an empty tensor_list raises; so do differing first dims */
    qf_scope *s = mkscope();
    qf_queue *q = NULL;
    cr_expect_eq(qf_slice_input_producer(s, NULL, 0, NULL, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Expected at least one tensor in slice_input_producer().");
    qf_shape s3 = QF_SHAPE(3), s4 = QF_SHAPE(4);
    qf_tensor *in[2] = {qf_tensor_new(QF_INT32, &s3), qf_tensor_new(QF_INT32, &s4)};
    cr_expect_eq(qf_slice_input_producer(s, (const qf_tensor *const *)in, 2, NULL, &q),
                 QF_INVALID_ARGUMENT);
    cr_expect_null(q);
    cr_expect_eq(collection_size(s, QF_QUEUE_RUNNERS), 0);
    qf_tensor_unref(in[0]);
    qf_tensor_unref(in[1]);
    qf_scope_free(s);
}

/* ------------------------------------------- the runner's cleanup hook */

static void count_cleanup(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static qf_code never(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return QF_OUT_OF_RANGE;
}

Test(input, runner_cleanup_runs_once_with_the_runner_and_never_on_failed_creation)
{
    /* qf_queue_runner_options.cleanup: how producers hand their state to
     * the runner (and so to the scope) */
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options qo = {.capacity = 1, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&qo, &q), QF_OK);
    atomic_int n = 0;
    qf_queue_runner_options ro = {.cleanup = count_cleanup, .cleanup_arg = &n};
    qf_enqueue_op op = {.kind = QF_OP_POLL, .poll = never};
    qf_queue_runner *r = NULL;
    qf_enqueue_op bad = {.kind = QF_OP_POLL};
    cr_expect_eq(qf_queue_runner_new(q, &bad, 1, &ro, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(atomic_load(&n), 0, "a failed creation leaves the state to the caller");
    cr_assert_eq(qf_queue_runner_new(q, &op, 1, &ro, &r), QF_OK);
    qf_scope *s = mkscope();
    cr_assert_eq(qf_scope_add_queue_runner(s, r, NULL), QF_OK);
    cr_expect_eq(atomic_load(&n), 0);
    qf_scope_free(s);
    cr_expect_eq(atomic_load(&n), 1, "run once, by the scope freeing the runner");
    qf_queue_unref(q);
}
