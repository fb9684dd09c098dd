/* test_poll_looks.c - a task's poll that finds its queue empty looks again
 * for a moment before it parks, when its scheduler allows (qf_fifo.c,
 * poll_look_again(); coord/qf_task_mark-impl.h, qf__task_may_spin()).
 *
 * The queue-level cases stand in for the scheduler: the test thread marks
 * itself as running a task and installs a check of its own, which counts
 * its calls and can put an element in just before the first look (so that
 * a look, not a try, finds it: no timing involved). The scheduler-level cases
 * run real tasks on a runtime of two workers. Every hint is read white-box
 * (look_dyn, the queue's allowance of looks). */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>

#include "qf_queue-impl.h"     /* white-box: look_dyn, spin_ns */
#include "qf_task_mark-impl.h" /* the stand-in scheduler's check */
#include "qflow.h"

/* ------------------------------------------------- a stand-in scheduler */

static qf_queue *check_q;       /* where the check puts its element */
static atomic_int check_calls;  /* how often the check was asked */
static bool check_answer;       /* what it says */
static bool check_puts_on_look; /* put one element in before the first look */

static bool counting_check(void)
{
    /* Call 1 is the take's choice of a second try (qf_fifo.c, fifo_take()),
     * call 2 the one before its first look (asked only when call 1 said
     * yes). */
    if (atomic_fetch_add(&check_calls, 1) == 1 && check_puts_on_look)
        cr_assert_eq(qf_queue_try_enqueue_ptr(check_q, (void *)(uintptr_t)42), QF_OK);
    return check_answer;
}

static void no_wake(qf_waker *w)
{
    (void)w;
}

static qf_waker wk; /* the stand-in task's */

/* A queue of pointers, the test thread as a task, the check installed. */
static qf_queue *setup(bool answer, bool puts_on_look)
{
    qf_waker_init(&wk, no_wake, NULL);
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(16, "looks", 0, NULL, &q), QF_OK);
    check_q = q;
    atomic_store(&check_calls, 0);
    check_answer = answer;
    check_puts_on_look = puts_on_look;
    qf__set_task_spin_check(counting_check);
    qf__set_in_task(true);
    return q;
}

static void teardown(qf_queue *q)
{
    qf_waker_withdraw(&wk);
    qf__set_in_task(false);
    qf__set_task_spin_check(NULL);
    qf_queue_unref(q);
}

/* One poll of the stand-in task. */
static qf_code poll_take(qf_queue *q, void **v)
{
    return qf_queue_poll_dequeue_ptr(q, &wk, v);
}

static int32_t looks_allowed(qf_queue *q)
{
    return atomic_load(&q->fifo.look_dyn);
}

Test(poll_looks, a_look_takes_what_came_after_the_first_try)
{
    qf_queue *q = setup(true, true);
    atomic_store(&q->fifo.look_dyn, 3); /* lowered by vain looks before */
    void *v = NULL;
    cr_assert_eq(poll_take(q, &v), QF_OK,
                 "the poll parked although its look could take an element");
    cr_expect_eq((uintptr_t)v, 42);
    cr_expect_eq(atomic_load(&check_calls), 2); /* the choice, one look */
    cr_expect_eq(looks_allowed(q), 8, "a look that paid restores the full allowance");
    teardown(q);
}

Test(poll_looks, vain_looks_lower_the_allowance_to_zero)
{
    qf_queue *q = setup(true, false);
    int expected_calls = 0;
    for (int32_t allowed = 8; allowed > 0; allowed--) {
        cr_assert_eq(looks_allowed(q), allowed);
        void *v;
        cr_assert_eq(poll_take(q, &v), QF_PENDING);
        expected_calls += 1 + allowed; /* the choice of a second try, then one a look */
        cr_expect_eq(atomic_load(&check_calls), expected_calls,
                     "allowance %d: %d checks, expected %d", allowed, atomic_load(&check_calls),
                     expected_calls);
    }
    cr_expect_eq(looks_allowed(q), 0);
    teardown(q);
}

