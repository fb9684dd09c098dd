/* test_queue_ptr.c - the zero-allocation pointer path and the poll (task)
 * forms of qf_queue.h, including a hand-written waker. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_queue-impl.h"
#include "qf_ring-impl.h"
#include "qf_test_park.h"
#include "qflow.h"

#define P(x) ((void *)(uintptr_t)(x))
#define U(p) ((uintptr_t)(p))

static qf_queue *mkq(int64_t cap, unsigned flags)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(cap, "pq", flags, NULL, &q), QF_OK);
    return q;
}

Test(queue_ptr, fifo_order_and_inline_mode)
{
    qf_queue *q = mkq(10, 0);
    cr_expect(qf_queue_is_inline(q));
    cr_expect_eq(qf_queue_num_components(q), 1);
    cr_expect_eq(qf_queue_dtype(q, 0), QF_PTR);
    for (uintptr_t i = 1; i <= 10; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, P(i)), QF_OK);
    cr_expect_eq(qf_queue_size(q), 10);
    for (uintptr_t i = 1; i <= 10; i++) {
        void *p;
        cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
        cr_expect_eq(U(p), i);
    }
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

Test(queue_ptr, try_forms_report_unavailable)
{
    qf_queue *q = mkq(2, 0);
    void *p = P(99);
    cr_expect_eq(qf_queue_try_dequeue_ptr(q, &p), QF_UNAVAILABLE);
    cr_expect_eq(U(p), 99, "output untouched on failure");
    cr_expect_eq(qf_queue_try_enqueue_ptr(q, P(1)), QF_OK);
    cr_expect_eq(qf_queue_try_enqueue_ptr(q, P(2)), QF_OK);
    cr_expect_eq(qf_queue_try_enqueue_ptr(q, P(3)), QF_UNAVAILABLE);
    cr_expect_eq(qf_queue_size(q), 2);
    qf_queue_unref(q);
}

/* spec 38: a deadline leaves the queue usable. */
Test(queue_ptr, deadline_exceeded_then_usable)
{
    qf_queue *q = mkq(1, 0);
    void *p;
    cr_expect_eq(qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(0.01), &p), QF_DEADLINE_EXCEEDED);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq': Timed out waiting for notification");
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(1)), QF_OK);
    cr_expect_eq(qf_queue_enqueue_ptr_until(q, P(2), qf_deadline_in_s(0.01)), QF_DEADLINE_EXCEEDED);
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(U(p), 1);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(37)), QF_OK);
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(U(p), 37);
    qf_queue_unref(q);
}

Test(queue_ptr, many_and_up_to)
{
    qf_queue *q = mkq(8, 0);
    void *in[5] = {P(1), P(2), P(3), P(4), P(5)}, *out[8];
    size_t n = 0;
    cr_assert_eq(qf_queue_enqueue_many_ptrs(q, in, 5, &n), QF_OK);
    cr_expect_eq(n, 5);
    cr_assert_eq(qf_queue_dequeue_many_ptrs(q, 3, out), QF_OK);
    cr_expect(U(out[0]) == 1 && U(out[1]) == 2 && U(out[2]) == 3);
    /* try form of dequeue_many takes nothing unless all are there */
    cr_expect_eq(qf_queue_try_dequeue_many_ptrs(q, 3, out), QF_UNAVAILABLE);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' has fewer than 3 elements");
    cr_expect_eq(qf_queue_size(q), 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_assert_eq(qf_queue_dequeue_up_to_ptrs(q, 8, out, &n), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect(U(out[0]) == 4 && U(out[1]) == 5);
    cr_expect_eq(qf_queue_dequeue_up_to_ptrs(q, 8, out, &n), QF_OUT_OF_RANGE);
    cr_expect(strstr(qf_last_message(), "is closed and has insufficient elements") != NULL);
    qf_queue_unref(q);
}

/* spec 22-23 for pointer arrays: a batch of none goes in (and one of none
 * comes out) at once, also on a full or closed queue, as an element batch of
 * zero rows does. A closed pointer queue refused an empty batch with
 * QF_CANCELLED (found by tests/fuzz/fuzz_queue.c). */
static void expect_empty_batches_succeed(qf_queue *q)
{
    void *none[1] = {P(99)};
    size_t n = 99;
    cr_expect_eq(qf_queue_enqueue_many_ptrs(q, none, 0, &n), QF_OK);
    cr_expect_eq(n, 0);
    n = 99;
    cr_expect_eq(qf_queue_enqueue_many_ptrs_until(q, NULL, 0, QF_NO_WAIT, &n), QF_OK);
    cr_expect_eq(n, 0);
    cr_expect_eq(qf_queue_try_enqueue_many_ptrs(q, none, 0), QF_OK);
    cr_expect_eq(qf_queue_try_dequeue_many_ptrs(q, 0, none), QF_OK);
    cr_expect_eq(U(none[0]), 99, "nothing written");
}

Test(queue_ptr, empty_pointer_batches_succeed_on_full_and_closed_queues)
{
    qf_queue *q = mkq(1, 0);
    expect_empty_batches_succeed(q);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(1)), QF_OK);
    expect_empty_batches_succeed(q); /* full */
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    expect_empty_batches_succeed(q); /* closed */
    cr_expect_eq(qf_queue_enqueue_many_ptrs(q, (void *[]){P(2)}, 1, NULL), QF_CANCELLED,
                 "a batch of one is still refused");
    cr_expect_eq(qf_queue_size(q), 1);
    qf_queue_unref(q);

    qf_dtype dt = QF_PTR;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = 2, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &q), QF_OK);
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    expect_empty_batches_succeed(q); /* a locked-engine kind, closed */
    qf_queue_unref(q);
}

/* spec 31: after a close of either kind, a new batch of pointers is
 * refused as by a closed queue ("is closed."), whether the queue is empty
 * or full; "Enqueue operation was cancelled" is only for enqueues that
 * were waiting when a cancelling close came (spec 32-34). */
Test(queue_ptr, batches_after_a_cancelling_close_are_refused_as_closed)
{
    for (int full = 0; full < 2; full++) {
        qf_queue *q = mkq(2, 0);
        if (full)
            cr_assert_eq(qf_queue_enqueue_many_ptrs(q, (void *[]){P(1), P(2)}, 2, NULL), QF_OK);
        cr_assert_eq(qf_queue_close(q, true), QF_OK);
        void *in[3] = {P(3), P(4), P(5)};
        size_t n = 99;
        cr_expect_eq(qf_queue_enqueue_many_ptrs(q, in, 3, &n), QF_CANCELLED);
        cr_expect(strstr(qf_last_message(), "'pq' is closed."), "%s", qf_last_message());
        cr_expect_eq(n, 0);
        n = 99;
        cr_expect_eq(qf_queue_enqueue_many_ptrs_until(q, in, 3, qf_deadline_in_s(10), &n),
                     QF_CANCELLED);
        cr_expect(strstr(qf_last_message(), "'pq' is closed."), "%s", qf_last_message());
        cr_expect_eq(n, 0);
        cr_expect_eq(qf_queue_enqueue_ptr(q, P(6)), QF_CANCELLED);
        cr_expect(strstr(qf_last_message(), "'pq' is closed."), "%s", qf_last_message());
        cr_expect_eq(qf_queue_size(q), full ? 2 : 0);
        qf_queue_unref(q);
    }
}

/* The three forms of the array calls, as for every blocking call: try
 * never waits (QF_UNAVAILABLE, all or nothing), _until waits until the
 * deadline (QF_DEADLINE_EXCEEDED, and QF_NO_WAIT is a deadline already
 * passed, not the try form), the plain form waits until it can finish. */
