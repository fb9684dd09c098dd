/* test_runtime.c - the worker pool and tasks (qf_runtime.h). */
#include <criterion/criterion.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* The sanitizers' runtimes export it; GCC ships no header declaring it. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_test_park.h"
#include "qf_test_sched.h"
#include "qf_test.h"

static qf_code ok_task(qf_task *t, void *arg)
{
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
    return QF_OK;
}

Test(runtime, spawn_runs_task_and_join_reports_ok)
{
    qf_runtime *rt = mkrt(2);
    atomic_int n = 0;
    qf_task *t;
    qf_task_options o = {.name = "one"};
    cr_assert_eq(qf_task_spawn(rt, ok_task, &n, &o, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect(qf_task_is_done(t));
    cr_expect_str_eq(qf_task_name(t), "one");
    cr_expect_eq(atomic_load(&n), 1);
    qf_task_unref(t);
    qf_runtime_free(rt);
}

static qf_code failing_task(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return qf_set_error(QF_DATA_LOSS, "bad record at %d", 7);
}

Test(runtime, task_error_reaches_join_with_message)
{
    qf_runtime *rt = mkrt(1);
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, failing_task, NULL, NULL, &t), QF_OK);
    qf_status *st = NULL;
    cr_expect_eq(qf_task_join(t, QF_FOREVER, &st), QF_DATA_LOSS);
    cr_expect_str_eq(qf_status_message(st), "bad record at 7");
    qf_status_free(st);
    qf_task_unref(t);
    qf_runtime_free(rt);
}

typedef struct {
    qf_queue *q;
    void *got;
    atomic_int polls;
} deq_arg;

static qf_code dequeue_task(qf_task *t, void *arg)
{
    deq_arg *a = arg;
    atomic_fetch_add(&a->polls, 1);
    return qf_queue_poll_dequeue_ptr(a->q, qf_task_waker(t), &a->got);
}

Test(runtime, parked_task_woken_by_thread_enqueue)
{
    qf_runtime *rt = mkrt(2);
    deq_arg a = {.got = NULL};
    cr_assert_eq(qf_ptr_queue_new(4, "q", 0, NULL, &a.q), QF_OK);
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, dequeue_task, &a, NULL, &t), QF_OK);
    cr_assert_eq(qf_queue_enqueue_ptr(a.q, (void *)0x42), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect_eq((uintptr_t)a.got, 0x42);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_queue_unref(a.q);
}

static qf_code self_waking_task(qf_task *t, void *arg)
{
    atomic_int *polls = arg;
    if (atomic_fetch_add(polls, 1) == 0) {
        qf_task_wake(t); /* a wake while running must not be lost */
        return QF_PENDING;
    }
    return QF_OK;
}

Test(runtime, wake_during_poll_is_not_lost)
{
    qf_runtime *rt = mkrt(1);
    atomic_int polls = 0;
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, self_waking_task, &polls, NULL, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect_eq(atomic_load(&polls), 2);
    qf_task_unref(t);
    qf_runtime_free(rt);
}

static qf_code yielding_task(qf_task *t, void *arg)
{
    (void)t;
    atomic_int *n = arg;
    return atomic_fetch_add(n, 1) < 9 ? QF_YIELD : QF_OK;
}

Test(runtime, yield_requeues_until_done)
{
    qf_runtime *rt = mkrt(2);
    atomic_int n = 0;
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, yielding_task, &n, NULL, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect_eq(atomic_load(&n), 10);
    qf_task_unref(t);
    qf_runtime_free(rt);
}

typedef struct {
    qf_deadline at;
    atomic_int polls;
} timer_arg;

static qf_code timer_task(qf_task *t, void *arg)
{
    timer_arg *a = arg;
    atomic_fetch_add(&a->polls, 1);
    if (qf_deadline_passed(a->at))
        return QF_OK;
    qf_task_sleep_until(t, a->at);
    return QF_PENDING;
}

Test(runtime, timer_wakes_parked_task_at_deadline)
{
    qf_runtime *rt = mkrt(2);
    timer_arg a = {.at = qf_deadline_in_ns(3000000)};
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, timer_task, &a, NULL, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect_geq(qf_now_ns(), a.at);
    cr_expect_leq(atomic_load(&a.polls), 3, "woken by the timer, not by polling");
    qf_task_unref(t);
    qf_runtime_free(rt);
}

