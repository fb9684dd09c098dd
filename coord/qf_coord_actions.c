/* qf_coord_actions.c - the Coordinator's stop work: stop actions and wakers.
 *
 * Stop work: waking the wait list of wakers and running the stop actions,
 * once per stopped epoch. It cannot run in a signal handler, so it is not
 * tied to the request itself: any non-signal call that observes STOP runs
 * it unless `settled` already holds the epoch's key ("a full scan
 * completed"). Several threads may run it for the same epoch at once; each
 * action is claimed under the mutex by writing the key into action->ran,
 * after checking that the word still holds that key. clear_stop advances
 * the epoch under the same mutex, after finishing the stop work itself and
 * after waiting for actions running elsewhere (inflight) to return. Hence:
 *   - an action runs at most once per epoch (the claim), never for an epoch
 *     that has been cleared (the key check under the mutex), never
 *     concurrently with itself across epochs (clear_stop waits);
 *   - at least once per stopped epoch while registered: the stop work is
 *     finished before the epoch can advance (clear_stop settles first), and
 *     an action added while STOP is set claims itself in the same critical
 *     section that links it, so a scan that already passed cannot miss it.
 * Actions run outside the mutex (they may call back into the coordinator);
 * `busy` pins an action's list node meanwhile, so the scan continues from
 * a->next after re-locking, and remove waits for busy == 0. Which thread is
 * running which action is kept on a thread-local stack of frames, so that
 * remove and clear_stop called from inside an action do not wait for
 * themselves.
 *
 * Wakers are woken outside the mutex (a wake function may call back in),
 * after re-checking the key; a clear_stop landing between that check and
 * the wake can wake a waker of the new epoch spuriously, which the waker
 * protocol allows (every waiter re-checks its condition).
 *
 */
#include "qf_coordinator.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "qf_coord_state-impl.h"
#include "qf_lock-impl.h"
#include "qf_status-impl.h"

/* A frame per stop action running on this thread (innermost first). */
struct frame {
    const qf_coord *c;
    const qf_coord_action *a;
    struct frame *prev;
};
static _Thread_local struct frame *tl_frames;

unsigned qf__coord_own_frames(const qf_coord *c)
{
    unsigned n = 0;
    for (struct frame *f = tl_frames; f; f = f->prev)
        n += f->c == c;
    return n;
}

static bool running_here(const qf_coord_action *a)
{
    for (struct frame *f = tl_frames; f; f = f->prev)
        if (f->a == a)
            return true;
    return false;
}

static void action_unlink_locked(qf_coord *c, qf_coord_action *a)
{
    QF__ASSERT_MUTEX_HELD(&c->lock);
    if (a->prev)
        a->prev->next = a->next;
    else
        c->actions_head = a->next;
    if (a->next)
        a->next->prev = a->prev;
    else
        c->actions_tail = a->prev;
}

/* Run a claimed action (busy and inflight already counted) with the mutex
 * released; returns with the mutex held and the action possibly freed. */
static void run_claimed_locked(qf_coord *c, qf_coord_action *a)
{
    QF__ASSERT_MUTEX_HELD(&c->lock);
    struct frame fr = {c, a, tl_frames};
    pthread_mutex_unlock(&c->lock);
    tl_frames = &fr;
    a->fn(a->arg);
    tl_frames = fr.prev;
    pthread_mutex_lock(&c->lock);
    a->busy--;
    c->inflight--;
    if (c->waiters)
        pthread_cond_broadcast(&c->cond);
}

/* ------------------------------------------------------------------------
 * Stop work
 */

void qf__coord_run_stop_work(qf_coord *c, uint32_t key)
{
    /* Wakers first and outside the mutex: their functions may call back
     * into the coordinator. The key check keeps a stale runner from waking
     * the next epoch's wakers, except in the window the header documents. */
    if (key_of(load_word(c)) == key)
        qf_waitlist_wake(&c->wakers, INT32_MAX);
#ifdef QF_RACE_WIDENING
    /* Let the woken retire before the actions run (a retiring queue runner
     * must not withdraw an action this epoch has not run: spec 134). */
    for (int i = 0; i < 20; i++)
        sched_yield();
#endif

    pthread_mutex_lock(&c->lock);
    bool complete = true;
    qf_coord_action *a = c->actions_head;
    while (a) {
        /* Under the mutex the key can only change by clear_stop, which
         * holds it too: a claim made here is for a live stopped epoch. */
        if (key_of(atomic_load_explicit(&c->word, memory_order_acquire)) != key) {
            complete = false;
            break;
        }
        if (a->ran == key || a->removed) {
            a = a->next;
            continue;
        }
        a->ran = key;
        a->busy++;
        c->inflight++;
        run_claimed_locked(c, a);
        /* busy pinned the node, so a->next is the live successor. */
        qf_coord_action *next = a->next;
        if (a->busy == 0 && a->orphan) {
            action_unlink_locked(c, a);
            qf__action_free(a);
        }
        a = next;
    }
    /* Release: pairs with the acquire in settle() (qf_coord_state-impl.h); a thread that skips the
     * work because of this store sees the actions' effects. */
    if (complete && key_of(atomic_load_explicit(&c->word, memory_order_acquire)) == key)
        atomic_store_explicit(&c->settled, key, memory_order_release);
    pthread_mutex_unlock(&c->lock);
}

