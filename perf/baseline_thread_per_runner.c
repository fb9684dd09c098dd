/* baseline_thread_per_runner.c - QueueRunners the TensorFlow way: one OS
 * thread per enqueue op, all feeding one bounded queue guarded by a mutex
 * and two condition variables (baseline_mutex_cond.c, used as is), and a
 * stop flag every thread checks before each run of its op. Stop: set the
 * flag, close the queue (which broadcasts to the threads blocked on a full
 * queue, so their enqueue fails and they leave), join every thread.
 *
 * Each thread gets a 64 KiB stack instead of glibc's default (the
 * RLIMIT_STACK, 8 MiB here): a C programmer starting 10,000 threads would
 * do the same, and the loop below needs a few hundred bytes. It keeps the
 * comparison about threads, not about a careless default. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "bench_runners.h"

#define STACK_SIZE (64 * 1024)

typedef struct tpr_shared {
    bq *q;
    atomic_bool stop;
} tpr_shared;

typedef struct tpr_runner {
    tpr_shared *sh;
    uint32_t id;
} tpr_runner;

static void *runner_main(void *arg)
{
    tpr_runner *rn = arg;
    tpr_shared *sh = rn->sh;
    for (uint32_t seq = 1; !atomic_load_explicit(&sh->stop, memory_order_acquire); seq++)
        if (bq_mutex_cond.enqueue(sh->q, rb_value(rn->id, seq)) != 0)
            break; /* closed: the stop */
    return NULL;
}

static int dequeue_tpr(void *q, void **ret_v)
{
    return bq_mutex_cond.dequeue(q, ret_v);
}

void rb_run_thread_per_runner(const rb_cfg *cfg, rb_result *out)
{
    unsigned n = cfg->runners;
    tpr_shared sh = {.q = bq_mutex_cond.create(RB_CAPACITY, 0)};
    atomic_init(&sh.stop, false);
    tpr_runner *runners = calloc(n, sizeof(*runners));
    pthread_t *threads = calloc(n, sizeof(*threads));
    if (!sh.q || !runners || !threads)
        bench_fail("out of memory");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, STACK_SIZE) != 0)
        bench_fail("pthread_attr_setstacksize(%d) failed", STACK_SIZE);
    for (unsigned i = 0; i < n; i++) {
        runners[i] = (tpr_runner){.sh = &sh, .id = i};
        int err = pthread_create(&threads[i], &attr, runner_main, &runners[i]);
        if (err != 0)
            bench_fail("thread_per_runner: pthread_create failed for thread %u of %u: %s", i + 1, n,
                       strerror(err));
    }
    pthread_attr_destroy(&attr);

    rb_consume(cfg, dequeue_tpr, sh.q, out);

    uint64_t t0 = bench_now_ns();
    atomic_store_explicit(&sh.stop, true, memory_order_release);
    bq_mutex_cond.close(sh.q);
    for (unsigned i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    uint64_t t1 = bench_now_ns();
    out->stop_join_ns = (double)(t1 - t0);

    bq_mutex_cond.destroy(sh.q);
    free(threads);
    free(runners);
}
