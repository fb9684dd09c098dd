/* fifo_refill.pml - refill on dequeue (queues/engine/qf_fifo_wait.c, "Refill"),
 * model-checked with spin.
 *
 * Capacity CAP. Producer P enqueues N = CAP + K rows in one enqueue_many:
 * a reservation short of what it has left fills the queue, so it arrives
 * (reqs++, arriving++, ENQ_WAIT) before publishing those rows, links its
 * request, stops arriving, and re-checks: on a cancel it takes the request
 * back, on room it serves the line (possibly finishing itself). Optional
 * producer Q (NQ=1) enqueues one row the old way (enlist, ENQ_WAIT,
 * re-check, take back on room and re-try). Consumer C1 makes K dequeues;
 * optional C2 (NC=2) dequeues until the producers are done; optional closer
 * (CLOSE=1) cancels pending enqueues. A consumer that took a row and sees
 * ENQ_WAIT with reqs != 0 reads `arriving`, serves the line under req_lock
 * (reserve and publish for the oldest requests), and if room is left with
 * an arrival seen waits until arriving is 0 or the room is gone, then
 * serves again.
 *
 * Checked: no invalid end state (nobody asleep for good); with NC=1, NQ=0
 * and no close, TensorFlow's guarantee: a dequeue that began after P's
 * first rows were visible returns with the queue full, until all N are in.
 *
 * Seeded bugs (BUG=n; check.sh expects each to be caught):
 *   1  the consumer does not wait for arrivals (the old protocol)
 *   2  the consumer reads `arriving` after its pass instead of before
 *   3  the arrived producer takes its request back on room and re-tries
 *
 * req_lock sections are atomic blocks; every other statement is one
 * shared access (fifo_consumers.pml says what memory model this stands
 * for: seq_cst accesses, fences where a side is declared single).
 *
 * The ring is counted, not indexed: rsv (reserved, the room used) and pub
 * (published, not yet taken). With a turn per slot (qf_ring-impl.h,
 * 'turns') each row is published by its own mark, so P publishes its rows
 * one step each and a consumer may take the first before the next is
 * published. A row published out of turn (Q's, while P's earlier rows are
 * not yet) is not takeable in the ring until the rows before it are; the
 * count lets a consumer take one row as soon as any is published, which
 * covers every order the ring allows (the counts are the same whichever
 * row is taken). The marks themselves are ring_turns.pml's, the consumers'
 * wait on them fifo_consumers.pml's.
 */
#ifndef CAP
#define CAP 2
#endif
#ifndef K
#define K 2
#endif
#define N (CAP + K)
#ifndef NQ
#define NQ 0
#endif
#ifndef NC
#define NC 1
#endif
#ifndef CLOSE
#define CLOSE 0
#endif
#ifndef BUG
#define BUG 0
#endif

#define WAITING 0
#define DONE 1
#define CANCELLED 2

byte rsv = 0, pub = 0;  /* reserved (room used) and published */
byte reqs = 0, arriving = 0;
bool enq_wait = 0, cancelled = 0;
/* requests: 0 = P, 1 = Q */
bool linked[2];
byte order[2];
byte rdone[2];          /* rows of the request in */
byte rn[2];             /* rows of the request in all */
byte rstate[2];
byte next_order = 1;
byte pin = 0;           /* P's rows in the queue so far */
bool partial_seen = 0;  /* P's first rows are visible and it has not returned */
byte finished = 0;      /* producers that returned */
byte delivered = 0, accepted = 0;

/* Serve the line under req_lock: reserve and publish for the oldest
 * requests; who = the caller's own request (2: none). room_left as in
 * serve_requests(). */
inline serve(room_left, fin0, fin1)
{
    atomic {
        room_left = 0;
        do
        :: true ->
            if
            :: linked[0] && (!linked[1] || order[0] < order[1]) -> j = 0
            :: linked[1] && (!linked[0] || order[1] < order[0]) -> j = 1
            :: else -> room_left = (rsv < CAP); break
            fi;
            if
            :: cancelled -> break
            :: else
            fi;
            do
            :: rdone[j] < rn[j] && rsv < CAP ->
                rsv++; pub++; rdone[j]++; accepted++;
                if :: j == 0 -> pin++ :: else fi
            :: else -> break
            od;
            if
            :: rdone[j] == rn[j] ->
                linked[j] = 0; reqs--;
                if :: j == 0 -> fin0 = 1 :: else -> fin1 = 1 fi
            :: else -> break
            fi
        od
    }
}

/* Locals of the caller: bool room_left, f0, f1; byte a, j. One call site
 * per process (labels). */
