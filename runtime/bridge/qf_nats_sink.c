/* qf_nats_sink.c - publishing a queue's elements to JetStream.
 *
 * One run of the op (a task of a QueueRunner):
 *   1. reserve a credit (max_pending in all: publishes awaiting their ack).
 *      None left: the task parks on the sink's wait list; the libnats
 *      thread delivering a publish ack returns a credit and wakes it;
 *   2. dequeue an element (poll form: parks while the input is empty);
 *   3. encode it, make the message (subject, payload, Nats-Msg-Id) and push
 *      it to the bridge thread, which calls js_PublishMsgAsync (the call
 *      that may block on a socket write).
 * Acks arrive on libnats's thread (on_pub_ack): success returns the credit;
 * a transient failure (ack timeout, no responders while a leader is
 * elected, a disconnect) sends the same message, same Nats-Msg-Id, back to
 * the bridge to be published again after a back-off (50 ms doubling to
 * 1 s), so JetStream stores it once; a permanent failure (too large, no
 * such stream) becomes the sink's error, which the next run reports and
 * which stops the Coordinator at once. When no publish has succeeded for
 * retry_for_s, the retries give up with QF_UNAVAILABLE.
 *
 * Order: messages leave in the order they were dequeued, except that a
 * retried message lands after those published while it waited.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qf_futex.h"
#include "qf_nats-impl.h"
#include "qf_status-impl.h"
#include "qf_waitlist-impl.h"

#define BACKOFF_MIN_NS 50000000
#define BACKOFF_MAX_NS 1000000000

/* ------------------------------------------------------------ references */

static void sink_destroy(qf_nats_sink *s)
{
    for (qf__nsink_op *op = s->ops, *next; op; op = next) {
        next = op->next;
        qf_queue_unref(op->input);
        free(op);
    }
    jsCtx_Destroy(s->js);
    qf_waitlist_destroy(&s->wl);
    pthread_mutex_destroy(&s->ops_mu);
    pthread_mutex_destroy(&s->err_mu);
    qf_status_free(atomic_load(&s->error));
    free(s->subject);
    free(s->stream);
    free(s->name);
    free(s->id_prefix);
    free(s);
}

