/* test_embed.c - a program embedding a runtime of 0 workers (qf_embed.c):
 * loop turns that return a qf_code, qf_runtime_join_coord[_until]() driving
 * the loop while it joins, the Coordinator's stop fd waking it (from a
 * signal handler too), and the example program examples/embed_epoll.c,
 * run as a program (fork + exec; its path is compiled in as EMBED_EPOLL).
 *
 * The "host thread is asleep" points are observed, not slept for: a driven
 * join sleeps in ppoll(2), which /proc/self/task/<tid>/syscall shows.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qf_test_park.h"
#include "qflow.h"
#include "qf_test.h"

#ifndef EMBED_EPOLL
#define EMBED_EPOLL "embed_epoll"
#endif

static qf_runtime *host_rt(void)
{
    qf_runtime *rt = NULL;
    qf_runtime_options o = {.workers = 0, .name = "host"};
    cr_assert_eq(qf_runtime_new(&o, &rt), QF_OK, "%s", qf_last_message());
    return rt;
}

/* 1: thread `tid` sleeps in ppoll(2) (a driven join waiting); 0: not yet;
 * -1: /proc cannot tell. */
static int in_ppoll(int tid)
{
    char path[64], buf[128];
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    long nr;
    if (sscanf(buf, "%ld", &nr) != 1)
        return 0;
    return nr == SYS_ppoll;
}

/* Wait until `tid` is seen in ppoll twice in a row (at most 10 s). */
static void wait_in_ppoll(int tid)
{
    int streak = 0;
    for (int64_t end = qf_now_ns() + 10000000000; qf_now_ns() < end && streak < 2;) {
        int r = in_ppoll(tid);
        if (r < 0)
            return; /* cannot tell: the test still holds, less sharply */
        streak = r ? streak + 1 : 0;
        qft_nap();
    }
    cr_expect_geq(streak, 2, "the host thread never slept in ppoll");
}

/* A member task that parks until a stop, then finishes. */
static qf_code until_stop_task(qf_task *t, void *arg)
{
    qf_coord *c = arg;
    if (qf_coord_check_stop(c) || qf_task_is_cancelled(t))
        return QF_OK;
    if (!qf_coord_register_waker(c, qf_task_waker(t)))
        return QF_OK; /* a stop is in effect already */
    return QF_PENDING;
}

static void spawn_members(qf_runtime *rt, qf_coord *c, int n)
{
    qf_task_options o = {.name = "parked", .coord = c};
    for (int i = 0; i < n; i++)
        cr_assert_eq(qf_task_spawn(rt, until_stop_task, c, &o, NULL), QF_OK);
}

/* ------------------------------------------------------------- loop turns */

static qf_code count_task(qf_task *t, void *arg)
{
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
    return QF_OK;
}

Test(embed, loop_turns_return_a_code_and_the_number_of_polls)
{
    qf_runtime *rt = host_rt();
    atomic_int n = 0;
    int64_t polls = -7;
    cr_expect_eq(qf_runtime_try_run_once(rt, &polls), QF_OK);
    cr_expect_eq(polls, 0, "nothing runnable is not a failure");
    cr_assert_eq(qf_task_spawn(rt, count_task, &n, NULL, NULL), QF_OK);
    cr_assert_eq(qf_task_spawn(rt, count_task, &n, NULL, NULL), QF_OK);
    cr_expect_eq(qf_runtime_try_run_once(rt, &polls), QF_OK);
    cr_expect_eq(polls, 2);
    cr_expect_eq(atomic_load(&n), 2);
    int64_t t0 = qf_now_ns();
    cr_expect_eq(qf_runtime_run_once_until(rt, qf_deadline_in_ns(2000000), &polls), QF_OK);
    cr_expect_eq(polls, 0);
    cr_expect_geq(qf_now_ns() - t0, 2000000, "waited until the deadline");
    cr_expect_eq(qf_runtime_run_once_until(rt, QF_NO_WAIT, NULL), QF_OK, "ret_polls is optional");
    qf_runtime_free(rt);
}

