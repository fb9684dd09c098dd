/* test_timers_stress.c - task timers armed while other workers sleep.
 *
 * An arm of the runtime's earliest timer wakes the sleeping workers only
 * when one of them published a deadline later than the new one
 * (qf_scheduler.c, "timers"; tests/model/sched_idle.pml). A timer that no
 * worker takes would leave its task parked for good once every worker is
 * asleep, so each test here is a liveness check: tasks sleep on timers of
 * random short periods, round after round, on pools with more workers than
 * cores and on pools of one, so that workers keep going to sleep with each
 * other's deadlines (and with stale ones from earlier sleeps) while timers
 * are armed. Every task must finish all its rounds; a join deadline and a
 * watchdog turn a lost timer into a failure. No timing is asserted.
 *
 * The notify matters when the arming worker is then held: the last test
 * arms a timer and hands its worker to a task that waits for that timer's
 * task, with the other worker asleep (white-box: both announced in the
 * idle event count). Only the sleeper can fire the timer; without the
 * notify it sleeps on and the test fails at its join deadline. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "qf_runtime-impl.h" /* white-box: the idle event count's sleepers */
#include "qf_test_stress.h"
#include "qflow.h"

#define JOIN_LIMIT_NS 60000000000LL
#define WATCHDOG_S 120

typedef struct sleeper {
    uint64_t rng;
    qf_deadline at; /* armed deadline; 0: none */
    long rounds_left;
    atomic_long *rounds_done;
} sleeper;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One round: arm a timer 0-400 us ahead (sometimes already due, sometimes
 * re-armed before it fires), park, and count the round once the deadline
 * has passed; an early poll arms the same deadline again. */
static qf_code sleeper_task(qf_task *t, void *arg)
{
    sleeper *s = arg;
    if (qf_task_is_cancelled(t))
        return qf_set_error(QF_CANCELLED, "timer sleeper cancelled");
    if (s->at != 0) {
        if (!qf_deadline_passed(s->at)) {
            qf_task_sleep_until(t, s->at);
            return QF_PENDING;
        }
        s->at = 0;
        atomic_fetch_add(s->rounds_done, 1);
        if (--s->rounds_left == 0)
            return QF_OK;
    }
    uint64_t r = next_rand(&s->rng);
    int64_t ahead = (int64_t)(r % 400000);
    if (r % 16 == 0)
        ahead = 0; /* due at once */
    if (r % 16 == 1) {
        /* a far deadline first, then the real one: a re-arm to earlier */
        qf_task_sleep_until(t, qf_deadline_in_ns(1000000000));
    }
    s->at = qf_deadline_in_ns(ahead);
    qf_task_sleep_until(t, s->at);
    return QF_PENDING;
}

typedef struct run {
    long tasks, rounds;
    atomic_long done;
} run;

static void report(void *arg)
{
    run *r = arg;
    fprintf(stderr, "timers_stress: %ld of %ld rounds done (a lost timer?)\n",
            atomic_load(&r->done), r->tasks * r->rounds);
}

static void sleepers_on(int workers, long tasks, long rounds)
{
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = workers, .name = "timers"}, &rt),
                 QF_OK);
    run r = {.tasks = tasks, .rounds = rounds};
    atomic_init(&r.done, 0);
    qft_watchdog wd;
    qft_watchdog_start(&wd, WATCHDOG_S, report, &r);
    sleeper *s = calloc((size_t)tasks, sizeof(*s));
    qf_task **ts = calloc((size_t)tasks, sizeof(*ts));
    cr_assert(s && ts);
    for (long i = 0; i < tasks; i++) {
        s[i] = (sleeper){.rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + (uint64_t)workers,
                         .rounds_left = rounds,
                         .rounds_done = &r.done};
        cr_assert_eq(qf_task_spawn(rt, sleeper_task, &s[i], NULL, &ts[i]), QF_OK);
    }
    for (long i = 0; i < tasks; i++) {
        qf_code rc = qf_task_join(ts[i], qf_deadline_in_ns(JOIN_LIMIT_NS), NULL);
        cr_assert_eq(rc, QF_OK, "task %ld: %s after %ld of %ld rounds in all (a lost timer?)", i,
                     qf_code_name(rc), atomic_load(&r.done), tasks * rounds);
        qf_task_unref(ts[i]);
    }
    qft_watchdog_stop(&wd);
    cr_expect_eq(atomic_load(&r.done), tasks * rounds);
    free(ts);
    free(s);
    qf_runtime_free(rt);
}

Test(timers_stress, one_task_period_after_period_on_two_workers)
{
    /* The pattern the arm skips its notify for: the other worker sleeps
     * until this task's last deadline. */
    sleepers_on(2, 1, qft_stress_scale(3000, 200));
}

Test(timers_stress, few_tasks_on_four_workers_of_two_cores, .timeout = 300)
{
    sleepers_on(4, 3, qft_stress_scale(2000, 100));
}

Test(timers_stress, many_tasks_on_eight_workers, .timeout = 300)
{
    sleepers_on(8, 64, qft_stress_scale(200, 20));
}

/* Oversubscribed (16 workers on 2 cores, 128 sleepers) and shut down at a
 * moment drawn at random from the rounds done: every task ends, parked on
 * its timer or not, finished or cancelled, and the shutdown returns. */
