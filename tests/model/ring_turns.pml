/* ring_turns.pml - a turn per slot: multi-producer publication with no
 * shared tail (queues/engine/qf_ring-impl.h, 'turns': qf__ring_publish,
 * qf__ring_take), model-checked with spin.
 *
 * NP producers each put ITER values into a ring of S slots (capacity CAP
 * <= S; the C code's is at most S - 1, CAP = S is the tighter case); NC
 * consumers take them until all are taken. Indices lap the ring,
 * so slots are reused and marks from earlier laps are met; with NC >= 2 a
 * consumer can read c_head, stall while the others take and producers
 * refill the slot, and go on with a stale c (a stale consumer).
 *
 *   producer   reserve k slots (1, or up to 2 with BULK) with one step on
 *              p_head, only while p_head - c_head + k <= CAP; write a value
 *              into each slot (the value is the index); then publish: store
 *              mark[i % S] = i + 1 for each of its indices, in either order,
 *              whatever other producers are doing (nobody waits for an
 *              earlier producer, nobody carries anyone).
 *   consumer   c = c_head; count the published run from c (mark[(c + j) %
 *              S] == c + j + 1 for j = 0, 1, ...; at most TMAX <= S); none:
 *              re-read c_head, and if it moved go again from there, else the
 *              ring is empty for it (here: it blocks until c_head moves or
 *              the mark at c is published, which is what retrying amounts
 *              to; fifo_consumers.pml models the real sleep and its wake).
 *              Else read the k values, then claim them with a CAS of c_head
 *              from c to c + k; a failed CAS goes again from the c_head it
 *              returns. A take here is min 1, max TMAX (<= S).
 *
 * Marks wrap at W (a multiple of 2 * S), as 32-bit ones wrap at 2^32, so a
 * mark left from the lap before is met in every slot: i + 1 and the
 * previous lap's i - S + 1 differ (and the initial mark[k] = k differs
 * from every k + n * S + 1 in parity). Indices themselves (p_head, c_head,
 * the value) are kept unwrapped and the bounds keep TOTAL = NP * ITER <=
 * W (init asserts it): no index goes all the way round the mark space
 * while a thread stalls. Past that a consumer stalled at c would find the
 * mark of index c + W, which reads like c's; in C that takes 2^32 indices,
 * and then its c_head CAS would succeed too (c_head wrapped as well): the
 * ABA of every 32-bit ring index (ring_tombs.pml has its tag form), which
 * the C code accepts.
 *
 * Memory model: every atomic instruction of the C code is one statement
 * here (a load of a mark, of a slot, of c_head; the p_head and c_head CAS
 * are single steps), in an interleaving (sequentially consistent) order.
 * The C code orders what this relies on with release stores of the marks
 * after the values and acquire loads of the marks before the values; a
 * stale consumer's relaxed loads of slots being rewritten are discarded
 * with its failed CAS.
 *
 * Checked (assertions, and spin's end states):
 *   - a claim takes only slots holding the value written for that index
 *     (data[i % S] == i when claimed), and the values the consumer read
 *     before it are those;
 *   - no slot is overwritten before the consumer that claimed it has read
 *     it (live[] below);
 *   - every value is delivered exactly once (at the end);
 *   - no invalid end state: nothing is stranded (no consumer waits for
 *     ever on a mark that is never published or missed).
 *
 * Seeded bugs (check.sh expects spin to find each):
 *   EARLY_MARK=1        the producer stores the mark before the value: a
 *                       consumer takes the slot with the previous lap's
 *                       (or no) value in it.
 *   READ_AFTER_CLAIM=1  the consumer reads the values after its claim: a
 *                       producer of the next lap may have rewritten the
 *                       slot by then.
 *   FLAG_MARK=1         the mark is a plain flag (1; initially 0, and never
 *                       reset, as no mark is reset any more) instead of the
 *                       index + 1: the flag a slot kept from the lap before
 *                       reads as "published", and a consumer at c_head claims
 *                       a slot of the next lap before its value is written.
 *                       (A stale consumer that meets a later lap's flag, or
 *                       mark, reads that lap's value, but its CAS fails:
 *                       it is the earlier lap's flag that does the harm.)
 */
#ifndef NP
#define NP 2
#endif
#ifndef NC
#define NC 2
#endif
#ifndef ITER
#define ITER 2
#endif
#ifndef S
#define S 2
#endif
#ifndef CAP
#define CAP S        /* the queue's capacity, <= S */
#endif
#ifndef W
#define W (2 * S)    /* marks wrap at W, a multiple of 2 * S */
#endif
#ifndef BULK
#define BULK 0       /* 1: a producer may reserve (and publish) 2 slots at once */
#endif
#ifndef TMAX
#define TMAX 2       /* the most a take claims (<= S) */
#endif
#ifndef EARLY_MARK
#define EARLY_MARK 0
#endif
#ifndef READ_AFTER_CLAIM
#define READ_AFTER_CLAIM 0
#endif
#ifndef FLAG_MARK
#define FLAG_MARK 0
#endif
#define TOTAL (NP * ITER)

