/* qf_scheduler.c - the worker pool: run queues, stealing, sleeping, timers,
 * host-driven mode and shutdown.
 *
 * Implementation notes.
 *
 * Where a runnable task goes. A task made runnable by a task running on a
 * worker of its own runtime goes to that worker's next slot: the pair of
 * a waker and the task it woke runs back to back on one core with no
 * system call, as Go's runnext does. The slot's previous occupant moves
 * to the worker's local ring, for the first QF__NEXT_SLOT_WAKES such moves of
 * one poll; later ones go to the global queue. A poll that wakes more is
 * a distributor (a consumer task serving a line of parked producers, one
 * per element it takes; a close), its worker stays busy with it, and each
 * of its wakes pushed the one before into that worker's ring, from which
 * the other workers stole them back a few at a time; idle workers take
 * the global queue's in batches (perf/runners_regime 10000 2 2000000 1
 * task, two workers, the consumer a task, six runs each in turn: 288-477
 * -> 230-310 ns an element; 1000 runners 270-343 -> 240-317).
 * Anything else goes to the global queue (qf_sched_queue.c), a FIFO. A
 * local ring that is full moves its older half, then the new task, to the
 * global queue in one push, so overflow keeps its order.
 *
 * What a worker runs next: the next slot, unless it has been taken
 * NEXT_SLOT_STREAK times in a row while other work waits (two tasks waking
 * each other must not starve the ring, but with nothing else to do they may
 * ping-pong for as long as they like); then its local ring; then a batch
 * from the global queue (its fair share, into the local ring). Every
 * GLOBAL_EVERY-th pick looks at the global queue first: the fairness tick
 * that keeps outside wakes from waiting behind a busy ring.
 *
 * Searching. A worker with nothing local becomes a searcher: it counts
 * itself in `searching`, looks at the global queue and steals half of
 * another worker's ring, for a few rounds, and only then prepares to sleep.
 * New shared work wakes a sleeping worker only when nobody is searching
 * (signal_work): a searcher will find it, and a wake-up is a system call on
 * the pusher's path and a context switch on the sleeper's. At most half
 * the workers search at once (at least one may always).
 *
 * How long a search lasts. A round costs about 0.2 us with two workers
 * (the looks and the pauses; the steal looks at every other worker's ring,
 * so a round costs more in a larger pool), so the longest search,
 * QF__SEARCH_MAX rounds, spins about 6 us before the worker sleeps. That
 * pays when work comes back within it: no futex wake on the pusher's path,
 * no wake-up latency. When it does not, the spin is worse than wasted: the
 * kernel counts it against the worker, and a worker that used more CPU
 * than the thread waking it is placed behind that thread rather than
 * preempting it, so the wake-up waits for the waker to block (task.wake.p50
 * 1.4-2.8x a thread's futex wake with 32 rounds, 1.04-1.11x with the budget
 * below, interleaved runs on one machine; see README, Measured). So each
 * worker keeps its own budget, as the queues keep their spin budgets: it
 * doubles (up to QF__SEARCH_MAX) when a search finds work after its first
 * round, or when the sleep that followed a failed search ended within
 * rt->search_short_sleep_ns (SHORT_SLEEP_NS, 10 us: about what the wake-up
 * costs the two sides, so a sleep that short saved nothing a longer search
 * would have cost; wake-ups that bring no work, such as a timer change's
 * notify-all, count too, a bias towards searching longer), and halves
 * (down to QF__SEARCH_MIN) when a sleep lasted longer. The budget changes
 * nothing in the protocol below: a worker that searches less only goes to
 * sleep sooner, through the same announce-and-look, whose last look alone
 * keeps wakes from being lost.
 *
 * Sleeping, and why nothing is lost: a worker stops searching (seq_cst
 * decrement), prepares the idle event count (seq_cst RMW), clears
 * `waking`, looks once more everywhere, then sleeps until notified or the
 * earliest timer. A pusher publishes its task, runs a full fence, then
 * loads `searching` and `waking` and, if both are zero, claims `waking`
 * and notifies the event count. Either the pusher sees the searcher (whose
 * last look then comes after the push), or the worker's last look sees the
 * task, or the pusher sees the announced sleeper and wakes it. Pushes a
 * worker makes for itself without that wake (its next slot; a steal's or
 * a rescue's haul into its own ring) are tasks it will run or hand on
 * itself: its next pick takes the next slot first, unless the fairness tick
 * or a rescue supplies a task first, and then the slot's task moves to the
 * ring with a wake (before_next()). So is a quiet push (qf__push_again()):
 * the task it just ran, back into its own empty ring with its next slot
 * empty, which its very next pick takes (nothing else is there) unless a
 * timer, a rescue or the fairness tick's look at the global queue supplies
 * another task first; then that pick runs the wake the push left out
 * (find_local()), before the other task runs, so the pushed task is not
 * left behind it while the other workers sleep. The model
 * (tests/model/sched_idle.pml, NAGAIN > 0) checks the quiet push against
 * each worker's ring count, with steals and rescues of rings at any time
 * and the pick's sources (a due timer, the global queue, a rescue, the own
 * ring) in any order, and finds the pushed task lost when find_local()'s
 * wake is left out (a timer falling due between another worker's last look
 * and its read of the next deadline). With NEXTSLOT=1 the model has next
 * slots: fired timers and tasks woken by a running task go into them, the
 * pick takes them in pick_local()'s order, a rescue takes the other's, and
 * spin finds a slot's task stranded when before_next() is left out
 * (BEFORENEXT=0: the fairness tick or a rescue supplies a task that runs
 * for ever, and the other worker sleeps with no deadline). Not modelled
 * there: a running task that wakes another into its slot and then runs
 * long; the woken task waits for it, by design (README,
 * "task.wake.task_busy").
 *
 * Waking, and the hand-over. `waking` says "a wake-up is under way: the
 * worker it gets up will look", so a burst of pushes costs one futex call,
 * not one each. It holds only until that worker has looked: a worker back
 * from idle_wait() (notified, timed out or cancelled: it cannot tell
 * whether the flag was set for it) clears `waking` as soon as it has found
 * a task and before it runs it, then, after a full fence, looks again and,
 * if work is still waiting (more pushes came while the flag kept them
 * quiet, or its own batch from the global queue sits in its ring), wakes
 * another worker through signal_work(): Go's resetspinning/wakep. The last
 * searcher to find a task does the same hand-over, and during it the task
 * found waits in the worker's next slot, where a rescue reaches it should
 * the wake cost this worker its core (found_work()). Kept set while the task
 * ran, the flag silenced every later push for as long as that task took:
 * a task running for seconds left tasks woken from outside waiting for it
 * while the other workers slept (issue 24). A clear that was not ours
 * costs at most one extra wake-up later, never a lost one. The protocol,
 * with the clear, the hand-over and long tasks, is model-checked in
 * tests/model/sched_idle.pml.
 *
 * Which worker a wake-up gets up. The event count's plain notify wakes the
 * sleeper the kernel picks, the one asleep longest: with workers taking
 * turns that way, the one woken had last run on the other CPU, which on a
 * virtual machine had usually been halted, and getting a halted vCPU going
 * took 30-45 us (perf sched: the woken worker's scheduling delay) against
 * 1-3 us for a thread woken on the waker's own CPU. So each worker sleeps
 * tagged with its own futex bit, and records itself as the last to sleep
 * (last_idle) and the last to sleep on its CPU (idle_on_cpu, by
 * sched_getcpu()); a near wake-up (signal_work_to(rt, true)) prefers the
 * worker that slept on the waking thread's CPU, else the last to sleep,
 * and wakes any one when the one it prefers is not in its futex wait
 * (qf_eventcount-impl.h). The choice is a hint, read and written relaxed:
 * whichever sleeper is woken, the protocol above is the same (the model
 * lets the wake reach any one).
 * Only near wake-ups (below) prefer: a worker started on the waking
 * thread's CPU shares that core with it, which a thread that goes on
 * working pays for (see qf_wake_defer-impl.h); the others wake any one.
 *
 * A wake-up after the waker's release. A thread whose queue operation
 * wakes a parked task (an enqueue waking a consumer, a take waking a
 * producer for room or finishing its put request) runs the task's wake
 * function (the push and signal_work()) and then stores DONE on its
 * waker. The worker the futex call got up on that thread's core used to
 * run at once, mid-call, poll the task, find its waker still CLAIMED and
 * wait for a DONE that the preempted thread could not store until it had
 * its core back; and a task already running (its poll racing the wake)
 * waited for the whole futex call. Now the futex call runs after DONE
 * (push_from_outside(), qf_wake_defer-impl.h), and a count of such
 * wake-ups keeps qf_runtime_free() from freeing the runtime under one
 * that has yet to run.
 *
 * Rescue. Stealing alone never reaches a worker that the OS has taken off
 * its core (or that is inside one long poll) while the others are busy:
 * they have work of their own, so they never search, and the tasks in the
 * stalled worker's ring wait for it however long that takes. With more
 * workers than cores, as in test_sched_fair's four workers on two, that
 * was the usual state: runners that yielded into a stalled worker's ring
 * got nothing for whole rounds while the other rings cycled. So every
 * RESCUE_EVERY-th pick a worker looks at one other worker's pick count
 * (`beat`): unchanged since the last look (`beat_seen`), with tasks in its
 * ring, the stalled worker loses them all (up to RESCUE_BATCH), and the
 * task in its next slot, to the one that looked (the owner takes its next
 * slot with an exchange for this). Half, as a steal takes, was too slow: a ring of 25 runners
 * took five rescues, a few hundred picks, while the other rings cycled. A
 * look costs two loads and at most a store; a worker that is running picks
 * many times between two looks, so it is not taken for stalled.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "qf_eventcount-impl.h"
#include "qf_fence-impl.h"
#include "qf_lock-impl.h"
#include "qf_runtime-impl.h"
#include "qf_thread-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_tsan-impl.h"
#include "qf_wake_defer-impl.h"

#define NEXT_SLOT_STREAK 3
#define GLOBAL_EVERY 61
#define GLOBAL_BATCH 64
#define STEAL_BATCH 32
#define SEARCH_PAUSES 4
#define SHORT_SLEEP_NS 10000
#define RESCUE_EVERY 8
#define RESCUE_BATCH 128

static _Thread_local qf__worker *tls_worker;
static _Thread_local qf_task *tls_task;
/* Tasks the poll running on this thread moved out of the next slot (see
 * "Where a runnable task goes"). */
