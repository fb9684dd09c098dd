/* qf_fifo_wait.c - the FIFO engine's wait/wake protocol.
 *
 * Who waits where
 *   consumers wanting 1 element (or any, while
 *   gathering a batch larger than the capacity)   deq_waiters
 *   consumers wanting a batch of k > 1 at once    deq_many_waiters; many_need is
 *                                                 the smallest k among them
 *   producer threads on a full queue              put requests (qf__put_req, on
 *                                                 the producer's stack), oldest first
 *   producer tasks on a full queue                enq_waiters
 *
 * The rule every wait follows (a Dekker pair, so no wake is lost):
 *   waiter    announce itself (list, request, many_need), set its side's
 *             wait bit in the state word with a seq_cst RMW, run F_w, then
 *             re-check its condition with seq_cst loads; sleep only if it
 *             still does not hold.
 *   notifier  make the condition true (publish slot turns, advance
 *             c_head, change the state word), run F_n, load the state word;
 *             if the bit is set, look at the lists and wake.
 * Either the notifier's load of the state word reads the waiter's RMW or a
 * later write (all of them RMWs, so it synchronizes with the waiter's and
 * sees the announcement), or it comes before that RMW in the seq_cst
 * order, and then the waiter's re-check sees the notifier's change. (A bit
 * that is set already, by an earlier waiter, proves nothing about this
 * one: the split is by which RMW the load reads.) A multi-producer publish
 * ends with a seq_cst store or a full fence and a multi-consumer take is a
 * seq_cst RMW (qf_ring-impl.h, notes 3 and 4), so F_w and F_n are nothing
 * more under the C11 model. A declared single producer or consumer stores
 * plainly and runs F_n = qf__fence_light(); the waiters facing it then run
 * F_w = qf__fence_heavy() (membarrier where it works). A publish wakes for the
 * slots it made takeable, its own and the published run right behind them
 * (note 4), so a consumer that woke too early for a slot published out of
 * turn is woken again when the slots before it come. The wait bits are
 * sticky hints; the lists' counts (read after the bit) say whether anyone
 * waits now.
 *
 * Conditions, who makes them true, and whom that wakes
 *   elements available   a publish, a give-back, an overflow push: k single
 *                        waiters, and every batch waiter at once when what is
 *                        there reaches many_need (which then resets; each
 *                        batch waiter that still falls short re-enters it).
 *   room                 a consumer advancing c_head: it completes blocked
 *                        producer threads' requests with the room it made,
 *                        oldest first, writing their slots itself (so after
 *                        a dequeue from a full queue with a blocked enqueue,
 *                        size() is back at capacity when the dequeue returns,
 *                        as in TensorFlow: "Refill" below); then it wakes k
 *                        producer tasks if room is left.
 *   settled closed       close; the last pending enqueue finishing; a holder
 *                        giving back; any publish while CLOSED (the element of
 *                        a pending enqueue, or the tombstone that resolves a
 *                        reservation made across the close). Each wakes every
 *                        consumer on both lists: end-of-data concerns them
 *                        all, and a consumer that went back to sleep because a
 *                        reservation was in flight is reached when it resolves.
 *
 * A put request (qf__put_req.state is the futex its owner sleeps on)
 *   WAITING -> DONE       a consumer put the last slot in: it unlinks the
 *                         request under req_lock, stores DONE (release) after
 *                         dropping the lock, then futex-wakes the owner
 *   WAITING -> CANCELLED  close(cancel_pending_enqueues): the same, by the closer
 *   WAITING -> unlinked   the owner (deadline, or room/close seen while
 *                         enlisting) unlinks it itself under req_lock
 * `done` and `linked` change only under req_lock. The owner reads `done`
 * after unlinking the request itself (under the lock) or after loading
 * DONE/CANCELLED (acquire, pairing with the notifier's release store, which
 * comes after its last write of `done`). A request unlinked by someone else
 * is not touched by them after the final store, but for the futex wake on
 * its address (harmless once the owner has returned: futex wakes only ever
 * cause a re-check).
 *
 * Refill (spec 28-29: TensorFlow runs the waiting enqueues under the queue's
 * lock as part of every dequeue, so a dequeue from a full queue returns with
 * the queue full again while a blocked enqueue has rows left)
 *   The gap a lock-free queue has is a producer thread whose enqueue_many
 *   has just filled the queue: its rows are visible (size() == capacity, the
 *   call has not returned: it is blocked to any observer) but its request is
 *   not linked yet, so a dequeue then would find nobody to complete. So such
 *   a producer *arrives* before its filling rows become visible (reqs_n++,
 *   arriving++, the ENQ_WAIT RMW), stops putting, links its request, then
 *   arriving--, and re-checks room: room it sees is used to serve the line
 *   in order (never taken back for a re-try: the consumer that made it may
 *   be relying on the line), possibly finishing its own request.
 *   A consumer that sees ENQ_WAIT and reqs_n != 0 reads `arriving` (a), then
 *   serves the line under req_lock; if room is left and a != 0 it waits
 *   (pause, then yield) until arriving is 0 or the room is gone, and
 *   serves again. Reading a == 0 from the producer's decrement orders its
 *   link before our lock; a != 0 makes us look again after it.
 *   Why the consumer waits rather than the producer committing first: the
 *   wait is on a few non-blocking steps of a thread that is already on the
 *   slow path, and costs nothing when nobody waits (the consumer's fast path
 *   is unchanged: the ENQ_WAIT bit, then one relaxed load of reqs_n); making
 *   every enqueue_many register before it puts would cost each one a lock.
 *   Single-row enqueues never fill a queue part-way and do not arrive: they
 *   spin and enlist as before (before enlisting they have put nothing, so
 *   no observer can tell them from a call not yet made). Producer tasks
 *   (poll forms) are woken to re-try instead; tickets (qf_queue_put-impl.h)
 *   are completed like thread requests.
 *
 * Held wakes (task requests; issue 26, runners.tput with a thread consumer)
 *   Since "Room left for a returning task" (below), only on queues of
 *   capacity below 8: on larger ones a consumer thread's passes hold
 *   nothing, as leaving room to the tasks it told does better there.
 *   A producer task whose request a consumer finishes while HOLD_LINE or
 *   more requests still wait in line can do nothing useful yet: the line
 *   refills every slot a take frees, so its next put finds the queue full
 *   and joins the line's end. Woken at once, each element cost the consumer
 *   and the workers a turn each on req_lock and on the global run queue
 *   (10,000 runners on 2 workers and a consumer thread: 350-450 ns an
 *   element, 42% of the consumer's time waiting for req_lock). So such a
 *   request is finished (its slot is in the ring and it is off the list),
 *   but its final state and wake are held: it goes on the held list
 *   (req_lock) and stays counted in reqs_n. The held wakes go out together,
 *   oldest first, in one wake batch (qf_wake_defer-impl.h: one push onto
 *   the runtime's global queue), so a worker runs those tasks back to back
 *   and they join the line in a burst.
 *
 *   They go out at the end of a pass (release_now()) when HOLD_MAX are
 *   held; when HOLD_MAX passes have ended since the first was held (an age
 *   limit counted in the line's own progress); when the pass finished a
 *   request without holding it (a consumer task or a thread's request now
 *   moves the line, and nothing else would bound the hold); when the pass
 *   leaves fewer than HOLD_LINE in line (the line never runs dry while
 *   tasks that would refill it sleep; a line that empties is still served,
 *   as reqs_n counts the held). And at once: at a close (qf__fifo_close(),
 *   before a cancel fails the line: the held are DONE, their slots went in;
 *   with no take after a close their tasks would not learn of it), and when
 *   the owner of a task request finds it off the list as it takes it back
 *   (qf__fifo_withdraw(): a cancelled task, a runner abandoning its
 *   ticket), which would otherwise wait for a final state that nobody is
 *   bound to send; and when a withdraw of a request still in line leaves
 *   fewer than HOLD_LINE there.
 *
 *   Never held: a thread's request (it sleeps on the state, with a deadline
 *   perhaps), the caller's own, those of a pass that served room left for
 *   returning tasks (see "Room left for a returning task": told at once,
 *   they count as returning, and the consumer's next takes may leave their
 *   room to them), requests finished on a task thread
 *   (qf__in_task(): a consumer task's wakes of tasks on its own runtime go
 *   to its worker's slots, and holding them measured slower), and any once
 *   the queue is closed: a pass reads CLOSED under req_lock, so either it
 *   sees the close or the close's release takes req_lock after the pass has
 *   dropped it.
 *
 *   What a held wake delays is the owner's next step: a runner's next
 *   produce and put, which would wait in line behind HOLD_LINE others
 *   anyway. Unlike TensorFlow, whose enqueue completes when the dequeue
 *   puts its element in, the owner learns of it later, by up to HOLD_MAX
 *   takes; and while the line stays HOLD_LINE long and nobody takes, up to
 *   HOLD_MAX runners stay parked with their element delivered (as those in
 *   line do with theirs not yet delivered) until a take, a close or their
 *   cancellation. A consumer that stops taking to wait for a runner's next
 *   step, with hundreds of others in line, would wait for it.
 *
 * Room left for a returning task (issue 26, runners.tput with a thread
 *   consumer). With the line HOLD_LINE long, a consumer thread's every take
 *   was a pass of its own: req_lock, the ring's producer head, one request,
 *   the request count, each a line the workers' tasks had just written, so
 *   on a VM whose cores pass a line in 200-250 ns the consumer spent
 *   140-470 ns of CPU on an element (perf/runners_regime.c). So on a queue
 *   of capacity 8 or more (owed_max > 1) a consumer thread may leave the
 *   slots it frees unfilled for a later pass, while someone is bound to
 *   make that pass:
 *     consumer  after its take with requests in line, adds the k slots it
 *               freed to room_owed (seq_cst RMW), then loads `returning`
 *               and `arriving` (seq_cst) and thread_reqs; it leaves the
 *               room only when the sum is below owed_max (a quarter of the
 *               capacity, at most OWED_MAX), `returning` is not 0, and no
 *               thread arrives or waits in line; else it passes. It is a
 *               thread: a consumer task's passes are cheap already (its
 *               wakes stay on its worker) and it never leaves room.
 *     finish    finish_request() counts a task request in `returning`
 *               before its final store: its task will see the final
 *               state (a poll, or an abandon waiting for it) and report.
 *     return    the task, having seen DONE or CANCELLED, decrements
 *               `returning` (seq_cst RMW), then loads room_owed (seq_cst):
 *               owed room and it was the last one back (0), or the owed
 *               room reached owed_max: it passes (qf__fifo_task_returned()).
 *               A single producer reports before it lets go of the
 *               producer side: its pass writes the ring as that producer.
 *     pass      every pass, under req_lock, clears room_owed before it
 *               looks at the room (an exchange: it reads every add that
 *               came before, and serves the room those takes made), and
 *               holds no wakes when it cleared some. A consumer thread's
 *               own pass clears at least its own add, so on such a queue
 *               leaving room takes the place of holding wakes: the tasks a
 *               pass finishes are told at once, count as returning, and
 *               the next takes leave their room to them. Holds remain for
 *               queues below capacity 8.
 *   Why nothing waits forever: a consumer that left room read returning =
 *   r > 0 after its add; the decrement that brings `returning` to 0 next
 *   is later in the seq_cst order than that read, so its load of room_owed
 *   sees the add, or the clear of a pass whose exchange read the add (the
 *   take then happened before that pass, which served its room).
 *   `returning` grows only by finishes, which come from passes, from a
 *   close's cancel (the line is failed, room no longer matters) and from
 *   held wakes going out (each of them reports back too); every count has
 *   its report, so it reaches 0 again. Room stays unfilled until the tasks
 *   counted at the consumer's look (and those counted since) have all
 *   reported, or owed_max is reached; never more than owed_max - 1 slots.
 *   So the line's progress now waits for those tasks' next polls: a
 *   runtime of 0 workers whose host thread stops driving its tasks holds
 *   up room that a consumer thread elsewhere left.
 *   The room left is anyone's: a producer that comes meanwhile (a
 *   returning runner's next put, a producer thread, a poll-form task woken
 *   for room) may take it ahead of the requests in line, which TensorFlow's
 *   strict arrival order (spec 28) would not allow; by at most owed_max - 1
 *   slots a cycle, and the line still moves at every pass. Unlike
 *   TensorFlow's dequeue, which runs the waiting enqueues before it
 *   returns, a consumer thread's dequeue may so return with room unfilled
 *   while producer tasks wait in line; never while a producer thread waits
 *   (spec 29: its rows go in before the dequeue returns). The load of
 *   thread_reqs needs no order of its own: the consumer read ENQ_WAIT in
 *   the state word after its take (qf__fifo_wake_producers()); a thread
 *   whose fetch_or that load read had counted itself under req_lock before
 *   (the state word's RMWs carry that), and one whose fetch_or came later
 *   re-checks room after it and takes its request back to put itself. A
 *   thread arriving with an enqueue_many (see "Refill") set ENQ_WAIT before
 *   it linked; for it the `arriving` load does the work: reading 0 from its
 *   decrement after the link orders the link before that load, and not 0
 *   makes the consumer pass.
 *
 * req_lock is taken with a backing-off poll (qf__lock_backoff()). With the
 *   line in use it is taken per element by the consumer (a pass) and by
 *   the workers (a runner enlisting): with a consumer thread and two
 *   workers (runners.tput, perf/runners-regime), three threads on one word
 *   from two cores; polled after every pause, the waiters kept pulling its
 *   line away from the holder, whose release then waited for it (in
 *   enlist(), 70% of
 *   the samples were the lock's CAS, poll and release). Backing off,
 *   runners.tput.10000 (thread consumer) ran 0.91x Go's rate against
 *   0.48x (medians of 15 quiet rounds, the builds in turn), 0.49x
 *   against 0.37-0.45x with busy loops beside it; one set of 4 rounds
 *   beside the test suite's gate test lost (0.62x -> 0.31x) and did not
 *   repeat (README, Measured, "req_lock backs off").
 *
 * tests/model/fifo_consumers.pml, fifo_requests.pml, fifo_refill.pml,
 * fifo_holders.pml and fifo_held.pml
 * model these rules (consumers and producers, the close, the put requests,
 * holders of batches above the capacity meeting at a close, held wakes and
 * every way they are released) and spin checks
 * that no process can end up asleep with its condition true; check.sh runs
 * them in the test suite (meson test model_wait_wake).
 */
