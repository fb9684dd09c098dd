/* qf_serve_fd.c - completions through a file descriptor, for a model on
 * threads of its own and an event loop that answers (issue 30); and the
 * producers' end of input.
 *
 * Posting and collecting. A post claims its requests (as complete does),
 * links them through qf__next and pushes the chain onto `posted`, a
 * Treiber stack, with one CAS. Only a push that finds the stack empty
 * writes the eventfd. A collect reads the eventfd (resetting it) *before*
 * it takes the stack with one exchange. So no wake is lost: a non-empty
 * stack was made so by a push onto an empty one, whose write comes after
 * the push; a write before the collect's read belongs to a push before the
 * exchange (collected now), a write after it leaves the fd readable (at
 * worst a spurious wake later). The stack comes out newest first; the
 * collect reverses it onto the collectors' own list (head..tail, in post
 * order), takes up to `max` from there under a futex mutex and answers them
 * with the mutex released. What it leaves behind is not under any push, so
 * it writes the eventfd again itself.
 *
 * A post stores the batch's status in each request's qf__status, once the
 * model time is recorded: the collect answers with it.
 */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "qf_lock-impl.h"
#include "qf_serve-impl.h"
#include "qf_status-impl.h"

void qf__serve_fdc_init(qf_serve *s)
{
    atomic_init(&s->fdc.posted, NULL);
    atomic_init(&s->fdc.fd, -1);
    atomic_init(&s->fdc.lock, 0);
    s->fdc.head = s->fdc.tail = NULL;
}

void qf__serve_fdc_free(qf_serve *s)
{
    /* Quiescence (qf_serve_free()): posts nobody collected are answered
     * here rather than left in flight. */
    qf_serve_collect(s, 0, NULL);
    int fd = atomic_load_explicit(&s->fdc.fd, memory_order_acquire);
    if (fd >= 0)
        close(fd);
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    /* EAGAIN: the counter is at its maximum, so the fd is readable anyway. */
    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

qf_code qf_serve_completion_fd(qf_serve *s, int *ret_fd)
{
    if (!s || !ret_fd)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_completion_fd: NULL %s",
                            s ? "ret_fd" : "batcher");
    int fd = atomic_load_explicit(&s->fdc.fd, memory_order_acquire);
    if (fd >= 0) {
        *ret_fd = fd;
        return QF_OK;
    }
    qf__lock(&s->fdc.lock);
    fd = atomic_load_explicit(&s->fdc.fd, memory_order_relaxed);
    if (fd < 0) {
        fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            qf__unlock(&s->fdc.lock);
            return qf_set_error(QF_RESOURCE_EXHAUSTED,
                                "batcher '%s': cannot make a completion fd: eventfd: %s", s->name,
                                strerror(e));
        }
        /* seq_cst, then a write: a post that pushed onto an empty stack
         * before it could see the fd is covered by this wake. */
        atomic_store_explicit(&s->fdc.fd, fd, memory_order_seq_cst);
        signal_fd(fd);
    }
    qf__unlock(&s->fdc.lock);
    *ret_fd = fd;
    return QF_OK;
}

qf_code qf_serve_post_complete(qf_serve *s, qf_serve_request *const *reqs, size_t n, qf_code status)
{
    qf_code rc = qf__serve_claim_batch(s, reqs, n, status, "qf_serve_post_complete");
    if (rc != QF_OK || n == 0)
        return rc;
    qf__serve_model_done(s, reqs, n, qf_now_ns());
    for (size_t i = 0; i < n; i++) {
        atomic_store_explicit(&reqs[i]->qf__status, (int32_t)status, memory_order_relaxed);
        reqs[i]->qf__next = i ? reqs[i - 1] : NULL;
    }
    /* Newest on top: reqs[n-1] -> ... -> reqs[0] -> what was there. */
    qf_serve_request *old = atomic_load_explicit(&s->fdc.posted, memory_order_relaxed);
    do
        reqs[0]->qf__next = old;
    while (!atomic_compare_exchange_weak_explicit(&s->fdc.posted, &old, reqs[n - 1],
                                                  memory_order_seq_cst, memory_order_relaxed));
    if (!old) {
        int fd = atomic_load_explicit(&s->fdc.fd, memory_order_seq_cst);
        if (fd >= 0)
            signal_fd(fd);
    }
    return QF_OK;
}

qf_code qf_serve_collect(qf_serve *s, size_t max, size_t *ret_n)
{
    if (!s)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_collect: NULL batcher");
    int fd = atomic_load_explicit(&s->fdc.fd, memory_order_seq_cst);
    if (fd >= 0) {
        uint64_t v;
        while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
            ;
    }
    qf__lock(&s->fdc.lock);
    qf_serve_request *top = atomic_exchange_explicit(&s->fdc.posted, NULL, memory_order_seq_cst);
    /* Reverse the stack into post order and append it. */
    qf_serve_request *chain = NULL, *last = top;
    while (top) {
        qf_serve_request *next = top->qf__next;
        top->qf__next = chain;
        chain = top;
        top = next;
    }
    if (chain) {
        if (s->fdc.tail)
            s->fdc.tail->qf__next = chain;
        else
            s->fdc.head = chain;
        s->fdc.tail = last;
    }
    qf_serve_request *take = s->fdc.head, *end = NULL;
    size_t n = 0;
    for (qf_serve_request *r = take; r && (max == 0 || n < max); r = r->qf__next) {
        end = r;
        n++;
    }
    if (end) {
        s->fdc.head = end->qf__next;
        if (!s->fdc.head)
            s->fdc.tail = NULL;
        end->qf__next = NULL;
    }
    bool left = s->fdc.head != NULL;
    qf__unlock(&s->fdc.lock);
    if (left && fd >= 0)
        signal_fd(fd);
    uint64_t ok = 0, err = 0;
    int64_t now = n ? qf_now_ns() : 0;
    while (take) {
        qf_serve_request *next = take->qf__next; /* before the answer frees it */
        take->qf__next = NULL;
        qf_code st = (qf_code)atomic_load_explicit(&take->qf__status, memory_order_relaxed);
        if (st == QF_OK)
            ok++;
        else
            err++;
        qf__serve_settle(s, take, st, now);
        take = next;
    }
    qf__serve_settled(s, ok, err);
    if (ret_n)
        *ret_n = (size_t)(ok + err);
    return QF_OK;
}

qf_code qf_serve_end_input(qf_serve *s)
{
    if (!s)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_end_input: NULL batcher");
    /* Before the drain flag: a submit refused by the flag sees this. */
    atomic_store_explicit(&s->input_ended, true, memory_order_seq_cst);
    qf_serve_begin_drain(s, QF_FOREVER);
    return QF_OK;
}
