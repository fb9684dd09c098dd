/* bench_task.c - how long a parked task takes to run once an element
 * arrives (task.wake.p50 / .p99), against a thread blocked in the queue's
 * blocking dequeue.
 *
 * qflow: a task on a runtime with one worker per online CPU polls an empty
 * inline pointer FIFOQueue with qf_queue_poll_dequeue_ptr and parks. The
 * main thread (a plain thread) stamps t0, calls qf_queue_enqueue_ptr; the
 * task stamps t1 as soon as its poll returns the element. The sample is
 * t1 - t0: the enqueue call, the wake through the task's waker, the
 * scheduler (injection stack, a sleeping worker woken) and the poll.
 * thread: the same with a pthread blocked in qf_queue_dequeue_ptr.
 *
 * One element at a time: the sender sleeps at least GAP_NS after the
 * receiver has taken the previous one. The gap is longer than the queue's
 * spin before sleeping (QF_QUEUE_DEFAULT_SPIN_NS), so the thread is asleep
 * on its futex and the pool's workers are asleep too: both figures are
 * wake-ups of an idle receiver, the case a latency bound is about. The
 * sender goes to sleep right after each enqueue, like a thread that hands
 * work off and waits for more, so it never holds a core the receiver
 * needs. A warm-up is not counted; p50 and p99 are nearest-rank over the
 * rest. A repetition that runs past its time budget (on a loaded machine
 * a wake can wait for a time slice) stops sending and reports what it
 * measured (truncated).
 *
 * task.wake.task_parks and task.wake.task_busy (issue 26: a wake on the same worker and across
 * workers): the same receiver task, woken by a sender that is itself a
 * task on the runtime. The sender sleeps GAP_NS on its timer
 * (qf_task_sleep_until) and, once the last element is taken, stamps t0
 * and enqueues with qf_queue_poll_enqueue_ptr. `parks`: it then parks on
 * its timer at once, so the receiver (in the sender's worker's next slot)
 * runs on the same worker, as a goroutine readied into its P's runnext
 * runs when the sender blocks. `busy`: it keeps its worker for GAP_NS
 * after the send (one long poll that does not yield), so the receiver runs
 * only if another worker takes it, or when the sender's poll ends. Go: the
 * main goroutine sends to a goroutine parked in a receive, then sleeps
 * (wake_parks) or spins for the gap (wake_busy), GOMAXPROCS = CPUs
 * (perf/go/qfbench.go). */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baseline_go.h"
#include "bench.h"
#include "qf_queue.h"
#include "qf_runtime.h"

#define GAP_NS 50000
#define WARMUP 100
#define BUDGET_QUICK_MS 300
#define BUDGET_FULL_MS 10000
#define HANG_NS 10000000000u

typedef struct wake_run {
    qf_queue *q;
    size_t n;    /* elements to send, warm-up included */
    size_t sent; /* elements sent (n unless the budget ran out) */
    uint64_t deadline_ns;
    uint64_t *t0, *t1;
    alignas(64) atomic_size_t taken; /* elements the receiver has taken */
} wake_run;

/* Elements carry their index + 1 (never NULL); they must arrive in order. */
static void took(wake_run *run, void *p)
{
    uint64_t now = bench_now_ns();
    size_t i = atomic_load_explicit(&run->taken, memory_order_relaxed);
    if ((uintptr_t)p != i + 1)
        bench_fail("task.wake: received element %zu, expected %zu", (size_t)(uintptr_t)p, i + 1);
    run->t1[i] = now;
    atomic_store_explicit(&run->taken, i + 1, memory_order_release);
}

static qf_code receiver_task(qf_task *t, void *arg)
{
    wake_run *run = arg;
    for (;;) {
        void *p;
        qf_code rc = qf_queue_poll_dequeue_ptr(run->q, qf_task_waker(t), &p);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc == QF_OUT_OF_RANGE)
            return QF_OK;
        if (rc != QF_OK)
            return rc;
        took(run, p);
    }
}

static void *receiver_thread(void *arg)
{
    wake_run *run = arg;
    void *p;
    qf_code rc;
    while ((rc = qf_queue_dequeue_ptr(run->q, &p)) == QF_OK)
        took(run, p);
    if (rc != QF_OUT_OF_RANGE)
        bench_fail("qf_queue_dequeue_ptr: %s: %s", qf_code_name(rc), qf_last_message());
    return NULL;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
    nanosleep(&ts, NULL);
}

/* Until the receiver has taken `n` elements, sleeping: a sender that
 * spun here would hold the very core the kernel tends to wake the
 * receiver on (the waker's), and the receiver would wait for the spin to
 * end (a steady ~20 us mode in the samples when it did). */
static void wait_taken(wake_run *run, size_t n)
{
    uint64_t since = bench_now_ns();
    while (atomic_load_explicit(&run->taken, memory_order_acquire) < n) {
        if (bench_now_ns() - since > HANG_NS)
            bench_fail("task.wake: element %zu not received after 10 s (lost wake?)", n);
        sleep_ns(GAP_NS);
    }
}

