/* test_runners_start.c - qf_queue_runners_start(): many QueueRunners
 * started in one batch (issue 26), as qf_start_queue_runners() starts a
 * collection. Each runner must start as qf_queue_runner_start() would
 * start it (spec 128-143); the batch only shares the work of making the
 * tasks. Waits are on observable state (counters, queue sizes, task
 * states); deadlines only bound a broken run. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "qf_member_mem-impl.h"
#include "qf_pagemem-impl.h"
#include "qflow.h"
#include "qf_queue_runner.h"

#include "qf_test.h"
#include "qf_test_runner.h"

#if defined(__SANITIZE_THREAD__)
#define QF_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QF_TEST_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define QF_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QF_TEST_ASAN 1
#endif
#endif

static qf_enqueue_op ptr_op(const char *name, ptr_counter *c)
{
    return (qf_enqueue_op){
        .name = name, .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce_ptr, .arg = c};
}

static qf_queue *ptr_queue(const char *name, int64_t cap)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(cap, name, 0, NULL, &q), QF_OK, "%s", qf_last_message());
    return q;
}

/* A cancel op that counts its calls and closes its queue (cancelling). */
typedef struct {
    qf_queue *q;
    atomic_int calls;
} cancel_arg;

static qf_code counting_cancel(void *arg)
{
    cancel_arg *a = arg;
    atomic_fetch_add(&a->calls, 1);
    return qf_queue_close(a->q, true);
}

/* Tasks come back runner by runner and op by op, each named for its queue
 * and op (spec 143), each a Coordinator member; suspended without
 * QF_RUNNER_START; every one then runs to its end of input. */
Test(runners_start, tasks_in_order_named_and_members)
{
    qf_runtime *rt = mkrt(0);
    qf_coord *c = mkcoord();
    qf_queue *qa = ptr_queue("qa", -1), *qb = ptr_queue("qb", -1);
    ptr_counter ca = {.limit = 2}, cb1 = {.limit = 3}, cb2 = {.limit = 4};
    qf_enqueue_op oa = ptr_op("a", &ca), ob[2] = {ptr_op("b1", &cb1), ptr_op("b2", &cb2)};
    qf_queue_runner *rs[2] = {mkrunner(qa, &oa, 1, NULL), mkrunner(qb, ob, 2, NULL)};
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runners_start(rs, 2, rt, c, 0, &ts, &n), QF_OK, "%s", qf_last_message());
    cr_assert_eq(n, 3);
    cr_expect_str_eq(qf_task_name(ts[0]), "QueueRunnerThread-qa-a");
    cr_expect_str_eq(qf_task_name(ts[1]), "QueueRunnerThread-qb-b1");
    cr_expect_str_eq(qf_task_name(ts[2]), "QueueRunnerThread-qb-b2");
    cr_expect_eq(qf_queue_runner_running(rs[0], rt), 1);
    cr_expect_eq(qf_queue_runner_running(rs[1], rt), 2);
    cr_expect_eq(atomic_load(&ca.next), 0, "suspended: no op ran");
    for (size_t i = 0; i < n; i++)
        qf_task_wake(ts[i]);
    drive(rt, ts, n);
    cr_expect_eq(qf_queue_size(qa), 2);
    cr_expect_eq(qf_queue_size(qb), 7);
    cr_expect(qf_queue_is_closed(qa) && qf_queue_is_closed(qb), "end of input closed both");
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, &rep), QF_OK);
    cr_assert_eq(rep.n_finished, 3, "every task was a Coordinator member");
    cr_expect_str_eq(rep.finished[0], "QueueRunnerThread-qa-a");
    cr_expect_str_eq(rep.finished[2], "QueueRunnerThread-qb-b2");
    qf_coord_join_report_clear(&rep);
    qf_tasks_free(ts, n);
    for (int i = 0; i < 2; i++)
        cr_expect_eq(qf_queue_runner_free(rs[i]), QF_OK);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(qa);
    qf_queue_unref(qb);
}

/* spec 139 per runner: one already running is skipped, one listed twice
 * starts once. */
