/* queue_ends.c - a pair of threads through one pointer FIFOQueue of
 * capacity 1024: at which end of the ring they meet, and how fast each end
 * runs (a diagnostic, not part of the suite).
 *
 *   build/perf/queue-ends [ITEMS [ROUNDS [WORK]]]
 *
 * A producer thread enqueues ITEMS (default 5,000,000) pointers one at a
 * time; this thread dequeues them one at a time, checks their order, and
 * spins WORK (default 0) empty loop rounds per element, which makes the
 * consumer slower than the producer from about 20 on. Each of ROUNDS
 * (default 3) rounds prints the rate, the mean queue size seen every 1024
 * takes, and how those sizes fell: near empty, near full, or between.
 * Runs of the same build fall into one end or the other for a whole round
 * (README, Measured, "Threads that wait for a stretch"). The program
 * judges nothing. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "qf_queue.h"

#define CAPACITY 1024
#define SAMPLE_EVERY 1024

static qf_queue *queue;
static uint64_t items;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(qf_code c, const char *what)
{
    if (c != QF_OK) {
        fprintf(stderr, "queue-ends: %s: %s: %s\n", what, qf_code_name(c), qf_last_message());
        exit(1);
    }
}

static void *produce(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= items; i++)
        check(qf_queue_enqueue_ptr(queue, (void *)(uintptr_t)i), "qf_queue_enqueue_ptr");
    return NULL;
}

static void round_run(int work)
{
    check(qf_ptr_queue_new(CAPACITY, "ends", 0, NULL, &queue), "qf_ptr_queue_new");
    pthread_t t;
    double t0 = now_s();
    if (pthread_create(&t, NULL, produce, NULL) != 0) {
        fprintf(stderr, "queue-ends: pthread_create failed\n");
        exit(1);
    }
    uint64_t looks = 0, sum = 0, low = 0, high = 0;
    for (uint64_t i = 1; i <= items; i++) {
        void *p;
        check(qf_queue_dequeue_ptr(queue, &p), "qf_queue_dequeue_ptr");
        if ((uintptr_t)p != i) {
            fprintf(stderr, "queue-ends: element %" PRIu64 " out of order\n", i);
            exit(1);
        }
        for (int k = 0; k < work; k++)
            __asm__ volatile("" ::: "memory");
        if (i % SAMPLE_EVERY == 0) {
            int64_t s = qf_queue_size(queue);
            sum += (uint64_t)s;
            looks++;
            low += s < 64;
            high += s > CAPACITY - 64;
        }
    }
    pthread_join(t, NULL);
    double dt = now_s() - t0;
    printf("%.1f M items/s  mean size %.0f  sizes under 64: %.0f%%, over %d: %.0f%%\n",
           (double)items / dt / 1e6, looks ? (double)sum / (double)looks : 0.0,
           looks ? 100.0 * (double)low / (double)looks : 0.0, CAPACITY - 64,
           looks ? 100.0 * (double)high / (double)looks : 0.0);
    qf_queue_unref(queue);
}

int main(int argc, char **argv)
{
    items = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    int work = argc > 3 ? atoi(argv[3]) : 0;
    if (items == 0 || rounds <= 0 || work < 0) {
        fprintf(stderr, "usage: queue-ends [ITEMS [ROUNDS [WORK]]]\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++)
        round_run(work);
    return 0;
}