#include <limits.h>
#include <sched.h>

#include "qf_fifo-impl.h"
#include "qf_lock-impl.h"
#include "qf_status.h"
#include "qf_task_mark-impl.h"
#include "qf_waitlist-impl.h"
#include "qf_wake_defer-impl.h"

static uint64_t state_sc(qf__fifo *f)
{
    return atomic_load_explicit(&f->state, memory_order_seq_cst);
}

static int clamp_n(size_t n)
{
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* F_w for a waiter facing producers / consumers (see the top). */
static void fence_vs_producers(qf__fifo *f)
{
    if (f->single_producer)
        qf__ring_fence_heavy(&f->ring);
}

static void fence_vs_consumers(qf__fifo *f)
{
    if (f->single_consumer)
        qf__ring_fence_heavy(&f->ring);
}

size_t qf__fifo_available(qf__fifo *f)
{
    return (size_t)qf__ring_published(&f->ring) +
           atomic_load_explicit(&f->stash_n, memory_order_seq_cst) +
           atomic_load_explicit(&f->overflow_n, memory_order_seq_cst);
}

bool qf__fifo_room(qf__fifo *f)
{
    if (f->unbounded_cap)
        return true;
    return qf__fifo_used(f, true) < (uint64_t)f->capacity;
}

bool qf__fifo_closed_quiet(qf__fifo *f, uint32_t *ret_holders)
{
    uint64_t s = state_sc(f);
    if (!(s & QF__CLOSED) || qf__pending(s) != 0)
        return false;
    if (qf__ring_in_flight(&f->ring))
        return false;
    /* A single producer reserves with a plain store and a light fence
     * before it checks CLOSED: after the heavy fence either its reservation
     * is visible, or it saw CLOSED and publishes a tombstone (waking us). */
    fence_vs_producers(f);
    if (qf__ring_in_flight(&f->ring))
        return false;
    *ret_holders = (uint32_t)qf__holders(state_sc(f));
    return true;
}

bool qf__fifo_settled_closed(qf__fifo *f, bool holder)
{
    uint32_t holders;
    return qf__fifo_closed_quiet(f, &holders) && holders <= (holder ? 1u : 0u);
}

static void many_need_lower(qf__fifo *f, size_t need)
{
    uint32_t n = need >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)need;
    uint32_t cur = atomic_load_explicit(&f->many_need, memory_order_relaxed);
    while (n < cur && !atomic_compare_exchange_weak_explicit(
                          &f->many_need, &cur, n, memory_order_seq_cst, memory_order_relaxed))
        ;
}

