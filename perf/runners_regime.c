/* runners_regime.c - one QueueRunner workload, the pool size chosen: where
 * the time of runners.tput.<N> goes (a diagnostic, not part of the suite).
 *
 *   build/perf/runners-regime [RUNNERS [WORKERS [ITEMS [ROUNDS [thread|task]]]]]
 *
 * RUNNERS (default 10000) QueueRunners, one pointer produce op each, start
 * on a runtime of WORKERS workers (default: one per online CPU) and feed
 * one pointer FIFOQueue of capacity 1024 that this thread drains, as in
 * runners.tput (CONSUMER `task`: a task on the same runtime drains it, as
 * in runners.tput.task). Each round prints, in ns: the start call, the drain until
 * every runner's first element arrived, and the steady state over ITEMS
 * (default 1,000,000) further elements, per element; and the mean queue
 * size seen every 1024 takes in the steady state, which tells the regime:
 * near the capacity, runners wait in line and each take hands a slot to a
 * parked runner and wakes it; near zero, runners put a turn's worth and
 * yield, and the taker waits for them. With a thread consumer it also
 * prints that thread's CPU time per element in the steady state and its
 * share of the wall time (getrusage(RUSAGE_THREAD)): what a take costs the
 * consumer, apart from the time it waited for a CPU. The program checks
 * nothing and judges nothing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "qf_coordinator.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_runtime.h"

#define CAPACITY 1024
#define SAMPLE_EVERY 1024

typedef struct producer {
    uint64_t id;
    uint32_t seq;
} producer;

static qf_code produce(void *arg, void **ret_p)
{
    producer *p = arg;
    p->seq++;
    *ret_p = (void *)(uintptr_t)((p->id + 1) << 32 | p->seq);
    return QF_OK;
}

static void die(const char *what)
{
    fprintf(stderr, "runners-regime: %s: %s\n", what, qf_last_message());
    exit(1);
}

/* User and system time of a getrusage() reading, in ns. */
static int64_t cpu_ns(const struct rusage *u)
{
    return ((int64_t)u->ru_utime.tv_sec + u->ru_stime.tv_sec) * 1000000000 +
           ((int64_t)u->ru_utime.tv_usec + u->ru_stime.tv_usec) * 1000;
}

static void *take(qf_queue *q)
{
    void *v = NULL;
    if (qf_queue_dequeue_ptr(q, &v) != QF_OK)
        die("qf_queue_dequeue_ptr");
    return v;
}

/* The consumer as a task beside the runners: the same three phases, run
 * in its poll function; it returns once the steady state is measured. */
typedef struct task_consumer {
    qf_queue *q;
    unsigned n, delivered;
    unsigned char *seen;
    unsigned long items, k, first_items;
    double fill;
    unsigned long samples;
    int64_t t2, t3;
} task_consumer;

static qf_code consume_task(qf_task *t, void *arg)
{
    task_consumer *s = arg;
    for (;;) {
        void *v = NULL;
        qf_code rc = qf_queue_poll_dequeue_ptr(s->q, qf_task_waker(t), &v);
        if (rc == QF_PENDING)
            return rc;
        if (rc != QF_OK)
            die("qf_queue_poll_dequeue_ptr");
        if (s->delivered < s->n) {
            uint64_t id = ((uint64_t)(uintptr_t)v >> 32) - 1;
            s->first_items++;
            if (id < s->n && !s->seen[id]) {
                s->seen[id] = 1;
                if (++s->delivered == s->n)
                    s->t2 = qf_now_ns();
            }
            continue;
        }
        if (s->k % SAMPLE_EVERY == 0) {
            s->fill += (double)qf_queue_size(s->q);
            s->samples++;
        }
        if (++s->k == s->items) {
            s->t3 = qf_now_ns();
            return QF_OK;
        }
    }
}

