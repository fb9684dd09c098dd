/* qf_fifo_queue.c - the FIFO engine: reserve, publish, take, wait, close.
 *
 * Everything here moves opaque slots (element pointers or inline values);
 * qf_queue.c wraps it in the element and pointer APIs.
 *
 * The fast path touches no shared counter: capacity comes from the ring
 * indices (qf_ring-impl.h), and the state word (qf_queue-impl.h) is read,
 * not written, by enqueues and dequeues. A producer reserves ring slots,
 * checks the state word (closed?), writes and publishes them with a
 * release store and a light fence, then reads the state word for sleeping
 * consumers. A consumer takes with a CAS (or, single, a store and a light
 * fence) and then reads the state word for sleeping producers. A waiter
 * registers its waker, sets its side's wait bit with a seq_cst fetch_or,
 * runs the heavy fence and re-checks the indices: the asymmetric pair of
 * coord/qf_fence-impl.h orders the two sides, so either the waiter sees the
 * other side's index move, or the other side sees the wait bit. Nothing is
 * lost and nobody sleeps through.
 *
 * Closed and drained. A consumer reports end-of-data only when the queue is
 * closed, no enqueue that was blocked before a plain close is still pending,
 * no other consumer holds elements it may put back (a cut-short
 * dequeue_many), and nothing is reserved in the ring or waiting in the side
 * lists. A producer that reserved slots and then finds the queue closed
 * cannot hand the slots back (later producers may hold later slots), so it
 * publishes tombstones there, which consumers discard, and fails. Hence a
 * reservation either becomes an element delivered before end-of-data, or a
 * failed enqueue; never an element stranded behind an end-of-data.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "qf_queue-impl.h"
#include "qf_status.h"

/* Waits for an in-flight publication before sleeping on it instead. */
#define INFLIGHT_SPINS 64

/* Aligned: an odd address would read as a row slot (qf_strblock-impl.h). */
static _Alignas(8) char tombstone_object;
#define TOMBSTONE ((void *)&tombstone_object)

/* ---------------------------------------------------------------- errors */

static qf_code err_closed(const qf_queue *q)
{
    return qf_set_error(QF_CANCELLED, "%s '%s' is closed.", q->kind_name, q->name);
}

static qf_code err_enqueue_cancelled(void)
{
    return qf__set_error_static(QF_CANCELLED, "Enqueue operation was cancelled");
}

static qf_code err_timeout(void)
{
    return qf__set_error_static(QF_DEADLINE_EXCEEDED, "Timed out waiting for notification");
}

static qf_code err_insufficient(const qf_queue *q, size_t requested)
{
    return qf_set_error(QF_OUT_OF_RANGE,
                        "%s '%s' is closed and has insufficient elements (requested %zu, "
                        "current size %lld)",
                        q->kind_name, q->name, requested, (long long)qf__fifo_size(q));
}

/* ---------------------------------------------------------------- helpers */

static uint64_t state_sc(qf_queue *q)
{
    return atomic_load_explicit(&q->state, memory_order_seq_cst);
}

static int clamp_n(size_t n)
{
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* After publishing (and its light fence): wake sleeping consumers, if any. */
static void wake_consumers(qf_queue *q, size_t k)
{
    if ((state_sc(q) & QF__DEQ_WAIT) && qf_waitlist_count(&q->deq_waiters) != 0)
        qf_waitlist_wake(&q->deq_waiters, clamp_n(k));
}

/* After consuming ring slots (fenced): wake sleeping producers, if any. */
static void wake_producers(qf_queue *q, size_t k)
{
    if ((state_sc(q) & QF__ENQ_WAIT) && qf_waitlist_count(&q->enq_waiters) != 0)
        qf_waitlist_wake(&q->enq_waiters, clamp_n(k));
}

static void wake_all_consumers_if_closed(qf_queue *q, uint64_t seen)
{
    if ((seen & QF__CLOSED) && qf_waitlist_count(&q->deq_waiters) != 0)
        qf_waitlist_wake(&q->deq_waiters, INT32_MAX);
}

static void drop_pending(qf_queue *q)
{
    uint64_t old = atomic_fetch_sub_explicit(&q->state, QF__PENDING_ONE, memory_order_seq_cst);
    /* The last enqueue that outlived a plain close has finished: consumers
     * on an empty closed queue can now be told it is drained. */
    if (qf__pending(old) == 1)
        wake_all_consumers_if_closed(q, old);
}

static bool become_pending(qf_queue *q, qf_code *ret_err)
{
    uint64_t old = atomic_fetch_add_explicit(&q->state, QF__PENDING_ONE, memory_order_seq_cst);
    if (old & (QF__CLOSED | QF__CANCELLED)) {
        drop_pending(q);
        *ret_err = (old & QF__CANCELLED) ? err_enqueue_cancelled() : err_closed(q);
        return false;
    }
    return true;
}

static int ncpus(void)
{
    static _Atomic int ncpu;
    int n = atomic_load_explicit(&ncpu, memory_order_relaxed);
    if (n == 0) {
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&ncpu, n > 0 ? n : 1, memory_order_relaxed);
    }
    return n > 0 ? n : 1;
}