void qf__nsink_ref(qf_nats_sink *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void qf__nsink_unref(qf_nats_sink *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        sink_destroy(s);
}

static bool closed(qf_nats_sink *s)
{
    return (atomic_load(&s->gate) & QF__GATE_CLOSED) != 0;
}

static void wake_waiters(qf_nats_sink *s)
{
    /* after the caller's seq_cst RMW (hence the seq_cst count, see
     * qf_waitlist-impl.h): a waiter that registered before it
     * is counted here, one that registers after re-checks and sees it */
    if (qf__waitlist_count_sc(&s->wl))
        qf_waitlist_wake(&s->wl, INT32_MAX);
}

/* ---------------------------------------------------------- completion */

/* One publish is over (acked or failed for good). */
static void complete(qf_nats_sink *s)
{
    atomic_fetch_add(&s->credits, 1);
    if (atomic_fetch_sub(&s->in_flight, 1) == 1) {
        atomic_fetch_add(&s->idle, 1);
        qf_futex_wake(&s->idle, INT32_MAX);
        /* a drain may be waiting for this; after qf_nats_sink_free() (an
         * ack that outlived its flush) the connection may be gone */
        if (qf__gate_enter(&s->gate)) {
            qf__nats_kick(s->n);
            qf__gate_leave(&s->gate);
        }
    }
    wake_waiters(s);
    qf__nsink_unref(s); /* the publish's reference */
}

static void set_fatal(qf_nats_sink *s, qf_status *st)
{
    qf_status *none = NULL;
    if (!atomic_compare_exchange_strong(&s->error, &none, st)) {
        qf_status_free(st);
        return;
    }
    /* the Coordinator is borrowed until qf_nats_sink_free() */
    if (s->stop.coord && qf__gate_enter(&s->gate)) {
        qf_coord_request_stop(s->stop.coord, qf_status_copy(st));
        qf__gate_leave(&s->gate);
    }
    wake_waiters(s);
}

/* A publish failed for good: record why, drop the message. */
static void fail(qf_nats_sink *s, natsMsg *msg, natsStatus err, jsErrCode jerr, const char *text)
{
    atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
    int len = natsMsg_GetDataLength(msg);
    qf_code code;
    if (err == NATS_MAX_PAYLOAD)
        code = qf_set_error(QF_RESOURCE_EXHAUSTED,
                            "NATS sink '%s': a message of %d bytes exceeds the server's "
                            "max_payload of %" PRId64 " bytes",
                            s->name, len, qf_nats_max_payload(s->n));
    else if (jerr == JSStreamMessageExceedsMaximumErr)
        code = qf_set_error(QF_RESOURCE_EXHAUSTED,
                            "NATS sink '%s': a message of %d bytes exceeds the maximum message "
                            "size of the stream of subject '%s' (JetStream error %d: %s)",
                            s->name, len, s->subject, (int)jerr, text ? text : "");
    else if (jerr == JSStreamNotMatchErr)
        code = qf_set_error(QF_NOT_FOUND,
                            "NATS sink '%s': subject '%s' is not stored in stream '%s' "
                            "(JetStream error %d)",
                            s->name, s->subject, s->stream ? s->stream : "", (int)jerr);
    else
        code = qf__nats_error(err, jerr, "NATS sink '%s': publishing to '%s'%s%s", s->name,
                              s->subject, text ? ": " : "", text ? text : "");
    (void)code;
    set_fatal(s, qf_last_status());
    natsMsg_Destroy(msg);
    complete(s);
}

static int64_t backoff_ns(qf_nats_sink *s)
{
    uint32_t k = atomic_load(&s->consecutive_failures);
    int64_t b = BACKOFF_MIN_NS;
    for (uint32_t i = 1; i < k && b < BACKOFF_MAX_NS; i++)
        b *= 2;
    return b < BACKOFF_MAX_NS ? b : BACKOFF_MAX_NS;
}

static void note_transient(qf_nats_sink *s, natsStatus err, jsErrCode jerr, const char *text)
{
    int64_t zero = 0;
    atomic_compare_exchange_strong(&s->failing_since, &zero, qf_now_ns());
    atomic_fetch_add(&s->consecutive_failures, 1);
    pthread_mutex_lock(&s->err_mu);
    snprintf(s->last_transient, sizeof(s->last_transient), "%s%s%.100s",
             text && *text ? "" : natsStatus_GetText(err), jerr ? " " : "", text ? text : "");
    pthread_mutex_unlock(&s->err_mu);
}

static void on_pub_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    (void)js;
    qf_nats_sink *s = closure;
    if (pa) {
        atomic_fetch_add_explicit(&s->acked, 1, memory_order_relaxed);
        if (pa->Duplicate)
            atomic_fetch_add_explicit(&s->duplicates, 1, memory_order_relaxed);
        atomic_store(&s->failing_since, 0);
        atomic_store(&s->consecutive_failures, 0);
        natsMsg_Destroy(msg);
        complete(s);
        return;
    }
    natsStatus err = pae ? pae->Err : NATS_ERR;
    jsErrCode jerr = pae ? pae->ErrCode : 0;
    const char *text = pae ? pae->ErrText : NULL;
    if (qf__nats_transient(err, jerr) && qf__gate_enter(&s->gate)) {
        note_transient(s, err, jerr, text);
        qf__npub *p = malloc(sizeof(*p));
        if (p) {
            p->node.kind = QF__N_RETRY;
            p->s = s;
            p->msg = msg;
            p->due = qf_now_ns() + backoff_ns(s);
            p->next_retry = NULL;
            qf__nstack_push(&s->n->cmds, &p->node);
            qf__nats_kick(s->n);
            qf__gate_leave(&s->gate);
            return;
        }
        qf__gate_leave(&s->gate);
    }
    fail(s, msg, err, jerr, text);
}

/* ----------------------------------------------------------------- bridge */

static void retry_insert(qf_nats_sink *s, qf__npub *p)
{
    qf__npub **pp = &s->retry_head;
    while (*pp && (*pp)->due <= p->due)
        pp = &(*pp)->next_retry;
    p->next_retry = *pp;
    *pp = p;
}