void qf__fifo_wake_all(qf__fifo *f)
{
    atomic_store_explicit(&f->many_need, UINT32_MAX, memory_order_relaxed);
    qf_waitlist_wake(&f->deq_waiters, INT32_MAX);
    qf_waitlist_wake(&f->deq_many_waiters, INT32_MAX);
    qf_waitlist_wake(&f->enq_waiters, INT32_MAX);
}

void qf__fifo_wake_consumers(qf__fifo *f, size_t k)
{
    if (k == 0)
        return;
    uint64_t s = state_sc(f);
    if (!(s & QF__DEQ_WAIT))
        return;
    if (s & QF__CLOSED) {
        /* End-of-data may have come: everyone re-checks. */
        atomic_store_explicit(&f->many_need, UINT32_MAX, memory_order_relaxed);
        if (qf__waitlist_count_fast(&f->deq_waiters))
            qf_waitlist_wake(&f->deq_waiters, INT32_MAX);
        if (qf__waitlist_count_fast(&f->deq_many_waiters))
            qf_waitlist_wake(&f->deq_many_waiters, INT32_MAX);
        return;
    }
    if (qf__waitlist_count_fast(&f->deq_waiters))
        qf__waitlist_wake_near(&f->deq_waiters, clamp_n(k));
    if (qf__waitlist_count_fast(&f->deq_many_waiters)) {
        uint32_t need = atomic_load_explicit(&f->many_need, memory_order_seq_cst);
        /* Whoever resets many_need from a real value wakes the batch
         * waiters; one that still falls short lowers it again before its
         * re-check, so a later publish sees it. */
        if (need != UINT32_MAX && qf__fifo_available(f) >= need &&
            atomic_exchange_explicit(&f->many_need, UINT32_MAX, memory_order_seq_cst) != UINT32_MAX)
            qf__waitlist_wake_near(&f->deq_many_waiters, INT32_MAX);
    }
}

