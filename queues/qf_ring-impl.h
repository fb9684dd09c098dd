/* qf_ring-impl.h - internal: ring operations on a Concurrency Kit ck_ring.
 *
 * Implementation notes.
 *
 * The ring is ck_ring_t with ck_ring's index protocol: consumers advance
 * c_head, producers reserve by advancing p_head (multi-producer) and publish
 * by advancing p_tail in ticket order. Single-element multi-producer
 * reservations use ck_ring_enqueue_reserve_mpmc() itself. Three things are
 * ours, built on the same fields with ck_pr primitives:
 *
 *  1. The commit wait. ck's commit spins until every earlier producer has
 *     published (p_tail == my ticket). With more producers than cores an
 *     earlier producer is often preempted between reserve and commit, and
 *     the spinners burn whole time slices waiting for it: ck_ring MPMC
 *     collapses to thousands of items/s at 4P4C on 2 cores. We spin
 *     briefly, then sleep on p_tail itself with a futex; the committer wakes
 *     sleepers only when commit_waiters says there are any (a seq_cst store
 *     and load on each side make that Dekker check sound).
 *  2. Bulk reserve/commit and bulk dequeue: one CAS moves k indices, so
 *     enqueue_many/dequeue_many pay one contended operation per batch.
 *  3. Slot accesses go through ck_pr loads and stores. A multi-consumer
 *     dequeue may read a slot that a producer is overwriting (it then loses
 *     the CAS and discards the value): benign by design, but a plain read
 *     would be reported by ThreadSanitizer. ck_pr accesses are inline
 *     assembly, invisible to TSan; the hand-off itself is stated to TSan with
 *     release/acquire annotations on the slot address (qf_tsan-impl.h).
 *
 * Capacity: the ring holds at most mask (= size - 1) items. The queue keeps
 * its own element count and never asks the ring for more than fits, except
 * in unbounded mode, where a full ring spills to an overflow list.
 */
#ifndef QF_RING_IMPL_H
#define QF_RING_IMPL_H

#include <ck_pr.h>
#include <ck_ring.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_futex.h"
#include "qf_lock-impl.h"
#include "qf_tsan-impl.h"

typedef struct qf__ring {
    ck_ring_t ring; /* ck pads c_head and p_tail/p_head onto separate lines */
    ck_ring_buffer_t *buf;
    unsigned mask;
    /* producers asleep in the commit wait; on its own line so the common
     * "nobody sleeps" check does not share a line with the indices */
    _Alignas(64) _Atomic uint32_t commit_waiters;
    char pad_[64 - sizeof(uint32_t)];
} qf__ring;

#ifdef QF_RACE_WIDENING
#define QF_WIDEN() sched_yield()
#else
#define QF_WIDEN() ((void)0)
#endif

static inline unsigned qf__ring_size(qf__ring *r)
{
    unsigned c = ck_pr_load_uint(&r->ring.c_head);
    unsigned p = ck_pr_load_uint(&r->ring.p_tail);
    return p - c;
}

static inline void qf__slot_store(qf__ring *r, unsigned idx, void *v)
{
    ck_ring_buffer_t *s = &r->buf[idx & r->mask];
    ck_pr_store_ptr(&s->value, v);
    QF_HB_RELEASE(s);
}

/* Publish [start, end) once every earlier producer has published. */
static inline void qf__ring_commit_mp(qf__ring *r, unsigned start, unsigned end)
{
    unsigned *tail = &r->ring.p_tail;
    if (ck_pr_load_uint(tail) != start) {
        for (int i = 0; i < 64 && ck_pr_load_uint(tail) != start; i++)
            qf__cpu_relax();
        while (ck_pr_load_uint(tail) != start) {
            atomic_fetch_add_explicit(&r->commit_waiters, 1, memory_order_seq_cst);
            unsigned seen = __atomic_load_n(tail, __ATOMIC_SEQ_CST);
            if (seen != start)
                qf_futex_wait((_Atomic uint32_t *)tail, seen, QF_FOREVER);
            atomic_fetch_sub_explicit(&r->commit_waiters, 1, memory_order_relaxed);
        }
    }
    /* seq_cst store (xchg on x86): orders the publication before the look
     * at commit_waiters below; pairs with the waiter's seq_cst increment
     * followed by its seq_cst re-read of p_tail. It is also a release for
     * the slot contents. */
    __atomic_store_n(tail, end, __ATOMIC_SEQ_CST);
    if (atomic_load_explicit(&r->commit_waiters, memory_order_seq_cst) != 0)
        qf_futex_wake((_Atomic uint32_t *)tail, INT32_MAX);
}