Test(timers_stress, shutdown_at_a_random_moment_ends_every_sleeper, .timeout = 300)
{
    long tasks = 128, rounds = qft_stress_scale(100, 10), trials = qft_stress_scale(10, 3);
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (long trial = 0; trial < trials; trial++) {
        qf_runtime *rt = NULL;
        cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 16, .name = "timers"}, &rt),
                     QF_OK);
        run r = {.tasks = tasks, .rounds = rounds};
        atomic_init(&r.done, 0);
        qft_watchdog wd;
        qft_watchdog_start(&wd, WATCHDOG_S, report, &r);
        sleeper *s = calloc((size_t)tasks, sizeof(*s));
        qf_task **ts = calloc((size_t)tasks, sizeof(*ts));
        cr_assert(s && ts);
        for (long i = 0; i < tasks; i++) {
            s[i] = (sleeper){
                .rng = next_rand(&rng) | 1, .rounds_left = rounds, .rounds_done = &r.done};
            cr_assert_eq(qf_task_spawn(rt, sleeper_task, &s[i], NULL, &ts[i]), QF_OK);
        }
        /* Shut down once a random share of all rounds is done. */
        long stop_at = (long)(next_rand(&rng) % (uint64_t)(tasks * rounds));
        while (atomic_load(&r.done) < stop_at)
            sched_yield();
        cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_ns(JOIN_LIMIT_NS)), QF_OK,
                     "trial %ld: shutdown after %ld rounds did not end every task", trial,
                     atomic_load(&r.done));
        for (long i = 0; i < tasks; i++) {
            qf_code rc = qf_task_join(ts[i], QF_FOREVER, NULL);
            cr_assert(rc == QF_OK || rc == QF_CANCELLED, "task %ld: %s", i, qf_code_name(rc));
            qf_task_unref(ts[i]);
        }
        qft_watchdog_stop(&wd);
        free(ts);
        free(s);
        qf_runtime_free(rt);
    }
}

Test(timers_stress, tasks_on_one_worker, .timeout = 300)
{
    sleepers_on(1, 4, qft_stress_scale(1000, 50));
}

/* ------------------------------------------- a timer whose worker is held */

#define HELD_LIMIT_NS 20000000000LL

typedef struct held {
    qf_task *hog;
    qf_deadline at; /* 0: not armed yet */
    atomic_bool done;
    atomic_bool hog_gave_up;
} held;

/* Holds its worker (one long poll) until the sleeper's timer has fired. */
static qf_code hog_task(qf_task *t, void *arg)
{
    (void)t;
    held *h = arg;
    qf_deadline limit = qf_deadline_in_ns(HELD_LIMIT_NS);
    while (!atomic_load(&h->done))
        if (qf_deadline_passed(limit)) {
            atomic_store(&h->hog_gave_up, true);
            break;
        }
    return QF_OK;
}

/* Wakes the hog into this worker's next slot, arms the runtime's only
 * timer, parks; done once the timer has fired. */
static qf_code armer_task(qf_task *t, void *arg)
{
    held *h = arg;
    if (h->at == 0) {
        qf_task_wake(h->hog);
        h->at = qf_deadline_in_ns(200000);
        qf_task_sleep_until(t, h->at);
        return QF_PENDING;
    }
    if (!qf_deadline_passed(h->at)) {
        qf_task_sleep_until(t, h->at);
        return QF_PENDING;
    }
    atomic_store(&h->done, true);
    return QF_OK;
}

Test(timers_stress, a_timer_armed_before_its_worker_is_held_fires_on_the_sleeper, .timeout = 300)
{
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2, .name = "held"}, &rt), QF_OK);
    long rounds = qft_stress_scale(200, 20);
    for (long i = 0; i < rounds; i++) {
        held h = {0};
        atomic_init(&h.done, false);
        atomic_init(&h.hog_gave_up, false);
        qf_task *a = NULL;
        cr_assert_eq(qf_task_spawn(rt, hog_task, &h, &(qf_task_options){.suspended = true}, &h.hog),
                     QF_OK);
        cr_assert_eq(qf_task_spawn(rt, armer_task, &h, &(qf_task_options){.suspended = true}, &a),
                     QF_OK);
        /* Both workers idle (announced sleepers), so the one the wake below
         * gets up runs the armer and the hog, and the other sleeps on. */
        qf_deadline limit = qf_deadline_in_ns(HELD_LIMIT_NS);
        while (atomic_load(&rt->idle.qf__sleepers) < 2)
            cr_assert(!qf_deadline_passed(limit), "round %ld: the workers never went idle", i);
        qf_task_wake(a);
        cr_assert_eq(qf_task_join(a, qf_deadline_in_ns(HELD_LIMIT_NS + 5000000000LL), NULL), QF_OK);
        cr_assert_eq(qf_task_join(h.hog, QF_FOREVER, NULL), QF_OK);
        cr_assert(!atomic_load(&h.hog_gave_up),
                  "round %ld: the timer fired only after its worker was let go (the sleeping "
                  "worker did not take it)",
                  i);
        qf_task_unref(a);
        qf_task_unref(h.hog);
    }
    qf_runtime_free(rt);
}