/* Tell a request's owner its final state. After the store the owner may
 * return (a thread) or reuse the ticket (a task): read what is needed
 * first. A request that owned a pending count drops it here.
 *
 * A task's waker lives in the task, which may end as soon as it sees the
 * final state (a cancelled runner waits for it in qf__queue_put_abandon),
 * so the wake after the store could reach a freed task. The waker is held
 * CLAIMED from before the store until its wake function has run, as a wait
 * list holds a waker it wakes: the task's end (qf_waker_withdraw) and its
 * next use of the ticket (put_ticket_settle() in qf_queue_line.c) wait for
 * DONE. While its ticket is out the task's waker is normally on no list;
 * one a task's own poll op left registered somewhere is not taken over
 * (that list owns its state), and is woken as before. */
static void finish_request(qf__fifo *f, qf__put_req *r, uint32_t final)
{
    qf_waker *wk = r->waker;
    bool pending = r->owns_pending;
    bool held = false;
    if (wk) {
        /* Before the final state: the task's report comes after it (see
         * "Room left for a returning task"). */
        if (f->owed_max > 1)
            atomic_fetch_add_explicit(&f->returning, 1, memory_order_seq_cst);
        uint32_t ws = atomic_load_explicit(&wk->qf__state, memory_order_relaxed);
        held = (ws == QF_WAKER_IDLE || ws == QF_WAKER_DONE) &&
               atomic_compare_exchange_strong_explicit(&wk->qf__state, &ws, QF_WAKER_CLAIMED,
                                                       memory_order_relaxed, memory_order_relaxed);
    }
    atomic_store_explicit(&r->state, final, memory_order_release);
#ifdef QF_RACE_WIDENING
    sched_yield(); /* room for a task owner to see the state and end */
#endif
    if (wk) {
        /* The futex call of the wake, if any, after DONE (as wake_list()
         * defers it, qf_wake_defer-impl.h): the task's next poll waits
         * for that DONE. */
        qf__wake_defer_begin(false);
        wk->wake(wk);
        if (held)
            atomic_store_explicit(&wk->qf__state, QF_WAKER_DONE, memory_order_release);
        qf__wake_defer_end();
    } else {
        qf_futex_wake(&r->state, 1);
    }
    if (pending)
        qf__fifo_drop_pending(f);
}

