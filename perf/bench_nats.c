/* bench_nats.c - nats.tput and nats.lat.p50/.p99: messages through one
 * local nats-server with JetStream (file storage), publish acks and
 * Nats-Msg-Id on the way in, one explicit ack per message on the way out,
 * against a plain libnats client doing the same in the same run (the
 * `nats bench --js --pull` shape).
 *
 *   qflow:   a queue -> qf_nats_sink_runner (max_pending 256) -> stream ->
 *            durable pull consumer (max_in_flight 1024) -> source ->
 *            qf_batch -> a consumer thread that frees each batch (the acks)
 *   libnats: js_PublishAsync (MaxPending 256, MsgId) -> stream ->
 *            js_PullSubscribe + natsSubscription_Fetch(64) + natsMsg_Ack
 *
 * nats.tput: N messages of 128 bytes published and consumed at the same
 * time; messages/s from the first publish to the last message received.
 * Every message must arrive once (checked by index).
 * nats.lat: one message in flight at a time (the next is published when
 * the previous arrived), batch size 1 on the qflow side, Fetch(1) on the
 * plain side; nanoseconds from the publish call to the consumer holding
 * the message. Warm-up not counted.
 *
 * Each repetition starts its own nats-server in a temporary directory and
 * kills it at the end. Without nats-server nothing is registered and a
 * note says so.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "../tests/qf_test_nats.h"
#include "bench.h"
#include "qf_futex.h"
#include "qf_nats.h"
#include "qflow.h"

#define PAYLOAD 128
#define LAT_WARMUP 50

/* QF_BENCH_NATS_COALESCE=1: both clients let libnats gather writes for
 * up to 1 ms (qf_nats_options.coalesce_writes) instead of writing at once. */
static bool coalesce(void)
{
    const char *e = getenv("QF_BENCH_NATS_COALESCE");
    return e && *e && strcmp(e, "0") != 0;
}

/* ---------------------------------------------------------------- server */

typedef struct server {
    char root[128];
    qft_nats s;
} server;

static void server_up(server *sv)
{
    if (!qft_tmpdir(sv->root, sizeof(sv->root)) || !qft_nats_single(&sv->s, sv->root, 0))
        bench_fail("nats: could not start nats-server");
}

static void server_down(server *sv)
{
    qft_nats_kill(&sv->s, SIGKILL);
    qft_rm_rf(sv->root);
}

static void make_stream(qf_nats *n)
{
    const char *subjects[1] = {"bench.in"};
    if (qf_nats_stream_create(
            n, &(qf_nats_stream_options){.name = "BENCH", .subjects = subjects, .n_subjects = 1}) !=
        QF_OK)
        bench_fail("nats: stream: %s", qf_last_message());
}

/* "<index> <publish time ns>" padded to PAYLOAD bytes. */
static void fill(char *b, uint64_t i)
{
    int l = snprintf(b, PAYLOAD, "%" PRIu64 " %" PRIu64 " ", i, bench_now_ns());
    memset(b + l, 'x', PAYLOAD - (size_t)l);
}

static void parse(const char *b, uint64_t *i, uint64_t *t)
{
    char *end;
    *i = strtoull(b, &end, 10);
    *t = strtoull(end, NULL, 10);
}

typedef struct tally {
    uint64_t n, got;
    uint8_t *seen;
    uint64_t *lat; /* latency runs */
} tally;

