/* test_waker.c - wakers, wait lists and event counts. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "qflow.h"

static atomic_int woke;
static void on_wake(qf_waker *w)
{
    (void)w;
    atomic_fetch_add(&woke, 1);
}

Test(waker, wake_order_is_oldest_first_and_at_most_once)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker a, b, c;
    qf_waker_init(&a, on_wake, NULL);
    qf_waker_init(&b, on_wake, NULL);
    qf_waker_init(&c, on_wake, NULL);
    atomic_store(&woke, 0);
    qf_waitlist_register(&wl, &a);
    qf_waitlist_register(&wl, &b);
    qf_waitlist_register(&wl, &c);
    cr_expect_eq(qf_waitlist_count(&wl), 3);
    cr_expect_eq(qf_waitlist_wake(&wl, 1), 1);
    cr_expect_eq(qf_waker_state(&a), QF_WAKER_DONE);
    cr_expect_eq(qf_waker_state(&b), QF_WAKER_REGISTERED);
    cr_expect_eq(qf_waitlist_wake(&wl, INT32_MAX), 2);
    cr_expect_eq(qf_waitlist_wake(&wl, INT32_MAX), 0);
    cr_expect_eq(atomic_load(&woke), 3);
    cr_expect(!qf_waitlist_cancel(&wl, &b), "already woken");
    qf_waitlist_destroy(&wl);
}

Test(waker, cancel_before_wake_withdraws)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker a;
    qf_waker_init(&a, on_wake, NULL);
    atomic_store(&woke, 0);
    qf_waitlist_register(&wl, &a);
    cr_expect(qf_waitlist_cancel(&wl, &a));
    cr_expect_eq(qf_waker_state(&a), QF_WAKER_IDLE);
    cr_expect_eq(qf_waitlist_wake(&wl, 1), 0);
    cr_expect_eq(atomic_load(&woke), 0);
}

Test(waker, thread_waker_times_out_then_cancels)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_waitlist_register(&wl, &w);
    cr_expect_eq(qf_waker_wait(&w, qf_deadline_in_ns(2000000)), QF_DEADLINE_EXCEEDED);
    cr_expect(qf_waitlist_cancel(&wl, &w));
}

typedef struct {
    qf_waitlist *wl;
    atomic_int *registered;
    int result;
} sleeper_arg;

static void *sleeper(void *p)
{
    sleeper_arg *a = p;
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_waitlist_register(a->wl, &w);
    atomic_fetch_add(a->registered, 1);
    a->result = qf_waker_wait(&w, QF_FOREVER);
    return NULL;
}

/* Stack wakers on several threads; a wake-all reaches every one, and each
 * thread may leave (and its stack waker vanish) as soon as it sees DONE. */
Test(waker, wake_all_releases_every_sleeping_thread)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    atomic_int registered = 0;
    pthread_t t[8];
    sleeper_arg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (sleeper_arg){&wl, &registered, -1};
        pthread_create(&t[i], NULL, sleeper, &a[i]);
    }
    while (atomic_load(&registered) < 8)
        sched_yield();
    cr_expect_eq(qf_waitlist_wake(&wl, INT32_MAX), 8);
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        cr_expect_eq(a[i].result, QF_OK);
    }
}

/* Race cancel against wake many times: each registration ends exactly one
 * way, and a cancel that lost the race returns only after the wake ran. */
static qf_waitlist race_wl;
static atomic_int race_stop;
static void *race_waker(void *p)
{
    (void)p;
    while (!atomic_load(&race_stop))
        qf_waitlist_wake(&race_wl, 1);
    return NULL;
}

Test(waker, cancel_races_wake_without_loss)
{
    qf_waitlist_init(&race_wl);
    atomic_store(&race_stop, 0);
    atomic_store(&woke, 0);
    pthread_t t;
    pthread_create(&t, NULL, race_waker, NULL);
    int cancelled = 0, lost = 0;
    for (int i = 0; i < 20000; i++) {
        qf_waker w;
        qf_waker_init(&w, on_wake, NULL);
        qf_waitlist_register(&race_wl, &w);
        if (qf_waitlist_cancel(&race_wl, &w))
            cancelled++;
        else
            lost++;
        cr_assert_neq(qf_waker_state(&w), QF_WAKER_CLAIMED);
    }
    atomic_store(&race_stop, 1);
    pthread_join(t, NULL);
    cr_expect_eq(atomic_load(&woke), lost);
    cr_expect_eq(cancelled + lost, 20000);
}