static qf_code blocking_inside_task(qf_task *t, void *arg)
{
    (void)t;
    void *p;
    return qf_queue_dequeue_ptr(arg, &p);
}

Test(runtime, blocking_call_inside_task_is_refused)
{
    qf_runtime *rt = mkrt(1);
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(4, "q", 0, NULL, &q), QF_OK);
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, blocking_inside_task, q, NULL, &t), QF_OK);
    qf_status *st = NULL;
    cr_expect_eq(qf_task_join(t, QF_FOREVER, &st), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_status_message(st), "poll form") != NULL);
    qf_status_free(st);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

static qf_code parked_forever(qf_task *t, void *arg)
{
    void *p;
    if (qf_task_is_cancelled(t)) {
        qf_queue_cancel_poll(arg, qf_task_waker(t));
        return qf_set_error(QF_CANCELLED, "Dequeue operation was cancelled");
    }
    return qf_queue_poll_dequeue_ptr(arg, qf_task_waker(t), &p);
}

/* spec 37: closing TensorFlow's session cancels blocked queue operations;
 * here shutting the runtime down wakes parked tasks as cancelled. */
Test(runtime, shutdown_cancels_parked_tasks_and_refuses_new_ones)
{
    qf_runtime *rt = mkrt(2);
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(4, "q", 0, NULL, &q), QF_OK);
    qf_task *t[16];
    for (int i = 0; i < 16; i++)
        cr_assert_eq(qf_task_spawn(rt, parked_forever, q, NULL, &t[i]), QF_OK);
    cr_assert_eq(qf_runtime_shutdown(rt, QF_FOREVER), QF_OK);
    for (int i = 0; i < 16; i++) {
        cr_expect_eq(qf_task_join(t[i], QF_FOREVER, NULL), QF_CANCELLED);
        qf_task_unref(t[i]);
    }
    cr_expect_eq(qf_runtime_num_tasks(rt), 0);
    atomic_int n = 0;
    cr_expect_eq(qf_task_spawn(rt, ok_task, &n, NULL, NULL), QF_CANCELLED);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* A task that forwards whatever its one poll answers, as a port of a
 * TensorFlow test writes it (no look at qf_task_is_cancelled()). */
typedef struct forwarder {
    qf_queue *q;
    int kind;
    atomic_int *pended; /* counts first QF_PENDINGs: the task is parked */
    bool counted;
    qf_element *elem; /* the enqueue's element, the task's own until it goes in */
} forwarder;

static qf_code forward_one_poll(qf_task *t, void *arg)
{
    forwarder *f = arg;
    qf_waker *w = qf_task_waker(t);
    void *p = NULL, *ps[4];
    size_t n = 0;
    int64_t v = 7, v2 = 8;
    qf_element *e = NULL;
    qf_code rc = QF_INTERNAL;
    switch (f->kind) {
    case 0:
        rc = qf_queue_poll_dequeue(f->q, w, &e);
        break;
    case 1:
        rc = qf_queue_poll_dequeue_ptr(f->q, w, &p);
        break;
    case 2:
        rc = qf_queue_poll_dequeue_bulk_ptr(f->q, 2, 4, w, ps, &n);
        break;
    case 3:
        rc = qf_queue_poll_dequeue_values(f->q, w, (void *const[]){&v, &v2});
        break;
    case 4:
        rc = qf_queue_poll_dequeue_bulk(f->q, 2, 4, w, &e);
        break;
    case 5:
        rc = qf_queue_poll_enqueue_ptr(f->q, f, w);
        break;
    case 6:
        rc = qf_queue_poll_enqueue(f->q, f->elem, w);
        break;
    case 7:
        rc = qf_queue_poll_enqueue_values(f->q, (const void *const[]){&v, &v2}, w);
        break;
    }
    if (rc == QF_OK && f->kind == 6)
        f->elem = NULL;
    if (rc == QF_PENDING && !f->counted) {
        f->counted = true;
        atomic_fetch_add(f->pended, 1);
    }
    qf_element_free(e);
    return rc;
}

/* spec 37: TensorFlow's session close fails every blocked queue op with
 * Cancelled "Dequeue operation was cancelled" / "Enqueue operation was
 * cancelled" (its tests match "was cancelled"). A shutdown does that to
 * tasks parked in any poll form: their next poll answers so, and nothing
 * was taken from or put into the queues. */
