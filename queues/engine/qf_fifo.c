/* qf_fifo.c - the FIFO engine: reserve, publish, take, close.
 *
 * Everything here moves opaque slots (element pointers or inline values) in
 * a qf__fifo the queue embeds; the queue API (queues/qf_fifo_queue.c, the
 * operations table, and qf_queue_element.c, qf_queue_ptr.c and the other
 * files of qf_queue_ops-impl.h) wraps it in the element and pointer APIs.
 * How the engine waits and wakes when it cannot finish at once is
 * qf_fifo_wait.c's.
 *
 * The fast path touches no shared counter: capacity comes from the ring
 * indices (qf_ring-impl.h), and the state word (qf_engine-impl.h) is read,
 * not written, by enqueues and dequeues. A producer reserves ring slots,
 * checks the state word (closed?), writes and publishes them, then reads
 * the state word for sleeping consumers. A consumer claims between `min`
 * and `max` published slots with one CAS (a batch that is not all there is
 * not taken at all) and then reads the state word for sleeping producers.
 *
 * Batches. dequeue_many(n) with n up to the capacity waits until n are
 * there and takes them at once, so it never holds elements it may have to
 * give back: capacity and every producer's order hold whatever the
 * deadline or a close does. Only a batch larger than the capacity (spec 52:
 * TensorFlow gathers those as they arrive) takes elements while it waits;
 * such a "holder" gives them back to the front of the queue (a stash the
 * producers count against the capacity) when it fails.
 *
 * Closed and drained. A consumer reports end-of-data only when the queue is
 * closed and settled: no enqueue that was blocked before a plain close is
 * still pending, no other consumer holds elements it may give back, and no
 * reservation is in flight. Holders that meet at a closed queue with
 * nothing more to come each give back what they hold unless what is there
 * completes their batch, then wait as plain consumers: the last holder
 * decides alone, so two holders never wait on each other.
 *
 * Tombstones. A producer that reserved slots and then finds the queue closed cannot hand the slots
 * back (later producers may hold later slots), so it publishes tombstones there (tags beside the
 * slots, qf_ring-impl.h note 7), which consumers drop, and fails. Hence a reservation either
 * becomes an element delivered before end-of-data, or a failed enqueue; never an element stranded
 * behind an end-of-data.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_fifo-impl.h"
#include "qf_pagemem-impl.h"
#include "qf_spin-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"
#include "qf_task_mark-impl.h"

/* Waits for an in-flight publication before a try form gives up. */
#define INFLIGHT_SPINS 64

/* ---------------------------------------------------------------- errors */

static qf_code err_closed(const qf__fifo *f)
{
    return qf_set_error(QF_CANCELLED, "%s '%s' is closed.", f->kind_name, f->name);
}

qf_code qf__fifo_err_enqueue_cancelled(void)
{
    return qf__set_error_static(QF_CANCELLED, "Enqueue operation was cancelled");
}

qf_code qf__fifo_err_timeout(void)
{
    return qf__set_error_static(QF_DEADLINE_EXCEEDED, "Timed out waiting for notification");
}

static qf_code err_insufficient(const qf__fifo *f, size_t requested)
{
    return qf_set_error(QF_OUT_OF_RANGE,
                        "%s '%s' is closed and has insufficient elements (requested %zu, "
                        "current size %lld)",
                        f->kind_name, f->name, requested, (long long)qf__fifo_size(f));
}

/* ---------------------------------------------------------------- helpers */

static uint64_t state_sc(qf__fifo *f)
{
    return atomic_load_explicit(&f->state, memory_order_seq_cst);
}

void qf__fifo_drop_pending(qf__fifo *f)
{
    uint64_t old = atomic_fetch_sub_explicit(&f->state, QF__PENDING_ONE, memory_order_seq_cst);
    /* The last enqueue that outlived a plain close has finished: consumers
     * on a closed queue may now be at end-of-data. */
    if (qf__pending(old) == 1 && (old & QF__CLOSED))
        qf__fifo_wake_all(f);
}

bool qf__fifo_become_pending(qf__fifo *f, qf_code *ret_err)
{
    uint64_t old = atomic_fetch_add_explicit(&f->state, QF__PENDING_ONE, memory_order_seq_cst);
    if (old & (QF__CLOSED | QF__CANCELLED)) {
        qf__fifo_drop_pending(f);
        /* The call was not pending when the close came: it was refused by
         * a closed queue, as qf__fifo_closed_for() says for such a call
         * (spec 31; "was cancelled" is for enqueues already waiting, spec
         * 32-34), whether the close cancelled or not. */
        *ret_err = err_closed(f);
        return false;
    }
    return true;
}

static void release_holder(qf__fifo *f)
{
    uint64_t old = atomic_fetch_sub_explicit(&f->state, QF__HOLDER_ONE, memory_order_seq_cst);
    if (old & QF__CLOSED)
        qf__fifo_wake_all(f);
}

static int ncpus(void)
{
    static _Atomic int ncpu;
    int n = atomic_load_explicit(&ncpu, memory_order_relaxed);
    if (n == 0) {
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&ncpu, n > 0 ? n : 1, memory_order_relaxed);
    }
    return n > 0 ? n : 1;
}

/* Spinning before sleeping catches a partner that is about to act (a futex
 * hand-off costs microseconds), but only when the partner is running; on
 * an oversubscribed or busy machine the spinner burns the time slice its
 * partner needs (measured here: 10-20x slower than not spinning at all).
 * So the budget adapts per queue, as an adaptive mutex's does: a spin that
 * caught its partner doubles it (up to spin_ns), a spin that ended in a
 * sleep anyway halves it. Relaxed updates: it is a hint. */
typedef struct spin {
    int64_t end;    /* 0: not started; -1: done or not allowed; else deadline */
    unsigned calls; /* spin_once() calls since it started */
    int yields;     /* sched_yield() calls so far in this wait; -1: no more */
} spin;

static void spin_feedback(qf__fifo *f, bool caught)
{
    int32_t b = atomic_load_explicit(&f->spin_dyn, memory_order_relaxed);
    int32_t nb = caught ? (b < 1000 ? 1000 : b * 2) : b / 2;
    if (nb > f->spin_ns)
        nb = (int32_t)f->spin_ns;
    if (nb != b)
        atomic_store_explicit(&f->spin_dyn, nb, memory_order_relaxed);
}

/* The operation made progress (or ended): a spin still running caught it. */
static void spin_release(qf__fifo *f, spin *sp)
{
    if (sp->end > 0)
        spin_feedback(f, true);
    sp->end = 0;
    sp->yields = 0;
}

/* After the spin, before the sleep: yields (qf_spin-impl.h). Not with
 * spinning turned off (spin_ns <= 0), nor inside a task, whose blocking
 * call is refused rather than put to sleep: its yields would be the
 * worker's. */
static bool yield_once(qf__fifo *f, spin *sp)
{
    return f->spin_ns > 0 && !qf__in_task() && qf__yield_once(&f->yield_dyn, &sp->yields);
}

/* Spin a little; false once the budget is spent (then it sleeps). The
 * clock is read once every SPIN_CLOCK_EVERY calls: a clock read can cost
 * more than the pause it would time (measured: ~285 ns per
 * clock_gettime() on a loaded KVM guest). A call pauses SPIN_PAUSES
 * times before its caller looks again: a pause takes 58 ns on this
 * project's VM (an AMD EPYC guest), so the 16 of before made a spinning
 * thread look once a microsecond, and an element that came just after a
 * look waited most of that (thread ping-pong p50 600 ns against Go's
 * 250). */
