/* qf_fifo_queue.c - the FIFO engine: reserve, insert, take, wait, close.
 *
 * Everything here moves opaque slots (element pointers or inline values);
 * qf_queue.c wraps it in the element and pointer APIs.
 *
 * Invariants (see the state word in qf_queue-impl.h):
 *   - count is raised before an element becomes visible (reserve before the
 *     ring write, raise before a put-back) and lowered after it was removed,
 *     so count never underflows and ring occupancy <= count;
 *   - a producer's reservation succeeds only when count < capacity, so a
 *     bounded queue's ring (>= capacity slots) can never be full;
 *   - "closed and drained" is CLOSED && count == 0 && pending == 0 in one
 *     snapshot: nothing is in the queue, nothing is being inserted, and no
 *     enqueue that began before a plain close is still waiting.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "qf_queue-impl.h"
#include "qf_status.h"

/* Largest number of rows one reservation asks for, so that transient
 * over-reservations can never carry count into the flag bits. */
#define MAX_RESERVE 65536u
/* Spins while an element is reserved but not yet published, before
 * yielding the CPU to the (probably preempted) producer. */
#define INFLIGHT_SPINS 64

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

/* ----------------------------------------------------------------- waking */

static void wake_consumers(qf_queue *q, uint64_t seen, size_t k)
{
    if ((seen & QF__DEQ_WAIT) && qf_waitlist_count(&q->deq_waiters) != 0)
        qf_waitlist_wake(&q->deq_waiters, k > INT32_MAX ? INT32_MAX : (int)k);
}

/* Lower count by k (elements taken, or a reservation undone) and wake as
 * many blocked producers as the freed room allows. Only a decrement that
 * takes count below capacity wakes anyone: an undo by a producer that
 * found the queue full must not wake another producer, or full-queue
 * producers would wake each other forever. */
static void release_count(qf_queue *q, size_t k)
{
    uint64_t old = atomic_fetch_sub_explicit(&q->state, k, memory_order_acq_rel);
    if (!(old & QF__ENQ_WAIT))
        return;
    uint64_t now = qf__count(old) - k;
    if (now < (uint64_t)q->capacity && qf_waitlist_count(&q->enq_waiters) != 0) {
        uint64_t room = (uint64_t)q->capacity - now;
        size_t n = room < k ? (size_t)room : k;
        qf_waitlist_wake(&q->enq_waiters, n > INT32_MAX ? INT32_MAX : (int)n);
    }
}

static void drop_pending(qf_queue *q)
{
    uint64_t old = atomic_fetch_sub_explicit(&q->state, QF__PENDING_ONE, memory_order_acq_rel);
    /* The last enqueue that outlived a plain close has finished: consumers
     * waiting on an empty closed queue can now be told it is drained. */
    if ((old & QF__CLOSED) && qf__pending(old) == 1)
        wake_consumers(q, old | QF__DEQ_WAIT, INT32_MAX);
}

/* -------------------------------------------------------------- spinning */

static int64_t spin_budget(const qf_queue *q)
{
    static int ncpu;
    if (ncpu == 0)
        ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* Spinning for a partner only helps when it can run at the same time. */
    return ncpu > 1 ? q->spin_ns : 0;
}

/* Spin a little; false once the spin budget (started at *spin_end) is
 * spent. */
static bool spin_once(const qf_queue *q, int64_t *spin_end)
{
    int64_t budget = spin_budget(q);
    if (budget <= 0)
        return false;
    int64_t now = qf_now_ns();
    if (*spin_end == 0)
        *spin_end = now + budget;
    if (now >= *spin_end)
        return false;
    for (int i = 0; i < 32; i++)
        qf__cpu_relax();
    return true;
}

static void inflight_pause(unsigned *spins)
{
    if (++*spins < INFLIGHT_SPINS)
        qf__cpu_relax();
    else
        sched_yield();
}

/* ------------------------------------------------------------- producers */

