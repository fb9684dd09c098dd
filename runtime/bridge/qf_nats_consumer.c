/* qf_nats_consumer.c - a durable pull consumer feeding a bounded inbox.
 *
 * Flow of one message:
 *
 *   bridge        pull request {"batch":b,"expires":e} on lane L, reply
 *                 "<inbox>.L.<gen>"; b never exceeds the free slots minus
 *                 what the other lane still expects (the in-flight bound)
 *   libnats       on_msg(L): takes a free slot, stores the message, marks
 *                 it READY and puts it into `ready` (a qflow pointer queue,
 *                 whose enqueue wakes a parked source task)
 *   source task   takes it (READY -> OUT), builds the element; the slot
 *                 rides in the element's ack token
 *   any thread    the batch is freed: the token's destructor marks the slot
 *                 RELEASED and pushes it to the bridge
 *   bridge        sends +ACK (or -NAK / +TERM), frees the message, returns
 *                 the slot to `free_slots`, and may pull again
 *
 * A lane has at most one request outstanding, so its accounting is exact:
 * messages count it down, and a status message (404, 408 request timeout,
 * 409 leadership change, 503 no responders) ends it. User messages carry
 * their original subject, not the reply, so a lane is told apart by its
 * subscription; status messages carry the reply and so their request's
 * generation: a status for an older request is ignored. A request whose
 * status never comes (a server that died) is forgotten a little after it
 * expires; a reconnect forgets them all at once.
 *
 * Drain (a Coordinator stop, qf_nats_consumer_drain(), free): stop pulling;
 * every slot still READY or OUT becomes ABANDONED with one CAS (a token
 * freed later finds it so and acks nothing) and its message gets a -NAK;
 * the releases that raced the scan are sent; then the consumer confirms
 * the acks by sending the last one again as a request: JetStream answers
 * only after processing it, and it processes one connection's acks in
 * order. Messages that arrive for requests still outstanding after that
 * are given back with a delayed -NAK, so they do not bounce between this
 * consumer and the server until the requests expire.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qf_futex.h"
#include "qf_nats-impl.h"
#include "qf_status-impl.h"

#define LANES 2
/* A request the server has not ended is forgotten this long after it
 * expired (its 408 should have come by then). */
#define LOST_GRACE_NS 500000000
#define BACKOFF_MIN_NS 50000000
#define BACKOFF_MAX_NS 1000000000

/* ------------------------------------------------------------ references */

static void consumer_destroy(qf_nats_consumer *c)
{
    /* only leftovers of a consumer that was freed: slots still READY in
     * the inbox were given back by the free */
    qf_queue_unref(c->ready);
    qf_queue_unref(c->free_slots);
    free(c->slots);
    free(c->stream);
    free(c->durable);
    free(c->name);
    free(c->inbox);
    free(c->next_subj);
    free(c->dtypes);
    free(c->shapes);
    for (size_t i = 0; c->names && i < c->ncomp; i++)
        free(c->names[i]);
    free(c->names);
    free(c->out_names);
    free(c->last_ack);
    qf_status_free(atomic_load(&c->error));
    free(c);
}