#define SPIN_CLOCK_EVERY 16
#define SPIN_PAUSES 2
static bool spin_pause(qf__fifo *f, spin *sp)
{
    if (sp->end < 0 || f->spin_ns <= 0 || ncpus() < 2)
        return false;
    if (sp->end == 0) {
        int64_t now = qf_now_ns();
        int32_t budget = atomic_load_explicit(&f->spin_dyn, memory_order_relaxed);
        if (budget <= 0) {
            /* Probe in the process-wide windows, so the budget can grow
             * back once the machine quietens down (qf_spin-impl.h). */
            if (!qf__spin_probe_window(now)) {
                sp->end = -1;
                return false;
            }
            budget = (int32_t)f->spin_ns;
        }
        sp->end = now + budget;
        sp->calls = 0;
    } else if (++sp->calls % SPIN_CLOCK_EVERY == 0 && qf_now_ns() >= sp->end) {
        spin_feedback(f, false);
        sp->end = -1;
        return false;
    }
    for (int i = 0; i < SPIN_PAUSES; i++)
        qf__cpu_relax();
    return true;
}

static bool spin_once(qf__fifo *f, spin *sp)
{
    return spin_pause(f, sp) || yield_once(f, sp);
}

/* A task's poll that found nothing to take looks again, up to POLL_LOOKS
 * times POLL_PAUSES pauses apart (about a microsecond in all), before it
 * registers and parks, while its scheduler says that no task waits in its
 * worker's next slot and another worker may be producing meanwhile
 * (qf__task_may_spin()). Parking cost the consumer a registration, the
 * producer a wake, and the consumer a trip through the run queues, after
 * which it ran wherever its producer was: a consumer task serving 1000
 * runner tasks chased them from worker to worker (runners.tput.task.1000
 * 4.6-6.0 -> 9.0-9.8 M items/s). Without the next-slot check a ping-pong
 * of two tasks on one worker went from 280 to 822 ns a round trip: the
 * partner that would answer waited in the slot while its caller looked.
 *
 * The looks adapt (look_dyn, a relaxed hint per queue, like the spin
 * budget): a poll whose looks found elements lets later polls look
 * POLL_LOOKS times, one that looked in vain lowers the allowance by one
 * (halving it cut the looks too often for 1000 runners), and at zero polls
 * park at once except for one look in the process-wide probe windows
 * (qf_spin-impl.h). With 10,000 runners a consumer sometimes looked while
 * the runners that would fill the queue sat in its own worker's ring, and
 * every element cost the whole look (0.8 M items/s against 4-7 M).
 * Not when the queue's spin_ns turns spinning off.
 *
 * Only takes look. Polls of a full queue looking for room the same way
 * took no more elements through (runners.tput.task.1000 9.9-11.1 against
 * 9.2-12.4 M items/s with the takes' looks alone) and made a start of
 * 1000 or 10,000 runner tasks slower to give every runner its first
 * element in the queue (runners.fair.1000.first 2.0-2.3 ms against
 * 0.6-0.9; 10,000: 15-21 ms against 5.6-7.1): each runner found the queue
 * full and spent its looks there, one in many catching a freed slot and
 * so keeping the allowance up, while runners that had not put anything
 * yet waited for the worker. */
#define POLL_LOOKS 8
#define POLL_PAUSES 8

static bool poll_look_again(qf__fifo *f, unsigned *looks)
{
    if (f->spin_ns <= 0 || ncpus() < 2)
        return false;
    int32_t allowed = atomic_load_explicit(&f->look_dyn, memory_order_relaxed);
    if (*looks == 0 && allowed <= 0) {
        if (!qf__spin_probe_window(qf_now_ns()))
            return false;
        allowed = POLL_LOOKS;
    }
    if (*looks >= (unsigned)allowed || !qf__task_may_spin()) {
        if (*looks > 0 && allowed > 0) /* it looked, in vain: fewer next time */
            atomic_store_explicit(&f->look_dyn, allowed - 1, memory_order_relaxed);
        return false;
    }
    (*looks)++;
    for (int i = 0; i < POLL_PAUSES; i++)
        qf__cpu_relax();
    return true;
}

/* A poll that looked again found elements: later ones may look in full. */
static void poll_looks_paid(qf__fifo *f, unsigned looks)
{
    if (looks > 0 && atomic_load_explicit(&f->look_dyn, memory_order_relaxed) != POLL_LOOKS)
        atomic_store_explicit(&f->look_dyn, POLL_LOOKS, memory_order_relaxed);
}

/* Slip: threads that meet at either end of a ring wait a moment for a
 * stretch of it, so that their lines cross the cores a stretch at a time.
 *
 * The empty end. A consumer thread that finds the ring empty while a
 * producer streams into it reads each cell just after its producer wrote
 * it; in a spread ring (qf_ring-impl.h, note 8) every index is on a line
 * of its own, so each element costs the producer a line fetched back from
 * the consumer's cache (its publishing RMW waits for it) and the consumer
 * a miss. So a consumer thread's first wait on an empty ring first
 * watches the mark of the last index of a stretch (c + stretch - 1,
 * slip_wait()), letting the producer get a stretch ahead (FastForward's
 * "temporal slipping").
 *
 * The stretch (slip_stretch()) is a quarter of the ring, 64 to 256
 * elements. The longer it is, the longer the two threads work apart: with
 * 64, a pair of threads near empty still met every 64 elements, and the
 * consumer's look at the mark took the line the producer was about to
 * write; 256 ran 1.1-1.25x as fast (README, Measured, "A stretch of a
 * quarter of the ring"). The time allowed grows with it (SLIP_STEP_NS a
 * SLIP_STEP: 4 to 16 us), and the pace is checked once a step's time: a
 * step more must be there by then, or the wait ends. So the partner is
 * asked for the same rate (16 M elements/s) whatever the ring, and a wait
 * with no partner costs SLIP_STEP_NS, as with stretches of 64. A burst of
 * a step or more that then stops keeps the wait until the next check (up
 * to SLIP_STEP_NS after the burst), and counts as a stream seen.
 *
 * The full end. There each take frees one slot, which the producer fills
 * at once: its cached c_head (qf_ring-impl.h, note 2) says full at every
 * put, so every put reads c_head from the consumer's line and every take's
 * claim fetches that line back: one transfer each way per element, and
 * the state holds for whole runs (a pair of threads at 3-5 M items/s with
 * the ring full, against 15-20 M near empty, on this project's VM). So a
 * producer thread whose cached view says full (at_full_end(): two loads
 * of its own lines) first waits for room for a stretch (slip_room()),
 * looking at c_head only a few times, far apart: each look takes the line
 * from the consumer, and a consumer slowed that way never frees the
 * stretch in time. Room for SLIP_SOME at its last look counts as a stretch
 * seen: a consumer still slowed by the full end it is leaving frees the
 * stretch late, and a back-off then would keep the pair at that end.
 *
 * Both waits are only ever spins, before the call's own spin and sleep,
 * for at most slip_ns() (or the queue's spin_ns, when smaller) and not past
 * the caller's deadline (the consumer's reads the clock about half a
 * microsecond apart); each ends early when another thread on its own side
 * moves the index it watches, and the producer's when the queue closes.
 * The call then goes on as before: the take finds what was published
 * meanwhile, or waits as it would have; the put reserves what room there
 * is, or waits as it would have. So no wake can be missed: the wait/wake
 * protocol is not entered. A close during a slip is seen when it ends.
 *
 * A try that times out (no stream: a ping-pong, a burst shorter than a
 * step, a partner slower than SLIP_STEP elements per SLIP_STEP_NS) skips
 * the next 64, 128, ... up to 4,096 waits of its side before it tries
 * again; one that succeeds resets that. A ping-pong's round therefore
 * pays SLIP_STEP_NS once in 4,096 rounds. Not for tasks (a poll never spins
 * that long), the try forms, enqueues of more than SLIP_ROWS_MAX rows (a
 * multi-row enqueue's own refill protocol serves those), queues that may
 * not spin (spin_ns < 0, one CPU, a spin budget cut to nothing on a busy
 * machine), queues of capacity under 4 * SLIP_STEP or rings without
 * marks, nor the full end of a queue that spills to its overflow list
 * (capacity over 2^20 - 1, or unbounded). A slip that keeps succeeding is
 * never backed off: a stream that fills the stretch in just under slip_ns()
 * delays the first element of each stretch by up to that much; that is
 * the trade.
 *
 * Measured (README, Measured, "Threads that wait for a stretch"): a pair
 * of threads through a pointer queue of 1,024, core-to-core ~220 ns,
 * near empty 15.5-16.2 -> 17.1-18.4 M items/s; with a consumer slow enough
 * to keep the ring full, 3.3-5.1 -> 28.8-31.8 M (both with stretches of
 * 64). */
