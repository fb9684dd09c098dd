/* qf_nats_source.c - the batch source over a consumer's inbox, the ack
 * tokens, and rejecting a batch.
 *
 * A source poll takes one slot from the inbox (a qflow pointer queue: the
 * task parks on it with its waker when it is empty, and the libnats thread
 * that delivers the next message wakes it through the queue), claims it
 * (READY -> OUT: a drain may have given it back in between), and builds
 * the example. The slot itself is the ack token: a QF_PTR scalar whose
 * destructor is qf__nats_token_release, so whoever frees the last tensor
 * holding it (the batch, normally) releases the slot to the bridge thread,
 * which sends the ack. Until the example is whole the slot's verdict is
 * NAK, so an allocation failure half-way gives the message back instead of
 * acking a message nobody saw.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_nats-impl.h"

typedef struct nsrc {
    qf_nats_consumer *c;
} nsrc;

static void src_free(void *arg)
{
    nsrc *s = arg;
    qf__nconsumer_unref(s->c);
    free(s);
}

/* A payload that does not decode or match: counted, terminated. */
static void bad_payload(qf_nats_consumer *c, qf__nslot *slot)
{
    atomic_fetch_add_explicit(&c->st.bad_payloads, 1, memory_order_relaxed);
    atomic_store_explicit(&c->st.last_bad_seq, slot->seq, memory_order_relaxed);
    atomic_store(&slot->verdict, QF__V_TERM);
    qf__nslot_release(slot);
}

static qf_code oom(qf_nats_consumer *c)
{
    return qf_set_error(QF_RESOURCE_EXHAUSTED,
                        "NATS consumer '%s': out of memory making an example", c->name);
}

/* The ack token: the slot in a QF_PTR scalar. On failure the slot is
 * released with a NAK verdict. */
static qf_tensor *token(qf__nslot *slot)
{
    atomic_store(&slot->verdict, QF__V_NAK);
    qf_tensor *t = qf_tensor_new_scalar_ptr(slot, qf__nats_token_release);
    if (!t)
        qf__nslot_release(slot);
    return t;
}

static qf_code record(qf_nats_consumer *c, qf__nslot *slot, qf_element **ret)
{
    natsMsg *m = slot->msg;
    char kbuf[320];
    const char *key = kbuf;
    size_t klen;
    if (c->key == QF_NATS_KEY_SUBJECT) {
        key = natsMsg_GetSubject(m);
        klen = strlen(key);
    } else {
        int w = snprintf(kbuf, sizeof(kbuf), "%s:%" PRIu64, c->stream, slot->seq);
        klen = w > 0 && (size_t)w < sizeof(kbuf) ? (size_t)w : strlen(kbuf);
    }
    qf_tensor *parts[3];
    parts[2] = token(slot);
    if (!parts[2])
        return oom(c);
    parts[0] = qf_tensor_new_string(key, klen);
    parts[1] = qf_tensor_new_string(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
    if (!parts[0] || !parts[1]) {
        for (int i = 0; i < 3; i++)
            qf_tensor_unref(parts[i]); /* the token's destructor releases the slot (NAK) */
        return oom(c);
    }
    qf_element *e = qf_element_of(3, parts); /* takes the parts, also on failure */
    if (!e)
        return oom(c);
    atomic_store(&slot->verdict, QF__V_ACK);
    *ret = e;
    return QF_OK;
}

static qf_code decoded(qf_nats_consumer *c, qf__nslot *slot, qf_element **ret)
{
    natsMsg *m = slot->msg;
    qf_element *d = NULL;
    qf_code rc = qf_nats_decode(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &d);
    if (rc == QF_DATA_LOSS) {
        bad_payload(c, slot);
        return QF_OK;
    }
    if (rc != QF_OK) {
        atomic_store(&slot->verdict, QF__V_NAK);
        qf__nslot_release(slot);
        return rc;
    }
    size_t n = c->ncomp;
    bool by_name = c->names && qf_element_has_names(d);
    if (qf_element_size(d) != n) {
        qf_element_free(d);
        bad_payload(c, slot);
        return QF_OK;
    }
    qf_element *out = qf_element_new(n + 1);
    if (!out) {
        qf_element_free(d);
        atomic_store(&slot->verdict, QF__V_NAK);
        qf__nslot_release(slot);
        return oom(c);
    }
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        if (by_name) {
            for (j = 0; j < n; j++)
                if (strcmp(qf_element_name(d, j), c->names[i]) == 0)
                    break;
        }
        qf_tensor *t = j < n ? qf_element_get(d, j) : NULL;
        bool ok = t && qf_tensor_dtype(t) == c->dtypes[i] &&
                  (!c->shapes || qf_shape_compatible(&c->shapes[i], qf_tensor_shape(t)));
        if (!ok) {
            qf_element_free(d);
            qf_element_free(out);
            bad_payload(c, slot);
            return QF_OK;
        }
        qf_element_set(out, i, qf_element_take(d, j));
    }
    qf_element_free(d);
    qf_tensor *t = token(slot);
    if (!t) {
        qf_element_free(out);
        return oom(c);
    }
    qf_element_set(out, n, t);
    if (c->out_names) {
        if (qf_element_set_names(out, c->out_names) != QF_OK) {
            qf_element_free(out); /* the token's destructor gives it back */
            return oom(c);
        }
    }
    atomic_store(&slot->verdict, QF__V_ACK);
    *ret = out;
    return QF_OK;
}

