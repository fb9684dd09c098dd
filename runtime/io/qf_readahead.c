/* qf_readahead.c - one process-wide thread that reads the next chunk of a
 * file while its reader splits the chunk before (see qf_reader-impl.h,
 * "Read-ahead").
 *
 * Why. A reader that yields rows reads a chunk with read(2) (the kernel's
 * copy out of the page cache) and then cuts it into records, one after the
 * other on one thread: on a 200 MiB text file each half is about as long as
 * cat's whole run. With the next read done by another thread, the reader's
 * path is the longer of the two instead of their sum. io/ does not see the
 * scheduler, so the read runs on a thread of its own (like the fd watcher,
 * qf_fdwait.c): one for the process, started by the first request, never
 * more, whatever the number of readers.
 *
 * Protocol. A request (qf__ahead, allocated by qf__ahead_start) moves
 * through the word `state`:
 *
 *   QUEUED    pushed on the stack `pending`; nobody touches dst.
 *   RUNNING   the helper won the CAS QUEUED -> RUNNING: it alone writes dst
 *             and got/err; the requester waits for DONE.
 *   DONE      stored by the helper (release) after dst, got and err; the
 *             requester loads it (acquire), so the bytes the read put in
 *             dst happened before its use of them. The requester frees.
 *   TAKEN     the requester won the CAS QUEUED -> TAKEN: it reads for
 *             itself, dst was never touched, and it has forgotten the
 *             request; the helper frees it when it pops it (its CAS fails).
 *
 * So every request is freed exactly once: by the requester after DONE, by
 * the helper after TAKEN; the helper reads `next` before its CAS, while the
 * request cannot be freed by anyone else. A requester never
 * waits for a request that has not started (it takes it back): a helper
 * busy with another reader's slow read delays nobody but that reader, and
 * no reader can wait on a helper that will never come.
 *
 * Waits. The helper sleeps on the event count `submitted` while the stack
 * is empty; a requester that finds its request RUNNING sleeps on `done`
 * until the state is DONE. Both follow the event count's rule (prepare,
 * re-check, wait; the other side changes the state, then notifies), and the
 * notifies cost no syscall when nobody sleeps. `done` is shared by all
 * requesters, so it is notified to all: after its DONE store the helper
 * must not touch the request, which the requester may already have freed.
 * tests/model/readahead.pml checks the protocol. The re-checks after a
 * prepare are seq_cst loads: the C11 rule that orders them after the
 * notifier's fence asks for it (on x86 and ARMv8 an acquire load would do).
 *
 * fork(). A child has no helper, and its copy of memory may hold a request
 * in any state, even half-written by the parent's helper while the fork
 * copied the pages. So each request carries the fork generation it was
 * made in; the child's fork handler advances the generation, and finishing
 * a request of an older generation never looks at its state: it is freed
 * there and then, and its bytes are not used. The child's next request
 * starts a helper of its own.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_reader-impl.h"
#include "qf_waker.h"

enum { QUEUED = 1, RUNNING, DONE, TAKEN };

struct qf__ahead {
    _Atomic uint32_t state;
    uint32_t generation; /* fork_generation when it was made */
    int fd;
    char *dst;
    size_t n;
    uint64_t off;
    ssize_t got; /* written by the helper before DONE */
    int err;
    struct qf__ahead *next; /* in `pending`, then in the helper's batch */
};

static _Atomic(qf__ahead *) pending;
static _Atomic uint32_t fork_generation; /* advanced in each fork child */
static qf_eventcount submitted;
static qf_eventcount done;

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int started; /* 1: running; -1: could not start (synchronous reads) */
static bool atfork_set;     /* under start_mu */

/* The read itself: one pread(2), restarting on EINTR. */
static void run(qf__ahead *a)
{
    ssize_t got;
    do
        got = pread(a->fd, a->dst, a->n, (off_t)a->off);
    while (got < 0 && errno == EINTR);
    a->got = got;
    a->err = got < 0 ? errno : 0;
}

/* Pop every pending request, oldest first. */
static qf__ahead *take_batch(void)
{
    qf__ahead *p = atomic_exchange_explicit(&pending, NULL, memory_order_acquire), *fifo = NULL;
    while (p) {
        qf__ahead *next = p->next;
        p->next = fifo;
        fifo = p;
        p = next;
    }
    return fifo;
}