#define SLIP_STEP 64u /* a stretch is a multiple of this */
#define SLIP_STRETCH_MAX 256u
#define SLIP_STEP_NS 4000 /* the time a stretch may take, per SLIP_STEP */
#define SLIP_ROWS_MAX 63u /* the most rows an enqueue that slips may put */
#define SLIP_SKIP_MIN 64
#define SLIP_FAILS_MAX 6 /* 64 << 6 = 4,096 waits skipped */
#define SLIP_ROOM_FIRST_NS 250
#define SLIP_SOME 8 /* room at the last look that still counts as progress */

/* The stretch a slip waits for in ring r: a quarter of its capacity in
 * whole SLIP_STEPs, at most SLIP_STRETCH_MAX (64 from a capacity of 256,
 * 128 from 512, 192 from 768, 256 from 1,024 on). */
static unsigned slip_stretch(const qf__ring *r)
{
    unsigned s = r->cap / 4 / SLIP_STEP * SLIP_STEP;
    return s > SLIP_STRETCH_MAX ? SLIP_STRETCH_MAX : s;
}

unsigned qf__fifo_slip_stretch(const qf__fifo *f)
{
    return f->ring.marks ? slip_stretch(&f->ring) : 0;
}

/* How long a slip for a stretch of `stretch` may spin: SLIP_STEP_NS a
 * SLIP_STEP (the same rate asked of the partner whatever the stretch), or
 * less when the queue's spin_ns is. */
static int64_t slip_ns(const qf__fifo *f, unsigned stretch)
{
    int64_t ns = (int64_t)SLIP_STEP_NS * (stretch / SLIP_STEP);
    return f->spin_ns < ns ? f->spin_ns : ns;
}

static bool slip_may_spin(qf__fifo *f)
{
    qf__ring *r = &f->ring;
    return f->spin_ns > 0 && r->marks && r->cap >= 4 * SLIP_STEP && ncpus() >= 2 &&
           !qf__in_task() && atomic_load_explicit(&f->spin_dyn, memory_order_relaxed) > 0;
}

/* Whether this wait may try (one skipped try counted otherwise). */
static bool slip_turn(_Atomic int32_t *skip)
{
    int32_t k = atomic_load_explicit(skip, memory_order_relaxed);
    if (k > 0) {
        atomic_store_explicit(skip, k - 1, memory_order_relaxed);
        return false;
    }
    return true;
}

static void slip_result(_Atomic int32_t *skip, _Atomic int32_t *fails, bool seen)
{
    int32_t k = atomic_load_explicit(fails, memory_order_relaxed);
    if (seen) {
        if (k != 0)
            atomic_store_explicit(fails, 0, memory_order_relaxed);
        return;
    }
    if (k < SLIP_FAILS_MAX)
        atomic_store_explicit(fails, k + 1, memory_order_relaxed);
    atomic_store_explicit(skip, SLIP_SKIP_MIN << k, memory_order_relaxed);
}

/* Whether a producer's cached view of c_head says the ring is full for n
 * more (see "Slip" above): its own lines only. */
static bool at_full_end(qf__fifo *f, size_t n)
{
    qf__ring *r = &f->ring;
    unsigned p = QF__LD(&r->ring.p_head, RELAXED);
    unsigned c = QF__LD(&r->prod_cached_c, RELAXED);
    return !f->spill && n <= SLIP_ROWS_MAX && p - c + n > r->cap;
}

/* When the producer's wait looks at c_head after its look at `wait` ns:
 * twice as late up to a step's time, then a step's time later. */
static int64_t slip_next_look(int64_t wait)
{
    return wait < SLIP_STEP_NS ? wait * 2 : wait + SLIP_STEP_NS;
}

/* A producer thread's wait at the full end (see "Slip" above). A closed
 * queue is not waited for; a wait cut short by the deadline or by another
 * producer's put counts neither way. Room seen goes into the producers'
 * cached c_head, as the reserve's own look would (else a multi-row put,
 * whose reserve looks only when its cache says full, could take part of
 * its rows against the stale copy and go into line beside the room). */
static void slip_room(qf__fifo *f, qf_deadline deadline)
{
    if (atomic_load_explicit(&f->state, memory_order_relaxed) & (QF__CLOSED | QF__CANCELLED))
        return;
    if (!slip_may_spin(f) || !slip_turn(&f->room_skip))
        return;
    qf__ring *r = &f->ring;
    unsigned p = QF__LD(&r->ring.p_head, RELAXED);
    unsigned stretch = slip_stretch(r);
    int64_t start = qf_now_ns(), limit = slip_ns(f, stretch);
    /* c_head is read at 250 ns, 500 ns, 1 us, 2 us and 4 us (each twice
     * as late), then once a step's time up to the limit (8, 12 and 16 us
     * for a stretch of 256), not in a loop: each read takes the line from
     * the consumer, whose next claim must fetch it back, and a consumer
     * slowed that way would never free the stretch in time. */
    for (int64_t wait = SLIP_ROOM_FIRST_NS; wait <= limit; wait = slip_next_look(wait)) {
        int64_t look = start + wait, now;
        while ((now = qf_now_ns()) < look && !qf_deadline_passed(deadline))
            for (int i = 0; i < SPIN_PAUSES * 2; i++)
                qf__cpu_relax();
        if (now < look)
            return; /* the deadline */
        unsigned c = QF__LD(&r->ring.c_head, ACQUIRE);
        if (p - c + stretch <= r->cap) {
            QF__ST(&r->prod_cached_c, c, RELEASE);
            slip_result(&f->room_skip, &f->room_fails, true);
            return;
        }
        if (QF__LD(&r->ring.p_head, RELAXED) != p ||
            (atomic_load_explicit(&f->state, memory_order_relaxed) & (QF__CLOSED | QF__CANCELLED)))
            return; /* another producer put, or a close: not ours to wait for */
        /* The pace: by each step's time a step more of room, else the
         * stretch is not coming (so a wait with no consumer costs 4 us,
         * whatever the stretch). */
        unsigned due = wait < SLIP_STEP_NS ? 0 : SLIP_STEP * (unsigned)(wait / SLIP_STEP_NS);
        if (slip_next_look(wait) > limit || p - c + due > r->cap) {
            /* The last look. Some room is progress all the same: a
             * consumer slowed by the full end itself frees the stretch
             * late, and backing off would leave the pair there. */
            bool some = p - c + SLIP_SOME < r->cap;
            if (some)
                QF__ST(&r->prod_cached_c, c, RELEASE);
            slip_result(&f->room_skip, &f->room_fails, some);
            return;
        }
    }
    slip_result(&f->room_skip, &f->room_fails, false);
}

/* A consumer thread's wait (see above). The clock is read every
 * SLIP_CLOCK_EVERY rounds (about half a microsecond apart), so the wait
 * ends that much after its time or the deadline at most; one that the
 * deadline or another consumer's take cuts short counts neither way. */