qf_code qf__nconsumer_element(qf_nats_consumer *c, qf__nslot *slot, qf_element **ret)
{
    return c->decode ? decoded(c, slot, ret) : record(c, slot, ret);
}

/* Examples one poll may look at before it lets the runner move on. */
#define POLL_BUDGET 64

static qf_code src_poll(qf_task *task, void *arg, qf_element **ret_elem)
{
    nsrc *s = arg;
    qf_nats_consumer *c = s->c;
    for (int i = 0; i < POLL_BUDGET; i++) {
        qf_status *err = atomic_load(&c->error);
        if (err)
            return qf_set_error(qf_status_code(err), "%s", qf_status_message(err));
        uint32_t st = atomic_load(&c->state);
        if (st == QF__C_CLOSED)
            return qf_set_error(QF_CANCELLED, "NATS consumer '%s' is closed", c->name);
        /* running in a new epoch after a stop drained it: pull again */
        if (st == QF__C_STOPPED && c->stop.coord && !qf_coord_should_stop(c->stop.coord))
            qf__nconsumer_request(c, QF__F_RESUME);
        void *p = NULL;
        qf_code rc = qf_queue_poll_dequeue_ptr(c->ready, qf_task_waker(task), &p);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc == QF_OUT_OF_RANGE) { /* the inbox closes on an error or a free */
            err = atomic_load(&c->error);
            if (err)
                return qf_set_error(qf_status_code(err), "%s", qf_status_message(err));
            return qf_set_error(QF_CANCELLED, "NATS consumer '%s' is closed", c->name);
        }
        if (rc != QF_OK)
            return rc;
        qf__nslot *slot = p;
        uint32_t ready = QF__S_READY;
        if (!atomic_compare_exchange_strong(&slot->state, &ready, QF__S_OUT)) {
            qf__nslot_release(slot); /* a drain gave it back */
            continue;
        }
        qf_element *e = NULL;
        rc = qf__nconsumer_element(c, slot, &e);
        if (rc != QF_OK)
            return rc;
        if (e) {
            *ret_elem = e;
            return QF_OK;
        }
    }
    *ret_elem = NULL; /* only bad payloads so far: let others run */
    return QF_OK;
}

qf_code qf_nats_consumer_source(qf_nats_consumer *c, qf_batch_source **ret)
{
    if (!c || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_consumer_source: %s is NULL",
                            c ? "ret" : "c");
    size_t n = c->decode ? c->ncomp + 1 : 3;
    qf_dtype *dt = malloc(n * sizeof(*dt));
    qf_shape *sh = malloc(n * sizeof(*sh));
    const char **names = c->names ? malloc(n * sizeof(*names)) : NULL;
    nsrc *s = malloc(sizeof(*s));
    qf_code rc = QF_OK;
    if (!dt || !sh || (c->names && !names) || !s) {
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_source: out of memory");
        goto done;
    }
    bool shapes = true;
    if (c->decode) {
        for (size_t i = 0; i < c->ncomp; i++) {
            dt[i] = c->dtypes[i];
            if (c->shapes)
                sh[i] = c->shapes[i];
            if (names)
                names[i] = c->names[i];
        }
        shapes = c->shapes != NULL;
        if (names)
            names[n - 1] = "nats_ack";
    } else {
        dt[QF_NATS_KEY] = QF_STRING;
        dt[QF_NATS_VALUE] = QF_STRING;
        for (size_t i = 0; i < n; i++)
            sh[i] = qf_shape_scalar();
    }
    dt[n - 1] = QF_PTR;
    sh[n - 1] = qf_shape_scalar();
    if (!shapes) /* unknown: the batch options must give them */
        for (size_t i = 0; i < n; i++)
            sh[i] = qf_shape_unknown();
    qf_components comps = {.n = n, .dtypes = dt, .shapes = sh, .names = names};
    s->c = c;
    qf_batch_source *src = NULL;
    rc = qf_batch_source_poll(&comps, src_poll, s, &src);
    if (rc != QF_OK)
        goto done;
    qf__nconsumer_ref(c);
    qf_batch_source_on_free(src, src_free, s);
    s = NULL;
    *ret = src;
done:
    free(dt);
    free(sh);
    free(names);
    free(s);
    return rc;
}

qf_code qf_nats_reject(const qf_element *e, bool redeliver)
{
    if (!e)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_reject: e is NULL");
    bool found = false;
    for (size_t i = 0; i < qf_element_size(e); i++) {
        qf_tensor *t = qf_element_get(e, i);
        if (!t || qf_tensor_dtype(t) != QF_PTR || qf_tensor_ptr_dtor(t) != qf__nats_token_release)
            continue;
        found = true;
        int64_t k = qf_tensor_num_elements(t);
        for (int64_t j = 0; j < k; j++) {
            qf__nslot *slot = qf_tensor_ptr(t, j);
            if (slot)
                atomic_store(&slot->verdict, redeliver ? QF__V_NAK : QF__V_TERM);
        }
    }
    if (!found)
        return qf_set_error(QF_NOT_FOUND, "qf_nats_reject: the element holds no NATS ack token");
    return QF_OK;
}
