/* test_time.c - absolute CLOCK_MONOTONIC deadlines. */
#include <criterion/criterion.h>

#include "qflow.h"

Test(time, now_is_monotonic)
{
    int64_t a = qf_now_ns(), b = qf_now_ns();
    cr_expect_geq(b, a);
    cr_expect_gt(a, 0);
}

Test(time, deadlines_from_durations)
{
    int64_t now = qf_now_ns();
    qf_deadline d = qf_deadline_in_ns(1000000000);
    cr_expect_geq(d, now + 1000000000);
    cr_expect(!qf_deadline_passed(d));
    cr_expect_eq(qf_deadline_in_ns(0), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_ns(-5), QF_NO_WAIT);
    cr_expect(qf_deadline_passed(QF_NO_WAIT));
    cr_expect(!qf_deadline_passed(QF_FOREVER));
    cr_expect_eq(qf_deadline_in_ns(INT64_MAX), QF_FOREVER);
    cr_expect_eq(qf_deadline_in_s(-1.0), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(1e12), QF_FOREVER);
    /* a tiny positive grace is still in the future when made (spec 117) */
    cr_expect_gt(qf_deadline_in_s(1e-10), now);
}

Test(time, min_treats_forever_as_latest)
{
    cr_expect_eq(qf_deadline_min(QF_FOREVER, 5), 5);
    cr_expect_eq(qf_deadline_min(7, QF_FOREVER), 7);
    cr_expect_eq(qf_deadline_min(3, 9), 3);
    cr_expect_eq(qf_deadline_min(QF_FOREVER, QF_FOREVER), QF_FOREVER);
}
