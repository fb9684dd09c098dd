/* qf_coord_join.c - joining the Coordinator's members: the wait, the
 * laggard and deadline reports, and the join report.
 *
 * Join sleeps on an event count that member_done, the thread exit hooks and
 * every stop notify; qf_eventcount_notify is lock-free and async-signal-safe,
 * which is what lets a signal-handler stop wake join.
 *
 * A driven join (qf__coord_join_driven) polls join_fd instead
 * (qf_coord_signal.c). Join takes the registered set and gives back what
 * it did not join (qf_coord_members.c holds the reference counts).
 */
#include "qf_coordinator.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qf_coord_join-impl.h"
#include "qf_coord_state-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"

void qf_coord_join_report_clear(qf_coord_join_report *r)
{
    if (!r)
        return;
    qf_status_free(r->status);
    for (size_t i = 0; r->finished && i < r->n_finished; i++)
        free(r->finished[i]);
    for (size_t i = 0; r->running && i < r->n_running; i++)
        free(r->running[i]);
    free(r->finished);
    free(r->running);
    memset(r, 0, sizeof(*r));
}

/* pthread_timedjoin_np takes CLOCK_REALTIME; the grace deadline is
 * monotonic. Convert the remaining time per call and re-check the
 * monotonic deadline after a timeout, so a wall-clock step can at worst
 * lengthen one wait. (pthread_clockjoin_np would avoid the conversion,
 * but ThreadSanitizer does not intercept it and would lose the join's
 * happens-before edge.) */
static int timedjoin_mono(pthread_t t, qf_deadline deadline)
{
    if (deadline == QF_FOREVER)
        return pthread_join(t, NULL);
    for (;;) {
        int64_t left = deadline - qf_now_ns();
        if (left <= 0)
            return ETIMEDOUT;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + left % 1000000000;
        ts.tv_sec += (time_t)(left / 1000000000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        int r = pthread_timedjoin_np(t, NULL, &ts);
        if (r != ETIMEDOUT)
            return r;
    }
}

/* Whether `m` has finished, without blocking (except to reap a hooked
 * thread that has already reported its end). */
static bool member_poll(qf_coord_member *m)
{
    if (m->finished || m->skip)
        return true;
    switch (m->kind) {
    case MEMBER_TASK:
        m->finished = atomic_load_explicit(&m->done, memory_order_acquire) != 0;
        break;
    case MEMBER_THREAD_HOOKED:
        if (atomic_load_explicit(&m->done, memory_order_acquire)) {
            /* It ran its exit hook; what remains of its exit is short. */
            pthread_join(m->thread, NULL);
            m->finished = true;
        }
        break;
    case MEMBER_THREAD_FOREIGN:
        /* EBUSY: still running. Anything else (joined, or not joinable)
         * means there is nothing left to wait for. */
        m->finished = pthread_tryjoin_np(m->thread, NULL) != EBUSY;
        break;
    }
    return m->finished;
}

static void member_name(const qf_coord_member *m, char *buf, size_t cap, const char **out)
{
    if (m->name) {
        *out = m->name;
    } else {
        snprintf(buf, cap, "thread-%zu", m->extra_index);
        *out = buf;
    }
}

/* Names of the members with finished == want, or NULL when out of memory. */
static char **collect_names(qf_coord_member **ms, size_t n, bool want, size_t count)
{
    if (count == 0)
        return NULL;
    char **names = calloc(count, sizeof(*names));
    if (!names)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n && k < count; i++) {
        if (ms[i]->skip || ms[i]->finished != want)
            continue;
        char buf[48];
        const char *name;
        member_name(ms[i], buf, sizeof(buf), &name);
        names[k] = strdup(name);
        if (!names[k]) {
            while (k--)
                free(names[k]);
            free(names);
            return NULL;
        }
        k++;
    }
    return names;
}

/* The names of the members still running, separated by single spaces
 * (spec 117), in a new string; NULL when out of memory. */
