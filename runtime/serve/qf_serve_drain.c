/* qf_serve_drain.c - ending a batcher's service: begin (stop admitting,
 * hand out what is queued), wait for the end, cancel what is left at the
 * deadline, report.
 *
 * The drain flag lives in the admission word, so after the fetch_or that
 * sets it no submit can add to depth: depth can only fall, and "flag set,
 * depth 0, nothing in flight" is final. Consumers enforce the drain's
 * deadline themselves when they look (form_locked), so a Coordinator stop
 * (a stop action must not block) drains completely without anyone waiting
 * in qf_serve_drain().
 */
#include <sched.h>

#include "qf_lock-impl.h"
#include "qf_serve-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"

void qf_serve_begin_drain(qf_serve *s, qf_deadline deadline)
{
    if (!s) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_serve_begin_drain: batcher (s) is NULL");
        return;
    }
    /* The deadline first: a consumer that sees the flag sees it. Only an
     * earlier deadline replaces the one in force. */
    qf_deadline cur = atomic_load_explicit(&s->drain_deadline, memory_order_acquire);
    while (qf_deadline_min(cur, deadline) != cur &&
           !atomic_compare_exchange_weak_explicit(&s->drain_deadline, &cur, deadline,
                                                  memory_order_seq_cst, memory_order_acquire))
        ;
    atomic_fetch_or_explicit(&s->adm, QF__ADM_DRAIN, memory_order_seq_cst);
    qf__serve_wake_all(s);
}

static bool finished(qf_serve *s)
{
    /* Depth first: hand-outs raise in_flight before they lower depth. */
    uint64_t a = atomic_load_explicit(&s->adm, memory_order_seq_cst);
    return (a & QF__ADM_DEPTH) == 0 &&
           atomic_load_explicit(&s->in_flight, memory_order_seq_cst) == 0;
}

/* Answer everything still queued CANCELLED, from this thread. */
static void cancel_now(qf_serve *s)
{
    atomic_fetch_or_explicit(&s->adm, QF__ADM_CANCEL, memory_order_seq_cst);
    qf_serve_request *list = NULL;
    qf__lock(&s->lock);
    qf__serve_cancel_locked(s, &list);
    qf__unlock(&s->lock);
    qf__serve_answer_list(list, QF_CANCELLED);
    qf_waitlist_wake(&s->consumers, INT32_MAX); /* they end: nothing left */
}

qf_code qf_serve_drain(qf_serve *s, qf_deadline deadline, qf_serve_report *ret_report)
{
    if (!s)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_drain: NULL batcher");
    qf_serve_begin_drain(s, deadline);
    bool in_task = qf__in_task();
    qf_code rc = QF_OK;
    while (!finished(s)) {
        if (in_task || (deadline != QF_FOREVER && qf_deadline_passed(deadline))) {
            if (atomic_load_explicit(&s->adm, memory_order_seq_cst) & QF__ADM_DEPTH) {
                cancel_now(s);
                /* A submit between its reservation and its enqueue (or a
                 * drop handing its place on) is a few instructions from
                 * done: let it finish, then sweep again. */
                if (atomic_load_explicit(&s->adm, memory_order_seq_cst) & QF__ADM_DEPTH)
                    sched_yield();
                continue;
            }
            rc = qf_set_error(
                QF_DEADLINE_EXCEEDED,
                "batcher '%s': %llu requests still in flight at the drain deadline", s->name,
                (unsigned long long)atomic_load_explicit(&s->in_flight, memory_order_relaxed));
            break;
        }
        uint32_t t = qf_eventcount_prepare(&s->quiet);
        if (finished(s)) {
            qf_eventcount_cancel(&s->quiet);
            break;
        }
        qf_eventcount_wait_until(&s->quiet, t, deadline);
    }
    if (ret_report) {
        qf_serve_stats st;
        qf_serve_get_stats(s, &st);
        *ret_report = st.counts;
    }
    return rc;
}
