/* fifo_held.pml - held wakes of producer tasks waiting in line on a full
 * queue (queues/engine/qf_fifo_wait.c, "A put request" and "Held wakes"),
 * model-checked with spin.
 *
 * What runs
 *   NP producer tasks (Task) each put NE elements, one after another, into
 *   a queue of capacity CAP, reusing one ticket (a runner's next put after
 *   its request's DONE joins the line again). A task that finds the queue
 *   open but full becomes pending and links a request at the tail of the
 *   line, then re-checks room and a cancelling close, taking its request
 *   back and trying again if it sees either and the request is still
 *   linked; otherwise it waits for the request's final state
 *   (qf_queue_line.c: poll_put_slot_claimed(); qf_fifo_wait.c: enlist(),
 *   link_request()). With WD=1 the first NWD
 *   tasks may be cancelled while they wait, as a runtime shutdown cancels
 *   a task (qf__queue_put_abandon()): such a task withdraws its request
 *   and, if the withdraw says it is not its own any more, waits for the
 *   final state; a cancelled task puts nothing more. Each of them picks at
 *   its start whether it will be cancelled, so that ends with owners still
 *   waiting are reached too.
 *   NC consumers (Consumer, 1 or 2; the second a task when CTASK=1, whose
 *   passes never hold) take while there is something to take, and each
 *   may stop taking for good at any moment, which covers every bound on
 *   the number of takes. After a take each does what
 *   qf__fifo_wake_producers() does: with reqs_n non-zero it runs one pass
 *   (serve_requests()): under req_lock, oldest request first, while there
 *   is room and no cancel, it puts the request's slot in, unlinks it and
 *   either holds it (may_hold(): at least HOLD_LINE others still counted
 *   in reqs_n beside the held, and CLOSED not set) or lists it as
 *   finished; at the end of the pass the held go in front of the finished
 *   list (unhold()) when the pass finished one without holding it, when
 *   HOLD_MAX are held, when HOLD_MAX passes have ended since the first was
 *   held, or when fewer than HOLD_LINE are left (release_now()); after the
 *   lock it stores DONE and drops the pending count of each finished
 *   request (finish_all(), finish_request()).
 *   With CLOSE=1 a closer (Closer) closes the queue at any moment, plainly
 *   or cancelling pending enqueues, or never (qf__fifo_close()): it sets
 *   the bits, releases the held (qf__fifo_release_held(): unhold() under
 *   req_lock, then finish_all()), and on a cancel unlinks the whole line
 *   under req_lock and then stores CANCELLED and drops the pending count
 *   of each (qf__fifo_cancel_requests()).
 *   A withdraw (qf__fifo_withdraw()) under req_lock unlinks the request if
 *   it is linked and says it is the caller's; after the lock the caller's
 *   pending count drops, or, if it was not linked, the held are released.
 *
 * What is abstracted, and why
 *   Each req_lock section is one indivisible step, and so is the list of
 *   final stores after it (nothing checked here tells those stores apart;
 *   the gap between the lock and the stores, where an owner may withdraw
 *   and find its request gone, is kept). Other statements are one shared
 *   access each, in sequential consistency (fifo_consumers.pml says which
 *   C11 accesses and fences that stands for). A put into the ring is one
 *   step (its reservation and publish are ring_turns.pml's). A task's
 *   first look (closed, then room, then becoming pending and linking) is
 *   one step: what a take or a close between those accesses can do is
 *   seen by the re-check that follows, whose race with a take is
 *   fifo_requests.pml's. For the same reason the ENQ_WAIT bit is left out:
 *   it is set in the step that links, so a consumer looks at reqs_n only.
 *   The consumer's own wait for elements and for end-of-data is
 *   fifo_consumers.pml's; here it only takes what is there.
 *   A task's wait is a wait for its request's final state: the wake after
 *   the store, the waker held CLAIMED until the wake has run, and the
 *   settle before the ticket is used again (waker_cancel.pml, task_join.pml)
 *   change nothing checked here; a re-poll of a task whose request is
 *   still WAITING (a runner woken by a coordinator stop, runner_step())
 *   only returns PENDING again, so it is left out. Every request has a
 *   waker, the consumer is a thread and never serves its own request, and
 *   no multi-row enqueue arrives (fifo_refill.pml), so may_hold()'s other
 *   refusals and complete_requests()' wait for arrivals are not reached.
 *   One wake batch is just the order of the final stores. The line and the
 *   held list are arrays of task numbers, oldest first.
 *
 * Checked
 *   - No invalid end state: a cancelled task whose request someone else
 *     had already taken gets its final state (its wait has no end label).
 *     Tasks still in line or held at the end are valid ends: nobody takes.
 *   - When nothing can move (timeout): a closed queue holds nobody; after
 *     a cancelling close nobody is in line; the pending count is the number
 *     of requests in line or held; a held request is justified: at least
 *     HOLD_LINE are in line, or no take came since the line fell short
 *     (short_take: a take while the line is short must run a pass, and that
 *     pass releases them).
 *   - No request gets DONE while an older one (its slot in earlier) is
 *     still held, and a request stays held for fewer than HOLD_MAX pass
 *     ends after the one that held it (age, a ghost count of the oldest
 *     held's pass ends).
 *   - A slot goes in at most once; DONE is stored only for a request whose
 *     slot is in, CANCELLED only for one whose slot is not; a put that
 *     succeeds has its slot in, one refused, cancelled or withdrawn has not
 *     (slot_in counts a task's slots that went in, ok_n its puts that
 *     succeeded before the current one).
 *
 * STRICT=1 (the default) checks the plain rule "a request is held only
 * while at least HOLD_LINE are in line"; STRICT=0 the weaker one above.
 * The plain rule needs WDFIX=1 (the default, as the C code does since this
 * model found it): a withdraw that takes its own request back and leaves
 * fewer than HOLD_LINE in line releases the held too. WDFIX=0 is the code
 * before, a seeded bug for STRICT=1: A is held with B behind it in line;
 * B's task is cancelled and takes its linked request back, which released
 * nothing; with no further take, A stayed held with nobody in line until a
 * take or a close.
 *
 * Seeded bugs (check.sh expects spin to find each):
 *   NOCLOSEREL=1  the close does not release the held
 *   NOWDREL=1     a withdraw that finds its request not linked does not
 *                 release the held
 *   HOLDCLOSED=1  a pass holds even when the queue is closed
 *   UNCOUNTED=1   reqs_n does not count the held (dropped at the hold), so
 *                 a take after the line emptied runs no pass (found with
 *                 WDFIX=0 STRICT=0: the line emptied by a withdraw; with
 *                 the withdraw's release these bounds show no harm, and
 *                 the count stays as the argument in the C rests on it)
 *   NOFINREL=1    a pass that finishes a request without holding it does
 *                 not release the held (found with a task consumer and
 *                 HOLD_MAX=3, so that the age limit does not release first)
 *   NOAGE=1       no age limit (HOLD_MAX passes since the first hold)
 *   WDFIX=0       a withdraw of a request in line that leaves the line
 *                 short releases nothing (the code before this model)
 *
 * Room left for a returning task (LEAVE=1; qf_fifo_wait.c, "Room left for
 * a returning task"). A thread consumer's take with requests in line adds
 * its slot to room_owed and then reads `returning`; it leaves the room
 * (runs no pass) when room_owed is below OWED_MAX and `returning` is not 0.
 * Every final store (DONE by finish_all(), CANCELLED by the cancelling
 * close) first counts its task in `returning`; the task, once it has seen
 * the final state (its wait, or an abandon's wait for a request someone
 * else had), decrements `returning`, then reads room_owed, and runs a pass
 * (as a task: it never holds) when room is owed and it was the last one
 * back, or room_owed reached OWED_MAX. A pass clears room_owed as it
 * starts, and holds nothing when it cleared some. Checked besides: when
 * nothing can move, no request waits in line beside room (unless the line
 * was cancelled), and every task told a final state has reported.
 * Seeded bugs:
 *   NOREPORTPASS=1  the report never runs the pass: room a consumer left
 *                   stays unfilled with requests in line
 *   READFIRST=1     the consumer reads `returning` before it adds its room:
 *                   the last task back can read room_owed before the add,
 *                   and the consumer then leaves room nobody fills
 *
 * The model follows qf_fifo_wait.c: release_now(), the held ahead of the
 * pass's own, a withdraw releasing for a task request (which every request
 * here is) that is off the list, or when it leaves the line short.
 */
