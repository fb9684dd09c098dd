/* bench_runners.c - N QueueRunners on a fixed worker pool against the
 * TensorFlow way, one OS thread per enqueue op (baseline_thread_per_runner.c),
 * for N = 100, 1000, 10000. See bench_runners.h for how a repetition runs.
 *
 * qflow: N runner objects, each with one pointer produce op
 * (QF_OP_PRODUCE_PTR), started as N tasks on a runtime with one worker per
 * online CPU and a Coordinator; all feed one inline pointer FIFOQueue of
 * capacity 1024 that the child's main thread drains with
 * qf_queue_dequeue_ptr. Like the baseline's threads, the runners move bare
 * pointers: no allocation per value on either side. Stop: qf_coord_request_stop (the runners'
 * cancel ops close the queue, parked tasks wake and leave), timed until qf_coord_join returns.
 *
 * Results: runners.tput.<N> (items/s in the window), runners.rss.<N> (peak
 * RSS growth, bytes) and runners.stop_join.<N> (ns), all three from the
 * same child run. RSS is user-space memory only: the kernel's own memory
 * per thread (a 16 KiB kernel stack and about 7 KiB of task structures on
 * this kernel) is in no RSS figure, so the baseline's real cost is higher
 * than its row says. */
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_run.h"
#include "bench_runners.h"
#include "qf_coordinator.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_runtime.h"

/* A child still running after this long is stuck: SIGALRM ends it and the
 * parent reports the failure instead of hanging the whole program. */
#define CHILD_LIMIT_S 60
#define CHECK_EVERY 64
/* Every runner's first element should be in the queue well within this. */
#define START_LIMIT_NS 20000000000u

/* --------------------------------------------------------- the consumer */

