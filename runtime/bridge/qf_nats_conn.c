/* qf_nats_conn.c - the connection, its bridge thread, error mapping and the
 * Coordinator glue shared by consumers and sinks.
 *
 * The bridge thread (io_main) is an event loop over three inputs: the
 * command stack (token releases, publishes, retries), the state of the
 * consumers and sinks of the connection (pull requests to send, drains
 * requested, in-progress acks and retries that are due), and a deadline.
 * It sleeps on an event count when none has work. Each iteration first
 * clears the kick flag and then looks at everything, so a kick that
 * arrives while it works is seen in the next iteration, and one that
 * arrives after its last look (but before it sleeps) makes the sleep
 * return at once: notifiers set the flag with an RMW and then notify; the
 * bridge prepares its sleep (a full fence) and then re-reads the flag.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_futex.h"
#include "qf_nats-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"

/* ------------------------------------------------------------------ errors */

static qf_code map_code(natsStatus s, jsErrCode jerr)
{
    switch ((int)jerr) {
    case JSStreamNotFoundErr:
    case JSConsumerNotFoundErr:
        return QF_NOT_FOUND;
    case JSStreamMessageExceedsMaximumErr:
    case JSMaximumConsumersLimitErr:
    case JSMaximumStreamsLimitErr:
    case JSStorageResourcesExceededErr:
    case JSMemoryResourcesExceededErr:
    case JSAccountResourcesExceededErr:
    case JSStreamLimitsErr:
        return QF_RESOURCE_EXHAUSTED;
    case JSStreamNameExistErr:
    case JSStreamSubjectOverlapErr:
    case JSConsumerNameExistErr:
        return QF_ALREADY_EXISTS;
    case JSClusterNoPeersErr:
    case JSClusterNotAvailErr:
    case JSClusterNotLeaderErr:
    case JSClusterIncompleteErr:
    case JSInsufficientResourcesErr:
    case JSNotEnabledErr:
    case JSNotEnabledForAccountErr:
        return QF_UNAVAILABLE;
    case JSStreamNotMatchErr:
    case JSStreamWrongLastMsgIDErr:
    case JSStreamWrongLastSequenceErr:
        return QF_FAILED_PRECONDITION;
    case JSStreamInvalidConfig:
    case JSBadRequestErr:
    case JSInvalidJSONErr:
    case JSStreamReplicasNotSupportedErr:
        return QF_INVALID_ARGUMENT;
    default:
        break;
    }
    switch (s) {
    case NATS_OK:
        return QF_OK;
    case NATS_TIMEOUT:
        return QF_DEADLINE_EXCEEDED;
    case NATS_NO_SERVER:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_STALE_CONNECTION:
    case NATS_NO_RESPONDERS:
    case NATS_NOT_YET_CONNECTED:
    case NATS_IO_ERROR:
    case NATS_DRAINING:
        return QF_UNAVAILABLE;
    case NATS_NOT_FOUND:
        return QF_NOT_FOUND;
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_TIMEOUT:
    case NATS_ADDRESS_MISSING:
    case NATS_INVALID_QUEUE_NAME:
        return QF_INVALID_ARGUMENT;
    case NATS_NO_MEMORY:
    case NATS_MAX_PAYLOAD:
    case NATS_SLOW_CONSUMER:
    case NATS_INSUFFICIENT_BUFFER:
        return QF_RESOURCE_EXHAUSTED;
    case NATS_NOT_PERMITTED:
        return QF_PERMISSION_DENIED;
    case NATS_CONNECTION_AUTH_FAILED:
        return QF_UNAUTHENTICATED;
    case NATS_ILLEGAL_STATE:
    case NATS_INVALID_SUBSCRIPTION:
        return QF_FAILED_PRECONDITION;
    case NATS_NO_SERVER_SUPPORT:
        return QF_UNIMPLEMENTED;
    default:
        return QF_UNKNOWN;
    }
}

qf_code qf__nats_error(natsStatus s, jsErrCode jerr, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const char *text = nats_GetLastError(NULL);
    if (!text || !*text)
        text = natsStatus_GetText(s);
    qf_code code = map_code(s, jerr);
    if (code == QF_OK)
        code = QF_UNKNOWN;
    if (jerr)
        return qf_set_error(code, "%s: %s (JetStream error %d)", what, text, (int)jerr);
    return qf_set_error(code, "%s: %s", what, text);
}

