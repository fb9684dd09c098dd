/* qf_fdwait.c - waiting for a non-regular file without blocking a worker.
 *
 * A task whose reader found a pipe empty leaves its waker on the reader's
 * watch (a wait list) and arms the fd, one-shot, in one process-wide epoll
 * instance. One watcher thread, started by the first arm, sleeps in
 * epoll_wait and wakes the watch's list when the fd turns readable or hangs
 * up. io/ does not see the scheduler: the wake goes through coord/'s waker
 * protocol, so the task is woken exactly as a queue would wake it, and a
 * Coordinator stop (or a cancel) takes the waker back with
 * qf_waker_withdraw() like from any list.
 *
 * Lifetime. An event carries the watch's id, never its address: the
 * watcher looks the id up in the list of live watches under `mu`, and
 * disarm unlinks the watch under the same lock after EPOLL_CTL_DEL. So once
 * disarm returns, the watcher can no longer reach the watch, even with an
 * event for it already returned by epoll_wait. Wakes run under `mu`; a wake
 * function never blocks (qf_waker.h), and arm/disarm hold `mu` only around
 * a list update and one epoll_ctl.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "qf_reader-impl.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int epfd = -1;        /* under mu */
static uint64_t next_id = 1; /* under mu */
static qf__fdwatch *live;    /* under mu: armed watches */

void qf__fdwatch_init(qf__fdwatch *w)
{
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    qf_waitlist_init(&w->wl);
}

static void *watcher(void *arg)
{
    int ep = (int)(intptr_t)arg;
    struct epoll_event ev[32];
    for (;;) {
        int n = epoll_wait(ep, ev, 32, -1);
        if (n < 0)
            continue; /* EINTR: signals are blocked here, but be safe */
        pthread_mutex_lock(&mu);
        for (int i = 0; i < n; i++) {
            for (qf__fdwatch *w = live; w; w = w->next) {
                if (w->id == ev[i].data.u64) {
                    (void)qf_waitlist_wake(&w->wl, INT32_MAX);
                    break;
                }
            }
        }
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

/* Under mu. */
static qf_code ensure_watcher(void)
{
    if (epfd >= 0)
        return QF_OK;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "fd watch: epoll_create1: %s", strerror(errno));
    /* The watcher takes no signals: a program's SIGTERM handler must run on
     * its own threads, never on this one. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_t t;
    int err = pthread_create(&t, &at, watcher, (void *)(intptr_t)ep);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        close(ep);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "fd watch: cannot start its thread: %s",
                            strerror(err));
    }
    pthread_setname_np(t, "qf-fdwatch");
    epfd = ep;
    return QF_OK;
}

qf_code qf__fdwatch_arm(qf__fdwatch *w, int fd, qf_waker *waker)
{
    pthread_mutex_lock(&mu);
    qf_code rc = ensure_watcher();
    if (rc != QF_OK) {
        pthread_mutex_unlock(&mu);
        return rc;
    }
    /* Register first: an fd that is already readable fires as soon as it
     * is armed, and the wake must find the waker. */
    qf_waitlist_register(&w->wl, waker);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT};
    int op = EPOLL_CTL_MOD;
    if (w->fd != fd) {
        if (w->fd >= 0)
            (void)epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
        if (!w->id) {
            w->id = next_id++;
            w->prev = NULL;
            w->next = live;
            if (live)
                live->prev = w;
            live = w;
        }
        w->fd = fd;
        op = EPOLL_CTL_ADD;
    }
    ev.data.u64 = w->id;
    if (epoll_ctl(epfd, op, fd, &ev) != 0) {
        /* Not pollable (a regular file slipped through, say): a wake now
         * makes the poll retry, which then reads or fails by itself. */
        (void)qf_waitlist_wake(&w->wl, INT32_MAX);
        w->fd = -1;
    }
    pthread_mutex_unlock(&mu);
    return QF_OK;
}

void qf__fdwatch_disarm(qf__fdwatch *w)
{
    pthread_mutex_lock(&mu);
    if (w->fd >= 0 && epfd >= 0)
        (void)epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->fd = -1;
    if (w->id) {
        if (w->prev)
            w->prev->next = w->next;
        else
            live = w->next;
        if (w->next)
            w->next->prev = w->prev;
        w->id = 0;
        w->prev = w->next = NULL;
    }
    /* Whoever still waits here polls again and finds the file gone. */
    (void)qf_waitlist_wake(&w->wl, INT32_MAX);
    pthread_mutex_unlock(&mu);
}

qf_code qf__fd_wait_readable(int fd, qf_deadline deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline != QF_FOREVER) {
            qf_deadline now = qf_now_ns();
            if (now >= deadline)
                return qf_set_error(QF_DEADLINE_EXCEEDED, "deadline passed waiting for input");
            uint64_t left = (uint64_t)(deadline - now);
            ms = left / 1000000u > INT32_MAX ? INT32_MAX : (int)((left + 999999u) / 1000000u);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return QF_OK;
        if (r < 0 && errno != EINTR)
            return qf_set_error(QF_UNKNOWN, "poll: %s", strerror(errno));
    }
}
