/* test_serve_sim.c - the qflow-serve-sim example, tested as a program: it
 * runs until SIGTERM, which must drain the batcher cleanly (exit 0, every
 * admitted request accounted for in the drain line), with either executor;
 * a timed run ends by itself; a bad option exits 2.
 *
 * The program is found through $QFLOW_SERVE_SIM, else the path meson
 * compiled in. The child gets default signal dispositions and an empty
 * mask. The signal is sent once the program has printed that its handlers
 * and executor are running (no sleeps). */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qf_time.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(serve_sim, .timeout = 180);
#endif

#ifndef QFLOW_SERVE_SIM
#define QFLOW_SERVE_SIM "qflow-serve-sim"
#endif

typedef struct child {
    pid_t pid;
    int out;
    char buf[1 << 16];
    size_t len;
} child;

static const char *program(void)
{
    const char *p = getenv("QFLOW_SERVE_SIM");
    return p && *p ? p : QFLOW_SERVE_SIM;
}

static void start(child *c, const char *const *args)
{
    const char *argv[32] = {program()};
    size_t n = 1;
    for (; args[n - 1] && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    c->pid = fork();
    cr_assert_neq(c->pid, -1, "fork: %s", strerror(errno));
    if (c->pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    c->out = fds[0];
    c->len = 0;
    c->buf[0] = 0;
}

/* Read until `want` appears (NULL: until EOF) or the deadline. */
static bool read_until(child *c, const char *want, qf_deadline deadline)
{
    for (;;) {
        if (want && strstr(c->buf, want))
            return true;
        int64_t left = deadline - qf_now_ns();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        int r = poll(&p, 1, (int)(left / 1000000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        ssize_t k = read(c->out, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return want == NULL;
        c->len += (size_t)k;
        c->buf[c->len] = 0;
    }
}

static int finish(child *c)
{
    bool eof = read_until(c, NULL, qf_deadline_in_s(120));
    if (!eof)
        kill(c->pid, SIGKILL);
    int status;
    pid_t w;
    while ((w = waitpid(c->pid, &status, 0)) < 0 && errno == EINTR)
        ;
    close(c->out);
    cr_assert(eof, "the program did not end; output:\n%s", c->buf);
    cr_assert_eq(w, c->pid);
    cr_assert(WIFEXITED(status), "killed by signal %d; output:\n%s",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0, c->buf);
    return WEXITSTATUS(status);
}

/* The drain line adds up. */
static void check_drain_line(const child *c)
{
    const char *d = strstr(c->buf, "drain       clean: ");
    cr_assert(d, "no clean drain line:\n%s", c->buf);
    unsigned long long a, b, e, dr, ca, q, rj, fl;
    int got = sscanf(d,
                     "drain       clean: admitted %llu = batched %llu + expired %llu + dropped "
                     "%llu + cancelled %llu + queued %llu; rejected %llu; in flight %llu",
                     &a, &b, &e, &dr, &ca, &q, &rj, &fl);
    cr_assert_eq(got, 8, "unparsable: %s", d);
    cr_expect_eq(a, b + e + dr + ca + q);
    cr_expect_eq(q, 0);
    cr_expect_eq(fl, 0);
    cr_expect(strstr(c->buf, "added latency (submit to batch hand-off)") != NULL);
    cr_expect(strstr(c->buf, "batch sizes (size: batches):") != NULL);
    cr_expect(strstr(c->buf, "outcomes    ok ") != NULL);
}

static void sigterm_drains(const char *executor)
{
    child *c = calloc(1, sizeof(*c));
    const char *args[] = {"--duration", "0",      "--rate",  "2000", "--handlers", "4",
                          "--executor", executor, "--grace", "5",    "--metrics",  NULL};
    start(c, args);
    cr_assert(read_until(c, "serve_sim: running", qf_deadline_in_s(60)), "not started:\n%s",
              c->buf);
    cr_assert_eq(kill(c->pid, SIGTERM), 0);
    cr_expect_eq(finish(c), 0, "output:\n%s", c->buf);
    cr_expect(strstr(c->buf, "stopped by signal") != NULL, "%s", c->buf);
    check_drain_line(c);
    cr_expect(strstr(c->buf, "qflow_serve_requests_total{batcher=\"sim\",outcome=\"admitted\"}") !=
              NULL);
    free(c);
}

Test(serve_sim, sigterm_drains_task_executor)
{
    sigterm_drains("task");
}

Test(serve_sim, sigterm_drains_thread_executor)
{
    sigterm_drains("thread");
}

Test(serve_sim, timed_run_ends_by_itself)
{
    child *c = calloc(1, sizeof(*c));
    const char *args[] = {"--duration",   "0.3", "--rate",   "5000",
                          "--priorities", "2",   "--policy", "drop-oldest",
                          "--max-queued", "64",  NULL};
    start(c, args);
    cr_expect_eq(finish(c), 0, "output:\n%s", c->buf);
    cr_expect(strstr(c->buf, "stopped by end of run") != NULL, "%s", c->buf);
    check_drain_line(c);
    free(c);
}

Test(serve_sim, bad_option_exits_2)
{
    child *c = calloc(1, sizeof(*c));
    const char *args[] = {"--policy", "sometimes", NULL};
    start(c, args);
    cr_expect_eq(finish(c), 2);
    free(c);
}