Test(runtime, shutdown_fails_parked_polls_with_tensorflows_cancelled_words)
{
    qf_runtime *rt = mkrt(2);
    /* (int64, int64): the _values calls take it (one int64 would be inline) */
    qf_dtype i64[2] = {QF_INT64, QF_INT64};
    qf_shape scalar[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options eo = {.capacity = 1, .num_components = 2, .dtypes = i64, .shapes = scalar};
    qf_queue *empty_ptr, *empty_elem, *full_ptr, *full_elem;
    cr_assert_eq(qf_ptr_queue_new(4, "empty_ptr", 0, NULL, &empty_ptr), QF_OK);
    cr_assert_eq(qf_ptr_queue_new(1, "full_ptr", 0, NULL, &full_ptr), QF_OK);
    cr_assert_eq(qf_fifo_queue_new(&eo, &full_elem), QF_OK);
    eo.capacity = 4; /* a bulk dequeue of 2 must fit */
    cr_assert_eq(qf_fifo_queue_new(&eo, &empty_elem), QF_OK);
    cr_assert(qf_queue_takes_values(empty_elem));
    cr_assert_eq(qf_queue_enqueue_ptr(full_ptr, NULL), QF_OK);
    cr_assert_eq(qf_queue_enqueue(
                     full_elem,
                     qf_element_of(2, (qf_tensor *[]){qf_tensor_new_i64(1), qf_tensor_new_i64(1)})),
                 QF_OK);
    atomic_int pended = 0;
    forwarder f[8];
    qf_task *t[8];
    for (int k = 0; k < 8; k++) {
        f[k] = (forwarder){.kind = k, .pended = &pended};
        f[k].q = k == 1 || k == 2 ? empty_ptr : k == 5 ? full_ptr : k < 5 ? empty_elem : full_elem;
        if (k == 6)
            f[k].elem =
                qf_element_of(2, (qf_tensor *[]){qf_tensor_new_i64(2), qf_tensor_new_i64(2)});
        cr_assert_eq(qf_task_spawn(rt, forward_one_poll, &f[k], NULL, &t[k]), QF_OK);
    }
    /* Every task parked (it said QF_PENDING); one that ended fails the
     * test rather than hang it, and so does a minute without progress. */
    int64_t give_up = qf_now_ns() + (int64_t)60e9;
    while (atomic_load(&pended) < 8) {
        for (int k = 0; k < 8; k++)
            cr_assert(!qf_task_is_done(t[k]), "poll form %d ended before it parked", k);
        cr_assert_lt(qf_now_ns(), give_up, "only %d of 8 tasks parked", atomic_load(&pended));
        sched_yield();
    }
    cr_assert_eq(qf_runtime_shutdown(rt, QF_FOREVER), QF_OK);
    for (int k = 0; k < 8; k++) {
        qf_status *st = NULL;
        cr_expect_eq(qf_task_join(t[k], QF_FOREVER, &st), QF_CANCELLED, "poll form %d", k);
        cr_expect_str_eq(qf_status_message(st),
                         k < 5 ? "Dequeue operation was cancelled"
                               : "Enqueue operation was cancelled",
                         "poll form %d", k);
        qf_status_free(st);
        qf_task_unref(t[k]);
    }
    cr_expect_not_null(f[6].elem, "a cancelled enqueue leaves the element with its caller");
    qf_element_free(f[6].elem);
    cr_expect_eq(qf_queue_size(empty_ptr), 0);
    cr_expect_eq(qf_queue_size(empty_elem), 0);
    cr_expect_eq(qf_queue_size(full_ptr), 1);
    cr_expect_eq(qf_queue_size(full_elem), 1);
    /* The queues work on; they were not closed. */
    cr_expect_eq(qf_queue_try_enqueue_ptr(empty_ptr, NULL), QF_OK);
    qf_runtime_free(rt);
    qf_queue_unref(empty_ptr);
    qf_queue_unref(empty_elem);
    qf_queue_unref(full_ptr);
    qf_queue_unref(full_elem);
}

static qf_code ignores_cancel(qf_task *t, void *arg)
{
    void *p;
    return qf_queue_poll_dequeue_ptr(arg, qf_task_waker(t), &p);
}

Test(runtime, task_ignoring_cancellation_is_ended_with_cancelled)
{
    qf_runtime *rt = mkrt(1);
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(4, "q", 0, NULL, &q), QF_OK);
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, ignores_cancel, q, NULL, &t), QF_OK);
    cr_assert_eq(qf_runtime_shutdown(rt, QF_FOREVER), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_CANCELLED);
    qf_task_unref(t);
    qf_runtime_free(rt);
    /* the task's waker was withdrawn: enqueueing touches no freed task */
    cr_expect_eq(qf_queue_enqueue_ptr(q, NULL), QF_OK);
    qf_queue_unref(q);
}

