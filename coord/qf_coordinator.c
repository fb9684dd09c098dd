/* qf_coordinator.c - the Coordinator's lifecycle: qf_coord_new, qf_coord_free.
 *
 * The Coordinator is split by concern:
 *   qf_coord_state-impl.h  the record (struct qf_coord) and what the files share
 *   qf_coord_stop.c        the stop word: request, wait, clear, the recorded status
 *   qf_coord_signal.c      eventfds and the async-signal-safe wake-ups of a stop
 *   qf_coord_actions.c     stop work: stop actions and wakers, once per stopped epoch
 *   qf_coord_members.c     members: tasks, registered threads, thread exit hooks
 *   qf_coord_join.c        join: waiting for the members, laggards, the join report
 * Each file's head comment holds the protocol notes of what it implements.
 */
#include "qf_coordinator.h"

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_coord_state-impl.h"
#include "qf_lock-impl.h"
#include "qf_status-impl.h"

qf_code qf_coord_new(const qf_code *clean_codes, size_t n_clean, qf_coord **ret_c)
{
    if (!ret_c)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_new: ret_c is NULL");
    uint32_t mask = 1u << QF_OUT_OF_RANGE;
    if (clean_codes) {
        mask = 0;
        for (size_t i = 0; i < n_clean; i++) {
            if (!qf_code_is_valid(clean_codes[i]))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "qf_coord_new: clean-stop code %d is not a canonical code",
                                    (int)clean_codes[i]);
            if (clean_codes[i] != QF_OK)
                mask |= 1u << clean_codes[i];
        }
    }
    size_t size = (sizeof(qf_coord) + 63) & ~(size_t)63;
    qf_coord *c = aligned_alloc(64, size);
    if (!c)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_new: out of memory");
    memset(c, 0, sizeof(*c));
    atomic_init(&c->word, 0);
    atomic_init(&c->settled, 0);
    atomic_init(&c->joined, 0);
    atomic_init(&c->done_inflight, 0);
    atomic_init(&c->next_id, 0);
    atomic_init(&c->stop_fd, -1);
    atomic_init(&c->join_fd, -1);
    atomic_init(&c->driven_joins, 0);
    qf_eventcount_init(&c->ec);
    qf_waitlist_init(&c->wakers);
    c->clean_mask = mask;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    *ret_c = c;
    return QF_OK;
}

void qf_coord_free(qf_coord *c)
{
    if (!c)
        return;
    /* A member_done whose store join has seen may still be notifying. */
    for (unsigned i = 0; atomic_load_explicit(&c->done_inflight, memory_order_acquire); i++) {
        if (i < 1000)
            qf__cpu_relax();
        else
            sched_yield();
    }
    for (qf_coord_member *m = c->members_head, *n; m; m = n) {
        n = m->next;
        qf__coord_member_unref(m);
    }
    for (qf_coord_action *a = c->actions_head, *n; a; a = n) {
        n = a->next;
        qf__action_free(a);
    }
    qf_status_free(c->recorded);
    int fd = atomic_load_explicit(&c->stop_fd, memory_order_relaxed);
    if (fd >= 0)
        close(fd);
    fd = atomic_load_explicit(&c->join_fd, memory_order_relaxed);
    if (fd >= 0)
        close(fd);
    qf_waitlist_destroy(&c->wakers);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