#define SLIP_CLOCK_EVERY 4
static void slip_wait(qf__fifo *f, qf_deadline deadline)
{
    if (!slip_may_spin(f) || !slip_turn(&f->slip_skip))
        return;
    qf__ring *r = &f->ring;
    unsigned c = QF__LD(&r->ring.c_head, RELAXED), stretch = slip_stretch(r);
    int64_t start = qf_now_ns(), end = start + slip_ns(f, stretch);
    /* The pace: by each step's time (`pace`) a step more (`due`) must be
     * there, else the stretch is not coming; the mark of the step's end
     * is loaded then only, not watched (its line is the producer's). A
     * wait with no producer costs a step's time, whatever the stretch. */
    int64_t pace = start + SLIP_STEP_NS;
    unsigned due = SLIP_STEP;
    for (unsigned n = 1;; n++) {
        /* Acquire is enough: the take that follows loads the marks again
         * with its own ordering; this load only decides when to look. */
        if (qf__ring_is_published(r, c + stretch - 1, memory_order_acquire)) {
            slip_result(&f->slip_skip, &f->slip_fails, true);
            return;
        }
        if (QF__LD(&r->ring.c_head, RELAXED) != c)
            return; /* another consumer took: not ours to wait for */
        if (n % SLIP_CLOCK_EVERY == 0) {
            if (qf_deadline_passed(deadline))
                return;
            int64_t now = qf_now_ns();
            if (now >= end)
                break;
            if (now >= pace) {
                if (!qf__ring_is_published(r, c + due - 1, memory_order_acquire))
                    break;
                pace += SLIP_STEP_NS;
                due += SLIP_STEP;
            }
        }
        for (int i = 0; i < SPIN_PAUSES; i++)
            qf__cpu_relax();
    }
    /* Steps that kept the pace are progress: no back-off for them. */
    slip_result(&f->slip_skip, &f->slip_fails, due > SLIP_STEP);
}

static void oom_abort(const char *what)
{
    fprintf(stderr, "qflow: out of memory %s\n", what);
    abort();
}

/* ------------------------------------------------------------- producers */

qf_code qf__fifo_closed_for(const qf__fifo *f, uint64_t s, bool pending)
{
    if (s & QF__CANCELLED)
        return pending ? qf__fifo_err_enqueue_cancelled() : err_closed(f);
    if ((s & QF__CLOSED) && !pending)
        return err_closed(f);
    return QF_OK;
}

/* Slots the ring may hold now: the capacity less what a gathering consumer
 * gave back to the stash (the stash is in front and counts). */
static unsigned ring_limit(qf__fifo *f)
{
    uint32_t st = atomic_load_explicit(&f->stash_n, memory_order_relaxed);
    if (st == 0)
        return f->ring.cap;
    return st >= f->ring.cap ? 0 : f->ring.cap - st;
}

/* Unbounded (or huge) queues: the overflow list behind the ring. Puts all
 * n slots or none; returns true when they went in (or the queue refused them
 * with *ret_err), false when there is no room for all n. */
static bool overflow_push(qf__fifo *f, void *const *slots, size_t n, bool pending, bool *arrive,
                          qf_code *ret_err)
{
    /* This producer's own earlier ring slots may be behind another
     * producer's unpublished slot (qf_ring-impl.h note 4), so not takeable
     * yet; a consumer that finds the ring dry takes from the list, so they
     * must be takeable before anything goes behind them. */
    if (!f->single_producer)
        qf__ring_wait_carried(&f->ring);
    qf__lock(&f->side_lock);
    if (!f->unbounded_cap) {
        uint64_t used = qf__ring_reserved(&f->ring) + f->overflow.len +
                        atomic_load_explicit(&f->stash_n, memory_order_relaxed);
        if (used + n > (uint64_t)f->capacity) {
            qf__unlock(&f->side_lock);
            return false;
        }
    }
    /* Announce first, then check closed: a consumer that saw it settled
     * either misses the announcement (and we then see CLOSED) or waits. */
    atomic_fetch_add_explicit(&f->overflow_n, (uint32_t)n, memory_order_seq_cst);
    *ret_err = qf__fifo_closed_for(f, state_sc(f), pending);
    if (*ret_err != QF_OK) {
        atomic_fetch_sub_explicit(&f->overflow_n, (uint32_t)n, memory_order_seq_cst);
        qf__unlock(&f->side_lock);
        return true;
    }
    /* These fill the queue and the caller has more: it arrives before any
     * consumer can take from the list (which it does under this lock). */
    if (arrive && !f->unbounded_cap &&
        qf__ring_reserved(&f->ring) + f->overflow.len + n +
                atomic_load_explicit(&f->stash_n, memory_order_relaxed) >=
            (uint64_t)f->capacity) {
        qf__fifo_arrive(f);
        *arrive = true;
    }
    for (size_t i = 0; i < n; i++)
        if (!qf__deque_push_back(&f->overflow, slots[i]))
            oom_abort("growing an unbounded queue");
    qf__unlock(&f->side_lock);
    return true;
}

/* qf__fifo_put_now() of one element (f->put_one: a bounded ring with
 * marks, of pointers with spread indices or of cells, any number of
 * producers; set by qf__fifo_init()): the loop below for n == 1, without
 * the loop (a put of one element is most of a queue's traffic, and its
 * instructions are what two tasks trading elements on one worker pay:
 * queue.tput.tasks; and, in a ring of cells, what a packed element's
 * enqueue pays on top of making its tensors). */
static inline __attribute__((always_inline)) size_t
put_one_now(qf__fifo *f, void *v, bool pending, qf_code *ret_err, size_t *ret_published)
{
    unsigned t;
    *ret_published = 0;
    if (qf__ring_reserve(&f->ring, 1, false, false, ring_limit(f), &t) == 0)
        return 0;
    qf_code err = qf__fifo_closed_for(f, state_sc(f), pending);
    if (err != QF_OK) {
        /* Reserved after a close: publish a tombstone, fail. */
        qf__ring_write_tombstone(&f->ring, t);
        *ret_published = qf__ring_publish(&f->ring, t, 1, false);
        *ret_err = err;
        return 0;
    }
    if (f->ring.cell_words) {
        *ret_published = qf__ring_put_one_cell(&f->ring, t, v);
    } else {
        *ret_published = qf__ring_put_one_ptr(&f->ring, t, v);
    }
    return 1;
}

size_t qf__fifo_put_now(qf__fifo *f, void *const *slots, size_t n, bool pending, bool all,
                        bool *arrive, qf_code *ret_err, size_t *ret_published)
{
    size_t done = 0, published = 0;
    *ret_err = QF_OK;
    if (n == 1 && f->put_one && !(arrive && *arrive))
        return put_one_now(f, slots[0], pending, ret_err, ret_published);
    while (done < n && !(arrive && *arrive)) {
        unsigned ticket = 0;
        size_t k = 0;
        bool to_overflow = f->spill && atomic_load_explicit(&f->overflow_n, memory_order_acquire);
        if (!to_overflow)
            k = qf__ring_reserve(&f->ring, n - done, f->single_producer, all, ring_limit(f),
                                 &ticket);
        if (k > 0) {
            qf_code err = qf__fifo_closed_for(f, state_sc(f), pending);
            if (err != QF_OK) {
                /* Reserved after a close: publish tombstones, fail. */
                for (size_t i = 0; i < k; i++)
                    qf__ring_write_tombstone(&f->ring, ticket + (unsigned)i);
                published += qf__ring_publish(&f->ring, ticket, (unsigned)k, f->single_producer);
                *ret_err = err;
                break;
            }
            /* A reservation short of what is left filled the queue (a
             * spilling ring's does not: the list goes on behind it). */
            if (arrive && !f->spill && k < n - done) {
                qf__fifo_arrive(f);
                *arrive = true;
            }
            published +=
                qf__ring_put_run(&f->ring, ticket, slots + done, (unsigned)k, f->single_producer);
            done += k;
            continue;
        }
        if (!f->spill)
            break;
        /* A try of several rows goes in whole or not at all. */
        size_t m = all ? n - done : 1;
        qf_code err = QF_OK;
        if (!overflow_push(f, slots + done, m, pending, arrive && m < n - done ? arrive : NULL,
                           &err))
            break;
        if (err != QF_OK) {
            *ret_err = err;
            break;
        }
        done += m;
        published += m;
    }
    *ret_published = published;
    return done;
}

/* ------------------------------------------------- single producer/consumer */