Test(runtime, host_driven_runtime_runs_only_in_run_once)
{
    qf_runtime *rt = mkrt(0);
    cr_expect_eq(qf_runtime_num_workers(rt), 0);
    cr_expect_geq(qf_runtime_fd(rt), 0);
    atomic_int n = 0;
    cr_assert_eq(qf_task_spawn(rt, ok_task, &n, NULL, NULL), QF_OK);
    cr_expect_eq(atomic_load(&n), 0, "nothing runs without the host");
    struct pollfd pfd = {.fd = qf_runtime_fd(rt), .events = POLLIN};
    cr_expect_eq(poll(&pfd, 1, 1000), 1, "the fd says work is waiting");
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), 1);
    cr_expect_eq(atomic_load(&n), 1);
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), 0);
    timer_arg a = {.at = qf_deadline_in_ns(2000000)};
    cr_assert_eq(qf_task_spawn(rt, timer_task, &a, NULL, NULL), QF_OK);
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), 1);
    cr_expect_neq(qf_runtime_next_deadline(rt), QF_FOREVER);
    while (qf_runtime_num_tasks(rt) > 0)
        qf_runtime_run_once(rt, qf_deadline_in_s(1.0));
    cr_expect_geq(qf_now_ns(), a.at);
    qf_runtime_free(rt);
}

Test(runtime, run_once_refused_with_workers)
{
    qf_runtime *rt = mkrt(1);
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), -1);
    cr_expect_eq(qf_last_code(), QF_FAILED_PRECONDITION);
    qf_runtime_free(rt);
}

/* Many parked tasks use no worker: 10,000 tasks wait on one queue on two
 * workers; a thread feeds them one element each. */
Test(runtime, ten_thousand_parked_tasks_on_two_workers, .timeout = 120)
{
    qf_runtime *rt = mkrt(2);
    enum { N = 10000 };
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(-1, "q", 0, NULL, &q), QF_OK);
    deq_arg *args = calloc(N, sizeof(deq_arg));
    for (int i = 0; i < N; i++) {
        args[i].q = q;
        cr_assert_eq(qf_task_spawn(rt, dequeue_task, &args[i], NULL, NULL), QF_OK);
    }
    for (uintptr_t i = 1; i <= N; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, (void *)i), QF_OK);
    cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(60)), QF_OK);
    uint64_t sum = 0;
    for (int i = 0; i < N; i++)
        sum += (uintptr_t)args[i].got;
    cr_expect_eq(sum, (uint64_t)N * (N + 1) / 2, "every task got exactly one element");
    free(args);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

