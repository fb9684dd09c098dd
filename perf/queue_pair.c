/* queue_pair.c - what one element costs a pointer queue's own code: one
 * thread enqueues a pointer and dequeues it again, over and over (a
 * diagnostic, not part of the suite).
 *
 *   build/perf/queue-pair [PAIRS [ROUNDS [BATCH]]]
 *
 * PAIRS (default 20,000,000) enqueue/dequeue pairs per round, ROUNDS
 * (default 5) rounds, BATCH (default 1) enqueues before as many dequeues.
 * Each round prints ns per pair. Nothing crosses cores and nothing waits,
 * so the figure is the length of the path (run it under `valgrind
 * --tool=callgrind` for the instructions): what two tasks trading
 * elements on one worker pay per element (queue.tput.tasks), without the
 * cache misses of two cores. Each value is checked on the way out. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "qf_queue.h"
#include "qf_status.h"
#include "qf_time.h"

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 20000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    long batch = argc > 3 ? atol(argv[3]) : 1;
    if (pairs < 1 || rounds < 1 || batch < 1 || batch > 1000) {
        fprintf(stderr, "usage: queue-pair [PAIRS >= 1 [ROUNDS >= 1 [BATCH 1..1000]]]\n");
        return 2;
    }
    qf_queue *q = NULL;
    if (qf_ptr_queue_new(1024, "pair", 0, NULL, &q) != QF_OK) {
        fprintf(stderr, "queue-pair: %s\n", qf_last_message());
        return 1;
    }
    pairs = (pairs + batch - 1) / batch * batch; /* whole batches */
    for (int r = 0; r < rounds; r++) {
        int64_t t0 = qf_now_ns();
        for (long i = 0; i < pairs; i += batch) {
            for (long b = 0; b < batch; b++)
                if (qf_queue_enqueue_ptr(q, (void *)(uintptr_t)(i + b + 1)) != QF_OK)
                    goto fail;
            for (long b = 0; b < batch; b++) {
                void *v = NULL;
                if (qf_queue_dequeue_ptr(q, &v) != QF_OK)
                    goto fail;
                if (v != (void *)(uintptr_t)(i + b + 1)) {
                    fprintf(stderr, "queue-pair: got %p, sent %#lx\n", v,
                            (unsigned long)(i + b + 1));
                    return 1;
                }
            }
        }
        int64_t t1 = qf_now_ns();
        printf("round %d: %.1f ns a pair\n", r + 1, (double)(t1 - t0) / (double)pairs);
    }
    qf_queue_unref(q);
    return 0;
fail:
    fprintf(stderr, "queue-pair: %s\n", qf_last_message());
    return 1;
}