static char *running_names(qf_coord_member **ms, size_t n)
{
    size_t len = 1;
    char buf[48];
    const char *name;
    for (size_t i = 0; i < n; i++) {
        if (ms[i]->skip || ms[i]->finished)
            continue;
        member_name(ms[i], buf, sizeof(buf), &name);
        len += strlen(name) + 1;
    }
    char *names = malloc(len), *p = names;
    for (size_t i = 0; names && i < n; i++) {
        if (ms[i]->skip || ms[i]->finished)
            continue;
        member_name(ms[i], buf, sizeof(buf), &name);
        p += sprintf(p, "%s%s", p == names ? "" : " ", name);
    }
    if (names)
        *p = '\0';
    return names;
}

/* "... (tasks of a runtime with 0 workers ...)" when a laggard is one:
 * the usual reason such a task lags is that nobody drives its loop. */
static const char *hosted_hint(qf_coord_member **ms, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ms[i]->skip && !ms[i]->finished &&
            atomic_load_explicit(&ms[i]->hosted, memory_order_relaxed))
            return " (tasks of a runtime with 0 workers run only while the host drives its "
                   "loop: join with qf_runtime_join_coord())";
    return "";
}

/* QF_COORD_LAGGARD_PREFIX + names (spec 117), and the hint when it applies. */
static qf_status *laggard_status(qf_coord_member **ms, size_t n)
{
    char *names = running_names(ms, n);
    qf_status *st =
        qf_status_new(QF_DEADLINE_EXCEEDED, "%s%s%s", QF_COORD_LAGGARD_PREFIX,
                      names ? names : "(names lost: out of memory)", hosted_hint(ms, n));
    free(names);
    return st;
}

/* join_until's deadline passed before any stop. */
static qf_status *still_running_status(const char *what, qf_coord_member **ms, size_t n)
{
    char *names = running_names(ms, n);
    qf_status *st =
        qf_status_new(QF_DEADLINE_EXCEEDED,
                      "%s: the deadline passed before a stop was requested; still "
                      "running: %s%s",
                      what, names ? names : "(names lost: out of memory)", hosted_hint(ms, n));
    free(names);
    return st;
}

/* How one join waits, and for how long. */
typedef struct join_args {
    const char *what; /* the public call, for messages */
    const pthread_t *extra;
    size_t n_extra;
    /* until: `deadline` bounds the whole call; else the grace period
     * starts when join observes a stop (TensorFlow's join). */
    bool until;
    qf_deadline deadline;
    double grace_secs;
    bool ignore_live;
    qf_coord_join_report *report;
    const qf__join_driver *drv; /* NULL: sleep on the event count */
} join_args;

/* The members one join waits for: the registered set it took (ms[0 ..
 * n_reg), in registration order), then records for the extra threads
 * (xs, ms[n_reg .. n)). Counts are of distinct members (not `skip`). */
typedef struct join_set {
    qf_coord_member **ms;
    qf_coord_member *xs;
    size_t n, n_reg;
    size_t n_members, n_finished, n_running;
    /* ms[0 .. done_prefix) are all finished (or skipped): a member's end
     * is for good, so no look goes over them again. */
    size_t done_prefix;
} join_set;

/* What the wait ended with. */
typedef struct join_state {
    qf_deadline limit; /* join_until's deadline, or the grace period's end */
    int jfd;           /* the join fd of a driven join, else -1 */
    bool stopped, grace_expired, timed_out;
    qf_code drv_rc; /* the driver's error, which ends the join unjoined */
} join_state;

/* Put the list head..tail back in front of the registered set, order
 * kept. */
static void members_splice_front(qf_coord *c, qf_coord_member *head, qf_coord_member *tail)
{
    if (!head)
        return;
    pthread_mutex_lock(&c->lock);
    tail->next = c->members_head;
    if (!c->members_head)
        c->members_tail = tail;
    c->members_head = head;
    pthread_mutex_unlock(&c->lock);
}

