/* fifo_holders.pml - consumers gathering batches larger than the capacity
 * ("holders") at a closed queue (queues/engine/qf_fifo.c fifo_take and take_at_closed,
 * qf_fifo_wait.c qf__fifo_closed_quiet / qf__fifo_wait_elements),
 * model-checked with spin.
 *
 * The queue is closed and quiet (no enqueue pending, nothing in flight:
 * every slot reserved is published, qf_ring-impl.h 'turns'; the check
 * itself is fifo_consumers.pml's): elements only move between consumers
 * now. NC consumers each want MIN
 * elements and start as holders with some already gathered (got[i]); the
 * stash holds AV. The rules modelled:
 *   - a take: a holder takes any (up to what it still needs), a plain
 *     consumer all MIN at once or nothing;
 *   - a holder that sees other holders gives back (to the stash) unless
 *     what is there completes its batch, stops holding (holders--, which
 *     wakes everyone), and goes on as a plain consumer;
 *   - the last holder, or a plain consumer once nobody holds, decides:
 *     enough there -> take it; else give back and fail (end of data);
 *   - a waiter registers, re-checks (elements >= its need, or nobody
 *     holding), and sleeps until woken; a give-back and a holder's
 *     release wake every waiter (the queue is closed).
 * Checked: no invalid end state (nobody asleep for good), elements are
 * conserved, and once every consumer has returned fewer than MIN are left
 * (what TensorFlow leaves after end of data).
 */
#ifndef NC
#define NC 3
#endif
#ifndef MIN
#define MIN 3
#endif
#ifndef G0
#define G0 1
#endif
#ifndef G1
#define G1 1
#endif
#ifndef G2
#define G2 1
#endif
#ifndef AV
#define AV 0
#endif

byte avail = AV;
byte holders = 0;
bool waiting[NC];
byte done_ok = 0;   /* consumers that returned a batch */
byte total;

inline wake_all()
{
    atomic {
        j = 0;
        do
        :: j < NC -> waiting[j] = 0; j++
        :: else -> break
        od
    }
}

proctype Consumer(byte i; byte g)
{
    byte got = g, k, j;
    bool holder = 1;
    do
    :: true ->
        /* take what the rules allow, in one step (one CAS in C) */
        atomic {
            if
            :: holder && avail > 0 && got < MIN ->
                k = (avail < MIN - got -> avail : MIN - got);
                avail = avail - k; got = got + k
            :: !holder && avail >= MIN -> avail = avail - MIN; got = MIN
            :: else
            fi
        };
        if
        :: got >= MIN -> goto success
        :: else
        fi;
        if
        :: holder && holders > 1 ->
            if
            :: avail + got < MIN ->
                avail = avail + got; got = 0;        /* give back */
                wake_all();
                holder = 0;
                holders--;                           /* release: closed, so wake all */
                wake_all()
            :: else                                  /* enough is there: take it */
            fi
        :: holder && holders <= 1 ->
            if
            :: avail + got >= MIN -> skip            /* it is all there: take it */
            :: else ->
                avail = avail + got; got = 0; wake_all();
                holder = 0; holders--; wake_all();
                goto fail
            fi
        :: !holder && holders == 0 ->
            if
            :: avail >= MIN -> skip
            :: else -> goto fail
            fi
        :: !holder && holders > 0 ->
            /* wait: register, re-check, sleep */
            waiting[i] = 1;
            if
            :: avail >= MIN || holders == 0 -> waiting[i] = 0
            :: else -> (waiting[i] == 0)
            fi
        fi
    od;
success:
    if
    :: holder -> holder = 0; holders--; wake_all()
    :: else
    fi;
    done_ok++;
fail:
    skip
}

init
{
    atomic {
        holders = NC;
        total = AV + G0 + G1 + (NC > 2 -> G2 : 0);
        run Consumer(0, G0);
        run Consumer(1, G1);
        if
        :: NC > 2 -> run Consumer(2, G2)
        :: else
        fi
    };
    (_nr_pr == 1);
    assert(avail + done_ok * MIN == total);
    assert(avail < MIN)
}