/* From /proc/self/status, "VmRSS" or "VmHWM", in bytes; -1 if unreadable. */
static int64_t proc_status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    size_t n = strlen(field);
    int64_t kb = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = strtoll(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

typedef struct checker {
    uint32_t *last; /* per runner: the last sequence number seen */
    unsigned runners;
    unsigned delivered; /* runners whose first element arrived */
    const char *impl;
} checker;

static void check_value(checker *c, void *v)
{
    uint64_t x = (uint64_t)(uintptr_t)v;
    uint64_t id = (x >> 32) - 1;
    uint32_t seq = (uint32_t)x;
    if (id >= c->runners || seq != c->last[id] + 1)
        bench_fail("runners/%s: got value %#llx (runner %llu, seq %u) but expected seq %u: an "
                   "element was lost, duplicated or reordered",
                   c->impl, (unsigned long long)x, (unsigned long long)id, seq,
                   id < c->runners ? c->last[id] + 1 : 0);
    c->delivered += c->last[id] == 0;
    c->last[id] = seq;
}

/* Drain for `ns`, and (with `all`) at least until every runner's first
 * element has arrived: delivery, not a produce call, is what counts;
 * returns the number of elements taken. */
static uint64_t drain_for(checker *c, rb_dequeue_fn dequeue, void *q, uint64_t ns, bool all)
{
    uint64_t n = 0, t0 = bench_now_ns(), end = t0 + ns, now;
    do {
        for (int i = 0; i < CHECK_EVERY; i++) {
            void *v;
            if (dequeue(q, &v) != 0)
                bench_fail("runners/%s: the queue closed while the runners were running", c->impl);
            check_value(c, v);
        }
        n += CHECK_EVERY;
        now = bench_now_ns();
        if (all && c->delivered < c->runners && now - t0 > START_LIMIT_NS)
            bench_fail("runners/%s: only %u of %u runners delivered an element in %u s", c->impl,
                       c->delivered, c->runners, (unsigned)(START_LIMIT_NS / 1000000000u));
    } while (now < end || (all && c->delivered < c->runners));
    return n;
}

void rb_consume(const rb_cfg *cfg, rb_dequeue_fn dequeue, void *q, rb_result *out)
{
    checker c = {
        .last = calloc(cfg->runners, sizeof(uint32_t)), .runners = cfg->runners, .impl = cfg->impl};
    if (!c.last)
        bench_fail("out of memory");
    drain_for(&c, dequeue, q, 0, true);
    drain_for(&c, dequeue, q, cfg->warmup_ns, false);
    uint64_t t0 = bench_now_ns();
    uint64_t n = drain_for(&c, dequeue, q, cfg->window_ns, false);
    uint64_t t1 = bench_now_ns();
    out->tput = (double)n / ((double)(t1 - t0) / 1e9);
    int64_t peak = proc_status_bytes("VmHWM");
    /* NaN: not measurable here (no /proc); the report shows it as such. */
    out->rss_growth = peak < 0 || cfg->rss_base < 0 ? NAN : (double)(peak - cfg->rss_base);
    free(c.last);
}

/* ------------------------------------------------------------ qflow impl */

/* A runner's state on a line of its own, as a goroutine's seq is a local:
 * packed eight to a line, two workers running neighbouring runners wrote
 * the same line every value. */
typedef struct producer {
    alignas(64) uint32_t id, seq;
} producer;

static qf_code produce(void *arg, void **ret_p)
{
    producer *p = arg;
    *ret_p = rb_value(p->id, p->seq + 1);
    p->seq++;
    return QF_OK;
}

static int dequeue_qflow(void *q, void **ret_v)
{
    qf_code c = qf_queue_dequeue_ptr(q, ret_v);
    if (c == QF_OK)
        return 0;
    if (c == QF_OUT_OF_RANGE)
        return -1;
    bench_fail("qf_queue_dequeue_ptr: %s: %s", qf_code_name(c), qf_last_message());
}

static void check_qf(qf_code c, const char *what)
{
    if (c != QF_OK)
        bench_fail("%s: %s: %s", what, qf_code_name(c), qf_last_message());
}

/* The consumer as a task on the runners' own runtime (runners.tput.task.<N>):
 * the same phases as rb_consume() (every runner's first element, warm-up,
 * window), kept across polls; it parks only when the queue is empty, as a
 * goroutine blocks only on an empty channel. */
typedef struct task_consumer {
    checker c;
    qf_queue *q;
    const rb_cfg *cfg;
    int phase; /* 0: until all delivered, 1: warm-up, 2: window */
    uint64_t t0, phase_end, k, n;
    double tput;
} task_consumer;

static qf_code consume_task(qf_task *t, void *arg)
{
    task_consumer *s = arg;
    for (;;) {
        void *v;
        qf_code rc = qf_queue_poll_dequeue_ptr(s->q, qf_task_waker(t), &v);
        if (rc == QF_PENDING)
            return rc;
        if (rc != QF_OK)
            bench_fail("runners/%s: qf_queue_poll_dequeue_ptr: %s", s->c.impl, qf_code_name(rc));
        check_value(&s->c, v);
        s->n++;
        if (++s->k % CHECK_EVERY)
            continue;
        uint64_t now = bench_now_ns();
        if (s->phase == 0) {
            if (s->c.delivered == s->c.runners) {
                s->phase = 1;
                s->phase_end = now + s->cfg->warmup_ns;
            } else if (now - s->t0 > START_LIMIT_NS) {
                bench_fail("runners/%s: only %u of %u runners delivered an element in %u s",
                           s->c.impl, s->c.delivered, s->c.runners,
                           (unsigned)(START_LIMIT_NS / 1000000000u));
            }
        } else if (s->phase == 1 && now >= s->phase_end) {
            s->phase = 2;
            s->n = 0;
            s->t0 = now;
            s->phase_end = now + s->cfg->window_ns;
        } else if (s->phase == 2 && now >= s->phase_end) {
            s->tput = (double)s->n / ((double)(now - s->t0) / 1e9);
            return QF_OK;
        }
    }
}

static void consume_as_task(const rb_cfg *cfg, qf_runtime *rt, qf_queue *q, rb_result *out)
{
    task_consumer s = {.c = {.last = calloc(cfg->runners, sizeof(uint32_t)),
                             .runners = cfg->runners,
                             .impl = cfg->impl},
                       .q = q,
                       .cfg = cfg,
                       .t0 = bench_now_ns()};
    if (!s.c.last)
        bench_fail("out of memory");
    qf_task *t = NULL;
    check_qf(qf_task_spawn(rt, consume_task, &s, &(qf_task_options){.name = "consumer"}, &t),
             "qf_task_spawn");
    check_qf(qf_task_join(t, QF_FOREVER, NULL), "consumer task");
    qf_task_unref(t);
    out->tput = s.tput;
    int64_t peak = proc_status_bytes("VmHWM");
    out->rss_growth = peak < 0 || cfg->rss_base < 0 ? NAN : (double)(peak - cfg->rss_base);
    free(s.c.last);
}

static void run_qflow_with(const rb_cfg *cfg, rb_result *out, bool consumer_task)
{
    unsigned n = cfg->runners;
    qf_runtime *rt = NULL;
    qf_coord *coord = NULL;
    qf_queue *q = NULL;
    check_qf(
        qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "bench"}, &rt),
        "qf_runtime_new");
    check_qf(qf_coord_new(NULL, 0, &coord), "qf_coord_new");
    check_qf(qf_ptr_queue_new(RB_CAPACITY, "runners", 0, NULL, &q), "qf_ptr_queue_new");
    producer *prod = aligned_alloc(64, n * sizeof(*prod));
    qf_queue_runner **runners = calloc(n, sizeof(*runners));
    if (!prod || !runners)
        bench_fail("out of memory");
    memset(prod, 0, n * sizeof(*prod));
    for (unsigned i = 0; i < n; i++) {
        prod[i].id = i;
        qf_enqueue_op op = {
            .name = "produce", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce, .arg = &prod[i]};
        check_qf(qf_queue_runner_new(q, &op, 1, NULL, &runners[i]), "qf_queue_runner_new");
        size_t started = 0;
        check_qf(qf_queue_runner_start(runners[i], rt, coord, QF_RUNNER_START, NULL, &started),
                 "qf_queue_runner_start");
        if (started != 1)
            bench_fail("qf_queue_runner_start started %zu tasks, not 1", started);
    }

    if (consumer_task)
        consume_as_task(cfg, rt, q, out);
    else
        rb_consume(cfg, dequeue_qflow, q, out);

    uint64_t t0 = bench_now_ns();
    qf_coord_request_stop(coord, NULL);
    qf_code rc = qf_coord_join(coord, NULL, 0, 10.0, false, NULL);
    uint64_t t1 = bench_now_ns();
    check_qf(rc, "qf_coord_join");
    out->stop_join_ns = (double)(t1 - t0);

    /* The runtime first: freeing it joins the workers, after which no
     * task can touch a runner, the queue or the Coordinator. */
    qf_runtime_free(rt);
    for (unsigned i = 0; i < n; i++)
        check_qf(qf_queue_runner_free(runners[i]), "qf_queue_runner_free");
    qf_queue_unref(q);
    qf_coord_free(coord);
    free(runners);
    free(prod);
}