static void round_once(unsigned n, int workers, unsigned long items, bool task)
{
    qf_runtime *rt = NULL;
    qf_coord *coord = NULL;
    qf_queue *q = NULL;
    if (qf_runtime_new(&(qf_runtime_options){.workers = workers, .name = "regime"}, &rt) != QF_OK)
        die("qf_runtime_new");
    if (qf_coord_new(NULL, 0, &coord) != QF_OK)
        die("qf_coord_new");
    if (qf_ptr_queue_new(CAPACITY, "regime", 0, NULL, &q) != QF_OK)
        die("qf_ptr_queue_new");
    producer *prod = calloc(n, sizeof(*prod));
    qf_queue_runner **runners = calloc(n, sizeof(*runners));
    unsigned char *seen = calloc(n, 1);
    if (!prod || !runners || !seen) {
        fprintf(stderr, "runners-regime: out of memory\n");
        exit(1);
    }
    for (unsigned i = 0; i < n; i++) {
        prod[i].id = i;
        qf_enqueue_op op = {
            .name = "produce", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce, .arg = &prod[i]};
        if (qf_queue_runner_new(q, &op, 1, NULL, &runners[i]) != QF_OK)
            die("qf_queue_runner_new");
    }

    int64_t t0 = qf_now_ns();
    if (qf_queue_runners_start(runners, n, rt, coord, QF_RUNNER_START, NULL, NULL) != QF_OK)
        die("qf_queue_runners_start");
    int64_t t1 = qf_now_ns();
    unsigned delivered = 0;
    unsigned long first_items = 0;
    while (!task && delivered < n) {
        uint64_t id = ((uint64_t)(uintptr_t)take(q) >> 32) - 1;
        first_items++;
        if (id < n && !seen[id]) {
            seen[id] = 1;
            delivered++;
        }
    }
    int64_t t2, t3;
    struct rusage cpu0 = {0}, cpu1 = {0};
    double fill = 0;
    unsigned long samples = 0;
    if (task) {
        task_consumer s = {.q = q, .n = n, .seen = seen, .items = items};
        qf_task *t = NULL;
        if (qf_task_spawn(rt, consume_task, &s, &(qf_task_options){.name = "consumer"}, &t) !=
                QF_OK ||
            qf_task_join(t, QF_FOREVER, NULL) != QF_OK)
            die("the consumer task");
        qf_task_unref(t);
        first_items = s.first_items;
        t2 = s.t2;
        t3 = s.t3;
        fill = s.fill;
        samples = s.samples;
    } else {
        getrusage(RUSAGE_THREAD, &cpu0);
        t2 = qf_now_ns();
        for (unsigned long k = 0; k < items; k++) {
            (void)take(q);
            if (k % SAMPLE_EVERY == 0) {
                fill += (double)qf_queue_size(q);
                samples++;
            }
        }
        t3 = qf_now_ns();
        getrusage(RUSAGE_THREAD, &cpu1);
    }
    printf("runners %u workers %d %s consumer: start %.0f ns/runner, first %.2f ms (%lu takes), "
           "steady %.0f "
           "ns/item, mean size %.0f of %d\n",
           n, workers, task ? "task" : "thread", (double)(t1 - t0) / n, (double)(t2 - t1) / 1e6,
           first_items, (double)(t3 - t2) / (double)items, samples ? fill / (double)samples : 0.0,
           CAPACITY);
    if (!task) {
        double ns = (double)(cpu_ns(&cpu1) - cpu_ns(&cpu0));
        printf("  consumer thread: CPU %.0f ns/item, %.0f%% of the wall time\n", ns / (double)items,
               100.0 * ns / (double)(t3 - t2));
    }

    qf_coord_request_stop(coord, NULL);
    if (qf_coord_join(coord, NULL, 0, 30.0, false, NULL) != QF_OK)
        die("qf_coord_join");
    qf_runtime_shutdown(rt, QF_FOREVER);
    qf_runtime_free(rt);
    for (unsigned i = 0; i < n; i++)
        qf_queue_runner_free(runners[i]);
    qf_coord_free(coord);
    qf_queue_unref(q);
    free(prod);
    free(runners);
    free(seen);
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10000;
    int workers = argc > 2 ? atoi(argv[2]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long items = argc > 3 ? strtoul(argv[3], NULL, 10) : 1000000;
    unsigned rounds = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 3;
    if (n == 0 || n > 1000000 || workers < 1 || workers > 1024 || rounds == 0) {
        fprintf(stderr, "usage: runners-regime [RUNNERS (1..1e6) [WORKERS (1..1024) [ITEMS "
                        "[ROUNDS [thread|task]]]]]\n");
        return 2;
    }
    bool task = argc > 5 && strcmp(argv[5], "task") == 0;
    if (argc > 5 && !task && strcmp(argv[5], "thread") != 0) {
        fprintf(stderr, "runners-regime: CONSUMER is thread or task\n");
        return 2;
    }
    for (unsigned r = 0; r < rounds; r++)
        round_once(n, workers, items, task);
    return 0;
}