static void send_all(wake_run *run)
{
    size_t i = 0;
    for (; i < run->n; i++) {
        sleep_ns(GAP_NS);
        wait_taken(run, i);
        if (i > WARMUP + 10 && bench_now_ns() > run->deadline_ns)
            break;
        run->t0[i] = bench_now_ns();
        qf_code rc = qf_queue_enqueue_ptr(run->q, (void *)(uintptr_t)(i + 1));
        if (rc != QF_OK)
            bench_fail("qf_queue_enqueue_ptr: %s: %s", qf_code_name(rc), qf_last_message());
    }
    run->sent = i;
    wait_taken(run, run->sent);
    qf_queue_close(run->q, false);
}

/* The sender of task.wake.task_parks / task_busy: a state machine across its polls. */
typedef struct task_sender {
    wake_run *run;
    bool busy;
    size_t i;      /* the element to send next */
    bool sleeping; /* its timer for the gap before element i is armed */
} task_sender;

static qf_code sender_task(qf_task *t, void *arg)
{
    task_sender *s = arg;
    wake_run *run = s->run;
    for (;;) {
        if (!s->sleeping) {
            s->sleeping = true;
            qf_task_sleep_until(t, qf_now_ns() + GAP_NS);
            return QF_PENDING;
        }
        uint64_t now = bench_now_ns();
        if (atomic_load_explicit(&run->taken, memory_order_acquire) < s->i) {
            if (now - run->t0[s->i - 1] > HANG_NS)
                bench_fail(
                    "task.wake (task sender): element %zu not received after 10 s (lost wake?)",
                    s->i);
            qf_task_sleep_until(t, qf_now_ns() + GAP_NS); /* not taken yet: look again */
            return QF_PENDING;
        }
        s->sleeping = false;
        if (s->i == run->n || (s->i > WARMUP + 10 && now > run->deadline_ns)) {
            run->sent = s->i;
            qf_queue_close(run->q, false);
            return QF_OK;
        }
        run->t0[s->i] = bench_now_ns();
        void *v = (void *)(uintptr_t)(s->i + 1);
        qf_code rc = qf_queue_poll_enqueue_ptr(run->q, v, qf_task_waker(t));
        if (rc != QF_OK) /* a queue of 16 holding at most one element */
            bench_fail("qf_queue_poll_enqueue_ptr: %s: %s", qf_code_name(rc), qf_last_message());
        uint64_t until = run->t0[s->i] + GAP_NS;
        s->i++;
        while (s->busy && bench_now_ns() < until)
            ; /* keeps this worker: one long poll */
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double percentile(const uint64_t *s, size_t n, unsigned pct)
{
    size_t rank = (n * pct + 99) / 100;
    return (double)s[rank ? rank - 1 : 0];
}

static void report_wake(bench_rep *r, wake_run *run);

/* A run's samples, budget and empty queue. */
static wake_run *new_wake_run(bench_rep *r)
{
    wake_run *run = aligned_alloc(64, (sizeof(*run) + 63) & ~(size_t)63);
    if (!run)
        bench_fail("out of memory");
    memset(run, 0, sizeof(*run));
    run->n = WARMUP + bench_scale(r, 600, 20000);
    run->deadline_ns =
        bench_now_ns() + bench_budget_ns(r, BUDGET_QUICK_MS / 1000.0, BUDGET_FULL_MS / 1000.0);
    run->t0 = calloc(run->n, sizeof(uint64_t));
    run->t1 = calloc(run->n, sizeof(uint64_t));
    atomic_init(&run->taken, 0);
    if (!run->t0 || !run->t1)
        bench_fail("out of memory");
    if (qf_ptr_queue_new(16, "wake", 0, NULL, &run->q) != QF_OK)
        bench_fail("qf_ptr_queue_new: %s", qf_last_message());
    return run;
}

static void join_task(qf_task *t, const char *what)
{
    qf_code rc = qf_task_join(t, QF_FOREVER, NULL);
    if (rc != QF_OK)
        bench_fail("%s task: %s: %s", what, qf_code_name(rc), qf_last_message());
    qf_task_unref(t);
}

static void run_wake_from_task(bench_rep *r)
{
    bool busy = *(const bool *)r->arg;
    wake_run *run = new_wake_run(r);
    task_sender s = {.run = run, .busy = busy};
    qf_runtime *rt = NULL;
    qf_task *rt_recv = NULL, *rt_send = NULL;
    if (qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "bench"}, &rt) !=
            QF_OK ||
        qf_task_spawn(rt, receiver_task, run, &(qf_task_options){.name = "receiver"}, &rt_recv) !=
            QF_OK ||
        qf_task_spawn(rt, sender_task, &s, &(qf_task_options){.name = "sender"}, &rt_send) != QF_OK)
        bench_fail("cannot start the tasks: %s", qf_last_message());
    join_task(rt_send, "sender");
    join_task(rt_recv, "receiver");
    qf_runtime_free(rt);
    report_wake(r, run);
}