bool qf__nats_transient(natsStatus s, jsErrCode jerr)
{
    switch ((int)jerr) {
    case JSClusterNotAvailErr:
    case JSClusterNotLeaderErr:
    case JSClusterIncompleteErr:
    case JSInsufficientResourcesErr:
    case JSStreamStoreFailedErr:
        return true;
    default:
        break;
    }
    if (jerr)
        return false;
    switch (s) {
    case NATS_TIMEOUT:
    case NATS_NO_RESPONDERS:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_STALE_CONNECTION:
    case NATS_NOT_YET_CONNECTED:
    case NATS_IO_ERROR:
    case NATS_NO_SERVER:
        return true;
    default:
        return false;
    }
}

qf_code qf__nats_not_in_task(const char *what)
{
    if (qf__in_task())
        return qf__blocking_in_task_error(what);
    return QF_OK;
}

/* -------------------------------------------------------- bridge thread */

void qf__nats_kick(qf_nats *n)
{
    /* only the call that raises the flag notifies: while the bridge works
     * (flag up), kicks cost one RMW */
    if (atomic_exchange(&n->kick, 1) == 0)
        qf_eventcount_notify(&n->io_ec, false);
}

void qf__nats_ref(qf_nats *n)
{
    atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
}

static void process_cmds(qf_nats *n, int64_t now)
{
    qf__nnode *c = qf__nstack_take(&n->cmds);
    while (c) {
        qf__nnode *next = c->next;
        switch (c->kind) {
        case QF__N_RELEASE:
            qf__nconsumer_on_release((qf__nslot *)c);
            break;
        case QF__N_PUBLISH:
        case QF__N_RETRY:
            qf__nsink_on_publish((qf__npub *)c, now);
            break;
        default:
            break;
        }
        c = next;
    }
}

/* The bridge's own copies of the lists, refreshed when they change. */
typedef struct io_view {
    uint32_t gen;
    qf_nats_consumer **cs;
    size_t nc, cap_c;
    qf_nats_sink **ss;
    size_t ns, cap_s;
} io_view;

static void view_refresh(qf_nats *n, io_view *v)
{
    uint32_t gen = atomic_load_explicit(&n->list_gen, memory_order_acquire);
    if (gen == v->gen)
        return;
    pthread_mutex_lock(&n->mu);
    v->gen = atomic_load_explicit(&n->list_gen, memory_order_relaxed);
    v->nc = v->ns = 0;
    for (qf_nats_consumer *c = n->consumers; c; c = c->next) {
        if (v->nc == v->cap_c) {
            size_t cap = v->cap_c ? v->cap_c * 2 : 8;
            qf_nats_consumer **p = realloc(v->cs, cap * sizeof(*p));
            if (!p)
                break; /* keeps what fits; retried at the next change */
            v->cs = p;
            v->cap_c = cap;
        }
        v->cs[v->nc++] = c;
    }
    for (qf_nats_sink *s = n->sinks; s; s = s->next) {
        if (v->ns == v->cap_s) {
            size_t cap = v->cap_s ? v->cap_s * 2 : 8;
            qf_nats_sink **p = realloc(v->ss, cap * sizeof(*p));
            if (!p)
                break;
            v->ss = p;
            v->cap_s = cap;
        }
        v->ss[v->ns++] = s;
    }
    pthread_mutex_unlock(&n->mu);
}

static void *io_main(void *arg)
{
    qf_nats *n = arg;
    io_view v = {.gen = UINT32_MAX};
    for (;;) {
        atomic_exchange(&n->kick, 0);
        int64_t now = qf_now_ns();
        qf_deadline next = QF_FOREVER;
        view_refresh(n, &v);
        process_cmds(n, now);
        for (size_t i = 0; i < v.nc; i++)
            qf__nconsumer_io(v.cs[i], now, &next);
        for (size_t i = 0; i < v.ns; i++)
            qf__nsink_io(v.ss[i], now, &next);
        atomic_fetch_add(&n->io_iter, 1); /* seq_cst: pairs with the waiter count */
        if (atomic_load(&n->io_iter_waiters))
            qf_futex_wake(&n->io_iter, INT32_MAX);
        if (atomic_load_explicit(&n->io_stop, memory_order_acquire)) {
            process_cmds(n, qf_now_ns());
            break;
        }
        uint32_t t = qf_eventcount_prepare(&n->io_ec);
        if (atomic_load(&n->kick) || atomic_load_explicit(&n->cmds.head, memory_order_relaxed) ||
            atomic_load(&n->io_stop)) {
            qf_eventcount_cancel(&n->io_ec);
            continue;
        }
        qf_eventcount_wait_until(&n->io_ec, t, next);
    }
    free(v.cs);
    free(v.ss);
    return NULL;
}