typedef enum { RES_OK, RES_FULL, RES_CLOSED, RES_CANCELLED } reserve_result;

/* Reserve room for up to `want` elements; *ret_k gets how many (>= 1). */
static reserve_result reserve(qf_queue *q, size_t want, bool pending, size_t *ret_k,
                              uint64_t *ret_seen)
{
    if (want > MAX_RESERVE)
        want = MAX_RESERVE;
    uint64_t old = atomic_fetch_add_explicit(&q->state, want, memory_order_acq_rel);
    *ret_seen = old;
    uint64_t c = qf__count(old);
    if (old & QF__CANCELLED) {
        release_count(q, want);
        return RES_CANCELLED;
    }
    if ((old & QF__CLOSED) && !pending) {
        release_count(q, want);
        return RES_CLOSED;
    }
    if (c >= (uint64_t)q->capacity) {
        release_count(q, want);
        return RES_FULL;
    }
    uint64_t room = (uint64_t)q->capacity - c;
    size_t k = room < want ? (size_t)room : want;
    if (k < want)
        release_count(q, want - k);
    *ret_k = k;
    return RES_OK;
}

static size_t ring_put(qf_queue *q, void *const *slots, size_t k)
{
    return q->single_producer ? qf__ring_enqueue_sp(&q->ring, slots, k)
                              : qf__ring_enqueue_mp(&q->ring, slots, k);
}

static void oom_abort(const char *what)
{
    fprintf(stderr, "qflow: out of memory %s\n", what);
    abort();
}

/* Make k reserved elements visible. */
static void insert(qf_queue *q, void *const *slots, size_t k)
{
    size_t done = 0;
    if (!q->unbounded) {
        /* Cannot fail for long: the reservation guarantees ring room; a
         * short miss is a consumer between its CAS and its count release. */
        while (done < k) {
            size_t r = ring_put(q, slots + done, k - done);
            if (r == 0)
                qf__cpu_relax();
            done += r;
        }
        return;
    }
    /* Unbounded: the ring first, the overflow list when it is full. Once
     * anything sits in overflow, later elements go there too, so the ring
     * only ever holds elements older than the overflow's (FIFO holds). */
    if (atomic_load_explicit(&q->overflow_n, memory_order_acquire) == 0)
        done = ring_put(q, slots, k);
    if (done == k)
        return;
    qf__lock(&q->side_lock);
    while (done < k) {
        if (q->overflow.len == 0) {
            size_t r = ring_put(q, slots + done, k - done);
            done += r;
            if (done == k)
                break;
        }
        if (!qf__deque_push_back(&q->overflow, slots[done]))
            oom_abort("growing an unbounded queue");
        atomic_fetch_add_explicit(&q->overflow_n, 1, memory_order_release);
        done++;
    }
    qf__unlock(&q->side_lock);
}

