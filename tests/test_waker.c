/* test_waker.c - wakers, wait lists and event counts. */
#include <criterion/criterion.h>
#include <pthread.h>
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
