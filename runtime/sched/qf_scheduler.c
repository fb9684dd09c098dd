/* qf_scheduler.c - the worker pool: run queues, stealing, sleeping, timers,
 * host-driven mode and shutdown.
 *
 * Implementation notes.
 *
 * Where a runnable task goes: a task made runnable on a worker thread of
 * its own runtime goes to that worker's next slot (the previous occupant
 * moves to the local ring); anything else goes to the injection stack. The
 * next slot is taken at most a few times in a row so that two tasks waking
 * each other cannot starve the rest of the local ring, and every 61st pick
 * looks at the injection stack first so outside wakes are not starved by a
 * busy local ring.
 *
 * Sleeping: a worker that finds nothing prepares the idle event count,
 * looks once more everywhere, then sleeps until notified or until the
 * earliest timer. Every push to a shared place (ring, injection stack)
 * notifies the event count afterwards; the notify is a fence and a load
 * unless someone sleeps. That pair is the usual event-count protocol, so a
 * push cannot slip between a worker's last look and its sleep.
 *
 * ck_ring and ck_stack synchronise with inline assembly that
 * ThreadSanitizer cannot see; each hand-off of a task pointer is announced
 * to TSan with a release before the push and an acquire after the pop.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "qf_lock-impl.h"
#include "qf_runtime-impl.h"
#include "qf_tsan-impl.h"

#define NEXT_SLOT_STREAK 3
#define INJECT_EVERY 61

CK_STACK_CONTAINER(struct qf_task, inj, task_of_entry)

static _Thread_local qf__worker *tls_worker;
static _Thread_local qf_task *tls_task;

qf__worker *qf__current_worker(void)
{
    return tls_worker;
}

void qf__set_current_task(qf_task *t)
{
    tls_task = t;
}

qf_task *qf_task_current(void)
{
    return tls_task;
}

/* ----------------------------------------------------------- run queues */

/* Push a chain first..last (linked through inj.next) onto the injection
 * stack with one CAS. ck_stack's own push writes the link with a plain
 * store TSan would see racing with the popper's read; ck_pr accesses are
 * invisible to it, and the hand-off is announced with QF_HB_* instead. */
static void inject_chain(qf_runtime *rt, ck_stack_entry_t *first, ck_stack_entry_t *last)
{
    ck_stack_entry_t *head = ck_pr_load_ptr(&rt->inject.head);
    for (;;) {
        ck_pr_store_ptr(&last->next, head);
        if (ck_pr_cas_ptr_value(&rt->inject.head, head, first, &head))
            return;
    }
}

static void push_inject(qf_runtime *rt, qf_task *t)
{
    QF_HB_RELEASE(t);
    inject_chain(rt, &t->inj, &t->inj);
    if (rt->efd >= 0 && atomic_exchange_explicit(&rt->efd_armed, 0, memory_order_acq_rel)) {
        uint64_t one = 1;
        ssize_t r = write(rt->efd, &one, sizeof(one));
        (void)r; /* EAGAIN: the counter is already readable */
    }
    qf_eventcount_notify(&rt->idle, false);
}

void qf__push_local(qf__worker *w, qf_task *t)
{
    QF_HB_RELEASE(t);
    if (!qf__ring_push_sp(&w->ring, t)) {
        push_inject(w->rt, t); /* ring full: let the others have it */
        return;
    }
    qf_eventcount_notify(&w->rt->idle, false);
}

void qf__schedule(qf_task *t)
{
    qf__worker *w = tls_worker;
    if (w && w->rt == t->rt) {
        qf_task *prev = w->next_slot;
        w->next_slot = t;
        if (prev)
            qf__push_local(w, prev);
        return;
    }
    push_inject(t->rt, t);
}

static qf_task *pop_local(qf__worker *w)
{
    void *p;
    if (qf__ring_take(&w->ring, &p, 1, 1, false)) {
        QF_HB_ACQUIRE(p);
        return p;
    }
    return NULL;
}

/* Take the whole injection stack at once; run its oldest task, keep the
 * rest locally (oldest first). */