static void run_qflow(const rb_cfg *cfg, rb_result *out)
{
    run_qflow_with(cfg, out, false);
}

static void run_qflow_task_consumer(const rb_cfg *cfg, rb_result *out)
{
    run_qflow_with(cfg, out, true);
}

/* --------------------------------------------------------------- harness */

/* A case has one unit, and the three results of one child run have three
 * (items/s, bytes, ns), so each (impl, N) is three cases sharing one
 * measurement: the first of them to run repetition k forks the child and
 * keeps its three values; the others take theirs from repetition k of
 * that same child run. A filter that selects only some of the three still
 * measures (the first selected one forks). */
typedef struct rb_shared {
    const char *impl;
    rb_impl_fn fn;
    unsigned runners;
    unsigned cap; /* entries in res / have */
    rb_result *res;
    bool *have;
    unsigned gen; /* bench_run_generation() that have[] is of */
} rb_shared;

enum { M_TPUT, M_RSS, M_STOP_JOIN, N_METRICS };

typedef struct rb_case {
    rb_shared *shared;
    int metric;
} rb_case;

static void read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k <= 0) {
            memset(p, 0, n);
            return;
        }
        p += k;
        n -= (size_t)k;
    }
}

static void child_main(const rb_shared *sh, rb_cfg cfg, int fd)
{
    alarm(CHILD_LIMIT_S);
    /* The parent's freed heap would otherwise be reused without raising
     * RSS and hide growth; "5" resets the peak to the current RSS. */
    malloc_trim(0);
    int cr = open("/proc/self/clear_refs", O_WRONLY);
    if (cr >= 0) {
        ssize_t w = write(cr, "5", 1);
        (void)w; /* without it the peak may include the inherited heap */
        close(cr);
    }
    cfg.rss_base = proc_status_bytes("VmRSS");
    rb_result res = {0};
    sh->fn(&cfg, &res);
    ssize_t w = write(fd, &res, sizeof(res));
    _exit(w == (ssize_t)sizeof(res) ? 0 : 3);
}