static void publish_now(qf_nats_sink *s, qf__npub *p, int64_t now)
{
    if (p->node.kind == QF__N_RETRY)
        atomic_fetch_add_explicit(&s->retries, 1, memory_order_relaxed);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = s->ack_timeout_ms;
    po.ExpectStream = s->stream;
    natsMsg *m = p->msg;
    natsStatus st = js_PublishMsgAsync(s->js, &m, &po);
    if (st == NATS_OK) { /* libnats owns the message; the ack comes to on_pub_ack */
        free(p);
        return;
    }
    if (qf__nats_transient(st, 0)) {
        note_transient(s, st, 0, NULL);
        p->node.kind = QF__N_RETRY;
        p->due = now + backoff_ns(s);
        retry_insert(s, p);
        return;
    }
    free(p);
    fail(s, m, st, 0, NULL);
}

void qf__nsink_on_publish(qf__npub *p, int64_t now)
{
    qf_nats_sink *s = p->s;
    if (p->node.kind == QF__N_RETRY && p->due > now) {
        retry_insert(s, p);
        return;
    }
    publish_now(s, p, now);
}

void qf__nsink_io(qf_nats_sink *s, int64_t now, int64_t *next)
{
    while (s->retry_head && s->retry_head->due <= now) {
        qf__npub *p = s->retry_head;
        s->retry_head = p->next_retry;
        int64_t since = atomic_load(&s->failing_since);
        if (since && now - since > s->retry_for_ns) {
            char why[160];
            pthread_mutex_lock(&s->err_mu);
            snprintf(why, sizeof(why), "%s", s->last_transient);
            pthread_mutex_unlock(&s->err_mu);
            atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
            set_fatal(s, qf_status_new(QF_UNAVAILABLE,
                                       "NATS sink '%s': no publish to '%s' acknowledged for "
                                       "%.1f s (last error: %s)",
                                       s->name, s->subject, (double)(now - since) / 1e9, why));
            natsMsg_Destroy(p->msg);
            free(p);
            complete(s);
            continue;
        }
        publish_now(s, p, now);
    }
    if (s->retry_head) /* QF_FOREVER is -1: compare as deadlines */
        *next = qf_deadline_min(*next, s->retry_head->due);
    uint32_t flags = atomic_exchange(&s->flags, 0);
    if (flags & QF__F_DRAIN)
        s->draining = true;
    if ((flags & QF__F_RESUME) && !s->draining && !atomic_load(&s->member_live)) {
        qf__nstop_resumed(&s->stop);
        atomic_store(&s->member_live, s->stop.member != NULL);
    }
    if (s->draining && atomic_load(&s->in_flight) == 0) {
        s->draining = false;
        qf__nstop_drained(&s->stop);
        atomic_store(&s->member_live, false);
        atomic_fetch_add(&s->drained, 1);
        qf_futex_wake(&s->drained, INT32_MAX);
    }
}

static void request(qf_nats_sink *s, uint32_t flag)
{
    atomic_fetch_or(&s->flags, flag);
    qf__nats_kick(s->n);
}

static void stop_action(void *arg)
{
    request(arg, QF__F_DRAIN);
}

/* ---------------------------------------------------------------- the op */

static qf_code sink_error(qf_nats_sink *s)
{
    qf_status *err = atomic_load(&s->error);
    if (err)
        return qf_set_error(qf_status_code(err), "%s", qf_status_message(err));
    if (closed(s))
        return qf_set_error(QF_CANCELLED, "NATS sink '%s' is closed", s->name);
    return QF_OK;
}

static bool take_credit(qf_nats_sink *s)
{
    int64_t c = atomic_load(&s->credits);
    while (c > 0)
        if (atomic_compare_exchange_weak(&s->credits, &c, c - 1))
            return true;
    return false;
}

static void give_credit(qf_nats_sink *s)
{
    atomic_fetch_add(&s->credits, 1);
    wake_waiters(s);
}