void qf__nconsumer_ref(qf_nats_consumer *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void qf__nconsumer_unref(qf_nats_consumer *c)
{
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        consumer_destroy(c);
}

/* ------------------------------------------------------------------ errors */

/* The first fatal error wins; it ends the sources (the inbox is closed, so
 * parked source tasks wake) and, with a Coordinator, stops it. */
static void set_fatal(qf_nats_consumer *c, qf_status *st)
{
    qf_status *none = NULL;
    if (!atomic_compare_exchange_strong(&c->error, &none, st)) {
        qf_status_free(st);
        return;
    }
    qf_queue_close(c->ready, false);
    if (c->stop.coord)
        qf_coord_request_stop(c->stop.coord, qf_status_copy(st));
    qf__nats_kick(c->n);
}

/* -------------------------------------------------------------- sending */

static void send_verdict(qf_nats_consumer *c, const char *reply, const char *body)
{
    /* Publishing only fills libnats's buffer (its flusher writes it out);
     * while reconnecting it waits in the reconnect buffer. A failure
     * (buffer full, connection closed) loses this ack, and JetStream then
     * redelivers the message: at-least-once holds. */
    if (reply && *reply)
        (void)natsConnection_PublishString(c->n->nc, reply, body);
}

static void nak_later(qf_nats_consumer *c, natsMsg *msg)
{
    char body[64];
    snprintf(body, sizeof(body), "-NAK {\"delay\":%" PRId64 "}", c->expires_ns);
    send_verdict(c, natsMsg_GetReply(msg), body);
    atomic_fetch_add_explicit(&c->st.nacked, 1, memory_order_relaxed);
}

/* ----------------------------------------------------------- ack subjects */

/* "$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>"
 * (9 tokens), or with a domain and account hash in front and a random
 * token at the end (12). */
static bool parse_ack_subject(const char *r, uint64_t *seq, uint64_t *delivered)
{
    if (!r || strncmp(r, "$JS.ACK.", 8) != 0)
        return false;
    const char *tok[16];
    size_t len[16];
    int nt = 0;
    const char *p = r;
    while (nt < 16) {
        const char *dot = strchr(p, '.');
        tok[nt] = p;
        len[nt] = dot ? (size_t)(dot - p) : strlen(p);
        nt++;
        if (!dot)
            break;
        p = dot + 1;
    }
    int di, si;
    if (nt == 9) {
        di = 4;
        si = 5;
    } else if (nt >= 11) {
        di = 6;
        si = 7;
    } else {
        return false;
    }
    uint64_t v[2] = {0, 0};
    int idx[2] = {di, si};
    for (int k = 0; k < 2; k++) {
        if (len[idx[k]] == 0 || len[idx[k]] > 20)
            return false;
        for (size_t i = 0; i < len[idx[k]]; i++) {
            char ch = tok[idx[k]][i];
            if (ch < '0' || ch > '9')
                return false;
            v[0 + k] = v[k] * 10 + (uint64_t)(ch - '0');
        }
    }
    *delivered = v[0];
    *seq = v[1];
    return true;
}

/* ---------------------------------------------------------- libnats side */

static void lane_end(qf__nlane *l)
{
    atomic_store(&l->outstanding, 0);
    atomic_store(&l->active, false);
    qf__nats_kick(l->c->n);
}

/* A status message for lane l (no payload, a Status header). */
static void on_status(qf__nlane *l, natsMsg *msg, const char *code)
{
    qf_nats_consumer *c = l->c;
    /* "<inbox>.<lane>.<gen>": only the current request's status counts */
    const char *subj = natsMsg_GetSubject(msg);
    const char *dot = subj ? strrchr(subj, '.') : NULL;
    uint32_t gen = dot ? (uint32_t)strtoul(dot + 1, NULL, 10) : 0;
    if (strcmp(code, "100") == 0 || gen != atomic_load(&l->gen))
        return;
    const char *desc = NULL;
    natsMsgHeader_Get(msg, "Description", &desc);
    if (!desc)
        desc = "";
    if (strcmp(code, "404") == 0 || strcmp(code, "408") == 0) {
        lane_end(l); /* no messages now / the request expired */
        return;
    }
    atomic_fetch_add_explicit(&c->st.pull_errors, 1, memory_order_relaxed);
    if (strcmp(code, "409") == 0 && strstr(desc, "Consumer Deleted")) {
        set_fatal(c, qf_status_new(QF_NOT_FOUND,
                                   "NATS consumer '%s' was deleted (stream '%s', durable '%s')",
                                   c->name, c->stream, c->durable));
    } else if (strcmp(code, "409") == 0 && strstr(desc, "push based")) {
        set_fatal(c, qf_status_new(QF_FAILED_PRECONDITION,
                                   "NATS consumer '%s' is a push consumer, not a pull consumer",
                                   c->name));
    } else if (strcmp(code, "409") == 0 && strncmp(desc, "Exceeded MaxRequestBatch of ", 28) == 0) {
        long long cap = strtoll(desc + 28, NULL, 10);
        if (cap > 0)
            atomic_store(&c->batch_cap, (int64_t)cap);
    } else if (strcmp(code, "400") == 0) {
        set_fatal(c, qf_status_new(QF_INTERNAL, "NATS consumer '%s': pull request refused: %s %s",
                                   c->name, code, desc));
    } else if (strcmp(code, "409") != 0 || !strstr(desc, "Leadership Change")) {
        /* 503 no responders (no leader yet), 409 max waiting, ...: wait a bit */
        atomic_store(&c->backoff, 1);
    }
    lane_end(l);
}

static void on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    qf__nlane *l = closure;
    qf_nats_consumer *c = l->c;
    const char *code = NULL;
    if (natsMsg_GetDataLength(msg) == 0 && natsMsgHeader_Get(msg, "Status", &code) == NATS_OK &&
        code) {
        on_status(l, msg, code);
        natsMsg_Destroy(msg);
        return;
    }
    uint64_t seq = 0, delivered = 0;
    bool js = parse_ack_subject(natsMsg_GetReply(msg), &seq, &delivered);
    /* Take the slot before counting the request down: the bridge computes
     * room as free slots minus what requests still expect, and must never
     * see both the slot free and the message no longer expected. */
    void *p = NULL;
    bool room = js && atomic_load(&c->state) == QF__C_RUNNING && !atomic_load(&c->error) &&
                qf_queue_try_dequeue_ptr(c->free_slots, &p) == QF_OK;
    int64_t o = atomic_load(&l->outstanding);
    while (o > 0 && !atomic_compare_exchange_weak(&l->outstanding, &o, o - 1))
        ;
    if (o == 1) { /* the request is filled */
        atomic_store(&l->active, false);
        qf__nats_kick(c->n);
    }
    if (!js) {
        natsMsg_Destroy(msg); /* not a JetStream message: nothing to ack */
        return;
    }
    atomic_fetch_add_explicit(&c->st.delivered, 1, memory_order_relaxed);
    if (delivered > 1)
        atomic_fetch_add_explicit(&c->st.redelivered, 1, memory_order_relaxed);
    if (!room) {
        /* drained, failed, or more than the bound (a request that was
         * thought lost delivered after all): give it back */
        nak_later(c, msg);
        natsMsg_Destroy(msg);
        return;
    }
    qf__nslot *slot = p;
    qf__nconsumer_ref(c); /* the slot's */
    slot->msg = msg;
    slot->seq = seq;
    slot->delivered = delivered;
    slot->fetched_at = qf_now_ns();
    atomic_store_explicit(&slot->verdict, QF__V_ACK, memory_order_relaxed);
    /* release: a thread that sees READY sees the fields above */
    atomic_store_explicit(&slot->state, QF__S_READY, memory_order_release);
    if (qf_queue_try_enqueue_ptr(c->ready, slot) != QF_OK) {
        /* the inbox is closed (freed or failed): hand it straight back */
        uint32_t s = QF__S_READY;
        if (atomic_compare_exchange_strong(&slot->state, &s, QF__S_OUT))
            atomic_store(&slot->verdict, QF__V_NAK);
        qf__nslot_release(slot);
    }
}