static qf_eventcount ec;
static atomic_int flag;
static void *ec_waiter(void *p)
{
    (void)p;
    for (;;) {
        uint32_t t = qf_eventcount_prepare(&ec);
        if (atomic_load(&flag)) {
            qf_eventcount_cancel(&ec);
            return NULL;
        }
        qf_eventcount_wait(&ec, t, QF_FOREVER);
    }
}

Test(waker, eventcount_no_lost_notify)
{
    for (int round = 0; round < 200; round++) {
        qf_eventcount_init(&ec);
        atomic_store(&flag, 0);
        pthread_t t[2];
        pthread_create(&t[0], NULL, ec_waiter, NULL);
        pthread_create(&t[1], NULL, ec_waiter, NULL);
        atomic_store(&flag, 1);
        qf_eventcount_notify(&ec, true);
        pthread_join(t[0], NULL);
        pthread_join(t[1], NULL);
    }
    cr_expect(1);
}

Test(waker, eventcount_wait_times_out)
{
    qf_eventcount_init(&ec);
    uint32_t t = qf_eventcount_prepare(&ec);
    cr_expect_eq(qf_eventcount_wait(&ec, t, qf_deadline_in_ns(1000000)), QF_DEADLINE_EXCEEDED);
    qf_eventcount_notify(&ec, false); /* nobody announced: no syscall, no effect */
}

/* Withdraw racing a wake of one: a waker behind it must get the wake
 * whenever the withdrawn one does not keep it. Each round: a and b
 * registered, a wake of 1 on another thread while a is withdrawn. If the
 * withdraw took a off the list first, the wake went to b; if the wake
 * claimed a, withdraw passes it on to b. Either way b is woken. */
typedef struct wd_round {
    qf_waitlist *wl;
    atomic_int go;
} wd_round;

static void *wake_one_when_told(void *p)
{
    wd_round *r = p;
    while (!atomic_load(&r->go))
        ;
    qf_waitlist_wake(r->wl, 1);
    return NULL;
}

Test(waker, withdraw_racing_a_wake_passes_it_on)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    for (int i = 0; i < 5000; i++) {
        qf_waker a, b;
        qf_waker_init(&a, on_wake, NULL);
        qf_waker_init(&b, on_wake, NULL);
        qf_waitlist_register(&wl, &a);
        qf_waitlist_register(&wl, &b);
        wd_round r = {.wl = &wl};
        atomic_init(&r.go, 0);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, wake_one_when_told, &r), 0);
        atomic_store(&r.go, 1);
        /* Start the withdraw at a different point of the wake each round. */
        for (volatile int spin = 0; spin < (i * 7) % 3000; spin++)
            ;
        bool withdrawn = qf_waker_withdraw(&a);
        pthread_join(t, NULL);
        cr_assert_eq(qf_waker_state(&b), QF_WAKER_DONE,
                     "round %d: b not woken (a withdrawn: %d, a state %u)", i, withdrawn,
                     qf_waker_state(&a));
        cr_assert_eq(qf_waitlist_count(&wl), 0);
    }
    qf_waitlist_destroy(&wl);
}

/* The qf_code-returning waits (the int ones are kept, deprecated). */
Test(waker, wait_until_returns_a_code)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_waitlist_register(&wl, &w);
    qf_code rc = qf_waker_wait_until(&w, qf_deadline_in_ns(1000000));
    cr_expect_eq(rc, QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "still registered after a timeout");
    cr_expect_eq(qf_waitlist_wake(&wl, 1), 1);
    cr_expect_eq(qf_waker_wait_until(&w, QF_FOREVER), QF_OK);
    cr_expect_eq(qf_waker_wait(&w, QF_NO_WAIT), QF_OK, "the old spelling");
    qf_waitlist_destroy(&wl);

    qf_eventcount evc;
    qf_eventcount_init(&evc);
    uint32_t t = qf_eventcount_prepare(&evc);
    cr_expect_eq(qf_eventcount_wait_until(&evc, t, qf_deadline_in_ns(1000000)),
                 QF_DEADLINE_EXCEEDED);
    t = qf_eventcount_prepare(&evc);
    qf_eventcount_notify(&evc, true);
    cr_expect_eq(qf_eventcount_wait_until(&evc, t, QF_FOREVER), QF_OK, "notified since the ticket");
    t = qf_eventcount_prepare(&evc);
    cr_expect_eq(qf_eventcount_wait(&evc, t, QF_NO_WAIT), QF_DEADLINE_EXCEEDED, "the old spelling");
}