Test(runtime, tasks_are_coordinator_members)
{
    qf_runtime *rt = mkrt(2);
    qf_coord *c;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    atomic_int n = 0;
    qf_task_options o = {.name = "member", .coord = c};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(qf_task_spawn(rt, ok_task, &n, &o, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    cr_expect_eq(atomic_load(&n), 8);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

Test(runtime, default_runtime_exists)
{
    qf_runtime *rt = qf_runtime_default();
    cr_assert_not_null(rt);
    cr_expect_eq(rt, qf_runtime_default());
    atomic_int n = 0;
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, ok_task, &n, NULL, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    qf_task_unref(t);
}

/* A task that holds its worker until the test lets it go (never a sleep:
 * the test releases it when it has seen what it waits for). */
typedef struct {
    atomic_int running;
    atomic_int release;
} long_arg;

static qf_code long_task(qf_task *t, void *arg)
{
    (void)t;
    long_arg *a = arg;
    atomic_store(&a->running, 1);
    while (!atomic_load(&a->release))
        sched_yield();
    return QF_OK;
}

typedef struct {
    qf_task **ts;
    int n;
} wake_all_arg;

static void *wake_all_thread(void *arg)
{
    wake_all_arg *a = arg;
    for (int i = 0; i < a->n; i++)
        qf_task_wake(a->ts[i]);
    return NULL;
}

/* Issue 24 (5): the worker woken to run the long task kept the pool's
 * "a wake is under way" flag set while the task ran, so the wakes below
 * woke nobody and the 8 tasks waited for the long task (1.9 s in the
 * report) while 3 of the 4 workers slept. The deadline only bounds a broken
 * run; a working one takes microseconds. */
Test(runtime, tasks_woken_from_a_thread_run_while_a_long_task_holds_a_worker, .timeout = 60)
{
    qf_runtime_options ro = {.workers = 4, .name = "lwake"};
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&ro, &rt), QF_OK);
    /* All four asleep first, so a wake-up, not a worker still starting,
     * runs the long task. */
    cr_assert_neq(qft_wait_named_parked("lwake-", 4, 10 * 1000000000LL), 0,
                  "the workers never went to sleep");
    long_arg la = {0};
    qf_task *lt;
    cr_assert_eq(qf_task_spawn(rt, long_task, &la, NULL, &lt), QF_OK);
    qf_deadline d = qf_deadline_in_s(10);
    while (!atomic_load(&la.running)) {
        cr_assert_not(qf_deadline_passed(d), "the long task never started");
        sched_yield();
    }
    enum { N = 8 };
    atomic_int ran = 0;
    qf_task *ts[N];
    qf_task_options o = {.suspended = true};
    for (int i = 0; i < N; i++)
        cr_assert_eq(qf_task_spawn(rt, ok_task, &ran, &o, &ts[i]), QF_OK);
    wake_all_arg wa = {.ts = ts, .n = N};
    pthread_t th;
    int64_t t0 = qf_now_ns();
    cr_assert_eq(pthread_create(&th, NULL, wake_all_thread, &wa), 0);
    d = qf_deadline_in_s(10);
    while (atomic_load(&ran) < N && !qf_deadline_passed(d))
        sched_yield();
    int64_t took = qf_now_ns() - t0;
    int got = atomic_load(&ran);
    cr_expect_not(qf_task_is_done(lt), "the long task is still running");
    atomic_store(&la.release, 1); /* before any assert: the runtime must be able to stop */
    pthread_join(th, NULL);
    cr_expect_eq(got, N, "%d of %d woken tasks ran in %.3f s while the long task ran", got, N,
                 took / 1e9);
    for (int i = 0; i < N; i++) {
        cr_expect_eq(qf_task_join(ts[i], qf_deadline_in_s(10), NULL), QF_OK);
        qf_task_unref(ts[i]);
    }
    cr_expect_eq(qf_task_join(lt, qf_deadline_in_s(10), NULL), QF_OK);
    qf_task_unref(lt);
    qf_runtime_free(rt);
}

/* ------------------------------------------------------------------------
 * The public task-runner mark (qf_thread_set_task_runner, issue 30): a
 * custom scheduler's thread gets the refusals qflow's workers get.
 */

typedef struct mark_seen {
    bool inside;
} mark_seen;

static qf_code record_mark(qf_task *t, void *arg)
{
    (void)t;
    ((mark_seen *)arg)->inside = qf_thread_is_task_runner();
    return QF_OK;
}

Test(runtime, task_runner_mark_is_set_in_tasks_and_restored_after, .timeout = 30)
{
    cr_expect(!qf_thread_is_task_runner(), "starts false");
    /* A runtime of 0 workers runs its tasks on this thread. */
    qf_runtime *rt = mkrt(0);
    for (int marked = 0; marked < 2; marked++) {
        qf_thread_set_task_runner(marked);
        mark_seen seen = {false};
        qf_task *t;
        cr_assert_eq(qf_task_spawn(rt, record_mark, &seen, NULL, &t), QF_OK);
        while (!qf_task_is_done(t))
            cr_assert_eq(qf_runtime_try_run_once(rt, NULL), QF_OK);
        cr_expect(seen.inside, "a qflow task runs marked");
        cr_expect_eq(qf_thread_is_task_runner(), (bool)marked, "the mark is put back");
        qf_task_unref(t);
    }
    cr_expect(qf_thread_set_task_runner(false), "returns the previous mark");
    qf_runtime_free(rt);
}

static void *mark_of_new_thread(void *arg)
{
    *(bool *)arg = qf_thread_is_task_runner();
    return NULL;
}

Test(runtime, task_runner_mark_makes_blocking_calls_refuse, .timeout = 30)
{
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(1, "q", 0, NULL, &q), QF_OK);
    cr_expect(!qf_thread_set_task_runner(true));
    bool other = true;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, mark_of_new_thread, &other), 0);
    pthread_join(th, NULL);
    cr_expect(!other, "the mark is the calling thread's only");

    /* Empty queue: the thread form would sleep; on a marked thread it
     * refuses and names the poll form instead. */
    void *p;
    cr_expect_eq(qf_queue_dequeue_ptr(q, &p), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "poll form") != NULL, "%s", qf_last_message());
    /* Where nothing would block, marked or not makes no difference. */
    cr_expect_eq(qf_queue_try_enqueue_ptr(q, (void *)1), QF_OK);
    cr_expect_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(p, (void *)1);

    qf_runtime *rt = mkrt(1);
    qf_task *t;
    mark_seen seen = {false};
    cr_assert_eq(qf_task_spawn(rt, record_mark, &seen, NULL, &t), QF_OK);
    qf_code rc = qf_task_join(t, QF_FOREVER, NULL);
    if (rc != QF_OK) { /* refused unless the task had already finished */
        cr_expect_eq(rc, QF_FAILED_PRECONDITION);
        cr_expect(strstr(qf_last_message(), "qf_task_is_done") != NULL, "%s", qf_last_message());
    }
    cr_expect_eq(qf_runtime_shutdown(rt, QF_FOREVER), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "runs no tasks") != NULL, "%s", qf_last_message());

    cr_expect(qf_thread_set_task_runner(false));
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect(seen.inside);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* A detached task can run and be freed by a worker as soon as it is in the
 * global run queue, so a thread that spawns or wakes one must not read it
 * after queueing it. qf__schedule() read the task's runtime back for the
 * wake-up after the push: a use-after-free, which ASan reports here on
 * every run with -Drace_widening=true (it widens that window). In a plain
 * build the read usually finds the old value, but glibc's free() clears
 * that word when the freed task starts a free chunk of 1 KiB or more: the
 * likely cause of qflow-bench's one SIGSEGV in 15 runs of task.spawn and
 * queue.tput.tasks (both spawn detached tasks from the main thread). Both
 * ways in from a thread: spawn, and a wake of a suspended task whose
 * handle is already released. The shutdown's deadline bounds a broken run. */