/* Append the chain first..last (linked through next) to the actions. */
static void actions_append_locked(qf_coord *c, qf_coord_action *first, qf_coord_action *last)
{
    first->prev = c->actions_tail;
    if (c->actions_tail)
        c->actions_tail->next = first;
    else
        c->actions_head = first;
    c->actions_tail = last;
}

qf_code qf_coord_add_stop_action(qf_coord *c, qf_coord_action_fn fn, void *arg,
                                 qf_coord_action **ret_action)
{
    if (!c)
        return null_coord("qf_coord_add_stop_action: coordinator (c) is NULL");
    if (!fn)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_add_stop_action: fn is NULL");
    qf_coord_action *a = qf__action_alloc();
    if (!a)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED,
                                    "qf_coord_add_stop_action: out of memory");
    a->fn = fn;
    a->arg = arg;
    if (ret_action)
        *ret_action = a;

    pthread_mutex_lock(&c->lock);
    actions_append_locked(c, a, a);
    /* Linking and the claim for a stop in effect happen in one critical
     * section: a stop-work scan either finds the action already claimed
     * or has not passed it yet. */
    uint32_t w = atomic_load_explicit(&c->word, memory_order_acquire);
    if (w & STOP) {
        a->ran = key_of(w);
        a->busy++;
        c->inflight++;
        run_claimed_locked(c, a);
        if (a->busy == 0 && a->orphan) {
            action_unlink_locked(c, a);
            qf__action_free(a);
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (w & STOP)
        settle(c, w);
    return QF_OK;
}

static void free_chain(qf_coord_action *a)
{
    while (a) {
        qf_coord_action *next = a->next;
        qf__action_free(a);
        a = next;
    }
}

qf_code qf__coord_add_stop_actions(qf_coord *c, size_t n, qf_coord_action_fn fn, void *const *args,
                                   qf_coord_action **ret_actions)
{
    /* Made first, chained through next (nobody else sees them yet). */
    qf_coord_action *first = NULL, *last = NULL;
    for (size_t i = 0; i < n; i++) {
        qf_coord_action *a = qf__action_alloc();
        if (!a) {
            free_chain(first);
            return qf__set_error_static(QF_RESOURCE_EXHAUSTED,
                                        "qf_coord_add_stop_action: out of memory");
        }
        a->fn = fn;
        a->arg = args[i];
        a->prev = last;
        if (last)
            last->next = a;
        else
            first = a;
        last = a;
    }
    if (!first)
        return QF_OK;
    pthread_mutex_lock(&c->lock);
    if (atomic_load_explicit(&c->word, memory_order_acquire) & STOP) {
        /* Each must claim itself for the stop in effect as it links: the
         * one-at-a-time path does that, and a stop is no time to save. */
        pthread_mutex_unlock(&c->lock);
        free_chain(first);
        qf_code rc = QF_OK;
        for (size_t i = 0; i < n; i++) {
            qf_code one =
                qf_coord_add_stop_action(c, fn, args[i], ret_actions ? &ret_actions[i] : NULL);
            if (rc == QF_OK)
                rc = one;
        }
        return rc;
    }
    actions_append_locked(c, first, last);
    /* Under the lock: once it is dropped, the last one's next is the
     * list's. */
    qf_coord_action *a = first;
    for (size_t i = 0; ret_actions && i < n; i++, a = a->next)
        ret_actions[i] = a;
    pthread_mutex_unlock(&c->lock);
    return QF_OK;
}

void qf_coord_remove_stop_action(qf_coord *c, qf_coord_action *a)
{
    if (!a)
        return;
    if (!c) { /* the record is the coordinator's: leave it to qf_coord_free() */
        null_coord("qf_coord_remove_stop_action: coordinator (c) is NULL");
        return;
    }
    pthread_mutex_lock(&c->lock);
    a->removed = true;
    if (running_here(a)) {
        /* Waiting for busy == 0 would wait for ourselves. */
        a->orphan = true;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    while (a->busy) {
        c->waiters++;
        pthread_cond_wait(&c->cond, &c->lock);
        c->waiters--;
    }
    action_unlink_locked(c, a);
    pthread_mutex_unlock(&c->lock);
    qf__action_free(a);
}

bool qf_coord_register_waker(qf_coord *c, qf_waker *w)
{
    if (!c || !w) {
        null_coord(!c ? "qf_coord_register_waker: coordinator (c) is NULL"
                      : "qf_coord_register_waker: waker (w) is NULL");
        return false;
    }
    /* register ends with a seq_cst fence: this load cannot be satisfied
     * from before the link became visible. Either the stop's wake (which
     * takes the list lock after its fetch_or) finds the waker, or this
     * load sees STOP. */
    qf_waitlist_register(&c->wakers, w);
    uint32_t s = atomic_load_explicit(&c->word, memory_order_seq_cst);
    if (!(s & STOP))
        return true;
    bool withdrawn = qf_waitlist_cancel(&c->wakers, w);
    settle(c, s);
    return !withdrawn;
}

bool qf_coord_cancel_waker(qf_coord *c, qf_waker *w)
{
    if (!c || !w) {
        null_coord(!c ? "qf_coord_cancel_waker: coordinator (c) is NULL"
                      : "qf_coord_cancel_waker: waker (w) is NULL");
        return false;
    }
    return qf_waitlist_cancel(&c->wakers, w);
}