static qf_task *pop_inject(qf__worker *w)
{
    qf_runtime *rt = w->rt;
    if (ck_pr_load_ptr(&rt->inject.head) == NULL)
        return NULL;
    ck_stack_entry_t *e = ck_stack_batch_pop_upmc(&rt->inject);
    if (!e)
        return NULL;
    ck_stack_entry_t *rev = NULL;
    while (e) { /* the stack is newest first */
        ck_stack_entry_t *n = ck_pr_load_ptr(&e->next);
        QF_HB_ACQUIRE(task_of_entry(e));
        ck_pr_store_ptr(&e->next, rev);
        rev = e;
        e = n;
    }
    qf_task *first = task_of_entry(rev);
    QF_HB_ACQUIRE(first);
    bool pushed = false;
    for (e = ck_pr_load_ptr(&rev->next); e;) {
        qf_task *t = task_of_entry(e);
        /* Read the link before the push: once in the ring the task can be
         * stolen, run, parked and woken onto the injection stack again,
         * which rewrites its link to the stack's head; following that
         * would copy tasks still on the stack into this ring (each then
         * runs twice, the second time possibly after it finished). */
        ck_stack_entry_t *next = ck_pr_load_ptr(&e->next);
        QF_HB_ACQUIRE(t);
        QF_HB_RELEASE(t);
        if (!qf__ring_push_sp(&w->ring, t))
            break;
        pushed = true;
        e = next;
    }
    if (e) {
        /* The ring is full: return the rest to the injection stack in one
         * CAS (re-pushing one at a time would make a large batch cost
         * quadratic time). */
        ck_stack_entry_t *last = e, *n;
        while ((n = ck_pr_load_ptr(&last->next)) != NULL) {
            QF_HB_RELEASE(task_of_entry(last));
            last = n;
        }
        QF_HB_RELEASE(task_of_entry(last));
        inject_chain(rt, e, last);
        pushed = true;
    }
    if (pushed)
        qf_eventcount_notify(&rt->idle, false);
    return first;
}

static qf_task *steal(qf__worker *w)
{
    qf_runtime *rt = w->rt;
    int n = rt->nworkers;
    if (n <= 1)
        return NULL;
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    int start = (int)((w->rng >> 33) % (uint64_t)n);
    for (int i = 0; i < n; i++) {
        qf__worker *v = &rt->workers[(start + i) % n];
        if (v == w)
            continue;
        void *p;
        if (qf__ring_take(&v->ring, &p, 1, 1, false)) {
            QF_HB_ACQUIRE(p);
            return p;
        }
    }
    return NULL;
}

/* ----------------------------------------------------------------- timers */

static void heap_swap(qf_runtime *rt, size_t a, size_t b)
{
    qf_task *t = rt->heap[a];
    rt->heap[a] = rt->heap[b];
    rt->heap[b] = t;
    rt->heap[a]->timer_idx = (int64_t)a;
    rt->heap[b]->timer_idx = (int64_t)b;
}

static void heap_up(qf_runtime *rt, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (rt->heap[p]->timer_at <= rt->heap[i]->timer_at)
            break;
        heap_swap(rt, i, p);
        i = p;
    }
}

static void heap_down(qf_runtime *rt, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < rt->heap_n && rt->heap[l]->timer_at < rt->heap[m]->timer_at)
            m = l;
        if (r < rt->heap_n && rt->heap[r]->timer_at < rt->heap[m]->timer_at)
            m = r;
        if (m == i)
            return;
        heap_swap(rt, i, m);
        i = m;
    }
}

static void heap_remove(qf_runtime *rt, qf_task *t)
{
    size_t i = (size_t)t->timer_idx;
    rt->heap_n--;
    if (i != rt->heap_n) {
        rt->heap[i] = rt->heap[rt->heap_n];
        rt->heap[i]->timer_idx = (int64_t)i;
        heap_down(rt, i);
        heap_up(rt, i);
    }
    t->timer_idx = -1;
}

static void publish_next_timer(qf_runtime *rt)
{
    atomic_store_explicit(&rt->next_timer, rt->heap_n ? rt->heap[0]->timer_at : QF_FOREVER,
                          memory_order_release);
}