Test(runtime, detached_tasks_spawned_or_woken_from_a_thread_are_not_read_after_queueing,
     .timeout = 120)
{
    enum { N = 20000 };
    qf_runtime *rt = mkrt(2);
    atomic_int n = 0;
    for (int i = 0; i < N; i++)
        cr_assert_eq(qf_task_spawn(rt, ok_task, &n, NULL, NULL), QF_OK);
    qf_task_options o = {.name = "woken", .suspended = true};
    for (int i = 0; i < N; i++) {
        qf_task *t;
        cr_assert_eq(qf_task_spawn(rt, ok_task, &n, &o, &t), QF_OK);
        qf_task_unref(t); /* detached: only its parked state keeps it alive */
        qf_task_wake(t);
    }
    cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(60)), QF_OK);
    cr_expect_eq(atomic_load(&n), 2 * N, "every task ran once");
    qf_runtime_free(rt);
}

/* A thread whose enqueue wakes a parked task runs the worker's wake-up
 * after it has released the task's waker (qf_wake_defer-impl.h): the task
 * may take its element and end, and its owner join it and free the
 * runtime, while that thread has yet to make the wake-up, which reads the
 * runtime. qf_runtime_free() must wait for it. With -Drace_widening=true
 * the thread yields just there, and ASan reports a use-after-free of the
 * runtime when the free does not wait. */
typedef struct wake_then_free {
    qf_queue *q;
    _Atomic int round; /* the round whose element the sender may send */
    int rounds;
} wake_then_free;

static void *send_each_round(void *arg)
{
    wake_then_free *w = arg;
    for (int r = 1; r <= w->rounds; r++) {
        while (atomic_load_explicit(&w->round, memory_order_acquire) < r)
            sched_yield();
        cr_assert_eq(qf_queue_enqueue_ptr(w->q, (void *)(intptr_t)r), QF_OK);
    }
    return NULL;
}

/* Keeps the worker awake (yielding until told to stop), so the woken task
 * runs without the deferred wake-up: that is when it can end first. */
static qf_code busy_until_stopped(qf_task *t, void *arg)
{
    (void)t;
    return atomic_load((_Atomic bool *)arg) ? QF_OK : QF_YIELD;
}