/* The Nats-Msg-Id of an element, into buf; "" for none. */
static qf_code msg_id(qf_nats_sink *s, const qf_element *e, char *buf, size_t cap)
{
    buf[0] = 0;
    if (s->id_from_component) {
        qf_tensor *t = qf_element_get(e, s->id_component);
        if (!t || qf_tensor_shape(t)->rank != 0)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "NATS sink '%s': id component %zu is missing or not a scalar",
                                s->name, s->id_component);
        const void *d = qf_tensor_cdata(t);
        switch (qf_tensor_dtype(t)) {
        case QF_STRING: {
            size_t len = 0;
            const char *str = qf_tensor_string(t, 0, &len);
            if (len == 0 || len >= cap || memchr(str, '\r', len) || memchr(str, '\n', len) ||
                memchr(str, 0, len))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "NATS sink '%s': id component %zu must be 1 to %zu bytes "
                                    "without CR, LF or NUL (got %zu bytes)",
                                    s->name, s->id_component, cap - 1, len);
            memcpy(buf, str, len);
            buf[len] = 0;
            return QF_OK;
        }
        case QF_INT64:
            snprintf(buf, cap, "%" PRId64, *(const int64_t *)d);
            return QF_OK;
        case QF_INT32:
            snprintf(buf, cap, "%" PRId32, *(const int32_t *)d);
            return QF_OK;
        case QF_UINT64:
            snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)d);
            return QF_OK;
        case QF_UINT32:
            snprintf(buf, cap, "%" PRIu32, *(const uint32_t *)d);
            return QF_OK;
        default:
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "NATS sink '%s': id component %zu is %s; it must be a string or "
                                "an integer",
                                s->name, s->id_component, qf_dtype_name(qf_tensor_dtype(t)));
        }
    }
    if (s->id_prefix)
        snprintf(buf, cap, "%s-%" PRId64, s->id_prefix, atomic_fetch_add(&s->next_id, 1));
    return QF_OK;
}

/* Encode `e` (taken, freed either way) and hand it to the bridge. The
 * caller holds a credit, which this call keeps on success. */
static qf_code submit(qf_nats_sink *s, qf_element *e)
{
    void *buf = NULL;
    const char *data;
    size_t len = 0;
    char id[256];
    qf_code rc = msg_id(s, e, id, sizeof(id));
    if (rc != QF_OK)
        goto out;
    if (s->payload == QF_NATS_PAYLOAD_COMPONENT) {
        qf_tensor *t = qf_element_get(e, s->payload_component);
        if (!t || qf_tensor_dtype(t) != QF_STRING || qf_tensor_shape(t)->rank != 0) {
            rc = qf_set_error(QF_INVALID_ARGUMENT,
                              "NATS sink '%s': payload component %zu is missing or not a scalar "
                              "string",
                              s->name, s->payload_component);
            goto out;
        }
        data = qf_tensor_string(t, 0, &len);
    } else {
        if ((rc = qf_nats_encoded_size(e, &len)) != QF_OK)
            goto out;
        if (!(buf = malloc(len ? len : 1))) {
            rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "NATS sink '%s': out of memory", s->name);
            goto out;
        }
        if ((rc = qf_nats_encode(e, buf, len, &len)) != QF_OK)
            goto out;
        data = buf;
    }
    /* the server counts the headers too: "NATS/1.0\r\n", one line per
     * header, a blank line */
    size_t hdr = 0;
    if (id[0])
        hdr += strlen("Nats-Msg-Id: \r\n") + strlen(id);
    if (s->stream)
        hdr += strlen("Nats-Expected-Stream: \r\n") + strlen(s->stream);
    if (hdr)
        hdr += strlen("NATS/1.0\r\n\r\n");
    int64_t max = qf_nats_max_payload(s->n);
    if ((max > 0 && (int64_t)(len + hdr) > max) || len > INT_MAX) {
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED,
                          "NATS sink '%s': an element of %zu bytes (%zu with headers) exceeds "
                          "the server's max_payload of %" PRId64 " bytes",
                          s->name, len, len + hdr, max);
        goto out;
    }
    natsMsg *m = NULL;
    natsStatus st = natsMsg_Create(&m, s->subject, NULL, data, (int)len);
    if (st == NATS_OK && id[0])
        st = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
    qf__npub *p = st == NATS_OK ? malloc(sizeof(*p)) : NULL;
    if (!p) {
        natsMsg_Destroy(m);
        rc = st == NATS_OK
                 ? qf_set_error(QF_RESOURCE_EXHAUSTED, "NATS sink '%s': out of memory", s->name)
                 : qf__nats_error(st, 0, "NATS sink '%s': making a message", s->name);
        goto out;
    }
    p->node.kind = QF__N_PUBLISH;
    p->s = s;
    p->msg = m;
    p->due = 0;
    p->next_retry = NULL;
    if (!qf__gate_enter(&s->gate)) {
        natsMsg_Destroy(m);
        free(p);
        rc = qf_set_error(QF_CANCELLED, "NATS sink '%s' is closed", s->name);
        goto out;
    }
    qf__nsink_ref(s); /* the publish's, dropped by complete() */
    atomic_fetch_add(&s->in_flight, 1);
    atomic_fetch_add_explicit(&s->published, 1, memory_order_relaxed);
    qf__nstack_push(&s->n->cmds, &p->node);
    qf__nats_kick(s->n);
    qf__gate_leave(&s->gate);
