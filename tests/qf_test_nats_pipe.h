/* qf_test_nats_pipe.h - tests: the qflow side of the NATS tests. A consumer
 * pipeline (consumer -> source -> qf_batch -> the test thread) and a
 * publishing pipeline (a queue the test fills -> the sink runner), each
 * on its own Coordinator, on a runtime of two workers.
 */
#ifndef QF_TEST_NATS_PIPE_H
#define QF_TEST_NATS_PIPE_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qf_nats.h"
#include "qflow.h"

/* The message of the last join of qft_pipe_stop() / qft_publish(), kept
 * because freeing the pipeline afterwards may set the thread's last error. */
static char qft_join_msg[512];

static inline qf_code qft_join(qf_coord *c, double grace)
{
    qf_code rc = qf_coord_join(c, NULL, 0, grace, false, NULL);
    snprintf(qft_join_msg, sizeof(qft_join_msg), "%s", rc == QF_OK ? "" : qf_last_message());
    return rc;
}

typedef struct qft_pipe {
    qf_runtime *rt;
    qf_coord *coord;
    qf_scope *scope;
    qf_nats_consumer *c;
    qf_batcher *b;
    qf_task **tasks;
    size_t nt;
    int64_t batch;
} qft_pipe;

/* Start a consumer pipeline; o->coord is set to the pipe's Coordinator. */
static inline void qft_pipe_start(qft_pipe *p, qf_nats *n, qf_nats_consumer_options o,
                                  int64_t batch)
{
    memset(p, 0, sizeof(*p));
    p->batch = batch;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2}, &p->rt), QF_OK);
    cr_assert_eq(qf_coord_new(NULL, 0, &p->coord), QF_OK);
    cr_assert_eq(qf_scope_new(&p->scope), QF_OK);
    o.coord = p->coord;
    cr_assert_eq(qf_nats_consumer_new(n, &o, &p->c), QF_OK, "%s", qf_last_message());
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_nats_consumer_source(p->c, &src), QF_OK, "%s", qf_last_message());
    cr_assert_eq(
        qf_batch(p->scope, src, batch, &(qf_batch_options){.capacity = 4 * batch + 16}, &p->b),
        QF_OK, "%s", qf_last_message());
    cr_assert_eq(
        qf_start_queue_runners(p->rt, p->coord, p->scope, NULL, QF_RUNNER_START, &p->tasks, &p->nt),
        QF_OK);
}

/* A full batch, or after `linger_s` whatever is there; QF_UNAVAILABLE
 * when nothing came by then. */
static inline qf_code qft_pipe_next(qft_pipe *p, double linger_s, qf_element **ret)
{
    qf_code rc = qf_batcher_next_until(p->b, qf_deadline_in_s(linger_s), ret);
    if (rc == QF_DEADLINE_EXCEEDED)
        rc = qf_queue_try_dequeue_up_to(qf_batcher_queue(p->b), p->batch, ret);
    return rc;
}

/* Stop (draining the consumer), join, free everything but the consumer's
 * stats, which are copied to *ret_stats when non-NULL. Returns join's code. */
static inline qf_code qft_pipe_stop(qft_pipe *p, qf_nats_consumer_stats *ret_stats)
{
    qf_coord_request_stop(p->coord, NULL);
    qf_code rc = qft_join(p->coord, 30.0);
    if (ret_stats)
        qf_nats_consumer_get_stats(p->c, ret_stats);
    qf_tasks_free(p->tasks, p->nt);
    qf_runtime_free(p->rt);
    qf_batcher_free(p->b);
    qf_scope_free(p->scope);
    qf_nats_consumer_free(p->c);
    qf_coord_free(p->coord);
    memset(p, 0, sizeof(*p));
    return rc;
}

/* Make element i of a publishing run. */
typedef qf_element *(*qft_make_fn)(int64_t i);

/* Publish elements from..from+count-1 through a sink runner and wait for
 * the pipeline to end; returns join's code, the sink's stats in *ret. */
static inline qf_code qft_publish(qf_nats *n, qf_nats_sink_options so, const qf_queue_options *qo,
                                  qft_make_fn make, int64_t from, int64_t count,
                                  qf_nats_sink_stats *ret)
{
    qf_runtime *rt = NULL;
    qf_coord *coord = NULL;
    qf_queue *q = NULL;
    qf_nats_sink *s = NULL;
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2}, &rt), QF_OK);
    cr_assert_eq(qf_coord_new(NULL, 0, &coord), QF_OK);
    qf_queue_options o = *qo;
    o.capacity = count + 1;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    for (int64_t i = from; i < from + count; i++)
        cr_assert_eq(qf_queue_enqueue(q, make(i)), QF_OK, "%s", qf_last_message());
    qf_queue_close(q, false);
    so.coord = coord;
    qf_code rc = qf_nats_sink_new(n, &so, &s);
    if (rc != QF_OK)
        snprintf(qft_join_msg, sizeof(qft_join_msg), "%s", qf_last_message());
    if (rc == QF_OK) {
        cr_assert_eq(qf_nats_sink_runner(s, q, 1, &r), QF_OK, "%s", qf_last_message());
        qf_task **tasks = NULL;
        size_t nt = 0;
        cr_assert_eq(qf_queue_runner_start(r, rt, coord, QF_RUNNER_START, &tasks, &nt), QF_OK);
        rc = qft_join(coord, 60.0);
        if (ret)
            qf_nats_sink_get_stats(s, ret);
        qf_tasks_free(tasks, nt);
        qf_runtime_free(rt);
        rt = NULL;
        qf_queue_runner_free(r);
    }
    qf_runtime_free(rt);
    qf_nats_sink_free(s);
    qf_queue_unref(q);
    qf_coord_free(coord);
    return rc;
}

/* Poll a condition of another process (the server) until it holds or the
 * deadline: a short pause between looks, never an ordering by sleep. */
#define QFT_EVENTUALLY(cond, secs)                                                                 \
    do {                                                                                           \
        qf_deadline qft_d_ = qf_deadline_in_s(secs);                                               \
        while (!(cond) && !qf_deadline_passed(qft_d_))                                             \
            qft_nap_ms(10);                                                                        \
    } while (0)

#endif
