/* waker_cancel.pml - the wait list's register / wake / cancel protocol
 * (coord/qf_waker.c: qf_waitlist_register(), qf_waitlist_wake(),
 * qf_waitlist_cancel()), model-checked with spin, including a cancel on
 * the wrong list and a cancel of a waker that is no longer registered.
 *
 * One waker, two wait lists, each with a thread that wakes it whenever it
 * finds it there. The owner, ROUNDS times: registers the waker on a list
 * it picks, cancels it on a list it picks (the right one or the wrong one),
 * then cancels it once more (on the right list if the first cancel found
 * it elsewhere, else on either: the waker is IDLE or DONE by then). A
 * wake unlinks the waker and clears its list (one statement each) and
 * marks it CLAIMED under the list's lock, then, after the lock, runs the
 * wake function and stores DONE; a cancel that meets CLAIMED waits for
 * DONE, modelled as a blocking guard so that a wait that never ends is an
 * invalid end state, not a silent livelock.
 *
 * Seeded bug: OLD=1 is the cancel before issue 30: under the lock,
 * "REGISTERED" alone meant "ours to unlink" (whatever list it was on) and
 * anything else waited for DONE (for an IDLE waker: for ever); OLD=2 seeds
 * the IDLE wait alone. check.sh expects spin to find both.
 *
 * Memory model: as in fifo_consumers.pml, one shared access per statement
 * in an interleaving order; the fields read under a list's lock are
 * written under that lock or by the owner itself.
 *
 * Checked: no cancel waits for ever (no invalid end state); a cancel
 * unlinks only from the list the waker is on (its count never goes
 * negative, and the waker's list is that one); at most one wake per
 * registration; a true cancel means no wake, and after a false one the
 * waker is never CLAIMED (the owner may reuse it).
 */
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef OLD
#define OLD 0
#endif

#define IDLE 0
#define REG 1
#define CLAIMED 2
#define DONE 3

byte state = IDLE;
byte list = 0; /* 0: none; i + 1: list i */
byte cnt[2];
bool lk[2];
byte wakes = 0; /* wakes of the current registration */
bool owner_done = 0;

inline lock(i)
{
    atomic { !lk[i] -> lk[i] = 1 }
}

inline unlock(i)
{
    lk[i] = 0
}

/* Returns in `res`: 1 withdrawn, 0 not. */
inline cancel(c, res)
{
    lock(c);
    st = state;
    on = list;
#if OLD == 1
    if
    :: st == REG ->
        assert(cnt[c] > 0 && on == c + 1); /* unlinking from this list */
        cnt[c]--;
        list = 0;
        state = IDLE;
        unlock(c);
        res = 1
    :: else ->
        unlock(c);
        (state == DONE);
        res = 0
    fi
#else
    if
    :: st == REG && on == c + 1 ->
        assert(cnt[c] > 0);
        cnt[c]--;
        list = 0;
        state = IDLE;
        unlock(c);
        res = 1
    :: else ->
        unlock(c);
        if
#if OLD == 2
        :: st == CLAIMED || st == IDLE -> (state == DONE) /* seeded: the IDLE spin alone */
#else
        :: st == CLAIMED -> (state == DONE)
#endif
        :: else -> skip /* IDLE, DONE, or registered on the other list */
        fi;
        res = 0
    fi
#endif
}

proctype waker(byte i)
{
    /* Blocks while its list is empty, so that an owner waiting for a wake
     * that cannot come is a deadlock spin reports, not a livelock. */
    do
    :: owner_done -> break
    :: cnt[i] > 0 -> lock(i);
        if
        :: cnt[i] > 0 ->
            assert(list == i + 1 && state == REG);
            cnt[i]--;
            list = 0;
            state = CLAIMED;
            unlock(i);
            wakes++;
            assert(wakes <= 1);
            state = DONE
        :: else -> unlock(i)
        fi
    od
}

active proctype owner()
{
    byte r = 0, target, c, st, on;
    bit res;
    run waker(0);
    run waker(1);
    do
    :: r < ROUNDS ->
        /* register(target): the waker is IDLE or DONE here */
        assert(state == IDLE || state == DONE);
        if
        :: target = 0
        :: target = 1
        fi;
        lock(target);
        wakes = 0;
        state = REG;
        list = target + 1;
        cnt[target]++;
        unlock(target);
        /* cancel on either list */
        if
        :: c = 0
        :: c = 1
        fi;
        cancel(c, res);
        if
        :: res -> assert(wakes == 0 && state == IDLE)
        :: else -> assert(state != CLAIMED || c != target)
        fi;
        /* cancel again: where it is, if the first found it elsewhere */
        if
        :: !res && st == REG && c != target -> c = target
        :: else ->
            if
            :: c = 0
            :: c = 1
            fi
        fi;
        cancel(c, res);
        assert(state == IDLE || state == DONE);
        assert(state != DONE || wakes == 1);
        r++
    :: else -> break
    od;
    owner_done = 1
}