static void on_sub_complete(void *closure)
{
    qf__nlane *l = closure;
    qf_nats_consumer *c = l->c;
    atomic_fetch_sub(&c->subs_live, 1);
    qf_futex_wake(&c->subs_live, INT32_MAX);
}

/* ----------------------------------------------------------- slot release */

/* Inert: the consumer is closed; free the message, drop the slot's ref. */
static void slot_drop(qf__nslot *slot)
{
    qf_nats_consumer *c = slot->c;
    natsMsg_Destroy(slot->msg);
    slot->msg = NULL;
    qf__nconsumer_unref(c);
}

void qf__nslot_release(qf__nslot *slot)
{
    qf_nats_consumer *c = slot->c;
    uint32_t prev = atomic_exchange(&slot->state, QF__S_RELEASED);
    slot->prev = prev;
    if (qf__gate_enter(&c->gate)) {
        qf__nstack_push(&c->n->cmds, &slot->node);
        qf__nats_kick(c->n);
        qf__gate_leave(&c->gate);
    } else {
        slot_drop(slot);
    }
}

void qf__nats_token_release(void *obj)
{
    if (obj)
        qf__nslot_release(obj);
}

void qf__nconsumer_on_release(qf__nslot *slot)
{
    qf_nats_consumer *c = slot->c;
    if (slot->prev == QF__S_OUT && atomic_load(&c->state) != QF__C_CLOSED) {
        const char *reply = natsMsg_GetReply(slot->msg);
        switch (atomic_load(&slot->verdict)) {
        case QF__V_NAK:
            send_verdict(c, reply, "-NAK");
            atomic_fetch_add_explicit(&c->st.nacked, 1, memory_order_relaxed);
            break;
        case QF__V_TERM:
            send_verdict(c, reply, "+TERM");
            atomic_fetch_add_explicit(&c->st.terminated, 1, memory_order_relaxed);
            break;
        default: {
            send_verdict(c, reply, "+ACK");
            atomic_fetch_add_explicit(&c->st.acked, 1, memory_order_relaxed);
            size_t len = strlen(reply);
            if (len + 1 > c->last_ack_cap) {
                char *b = realloc(c->last_ack, len + 1);
                if (b) {
                    c->last_ack = b;
                    c->last_ack_cap = len + 1;
                }
            }
            if (len + 1 <= c->last_ack_cap) {
                memcpy(c->last_ack, reply, len + 1);
                c->ack_unconfirmed = true;
            }
            break;
        }
        }
    }
    if (atomic_load(&c->state) == QF__C_CLOSED) {
        slot_drop(slot);
        return;
    }
    natsMsg_Destroy(slot->msg);
    slot->msg = NULL;
    slot->wpi_at = 0;
    atomic_store_explicit(&slot->state, QF__S_FREE, memory_order_release);
    (void)qf_queue_try_enqueue_ptr(c->free_slots, slot); /* room for every slot */
    qf__nconsumer_unref(c);
}

/* ----------------------------------------------------------------- bridge */

static void backoff(qf_nats_consumer *c, int64_t now)
{
    c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : BACKOFF_MIN_NS;
    if (c->backoff_ns > BACKOFF_MAX_NS)
        c->backoff_ns = BACKOFF_MAX_NS;
    c->backoff_until = now + c->backoff_ns;
}