static _Thread_local unsigned tls_next_wakes;

qf__worker *qf__current_worker(void)
{
    return tls_worker;
}

/* The scheduler's answer to qf__task_may_spin() (coord/qf_task_mark-impl.h)
 * for the task running on this thread: its poll may look again for a
 * moment before it parks only while no task waits in this worker's next
 * slot (parking would run it next; in a ping-pong of two tasks on one
 * worker the partner waits there) and there is another worker that may be
 * producing. The local ring is not asked: a consumer's own wakes sit there,
 * and with it the looks lost most of what they gain (README Measured). */
static bool worker_may_spin(void)
{
    qf__worker *w = tls_worker;
    return w && w->rt->nworkers > 1 && !atomic_load_explicit(&w->next_slot, memory_order_relaxed);
}

/* The scheduler's answer to qf__task_cancelled() (coord/qf_task_mark-impl.h):
 * the task running on this thread was cancelled by its runtime's shutdown. */
static bool current_task_cancelled(void)
{
    return tls_task && qf_task_is_cancelled(tls_task);
}

void qf__set_current_task(qf_task *t)
{
    tls_task = t;
    tls_next_wakes = 0;
}

qf_task *qf_task_current(void)
{
    return tls_task;
}

/* ----------------------------------------------------------- run queues */