/* A queue created single-producer (single-consumer) stores its ring index
 * with a plain store: two producers at once lose elements silently (issue
 * 24: 42,908 of 60,000 arrived). Each call on that side claims the side
 * with an exchange on a line only that side touches and releases it with
 * a store, for the whole call, blocking included: a second call at the same
 * time is refused, deterministically so while the first one waits. The
 * multi-producer and multi-consumer paths do not look at it. On
 * queue.tput.spsc the difference was within this machine's run-to-run
 * spread (issue 24 report). */
static qf_code err_single(const qf__fifo *f, const char *side, const char *flag, const char *op)
{
    return qf_set_error(QF_FAILED_PRECONDITION,
                        "%s '%s' was created single-%s (%s) but another %s is running on it at "
                        "the same time",
                        f->kind_name, f->name, side, flag, op);
}

qf_code qf__fifo_sp_claim(qf__fifo *f)
{
    if (atomic_exchange_explicit(&f->sp_busy, 1, memory_order_acquire) != 0)
        return err_single(f, "producer", "QF_QUEUE_SINGLE_PRODUCER", "enqueue");
    return QF_OK;
}

void qf__fifo_sp_release(qf__fifo *f)
{
    atomic_store_explicit(&f->sp_busy, 0, memory_order_release);
}

static inline qf_code fifo_put(qf__fifo *f, void *const *slots, size_t n, const qf__wait *w,
                               size_t *ret_done);
static inline qf_code fifo_take(qf__fifo *f, size_t min, size_t max, bool up_to, const qf__wait *w,
                                void **ret_slots, size_t *ret_n);

qf_code qf__fifo_put(qf__fifo *f, void *const *slots, size_t n, const qf__wait *w, size_t *ret_done)
{
    if (!f->single_producer)
        return fifo_put(f, slots, n, w, ret_done);
    qf_code rc = qf__fifo_sp_claim(f);
    if (rc != QF_OK) {
        if (ret_done)
            *ret_done = 0;
        return rc;
    }
    rc = fifo_put(f, slots, n, w, ret_done);
    qf__fifo_sp_release(f);
    return rc;
}

qf_code qf__fifo_take(qf__fifo *f, size_t min, size_t max, bool up_to, const qf__wait *w,
                      void **ret_slots, size_t *ret_n)
{
    if (!f->single_consumer)
        return fifo_take(f, min, max, up_to, w, ret_slots, ret_n);
    if (atomic_exchange_explicit(&f->sc_busy, 1, memory_order_acquire) != 0)
        return err_single(f, "consumer", "QF_QUEUE_SINGLE_CONSUMER", "dequeue");
    qf_code rc = fifo_take(f, min, max, up_to, w, ret_slots, ret_n);
    atomic_store_explicit(&f->sc_busy, 0, memory_order_release);
    return rc;
}

/* Nothing went in: the queue is full for this producer. A closed queue
 * fails rather than waits; the try form fails; a task waits for room
 * (registered: QF_PENDING); a thread becomes pending (a plain close then
 * lets it finish, and consumers wait for it before reporting end-of-data),
 * spins, and then waits in line while consumers put its rows in (*done
 * grows). QF_OK: try again; anything else ends the enqueue. */
static qf_code put_full(qf__fifo *f, void *const *slots, size_t n, size_t *done, const qf__wait *w,
                        bool *pending, spin *sp)
{
    qf_code rc = qf__fifo_closed_for(f, state_sc(f), *pending);
    if (rc != QF_OK)
        return rc;
    if (w->mode == QF__WAIT_TRY)
        return qf__set_error_static(QF_UNAVAILABLE, "queue is full");
    if (w->mode == QF__WAIT_POLL)
        return qf__fifo_wait_room_poll(f, w->waker);
    if (!*pending) {
        if (!qf__fifo_become_pending(f, &rc))
            return rc;
        *pending = true;
    }
    if (qf_deadline_passed(w->deadline))
        return qf__fifo_err_timeout();
    if (spin_once(f, sp))
        return QF_OK;
    if (qf__in_task())
        return qf__blocking_in_task_error("A blocking enqueue");
    spin_release(f, sp);
    return qf__fifo_wait_request(f, slots, n, done, w->deadline, false);
}

/* Whether a multi-row thread enqueue should spin for room for all of its
 * n rows rather than put what fits and go into line (see fifo_put()): the
 * queue open, the deadline not passed, room for fewer than n, and the
 * spin budget not spent. A guess from plain loads: a wrong one only costs
 * a spin or a wait in line. */
static bool spin_for_room(qf__fifo *f, size_t n, const qf__wait *w, spin *sp)
{
    if (f->unbounded_cap || (uint64_t)f->capacity < n)
        return false;
    if (atomic_load_explicit(&f->state, memory_order_relaxed) & (QF__CLOSED | QF__CANCELLED))
        return false;
    if (qf__fifo_used(f, false) + n <= (uint64_t)f->capacity)
        return false;
    return !qf_deadline_passed(w->deadline) && spin_once(f, sp);
}

/* fifo_put()'s first round for one element, when it fits at once: what
 * the loop below does then, without its set-up. False: not done (the
 * queue is full or refused it; *ret_rc says which), and the caller goes
 * on with the loop, which looks again. */
static bool put_one_first(qf__fifo *f, void *v, size_t *ret_done, qf_code *ret_rc)
{
    *ret_rc = qf__fifo_closed_for(f, atomic_load_explicit(&f->state, memory_order_acquire), false);
    if (*ret_rc != QF_OK)
        return false;
    size_t published = 0;
    size_t k = put_one_now(f, v, false, ret_rc, &published);
    qf__fifo_wake_consumers(f, published);
    if (k == 0)
        return false;
    if (ret_done)
        *ret_done = 1;
    return true;
}

static qf_code fifo_put_loop(qf__fifo *f, void *const *slots, size_t n, const qf__wait *w,
                             size_t *ret_done);

/* A put: its first round for one element here, the loop out of line
 * (fifo_put_loop()), so that a put that fits at once does not pay for the
 * loop's frame and set-up. The first round is still a call of
 * put_one_first() (the compiler keeps it out of line: two callers), into
 * which put_one_now() is inlined; take_now() is inlined into the take's
 * first round. Each frame on the way saved and restored its registers,
 * about 20 instructions: callgrind of one thread putting and taking 100
 * at a time, a put and a take of a pointer 439 -> 335 instructions, of a
 * packed (int64, int64) element 1,330 -> 1,240. */
static inline __attribute__((always_inline)) qf_code
fifo_put(qf__fifo *f, void *const *slots, size_t n, const qf__wait *w, size_t *ret_done)
{
    if (w->mode == QF__WAIT_DEADLINE && at_full_end(f, n))
        slip_room(f, w->deadline);
    if (n == 1 && f->put_one) {
        qf_code rc;
        if (put_one_first(f, slots[0], ret_done, &rc))
            return QF_OK;
        if (rc != QF_OK) {
            if (ret_done)
                *ret_done = 0;
            return rc;
        }
    }
    return fifo_put_loop(f, slots, n, w, ret_done);
}

