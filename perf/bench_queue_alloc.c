/* bench_queue_alloc.c - heap allocations per element in the steady state.
 *
 * P producers and C consumers move elements through one queue (capacity
 * 1024, blocking calls, so the full and empty paths with their waits are
 * exercised). Each thread reads its own allocation counter
 * (alloc_count.h) once it is warm (WARMUP elements moved) and again after
 * its last successful call, so thread start-up, the first waits and the
 * final end-of-stream call (which may format a message) fall outside the
 * window. Result: producer allocations per element enqueued in the window
 * plus consumer allocations per element dequeued in theirs; 0 for a queue
 * that does not allocate per element. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc_count.h"
#include "bench_queue.h"

#define WARMUP 5000

typedef struct alloc_run alloc_run;

typedef struct worker {
    qb_seen seen; /* consumers */
    alloc_run *run;
    int id;
    uint64_t moved;        /* elements enqueued or dequeued */
    uint64_t window_items; /* of them, after the warm-up */
    uint64_t window_allocs;
} worker;

struct alloc_run {
    const alloc_cfg *cfg;
    bq *q;
    uint64_t per_producer;
    pthread_barrier_t start;
    atomic_int producers_left;
    worker prod[QB_MAX_THREADS];
    worker cons[QB_MAX_THREADS];
};

static void *producer_main(void *arg)
{
    worker *w = arg;
    alloc_run *run = w->run;
    uint64_t a0 = 0, a1 = 0;
    pthread_barrier_wait(&run->start);
    for (uint64_t seq = 1; seq <= run->per_producer; seq++) {
        if (seq == WARMUP + 1)
            a0 = bench_alloc_count();
        if (run->cfg->impl->enqueue(run->q, qb_value(w->id, seq)) != 0)
            bench_fail("%s: enqueue failed on an open queue", run->cfg->impl->name);
    }
    a1 = bench_alloc_count();
    w->moved = run->per_producer;
    if (w->moved > WARMUP) {
        w->window_items = w->moved - WARMUP;
        w->window_allocs = a1 - a0;
    }
    if (atomic_fetch_sub(&run->producers_left, 1) == 1)
        run->cfg->impl->close(run->q);
    return NULL;
}

static void *consumer_main(void *arg)
{
    worker *w = arg;
    alloc_run *run = w->run;
    uint64_t a0 = 0, last_ok = 0;
    void *v;
    pthread_barrier_wait(&run->start);
    while (run->cfg->impl->dequeue(run->q, &v) == 0) {
        last_ok = bench_alloc_count();
        qb_record(&w->seen, v, run->cfg->producers, "queue.alloc");
        if (++w->moved == WARMUP)
            a0 = bench_alloc_count();
    }
    if (w->moved > WARMUP) {
        w->window_items = w->moved - WARMUP;
        w->window_allocs = last_ok - a0;
    }
    return NULL;
}

void qb_run_alloc(bench_rep *r)
{
    const alloc_cfg *cfg = r->arg;
    int np = cfg->producers, nc = cfg->consumers;
    if (!bench_alloc_count_available()) {
        fprintf(stderr, "\nqflow-bench: queue.alloc: allocation counting is compiled out in "
                        "sanitizer builds\n");
        r->values[0] = NAN; /* written as null; --compare shows n/a */
        return;
    }
    static alloc_run run; /* large; one repetition at a time */
    memset(&run, 0, sizeof(run));
    run.cfg = cfg;
    run.per_producer = bench_scale(r, 100000, 1000000);
    run.q = cfg->impl->create(QB_CAPACITY, 0);
    if (!run.q)
        bench_fail("%s: cannot create the queue", cfg->impl->name);
    atomic_init(&run.producers_left, np);
    pthread_barrier_init(&run.start, NULL, (unsigned)(np + nc));

    pthread_t threads[2 * QB_MAX_THREADS];
    int nt = 0;
    for (int i = 0; i < nc; i++) {
        run.cons[i].run = &run;
        pthread_create(&threads[nt++], NULL, consumer_main, &run.cons[i]);
    }
    for (int i = 0; i < np; i++) {
        run.prod[i].run = &run;
        run.prod[i].id = i;
        pthread_create(&threads[nt++], NULL, producer_main, &run.prod[i]);
    }
    for (int i = 0; i < nt; i++)
        pthread_join(threads[i], NULL);

    uint64_t sent[QB_MAX_THREADS];
    qb_seen seen[QB_MAX_THREADS];
    uint64_t p_items = 0, p_allocs = 0, c_items = 0, c_allocs = 0;
    for (int i = 0; i < np; i++) {
        sent[i] = run.prod[i].moved;
        p_items += run.prod[i].window_items;
        p_allocs += run.prod[i].window_allocs;
    }
    for (int i = 0; i < nc; i++) {
        seen[i] = run.cons[i].seen;
        c_items += run.cons[i].window_items;
        c_allocs += run.cons[i].window_allocs;
    }
    qb_verify("queue.alloc", sent, np, seen, nc);
    r->values[0] = (p_items ? (double)p_allocs / (double)p_items : 0) +
                   (c_items ? (double)c_allocs / (double)c_items : 0);

    cfg->impl->destroy(run.q);
    pthread_barrier_destroy(&run.start);
}
