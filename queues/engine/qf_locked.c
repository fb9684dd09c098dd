/* qf_locked.c - the locked engine: RandomShuffleQueue and
 * PriorityQueue storage behind one futex mutex, with the FIFO engine's
 * waiting, close and cancel rules (qf_fifo.c). It works on a qf__locked
 * that the kind embeds in its storage (queues/qf_shuffle_queue.c,
 * qf_priority_queue.c; the operations table is queues/qf_locked_queue.c)
 * and sees coord/ and the engine primitives only.
 *
 * Implementation notes.
 *
 * One lock, tiny critical sections. Every decision (is there room, is
 * there an element to take, is the queue closed and drained, must this
 * call wait) is made with `lock` held on a consistent state, so the subtle
 * single-word encoding of the FIFO engine is not needed. Nothing inside the
 * lock allocates, formats a message or makes a system call: errors are
 * decided inside and reported (qf_set_error) after unlocking; storage grows
 * by allocating outside and swapping inside; wakes are counted inside and
 * delivered outside.
 *
 * Lost wakes. A waiter registers its waker while holding `lock`, after
 * finding under the same lock that it cannot proceed; a notifier changes
 * the state under `lock` and then looks at the wait list (still under the
 * lock) to decide whom to wake. Either the notifier's critical section
 * comes first, and the waiter sees the new state and does not register, or
 * the registration comes first, and the notifier sees it. The lock's
 * acquire/release orders both; no extra fence is needed.
 *
 * Whom to wake. Consumers of the shuffle queue and single-element takes of
 * the priority queue can all use any one more element, so k elements made
 * takeable wake at most k of them (oldest first). A woken waiter that finds
 * nothing left (someone faster took it) simply registers again: an element
 * is never left behind with nobody told about it, because a waiter only
 * registers when nothing is takeable. Whole-batch takes (priority
 * dequeue_many(n > 1)) need n at once; they wait on their own list and the
 * engine remembers the smallest n among them, waking the list only when
 * that many are present. Producers all need one free place; k removals wake
 * at most k of them. close, cancel, and the end of the last pending enqueue
 * after a close wake everyone, since every verdict may have changed.
 *
 * Pending enqueues. As in the FIFO engine, a thread-form enqueue that has
 * to wait becomes "pending": a later plain close lets it finish, and
 * consumers report end-of-data only once no pending enqueue is left (the
 * elements it brings would otherwise be lost to them). A cancelling close
 * fails pending enqueues with "Enqueue operation was cancelled".
 *
 * Refill (spec 28-29). TensorFlow runs waiting enqueues under the queue's
 * lock as part of every dequeue, so a dequeue from a full queue returns
 * with the queue full again while a blocked enqueue has rows left. Here a
 * producer thread that finds the queue full links a request (its stack:
 * the rows left) in the same critical section, then spins on, and sleeps
 * on, the request's state; a take that removed elements inserts the
 * oldest requests' rows into the room before it unlocks, and tells the
 * finished ones after. All under the one lock, so there is no window
 * between a producer's rows going in and its getting in line. A request
 * sleeps only after announcing it (WAITING -> SLEEPING), so finishing one
 * whose owner still spins costs an exchange, not a futex wake. Producer
 * tasks (poll forms) register wakers and re-try, as before.
 *
 * Put-backs. A shuffle dequeue_many cut short (close, deadline, try) puts
 * the elements it held back (spec 74). That may exceed the capacity for a
 * moment (producers may have filled the freed places meanwhile), exactly
 * as in TensorFlow; storage grows if it has to.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_lock-impl.h"
#include "qf_locked-impl.h"
#include "qf_ring-impl.h" /* QF_WIDEN */
#include "qf_spin-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"
#include "qf_task_mark-impl.h"
#include "qf_wake_defer-impl.h"

/* Preallocate storage up to this many entries; beyond, grow on demand. */
#define PREALLOC_MAX 65536u
#define INITIAL_UNBOUNDED 1024u
/* Keys (priorities) are read from elements in chunks of this many, before
 * the lock is taken. */
#define KEY_CHUNK 64u

/* The engine lock: coord's qf__lock() (three-state futex mutex: 0 free, 1 held,
 * 2 held with possible sleepers), but its spin backs off. A critical
 * section here is ~100 ns; a waiter that reads the lock word after every
 * pause keeps taking the lock's cache line from the holder, which then
 * stalls on its own release (at 4P4C on 2 cores the release exchange and
 * the poll loop were 60% of put/take time). Waiting 1, 2, 4 ... 32 pauses
 * between polls (128 in all, ~2.5 us, before sleeping) lets the holder
 * finish, and often take the lock again with its lines still hot:
 * shuffle.tput.p4c4 went from 2.5 M to 5 M items/s, p1c1 from 2.8 M to
 * 6.5 M. */