out:
    free(buf);
    qf_element_free(e);
    return rc;
}

/* Park `w` on the sink's list unless `ready` holds after registering. */
static bool park(qf_nats_sink *s, qf_waker *w, bool (*ready)(qf_nats_sink *))
{
    qf_waitlist_register(&s->wl, w);
    if (ready(s) || atomic_load(&s->error) || closed(s)) {
        qf_waker_withdraw(w);
        return false;
    }
    return true;
}

static bool has_credit(qf_nats_sink *s)
{
    return atomic_load(&s->credits) > 0;
}

static bool idle(qf_nats_sink *s)
{
    return atomic_load(&s->in_flight) == 0;
}

static qf_code sink_poll(qf_task *task, void *arg)
{
    qf__nsink_op *op = arg;
    qf_nats_sink *s = op->s;
    qf_waker *w = qf_task_waker(task);
    qf_code rc = sink_error(s);
    if (rc != QF_OK)
        return rc;
    /* a run in a new epoch after a stop drained it */
    if (s->stop.coord && !atomic_load(&s->member_live) && !qf_coord_should_stop(s->stop.coord))
        request(s, QF__F_RESUME);
    while (!take_credit(s)) {
        if (park(s, w, has_credit))
            return QF_PENDING;
        if ((rc = sink_error(s)) != QF_OK)
            return rc;
    }
    qf_element *e = NULL;
    rc = qf_queue_poll_dequeue(op->input, w, &e);
    if (rc != QF_OK) {
        give_credit(s);
        if (rc != QF_OUT_OF_RANGE)
            return rc; /* QF_PENDING, or an error of the input */
        /* the input ended: done once every publish is acknowledged */
        if (!idle(s) && park(s, w, idle))
            return QF_PENDING;
        if ((rc = sink_error(s)) != QF_OK)
            return rc;
        request(s, QF__F_DRAIN); /* nothing in flight: the member is done */
        return qf_set_error(QF_OUT_OF_RANGE,
                            "NATS sink '%s': input queue '%s' is closed and "
                            "drained; every publish is acknowledged",
                            s->name, qf_queue_name(op->input));
    }
    rc = submit(s, e);
    if (rc != QF_OK)
        give_credit(s);
    return rc;
}

qf_code qf_nats_sink_op(qf_nats_sink *s, qf_queue *input, qf_enqueue_op *ret_op)
{
    if (!s || !input || !ret_op)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_sink_op: %s is NULL",
                            !s       ? "s"
                            : !input ? "input"
                                     : "ret_op");
    qf__nsink_op *op = calloc(1, sizeof(*op));
    if (!op)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_sink_op: out of memory");
    op->s = s;
    op->input = qf_queue_ref(input);
    pthread_mutex_lock(&s->ops_mu);
    op->next = s->ops;
    s->ops = op;
    pthread_mutex_unlock(&s->ops_mu);
    *ret_op = (qf_enqueue_op){
        .name = "nats_publish", .kind = QF_OP_POLL, .poll = sink_poll, .arg = op, .input = input};
    return QF_OK;
}

static qf_code close_nothing(void *arg)
{
    (void)arg;
    return QF_OK;
}

static void runner_cleanup(void *arg)
{
    qf__nsink_unref(arg);
}