static void host_notify(qf_runtime *rt)
{
    if (rt->efd >= 0 && atomic_exchange_explicit(&rt->efd_armed, 0, memory_order_acq_rel)) {
        uint64_t one = 1;
        ssize_t r = write(rt->efd, &one, sizeof(one));
        (void)r; /* EAGAIN: the counter is already readable */
    }
}

/* A worker's tag in the idle event count: one futex bit per worker (mod 32). */
static uint32_t worker_tag(int index)
{
    return 1u << ((unsigned)index & 31u);
}

/* The worker a near wake-up prefers (see "Which worker" at the top): the
 * last to sleep on this thread's CPU, else the last to sleep; its tag, or
 * QF__EC_ANY when none is recorded. */
static uint32_t near_worker(qf_runtime *rt)
{
    int cpu = sched_getcpu();
    int last =
        cpu >= 0 ? atomic_load_explicit(&rt->idle_on_cpu[cpu % QF__CPU_HINTS], memory_order_relaxed)
                 : -1;
    if (last < 0)
        last = atomic_load_explicit(&rt->last_idle, memory_order_relaxed);
    return last >= 0 ? worker_tag(last) : QF__EC_ANY;
}

/* New shared work was published: make sure a worker will look (see
 * "Sleeping" at the top). A worker already searching, or one already woken
 * and on its way, will: no second wake-up (a burst of outside wakes used to
 * cost a futex call each while the first woken worker was still getting up).
 * `near`: get up the worker near this thread rather than any. */
static void signal_work_to(qf_runtime *rt, bool near)
{
    qf__fence_full(); /* the publish before, the looks at searching and waking after */
    host_notify(rt);
    if (atomic_load_explicit(&rt->searching, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&rt->waking, memory_order_relaxed) != 0)
        return;
    int idle = 0;
    if (atomic_compare_exchange_strong_explicit(&rt->waking, &idle, 1, memory_order_seq_cst,
                                                memory_order_relaxed))
        qf__eventcount_notify_prefer(&rt->idle, near ? near_worker(rt) : QF__EC_ANY);
}

static void signal_work(qf_runtime *rt)
{
    signal_work_to(rt, false);
}

static void link_after(qf_task *a, qf_task *b)
{
    atomic_store_explicit(&a->gnode.next, &b->gnode, memory_order_relaxed);
}

/* The local ring is full: its older half, then t, go to the global queue
 * in one push, in that order (Go's runqputslow). Owner only. */
static void overflow_local(qf__worker *w, qf_task *t)
{
    void *buf[QF__LOCAL_RING / 2];
    size_t k = qf__ring_take(&w->ring, buf, 1, QF__LOCAL_RING / 2, false, NULL);
    qf_task *first = t;
    if (k) {
        first = buf[0];
        for (size_t i = 0; i + 1 < k; i++)
            link_after(buf[i], buf[i + 1]);
        link_after(buf[k - 1], t);
    }
    qf__gq_push_chain(&w->rt->global, first, t, (int64_t)k + 1);
    signal_work(w->rt);
}

void qf__push_local(qf__worker *w, qf_task *t)
{
    QF_HB_RELEASE(t);
    if (!qf__ring_push_sp(&w->ring, t)) {
        overflow_local(w, t);
        return;
    }
    signal_work(w->rt);
}

/* A worker puts t at the global queue's tail and makes sure a worker will
 * look. */
static void push_global(qf_runtime *rt, qf_task *t)
{
    qf__gq_push_chain(&rt->global, t, t, 1);
    signal_work(rt);
}

/* t, which just ran on w, goes back to w's ring to run again. When nothing
 * else waits on w (its ring and next slot empty), w's next pick takes t,
 * so no other worker is woken to take it (should that pick find another
 * task first, find_local() wakes one then): that worker got up only to find t
 * gone (or to take it, after which w went to sleep in its place), and the
 * futex call was on the task's own path. A reader task yielding after
 * each budget woke the other worker every few batches in qflow-lines,
 * which took the consumer thread's CPU for a context switch each time
 * (README Measured, "A task that runs again"). With anything else
 * waiting, t's push says there is more than w can run at once, as any
 * push does. A stealer may race the look at the ring: it can only take
 * tasks that were there, so an empty ring stays a ring that w alone will
 * serve. */
void qf__push_again(qf__worker *w, qf_task *t)
{
    if (qf__ring_size(&w->ring) == 0 &&
        !atomic_load_explicit(&w->next_slot, memory_order_relaxed)) {
        QF_HB_RELEASE(t);
        if (qf__ring_push_sp(&w->ring, t)) {
            w->quiet_push = true; /* find_local() wakes after all if t is not next */
            return;
        }
    }
    qf__push_local(w, t);
}

/* A task that yielded goes behind everything that waits: behind the global
 * queue when that holds tasks (tasks woken from outside the pool wait
 * there, and a ring of yielders would otherwise be served 60 times for
 * each look at it), else behind its worker's ring. */
void qf__push_yielded(qf__worker *w, qf_task *t)
{
    if (qf__gq_len(&w->rt->global) > 0) {
        push_global(w->rt, t);
        return;
    }
    qf__push_again(w, t);
}

/* A deferred wake-up (push_from_outside()), then its count released. */
static void deferred_signal(qf_runtime *rt, bool near)
{
    signal_work_to(rt, near);
    atomic_fetch_sub_explicit(&rt->wakeups_in_flight, 1, memory_order_release);
}

static void deferred_signal_near(void *arg)
{
    deferred_signal(arg, true);
}

static void deferred_signal_any(void *arg)
{
    deferred_signal(arg, false);
}