static void take(tally *t, const char *payload, size_t len)
{
    uint64_t now = bench_now_ns(), i, ts;
    if (len != PAYLOAD)
        bench_fail("nats: payload of %zu bytes", len);
    parse(payload, &i, &ts);
    if (i >= t->n || t->seen[i])
        bench_fail("nats: message %" PRIu64 " %s", i, i >= t->n ? "unknown" : "twice");
    t->seen[i] = 1;
    if (t->lat)
        t->lat[t->got] = now - ts;
    t->got++;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void percentiles(bench_rep *r, tally *t)
{
    uint64_t n = t->got - LAT_WARMUP;
    qsort(t->lat + LAT_WARMUP, n, sizeof(uint64_t), cmp_u64);
    r->values[0] = (double)t->lat[LAT_WARMUP + (n - 1) / 2];
    r->values[1] = (double)t->lat[LAT_WARMUP + (n * 99 + 99) / 100 - 1];
}

/* ------------------------------------------------------------------ qflow */

typedef struct qrun {
    qf_nats *n;
    qf_runtime *rt;
    qf_coord *pcoord, *ccoord;
    qf_scope *scope;
    qf_queue *in;
    qf_nats_sink *sink;
    qf_queue_runner *pub;
    qf_nats_consumer *c;
    qf_batcher *b;
    qf_task **ptasks, **ctasks;
    size_t npt, nct;
    int64_t batch;
    _Atomic uint64_t published;
    QF_ATOMIC(uint32_t) received; /* latency runs: futex word */
    uint64_t count;
    bool paced;
} qrun;

static void q_up(qrun *q, const char *url, int64_t batch)
{
    if (qf_nats_connect(&(qf_nats_options){.servers = url, .coalesce_writes = coalesce()}, &q->n) !=
        QF_OK)
        bench_fail("nats: connect: %s", qf_last_message());
    make_stream(q->n);
    q->batch = batch;
    qf_runtime_new(&(qf_runtime_options){.workers = 2}, &q->rt);
    qf_coord_new(NULL, 0, &q->pcoord);
    qf_coord_new(NULL, 0, &q->ccoord);
    qf_scope_new(&q->scope);
    qf_dtype dt[1] = {QF_STRING};
    qf_shape sh[1] = {qf_shape_scalar()};
    qf_fifo_queue_new(
        &(qf_queue_options){
            .capacity = 1024, .num_components = 1, .dtypes = dt, .shapes = sh, .name = "bench_in"},
        &q->in);
    if (qf_nats_sink_new(q->n,
                         &(qf_nats_sink_options){.subject = "bench.in",
                                                 .payload = QF_NATS_PAYLOAD_COMPONENT,
                                                 .id_prefix = "q",
                                                 .max_pending = 256,
                                                 .coord = q->pcoord},
                         &q->sink) != QF_OK ||
        qf_nats_sink_runner(q->sink, q->in, 1, &q->pub) != QF_OK)
        bench_fail("nats: sink: %s", qf_last_message());
    if (qf_nats_consumer_new(
            q->n,
            &(qf_nats_consumer_options){
                .stream = "BENCH", .durable = "qflow", .max_in_flight = 1024, .coord = q->ccoord},
            &q->c) != QF_OK)
        bench_fail("nats: consumer: %s", qf_last_message());
    qf_batch_source *src = NULL;
    qf_nats_consumer_source(q->c, &src);
    if (qf_batch(q->scope, src, batch, &(qf_batch_options){.capacity = 8 * batch + 64}, &q->b) !=
        QF_OK)
        bench_fail("nats: batch: %s", qf_last_message());
    qf_start_queue_runners(q->rt, q->ccoord, q->scope, NULL, QF_RUNNER_START, &q->ctasks, &q->nct);
    qf_queue_runner_start(q->pub, q->rt, q->pcoord, QF_RUNNER_START, &q->ptasks, &q->npt);
}

static void q_down(qrun *q)
{
    qf_queue_close(q->in, false);
    if (qf_coord_join(q->pcoord, NULL, 0, 30, false, NULL) != QF_OK)
        bench_fail("nats: producer: %s", qf_last_message());
    qf_coord_request_stop(q->ccoord, NULL);
    qf_coord_join(q->ccoord, NULL, 0, 30, false, NULL);
    qf_tasks_free(q->ptasks, q->npt);
    qf_tasks_free(q->ctasks, q->nct);
    qf_runtime_free(q->rt);
    qf_queue_runner_free(q->pub);
    qf_batcher_free(q->b);
    qf_scope_free(q->scope);
    qf_queue_unref(q->in);
    qf_nats_sink_free(q->sink);
    qf_nats_consumer_free(q->c);
    qf_coord_free(q->pcoord);
    qf_coord_free(q->ccoord);
    qf_nats_free(q->n);
}

static void *q_producer(void *arg)
{
    qrun *q = arg;
    char b[PAYLOAD];
    for (uint64_t i = 0; i < q->count; i++) {
        if (q->paced) { /* one in flight: wait until the previous arrived */
            uint32_t v;
            while ((v = atomic_load(&q->received)) < i)
                qf_futex_wait_until(&q->received, v, qf_deadline_in_s(1));
        }
        fill(b, i);
        qf_tensor *t = qf_tensor_new_string(b, PAYLOAD);
        if (qf_queue_enqueue(q->in, qf_element_of(1, &t)) != QF_OK)
            bench_fail("nats: enqueue: %s", qf_last_message());
    }
    return NULL;
}

static void q_consume(qrun *q, tally *t)
{
    while (t->got < t->n) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(q->b, qf_deadline_in_s(0.02), &e);
        if (rc == QF_DEADLINE_EXCEEDED)
            rc = qf_queue_try_dequeue_up_to(qf_batcher_queue(q->b), q->batch, &e);
        if (rc == QF_UNAVAILABLE)
            continue;
        if (rc != QF_OK)
            bench_fail("nats: batch: %s", qf_last_message());
        const qf_tensor *v = qf_element_get(e, QF_NATS_VALUE);
        for (int64_t k = 0; k < qf_tensor_num_elements(v); k++) {
            size_t len;
            const char *s = qf_tensor_string(v, k, &len);
            take(t, s, len);
        }
        qf_element_free(e); /* the acks */
        if (q->paced) {
            atomic_store(&q->received, (uint32_t)t->got);
            qf_futex_wake(&q->received, 1);
        }
    }
}