void qf_task_sleep_until(qf_task *t, qf_deadline deadline)
{
    qf_runtime *rt = t->rt;
    bool earliest = false;
    qf__lock(&rt->timer_lock);
    if (t->timer_idx >= 0)
        heap_remove(rt, t);
    t->timer_at = deadline;
    if (deadline != QF_FOREVER) {
        if (rt->heap_n == rt->heap_cap) {
            size_t nc = rt->heap_cap ? rt->heap_cap * 2 : 64;
            qf_task **nh = realloc(rt->heap, nc * sizeof(*nh));
            if (!nh) {
                qf__unlock(&rt->timer_lock);
                /* Cannot arm: wake now rather than sleep forever. */
                qf_task_wake(t);
                return;
            }
            rt->heap = nh;
            rt->heap_cap = nc;
        }
        t->timer_idx = (int64_t)rt->heap_n;
        rt->heap[rt->heap_n++] = t;
        heap_up(rt, (size_t)t->timer_idx);
        earliest = t->timer_idx == 0;
    }
    publish_next_timer(rt);
    qf__unlock(&rt->timer_lock);
    if (earliest) {
        /* Sleepers computed their deadline from the old earliest timer. */
        qf_eventcount_notify(&rt->idle, true);
        if (rt->efd >= 0 && atomic_exchange_explicit(&rt->efd_armed, 0, memory_order_acq_rel)) {
            uint64_t one = 1;
            ssize_t r = write(rt->efd, &one, sizeof(one));
            (void)r;
        }
    }
}

void qf__timer_disarm(qf_task *t)
{
    qf_runtime *rt = t->rt;
    qf__lock(&rt->timer_lock);
    if (t->timer_idx >= 0) {
        heap_remove(rt, t);
        publish_next_timer(rt);
    }
    qf__unlock(&rt->timer_lock);
}

static void fire_timers(qf_runtime *rt)
{
    int64_t next = atomic_load_explicit(&rt->next_timer, memory_order_acquire);
    if (next == QF_FOREVER || next > qf_now_ns())
        return;
    qf_task *due[32];
    size_t n;
    do {
        n = 0;
        int64_t now = qf_now_ns();
        qf__lock(&rt->timer_lock);
        while (n < 32 && rt->heap_n && rt->heap[0]->timer_at <= now) {
            qf_task *t = rt->heap[0];
            heap_remove(rt, t);
            t->timer_at = QF_FOREVER;
            due[n++] = qf_task_ref(t);
        }
        publish_next_timer(rt);
        qf__unlock(&rt->timer_lock);
        for (size_t i = 0; i < n; i++) {
            qf_task_wake(due[i]);
            qf__task_unref(due[i]);
        }
    } while (n == 32);
}

qf_deadline qf_runtime_next_deadline(qf_runtime *rt)
{
    return atomic_load_explicit(&rt->next_timer, memory_order_acquire);
}

/* ------------------------------------------------------------ worker loop */

static qf_task *find_task(qf__worker *w)
{
    qf_task *t;
    fire_timers(w->rt);
    if (++w->tick % INJECT_EVERY == 0 && (t = pop_inject(w)))
        return t;
    if (w->next_slot && w->next_streak < NEXT_SLOT_STREAK) {
        t = w->next_slot;
        w->next_slot = NULL;
        w->next_streak++;
        return t;
    }
    w->next_streak = 0;
    if (w->next_slot) {
        /* Streak used up: the slot's task waits behind the ring. */
        qf__push_local(w, w->next_slot);
        w->next_slot = NULL;
    }
    if ((t = pop_local(w)) || (t = pop_inject(w)) || (t = steal(w)))
        return t;
    return NULL;
}

static bool work_visible(qf_runtime *rt)
{
    if (ck_pr_load_ptr(&rt->inject.head) != NULL)
        return true;
    int n = rt->nworkers ? rt->nworkers : 1;
    for (int i = 0; i < n; i++)
        if (qf__ring_size(&rt->workers[i].ring) != 0)
            return true;
    int64_t next = atomic_load_explicit(&rt->next_timer, memory_order_acquire);
    return next != QF_FOREVER && next <= qf_now_ns();
}