/* Give the members join took back to the registered set, in front and in
 * their order, for the next join: those still running keep their place,
 * those that finished are released (hooked threads among them have been
 * reaped). */
static void members_put_back(qf_coord *c, qf_coord_member **ms, size_t n_reg)
{
    qf_coord_member *head = NULL, *tail = NULL;
    for (size_t i = 0; i < n_reg; i++) {
        qf_coord_member *m = ms[i];
        if (m->finished && !m->skip) {
            qf__coord_member_unref(m);
            continue;
        }
        m->next = NULL;
        if (tail)
            tail->next = m;
        else
            head = m;
        tail = m;
    }
    members_splice_front(c, head, tail);
}

/* Claim the one driven join of `c` and its join fd (*ret_jfd). */
static qf_code driven_begin(qf_coord *c, const join_args *a, int *ret_jfd)
{
    /* One driven join at a time: the join fd has one reader. seq_cst:
     * pairs with the load in qf__coord_wake_driven_join (qf_coord_signal.c),
     * so a member's end or a stop after this either is seen by the first
     * look or writes the fd. */
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong_explicit(&c->driven_joins, &zero, 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return qf_set_error(QF_FAILED_PRECONDITION,
                            "%s: another thread is already driving a join of this coordinator",
                            a->what);
    int jfd = qf__coord_fd_get(&c->join_fd);
    if (jfd < 0) {
        atomic_store_explicit(&c->driven_joins, 0, memory_order_seq_cst);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "%s: eventfd: %s", a->what, strerror(errno));
    }
    *ret_jfd = jfd;
    return QF_OK;
}

static void driven_end(qf_coord *c, const join_args *a)
{
    if (a->drv)
        atomic_store_explicit(&c->driven_joins, 0, memory_order_seq_cst);
}

/* Mark the duplicates of ms[0 .. n) `skip` and reset what the last join
 * left; returns the number of distinct members. A thread registered
 * twice, or also passed as extra, is one member (a set union in
 * TensorFlow, spec 115) and must be joined once. */
static size_t members_dedup(qf_coord_member **ms, size_t n)
{
    size_t n_members = 0;
    for (size_t i = 0; i < n; i++) {
        ms[i]->finished = false;
        ms[i]->skip = false;
        if (ms[i]->kind != MEMBER_TASK) {
            for (size_t j = 0; j < i; j++) {
                if (!ms[j]->skip && ms[j]->kind != MEMBER_TASK &&
                    pthread_equal(ms[i]->thread, ms[j]->thread)) {
                    ms[i]->skip = true;
                    break;
                }
            }
        }
        n_members += !ms[i]->skip;
    }
    return n_members;
}

/* Take the registered set (spec 120 empties it; members registered from
 * now on are left for the next join) and add records for the extra
 * threads. Out of memory: the set is put back. */
static qf_code members_take(qf_coord *c, const join_args *a, join_set *s)
{
    pthread_mutex_lock(&c->lock);
    qf_coord_member *head = c->members_head, *tail = c->members_tail;
    c->members_head = c->members_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    for (qf_coord_member *m = head; m; m = m->next)
        s->n_reg++;

    size_t n_extra = a->n_extra;
    s->ms = malloc((s->n_reg + n_extra + 1) * sizeof(*s->ms));
    s->xs = n_extra ? calloc(n_extra, sizeof(*s->xs)) : NULL;
    if (!s->ms || (n_extra && !s->xs)) {
        free(s->ms);
        free(s->xs);
        members_splice_front(c, head, tail);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "%s: out of memory", a->what);
    }
    for (qf_coord_member *m = head; m; m = m->next)
        s->ms[s->n++] = m;
    for (size_t i = 0; i < n_extra; i++) {
        qf_coord_member *x = &s->xs[i];
        x->c = c;
        x->kind = MEMBER_THREAD_FOREIGN;
        x->thread = a->extra[i];
        x->extra_index = i;
        s->ms[s->n++] = x;
    }
    s->n_members = members_dedup(s->ms, s->n);
    return QF_OK;
}