void qf__fifo_arrive(qf__fifo *f)
{
    atomic_fetch_add_explicit(&f->reqs_n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&f->arriving, 1, memory_order_seq_cst);
    /* Always the RMW, even when the sticky bit is set: a consumer whose
     * load of the state word reads it (or later) sees both counts. */
    atomic_fetch_or_explicit(&f->state, QF__ENQ_WAIT, memory_order_seq_cst);
}

void qf__fifo_arrive_undo(qf__fifo *f)
{
    atomic_fetch_sub_explicit(&f->reqs_n, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&f->arriving, 1, memory_order_seq_cst);
}

/* Held wakes (see "Held wakes" at the top): a request is held when at
 * least HOLD_LINE others wait in line behind the one finished; the held go
 * out together at HOLD_MAX. 256 and 128 measured best of 64/32, 256/128
 * and 1024/512 (runners-regime, 10,000 runners, thread consumer, at
 * capacity 1024 before room was left to returning tasks). */
#define HOLD_LINE 256
#define HOLD_MAX 128

/* Under req_lock: r joins (+1) or leaves (-1) the line; a thread's
 * request counts in thread_reqs. */
static void count_thread_req(qf__fifo *f, const qf__put_req *r, int d)
{
    if (!r->waker)
        atomic_store_explicit(&f->thread_reqs,
                              atomic_load_explicit(&f->thread_reqs, memory_order_relaxed) +
                                  (uint32_t)d,
                              memory_order_relaxed);
}

/* Requests in line (linked or arriving), not counting the held: under
 * req_lock. */
static uint32_t in_line(qf__fifo *f)
{
    return atomic_load_explicit(&f->reqs_n, memory_order_relaxed) - f->held_n;
}

/* Whether a pass may hold r's wake: under req_lock, r just unlinked and
 * still counted in reqs_n. */
static bool may_hold(qf__fifo *f, const qf__put_req *r, const qf__put_req *self)
{
    if (r == self || !r->waker || qf__in_task())
        return false;
    return in_line(f) - 1 >= HOLD_LINE &&
           !(atomic_load_explicit(&f->state, memory_order_acquire) & QF__CLOSED);
}

static void hold(qf__fifo *f, qf__put_req *r)
{
    if (f->held_n == 0)
        f->held_last = &f->held_head;
    *f->held_last = r;
    f->held_last = &r->finished_next;
    f->held_n++;
}

/* Under req_lock: the held requests go in front of a list of finished
 * ones (they are older); returns the list's new head. */