/* A task made runnable from outside the pool: the push, then the
 * wake-up (signal_work()); inside a wake batch, both at the batch's end
 * for all its tasks (batch_add()). Inside a wake (an open deferral) the wake-up
 * runs after the waker's DONE (qf_wake_defer-impl.h), so a worker the
 * futex call gets up on this core, or the task's own poll, finds the
 * task's waker released instead of waiting for it; inside a near wake it
 * prefers the worker near this thread. A wake-up of this runtime of the
 * same kind already deferred covers this push too (it runs after it).
 * From that DONE on, the task may end and its owner free the runtime
 * before the deferred wake-up has read it, so a deferred wake-up is
 * counted in wakeups_in_flight from before the push (sequenced
 * before the push's release, which a worker's pop, the task's end and the
 * shutdown's count of live tasks carry to qf_runtime_free()'s acquire load
 * of the count) until signal_work() has returned (the release decrement).
 * Outside a deferral (a wake function called directly, not by a wait
 * list's wake) nothing is counted: its caller holds the waker CLAIMED
 * until after signal_work(), and the task's end waits for its DONE; a
 * direct qf_task_wake() is a call on the runtime, which its caller must
 * not free meanwhile. */
/* A wake batch's tasks (qf_wake_defer-impl.h, "Wake batches"), linked
 * as the global queue links them, all for one runtime; pushed in one piece
 * when the batch ends or a task of another runtime comes. From its first
 * task until after the signal the batch counts in wakeups_in_flight, as a
 * deferred wake-up does (see push_from_outside()): its tasks' wakers are
 * released (DONE) before the push, so a task may end and its owner free
 * the runtime meanwhile. */
static _Thread_local struct {
    qf_runtime *rt;
    qf_task *head, *tail;
    int64_t n;
} tls_batch;

static void batch_push(void)
{
    if (tls_batch.n == 0)
        return;
    qf_runtime *rt = tls_batch.rt;
    qf__gq_push_chain(&rt->global, tls_batch.head, tls_batch.tail, tls_batch.n);
    tls_batch.n = 0;
#ifdef QF_RACE_WIDENING
    sched_yield(); /* room for a worker to run them to their end here */
#endif
    signal_work(rt);
    atomic_fetch_sub_explicit(&rt->wakeups_in_flight, 1, memory_order_release);
}

static void batch_add(qf_runtime *rt, qf_task *t)
{
    if (tls_batch.n != 0 && tls_batch.rt != rt)
        batch_push();
    if (tls_batch.n == 0) {
        atomic_fetch_add_explicit(&rt->wakeups_in_flight, 1, memory_order_relaxed);
        tls_batch.rt = rt;
        tls_batch.head = t;
    } else {
        link_after(tls_batch.tail, t);
    }
    tls_batch.tail = t;
    tls_batch.n++;
}

static void push_from_outside(qf_runtime *rt, qf_task *t)
{
    if (qf__wake_batching()) {
        batch_add(rt, t);
        return;
    }
    bool defer = qf__wake_deferring();
    qf__deferred_fn signal = qf__wake_defer_near() ? deferred_signal_near : deferred_signal_any;
    bool covered = defer && qf__wake_deferred(signal, rt);
    if (defer && !covered)
        atomic_fetch_add_explicit(&rt->wakeups_in_flight, 1, memory_order_relaxed);
    qf__gq_push_chain(&rt->global, t, t, 1);
#ifdef QF_RACE_WIDENING
    sched_yield(); /* room for a worker to run t to its end here */
#endif
    if (!defer)
        signal_work(rt);
    else if (!covered)
        qf__wake_defer(signal, rt);
}

void qf__schedule(qf_task *t)
{
    qf__worker *w = tls_worker;
    /* Read before the push: from then on a worker may run t, and a
     * detached t may end and be freed before this call returns. */
    qf_runtime *rt = t->rt;
    if (w && w->rt == rt) {
        qf_task *prev = atomic_exchange_explicit(&w->next_slot, t, memory_order_acq_rel);
        if (!prev)
            return;
        if (++tls_next_wakes <= QF__NEXT_SLOT_WAKES) {
            qf__push_local(w, prev);
            return;
        }
        push_global(rt, prev); /* a distributor's */
        return;
    }
    push_from_outside(rt, t);
}

void qf__schedule_chain(qf_runtime *rt, qf_task *const *ts, size_t n)
{
    if (n == 0)
        return;
    for (size_t i = 0; i + 1 < n; i++)
        link_after(ts[i], ts[i + 1]);
    qf__gq_push_chain(&rt->global, ts[0], ts[n - 1], (int64_t)n);
    signal_work(rt);
}

/* The next slot's task, or NULL (none, or a rescue took it). */
static qf_task *next_take(qf__worker *w)
{
    if (!atomic_load_explicit(&w->next_slot, memory_order_relaxed))
        return NULL;
    return atomic_exchange_explicit(&w->next_slot, NULL, memory_order_acq_rel);
}

static qf_task *pop_local(qf__worker *w)
{
    void *p;
    if (qf__ring_take(&w->ring, &p, 1, 1, false, NULL)) {
        QF_HB_ACQUIRE(p);
        return p;
    }
    return NULL;
}

/* Room in the owner's local ring. */
static size_t ring_room(qf__worker *w)
{
    unsigned used = qf__ring_size(&w->ring);
    return used >= QF__LOCAL_RING - 1 ? 0 : QF__LOCAL_RING - 1 - used;
}

/* A fair share of the global queue: run the oldest, keep the rest in the
 * local ring (oldest first). */
static qf_task *pop_global(qf__worker *w)
{
    qf_runtime *rt = w->rt;
    int64_t len = qf__gq_len(&rt->global);
    if (len <= 0)
        return NULL;
    int nw = rt->nworkers ? rt->nworkers : 1;
    size_t want = (size_t)(len / nw) + 1, room = ring_room(w) + 1;
    if (want > room)
        want = room;
    if (want > GLOBAL_BATCH)
        want = GLOBAL_BATCH;
    qf_task *buf[GLOBAL_BATCH];
    size_t k = qf__gq_pop(&rt->global, buf, want);
    if (k == 0)
        return NULL;
    for (size_t i = 1; i < k; i++) {
        QF_HB_RELEASE(buf[i]);
        if (!qf__ring_push_sp(&w->ring, buf[i])) {
            overflow_local(w, buf[i]); /* another thread's steal raced the room count */
            continue;
        }
    }
    if (k > 1)
        signal_work(rt); /* more than this worker can start at once */
    return buf[0];
}