/* Spinning before sleeping catches a partner that is about to act (a futex
 * hand-off costs microseconds), but only when the partner is running; on
 * an oversubscribed or busy machine the spinner burns the time slice its
 * partner needs (measured here: 10-20x slower than not spinning at all).
 * So the budget adapts per queue, as an adaptive mutex's does: a spin that
 * caught its partner doubles it (up to spin_ns), a spin that ended in a
 * sleep anyway halves it. Relaxed updates: it is a hint. */
typedef struct spin {
    int64_t end; /* 0: not started; -1: done or not allowed; else deadline */
} spin;

static void spin_feedback(qf_queue *q, bool caught)
{
    int32_t b = atomic_load_explicit(&q->spin_dyn, memory_order_relaxed);
    int32_t nb = caught ? (b < 1000 ? 1000 : b * 2) : b / 2;
    if (nb > q->spin_ns)
        nb = (int32_t)q->spin_ns;
    if (nb != b)
        atomic_store_explicit(&q->spin_dyn, nb, memory_order_relaxed);
}

/* The operation made progress (or ended): a spin still running caught it. */
static void spin_release(qf_queue *q, spin *sp)
{
    if (sp->end > 0)
        spin_feedback(q, true);
    sp->end = 0;
}

/* Spin a little; false once the budget is spent (then it sleeps). */
static bool spin_once(qf_queue *q, spin *sp)
{
    if (sp->end < 0 || q->spin_ns <= 0 || ncpus() < 2)
        return false;
    int64_t now = qf_now_ns();
    if (sp->end == 0) {
        int32_t budget = atomic_load_explicit(&q->spin_dyn, memory_order_relaxed);
        if (budget <= 0) {
            /* Probe now and then so the budget can grow back when the
             * machine quietens down. */
            uint32_t t = atomic_fetch_add_explicit(&q->spin_probe, 1, memory_order_relaxed);
            if (t % 64 != 0) {
                sp->end = -1;
                return false;
            }
            budget = 1000;
        }
        sp->end = now + budget;
    }
    if (now >= sp->end) {
        spin_feedback(q, false);
        sp->end = -1;
        return false;
    }
    for (int i = 0; i < 16; i++)
        qf__cpu_relax();
    return true;
}

static void oom_abort(const char *what)
{
    fprintf(stderr, "qflow: out of memory %s\n", what);
    abort();
}

/* ------------------------------------------------------------- producers */

/* The verdict of the state word for a producer. */
static qf_code closed_for(const qf_queue *q, uint64_t s, bool pending)
{
    if (s & QF__CANCELLED)
        return pending ? err_enqueue_cancelled() : err_closed(q);
    if ((s & QF__CLOSED) && !pending)
        return err_closed(q);
    return QF_OK;
}

/* Unbounded (or huge) queues: the overflow list behind the ring. Puts all
 * n slots or none; returns true when they went in (or the queue refused them
 * with *ret_err), false when there is no room for all n. */