static void *helper(void *arg)
{
    (void)arg;
    for (;;) {
        qf__ahead *a = take_batch();
        if (!a) {
            uint32_t t = qf_eventcount_prepare(&submitted);
            if (atomic_load_explicit(&pending, memory_order_seq_cst)) {
                qf_eventcount_cancel(&submitted);
                continue;
            }
            (void)qf_eventcount_wait_until(&submitted, t, QF_FOREVER);
            continue;
        }
        while (a) {
            qf__ahead *next = a->next;
            uint32_t expect = QUEUED;
            if (atomic_compare_exchange_strong_explicit(
                    &a->state, &expect, RUNNING, memory_order_acquire, memory_order_acquire)) {
                run(a);
                atomic_store_explicit(&a->state, DONE, memory_order_release);
                qf_eventcount_notify(&done, true);
            } else {
                free(a); /* TAKEN: its requester read for itself */
            }
            a = next;
        }
    }
    return NULL;
}

/* fork() while another thread holds start_mu would leave the child's copy
 * locked: it is held across the fork. */
static void before_fork(void)
{
    pthread_mutex_lock(&start_mu);
}

static void after_fork_in_parent(void)
{
    pthread_mutex_unlock(&start_mu);
}

/* In a child after fork(): no helper, and the requests made before are
 * finished without a look at their state (see the top). */
static void after_fork_in_child(void)
{
    atomic_fetch_add(&fork_generation, 1);
    atomic_store(&pending, NULL);
    atomic_store(&started, 0);
    pthread_mutex_unlock(&start_mu);
}

/* Start the helper once. Without a thread, or without the fork handlers a
 * child would need, every read stays synchronous. */
static bool ensure_helper(void)
{
    int s = atomic_load_explicit(&started, memory_order_acquire);
    if (s)
        return s > 0;
    pthread_mutex_lock(&start_mu);
    if (!atomic_load_explicit(&started, memory_order_relaxed)) {
        if (!atfork_set)
            atfork_set =
                pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
        int err = atfork_set ? 0 : ENOMEM;
        pthread_t t;
        if (!err) {
            /* The helper takes no signals: a program's handlers run on its
             * own threads. */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&at, 64 * 1024);
            err = pthread_create(&t, &at, helper, NULL);
            pthread_attr_destroy(&at);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (!err)
                pthread_setname_np(t, "qf-readahead");
        }
        atomic_store_explicit(&started, err ? -1 : 1, memory_order_release);
    }
    s = atomic_load_explicit(&started, memory_order_relaxed);
    pthread_mutex_unlock(&start_mu);
    return s > 0;
}

bool qf__ahead_enabled(void)
{
    static _Atomic int enabled; /* 0: not looked up; 1 on; -1 off */
    int e = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (!e) {
        const char *env = getenv("QF_READAHEAD");
        e = env && strcmp(env, "0") == 0 ? -1 : 1;
        atomic_store_explicit(&enabled, e, memory_order_relaxed);
    }
    return e > 0;
}

qf__ahead *qf__ahead_start(int fd, char *dst, size_t n, uint64_t off)
{
    if (off > (uint64_t)INT64_MAX || !ensure_helper())
        return NULL;
    qf__ahead *a = malloc(sizeof(*a));
    if (!a)
        return NULL;
    *a = (qf__ahead){.generation = atomic_load_explicit(&fork_generation, memory_order_relaxed),
                     .fd = fd,
                     .dst = dst,
                     .n = n,
                     .off = off};
    atomic_init(&a->state, QUEUED);
    qf__ahead *head = atomic_load_explicit(&pending, memory_order_relaxed);
    do
        a->next = head;
    while (!atomic_compare_exchange_weak_explicit(&pending, &head, a, memory_order_release,
                                                  memory_order_relaxed));
    qf_eventcount_notify(&submitted, false);
    return a;
}

bool qf__ahead_finish(qf__ahead *a, ssize_t *ret_got, int *ret_err)
{
    if (a->generation != atomic_load_explicit(&fork_generation, memory_order_relaxed)) {
        free(a); /* made before a fork, in the parent: no helper here */
        return false;
    }
    uint32_t s = QUEUED;
    /* Release: the helper's failed CAS (acquire) then frees the request
     * after this last access to it. */
    if (atomic_compare_exchange_strong_explicit(&a->state, &s, TAKEN, memory_order_acq_rel,
                                                memory_order_acquire))
        return false; /* not started: the helper frees it */
    while (s == RUNNING) {
        uint32_t t = qf_eventcount_prepare(&done);
        s = atomic_load_explicit(&a->state, memory_order_seq_cst);
        if (s != RUNNING) {
            qf_eventcount_cancel(&done);
            break;
        }
        (void)qf_eventcount_wait_until(&done, t, QF_FOREVER);
        s = atomic_load_explicit(&a->state, memory_order_acquire);
    }
    /* DONE: only the requester stores TAKEN, and only from QUEUED. */
    *ret_got = a->got;
    *ret_err = a->err;
    free(a);
    return true;
}