static void send_pulls(qf_nats_consumer *c, int64_t now)
{
    int64_t pending = 0;
    bool any = false;
    for (int i = 0; i < LANES; i++)
        if (atomic_load(&c->lanes[i].active)) {
            pending += atomic_load(&c->lanes[i].outstanding);
            any = true;
        }
    int64_t avail = qf_queue_size(c->free_slots) - pending;
    int64_t cap = atomic_load(&c->batch_cap);
    int64_t want = c->fetch_batch < cap ? c->fetch_batch : cap;
    /* With a request outstanding, ask again only for a worthwhile batch;
     * with none, for whatever room there is. */
    int64_t threshold = any ? (want / 2 > 0 ? want / 2 : 1) : 1;
    for (int i = 0; i < LANES && avail >= threshold; i++) {
        qf__nlane *l = &c->lanes[i];
        if (atomic_load(&l->active))
            continue;
        int64_t b = avail < want ? avail : want;
        uint32_t gen = atomic_fetch_add(&l->gen, 1) + 1;
        atomic_store(&l->outstanding, b);
        atomic_store(&l->active, true);
        l->expires_at = now + c->expires_ns;
        char reply[160], body[96];
        snprintf(reply, sizeof(reply), "%s.%d.%u", c->inbox, i, gen);
        int len = snprintf(body, sizeof(body), "{\"batch\":%" PRId64 ",\"expires\":%" PRId64 "}", b,
                           c->expires_ns);
        natsStatus s = natsConnection_PublishRequest(c->n->nc, c->next_subj, reply, body, len);
        if (s != NATS_OK) {
            atomic_store(&l->active, false);
            atomic_store(&l->outstanding, 0);
            backoff(c, now);
            return;
        }
        atomic_fetch_add_explicit(&c->st.pull_requests, 1, memory_order_relaxed);
        avail -= b;
        threshold = want / 2 > 0 ? want / 2 : 1;
    }
}

/* In-progress acks for messages held longer than a third of AckWait. */
static void keep_alive(qf_nats_consumer *c, int64_t now)
{
    int64_t age = c->ack_wait_ns / 3;
    for (int64_t i = 0; i < c->max_in_flight; i++) {
        qf__nslot *slot = &c->slots[i];
        uint32_t s = atomic_load_explicit(&slot->state, memory_order_acquire);
        if (s != QF__S_READY && s != QF__S_OUT)
            continue;
        int64_t since = slot->wpi_at > slot->fetched_at ? slot->wpi_at : slot->fetched_at;
        if (now - since < age)
            continue;
        /* the bridge alone destroys a slot's message, so it is still there */
        send_verdict(c, natsMsg_GetReply(slot->msg), "+WPI");
        slot->wpi_at = now;
        atomic_fetch_add_explicit(&c->st.in_progress, 1, memory_order_relaxed);
    }
}

static void drain(qf_nats_consumer *c)
{
    atomic_store(&c->state, QF__C_DRAINING);
    for (int64_t i = 0; i < c->max_in_flight; i++) {
        qf__nslot *slot = &c->slots[i];
        uint32_t s = atomic_load_explicit(&slot->state, memory_order_acquire);
        if ((s == QF__S_READY || s == QF__S_OUT) &&
            atomic_compare_exchange_strong(&slot->state, &s, QF__S_ABANDONED)) {
            send_verdict(c, natsMsg_GetReply(slot->msg), "-NAK");
            atomic_fetch_add_explicit(&c->st.nacked, 1, memory_order_relaxed);
        }
    }
    /* Releases that won the race against the scan are on the command
     * stack (or about to be: their pushers are inside the gate). */
    for (int spin = 0; spin < 10000 && (atomic_load(&c->gate) & ~QF__GATE_CLOSED) != 0; spin++)
        sched_yield();
    qf__nnode *cmds = qf__nstack_take(&c->n->cmds);
    while (cmds) {
        qf__nnode *next = cmds->next;
        if (cmds->kind == QF__N_RELEASE)
            qf__nconsumer_on_release((qf__nslot *)cmds);
        else
            qf__nsink_on_publish((qf__npub *)cmds, qf_now_ns());
        cmds = next;
    }
    int rc = QF_OK;
    if (c->ack_unconfirmed) {
        natsMsg *r = NULL;
        natsStatus s = natsConnection_RequestString(&r, c->n->nc, c->last_ack, "+ACK",
                                                    c->n->request_timeout_ms);
        natsMsg_Destroy(r);
        if (s == NATS_OK)
            c->ack_unconfirmed = false;
        else
            rc = QF_UNAVAILABLE;
    } else if (natsConnection_FlushTimeout(c->n->nc, c->n->request_timeout_ms) != NATS_OK) {
        rc = QF_UNAVAILABLE;
    }
    atomic_store_explicit(&c->drain_status, rc, memory_order_release);
    atomic_store(&c->state, QF__C_STOPPED);
    qf__nstop_drained(&c->stop);
    atomic_fetch_add(&c->drained, 1);
    qf_futex_wake(&c->drained, INT32_MAX);
}