/* qf_waitlist_cancel() of a waker that is not on that list returns at once
 * (it used to wait for a DONE that never came, or unlink the waker from the
 * wrong list). The timeout is the watchdog for the old spin. */
Test(waker, cancel_of_a_waker_not_on_the_list_returns_at_once, .timeout = 20)
{
    qf_waitlist wl, other;
    qf_waitlist_init(&wl);
    qf_waitlist_init(&other);
    qf_waker idle, x, y;
    qf_waker_init(&idle, on_wake, NULL);
    qf_waker_init(&x, on_wake, NULL);
    qf_waker_init(&y, on_wake, NULL);
    atomic_store(&woke, 0);

    cr_expect(!qf_waitlist_cancel(&wl, &idle), "IDLE: never registered");
    cr_expect_eq(qf_waker_state(&idle), QF_WAKER_IDLE);
    qf_waitlist_register(&wl, &idle);
    cr_expect(qf_waitlist_cancel(&wl, &idle));
    cr_expect(!qf_waitlist_cancel(&wl, &idle), "IDLE: cancelled already");

    /* x on wl, y on other: cancelling y on wl leaves both lists whole. */
    qf_waitlist_register(&wl, &x);
    qf_waitlist_register(&other, &y);
    cr_expect(!qf_waitlist_cancel(&wl, &y));
    cr_expect_eq(qf_last_code(), QF_INVALID_ARGUMENT, "%s", qf_last_message());
    cr_expect_eq(qf_waker_state(&y), QF_WAKER_REGISTERED);
    cr_expect_eq(qf_waitlist_count(&wl), 1);
    cr_expect_eq(qf_waitlist_count(&other), 1);
    cr_expect_eq(qf_waitlist_wake(&wl, INT32_MAX), 1);
    cr_expect_eq(qf_waker_state(&x), QF_WAKER_DONE);
    cr_expect_eq(qf_waitlist_wake(&other, INT32_MAX), 1);
    cr_expect_eq(qf_waker_state(&y), QF_WAKER_DONE);
    cr_expect_eq(atomic_load(&woke), 2);

    /* DONE, from this list or another: false at once, and reusable. */
    cr_expect(!qf_waitlist_cancel(&wl, &x));
    cr_expect(!qf_waitlist_cancel(&wl, &y));
    qf_waitlist_register(&wl, &y);
    cr_expect_eq(qf_waker_state(&y), QF_WAKER_REGISTERED, "a fired waker registers again");
    cr_expect(qf_waitlist_cancel(&wl, &y));
    cr_expect_eq(qf_waitlist_count(&wl), 0);
    qf_waitlist_destroy(&other);
    qf_waitlist_destroy(&wl);
}

/* A wake function that holds the waker CLAIMED until told: a cancel must
 * wait for that wake (it is the owner's wake) and return false only once
 * the waking thread has stored DONE. */
static atomic_int in_slow_wake, release_slow_wake;
static void slow_wake(qf_waker *w)
{
    (void)w;
    atomic_store(&in_slow_wake, 1);
    while (!atomic_load(&release_slow_wake))
        sched_yield();
}

static void *wake_list(void *p)
{
    qf_waitlist_wake(p, 1);
    return NULL;
}

/* Start a wake of `wl` on a thread of its own and return once it holds its
 * first waker (registered with slow_wake) CLAIMED, inside the wake function;
 * release_held_wake() lets it finish. */
static void start_held_wake(qf_waitlist *wl, pthread_t *waker_thread)
{
    atomic_store(&in_slow_wake, 0);
    atomic_store(&release_slow_wake, 0);
    cr_assert_eq(pthread_create(waker_thread, NULL, wake_list, wl), 0);
    while (!atomic_load(&in_slow_wake))
        sched_yield();
}