static inline void engine_lock(qf__locked *L)
{
    qf__lock_backoff(&L->lock); /* 128 pauses in all, backing off as above */
}

static inline void engine_unlock(qf__locked *L)
{
    qf__unlock(&L->lock);
}

/* ------------------------------------------------------------- outcomes */

/* What a critical section decided; acted upon after unlocking. */
typedef enum {
    GO_ON,       /* retry at once (more to do) */
    DONE,        /* finished */
    WAIT,        /* a waker is registered */
    SPIN,        /* spin a little, then retry */
    BLOCK,       /* a thread is to sleep (wait_verdict()) */
    GROW,        /* storage must grow first */
    E_CLOSED,    /* "... is closed." */
    E_CANCELLED, /* "Enqueue operation was cancelled" */
    E_FULL,      /* try form: full */
    E_EMPTY,     /* try form: empty */
    E_RANGE,     /* closed and drained */
    E_TIMEOUT,   /* deadline passed */
    E_IN_TASK,   /* a thread form called from a task */
    E_NOMEM,     /* storage could not grow */
    ENLISTED,    /* a put request is linked: wait for its final state */
} outcome;

/* A producer thread's rows waiting for room (see "Refill" at the top). */
typedef struct qf__locked_req {
    struct qf__locked_req *next, *prev; /* lock; doubly linked: a timed-out
                                         * owner unlinks itself in O(1) */
    struct qf__locked_req *fin_next;    /* a finisher's list, after unlinking */
    void *const *slots;
    size_t n, done;         /* slots[0..done) are in; lock */
    bool linked;            /* lock */
    uint32_t final;         /* the state to store, set when unlinked */
    _Atomic uint32_t state; /* REQ_* */
} lreq;

enum { REQ_WAITING = 0, REQ_SLEEPING = 1, REQ_DONE = 2, REQ_CANCELLED = 3 };

/* Wakes decided under the lock, delivered after it. */
typedef struct {
    size_t deq, enq; /* how many to wake on L's lists (SIZE_MAX: all) */
    bool many;       /* wake every whole-batch waiter */
    lreq *finished;  /* requests unlinked, to be told their final state */
} wakes;

static int clamp_wake(size_t k)
{
    return k > INT32_MAX ? INT32_MAX : (int)k;
}

/* Tell an unlinked request its final state. Its owner may return as soon
 * as it sees it: nothing of it is touched after the exchange but the
 * futex word's address (a wake there at most makes some waiter re-check). */
static void finish_req(lreq *r)
{
    uint32_t final = r->final;
    if (atomic_exchange_explicit(&r->state, final, memory_order_release) == REQ_SLEEPING)
        qf_futex_wake(&r->state, 1);
}

static void deliver(qf__locked *L, const wakes *wk)
{
    for (lreq *r = wk->finished, *next; r; r = next) {
        next = r->fin_next; /* before the final state: the owner may return */
        finish_req(r);
    }
    if (wk->deq)
        qf__waitlist_wake_near(&L->deq_waiters, clamp_wake(wk->deq));
    if (wk->many)
        qf__waitlist_wake_near(&L->many_waiters, INT32_MAX);
    if (wk->enq)
        qf_waitlist_wake(&L->enq_waiters, clamp_wake(wk->enq));
}

static qf_code report(const qf__locked *L, outcome o, size_t requested)
{
    switch (o) {
    case E_CLOSED:
        return qf_set_error(QF_CANCELLED, "%s '%s' is closed.", L->kind_name, L->name);
    case E_CANCELLED:
        return qf__set_error_static(QF_CANCELLED, "Enqueue operation was cancelled");
    case E_FULL:
        return qf__set_error_static(QF_UNAVAILABLE, "queue is full");
    case E_EMPTY:
        return qf__set_error_static(QF_UNAVAILABLE, "queue is empty");
    case E_TIMEOUT:
        return qf__set_error_static(QF_DEADLINE_EXCEEDED, "Timed out waiting for notification");
    case E_RANGE:
        return qf_set_error(QF_OUT_OF_RANGE,
                            "%s '%s' is closed and has insufficient elements (requested %zu, "
                            "current size %lld)",
                            L->kind_name, L->name, requested, (long long)qf__locked_size(L));
    default:
        return qf_set_error(QF_INTERNAL, "%s '%s': unexpected engine state", L->kind_name, L->name);
    }
}