Test(embed, loop_turns_refuse_bad_arguments_and_worker_runtimes)
{
    int64_t polls = -7;
    cr_expect_eq(qf_runtime_try_run_once(NULL, &polls), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_runtime_run_once_until(NULL, QF_FOREVER, &polls), QF_INVALID_ARGUMENT);
    qf_runtime *rt = host_rt();
    cr_expect_eq(qf_runtime_run_once_until(rt, -2, &polls), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "deadline -2") != NULL, "%s", qf_last_message());
    qf_runtime_free(rt);
    qf_runtime_options o = {.workers = 1};
    cr_assert_eq(qf_runtime_new(&o, &rt), QF_OK);
    cr_expect_eq(qf_runtime_try_run_once(rt, &polls), QF_FAILED_PRECONDITION);
    cr_expect_str_eq(qf_last_message(), "qf_runtime_try_run_once needs a runtime with 0 workers "
                                        "(this one has 1: its workers run the tasks)");
    cr_expect_eq(polls, -7, "untouched on failure");
    qf_runtime_free(rt);
}

/* ------------------------------------------------------------ driven join */

/* The trap the driven join removes: qf_coord_join() on the host thread
 * waits for tasks that only the host thread runs; its laggard message now
 * says so. qf_runtime_join_coord() runs them and joins. */
Test(embed, join_coord_runs_the_members_it_waits_for)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    spawn_members(rt, c, 3);
    cr_expect_eq(qf_runtime_try_run_once(rt, NULL), QF_OK); /* they park */
    cr_expect_eq(qf_coord_request_stop(c, NULL), QF_OK);
    qf_coord_join_report r = {0};
    cr_expect_eq(qf_runtime_join_coord(rt, c, 10.0, false, &r), QF_OK, "%s", qf_last_message());
    cr_expect_eq(r.n_members, 3);
    cr_expect_eq(r.n_finished, 3);
    cr_expect_eq(r.n_running, 0);
    cr_expect(r.stop_requested);
    cr_expect(qf_coord_joined(c));
    cr_expect_eq(qf_runtime_num_tasks(rt), 0);
    qf_coord_join_report_clear(&r);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

Test(embed, plain_join_on_the_host_thread_names_the_trap)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    spawn_members(rt, c, 1);
    cr_expect_eq(qf_runtime_try_run_once(rt, NULL), QF_OK);
    qf_coord_request_stop(c, NULL); /* wakes the task: it needs the host to run */
    cr_expect_eq(qf_coord_join(c, NULL, 0, 0.01, false, NULL), QF_DEADLINE_EXCEEDED);
    cr_expect_str_eq(qf_last_message(),
                     QF_COORD_LAGGARD_PREFIX "parked (tasks of a runtime with 0 workers run only "
                                             "while the host drives its loop: join with "
                                             "qf_runtime_join_coord())");
    qf_runtime_free(rt); /* shutdown runs the task to its end */
    qf_coord_free(c);
}

/* join_coord_until: before any stop the deadline ends the wait without
 * joining (the members stay registered); after a stop it joins. */
Test(embed, join_coord_until_before_a_stop_leaves_the_members_registered)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    spawn_members(rt, c, 2);
    qf_coord_join_report r = {0};
    int64_t t0 = qf_now_ns();
    cr_expect_eq(qf_runtime_join_coord_until(rt, c, qf_deadline_in_ns(20000000), false, &r),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_geq(qf_now_ns() - t0, 20000000);
    cr_expect_str_eq(qf_last_message(),
                     "qf_runtime_join_coord_until: the deadline passed before a stop was "
                     "requested; still running: parked parked (tasks of a runtime with 0 "
                     "workers run only while the host drives its loop: join with "
                     "qf_runtime_join_coord())");
    cr_expect_not(r.stop_requested);
    cr_expect_not(r.grace_expired);
    cr_expect_eq(r.n_running, 2);
    cr_expect_not(qf_coord_joined(c));
    qf_coord_join_report_clear(&r);

    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_runtime_join_coord_until(rt, c, qf_deadline_in_s(10), false, &r), QF_OK);
    cr_expect_eq(r.n_members, 2, "the same members, still registered");
    cr_expect_eq(r.n_finished, 2);
    cr_expect(qf_coord_joined(c));
    qf_coord_join_report_clear(&r);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* A task that sleeps on a timer: the driven join sleeps until the timer,
 * fires it, and the task ends; no stop needed (every member finished). */