Test(runners_start, running_and_repeated_runners_start_once)
{
    qf_runtime *rt = mkrt(0);
    qf_queue *q = ptr_queue("q", -1);
    ptr_counter c1 = {.limit = 1}, c2 = {.limit = 1};
    qf_enqueue_op o1 = ptr_op("one", &c1), o2 = ptr_op("two", &c2);
    qf_queue_runner *a = mkrunner(q, &o1, 1, NULL), *b = mkrunner(q, &o2, 1, NULL);
    qf_task **first = NULL;
    size_t n_first = 0;
    cr_assert_eq(qf_queue_runner_start(a, rt, NULL, 0, &first, &n_first), QF_OK);
    cr_assert_eq(n_first, 1);
    qf_queue_runner *rs[3] = {a, b, b};
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runners_start(rs, 3, rt, NULL, 0, &ts, &n), QF_OK);
    cr_assert_eq(n, 1, "only b, once");
    cr_expect_str_eq(qf_task_name(ts[0]), "QueueRunnerThread-q-two");
    cr_expect_eq(qf_queue_runner_running(a, rt), 1);
    cr_expect_eq(qf_queue_runner_running(b, rt), 1);
    qf_task_wake(first[0]);
    qf_task_wake(ts[0]);
    qf_task *all[2] = {first[0], ts[0]};
    drive(rt, all, 2);
    cr_expect_eq(qf_queue_runner_running(a, rt), 0);
    cr_expect_eq(qf_queue_runner_running(b, rt), 0);
    qf_tasks_free(first, n_first);
    qf_tasks_free(ts, n);
    cr_expect_eq(qf_queue_runner_free(a), QF_OK);
    cr_expect_eq(qf_queue_runner_free(b), QF_OK);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* Bad input is refused with the outputs untouched; nothing is started. */
Test(runners_start, bad_input_is_refused_and_starts_nothing)
{
    qf_runtime *rt = mkrt(0);
    qf_queue *q = ptr_queue("q", -1);
    ptr_counter pc = {.limit = 1};
    qf_enqueue_op o = ptr_op("p", &pc);
    qf_queue_runner *r = mkrunner(q, &o, 1, NULL);
    qf_task **sentinel = (qf_task **)(uintptr_t)0x10;
    qf_task **ts = sentinel;
    size_t n = 77;
    qf_queue_runner *with_null[2] = {r, NULL};
    cr_expect_eq(qf_queue_runners_start(&r, 1, NULL, NULL, 0, &ts, &n), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "runtime") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_queue_runners_start(with_null, 2, rt, NULL, 0, &ts, &n), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "runners[1]") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_queue_runners_start(NULL, 2, rt, NULL, 0, &ts, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_runners_start(&r, 1, rt, NULL, 0x80, &ts, &n), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "unknown bits") != NULL, "%s", qf_last_message());
    cr_expect_eq(ts, sentinel, "outputs untouched");
    cr_expect_eq(n, 77);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0, "the good runner was not started");
    cr_expect_eq(qf_queue_runners_start(NULL, 0, rt, NULL, 0, &ts, &n), QF_OK);
    cr_expect_null(ts, "nothing to start: no array");
    cr_expect_eq(n, 0);
    cr_expect_eq(qf_queue_runner_free(r), QF_OK);
    qf_runtime_free(rt);
    qf_queue_unref(q);
}

/* A runtime that is shutting down starts none: QF_CANCELLED, no runner
 * counts a task, and the stop actions are withdrawn (a later stop runs no
 * cancel op). Three runners, and 5,000, whose plan is large enough to come
 * from the page memory (qf__scratch_alloc()) and must go back there on
 * this failure path too. */
static void shutting_down_starts_none(int count)
{
    qf_runtime *rt = mkrt(2);
    cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(10)), QF_OK);
    qf_coord *c = mkcoord();
    qf_queue *q = ptr_queue("q", 4);
    ptr_counter pc = {.limit = -1};
    qf_enqueue_op o = ptr_op("p", &pc);
    cancel_arg ca = {.q = q};
    qf_queue_runner_options ro = {.cancel_op = counting_cancel, .cancel_arg = &ca};
    qf_queue_runner **rs = calloc((size_t)count, sizeof(*rs));
    cr_assert_not_null(rs);
    for (int i = 0; i < count; i++)
        rs[i] = mkrunner(q, &o, 1, &ro);
    qf_task **ts = NULL;
    size_t n = 5;
    cr_expect_eq(qf_queue_runners_start(rs, (size_t)count, rt, c, QF_RUNNER_START, &ts, &n),
                 QF_CANCELLED);
    cr_expect_null(ts);
    cr_expect_eq(n, 0);
    for (int i = 0; i < count; i++)
        cr_expect_eq(qf_queue_runner_running(rs[i], rt), 0);
    cr_expect_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    cr_expect_eq(atomic_load(&ca.calls), 0, "no stop action was left behind");
    for (int i = 0; i < count; i++)
        cr_expect_eq(qf_queue_runner_free(rs[i]), QF_OK);
    free(rs);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