static void oom_abort(const char *what)
{
    fprintf(stderr, "qflow: out of memory %s\n", what);
    abort();
}

/* ------------------------------------------------------ state, with lock */

static size_t floor_now(const qf__locked *L)
{
    QF__ASSERT_HELD(&L->lock);
    /* After close the min_after_dequeue limit no longer applies (spec 67). */
    return L->closed ? 0 : L->floor_open;
}

static void publish(qf__locked *L)
{
    atomic_store_explicit(&L->size_pub, (int64_t)L->n, memory_order_relaxed);
}

/* k elements were added: whom to wake. */
static void note_added(qf__locked *L, size_t k, wakes *wk)
{
    QF__ASSERT_HELD(&L->lock);
    publish(L);
    if (L->deq_flag) {
        if (qf_waitlist_count(&L->deq_waiters) == 0) {
            L->deq_flag = false;
        } else {
            size_t fl = floor_now(L);
            size_t takeable = L->n > fl ? L->n - fl : 0;
            size_t w = k < takeable ? k : takeable;
            wk->deq = wk->deq > SIZE_MAX - w ? SIZE_MAX : wk->deq + w;
        }
    }
    if (L->many_flag && L->n >= L->many_need) {
        /* They re-register (and rebuild many_need) if still unsatisfied. */
        L->many_flag = false;
        L->many_need = SIZE_MAX;
        wk->many = true;
    }
}

/* k elements were removed: whom to wake. */
static void note_removed(qf__locked *L, size_t k, wakes *wk)
{
    QF__ASSERT_HELD(&L->lock);
    publish(L);
    if (L->enq_flag) {
        if (qf_waitlist_count(&L->enq_waiters) == 0) {
            L->enq_flag = false;
        } else if (L->n < L->cap) {
            size_t room = L->cap - L->n;
            wk->enq += k < room ? k : room;
        }
    }
}

static void unlink_head(qf__locked *L, wakes *wk, uint32_t final)
{
    lreq *r = L->req_head;
    L->req_head = r->next;
    if (L->req_head)
        L->req_head->prev = NULL;
    else
        L->req_tail = NULL;
    r->linked = false;
    r->final = final;
    r->fin_next = wk->finished;
    wk->finished = r;
}

/* After a removal: put the oldest waiting producers' rows into the room,
 * before anything else can take it. */
static void serve_requests(qf__locked *L, wakes *wk)
{
    const qf__locked_storage *st = L->st;
    size_t added = 0;
    while (L->req_head && L->n < L->cap && L->n < L->alloc) {
        lreq *r = L->req_head;
        size_t k = r->n - r->done, room = L->cap - L->n, fit = L->alloc - L->n;
        if (k > room)
            k = room;
        if (k > fit)
            k = fit;
        for (size_t i = 0; i < k; i++) {
            void *slot = r->slots[r->done + i];
            st->insert(L, slot, st->key ? st->key(slot) : 0);
        }
        r->done += k;
        added += k;
        if (r->done == r->n)
            unlink_head(L, wk, REQ_DONE);
    }
    if (added)
        note_added(L, added, wk);
}

/* Everyone on the consumer side re-checks (close, last pending gone). */
static void wake_all_consumers(wakes *wk)
{
    wk->deq = SIZE_MAX;
    wk->many = true;
}

/* ------------------------------------------------------------- storage */

/* Make room for at least `target` entries. Allocates with the lock
 * released; swaps the buffers under it (the copy is the only O(n) work
 * ever done under the lock, amortized by doubling). */
static bool grow(qf__locked *L, size_t target)
{
    size_t esz = L->st->entry_size;
    void *nb = malloc(target * esz);
    if (!nb)
        return false;
    void *old = NULL;
    engine_lock(L);
    if (L->alloc < target) {
        memcpy(nb, L->buf, L->n * esz);
        old = L->buf;
        L->buf = nb;
        L->alloc = target;
        nb = NULL;
    }
    engine_unlock(L);
    free(old);
    free(nb);
    return true;
}

static size_t grow_target(const qf__locked *L, size_t need)
{
    size_t t = L->alloc ? L->alloc * 2 : INITIAL_UNBOUNDED;
    return t < L->n + need ? L->n + need : t;
}

/* Return held slots to the queue (ignoring capacity and close, as
 * TensorFlow does) and wake consumers for them; each keeps its ordering key
 * (a priority queue's priority). Lock not held on entry. */
