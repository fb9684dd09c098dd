/* task_join.pml - a task's done word and the threads that join it
 * (runtime/sched/qf_task.c: finish() and qf_task_join()), model-checked
 * with spin for a joiner left asleep after the task ended.
 *
 * The word: 0 running, 2 running with a joiner that may sleep, 1 done.
 * The task's end exchanges it to 1 and makes the futex wake call only
 * when it replaced 2. A joiner loads it: 1, it returns; 0, it marks it 2
 * with a CAS (a failed CAS loads again); then it sleeps in a futex wait
 * that checks, atomically with going to sleep, that the word is still 2
 * (else it loads again). A futex wake wakes every waiter asleep at that
 * moment (`wakes`, a count each sleeper compares with the one it went to
 * sleep with). NJ joiners; the first ND of them have a deadline that may
 * pass at any moment while they sleep: they give up (the word stays 2,
 * and the end's wake then finds nobody or the others).
 *
 * Seeded bug: MARK=0, a joiner that sleeps on 0 without marking, the end
 * seeing 0 and not waking it. check.sh expects spin to find it.
 *
 * Memory model: one shared access per statement; the exchange and the CAS
 * are single atomic steps (RMWs of one word in C), the futex wait's check
 * and sleep one step (the kernel's).
 *
 * Checked: once nothing can move, every joiner without a deadline has
 * returned (no invalid end state: none is left in its futex wait). */
#ifndef NJ
#define NJ 3
#endif
#ifndef ND
#define ND 1
#endif
#ifndef MARK
#define MARK 1
#endif

byte done = 0;
byte wakes = 0;
byte returned = 0;

active proctype task_end()
{
    byte old;
    atomic { old = done; done = 1 }
    if
    :: old == 2 -> wakes++
    :: else
    fi
}

proctype joiner(bool deadline)
{
    byte d, gen;
again:
    d = done;
    if
    :: d == 1 -> goto out
    :: else
    fi;
#if MARK
    if
    :: d == 0 ->
        atomic {
            if
            :: done == 0 -> done = 2; d = 2
            :: else -> d = 255
            fi
        }
        if
        :: d == 255 -> goto again
        :: else
        fi
    :: else
    fi;
#endif
    atomic {
        if
        :: done != d -> goto again
        :: else -> gen = wakes
        fi
    }
    if
    :: wakes != gen -> goto again
    :: deadline -> goto gave_up
    fi;
out:
    returned++;
gave_up:
    skip
}

init
{
    byte i = 0;
    atomic {
        do
        :: i < NJ -> run joiner(i < ND); i++
        :: else -> break
        od
    }
}