static void qflow_run(bench_rep *r, bool paced)
{
    server sv;
    server_up(&sv);
    qrun q = {.count = paced ? bench_scale(r, 200, 3000) : bench_scale(r, 10000, 100000),
              .paced = paced};
    tally t = {.n = q.count, .seen = calloc(q.count, 1)};
    if (paced)
        t.lat = calloc(q.count, sizeof(uint64_t));
    q_up(&q, sv.s.url, paced ? 1 : 64);
    pthread_t th;
    uint64_t t0 = bench_now_ns();
    pthread_create(&th, NULL, q_producer, &q);
    q_consume(&q, &t);
    uint64_t t1 = bench_now_ns();
    pthread_join(th, NULL);
    q_down(&q);
    if (paced)
        percentiles(r, &t);
    else
        r->values[0] = (double)t.n / ((double)(t1 - t0) / 1e9);
    free(t.seen);
    free(t.lat);
    server_down(&sv);
}

static void qflow_tput(bench_rep *r)
{
    qflow_run(r, false);
}

static void qflow_lat(bench_rep *r)
{
    qflow_run(r, true);
}

/* ------------------------------------------------------- plain libnats */

typedef struct prun {
    natsConnection *nc;
    jsCtx *js;
    uint64_t count;
    bool paced;
    QF_ATOMIC(uint32_t) received;
} prun;

