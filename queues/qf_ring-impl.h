/* qf_ring-impl.h - internal: ring operations on a Concurrency Kit ck_ring.
 *
 * Implementation notes.
 *
 * The data structure is ck_ring_t: a power-of-two array of pointer slots,
 * c_head (next slot to consume) on its own cache line, p_head (next slot to
 * reserve) and p_tail (end of the published slots) together on another.
 * The protocol is ck_ring's: producers reserve by advancing p_head and
 * publish in ticket order by advancing p_tail; consumers advance c_head.
 * What qflow adds, and why:
 *
 *  1. Capacity from the indices. A reservation succeeds only while
 *     p_head - c_head < capacity (the queue's exact capacity, any value up
 *     to the ring's size - 1), so no separate element counter is written by
 *     both sides: per element the producer writes only the producer line
 *     and the consumer only the consumer line.
 *  2. Cached opposite index. Each side keeps the last value it read of the
 *     other side's index and re-reads the real one only when the cached
 *     value says "full" (producer) or "empty" (consumer). In the steady
 *     state a producer does not touch the consumer's line at all. The cache
 *     is published with release and read with acquire, so the hand-off of
 *     slot contents stays ordered through it.
 *  3. Asymmetric fences. After the store that publishes (p_tail), the
 *     single producer's reservation (p_head) and the single consumer's
 *     c_head store comes qf__fence_light(), so each side can then look at
 *     the queue's state word for sleepers of the other side: a Dekker pair
 *     with the waiter's fetch_or, qf__fence_heavy() and re-check of the
 *     indices (coord/qf_fence-impl.h). The light fence is a compiler
 *     barrier where membarrier(2) works, so a single-producer,
 *     single-consumer hand-off has no locked instruction at all, and a
 *     multi-producer one only its reservation CAS. Multi-side CASes stay
 *     seq_cst (they are full barriers on x86 anyway).
 *  4. The commit wait. Multi-producer publication must wait for earlier
 *     producers (ck_ring spins there); with more producers than cores the
 *     earlier producer is often preempted and the spinners burn whole time
 *     slices. qflow spins briefly, then sleeps on p_tail with a futex; the
 *     committer wakes only when commit_waiters says someone sleeps.
 *  5. Bulk reserve and dequeue: one CAS moves k indices.
 *  6. Every index and slot access is a C11 __atomic operation (ck_pr's are
 *     inline assembly, invisible to ThreadSanitizer), so TSan checks the
 *     real happens-before edges; a multi-consumer's stale read of a slot
 *     that is being rewritten is an atomic relaxed load whose value is
 *     discarded when its CAS fails.
 */
#ifndef QF_RING_IMPL_H
#define QF_RING_IMPL_H

#include <ck_ring.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_fence-impl.h"
#include "qf_futex.h"
#include "qf_lock-impl.h"

typedef struct qf__ring {
    ck_ring_t ring; /* c_head | p_tail, p_head | size, mask: own lines */
    ck_ring_buffer_t *buf;
    unsigned mask;
    unsigned cap;                        /* most slots in use at once (<= mask) */
    bool sym;                            /* full fences on both sides (qf__ring_set_symmetric()) */
    _Alignas(64) unsigned prod_cached_c; /* producers' copy of c_head */
    _Alignas(64) unsigned cons_cached_p; /* consumers' copy of p_tail */
    _Alignas(64) _Atomic uint32_t commit_waiters;
    char pad_[64 - sizeof(uint32_t)];
} qf__ring;

#ifdef QF_RACE_WIDENING
#define QF_WIDEN() sched_yield()
#else
#define QF_WIDEN() ((void)0)
#endif

#define QF__LD(p, mo) __atomic_load_n((p), __ATOMIC_##mo)
#define QF__ST(p, v, mo) __atomic_store_n((p), (v), __ATOMIC_##mo)

static inline void qf__ring_init(qf__ring *r, ck_ring_buffer_t *buf, unsigned slots, unsigned cap)
{
    ck_ring_init(&r->ring, slots);
    r->buf = buf;
    r->mask = slots - 1;
    r->cap = cap;
    qf__fence_init();
    r->sym = false;
    r->prod_cached_c = 0;
    r->cons_cached_p = 0;
    atomic_init(&r->commit_waiters, 0);
}

/* Fences of this ring. A ring whose every operation moves many values (a
 * batching queue: rows of records in, batches out) and whose sides park
 * often is better off with a full fence on each side, once per call, than
 * with a compiler barrier per call and a membarrier(2) per park. Set before
 * the ring is used, never changed: both sides then pair full fences. */
static inline void qf__ring_set_symmetric(qf__ring *r)
{
    r->sym = true;
}

static inline void qf__ring_fence_light(const qf__ring *r)
{
    if (r->sym)
        qf__fence_full();
    else
        qf__fence_light();
}

static inline void qf__ring_fence_heavy(const qf__ring *r)
{
    if (r->sym)
        qf__fence_full();
    else
        qf__fence_heavy();
}

/* Published and not yet consumed. */
static inline unsigned qf__ring_size(qf__ring *r)
{
    unsigned c = QF__LD(&r->ring.c_head, ACQUIRE);
    unsigned p = QF__LD(&r->ring.p_tail, ACQUIRE);
    return p - c;
}

/* Reserved (published or not) and not yet consumed; seq_cst so it can be
 * the re-check of a waiter. */