static void put_back(qf__locked *L, void *const *slots, size_t k)
{
    while (k > 0) {
        wakes wk = {0, 0, false, NULL};
        size_t target = 0;
        engine_lock(L);
        size_t fit = L->alloc - L->n;
        size_t m = k < fit ? k : fit;
        for (size_t i = 0; i < m; i++)
            L->st->insert(L, slots[i], L->st->key ? L->st->key(slots[i]) : 0);
        if (m)
            note_added(L, m, &wk);
        if (m < k)
            target = grow_target(L, k - m);
        engine_unlock(L);
        deliver(L, &wk);
        slots += m;
        k -= m;
        if (target && !grow(L, target))
            oom_abort("returning elements to a queue");
    }
}

/* ------------------------------------------------------------- spinning */

/* Spinning pays only while the partner runs on another CPU. With more
 * threads than CPUs (4 producers + 4 consumers on 2 cores) a waiter that
 * spins burns the time slice the partner needs, so, as in the FIFO engine,
 * the budget adapts per queue: a spin that saw its condition come true
 * doubles it (up to spin_ns), one that ran out halves it; at zero, one wait
 * in 64 probes with 1 us so the budget can grow back. Relaxed: a hint. */
static void spin_feedback(qf__locked *L, bool caught)
{
    int32_t b = atomic_load_explicit(&L->spin_dyn, memory_order_relaxed);
    int64_t nb = caught ? (b < 1000 ? 1000 : (int64_t)b * 2) : b / 2;
    if (nb > L->spin_ns)
        nb = L->spin_ns;
    if (nb != b)
        atomic_store_explicit(&L->spin_dyn, (int32_t)nb, memory_order_relaxed);
}

/* Spin until `ready` or the spin budget (measured from the first spin of
 * this wait) is spent. Returns true to retry, false once exhausted. */
typedef bool (*ready_fn)(const qf__locked *L, size_t arg);

static bool spin(qf__locked *L, qf_deadline deadline, int64_t *spin_end, ready_fn ready, size_t arg)
{
    int64_t now = qf_now_ns();
    if (*spin_end == 0) {
        int64_t budget = atomic_load_explicit(&L->spin_dyn, memory_order_relaxed);
        if (budget <= 0) {
            /* Probe in the process-wide windows (qf_spin-impl.h). */
            if (!qf__spin_probe_window(now))
                return false;
            budget = L->spin_ns;
        }
        *spin_end = now + budget;
        if (deadline != QF_FOREVER && deadline < *spin_end)
            *spin_end = deadline; /* then the retry reports the timeout */
    }
    while (now < *spin_end) {
        if (ready(L, arg)) {
            spin_feedback(L, true);
            return true;
        }
        for (int i = 0; i < 32; i++)
            qf__cpu_relax();
        now = qf_now_ns();
    }
    spin_feedback(L, false);
    return false;
}

/* arg: elements that must be present; bit 63 set: the queue was seen open. */
#define SEEN_OPEN ((size_t)1 << (sizeof(size_t) * 8 - 1))

static bool elements_ready(const qf__locked *L, size_t arg)
{
    uint64_t s = atomic_load_explicit(L->state_word, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&((qf__locked *)L)->size_pub, memory_order_relaxed);
    return n >= (int64_t)(arg & ~SEEN_OPEN) || ((arg & SEEN_OPEN) && (s & QF__CLOSED));
}

/* arg: a put request; its final state is stored. */
static bool request_ready(const qf__locked *L, size_t arg)
{
    (void)L;
    return atomic_load_explicit(&((lreq *)arg)->state, memory_order_relaxed) >= REQ_DONE;
}

static bool unlink_request(qf__locked *L, lreq *r)
{
    if (!r->linked)
        return false;
    if (r->prev)
        r->prev->next = r->next;
    else
        L->req_head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        L->req_tail = r->prev;
    r->linked = false;
    return true;
}

/* The owner of a linked request waits for its final state: DONE (every row
 * in), E_CANCELLED, or E_TIMEOUT (taken back off the list). r->done is
 * final on return: stored under the lock before the final state (acquire
 * here), or read under the lock by the owner that unlinked it. */
static outcome wait_request(qf__locked *L, lreq *r, qf_deadline deadline, int64_t *spin_end,
                            bool spun_out)
{
    if (!spun_out)
        spin(L, deadline, spin_end, request_ready, (size_t)r);
    for (;;) {
        uint32_t st = atomic_load_explicit(&r->state, memory_order_acquire);
        if (st == REQ_DONE)
            return DONE;
        if (st == REQ_CANCELLED)
            return E_CANCELLED;
        if (st == REQ_WAITING &&
            !atomic_compare_exchange_strong_explicit(&r->state, &st, REQ_SLEEPING,
                                                     memory_order_acq_rel, memory_order_acquire))
            continue; /* finished meanwhile */
        if (qf_futex_wait_until(&r->state, REQ_SLEEPING, deadline) == QF_DEADLINE_EXCEEDED) {
            engine_lock(L);
            bool mine = unlink_request(L, r);
            engine_unlock(L);
            if (mine)
                return E_TIMEOUT;
            deadline = QF_FOREVER; /* a take or the closer has it: the state comes */
        }
    }
}