/* Sleep until something may be runnable or `deadline`. */
static void idle_wait(qf_runtime *rt, qf_deadline deadline)
{
    uint32_t ticket = qf_eventcount_prepare(&rt->idle);
    if (work_visible(rt) || atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
        qf_eventcount_cancel(&rt->idle);
        return;
    }
    qf_deadline d = qf_deadline_min(deadline, qf_runtime_next_deadline(rt));
    qf_eventcount_wait(&rt->idle, ticket, d);
}

static void *worker_main(void *arg)
{
    qf__worker *w = arg;
    qf_runtime *rt = w->rt;
    tls_worker = w;
    char tname[16];
    snprintf(tname, sizeof(tname), "%.10s-%d", rt->name, w->index);
    pthread_setname_np(pthread_self(), tname);
    while (!atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
        qf_task *t = find_task(w);
        if (t)
            qf__task_run(w, t);
        else
            idle_wait(rt, QF_FOREVER);
    }
    tls_worker = NULL;
    return NULL;
}

/* --------------------------------------------------------------- lifecycle */

static void worker_init(qf_runtime *rt, qf__worker *w, int index)
{
    w->rt = rt;
    w->index = index;
    w->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(index + 1);
    qf__ring_init(&w->ring, w->buf, QF__LOCAL_RING, QF__LOCAL_RING - 1);
}

qf_code qf_runtime_new(const qf_runtime_options *o, qf_runtime **ret_rt)
{
    if (!ret_rt)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_rt");
    int n = o ? o->workers : -1;
    if (n < 0)
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 0)
        n = 1;
    if (n > 1024)
        return qf_set_error(QF_INVALID_ARGUMENT, "%d workers is more than 1024", n);
    qf_runtime *rt = aligned_alloc(64, (sizeof(*rt) + 63) & ~(size_t)63);
    if (!rt)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a runtime");
    memset(rt, 0, sizeof(*rt));
    rt->nworkers = n;
    rt->name = strdup(o && o->name ? o->name : "qflow");
    int slots = n ? n : 1;
    rt->workers = aligned_alloc(64, ((size_t)slots * sizeof(qf__worker) + 63) & ~(size_t)63);
    if (!rt->name || !rt->workers) {
        free(rt->name);
        free(rt->workers);
        free(rt);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a runtime");
    }
    memset(rt->workers, 0, (size_t)slots * sizeof(qf__worker));
    ck_stack_init(&rt->inject);
    qf_eventcount_init(&rt->idle);
    qf_eventcount_init(&rt->live_ec);
    atomic_init(&rt->accepting, true);
    atomic_init(&rt->next_timer, QF_FOREVER);
    rt->efd = -1;
    for (int i = 0; i < slots; i++)
        worker_init(rt, &rt->workers[i], i);
    if (n == 0) {
        rt->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        atomic_init(&rt->efd_armed, 1);
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&rt->workers[i].thread, NULL, worker_main, &rt->workers[i]) != 0) {
            atomic_store(&rt->stopping, true);
            qf_eventcount_notify(&rt->idle, true);
            for (int j = 0; j < i; j++)
                pthread_join(rt->workers[j].thread, NULL);
            free(rt->workers);
            free(rt->name);
            free(rt);
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "could not start worker thread %d", i);
        }
    }
    *ret_rt = rt;
    return QF_OK;
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static qf_runtime *default_rt;

static void make_default(void)
{
    qf_runtime_options o = {.workers = -1, .name = "qflow"};
    if (qf_runtime_new(&o, &default_rt) != QF_OK)
        default_rt = NULL;
}

qf_runtime *qf_runtime_default(void)
{
    pthread_once(&default_once, make_default);
    return default_rt;
}

int qf_runtime_num_workers(const qf_runtime *rt)
{
    return rt->nworkers;
}

int64_t qf_runtime_num_tasks(const qf_runtime *rt)
{
    return atomic_load_explicit(&((qf_runtime *)rt)->live_n, memory_order_acquire);
}

int qf_runtime_fd(const qf_runtime *rt)
{
    return rt->efd;
}