static inline unsigned qf__ring_reserved(qf__ring *r)
{
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    unsigned p = QF__LD(&r->ring.p_head, SEQ_CST);
    return p - c;
}

/* Room for how many more, by the real indices (seq_cst: a waiter's
 * re-check). */
static inline unsigned qf__ring_room(qf__ring *r)
{
    unsigned p = QF__LD(&r->ring.p_head, SEQ_CST);
    unsigned c = QF__LD(&r->ring.c_head, SEQ_CST);
    unsigned used = p - c;
    return used >= r->cap ? 0 : r->cap - used;
}

/* Reserve up to n slots (exactly n or none when all_or_nothing); returns
 * how many, 0 when full. *ret_ticket is the first index. */
static inline size_t qf__ring_reserve(qf__ring *r, size_t n, bool single_producer,
                                      bool all_or_nothing, unsigned *ret_ticket)
{
    unsigned p = QF__LD(&r->ring.p_head, RELAXED);
    for (;;) {
        unsigned c = QF__LD(&r->prod_cached_c, ACQUIRE);
        unsigned used = p - c;
        if (used >= r->cap || (all_or_nothing && r->cap - used < n)) {
            c = QF__LD(&r->ring.c_head, ACQUIRE);
            QF__ST(&r->prod_cached_c, c, RELEASE);
            used = p - c;
            if (used > r->cap) { /* stale p (other producers moved on) */
                p = QF__LD(&r->ring.p_head, RELAXED);
                continue;
            }
            if (used == r->cap || (all_or_nothing && r->cap - used < n))
                return 0;
        }
        unsigned room = r->cap - used;
        unsigned k = room < n ? room : (unsigned)n;
        if (single_producer) {
            /* Fenced: the closed check that follows must not be satisfied
             * before consumers can see the reservation. */
            QF__ST(&r->ring.p_head, p + k, RELAXED);
            qf__ring_fence_light(r);
            *ret_ticket = p;
            return k;
        }
        if (__atomic_compare_exchange_n(&r->ring.p_head, &p, p + k, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
            *ret_ticket = p;
            return k;
        }
    }
}

static inline void qf__ring_write(qf__ring *r, unsigned idx, void *v)
{
    QF__ST(&r->buf[idx & r->mask].value, v, RELAXED);
}

/* Publish [start, start + k) once every earlier reservation is published. */
static inline void qf__ring_publish(qf__ring *r, unsigned start, unsigned k, bool single_producer)
{
    unsigned *tail = &r->ring.p_tail;
    if (!single_producer && QF__LD(tail, ACQUIRE) != start) {
        for (int i = 0; i < 64 && QF__LD(tail, ACQUIRE) != start; i++)
            qf__cpu_relax();
        while (QF__LD(tail, ACQUIRE) != start) {
            atomic_fetch_add_explicit(&r->commit_waiters, 1, memory_order_seq_cst);
            qf__ring_fence_heavy(r);
            unsigned seen = QF__LD(tail, SEQ_CST);
            if (seen != start)
                qf_futex_wait((_Atomic uint32_t *)tail, seen, QF_FOREVER);
            atomic_fetch_sub_explicit(&r->commit_waiters, 1, memory_order_relaxed);
        }
    }
    QF_WIDEN();
    /* Release for the slots; the fence orders it before the look at
     * commit_waiters and at the consumers' wait bit. */
    QF__ST(tail, start + k, RELEASE);
    qf__ring_fence_light(r);
    if (!single_producer && atomic_load_explicit(&r->commit_waiters, memory_order_seq_cst))
        qf_futex_wake((_Atomic uint32_t *)tail, INT32_MAX);
}

/* Take up to n published values. Returns how many. */
static inline size_t qf__ring_take(qf__ring *r, void **out, size_t n, bool single_consumer)
{
    unsigned c = QF__LD(&r->ring.c_head, RELAXED);
    for (;;) {
        unsigned p = QF__LD(&r->cons_cached_p, ACQUIRE);
        unsigned avail = p - c;
        if (avail == 0 || avail > r->mask + 1u) {
            p = QF__LD(&r->ring.p_tail, ACQUIRE);
            QF__ST(&r->cons_cached_p, p, RELEASE);
            avail = p - c;
            if (avail == 0)
                return 0;
            if (avail > r->mask + 1u) { /* stale c */
                c = QF__LD(&r->ring.c_head, RELAXED);
                continue;
            }
        }
        unsigned k = avail < n ? avail : (unsigned)n;
        for (unsigned i = 0; i < k; i++)
            out[i] = QF__LD(&r->buf[(c + i) & r->mask].value, RELAXED);
        if (single_consumer) {
            QF__ST(&r->ring.c_head, c + k, RELEASE);
            qf__ring_fence_light(r); /* before the look at producers' wait bit */
            return k;
        }
        if (__atomic_compare_exchange_n(&r->ring.c_head, &c, c + k, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            return k;
    }
}

/* One value, single producer (the runtime's local run queues). */
static inline bool qf__ring_push_sp(qf__ring *r, void *v)
{
    unsigned t;
    if (qf__ring_reserve(r, 1, true, false, &t) == 0)
        return false;
    qf__ring_write(r, t, v);
    qf__ring_publish(r, t, 1, true);
    /* No heavy side pairs with this push: the runtime's idle protocol
     * relies on qf_eventcount_notify()'s own full fence, which its callers
     * run straight after. */
    return true;
}

#endif
