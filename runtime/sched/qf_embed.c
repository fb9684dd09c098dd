/* qf_embed.c - the calls a program embedding a runtime of 0 workers makes
 * from its own loop: a loop turn that returns a qf_code, and a Coordinator
 * join that keeps the loop running.
 *
 * Built on the scheduler's loop turn (qf__runtime_turn, the body of the
 * deprecated qf_runtime_run_once) and its public qf_runtime_fd and
 * qf_runtime_next_deadline: the host's wait is poll(2) on
 * the runtime's eventfd, which a wake from outside a turn writes once the
 * turn has re-armed it, so a turn that found nothing followed by a poll
 * cannot miss a wake.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "qf_coord_join-impl.h"
#include "qf_runtime-impl.h"
#include "qf_runtime.h"

/* One turn; the number of polls, or -1 with a message naming `what`. */
static int64_t turn(qf_runtime *rt, qf_deadline deadline, const char *what)
{
    int64_t n = qf__runtime_turn(rt, deadline);
    if (n < 0)
        qf_set_error(QF_FAILED_PRECONDITION, "%s: another thread is driving this runtime", what);
    return n;
}

static qf_code check_host_runtime(const qf_runtime *rt, const char *what)
{
    if (!rt)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: the runtime is NULL", what);
    if (qf_runtime_num_workers(rt) != 0)
        return qf_set_error(QF_FAILED_PRECONDITION,
                            "%s needs a runtime with 0 workers (this one has %d: its workers run "
                            "the tasks)",
                            what, qf_runtime_num_workers(rt));
    return QF_OK;
}

qf_code qf_runtime_run_once_until(qf_runtime *rt, qf_deadline deadline, int64_t *ret_polls)
{
    qf_code rc = check_host_runtime(rt, "qf_runtime_run_once_until");
    if (rc != QF_OK)
        return rc;
    if (deadline < QF_FOREVER)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_runtime_run_once_until: deadline %lld is not a deadline (>= 0, or "
                            "QF_FOREVER)",
                            (long long)deadline);
    int64_t n = turn(rt, deadline, "qf_runtime_run_once_until");
    if (n < 0)
        return QF_FAILED_PRECONDITION;
    if (ret_polls)
        *ret_polls = n;
    return QF_OK;
}

qf_code qf_runtime_try_run_once(qf_runtime *rt, int64_t *ret_polls)
{
    qf_code rc = check_host_runtime(rt, "qf_runtime_try_run_once");
    if (rc != QF_OK)
        return rc;
    int64_t n = turn(rt, QF_NO_WAIT, "qf_runtime_try_run_once");
    if (n < 0)
        return QF_FAILED_PRECONDITION;
    if (ret_polls)
        *ret_polls = n;
    return QF_OK;
}

/* ------------------------------------------------------------ driven join */

/* poll(2) on both fds until `until` (QF_FOREVER: no timeout). EINTR and
 * timeouts just return: join looks again either way. */
static void sleep_on(int rt_fd, int join_fd, qf_deadline until)
{
    struct pollfd fds[2] = {{.fd = rt_fd, .events = POLLIN}, {.fd = join_fd, .events = POLLIN}};
    struct timespec ts, *tsp = NULL;
    if (until != QF_FOREVER) {
        int64_t left = until - qf_now_ns();
        if (left <= 0)
            return;
        ts.tv_sec = (time_t)(left / 1000000000);
        ts.tv_nsec = (long)(left % 1000000000);
        tsp = &ts;
    }
    int saved = errno;
    (void)ppoll(fds, 2, tsp, NULL);
    errno = saved;
}

typedef struct drive_ctx {
    qf_runtime *rt;
    const char *what;
} drive_ctx;

static qf_code drive(void *arg, bool wait, qf_deadline until, int join_fd, bool *ret_ran)
{
    drive_ctx *d = arg;
    /* A turn that never waits re-arms the runtime's fd before it looks, so
     * a wake after it finds nothing makes the fd readable for the poll. */
    int64_t n = turn(d->rt, QF_NO_WAIT, d->what);
    if (n < 0)
        return QF_FAILED_PRECONDITION;
    *ret_ran = n > 0;
    if (n == 0 && wait)
        sleep_on(qf_runtime_fd(d->rt), join_fd,
                 qf_deadline_min(until, qf_runtime_next_deadline(d->rt)));
    return QF_OK;
}

static qf_code join_coord(qf_runtime *rt, qf_coord *c, const char *what, bool until,
                          qf_deadline deadline, double grace_secs, bool ignore_live_threads,
                          qf_coord_join_report *ret_report)
{
    if (!rt || !c)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: the %s is NULL", what,
                            rt ? "coordinator" : "runtime");
    if (until && deadline < QF_FOREVER)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "%s: deadline %lld is not a deadline (>= 0, or QF_FOREVER)", what,
                            (long long)deadline);
    if (!until && !(grace_secs >= 0))
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: stop_grace_period_secs must be >= 0 (got %g)",
                            what, grace_secs);
    if (qf_runtime_num_workers(rt) != 0) /* the workers run the members */
        return until ? qf_coord_join_until(c, NULL, 0, deadline, ignore_live_threads, ret_report)
                     : qf_coord_join(c, NULL, 0, grace_secs, ignore_live_threads, ret_report);
    drive_ctx d = {rt, what};
    qf__join_driver drv = {.drive = drive, .ctx = &d};
    return qf__coord_join_driven(c, what, until, deadline, grace_secs, ignore_live_threads,
                                 ret_report, &drv);
}

qf_code qf_runtime_join_coord_until(qf_runtime *rt, qf_coord *c, qf_deadline deadline,
                                    bool ignore_live_threads, qf_coord_join_report *ret_report)
{
    return join_coord(rt, c, "qf_runtime_join_coord_until", true, deadline, 0, ignore_live_threads,
                      ret_report);
}

qf_code qf_runtime_join_coord(qf_runtime *rt, qf_coord *c, double stop_grace_period_secs,
                              bool ignore_live_threads, qf_coord_join_report *ret_report)
{
    return join_coord(rt, c, "qf_runtime_join_coord", false, QF_FOREVER, stop_grace_period_secs,
                      ignore_live_threads, ret_report);
}
