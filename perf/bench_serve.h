/* bench_serve.h - the serving benchmark (serve.latency, serve.expired):
 * one open-loop load generator and one simulated model, run against
 * qflow's batcher and against a baseline batcher with the same policy.
 *
 * Contract of an sv_impl (a batcher of max_batch requests, closing a batch
 * when it is full or when its oldest request has waited delay_ns, answering
 * requests past their deadline DEADLINE_EXCEEDED when it forms a batch):
 *   create(max_batch, delay_ns)   a batcher, unbounded admission
 *   submit(b, item)               admit one request (never refused)
 *   run(b, model, arg)            the executor loop on the calling thread:
 *                                 model(arg, items, n) per batch, until the
 *                                 batcher is drained
 *   drain(b)                      stop admitting; run() hands out what is
 *                                 left and returns
 *   expired(b)                    requests answered DEADLINE_EXCEEDED
 *   destroy(b)                    after run() returned
 */
#ifndef BENCH_SERVE_H
#define BENCH_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "qf_serve.h"

typedef struct sv_item {
    qf_serve_request req; /* qflow's request; first, so the two convert */
    int64_t t_submit;     /* submit call start */
    int64_t t_handoff;    /* the model received its batch */
    int64_t deadline;
    int status;       /* -1 until answered */
    int64_t t_answer; /* its completion ran (serve.answer rows) */
} sv_item;

typedef void (*sv_model_fn)(void *arg, sv_item *const *items, size_t n);

typedef struct sv_impl {
    const char *name;
    void *(*create)(size_t max_batch, int64_t delay_ns);
    void (*submit)(void *b, sv_item *it);
    void (*run)(void *b, sv_model_fn model, void *arg);
    void (*drain)(void *b);
    uint64_t (*expired)(void *b);
    void (*destroy)(void *b);
} sv_impl;

extern const sv_impl sv_qflow;      /* bench_serve_qflow.c */
extern const sv_impl sv_mutex_cond; /* baseline_serve_mutex.c */
extern const sv_impl sv_qflow_fd;   /* bench_serve_fd.c: model thread, completion fd */
extern const sv_impl sv_qflow_task; /* bench_serve_qflow.c: task executor on a runtime */

#endif
