/* bench_coord.c - the Coordinator's stop flag against a hand-written one
 * (baseline_mutex_flag.c).
 *
 * coord.should_stop: the cost of one should_stop call while READERS
 * threads call it at the same time, as runner threads do in their loops.
 * Each reader runs for a fixed window (both impls get the same window, and
 * the readers overlap for all of it) and counts its calls; the result is
 * the mean over readers of window / calls. A contended mutex makes the
 * readers take turns on its cache line; qflow's single load lets them read
 * a shared line side by side. (With 2 cores and other work on the machine
 * the readers may end up sharing one core; the mutex then costs only its
 * uncontended price, so the baseline's figure swings with the load.)
 *
 * coord.stop_wake.64: 64 threads sleep in wait_for_stop; the time from
 * just before request_stop to the moment the last of them is awake (each
 * takes a CLOCK_MONOTONIC stamp as soon as its wait returns). The threads
 * live across rounds (clear_stop between rounds), a warm-up round is not
 * counted, and a repetition reports the median of its rounds. Before each
 * stop the waiters get SETTLE_NS to be truly asleep, so the figure is a
 * wake-up from sleep, not a race with threads still on their way in. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "baseline_mutex_flag.h"
#include "bench.h"
#include "qf_coordinator.h"

#define READERS 2
#define WAITERS 64
#define SETTLE_NS 2000000
#define CHECK_EVERY 1024

typedef enum { IMPL_QFLOW, IMPL_MUTEX } flag_impl;

typedef struct flag {
    flag_impl impl;
    qf_coord *c;
    mf_flag *m;
} flag;

static void flag_new(flag *f, flag_impl impl)
{
    f->impl = impl;
    f->c = NULL;
    f->m = NULL;
    if (impl == IMPL_QFLOW) {
        if (qf_coord_new(NULL, 0, &f->c) != QF_OK)
            bench_fail("qf_coord_new: %s", qf_last_message());
    } else if (!(f->m = mf_new())) {
        bench_fail("out of memory");
    }
}

static void flag_free(flag *f)
{
    qf_coord_free(f->c);
    mf_free(f->m);
}

static void flag_request(flag *f)
{
    if (f->impl == IMPL_QFLOW)
        qf_coord_request_stop(f->c, NULL);
    else
        mf_request_stop(f->m);
}

static void flag_clear(flag *f)
{
    if (f->impl == IMPL_QFLOW)
        qf_coord_clear_stop(f->c);
    else
        mf_clear_stop(f->m);
}

static void flag_wait(flag *f)
{
    if (f->impl == IMPL_QFLOW) {
        if (!qf_coord_wait_for_stop(f->c, QF_FOREVER))
            bench_fail("qf_coord_wait_for_stop returned false without a deadline: %s",
                       qf_last_message());
    } else {
        mf_wait_for_stop(f->m);
    }
}

static void sleep_ns(long ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------ should_stop */

typedef struct reader {
    flag *f;
    pthread_barrier_t *go;
    uint64_t window_ns;
    uint64_t calls, hits, elapsed_ns;
} reader;

/* The two loops are written out so that neither pays for an indirect call
 * the other does not. The hit count keeps the calls from being dropped. */
static void *reader_main(void *arg)
{
    reader *rd = arg;
    uint64_t calls = 0, hits = 0;
    pthread_barrier_wait(rd->go);
    uint64_t t0 = bench_now_ns(), end = t0 + rd->window_ns, now;
    if (rd->f->impl == IMPL_QFLOW) {
        const qf_coord *c = rd->f->c;
        do {
            for (int i = 0; i < CHECK_EVERY; i++)
                hits += qf_coord_should_stop(c);
            calls += CHECK_EVERY;
        } while ((now = bench_now_ns()) < end);
    } else {
        mf_flag *m = rd->f->m;
        do {
            for (int i = 0; i < CHECK_EVERY; i++)
                hits += mf_should_stop(m);
            calls += CHECK_EVERY;
        } while ((now = bench_now_ns()) < end);
    }
    rd->calls = calls;
    rd->hits = hits;
    rd->elapsed_ns = now - t0;
    return NULL;
}

static void run_should_stop(bench_rep *r)
{
    flag f;
    flag_new(&f, *(const flag_impl *)r->arg);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, READERS);
    reader rd[READERS];
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++) {
        rd[i] = (reader){.f = &f, .go = &go, .window_ns = bench_scale(r, 20, 300) * 1000000u};
        if (pthread_create(&th[i], NULL, reader_main, &rd[i]) != 0)
            bench_fail("pthread_create failed");
    }
    double sum = 0;
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        if (rd[i].hits != 0)
            bench_fail("%s: should_stop was true without a stop", r->bc->impl);
        sum += (double)rd[i].elapsed_ns / (double)rd[i].calls;
    }
    r->values[0] = sum / READERS;
    pthread_barrier_destroy(&go);
    flag_free(&f);
}