void qf__nconsumer_io(qf_nats_consumer *c, int64_t now, int64_t *next)
{
    uint32_t state = atomic_load(&c->state);
    if (state == QF__C_CLOSED)
        return;
    uint32_t flags = atomic_exchange(&c->flags, 0);
    if (flags & QF__F_DRAIN) {
        drain(c);
        state = QF__C_STOPPED;
    }
    if ((flags & QF__F_RESUME) && state == QF__C_STOPPED) {
        qf__nstop_resumed(&c->stop);
        atomic_store(&c->state, QF__C_RUNNING);
        state = QF__C_RUNNING;
    }
    /* libnats gave up reconnecting (a finite max_reconnect): nothing will
     * come any more; say so rather than wait forever */
    if (!atomic_load(&c->error) && !atomic_load(&c->n->connected) &&
        natsConnection_IsClosed(c->n->nc))
        set_fatal(c, qf_status_new(QF_UNAVAILABLE,
                                   "NATS consumer '%s': the connection to %s is closed (no "
                                   "server answered within max_reconnect attempts)",
                                   c->name, c->n->servers));
    uint32_t rec = atomic_load(&c->n->reconnects);
    if (rec != c->seen_reconnects) {
        c->seen_reconnects = rec;
        for (int i = 0; i < LANES; i++) {
            atomic_store(&c->lanes[i].active, false);
            atomic_store(&c->lanes[i].outstanding, 0);
        }
    }
    for (int i = 0; i < LANES; i++) {
        qf__nlane *l = &c->lanes[i];
        if (!atomic_load(&l->active))
            continue;
        if (now >= l->expires_at + LOST_GRACE_NS) {
            atomic_store(&l->active, false);
            atomic_store(&l->outstanding, 0);
        } else {
            *next = qf_deadline_min(*next, l->expires_at + LOST_GRACE_NS);
        }
    }
    if (atomic_exchange(&c->backoff, 0))
        backoff(c, now);
    if (state == QF__C_RUNNING && !atomic_load(&c->error) &&
        atomic_load_explicit(&c->n->connected, memory_order_relaxed)) {
        if (now >= c->backoff_until) {
            send_pulls(c, now);
            if (now - c->backoff_until > BACKOFF_MAX_NS)
                c->backoff_ns = 0; /* a quiet second: start back-off afresh */
        } else {
            *next = qf_deadline_min(*next, c->backoff_until);
        }
    }
    if (state == QF__C_RUNNING || state == QF__C_STOPPED) {
        if (now >= c->next_wpi) {
            keep_alive(c, now);
            c->next_wpi = now + c->ack_wait_ns / 6;
        }
        *next = qf_deadline_min(*next, c->next_wpi);
    }
}

void qf__nconsumer_request(qf_nats_consumer *c, uint32_t flag)
{
    atomic_fetch_or(&c->flags, flag);
    qf__nats_kick(c->n);
}

static void stop_action(void *arg)
{
    qf__nconsumer_request(arg, QF__F_DRAIN);
}

/* -------------------------------------------------------------- creation */

static qf_code bad(const char *fmt, const char *what)
{
    return qf_set_error(QF_INVALID_ARGUMENT, fmt, what);
}

static qf_code copy_decode(qf_nats_consumer *c, const qf_components *d)
{
    if (!d->n || !d->dtypes || d->n > 4095)
        return bad("qf_nats_consumer_new: %s needs 1 to 4095 components with dtypes", "decode");
    c->decode = true;
    c->ncomp = d->n;
    c->dtypes = malloc(d->n * sizeof(*c->dtypes));
    c->shapes = d->shapes ? malloc(d->n * sizeof(*c->shapes)) : NULL;
    c->names = d->names ? calloc(d->n, sizeof(*c->names)) : NULL;
    if (!c->dtypes || (d->shapes && !c->shapes) || (d->names && !c->names))
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
    for (size_t i = 0; i < d->n; i++) {
        if (!qf_dtype_is_valid(d->dtypes[i]) || d->dtypes[i] == QF_PTR || d->dtypes[i] == QF_SPARSE)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "qf_nats_consumer_new: decode component %zu has dtype %s, which "
                                "cannot travel in a payload",
                                i, qf_dtype_name(d->dtypes[i]));
        c->dtypes[i] = d->dtypes[i];
        if (d->shapes) {
            if (!qf_shape_is_valid(&d->shapes[i]))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "qf_nats_consumer_new: decode component %zu has an invalid "
                                    "shape",
                                    i);
            c->shapes[i] = d->shapes[i];
        }
        if (d->names) {
            if (!d->names[i] || !d->names[i][0] || strcmp(d->names[i], "nats_ack") == 0)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "qf_nats_consumer_new: decode component %zu needs a name "
                                    "other than '' and 'nats_ack'",
                                    i);
            if (!(c->names[i] = strdup(d->names[i])))
                return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
        }
    }
    if (c->names) {
        if (!(c->out_names = malloc((d->n + 1) * sizeof(*c->out_names))))
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
        for (size_t i = 0; i < d->n; i++)
            c->out_names[i] = c->names[i];
        c->out_names[d->n] = "nats_ack";
    }
    return QF_OK;
}