/* Half of v's ring (all of it when `all`), up to `max` (at most
 * RESCUE_BATCH): run the oldest, keep the rest. */
static qf_task *steal_from(qf__worker *w, qf__worker *v, bool all, size_t max)
{
    unsigned avail = qf__ring_size(&v->ring);
    if (avail == 0)
        return NULL;
    size_t want = all ? avail : avail / 2 + 1, room = ring_room(w) + 1;
    if (want > room)
        want = room;
    if (want > max)
        want = max;
    void *buf[RESCUE_BATCH];
    size_t k = qf__ring_take(&v->ring, buf, 1, want, false, NULL);
    if (k == 0)
        return NULL;
    for (size_t j = 0; j < k; j++)
        QF_HB_ACQUIRE(buf[j]);
    for (size_t j = 1; j < k; j++) {
        QF_HB_RELEASE(buf[j]);
        if (!qf__ring_push_sp(&w->ring, buf[j]))
            overflow_local(w, buf[j]);
    }
    return buf[0];
}

static qf__worker *random_other(qf__worker *w, int n, int *ret_start)
{
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    *ret_start = (int)((w->rng >> 33) % (uint64_t)n);
    return &w->rt->workers[*ret_start];
}

/* From the first worker, in a random order, that has tasks in its ring. */
static qf_task *steal(qf__worker *w)
{
    qf_runtime *rt = w->rt;
    int n = rt->nworkers;
    if (n <= 1)
        return NULL;
    int start;
    random_other(w, n, &start);
    for (int i = 0; i < n; i++) {
        qf__worker *v = &rt->workers[(start + i) % n];
        qf_task *t;
        if (v != w && (t = steal_from(w, v, false, STEAL_BATCH)))
            return t;
    }
    return NULL;
}

/* One look at another worker: stalled since the last look, it loses its
 * ring and its next slot to this one (see "Rescue" at the top). */
static qf_task *rescue(qf__worker *w)
{
    int n = w->rt->nworkers, start;
    if (n <= 1)
        return NULL;
    qf__worker *v = random_other(w, n, &start);
    if (v == w)
        return NULL;
    unsigned beat = atomic_load_explicit(&v->beat, memory_order_relaxed);
    if (atomic_load_explicit(&v->beat_seen, memory_order_relaxed) != beat) {
        atomic_store_explicit(&v->beat_seen, beat, memory_order_relaxed);
        return NULL;
    }
    qf_task *t = steal_from(w, v, true, RESCUE_BATCH), *next = next_take(v);
    if (!t)
        return next;
    if (next)
        qf__push_local(w, next); /* after the older ones */
    return t;
}

/* ----------------------------------------------------------------- timers
 *
 * A heap of armed tasks under timer_lock; next_timer, the earliest
 * deadline (QF_FOREVER for none), is published under the lock for the
 * lock-free looks. Why no timer is missed while every worker sleeps: a
 * sleeping worker's futex wait ends at the deadline it published in
 * idle_wait() (sleep_dl: the earliest timer it read after its last look,
 * which counts a due timer as work), and before it sleeps it runs a full
 * fence and reads next_timer again, taking the earlier of the two. An arm
 * that makes its timer the earliest publishes it, runs a full fence, then
 * reads every worker's sleep_dl; if one is later than the new deadline it
 * notifies every sleeper (qf_eventcount_notify: a fence, then the sleeper
 * count). The two store-fence-load pairs: either the arm's read sees the
 * sleeper's deadline (later: it notifies, and the sleeper's announce,
 * before its deadline, is seen by the notify's count; not later: the
 * sleeper wakes by the new deadline on its own), or the sleeper's second
 * read sees the new next_timer. A worker's stale sleep_dl from an earlier
 * sleep only costs a notify that was not needed, or skips one for a
 * worker that is awake and reads next_timer before its next sleep. An arm
 * that is not the earliest wakes nobody: every sleeper's deadline is at or
 * before the earliest, and a worker back from its deadline reads
 * next_timer again.
 * Why not notify every time, as before: the notify is a futex call on the
 * arming task's path, and a task that woke another and then parked on a
 * timer made the woken task wait for it. In a task that sleeps on a timer
 * period after period, the other workers sleep until its earlier
 * deadline, so the arm finds nobody past it: task.wake.task_parks.p50
 * 0.95-1.49 us notifying every time, 0.33-0.55 us now, p99 12-28 us
 * against 1.7-2.7 us (README, "A task woken by a task").
 * tests/model/sched_idle.pml (NT > 0) checks this, and finds a timer left
 * unfired when the notify is left out (TNOTIFY=0) or the second read is
 * (TNORELOAD=1). */

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

/* Whether a worker's latest idle wait (perhaps under way) ends after
 * `deadline`, after a full fence: the published next_timer before, the
 * loads after (see "timers"). */
static bool sleeps_past(qf_runtime *rt, qf_deadline deadline)
{
    qf__fence_full();
    int n = rt->nworkers ? rt->nworkers : 1;
    for (int i = 0; i < n; i++) {
        qf_deadline d = atomic_load_explicit(&rt->workers[i].sleep_dl, memory_order_relaxed);
        if (qf_deadline_min(d, deadline) != d) /* later: QF_FOREVER is the latest */
            return true;
    }
    return false;
}