#ifndef NP
#define NP 3
#endif
#ifndef CAP
#define CAP 1
#endif
#ifndef HOLD_LINE
#define HOLD_LINE 1
#endif
#ifndef HOLD_MAX
#define HOLD_MAX 2
#endif
#ifndef WD
#define WD 1
#endif
#ifndef NWD
#define NWD 2
#endif
#ifndef NE
#define NE 1
#endif
#ifndef NC
#define NC 1
#endif
#ifndef CLOSE
#define CLOSE 1
#endif
#ifndef STRICT
#define STRICT 1
#endif
#ifndef WDFIX
#define WDFIX 1
#endif
#ifndef NOCLOSEREL
#define NOCLOSEREL 0
#endif
#ifndef NOWDREL
#define NOWDREL 0
#endif
#ifndef HOLDCLOSED
#define HOLDCLOSED 0
#endif
#ifndef UNCOUNTED
#define UNCOUNTED 0
#endif
#ifndef NOFINREL
#define NOFINREL 0
#endif
#ifndef NOAGE
#define NOAGE 0
#endif
#ifndef CTASK
#define CTASK 0
#endif
#ifndef LEAVE
#define LEAVE 0
#endif
#ifndef OWED_MAX
#define OWED_MAX 2
#endif
#ifndef NOREPORTPASS
#define NOREPORTPASS 0
#endif
#ifndef READFIRST
#define READFIRST 0
#endif

