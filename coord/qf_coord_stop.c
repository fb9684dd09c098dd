/* qf_coord_stop.c - the Coordinator's stop word: request, observe, wait
 * for and clear a stop, and the status recorded with it.
 *
 * The stop word. Bit 0 STOP, bit 1 SLEEPERS, bits 2..31 the epoch. The
 * "key" of a stopped epoch is the word without SLEEPERS (epoch | STOP); it
 * always has bit 0 set, so 0 means "never".
 *   - should_stop: one acquire load. It pairs with the seq_cst fetch_or of
 *     the requester, so whatever the requester wrote before (the recorded
 *     status included) is visible once the bit is seen.
 *   - wait_for_stop: sets SLEEPERS with a CAS before sleeping on the exact
 *     value it saw (FUTEX_WAIT compares atomically in the kernel). A stop's
 *     fetch_or returns the old word, so the requester learns from the same
 *     RMW whether anyone sleeps: no waiter count, no Dekker fence, and no
 *     syscall when nobody waits. Sleepers are woken all at once.
 *   - clear_stop: the only writer that changes the epoch, always under the
 *     mutex, with a CAS (SLEEPERS may be set concurrently by a waiter of a
 *     running epoch, but only while STOP is clear, and clear_stop only
 *     advances a stopped epoch, so in practice one CAS succeeds).
 *   A waiter that saw epoch e returns true as soon as the word shows STOP or
 *   another epoch: the stop of e was requested even if cleared since.
 *   Epochs wrap after 2^30 clears; a waiter would have to sleep through
 *   exactly that many stops to be fooled, and every stop wakes it.
 *
 * Recording. A non-signal request takes the mutex around its fetch_or, and
 * the request whose fetch_or flips STOP records its status. So "first
 * reportable status, and only if no stop came before it" is decided by the
 * word itself: a stop from a signal handler (no mutex) that lands first
 * makes the fetch_or see STOP and the status is dropped. A reader that
 * observed STOP and then takes the mutex sees the record: the fetch_or sat
 * inside the recorder's critical section, which therefore precedes the
 * reader's.
 *
 * The stop work a stop triggers (wakers, stop actions) is qf_coord_actions.c's;
 * the wake-ups that are safe in a signal handler are qf_coord_signal.c's.
 */
#include "qf_coordinator.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_coord_state-impl.h"
#include "qf_futex.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"

uint32_t qf__coord_word(const qf_coord *c)
{
    return load_word(c);
}

static bool is_clean(const qf_coord *c, qf_code code)
{
    if (code == QF_OK)
        return true;
    return qf_code_is_valid(code) && (c->clean_mask & (1u << code));
}

bool qf_coord_should_stop(const qf_coord *c)
{
    /* Async-signal-safe: no error is recorded for a NULL coordinator. */
    return c && (load_word(c) & STOP);
}

bool qf_coord_check_stop(qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_check_stop: coordinator (c) is NULL");
        return false;
    }
    uint32_t w = load_word(c);
    if (!(w & STOP))
        return false;
    settle(c, w);
    return true;
}

qf_code qf_coord_request_stop(qf_coord *c, qf_status *st)
{
    qf_code code = qf_status_code(st);
    if (!c) {
        qf_status_free(st); /* always taken */
        return null_coord("qf_coord_request_stop: coordinator (c) is NULL");
    }
    if (!qf_code_is_valid(code)) { /* qf_status_new() never makes one */
        qf_status_free(st);
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_request_stop: st has code %d, not a canonical qf_code",
                            (int)code);
    }
    bool clean = is_clean(c, code);

    pthread_mutex_lock(&c->lock);
    if (!clean && atomic_load_explicit(&c->joined, memory_order_relaxed)) {
        /* spec 121: nobody is left to report it to; hand it back. */
        pthread_mutex_unlock(&c->lock);
        qf_set_error(code, "%s", qf_status_message(st));
        qf_status_free(st);
        return code;
    }
    /* The one RMW that requests the stop. seq_cst: release for
     * should_stop's acquire, and a total order with the event count's
     * fences so a join about to sleep cannot miss it. */
    uint32_t old = atomic_fetch_or_explicit(&c->word, STOP, memory_order_seq_cst);
    if (!(old & STOP)) {
        if (!clean) {
            c->recorded = st; /* spec 109-110: first of the epoch */
            st = NULL;
        }
        /* Under the mutex, like clear_stop's drain: the fd cannot be
         * left readable in the next epoch by this request. */
        qf__coord_fd_signal(atomic_load_explicit(&c->stop_fd, memory_order_acquire));
    } else if (!clean) {
        c->dropped++; /* spec 111 */
    }
    pthread_mutex_unlock(&c->lock);
    qf_status_free(st); /* NULL when recorded */

    if (!(old & STOP))
        qf__coord_wake_sleepers(c, old);
    settle(c, old | STOP);
    return QF_OK;
}

void qf_coord_request_stop_from_signal(qf_coord *c)
{
    if (!c)
        return; /* async-signal-safe: nothing recorded */
    int saved = errno;
    uint32_t old = atomic_fetch_or_explicit(&c->word, STOP, memory_order_seq_cst);
    if (!(old & STOP)) {
        qf__coord_fd_signal(atomic_load_explicit(&c->stop_fd, memory_order_acquire));
        qf__coord_wake_sleepers(c, old);
    }
    errno = saved;
}