static rb_result measure(const bench_rep *r, const rb_shared *sh)
{
    rb_cfg cfg = {.impl = sh->impl,
                  .runners = sh->runners,
                  .warmup_ns = bench_scale(r, 30, 300) * 1000000u,
                  .window_ns = bench_scale(r, 60, 1000) * 1000000u};
    int fd[2];
    if (pipe(fd) != 0)
        bench_fail("pipe failed");
    fflush(NULL); /* or the child's exit could print the parent's buffers again */
    pid_t pid = fork();
    if (pid < 0)
        bench_fail("fork failed");
    if (pid == 0) {
        close(fd[0]);
        child_main(sh, cfg, fd[1]);
    }
    close(fd[1]);
    rb_result res;
    read_all(fd[0], &res, sizeof(res));
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    /* A baseline whose own check failed (bench_fail: exit 2), e.g. 10,000
     * threads that could not all start within the limit on a machine
     * loaded 50 deep: that repetition of the baseline has no figure (NaN,
     * left out by --compare), said on stderr; the run goes on. A qflow
     * child that fails its check still fails the run. */
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2 && strncmp(sh->impl, "qflow", 5) != 0) {
        fprintf(stderr,
                "qflow-bench: warning: %s/%s: repetition %u not measured (the check "
                "above failed in the baseline)\n",
                r->bc->name, sh->impl, r->rep + 1);
        return (rb_result){.tput = NAN, .rss_growth = NAN, .stop_join_ns = NAN};
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_fail("%s/%s: the measuring child process %s %d", r->bc->name, sh->impl,
                   WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return res;
}

static void run_runners(bench_rep *r)
{
    const rb_case *k = r->arg;
    rb_shared *sh = k->shared;
    if (sh->cap < r->reps) {
        free(sh->res);
        free(sh->have);
        sh->cap = r->reps;
        sh->res = calloc(sh->cap, sizeof(*sh->res));
        sh->have = calloc(sh->cap, sizeof(*sh->have));
        if (!sh->res || !sh->have)
            bench_fail("out of memory");
    }
    if (sh->gen != bench_run_generation()) {
        /* A new run (a second look): measure afresh. */
        memset(sh->have, 0, sh->cap * sizeof(*sh->have));
        sh->gen = bench_run_generation();
    }
    if (!sh->have[r->rep]) {
        sh->res[r->rep] = measure(r, sh);
        sh->have[r->rep] = true;
    }
    const rb_result *res = &sh->res[r->rep];
    r->values[0] = k->metric == M_TPUT  ? res->tput
                   : k->metric == M_RSS ? res->rss_growth
                                        : res->stop_join_ns;
}

#define N_SIZES 3
#define N_IMPLS 2
static const unsigned sizes[N_SIZES] = {100, 1000, 10000};
static char names[N_SIZES][N_METRICS][32];
static rb_shared shared[N_SIZES][N_IMPLS];
static rb_case cases[N_SIZES][N_METRICS][N_IMPLS];
/* runners.tput.task.<N>: its own bench name, since a variant of qflow in
 * the same bench would be judged as one of qflow's baselines. */
static char task_names[N_SIZES][32];
static rb_shared task_shared[N_SIZES];
static rb_case task_cases[N_SIZES];

void bench_register_runners(void)
{
    static const char *const metric_fmt[N_METRICS] = {"runners.tput.%u", "runners.rss.%u",
                                                      "runners.stop_join.%u"};
    static const char *const metric_unit[N_METRICS] = {BENCH_ITEMS_PER_S, BENCH_BYTES, BENCH_NS};
    static const char *const metric_what[N_METRICS] = {"elements/s the consumer took in the window",
                                                       "peak RSS growth (user space)",
                                                       "request stop to all runners joined"};
    for (int s = 0; s < N_SIZES; s++) {
        unsigned n = sizes[s];
        shared[s][0] = (rb_shared){.impl = "qflow", .fn = run_qflow, .runners = n};
        shared[s][1] =
            (rb_shared){.impl = "thread_per_runner", .fn = rb_run_thread_per_runner, .runners = n};
        for (int m = 0; m < N_METRICS; m++) {
            snprintf(names[s][m], sizeof(names[s][m]), metric_fmt[m], n);
            for (int i = 0; i < N_IMPLS; i++) {
                cases[s][m][i] = (rb_case){.shared = &shared[s][i], .metric = m};
                bench_register(&(bench_case){
                    .name = names[s][m],
                    .impl = shared[s][i].impl,
                    .unit = metric_unit[m],
                    .params = {{.key = "runners", .num = n},
                               {.key = "capacity", .num = RB_CAPACITY},
                               {.key = "consumer", .str = "1 thread, 1 element per call"},
                               {.key = "measures", .str = metric_what[m]}},
                    .note = i == 0
                                ? "N QueueRunners (1 pointer produce op each) as tasks on "
                                  "a pool of one worker per CPU (or --workers); bare pointers, no "
                                  "allocation"
                                : "1 pthread (64 KiB stack) per runner, mutex+condvar "
                                  "queue; bare pointers, no allocation",
                    .run = run_runners,
                    .arg = &cases[s][m][i],
                });
            }
        }
        task_shared[s] = (rb_shared){.impl = "qflow", .fn = run_qflow_task_consumer, .runners = n};
        task_cases[s] = (rb_case){.shared = &task_shared[s], .metric = M_TPUT};
        snprintf(task_names[s], sizeof(task_names[s]), "runners.tput.task.%u", n);
        bench_register(&(bench_case){
            .name = task_names[s],
            .impl = "qflow",
            .unit = BENCH_ITEMS_PER_S,
            .params = {{.key = "runners", .num = n},
                       {.key = "capacity", .num = RB_CAPACITY},
                       {.key = "consumer", .str = "1 task on the same runtime, 1 element per poll"},
                       {.key = "measures", .str = metric_what[M_TPUT]}},
            .note = "N QueueRunners as tasks on a pool of one worker per CPU (or --workers), the "
                    "consumer a "
                    "task beside them; bare pointers, no allocation",
            .run = run_runners,
            .arg = &task_cases[s],
        });
    }
}