/* Bind to the durable, or create it. */
static qf_code bind(qf_nats *n, qf_nats_consumer *c, const qf_nats_consumer_options *o)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s;
    /* A cluster electing a leader (or a server restarting) answers with
     * timeouts and "no responders" for a few seconds: retry those, with
     * back-off, for up to three request timeouts. */
    qf_deadline until = qf_deadline_in_ns(3 * n->request_timeout_ms * 1000000);
    int64_t pause = 100000000;
    for (;;) {
        jerr = 0;
        s = js_GetConsumerInfo(&ci, n->js, c->stream, c->durable, NULL, &jerr);
        if (s == NATS_NOT_FOUND && jerr != JSStreamNotFoundErr) {
            jsConsumerConfig cfg;
            jsConsumerConfig_Init(&cfg);
            cfg.Durable = c->durable;
            cfg.AckPolicy = js_AckExplicit;
            cfg.DeliverPolicy = js_DeliverAll;
            cfg.AckWait = (int64_t)((o->ack_wait_s > 0 ? o->ack_wait_s : 30.0) * 1e9);
            cfg.MaxAckPending = c->max_in_flight * 4 > 1000 ? c->max_in_flight * 4 : 1000;
            cfg.FilterSubject = o->filter_subject;
            jerr = 0;
            s = js_AddConsumer(&ci, n->js, c->stream, &cfg, NULL, &jerr);
        }
        if (!qf__nats_transient(s, jerr) || qf_deadline_passed(until))
            break;
        struct timespec ts = {0, pause};
        nanosleep(&ts, NULL);
        pause = pause < 500000000 ? pause * 2 : 999999999;
    }
    if (s != NATS_OK) {
        if (jerr == JSStreamNotFoundErr)
            return qf_set_error(QF_NOT_FOUND, "NATS stream '%s' not found", c->stream);
        return qf__nats_error(s, jerr, "NATS consumer '%s': binding durable '%s' of stream '%s'",
                              c->name, c->durable, c->stream);
    }
    qf_code rc = QF_OK;
    if (ci->Config && ci->Config->DeliverSubject && ci->Config->DeliverSubject[0])
        rc = qf_set_error(QF_FAILED_PRECONDITION,
                          "NATS consumer '%s' is a push consumer (deliver subject '%s'), not a "
                          "pull consumer",
                          c->name, ci->Config->DeliverSubject);
    else if (ci->Config && ci->Config->AckPolicy != js_AckExplicit)
        rc = qf_set_error(QF_FAILED_PRECONDITION,
                          "NATS consumer '%s' does not use explicit acks: batches are acked "
                          "one message at a time, in any order",
                          c->name);
    else
        c->ack_wait_ns = ci->Config && ci->Config->AckWait > 0 ? ci->Config->AckWait : 30000000000;
    jsConsumerInfo_Destroy(ci);
    return rc;
}

static qf_code subscribe(qf_nats *n, qf_nats_consumer *c)
{
    for (int i = 0; i < LANES; i++) {
        qf__nlane *l = &c->lanes[i];
        char subj[160];
        snprintf(subj, sizeof(subj), "%s.%d.*", c->inbox, i);
        natsStatus s = natsConnection_Subscribe(&l->sub, n->nc, subj, on_msg, l);
        if (s == NATS_OK)
            s = natsSubscription_SetPendingLimits(l->sub, -1, -1);
        if (s == NATS_OK)
            s = natsSubscription_SetOnCompleteCB(l->sub, on_sub_complete, l);
        if (s != NATS_OK)
            return qf__nats_error(s, 0, "NATS consumer '%s': subscribing to %s", c->name, subj);
        atomic_fetch_add(&c->subs_live, 1);
    }
    return QF_OK;
}

static void unsubscribe(qf_nats_consumer *c)
{
    for (int i = 0; i < LANES; i++)
        if (c->lanes[i].sub)
            natsSubscription_Unsubscribe(c->lanes[i].sub);
    /* their handlers may still be running: wait for the completions */
    qf_deadline d = qf_deadline_in_s(10.0);
    uint32_t v;
    while ((v = atomic_load(&c->subs_live)) != 0 && !qf_deadline_passed(d))
        qf_futex_wait_until(&c->subs_live, v, d);
    for (int i = 0; i < LANES; i++) {
        natsSubscription_Destroy(c->lanes[i].sub);
        c->lanes[i].sub = NULL;
    }
}