static void release_held_wake(pthread_t waker_thread)
{
    atomic_store(&release_slow_wake, 1);
    pthread_join(waker_thread, NULL);
}

typedef struct cancel_call {
    qf_waitlist *wl;
    qf_waker *w;
    atomic_int returned;
    bool result;
    uint32_t state_after;
} cancel_call;

static void *cancel_it(void *p)
{
    cancel_call *c = p;
    c->result = qf_waitlist_cancel(c->wl, c->w);
    c->state_after = qf_waker_state(c->w);
    atomic_store(&c->returned, 1);
    return NULL;
}

Test(waker, cancel_waits_for_a_wake_in_progress, .timeout = 20)
{
    /* Cancelling on the list that claimed it, and on another one: both
     * wait for the wake function (a CLAIMED waker becomes DONE shortly). */
    for (int other_list = 0; other_list < 2; other_list++) {
        qf_waitlist wl, other;
        qf_waitlist_init(&wl);
        qf_waitlist_init(&other);
        qf_waker w;
        qf_waker_init(&w, slow_wake, NULL);
        qf_waitlist_register(&wl, &w);
        pthread_t waker_thread, canceller;
        start_held_wake(&wl, &waker_thread);
        cr_expect_eq(qf_waker_state(&w), QF_WAKER_CLAIMED);
        cancel_call c = {.wl = other_list ? &other : &wl, .w = &w};
        atomic_init(&c.returned, 0);
        cr_assert_eq(pthread_create(&canceller, NULL, cancel_it, &c), 0);
        /* The wake function cannot return before it is released, so the
         * cancel can only have returned by now if it did not wait. */
        for (int i = 0; i < 1000; i++)
            sched_yield();
        cr_expect(!atomic_load(&c.returned), "cancel returned while the wake was in progress");
        release_held_wake(waker_thread);
        pthread_join(canceller, NULL);
        cr_expect(!c.result);
        cr_expect_eq(c.state_after, QF_WAKER_DONE);
        qf_waitlist_destroy(&other);
        qf_waitlist_destroy(&wl);
    }
}

/* qf_waker_consumed() on a waker whose wake is still in progress (CLAIMED,
 * its wake function not returned) waits for the wake to store DONE: after
 * a poll form that used a wake returns, the waker is not CLAIMED any more
 * (a put request holds a task alive only through a waker that is IDLE or
 * DONE, queues/engine/qf_fifo_wait.c). The wake is then used: a withdraw
 * passes nothing on to the next waiter of the list. */
typedef struct consumed_call {
    qf_waker *w;
    atomic_int returned;
    uint32_t state_after;
} consumed_call;

static void *consume_it(void *p)
{
    consumed_call *c = p;
    qf_waker_consumed(c->w);
    c->state_after = qf_waker_state(c->w);
    atomic_store(&c->returned, 1);
    return NULL;
}

Test(waker, consumed_waits_for_a_wake_in_progress, .timeout = 20)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w, next;
    qf_waker_init(&w, slow_wake, NULL);
    qf_waker_init(&next, on_wake, NULL);
    atomic_store(&woke, 0);
    qf_waitlist_register(&wl, &w);
    qf_waitlist_register(&wl, &next);
    pthread_t waker_thread, consumer;
    start_held_wake(&wl, &waker_thread);
    cr_assert_eq(qf_waker_state(&w), QF_WAKER_CLAIMED);
    consumed_call c = {.w = &w};
    atomic_init(&c.returned, 0);
    cr_assert_eq(pthread_create(&consumer, NULL, consume_it, &c), 0);
    /* The wake function cannot return before it is released, so the call
     * can only have returned by now if it did not wait. */
    for (int i = 0; i < 1000; i++)
        sched_yield();
    cr_expect(!atomic_load(&c.returned), "consumed returned while the wake was in progress");
    release_held_wake(waker_thread);
    pthread_join(consumer, NULL);
    cr_expect_eq(c.state_after, QF_WAKER_DONE);
    qf_waker_withdraw(&w);
    cr_expect_eq(atomic_load(&woke), 0, "a used wake was passed on");
    cr_expect_eq(qf_waker_state(&next), QF_WAKER_REGISTERED);
    cr_expect(qf_waitlist_cancel(&wl, &next));
    qf_waitlist_destroy(&wl);
}

