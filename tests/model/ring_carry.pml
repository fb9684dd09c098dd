/* ring_carry.pml - multi-producer publication without a commit wait
 * (queues/engine/qf_ring-impl.h, note 4: qf__ring_publish / qf__ring_carry),
 * model-checked with spin.
 *
 * NP producers each publish ITER values, one slot at a time, into a ring
 * of S slots that a consumer drains, so indices lap the ring and marks from
 * earlier laps are met. A producer reserves a slot (while there is room),
 * writes it, and CASes p_tail from its slot to the next; if p_tail is not
 * there yet it stores mark[slot] = index + 1 and carries from the p_tail
 * it then reads. A carrier at t reads the marks from t while they say
 * "written", CASes p_tail over them, resets them (CAS index + 1 -> index)
 * and goes on; a failed CAS ends its carry. Every step that the C code
 * does with one atomic instruction is one atomic step here; spin's
 * interleavings are sequentially consistent, as the seq_cst operations
 * the protocol relies on are.
 *
 * Checked: the consumer never reads a slot before it is written (p_tail
 * never passes an unwritten slot), and no invalid end state: the consumer
 * gets every value, so no written slot is stranded behind p_tail.
 */
#ifndef NP
#define NP 3
#endif
#ifndef ITER
#define ITER 2
#endif
#ifndef S
#define S 2
#endif
#ifndef W
#define W 4          /* marks wrap at W (a multiple of 2 * S), as 32-bit ones do at 2^32 */
#endif
#ifndef RESET
#define RESET 1      /* 0: a seeded bug, marks never reset */
#endif
#define TOTAL (NP * ITER)
#define M(x) ((x) % W) /* the mark value of index x - 1 */

byte p_head = 0;
byte p_tail = 0;
byte c_head = 0;
byte mark[S];
byte data[S];     /* index written there, 255 once consumed */
byte taken = 0;

inline carry(t)
{
    do
    :: true ->
        n = 0;
        do
        :: n < S && mark[(t + n) % S] == M(t + n + 1) -> n++
        :: else -> break
        od;
        if
        :: n == 0 -> break
        :: else
        fi;
        /* Indices here never wrap and the CAS and the resets after it
         * are one step: in C both matter only if a thread stalls there
         * while indices go round all of 2^32 (what every 32-bit index of
         * ck_ring assumes does not happen). Marks do wrap, at a small W,
         * so a mark left from an earlier lap (a missing reset) is met. */
        atomic {
            if
            :: p_tail == t ->
                p_tail = t + n;
                ok = 1;
                i = 0;
                do
                :: i < n ->
                    if
                    :: RESET && mark[(t + i) % S] == M(t + i + 1) -> mark[(t + i) % S] = M(t + i)
                    :: else
                    fi;
                    i++
                :: else -> break
                od
            :: else -> ok = 0
            fi
        };
        if
        :: !ok -> break
        :: else
        fi;
        t = t + n
    od
}

proctype Producer()
{
    byte t, n, i, it;
    bool ok;
    it = 0;
    do
    :: it < ITER ->
        atomic { p_head - c_head < S -> t = p_head; p_head++ };  /* reserve */
        data[t % S] = t;                                         /* write */
        atomic {
            if
            :: p_tail == t -> p_tail = t + 1; ok = 1
            :: else -> ok = 0
            fi
        };
        if
        :: ok -> t = t + 1
        :: else -> mark[t % S] = M(t + 1); t = p_tail
        fi;
        carry(t);
        it++
    :: else -> break
    od
}

proctype Consumer()
{
    do
    :: taken < TOTAL ->
        atomic {
            c_head < p_tail ->
            assert(data[c_head % S] == c_head);
            data[c_head % S] = 255;
            c_head++;
            taken++
        }
    :: else -> break
    od
}

init
{
    byte k;
    atomic {
        k = 0;
        do
        :: k < S -> mark[k] = k; data[k] = 255; k++
        :: else -> break
        od;
        k = 0;
        do
        :: k < NP -> run Producer(); k++
        :: else -> break
        od;
        run Consumer()
    };
    (_nr_pr == 1);
    assert(taken == TOTAL && p_tail == p_head && p_tail == c_head)
}