int64_t qf_runtime_run_once(qf_runtime *rt, qf_deadline deadline)
{
    if (rt->nworkers != 0) {
        qf_set_error(QF_FAILED_PRECONDITION,
                     "qf_runtime_run_once needs a runtime with 0 workers (this one has %d)",
                     rt->nworkers);
        return -1;
    }
    uint32_t expected = 0;
    if (!atomic_compare_exchange_strong(&rt->host_running, &expected, 1)) {
        qf_set_error(QF_FAILED_PRECONDITION, "another thread is inside qf_runtime_run_once");
        return -1;
    }
    qf__worker *w = &rt->workers[0];
    qf__worker *saved = tls_worker;
    tls_worker = w;
    int64_t ran = 0;
    for (int round = 0; round < 2; round++) {
        /* Re-arm the fd before looking, so a wake after our look writes it. */
        uint64_t junk;
        ssize_t r = read(rt->efd, &junk, sizeof(junk));
        (void)r;
        atomic_store_explicit(&rt->efd_armed, 1, memory_order_seq_cst);
        qf_task *t;
        while ((t = find_task(w)) != NULL) {
            qf__task_run(w, t);
            ran++;
        }
        if (ran > 0 || deadline == QF_NO_WAIT || round == 1)
            break;
        idle_wait(rt, deadline);
    }
    tls_worker = saved;
    atomic_store(&rt->host_running, 0);
    return ran;
}

qf_code qf_runtime_shutdown(qf_runtime *rt, qf_deadline deadline)
{
    if (!rt)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL runtime");
    if (qf__in_task())
        return qf__blocking_in_task_error("qf_runtime_shutdown");
    qf__lock(&rt->live_lock);
    atomic_store_explicit(&rt->accepting, false, memory_order_relaxed);
    size_t n = 0;
    for (qf_task *t = rt->live_head; t; t = t->live_next)
        n++;
    qf_task **all = malloc((n ? n : 1) * sizeof(*all));
    size_t k = 0;
    for (qf_task *t = rt->live_head; all && t; t = t->live_next)
        all[k++] = qf_task_ref(t);
    qf__unlock(&rt->live_lock);
    for (size_t i = 0; i < k; i++) {
        /* seq_cst RMW (a full barrier; TSan sees it, unlike a fence): pairs
         * with qf__task_run()'s park and seq_cst re-check of the cancel. */
        atomic_exchange_explicit(&all[i]->cancelled, true, memory_order_seq_cst);
        qf_task_wake(all[i]);
        qf__task_unref(all[i]);
    }
    free(all);
    while (atomic_load_explicit(&rt->live_n, memory_order_acquire) > 0) {
        if (rt->nworkers == 0) {
            if (qf_runtime_run_once(rt, qf_deadline_min(deadline, qf_deadline_in_ns(1000000))) < 0)
                return QF_FAILED_PRECONDITION;
            if (qf_deadline_passed(deadline) &&
                atomic_load_explicit(&rt->live_n, memory_order_acquire) > 0)
                break;
            continue;
        }
        uint32_t ticket = qf_eventcount_prepare(&rt->live_ec);
        if (atomic_load_explicit(&rt->live_n, memory_order_acquire) == 0) {
            qf_eventcount_cancel(&rt->live_ec);
            break;
        }
        if (qf_eventcount_wait(&rt->live_ec, ticket, deadline) == QF_DEADLINE_EXCEEDED)
            break;
    }
    int64_t left = atomic_load_explicit(&rt->live_n, memory_order_acquire);
    if (left > 0)
        return qf_set_error(QF_DEADLINE_EXCEEDED,
                            "Runtime shutdown: %lld tasks still running at the deadline",
                            (long long)left);
    return QF_OK;
}

void qf_runtime_free(qf_runtime *rt)
{
    if (!rt)
        return;
    while (qf_runtime_shutdown(rt, QF_FOREVER) == QF_DEADLINE_EXCEEDED)
        ;
    atomic_store_explicit(&rt->stopping, true, memory_order_release);
    qf_eventcount_notify(&rt->idle, true);
    for (int i = 0; i < rt->nworkers; i++) {
        /* A worker between its last look and its sleep is covered by the
         * event count; keep notifying until each has left. */
        pthread_join(rt->workers[i].thread, NULL);
    }
    if (rt->efd >= 0)
        close(rt->efd);
    free(rt->heap);
    free(rt->workers);
    free(rt->name);
    free(rt);
}