static qf__put_req *unhold(qf__fifo *f, qf__put_req *finished)
{
    if (f->held_n == 0)
        return finished;
    *f->held_last = finished;
    finished = f->held_head;
    atomic_fetch_sub_explicit(&f->reqs_n, f->held_n, memory_order_relaxed);
    f->held_head = NULL;
    f->held_n = 0;
    f->held_passes = 0;
    return finished;
}

/* Under req_lock, at the end of a pass that holds wakes: whether they go
 * out now. `finished`: the pass finished a request without holding it. */
static bool release_now(qf__fifo *f, bool finished)
{
    return finished || f->held_n >= HOLD_MAX || ++f->held_passes >= HOLD_MAX ||
           in_line(f) < HOLD_LINE;
}

/* Final states and wakes of a list of finished requests, in one wake
 * batch. */
static void finish_all(qf__fifo *f, qf__put_req *finished, qf__put_req *self)
{
    if (!finished)
        return; /* a pass that held, a withdraw: no batch to open and close */
    qf__wake_batch_begin();
    while (finished) {
        qf__put_req *r = finished;
        finished = r->finished_next; /* before DONE: the owner may return */
        if (r == self)               /* the caller itself, helping: nobody to wake */
            atomic_store_explicit(&r->state, QF__REQ_DONE, memory_order_release);
        else
            finish_request(f, r, QF__REQ_DONE);
    }
    qf__wake_batch_end();
}

void qf__fifo_release_held(qf__fifo *f)
{
    qf__lock_backoff(&f->req_lock);
    qf__put_req *finished = unhold(f, NULL);
    qf__unlock(&f->req_lock);
    finish_all(f, finished, NULL);
}

/* One pass over the list under req_lock: finish what the room allows,
 * oldest first. Returns true when the list ran empty with room left. */
static bool serve_requests(qf__fifo *f, qf__put_req *self)
{
    qf__put_req *finished = NULL, **last = &finished;
    size_t published = 0;
    bool room_left = false;
    qf__lock_backoff(&f->req_lock);
    /* This pass serves the room left so far (see "Room left for a
     * returning task"). */
    bool owed = atomic_load_explicit(&f->room_owed, memory_order_relaxed) &&
                atomic_exchange_explicit(&f->room_owed, 0, memory_order_seq_cst) != 0;
    for (;;) {
        qf__put_req *r = f->req_head;
        if (!r) {
            room_left = qf__fifo_room(f);
            break;
        }
        qf_code err = QF_OK;
        size_t pub = 0;
        size_t k =
            qf__fifo_put_now(f, r->slots + r->done, r->n - r->done, true, false, NULL, &err, &pub);
        r->done += k;
        published += pub;
        if (err != QF_OK || r->done < r->n)
            break; /* no room left, or cancelled: the closer fails them */
        f->req_head = r->next;
        if (f->req_head)
            f->req_head->prev = NULL;
        else
            f->req_tail = NULL;
        r->linked = false;
        count_thread_req(f, r, -1);
        r->finished_next = NULL;
        if (!owed && may_hold(f, r, self)) {
            hold(f, r);
            continue;
        }
        atomic_fetch_sub_explicit(&f->reqs_n, 1, memory_order_relaxed);
        *last = r;
        last = &r->finished_next;
    }
    *last = NULL;
    if (f->held_n != 0 && release_now(f, finished != NULL))
        finished = unhold(f, finished);
    qf__unlock(&f->req_lock);
    finish_all(f, finished, self);
    qf__fifo_wake_consumers(f, published);
    return room_left;
}

/* Finish blocked producers' enqueues with the room there is now, oldest
 * first (see "A put request" and "Refill" at the top). `self`: the
 * calling producer's own request, when it helps. */
static void complete_requests(qf__fifo *f, qf__put_req *self)
{
    for (unsigned spins = 0;;) {
        /* Read before the pass: 0 here means every arrival that came
         * before is linked by the time we take the lock. */
        uint32_t arriving = atomic_load_explicit(&f->arriving, memory_order_seq_cst);
        if (!serve_requests(f, self) || arriving == 0)
            return;
        /* Room is left and a producer whose rows filled the queue may not
         * be in line yet: it is between publishing them and linking its
         * request, which never blocks. Wait for it, so that it is in line
         * (and gets this room) before our dequeue returns. */
        while (atomic_load_explicit(&f->arriving, memory_order_seq_cst) != 0 && qf__fifo_room(f)) {
            if (spins++ < 64)
                qf__cpu_relax();
            else
                sched_yield();
        }
    }
}

/* A consumer that freed k slots with requests in line: whether it may
 * leave them to a returning task (see "Room left for a returning task"). */