qf_code qf_nats_consumer_new(qf_nats *n, const qf_nats_consumer_options *o,
                             qf_nats_consumer **ret_c)
{
    if (!n || !o || !ret_c)
        return bad("qf_nats_consumer_new: %s is NULL", !n ? "n" : !o ? "options" : "ret_c");
    qf_code rc = qf__nats_not_in_task("qf_nats_consumer_new");
    if (rc != QF_OK)
        return rc;
    if (!o->stream || !*o->stream || strpbrk(o->stream, " .*>\t\r\n"))
        return bad("qf_nats_consumer_new: %s must be a stream name (no spaces, '.', '*', '>')",
                   "stream");
    if (!o->durable || !*o->durable || strpbrk(o->durable, " .*>\t\r\n"))
        return bad("qf_nats_consumer_new: %s must be a consumer name (no spaces, '.', '*', '>')",
                   "durable");
    if (o->max_in_flight < 0 || o->fetch_batch < 0 || o->ack_wait_s < 0 || o->pull_expires_s < 0)
        return bad(
            "qf_nats_consumer_new: %s",
            "max_in_flight, fetch_batch, ack_wait_s and pull_expires_s must not be negative");
    if (o->max_in_flight > (1 << 20))
        return bad("qf_nats_consumer_new: %s", "max_in_flight above 1048576");
    int64_t mif = o->max_in_flight ? o->max_in_flight : 1024;
    if (o->fetch_batch > mif)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_nats_consumer_new: fetch_batch %lld exceeds max_in_flight %lld",
                            (long long)o->fetch_batch, (long long)mif);
    if (o->key != QF_NATS_KEY_SEQUENCE && o->key != QF_NATS_KEY_SUBJECT)
        return bad("qf_nats_consumer_new: %s", "unknown key kind");

    qf_nats_consumer *c = calloc(1, sizeof(*c));
    if (!c)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
    atomic_init(&c->refs, 1);
    c->n = n;
    c->max_in_flight = mif;
    c->fetch_batch = o->fetch_batch ? o->fetch_batch : (mif < 256 ? mif : 256);
    atomic_init(&c->batch_cap, INT64_MAX);
    c->expires_ns = (int64_t)((o->pull_expires_s > 0 ? o->pull_expires_s : 1.0) * 1e9);
    c->key = o->key;
    c->stream = strdup(o->stream);
    c->durable = strdup(o->durable);
    if (o->name)
        c->name = strdup(o->name);
    else if (asprintf(&c->name, "%s/%s", o->stream, o->durable) < 0)
        c->name = NULL;
    if (!c->stream || !c->durable || !c->name ||
        asprintf(&c->next_subj, "$JS.API.CONSUMER.MSG.NEXT.%s.%s", o->stream, o->durable) < 0) {
        c->next_subj = NULL;
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
        goto fail;
    }
    if (o->decode && (rc = copy_decode(c, o->decode)) != QF_OK)
        goto fail;
    c->slots = calloc((size_t)mif, sizeof(*c->slots));
    if (!c->slots) {
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
        goto fail;
    }
    char qn[256];
    snprintf(qn, sizeof(qn), "nats_free_slots:%s", c->name);
    if ((rc = qf_ptr_queue_new(mif, qn, 0, NULL, &c->free_slots)) != QF_OK)
        goto fail;
    snprintf(qn, sizeof(qn), "nats_inbox:%s", c->name);
    if ((rc = qf_ptr_queue_new(mif, qn, 0, NULL, &c->ready)) != QF_OK)
        goto fail;
    for (int64_t i = 0; i < mif; i++) {
        c->slots[i].c = c;
        c->slots[i].node.kind = QF__N_RELEASE;
        (void)qf_queue_try_enqueue_ptr(c->free_slots, &c->slots[i]);
    }
    natsInbox *inbox = NULL;
    natsStatus s = natsInbox_Create(&inbox);
    if (s != NATS_OK || !(c->inbox = strdup(inbox))) {
        natsInbox_Destroy(inbox);
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_consumer_new: out of memory");
        goto fail;
    }
    natsInbox_Destroy(inbox);
    for (int i = 0; i < LANES; i++) {
        c->lanes[i].c = c;
        c->lanes[i].idx = i;
    }
    if ((rc = bind(n, c, o)) != QF_OK)
        goto fail;
    if ((rc = qf__nstop_init(&c->stop, o->coord, c->name, stop_action, c)) != QF_OK)
        goto fail;
    if ((rc = subscribe(n, c)) != QF_OK) {
        qf__nstop_destroy(&c->stop);
        goto fail;
    }
    c->seen_reconnects = atomic_load(&n->reconnects);
    qf__nats_ref(n);
    pthread_mutex_lock(&n->mu);
    c->next = n->consumers;
    n->consumers = c;
    atomic_fetch_add(&n->list_gen, 1);
    pthread_mutex_unlock(&n->mu);
    qf__nats_kick(n);
    *ret_c = c;
    return QF_OK;
fail:
    unsubscribe(c);
    consumer_destroy(c);
    return rc;
}

/* ------------------------------------------------------- drain and free */