typedef struct nap {
    qf_deadline at;
} nap;

static qf_code nap_task(qf_task *t, void *arg)
{
    nap *n = arg;
    if (qf_now_ns() >= n->at)
        return QF_OK;
    qf_task_sleep_until(t, n->at);
    return QF_PENDING;
}

Test(embed, join_coord_fires_timers)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    nap n = {.at = qf_deadline_in_ns(20000000)};
    qf_task_options o = {.name = "napper", .coord = c};
    cr_assert_eq(qf_task_spawn(rt, nap_task, &n, &o, NULL), QF_OK);
    cr_expect_eq(qf_runtime_join_coord(rt, c, 1.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_geq(qf_now_ns(), n.at);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* A member thread that ends while the host sleeps in the driven join wakes
 * it (through the coordinator's join fd). */
typedef struct watcher {
    int host_tid;
} watcher;

static void *end_when_host_sleeps(void *arg)
{
    watcher *w = arg;
    wait_in_ppoll(w->host_tid);
    return NULL;
}

Test(embed, a_member_thread_ending_wakes_the_driven_join)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    watcher w = {.host_tid = qft_tid()};
    pthread_t th;
    cr_assert_eq(qf_coord_thread_create(c, "watcher", end_when_host_sleeps, &w, &th), QF_OK);
    qf_coord_join_report r = {0};
    cr_expect_eq(qf_runtime_join_coord_until(rt, c, qf_deadline_in_s(30), false, &r), QF_OK, "%s",
                 qf_last_message());
    cr_expect_eq(r.n_finished, 1);
    cr_expect_not(r.stop_requested);
    qf_coord_join_report_clear(&r);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* A stop requested from a signal handler while the host sleeps in the
 * driven join wakes it; the join runs the stop work (the handler could
 * not), which wakes the parked member, runs it and joins. */
static qf_coord *sig_coord;
static void on_sigusr1(int sig)
{
    (void)sig;
    qf_coord_request_stop_from_signal(sig_coord);
}

static void *signal_when_host_sleeps(void *arg)
{
    watcher *w = arg;
    wait_in_ppoll(w->host_tid);
    raise(SIGUSR1); /* the handler runs on this thread */
    return NULL;
}

Test(embed, a_stop_from_a_signal_handler_wakes_the_driven_join)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    sig_coord = c;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr1;
    cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
    spawn_members(rt, c, 2);
    watcher w = {.host_tid = qft_tid()};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, signal_when_host_sleeps, &w), 0);
    qf_coord_join_report r = {0};
    cr_expect_eq(qf_runtime_join_coord(rt, c, 10.0, false, &r), QF_OK, "%s", qf_last_message());
    cr_expect(r.stop_requested);
    cr_expect_eq(r.n_finished, 2);
    pthread_join(th, NULL);
    sigaction(SIGUSR1, &old, NULL);
    qf_coord_join_report_clear(&r);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* One driven join per coordinator at a time; the second is refused and
 * changes nothing. */
typedef struct second {
    qf_coord *c;
    int host_tid;
    qf_code rc;
    char msg[256];
} second;

static void *second_join(void *arg)
{
    second *s = arg;
    wait_in_ppoll(s->host_tid);
    qf_runtime *rt2 = NULL;
    qf_runtime_options o = {.workers = 0};
    if (qf_runtime_new(&o, &rt2) == QF_OK) {
        s->rc = qf_runtime_join_coord_until(rt2, s->c, QF_NO_WAIT, false, NULL);
        snprintf(s->msg, sizeof(s->msg), "%s", qf_last_message());
        qf_runtime_free(rt2);
    }
    qf_coord_request_stop(s->c, NULL); /* lets the first join finish */
    return NULL;
}

Test(embed, one_driven_join_per_coordinator_at_a_time)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    spawn_members(rt, c, 1);
    second s = {.c = c, .host_tid = qft_tid(), .rc = QF_OK};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, second_join, &s), 0);
    cr_expect_eq(qf_runtime_join_coord(rt, c, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    pthread_join(th, NULL);
    cr_expect_eq(s.rc, QF_FAILED_PRECONDITION);
    cr_expect_str_eq(s.msg, "qf_runtime_join_coord_until: another thread is already driving a "
                            "join of this coordinator");
    qf_runtime_free(rt);
    qf_coord_free(c);
}

Test(embed, join_coord_on_a_runtime_with_workers_is_a_plain_join)
{
    qf_runtime *rt = NULL;
    qf_runtime_options o = {.workers = 2};
    cr_assert_eq(qf_runtime_new(&o, &rt), QF_OK);
    qf_coord *c = mkcoord();
    spawn_members(rt, c, 4);
    qf_coord_request_stop(c, NULL);
    qf_coord_join_report r = {0};
    cr_expect_eq(qf_runtime_join_coord_until(rt, c, qf_deadline_in_s(10), false, &r), QF_OK);
    cr_expect_eq(r.n_finished, 4);
    qf_coord_join_report_clear(&r);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

typedef struct in_task {
    qf_runtime *host;
    qf_coord *c;
    qf_code rc;
} in_task;

static qf_code join_inside_task(qf_task *t, void *arg)
{
    (void)t;
    in_task *a = arg;
    a->rc = qf_runtime_join_coord(a->host, a->c, 1.0, false, NULL);
    return QF_OK;
}

Test(embed, join_coord_refuses_bad_arguments_and_tasks)
{
    qf_runtime *rt = host_rt();
    qf_coord *c = mkcoord();
    qf_coord_join_report r = {.n_members = 77};
    cr_expect_eq(qf_runtime_join_coord(NULL, c, 1.0, false, &r), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "qf_runtime_join_coord: the runtime is NULL");
    cr_expect_eq(qf_runtime_join_coord_until(rt, NULL, QF_FOREVER, false, &r), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "qf_runtime_join_coord_until: the coordinator is NULL");
    cr_expect_eq(qf_runtime_join_coord(rt, c, -1.0, false, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_runtime_join_coord_until(rt, c, -5, false, &r), QF_INVALID_ARGUMENT);
    cr_expect_eq(r.n_members, 77, "report untouched");
    cr_expect_not(qf_coord_joined(c));

    in_task a = {.host = rt, .c = c, .rc = QF_OK};
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, join_inside_task, &a, NULL, &t), QF_OK);
    cr_expect_eq(qf_runtime_try_run_once(rt, NULL), QF_OK);
    cr_expect(qf_task_is_done(t));
    cr_expect_eq(a.rc, QF_FAILED_PRECONDITION);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* ------------------------------------------------- the example program */

typedef struct run {
    int status;
    char out[512];
} run;

/* Start the example with `arg` (or none); when `signal_after_ready`, send
 * SIGTERM once it printed "ready"; collect its stdout and status. */
static void run_example(const char *arg, bool signal_after_ready, run *res)
{
    int po[2];
    cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(SIGTERM, &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(po[1], 1) < 0)
            _exit(126);
        execl(EMBED_EPOLL, EMBED_EPOLL, arg, (char *)NULL);
        _exit(127);
    }
    close(po[1]);
    size_t len = 0;
    bool signalled = false;
    for (;;) {
        ssize_t n = read(po[0], res->out + len, sizeof(res->out) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        res->out[len] = 0;
        if (signal_after_ready && !signalled && strstr(res->out, "ready\n")) {
            kill(pid, SIGTERM);
            signalled = true;
        }
        if (len == sizeof(res->out) - 1)
            break;
    }
    res->out[len] = 0;
    close(po[0]);
    while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR)
        ;
}

Test(embed, example_program_handles_its_requests_and_exits)
{
    run r = {0};
    run_example("5000", false, &r);
    cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x", r.status);
    cr_expect_str_eq(r.out, "ready\ndone: handled 5000 requests, sum 12502500\n");
}

Test(embed, example_program_stops_cleanly_on_sigterm)
{
    run r = {0};
    run_example(NULL, true, &r);
    cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x, output %s", r.status,
              r.out);
    unsigned long long n = 0, sum = 1;
    cr_assert_eq(sscanf(r.out, "ready\nstopped: handled %llu requests, sum %llu", &n, &sum), 2,
                 "output: %s", r.out);
    cr_expect_eq(sum, n * (n + 1) / 2, "every request exactly once, in order: %llu, %llu", n, sum);
}
