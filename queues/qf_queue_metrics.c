/* qf_queue_metrics.c - the process-wide set of live queues.
 *
 * A chained hash set of queue pointers behind one mutex. The queue struct
 * is the engine's (qf_queue-impl.h) and has no field for this, so the set
 * keeps its own nodes, keyed by address. Creating and freeing queues are
 * rare next to moving elements, so a mutex is the right tool: an
 * enumeration holds it while it reads each queue, which is what keeps a
 * queue from being freed under a metrics writer (untrack runs before the
 * last unref frees anything and waits for the mutex).
 */
#include "qf_queue_metrics.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "qf_lock-impl.h"
#include "qf_queue_metrics-impl.h"
#include "qf_status-impl.h"

typedef struct node {
    qf_queue *q;
    struct node *next;
} node;

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static node **buckets;
static size_t nbuckets;
static size_t nlive;

static size_t slot_of(const qf_queue *q, size_t n)
{
    /* Queues are 64-byte aligned: drop the zero bits, then mix. */
    uint64_t h = (uint64_t)(uintptr_t)q >> 6;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (n - 1);
}

/* Double the table when it holds two queues per bucket; a failed
 * allocation just keeps the old table (longer chains, still correct). */
static void maybe_grow_locked(void)
{
    QF__ASSERT_MUTEX_HELD(&live_mu);
    if (nbuckets && nlive < 2 * nbuckets)
        return;
    size_t n = nbuckets ? 2 * nbuckets : 64;
    node **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    for (size_t i = 0; i < nbuckets; i++) {
        node *e = buckets[i];
        while (e) {
            node *next = e->next;
            size_t s = slot_of(e->q, n);
            e->next = nb[s];
            nb[s] = e;
            e = next;
        }
    }
    free(buckets);
    buckets = nb;
    nbuckets = n;
}

void qf__queue_track(qf_queue *q)
{
    node *e = malloc(sizeof(*e));
    if (!e)
        return;
    e->q = q;
    pthread_mutex_lock(&live_mu);
    maybe_grow_locked();
    if (!nbuckets) {
        pthread_mutex_unlock(&live_mu);
        free(e);
        return;
    }
    size_t s = slot_of(q, nbuckets);
    e->next = buckets[s];
    buckets[s] = e;
    nlive++;
    pthread_mutex_unlock(&live_mu);
}

void qf__queue_untrack(qf_queue *q)
{
    node *found = NULL;
    pthread_mutex_lock(&live_mu);
    if (nbuckets) {
        for (node **p = &buckets[slot_of(q, nbuckets)]; *p; p = &(*p)->next) {
            if ((*p)->q == q) {
                found = *p;
                *p = found->next;
                nlive--;
                break;
            }
        }
    }
    pthread_mutex_unlock(&live_mu);
    free(found);
}

size_t qf_queue_foreach_live(qf_queue_visit_fn fn, void *arg)
{
    if (!fn) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_foreach_live: fn is NULL");
        return 0;
    }
    size_t n = 0;
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < nbuckets; i++)
        for (node *e = buckets[i]; e; e = e->next, n++)
            fn(e->q, arg);
    pthread_mutex_unlock(&live_mu);
    return n;
}

size_t qf_queue_live_count(void)
{
    pthread_mutex_lock(&live_mu);
    size_t n = nlive;
    pthread_mutex_unlock(&live_mu);
    return n;
}