/* fifo_put() past its first round. */
static __attribute__((noinline)) qf_code fifo_put_loop(qf__fifo *f, void *const *slots, size_t n,
                                                       const qf__wait *w, size_t *ret_done)
{
    size_t done = 0;
    bool pending = false;
    spin sp = {0};
    qf_code rc = QF_OK;
    bool try_all = w->mode == QF__WAIT_TRY && n > 1;
    /* A thread's enqueue_many that fills the queue goes into line before
     * its rows become visible (qf_fifo_wait.c, "Refill"); one row never
     * fills the queue part-way, so single enqueues skip this. */
    bool arrived = false;
    bool *arrive = n > 1 && w->mode == QF__WAIT_DEADLINE && !qf__in_task() ? &arrived : NULL;

    if (n > 1 && w->mode == QF__WAIT_DEADLINE) {
        /* A multi-row enqueue is pending from its start, so a plain close
         * between its rows cannot cut it in two (spec 30, 59). */
        if (!qf__fifo_become_pending(f, &rc)) {
            if (ret_done)
                *ret_done = 0;
            return rc;
        }
        pending = true;
    } else if ((rc = qf__fifo_closed_for(f, atomic_load_explicit(&f->state, memory_order_acquire),
                                         pending)) != QF_OK) {
        /* Already closed: refuse before reserving, so no tombstone. */
        if (ret_done)
            *ret_done = 0;
        return rc;
    }
    while (done < n) {
        /* Put part of its rows in, this enqueue would go into line and
         * sleep until consumers put the rest in; while they are taking,
         * room for all of it is usually a spin away. */
        if (arrive && spin_for_room(f, n - done, w, &sp))
            continue;
        size_t published = 0;
        size_t k =
            qf__fifo_put_now(f, slots + done, n - done, pending, try_all, arrive, &rc, &published);
        qf__fifo_wake_consumers(f, published);
        done += k;
        if (arrived) {
            arrived = false;
            if (rc != QF_OK || done == n) {
                qf__fifo_arrive_undo(f);
                break;
            }
            /* Pending already (a multi-row thread enqueue is from its
             * start). No spin: consumers that freed room wait for us. */
            spin_release(f, &sp);
            rc = qf__fifo_wait_request(f, slots, n, &done, w->deadline, true);
            if (rc != QF_OK)
                break;
            continue;
        }
        if (rc != QF_OK || done == n)
            break;
        if (k > 0) {
            spin_release(f, &sp);
            continue;
        }
        rc = put_full(f, slots, n, &done, w, &pending, &sp);
        if (rc != QF_OK)
            break;
    }
    spin_release(f, &sp);
    if (pending)
        qf__fifo_drop_pending(f);
    if (ret_done)
        *ret_done = done;
    return done == n ? QF_OK : rc;
}

/* ------------------------------------------------------------- consumers */

/* The stash's first n values into out[0..n). In a ring of cells (note 9
 * of qf_ring-impl.h) out[i] is the caller's buffer and a stash entry a
 * copy of the engine's own (put_back()): its words move to the buffer and
 * the copy is freed. Under the side lock. */
static void stash_pop(qf__fifo *f, void **out, size_t n)
{
    if (!f->ring.cell_words) {
        qf__deque_pop_front(&f->stash, out, n);
        return;
    }
    size_t bytes = 8 * (size_t)f->ring.cell_words;
    for (size_t i = 0; i < n; i++) {
        void *copy = NULL;
        qf__deque_pop_front(&f->stash, &copy, 1);
        memcpy(out[i], copy, bytes);
        free(copy);
    }
}

/* With a stash or an overflow list: in order stash, ring, overflow, at
 * least min of them or none, under the side lock (which holds the stash
 * and the overflow list still; the ring only shrinks under other consumers
 * or gains stragglers older than the overflow). *ret_freed: the room
 * made: stash elements, ring slots (tombstones too) and overflow elements
 * taken. */
static size_t take_side(qf__fifo *f, void **out, size_t min, size_t max, size_t *ret_freed)
{
    qf__lock(&f->side_lock);
    size_t s = f->stash.len, o = f->overflow.len;
    size_t a = s < max ? s : max;
    size_t r_min = min > a + o ? min - a - o : 0;
    size_t r = 0, freed = 0;
    if (a < max) {
        r = qf__ring_take(&f->ring, out + a, r_min ? r_min : 1, max - a, f->single_consumer,
                          &freed);
        if (freed == 0 && r_min > 0) {
            qf__unlock(&f->side_lock);
            *ret_freed = 0;
            return 0;
        }
        /* A take can stop short of what is published (a bound, a
         * tombstone run); before the list's turn the ring must be really
         * dry. */
        while (o > 0 && r < max - a) {
            size_t slots;
            r += qf__ring_take(&f->ring, out + a + r, 1, max - a - r, f->single_consumer, &slots);
            if (slots == 0)
                break;
            freed += slots;
        }
    }
    stash_pop(f, out, a);
    atomic_fetch_sub_explicit(&f->stash_n, (uint32_t)a, memory_order_seq_cst);
    size_t k = a + r, from_o = 0;
    if (k < max && o > 0) {
        /* The ring ran dry: the overflow list's elements are next. */
        from_o = qf__deque_pop_front(&f->overflow, out + k, max - k);
        atomic_fetch_sub_explicit(&f->overflow_n, (uint32_t)from_o, memory_order_seq_cst);
    }
    qf__unlock(&f->side_lock);
    /* Stash elements count against the capacity too: taking them is room. */
    *ret_freed = a + freed + from_o;
    return k + from_o;
}

/* Take between min and max elements now, or none (fewer than min only when
 * tombstones were among them). Wakes the producers the room lets in.
 * *ret_claimed: slots claimed, tombstones included; a take of tombstones
 * only returns 0 with *ret_claimed > 0, which is progress, not "empty". */
static inline __attribute__((always_inline)) size_t take_now(qf__fifo *f, void **out, size_t min,
                                                             size_t max, size_t *ret_claimed)
{
    size_t freed = 0, k;
    if (atomic_load_explicit(&f->stash_n, memory_order_acquire) == 0 &&
        !(f->spill && atomic_load_explicit(&f->overflow_n, memory_order_acquire))) {
        k = qf__ring_take(&f->ring, out, min, max, f->single_consumer, &freed);
    } else {
        k = take_side(f, out, min, max, &freed);
    }
    qf__fifo_wake_producers(f, freed);
    *ret_claimed = freed;
    return k;
}

/* Return taken elements to the front of the queue, in their order. */
static void put_back(qf__fifo *f, void *const *slots, size_t n)
{
    if (n == 0)
        return;
    void *small[16];
    void *const *keep = slots;
    if (f->ring.cell_words) {
        /* The values are in the caller's buffers: the stash keeps copies.
         * A copy that cannot be made aborts, as the stash's own growth
         * does: the caller's buffers are its only other home. */
        size_t bytes = 8 * (size_t)f->ring.cell_words;
        void **copies = n <= 16 ? small : malloc(n * sizeof(void *));
        if (!copies)
            oom_abort("returning elements to a queue");
        for (size_t i = 0; i < n; i++) {
            if (!(copies[i] = malloc(bytes)))
                oom_abort("returning elements to a queue");
            memcpy(copies[i], slots[i], bytes);
        }
        keep = copies;
    }
    qf__lock(&f->side_lock);
    if (!qf__deque_push_front(&f->stash, keep, n))
        oom_abort("returning elements to a queue");
    atomic_fetch_add_explicit(&f->stash_n, (uint32_t)n, memory_order_seq_cst);
    qf__unlock(&f->side_lock);
    if (keep != slots && keep != small)
        free((void *)keep);
    qf__fifo_wake_consumers(f, n);
}

void qf__fifo_give_back(qf__fifo *f, void *const *slots, size_t n)
{
    put_back(f, slots, n);
}

/* One dequeue in progress. */
typedef struct take_call {
    size_t min, max;
    bool up_to;
    void **slots;
    size_t got;     /* slots[0..got) are taken */
    bool holder;    /* counted in the state word's holders */
    unsigned looks; /* a poll's looks again (poll_look_again()) */
} take_call;

/* What a take does after take_at_closed(). */
typedef enum { TAKE_WAIT, TAKE_AGAIN, TAKE_DONE, TAKE_DRAINED } take_next;

/* Nothing to take now: is the queue closed and quiet, and what then? */
static take_next take_at_closed(qf__fifo *f, take_call *t)
{
    uint32_t holders;
    if (!qf__fifo_closed_quiet(f, &holders))
        return TAKE_WAIT;
    if (holders > (t->holder ? 1u : 0u)) {
        /* Closed and quiet, and other consumers hold parts of batches too:
         * if what is there does not complete ours, give ours back and stop
         * holding, so that one holder at a time can finish or fail (each
         * waiting for the others to give back would wait forever).
         * Elements now only move between consumers, so nothing is gathered
         * again. */
        if (!t->holder)
            return TAKE_WAIT;
        if (qf__fifo_available(f) + t->got < t->min) {
            put_back(f, t->slots, t->got);
            t->got = 0;
            t->holder = false;
            release_holder(f);
        }
        return TAKE_AGAIN;
    }
    /* Nothing more can arrive. */
    if (t->up_to) {
        /* Past any tombstones in front of what is left. */
        size_t n_claimed;
        do
            t->got += take_now(f, t->slots + t->got, 1, t->max - t->got, &n_claimed);
        while (t->got == 0 && n_claimed > 0);
        if (t->got > 0)
            return TAKE_DONE;
    } else if (qf__fifo_available(f) + t->got >= t->min) {
        return TAKE_AGAIN; /* it is all there after all */
    }
    return TAKE_DRAINED;
}

