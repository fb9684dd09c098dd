/* qf_shuffle_queue.c - RandomShuffleQueue: each dequeue removes a uniformly
 * chosen element (spec 63-84), on the locked engine (queues/engine/qf_locked.c).
 *
 * Storage: a plain array of slots, filled from the front. A dequeue draws
 * the next 32-bit word w of the queue's generator and removes entry
 * w mod n, moving the last entry into the hole (spec 71): O(1), no
 * allocation, a handful of instructions under the lock.
 *
 * Randomness: Philox4x32-10, a counter-based generator. The key is the
 * 64-bit seed, the upper half of the 128-bit counter is seed2 and the lower
 * half counts 4-word blocks; each draw consumes one 32-bit word (spec 72).
 * Draws happen under the lock in the order the dequeues run, so a fixed
 * (seed, seed2) and a fixed sequence of operations from one thread give the
 * same order every run. Seeds (0, 0) mean "seed randomly": the key and
 * seed2 then come from getrandom() (or, failing that, the clock mixed with
 * the queue's address). This is the stream TensorFlow's kernel draws from
 * for the same (seed, seed2), word by word (qf_philox-impl.h); TensorFlow's
 * Python layer turns an op seed s into (87654321, s mod (2^31 - 1))
 * without a graph-level seed (spec 84), which a caller passes here itself.
 *
 * min_after_dequeue: the engine's floor. While the queue is open a dequeue
 * proceeds only while more than min_after_dequeue elements are present,
 * and dequeue_many takes one element at a time, holding what it took
 * (spec 66); after close there is no floor (spec 67-70). Elements are
 * drawn from all present elements, not only those above the floor.
 *
 * Slots are opaque to this kind, so a queue of one scalar QF_PTR component
 * is in inline mode here as well and the _ptr calls of qf_queue.h move
 * pointers with no allocation.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "qf_locked_queue-impl.h"
#include "qf_philox-impl.h"
#include "qf_status.h"

typedef struct shuffle_queue {
    qf__locked L; /* first: q->impl is also the engine */
    /* Generator state, guarded by L.lock. (min_after_dequeue and the seeds
     * as requested live in struct qf_queue, for the shared-queue checks.) */
    qf__philox_words words;
} shuffle_queue;

/* --------------------------------------------------------------- Philox */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void seed_generator(shuffle_queue *s, int64_t seed, int64_t seed2)
{
    uint64_t k = (uint64_t)seed, c = (uint64_t)seed2;
    if (seed == 0 && seed2 == 0) {
        /* spec 72: (0, 0) means "seed randomly at creation". */
        uint64_t r[2];
        if (getrandom(r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r)) {
            k = r[0];
            c = r[1];
        } else {
            uint64_t x = (uint64_t)qf_now_ns() ^ (uint64_t)(uintptr_t)s;
            k = splitmix64(&x);
            c = splitmix64(&x);
        }
    }
    /* The queue reads its stream from the start, word by word, as one
     * reservation that never ends. */
    qf__philox g;
    qf__philox_init(&g, k, c);
    s->words = (qf__philox_words){.g = g, .used = 4};
}

/* -------------------------------------------------------------- storage */

static void shuffle_insert(qf__locked *L, void *slot, int64_t key)
{
    (void)key;
    ((void **)L->buf)[L->n++] = slot;
}

static void *shuffle_remove(qf__locked *L)
{
    void **a = L->buf;
    /* spec 71: index = next word mod size; the last entry fills the hole. */
    size_t i = qf__philox_word(&((shuffle_queue *)L)->words) % L->n;
    void *v = a[i];
    a[i] = a[--L->n];
    return v;
}

static void *shuffle_slot_at(const qf__locked *L, size_t i)
{
    return ((void *const *)L->buf)[i];
}

static const qf__locked_storage shuffle_storage = {
    .entry_size = sizeof(void *),
    .whole_batches = false,
    .key = NULL,
    .insert = shuffle_insert,
    .remove = shuffle_remove,
    .slot_at = shuffle_slot_at,
};

static const qf__queue_ops shuffle_ops = {
    .put = qf__locked_queue_put,
    .take = qf__locked_queue_take,
    .size = qf__locked_queue_size,
    .close = qf__locked_queue_close,
    .cancel_poll = qf__locked_queue_cancel_poll,
    .drain_all = qf__locked_queue_drain_all,
    .give_back = qf__locked_queue_give_back,
    .destroy = qf__locked_queue_destroy,
};

/* ---------------------------------------------------------- constructor */

qf_code qf_random_shuffle_queue_new(const qf_queue_options *opts, qf_queue **ret_q)
{
    if (opts && !ret_q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_q");
    if (opts) {
        /* spec 63: 0 <= min_after_dequeue < capacity (unbounded: INT32_MAX). */
        int64_t cap = opts->capacity < 0 ? INT32_MAX : opts->capacity;
        if (opts->min_after_dequeue < 0)
            return qf_set_error(QF_INVALID_ARGUMENT, "min_after_dequeue %lld must be >= 0",
                                (long long)opts->min_after_dequeue);
        if (cap > 0 && opts->min_after_dequeue >= cap)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "min_after_dequeue %lld must be < capacity %lld",
                                (long long)opts->min_after_dequeue, (long long)cap);
    }
    qf_queue *q = NULL;
    qf_code rc = qf__queue_new(opts, QF_QUEUE_RANDOM_SHUFFLE, "RandomShuffleQueue",
                               "random_shuffle_queue", &shuffle_ops, false, &q);
    if (rc != QF_OK)
        return rc;
    if (q->published) {
        /* An existing shared queue, already checked against the request
         * (spec 10-11, 83): it is the result, as it is. */
        *ret_q = q;
        return QF_OK;
    }
    /* This kind keeps its elements in the engine's storage: the ring that
     * qf__queue_new() sized for the capacity is never used. */
    qf__fifo_free_ring(&q->fifo);

    shuffle_queue *s = aligned_alloc(64, (sizeof(shuffle_queue) + 63) & ~(size_t)63);
    if (!s) {
        qf_queue_unref(q);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    }
    memset(s, 0, sizeof(*s));
    seed_generator(s, opts->seed, opts->seed2);
    rc = qf__locked_queue_init(q, &s->L, &shuffle_storage, (size_t)opts->min_after_dequeue);
    q->impl = s;
    if (rc != QF_OK) {
        qf_queue_unref(q);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    }
    /* Registers a shared queue (or attaches to the one that won a race for
     * the name); otherwise just *ret_q = q. */
    return qf__queue_publish(q, ret_q);
}