Test(queue_ptr, array_calls_have_try_until_and_plain_forms)
{
    qf_queue *q = mkq(3, 0);
    void *in[4] = {P(1), P(2), P(3), P(4)}, *out[4] = {P(99), P(99), P(99), P(99)};
    size_t n = 99, got = 99;

    cr_expect_eq(qf_queue_try_dequeue_many_ptrs(q, 1, out), QF_UNAVAILABLE);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' is empty");
    cr_expect_eq(qf_queue_try_dequeue_up_to_ptrs(q, 2, out, &got), QF_UNAVAILABLE);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' is empty");
    cr_expect_eq(got, 99, "untouched on failure");
    cr_expect_eq(qf_queue_dequeue_many_ptrs_until(q, 1, QF_NO_WAIT, out), QF_DEADLINE_EXCEEDED);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq': Timed out waiting for notification");
    cr_expect_eq(qf_queue_dequeue_up_to_ptrs_until(q, 2, qf_deadline_in_s(0.01), out, &got),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(U(out[0]), 99, "untouched on failure");

    /* all four do not fit: the try form inserts nothing */
    cr_expect_eq(qf_queue_try_enqueue_many_ptrs(q, in, 4), QF_UNAVAILABLE);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' has no room for 4 elements");
    cr_expect_eq(qf_queue_size(q), 0);
    /* the _until form inserts what fits and says how many went in */
    cr_expect_eq(qf_queue_enqueue_many_ptrs_until(q, in, 4, qf_deadline_in_s(0.01), &n),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(n, 3);
    cr_expect_eq(qf_queue_size(q), 3);
    cr_expect_eq(qf_queue_try_enqueue_many_ptrs(q, in + 3, 1), QF_UNAVAILABLE);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' is full");

    cr_assert_eq(qf_queue_try_dequeue_up_to_ptrs(q, 2, out, &got), QF_OK);
    cr_expect(got == 2 && U(out[0]) == 1 && U(out[1]) == 2);
    cr_assert_eq(qf_queue_try_enqueue_many_ptrs(q, in + 3, 1), QF_OK);
    cr_assert_eq(qf_queue_dequeue_many_ptrs_until(q, 2, qf_deadline_in_s(10), out), QF_OK);
    cr_expect(U(out[0]) == 3 && U(out[1]) == 4);
    cr_assert_eq(qf_queue_try_enqueue_many_ptrs(q, in, 0), QF_OK, "nothing to insert");
    cr_assert_eq(qf_queue_try_dequeue_many_ptrs(q, 0, out), QF_OK, "nothing to take");
    qf_queue_unref(q);
}

/* Bad arguments to the array calls: INVALID_ARGUMENT naming what is wrong,
 * and nothing changes. */
Test(queue_ptr, array_calls_refuse_bad_arguments)
{
    qf_queue *q = mkq(4, 0);
    void *out[2];
    size_t n = 7;
    cr_expect_eq(qf_queue_enqueue_many_ptrs(q, NULL, 2, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_try_enqueue_many_ptrs(q, NULL, 1), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_enqueue_many_ptrs_until(q, NULL, 1, QF_FOREVER, NULL),
                 QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "NULL pointer array");
    cr_expect_eq(qf_queue_enqueue_many_ptrs(NULL, out, 1, NULL), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_dequeue_many_ptrs(q, 1, NULL), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_try_dequeue_many_ptrs(NULL, 1, out), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_dequeue_up_to_ptrs(q, 1, out, NULL), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "ret_n") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_queue_try_dequeue_up_to_ptrs(q, 1, NULL, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_dequeue_up_to_ptrs_until(NULL, 1, QF_NO_WAIT, out, &n),
                 QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_size(q), 0);

    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = 2, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "ints"};
    qf_queue *iq = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &iq), QF_OK);
    cr_expect_eq(qf_queue_try_enqueue_many_ptrs(iq, out, 1), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "FIFOQueue 'ints' is not a pointer queue (one scalar QF_PTR component)");
    qf_queue_unref(iq);
    qf_queue_unref(q);
}

/* The first spelling (one call with a deadline argument, QF_NO_WAIT for
 * the try form) is deprecated and keeps working exactly as before. */
Test(queue_ptr, deprecated_array_calls_keep_working)
{
    qf_queue *q = mkq(8, 0);
    void *in[5] = {P(1), P(2), P(3), P(4), P(5)}, *out[8];
    size_t n = 0;
    cr_assert_eq(qf_queue_enqueue_many_ptr(q, in, 5, QF_FOREVER, &n), QF_OK);
    cr_expect_eq(n, 5);
    cr_assert_eq(qf_queue_dequeue_many_ptr(q, 3, QF_FOREVER, out), QF_OK);
    cr_expect(U(out[0]) == 1 && U(out[1]) == 2 && U(out[2]) == 3);
    void *seven[7] = {P(6), P(7), P(8), P(9), P(10), P(11), P(12)};
    cr_expect_eq(qf_queue_enqueue_many_ptr(q, seven, 7, QF_NO_WAIT, &n), QF_UNAVAILABLE);
    cr_expect_eq(qf_queue_size(q), 2, "the try form inserts nothing");
    cr_expect_eq(qf_queue_dequeue_many_ptr(q, 3, QF_NO_WAIT, out), QF_UNAVAILABLE);
    cr_expect_eq(qf_queue_dequeue_many_ptr(q, 3, qf_deadline_in_s(0.01), out),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_queue_size(q), 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_assert_eq(qf_queue_dequeue_up_to_ptr(q, 8, QF_FOREVER, out, &n), QF_OK);
    cr_expect(n == 2 && U(out[0]) == 4 && U(out[1]) == 5);
    cr_expect_eq(qf_queue_dequeue_up_to_ptr(q, 8, QF_NO_WAIT, out, &n), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* Messages that name the queue are made when read: the name is kept even
 * after the queue is gone, and reading twice gives the same text. */
Test(queue_ptr, named_messages_outlive_the_queue)
{
    qf_queue *q = mkq(1, 0);
    void *p;
    cr_expect_eq(qf_queue_try_dequeue_ptr(q, &p), QF_UNAVAILABLE);
    qf_queue_unref(q);
    cr_expect_eq(qf_last_code(), QF_UNAVAILABLE);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' is empty");
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' is empty");
    qf_status *st = qf_last_status();
    cr_expect_str_eq(qf_status_message(st), "FIFOQueue 'pq' is empty");
    qf_status_free(st);
    /* a later failure replaces it */
    cr_expect_eq(qf_queue_dequeue_ptr(NULL, &p), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "NULL queue");
}

Test(queue_ptr, closed_enqueue_is_cancelled)
{
    qf_queue *q = mkq(4, 0);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect(qf_queue_is_closed(q));
    cr_expect_eq(qf_queue_enqueue_ptr(q, P(1)), QF_CANCELLED);
    cr_expect_str_eq(qf_last_message(), "FIFOQueue 'pq' is closed.");
    cr_expect_eq(qf_queue_close(q, false), QF_CANCELLED);
    cr_expect_str_eq(qf_last_message(), "Queue 'pq' is already closed.");
    cr_expect_eq(qf_queue_close(q, true), QF_OK, "a cancelling close of a closed queue succeeds");
    qf_queue_unref(q);
}

Test(queue_ptr, wrong_queue_kind_rejected)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_queue_options o = {.capacity = 4, .num_components = 2, .dtypes = dts, .name = "q2"};
    qf_queue *q;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
    cr_expect(!qf_queue_is_inline(q));
    cr_expect_eq(qf_queue_enqueue_ptr(q, P(1)), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

static atomic_int destroyed;
static void count_dtor(void *p)
{
    free(p);
    atomic_fetch_add(&destroyed, 1);
}

Test(queue_ptr, leftover_objects_destroyed_once_at_unref)
{
    atomic_store(&destroyed, 0);
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(-1, "own", 0, count_dtor, &q), QF_OK);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, malloc(8)), QF_OK);
    void *p;
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    free(p); /* the dequeued object is the caller's */
    qf_queue_unref(q);
    cr_expect_eq(atomic_load(&destroyed), 4);
}

/* spec 6: negative capacity is unbounded; the ring spills to an overflow
 * list and FIFO order survives the spill. */
Test(queue_ptr, unbounded_keeps_order_past_the_ring)
{
    qf_queue *q = mkq(-1, 0);
    cr_expect_eq(qf_queue_capacity(q), INT32_MAX);
    const uintptr_t n = 20000;
    for (uintptr_t i = 1; i <= n; i++)
        cr_assert_eq(qf_queue_try_enqueue_ptr(q, P(i)), QF_OK);
    cr_expect_eq(qf_queue_size(q), (int64_t)n);
    for (uintptr_t i = 1; i <= n; i++) {
        void *p;
        cr_assert_eq(qf_queue_try_dequeue_ptr(q, &p), QF_OK);
        cr_assert_eq(U(p), i);
    }
    qf_queue_unref(q);
}

Test(queue_ptr, single_producer_single_consumer_flags)
{
    qf_queue *q = mkq(4, QF_QUEUE_SINGLE_PRODUCER | QF_QUEUE_SINGLE_CONSUMER);
    void *in[3] = {P(7), P(8), P(9)}, *out[3];
    cr_assert_eq(qf_queue_enqueue_many_ptrs(q, in, 3, NULL), QF_OK);
    cr_assert_eq(qf_queue_dequeue_many_ptrs(q, 3, out), QF_OK);
    cr_expect(U(out[0]) == 7 && U(out[1]) == 8 && U(out[2]) == 9);
    qf_queue_unref(q);
}

/* ------------------------------------------------ a hand-written waker */

typedef struct {
    qf_waker w;
    atomic_int wakes;
} counting_waker;

static void on_wake(qf_waker *w)
{
    counting_waker *cw = (counting_waker *)w;
    atomic_fetch_add(&cw->wakes, 1);
}

static void cw_init(counting_waker *cw)
{
    atomic_store(&cw->wakes, 0);
    qf_waker_init(&cw->w, on_wake, NULL);
}

Test(queue_ptr, poll_dequeue_registers_waker_and_enqueue_wakes_it)
{
    qf_queue *q = mkq(4, 0);
    counting_waker cw;
    cw_init(&cw);
    void *p = NULL;
    cr_assert_eq(qf_queue_poll_dequeue_ptr(q, &cw.w, &p), QF_PENDING);
    cr_expect_eq(qf_waker_state(&cw.w), QF_WAKER_REGISTERED);
    cr_expect_eq(atomic_load(&cw.wakes), 0);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(5)), QF_OK);
    cr_expect_eq(atomic_load(&cw.wakes), 1, "the enqueue woke the parked poller");
    cr_expect_eq(qf_waker_state(&cw.w), QF_WAKER_DONE);
    cr_assert_eq(qf_queue_poll_dequeue_ptr(q, &cw.w, &p), QF_OK);
    cr_expect_eq(U(p), 5);
    cr_expect_eq(atomic_load(&cw.wakes), 1);
    qf_queue_unref(q);
}