qf_code qf_nats_sink_runner(qf_nats_sink *s, qf_queue *input, size_t n_ops, qf_queue_runner **ret)
{
    if (!ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_sink_runner: ret is NULL");
    if (n_ops > 1024)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_sink_runner: n_ops %zu above 1024",
                            n_ops);
    qf_enqueue_op op;
    qf_code rc = qf_nats_sink_op(s, input, &op);
    if (rc != QF_OK)
        return rc;
    size_t n = n_ops ? n_ops : 1;
    qf_enqueue_op *ops = malloc(n * sizeof(*ops));
    if (!ops)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_sink_runner: out of memory");
    for (size_t i = 0; i < n; i++)
        ops[i] = op;
    qf_queue_runner_options ro = {.close_op = close_nothing,
                                  .close_op_name = "nats_publish_done",
                                  .cleanup = runner_cleanup,
                                  .cleanup_arg = s};
    qf__nsink_ref(s);
    rc = qf_queue_runner_new(input, ops, n, &ro, ret);
    free(ops);
    if (rc != QF_OK)
        qf__nsink_unref(s);
    return rc;
}

/* -------------------------------------------------------- create and free */

static qf_code bad(const char *what)
{
    return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_sink_new: %s", what);
}

qf_code qf_nats_sink_new(qf_nats *n, const qf_nats_sink_options *o, qf_nats_sink **ret_s)
{
    if (!n || !o || !ret_s)
        return bad(!n ? "n is NULL" : !o ? "options are NULL" : "ret_s is NULL");
    qf_code rc = qf__nats_not_in_task("qf_nats_sink_new");
    if (rc != QF_OK)
        return rc;
    if (!o->subject || !*o->subject || strpbrk(o->subject, " \t\r\n*>"))
        return bad("subject must be a subject without wildcards or spaces");
    if (o->max_pending < 0 || o->ack_timeout_s < 0 || o->retry_for_s < 0 || o->id_start < 0)
        return bad("max_pending, ack_timeout_s, retry_for_s and id_start must not be negative");
    if (o->payload != QF_NATS_PAYLOAD_ELEMENT && o->payload != QF_NATS_PAYLOAD_COMPONENT)
        return bad("unknown payload kind");
    if (o->id_prefix &&
        (!*o->id_prefix || strlen(o->id_prefix) > 200 || strpbrk(o->id_prefix, "\r\n")))
        return bad("id_prefix must be 1 to 200 bytes without CR or LF");

    qf_nats_sink *s = calloc(1, sizeof(*s));
    if (!s)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_sink_new: out of memory");
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->ops_mu, NULL);
    pthread_mutex_init(&s->err_mu, NULL);
    qf_waitlist_init(&s->wl);
    s->n = n;
    s->payload = o->payload;
    s->payload_component = o->payload_component;
    s->id_from_component = o->id_from_component;
    s->id_component = o->id_component;
    s->max_pending = o->max_pending ? o->max_pending : 256;
    s->ack_timeout_ms = (int64_t)((o->ack_timeout_s > 0 ? o->ack_timeout_s : 5.0) * 1000 + 0.5);
    if (s->ack_timeout_ms < 1)
        s->ack_timeout_ms = 1;
    s->retry_for_ns = (int64_t)((o->retry_for_s > 0 ? o->retry_for_s : 60.0) * 1e9);
    atomic_init(&s->credits, s->max_pending);
    atomic_init(&s->next_id, o->id_start);
    s->subject = strdup(o->subject);
    s->name = strdup(o->name ? o->name : o->subject);
    s->stream = o->stream ? strdup(o->stream) : NULL;
    s->id_prefix = o->id_prefix ? strdup(o->id_prefix) : NULL;
    if (!s->subject || !s->name || (o->stream && !s->stream) || (o->id_prefix && !s->id_prefix)) {
        sink_destroy(s);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_sink_new: out of memory");
    }
    if (s->stream) {
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        natsStatus st;
        /* retried while a leader is elected, as qf_nats_consumer_new() does */
        qf_deadline until = qf_deadline_in_ns(3 * n->request_timeout_ms * 1000000);
        int64_t pause = 100000000;
        for (;;) {
            jerr = 0;
            st = js_GetStreamInfo(&si, n->js, s->stream, NULL, &jerr);
            jsStreamInfo_Destroy(si);
            si = NULL;
            if (!qf__nats_transient(st, jerr) || qf_deadline_passed(until))
                break;
            struct timespec ts = {0, pause};
            nanosleep(&ts, NULL);
            pause = pause < 500000000 ? pause * 2 : 999999999;
        }
        if (st != NATS_OK) {
            rc = jerr == JSStreamNotFoundErr || st == NATS_NOT_FOUND
                     ? qf_set_error(QF_NOT_FOUND, "NATS stream '%s' not found", s->stream)
                     : qf__nats_error(st, jerr, "NATS sink '%s': looking up stream '%s'", s->name,
                                      s->stream);
            sink_destroy(s);
            return rc;
        }
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = n->request_timeout_ms;
    jo.PublishAsync.AckHandler = on_pub_ack;
    jo.PublishAsync.AckHandlerClosure = s;
    natsStatus st = natsConnection_JetStream(&s->js, n->nc, &jo);
    if (st != NATS_OK) {
        rc = qf__nats_error(st, 0, "NATS sink '%s': JetStream context", s->name);
        sink_destroy(s);
        return rc;
    }
    if ((rc = qf__nstop_init(&s->stop, o->coord, s->name, stop_action, s)) != QF_OK) {
        sink_destroy(s);
        return rc;
    }
    atomic_store(&s->member_live, s->stop.member != NULL);
    qf__nats_ref(n);
    pthread_mutex_lock(&n->mu);
    s->next = n->sinks;
    n->sinks = s;
    atomic_fetch_add(&n->list_gen, 1);
    pthread_mutex_unlock(&n->mu);
    qf__nats_kick(n);
    *ret_s = s;
    return QF_OK;
}