inline complete_requests()
{
    skip;
cr_again:
    atomic { f0 = 0; f1 = 0 };
#if BUG == 2
    serve(room_left, f0, f1);
    a = arriving;
#else
    a = arriving;
    serve(room_left, f0, f1);
#endif
    if :: f0 -> rstate[0] = DONE :: else fi;
    if :: f1 -> rstate[1] = DONE :: else fi;
#if BUG != 1
    if
    :: a != 0 && room_left ->
        (arriving == 0 || rsv >= CAP);   /* pause / yield */
        goto cr_again
    :: else
    fi;
#endif
    atomic { room_left = 0; f0 = 0; f1 = 0; a = 0; j = 0 }
}

inline wake_producers()
{
    if
    :: enq_wait && reqs > 0 -> complete_requests()
    :: else
    fi
}

proctype P()
{
    byte k, done = 0;
    bool arrived = 0;
    bool room_left, f0, f1;
    byte a, j;
again:
    atomic {
        k = (CAP - rsv < N - done -> CAP - rsv : N - done);
        rsv = rsv + k
    };
    if
    :: cancelled && k > 0 -> rsv = rsv - k; goto out  /* tombstones, dropped */
    :: else
    fi;
    if
    :: k > 0 && k < N - done ->      /* fills the queue: arrive first */
        reqs++;
        arriving++;
        enq_wait = 1;
        arrived = 1
    :: else
    fi;
    do              /* publish: a mark per row, each takeable on its own */
    :: k > 0 ->
        atomic {
            pub++; pin++; done++; accepted++; k--;
            if :: done < N -> partial_seen = 1 :: else fi
        }
    :: else -> break
    od;
    if
    :: done == N -> goto out
    :: arrived -> goto in_line
    :: else -> goto again  /* k == 0 cannot happen before P arrived */
    fi;
in_line:
    atomic { linked[0] = 1; order[0] = next_order; next_order++; rn[0] = N; rdone[0] = done;
             rstate[0] = WAITING };
    arriving--;
    if
    :: cancelled ->
        atomic { if :: linked[0] -> linked[0] = 0; reqs--; goto out :: else fi }
    :: !cancelled && rsv < CAP ->
#if BUG == 3
        atomic { if :: linked[0] -> linked[0] = 0; reqs--; arrived = 0; done = rdone[0]; goto again :: else fi }
#else
        complete_requests()
#endif
    :: else
    fi;
    (rstate[0] != WAITING);
out:
    atomic { finished++; partial_seen = 0 }
}

proctype Q()
{
    bool ok;
retry:
    atomic {
        if
        :: cancelled -> goto out
        :: rsv < CAP -> rsv++; ok = 1
        :: else -> ok = 0
        fi
    };
    if
    :: ok -> pub++; accepted++; goto out
    :: else
    fi;
    atomic { linked[1] = 1; order[1] = next_order; next_order++; rn[1] = 1; rdone[1] = 0;
             rstate[1] = WAITING; reqs++ };
    enq_wait = 1;
    if
    :: rsv < CAP || cancelled ->
        atomic { if :: linked[1] -> linked[1] = 0; reqs--; goto retry :: else fi }
    :: else
    fi;
    (rstate[1] != WAITING);
out:
    finished++
}

proctype C1()
{
    byte i = 0;
    bool saw;
    bool room_left, f0, f1;
    byte a, j;
loop:
    saw = partial_seen && i < K;
    if
    :: atomic { pub > 0 -> pub--; rsv--; delivered++ }
    :: finished == 1 + NQ && pub == 0 -> goto end
    fi;
    wake_producers();
#if NC == 1 && NQ == 0 && !CLOSE
    assert(!saw || pin == N || pub == CAP);
#endif
    i++;
    goto loop;
end:
    skip
}

proctype C2()
{
    bool room_left, f0, f1;
    byte a, j;
loop:
    if
    :: atomic { pub > 0 -> pub--; rsv--; delivered++ }
    :: finished == 1 + NQ && pub == 0 -> goto end
    fi;
    wake_producers();
    goto loop;
end:
    skip
}

proctype Closer()
{
    byte j;
    atomic {
        cancelled = 1;
        j = 0;
        do
        :: j < 2 -> if :: linked[j] -> linked[j] = 0; reqs--; rstate[j] = CANCELLED :: else fi; j++
        :: else -> break
        od
    }
}

init
{
    atomic {
        run P();
#if NQ == 1
        run Q();
#endif
        run C1();
#if NC == 2
        run C2();
#endif
#if CLOSE
        run Closer();
#endif
    };
    (_nr_pr == 1);
    assert(delivered == accepted)
}
