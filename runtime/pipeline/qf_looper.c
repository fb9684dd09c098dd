/* qf_looper.c - a task that calls a function on fixed interval boundaries
 * until the Coordinator stops (TensorFlow's LooperThread, spec 124-126).
 *
 * Between calls the task is parked on two things at once: its timer (the
 * next boundary) and a waker registered with the Coordinator, so a stop
 * ends it at once rather than at the next tick.
 */
#include <math.h>
#include <stdlib.h>

#include "qf_queue_runner.h"

typedef struct looper {
    qf_coord *coord;
    qf_looper_fn fn;
    void *arg;
    int64_t interval_ns; /* 0: back to back */
    qf_deadline next;
    qf_waker stop_waker;
    bool registered;
} looper;

static qf_code looper_leave(looper *l, qf_task *t, qf_code rc)
{
    if (l->registered)
        qf_coord_cancel_waker(l->coord, &l->stop_waker);
    qf_task_sleep_until(t, QF_FOREVER);
    free(l);
    return rc;
}

static qf_code looper_task(qf_task *t, void *arg)
{
    looper *l = arg;
    if (qf_task_is_cancelled(t))
        return looper_leave(l, t, QF_CANCELLED);
    if (l->registered && qf_waker_state(&l->stop_waker) == QF_WAKER_DONE)
        l->registered = false; /* it fired; re-register below */
    if (qf_coord_check_stop(l->coord))
        return looper_leave(l, t, QF_OK);
    if (l->next != QF_NO_WAIT && !qf_deadline_passed(l->next))
        return QF_PENDING; /* woken early (a spurious wake) */

    qf_code rc = l->fn(l->arg);
    if (!qf_code_is_valid(rc)) /* QF_PENDING here would park a task that left */
        rc = qf_set_error(QF_INVALID_ARGUMENT,
                          "The looper's function returned %d, which is not a qf_code", (int)rc);
    if (rc != QF_OK) { /* spec 125: reported, and the looper ends */
        qf_coord_report(l->coord, rc);
        return looper_leave(l, t, rc);
    }
    if (qf_coord_should_stop(l->coord))
        return looper_leave(l, t, QF_OK);
    if (l->interval_ns == 0) {
        l->next = QF_NO_WAIT;
        return QF_YIELD;
    }
    /* Fixed boundaries: skip the ones already missed. */
    int64_t now = qf_now_ns();
    do
        l->next += l->interval_ns;
    while (l->next <= now && l->interval_ns > 0);
    if (!l->registered) {
        qf_task_waker_init(t, &l->stop_waker);
        l->registered = qf_coord_register_waker(l->coord, &l->stop_waker);
        if (!l->registered)
            return looper_leave(l, t, QF_OK); /* the stop is already here */
    }
    qf_task_sleep_until(t, l->next);
    return QF_PENDING;
}

qf_code qf_looper_start(qf_runtime *rt, qf_coord *coord, double interval_secs, qf_looper_fn fn,
                        void *arg, const char *name, qf_task **ret_task)
{
    if (!coord)
        return qf_set_error(QF_INVALID_ARGUMENT, "A looper needs a Coordinator");
    if (!fn)
        return qf_set_error(QF_INVALID_ARGUMENT, "A looper needs a target function");
    /* Finite and >= 0; above ~292 years the boundaries overflow int64 ns. */
    if (!(interval_secs >= 0 && interval_secs <= 9.0e9))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "interval_secs must be a finite number of seconds >= 0 (0: back to "
                            "back), not %g",
                            interval_secs);
    if (!rt)
        rt = qf_runtime_default();
    looper *l = calloc(1, sizeof(*l));
    if (!l)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory starting a looper");
    l->coord = coord;
    l->fn = fn;
    l->arg = arg;
    l->interval_ns = (int64_t)(interval_secs * 1e9);
    l->next = qf_now_ns(); /* the first call happens at once */
    qf_task_options o = {.name = name ? name : "LooperThread", .coord = coord, .daemon = true};
    qf_code rc = qf_task_spawn(rt, looper_task, l, &o, ret_task);
    if (rc != QF_OK)
        free(l);
    return rc;
}