/* Nothing to take now and more may come: the try form fails (after
 * waiting out a publication on its way), a thread meets its deadline or
 * spins, then the caller waits (a task: registered, QF_PENDING). QF_OK: try
 * again. On failure what the call held is given back. */
static qf_code take_wait(qf__fifo *f, take_call *t, const qf__wait *w, unsigned *inflight, spin *sp)
{
    if (w->mode == QF__WAIT_TRY) {
        if ((*inflight)++ < INFLIGHT_SPINS && qf__ring_in_flight(&f->ring)) {
            qf__cpu_relax(); /* a publication is on its way */
            return QF_OK;
        }
        put_back(f, t->slots, t->got);
        return qf__set_error_static(QF_UNAVAILABLE, "queue is empty");
    }
    if (w->mode == QF__WAIT_DEADLINE && qf_deadline_passed(w->deadline)) {
        put_back(f, t->slots, t->got);
        return qf__fifo_err_timeout();
    }
    /* A one-element (or up-to) take's first wait: let a stream get ahead. */
    if (w->mode == QF__WAIT_DEADLINE && sp->end == 0 && t->min == 1 && t->got == 0)
        slip_wait(f, w->deadline);
    if (w->mode == QF__WAIT_DEADLINE && spin_once(f, sp))
        return QF_OK;
    if (w->mode == QF__WAIT_POLL && poll_look_again(f, &t->looks))
        return QF_OK;
    spin_release(f, sp);
    qf_code rc = qf__fifo_wait_elements(f, t->got > 0 || t->holder ? 1 : t->min, t->holder, w);
    if (rc != QF_OK)
        put_back(f, t->slots, t->got);
    return rc;
}

static qf_code fifo_take_loop(qf__fifo *f, size_t min, size_t max, bool up_to, const qf__wait *w,
                              void **ret_slots, size_t *ret_n, bool skip_try);

/* A take: its first round for one element inline here, the loop out of
 * line (fifo_take_loop()), as for fifo_put(). */
static inline __attribute__((always_inline)) qf_code fifo_take(qf__fifo *f, size_t min, size_t max,
                                                               bool up_to, const qf__wait *w,
                                                               void **ret_slots, size_t *ret_n)
{
    /* A task's poll that found the ring empty while another task waits in
     * its worker's next slot (no looks again: qf__task_may_spin() says no)
     * goes straight to its closed check and its registration, which looks
     * again: the loop's own first try found nothing either nearly always
     * (queue.pingpong.task.p50 281 -> 271 ns; tasks.p4c4 13.1-14.4 ->
     * 14.1-14.9 M in three rounds). For every other take that try stays:
     * without it, task polls whose slot was empty lost a quarter of
     * queue.tput.tasks.p4c4 before they could look again. */
    bool skip_try = false;
    if (max == 1) {
        /* The loop's first round for one element, when it is there. */
        size_t claimed;
        if (take_now(f, ret_slots, 1, 1, &claimed) == 1) {
            if (ret_n)
                *ret_n = 1;
            return QF_OK;
        }
        skip_try =
            claimed == 0 && w->mode == QF__WAIT_POLL && qf__in_task() && !qf__task_may_spin();
        if (skip_try) {
            /* What the loop's first round would do here, without the loop:
             * holding nothing (min is 1) and not looking again
             * (qf__task_may_spin() said no, and poll_look_again() would ask
             * it again: only a rescue emptying the next slot in between
             * could change the answer), it registers when the queue is not
             * closed and quiet; a closed and quiet queue is the loop's to
             * judge. A wait that parks returns here; one that finds
             * elements (or a close) goes on in the loop, at its take. Two
             * tasks trading one element on a worker: 2,444 -> 2,210
             * instructions a round trip (callgrind), 262 -> 256 ns. */
            uint32_t holders;
            if (!qf__fifo_closed_quiet(f, &holders)) {
                qf_code rc = qf__fifo_wait_elements(f, min, false, w);
                if (rc != QF_OK)
                    return rc;
                skip_try = false;
            }
        }
    }
    return fifo_take_loop(f, min, max, up_to, w, ret_slots, ret_n, skip_try);
}

/* fifo_take() past its first round (skip_try: see there). */
static __attribute__((noinline)) qf_code fifo_take_loop(qf__fifo *f, size_t min, size_t max,
                                                        bool up_to, const qf__wait *w,
                                                        void **ret_slots, size_t *ret_n,
                                                        bool skip_try)
{
    take_call t = {.min = min, .max = max, .up_to = up_to, .slots = ret_slots};
    spin sp = {0};
    unsigned inflight = 0;
    qf_code rc = QF_OK;
    /* Only a batch larger than the capacity is gathered as it arrives
     * (spec 52); a try form never gathers. */
    t.holder = w->mode != QF__WAIT_TRY && !f->unbounded_cap && min > (size_t)f->capacity;
    if (t.holder)
        atomic_fetch_add_explicit(&f->state, QF__HOLDER_ONE, memory_order_seq_cst);

    for (;;) {
        /* Holding some already (gathering, or tombstones cut a take
         * short): anything helps. Else all of min at once. */
        size_t lo = t.got > 0 || t.holder ? 1 : min;
        size_t claimed = 0;
        if (!skip_try)
            t.got += take_now(f, ret_slots + t.got, lo, max - t.got, &claimed);
        skip_try = false;
        if (t.got >= min)
            break;
        if (claimed > 0) {
            spin_release(f, &sp);
            continue;
        }
        if (t.got > 0 && !t.holder) {
            /* Others must not call the queue drained while we hold these. */
            atomic_fetch_add_explicit(&f->state, QF__HOLDER_ONE, memory_order_seq_cst);
            t.holder = true;
        }
        take_next next = take_at_closed(f, &t);
        if (next == TAKE_DONE)
            break;
        if (next == TAKE_AGAIN)
            continue;
        if (next == TAKE_DRAINED) {
            put_back(f, ret_slots, t.got);
            rc = err_insufficient(f, min);
            goto fail;
        }
        rc = take_wait(f, &t, w, &inflight, &sp);
        if (rc != QF_OK)
            goto fail;
    }
    spin_release(f, &sp);
    poll_looks_paid(f, t.looks);
    if (t.holder)
        release_holder(f);
    if (ret_n)
        *ret_n = t.got;
    return QF_OK;
fail:
    spin_release(f, &sp);
    if (t.holder)
        release_holder(f);
    return rc;
}

/* The ring's published count (qf_ring-impl.h note 4): the run of published
 * slots from c_head. Concurrent takes and puts make it a snapshot; it is
 * clamped to the capacity (a c_head read before a later p_head can
 * overstate the room between them). */
static int64_t ring_count(qf__ring *r)
{
    unsigned c;
    unsigned n = qf__ring_published_end(r, &c) - c;
    return n > r->cap ? r->cap : n;
}

int64_t qf__fifo_size(const qf__fifo *f)
{
    qf__fifo *mf = (qf__fifo *)f;
    int64_t n = ring_count(&mf->ring);
    /* tomb_n also counts tombstones not yet published and ones claimed but
     * not yet uncounted, and moves between the two loads: while a close
     * race is settling, the size can be off by those, in either direction
     * (the clamp hides only a negative result). Exact once it settles. */
    n -= atomic_load_explicit(&mf->ring.tomb_n, memory_order_relaxed);
    if (n < 0)
        n = 0;
    n += atomic_load_explicit(&mf->stash_n, memory_order_relaxed);
    n += atomic_load_explicit(&mf->overflow_n, memory_order_relaxed);
    return n;
}