/* One look at the members: whether any is left, the first of them that is
 * a foreign thread, and whether any of them can announce its end.
 *
 * Why the look stops early. Each member's end wakes the join, and 10,000
 * runners stopping at once used to cost a look at all 10,000 per wake-up
 * (runners.stop_join.10000: 12-25 ms). Only "none left", "one that can
 * announce its end is left" and, when none can, "this foreign thread is
 * left" decide what the join does next, so the look goes past the finished
 * prefix (never looked at again) and stops at the first running member
 * that can announce its end: every member is looked at about once over the
 * whole join. Members past that point may be unpolled when the wait ends
 * without every member finished; members_poll_all() brings their
 * `finished` up to date before anything reads it. */
static bool members_left(join_set *s, qf_coord_member **ret_foreign, bool *ret_wakeable)
{
    while (s->done_prefix < s->n && member_poll(s->ms[s->done_prefix]))
        s->done_prefix++;
    bool left = false;
    for (size_t i = s->done_prefix; i < s->n; i++) {
        qf_coord_member *m = s->ms[i];
        if (member_poll(m))
            continue;
        left = true;
        if (m->kind != MEMBER_THREAD_FOREIGN) {
            *ret_wakeable = true;
            break;
        }
        if (!*ret_foreign)
            *ret_foreign = m;
    }
    return left;
}

/* Every member looked at once more (see members_left()). */
static void members_poll_all(join_set *s)
{
    for (size_t i = s->done_prefix; i < s->n; i++)
        (void)member_poll(s->ms[i]);
}

/* Whether a stop has come; the first time, the grace period starts and
 * the stop work runs, and the members are to be looked at again. */
static bool observe_stop(qf_coord *c, const join_args *a, join_state *js)
{
    uint32_t w = load_word(c);
    if (!(w & STOP))
        return false;
    js->stopped = true;
    if (!a->until) /* spec 117: the grace period starts now */
        js->limit = qf_deadline_in_s(a->grace_secs);
    settle(c, w); /* actions may be what unblocks the members */
    return true;
}

enum look {
    LOOK_DONE,  /* the wait is over: *js says why */
    LOOK_AGAIN, /* a stop came: look at the members again */
    LOOK_WAIT,  /* wait for a change */
};

/* What one look means (`left`: some member is still running). A look that
 * ends the wait gives the event count's ticket back. */
static enum look look_result(qf_coord *c, const join_args *a, join_state *js, bool left)
{
    bool look_again = left && !js->stopped && observe_stop(c, a, js);
    if (left && !look_again && !qf_deadline_passed(js->limit))
        return LOOK_WAIT;
    if (!a->drv)
        qf_eventcount_cancel(&c->ec);
    if (!left)
        return LOOK_DONE;
    if (look_again)
        return LOOK_AGAIN;
    if (js->stopped)
        js->grace_expired = true;
    else
        js->timed_out = true;
    return LOOK_DONE;
}

enum wait_step {
    WAIT_AGAIN,   /* look at the members again */
    WAIT_END,     /* the driver failed */
    WAIT_FOREIGN, /* only foreign threads are left: join one */
};

/* Wait for a member's end or a stop (the ticket's, or the driver's). */
static enum wait_step wait_for_change(qf_coord *c, const join_args *a, join_state *js,
                                      uint32_t ticket, bool wakeable)
{
    const qf__join_driver *drv = a->drv;
    if (drv) {
        /* Run what is runnable; sleep (poll(2) on the runtime's fd and
         * the join fd) only when something can announce its end. */
        bool ran = false;
        js->drv_rc = drv->drive(drv->ctx, wakeable, js->limit, js->jfd, &ran);
        if (js->drv_rc != QF_OK)
            return WAIT_END;
        if (wakeable || ran)
            return WAIT_AGAIN;
    } else if (wakeable) {
        qf_eventcount_wait_until(&c->ec, ticket, js->limit);
        return WAIT_AGAIN;
    } else {
        qf_eventcount_cancel(&c->ec);
    }
    return WAIT_FOREIGN;
}

