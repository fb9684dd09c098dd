/* bench_pipeline_tpr.c - pipeline.text/thread_per_runner: the text
 * pipeline built the way TensorFlow 1.x runs it, a thread per op.
 *
 *   producer thread   enqueues the file names (string_input_producer's
 *                     enqueue thread), then closes the name queue
 *   4 reader threads  each dequeues a name, reads it with getline(), and
 *                     enqueues one record per line: a malloc'd key
 *                     "<file>:<n>" and a malloc'd copy of the line, as
 *                     TensorFlow makes a new string tensor per read; the
 *                     last reader out closes the example queue
 *   batching thread   dequeue_many(64) from the example queue, a batch
 *                     record, enqueued for the consumer (batch()'s
 *                     dequeue_many; a final short batch is kept, like
 *                     allow_smaller_final_batch)
 *   consumer          the calling thread: takes batches, touches every
 *                     line, frees them
 *
 * Every queue is the mutex + two condvars ring of baseline_mutex_cond.c,
 * TensorFlow's FIFOQueue design, with the capacities of the qflow case.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "bench_pipeline.h"

#define NAME_CAPACITY 32 /* string_input_producer's default */
#define BATCH_CAPACITY 4 /* batches ready for the consumer */

typedef struct line_rec {
    char *key;
    char *value;
    size_t value_len;
} line_rec;

typedef struct line_batch {
    size_t n;
    line_rec *recs[BP_BATCH];
} line_batch;

typedef struct tpr {
    const bp_data *d;
    bq *names, *examples, *batches;
    atomic_int readers_left;
} tpr;

static void *producer_main(void *arg)
{
    tpr *p = arg;
    for (int f = 0; f < BP_FILES; f++)
        if (bq_mutex_cond.enqueue(p->names, (void *)p->d->paths[f]) != 0)
            bench_fail("thread_per_runner: the name queue closed early");
    bq_mutex_cond.close(p->names);
    return NULL;
}

static void *reader_main(void *arg)
{
    tpr *p = arg;
    char *line = NULL;
    size_t cap = 0;
    void *v;
    while (bq_mutex_cond.dequeue(p->names, &v) == 0) {
        const char *path = v;
        FILE *fp = fopen(path, "re");
        if (!fp)
            bench_fail("thread_per_runner: open %s: %s", path, strerror(errno));
        ssize_t n;
        uint64_t no = 0;
        while ((n = getline(&line, &cap, fp)) >= 0) {
            size_t len = (size_t)n;
            if (len && line[len - 1] == '\n')
                len--;
            if (len && line[len - 1] == '\r')
                len--;
            line_rec *rec = malloc(sizeof(*rec));
            char *value = malloc(len + 1);
            char *key = NULL;
            if (!rec || !value || asprintf(&key, "%s:%llu", path, (unsigned long long)++no) < 0)
                bench_fail("thread_per_runner: out of memory");
            memcpy(value, line, len);
            value[len] = '\0';
            *rec = (line_rec){.key = key, .value = value, .value_len = len};
            if (bq_mutex_cond.enqueue(p->examples, rec) != 0)
                bench_fail("thread_per_runner: the example queue closed early");
        }
        fclose(fp);
    }
    free(line);
    if (atomic_fetch_sub(&p->readers_left, 1) == 1)
        bq_mutex_cond.close(p->examples);
    return NULL;
}

static void *batcher_main(void *arg)
{
    tpr *p = arg;
    for (;;) {
        line_batch *b = malloc(sizeof(*b));
        if (!b)
            bench_fail("thread_per_runner: out of memory");
        b->n = bq_mutex_cond.dequeue_many(p->examples, (void **)b->recs, BP_BATCH);
        if (b->n == 0) {
            free(b);
            break;
        }
        if (bq_mutex_cond.enqueue(p->batches, b) != 0)
            bench_fail("thread_per_runner: the batch queue closed early");
    }
    bq_mutex_cond.close(p->batches);
    return NULL;
}

void bp_run_thread_per_runner(bench_rep *r)
{
    tpr p = {.d = bp_data_get(r)};
    p.names = bq_mutex_cond.create(NAME_CAPACITY, 0);
    p.examples = bq_mutex_cond.create(BP_CAPACITY, 0);
    p.batches = bq_mutex_cond.create(BATCH_CAPACITY, 0);
    if (!p.names || !p.examples || !p.batches)
        bench_fail("thread_per_runner: out of memory");
    atomic_init(&p.readers_left, BP_READERS);

    uint64_t t0 = bench_now_ns();
    pthread_t th[BP_READERS + 2];
    int nt = 0;
    if (pthread_create(&th[nt++], NULL, producer_main, &p) != 0)
        bench_fail("pthread_create failed");
    for (int i = 0; i < BP_READERS; i++)
        if (pthread_create(&th[nt++], NULL, reader_main, &p) != 0)
            bench_fail("pthread_create failed");
    if (pthread_create(&th[nt++], NULL, batcher_main, &p) != 0)
        bench_fail("pthread_create failed");

    uint64_t lines = 0, bytes = 0, touch = 0;
    void *v;
    while (bq_mutex_cond.dequeue(p.batches, &v) == 0) {
        line_batch *b = v;
        for (size_t i = 0; i < b->n; i++) {
            line_rec *rec = b->recs[i];
            lines++;
            bytes += rec->value_len;
            touch += (unsigned char)rec->value[0] + (unsigned char)rec->key[0];
            free(rec->key);
            free(rec->value);
            free(rec);
        }
        free(b);
    }
    uint64_t t1 = bench_now_ns();
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    if (touch == 0 && lines)
        bench_fail("thread_per_runner: lines without bytes");
    bp_check(r, p.d, lines, bytes);
    r->values[0] = (double)lines / ((double)(t1 - t0) / 1e9);
    bq_mutex_cond.destroy(p.names);
    bq_mutex_cond.destroy(p.examples);
    bq_mutex_cond.destroy(p.batches);
}