static bool overflow_push(qf_queue *q, void *const *slots, size_t n, bool pending, qf_code *ret_err)
{
    qf__lock(&q->side_lock);
    if (!q->unbounded_cap) {
        uint64_t used = qf__ring_reserved(&q->ring) + q->overflow.len;
        if (used + n > (uint64_t)q->capacity) {
            qf__unlock(&q->side_lock);
            return false;
        }
    }
    /* Announce first, then check closed: a consumer that saw it drained
     * either misses the announcement (and we then see CLOSED) or waits. */
    atomic_fetch_add_explicit(&q->overflow_n, (uint32_t)n, memory_order_seq_cst);
    *ret_err = closed_for(q, state_sc(q), pending);
    if (*ret_err != QF_OK) {
        atomic_fetch_sub_explicit(&q->overflow_n, (uint32_t)n, memory_order_seq_cst);
        qf__unlock(&q->side_lock);
        wake_all_consumers_if_closed(q, QF__CLOSED);
        return true;
    }
    for (size_t i = 0; i < n; i++)
        if (!qf__deque_push_back(&q->overflow, slots[i]))
            oom_abort("growing an unbounded queue");
    qf__unlock(&q->side_lock);
    wake_consumers(q, n);
    return true;
}

static qf_code wait_room(qf_queue *q, const qf__wait *w, bool *pending, spin *sp, size_t want)
{
    if (w->mode == QF__WAIT_TRY)
        return qf__set_error_static(QF_UNAVAILABLE, "queue is full");
    if (w->mode == QF__WAIT_DEADLINE && !*pending) {
        /* From here on this enqueue is "pending": a plain close lets it
         * finish, and consumers wait for it before reporting end-of-data. */
        qf_code err;
        if (!become_pending(q, &err))
            return err;
        *pending = true;
    }
    if (w->mode == QF__WAIT_DEADLINE && qf_deadline_passed(w->deadline))
        return err_timeout();
    if (w->mode == QF__WAIT_DEADLINE && spin_once(q, sp))
        return QF_OK; /* retry */

    qf_waker tw, *wk = w->waker;
    if (w->mode == QF__WAIT_DEADLINE) {
        if (qf__in_task())
            return qf__blocking_in_task_error("A blocking enqueue");
        qf_waker_init_thread(&tw);
        wk = &tw;
    }
    qf_waitlist_register(&q->enq_waiters, wk);
    uint64_t old = atomic_fetch_or_explicit(&q->state, QF__ENQ_WAIT, memory_order_seq_cst);
    qf__ring_fence_heavy(&q->ring); /* pairs with consumers' light fence after c_head */
    /* The same rule the producer used to decide it must wait: a spilling
     * queue counts its overflow list too, else it would spin here. */
    bool room;
    if (q->unbounded_cap)
        room = true;
    else if (q->spill)
        room = (uint64_t)qf__ring_reserved(&q->ring) +
                   atomic_load_explicit(&q->overflow_n, memory_order_seq_cst) + want <=
               (uint64_t)q->capacity;
    else
        room = qf__ring_room(&q->ring) >= (want < q->ring.cap ? want : 1);
    if (room || closed_for(q, old, *pending) != QF_OK) {
        if (!qf_waitlist_cancel(&q->enq_waiters, wk)) {
            wake_producers(q, 1);  /* woken meanwhile: do not swallow it */
            qf_waker_consumed(wk); /* handed on: a withdraw must not again */
        }
        return QF_OK; /* retry now */
    }
    if (w->mode == QF__WAIT_POLL)
        return QF_PENDING;
    if (qf_waker_wait(wk, w->deadline) == QF_DEADLINE_EXCEEDED &&
        qf_waitlist_cancel(&q->enq_waiters, wk))
        return err_timeout();
    return QF_OK; /* woken: retry */
}

