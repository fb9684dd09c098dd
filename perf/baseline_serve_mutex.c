/* baseline_serve_mutex.c - the batcher a server would write by hand: a
 * growable ring of requests behind one pthread mutex, the model thread
 * waiting on a condition variable (CLOCK_MONOTONIC timed waits).
 *
 * Same policy as qflow's: a batch takes up to max_batch requests in arrival
 * order, answering those past their deadline DEADLINE_EXCEEDED on the way;
 * it closes when full or when its oldest request has waited delay_ns; a
 * submitter signals the model only when it sleeps and the batch it waits
 * for can now close (enough requests for a full batch, or a first one).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_serve.h"

typedef struct mb {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sv_item **ring;
    size_t cap, head, count; /* cap: a power of two */
    size_t max_batch;
    int64_t delay_ns;
    bool waiting;
    size_t need; /* requests the sleeping model waits for */
    bool draining;
    uint64_t expired;
} mb;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *m_create(size_t max_batch, int64_t delay_ns)
{
    mb *b = calloc(1, sizeof(*b));
    if (!b)
        bench_fail("out of memory");
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->cap = 1024;
    b->ring = malloc(b->cap * sizeof(*b->ring));
    if (!b->ring)
        bench_fail("out of memory");
    b->max_batch = max_batch;
    b->delay_ns = delay_ns;
    return b;
}

static void grow(mb *b)
{
    sv_item **r = malloc(2 * b->cap * sizeof(*r));
    if (!r)
        bench_fail("out of memory");
    for (size_t i = 0; i < b->count; i++)
        r[i] = b->ring[(b->head + i) & (b->cap - 1)];
    free(b->ring);
    b->ring = r;
    b->head = 0;
    b->cap *= 2;
}

static void m_submit(void *vb, sv_item *it)
{
    mb *b = vb;
    pthread_mutex_lock(&b->mu);
    if (b->count == b->cap)
        grow(b);
    b->ring[(b->head + b->count++) & (b->cap - 1)] = it;
    bool wake = b->waiting && b->count >= b->need;
    if (wake)
        b->waiting = false;
    pthread_mutex_unlock(&b->mu);
    if (wake)
        pthread_cond_signal(&b->cv);
}

static void m_run(void *vb, sv_model_fn model, void *arg)
{
    mb *b = vb;
    sv_item **batch = malloc(b->max_batch * sizeof(*batch));
    size_t n = 0;
    int64_t oldest = 0;
    if (!batch)
        bench_fail("out of memory");
    pthread_mutex_lock(&b->mu);
    for (;;) {
        int64_t now = now_ns();
        while (n < b->max_batch && b->count > 0) {
            sv_item *it = b->ring[b->head];
            b->head = (b->head + 1) & (b->cap - 1);
            b->count--;
            if (now >= it->deadline) {
                it->status = 4; /* DEADLINE_EXCEEDED */
                b->expired++;
                continue;
            }
            if (n == 0)
                oldest = it->t_submit;
            batch[n++] = it;
        }
        bool close = n == b->max_batch || (n > 0 && (b->draining || now >= oldest + b->delay_ns));
        if (close) {
            pthread_mutex_unlock(&b->mu);
            model(arg, batch, n);
            for (size_t i = 0; i < n; i++)
                batch[i]->status = 0;
            n = 0;
            pthread_mutex_lock(&b->mu);
            continue;
        }
        if (n == 0 && b->draining)
            break;
        b->waiting = true;
        b->need = n ? b->max_batch - n : 1;
        if (n == 0) {
            pthread_cond_wait(&b->cv, &b->mu);
        } else {
            int64_t t = oldest + b->delay_ns;
            struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
            pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        }
        b->waiting = false;
    }
    pthread_mutex_unlock(&b->mu);
    free(batch);
}

static void m_drain(void *vb)
{
    mb *b = vb;
    pthread_mutex_lock(&b->mu);
    b->draining = true;
    pthread_mutex_unlock(&b->mu);
    pthread_cond_broadcast(&b->cv);
}

static uint64_t m_expired(void *vb)
{
    mb *b = vb;
    pthread_mutex_lock(&b->mu);
    uint64_t e = b->expired;
    pthread_mutex_unlock(&b->mu);
    return e;
}

static void m_destroy(void *vb)
{
    mb *b = vb;
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->ring);
    free(b);
}

const sv_impl sv_mutex_cond = {"mutex_cond", m_create,  m_submit, m_run,
                               m_drain,      m_expired, m_destroy};
