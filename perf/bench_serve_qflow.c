/* bench_serve_qflow.c - qflow's batcher (qf_serve.h) behind the serving
 * benchmark's interface: a callback request per item, and either the
 * thread executor (qf_serve_run) on the benchmark's model thread (sv_qflow)
 * or the task executor (qf_serve_spawn) on a runtime of one worker per CPU,
 * the benchmark's model thread only waiting for it (sv_qflow_task: the
 * README's first example; the model then sleeps on a worker). */
#include <stdlib.h>

#include "bench.h"
#include "bench_serve.h"

typedef struct qb {
    qf_serve *s;
    sv_model_fn model;
    void *arg;
} qb;

static void *q_create(size_t max_batch, int64_t delay_ns)
{
    qb *b = calloc(1, sizeof(*b));
    qf_serve_options o = {
        .name = "bench", .max_batch_size = max_batch, .max_queue_delay_ns = delay_ns};
    if (!b || qf_serve_new(&o, &b->s) != QF_OK)
        bench_fail("qf_serve_new: %s", qf_last_message());
    return b;
}

static void on_done(qf_serve_request *req, qf_code st, void *arg)
{
    (void)arg;
    ((sv_item *)req)->t_answer = (int64_t)bench_now_ns();
    ((sv_item *)req)->status = (int)st;
}

static void q_submit(void *vb, sv_item *it)
{
    qb *b = vb;
    qf_serve_request_init(&it->req, it, it->deadline, 0, on_done, NULL);
    qf_code rc = qf_serve_submit(b->s, &it->req);
    if (rc != QF_OK && rc != QF_DEADLINE_EXCEEDED)
        bench_fail("qf_serve_submit: %s", qf_last_message());
}

static qf_code execute(void *arg, qf_serve_request *const *reqs, size_t n)
{
    qb *b = arg;
    /* req is the first member of sv_item: the pointers convert. */
    b->model(b->arg, (sv_item *const *)reqs, n);
    return QF_OK;
}

static void q_run(void *vb, sv_model_fn model, void *arg)
{
    qb *b = vb;
    b->model = model;
    b->arg = arg;
    if (qf_serve_run(b->s, execute, b) != QF_OK)
        bench_fail("qf_serve_run: %s", qf_last_message());
}

/* The task executor: spawned on a runtime of its own, joined here. */
static void t_run(void *vb, sv_model_fn model, void *arg)
{
    qb *b = vb;
    b->model = model;
    b->arg = arg;
    qf_runtime *rt = NULL;
    qf_task *t = NULL;
    if (qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "serve"}, &rt) !=
            QF_OK ||
        qf_serve_spawn(b->s, rt, execute, b, NULL, &t) != QF_OK)
        bench_fail("qf_serve_spawn: %s", qf_last_message());
    if (qf_task_join(t, QF_FOREVER, NULL) != QF_OK)
        bench_fail("the task executor ended with: %s", qf_last_message());
    qf_task_unref(t);
    qf_runtime_free(rt);
}

static void q_drain(void *vb)
{
    qb *b = vb;
    qf_serve_begin_drain(b->s, QF_FOREVER);
}

static uint64_t q_expired(void *vb)
{
    qb *b = vb;
    qf_serve_stats st;
    qf_serve_get_stats(b->s, &st);
    return st.counts.expired;
}

static void q_destroy(void *vb)
{
    qb *b = vb;
    qf_serve_free(b->s);
    free(b);
}

const sv_impl sv_qflow = {"qflow", q_create, q_submit, q_run, q_drain, q_expired, q_destroy};
const sv_impl sv_qflow_task = {"qflow_task", q_create,  q_submit, t_run,
                               q_drain,      q_expired, q_destroy};