Test(queue_ptr, poll_enqueue_on_full_queue_woken_by_dequeue)
{
    qf_queue *q = mkq(1, 0);
    counting_waker cw;
    cw_init(&cw);
    cr_assert_eq(qf_queue_poll_enqueue_ptr(q, P(1), &cw.w), QF_OK);
    cr_assert_eq(qf_queue_poll_enqueue_ptr(q, P(2), &cw.w), QF_PENDING);
    void *p;
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(atomic_load(&cw.wakes), 1);
    cr_assert_eq(qf_queue_poll_enqueue_ptr(q, P(2), &cw.w), QF_OK);
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(U(p), 2);
    qf_queue_unref(q);
}

Test(queue_ptr, cancel_poll_withdraws_unwoken_waker)
{
    qf_queue *q = mkq(4, 0);
    counting_waker cw;
    cw_init(&cw);
    void *p;
    cr_assert_eq(qf_queue_poll_dequeue_ptr(q, &cw.w, &p), QF_PENDING);
    cr_expect(qf_queue_cancel_poll(q, &cw.w));
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(1)), QF_OK);
    cr_expect_eq(atomic_load(&cw.wakes), 0, "a cancelled waker is not woken");
    qf_queue_unref(q);
}

/* spec 54: close wakes parked consumers, which then see end-of-data. */
Test(queue_ptr, close_wakes_parked_pollers)
{
    qf_queue *q = mkq(4, 0);
    counting_waker a, b;
    cw_init(&a);
    cw_init(&b);
    void *p;
    cr_assert_eq(qf_queue_poll_dequeue_ptr(q, &a.w, &p), QF_PENDING);
    cr_assert_eq(qf_queue_poll_dequeue_ptr(q, &b.w, &p), QF_PENDING);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect_eq(atomic_load(&a.wakes), 1);
    cr_expect_eq(atomic_load(&b.wakes), 1);
    cr_expect_eq(qf_queue_poll_dequeue_ptr(q, &a.w, &p), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* spec 32: cancel_pending_enqueues wakes parked producers, which fail. */
Test(queue_ptr, cancelling_close_fails_parked_producer)
{
    qf_queue *q = mkq(1, 0);
    counting_waker cw;
    cw_init(&cw);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(1)), QF_OK);
    cr_assert_eq(qf_queue_poll_enqueue_ptr(q, P(2), &cw.w), QF_PENDING);
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    cr_expect_eq(atomic_load(&cw.wakes), 1);
    cr_expect_eq(qf_queue_poll_enqueue_ptr(q, P(2), &cw.w), QF_CANCELLED);
    qf_queue_unref(q);
}

/* A thread blocked in dequeue is woken by a later enqueue from another
 * thread; the hand-off carries the value. */
static void *blocking_consumer(void *arg)
{
    qf_queue *q = arg;
    void *p = NULL;
    qf_code rc = qf_queue_dequeue_ptr(q, &p);
    return rc == QF_OK ? p : NULL;
}

Test(queue_ptr, blocked_thread_receives_element)
{
    qf_queue *q = mkq(2, 0);
    pthread_t t;
    pthread_create(&t, NULL, blocking_consumer, q);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(42)), QF_OK);
    void *r;
    pthread_join(t, &r);
    cr_expect_eq(U(r), 42);
    qf_queue_unref(q);
}

/* spec 54: a thread blocked on an empty queue gets OUT_OF_RANGE on close,
 * whether it had already gone to sleep or not. */
static void *blocking_consumer_rc(void *arg)
{
    qf_queue *q = arg;
    void *p;
    return (void *)(intptr_t)qf_queue_dequeue_ptr(q, &p);
}

Test(queue_ptr, close_ends_blocked_thread_with_out_of_range)
{
    qf_queue *q = mkq(2, 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, blocking_consumer_rc, q);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_expect_eq((qf_code)(intptr_t)r, QF_OUT_OF_RANGE);
    }
    qf_queue_unref(q);
}

/* Tombstones (slots whose producer found the queue closed after reserving
 * them) in front of a value at a closed queue: a take of tombstones only is
 * progress, not "empty", so dequeue_up_to finds the value instead of
 * reporting end of data (found by review: it returned OUT_OF_RANGE, and
 * the value came out of the next call). White-box: the two tombstones are
 * made the way a producer that loses a race with close makes them. */