qf_code qf_nats_sink_flush(qf_nats_sink *s, qf_deadline deadline)
{
    if (!s)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_sink_flush: s is NULL");
    qf_code rc = qf__nats_not_in_task("qf_nats_sink_flush");
    if (rc != QF_OK)
        return rc;
    for (;;) {
        uint32_t v = atomic_load(&s->idle);
        if (atomic_load(&s->in_flight) == 0)
            break;
        if (qf_deadline_passed(deadline))
            return qf_set_error(QF_DEADLINE_EXCEEDED,
                                "NATS sink '%s': %lld publishes still await their acks", s->name,
                                (long long)atomic_load(&s->in_flight));
        qf_futex_wait_until(&s->idle, v, deadline);
    }
    qf_status *err = atomic_load(&s->error);
    if (err)
        return qf_set_error(qf_status_code(err), "%s", qf_status_message(err));
    return QF_OK;
}

void qf_nats_sink_free(qf_nats_sink *s)
{
    if (!s)
        return;
    qf_nats *n = s->n;
    (void)qf_nats_sink_flush(s, qf_deadline_in_ns(s->retry_for_ns + s->ack_timeout_ms * 1000000));
    qf__gate_close(&s->gate);
    wake_waiters(s); /* parked ops see it closed */
    pthread_mutex_lock(&n->mu);
    for (qf_nats_sink **pp = &n->sinks; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    atomic_fetch_add(&n->list_gen, 1);
    pthread_mutex_unlock(&n->mu);
    qf__nats_io_sync(n);
    /* retries still waiting (the flush timed out): the bridge no longer
     * looks at them */
    while (s->retry_head) {
        qf__npub *p = s->retry_head;
        s->retry_head = p->next_retry;
        atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
        natsMsg_Destroy(p->msg);
        free(p);
        complete(s);
    }
    qf__nstop_destroy(&s->stop);
    qf__nats_unref(n);
    qf__nsink_unref(s);
}

void qf_nats_sink_get_stats(const qf_nats_sink *cs, qf_nats_sink_stats *ret)
{
    if (!cs || !ret) {
        qf__set_error_static(QF_INVALID_ARGUMENT, cs ? "qf_nats_sink_get_stats: ret is NULL"
                                                     : "qf_nats_sink_get_stats: s is NULL");
        return;
    }
    qf_nats_sink *s = (qf_nats_sink *)cs;
    *ret = (qf_nats_sink_stats){
        .published = atomic_load_explicit(&s->published, memory_order_relaxed),
        .acked = atomic_load_explicit(&s->acked, memory_order_relaxed),
        .duplicates = atomic_load_explicit(&s->duplicates, memory_order_relaxed),
        .retries = atomic_load_explicit(&s->retries, memory_order_relaxed),
        .failed = atomic_load_explicit(&s->failed, memory_order_relaxed),
        .in_flight = atomic_load_explicit(&s->in_flight, memory_order_relaxed),
    };
}
