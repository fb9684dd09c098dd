/* bench_queue_tput.c - queue throughput: P producers and C consumers move
 * N pointer-sized elements through one queue of capacity 1024 with
 * blocking calls (single or batched), any implementation of baseline.h.
 *
 * Timing: every thread waits at a barrier; the clock runs from the moment
 * the first thread leaves it to the moment the last consumer has seen the
 * end of the stream (the last producer closes the queue; consumers drain
 * it). Result: elements received / that time.
 *
 * Time budget: a repetition that is still running after its budget (a
 * spinning queue with more threads than cores can crawl) is told to stop:
 * producers finish the element in hand, the queue is closed and drained,
 * and the rate is computed over what moved (r->truncated). A repetition
 * that has not finished HANG_GRACE_S after that is reported as hung. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_queue.h"

#define BUDGET_QUICK_S 1.0
#define BUDGET_FULL_S 5
#define HANG_GRACE_S 30
#define MAX_BATCH 64

typedef struct tput_run tput_run;

typedef struct producer {
    alignas(64) tput_run *run;
    int id;
    uint64_t sent;
    uint64_t t_start;
} producer;

typedef struct consumer {
    qb_seen seen;
    tput_run *run;
    uint64_t t_start, t_end;
} consumer;

struct tput_run {
    const tput_cfg *cfg;
    bq *q;
    uint64_t per_producer;
    pthread_barrier_t start;
    atomic_int producers_left;
    atomic_int consumers_left;
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
    bool done;
    alignas(64) atomic_bool stop; /* read by producers every element */
    alignas(64) producer prod[QB_MAX_THREADS];
    consumer cons[QB_MAX_THREADS];
};

static bool should_stop(tput_run *run)
{
    return atomic_load_explicit(&run->stop, memory_order_relaxed);
}

static void *producer_main(void *arg)
{
    producer *p = arg;
    tput_run *run = p->run;
    const tput_cfg *cfg = run->cfg;
    void *batch[MAX_BATCH];
    uint64_t seq = 1;

    pthread_barrier_wait(&run->start);
    p->t_start = bench_now_ns();
    if (cfg->batch <= 1) {
        for (; seq <= run->per_producer && !should_stop(run); seq++)
            if (cfg->impl->enqueue(run->q, qb_value(p->id, seq)) != 0)
                bench_fail("%s: enqueue failed on an open queue", cfg->impl->name);
    } else {
        for (; seq + cfg->batch - 1 <= run->per_producer && !should_stop(run); seq += cfg->batch) {
            for (unsigned i = 0; i < cfg->batch; i++)
                batch[i] = qb_value(p->id, seq + i);
            if (cfg->impl->enqueue_many(run->q, batch, cfg->batch) != 0)
                bench_fail("%s: enqueue_many failed on an open queue", cfg->impl->name);
        }
    }
    p->sent = seq - 1;
    /* The last producer out closes: every enqueue has returned by then. */
    if (atomic_fetch_sub(&run->producers_left, 1) == 1)
        cfg->impl->close(run->q);
    return NULL;
}

static void *consumer_main(void *arg)
{
    consumer *c = arg;
    tput_run *run = c->run;
    const tput_cfg *cfg = run->cfg;
    const char *what = cfg->impl->name;
    int producers = cfg->producers;
    void *batch[MAX_BATCH];
    unsigned deq_batch = cfg->deq_batch ? cfg->deq_batch : cfg->batch;

    pthread_barrier_wait(&run->start);
    c->t_start = bench_now_ns();
    if (deq_batch <= 1) {
        void *v;
        while (cfg->impl->dequeue(run->q, &v) == 0)
            qb_record(&c->seen, v, producers, what);
    } else {
        size_t n;
        while ((n = cfg->impl->dequeue_many(run->q, batch, deq_batch)) > 0)
            for (size_t i = 0; i < n; i++)
                qb_record(&c->seen, batch[i], producers, what);
    }
    c->t_end = bench_now_ns();
    if (atomic_fetch_sub(&run->consumers_left, 1) == 1) {
        pthread_mutex_lock(&run->done_mu);
        run->done = true;
        pthread_cond_signal(&run->done_cv);
        pthread_mutex_unlock(&run->done_mu);
    }
    return NULL;
}

