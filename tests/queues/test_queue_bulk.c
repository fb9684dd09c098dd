/* test_queue_bulk.c - dequeue at least min, at most max (qf_queue.h "bulk"),
 * in plain, until, try and poll forms, on every queue kind. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "qf_test_park.h"
#include "qflow.h"

#define P(x) ((void *)(uintptr_t)(x))
#define U(p) ((uintptr_t)(p))

static qf_queue *ptrq(int64_t cap)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(cap, "bq", 0, NULL, &q), QF_OK);
    return q;
}

static void fill(qf_queue *q, uintptr_t from, uintptr_t to)
{
    for (uintptr_t i = from; i <= to; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, P(i)), QF_OK);
}

/* The case: 3 of 4 requests queued, "at least 1, at most 4". */
Test(queue_bulk, takes_what_is_there_up_to_max)
{
    qf_queue *q = ptrq(16);
    fill(q, 1, 3);
    void *ps[4];
    size_t n = 99;
    cr_assert_eq(qf_queue_dequeue_bulk_ptr_until(q, 1, 4, qf_deadline_in_s(5), ps, &n), QF_OK);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < 3; i++)
        cr_expect_eq(U(ps[i]), i + 1);
    fill(q, 4, 9);
    cr_assert_eq(qf_queue_dequeue_bulk_ptr(q, 2, 4, ps, &n), QF_OK);
    cr_expect_eq(n, 4, "never more than max");
    cr_expect_eq(U(ps[0]), 4);
    cr_expect_eq(qf_queue_size(q), 2);
    qf_queue_unref(q);
}

Test(queue_bulk, deadline_before_min_takes_nothing)
{
    qf_queue *q = ptrq(8);
    fill(q, 1, 2);
    void *ps[4] = {P(77)};
    size_t n = 99;
    cr_expect_eq(qf_queue_dequeue_bulk_ptr_until(q, 3, 4, qf_deadline_in_s(0.02), ps, &n),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(n, 99, "untouched on failure");
    cr_expect_eq(qf_queue_size(q), 2, "nothing taken, nothing given back");
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 3, 4, ps, &n), QF_UNAVAILABLE);
    cr_expect_eq(qf_queue_size(q), 2);
    cr_assert_eq(qf_queue_try_dequeue_bulk_ptr(q, 2, 4, ps, &n), QF_OK);
    cr_expect_eq(n, 2);
    qf_queue_unref(q);
}

typedef struct {
    qf_queue *q;
    size_t min, max, n;
    void *ps[16];
    qf_code rc;
    int tid;
    atomic_bool done;
} bulk_job;

static void *bulk_main(void *a)
{
    bulk_job *j = a;
    __atomic_store_n(&j->tid, qft_tid(), __ATOMIC_RELEASE);
    j->rc = qf_queue_dequeue_bulk_ptr(j->q, j->min, j->max, j->ps, &j->n);
    atomic_store(&j->done, true);
    return NULL;
}

/* It waits for min, then takes what is there (not waiting for max). */
Test(queue_bulk, waits_for_min_then_returns_at_once)
{
    qf_queue *q = ptrq(16);
    bulk_job j = {.q = q, .min = 3, .max = 8, .tid = 0};
    atomic_init(&j.done, false);
    pthread_t t;
    pthread_create(&t, NULL, bulk_main, &j);
    for (uintptr_t i = 1; i <= 2; i++) {
        while (__atomic_load_n(&j.tid, __ATOMIC_ACQUIRE) == 0)
            sched_yield();
        qft_wait_parked(j.tid, NULL, 0, &j.done, 5000000000LL);
        cr_assert_eq(qf_queue_enqueue_ptr(q, P(i)), QF_OK);
    }
    qft_wait_parked(j.tid, NULL, 0, &j.done, 5000000000LL);
    cr_expect_not(atomic_load(&j.done), "two are not enough");
    cr_expect_eq(qf_queue_size(q), 2, "it takes nothing while it waits");
    cr_assert_eq(qf_queue_enqueue_ptr(q, P(3)), QF_OK);
    pthread_join(t, NULL);
    cr_assert_eq(j.rc, QF_OK);
    cr_assert_eq(j.n, 3);
    for (size_t i = 0; i < 3; i++)
        cr_expect_eq(U(j.ps[i]), i + 1);
    qf_queue_unref(q);
}

/* Closed: what is left (fewer than min), then end-of-data. */
Test(queue_bulk, closed_returns_the_rest_then_out_of_range)
{
    qf_queue *q = ptrq(8);
    fill(q, 1, 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    void *ps[8];
    size_t n = 0;
    cr_assert_eq(qf_queue_dequeue_bulk_ptr(q, 4, 8, ps, &n), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(qf_queue_dequeue_bulk_ptr(q, 1, 8, ps, &n), QF_OUT_OF_RANGE);
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 1, 8, ps, &n), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* A blocked bulk dequeue is woken by the close and gets the rest. */
Test(queue_bulk, close_wakes_a_waiting_bulk_with_the_rest)
{
    qf_queue *q = ptrq(8);
    fill(q, 1, 1);
    bulk_job j = {.q = q, .min = 4, .max = 8, .tid = 0};
    atomic_init(&j.done, false);
    pthread_t t;
    pthread_create(&t, NULL, bulk_main, &j);
    while (__atomic_load_n(&j.tid, __ATOMIC_ACQUIRE) == 0)
        sched_yield();
    qft_wait_parked(j.tid, NULL, 0, &j.done, 5000000000LL);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    pthread_join(t, NULL);
    cr_assert_eq(j.rc, QF_OK);
    cr_expect_eq(j.n, 1);
    qf_queue_unref(q);
}

Test(queue_bulk, bad_arguments_change_nothing)
{
    qf_queue *q = ptrq(4);
    fill(q, 1, 2);
    void *ps[8];
    size_t n = 0;
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 0, 4, ps, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 3, 2, ps, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 5, 8, ps, &n), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "exceeds the capacity") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 1, 2, NULL, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(q, 1, 2, ps, NULL), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_try_dequeue_bulk_ptr(NULL, 1, 2, ps, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_poll_dequeue_bulk_ptr(q, 1, 2, NULL, ps, &n), QF_INVALID_ARGUMENT);
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_try_dequeue_bulk(q, 2, 1, &b), QF_INVALID_ARGUMENT);
    cr_expect_null(b);
    cr_expect_eq(qf_queue_size(q), 2, "nothing taken");
    qf_queue_unref(q);
}

