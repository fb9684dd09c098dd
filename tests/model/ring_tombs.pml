/* ring_tombs.pml - tombstones as tags beside the ring, with a turn per
 * slot (queues/engine/qf_ring-impl.h, 'turns' and the tombstones:
 * qf__ring_write_tombstone, qf__ring_drop_tombs, qf__ring_untag),
 * model-checked with spin.
 *
 * NP producers each put ITER items, one slot at a time, into a ring of S
 * slots; each item is, by a nondeterministic choice, a value or a
 * tombstone (its producer found the queue closed after reserving). NC
 * consumers take one slot at a time until every item is accounted for.
 * Indices lap the ring; tags and marks wrap at W, as 32-bit ones do at
 * 2^32, so tags and marks from earlier laps are met.
 *
 *   producer   reserve (p_head++ while there is room); a tombstone: count
 *              it (tomb_n++), store tag[slot] = index + 1; a value: store
 *              it; then publish the slot on its own: mark[slot] = index + 1,
 *              whether or not earlier slots are published (ring_turns.pml
 *              checks the marks themselves, with bulk reserves and takes).
 *   consumer   read c_head (c); if the mark of c says published, read its
 *              value and, while tomb_n != 0, its tag; CAS c_head; on
 *              success a tagged slot is dropped, its tag reset (CAS index
 *              + 1 -> index) and tomb_n decremented; an untagged one is
 *              delivered. Not published: re-read c_head and go again if it
 *              moved, else empty (here: block until c_head moves or the
 *              mark comes, which is what retrying amounts to).
 *
 * Every atomic instruction of the C code is one step here (spin's
 * interleavings are sequentially consistent; the C code's release store of
 * the mark after the tag, tomb_n and value stores, and the consumer's
 * acquire load of the mark before it reads tomb_n and the tag, give the
 * consumer at least what this model's order does). Checked: every value is
 * delivered exactly once, no tombstone is delivered, every tombstone is
 * dropped (assertions at the end), and no invalid end state (no consumer
 * waits for ever on a slot whose mark it missed). Keep NP * ITER <= W: a
 * consumer stalled between its claim and its untag while W more indices
 * pass can reset a tag of a later lap (W = 4, ITER = 3 finds it), the ABA
 * every 32-bit ring index has (a c_head CAS stalled over 2^32 indices
 * would succeed as wrongly, and a stale consumer would read a mark W
 * indices on as its own), which the C code accepts. Seeded bug:
 * READ_AFTER_CLAIM=1 (a later lap's producer overwrites the slot first)
 * fails.
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
#ifndef W
#define W 8 /* indices wrap at W, a multiple of 2 * S */
#endif
#ifndef READ_AFTER_CLAIM
#define READ_AFTER_CLAIM 0 /* 1: a seeded bug, tags read after the claim */
#endif
#define TOTAL (NP * ITER)

byte p_head = 0; /* unwrapped: TOTAL is small; tags, marks and slots use % W, % S */
byte c_head = 0;
byte tomb_n = 0;
byte tag[S];
byte mark[S];   /* (index + 1) % W: that index is published */
byte val[S];          /* the unwrapped index of the value stored, 255: none */
bool is_tomb[TOTAL];  /* the producer's choice for each index */
byte delivered[TOTAL];
byte dropped[TOTAL];
byte accounted = 0;

proctype producer()
{
    byte i = 0, idx;
    do
    :: i < ITER ->
        atomic { p_head - c_head < S -> idx = p_head; p_head++ }
        if
        :: true ->
            is_tomb[idx] = true;
            tomb_n++;
            tag[idx % S] = (idx + 1) % W
        :: true ->
            val[idx % S] = idx
        fi;
        mark[idx % S] = (idx + 1) % W;   /* publish: no turn to wait for */
        i++
    :: else -> break
    od
}

proctype consumer()
{
    byte c, v, t, n;
    bool tomb;
    do
    :: accounted == TOTAL -> break
    :: else ->
        d_step { v = 0; t = 0; n = 0; tomb = 0 };  /* dead here: fewer states */
        c = c_head;
again:
        if
        :: mark[c % S] == (c + 1) % W ->
            v = val[c % S];
#if !READ_AFTER_CLAIM
            n = tomb_n;
            tomb = n != 0 && tag[c % S] == (c + 1) % W;
#endif
            atomic {
                if
                :: c_head == c -> c_head = c + 1
                :: else -> c = c_head; goto again
                fi
            }
#if READ_AFTER_CLAIM
            /* the window the seeded bug leaves open */
            n = tomb_n;
            tomb = n != 0 && tag[c % S] == (c + 1) % W;
#endif
            if
            :: tomb ->
                atomic { if :: tag[c % S] == (c + 1) % W -> tag[c % S] = c % W :: else fi }
                tomb_n--;
                dropped[c]++
            :: else ->
                assert(v == c);
                delivered[c]++
            fi;
            accounted++
        :: else ->
            v = c_head;              /* stale c? */
            if
            :: v != c -> c = v; goto again
            :: else -> (accounted == TOTAL || c_head != c || mark[c % S] == (c + 1) % W)
            fi
        fi
    od
}

init
{
    byte i;
    for (i : 0 .. S - 1) {
        tag[i] = i;
        mark[i] = i;
        val[i] = 255
    }
    atomic {
        for (i : 1 .. NP) { run producer() }
        for (i : 1 .. NC) { run consumer() }
    }
    (_nr_pr == 1);
    for (i : 0 .. TOTAL - 1) {
        if
        :: is_tomb[i] -> assert(dropped[i] == 1 && delivered[i] == 0)
        :: else -> assert(delivered[i] == 1 && dropped[i] == 0)
        fi
    }
    assert(tomb_n == 0)
}
