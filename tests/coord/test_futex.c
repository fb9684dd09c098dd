/* test_futex.c - the futex wrappers. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "qflow.h"

Test(futex, wait_returns_at_once_when_value_differs)
{
    _Atomic uint32_t w = 1;
    cr_expect_eq(qf_futex_wait(&w, 0, QF_FOREVER), 0);
}

Test(futex, wait_times_out_at_absolute_deadline)
{
    _Atomic uint32_t w = 0;
    int64_t t0 = qf_now_ns();
    qf_deadline d = qf_deadline_in_ns(5000000);
    cr_expect_eq(qf_futex_wait(&w, 0, d), QF_DEADLINE_EXCEEDED);
    cr_expect_geq(qf_now_ns(), d);
    cr_expect_geq(qf_now_ns() - t0, 5000000);
    cr_expect_eq(qf_futex_wait(&w, 0, QF_NO_WAIT), QF_DEADLINE_EXCEEDED);
}

static _Atomic uint32_t word;
static void *waiter(void *arg)
{
    (void)arg;
    while (atomic_load(&word) == 0)
        qf_futex_wait(&word, 0, QF_FOREVER);
    return NULL;
}

Test(futex, wake_releases_sleeper)
{
    atomic_store(&word, 0);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    atomic_store(&word, 1);
    qf_futex_wake(&word, INT32_MAX);
    pthread_join(t, NULL);
    cr_expect_eq(qf_futex_wake(&word, 1), 0, "nobody left to wake");
}

/* qf_futex_wait_until: the same wait, returning a qf_code like every other
 * blocking call; qf_futex_wait (int) is kept and deprecated. */
Test(futex, wait_until_returns_a_code)
{
    _Atomic uint32_t w = 1;
    qf_code rc = qf_futex_wait_until(&w, 0, QF_FOREVER);
    cr_expect_eq(rc, QF_OK, "the value differed");
    atomic_store(&w, 0);
    qf_deadline d = qf_deadline_in_ns(2000000);
    cr_expect_eq(qf_futex_wait_until(&w, 0, d), QF_DEADLINE_EXCEEDED);
    cr_expect_geq(qf_now_ns(), d);
    cr_expect_eq(qf_futex_wait_until(&w, 0, QF_NO_WAIT), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_futex_wait(&w, 0, QF_NO_WAIT), QF_DEADLINE_EXCEEDED, "the old spelling");
}