static void run_wake(bench_rep *r)
{
    bool task = *(const bool *)r->arg;
    wake_run *run = new_wake_run(r);

    if (task) {
        qf_runtime *rt = NULL;
        qf_task *t = NULL;
        if (qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "bench"},
                           &rt) != QF_OK ||
            qf_task_spawn(rt, receiver_task, run, &(qf_task_options){.name = "receiver"}, &t) !=
                QF_OK)
            bench_fail("cannot start the receiver task: %s", qf_last_message());
        send_all(run);
        join_task(t, "receiver");
        qf_runtime_free(rt);
    } else {
        pthread_t th;
        if (pthread_create(&th, NULL, receiver_thread, run) != 0)
            bench_fail("pthread_create failed");
        send_all(run);
        pthread_join(th, NULL);
    }

    report_wake(r, run);
}

/* p50 and p99 of the run's samples into r; frees the run. */
static void report_wake(bench_rep *r, wake_run *run)
{
    r->truncated = run->sent < run->n;
    size_t m = run->sent - WARMUP;
    uint64_t *lat = malloc(m * sizeof(*lat));
    if (!lat)
        bench_fail("out of memory");
    for (size_t i = 0; i < m; i++)
        lat[i] = run->t1[WARMUP + i] - run->t0[WARMUP + i];
    qsort(lat, m, sizeof(*lat), cmp_u64);
    r->values[0] = percentile(lat, m, 50);
    r->values[1] = percentile(lat, m, 99);

    free(lat);
    qf_queue_unref(run->q);
    free(run->t0);
    free(run->t1);
    free(run);
}

static bool as_task = true, as_thread = false;
static bool sender_parks = false, sender_busy = true;
static go_cfg go_wake_parks = {.mode = "wake_parks",
                               .capacity = 16,
                               .items_quick = 700,
                               .items_full = 20100},
              go_wake_busy = {
                  .mode = "wake_busy", .capacity = 16, .items_quick = 700, .items_full = 20100};

/* task.wake.task_parks / task_busy: qflow and Go, for a sender that parks
 * or stays busy. */
static void register_from_task(const char *name, const char *const outputs[2], const char *waker,
                               bool *qflow_arg, go_cfg *go_arg)
{
    bench_case c = {
        .name = name,
        .impl = "qflow",
        .unit = BENCH_NS,
        .outputs = {outputs[0], outputs[1]},
        .params = {{.key = "gap_ns", .num = GAP_NS},
                   {.key = "waker", .str = waker},
                   {.key = "measures", .str = "enqueue call start to receiver holding it"}},
        .note = "a task parked in qf_queue_poll_dequeue_ptr, woken by a task's "
                "qf_queue_poll_enqueue_ptr (1 worker per CPU or --workers)",
        .run = run_wake_from_task,
        .arg = qflow_arg,
    };
    bench_register(&c); /* copied: the same case again for Go below */
    if (!bench_go_available())
        return;
    c.impl = "go_chan";
    c.note = "a goroutine parked in a receive, woken by a goroutine's send, GOMAXPROCS = CPUs or "
             "--workers "
             "(perf/go/qfbench.go)";
    c.run = bench_go_pingpong; /* the same two figures: p50_ns, p99_ns */
    c.arg = go_arg;
    bench_register(&c);
}

void bench_register_task(void)
{
    bench_register(&(bench_case){
        .name = "task.wake",
        .impl = "qflow",
        .unit = BENCH_NS,
        .outputs = {"task.wake.p50", "task.wake.p99"},
        .params = {{.key = "gap_ns", .num = GAP_NS},
                   {.key = "measures", .str = "enqueue call start to receiver holding it"}},
        .note = "a task parked in qf_queue_poll_dequeue_ptr on an idle pool (1 worker per CPU or "
                "--workers)",
        .run = run_wake,
        .arg = &as_task,
    });
    bench_register(&(bench_case){
        .name = "task.wake",
        .impl = "thread",
        .unit = BENCH_NS,
        .outputs = {"task.wake.p50", "task.wake.p99"},
        .params = {{.key = "gap_ns", .num = GAP_NS},
                   {.key = "measures", .str = "enqueue call start to receiver holding it"}},
        .note = "a pthread asleep in qf_queue_dequeue_ptr (same queue)",
        .run = run_wake,
        .arg = &as_thread,
    });
    static const char *const parks_out[2] = {"task.wake.task_parks.p50",
                                             "task.wake.task_parks.p99"};
    static const char *const busy_out[2] = {"task.wake.task_busy.p50", "task.wake.task_busy.p99"};
    register_from_task("task.wake.task_parks", parks_out, "parks", &sender_parks, &go_wake_parks);
    register_from_task("task.wake.task_busy", busy_out, "busy", &sender_busy, &go_wake_busy);
}
