/* qf_deque-impl.h - internal: a growable double-ended queue of slots.
 *
 * Holds elements that cannot live in the ring: those a cut-short
 * dequeue_many puts back at the front, and the overflow of an unbounded
 * queue. Not thread-safe; the queue guards it with its side lock. Slow path
 * only, so simplicity beats speed here.
 */
#ifndef QF_DEQUE_IMPL_H
#define QF_DEQUE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct qf__deque {
    void **buf;
    size_t cap, head, len; /* cap is 0 or a power of two */
} qf__deque;

static inline bool qf__deque_grow(qf__deque *d, size_t need)
{
    if (d->len + need <= d->cap)
        return true;
    size_t ncap = d->cap ? d->cap : 16;
    while (ncap < d->len + need)
        ncap *= 2;
    void **nb = malloc(ncap * sizeof(void *));
    if (!nb)
        return false;
    for (size_t i = 0; i < d->len; i++)
        nb[i] = d->buf[(d->head + i) & (d->cap - 1)];
    free(d->buf);
    d->buf = nb;
    d->cap = ncap;
    d->head = 0;
    return true;
}

/* Put v[0..n) in front of everything, keeping their order. */
static inline bool qf__deque_push_front(qf__deque *d, void *const *v, size_t n)
{
    if (!qf__deque_grow(d, n))
        return false;
    for (size_t i = n; i-- > 0;) {
        d->head = (d->head - 1) & (d->cap - 1);
        d->buf[d->head] = v[i];
    }
    d->len += n;
    return true;
}

static inline bool qf__deque_push_back(qf__deque *d, void *v)
{
    if (!qf__deque_grow(d, 1))
        return false;
    d->buf[(d->head + d->len) & (d->cap - 1)] = v;
    d->len++;
    return true;
}

static inline size_t qf__deque_pop_front(qf__deque *d, void **out, size_t n)
{
    size_t k = n < d->len ? n : d->len;
    for (size_t i = 0; i < k; i++) {
        out[i] = d->buf[d->head];
        d->head = (d->head + 1) & (d->cap - 1);
    }
    d->len -= k;
    return k;
}

static inline void qf__deque_free(qf__deque *d)
{
    free(d->buf);
    d->buf = NULL;
    d->cap = d->head = d->len = 0;
}

#endif