/* -------------------------------------------------------------- stop_wake */

typedef struct wake_run {
    flag f;
    unsigned rounds; /* including the warm-up round */
    pthread_barrier_t start, end;
    atomic_uint ready;
    uint64_t woke[WAITERS];
} wake_run;

typedef struct waiter {
    wake_run *run;
    int id;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    wake_run *run = w->run;
    for (unsigned round = 0; round < run->rounds; round++) {
        pthread_barrier_wait(&run->start);
        atomic_fetch_add_explicit(&run->ready, 1, memory_order_release);
        flag_wait(&run->f);
        run->woke[w->id] = bench_now_ns();
        pthread_barrier_wait(&run->end);
    }
    return NULL;
}

static void run_stop_wake(bench_rep *r)
{
    wake_run *run = calloc(1, sizeof(*run));
    uint64_t *lat = NULL;
    if (!run)
        bench_fail("out of memory");
    flag_new(&run->f, *(const flag_impl *)r->arg);
    run->rounds = 1 + (unsigned)bench_scale(r, 5, 20);
    if (!(lat = calloc(run->rounds, sizeof(*lat))))
        bench_fail("out of memory");
    pthread_barrier_init(&run->start, NULL, WAITERS + 1);
    pthread_barrier_init(&run->end, NULL, WAITERS + 1);
    waiter w[WAITERS];
    pthread_t th[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){.run = run, .id = i};
        if (pthread_create(&th[i], NULL, waiter_main, &w[i]) != 0)
            bench_fail("pthread_create failed");
    }
    for (unsigned round = 0; round < run->rounds; round++) {
        if (round > 0)
            flag_clear(&run->f);
        atomic_store(&run->ready, 0);
        pthread_barrier_wait(&run->start);
        /* Polling with sleeps, not spinning: the waiters need both cores. */
        while (atomic_load_explicit(&run->ready, memory_order_acquire) < WAITERS)
            sleep_ns(50000);
        sleep_ns(SETTLE_NS);
        uint64_t t0 = bench_now_ns();
        flag_request(&run->f);
        pthread_barrier_wait(&run->end);
        uint64_t last = 0;
        for (int i = 0; i < WAITERS; i++)
            last = run->woke[i] > last ? run->woke[i] : last;
        lat[round] = last - t0;
    }
    for (int i = 0; i < WAITERS; i++)
        pthread_join(th[i], NULL);
    /* Round 0 is the warm-up. */
    qsort(lat + 1, run->rounds - 1, sizeof(*lat), cmp_u64);
    unsigned n = run->rounds - 1;
    r->values[0] =
        n % 2 ? (double)lat[1 + n / 2] : ((double)lat[n / 2] + (double)lat[1 + n / 2]) / 2;
    pthread_barrier_destroy(&run->start);
    pthread_barrier_destroy(&run->end);
    flag_free(&run->f);
    free(lat);
    free(run);
}

/* ----------------------------------------------------------------- cases */

static flag_impl impl_qflow = IMPL_QFLOW, impl_mutex = IMPL_MUTEX;

void bench_register_coord(void)
{
    bench_register(&(bench_case){
        .name = "coord.should_stop",
        .impl = "qflow",
        .unit = BENCH_NS,
        .params = {{.key = "readers", .num = READERS}, {.key = "measures", .str = "ns per call"}},
        .note = "qf_coord_should_stop: one acquire load; 2 threads read at once",
        .run = run_should_stop,
        .arg = &impl_qflow,
    });
    bench_register(&(bench_case){
        .name = "coord.should_stop",
        .impl = "mutex_flag",
        .unit = BENCH_NS,
        .params = {{.key = "readers", .num = READERS}, {.key = "measures", .str = "ns per call"}},
        .note = "bool behind a pthread mutex (lock, read, unlock); 2 threads read at once",
        .run = run_should_stop,
        .arg = &impl_mutex,
    });
    bench_register(&(bench_case){
        .name = "coord.stop_wake.64",
        .impl = "qflow",
        .unit = BENCH_NS,
        .params = {{.key = "waiters", .num = WAITERS},
                   {.key = "measures", .str = "request_stop to last waiter awake"}},
        .note = "64 threads in qf_coord_wait_for_stop (futex on the stop word)",
        .run = run_stop_wake,
        .arg = &impl_qflow,
    });
    bench_register(&(bench_case){
        .name = "coord.stop_wake.64",
        .impl = "mutex_cond",
        .unit = BENCH_NS,
        .params = {{.key = "waiters", .num = WAITERS},
                   {.key = "measures", .str = "request_stop to last waiter awake"}},
        .note = "64 threads in pthread_cond_wait on a mutex-protected flag; broadcast",
        .run = run_stop_wake,
        .arg = &impl_mutex,
    });
}
