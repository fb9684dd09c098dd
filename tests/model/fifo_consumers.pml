/* fifo_consumers.pml - the FIFO engine's consumer wait/wake protocol
 * (queues/engine/qf_fifo_wait.c) over a ring with a turn per slot
 * (qf_ring-impl.h, 'turns'), model-checked with spin for lost wakes.
 *
 * Bounded world: NP producers each enqueue one element; NC consumers each
 * dequeue (one element at a time) until end-of-data; a closer closes the
 * queue at any moment. A producer that reserved its slot before the close
 * but checks CLOSED after it publishes a tombstone (the case that left
 * consumers asleep for good before: a consumer went back to sleep because a
 * reservation was in flight, and the tombstone's publish woke only one).
 * With CLOSE=0 there is no closer and no end-of-data: each consumer takes
 * NP / NC elements and returns, so a wake lost while elements are
 * takeable leaves a consumer asleep for good (with a closer, the close's
 * wake of everyone would hide it).
 *
 * The ring (indices never lap here: a slot per producer, so a mark is a
 * flag per index; ring_turns.pml checks the marks over laps):
 *   producer   reserve (p_head++), check CLOSED, write the element or a
 *              tombstone, publish its own slot (mark, then the fence),
 *              whatever earlier slots are doing; count for its wake its
 *              slot and the published run right after it, up to p_head
 *              (RUN=1); then load the state word and, when DEQ_WAIT is
 *              set, wake that many (everyone if CLOSED).
 *   consumer   take: read c_head, the mark of c_head; published: CAS
 *              c_head on (a failed CAS goes again); not: re-read c_head,
 *              go again if it moved, else nothing to take.
 *   count      (qf__ring_published_end) c_head, p_head, the run hint; the
 *              end of the published run: a scan of the marks from the hint
 *              if it lies in [c_head, p_head], else from c_head; then a CAS
 *              may move the hint to the end found (the code leaves it when
 *              the scan found nothing; here any count may leave it).
 *              HINT=0: no hint, every count scans from c_head (the
 *              protocol without the hint).
 *              Indices do not lap here, so a hint that nobody moved while
 *              the indices went all the way round (2^32 in C) and that lies
 *              in [c_head, p_head] again, with unpublished slots before it,
 *              is outside this model.
 *   settled closed (end-of-data): CLOSED, and nothing in flight: the
 *              published run from c_head, scanned without the hint (a hint
 *              stale by 2^32 indices must not make a slot in flight look
 *              published), reaches p_head (read again after the scan);
 *              then what is there (a count) is taken, or none: end-of-data.
 *   waiter     register, set DEQ_WAIT, re-check: a count (it needs one),
 *              then closed and settled; sleep only if neither holds.
 * A slot published out of turn is not takeable until the slots before it
 * are; a waiter that a publish woke for such a slot finds nothing, and
 * goes back to sleep. RUN=0, a wake for the publisher's own slot only,
 * is the seeded bug check.sh runs with CLOSE=0 (NP = NC = 2): both
 * consumers sleep; the producer of index 1 publishes first and wakes
 * consumer 0, which finds index 0 unpublished and sleeps again; the
 * producer of index 0 publishes and wakes one, which takes index 0 and
 * returns; the other sleeps for ever with index 1 takeable.
 *
 * Memory model: every shared access is one Promela statement, in an
 * interleaving (sequentially consistent) order. That is the order the C
 * code gives: multi-producer publishes are mark stores followed by a full
 * fence (or one seq_cst store), multi-consumer takes seq_cst CASes, waiters' announcements
 * seq_cst RMWs, their re-checks and the publisher's run count seq_cst
 * loads (qf_ring-impl.h, 'turns' and the fences); declared single sides
 * are made so by qf__fence_heavy(). Re-checks read one variable per
 * statement, in the order the code reads them, so a re-check can be torn
 * as in C.
 *
 * Checked: no invalid end state (a consumer blocked forever on its wake is
 * one), every element published is delivered exactly once, and no count
 * (from the hint or not) passes a slot that is not published.
 */
#ifndef NP
#define NP 2
#endif
#ifndef NC
#define NC 3
#endif
#ifndef CLOSE
#define CLOSE 1    /* 0: no closer; each consumer takes NP / NC elements */
#endif
#ifndef RUN
#define RUN 1      /* 0: a seeded bug, a publish wakes for its own slot only */
#endif
#ifndef HINT
#define HINT 1     /* counts start at the run hint */
#endif
#define TAKES (NP / NC)

byte p_head = 0;      /* reservations */
byte c_head = 0;      /* consumed */
byte hint = 0;        /* run_hint: where a count last saw the published run end */
bool pub[NP];         /* the mark of index t: published */
bool tomb[NP];        /* slot t holds a tombstone */
bool closed = 0;
bool deq_wait = 0;    /* sticky DEQ_WAIT bit */
bool reg[NC];         /* registered on deq_waiters */
bool woken[NC];       /* the wake a registered waiter sleeps for */
byte delivered = 0;
byte real_published = 0;