void qf_task_sleep_until(qf_task *t, qf_deadline deadline)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_sleep_until: task is NULL");
        return;
    }
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
        /* A sleeper whose deadline is later than this one must take it. */
        if (sleeps_past(rt, deadline))
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
    if (!rt) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_runtime_next_deadline: runtime is NULL");
        return QF_FOREVER;
    }
    return atomic_load_explicit(&rt->next_timer, memory_order_acquire);
}

/* ------------------------------------------------------------ worker loop */

/* Work waiting besides the next slot: in the local ring or globally. */
static bool other_work(qf__worker *w)
{
    return qf__ring_size(&w->ring) != 0 || qf__gq_len(&w->rt->global) > 0;
}

bool qf_task_should_yield(const qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_should_yield: task is NULL");
        return false;
    }
    qf__worker *w = tls_worker;
    if (!w || w->rt != t->rt)
        return false;
    return atomic_load_explicit(&w->next_slot, memory_order_relaxed) != NULL || other_work(w);
}

/* The next slot's task, when another task goes first (the fairness tick,
 * a rescue), moves to the local ring, whose push wakes a worker. Left in
 * the slot it would wait for the task that went first to end, which may be
 * never: no other worker's look or steal sees a next slot, and one that
 * found nothing sleeps with no deadline. Found by the spin model with next
 * slots (tests/model/sched_idle.pml, NEXTSLOT=1, seeded BEFORENEXT=0: a due
 * timer fired into the slot just before, a task woken there by the last
 * one, or a rescue); tests/sched/test_next_slot.c reaches the second. With
 * one worker nobody else could take it: it stays. */
static void next_to_ring(qf__worker *w)
{
    if (w->rt->nworkers <= 1)
        return;
    qf_task *next = next_take(w);
    if (next)
        qf__push_local(w, next);
}

/* What this worker has at hand (no stealing); *from_ring: it came from the
 * local ring. The next slot is empty when this returns (with more than one
 * worker). */
static qf_task *pick_local(qf__worker *w, bool *from_ring)
{
    qf_task *t;
    *from_ring = false;
    fire_timers(w->rt);
    atomic_store_explicit(&w->beat, ++w->tick, memory_order_relaxed);
    if (w->tick % GLOBAL_EVERY == 0 && qf__gq_len(&w->rt->global) > 0) {
        /* Into the ring before pop_global()'s batch, not behind it, where
         * a half steal would reach it last. */
        next_to_ring(w);
        if ((t = pop_global(w)))
            return t;
    }
    if (w->tick % RESCUE_EVERY == 0 && (t = rescue(w))) {
        next_to_ring(w); /* behind the rescued ring (rare) */
        return t;
    }
    if (atomic_load_explicit(&w->next_slot, memory_order_relaxed)) {
        bool run = w->next_streak < NEXT_SLOT_STREAK || !other_work(w);
        if ((t = next_take(w))) {
            if (run) {
                w->next_streak++;
                return t;
            }
            /* Streak used up while others wait: the slot's task goes
             * behind the ring. */
            qf__push_local(w, t);
        }
    }
    w->next_streak = 0;
    if ((t = pop_local(w))) {
        *from_ring = true;
        return t;
    }
    return pop_global(w);
}

/* pick_local(), and the wake that a quiet push (qf__push_again()) left
 * out, when this pick is not the task it pushed: a timer fired into the
 * next slot, a rescue, or the fairness tick's look at the global queue
 * came first, and the pushed task now waits behind it in the ring, where
 * only a woken worker would take it while this one runs. */
static qf_task *find_local(qf__worker *w)
{
    bool quiet = w->quiet_push, from_ring;
    w->quiet_push = false;
    qf_task *t = pick_local(w, &from_ring);
    if (quiet && t && !from_ring)
        signal_work(w->rt);
    return t;
}

static bool work_visible(qf_runtime *rt)
{
    if (qf__gq_len(&rt->global) > 0)
        return true;
    int n = rt->nworkers ? rt->nworkers : 1;
    for (int i = 0; i < n; i++)
        if (qf__ring_size(&rt->workers[i].ring) != 0)
            return true;
    int64_t next = atomic_load_explicit(&rt->next_timer, memory_order_acquire);
    return next != QF_FOREVER && next <= qf_now_ns();
}

/* The search budget (see "How long a search lasts" at the top). */
static void search_longer(qf__worker *w)
{
    unsigned r = atomic_load_explicit(&w->search_rounds, memory_order_relaxed) * 2;
    atomic_store_explicit(&w->search_rounds, r > QF__SEARCH_MAX ? QF__SEARCH_MAX : r,
                          memory_order_relaxed);
}

static void search_shorter(qf__worker *w)
{
    unsigned r = atomic_load_explicit(&w->search_rounds, memory_order_relaxed) / 2;
    atomic_store_explicit(&w->search_rounds, r < QF__SEARCH_MIN ? QF__SEARCH_MIN : r,
                          memory_order_relaxed);
}

/* Nothing local: look at the global queue and the others' rings for a few
 * rounds, counted as a searcher (see "Searching" at the top). *ret_last:
 * it found a task as the last counted searcher, so the hand-over falls to
 * it (see "Waking" at the top). */
static qf_task *search(qf__worker *w, bool *ret_last)
{
    qf_runtime *rt = w->rt;
    int busy = atomic_load_explicit(&rt->searching, memory_order_relaxed);
    bool counted = busy == 0 || 2 * busy < rt->nworkers;
    if (counted)
        atomic_fetch_add_explicit(&rt->searching, 1, memory_order_seq_cst);
    qf_task *t = NULL;
    unsigned round = 0, rounds = atomic_load_explicit(&w->search_rounds, memory_order_relaxed);
    for (; round < rounds; round++) {
        fire_timers(rt);
        /* A timer that fired here woke its task into this worker's next
         * slot (qf__schedule() on a worker thread): run it, or it would
         * sit there while this worker sleeps (found by the serving
         * batcher's stress test: a task executor parked on its timer
         * never ran again). */
        if ((t = next_take(w)))
            break;
        if ((t = pop_global(w)) || (t = steal(w)) || (t = pop_local(w)))
            break;
        if (atomic_load_explicit(&rt->stopping, memory_order_relaxed))
            break;
        for (int i = 0; i < SEARCH_PAUSES; i++)
            qf__cpu_relax();
    }
    if (counted) {
        int left = atomic_fetch_sub_explicit(&rt->searching, 1, memory_order_seq_cst) - 1;
        *ret_last = t && left == 0;
    }
    if (t && round > 0)
        search_longer(w); /* found while spinning: the spin paid */
    return t;
}