Test(queue_ptr, tombstones_in_front_of_a_value_do_not_end_the_data)
{
    qf_queue *q = mkq(8, 0);
    unsigned t = 0;
    cr_assert_eq(qf__ring_reserve(&q->fifo.ring, 2, false, true, q->fifo.ring.cap, &t), 2);
    for (unsigned i = 0; i < 2; i++)
        qf__ring_write_tombstone(&q->fifo.ring, t + i);
    qf__ring_publish(&q->fifo.ring, t, 2, false);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(0x42)), QF_OK);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect_eq(qf_queue_size(q), 1);
    void *v = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_dequeue_up_to_ptrs(q, 1, &v, &n), QF_OK, "%s", qf_last_message());
    cr_expect_eq(n, 1);
    cr_expect_eq(U(v), 0x42);
    cr_expect_eq(qf_queue_dequeue_up_to_ptrs(q, 1, &v, &n), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* What a producer that found the queue closed after its reservation
 * leaves in the ring: one slot reserved, tagged a tombstone, published. */
static void push_tombstone(qf_queue *q)
{
    unsigned t = 0;
    cr_assert_eq(qf__ring_reserve(&q->fifo.ring, 1, false, true, q->fifo.ring.cap, &t), 1);
    qf__ring_write_tombstone(&q->fifo.ring, t);
    qf__ring_publish(&q->fifo.ring, t, 1, false);
}

/* Single puts and takes have their own paths (qf__ring_put_one_ptr(),
 * qf__ring_take_one_ptr()): a tombstone in front of each value, each taken
 * by a dequeue of one, is dropped, untagged and uncounted, and the values
 * come out in order, also across the ring's wrap. White-box as above. */
Test(queue_ptr, tombstones_between_values_taken_one_at_a_time)
{
    qf_queue *q = mkq(8, 0);
    for (unsigned round = 0; round < 20; round++) {
        for (unsigned i = 0; i < 3; i++) {
            push_tombstone(q);
            cr_assert_eq(qf_queue_enqueue_ptr(q, P(0x40 + 4 * round + i)), QF_OK);
        }
        for (unsigned i = 0; i < 3; i++) {
            void *v = NULL;
            cr_assert_eq(qf_queue_dequeue_ptr(q, &v), QF_OK, "%s", qf_last_message());
            cr_expect_eq(U(v), 0x40 + 4 * round + i, "round %u value %u", round, i);
        }
        cr_expect_eq(atomic_load(&q->fifo.ring.tomb_n), 0, "round %u", round);
        void *v = NULL;
        cr_expect_eq(qf_queue_try_dequeue_ptr(q, &v), QF_UNAVAILABLE);
    }
    qf_queue_unref(q);
}

/* The same through a packed queue, whose values travel in the ring's
 * cells (one-element put and take of a ring of cells, qf_ring-impl.h
 * qf__ring_take_one_cell()), with any number of consumers and with one: a
 * tombstone's cell is skipped, the caller's buffer is not handed out for
 * it, and every value arrives whole. */
static void packed_tombstones_one_at_a_time(unsigned flags)
{
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue *q = NULL;
    cr_assert_eq(
        qf_fifo_queue_new(
            &(qf_queue_options){
                .capacity = 8, .num_components = 2, .dtypes = dt, .shapes = sh, .flags = flags},
            &q),
        QF_OK);
    cr_assert_gt(q->fifo.ring.cell_words, 0, "the values travel in cells");
    for (int64_t round = 0; round < 20; round++) {
        for (int64_t i = 0; i < 3; i++) {
            push_tombstone(q);
            int64_t v = 100 * round + i;
            qf_tensor *ts[2] = {qf_tensor_new_i64(v), qf_tensor_new_i64(-v)};
            cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, ts)), QF_OK, "%s", qf_last_message());
        }
        for (int64_t i = 0; i < 3; i++) {
            qf_element *e = NULL;
            cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK, "%s", qf_last_message());
            int64_t a = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
            int64_t b = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 1));
            cr_expect_eq(a, 100 * round + i, "flags %u round %lld value %lld", flags,
                         (long long)round, (long long)i);
            cr_expect_eq(b, -a);
            qf_element_free(e);
        }
        cr_expect_eq(atomic_load(&q->fifo.ring.tomb_n), 0, "round %lld", (long long)round);
        qf_element *e = NULL;
        cr_expect_eq(qf_queue_try_dequeue(q, &e), QF_UNAVAILABLE);
    }
    qf_queue_unref(q);
}

Test(queue_ptr, tombstones_between_packed_values_taken_one_at_a_time)
{
    packed_tombstones_one_at_a_time(0);
    packed_tombstones_one_at_a_time(QF_QUEUE_SINGLE_CONSUMER);
}

/* Wider cells through the same one-element paths (qf__ring_put_one_cell(),
 * qf__ring_cell_store() and qf__ring_cell_load() copy a cell's words two
 * at a time): an odd count of words (int64 and float32 [16]: 9), an odd
 * count in a cell of less than a line (three int64: 3), and rings large
 * enough that a put asks for the next cell's lines (capacity of 64 and
 * more). A tombstone in front of every value, across many wraps; every
 * word of every value arrives. */
static void packed_wide_tombstones(size_t ncomp, const qf_dtype *dt, const qf_shape *sh,
                                   int64_t capacity)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(
                     &(qf_queue_options){
                         .capacity = capacity, .num_components = ncomp, .dtypes = dt, .shapes = sh},
                     &q),
                 QF_OK, "%s", qf_last_message());
    cr_assert_gt(q->fifo.ring.cell_words, 0, "the values travel in cells");
    for (int64_t round = 0; round < 3 * capacity; round++) {
        for (int64_t i = 0; i < 3; i++) {
            push_tombstone(q);
            int64_t v = 1000 * round + i;
            qf_tensor *ts[3];
            for (size_t c = 0; c < ncomp; c++) {
                ts[c] = qf_tensor_new(dt[c], &sh[c]);
                cr_assert_not_null(ts[c]);
                if (dt[c] == QF_INT64) {
                    *(int64_t *)qf_tensor_data(ts[c]) = v + (int64_t)c;
                } else {
                    float *f = qf_tensor_data(ts[c]);
                    for (int64_t k = 0; k < qf_tensor_num_elements(ts[c]); k++)
                        f[k] = (float)(v % 1000003) + (float)k / 32.0f;
                }
            }
            cr_assert_eq(qf_queue_enqueue(q, qf_element_of(ncomp, ts)), QF_OK, "%s",
                         qf_last_message());
        }
        for (int64_t i = 0; i < 3; i++) {
            int64_t v = 1000 * round + i;
            qf_element *e = NULL;
            cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK, "%s", qf_last_message());
            for (size_t c = 0; c < ncomp; c++) {
                const qf_tensor *t = qf_element_get(e, c);
                if (dt[c] == QF_INT64) {
                    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(t), v + (int64_t)c,
                                 "capacity %lld round %lld value %lld component %zu",
                                 (long long)capacity, (long long)round, (long long)i, c);
                } else {
                    const float *f = qf_tensor_cdata(t);
                    for (int64_t k = 0; k < qf_tensor_num_elements(t); k++)
                        cr_assert_eq(f[k], (float)(v % 1000003) + (float)k / 32.0f,
                                     "capacity %lld round %lld value %lld entry %lld",
                                     (long long)capacity, (long long)round, (long long)i,
                                     (long long)k);
                }
            }
            qf_element_free(e);
        }
        cr_expect_eq(atomic_load(&q->fifo.ring.tomb_n), 0);
    }
    qf_queue_unref(q);
}

Test(queue_ptr, tombstones_between_wide_packed_values_taken_one_at_a_time)
{
    qf_dtype tuple[2] = {QF_INT64, QF_FLOAT32};
    qf_shape tuple_sh[2] = {qf_shape_scalar(), QF_SHAPE(16)};
    qf_dtype three[3] = {QF_INT64, QF_INT64, QF_INT64};
    qf_shape three_sh[3] = {qf_shape_scalar(), qf_shape_scalar(), qf_shape_scalar()};
    for (int64_t cap = 8; cap <= 256; cap *= 4) {
        packed_wide_tombstones(2, tuple, tuple_sh, cap);
        packed_wide_tombstones(3, three, three_sh, cap);
    }
}

/* A queue's ring of `slots` (marks and tags in cells, note 10), fresh:
 * its storage, for free(). */