/* Wait until the consumers are done or `deadline_ns` passes; true if done. */
static bool wait_done(tput_run *run, uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    pthread_mutex_lock(&run->done_mu);
    int err = 0;
    while (!run->done && err != ETIMEDOUT)
        err = pthread_cond_timedwait(&run->done_cv, &run->done_mu, &ts);
    bool done = run->done;
    pthread_mutex_unlock(&run->done_mu);
    return done;
}

void qb_run_tput(bench_rep *r)
{
    const tput_cfg *cfg = r->arg;
    const char *what = cfg->impl->name;
    int np = cfg->producers, nc = cfg->consumers;
    if (np > QB_MAX_THREADS || nc > QB_MAX_THREADS || cfg->batch > MAX_BATCH ||
        cfg->deq_batch > MAX_BATCH ||
        (cfg->batch > 1 && (!cfg->impl->enqueue_many || !cfg->impl->dequeue_many)) ||
        (cfg->deq_batch > 1 && !cfg->impl->dequeue_many))
        bench_fail("%s: unsupported configuration", what);

    tput_run *run = aligned_alloc(64, (sizeof(*run) + 63) & ~(size_t)63);
    if (!run)
        bench_fail("out of memory");
    memset(run, 0, sizeof(*run));
    run->cfg = cfg;
    run->per_producer = bench_scale(r, cfg->items_quick, cfg->items_full) / (uint64_t)np;
    run->q = cfg->impl->create(QB_CAPACITY, cfg->flags);
    if (!run->q)
        bench_fail("%s: cannot create the queue", what);
    atomic_init(&run->producers_left, np);
    atomic_init(&run->consumers_left, nc);
    atomic_init(&run->stop, false);
    pthread_barrier_init(&run->start, NULL, (unsigned)(np + nc + 1));
    pthread_mutex_init(&run->done_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&run->done_cv, &ca);
    pthread_condattr_destroy(&ca);

    pthread_t threads[2 * QB_MAX_THREADS];
    int nt = 0;
    for (int i = 0; i < nc; i++) {
        run->cons[i].run = run;
        if (pthread_create(&threads[nt++], NULL, consumer_main, &run->cons[i]) != 0)
            bench_fail("pthread_create failed");
    }
    for (int i = 0; i < np; i++) {
        run->prod[i].run = run;
        run->prod[i].id = i;
        if (pthread_create(&threads[nt++], NULL, producer_main, &run->prod[i]) != 0)
            bench_fail("pthread_create failed");
    }

    pthread_barrier_wait(&run->start);
    uint64_t budget = bench_budget_ns(r, cfg->budget_quick_s ? cfg->budget_quick_s : BUDGET_QUICK_S,
                                      BUDGET_FULL_S);
    if (!wait_done(run, bench_now_ns() + budget)) {
        atomic_store(&run->stop, true);
        r->truncated = true;
        if (!wait_done(run, bench_now_ns() + (uint64_t)HANG_GRACE_S * 1000000000u))
            bench_fail("%s: %s: not finished %d s after being told to stop (hung?)", r->bc->name,
                       what, HANG_GRACE_S);
    }
    for (int i = 0; i < nt; i++)
        pthread_join(threads[i], NULL);

    uint64_t sent[QB_MAX_THREADS], t0 = UINT64_MAX, t1 = 0, received = 0;
    qb_seen seen[QB_MAX_THREADS];
    for (int i = 0; i < np; i++) {
        sent[i] = run->prod[i].sent;
        t0 = run->prod[i].t_start < t0 ? run->prod[i].t_start : t0;
    }
    for (int i = 0; i < nc; i++) {
        seen[i] = run->cons[i].seen;
        if (cfg->any_order)
            seen[i].out_of_order = 0;
        received += seen[i].received;
        t0 = run->cons[i].t_start < t0 ? run->cons[i].t_start : t0;
        t1 = run->cons[i].t_end > t1 ? run->cons[i].t_end : t1;
    }
    char label[128];
    snprintf(label, sizeof(label), "%s/%s", r->bc->name, what);
    qb_verify(label, sent, np, seen, nc);
    r->values[0] = (double)received / ((double)(t1 - t0) / 1e9);

    cfg->impl->destroy(run->q);
    pthread_barrier_destroy(&run->start);
    pthread_mutex_destroy(&run->done_mu);
    pthread_cond_destroy(&run->done_cv);
    free(run);
}
