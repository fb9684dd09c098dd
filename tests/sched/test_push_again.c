/* test_push_again.c - a task that runs again on its own worker (it yielded,
 * or it was woken while it ran) wakes no other worker when nothing else
 * waits on its worker (qf_scheduler.c, qf__push_again()).
 *
 * What is observed: the voluntary context switches of the runtime's worker
 * threads (/proc/self/task/<tid>/status) while one task runs again 1,000
 * times on a runtime of two workers and nothing else, doing some work
 * each time. A worker woken for nothing goes back to sleep, a voluntary
 * switch each time; with the push that woke the other worker, the workers
 * switched 21-1000 times in such a run (nine runs here), without it 0-2.
 * The bound leaves room for whatever else wakes a worker (its first sleep,
 * the spawn). The count is of events, not of time; a run of the old code
 * that happened to stay under the bound would pass (a woken worker that
 * cannot get a CPU keeps later pushes quiet), which the spread above makes
 * rare.
 *
 * And a sanity check of the pool around it: two tasks that yield still
 * run on both workers at once (seen inside their polls together,
 * synchronised on observable state, with a watchdog deadline). It does
 * not reach the fallback of the quiet push (the spawn's wakes split the
 * two tasks); nor does any test reach the wake that find_local() adds
 * when a timer or a rescue comes before the pushed task, a race of a few
 * instructions that the spin model checks instead
 * (tests/model/sched_idle.pml with NAGAIN > 0, and the seeded bug
 * QUIETWAKE=0 that leaves the wake out). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"

#define AGAIN 1000
/* Work between two runs: 100 us or so here, longer than a woken worker
 * searches before it sleeps again (qf_scheduler.c). A count of steps, not
 * a clock. */
#define WORK_STEPS 100000
#define SWITCHES_MAX 10

/* The voluntary context switches of the runtime's workers: the threads
 * whose name starts with "again" (others, such as a sanitizer's background
 * thread, wake on their own). */
static int workers_switches(long *ret_sum)
{
    long sum = 0;
    int found = 0;
    DIR *d = opendir("/proc/self/task");
    cr_assert(d, "/proc/self/task");
    struct dirent *e;
    while ((e = readdir(d))) {
        long tid = strtol(e->d_name, NULL, 10);
        if (tid <= 0)
            continue;
        char path[64], line[128];
        snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
        FILE *f = fopen(path, "r");
        bool ours = f && fgets(line, sizeof(line), f) && strncmp(line, "again", 5) == 0;
        if (f)
            fclose(f);
        snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
        if (!ours || !(f = fopen(path, "r")))
            continue; /* not a worker, or ended meanwhile */
        found++;
        while (fgets(line, sizeof(line), f))
            if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
                sum += strtol(line + 24, NULL, 10);
        fclose(f);
    }
    closedir(d);
    *ret_sum = sum;
    return found;
}

static atomic_int runs;

static void work(void)
{
    volatile unsigned x = 0;
    for (unsigned i = 0; i < WORK_STEPS; i++)
        x = x * 31 + i;
}

static qf_code yield_often(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    work();
    return atomic_fetch_add(&runs, 1) + 1 >= AGAIN ? QF_OK : QF_YIELD;
}

/* Woken while it runs: its state says NOTIFIED, so the pending return
 * polls it again at once. */
static qf_code wake_itself(qf_task *t, void *arg)
{
    (void)arg;
    work();
    if (atomic_fetch_add(&runs, 1) + 1 >= AGAIN)
        return QF_OK;
    qf_task_wake(t);
    return QF_PENDING;
}

/* Runs fn until it ends on a runtime of two workers (counted from when
 * both have started, so their first sleeps count too); returns the
 * workers' switches meanwhile. */
static long switches_of(qf_task_fn fn)
{
    qf_runtime_options o = {.workers = 2, .name = "again"};
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&o, &rt), QF_OK);
    atomic_store(&runs, 0);
    /* Each worker names itself once it runs: wait for both (a watchdog
     * turns a worker that never starts into a failure). */
    long before = 0, after = 0;
    qf_deadline watchdog = qf_deadline_in_s(60.0);
    while (workers_switches(&before) != 2) {
        cr_assert(!qf_deadline_passed(watchdog), "the workers never named themselves");
        sched_yield();
    }
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, fn, NULL, NULL, &t), QF_OK);
    cr_assert_eq(qf_task_join(t, qf_deadline_in_s(60.0), NULL), QF_OK, "watchdog");
    cr_assert_eq(workers_switches(&after), 2);
    qf_task_unref(t);
    qf_runtime_free(rt);
    cr_assert_eq(atomic_load(&runs), AGAIN);
    return after - before;
}

Test(push_again, a_yielding_task_alone_wakes_no_other_worker)
{
    long n = switches_of(yield_often);
    cr_assert_lt(n, SWITCHES_MAX, "%ld voluntary switches of the workers for %d yields", n, AGAIN);
}

Test(push_again, a_task_woken_while_it_ran_wakes_no_other_worker)
{
    long n = switches_of(wake_itself);
    cr_assert_lt(n, SWITCHES_MAX, "%ld voluntary switches of the workers for %d re-polls", n,
                 AGAIN);
}

/* Two tasks that each look for the other inside its poll at the same
 * time, yielding between looks: they meet only if the pool runs them on
 * two workers at once, which it must still do when a yield leaves another
 * task waiting on the worker (the push then says so, as before). A hang
 * is a failure of the join's deadline. */
static atomic_int inside;
static atomic_bool met;

static qf_code meet(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&inside, 1);
    for (int i = 0; i < 100000 && !atomic_load(&met); i++)
        if (atomic_load(&inside) == 2)
            atomic_store(&met, true);
    atomic_fetch_sub(&inside, 1);
    return atomic_load(&met) ? QF_OK : QF_YIELD;
}

Test(push_again, two_tasks_yielding_on_two_workers_still_run_at_once)
{
    qf_runtime_options o = {.workers = 2, .name = "again"};
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&o, &rt), QF_OK);
    atomic_store(&inside, 0);
    atomic_store(&met, false);
    qf_task *t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(qf_task_spawn(rt, meet, NULL, NULL, &t[i]), QF_OK);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(qf_task_join(t[i], qf_deadline_in_s(60.0), NULL), QF_OK, "watchdog");
        qf_task_unref(t[i]);
    }
    qf_runtime_free(rt);
}
