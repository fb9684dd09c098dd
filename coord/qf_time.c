/* qf_time.c - CLOCK_MONOTONIC deadlines. */
#include "qf_time.h"

#include <math.h>
#include <time.h>

int64_t qf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

qf_deadline qf_deadline_in_ns(int64_t ns)
{
    if (ns <= 0)
        return QF_NO_WAIT;
    int64_t now = qf_now_ns();
    if (ns > INT64_MAX - now)
        return QF_FOREVER;
    return now + ns;
}

qf_deadline qf_deadline_in_s(double secs)
{
    if (!(secs > 0))
        return QF_NO_WAIT;
    if (secs >= 9.0e9)
        return QF_FOREVER;
    /* Round up so a tiny positive grace (1e-10 s) is still "a moment from
     * now" rather than already passed before the caller looks at it. */
    return qf_deadline_in_ns((int64_t)ceil(secs * 1e9));
}

int qf_deadline_passed(qf_deadline d)
{
    if (d == QF_FOREVER)
        return 0;
    return qf_now_ns() >= d;
}

qf_deadline qf_deadline_min(qf_deadline a, qf_deadline b)
{
    if (a == QF_FOREVER)
        return b;
    if (b == QF_FOREVER)
        return a;
    return a < b ? a : b;
}
