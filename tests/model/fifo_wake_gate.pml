/* fifo_wake_gate.pml - one consumer thread on its way at a time: the gate
 * on the FIFO engine's consumer wakes (queues/engine/qf_fifo_wait.c, "One
 * consumer thread on its way"; coord/qf_waker.c, qf__waitlist_wake_gated()),
 * model-checked with spin for lost wakes.
 *
 * Bounded world: NP producers publish one element each; NC consumer
 * threads (gated wakers) and NT consumer tasks (ungated) take NP elements
 * between them, each a fixed share, one at a time, and return. No close:
 * a consumer asleep for good while its share is takeable is an invalid end
 * state (a close wakes everyone and would hide it).
 *
 *   producer  publish (avail++, seq_cst); when DEQ_WAIT is set and the
 *             list's count is not 0, a gated wake of one.
 *   gated wake  under the list's lock, up to n wakers from the head; a
 *             consumer thread at the head is taken only while the gate is
 *             0, and the gate goes up by one for it; a thread at the head
 *             while the gate is not 0 ends the wake. Tasks are taken
 *             uncounted.
 *   consumer  take one if there is one (a CAS); else register, set
 *             DEQ_WAIT, re-check. Re-check true: cancel; a cancel that
 *             finds itself woken passes a plain wake on, and a thread then
 *             runs `awake`. Re-check false: sleep until woken; a thread
 *             then runs `awake`, a task just polls again.
 *   awake     the gate down by one if above 0 (seq_cst RMW), then read
 *             avail; more than one there (the one it will take itself)
 *             and someone on the list: a gated wake of avail - 1.
 *
 * Abstractions: the ring is a count of takeable elements (fifo_consumers.pml
 * and ring_turns.pml check the ring, publication out of turn and the
 * close); a wake unlinks, claims and finishes a waker in one step under
 * the lock (waker_cancel.pml checks the claimed window and the cancel
 * that meets it). Every shared access is one statement in an interleaving
 * order, the order the C code's seq_cst RMWs, loads and fences give (a
 * declared single producer: the consumer's heavy fence after its gate
 * RMW, as for DEQ_WAIT).
 *
 * Seeded bugs, each of which check.sh expects spin to find:
 *   HANDOVER=0  `awake` wakes nobody: a wake skipped at the gate is lost.
 *   THRESH=2    `awake` hands over only with more than two there: one
 *               short, the element behind the taker's is lost.
 *   GATE_TASKS=1  tasks are counted in the gate too, though they never run
 *               `awake` (a thread waker registered through a poll form is
 *               the same case, hence the gate's ctx mark in the C code).
 *
 * Checked: no invalid end state; every element taken exactly once (avail
 * ends at 0, and a take never drives it below 0).
 */
#ifndef NP
#define NP 3
#endif
#ifndef NC
#define NC 2
#endif
#ifndef NT
#define NT 1
#endif
#ifndef HANDOVER
#define HANDOVER 1
#endif
#ifndef THRESH
#define THRESH 1
#endif
#ifndef GATE_TASKS
#define GATE_TASKS 0
#endif

#define N (NC + NT)
#define IDLE 0
#define REG 1
#define DONE 3

byte avail = 0;
bool deqwait = 0;
byte gate = 0;
byte count = 0;
bool lk = 0;
byte st[N];
chan wl = [N] of { byte };
byte finished = 0;

inline lock()
{
    atomic { !lk -> lk = 1 }
}

inline unlock()
{
    lk = 0
}

/* A waker id h is gated: a consumer thread (or, seeded, anyone). */
#define GATED(h) ((h) < NC || GATE_TASKS)

/* Up to n wakers from the head; gated: the gate rule above. */
inline wake(n, gated)
{
    lock();
    k = 0;
    do
    :: k < n && len(wl) > 0 ->
        wl ? <h>;
        if
        :: gated && GATED(h) && gate != 0 -> break
        :: else ->
            if
            :: gated && GATED(h) -> gate++
            :: else -> skip
            fi;
            wl ? h;
            count--;
            st[h] = DONE;
            k++
        fi
    :: else -> break
    od;
    unlock()
}

inline awake()
{
    atomic {
        if
        :: gate > 0 -> gate--
        :: else -> skip
        fi
    };
    a = avail;
    if
    :: HANDOVER && a > THRESH && count > 0 && deqwait -> wake(a - 1, 1)
    :: else -> skip
    fi
}

proctype producer()
{
    byte k, h;
    avail++;
    if
    :: deqwait && count > 0 -> wake(1, 1)
    :: else -> skip
    fi
}

proctype consumer(byte i; byte share)
{
    byte k, h, a, got = 0;
again:
    if
    :: got == share -> goto done
    :: else -> skip
    fi;
    if
    :: atomic { avail > 0 -> avail-- }; got++; goto again
    :: atomic { avail == 0 -> skip }
    fi;
    /* register, announce, re-check */
    lock();
    wl ! i;
    count++;
    st[i] = REG;
    unlock();
    deqwait = 1;
    if
    :: avail >= 1 ->
        lock();
        if
        :: st[i] == REG ->
            wl ?? eval(i);
            count--;
            st[i] = IDLE;
            unlock()
        :: else ->
            unlock();
            wake(1, 0); /* woken meanwhile: passed on */
            st[i] = IDLE;
            if
            :: i < NC -> awake()
            :: else -> skip
            fi
        fi;
        goto again
    :: else -> skip
    fi;
    st[i] == DONE; /* asleep until woken */
    st[i] = IDLE;
    if
    :: i < NC -> awake()
    :: else -> skip
    fi;
    goto again;
done:
    atomic { finished++ }
}

init
{
    byte i = 0, s;
    atomic {
        do
        :: i < N ->
            /* NP elements shared out: the first NP % N consumers take one more */
            s = NP / N + (i < NP % N -> 1 : 0);
            run consumer(i, s);
            i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < NP -> run producer(); i++
        :: else -> break
        od
    };
    finished == N;
    assert(avail == 0)
}