qf_code qf__fifo_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w, size_t *ret_done)
{
    size_t done = 0;
    bool pending = false;
    spin sp = {0};
    qf_code rc = QF_OK;
    bool try_all = w->mode == QF__WAIT_TRY && n > 1;

    if (n > 1 && w->mode == QF__WAIT_DEADLINE) {
        /* A multi-row enqueue is pending from its start, so a plain close
         * between its rows cannot cut it in two (spec 30, 59). */
        if (!become_pending(q, &rc)) {
            if (ret_done)
                *ret_done = 0;
            return rc;
        }
        pending = true;
    } else if ((rc = closed_for(q, atomic_load_explicit(&q->state, memory_order_acquire),
                                pending)) != QF_OK) {
        /* Already closed: refuse before reserving, so no tombstone. */
        if (ret_done)
            *ret_done = 0;
        return rc;
    }
    while (done < n) {
        unsigned ticket = 0;
        size_t k = 0;
        bool to_overflow = q->spill && atomic_load_explicit(&q->overflow_n, memory_order_acquire);
        if (!to_overflow)
            k = qf__ring_reserve(&q->ring, n - done, q->single_producer, try_all, &ticket);
        if (k > 0) {
            rc = closed_for(q, state_sc(q), pending);
            if (rc != QF_OK) {
                /* Reserved after a close: publish tombstones, fail. */
                atomic_fetch_add_explicit(&q->tomb_n, (uint32_t)k, memory_order_relaxed);
                for (size_t i = 0; i < k; i++)
                    qf__ring_write(&q->ring, ticket + (unsigned)i, TOMBSTONE);
                qf__ring_publish(&q->ring, ticket, (unsigned)k, q->single_producer);
                wake_consumers(q, k);
                break;
            }
            for (size_t i = 0; i < k; i++)
                qf__ring_write(&q->ring, ticket + (unsigned)i, slots[done + i]);
            qf__ring_publish(&q->ring, ticket, (unsigned)k, q->single_producer);
            wake_consumers(q, k);
            done += k;
            spin_release(q, &sp);
            continue;
        }
        if (q->spill) {
            /* A try of several rows goes in whole or not at all. */
            size_t m = try_all ? n - done : 1;
            qf_code err = QF_OK;
            if (overflow_push(q, slots + done, m, pending, &err)) {
                if (err != QF_OK) {
                    rc = err;
                    break;
                }
                done += m;
                continue;
            }
        }
        /* Full. A closed queue fails rather than waits. */
        rc = closed_for(q, state_sc(q), pending);
        if (rc != QF_OK)
            break;
        rc = wait_room(q, w, &pending, &sp, try_all ? n : 1);
        if (rc != QF_OK)
            break;
    }
    spin_release(q, &sp);
    if (pending)
        drop_pending(q);
    if (ret_done)
        *ret_done = done;
    return done == n ? QF_OK : rc;
}

/* ------------------------------------------------------------- consumers */

/* Compact n taken slots, dropping tombstones; returns the real count. */
static size_t drop_tombstones(qf_queue *q, void **slots, size_t n)
{
    size_t real = 0;
    for (size_t i = 0; i < n; i++)
        if (slots[i] != TOMBSTONE)
            slots[real++] = slots[i];
    if (real != n)
        atomic_fetch_sub_explicit(&q->tomb_n, (uint32_t)(n - real), memory_order_relaxed);
    return real;
}

/* Take up to max elements: the put-back stash first, then the ring, then
 * the overflow list. Tombstones are dropped. */
static size_t take_some(qf_queue *q, void **out, size_t max)
{
    size_t k = 0;
    if (atomic_load_explicit(&q->stash_n, memory_order_acquire) != 0) {
        qf__lock(&q->side_lock);
        k = qf__deque_pop_front(&q->stash, out, max);
        atomic_fetch_sub_explicit(&q->stash_n, (uint32_t)k, memory_order_seq_cst);
        qf__unlock(&q->side_lock);
    }
    while (k < max) {
        size_t r = qf__ring_take(&q->ring, out + k, max - k, q->single_consumer);
        if (r == 0)
            break;
        k += drop_tombstones(q, out + k, r);
        wake_producers(q, r);
    }
    if (k < max && q->spill && atomic_load_explicit(&q->overflow_n, memory_order_acquire)) {
        qf__lock(&q->side_lock);
        /* The ring holds the older elements: take from it first. */
        size_t r = qf__ring_take(&q->ring, out + k, max - k, q->single_consumer);
        k += drop_tombstones(q, out + k, r);
        size_t o = qf__deque_pop_front(&q->overflow, out + k, max - k);
        atomic_fetch_sub_explicit(&q->overflow_n, (uint32_t)o, memory_order_seq_cst);
        k += o;
        qf__unlock(&q->side_lock);
        if (r + o)
            wake_producers(q, r + o);
    }
    return k;
}