static ck_ring_buffer_t *queue_ring(qf__ring *r, unsigned slots)
{
    ck_ring_buffer_t *buf = calloc(1, qf__ring_storage_bytes(slots));
    cr_assert_not_null(buf);
    qf__ring_init(r, buf, slots, slots - 1, true);
    return buf;
}

/* No index of a new ring reads as published or as a tombstone. */
static void expect_reads_as_new(qf__ring *r, unsigned slots, unsigned i)
{
    cr_assert(!qf__ring_is_published(r, i, memory_order_relaxed),
              "slots %u: index %u reads as published in a new ring", slots, i);
    cr_assert_neq(atomic_load(qf__ring_tomb(r, i)), i + 1,
                  "slots %u: index %u reads as a tombstone in a new ring", slots, i);
}

/* The spread layout (qf_ring-impl.h note 8): in every ring size, index
 * -> position is a permutation of the slots and its own inverse, and in a
 * ring of 256 slots or more consecutive indices put their cells (16
 * bytes: mark, tag and slot, note 10) on different 64-byte lines, across
 * a lap's wrap too.
 * No index of a new ring reads as published (found when the first version
 * left each mark at its position's number: with 4 slots, index 1 lives
 * at position 2, whose 2 read as "index 1 published"). */
Test(queue_ptr, spread_positions_are_a_permutation_on_separate_lines)
{
    for (unsigned slots = 2; slots <= (1u << 16); slots <<= 1) {
        qf__ring r;
        ck_ring_buffer_t *buf = queue_ring(&r, slots);
        unsigned char *seen = calloc(slots, 1);
        cr_assert_not_null(seen);
        for (unsigned i = 0; i < slots; i++) {
            unsigned p = qf__ring_pos(&r, i);
            cr_assert_lt(p, slots, "slots %u: index %u at %u", slots, i, p);
            cr_assert_eq(seen[p], 0, "slots %u: position %u twice", slots, p);
            seen[p] = 1;
            cr_assert_eq(qf__ring_pos(&r, p), i, "slots %u: not its own inverse at %u", slots, i);
            cr_assert_eq(qf__ring_pos(&r, i + 7u * slots), p, "slots %u: laps differ", slots);
            expect_reads_as_new(&r, slots, i);
        }
        for (unsigned i = 0; slots >= 256 && i < 2 * slots; i++) {
            unsigned a = qf__ring_pos(&r, i), b = qf__ring_pos(&r, i + 1);
            cr_assert_neq(a * 16 / 64, b * 16 / 64, "slots %u: cells of %u and %u share a line",
                          slots, i, i + 1);
            cr_assert_eq((char *)qf__ring_slot(&r, a) - (char *)qf__ring_mark(&r, i), 8,
                         "slots %u: index %u's slot is not in its mark's cell", slots, i);
        }
        free(seen);
        free(buf);
    }
}

/* A batching queue's ring (qf__ring_lay_in_order(), note 8): index i at
 * position i, so consecutive indices share lines four to a line, and a
 * ring laid out again reads as new (no index published or a tombstone). */
Test(queue_ptr, a_ring_laid_in_order_keeps_indices_in_order)
{
    for (unsigned slots = 2; slots <= (1u << 12); slots <<= 1) {
        qf__ring r;
        ck_ring_buffer_t *buf = queue_ring(&r, slots);
        qf__ring_lay_in_order(&r);
        for (unsigned i = 0; i < 2 * slots; i++) {
            cr_assert_eq(qf__ring_pos(&r, i), i % slots, "slots %u: index %u out of place", slots,
                         i);
            expect_reads_as_new(&r, slots, i);
        }
        free(buf);
    }
}

/* Rings of cells (note 9): cells under a line are spread as pointer cells
 * are, so that neighbours sit on different lines; cells of a line or more
 * are laid out in order (note 8: spread, 128-byte cells aliased in the
 * L1's sets), index i at position i; a cell is aligned to its size, or
 * to 128 bytes for larger cells (the storage's alignment). */
Test(queue_ptr, cells_of_a_line_or_more_are_laid_out_in_order)
{
    static const size_t value_bytes[] = {8, 24, 56, 72, 248};
    const unsigned slots = 1024;
    for (size_t v = 0; v < sizeof(value_bytes) / sizeof(value_bytes[0]); v++) {
        size_t cell = qf__ring_cell_bytes(value_bytes[v]);
        void *cells = aligned_alloc(128, slots * cell);
        cr_assert_not_null(cells);
        memset(cells, 0, slots * cell);
        qf__ring r;
        qf__ring_init_cells(&r, cells, slots, slots, value_bytes[v]);
        for (unsigned i = 0; i < 2 * slots; i++) {
            unsigned a = qf__ring_pos(&r, i), b = qf__ring_pos(&r, i + 1);
            if (cell >= 64)
                cr_assert_eq(a, i % slots, "%zu-byte cells: index %u at position %u", cell, i, a);
            else
                cr_assert_neq(a * cell / 64, b * cell / 64,
                              "%zu-byte cells: indices %u and %u share a line", cell, i, i + 1);
            cr_assert_eq((uintptr_t)qf__ring_mark(&r, i) % (cell < 128 ? cell : 128), 0,
                         "%zu-byte cells: index %u's cell is not aligned", cell, i);
        }
        free(cells);
    }
}

typedef struct {
    qf_queue *q;
    atomic_int tid;
    atomic_bool done;
    qf_code rc;
} blocked_put;

static void *put_until(void *a)
{
    blocked_put *b = a;
    atomic_store(&b->tid, qft_tid());
    b->rc = qf_queue_enqueue_ptr_until(b->q, P(3), qf_deadline_in_s(30));
    atomic_store(&b->done, true);
    return NULL;
}

/* A gathering dequeue_many that times out puts its elements back in front
 * (the stash), which counts against the capacity; taking one from there
 * makes room and must wake a blocked producer (found by review: it did
 * not, and the producer slept until its deadline). */
Test(queue_ptr, taking_a_given_back_element_wakes_a_blocked_producer, .timeout = 60)
{
    qf_queue *q = mkq(2, 0);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(1)), QF_OK);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(2)), QF_OK);
    void *ps[3];
    cr_assert_eq(qf_queue_dequeue_many_ptrs_until(q, 3, qf_deadline_in_s(0.05), ps),
                 QF_DEADLINE_EXCEEDED);
    cr_assert_eq(qf_queue_size(q), 2, "the two were given back");
    blocked_put b = {.q = q};
    pthread_t th;
    pthread_create(&th, NULL, put_until, &b);
    while (atomic_load(&b.tid) == 0)
        sched_yield();
    int parked = qft_wait_parked(atomic_load(&b.tid), q, 4096, &b.done, INT64_C(20000000000));
    cr_assert_not(atomic_load(&b.done), "the enqueue did not block on a full queue");
    cr_assert(parked != 0, "the producer never blocked");
    void *v = NULL;
    cr_assert_eq(qf_queue_dequeue_ptr(q, &v), QF_OK);
    cr_expect_eq(U(v), 1);
    pthread_join(th, NULL);
    cr_expect_eq(b.rc, QF_OK, "the producer was not woken: %s", qf_code_name(b.rc));
    for (uintptr_t want = 2; want <= 3; want++) {
        cr_assert_eq(qf_queue_dequeue_ptr(q, &v), QF_OK);
        cr_expect_eq(U(v), want);
    }
    qf_queue_unref(q);
}

/* qf_queue.h: a take that fails leaves the caller's array untouched. A
 * batch take that reads values as it counts marks once wrote the two
 * there before it found too few (found by review). */