/* ------------------------------------------------------------------ init */

qf_code qf__locked_init(qf__locked *L, const qf__locked_storage *st, const qf__locked_config *c)
{
    atomic_init(&L->lock, 0);
    L->closed = L->cancelled = false;
    L->deq_flag = L->enq_flag = L->many_flag = false;
    L->n = 0;
    L->pending = 0;
    L->many_need = SIZE_MAX;
    L->req_head = L->req_tail = NULL;
    atomic_init(&L->size_pub, 0);
    L->st = st;
    L->kind_name = c->kind_name;
    L->name = c->name;
    L->state_word = c->state_word;
    L->cap = (size_t)c->capacity;
    L->floor_open = c->floor_open;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Spinning for a partner only helps when it can run at the same time. */
    L->spin_ns = ncpu > 1 ? c->spin_ns : 0;
    if (L->spin_ns > INT32_MAX)
        L->spin_ns = INT32_MAX;
    atomic_init(&L->spin_dyn, (int32_t)(L->spin_ns > 0 ? L->spin_ns : 0));
    qf_waitlist_init(&L->deq_waiters);
    qf_waitlist_init(&L->enq_waiters);
    qf_waitlist_init(&L->many_waiters);
    L->alloc = L->cap <= PREALLOC_MAX ? L->cap : INITIAL_UNBOUNDED;
    L->buf = malloc(L->alloc * st->entry_size);
    if (!L->buf) {
        L->alloc = 0;
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    }
    return QF_OK;
}

/* --------------------------------------------------------------- waiting */

/* How a thread or task call that cannot finish now goes on (lock held; the
 * try form was answered before). One decision for producers and consumers:
 * a task (poll form) registers its waker (WAIT); a thread first meets its
 * deadline (E_TIMEOUT), then spins if `may_spin` (SPIN), is refused inside
 * a task (E_IN_TASK), or else blocks (BLOCK). A consumer thread spins here
 * before it registers; a producer thread passes false, because it spins
 * once it is in line (wait_request()), where its rows may go in for it. */
static outcome wait_verdict(const qf__wait *w, bool may_spin)
{
    if (w->mode == QF__WAIT_POLL)
        return WAIT;
    if (qf_deadline_passed(w->deadline))
        return E_TIMEOUT;
    if (may_spin)
        return SPIN;
    if (qf__in_task())
        return E_IN_TASK;
    return BLOCK;
}

/* Register the caller's waker on `list` (lock held): a task's own, or for a
 * thread one on its stack (*tw). */
static qf_waker *register_waiter(qf_waitlist *list, const qf__wait *w, qf_waker *tw)
{
    qf_waker *waker = w->waker;
    if (w->mode == QF__WAIT_DEADLINE) {
        qf_waker_init_thread(tw);
        waker = tw;
    }
    qf_waitlist_register(list, waker);
    return waker;
}

/* ------------------------------------------------------------- producers */

/* One enqueue across its rounds of the lock. */
typedef struct put_call {
    void *const *slots;
    size_t n, done;
    const qf__wait *w;
    size_t kbase, kn;
    bool pending;     /* counted in L->pending (a blocked thread form) */
    bool spun_out;    /* no spinning left before sleeping in line */
    int64_t spin_end; /* the spin budget's end (0: not started) */
    size_t target;    /* GROW: the storage to make first */
    lreq req;         /* ENLISTED: in line, on the caller's stack */
    /* Ordering keys of slots[kbase .. kbase + kn), read before the lock.
     * Last, and never zeroed (put_call_init()): written before read. */
    int64_t keys[KEY_CHUNK];
} put_call;

/* Every field but keys[] zeroed, then the call's own: an initializer
 * zeroed keys[] too, 512 bytes a call (a `rep stos` that was 6% of a
 * shuffle queue's put). */
static void put_call_init(put_call *pc, void *const *slots, size_t n, const qf__wait *w,
                          bool spun_out)
{
    memset(pc, 0, offsetof(put_call, keys));
    pc->slots = slots;
    pc->n = n;
    pc->w = w;
    pc->spun_out = spun_out;
}