/* Return taken elements to the front of the queue, in their order. */
static void put_back(qf_queue *q, void *const *slots, size_t n)
{
    if (n == 0)
        return;
    qf__lock(&q->side_lock);
    if (!qf__deque_push_front(&q->stash, slots, n))
        oom_abort("returning elements to a queue");
    atomic_fetch_add_explicit(&q->stash_n, (uint32_t)n, memory_order_seq_cst);
    qf__unlock(&q->side_lock);
    wake_consumers(q, n);
}

void qf__fifo_give_back(qf_queue *q, void *const *slots, size_t n)
{
    put_back(q, slots, n);
}

/* Anything a consumer could take now, or that is on its way (seq_cst: it
 * is the re-check of a waiter). */
static bool something_there(qf_queue *q, bool include_reserved)
{
    if (atomic_load_explicit(&q->stash_n, memory_order_seq_cst) ||
        atomic_load_explicit(&q->overflow_n, memory_order_seq_cst))
        return true;
    unsigned c = QF__LD(&q->ring.ring.c_head, SEQ_CST);
    unsigned p = include_reserved ? QF__LD(&q->ring.ring.p_head, SEQ_CST)
                                  : QF__LD(&q->ring.ring.p_tail, SEQ_CST);
    return p != c;
}

/* Closed, nothing pending, nothing anywhere; non-holders also need no
 * other consumer to be holding elements it may put back. */
static bool drained(qf_queue *q, uint64_t s, bool holder, bool fenced)
{
    if (!(s & QF__CLOSED) || qf__pending(s) != 0)
        return false;
    if (!holder && qf__holders(s) != 0)
        return false;
    if (something_there(q, true))
        return false;
    /* A producer reserves, fences lightly, then checks CLOSED: after a
     * heavy fence either its reservation is visible or it saw CLOSED and
     * will fail with a tombstone. */
    if (!fenced)
        qf__ring_fence_heavy(&q->ring);
    return !something_there(q, true);
}

static void release_holder(qf_queue *q)
{
    uint64_t old = atomic_fetch_sub_explicit(&q->state, QF__HOLDER_ONE, memory_order_seq_cst);
    wake_all_consumers_if_closed(q, old);
}

qf_code qf__fifo_take(qf_queue *q, size_t n, bool up_to, const qf__wait *w, void **ret_slots,
                      size_t *ret_n)
{
    size_t got = 0;
    spin sp = {0};
    unsigned inflight = 0;
    bool holder = false;
    qf_code rc = QF_OK;

    if (n > 1) {
        /* This call may put back what it takes (close, deadline): count it
         * as a holder before the first take, so no other consumer calls the
         * queue drained while the elements are in its hands. */
        atomic_fetch_add_explicit(&q->state, QF__HOLDER_ONE, memory_order_seq_cst);
        holder = true;
    }
    for (;;) {
        got += take_some(q, ret_slots + got, n - got);
        if (got == n)
            break;
        uint64_t s = atomic_load_explicit(&q->state, memory_order_acquire);
        if (something_there(q, false))
            continue; /* raced with another consumer; try again */
        if (drained(q, s, holder, false)) {
            if (up_to && got > 0)
                break;
            put_back(q, ret_slots, got);
            rc = err_insufficient(q, n);
            goto fail;
        }
        if (w->mode == QF__WAIT_TRY) {
            if (inflight++ < INFLIGHT_SPINS && something_there(q, true)) {
                qf__cpu_relax(); /* a publication is on its way */
                continue;
            }
            if (up_to && got > 0)
                break;
            put_back(q, ret_slots, got);
            rc = qf__set_error_static(QF_UNAVAILABLE, "queue is empty");
            goto fail;
        }
        if (w->mode == QF__WAIT_DEADLINE && qf_deadline_passed(w->deadline)) {
            put_back(q, ret_slots, got);
            rc = err_timeout();
            goto fail;
        }
        if (w->mode == QF__WAIT_DEADLINE && spin_once(q, &sp))
            continue;
        if (got > 0 && !holder) {
            /* We hold elements a close may make us put back: others must
             * not call the queue drained before we do. */
            atomic_fetch_add_explicit(&q->state, QF__HOLDER_ONE, memory_order_seq_cst);
            holder = true;
        }
        qf_waker tw, *wk = w->waker;
        if (w->mode == QF__WAIT_DEADLINE) {
            if (qf__in_task()) {
                put_back(q, ret_slots, got);
                rc = qf__blocking_in_task_error("A blocking dequeue");
                goto fail;
            }
            qf_waker_init_thread(&tw);
            wk = &tw;
        }
        qf_waitlist_register(&q->deq_waiters, wk);
        uint64_t old = atomic_fetch_or_explicit(&q->state, QF__DEQ_WAIT, memory_order_seq_cst);
        qf__ring_fence_heavy(&q->ring); /* pairs with producers' light fence after p_tail */
        if (something_there(q, false) || drained(q, old, holder, true)) {
            if (!qf_waitlist_cancel(&q->deq_waiters, wk)) {
                wake_consumers(q, 1);  /* woken meanwhile: pass it on */
                qf_waker_consumed(wk); /* handed on: a withdraw must not again */
            }
            continue;
        }
        if (w->mode == QF__WAIT_POLL) {
            /* Poll forms take one element, so nothing is held here. */
            put_back(q, ret_slots, got);
            rc = QF_PENDING;
            goto fail;
        }
        if (qf_waker_wait(wk, w->deadline) == QF_DEADLINE_EXCEEDED &&
            qf_waitlist_cancel(&q->deq_waiters, wk)) {
            put_back(q, ret_slots, got);
            rc = err_timeout();
            goto fail;
        }
    }
    spin_release(q, &sp);
    if (holder)
        release_holder(q);
    if (ret_n)
        *ret_n = got;
    return QF_OK;
fail:
    spin_release(q, &sp);
    if (holder)
        release_holder(q);
    return rc;
}

