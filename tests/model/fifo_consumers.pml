/* fifo_consumers.pml - the FIFO engine's consumer wait/wake protocol
 * (queues/engine/qf_fifo_wait.c), model-checked with spin for lost wakes.
 *
 * Bounded world: NP producers each enqueue one element; NC consumers each
 * dequeue (one element at a time) until end-of-data; a closer closes the
 * queue at any moment. A producer that reserved its slot before the close
 * but checks CLOSED after it publishes a tombstone (the case that left
 * consumers asleep for good before: a consumer went back to sleep because a
 * reservation was in flight, and the tombstone's publish woke only one).
 *
 * Memory model: every shared access is one Promela statement, in an
 * interleaving (sequentially consistent) order. That is the order the C
 * code gives: multi-producer publishes and multi-consumer takes are seq_cst
 * RMWs, waiters' announcements are seq_cst RMWs, their re-checks seq_cst
 * loads (qf_ring-impl.h note 3); declared single sides are made so by
 * qf__fence_heavy(). Re-checks read one variable per statement, in the
 * order the code reads them, so a re-check can be torn as in C.
 *
 * Checked: no invalid end state (a consumer blocked forever on its wake is
 * one), and every element published is delivered exactly once.
 */
#ifndef NP
#define NP 2
#endif
#ifndef NC
#define NC 3
#endif

byte p_head = 0;      /* reservations */
byte p_tail = 0;      /* publications (in ticket order) */
byte c_head = 0;      /* consumed */
bool tomb[NP];        /* slot t holds a tombstone */
bool closed = 0;
bool deq_wait = 0;    /* sticky DEQ_WAIT bit */
bool reg[NC];         /* registered on deq_waiters */
bool woken[NC];       /* the wake a registered waiter sleeps for */
byte delivered = 0;
byte real_published = 0;

/* qf_waitlist_wake(1): the oldest registered (here: the lowest index;
 * the order does not matter for lost wakes). */
inline wake_one()
{
    atomic {
        i = 0;
        do
        :: i < NC && reg[i] -> reg[i] = 0; woken[i] = 1; break
        :: i < NC && !reg[i] -> i++
        :: i >= NC -> break
        od
    }
}

inline wake_all()
{
    atomic {
        i = 0;
        do
        :: i < NC -> if :: reg[i] -> reg[i] = 0; woken[i] = 1 :: else fi; i++
        :: else -> break
        od
    }
}

/* qf__fifo_wake_consumers() after a publish. */
inline wake_consumers()
{
    if
    :: deq_wait ->
        if
        :: closed -> wake_all()
        :: else -> wake_one()
        fi
    :: else
    fi
}

proctype Producer()
{
    byte t, i;
    if
    :: closed -> goto done      /* refused before reserving */
    :: else
    fi;
    atomic { t = p_head; p_head++ };                 /* reservation CAS */
    if                                               /* closed check after it */
    :: closed -> tomb[t] = 1
    :: else -> tomb[t] = 0
    fi;
    (p_tail == t);   /* published in index order: by itself or a carrier (ring_carry.pml) */
    atomic { p_tail++; if :: !tomb[t] -> real_published++ :: else fi };
    wake_consumers();
done:
    skip
}

proctype Consumer(byte me)
{
    byte t, i, a, b, c;
    bool got, cl;
loop:
    skip;
    /* Locals are dead here: reset them so they do not multiply states. */
    d_step { t = 0; i = 0; a = 0; b = 0; c = 0; got = 0; cl = 0 };
    /* take_now(1, 1): one CAS on c_head */
    atomic {
        if
        :: c_head < p_tail -> t = c_head; c_head++; got = 1
        :: else -> got = 0
        fi
    };
    if
    :: got && tomb[t] -> goto loop
    :: got && !tomb[t] -> delivered++; goto loop
    :: else
    fi;
    /* settled closed (state, then p_head, p_tail): take what is there or
     * report end-of-data */
    cl = closed; a = p_head; b = p_tail;
    if
    :: cl && a == b ->
        c = c_head;
        if
        :: c < b -> goto loop
        :: else -> goto end
        fi
    :: else
    fi;
    /* register, set the wait bit, re-check */
    reg[me] = 1;
    deq_wait = 1;
    c = c_head; b = p_tail;
    cl = closed; a = p_head;
    if
    :: c < b || (cl && a == p_tail) ->
        atomic {
            if
            :: reg[me] -> reg[me] = 0                /* cancelled */
            :: else -> woken[me] = 0; wake_one()     /* woken meanwhile: pass it on */
            fi
        };
        goto loop
    :: else
    fi;
    woken[me];                                       /* sleep */
    woken[me] = 0;
    goto loop;
end:
    skip
}

proctype Closer()
{
    byte i;
    closed = 1;
    wake_all()
}

init
{
    byte k;
    atomic {
        k = 0;
        do
        :: k < NP -> run Producer(); k++
        :: else -> break
        od;
        k = 0;
        do
        :: k < NC -> run Consumer(k); k++
        :: else -> break
        od;
        run Closer()
    };
    (_nr_pr == 1);
    assert(delivered == real_published)
}