/* The next chunk of keys, before the lock is taken. */
static void put_read_keys(const qf__locked *L, put_call *pc)
{
    if (!L->st->key || pc->done < pc->kbase + pc->kn)
        return;
    pc->kbase = pc->done;
    pc->kn = pc->n - pc->done < KEY_CHUNK ? pc->n - pc->done : KEY_CHUNK;
    for (size_t i = 0; i < pc->kn; i++)
        pc->keys[i] = L->st->key(pc->slots[pc->kbase + i]);
}

/* Insert what fits now (lock held): the room, the current key chunk and the
 * storage allow; sets pc->target when the storage must grow first. */
static void put_insert(qf__locked *L, put_call *pc, wakes *wk)
{
    const qf__locked_storage *st = L->st;
    size_t rem = pc->n - pc->done;
    size_t room = L->n < L->cap ? L->cap - L->n : 0;
    size_t k = rem < room ? rem : room;
    if (st->key && k > pc->kbase + pc->kn - pc->done)
        k = pc->kbase + pc->kn - pc->done;
    size_t fit = L->alloc - L->n;
    if (k > fit) {
        k = fit;
        if (k == 0)
            pc->target = grow_target(L, rem < room ? rem : room);
    }
    for (size_t i = 0; i < k; i++)
        st->insert(L, pc->slots[pc->done + i], st->key ? pc->keys[pc->done + i - pc->kbase] : 0);
    if (k) {
        pc->done += k;
        note_added(L, k, wk);
        pc->spin_end = 0;
        pc->spun_out = L->spin_ns <= 0;
    }
}

/* The queue is full with rows left (lock held): get in line, or register,
 * or fail. */
static outcome put_wait(qf__locked *L, put_call *pc)
{
    if (pc->w->mode == QF__WAIT_DEADLINE && !pc->pending) {
        /* From here on a plain close lets this enqueue finish, and
         * consumers wait for it before reporting the end. */
        pc->pending = true;
        L->pending++;
    }
    outcome o = wait_verdict(pc->w, false);
    if (o == BLOCK) {
        /* In line in this critical section, behind any other waiting
         * producer: the rows left go in as takes make room (see "Refill"
         * at the top). */
        pc->req = (lreq){
            .slots = pc->slots, .n = pc->n, .done = pc->done, .linked = true, .prev = L->req_tail};
        atomic_init(&pc->req.state, REQ_WAITING);
        if (L->req_tail)
            L->req_tail->next = &pc->req;
        else
            L->req_head = &pc->req;
        L->req_tail = &pc->req;
        return ENLISTED;
    }
    if (o == WAIT) {
        register_waiter(&L->enq_waiters, pc->w, NULL); /* a task's waker */
        L->enq_flag = true;
    }
    return o;
}

/* One round under the lock: refuse, put what fits, decide what next. */
static outcome put_locked(qf__locked *L, put_call *pc, wakes *wk)
{
    size_t rem = pc->n - pc->done;
    size_t room = L->n < L->cap ? L->cap - L->n : 0;
    if (L->cancelled)
        return pc->pending ? E_CANCELLED : E_CLOSED;
    if (L->closed && !pc->pending)
        return E_CLOSED;
    if (pc->w->mode == QF__WAIT_TRY && rem > 1 && room < rem)
        return E_FULL; /* the try form of enqueue_many is all or nothing */
    put_insert(L, pc, wk);
    if (pc->target)
        return GROW;
    if (pc->done == pc->n)
        return DONE;
    if (L->n < L->cap)
        return GO_ON; /* stopped at the end of a key chunk */
    if (pc->w->mode == QF__WAIT_TRY)
        return E_FULL;
    return put_wait(L, pc);
}

/* The enqueue has ended: it is no longer pending. */
static void put_end_pending(qf__locked *L)
{
    wakes wk = {0, 0, false, NULL};
    engine_lock(L);
    L->pending--;
    /* The last enqueue that outlived a plain close has finished: consumers
     * waiting on a closed queue may now be at the end. */
    if (L->closed && L->pending == 0 && (L->deq_flag || L->many_flag))
        wake_all_consumers(&wk);
    engine_unlock(L);
    deliver(L, &wk);
}