int64_t qf__fifo_size(const qf_queue *q)
{
    qf_queue *mq = (qf_queue *)q;
    int64_t n = qf__ring_size(&mq->ring);
    n -= atomic_load_explicit(&mq->tomb_n, memory_order_relaxed);
    if (n < 0)
        n = 0; /* a tombstone counted before its slot was published */
    n += atomic_load_explicit(&mq->stash_n, memory_order_relaxed);
    n += atomic_load_explicit(&mq->overflow_n, memory_order_relaxed);
    return n;
}

qf_code qf__fifo_close(qf_queue *q, bool cancel)
{
    uint64_t bits = QF__CLOSED | (cancel ? QF__CANCELLED : 0);
    uint64_t old = atomic_fetch_or_explicit(&q->state, bits, memory_order_seq_cst);
    if (!cancel && (old & QF__CLOSED))
        return qf_set_error(QF_CANCELLED, "Queue '%s' is already closed.", q->name);
    /* Everyone re-checks: blocked consumers may now be at end-of-data,
     * cancelled producers must fail, poll-mode producers are refused. */
    qf_waitlist_wake(&q->enq_waiters, INT32_MAX);
    qf_waitlist_wake(&q->deq_waiters, INT32_MAX);
    return QF_OK;
}

bool qf__fifo_cancel_poll(qf_queue *q, qf_waker *w)
{
    (void)q;
    /* A wake that came and is now abandoned is passed on (qf_waker.c). */
    return qf_waker_withdraw(w);
}

void qf__fifo_drain_all(qf_queue *q, void (*release)(qf_queue *q, void *slot))
{
    void *buf[64];
    size_t k;
    while ((k = qf__deque_pop_front(&q->stash, buf, 64)) > 0)
        for (size_t i = 0; i < k; i++)
            release(q, buf[i]);
    while ((k = qf__ring_take(&q->ring, buf, 64, true)) > 0)
        for (size_t i = 0; i < k; i++)
            if (buf[i] != TOMBSTONE)
                release(q, buf[i]);
    while ((k = qf__deque_pop_front(&q->overflow, buf, 64)) > 0)
        for (size_t i = 0; i < k; i++)
            release(q, buf[i]);
}

const qf__queue_ops qf__fifo_ops = {
    .put = qf__fifo_put,
    .take = qf__fifo_take,
    .size = qf__fifo_size,
    .close = qf__fifo_close,
    .cancel_poll = qf__fifo_cancel_poll,
    .drain_all = qf__fifo_drain_all,
    .destroy = NULL,
    .give_back = qf__fifo_give_back,
};