/* The poll form: pending until min are there, then done. */
static atomic_int wakes;
static void count_wake(qf_waker *w)
{
    (void)w;
    atomic_fetch_add(&wakes, 1);
}

Test(queue_bulk, poll_form_pends_until_min)
{
    qf_queue *q = ptrq(8);
    qf_waker w;
    qf_waker_init(&w, count_wake, NULL);
    atomic_store(&wakes, 0);
    void *ps[8];
    size_t n = 0;
    fill(q, 1, 1);
    cr_assert_eq(qf_queue_poll_dequeue_bulk_ptr(q, 2, 8, &w, ps, &n), QF_PENDING);
    cr_expect_eq(qf_queue_size(q), 1);
    fill(q, 2, 2);
    cr_expect_eq(atomic_load(&wakes), 1, "woken once two are there");
    cr_assert_eq(qf_queue_poll_dequeue_bulk_ptr(q, 2, 8, &w, ps, &n), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(U(ps[0]), 1);
    cr_expect_eq(U(ps[1]), 2);
    qf_queue_unref(q);
}

/* --------------------------------------------------- every queue kind */

static qf_queue *kind_queue(int kind, int64_t cap)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = cap, .num_components = 1, .dtypes = &dt, .shapes = &sh, .seed = 5};
    qf_queue *q = NULL;
    switch (kind) {
    case 0:
        cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
        break;
    case 1:
        cr_assert_eq(qf_padding_fifo_queue_new(&o, &q), QF_OK);
        break;
    case 2:
        cr_assert_eq(qf_random_shuffle_queue_new(&o, &q), QF_OK);
        break;
    default:
        cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
        break;
    }
    return q;
}

static void enq_kind(int kind, qf_queue *q, int32_t v)
{
    qf_tensor *t[2] = {qf_tensor_new_i64(10 - v), qf_tensor_new_i32(v)};
    qf_element *e = kind == 3 ? qf_element_of(2, t) : qf_element_of(1, &t[1]);
    if (kind != 3)
        qf_tensor_unref(t[0]);
    cr_assert_eq(qf_queue_enqueue(q, e), QF_OK);
}

Test(queue_bulk, element_form_on_every_kind)
{
    for (int kind = 0; kind < 4; kind++) {
        qf_queue *q = kind_queue(kind, 8);
        for (int32_t v = 1; v <= 3; v++)
            enq_kind(kind, q, v);
        qf_element *b = NULL;
        cr_expect_eq(qf_queue_try_dequeue_bulk(q, 4, 6, &b), QF_UNAVAILABLE, "kind %d", kind);
        cr_assert_eq(qf_queue_dequeue_bulk_until(q, 2, 6, qf_deadline_in_s(5), &b), QF_OK,
                     "kind %d: %s", kind, qf_last_message());
        const qf_tensor *vals = qf_element_get(b, kind == 3 ? 1 : 0);
        cr_assert_eq(qf_tensor_shape(vals)->dims[0], 3, "kind %d: all three", kind);
        int32_t sum = 0;
        for (int i = 0; i < 3; i++)
            sum += ((const int32_t *)qf_tensor_cdata(vals))[i];
        cr_expect_eq(sum, 6, "kind %d", kind);
        if (kind == 0 || kind == 1)
            cr_expect_eq(((const int32_t *)qf_tensor_cdata(vals))[0], 1, "FIFO order");
        if (kind == 3)
            cr_expect_eq(((const int32_t *)qf_tensor_cdata(vals))[0], 3, "smallest priority");
        qf_element_free(b);
        cr_expect_eq(qf_queue_size(q), 0);
        qf_queue_unref(q);
    }
}

/* A RandomShuffleQueue leaves min_after_dequeue behind while open. */
Test(queue_bulk, shuffle_keeps_min_after_dequeue)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = 10,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .min_after_dequeue = 3,
                          .seed = 9};
    qf_queue *q = NULL;
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &q), QF_OK);
    for (int32_t v = 1; v <= 5; v++)
        enq_kind(2, q, v);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_try_dequeue_bulk(q, 1, 8, &b), QF_OK);
    cr_expect_eq(qf_tensor_shape(qf_element_get(b, 0))->dims[0], 2, "5 - min 3");
    qf_element_free(b);
    cr_expect_eq(qf_queue_try_dequeue_bulk(q, 1, 8, &b), QF_UNAVAILABLE);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_assert_eq(qf_queue_dequeue_bulk(q, 1, 8, &b), QF_OK);
    cr_expect_eq(qf_tensor_shape(qf_element_get(b, 0))->dims[0], 3, "the floor is gone");
    qf_element_free(b);
    qf_queue_unref(q);
}