static void *p_producer(void *arg)
{
    prun *p = arg;
    char b[PAYLOAD], id[32];
    for (uint64_t i = 0; i < p->count; i++) {
        if (p->paced) {
            uint32_t v;
            while ((v = atomic_load(&p->received)) < i)
                qf_futex_wait_until(&p->received, v, qf_deadline_in_s(1));
        }
        fill(b, i);
        snprintf(id, sizeof(id), "p-%" PRIu64, i);
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = id;
        if (js_PublishAsync(p->js, "bench.in", b, PAYLOAD, &po) != NATS_OK)
            bench_fail("nats: js_PublishAsync: %s", nats_GetLastError(NULL));
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 30000;
    if (js_PublishAsyncComplete(p->js, &po) != NATS_OK)
        bench_fail("nats: js_PublishAsyncComplete: %s", nats_GetLastError(NULL));
    return NULL;
}

static void plain_run(bench_rep *r, bool paced)
{
    server sv;
    server_up(&sv);
    prun p = {.count = paced ? bench_scale(r, 200, 3000) : bench_scale(r, 10000, 100000),
              .paced = paced};
    tally t = {.n = p.count, .seen = calloc(p.count, 1)};
    if (paced)
        t.lat = calloc(p.count, sizeof(uint64_t));
    {
        qf_nats *n = NULL; /* the stream, made the same way for both */
        if (qf_nats_connect(&(qf_nats_options){.servers = sv.s.url}, &n) != QF_OK)
            bench_fail("nats: connect: %s", qf_last_message());
        make_stream(n);
        qf_nats_free(n);
    }
    /* the same transport setting as qflow's connection (SendAsap unless
     * QF_BENCH_NATS_COALESCE is set) */
    natsOptions *no = NULL;
    natsOptions_Create(&no);
    natsOptions_SetURL(no, sv.s.url);
    natsOptions_SetSendAsap(no, !coalesce());
    if (natsConnection_Connect(&p.nc, no) != NATS_OK)
        bench_fail("nats: connect: %s", nats_GetLastError(NULL));
    natsOptions_Destroy(no);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 256;
    jo.PublishAsync.StallWait = 30000; /* ms: back-pressure, not a failure, under load */
    natsConnection_JetStream(&p.js, p.nc, &jo);
    natsSubscription *sub = NULL;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.MaxAckPending = 4096;
    jsErrCode jerr = 0;
    if (js_PullSubscribe(&sub, p.js, "bench.in", "plain", NULL, &so, &jerr) != NATS_OK)
        bench_fail("nats: js_PullSubscribe: %s", nats_GetLastError(NULL));
    pthread_t th;
    uint64_t t0 = bench_now_ns();
    pthread_create(&th, NULL, p_producer, &p);
    while (t.got < t.n) {
        natsMsgList list = {0};
        natsStatus s = natsSubscription_Fetch(&list, sub, paced ? 1 : 64, 1000, &jerr);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK)
            bench_fail("nats: fetch: %s", nats_GetLastError(NULL));
        for (int k = 0; k < list.Count; k++) {
            natsMsg *m = list.Msgs[k];
            take(&t, natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
            natsMsg_Ack(m, NULL);
        }
        natsMsgList_Destroy(&list);
        if (paced) {
            atomic_store(&p.received, (uint32_t)t.got);
            qf_futex_wake(&p.received, 1);
        }
    }
    uint64_t t1 = bench_now_ns();
    pthread_join(th, NULL);
    natsConnection_Flush(p.nc);
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(p.js);
    natsConnection_Destroy(p.nc);
    if (paced)
        percentiles(r, &t);
    else
        r->values[0] = (double)t.n / ((double)(t1 - t0) / 1e9);
    free(t.seen);
    free(t.lat);
    server_down(&sv);
}

static void plain_tput(bench_rep *r)
{
    plain_run(r, false);
}

static void plain_lat(bench_rep *r)
{
    plain_run(r, true);
}

void bench_register_nats(void)
{
    if (!qft_nats_server_path()) {
        fprintf(stderr, "qflow-bench: nats.tput and nats.lat skipped: nats-server is not "
                        "installed\n");
        return;
    }
    bench_register(&(bench_case){
        .name = "nats.tput",
        .impl = "qflow",
        .unit = BENCH_ITEMS_PER_S,
        .params = {{.key = "payload", .num = PAYLOAD},
                   {.key = "batch", .num = 64},
                   {.key = "max_pending", .num = 256}},
        .note = "publish with acks + consume with one ack per message, one local server",
        .run = qflow_tput,
    });
    bench_register(&(bench_case){
        .name = "nats.tput",
        .impl = "libnats",
        .unit = BENCH_ITEMS_PER_S,
        .params = {{.key = "payload", .num = PAYLOAD},
                   {.key = "fetch", .num = 64},
                   {.key = "max_pending", .num = 256}},
        .run = plain_tput,
    });
    bench_register(&(bench_case){
        .name = "nats.lat",
        .impl = "qflow",
        .unit = BENCH_NS,
        .outputs = {"nats.lat.p50", "nats.lat.p99"},
        .params = {{.key = "payload", .num = PAYLOAD}, {.key = "batch", .num = 1}},
        .note = "one message in flight: publish call to the consumer holding it",
        .run = qflow_lat,
    });
    bench_register(&(bench_case){
        .name = "nats.lat",
        .impl = "libnats",
        .unit = BENCH_NS,
        .outputs = {"nats.lat.p50", "nats.lat.p99"},
        .params = {{.key = "payload", .num = PAYLOAD}, {.key = "fetch", .num = 1}},
        .run = plain_lat,
    });
}