Test(poll_looks, a_check_that_says_no_parks_at_once)
{
    qf_queue *q = setup(false, false);
    void *v;
    cr_assert_eq(poll_take(q, &v), QF_PENDING);
    /* The choice only: told no there, the take registers at once, without
     * asking again before a look (qf_fifo.c, fifo_take()). */
    cr_expect_eq(atomic_load(&check_calls), 1);
    cr_expect_eq(looks_allowed(q), 8, "a poll that never looked must not lower the allowance");
    teardown(q);
}

Test(poll_looks, no_looks_when_spinning_is_off_or_outside_a_task)
{
    qf_queue *q = setup(true, false);
    void *v;
    q->fifo.spin_ns = 0; /* white-box: as spin_ns <= 0 leaves it */
    cr_assert_eq(poll_take(q, &v), QF_PENDING);
    cr_expect_eq(atomic_load(&check_calls), 1); /* the choice of a second try only */
    q->fifo.spin_ns = 1000;
    qf__set_in_task(false); /* a thread's poll: its scheduler is not asked */
    cr_assert_eq(poll_take(q, &v), QF_PENDING);
    cr_expect_eq(atomic_load(&check_calls), 1); /* not asked again */
    cr_expect_eq(looks_allowed(q), 8);
    teardown(q);
}

/* ------------------------------------------------- the real scheduler */

/* Task A wakes a parked task B, which goes to A's next slot, then polls an
 * empty queue: its worker has B to run, so the poll parks without a look
 * and the allowance stays whole. With nothing in the slot (B left out) the
 * same poll looks, in vain, and the allowance drops: the check is what
 * made the difference. */
#define NOT_YET 1000 /* no qf_code */

typedef struct {
    qf_queue *q;
    qf_task *b; /* NULL: nothing to wake */
    atomic_int polls;
    atomic_int first_rc;
} slot_case;

static qf_code parked_b(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return QF_OK;
}

static qf_code poller_a(qf_task *t, void *arg)
{
    slot_case *c = arg;
    if (atomic_fetch_add(&c->polls, 1) > 0) {
        qf_queue_cancel_poll(c->q, qf_task_waker(t));
        return QF_OK; /* woken by the close */
    }
    if (c->b)
        qf_task_wake(c->b);
    void *v;
    qf_code rc = qf_queue_poll_dequeue_ptr(c->q, qf_task_waker(t), &v);
    atomic_store(&c->first_rc, rc); /* checked by the test's thread */
    return rc == QF_PENDING ? rc : QF_OK;
}

static int32_t run_slot_case(bool wake_b)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2, .name = "looks"}, &rt), QF_OK);
    slot_case c = {.first_rc = NOT_YET};
    cr_assert_eq(qf_ptr_queue_new(16, "slot", 0, NULL, &c.q), QF_OK);
    if (wake_b)
        cr_assert_eq(qf_task_spawn(rt, parked_b, NULL, &(qf_task_options){.suspended = true}, &c.b),
                     QF_OK);
    qf_task *a;
    cr_assert_eq(qf_task_spawn(rt, poller_a, &c, NULL, &a), QF_OK);
    /* Once A's first poll has returned (its waker on the queue's list,
     * not merely registered: the poll re-checks after that, and a close
     * then would end it), the close wakes A for its second. */
    while (atomic_load(&c.first_rc) == NOT_YET && !qf_task_is_done(a))
        sched_yield();
    qf_queue_close(c.q, false);
    cr_assert_eq(qf_task_join(a, QF_FOREVER, NULL), QF_OK);
    /* After the join: A's stores are ours to read (its second poll does
     * not look, it cancels). */
    int32_t allowed = atomic_load(&c.q->fifo.look_dyn);
    cr_assert_eq(atomic_load(&c.first_rc), QF_PENDING, "A's first poll of the empty queue: %s",
                 qf_code_name(atomic_load(&c.first_rc)));
    if (c.b) {
        cr_assert_eq(qf_task_join(c.b, QF_FOREVER, NULL), QF_OK);
        qf_task_unref(c.b);
    }
    qf_task_unref(a);
    qf_queue_unref(c.q);
    qf_runtime_free(rt);
    return allowed;
}

Test(poll_looks, a_task_waiting_in_the_next_slot_stops_the_looks, .timeout = 60)
{
    cr_expect_eq(run_slot_case(true), 8, "the poll looked while its partner waited in the slot");
    cr_expect_eq(run_slot_case(false), 7, "with an empty slot the poll did not look");
}