/* Wait until every member has finished, the limit passes, or the driver
 * fails; *js says which. */
static void members_wait(qf_coord *c, const join_args *a, join_set *s, join_state *js)
{
    for (;;) {
        /* Prepare before looking: a member_done or a stop after this
         * ticket (or, driven, after this drain) ends the wait below at
         * once. */
        uint32_t ticket = 0;
        if (a->drv)
            qf__coord_fd_drain(js->jfd);
        else
            ticket = qf_eventcount_prepare(&c->ec);
        qf_coord_member *foreign = NULL;
        bool wakeable = false;
        bool left = members_left(s, &foreign, &wakeable);
        enum look look = look_result(c, a, js, left);
        if (look == LOOK_DONE)
            return;
        if (look == LOOK_AGAIN)
            continue;
        enum wait_step step = wait_for_change(c, a, js, ticket, wakeable);
        if (step == WAIT_END)
            return;
        if (step == WAIT_AGAIN)
            continue;
        /* Only threads that cannot announce their end are left: join them.
         * Before a stop that is a plain pthread_join (documented: a later
         * stop is noticed when it returns); after, bounded by the limit. */
        int r = timedjoin_mono(foreign->thread, js->stopped || a->until ? js->limit : QF_FOREVER);
        if (r != ETIMEDOUT)
            foreign->finished = true;
    }
}

static void members_count(join_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->ms[i]->skip)
            continue;
        if (s->ms[i]->finished)
            s->n_finished++;
        else
            s->n_running++;
    }
}

/* A cleared report with `code`, `status` (taken) and the members. */
static void report_fill(qf_coord_join_report *r, qf_code code, qf_status *status, const join_set *s)
{
    memset(r, 0, sizeof(*r));
    r->code = code;
    r->status = status;
    r->n_members = s->n_members;
    r->n_finished = s->n_finished;
    r->finished = collect_names(s->ms, s->n, true, s->n_finished);
    r->n_running = s->n_running;
    r->running = collect_names(s->ms, s->n, false, s->n_running);
}

/* The join did not happen: nothing is recorded as joined, and the members
 * still running stay registered for the next join. */
static qf_code join_abandon(qf_coord *c, const join_args *a, const join_state *js, join_set *s)
{
    qf_code code = js->drv_rc;
    qf_status *st = NULL;
    if (js->timed_out) {
        st = still_running_status(a->what, s->ms, s->n);
        code = qf_set_error(QF_DEADLINE_EXCEEDED, "%s", qf_status_message(st));
    } else {
        st = qf_last_status();
    }
    if (a->report) {
        report_fill(a->report, code, st, s);
        st = NULL;
    }
    qf_status_free(st);
    members_put_back(c, s->ms, s->n_reg);
    return code;
}

/* Every member finished, or the grace period expired: record the join and
 * report (spec 119-120: the recorded status wins; then the laggards). */
static qf_code join_finish(qf_coord *c, const join_args *a, const join_state *js, join_set *s)
{
    /* A stop that came in while the members were finishing (or with no
     * members at all) still gets its stop work from this call. */
    uint32_t w_end = load_word(c);
    if (w_end & STOP)
        settle(c, w_end);

    pthread_mutex_lock(&c->lock);
    atomic_store_explicit(&c->joined, 1, memory_order_release);
    qf_status *result = c->recorded ? qf_status_copy(c->recorded) : NULL;
    uint64_t dropped = c->dropped;
    pthread_mutex_unlock(&c->lock);

    if (!result && s->n_running && !a->ignore_live)
        result = laggard_status(s->ms, s->n);
    qf_code code = QF_OK;
    if (result)
        code = qf_set_error(qf_status_code(result), "%s", qf_status_message(result));

    if (a->report) {
        report_fill(a->report, code, result, s);
        result = NULL;
        a->report->stop_requested = js->stopped || (w_end & STOP);
        a->report->grace_expired = js->grace_expired;
        a->report->n_dropped = dropped;
    }
    qf_status_free(result);

    for (size_t i = 0; i < s->n_reg; i++)
        qf__coord_member_unref(s->ms[i]);
    return code;
}

