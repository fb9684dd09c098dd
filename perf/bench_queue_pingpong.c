/* bench_queue_pingpong.c - round-trip latency: thread A enqueues a value
 * into queue ab, thread B dequeues it and enqueues it into queue ba, A
 * dequeues it. A times each round trip with CLOCK_MONOTONIC after a
 * warm-up; one repetition gives the p50 and p99 of its round trips
 * (nearest rank). Every value is distinct and checked on its way back.
 * The repetition stops early (truncated) after its time budget; the
 * warm-up gets a quarter of it besides (a queue whose threads spin, on a
 * loaded machine, can take a time slice per round trip: 2000 of them
 * would be many seconds), and one cut short also marks it truncated. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "bench_queue.h"

#define WARMUP 2000
#define BUDGET_QUICK_S 1
#define BUDGET_FULL_S 10
#define HANG_GRACE_S 30

typedef struct pingpong_run {
    const bq_impl *impl;
    bq *ab, *ba;
    uint64_t *samples;
    size_t n, measured;
    uint64_t budget_ns;
    bool truncated;
} pingpong_run;

static void *echo_main(void *arg)
{
    pingpong_run *run = arg;
    void *v;
    while (run->impl->dequeue(run->ab, &v) == 0)
        if (run->impl->enqueue(run->ba, v) != 0)
            bench_fail("%s: pingpong: enqueue failed on an open queue", run->impl->name);
    return NULL;
}

static void bounce(pingpong_run *run, uint64_t i)
{
    void *back = NULL;
    if (run->impl->enqueue(run->ab, qb_value(0, i)) != 0 || run->impl->dequeue(run->ba, &back) != 0)
        bench_fail("%s: pingpong: a queue failed while open", run->impl->name);
    if (back != qb_value(0, i))
        bench_fail("%s: pingpong: sent %llu, got %p back", run->impl->name, (unsigned long long)i,
                   back);
}

static void *ping_main(void *arg)
{
    pingpong_run *run = arg;
    uint64_t i = 1;
    uint64_t warm_deadline = bench_now_ns() + run->budget_ns / 4;
    for (; i <= WARMUP; i++) {
        bounce(run, i);
        if (bench_now_ns() > warm_deadline) {
            run->truncated = true;
            i++;
            break;
        }
    }
    uint64_t deadline = bench_now_ns() + run->budget_ns;
    for (size_t k = 0; k < run->n; k++, i++) {
        uint64_t t0 = bench_now_ns();
        bounce(run, i);
        uint64_t t1 = bench_now_ns();
        run->samples[run->measured++] = t1 - t0;
        if (t1 > deadline) {
            run->truncated = true;
            break;
        }
    }
    run->impl->close(run->ab);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted s[0..n). */
static double percentile(const uint64_t *s, size_t n, unsigned pct)
{
    size_t rank = (n * pct + 99) / 100;
    return (double)s[rank ? rank - 1 : 0];
}

void qb_run_pingpong(bench_rep *r)
{
    const pingpong_cfg *cfg = r->arg;
    pingpong_run run = {
        .impl = cfg->impl,
        .n = bench_scale(r, 10000, 200000),
        .budget_ns = bench_budget_ns(r, cfg->budget_quick_s ? cfg->budget_quick_s : BUDGET_QUICK_S,
                                     BUDGET_FULL_S),
    };
    run.samples = malloc(run.n * sizeof(*run.samples));
    run.ab = cfg->impl->create(QB_CAPACITY, 0);
    run.ba = cfg->impl->create(QB_CAPACITY, 0);
    if (!run.samples || !run.ab || !run.ba)
        bench_fail("%s: pingpong: cannot set up", cfg->impl->name);

    pthread_t ping, echo;
    if (pthread_create(&echo, NULL, echo_main, &run) != 0 ||
        pthread_create(&ping, NULL, ping_main, &run) != 0)
        bench_fail("pthread_create failed");
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += (time_t)(run.budget_ns / 1000000000u) + HANG_GRACE_S + 60;
    if (pthread_timedjoin_np(ping, NULL, &limit) == ETIMEDOUT)
        bench_fail("%s: pingpong: no progress (hung?)", cfg->impl->name);
    pthread_join(echo, NULL);

    qsort(run.samples, run.measured, sizeof(*run.samples), cmp_u64);
    r->values[0] = percentile(run.samples, run.measured, 50);
    r->values[1] = percentile(run.samples, run.measured, 99);
    r->truncated = run.truncated;

    cfg->impl->destroy(run.ab);
    cfg->impl->destroy(run.ba);
    free(run.samples);
}
