/* qf_coord_join-impl.h - internal: a Coordinator join that a scheduler drives.
 *
 * qf_coord_join() sleeps on the coordinator's event count until a member
 * ends or a stop comes. On the thread of a runtime with 0 workers that
 * sleep can never end: the tasks it waits for run only when that very
 * thread drives the loop. Such a runtime (runtime/sched/qf_embed.c) joins
 * through qf__coord_join_driven() with a driver: wherever join would sleep
 * it calls the driver, which runs the runnable tasks and, when there are
 * none, sleeps in poll(2) on the runtime's fd and on `join_fd`, an eventfd
 * of the coordinator that a member's end and a stop (from a signal handler
 * too) make readable while the driven join runs.
 */
#ifndef QF_COORD_JOIN_IMPL_H
#define QF_COORD_JOIN_IMPL_H

#include <stdbool.h>

#include "qf_coordinator.h"

typedef struct qf__join_driver {
    /* Run what is runnable now (*ret_ran: whether anything ran). When
     * nothing was and `wait` is true, sleep until something may be
     * runnable, `join_fd` is readable, or `until` (absolute, QF_FOREVER)
     * passes. QF_OK, or an error (message set) that ends the join without
     * joining: the members stay registered. */
    qf_code (*drive)(void *ctx, bool wait, qf_deadline until, int join_fd, bool *ret_ran);
    void *ctx;
} qf__join_driver;

/* qf_coord_join_until() (until) or qf_coord_join() (grace_secs), waiting
 * through `drv`; `what` names the public call in messages. One driven
 * join per coordinator at a time (QF_FAILED_PRECONDITION otherwise). */
qf_code qf__coord_join_driven(qf_coord *c, const char *what, bool until, qf_deadline deadline,
                              double grace_secs, bool ignore_live_threads,
                              qf_coord_join_report *ret_report, const qf__join_driver *drv);

/* Mark a member as a task of a runtime with 0 workers: join's laggard
 * message then says how such tasks get to run. */
void qf__coord_member_mark_hosted(qf_coord_member *m);

#endif