Test(runners_start, runtime_shutting_down_starts_none)
{
    shutting_down_starts_none(3);
}

Test(runners_start, runtime_shutting_down_starts_none_of_thousands, .timeout = 120)
{
    shutting_down_starts_none(5000);
}

/* A stop already in effect: each runner's cancel op runs at once (spec
 * 134), once, and the tasks end without running an op (spec 138). */
Test(runners_start, stop_in_effect_runs_each_cancel_op_once)
{
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    enum { N = 20 };
    qf_queue *qs[N];
    cancel_arg cas[N];
    ptr_counter pcs[N];
    qf_queue_runner *rs[N];
    for (int i = 0; i < N; i++) {
        qs[i] = ptr_queue("q", 2);
        cas[i] = (cancel_arg){.q = qs[i]};
        pcs[i] = (ptr_counter){.limit = -1};
        qf_enqueue_op o = ptr_op("p", &pcs[i]);
        qf_queue_runner_options ro = {.cancel_op = counting_cancel, .cancel_arg = &cas[i]};
        rs[i] = mkrunner(qs[i], &o, 1, &ro);
    }
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runners_start(rs, N, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_assert_eq(n, N);
    for (size_t i = 0; i < n; i++)
        cr_expect_neq(qf_task_join(ts[i], qf_deadline_in_s(20), NULL), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 5.0, false, NULL), QF_OK, "%s", qf_last_message());
    for (int i = 0; i < N; i++) {
        cr_expect_eq(atomic_load(&cas[i].calls), 1, "runner %d's cancel op", i);
        cr_expect(qf_queue_is_closed(qs[i]));
        cr_expect_eq(atomic_load(&pcs[i].next), 0, "spec 138: no op ran");
        cr_expect_eq(qf_queue_runner_running(rs[i], rt), 0);
    }
    qf_tasks_free(ts, n);
    for (int i = 0; i < N; i++) {
        cr_expect_eq(qf_queue_runner_free(rs[i]), QF_OK);
        qf_queue_unref(qs[i]);
    }
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* Oversubscribed: thousands of runners on two workers, started at once,
 * every one delivers, while another thread requests a stop at a random
 * moment of the start or the run; the join returns (the stop reached every
 * task, parked or not yet run) and no runner counts a task afterwards.
 * Rounds with the stop early (often during the start) and late. */
typedef struct {
    qf_coord *c;
    atomic_int go;
    unsigned spins;
} stopper;

static void *stop_at_random(void *arg)
{
    stopper *s = arg;
    while (!atomic_load(&s->go))
        sched_yield();
    for (volatile unsigned i = 0; i < s->spins; i++) {
    }
    qf_coord_request_stop(s->c, NULL);
    return NULL;
}

Test(runners_start, thousands_started_at_once_with_a_stop_at_random, .timeout = 120)
{
    enum { N = 3000, ROUNDS = 8 };
    unsigned seed = (unsigned)qf_now_ns();
    for (int round = 0; round < ROUNDS; round++) {
        qf_runtime *rt = mkrt(2);
        qf_coord *c = mkcoord();
        qf_queue *q = ptr_queue("q", 64);
        ptr_counter *pcs = calloc(N, sizeof(*pcs));
        qf_queue_runner **rs = calloc(N, sizeof(*rs));
        cr_assert(pcs && rs);
        for (int i = 0; i < N; i++) {
            pcs[i].limit = -1;
            qf_enqueue_op o = ptr_op("p", &pcs[i]);
            rs[i] = mkrunner(q, &o, 1, NULL);
        }
        stopper s = {.c = c, .spins = (unsigned)(rand_r(&seed) % (round < 4 ? 200000 : 20000000))};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, stop_at_random, &s), 0);
        atomic_store(&s.go, 1);
        qf_code rc = qf_queue_runners_start(rs, N, rt, c, QF_RUNNER_START, NULL, NULL);
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        /* Take until the stop's cancel op closes the queue and it drains. */
        void *p;
        qf_deadline d = qf_deadline_in_s(60);
        while (qf_queue_dequeue_ptr_until(q, d, &p) == QF_OK) {
        }
        cr_assert_not(qf_deadline_passed(d), "round %d: the queue never closed", round);
        pthread_join(th, NULL);
        cr_assert_eq(qf_coord_join(c, NULL, 0, 20.0, false, NULL), QF_OK, "round %d: %s", round,
                     qf_last_message());
        for (int i = 0; i < N; i++)
            cr_assert_eq(qf_queue_runner_running(rs[i], rt), 0, "round %d: runner %d", round, i);
        qf_runtime_free(rt);
        for (int i = 0; i < N; i++)
            cr_assert_eq(qf_queue_runner_free(rs[i]), QF_OK);
        free(rs);
        free(pcs);
        qf_queue_unref(q);
        qf_coord_free(c);
    }
}