#define WAITING 0
#define DONE 1
#define CANCELLED 2

byte used = 0;          /* elements in the queue */
bool closed = 0, cancelled = 0;
byte pending = 0;       /* the state word's pending count */
byte reqs_n = 0;        /* requests in line, and (UNCOUNTED=0) the held */
byte line[NP];          /* linked requests, oldest first */
byte line_n = 0;
byte held[NP];          /* held requests, oldest first */
byte held_n = 0;
bool linked[NP];
byte rstate[NP];
/* ghosts */
byte slot_in[NP];       /* times the task's slots went in */
byte ok_n[NP];          /* the task's puts that succeeded */
byte inseq[NP];         /* when its current slot went in (nin) */
byte nin = 0;
byte held_passes = 0;   /* pass ends since the first was held */
bool short_take = 0;    /* a take came while held and the line short */
byte age = 0;           /* pass ends the oldest held has seen */
bool owed[NP];          /* withdrew and found the request not linked */
byte room_owed = 0;     /* LEAVE: slots consumers left unfilled */
byte returning = 0;     /* LEAVE: tasks told a final state, not reported */

/* unhold(): the held go in front of the finished list fin[0..fin_n)
 * (they are older), and the age count restarts. */
inline unhold()
{
    k = fin_n;
    do
    :: k > 0 -> k--; fin[k + held_n] = fin[k]
    :: else -> break
    od;
    do
    :: k < held_n -> fin[k] = held[k]; held[k] = 0; k++
    :: else -> break
    od;
    fin_n = fin_n + held_n;
#if !UNCOUNTED
    reqs_n = reqs_n - held_n;
#endif
    held_n = 0;
    held_passes = 0;
    age = 0;
    k = 0
}

/* finish_all(): after the lock is dropped, final state DONE and the
 * pending count dropped, for each request on the list in order (one step
 * for the list: nothing checked here tells the stores apart). */
inline finish_all()
{
    if
    :: fin_n > 0 ->
        d_step {
            k = 0;
            do
            :: k < fin_n ->
                x = fin[k];
                assert(slot_in[x] == ok_n[x] + 1);
                j = 0;                          /* no older one still held */
                do
                :: j < held_n -> assert(inseq[held[j]] > inseq[x]); j++
                :: else -> break
                od;
                j = 0;
#if LEAVE
                returning++;                    /* before the final store */
#endif
                rstate[x] = DONE;
                pending--;
                fin[k] = 0;
                k++
            :: else -> break
            od;
            fin_n = 0; k = 0; x = 0
        }
    :: else
    fi
}

/* qf__fifo_release_held() */
inline release_held()
{
    d_step { unhold() };
    finish_all()
}

