/* qf_coord_signal.c - the Coordinator's eventfds and the wake-ups of a stop.
 *
 * Two eventfds, each made on first use. stop_fd (qf_coord_stop_fd) is
 * readable while a stop is in effect: request_stop writes it and
 * clear_stop drains it, both under the mutex, so a clear cannot drain the
 * next epoch's write (qf_coord_stop.c). join_fd is written by a stop or a
 * member's end while a driven join sleeps in poll(2) on it
 * (qf_coord_join.c); driven_joins says whether one does.
 *
 * Join sleeps on an event count that member_done, the thread exit hooks and
 * every stop notify; qf_eventcount_notify is lock-free and async-signal-safe,
 * which is what lets a signal-handler stop wake join. Everything here that
 * a stop calls is async-signal-safe for the same reason.
 */
#include "qf_coordinator.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "qf_coord_state-impl.h"
#include "qf_futex.h"
#include "qf_status-impl.h"

/* Make an eventfd readable (async-signal-safe: one write(2); errno kept
 * by the callers that need it). A full counter (EAGAIN) is readable
 * already. */
void qf__coord_fd_signal(int fd)
{
    if (fd < 0)
        return;
    uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof(one));
    (void)r;
}

/* Wake a driven join sleeping in poll(2). seq_cst load: pairs with the
 * driven join's seq_cst increment of driven_joins before its look
 * (driven_begin in qf_coord_join.c), so
 * either the join sees the change or this sees the join. */
void qf__coord_wake_driven_join(qf_coord *c)
{
    if (atomic_load_explicit(&c->driven_joins, memory_order_seq_cst))
        qf__coord_fd_signal(atomic_load_explicit(&c->join_fd, memory_order_acquire));
}

/* The part of a stop that is async-signal-safe: wake the futex sleepers
 * (only if the old word says there are any), a thread in join, and a
 * driven join. */
void qf__coord_wake_sleepers(qf_coord *c, uint32_t old)
{
    if (old & SLEEPERS)
        qf_futex_wake(&c->word, INT32_MAX);
    qf_eventcount_notify(&c->ec, true);
    qf__coord_wake_driven_join(c);
}

/* Drain an eventfd (nonblocking: EAGAIN when it was not readable). */
void qf__coord_fd_drain(int fd)
{
    if (fd < 0)
        return;
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

/* The eventfd in *slot, made on first use. */
int qf__coord_fd_get(_Atomic int *slot)
{
    int fd = atomic_load_explicit(slot, memory_order_acquire);
    if (fd >= 0)
        return fd;
    int nfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (nfd < 0)
        return -1;
    int expected = -1;
    if (!atomic_compare_exchange_strong_explicit(slot, &expected, nfd, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        close(nfd); /* another thread made it first */
        return expected;
    }
    return nfd;
}

qf_code qf_coord_stop_fd(qf_coord *c, int *ret_fd)
{
    if (!c || !ret_fd)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_coord_stop_fd: %s is NULL",
                            c ? "ret_fd" : "the coordinator");
    int fd = atomic_load_explicit(&c->stop_fd, memory_order_acquire);
    if (fd < 0) {
        /* Made under the mutex that request_stop and clear_stop hold
         * around their write and drain, so a stop already in effect is
         * written exactly once and a clear cannot be overtaken. */
        pthread_mutex_lock(&c->lock);
        fd = atomic_load_explicit(&c->stop_fd, memory_order_acquire);
        if (fd < 0) {
            fd = qf__coord_fd_get(&c->stop_fd);
            if (fd >= 0 && (atomic_load_explicit(&c->word, memory_order_seq_cst) & STOP))
                qf__coord_fd_signal(fd);
        }
        pthread_mutex_unlock(&c->lock);
        if (fd < 0)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_coord_stop_fd: eventfd: %s",
                                strerror(errno));
    }
    *ret_fd = fd;
    return QF_OK;
}