/* Without a stop: every one of thousands of runners started at once
 * delivers its first element (fairness of the first turn), in a queue far
 * smaller than their number. */
Test(runners_start, thousands_started_at_once_all_deliver, .timeout = 120)
{
    enum { N = 5000 };
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = ptr_queue("q", 128);
    ptr_counter *pcs = calloc(N, sizeof(*pcs));
    qf_queue_runner **rs = calloc(N, sizeof(*rs));
    bool *seen = calloc(N, sizeof(*seen));
    cr_assert(pcs && rs && seen);
    for (int i = 0; i < N; i++) {
        /* Runner i produces i * 2^20 + 1, + 2, ...: its id is in the value. */
        pcs[i].next = (long)i << 20;
        pcs[i].limit = -1;
        qf_enqueue_op o = ptr_op("p", &pcs[i]);
        rs[i] = mkrunner(q, &o, 1, NULL);
    }
    cr_assert_eq(qf_queue_runners_start(rs, N, rt, c, QF_RUNNER_START, NULL, NULL), QF_OK);
    int delivered = 0;
    qf_deadline d = qf_deadline_in_s(60);
    while (delivered < N) {
        void *p;
        cr_assert_eq(qf_queue_dequeue_ptr_until(q, d, &p), QF_OK, "%d of %d delivered: %s",
                     delivered, N, qf_last_message());
        long id = (long)(((uintptr_t)p - 1) >> 20);
        cr_assert(id >= 0 && id < N);
        if (!seen[id]) {
            seen[id] = true;
            delivered++;
        }
    }
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 20.0, false, NULL), QF_OK, "%s", qf_last_message());
    qf_runtime_free(rt);
    for (int i = 0; i < N; i++)
        cr_assert_eq(qf_queue_runner_free(rs[i]), QF_OK);
    free(rs);
    free(pcs);
    free(seen);
    qf_queue_unref(q);
    qf_coord_free(c);
}

/* Turns (issue 26): a runner's first turn is one element, so every runner
 * of a start has its first element in the queue before any has a second;
 * later turns hold several elements (at most 32) while other runners wait.
 * On a runtime of 0 workers driven by this thread, the queue's order is
 * the order of the turns. */