/* Drain an eventfd (nonblocking: EAGAIN when it was not readable). */
qf_code qf_coord_report(qf_coord *c, qf_code code)
{
    if (!qf_code_is_valid(code))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_report: code %d is not a canonical qf_code (0..%d); no stop "
                            "was requested",
                            (int)code, QF_CODE_COUNT - 1);
    if (!c)
        return null_coord("qf_coord_report: coordinator (c) is NULL");
    if (code == QF_OK)
        return QF_OK;
    qf_status *st =
        qf_last_code() == code ? qf_last_status() : qf_status_new(code, "%s", qf_code_name(code));
    qf_coord_request_stop(c, st);
    return code;
}

bool qf_coord_wait_for_stop(qf_coord *c, qf_deadline deadline)
{
    if (!c) {
        null_coord("qf_coord_wait_for_stop: coordinator (c) is NULL");
        return false;
    }
    uint32_t w = load_word(c);
    const uint32_t epoch = w >> EPOCH_SHIFT;
    for (;;) {
        if ((w >> EPOCH_SHIFT) != epoch)
            return true; /* stopped, and cleared since */
        if (w & STOP) {
            settle(c, w);
            return true;
        }
        if (deadline != QF_FOREVER && qf_deadline_passed(deadline))
            return false;
        if (qf__in_task()) {
            /* Sleeping here would hold a worker: a task registers a waker
             * (qf_coord_register_waker) instead. */
            qf__blocking_in_task_error_instead(
                "qf_coord_wait_for_stop",
                "check qf_coord_should_stop(), or register a waker with "
                "qf_coord_register_waker() (or watch qf_coord_stop_fd()) and park");
            return false;
        }
        if (!(w & SLEEPERS)) {
            /* Announce the sleep in the word itself, so the requester's
             * fetch_or tells it whether to make the wake syscall. */
            if (!atomic_compare_exchange_weak_explicit(&c->word, &w, w | SLEEPERS,
                                                       memory_order_acquire, memory_order_acquire))
                continue;
            w |= SLEEPERS;
        }
        /* Sleeps only while the word still equals w: a stop between the
         * CAS and the syscall makes it return at once. */
        qf_futex_wait_until(&c->word, w, deadline);
        w = load_word(c);
    }
}

void qf_coord_clear_stop(qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_clear_stop: coordinator (c) is NULL");
        return;
    }
    for (;;) {
        uint32_t w = load_word(c);
        if (w & STOP)
            settle(c, w); /* finish the epoch's stop work first */
        pthread_mutex_lock(&c->lock);
        w = atomic_load_explicit(&c->word, memory_order_acquire);
        if (w & STOP) {
            if (atomic_load_explicit(&c->settled, memory_order_relaxed) != key_of(w)) {
                /* A stop (from a signal) slipped in after our check. */
                pthread_mutex_unlock(&c->lock);
                continue;
            }
            if (qf__coord_own_frames(c) == 0 && c->inflight > 0) {
                /* Actions of this epoch still running elsewhere. From
                 * inside an action we do not wait: two actions clearing
                 * on two threads would wait for each other. */
                c->waiters++;
                pthread_cond_wait(&c->cond, &c->lock);
                c->waiters--;
                pthread_mutex_unlock(&c->lock);
                continue;
            }
            /* Before the epoch advances: a request of the next epoch
             * writes the fd after its fetch_or, so this drain cannot eat
             * it (a request from a signal handler that raced with this
             * clear may still leave the fd readable; documented). */
            qf__coord_fd_drain(atomic_load_explicit(&c->stop_fd, memory_order_acquire));
            uint32_t next = ((w >> EPOCH_SHIFT) + 1) << EPOCH_SHIFT;
            /* acq_rel: the resets below are published by the mutex; the
             * release here orders the epoch change after the stop work
             * for anyone reading the word. */
            while (!atomic_compare_exchange_weak_explicit(&c->word, &w, next, memory_order_acq_rel,
                                                          memory_order_acquire))
                next = ((w >> EPOCH_SHIFT) + 1) << EPOCH_SHIFT;
            atomic_store_explicit(&c->settled, 0, memory_order_relaxed);
        }
        qf_status_free(c->recorded);
        c->recorded = NULL;
        c->dropped = 0;
        atomic_store_explicit(&c->joined, 0, memory_order_release);
        pthread_mutex_unlock(&c->lock);
        return;
    }
}

qf_code qf_coord_raise_requested_exception(qf_coord *c, qf_status **ret_status)
{
    if (!c)
        return null_coord("qf_coord_raise_requested_exception: coordinator (c) is NULL");
    pthread_mutex_lock(&c->lock);
    qf_status *copy = c->recorded ? qf_status_copy(c->recorded) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (!copy)
        return QF_OK;
    qf_code code = qf_set_error(qf_status_code(copy), "%s", qf_status_message(copy));
    if (ret_status)
        *ret_status = copy;
    else
        qf_status_free(copy);
    return code;
}

bool qf_coord_joined(const qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_joined: coordinator (c) is NULL");
        return false;
    }
    return atomic_load_explicit(&((qf_coord *)c)->joined, memory_order_acquire) != 0;
}