/* Multi-producer: enqueue up to n values; returns how many (0: full). */
static inline size_t qf__ring_enqueue_mp(qf__ring *r, void *const *vals, size_t n)
{
    if (n == 1) {
        unsigned ticket;
        void *slot = ck_ring_enqueue_reserve_mpmc(&r->ring, r->buf, &ticket);
        if (!slot)
            return 0;
        ck_pr_store_ptr(&((ck_ring_buffer_t *)slot)->value, vals[0]);
        QF_HB_RELEASE(slot);
        QF_WIDEN();
        qf__ring_commit_mp(r, ticket, ticket + 1);
        return 1;
    }
    unsigned p = ck_pr_load_uint(&r->ring.p_head), k;
    for (;;) {
        ck_pr_fence_load();
        unsigned c = ck_pr_load_uint(&r->ring.c_head);
        unsigned space = r->mask - (p - c);
        if ((int)space <= 0) {
            /* Either full or our p snapshot is stale; ck's own reserve
             * distinguishes the two the same way. */
            unsigned np = ck_pr_load_uint(&r->ring.p_head);
            if (np == p)
                return 0;
            p = np;
            continue;
        }
        k = space < n ? space : (unsigned)n;
        if (ck_pr_cas_uint_value(&r->ring.p_head, p, p + k, &p))
            break;
    }
    for (unsigned i = 0; i < k; i++)
        qf__slot_store(r, p + i, vals[i]);
    QF_WIDEN();
    qf__ring_commit_mp(r, p, p + k);
    return k;
}

/* Single producer: enqueue up to n values; returns how many (0: full). */
static inline size_t qf__ring_enqueue_sp(qf__ring *r, void *const *vals, size_t n)
{
    unsigned p = r->ring.p_tail; /* only we write it */
    unsigned c = ck_pr_load_uint(&r->ring.c_head);
    unsigned space = r->mask - (p - c);
    unsigned k = space < n ? space : (unsigned)n;
    if (k == 0)
        return 0;
    /* The consumer's c_head store happened after it read the slots we are
     * about to overwrite (see the load->store fence in dequeue). */
    ck_pr_fence_load_store();
    for (unsigned i = 0; i < k; i++)
        qf__slot_store(r, p + i, vals[i]);
    ck_pr_fence_store();
    ck_pr_store_uint(&r->ring.p_tail, p + k);
    return k;
}

/* Multi-consumer: take up to n values into out; returns how many. */
static inline size_t qf__ring_dequeue_mc(qf__ring *r, void **out, size_t n)
{
    unsigned c = ck_pr_load_uint(&r->ring.c_head);
    for (;;) {
        ck_pr_fence_load();
        unsigned p = ck_pr_load_uint(&r->ring.p_tail);
        unsigned avail = p - c;
        if (avail == 0 || avail > r->mask + 1u) {
            /* empty, or a stale c snapshot */
            unsigned nc = ck_pr_load_uint(&r->ring.c_head);
            if (nc == c)
                return 0;
            c = nc;
            continue;
        }
        unsigned k = avail < n ? avail : (unsigned)n;
        ck_pr_fence_load();
        for (unsigned i = 0; i < k; i++)
            out[i] = ck_pr_load_ptr(&r->buf[(c + i) & r->mask].value);
        /* The slot reads must complete before the CAS lets producers reuse
         * the slots. */
        ck_pr_fence_load_store();
        if (ck_pr_cas_uint_value(&r->ring.c_head, c, c + k, &c)) {
            for (unsigned i = 0; i < k; i++) {
                QF_HB_ACQUIRE(&r->buf[(c + i) & r->mask]);
            }
            return k;
        }
    }
}

/* Single consumer. */
static inline size_t qf__ring_dequeue_sc(qf__ring *r, void **out, size_t n)
{
    unsigned c = r->ring.c_head; /* only we write it */
    unsigned p = ck_pr_load_uint(&r->ring.p_tail);
    unsigned avail = p - c;
    if (avail == 0)
        return 0;
    unsigned k = avail < n ? avail : (unsigned)n;
    ck_pr_fence_load();
    for (unsigned i = 0; i < k; i++) {
        out[i] = ck_pr_load_ptr(&r->buf[(c + i) & r->mask].value);
        QF_HB_ACQUIRE(&r->buf[(c + i) & r->mask]);
    }
    ck_pr_fence_load_store();
    ck_pr_store_uint(&r->ring.c_head, c + k);
    return k;
}

#endif