Test(runners_start, first_turn_one_element_then_turns_of_several)
{
    enum { N = 16, CAP = 2048, TURN_MAX = 32 };
    qf_runtime *rt = mkrt(0);
    qf_coord *c = mkcoord();
    qf_queue *q = ptr_queue("q", CAP);
    ptr_counter pcs[N];
    qf_queue_runner *rs[N];
    for (int i = 0; i < N; i++) {
        pcs[i] = (ptr_counter){.next = (long)i << 20, .limit = -1}; /* the id in the value */
        qf_enqueue_op o = ptr_op("p", &pcs[i]);
        rs[i] = mkrunner(q, &o, 1, NULL);
    }
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runners_start(rs, N, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    qf_deadline d = soon();
    while (qf_queue_size(q) < CAP) {
        cr_assert(!qf_deadline_passed(d), "the runners filled %lld of %d", qf_queue_size(q), CAP);
        cr_assert_geq(qf_runtime_run_once(rt, qf_deadline_in_ns(10 * 1000 * 1000)), 0);
    }
    long prev = -1;
    int run = 0, longest = 0;
    bool first_seen[N] = {false};
    for (int k = 0; k < CAP; k++) {
        void *p = NULL;
        cr_assert_eq(qf_queue_try_dequeue_ptr(q, &p), QF_OK, "%s", qf_last_message());
        long id = (long)(((uintptr_t)p - 1) >> 20);
        cr_assert(id >= 0 && id < N);
        if (k < N) {
            cr_assert(!first_seen[id],
                      "runner %ld had a second element (at %d) before every "
                      "runner had a first",
                      id, k);
            first_seen[id] = true;
            continue;
        }
        run = id == prev ? run + 1 : 1;
        prev = id;
        cr_assert_leq(run, TURN_MAX, "runner %ld put %d in a row while others waited", id, run);
        if (run > longest)
            longest = run;
    }
    cr_expect_gt(longest, 1, "a later turn holds more than one element");
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    drive(rt, ts, n);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "%s", qf_last_message());
    qf_tasks_free(ts, n);
    for (int i = 0; i < N; i++)
        cr_expect_eq(qf_queue_runner_free(rs[i]), QF_OK);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_unref(q);
}

/* A slow op: each call holds its thread for SLOW_OP_NS, more than a turn's
 * time (the runner's TURN_NS, 10 us): the work itself, not a wait for
 * anything, so the runner cannot tell it from a busy op. */
#define SLOW_OP_NS 200000

static qf_code produce_slow(void *arg, void **ret_p)
{
    int64_t until = qf_now_ns() + SLOW_OP_NS;
    while (qf_now_ns() < until)
        sched_yield();
    return produce_ptr(arg, ret_p);
}

/* A slow runner and a fast one (values from 1 and from 2^20 + 1) on one
 * pointer queue of `cap`, with a runtime of 0 workers and a Coordinator;
 * not started. */
typedef struct slow_fast {
    qf_runtime *rt;
    qf_coord *c;
    qf_queue *q;
    ptr_counter slow, fast;
    qf_queue_runner *rs[2];
} slow_fast;

static void slow_fast_init(slow_fast *f, int64_t cap)
{
    f->rt = mkrt(0);
    f->c = mkcoord();
    f->q = ptr_queue("q", cap);
    f->slow = (ptr_counter){.next = 0, .limit = -1};
    f->fast = (ptr_counter){.next = 1L << 20, .limit = -1};
    qf_enqueue_op os = {
        .name = "slow", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = produce_slow, .arg = &f->slow};
    qf_enqueue_op of = ptr_op("fast", &f->fast);
    f->rs[0] = mkrunner(f->q, &os, 1, NULL);
    f->rs[1] = mkrunner(f->q, &of, 1, NULL);
}

/* Stop, drive the tasks of each of the `lists` task lists to their end,
 * and free everything. */
static void slow_fast_end(slow_fast *f, qf_task **const *ts, const size_t *n, size_t lists)
{
    cr_assert_eq(qf_coord_request_stop(f->c, NULL), QF_OK);
    for (size_t i = 0; i < lists; i++)
        drive(f->rt, ts[i], n[i]);
    cr_expect_eq(qf_coord_join(f->c, NULL, 0, 5.0, false, NULL), QF_OK, "%s", qf_last_message());
    for (size_t i = 0; i < lists; i++)
        qf_tasks_free(ts[i], n[i]);
    for (int i = 0; i < 2; i++)
        cr_expect_eq(qf_queue_runner_free(f->rs[i]), QF_OK);
    qf_runtime_free(f->rt);
    qf_coord_free(f->c);
    qf_queue_unref(f->q);
}

/* Turns (issue 26): a runner whose op is slower than a turn's time gives
 * its worker up after at most two elements while another runner waits
 * (its turn's clock starts when its first put of the poll ends). On a
 * runtime of 0 workers driven by this thread, the queue's order is the
 * order of the turns. (That a fast runner's turns hold several is the
 * test above; here the fast runner may be slowed past a turn's time by a
 * loaded machine or a sanitizer, so nothing is asked of it.) */