static qf_code wait_room(qf_queue *q, const qf__wait *w, bool *pending, int64_t *spin_end)
{
    if (w->mode == QF__WAIT_TRY)
        return qf__set_error_static(QF_UNAVAILABLE, "queue is full");
    if (w->mode == QF__WAIT_DEADLINE && !*pending) {
        /* From here on this enqueue is "pending": a plain close lets it
         * finish, and consumers wait for it before reporting end-of-data. */
        uint64_t old = atomic_fetch_add_explicit(&q->state, QF__PENDING_ONE, memory_order_acq_rel);
        if (old & (QF__CLOSED | QF__CANCELLED)) {
            drop_pending(q);
            return (old & QF__CANCELLED) ? err_enqueue_cancelled() : err_closed(q);
        }
        *pending = true;
    }
    if (w->mode == QF__WAIT_DEADLINE && qf_deadline_passed(w->deadline))
        return err_timeout();
    if (w->mode == QF__WAIT_DEADLINE && spin_once(q, spin_end))
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
    bool closed_for_us = (old & QF__CANCELLED) || ((old & QF__CLOSED) && !*pending);
    if (qf__count(old) < (uint64_t)q->capacity || closed_for_us) {
        qf_waitlist_cancel(&q->enq_waiters, wk);
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
    int64_t spin_end = 0;
    qf_code rc = QF_OK;

    if (w->mode == QF__WAIT_TRY && n > 1) {
        /* all or nothing */
        uint64_t old = atomic_load_explicit(&q->state, memory_order_relaxed);
        if (qf__count(old) + n > (uint64_t)q->capacity && !(old & (QF__CLOSED))) {
            if (ret_done)
                *ret_done = 0;
            return qf__set_error_static(QF_UNAVAILABLE, "queue is full");
        }
    }
    while (done < n) {
        size_t k = 0;
        uint64_t seen;
        reserve_result r = reserve(q, n - done, pending, &k, &seen);
        if (r == RES_OK) {
            insert(q, slots + done, k);
            done += k;
            wake_consumers(q, seen, k);
            spin_end = 0;
            continue;
        }
        if (r == RES_CANCELLED) {
            rc = pending ? err_enqueue_cancelled() : err_closed(q);
            break;
        }
        if (r == RES_CLOSED) {
            rc = err_closed(q);
            break;
        }
        rc = wait_room(q, w, &pending, &spin_end);
        if (rc != QF_OK)
            break;
    }
    if (pending)
        drop_pending(q);
    if (ret_done)
        *ret_done = done;
    return done == n ? QF_OK : rc;
}

/* ------------------------------------------------------------- consumers */

static size_t take_some(qf_queue *q, void **out, size_t max)
{
    size_t k = 0;
    if (atomic_load_explicit(&q->stash_n, memory_order_acquire) != 0) {
        qf__lock(&q->side_lock);
        k = qf__deque_pop_front(&q->stash, out, max);
        atomic_fetch_sub_explicit(&q->stash_n, (uint32_t)k, memory_order_relaxed);
        qf__unlock(&q->side_lock);
    }
    if (k < max)
        k += q->single_consumer ? qf__ring_dequeue_sc(&q->ring, out + k, max - k)
                                : qf__ring_dequeue_mc(&q->ring, out + k, max - k);
    if (k < max && q->unbounded && atomic_load_explicit(&q->overflow_n, memory_order_acquire)) {
        qf__lock(&q->side_lock);
        /* The ring may have refilled meanwhile; it holds the older ones. */
        if (q->single_consumer)
            k += qf__ring_dequeue_sc(&q->ring, out + k, max - k);
        else
            k += qf__ring_dequeue_mc(&q->ring, out + k, max - k);
        size_t r = qf__deque_pop_front(&q->overflow, out + k, max - k);
        atomic_fetch_sub_explicit(&q->overflow_n, (uint32_t)r, memory_order_relaxed);
        k += r;
        qf__unlock(&q->side_lock);
    }
    if (k)
        release_count(q, k);
    return k;
}

/* Return taken elements to the front of the queue, in their order. */
static void put_back(qf_queue *q, void *const *slots, size_t n)
{
    if (n == 0)
        return;
    /* Count first, so a consumer that takes them cannot underflow count. */
    uint64_t old = atomic_fetch_add_explicit(&q->state, n, memory_order_acq_rel);
    qf__lock(&q->side_lock);
    if (!qf__deque_push_front(&q->stash, slots, n))
        oom_abort("returning elements to a queue");
    atomic_fetch_add_explicit(&q->stash_n, (uint32_t)n, memory_order_release);
    qf__unlock(&q->side_lock);
    wake_consumers(q, old, n);
}

static bool drained(uint64_t s)
{
    return (s & QF__CLOSED) && qf__count(s) == 0 && qf__pending(s) == 0;
}

qf_code qf__fifo_take(qf_queue *q, size_t n, bool up_to, const qf__wait *w, void **ret_slots,
                      size_t *ret_n)
{
    size_t got = 0;
    int64_t spin_end = 0;
    unsigned inflight = 0;

    for (;;) {
        got += take_some(q, ret_slots + got, n - got);
        if (got == n)
            break;
        uint64_t s = atomic_load_explicit(&q->state, memory_order_acquire);
        if (qf__count(s) > 0 && !(w->mode == QF__WAIT_TRY && inflight >= INFLIGHT_SPINS)) {
            /* Reserved but not yet published, or another consumer won the
             * race for it: the state will move soon. A try gives up after a
             * short while and reports what it saw as empty. */
            inflight_pause(&inflight);
            continue;
        }
        if (drained(s)) {
            if (up_to && got > 0)
                break;
            put_back(q, ret_slots, got);
            return err_insufficient(q, n);
        }
        if (w->mode == QF__WAIT_TRY) {
            if (up_to && got > 0)
                break;
            put_back(q, ret_slots, got);
            return qf__set_error_static(QF_UNAVAILABLE, "queue is empty");
        }
        if (w->mode == QF__WAIT_DEADLINE && qf_deadline_passed(w->deadline)) {
            put_back(q, ret_slots, got);
            return err_timeout();
        }
        if (w->mode == QF__WAIT_DEADLINE && spin_once(q, &spin_end))
            continue;
        qf_waker tw, *wk = w->waker;
        if (w->mode == QF__WAIT_DEADLINE) {
            if (qf__in_task()) {
                put_back(q, ret_slots, got);
                return qf__blocking_in_task_error("A blocking dequeue");
            }
            qf_waker_init_thread(&tw);
            wk = &tw;
        }
        qf_waitlist_register(&q->deq_waiters, wk);
        uint64_t old = atomic_fetch_or_explicit(&q->state, QF__DEQ_WAIT, memory_order_seq_cst);
        if (qf__count(old) > 0 || drained(old)) {
            qf_waitlist_cancel(&q->deq_waiters, wk);
            continue;
        }
        if (w->mode == QF__WAIT_POLL) {
            /* Poll forms take one element, so nothing is held here. */
            put_back(q, ret_slots, got);
            return QF_PENDING;
        }
        if (qf_waker_wait(wk, w->deadline) == QF_DEADLINE_EXCEEDED &&
            qf_waitlist_cancel(&q->deq_waiters, wk)) {
            put_back(q, ret_slots, got);
            return err_timeout();
        }
        inflight = 0;
    }
    if (ret_n)
        *ret_n = got;
    return QF_OK;
}

int64_t qf__fifo_size(const qf_queue *q)
{
    qf_queue *mq = (qf_queue *)q;
    int64_t n = qf__ring_size(&mq->ring);
    n += atomic_load_explicit(&mq->stash_n, memory_order_relaxed);
    n += atomic_load_explicit(&mq->overflow_n, memory_order_relaxed);
    return n;
}

qf_code qf__fifo_close(qf_queue *q, bool cancel)
{
    uint64_t bits = QF__CLOSED | (cancel ? QF__CANCELLED : 0);
    uint64_t old = atomic_fetch_or_explicit(&q->state, bits, memory_order_acq_rel);
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
    qf_waitlist *wl = __atomic_load_n(&w->qf__list, __ATOMIC_RELAXED);
    if (wl == &q->deq_waiters || wl == &q->enq_waiters)
        return qf_waitlist_cancel(wl, w);
    /* Not registered here, or already woken: wait out a wake in progress. */
    return qf_waker_withdraw(w);
}

void qf__fifo_drain_all(qf_queue *q, void (*release)(qf_queue *q, void *slot))
{
    void *buf[64];
    size_t k;
    while ((k = qf__deque_pop_front(&q->stash, buf, 64)) > 0)
        for (size_t i = 0; i < k; i++)
            release(q, buf[i]);
    while ((k = qf__ring_dequeue_mc(&q->ring, buf, 64)) > 0)
        for (size_t i = 0; i < k; i++)
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
};