Test(runtime, free_waits_for_a_wake_up_deferred_past_the_wakers_release, .timeout = 120)
{
    wake_then_free w = {.rounds = 300};
    cr_assert_eq(qf_ptr_queue_new(4, "q", 0, NULL, &w.q), QF_OK);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, send_each_round, &w), 0);
    for (int r = 1; r <= w.rounds; r++) {
        qf_runtime *rt = mkrt(1);
        deq_arg a = {.q = w.q};
        _Atomic bool stop = false;
        qf_task *t, *busy;
        cr_assert_eq(qf_task_spawn(rt, busy_until_stopped, &stop, NULL, &busy), QF_OK);
        cr_assert_eq(qf_task_spawn(rt, dequeue_task, &a, NULL, &t), QF_OK);
        /* Send once the task has polled (it then parks on the empty queue,
         * or, rarely, is still on its way there: either way it gets the
         * element through its waker or its next poll). */
        while (atomic_load(&a.polls) == 0)
            sched_yield();
        atomic_store_explicit(&w.round, r, memory_order_release);
        cr_assert_eq(qf_task_join(t, qf_deadline_in_s(60), NULL), QF_OK);
        cr_assert_eq((intptr_t)a.got, r);
        qf_task_unref(t);
        atomic_store(&stop, true);
        cr_assert_eq(qf_task_join(busy, qf_deadline_in_s(60), NULL), QF_OK);
        qf_task_unref(busy);
        qf_runtime_free(rt); /* possibly while the sender is still in its wake */
    }
    pthread_join(th, NULL);
    qf_queue_unref(w.q);
}

/* Joiners asleep on a task's end: the end wakes them only when one marked
 * the task's word first (qf_task.c, TASK_JOINED), so every sleeping joiner
 * must have marked it, and a joiner whose deadline passed must leave the
 * task joinable. Three threads join a task parked on an empty queue, one
 * with a deadline that passes first; once the others are seen asleep in
 * the kernel, an enqueue lets the task end, and every join returns. */
typedef struct joiner {
    qf_task *t;
    atomic_int tid;
    qf_code rc;
} joiner;

static void *join_thread(void *arg)
{
    joiner *j = arg;
    atomic_store(&j->tid, qft_tid());
    j->rc = qf_task_join(j->t, QF_FOREVER, NULL);
    return NULL;
}