Test(runners_start, slow_op_turn_ends_after_two_puts)
{
    enum { CAP = 64 };
    slow_fast f;
    slow_fast_init(&f, CAP);
    qf_task **ts = NULL;
    size_t n = 0;
    cr_assert_eq(qf_queue_runners_start(f.rs, 2, f.rt, f.c, QF_RUNNER_START, &ts, &n), QF_OK);
    qf_deadline d = qf_deadline_in_s(60);
    while (qf_queue_size(f.q) < CAP) {
        cr_assert(!qf_deadline_passed(d), "the runners filled %lld of %d", qf_queue_size(f.q), CAP);
        cr_assert_geq(qf_runtime_run_once(f.rt, qf_deadline_in_ns(10 * 1000 * 1000)), 0);
    }
    int slow_run = 0, slow_longest = 0;
    for (int k = 0; k < CAP; k++) {
        void *p = NULL;
        cr_assert_eq(qf_queue_try_dequeue_ptr(f.q, &p), QF_OK, "%s", qf_last_message());
        bool is_slow = ((uintptr_t)p - 1) >> 20 == 0;
        slow_run = is_slow ? slow_run + 1 : 0;
        if (slow_run > slow_longest)
            slow_longest = slow_run;
    }
    cr_expect_geq(slow_longest, 1, "the slow runner put something");
    cr_expect_leq(slow_longest, 2, "the slow runner put %d in a row while the fast one waited",
                  slow_longest);
    slow_fast_end(&f, &ts, &n, 1);
}

/* Runs every runnable task of a 0-worker runtime until none is left. */
static void settle(qf_runtime *rt)
{
    qf_deadline d = qf_deadline_in_s(60);
    for (;;) {
        int64_t polls = 0;
        cr_assert_eq(qf_runtime_try_run_once(rt, &polls), QF_OK, "%s", qf_last_message());
        if (polls == 0)
            return;
        cr_assert(!qf_deadline_passed(d), "the tasks did not settle");
    }
}

/* Turns (issue 26): a put that a consumer finished for a parked runner
 * (its ticket) is not one of its turn's puts: after it, a slow op still
 * yields after at most two puts of its own while another runner waits.
 * The slow runner fills the queue alone and waits in line with its next
 * element, the fast one waits behind it; this thread then takes TAKE
 * elements: the first hands the slow runner's element in, the second the
 * fast one's, the rest leave room. On a runtime of 0 workers driven by
 * this thread, the slow runner, woken first, runs first. */
Test(runners_start, slow_op_turn_after_a_handed_put)
{
    enum { CAP = 16, TAKE = 10 };
    slow_fast f;
    slow_fast_init(&f, CAP);
    qf_task **ts[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    cr_assert_eq(qf_queue_runners_start(&f.rs[0], 1, f.rt, f.c, QF_RUNNER_START, &ts[0], &n[0]),
                 QF_OK);
    settle(f.rt);
    cr_assert_eq(qf_queue_size(f.q), CAP, "the slow runner fills the queue");
    long in_line = atomic_load(&f.slow.next); /* its element waiting in line */
    cr_assert_eq(in_line, CAP + 1);
    cr_assert_eq(qf_queue_runners_start(&f.rs[1], 1, f.rt, f.c, QF_RUNNER_START, &ts[1], &n[1]),
                 QF_OK);
    settle(f.rt);
    cr_assert_eq(qf_queue_size(f.q), CAP, "the fast runner waits in line");
    for (int k = 0; k < TAKE; k++) {
        void *p = NULL;
        cr_assert_eq(qf_queue_try_dequeue_ptr(f.q, &p), QF_OK, "%s", qf_last_message());
    }
    settle(f.rt);
    /* In the queue's order: the slow runner's elements after the handed
     * one, up to the first of the fast runner's own. */
    int own = 0;
    bool counting = true;
    for (int k = 0; k < CAP; k++) {
        void *p = NULL;
        if (qf_queue_try_dequeue_ptr(f.q, &p) != QF_OK)
            break;
        long v = (long)(uintptr_t)p;
        bool is_slow = v < (1L << 20);
        if (is_slow && v > in_line && counting)
            own++;
        else if (!is_slow && v > (1L << 20) + 1)
            counting = false; /* the fast runner's own puts began */
    }
    cr_expect_geq(own, 1, "the slow runner put after its handed element");
    cr_expect_leq(own, 2, "the slow runner put %d of its own in a row after a handed put", own);
    slow_fast_end(&f, ts, n, 2);
}

/* Page faults taken by the calling thread so far, and by the last start
 * call of run_batch_to_end(). */
static long thread_minor_faults(void)
{
    struct rusage u;
    cr_assert_eq(getrusage(RUSAGE_THREAD, &u), 0);
    return u.ru_minflt;
}

static long last_start_faults;

/* Members of ended runners (their task records) wait for the next start
 * instead of going back to malloc (coord/qf_member_mem.c): a second batch
 * after the first ended takes its records from what the first left. */
/* Start n runners, stop them, free everything; the bytes that waited
 * just after the start. */
static size_t run_batch_to_end(int n)
{
    qf_runtime *rt = mkrt(2);
    qf_coord *c = mkcoord();
    qf_queue *q = ptr_queue("q", 64);
    ptr_counter *pcs = calloc((size_t)n, sizeof(*pcs));
    qf_queue_runner **rs = calloc((size_t)n, sizeof(*rs));
    cr_assert(pcs && rs);
    for (int i = 0; i < n; i++) {
        pcs[i].limit = -1;
        qf_enqueue_op o = ptr_op("p", &pcs[i]);
        rs[i] = mkrunner(q, &o, 1, NULL);
    }
    long faults = thread_minor_faults();
    cr_assert_eq(qf_queue_runners_start(rs, (size_t)n, rt, c, QF_RUNNER_START, NULL, NULL), QF_OK);
    last_start_faults = thread_minor_faults() - faults;
    size_t idle_after_start = qf__member_mem_idle_bytes();
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 60.0, false, NULL), QF_OK, "%s", qf_last_message());
    qf_runtime_free(rt);
    for (int i = 0; i < n; i++)
        cr_assert_eq(qf_queue_runner_free(rs[i]), QF_OK);
    qf_queue_unref(q);
    qf_coord_free(c);
    free(rs);
    free(pcs);
    return idle_after_start;
}