/* serve_requests() without the final stores: under req_lock. */
inline serve_pass()
{
    d_step {
        if                                      /* the owed room, cleared */
        :: room_owed > 0 -> room_owed = 0; owedpass = 1
        :: else -> owedpass = 0
        fi;
        do
        :: line_n > 0 && used < CAP && !cancelled ->
            x = line[0];
            k = 1;
            do
            :: k < line_n -> line[k - 1] = line[k]; k++
            :: else -> break
            od;
            line_n--;
            line[line_n] = 0;
            linked[x] = 0;
            assert(slot_in[x] == ok_n[x]);
            used++; slot_in[x]++; nin++; inseq[x] = nin;
            if                                  /* may_hold() */
#if UNCOUNTED
            :: !in_task && !owedpass && reqs_n - 1 >= HOLD_LINE &&
               (HOLDCLOSED || !closed) ->
                reqs_n--;
#else
            :: !in_task && !owedpass && reqs_n - held_n - 1 >= HOLD_LINE &&
               (HOLDCLOSED || !closed) ->
#endif
                held[held_n] = x; held_n++
            :: else ->
                reqs_n--;
                fin[fin_n] = x; fin_n++
            fi
        :: else -> break
        od;
        if                                      /* release_now() */
        :: held_n == 0
        :: else ->
            if
            :: fin_n > 0 && !NOFINREL -> unhold()
            :: else ->
                if
                :: held_n >= HOLD_MAX -> unhold()
                :: else ->
                    held_passes++;
                    if
                    :: held_passes >= HOLD_MAX && !NOAGE -> unhold()
#if UNCOUNTED
                    :: reqs_n < HOLD_LINE -> unhold()
#else
                    :: reqs_n - held_n < HOLD_LINE -> unhold()
#endif
                    :: else ->
                        age++;
                        assert(age < HOLD_MAX)  /* the age limit */
                    fi
                fi
            fi
        fi;
        short_take = 0;
        k = 0; x = 0
    };
    finish_all()
}

/* qf__fifo_withdraw(): under req_lock, take r back if it is linked. */
inline withdraw(me)
{
    d_step {
        if
        :: linked[me] ->
            k = 0;
            do
            :: line[k] == me -> break
            :: else -> k++
            od;
            do
            :: k + 1 < line_n -> line[k] = line[k + 1]; k++
            :: else -> break
            od;
            line_n--;
            line[line_n] = 0;
            linked[me] = 0;
            reqs_n--;
            mine = 1;
#if WDFIX
            if
#if UNCOUNTED
            :: held_n != 0 && reqs_n < HOLD_LINE -> unhold()
#else
            :: held_n != 0 && reqs_n - held_n < HOLD_LINE -> unhold()
#endif
            :: else
            fi;
#endif
            k = 0
        :: else -> mine = 0
        fi
    };
    if
    :: mine -> pending--          /* owns_pending */
#if WDFIX
        ; finish_all()
#endif
    :: else
#if !NOWDREL
        ; release_held()
#endif
    fi
}

proctype Task(byte me)
{
    byte fin[NP], fin_n = 0, j = 0, k = 0, x = 0, left = 0, o = 0;
    bool mine = 0, will_wd = 0, gone = 0, in_task = 1, owedpass = 0;
    if
    :: WD && me < NWD -> will_wd = 1
    :: true
    fi;
again:
    atomic {
        if
        :: closed -> goto refused               /* qf__fifo_closed_for() */
        :: else ->
            if
            :: used < CAP ->                    /* qf__fifo_put_now() */
                used++; slot_in[me]++; nin++; goto put_ok
            :: else ->                          /* full */
                pending++;                      /* qf__fifo_become_pending() */
                rstate[me] = WAITING;           /* link_request() */
                linked[me] = 1;
                line[line_n] = me; line_n++;
                reqs_n++
            fi
        fi
    };
    if                                          /* enlist()'s re-check */
    :: used < CAP || cancelled ->
        withdraw(me);
        if
        :: mine -> mine = 0; goto again         /* TAKEN_BACK: once more */
        :: else                                 /* someone else has it */
        fi
    :: else
    fi;
end_wait:
    if
    :: rstate[me] != WAITING -> goto final
    :: will_wd ->                               /* qf__queue_put_abandon() */
        gone = 1;
        withdraw(me);
        if
        :: mine -> goto withdrawn
        :: else -> owed[me] = 1
        fi
    fi;
    rstate[me] != WAITING;                      /* owed: no end label */
final:
#if LEAVE
    skip;
    d_step { returning--; left = returning };   /* qf__fifo_task_returned() */
    o = room_owed;
    if
    :: !NOREPORTPASS && o != 0 && (left == 0 || o >= OWED_MAX) -> serve_pass()
    :: else
    fi;
    left = 0; o = 0;
#endif
    if
    :: rstate[me] == DONE -> goto put_ok
    :: else -> assert(rstate[me] == CANCELLED); goto refused
    fi;
withdrawn:
    assert(slot_in[me] == ok_n[me]);
    goto out;
put_ok:
    assert(slot_in[me] == ok_n[me] + 1);
#if NE > 1
    if
    :: !gone && ok_n[me] + 1 < NE ->            /* its next element */
        ok_n[me]++; goto again
    :: else
    fi;
#endif
    goto out;
refused:
    assert(slot_in[me] == ok_n[me]);
out:
    skip
}