/* qf_waitlist_wake(n): the n oldest registered (here: the lowest
 * indices; the order does not matter for lost wakes). */
inline wake_n(n)
{
    atomic {
        i = 0;
        do
        :: n > 0 && i < NC -> if :: reg[i] -> reg[i] = 0; woken[i] = 1; n-- :: else fi; i++
        :: else -> break
        od
    }
}

inline wake_one()
{
    n = 1;
    wake_n(n)
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

/* qf__fifo_wake_consumers(n) after a publish. */
inline wake_consumers(n)
{
    if
    :: deq_wait ->
        if
        :: closed -> wake_all()
        :: else -> wake_n(n)
        fi
    :: else
    fi
}

/* qf__ring_published_end(): c = c_head, a = p_head, i = the end of the
 * published run from c (seq_cst loads), starting at the hint when it lies
 * in [c, a]; the hint may move on to i. */
inline published_end()
{
    c = c_head;
    a = p_head;
#if HINT
    h = hint;
    i = (c <= h && h <= a -> h : c);
#else
    i = c;
#endif
    do
    :: i < a && pub[i] -> i++
    :: else -> break
    od;
    /* ghost: the count never passes an unpublished slot (marks are never
     * reset here: no laps) */
    atomic { g = c; do :: g < i -> assert(pub[g]); g++ :: else -> break od; g = 0 };
#if HINT
    atomic { if :: i != h && hint == h -> hint = i :: true -> skip fi }
#endif
}

/* After CLOSED was seen: nothing in flight (qf__ring_in_flight(): the
 * published run from c_head, scanned without the hint, reaches p_head,
 * read again after the scan). */
inline settled(ok)
{
    c = c_head;
    a = p_head;
    i = c;
    do
    :: i < a && pub[i] -> i++
    :: else -> break
    od;
    ok = (i >= p_head)
}

proctype Producer()
{
    byte t, i, n, h;
    if
    :: closed -> goto done      /* refused before reserving */
    :: else
    fi;
    atomic { t = p_head; p_head++ };                 /* reservation CAS */
    if                                               /* closed check after it */
    :: closed -> tomb[t] = 1
    :: else -> tomb[t] = 0
    fi;
    /* publish: its own mark, out of turn or not (then the fence) */
    atomic { pub[t] = 1; if :: !tomb[t] -> real_published++ :: else fi };
    n = 1;
#if RUN
    /* and the published run right after it: it may have made those
     * takeable (p_head, then the marks) */
    h = p_head;
    i = t + 1;
    do
    :: i < h && pub[i] -> n++; i++
    :: else -> break
    od;
#endif
    wake_consumers(n);
done:
    skip
}

proctype Consumer(byte me)
{
    byte t, i, a, c, h, n, g, mine;
    bool got, cl, ok;
loop:
    skip;
    /* Locals are dead here: reset them so they do not multiply states. */
    d_step { t = 0; i = 0; a = 0; c = 0; h = 0; n = 0; got = 0; cl = 0; ok = 0 };
#if !CLOSE
    if
    :: mine == TAKES -> goto end
    :: else
    fi;
#endif
    /* take_now(1, 1): c_head, its mark, the CAS */
again:
    c = c_head;
    ok = (c < NP && pub[c]);
    if
    :: ok ->
        atomic {
            if
            :: c_head == c -> c_head++; got = 1
            :: else -> got = 0
            fi
        };
        if
        :: !got -> goto again                        /* from the c_head it read */
        :: got && tomb[c] -> goto loop
        :: got && !tomb[c] -> delivered++; mine++; goto loop
        fi
    :: else ->
        t = c_head;
        if
        :: t != c -> goto again                      /* stale: go again from there */
        :: else                                      /* nothing to take */
        fi
    fi;
    /* settled closed (state, then the count): take what is there or
     * report end-of-data */
    cl = closed;
    if
    :: cl ->
        settled(ok);
        if
        :: ok ->
            published_end();
            if
            :: i > c -> goto loop
            :: else -> goto end
            fi
        :: else
        fi
    :: else
    fi;
    /* register, set the wait bit, re-check */
    reg[me] = 1;
    deq_wait = 1;
    published_end();
    ok = (i > c);
    if
    :: !ok ->
        cl = closed;
        if
        :: cl -> settled(ok)
        :: else
        fi
    :: else
    fi;
    if
    :: ok ->
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
    assert(CLOSE || NP % NC == 0);
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
#if CLOSE
        run Closer()
#endif
    };
    (_nr_pr == 1);
    assert(delivered == real_published)
}