#ifdef QF_RACE_WIDENING
void (*_Atomic qf__handover_pause)(qf_task *t);
#endif

/* The worker found `t` and is about to run it: the clear of `waking`
 * (when it came back from idle_wait()) and the hand-over wake, in that
 * order (see "Waking" at the top). Returns the task to run: `t`, or NULL
 * when a rescue took it meanwhile.
 *
 * During the wake `t` waits in the next slot, not in this worker's hands:
 * the worker the wake gets up may be put on this worker's CPU and take it
 * on the spot (the kernel's wake-up preemption), and with every core busy
 * (a consumer thread beside the pool) this one may then wait a whole time
 * slice, milliseconds, before it runs again. A task in its hands was out
 * of everyone's reach meanwhile: of 1,000 QueueRunners started together
 * on 2 workers with a consumer thread, one delivered its first element
 * after 20,000-90,000 of the others' in 5 of 120 starts. In the next slot
 * a rescue reaches it ("Rescue" at the top). */
static qf_task *found_work(qf__worker *w, qf_task *t, bool woken, bool last_searcher)
{
    qf_runtime *rt = w->rt;
    if (woken)
        atomic_store_explicit(&rt->waking, 0, memory_order_seq_cst);
    else if (!last_searcher)
        return t;
    qf__fence_full(); /* the clear before, the looks after */
    if (!work_visible(rt))
        return t;
    if (atomic_load_explicit(&w->next_slot, memory_order_relaxed)) {
        signal_work(rt); /* the slot is in use: t stays in hand */
        return t;
    }
    /* Only the owner stores a task into its next slot; a rescue only
     * empties it. So what comes back is t, or NULL when a rescue took it. */
    atomic_store_explicit(&w->next_slot, t, memory_order_release);
    signal_work(rt);
#ifdef QF_RACE_WIDENING
    /* A stall here is what the kernel may do to us after the wake
     * (tests/sched/test_sched_fair.c widens it on purpose). */
    void (*pause)(qf_task *) = atomic_load(&qf__handover_pause);
    if (pause)
        pause(t);
#endif
    return next_take(w);
}

/* Sleep until something may be runnable or `deadline`. `waking` is
 * cleared after the worker announces itself and before its last look: a
 * push that still saw it set is seen by that look, and any later push
 * finds it clear and notifies (the wake it was set for may have found no
 * sleeper, so it must not outlive the next worker going to sleep). */
static void idle_wait(qf_runtime *rt, int index, qf_deadline deadline)
{
    uint32_t ticket = qf_eventcount_prepare(&rt->idle);
    atomic_store_explicit(&rt->waking, 0, memory_order_seq_cst);
    qf__fence_full(); /* the store before, the looks after */
    if (work_visible(rt) || atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
        qf_eventcount_cancel(&rt->idle);
        return;
    }
    /* The deadline, published, then the earliest timer read again (see
     * "timers": an arm that read an older deadline here is seen now). */
    qf_deadline d = qf_deadline_min(deadline, qf_runtime_next_deadline(rt));
    /* At least release, not relaxed with the fence alone: an arm that reads
     * this deadline and notifies must then see this worker's announce in
     * the sleeper count (the notify's fence acquires through this store). */
    atomic_store_explicit(&rt->workers[index < 0 ? 0 : index].sleep_dl, d, memory_order_seq_cst);
    qf__fence_full();
    d = qf_deadline_min(d, qf_runtime_next_deadline(rt));
    if (index < 0) { /* the host thread of a runtime of 0 workers */
        qf_eventcount_wait_until(&rt->idle, ticket, d);
        return;
    }
    int cpu = sched_getcpu();
    _Atomic int *on_cpu = cpu >= 0 ? &rt->idle_on_cpu[cpu % QF__CPU_HINTS] : NULL;
    atomic_store_explicit(&rt->last_idle, index, memory_order_relaxed);
    if (on_cpu)
        atomic_store_explicit(on_cpu, index, memory_order_relaxed);
    qf__eventcount_wait_tagged(&rt->idle, ticket, worker_tag(index), d);
    int me = index;
    atomic_compare_exchange_strong_explicit(&rt->last_idle, &me, -1, memory_order_relaxed,
                                            memory_order_relaxed);
    me = index;
    if (on_cpu)
        atomic_compare_exchange_strong_explicit(on_cpu, &me, -1, memory_order_relaxed,
                                                memory_order_relaxed);
}

/* The worker slice (qf_runtime_set_worker_slice()): when the setting's
 * generation moved, put back what an earlier setting changed and take the
 * new one. One acquire load of a line that is written only by that call,
 * at the top of each loop turn: a worker takes a new setting before its
 * next task, or as soon as it wakes (a new setting wakes the sleepers).
 * Quiet: a refusal of the new setting leaves the worker with what it had
 * before any, and a task's last error alone. */
static void follow_slice(qf__worker *w)
{
    uint32_t gen = atomic_load_explicit(&w->rt->worker_slice_gen, memory_order_acquire);
    if (gen == w->slice_gen)
        return;
    w->slice_gen = gen;
    int64_t ns = atomic_load_explicit(&w->rt->worker_slice_ns, memory_order_relaxed);
    if (w->slice_applied)
        (void)qf__thread_restore_sched(&w->slice_saved, true);
    w->slice_applied = ns > 0 && qf__thread_prefer_latency(ns, &w->slice_saved, true) == QF_OK;
}