Test(queue_ptr, a_failed_batch_take_leaves_the_callers_array_untouched)
{
    qf_queue *q = mkq(100, 0);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(1)), QF_OK);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(2)), QF_OK);
    void *ps[4] = {P(91), P(92), P(93), P(94)};
    cr_expect_eq(qf_queue_try_dequeue_many_ptrs(q, 4, ps), QF_UNAVAILABLE);
    size_t n = 42;
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 3, 4, ps, &n), QF_UNAVAILABLE);
    cr_expect_eq(qf_queue_dequeue_many_ptrs_until(q, 3, qf_deadline_in_s(0.001), ps),
                 QF_DEADLINE_EXCEEDED);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(U(ps[i]), 91 + i, "ps[%d] was written by a failed take", i);
    cr_expect_eq(n, 42);
    cr_expect_eq(qf_queue_size(q), 2);
    cr_assert_eq(qf_queue_try_dequeue_bulk_ptr(q, 1, 4, ps, &n), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(U(ps[0]), 1);
    cr_expect_eq(U(ps[1]), 2);
    qf_queue_unref(q);
}

/* The ring under a_take_of_at_least_min_stops_at_the_first_gap: a pointer
 * ring (layout 0 spread, 1 in order) or a ring of cells (2: 8-byte values,
 * spread cells of 16 bytes; 3: 72-byte values, cells of 128 bytes in
 * order). Index i's value is 0x100 + i, in its first word for cells. */
typedef struct gap_ring {
    qf__ring r;
    void *storage;
    size_t value_bytes;  /* 0: pointers */
    uint64_t bufs[8][9]; /* a take's buffers, for cells */
    void *out[8];
} gap_ring;

static void gap_ring_init(gap_ring *g, int layout)
{
    static const size_t vb[] = {0, 0, 8, 72};
    const unsigned slots = 64;
    memset(g, 0, sizeof(*g));
    g->value_bytes = vb[layout];
    if (!g->value_bytes) {
        g->storage = queue_ring(&g->r, slots);
        if (layout == 1)
            qf__ring_lay_in_order(&g->r);
        return;
    }
    size_t cell = qf__ring_cell_bytes(g->value_bytes);
    g->storage = aligned_alloc(128, slots * cell);
    cr_assert_not_null(g->storage);
    memset(g->storage, 0, slots * cell);
    qf__ring_init_cells(&g->r, g->storage, slots, slots - 1, g->value_bytes);
}

/* Publish index t + i alone (a producer of one slot among several,
 * finishing out of turn). */
static void gap_publish(gap_ring *g, unsigned t, unsigned i)
{
    uint64_t words[9] = {0x100 + i, 7, 7, 7, 7, 7, 7, 7, 7};
    qf__ring_write(&g->r, t + i, g->value_bytes ? (void *)words : P(0x100 + i));
    qf__ring_publish(&g->r, t + i, 1, false);
}

static size_t gap_take(gap_ring *g, size_t min)
{
    for (unsigned i = 0; i < 8; i++)
        g->out[i] = g->value_bytes ? (void *)g->bufs[i] : NULL;
    size_t slots = 0;
    return qf__ring_take(&g->r, g->out, min, 8, false, &slots);
}

static uintptr_t gap_value(const gap_ring *g, unsigned k)
{
    return g->value_bytes ? (uintptr_t)((const uint64_t *)g->out[k])[0] : U(g->out[k]);
}

/* A take of at least min first looks at the last index it needs
 * (qf__ring_min_unpublished()), then scans: with slots published out of
 * turn it takes exactly the run from c_head, never past a gap, whichever
 * of the two finds the gap, in pointer rings spread and in order and in
 * rings of cells of both kinds; a min larger than the ring finds nothing. */
Test(queue_ptr, a_take_of_at_least_min_stops_at_the_first_gap)
{
    for (int layout = 0; layout < 4; layout++) {
        gap_ring g;
        gap_ring_init(&g, layout);
        unsigned t = 0;
        cr_assert_eq(qf__ring_reserve(&g.r, 8, false, true, g.r.cap, &t), 8);
        gap_publish(&g, t, 7); /* the last a take of 8 needs, alone */
        cr_expect_eq(gap_take(&g, 8), 0, "layout %d", layout);
        cr_expect_eq(gap_take(&g, 1), 0, "layout %d", layout);
        for (unsigned i = 0; i < 7; i++)
            if (i != 3)
                gap_publish(&g, t, i); /* all but 3: the scan finds the gap */
        cr_expect_eq(gap_take(&g, 8), 0, "layout %d", layout);
        cr_expect_eq(gap_take(&g, 4), 0, "layout %d", layout);
        cr_expect_eq(gap_take(&g, 1000), 0, "layout %d", layout);
        cr_assert_eq(gap_take(&g, 2), 3, "layout %d", layout);
        for (unsigned i = 0; i < 3; i++)
            cr_expect_eq(gap_value(&g, i), 0x100 + i, "layout %d", layout);
        gap_publish(&g, t, 3);
        cr_expect_eq(gap_take(&g, 6), 0, "layout %d", layout); /* 5 left */
        cr_assert_eq(gap_take(&g, 5), 5, "layout %d", layout);
        for (unsigned i = 0; i < 5; i++)
            cr_expect_eq(gap_value(&g, i), 0x103 + i, "layout %d", layout);
        cr_expect_eq(qf__ring_reserved(&g.r), 0);
        free(g.storage);
    }
}

/* Bulk puts and batch takes walk a pointer ring a stretch at a time
 * (qf__ring_stretch(): consecutive indices a step apart until the spread
 * bits wrap). In rings of 8 to 1024 slots, spread (1 to 4 bits) and in
 * order, from offsets all over a lap and across its wrap: runs of 1 to 70
 * published with one index left out (a producer finishing out of turn),
 * then taken. A take of at least 1 gets exactly the run before the gap,
 * in order; one of at least the whole run finds nothing and leaves the
 * caller's array as it was; once the gap is published, the rest comes in
 * order. */
Test(queue_ptr, bulk_puts_and_takes_walk_every_stretch_of_the_ring)
{
    static const unsigned sizes[] = {8, 16, 64, 256, 1024};
    uint64_t rng = 0x9e3779b97f4a7c15u;
    void *in[80], *out[80];
    for (int order = 0; order < 2; order++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            unsigned slots = sizes[s];
            qf__ring r;
            ck_ring_buffer_t *buf = queue_ring(&r, slots);
            if (order)
                qf__ring_lay_in_order(&r);
            uintptr_t next_in = 1, next_out = 1;
            for (unsigned round = 0; round < 3 * slots; round++) {
                rng = rng * 6364136223846793005u + 1442695040888963407u;
                unsigned k = 1 + (unsigned)(rng >> 33) % (slots - 1 < 70 ? slots - 1 : 70);
                unsigned gap = (unsigned)(rng >> 13) % k, t = 0;
                cr_assert_eq(qf__ring_reserve(&r, k, false, true, r.cap, &t), k);
                for (unsigned i = 0; i < k; i++)
                    in[i] = P(next_in + i);
                next_in += k;
                if (gap > 0)
                    qf__ring_put_run(&r, t, in, gap, false);
                if (gap + 1 < k)
                    qf__ring_put_run(&r, t + gap + 1, in + gap + 1, k - gap - 1, false);
                for (unsigned i = 0; i < k; i++)
                    out[i] = P(0xdead);
                cr_expect_eq(qf__ring_take(&r, out, k, k, false, NULL), 0,
                             "slots %u, from %u, run %u, gap at %u", slots, t, k, gap);
                for (unsigned i = 0; i < k; i++)
                    cr_assert_eq(U(out[i]), 0xdead, "a failed take wrote out[%u]", i);
                cr_assert_eq(qf__ring_take(&r, out, 1, k, false, NULL), gap,
                             "slots %u, from %u, run %u, gap at %u", slots, t, k, gap);
                for (unsigned i = 0; i < gap; i++)
                    cr_assert_eq(U(out[i]), next_out++, "slots %u, from %u", slots, t);
                qf__ring_put_run(&r, t + gap, in + gap, 1, false);
                size_t rest = k - gap, min = 1 + (unsigned)(rng >> 40) % rest;
                cr_assert_eq(qf__ring_take(&r, out, min, rest, false, NULL), rest,
                             "slots %u, from %u, run %u, gap at %u", slots, t, k, gap);
                for (unsigned i = 0; i < rest; i++)
                    cr_assert_eq(U(out[i]), next_out++, "slots %u, from %u", slots, t);
                cr_assert_eq(qf__ring_reserved(&r), 0);
            }
            free(buf);
        }
    }
}