/* Stress: the owner cancels on the wrong list while the right list's wake
 * races it. Every cancel returns (watchdog), none touches the other list,
 * and no wake is lost or doubled. */
static qf_waitlist stray_wl;
static atomic_int stray_stop;
static void *stray_waker(void *p)
{
    (void)p;
    while (!atomic_load(&stray_stop))
        qf_waitlist_wake(&stray_wl, 1);
    return NULL;
}

Test(waker, cancel_on_the_wrong_list_racing_a_wake, .timeout = 60)
{
    qf_waitlist wrong;
    qf_waitlist_init(&wrong);
    qf_waitlist_init(&stray_wl);
    atomic_store(&stray_stop, 0);
    atomic_store(&woke, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, stray_waker, NULL), 0);
    int withdrawn = 0;
    for (int i = 0; i < 20000; i++) {
        qf_waker w;
        qf_waker_init(&w, on_wake, NULL);
        qf_waitlist_register(&stray_wl, &w);
        cr_assert(!qf_waitlist_cancel(&wrong, &w), "round %d", i);
        if (qf_waitlist_cancel(&stray_wl, &w))
            withdrawn++;
        cr_assert_neq(qf_waker_state(&w), QF_WAKER_CLAIMED, "round %d", i);
        cr_assert_neq(qf_waker_state(&w), QF_WAKER_REGISTERED, "round %d", i);
        cr_assert_eq(qf_waitlist_count(&wrong), 0, "round %d", i);
    }
    atomic_store(&stray_stop, 1);
    pthread_join(t, NULL);
    cr_expect_eq(atomic_load(&woke) + withdrawn, 20000, "every registration woken or withdrawn");
    qf_waitlist_destroy(&stray_wl);
    qf_waitlist_destroy(&wrong);
}

/* ------------------------------------------- a wake's deferred last step */

#include "qf_eventcount-impl.h"
#include "qf_wake_defer-impl.h"

static int defer_log[8];
static int defer_n;
static void log_call(void *arg)
{
    defer_log[defer_n++] = (int)(intptr_t)arg;
}

Test(waker, defer_runs_each_call_once_at_the_outermost_end)
{
    defer_n = 0;
    cr_expect(!qf__wake_deferring());
    cr_expect(!qf__wake_defer(log_call, (void *)1), "outside a deferral nothing is kept");
    cr_expect_eq(defer_n, 0);
    qf__wake_defer_begin(true);
    qf__wake_defer_begin(true);
    cr_expect(qf__wake_deferring());
    cr_expect(qf__wake_defer(log_call, (void *)2));
    cr_expect_eq(defer_n, 0, "deferred, not run");
    cr_expect(qf__wake_defer(log_call, (void *)3));
    cr_expect_eq(defer_n, 1, "a second deferral runs the first at once");
    cr_expect_eq(defer_log[0], 2);
    qf__wake_defer_end();
    cr_expect_eq(defer_n, 1, "an inner end runs nothing");
    qf__wake_defer_end();
    cr_expect_eq(defer_n, 2, "the outermost end runs the last call");
    cr_expect_eq(defer_log[1], 3);
    cr_expect(!qf__wake_deferring());
    qf__wake_defer_begin(true);
    qf__wake_defer_end();
    cr_expect_eq(defer_n, 2, "an empty deferral runs nothing");
}

/* Which kind of wake a push is inside: the innermost deferral's. */
Test(waker, the_innermost_deferral_says_whether_a_wake_is_near)
{
    cr_expect(!qf__wake_defer_near(), "no deferral: not near");
    qf__wake_defer_begin(false);
    cr_expect(!qf__wake_defer_near());
    qf__wake_defer_begin(true);
    cr_expect(qf__wake_defer_near(), "a near wake inside a plain one");
    qf__wake_defer_begin(false);
    cr_expect(!qf__wake_defer_near(), "a plain wake inside a near one");
    qf__wake_defer_end();
    cr_expect(qf__wake_defer_near());
    qf__wake_defer_end();
    cr_expect(!qf__wake_defer_near());
    qf__wake_defer_end();
    cr_expect(!qf__wake_deferring());
    cr_expect(!qf__wake_defer_near());
}