static bool leave_room(qf__fifo *f, size_t k)
{
    if (f->owed_max <= 1 || k >= f->owed_max || qf__in_task())
        return false;
    uint32_t owed =
        atomic_fetch_add_explicit(&f->room_owed, (uint32_t)k, memory_order_seq_cst) + (uint32_t)k;
    return owed < f->owed_max && atomic_load_explicit(&f->returning, memory_order_seq_cst) != 0 &&
           atomic_load_explicit(&f->arriving, memory_order_seq_cst) == 0 &&
           atomic_load_explicit(&f->thread_reqs, memory_order_relaxed) == 0;
}

void qf__fifo_task_returned(qf__fifo *f)
{
    if (f->owed_max <= 1)
        return; /* nobody leaves room here, and finish_request() counted nothing */
    uint32_t left = atomic_fetch_sub_explicit(&f->returning, 1, memory_order_seq_cst) - 1;
    uint32_t owed = atomic_load_explicit(&f->room_owed, memory_order_seq_cst);
    if (owed != 0 && (left == 0 || owed >= f->owed_max))
        complete_requests(f, NULL);
}

void qf__fifo_wake_producers(qf__fifo *f, size_t k)
{
    if (k == 0)
        return;
    uint64_t s = state_sc(f);
    if (!(s & QF__ENQ_WAIT))
        return;
    if (atomic_load_explicit(&f->reqs_n, memory_order_relaxed) && !leave_room(f, k))
        complete_requests(f, NULL);
    if (qf__waitlist_count_fast(&f->enq_waiters) && ((s & QF__CLOSED) || qf__fifo_room(f)))
        qf_waitlist_wake(&f->enq_waiters, clamp_n(k));
}

void qf__fifo_cancel_requests(qf__fifo *f)
{
    qf__lock_backoff(&f->req_lock);
    qf__put_req *r = f->req_head;
    uint32_t unlinked = 0;
    for (qf__put_req *x = r; x; x = x->next, unlinked++) {
        x->linked = false;
        count_thread_req(f, x, -1);
    }
    f->req_head = f->req_tail = NULL;
    /* Not a store of 0: producers arriving are counted too. */
    atomic_fetch_sub_explicit(&f->reqs_n, unlinked, memory_order_relaxed);
    qf__unlock(&f->req_lock);
    while (r) {
        qf__put_req *next = r->next; /* before the final state */
        finish_request(f, r, QF__REQ_CANCELLED);
        r = next;
    }
}

qf_code qf__fifo_wait_elements(qf__fifo *f, size_t need, bool holder, const qf__wait *w)
{
    qf_waker tw, *wk = w->waker;
    if (w->mode == QF__WAIT_DEADLINE) {
        if (qf__in_task())
            return qf__blocking_in_task_error("A blocking dequeue");
        qf_waker_init_thread(&tw);
        wk = &tw;
    }
    qf_waitlist *wl = need > 1 ? &f->deq_many_waiters : &f->deq_waiters;
    qf__waitlist_register_unfenced(wl, wk); /* the DEQ_WAIT RMW fences */
    if (need > 1)
        many_need_lower(f, need);
    atomic_fetch_or_explicit(&f->state, QF__DEQ_WAIT, memory_order_seq_cst);
    fence_vs_producers(f);
    /* A holder also returns once the queue is closed and quiet, whoever
     * else holds: it must then give back rather than wait (qf_fifo_take). */
    uint32_t holders;
    if (qf__fifo_available(f) >= need ||
        (qf__fifo_closed_quiet(f, &holders) && (holder || holders == 0))) {
        if (!qf_waitlist_cancel(wl, wk)) {
            /* Woken meanwhile: we re-try anyway, but the wake may have
             * been meant for a waiter behind us; pass it on. */
            qf_waitlist_wake(wl, 1);
            qf_waker_consumed(wk);
        }
        return QF_OK;
    }
    if (w->mode == QF__WAIT_POLL)
        return QF_PENDING;
    if (qf_waker_wait_until(wk, w->deadline) == QF_DEADLINE_EXCEEDED && qf_waitlist_cancel(wl, wk))
        return qf__fifo_err_timeout();
    return QF_OK;
}

bool qf__fifo_withdraw(qf__fifo *f, qf__put_req *r)
{
    qf__lock_backoff(&f->req_lock);
    bool mine = r->linked;
    if (mine) {
        if (r->prev)
            r->prev->next = r->next;
        else
            f->req_head = r->next;
        if (r->next)
            r->next->prev = r->prev;
        else
            f->req_tail = r->prev;
        r->linked = false;
        count_thread_req(f, r, -1);
        atomic_fetch_sub_explicit(&f->reqs_n, 1, memory_order_relaxed);
    }
    /* Taking a request back may leave the line short: the held go out, as
     * at the end of a pass (found by tests/model/fifo_held.pml: else they
     * stayed held with nobody in line until the next take or a close). */
    qf__put_req *released = NULL;
    if (mine && f->held_n != 0 && in_line(f) < HOLD_LINE)
        released = unhold(f, NULL);
    qf__unlock(&f->req_lock);
    finish_all(f, released, NULL);
    if (mine && r->owns_pending)
        qf__fifo_drop_pending(f);
    if (!mine && r->waker)
        qf__fifo_release_held(f); /* r may be held: its final state now */
    return mine;
}