/* Slip (queues/engine/qf_fifo.c): a consumer thread's first wait on an
 * empty ring of 256 slots or more watches for a stretch of a quarter of
 * the ring (64 to 256 elements) for a few microseconds. A try that sees no stream skips the next
 * 64, 128, ... (up to 4,096) empty waits that could have tried; one that sees the stretch resets
 * the back-off. The spin budget is set high before each wait, so the machine's load cannot turn
 * spinning (and the slip) off under the test. */
static void slip_spin_allowed(qf__fifo *f)
{
    atomic_store(&f->spin_dyn, (int32_t)f->spin_ns);
}

Test(queue_ptr, an_empty_wait_without_a_stream_backs_the_slip_off)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    qf_queue *q = mkq(1024, 0);
    qf__fifo *f = &q->fifo;
    void *p;
    for (int32_t round = 0; round < 3; round++) {
        cr_assert_eq(atomic_load(&f->slip_skip), 0);
        slip_spin_allowed(f);
        /* 50 ms: the call must reach its wait before the deadline. */
        cr_assert_eq(qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(0.05), &p),
                     QF_DEADLINE_EXCEEDED);
        cr_assert_eq(atomic_load(&f->slip_fails), round + 1);
        cr_assert_eq(atomic_load(&f->slip_skip), 64 << round);
        /* Each empty wait skips a try (one that a spurious wake sends
         * round again, another); a wait whose deadline passed before it
         * could spin skips none. */
        int32_t left = 64 << round;
        for (int waits = 0; left > 0; waits++) {
            cr_assert_lt(waits, 100 * (64 << round), "the back-off never ran out");
            slip_spin_allowed(f);
            cr_assert_eq(qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(0.002), &p),
                         QF_DEADLINE_EXCEEDED);
            int32_t now = atomic_load(&f->slip_skip);
            cr_assert(now <= left && now >= 0, "skip %d after %d", now, left);
            left = now;
        }
    }
    /* The try form never waits for a stretch. */
    slip_spin_allowed(f);
    cr_expect_eq(qf_queue_try_dequeue_ptr(q, &p), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&f->slip_skip), 0);
    cr_expect_eq(atomic_load(&f->slip_fails), 3);
    /* An element that is there is taken with no wait, so no try. */
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(5)), QF_OK);
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(U(p), 5);
    cr_expect_eq(atomic_load(&f->slip_fails), 3);
    /* Spinning off for the queue: no slip either. */
    qf_queue *quiet = NULL;
    qf_queue_options o = {.capacity = 1024, .spin_ns = -1};
    qf_dtype d = QF_PTR;
    qf_shape scalar = qf_shape_scalar();
    o.num_components = 1;
    o.dtypes = &d;
    o.shapes = &scalar;
    cr_assert_eq(qf_fifo_queue_new(&o, &quiet), QF_OK);
    cr_assert(qf_queue_is_inline(quiet));
    cr_assert_eq(qf_queue_dequeue_ptr_until(quiet, qf_deadline_in_s(0.002), &p),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&quiet->fifo.slip_fails), 0);
    cr_expect_eq(atomic_load(&quiet->fifo.slip_skip), 0);
    qf_queue_unref(quiet);
    qf_queue_unref(q);
}

/* A pointer ring's slot written as a put writes it (qf__ring_write()). */
static void slip_write(qf__ring *r, unsigned idx, void *v)
{
    __atomic_store_n(&qf__ring_slot(r, qf__ring_pos(r, idx))->value, v, __ATOMIC_RELAXED);
}

typedef struct slip_taker {
    qf_queue *q;
    void *got;
    qf_code rc;
} slip_taker;

static void *slip_take(void *a)
{
    slip_taker *t = a;
    t->rc = qf_queue_dequeue_ptr(t->q, &t->got);
    return NULL;
}

/* The stretch a ring's waits wait for: a quarter of its capacity in whole
 * steps of 64, at most 256, none under 256 (the capacity, not the ring's
 * slots, which are a power of two). */
Test(queue_ptr, the_stretch_is_a_quarter_of_the_ring_up_to_256)
{
    static const struct {
        int64_t capacity;
        unsigned stretch;
    } want[] = {{64, 0},    {255, 0},   {256, 64},   {300, 64},   {511, 64},   {512, 128},
                {767, 128}, {768, 192}, {1000, 192}, {1024, 256}, {4096, 256}, {100000, 256}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        qf_queue *q = mkq(want[i].capacity, 0);
        cr_expect_eq(qf__fifo_slip_stretch(&q->fifo), want[i].stretch,
                     "capacity %lld: stretch %u, want %u", (long long)want[i].capacity,
                     qf__fifo_slip_stretch(&q->fifo), want[i].stretch);
        qf_queue_unref(q);
    }
}

/* Index i of a reserved stretch written and published, as its producer
 * would. */
static void slip_publish(qf__ring *r, unsigned t, unsigned i)
{
    slip_write(r, t + i, P(100 + i));
    qf__ring_publish(r, t + i, 1, false);
}

/* The stretch's end there (`shown`: the indices past t published) but its
 * first element not yet (producers between their reservation and their
 * publish): the waiting consumer's try sees what it sees, which resets the
 * back-off (`seen`) or counts a failure, and then takes the first element
 * once it comes, and the rest in order. The count is observed, bounded;
 * no sleeps. */
static void slip_try_with(int64_t capacity, const unsigned *shown, size_t n_shown, bool seen)
{
    qf_queue *q = mkq(capacity, 0);
    qf__fifo *f = &q->fifo;
    qf__ring *r = &f->ring;
    unsigned n = qf__fifo_slip_stretch(f);
    cr_assert_gt(n, 0);
    atomic_store(&f->slip_fails, 3);
    slip_spin_allowed(f);
    unsigned t = 0;
    cr_assert_eq(qf__ring_reserve(r, n, false, true, r->cap, &t), n);
    bool published[256] = {false};
    for (size_t k = 0; k < n_shown; k++) {
        slip_publish(r, t, shown[k]);
        published[shown[k]] = true;
    }
    slip_taker tk = {.q = q};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, slip_take, &tk), 0);
    int32_t want = seen ? 0 : 4;
    qf_deadline give_up = qf_deadline_in_s(20);
    while (atomic_load(&f->slip_fails) != want && !qf_deadline_passed(give_up))
        sched_yield();
    cr_expect_eq(atomic_load(&f->slip_fails), want, "capacity %lld, stretch %u: %s",
                 (long long)capacity, n, seen ? "the stretch was not seen" : "no failure counted");
    if (!seen)
        cr_expect_eq(atomic_load(&f->slip_skip), 64 << 3);
    for (unsigned i = 1; i < n; i++)
        if (!published[i])
            slip_publish(r, t, i);
    slip_write(r, t, P(100));
    qf__fifo_wake_consumers(f, qf__ring_publish(r, t, 1, false));
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(tk.rc, QF_OK);
    cr_expect_eq(U(tk.got), 100);
    for (uintptr_t i = 1; i < n; i++) {
        void *p;
        cr_assert_eq(qf_queue_try_dequeue_ptr(q, &p), QF_OK);
        cr_expect_eq(U(p), 100 + i);
    }
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* The stretch's last index alone is what the wait watches for. */
Test(queue_ptr, a_stretch_seen_by_an_empty_wait_resets_the_slip, .timeout = 120)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    slip_try_with(256, (unsigned[]){63}, 1, true);
    slip_try_with(600, (unsigned[]){127}, 1, true);
    slip_try_with(1024, (unsigned[]){255}, 1, true);
}