static qf_code wait_drained(qf_nats_consumer *c, uint32_t before, qf_deadline deadline)
{
    uint32_t v;
    while ((v = atomic_load(&c->drained)) == before) {
        if (qf_deadline_passed(deadline))
            return qf_set_error(QF_DEADLINE_EXCEEDED,
                                "NATS consumer '%s': drain not finished by the deadline", c->name);
        qf_futex_wait_until(&c->drained, v, deadline);
    }
    if (atomic_load_explicit(&c->drain_status, memory_order_acquire) != QF_OK)
        return qf_set_error(QF_UNAVAILABLE,
                            "NATS consumer '%s': the server did not confirm the acks (they go "
                            "out when the connection is back)",
                            c->name);
    return QF_OK;
}

qf_code qf_nats_consumer_drain(qf_nats_consumer *c, qf_deadline deadline)
{
    if (!c)
        return bad("qf_nats_consumer_drain: %s is NULL", "c");
    qf_code rc = qf__nats_not_in_task("qf_nats_consumer_drain");
    if (rc != QF_OK)
        return rc;
    uint32_t before = atomic_load(&c->drained);
    qf__nconsumer_request(c, QF__F_DRAIN);
    return wait_drained(c, before, deadline);
}

qf_code qf_nats_consumer_resume(qf_nats_consumer *c)
{
    if (!c)
        return bad("qf_nats_consumer_resume: %s is NULL", "c");
    if (atomic_load(&c->state) == QF__C_CLOSED)
        return qf_set_error(QF_CANCELLED, "NATS consumer '%s' is closed", c->name);
    qf__nconsumer_request(c, QF__F_RESUME);
    return QF_OK;
}

void qf_nats_consumer_free(qf_nats_consumer *c)
{
    if (!c)
        return;
    qf_nats *n = c->n;
    /* 1. drain: acks of freed batches out and confirmed, the rest given back */
    uint32_t before = atomic_load(&c->drained);
    qf__nconsumer_request(c, QF__F_DRAIN);
    (void)wait_drained(
        c, before, qf_deadline_in_ns(c->expires_ns + n->request_timeout_ms * 1000000 + 1000000000));
    /* 2. closed: deliveries are given back, sources end, tokens go inert */
    atomic_store(&c->state, QF__C_CLOSED);
    qf_queue_close(c->ready, false);
    unsubscribe(c);
    qf__gate_close(&c->gate);
    /* 3. the bridge forgets it (and has run every release pushed before) */
    pthread_mutex_lock(&n->mu);
    for (qf_nats_consumer **pp = &n->consumers; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    atomic_fetch_add(&n->list_gen, 1);
    pthread_mutex_unlock(&n->mu);
    qf__nats_io_sync(n);
    /* 4. messages that arrived after the drain and wait in the inbox */
    void *p;
    while (qf_queue_try_dequeue_ptr(c->ready, &p) == QF_OK) {
        qf__nslot *slot = p;
        uint32_t s = QF__S_READY;
        if (atomic_compare_exchange_strong(&slot->state, &s, QF__S_ABANDONED)) {
            send_verdict(c, natsMsg_GetReply(slot->msg), "-NAK");
            atomic_fetch_add_explicit(&c->st.nacked, 1, memory_order_relaxed);
        }
        slot_drop(slot);
    }
    natsConnection_FlushTimeout(n->nc, n->request_timeout_ms);
    qf__nstop_destroy(&c->stop);
    qf__nats_unref(n);
    qf__nconsumer_unref(c);
}

/* ------------------------------------------------------------------ stats */

void qf_nats_consumer_get_stats(const qf_nats_consumer *cc, qf_nats_consumer_stats *ret)
{
    if (!cc || !ret) {
        qf__set_error_static(QF_INVALID_ARGUMENT, cc ? "qf_nats_consumer_get_stats: ret is NULL"
                                                     : "qf_nats_consumer_get_stats: c is NULL");
        return;
    }
    qf_nats_consumer *c = (qf_nats_consumer *)cc;
#define LD(f) atomic_load_explicit(&c->st.f, memory_order_relaxed)
    *ret = (qf_nats_consumer_stats){
        .delivered = LD(delivered),
        .redelivered = LD(redelivered),
        .acked = LD(acked),
        .nacked = LD(nacked),
        .terminated = LD(terminated),
        .in_progress = LD(in_progress),
        .bad_payloads = LD(bad_payloads),
        .pull_requests = LD(pull_requests),
        .pull_errors = LD(pull_errors),
        .last_bad_seq = LD(last_bad_seq),
        .in_flight = c->max_in_flight - qf_queue_size(c->free_slots),
    };
#undef LD
}

qf_status *qf_nats_consumer_last_error(const qf_nats_consumer *c)
{
    if (!c) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_nats_consumer_last_error: c is NULL");
        return NULL;
    }
    return qf_status_copy(atomic_load(&((qf_nats_consumer *)c)->error));
}