qf_code qf__locked_put(qf__locked *L, void *const *slots, size_t n, const qf__wait *w,
                       size_t *ret_done)
{
    put_call pc;
    put_call_init(&pc, slots, n, w, L->spin_ns <= 0);
    outcome o = DONE;

    while (pc.done < n) {
        put_read_keys(L, &pc);
        wakes wk = {0, 0, false, NULL};
        pc.target = 0;
        engine_lock(L);
        o = put_locked(L, &pc, &wk);
        engine_unlock(L);
        /* Race widening (stress builds): between the state change and the
         * wake, and between registering and sleeping. */
        if (wk.deq || wk.many || o == WAIT || o == ENLISTED)
            QF_WIDEN();
        deliver(L, &wk);

        if (o == ENLISTED) {
            o = wait_request(L, &pc.req, w->deadline, &pc.spin_end, pc.spun_out);
            pc.done = pc.req.done; /* final (see wait_request) */
        } else if (o == GROW && !grow(L, pc.target)) {
            o = E_NOMEM;
        }
        if (o != DONE && o != GO_ON && o != GROW)
            break; /* WAIT: a poll form, registered */
    }

    if (pc.pending)
        put_end_pending(L);
    if (ret_done)
        *ret_done = pc.done;
    if (pc.done == n)
        return QF_OK;
    if (o == WAIT)
        return QF_PENDING; /* poll form */
    if (o == E_IN_TASK)
        return qf__blocking_in_task_error("A blocking enqueue");
    if (o == E_NOMEM)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory growing %s '%s'", L->kind_name,
                            L->name);
    return report(L, o, 0);
}

/* ------------------------------------------------------------- consumers */

/* One dequeue across its rounds of the lock. */
typedef struct take_call {
    size_t min, max;
    bool up_to;
    const qf__wait *w;
    void **slots;
    size_t got;
    /* A shuffle batch that can never be there at once while the queue is
     * open (min + min_after_dequeue > capacity) is gathered as elements
     * arrive (spec 66), and given back if it fails; every other take waits
     * until it can take min at once, so it never holds elements while it
     * waits (nothing to give back: the capacity holds). */
    bool gather;
    bool spun_out;     /* no spinning left before sleeping */
    int64_t spin_end;  /* the spin budget's end (0: not started) */
    size_t need;       /* WAIT, SPIN: elements that must be present */
    bool was_open;     /* the queue was open in the last round */
    qf_waitlist *list; /* WAIT: where the waker is registered */
    qf_waker *waker;
    qf_waker tw; /* a thread's waker */
} take_call;

/* Remove what this take may now (lock held) and say whether it is done,
 * ended, or must wait (then tc->need). */
static outcome take_remove(qf__locked *L, take_call *tc)
{
    size_t fl = floor_now(L);
    size_t takeable = L->n > fl ? L->n - fl : 0;
    bool ended = L->closed && L->pending == 0;
    if (tc->gather) {
        /* One at a time while more than the floor remain (spec 66). */
        while (tc->got < tc->max && L->n > fl)
            tc->slots[tc->got++] = L->st->remove(L);
        if (tc->got >= tc->min)
            return DONE;
        if (ended && L->n == 0)
            return tc->up_to && tc->got > 0 ? DONE : E_RANGE;
        tc->need = fl + 1;
        return WAIT;
    }
    /* Nothing is taken until min can be taken at once (spec 103). */
    size_t take = 0;
    if (takeable >= tc->min)
        take = takeable < tc->max ? takeable : tc->max;
    else if (tc->up_to && ended && L->n > 0)
        take = L->n < tc->max ? L->n : tc->max; /* spec 104: what is left */
    for (size_t i = 0; i < take; i++)
        tc->slots[tc->got++] = L->st->remove(L);
    if (take)
        return DONE;
    if (ended)
        return E_RANGE; /* nothing removed (spec 104) */
    if (tc->w->mode == QF__WAIT_TRY)
        return E_EMPTY;
    tc->need = fl + tc->min;
    return WAIT;
}

/* One round under the lock: take, refill from producers in line, and
 * decide how to wait. */
static outcome take_locked(qf__locked *L, take_call *tc, wakes *wk)
{
    size_t before = tc->got;
    tc->was_open = !L->closed;
    outcome o = take_remove(L, tc);
    if (tc->got > before) {
        serve_requests(L, wk);
        note_removed(L, tc->got - before, wk);
        tc->spin_end = 0;
        tc->spun_out = L->spin_ns <= 0;
    }
    if (o != WAIT)
        return o;
    o = wait_verdict(tc->w, !tc->spun_out);
    if (o != WAIT && o != BLOCK)
        return o;
    if (!tc->gather && tc->min > 1) {
        tc->list = &L->many_waiters;
        L->many_flag = true;
        if (tc->need < L->many_need)
            L->many_need = tc->need;
    } else {
        tc->list = &L->deq_waiters;
        L->deq_flag = true;
    }
    tc->waker = register_waiter(tc->list, tc->w, &tc->tw);
    return WAIT;
}