/* What enlist() did. */
typedef enum {
    IN_LINE,    /* r waits for its final state */
    TAKEN_BACK, /* room or a cancel showed up: r is off the list, re-try */
} enlisted;

/* Link r at the tail, announce it, and re-check room and cancellation
 * (the waiter's half of the rule at the top). When the re-check asks for
 * a re-try but a consumer or the closer took r first, r is IN_LINE: its
 * final state is on its way. */
static void link_request(qf__fifo *f, qf__put_req *r, bool count)
{
    r->next = NULL;
    r->linked = true;
    atomic_store_explicit(&r->state, QF__REQ_WAITING, memory_order_relaxed);
    qf__lock_backoff(&f->req_lock);
    r->prev = f->req_tail;
    if (f->req_tail)
        f->req_tail->next = r;
    else
        f->req_head = r;
    f->req_tail = r;
    count_thread_req(f, r, 1);
    if (count)
        atomic_fetch_add_explicit(&f->reqs_n, 1, memory_order_relaxed);
    qf__unlock(&f->req_lock);
}

static enlisted enlist(qf__fifo *f, qf__put_req *r)
{
    link_request(f, r, true);

    uint64_t old = atomic_fetch_or_explicit(&f->state, QF__ENQ_WAIT, memory_order_seq_cst);
    fence_vs_consumers(f);
    /* Re-check: room, or a cancelling close (a plain close does not refuse
     * a pending enqueue). */
    if ((qf__fifo_room(f) || (old & QF__CANCELLED) || (state_sc(f) & QF__CANCELLED)) &&
        qf__fifo_withdraw(f, r))
        return TAKEN_BACK;
    return IN_LINE;
}

qf_code qf__fifo_enlist(qf__fifo *f, qf__put_req *r)
{
    return enlist(f, r) == IN_LINE ? QF_PENDING : QF_OK;
}

qf_code qf__fifo_wait_request(qf__fifo *f, void *const *slots, size_t n, size_t *done,
                              qf_deadline deadline, bool arrived)
{
    qf__put_req r = {.slots = slots, .n = n, .done = *done};
    if (arrived) {
        /* Counted in reqs_n and ENQ_WAIT set since we arrived. In line
         * now: stop arriving, then re-check. Room we see is not taken
         * back to re-try (a consumer that made it may be waiting for us
         * to be in line): we serve the line with it, in order, which may
         * finish our own request. */
        link_request(f, &r, false);
        atomic_fetch_sub_explicit(&f->arriving, 1, memory_order_seq_cst);
        fence_vs_consumers(f);
        if (state_sc(f) & QF__CANCELLED) {
            if (qf__fifo_withdraw(f, &r)) {
                *done = r.done;
                return qf__fifo_err_enqueue_cancelled();
            }
        } else if (qf__fifo_room(f)) {
            complete_requests(f, &r);
        }
    } else if (enlist(f, &r) == TAKEN_BACK) {
        *done = r.done; /* re-try */
        return QF_OK;
    }
    uint32_t st;
    while ((st = atomic_load_explicit(&r.state, memory_order_acquire)) == QF__REQ_WAITING) {
        if (qf_futex_wait_until(&r.state, QF__REQ_WAITING, deadline) == QF_DEADLINE_EXCEEDED) {
            if (qf__fifo_withdraw(f, &r)) {
                *done = r.done;
                return qf__fifo_err_timeout();
            }
            /* Unlinked by a consumer or the closer: its final state is
             * stored (and we are woken) right after their lock is dropped. */
            deadline = QF_FOREVER;
        }
    }
    *done = r.done;
    return st == QF__REQ_DONE ? QF_OK : qf__fifo_err_enqueue_cancelled();
}

qf_code qf__fifo_wait_room_poll(qf__fifo *f, qf_waker *wk)
{
    qf__waitlist_register_unfenced(&f->enq_waiters, wk); /* the ENQ_WAIT RMW fences */
    uint64_t old = atomic_fetch_or_explicit(&f->state, QF__ENQ_WAIT, memory_order_seq_cst);
    fence_vs_consumers(f);
    uint64_t closed = QF__CLOSED | QF__CANCELLED;
    if (qf__fifo_room(f) || (old & closed) || (state_sc(f) & closed)) {
        if (!qf_waitlist_cancel(&f->enq_waiters, wk)) {
            qf_waitlist_wake(&f->enq_waiters, 1); /* woken meanwhile: pass it on */
            qf_waker_consumed(wk);
        }
        return QF_OK;
    }
    return QF_PENDING;
}