/* The mark that says "index i is published". */
#if FLAG_MARK
#define PUB(i) 1
#else
#define PUB(i) (((i) + 1) % W)
#endif

byte p_head = 0;      /* unwrapped (TOTAL is small); slots are % S, marks % W */
byte c_head = 0;
byte mark[S];
byte data[S];         /* the value in the slot: the index it was written for */
bool live[S];         /* ghost: written, and not yet read by its claimer */
byte delivered[TOTAL];
byte taken = 0;       /* slots claimed */

inline write(i)
{
    d_step { assert(!live[(i) % S]); data[(i) % S] = i; live[(i) % S] = 1 }
}

inline publish(i)
{
    mark[(i) % S] = PUB(i)
}

proctype producer()
{
    byte n = 0, t, k, want;
    do
    :: n == ITER -> break
    :: else ->
        if
        :: want = 1
        :: BULK && ITER - n >= 2 -> want = 2
        fi;
        /* reserve: the CAS on p_head, up to `want` while there is room */
        atomic {
            p_head - c_head < CAP ->
            t = p_head;
            k = CAP - (p_head - c_head);
            if :: k > want -> k = want :: else fi;
            p_head = p_head + k
        };
#if EARLY_MARK
        publish(t);
        write(t);
        if
        :: k == 2 -> publish(t + 1); write(t + 1)
        :: else
        fi;
#else
        write(t);
        if
        :: k == 2 ->
            write(t + 1);
            if                                   /* marks in either order */
            :: publish(t); publish(t + 1)
            :: publish(t + 1); publish(t)
            fi
        :: else -> publish(t)
        fi;
#endif
        n = n + k;
        d_step { t = 0; k = 0; want = 0 }
    od
}

/* The claim succeeded: [c, c + k) is this consumer's. */
inline claimed(j, c, k)
{
    j = 0;
    do
    :: j < k ->
        assert(data[(c + j) % S] == c + j);  /* the value written for c + j is there */
        delivered[c + j]++;
#if !READ_AFTER_CLAIM
        live[(c + j) % S] = 0;               /* read already, before the claim */
#endif
        j++
    :: else -> break
    od
}

/* Read the k values from c into v[]: one load each. After the claim
 * (the seeded bug), a slot read is consumed. */
inline read_values(j, c, k)
{
    j = 0;
    do
    :: j < k ->
#if READ_AFTER_CLAIM
        d_step { v[j] = data[(c + j) % S]; live[(c + j) % S] = 0 };
#else
        v[j] = data[(c + j) % S];
#endif
        j++
    :: else -> break
    od
}

proctype consumer()
{
    byte c, k, j, v[TMAX];
    bool ok;
    do
    :: taken == TOTAL -> break
    :: else ->
        d_step { k = 0; j = 0; ok = 0; for (j : 0 .. TMAX - 1) { v[j] = 0 }; j = 0 };
        c = c_head;
again:
        k = 0;
        do                                       /* the published run from c */
        :: k < TMAX && mark[(c + k) % S] == PUB(c + k) -> k++
        :: else -> break
        od;
        if
        :: k == 0 ->
            j = c_head;                          /* stale c? */
            if
            :: j != c -> c = j; goto again
            :: else ->                           /* empty: retry once something moves */
                (taken == TOTAL || c_head != c || mark[c % S] == PUB(c))
            fi
        :: else ->
#if !READ_AFTER_CLAIM
            read_values(j, c, k);                /* the values, before the claim */
#endif
            atomic {                             /* the c_head CAS */
                if
                :: c_head == c ->
                    c_head = c + k;
                    taken = taken + k;
                    claimed(j, c, k);
                    ok = 1
                :: else -> c = c_head; ok = 0
                fi
            };
            if
            :: !ok -> goto again
            :: else
            fi;
#if READ_AFTER_CLAIM
            read_values(j, c, k);                /* the window the seeded bug leaves open */
#endif
            atomic {                             /* what it read is what was written */
                for (j : 0 .. k - 1) { assert(v[j] == c + j) };
                j = 0
            }
        fi
    od
}

init
{
    byte i;
    assert(CAP <= S && TMAX <= S && W % (2 * S) == 0 && TOTAL <= W);
    for (i : 0 .. S - 1) {
#if FLAG_MARK
        mark[i] = 0;
#else
        mark[i] = i;
#endif
        data[i] = 255
    }
    atomic {
        for (i : 1 .. NP) { run producer() }
        for (i : 1 .. NC) { run consumer() }
    }
    (_nr_pr == 1);
    for (i : 0 .. TOTAL - 1) { assert(delivered[i] == 1) }
    assert(taken == TOTAL && c_head == TOTAL && p_head == TOTAL)
}