/* The pace: in a ring whose stretch is 256, the first step of 64 there
 * by its check (4 us) is progress, counted as seen though the stretch
 * never comes; one element short of it is a failure, backed off. */
Test(queue_ptr, an_empty_wait_keeps_a_pace_of_a_step_each_4_us, .timeout = 120)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    slip_try_with(1024, (unsigned[]){63}, 1, true);
    slip_try_with(1024, (unsigned[]){62}, 1, false);
    slip_try_with(1024, (unsigned[]){1, 2, 62, 100, 254}, 5, false);
}

/* The producer's side of the slip: a blocking enqueue whose cached view of
 * the consumers' index says full waits for room for a stretch (256 in a
 * queue of 1,024; it looks at c_head at 250 ns, 500 ns, 1, 2 and 4 us,
 * and gives up there without room for a step of 64), and backs off as the
 * consumer's does when that room never comes. The try form never waits
 * for it. */
static qf_queue *full_queue(void)
{
    qf_queue *q = mkq(1024, 0);
    for (uintptr_t i = 1; i <= 1024; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, P(i)), QF_OK);
    return q;
}

Test(queue_ptr, a_full_wait_without_room_backs_the_room_slip_off)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    qf_queue *q = full_queue();
    qf__fifo *f = &q->fifo;
    cr_expect_eq(qf_queue_try_enqueue_ptr(q, P(9999)), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&f->room_fails), 0, "a try waited for room");
    cr_expect_eq(atomic_load(&f->room_skip), 0);
    slip_spin_allowed(f);
    cr_assert_eq(qf_queue_enqueue_ptr_until(q, P(9999), qf_deadline_in_s(0.05)),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&f->room_fails), 1);
    cr_expect_eq(atomic_load(&f->room_skip), 64);
    slip_spin_allowed(f);
    cr_assert_eq(qf_queue_enqueue_ptr_until(q, P(9999), qf_deadline_in_s(0.05)),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&f->room_skip), 63, "a wait that may spin skips one try");
    cr_expect_eq(qf_queue_size(q), 1024);
    qf_queue_unref(q);
}

/* Room for the stretch already there when the producer looks: its cached
 * view still says full (it was never refreshed while the queue filled), so
 * it looks at c_head, sees the stretch free, resets the back-off and puts. */
Test(queue_ptr, room_for_a_stretch_resets_the_room_slip)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    qf_queue *q = full_queue();
    qf__fifo *f = &q->fifo;
    uintptr_t n = qf__fifo_slip_stretch(f);
    cr_assert_eq(n, 256);
    void *p;
    for (uintptr_t i = 1; i <= n; i++) {
        cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
        cr_assert_eq(U(p), i);
    }
    atomic_store(&f->room_fails, 3);
    slip_spin_allowed(f);
    for (uintptr_t i = 1025; i <= 1024 + n; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, P(i)), QF_OK);
    cr_expect_eq(atomic_load(&f->room_fails), 0);
    cr_expect_eq(atomic_load(&f->room_skip), 0);
    for (uintptr_t i = n + 1; i <= 1024 + n; i++) {
        cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
        cr_assert_eq(U(p), i);
    }
    qf_queue_unref(q);
}

/* The producer's pace: with `free` slots free of a full queue of 1,024,
 * fewer than a step (64) by its 4 us look ends the wait there, counted as
 * progress when more than 8 are free (SLIP_SOME) and as a failure, backed
 * off, when fewer are; the put then takes a free slot. One thread, no
 * sleeps: the wait runs in the call. */
static void room_try_with(uintptr_t free, bool seen)
{
    qf_queue *q = full_queue();
    qf__fifo *f = &q->fifo;
    void *p;
    for (uintptr_t i = 1; i <= free; i++)
        cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    atomic_store(&f->room_fails, 3);
    slip_spin_allowed(f);
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(5000)), QF_OK);
    cr_expect_eq(atomic_load(&f->room_fails), seen ? 0 : 4, "%zu free", (size_t)free);
    cr_expect_eq(atomic_load(&f->room_skip), seen ? 0 : 64 << 3, "%zu free", (size_t)free);
    for (uintptr_t i = free + 1; i <= 1024; i++) {
        cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
        cr_assert_eq(U(p), i);
    }
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(U(p), 5000);
    qf_queue_unref(q);
}

Test(queue_ptr, a_full_wait_keeps_a_pace_of_a_step_each_4_us)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    room_try_with(10, true);
    room_try_with(63, true);
    room_try_with(5, false);
}

/* A ring of cells (a packed queue: an int64 label and a float32 [16]
 * row) slips at both ends too, and what it holds comes out whole. */
Test(queue_ptr, a_ring_of_cells_slips_at_both_ends)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: blocking calls never spin, so never slip");
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(16)};
    qf_queue_options o = {.capacity = 1024, .num_components = 2, .dtypes = dt, .shapes = sh};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
    qf__fifo *f = &q->fifo;
    cr_assert(qf__fifo_cells(f), "an (int64, float32 [16]) queue keeps its values in cells");
    int64_t label;
    float row[16];
    void *outs[2] = {&label, row};
    const void *ins[2] = {&label, row};
    slip_spin_allowed(f);
    cr_assert_eq(qf_queue_dequeue_values_until(q, qf_deadline_in_s(0.05), outs),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&f->slip_fails), 1);
    for (int64_t i = 0; i < 1024; i++) {
        label = i;
        for (int k = 0; k < 16; k++)
            row[k] = (float)(i + k);
        cr_assert_eq(qf_queue_try_enqueue_values(q, ins), QF_OK);
    }
    slip_spin_allowed(f);
    cr_assert_eq(qf_queue_enqueue_values_until(q, ins, qf_deadline_in_s(0.05)),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&f->room_fails), 1);
    for (int64_t i = 0; i < 1024; i++) {
        cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OK);
        cr_assert_eq(label, i);
        for (int k = 0; k < 16; k++)
            cr_assert_eq(row[k], (float)(i + k));
    }
    qf_queue_unref(q);
}

typedef struct slip_putter {
    qf_queue *q;
    qf_code rc;
} slip_putter;

static void *slip_put(void *a)
{
    slip_putter *t = a;
    t->rc = qf_queue_enqueue_ptr(t->q, P(4242));
    return NULL;
}

/* A close ends a thread waiting at either end of a ring that slips,
 * whatever part of its wait (the slip, the spin, the sleep) it is in. */
Test(queue_ptr, a_close_ends_waits_at_either_end_of_a_ring_that_slips, .timeout = 60)
{
    for (int round = 0; round < 20; round++) {
        qf_queue *q = mkq(1024, 0);
        slip_spin_allowed(&q->fifo);
        slip_taker tk = {.q = q};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, slip_take, &tk), 0);
        for (int i = 0; i < round; i++)
            sched_yield();
        cr_assert_eq(qf_queue_close(q, false), QF_OK);
        cr_assert_eq(pthread_join(th, NULL), 0);
        cr_expect_eq(tk.rc, QF_OUT_OF_RANGE);
        qf_queue_unref(q);

        q = full_queue();
        slip_spin_allowed(&q->fifo);
        slip_putter pt = {.q = q};
        cr_assert_eq(pthread_create(&th, NULL, slip_put, &pt), 0);
        for (int i = 0; i < round; i++)
            sched_yield();
        cr_assert_eq(qf_queue_close(q, true), QF_OK);
        cr_assert_eq(pthread_join(th, NULL), 0);
        cr_expect_eq(pt.rc, QF_CANCELLED);
        cr_expect_eq(qf_queue_size(q), 1024);
        qf_queue_unref(q);
    }
}
