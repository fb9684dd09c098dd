/* fifo_commit.pml - the multi-producer commit wait (queues/qf_ring-impl.h,
 * qf__ring_publish / qf__ring_commit_wait), model-checked with spin.
 *
 * NP producers reserve tickets 0..NP-1 in any order and publish in ticket
 * order. A producer whose predecessor has not published announces itself
 * (commit_waiters++), re-reads p_tail and sleeps on p_tail with the futex
 * bit of its own ticket; a publisher moves p_tail on with an RMW, then, if
 * anyone announced, wakes the bit of the ticket it made current. The futex
 * is modelled as the kernel gives it: the wait atomically compares p_tail
 * with the value read and sleeps only if equal; a wake reaches only
 * sleepers of the matching bit. Tickets here are < 32, so bits are unique
 * (in C, tickets 32 apart share a bit: an extra wake, which re-checks).
 *
 * Checked: no invalid end state (a producer asleep forever), and p_tail
 * ends at NP.
 */
#ifndef NP
#define NP 3
#endif

byte p_head = 0;
byte p_tail = 0;
byte commit_waiters = 0;
bool asleep[NP];   /* sleeping on p_tail with bit `ticket` */

inline futex_wake_bit(b)
{
    atomic { if :: asleep[b] -> asleep[b] = 0 :: else fi }
}

proctype Producer()
{
    byte t, seen;
    atomic { t = p_head; p_head++ };                 /* reserve */
    /* write the slot (local), then publish: CAS p_tail t -> t+1 */
    atomic {
        if
        :: p_tail == t -> p_tail++; goto published
        :: else
        fi
    };
wait:
    commit_waiters++;
    seen = p_tail;
    if
    :: seen != t ->
        /* futex_wait_bits(&p_tail, seen, bit(t)): compare and sleep at once */
        atomic {
            if
            :: p_tail == seen -> asleep[t] = 1
            :: else
            fi
        };
        !asleep[t]
    :: else
    fi;
    commit_waiters--;
    if
    :: p_tail == t -> skip
    :: else -> goto wait
    fi;
    p_tail++;                                        /* only ticket t moves it from t */
published:
    seen = t + 1;                                    /* the ticket it made current */
    if
    :: commit_waiters > 0 && seen < NP -> futex_wake_bit(seen)
    :: else
    fi;
    seen = 0
}

init
{
    byte k;
    atomic {
        k = 0;
        do
        :: k < NP -> run Producer(); k++
        :: else -> break
        od
    };
    (_nr_pr == 1);
    assert(p_tail == NP)
}