Test(runners_start, a_new_batch_reuses_the_records_of_ended_runners, .timeout = 120)
{
    enum { N = 3000 };
    qf__member_mem_release();
    size_t at_first_start = run_batch_to_end(N);
    size_t left = qf__member_mem_idle_bytes();
    size_t at_second_start = run_batch_to_end(N);
#ifdef QF_TEST_ASAN
    (void)at_first_start;
    (void)at_second_start;
    cr_expect_eq(left, 0, "AddressSanitizer builds keep nothing");
#else
    cr_expect_eq(at_first_start, 0, "nothing waited before the first batch");
    cr_expect_geq(left, (size_t)N * 64, "the ended runners' records wait: %zu bytes", left);
    cr_expect_leq(at_second_start + (size_t)N * 64, left,
                  "the second start took its records from them: %zu of %zu bytes left",
                  at_second_start, left);
#endif
    cr_expect_leq(qf__member_mem_idle_bytes(), QF__MEMBER_CACHE_BYTES);
    qf__member_mem_release();
}

/* A start of thousands needs arrays of tens of KiB for its plan, and a
 * stop action per runner: from memory the library keeps (page memory and
 * member slabs), so a second start of as many maps nothing new. From
 * malloc() they faulted in again at each start, after the runners before
 * had ended (47-219 faults of about 19 us each on the project's VMs). */
Test(runners_start, a_second_start_of_thousands_takes_no_page_fault, .timeout = 120)
{
    enum { N = 10000 }; /* plan arrays of 80-160 KiB: over QF__PAGEMEM_MIN */
    (void)run_batch_to_end(N);
    qf__pagemem_stats before, after;
    qf__pagemem_get_stats(&before);
    (void)run_batch_to_end(N);
    qf__pagemem_get_stats(&after);
#if defined(QF_TEST_ASAN) || defined(QF_TEST_TSAN)
    /* Sanitizers allocate (and shadow) memory their own way. */
    (void)before;
    (void)after;
#else
    if (sysconf(_SC_PAGESIZE) == 4096) { /* else the page memory is malloc()'s */
        cr_expect_eq(after.chunk_bytes, before.chunk_bytes,
                     "the second start mapped %zu bytes more",
                     after.chunk_bytes - before.chunk_bytes);
        /* dozens on a build that took them from malloc() (84 in one run) */
        cr_expect_leq(last_start_faults, 8, "the second start call took %ld page faults",
                      last_start_faults);
    }
#endif
    qf__member_mem_release();
}
