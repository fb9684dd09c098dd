/* test_next_slot.c - a task waiting in a worker's next slot is not left
 * behind a task that another source supplied first (qf_scheduler.c,
 * before_next()).
 *
 * The next slot holds the task a worker woke last (or a timer it fired);
 * its next pick takes it first, except on the pick where the fairness
 * tick looks at the global queue first (every GLOBAL_EVERY-th) or a rescue
 * supplies a task. The task that goes first may run long; no other
 * worker's look or steal sees a next slot, so, left there, the slot's task
 * waited until it ended while the other worker slept (found by the spin
 * model with next slots).
 *
 * Each round, on two workers: a blocker task holds one worker; a driver
 * task on the other wakes a parked task X (into its own next slot), then
 * waits until the main thread has spawned a gate task G (into the global
 * queue, where the busy workers leave it). The driver ends; its worker's
 * next pick takes X, or, on a fairness tick, G first. G lets the blocker
 * end, then waits for X to run: the other worker, free now, must find it.
 * A round where X has not run within LATE_NS of G's start is late (with
 * the fix left out, 24 of the 1,220 rounds of a run here were).
 * The rounds cover every tick residue many times over, since a round
 * takes three picks and 61 is prime; a run that missed them all would
 * pass, which the count of rounds makes unlikely. Everything waits on
 * observable state with deadlines; the joins have a watchdog. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "qflow.h"

#define ROUNDS 1220
#define LATE_NS 1000000000LL /* G's wait for X; a found X runs in microseconds */
#define WATCHDOG_S 60.0

static atomic_bool x_ran, blocker_in, release_blocker, driver_woke, gate_spawned;
static atomic_int late, blocker_timeouts;

static bool wait_flag(atomic_bool *f, qf_deadline d)
{
    while (!atomic_load(f)) {
        if (qf_deadline_passed(d))
            return false;
        sched_yield();
    }
    return true;
}

static qf_code parked_x(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&x_ran, true);
    return QF_OK;
}

static qf_code blocker(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&blocker_in, true);
    if (!wait_flag(&release_blocker, qf_deadline_in_s(WATCHDOG_S)))
        atomic_fetch_add(&blocker_timeouts, 1);
    return QF_OK;
}

static qf_code driver(qf_task *t, void *arg)
{
    (void)t;
    qf_task_wake(arg); /* X: into this worker's next slot */
    atomic_store(&driver_woke, true);
    (void)wait_flag(&gate_spawned, qf_deadline_in_s(WATCHDOG_S));
    return QF_OK;
}

static qf_code gate(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&release_blocker, true);
    qf_deadline d = qf_deadline_in_ns(LATE_NS);
    if (!wait_flag(&x_ran, d))
        atomic_fetch_add(&late, 1);
    return QF_OK;
}

static qf_task *spawn(qf_runtime *rt, qf_task_fn fn, void *arg, bool suspended)
{
    qf_task_options o = {.suspended = suspended};
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, fn, arg, &o, &t), QF_OK);
    return t;
}

static void join(qf_task *t)
{
    cr_assert_eq(qf_task_join(t, qf_deadline_in_s(WATCHDOG_S), NULL), QF_OK, "watchdog");
    qf_task_unref(t);
}

Test(next_slot, a_woken_task_is_not_left_behind_the_fairness_tick)
{
    qf_runtime_options o = {.workers = 2, .name = "nextslot"};
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&o, &rt), QF_OK);
    atomic_store(&late, 0);
    atomic_store(&blocker_timeouts, 0);
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&x_ran, false);
        atomic_store(&blocker_in, false);
        atomic_store(&release_blocker, false);
        atomic_store(&driver_woke, false);
        atomic_store(&gate_spawned, false);
        qf_task *x = spawn(rt, parked_x, NULL, true);
        qf_task *b = spawn(rt, blocker, NULL, false);
        cr_assert(wait_flag(&blocker_in, qf_deadline_in_s(WATCHDOG_S)), "the blocker never ran");
        qf_task *d = spawn(rt, driver, x, false);
        cr_assert(wait_flag(&driver_woke, qf_deadline_in_s(WATCHDOG_S)), "the driver never ran");
        qf_task *g = spawn(rt, gate, NULL, false);
        atomic_store(&gate_spawned, true);
        join(d);
        join(g);
        join(b);
        join(x);
    }
    qf_runtime_free(rt);
    cr_assert_eq(atomic_load(&blocker_timeouts), 0);
    cr_assert_eq(atomic_load(&late), 0,
                 "%d of %d rounds: the woken task waited in the next slot behind the gate task",
                 atomic_load(&late), ROUNDS);
}