/* What a task does instead of a join (join has no poll form). */
#define JOIN_INSTEAD                                                                               \
    "check qf_coord_members_done() (non-blocking) from the task, and join from a thread that "     \
    "runs no tasks once it is true"

static qf_code join_impl(qf_coord *c, const join_args *a)
{
    if (qf__in_task())
        return qf__blocking_in_task_error_instead(a->what, JOIN_INSTEAD);
    join_state js = {.limit = a->until ? a->deadline : QF_FOREVER, .jfd = -1, .drv_rc = QF_OK};
    if (a->drv) {
        qf_code rc = driven_begin(c, a, &js.jfd);
        if (rc != QF_OK)
            return rc;
    }
    join_set s = {0};
    qf_code code = members_take(c, a, &s);
    if (code != QF_OK) {
        driven_end(c, a);
        return code;
    }
    members_wait(c, a, &s, &js);
    driven_end(c, a);
    members_poll_all(&s);
    members_count(&s);
    if (js.drv_rc != QF_OK || js.timed_out)
        code = join_abandon(c, a, &js, &s);
    else
        code = join_finish(c, a, &js, &s);
    free(s.xs);
    free(s.ms);
    return code;
}

qf_code qf_coord_join(qf_coord *c, const pthread_t *extra_threads, size_t n_extra,
                      double stop_grace_period_secs, bool ignore_live_threads,
                      qf_coord_join_report *ret_report)
{
    if (!c)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_join: the coordinator is NULL");
    if (n_extra && !extra_threads)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_join: extra_threads is NULL with n_extra > 0");
    if (qf__in_task())
        return qf__blocking_in_task_error_instead("qf_coord_join", JOIN_INSTEAD);
    if (!(stop_grace_period_secs >= 0))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_join: stop_grace_period_secs must be >= 0 (got %g)",
                            stop_grace_period_secs);
    join_args a = {.what = "qf_coord_join",
                   .extra = extra_threads,
                   .n_extra = n_extra,
                   .grace_secs = stop_grace_period_secs,
                   .ignore_live = ignore_live_threads,
                   .report = ret_report};
    return join_impl(c, &a);
}

qf_code qf_coord_join_until(qf_coord *c, const pthread_t *extra_threads, size_t n_extra,
                            qf_deadline deadline, bool ignore_live_threads,
                            qf_coord_join_report *ret_report)
{
    if (!c)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_join_until: the coordinator is NULL");
    if (n_extra && !extra_threads)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_join_until: extra_threads is NULL with n_extra > 0");
    if (deadline < QF_FOREVER)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_join_until: deadline %lld is not a deadline (>= 0, or "
                            "QF_FOREVER)",
                            (long long)deadline);
    join_args a = {.what = "qf_coord_join_until",
                   .extra = extra_threads,
                   .n_extra = n_extra,
                   .until = true,
                   .deadline = deadline,
                   .ignore_live = ignore_live_threads,
                   .report = ret_report};
    return join_impl(c, &a);
}

qf_code qf__coord_join_driven(qf_coord *c, const char *what, bool until, qf_deadline deadline,
                              double grace_secs, bool ignore_live_threads,
                              qf_coord_join_report *ret_report, const qf__join_driver *drv)
{
    join_args a = {.what = what,
                   .until = until,
                   .deadline = deadline,
                   .grace_secs = grace_secs,
                   .ignore_live = ignore_live_threads,
                   .report = ret_report,
                   .drv = drv};
    return join_impl(c, &a);
}