static void *worker_main(void *arg)
{
    qf__worker *w = arg;
    qf_runtime *rt = w->rt;
    tls_worker = w;
    char tname[16];
    snprintf(tname, sizeof(tname), "%.10s-%d", rt->name, w->index);
    pthread_setname_np(pthread_self(), tname);
    bool woken = false; /* back from idle_wait() and no task run since */
    while (!atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
        follow_slice(w);
        bool last_searcher = false;
        qf_task *t = find_local(w);
        if (!t)
            t = search(w, &last_searcher);
        if (t) {
            t = found_work(w, t, woken, last_searcher);
            woken = false;
            if (t)
                qf__task_run(w, t);
        } else {
            int64_t slept = qf_now_ns();
            idle_wait(rt, w->index, QF_FOREVER);
            if (qf_now_ns() - slept <
                atomic_load_explicit(&rt->search_short_sleep_ns, memory_order_relaxed))
                search_longer(w);
            else
                search_shorter(w);
            woken = true;
        }
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
    atomic_init(&w->search_rounds, QF__SEARCH_MAX);
    atomic_init(&w->next_slot, NULL);
    atomic_init(&w->beat, 0);
    atomic_init(&w->beat_seen, 0);
    atomic_init(&w->sleep_dl, QF_FOREVER);
    qf__ring_init(&w->ring, w->buf, QF__LOCAL_RING, QF__LOCAL_RING - 1, false);
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
    qf__wake_batch_set_end(batch_push);
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
    qf__gq_init(&rt->global);
    qf__set_task_spin_check(worker_may_spin);
    qf__set_task_cancel_check(current_task_cancelled);
    atomic_init(&rt->searching, 0);
    atomic_init(&rt->waking, 0);
    qf_eventcount_init(&rt->idle);
    atomic_init(&rt->last_idle, -1);
    atomic_init(&rt->search_short_sleep_ns, SHORT_SLEEP_NS);
    atomic_init(&rt->worker_slice_ns, -1);
    atomic_init(&rt->worker_slice_gen, 0);
    atomic_init(&rt->wakeups_in_flight, 0);
    for (int i = 0; i < QF__CPU_HINTS; i++)
        atomic_init(&rt->idle_on_cpu[i], -1);
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
    if (!rt) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_runtime_num_workers: runtime is NULL");
        return 0;
    }
    return rt->nworkers;
}

int64_t qf_runtime_num_tasks(const qf_runtime *rt)
{
    if (!rt) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_runtime_num_tasks: runtime is NULL");
        return 0;
    }
    return atomic_load_explicit(&((qf_runtime *)rt)->live_n, memory_order_acquire);
}

int qf_runtime_fd(const qf_runtime *rt)
{
    if (!rt) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_runtime_fd: runtime is NULL");
        return -1;
    }
    return rt->efd;
}

int64_t qf_runtime_run_once(qf_runtime *rt, qf_deadline deadline)
{
    return qf__runtime_turn(rt, deadline);
}

int64_t qf__runtime_turn(qf_runtime *rt, qf_deadline deadline)
{
    if (!rt) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_runtime_run_once: runtime is NULL");
        return -1;
    }
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
        while ((t = find_local(w)) != NULL) {
            qf__task_run(w, t);
            ran++;
        }
        if (ran > 0 || deadline == QF_NO_WAIT || round == 1)
            break;
        idle_wait(rt, -1, deadline);
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
        return qf__blocking_in_task_error_instead(
            "qf_runtime_shutdown", "shut the runtime down from a thread that runs no tasks");
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
            if (qf__runtime_turn(rt, qf_deadline_min(deadline, qf_deadline_in_ns(1000000))) < 0)
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
        if (qf_eventcount_wait_until(&rt->live_ec, ticket, deadline) == QF_DEADLINE_EXCEEDED)
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
    /* A thread that made one of its tasks runnable may not have run the
     * wake-up that follows yet (the task ran and ended first). */
    for (unsigned i = 0; atomic_load_explicit(&rt->wakeups_in_flight, memory_order_acquire) != 0;
         i++)
        qf__spin_then_yield(i);
    if (rt->efd >= 0)
        close(rt->efd);
    free(rt->heap);
    free(rt->workers);
    free(rt->name);
    free(rt);
}

/* ------------------------------------------------------------ worker slice */

static void publish_slice(qf_runtime *rt)
{
    /* release: a worker that sees the new generation sees the slice. */
    atomic_fetch_add_explicit(&rt->worker_slice_gen, 1, memory_order_release);
    /* Wake the sleepers to take it now (the call is rare): otherwise the
     * next wake of each, such as a serving executor's first close time,
     * would still be made with the old setting. */
    qf_eventcount_notify(&rt->idle, true);
}

qf_code qf_runtime_set_worker_slice(qf_runtime *rt, int64_t slice_ns)
{
    if (!rt)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_runtime_set_worker_slice: NULL runtime");
    if (!qf__slice_or_zero_ok(slice_ns))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_runtime_set_worker_slice: runtime '%s': slice of %lld ns is "
                            "neither 0 (the workers keep their own) nor in the kernel's "
                            "%lld..%lld ns",
                            rt->name, (long long)slice_ns, (long long)QF_THREAD_SLICE_MIN_NS,
                            (long long)QF_THREAD_SLICE_MAX_NS);
    atomic_store_explicit(&rt->worker_slice_ns, slice_ns, memory_order_relaxed);
    publish_slice(rt);
    return QF_OK;
}

void qf__runtime_offer_worker_slice(qf_runtime *rt, int64_t slice_ns)
{
    int64_t never = -1;
    if (atomic_compare_exchange_strong_explicit(&rt->worker_slice_ns, &never, slice_ns,
                                                memory_order_relaxed, memory_order_relaxed))
        publish_slice(rt);
}