/* A wake function that defers its last step: in a near wake and in a
 * plain one the step must see the waker DONE (the state its owner may
 * reuse it in), and run before the wake returns; only the near wake says
 * it is near (the scheduler then prefers the worker on this CPU). */
static uint32_t state_seen_by_step;
static int deferred_steps, near_steps;
static void step_after_done(void *arg)
{
    state_seen_by_step = qf_waker_state(arg);
}
static void on_wake_deferring(qf_waker *w)
{
    near_steps += qf__wake_defer_near();
    if (qf__wake_defer(step_after_done, w))
        deferred_steps++;
    else
        step_after_done(w);
}

Test(waker, a_wake_functions_deferred_step_runs_after_done)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker a, b;
    qf_waker_init(&a, on_wake_deferring, NULL);
    qf_waker_init(&b, on_wake_deferring, NULL);
    qf_waitlist_register(&wl, &a);
    qf_waitlist_register(&wl, &b);
    state_seen_by_step = 0;
    deferred_steps = near_steps = 0;
    cr_expect_eq(qf__waitlist_wake_near(&wl, 2), 2);
    cr_expect_eq(deferred_steps, 2, "a near wake opens a deferral per waker");
    cr_expect_eq(near_steps, 2);
    cr_expect_eq(state_seen_by_step, QF_WAKER_DONE);
    cr_expect(!qf__wake_deferring(), "the deferral is closed on return");
    qf_waitlist_register(&wl, &a);
    state_seen_by_step = 0;
    cr_expect_eq(qf_waitlist_wake(&wl, 1), 1);
    cr_expect_eq(deferred_steps, 3, "a plain wake opens a deferral too");
    cr_expect_eq(near_steps, 2, "a plain wake is not near");
    cr_expect_eq(state_seen_by_step, QF_WAKER_DONE, "the step ran after DONE");
    cr_expect(!qf__wake_deferring(), "the deferral is closed on return");
    cr_expect(!qf__wake_defer_near());
}

/* The preferring notify: with two sleepers in their futex waits, the one
 * tagged with the preferred bits is woken, the other stays asleep until a
 * plain notify. */
#include "qf_test_park.h"

typedef struct tagged_sleeper {
    qf_eventcount *ec;
    uint32_t bits;
    _Atomic int tid;
    _Atomic bool woke;
} tagged_sleeper;

static void *sleep_tagged(void *arg)
{
    tagged_sleeper *s = arg;
    atomic_store(&s->tid, qft_tid());
    uint32_t t = qf_eventcount_prepare(s->ec);
    /* Wait for real: a wake that advanced the count before we took the
     * ticket is not ours. */
    while (qf__eventcount_wait_tagged(s->ec, t, s->bits, qf_deadline_in_ns(20000000000)) == QF_OK &&
           atomic_load_explicit(&s->ec->qf__seq, memory_order_acquire) == t)
        t = qf_eventcount_prepare(s->ec);
    atomic_store(&s->woke, true);
    return NULL;
}

Test(waker, eventcount_notify_prefer_wakes_the_tagged_sleeper)
{
    qf_eventcount evc;
    qf_eventcount_init(&evc);
    tagged_sleeper s[2] = {{.ec = &evc, .bits = 1u << 3}, {.ec = &evc, .bits = 1u << 7}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, sleep_tagged, &s[i]), 0);
    for (int i = 0; i < 2; i++) {
        while (atomic_load(&s[i].tid) == 0)
            sched_yield();
        if (qft_wait_parked(atomic_load(&s[i].tid), NULL, 0, NULL, 10000000000) != 1)
            cr_skip_test("cannot see the sleepers parked (/proc)");
    }
    qf__eventcount_notify_prefer(&evc, 1u << 7);
    for (int64_t end = qf_now_ns() + 10000000000; !atomic_load(&s[1].woke);)
        cr_assert(qf_now_ns() < end, "the preferred sleeper was not woken");
    /* The other one is still inside its futex wait: it was not woken. */
    cr_expect_eq(qft_parked_now(atomic_load(&s[0].tid), NULL, 0), 1);
    cr_expect(!atomic_load(&s[0].woke));
    /* A preference that matches nobody in the kernel still wakes one. */
    qf__eventcount_notify_prefer(&evc, 1u << 20);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    cr_expect(atomic_load(&s[0].woke));
}