void qf__nats_io_sync(qf_nats *n)
{
    atomic_fetch_add(&n->io_iter_waiters, 1);
    uint32_t start = atomic_load_explicit(&n->io_iter, memory_order_acquire);
    qf__nats_kick(n);
    for (;;) {
        uint32_t now = atomic_load_explicit(&n->io_iter, memory_order_acquire);
        /* the iteration running at `start` may have begun before the
         * caller's change; the one after it did not */
        if (now - start >= 2)
            break;
        qf__nats_kick(n);
        qf_futex_wait_until(&n->io_iter, now, qf_deadline_in_s(0.05));
    }
    atomic_fetch_sub(&n->io_iter_waiters, 1);
}

/* ------------------------------------------------------ connect and free */

static void on_disconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    qf_nats *n = closure;
    atomic_store(&n->connected, false);
    qf__nats_kick(n);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
    qf_nats *n = closure;
    int64_t mp = natsConnection_GetMaxPayload(nc);
    if (mp > 0)
        atomic_store(&n->max_payload, mp);
    atomic_store(&n->connected, true);
    /* pull requests live in the server that received them: re-issue */
    atomic_fetch_add(&n->reconnects, 1);
    qf__nats_kick(n);
}

/* The last callback libnats makes for a connection (its callbacks run in
 * order on one thread of libnats, after natsConnection_Close() returned):
 * the connection's memory may go once it has run. */
static void on_closed(natsConnection *nc, void *closure)
{
    (void)nc;
    qf_nats *n = closure;
    atomic_store(&n->connected, false);
    atomic_store_explicit(&n->closed_cb, 1, memory_order_release);
    qf_futex_wake(&n->closed_cb, INT32_MAX);
}

static void on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    (void)nc;
    (void)sub;
    (void)err;
    qf_nats *n = closure;
    atomic_fetch_add_explicit(&n->async_errors, 1, memory_order_relaxed);
}

static void conn_destroy(qf_nats *n)
{
    if (!n)
        return;
    if (n->nc) {
        /* the bridge is gone: what it published is in libnats's buffer */
        natsConnection_FlushTimeout(n->nc, n->connect_timeout_ms);
        natsConnection_Close(n->nc);
        qf_deadline d = qf_deadline_in_s(10.0);
        while (!atomic_load_explicit(&n->closed_cb, memory_order_acquire) && !qf_deadline_passed(d))
            qf_futex_wait_until(&n->closed_cb, 0, d);
    }
    jsCtx_Destroy(n->js);
    natsConnection_Destroy(n->nc);
    pthread_mutex_destroy(&n->mu);
    free(n->servers);
    free(n);
}

static qf_code bad(const char *what)
{
    return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_connect: %s", what);
}

static int64_t ms_of(double s, double dflt)
{
    double v = s > 0 ? s : dflt;
    return (int64_t)(v * 1000.0 + 0.5);
}