Test(runtime, every_joiner_asleep_on_a_task_wakes_at_its_end, .timeout = 60)
{
    qf_runtime *rt = mkrt(2);
    deq_arg a = {.got = NULL};
    cr_assert_eq(qf_ptr_queue_new(4, "q", 0, NULL, &a.q), QF_OK);
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, dequeue_task, &a, NULL, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, qf_deadline_in_ns(2000000), NULL), QF_DEADLINE_EXCEEDED);
    cr_expect_not(qf_task_is_done(t));
    joiner j[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        j[i] = (joiner){.t = t, .rc = QF_UNKNOWN};
        atomic_init(&j[i].tid, 0);
        cr_assert_eq(pthread_create(&th[i], NULL, join_thread, &j[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        while (atomic_load(&j[i].tid) == 0)
            sched_yield();
        cr_expect_neq(qft_wait_parked(atomic_load(&j[i].tid), NULL, 0, NULL, 10000000000), 0,
                      "joiner %d never went to sleep", i);
    }
    cr_expect_not(qf_task_is_done(t));
    cr_assert_eq(qf_queue_enqueue_ptr(a.q, (void *)0x42), QF_OK);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_expect_eq(j[i].rc, QF_OK);
    }
    cr_expect(qf_task_is_done(t));
    cr_expect_eq(qf_task_join(t, QF_NO_WAIT, NULL), QF_OK);
    cr_expect_eq((uintptr_t)a.got, 0x42);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_queue_unref(a.q);
}

/* A thread that only spawns never frees a task (the workers end them), yet
 * its allocations take chains of cached blocks into its own lists: those
 * must be handed back when it exits, or every such thread leaks what is
 * left of its chains (about 1.3 KB each, measured). 4000 short-lived
 * spawner threads; memory in use afterwards may hold the shared level of
 * the cache (bounded, under 1 MB), not a share of every thread. */
static qf_code noop_task(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return QF_OK;
}

/* NULL, or the failed spawn's message (the error is per thread). */
static void *spawn_200(void *arg)
{
    for (int i = 0; i < 200; i++)
        if (qf_task_spawn(arg, noop_task, NULL, NULL, NULL) != QF_OK)
            return strdup(qf_last_message());
    return NULL;
}

/* Bytes the program has allocated and not freed. The sanitizers'
 * allocators bypass glibc's arenas (mallinfo2() would not move), and
 * ThreadSanitizer builds keep the block cache on. */
static size_t bytes_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

Test(runtime, threads_that_only_spawn_leave_no_blocks_behind, .timeout = 120)
{
    qf_runtime *rt = mkrt(2);
    size_t base = 0;
    for (int r = 0; r < 4000; r++) {
        pthread_t th;
        void *ret = NULL;
        cr_assert_eq(pthread_create(&th, NULL, spawn_200, rt), 0);
        cr_assert_eq(pthread_join(th, &ret), 0);
        cr_assert_null(ret, "a spawn failed: %s", (char *)ret);
        while (qf_runtime_num_tasks(rt) > 0)
            sched_yield();
        if (r == 50)
            base = bytes_in_use();
    }
    size_t end = bytes_in_use();
    qf_runtime_free(rt);
    cr_expect_lt(end, base + 2 * 1024 * 1024, "memory in use grew by %zu bytes over 3950 threads",
                 end > base ? end - base : 0);
}

/* ------------------------------------------- the workers' slice (issue 30) */

static qf_code nothing_task(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return QF_OK;
}

/* Until both workers of the runtime named `name` have `want` as their slice
 * (spawning a few tasks each round, so that sleeping workers wake and take
 * the setting), or 20 s. */
static bool workers_reach_slice(qf_runtime *rt, const char *name, uint64_t want, uint64_t got[2])
{
    char n0[16], n1[16];
    snprintf(n0, sizeof(n0), "%s-0", name);
    snprintf(n1, sizeof(n1), "%s-1", name);
    int tid[2] = {qft_wait_thread_named(n0), qft_wait_thread_named(n1)};
    cr_assert(tid[0] > 0 && tid[1] > 0, "workers %s and %s not found", n0, n1);
    qf_deadline limit = qf_deadline_in_s(20);
    for (;;) {
        got[0] = qft_slice_of(tid[0]);
        got[1] = qft_slice_of(tid[1]);
        if ((got[0] == want && got[1] == want) || qf_deadline_passed(limit))
            return got[0] == want && got[1] == want;
        qf_task *ts[4];
        for (int i = 0; i < 4; i++)
            cr_assert_eq(qf_task_spawn(rt, nothing_task, NULL, NULL, &ts[i]), QF_OK);
        for (int i = 0; i < 4; i++) {
            qf_task_join(ts[i], QF_FOREVER, NULL);
            qf_task_unref(ts[i]);
        }
    }
}

Test(runtime, worker_slice_reaches_every_worker_and_goes_back)
{
    if (!qft_kernel_has_slices())
        cr_skip_test("this kernel has no per-thread slices (Linux 6.12 or later)");
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2, .name = "slc"}, &rt), QF_OK);
    uint64_t got[2], before[2];
    int tid0 = qft_wait_thread_named("slc-0");
    before[0] = qft_slice_of(tid0);
    before[1] = qft_slice_of(qft_wait_thread_named("slc-1"));
    cr_assert_eq(qf_runtime_set_worker_slice(rt, 300000), QF_OK);
    cr_expect(workers_reach_slice(rt, "slc", 300000, got), "worker slices %llu and %llu",
              (unsigned long long)got[0], (unsigned long long)got[1]);
    cr_assert_eq(qf_runtime_set_worker_slice(rt, 0), QF_OK);
    cr_expect(workers_reach_slice(rt, "slc", before[0], got), "after 0: %llu and %llu, not %llu",
              (unsigned long long)got[0], (unsigned long long)got[1],
              (unsigned long long)before[0]);
    cr_expect_eq(before[0], before[1]);
    qf_runtime_free(rt);
}

/* A host-driven runtime has no workers to change: the host's thread (the
 * caller's) keeps its settings through a turn. */
Test(runtime, worker_slice_leaves_a_host_thread_alone)
{
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 0, .name = "hst"}, &rt), QF_OK);
    uint64_t slice = qft_slice_ns(), slack = qft_timer_slack_ns();
    cr_assert_eq(qf_runtime_set_worker_slice(rt, 300000), QF_OK);
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, nothing_task, NULL, NULL, &t), QF_OK);
    while (!qf_task_is_done(t))
        qf_runtime_try_run_once(rt, NULL);
    qf_task_unref(t);
    cr_expect_eq(qft_slice_ns(), slice);
    cr_expect_eq(qft_timer_slack_ns(), slack);
    qf_runtime_free(rt);
}