proctype Consumer(bool in_task)
{
    byte fin[NP], fin_n = 0, j = 0, k = 0, x = 0, o = 0, r = 0;
    bool owedpass = 0;
loop:
    if
    :: atomic {
           used > 0 ->
           used--;
           if
           :: held_n != 0 && line_n < HOLD_LINE -> short_take = 1
           :: else
           fi
       };
       if                                       /* qf__fifo_wake_producers() */
#if LEAVE
       :: reqs_n != 0 && !in_task ->            /* leave_room() */
#if READFIRST
           r = returning;
           d_step { room_owed++; o = room_owed };
#else
           d_step { room_owed++; o = room_owed };
           r = returning;
#endif
           if
           :: o < OWED_MAX && r > 0             /* left to a returning task */
           :: else -> serve_pass()
           fi;
           o = 0; r = 0
       :: reqs_n != 0 && in_task -> serve_pass()
#else
       :: reqs_n != 0 -> serve_pass()
#endif
       :: else
       fi;
       goto loop
    :: skip                                     /* stops taking */
    fi
}

proctype Closer()
{
    byte fin[NP], fin_n = 0, j = 0, k = 0, x = 0;
    bool cancel = 0;
    if
    :: closed = 1
    :: atomic { closed = 1; cancelled = 1; cancel = 1 }
    :: skip -> goto out                         /* no close */
    fi;
#if !NOCLOSEREL
    release_held();
#endif
    if
    :: cancel ->                            /* qf__fifo_cancel_requests() */
        d_step {
            k = 0;
            do
            :: k < line_n ->
                x = line[k];
                linked[x] = 0;
                fin[k] = x;
                line[k] = 0;
                k++
            :: else -> break
            od;
            fin_n = line_n;
            reqs_n = reqs_n - line_n;
            line_n = 0;
            k = 0; x = 0
        };
        d_step {
            do
            :: k < fin_n ->
                x = fin[k];
                assert(slot_in[x] == ok_n[x]);
#if LEAVE
                returning++;
#endif
                rstate[x] = CANCELLED;
                pending--;
                fin[k] = 0;
                k++
            :: else -> break
            od;
            fin_n = 0; k = 0; x = 0
        }
    :: else
    fi;
out:
    skip
}

init
{
    byte i;
    atomic {
        i = 0;
        do
        :: i < NP -> run Task(i); i++
        :: else -> break
        od;
        run Consumer(0);
#if NC > 1
        run Consumer(CTASK);
#endif
#if CLOSE
        run Closer()
#endif
    };
    timeout;                                    /* nothing can move */
    assert(!closed || held_n == 0);
    assert(!cancelled || line_n == 0);
    assert(pending == line_n + held_n);
#if STRICT
    assert(held_n == 0 || line_n >= HOLD_LINE);
#else
    assert(held_n == 0 || line_n >= HOLD_LINE || !short_take);
#endif
#if LEAVE
    assert(cancelled || line_n == 0 || used == CAP);    /* no room left */
    assert(returning == 0);                             /* all reported */
#endif
    i = 0;
    do
    :: i < NP -> assert(!owed[i] || rstate[i] != WAITING); i++
    :: else -> break
    od
}
