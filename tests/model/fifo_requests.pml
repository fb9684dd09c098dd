/* fifo_requests.pml - producer threads blocked on a full queue, and the
 * consumers that finish their enqueues (queues/engine/qf_fifo_wait.c, "A put
 * request"), model-checked with spin.
 *
 * Capacity CAP. NP producer threads each enqueue one element: producer 0
 * waits forever (so a lost wake shows as a process blocked for good), the
 * others have a deadline that may pass at any moment; one consumer dequeues until
 * end-of-data; a closer closes the queue, plainly or cancelling pending
 * enqueues. A producer that finds the queue full becomes pending, enlists a
 * request under req_lock, sets ENQ_WAIT, re-checks room and cancellation,
 * then sleeps on its request's state. A consumer that frees a slot and sees
 * ENQ_WAIT puts the oldest request's element in itself (under req_lock),
 * unlinks it, and marks it DONE after dropping the lock. A producer whose
 * deadline passes takes its request back if it is still linked; otherwise
 * it waits for the final state, which is already on its way.
 *
 * req_lock critical sections are atomic blocks; everything else is one
 * shared access per statement (see fifo_consumers.pml for the memory model
 * this stands for). The consumer's own wait is fifo_consumers.pml's; here a
 * consumer sleeps on one flag that every publish and end-of-data sets.
 * A put is one step (the room taken and the element there at once): the
 * ring's reserve and per-slot publish (qf_ring-impl.h, 'turns') are
 * ring_turns.pml's and fifo_consumers.pml's; nothing here depends on the
 * order in which producers publish.
 *
 * Checked: no invalid end state (nobody asleep forever), and every element
 * whose enqueue succeeded is delivered.
 */
#ifndef NP
#define NP 2
#endif
#ifndef CAP
#define CAP 1
#endif

#define WAITING 0
#define DONE 1
#define CANCELLED 2

byte used = 0;         /* elements in the queue */
byte pending = 0;
bool closed = 0, cancelled = 0;
bool enq_wait = 0;
bool linked[NP];
byte order[NP];        /* enlisting order: the oldest is served first */
byte next_order = 1;
byte rstate[NP];
byte succeeded = 0, delivered = 0;
bool cons_asleep = 0, cons_wait = 0;

inline wake_consumer()
{
    if :: cons_wait -> cons_asleep = 0 :: else fi
}

proctype Producer(byte me; bool has_deadline)
{
    bool ok = 0, is_pending = 0;
    byte st;
    if
    :: closed -> goto out
    :: else
    fi;
retry:
    atomic {
        if
        :: used < CAP && !cancelled && (!closed || is_pending) -> used++; ok = 1
        :: else
        fi
    };
    if
    :: ok -> succeeded++; wake_consumer(); goto out
    :: else
    fi;
    if
    :: cancelled || (closed && !is_pending) -> goto out
    :: else
    fi;
    if
    :: !is_pending ->
        atomic {                                     /* become pending */
            if
            :: closed -> goto out
            :: else -> pending++; is_pending = 1
            fi
        }
    :: else
    fi;
    atomic { linked[me] = 1; order[me] = next_order; next_order++; rstate[me] = WAITING };
    enq_wait = 1;
    if                                               /* re-check: room or cancel */
    :: used < CAP || cancelled ->
        atomic {
            if
            :: linked[me] -> linked[me] = 0; goto retry
            :: else
            fi
        }
    :: else
    fi;
    if
    :: (rstate[me] != WAITING)                       /* woken with its final state */
    :: atomic {                                      /* the deadline passed */
           has_deadline;
           if
           :: linked[me] -> linked[me] = 0; goto out /* took it back: timed out */
           :: else                                   /* someone else has it */
           fi
       }
    fi;
    (rstate[me] != WAITING);                         /* final state on its way */
    st = rstate[me];
    if
    :: st == DONE -> succeeded++
    :: else
    fi;
out:
    if
    :: is_pending ->
        atomic { pending--; if :: pending == 0 && closed -> cons_asleep = 0 :: else fi }
    :: else
    fi
}

proctype Consumer()
{
    byte j, k, fin;
loop:
    atomic {
        if
        :: used > 0 -> used--; delivered++
        :: else -> goto check
        fi
    };
    /* wake_producers: finish the oldest request with the room */
    if
    :: enq_wait ->
        fin = NP;
        atomic {
            j = 0; k = 255;
            do
            :: j < NP -> if :: linked[j] && order[j] < k -> k = order[j]; fin = j :: else fi; j++
            :: else -> break
            od;
            if
            :: fin < NP && used < CAP && !cancelled -> used++; linked[fin] = 0
            :: else -> fin = NP
            fi
        };
        if
        :: fin < NP -> rstate[fin] = DONE
        :: else
        fi
    :: else
    fi;
    atomic { fin = 0; j = 0; k = 0 };
    goto loop;
check:
    if
    :: closed && pending == 0 && used == 0 -> goto end
    :: else
    fi;
    cons_asleep = 1;
    cons_wait = 1;
    if
    :: used > 0 || (closed && pending == 0) -> cons_asleep = 0; goto loop
    :: else
    fi;
    !cons_asleep;
    goto loop;
end:
    skip
}

proctype Closer()
{
    byte j;
    if
    :: closed = 1
    :: atomic {
           closed = 1; cancelled = 1;
           j = 0;
           do
           :: j < NP -> if :: linked[j] -> linked[j] = 0; rstate[j] = CANCELLED :: else fi; j++
           :: else -> break
           od
       }
    fi;
    cons_asleep = 0
}

init
{
    byte k;
    atomic {
        k = 0;
        do
        :: k < NP -> run Producer(k, k > 0); k++   /* producer 0 waits forever */
        :: else -> break
        od;
        run Consumer();
        run Closer()
    };
    (_nr_pr == 1);
    assert(delivered == succeeded)
}