qf_code qf_nats_connect(const qf_nats_options *o, qf_nats **ret_n)
{
    if (!ret_n)
        return bad("ret_n is NULL");
    qf_code rc = qf__nats_not_in_task("qf_nats_connect");
    if (rc != QF_OK)
        return rc;
    qf_nats_options d = {0};
    if (!o)
        o = &d;
    if (o->connect_timeout_s < 0 || o->reconnect_wait_s < 0 || o->request_timeout_s < 0 ||
        o->max_reconnect < 0)
        return bad("negative connect_timeout_s, reconnect_wait_s, request_timeout_s or "
                   "max_reconnect");
    const char *servers = o->servers && *o->servers ? o->servers : "nats://127.0.0.1:4222";

    qf_nats *n = calloc(1, sizeof(*n));
    if (!n || !(n->servers = strdup(servers))) {
        free(n);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_connect: out of memory");
    }
    pthread_mutex_init(&n->mu, NULL);
    qf_eventcount_init(&n->io_ec);
    atomic_init(&n->refs, 1);
    n->connect_timeout_ms = ms_of(o->connect_timeout_s, 2.0);
    n->request_timeout_ms = ms_of(o->request_timeout_s, 5.0);

    /* The URL list, split on commas, for natsOptions_SetServers. */
    char *list = strdup(servers);
    const char *urls[64];
    int nurls = 0;
    for (char *save = NULL, *tok = list ? strtok_r(list, ",", &save) : NULL; tok && nurls < 64;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (*tok)
            urls[nurls++] = tok;
    }
    natsOptions *no = NULL;
    natsStatus s = list ? natsOptions_Create(&no) : NATS_NO_MEMORY;
    if (s == NATS_OK && nurls == 0) {
        free(list);
        natsOptions_Destroy(no);
        conn_destroy(n);
        return bad("no server URL in servers");
    }
    if (s == NATS_OK)
        s = natsOptions_SetServers(no, urls, nurls);
    if (s == NATS_OK)
        s = natsOptions_SetName(no, o->name ? o->name : "qflow");
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(no, n->connect_timeout_ms);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(no, ms_of(o->reconnect_wait_s, 0.1));
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(no, o->max_reconnect > 0 ? o->max_reconnect : -1);
    if (s == NATS_OK)
        s = natsOptions_SetAllowReconnect(no, true);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(no, on_disconnected, n);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectedCB(no, on_reconnected, n);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(no, on_closed, n);
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(no, on_async_error, n);
    /* Publishes made while reconnecting wait in libnats's buffer and go
     * out on reconnect; 32 MiB holds any bounded in-flight window. */
    if (s == NATS_OK)
        s = natsOptions_SetReconnectBufSize(no, 32 << 20);
    if (s == NATS_OK)
        s = natsOptions_SetSendAsap(no, !o->coalesce_writes);
    if (s == NATS_OK)
        s = natsConnection_Connect(&n->nc, no);
    natsOptions_Destroy(no);
    free(list);
    if (s != NATS_OK) {
        if (s == NATS_NO_SERVER)
            rc = qf_set_error(QF_UNAVAILABLE, "NATS: no server available at %s", servers);
        else
            rc = qf__nats_error(s, 0, "NATS: connecting to %s", servers);
        conn_destroy(n);
        return rc;
    }
    atomic_store(&n->connected, true);
    atomic_store(&n->max_payload, natsConnection_GetMaxPayload(n->nc));

    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = n->request_timeout_ms;
    s = natsConnection_JetStream(&n->js, n->nc, &jo);
    if (s != NATS_OK) {
        rc = qf__nats_error(s, 0, "NATS: JetStream context on %s", servers);
        conn_destroy(n);
        return rc;
    }
    if (pthread_create(&n->io, NULL, io_main, n) != 0) {
        conn_destroy(n);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_connect: cannot start the bridge "
                                                   "thread");
    }
    pthread_setname_np(n->io, "qflow-nats");
    *ret_n = n;
    return QF_OK;
}

void qf__nats_unref(qf_nats *n)
{
    if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1)
        return;
    atomic_store_explicit(&n->io_stop, 1, memory_order_release);
    qf__nats_kick(n);
    pthread_join(n->io, NULL);
    conn_destroy(n);
}

void qf_nats_free(qf_nats *n)
{
    if (n)
        qf__nats_unref(n);
}

bool qf_nats_is_connected(const qf_nats *n)
{
    if (!n) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_nats_is_connected: n is NULL");
        return false;
    }
    return atomic_load_explicit(&((qf_nats *)n)->connected, memory_order_relaxed);
}

int64_t qf_nats_max_payload(const qf_nats *n)
{
    if (!n) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_nats_max_payload: n is NULL");
        return 0;
    }
    return atomic_load_explicit(&((qf_nats *)n)->max_payload, memory_order_relaxed);
}

/* ------------------------------------------------------------ coordinator */

qf_code qf__nstop_init(qf__nstop *st, qf_coord *coord, const char *name, void (*fn)(void *),
                       void *arg)
{
    memset(st, 0, sizeof(*st));
    if (!coord)
        return QF_OK;
    st->coord = coord;
    if (asprintf(&st->member_name, "nats-%s", name) < 0) {
        st->member_name = NULL;
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory");
    }
    qf_code rc = qf_coord_member_new(coord, st->member_name, &st->member);
    if (rc == QF_OK)
        rc = qf_coord_add_stop_action(coord, fn, arg, &st->action);
    if (rc != QF_OK) {
        qf_coord_member_done(st->member);
        st->member = NULL;
        free(st->member_name);
        st->member_name = NULL;
    }
    return rc;
}

void qf__nstop_drained(qf__nstop *st)
{
    qf_coord_member *m = st->member;
    st->member = NULL;
    qf_coord_member_done(m);
}

void qf__nstop_resumed(qf__nstop *st)
{
    if (st->coord && !st->member)
        (void)qf_coord_member_new(st->coord, st->member_name, &st->member);
}

void qf__nstop_destroy(qf__nstop *st)
{
    if (st->action)
        qf_coord_remove_stop_action(st->coord, st->action);
    st->action = NULL;
    qf__nstop_drained(st);
    free(st->member_name);
    st->member_name = NULL;
}