qf_code qf__locked_take(qf__locked *L, size_t min, size_t max, bool up_to, const qf__wait *w,
                        void **ret_slots, size_t *ret_n)
{
    take_call tc = {.min = min,
                    .max = max,
                    .up_to = up_to,
                    .w = w,
                    .slots = ret_slots,
                    .gather = !L->st->whole_batches && w->mode != QF__WAIT_TRY &&
                              min + L->floor_open > L->cap,
                    .spun_out = L->spin_ns <= 0};
    outcome o;

    for (;;) {
        wakes wk = {0, 0, false, NULL};
        engine_lock(L);
        o = take_locked(L, &tc, &wk);
        engine_unlock(L);
        if (wk.enq || wk.finished || o == WAIT)
            QF_WIDEN();
        deliver(L, &wk);

        if (o == SPIN) {
            tc.spun_out = !spin(L, w->deadline, &tc.spin_end, elements_ready,
                                tc.need | (tc.was_open ? SEEN_OPEN : 0));
            continue;
        }
        if (o != WAIT || w->mode == QF__WAIT_POLL)
            break; /* a poll holds nothing: only gathers hold, never polls */
        if (qf_waker_wait_until(tc.waker, w->deadline) == QF_DEADLINE_EXCEEDED &&
            qf_waitlist_cancel(tc.list, tc.waker)) {
            o = E_TIMEOUT;
            break;
        }
    }

    if (o == DONE) {
        if (ret_n)
            *ret_n = tc.got;
        return QF_OK;
    }
    /* Failed: what this call held goes back (spec 36, 74). */
    put_back(L, ret_slots, tc.got);
    if (o == WAIT)
        return QF_PENDING;
    if (o == E_IN_TASK)
        return qf__blocking_in_task_error("A blocking dequeue");
    return report(L, o, min);
}

/* ------------------------------------------------------- size and close */

int64_t qf__locked_size(const qf__locked *L)
{
    return atomic_load_explicit(&L->size_pub, memory_order_relaxed);
}

qf_code qf__locked_close(qf__locked *L, bool cancel)
{
    engine_lock(L);
    if (!cancel && L->closed) {
        engine_unlock(L);
        return qf_set_error(QF_CANCELLED, "Queue '%s' is already closed.", L->name);
    }
    L->closed = true;
    L->cancelled = L->cancelled || cancel;
    /* For readers outside the lock (qf_queue_is_closed()). */
    atomic_fetch_or_explicit(L->state_word, QF__CLOSED | (cancel ? QF__CANCELLED : 0),
                             memory_order_release);
    /* Cancelled: every producer in line fails (the rows it put in stay). */
    wakes wk = {0, 0, false, NULL};
    while (cancel && L->req_head)
        unlink_head(L, &wk, REQ_CANCELLED);
    engine_unlock(L);
    deliver(L, &wk);
    /* Everyone re-checks: consumers may be at end-of-data (and the shuffle
     * floor is gone), producers may be cancelled or refused. */
    qf_waitlist_wake(&L->enq_waiters, INT32_MAX);
    qf_waitlist_wake(&L->deq_waiters, INT32_MAX);
    qf_waitlist_wake(&L->many_waiters, INT32_MAX);
    return QF_OK;
}

bool qf__locked_cancel_poll(qf__locked *L, qf_waker *w)
{
    qf_waitlist *wl = __atomic_load_n(&w->qf__list, __ATOMIC_RELAXED);
    if (wl == &L->deq_waiters || wl == &L->enq_waiters || wl == &L->many_waiters)
        return qf_waitlist_cancel(wl, w);
    /* Not registered here, or already woken: wait out a wake in progress. */
    return qf_waker_withdraw(w);
}

size_t qf__locked_producers_waiting(qf__locked *L)
{
    size_t n = 0;
    engine_lock(L);
    for (lreq *r = L->req_head; r; r = r->next)
        n++;
    engine_unlock(L);
    return n + qf_waitlist_count(&L->enq_waiters);
}

/* --------------------------------------------------------------- teardown */

void qf__locked_give_back(qf__locked *L, void *const *slots, size_t n)
{
    put_back(L, slots, n);
}

void qf__locked_drain_all(qf__locked *L, qf__release_fn release, void *ctx)
{
    for (size_t i = 0; i < L->n; i++)
        release(ctx, L->st->slot_at(L, i));
    L->n = 0;
    publish(L);
}

void qf__locked_destroy(qf__locked *L)
{
    qf_waitlist_destroy(&L->deq_waiters);
    qf_waitlist_destroy(&L->enq_waiters);
    qf_waitlist_destroy(&L->many_waiters);
    free(L->buf);
    L->buf = NULL;
}