qf_code qf__fifo_close(qf__fifo *f, bool cancel)
{
    uint64_t bits = QF__CLOSED | (cancel ? QF__CANCELLED : 0);
    uint64_t old = atomic_fetch_or_explicit(&f->state, bits, memory_order_seq_cst);
    if (!cancel && (old & QF__CLOSED))
        return qf_set_error(QF_CANCELLED, "Queue '%s' is already closed.", f->name);
    /* Held wakes go out (qf_fifo_wait.c, "Held wakes"): a held request's
     * pending count must drop before end-of-data; none is held after. */
    qf__fifo_release_held(f);
    if (cancel)
        qf__fifo_cancel_requests(f);
    /* Everyone re-checks: blocked consumers may now be at end-of-data,
     * cancelled producers must fail, poll-mode producers are refused. */
    qf__fifo_wake_all(f);
    return QF_OK;
}

bool qf__fifo_cancel_poll(qf__fifo *f, qf_waker *w)
{
    (void)f;
    /* A wake that came and is now abandoned is passed on (qf_waker.c). */
    return qf_waker_withdraw(w);
}

void qf__fifo_drain_all(qf__fifo *f, qf__release_fn release, void *ctx)
{
    void *buf[64];
    size_t k;
    if (f->ring.cell_words) {
        /* Values in cells own nothing; the stash holds the engine's copies
         * (put_back()). Such a ring never spills. */
        while ((k = qf__deque_pop_front(&f->stash, buf, 64)) > 0)
            for (size_t i = 0; i < k; i++)
                free(buf[i]);
        return;
    }
    while ((k = qf__deque_pop_front(&f->stash, buf, 64)) > 0)
        for (size_t i = 0; i < k; i++)
            release(ctx, buf[i]);
    size_t slots;
    do {
        k = qf__ring_take(&f->ring, buf, 1, 64, true, &slots);
        for (size_t i = 0; i < k; i++)
            release(ctx, buf[i]);
    } while (slots > 0);
    while ((k = qf__deque_pop_front(&f->overflow, buf, 64)) > 0)
        for (size_t i = 0; i < k; i++)
            release(ctx, buf[i]);
}

/* ------------------------------------------------------- setup, teardown */

/* A ring of more slots than this is not made: larger (and unbounded)
 * queues spill into the overflow list behind a ring of this size (or of
 * UNBOUNDED_RING_SLOTS when there is no limit at all). */
#define RING_MAX_SLOTS (1u << 20)
#define UNBOUNDED_RING_SLOTS 4096u
/* A ring of cells (qf__fifo_config's value_bytes) is made, and its marks
 * written, at its full size when the queue is; above this many bytes
 * (32768 cells of 128 bytes, 131072 of 32) the values go by pointer
 * instead, as they do when the cells cannot be allocated. */
#define CELLS_MAX_BYTES ((size_t)4 << 20)

/* A ring's memory, 128-byte aligned (qf_ring-impl.h, note 10). Rings of
 * QF__PAGEMEM_MIN bytes and more (a queue of about 4,000 pointers or more)
 * are on huge pages and kept warm for the next queue: fresh, they cost a
 * fault per 4 KiB page at first use, which made a queue of capacity 16,384
 * cost 2-3 ms before its first elements moved (qf_pagemem-impl.h). */
static void *ring_alloc(qf__fifo *f, size_t bytes)
{
    bytes = (bytes + 127) & ~(size_t)127;
    f->ring_bytes = bytes;
    if (bytes >= QF__PAGEMEM_MIN)
        return qf__pagemem_alloc(bytes, 128);
    return aligned_alloc(128, bytes);
}

/* Room a consumer thread may leave unfilled (qf_fifo_wait.c, "Room left
 * for a returning task"): a pass serves OWED_MAX slots at once, but never
 * more than a quarter of the capacity waits, so that consumers of a small
 * queue do not find it empty for want of a refill. */
#define OWED_MAX 32

static uint32_t owed_max(const qf__fifo *f)
{
    if (f->unbounded_cap)
        return 1;
    int64_t quarter = f->capacity / 4;
    return quarter < 1 ? 1 : quarter > OWED_MAX ? OWED_MAX : (uint32_t)quarter;
}

bool qf__fifo_init(qf__fifo *f, const qf__fifo_config *c)
{
    f->kind_name = c->kind_name;
    f->name = c->name;
    f->capacity = c->capacity;
    f->single_producer = c->single_producer;
    f->single_consumer = c->single_consumer;
    f->spin_ns = c->spin_ns;
    atomic_init(&f->spin_dyn, (int32_t)(f->spin_ns / 4));
    atomic_init(&f->yield_dyn, QF__YIELDS_MAX);
    atomic_init(&f->look_dyn, POLL_LOOKS);
    /* Ring: the next power of two holding `capacity` (ck_ring keeps one
     * slot free), or a fixed ring plus overflow for huge/unbounded queues. */
    unsigned slots;
    f->unbounded_cap = c->unbounded;
    if (c->unbounded || f->capacity + 1 > RING_MAX_SLOTS) {
        slots = c->unbounded ? UNBOUNDED_RING_SLOTS : RING_MAX_SLOTS;
        f->spill = true; /* storage may spill; capacity is still enforced */
    } else {
        slots = 2;
        while (slots < (unsigned)f->capacity + 1)
            slots <<= 1;
    }
    unsigned cap = f->spill ? slots - 1 : (unsigned)f->capacity;
    size_t cell = c->value_bytes ? qf__ring_cell_bytes(c->value_bytes) : 0;
    f->ring.buf = NULL;
    if (cell && !f->spill && (size_t)slots * cell <= CELLS_MAX_BYTES)
        f->ring.buf = ring_alloc(f, (size_t)slots * cell);
    if (f->ring.buf) {
        qf__ring_init_cells(&f->ring, f->ring.buf, slots, cap, c->value_bytes);
    } else {
        /* 128-byte aligned: a line holds four whole cells (qf_ring-impl.h,
         * note 10), and adjacent-line pairs hold eight. */
        f->ring.buf = ring_alloc(f, qf__ring_storage_bytes(slots));
        if (!f->ring.buf)
            return false;
        memset(f->ring.buf, 0, f->ring_bytes);
        qf__ring_init(&f->ring, f->ring.buf, slots, cap, true);
    }
    f->put_one =
        !f->spill && !f->single_producer && f->ring.marks && (f->ring.cell_words || f->ring.spread);
    atomic_init(&f->state, 0);
    qf_waitlist_init(&f->deq_waiters);
    qf_waitlist_init(&f->deq_many_waiters);
    atomic_init(&f->many_need, UINT32_MAX);
    atomic_init(&f->req_lock, 0);
    atomic_init(&f->reqs_n, 0);
    atomic_init(&f->arriving, 0);
    atomic_init(&f->room_owed, 0);
    atomic_init(&f->returning, 0);
    atomic_init(&f->thread_reqs, 0);
    f->owed_max = owed_max(f);
    atomic_init(&f->sp_busy, 0);
    atomic_init(&f->sc_busy, 0);
    qf_waitlist_init(&f->enq_waiters);
    return true;
}

void qf__fifo_free_ring(qf__fifo *f)
{
    if (f->ring_bytes >= QF__PAGEMEM_MIN)
        qf__pagemem_free(f->ring.buf, f->ring_bytes, 128);
    else
        free(f->ring.buf);
    f->ring.buf = NULL;
}

void qf__fifo_destroy(qf__fifo *f)
{
    qf_waitlist_destroy(&f->deq_waiters);
    qf_waitlist_destroy(&f->deq_many_waiters);
    qf_waitlist_destroy(&f->enq_waiters);
    qf__fifo_free_ring(f);
    qf__deque_free(&f->stash);
    qf__deque_free(&f->overflow);
}
