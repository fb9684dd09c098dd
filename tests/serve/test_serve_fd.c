/* test_serve_fd.c - issue 30 in the batcher: completions through a file
 * descriptor to a real epoll loop from model threads of their own, the
 * producers' end of input, the per-level time histograms and the
 * OpenMetrics exposition, checked by a strict parser (python3's
 * prometheus_client, Debian python3-prometheus-client).
 *
 * Waits are on observable state (epoll readiness, answers counted); every
 * epoll_wait has a 10 s bound that turns a lost wake into a failure. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qflow.h"

#define WATCHDOG_MS 10000

typedef struct loopreq {
    qf_serve_request req; /* first: the pointers convert */
    int id;
    uint64_t value; /* the model writes id * 3 */
    qf_code status;
    int answers;
    pthread_t answered_on;
} loopreq;

static void on_answer(qf_serve_request *r, qf_code st, void *arg)
{
    loopreq *q = (loopreq *)r;
    q->status = st;
    q->answers++;
    q->answered_on = pthread_self();
    (*(int *)arg)++; /* only ever on the loop's thread: no atomics needed */
}

typedef struct model {
    qf_serve *s;
    atomic_int batches;
    atomic_int ended; /* threads whose next_batch ended with QF_OUT_OF_RANGE */
} model;

/* A model thread: take batches, run them, hand the results back through
 * the completion fd; ends when the input has ended and all is handed out. */
static void *model_thread(void *a)
{
    model *m = a;
    size_t cap = qf_serve_max_batch_size(m->s), n;
    qf_serve_request **b = calloc(cap, sizeof(*b));
    qf_code rc;
    while ((rc = qf_serve_next_batch(m->s, b, &n)) == QF_OK) {
        for (size_t i = 0; i < n; i++) {
            loopreq *q = (loopreq *)b[i];
            q->value = (uint64_t)q->id * 3;
        }
        atomic_fetch_add(&m->batches, 1);
        cr_assert_eq(qf_serve_post_complete(m->s, b, n, QF_OK), QF_OK, "%s", qf_last_message());
    }
    if (rc == QF_OUT_OF_RANGE)
        atomic_fetch_add(&m->ended, 1);
    free(b);
    return NULL;
}

/* The loop: submit `total` requests in bursts, wait on the completion fd,
 * collect at most `max` per wake; edge-triggered when `et`. */
static void run_loop(bool et, size_t max, int total, int models)
{
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "fdloop",
                                                  .max_batch_size = 16,
                                                  .max_queue_delay_ns = 200000,
                                                  .priority_levels = 2},
                              &s),
                 QF_OK);
    int fd = -1, fd2 = -1;
    cr_assert_eq(qf_serve_completion_fd(s, &fd), QF_OK);
    cr_assert_eq(qf_serve_completion_fd(s, &fd2), QF_OK);
    cr_assert_eq(fd, fd2, "one fd per batcher");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | (et ? EPOLLET : 0)};
    cr_assert_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);

    model m = {.s = s};
    pthread_t th[4];
    for (int i = 0; i < models; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, model_thread, &m), 0);
    loopreq *rq = calloc((size_t)total, sizeof(*rq));
    int answered = 0, submitted = 0, wakes = 0;
    while (answered < total) {
        /* A burst of up to 64 submits, then the loop waits. */
        for (int k = 0; k < 64 && submitted < total; k++, submitted++) {
            loopreq *q = &rq[submitted];
            q->id = submitted;
            qf_serve_request_init(&q->req, q, QF_FOREVER, (uint32_t)(submitted % 2), on_answer,
                                  &answered);
            cr_assert_eq(qf_serve_try_submit(s, &q->req), QF_OK, "%s", qf_last_message());
        }
        if (submitted == total)
            cr_assert_eq(qf_serve_end_input(s), QF_OK);
        struct epoll_event got;
        int r = epoll_wait(ep, &got, 1, submitted < total ? 0 : WATCHDOG_MS);
        cr_assert(r >= 0);
        if (r == 0 && submitted < total)
            continue;
        cr_assert_eq(r, 1, "no completion wake in %d ms: %d of %d answered", WATCHDOG_MS, answered,
                     total);
        wakes++;
        size_t n = 99;
        cr_assert_eq(qf_serve_collect(s, max, &n), QF_OK);
        cr_assert(max == 0 || n <= max);
    }
    for (int i = 0; i < models; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(atomic_load(&m.ended), models, "model threads end at the end of input");
    for (int i = 0; i < total; i++) {
        cr_assert_eq(rq[i].answers, 1, "request %d answered %d times", i, rq[i].answers);
        cr_assert_eq(rq[i].status, QF_OK);
        cr_assert_eq(rq[i].value, (uint64_t)i * 3, "the model's write is visible");
        cr_assert(pthread_equal(rq[i].answered_on, pthread_self()),
                  "answered on the loop's thread");
    }
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.completed_ok, (uint64_t)total);
    cr_expect_eq(st.counts.in_flight, 0);
    size_t n = 99;
    cr_expect_eq(qf_serve_collect(s, 0, &n), QF_OK);
    cr_expect_eq(n, 0, "nothing left");
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, qf_deadline_in_s(5), &rep), QF_OK);
    cr_expect_eq(rep.batched, (uint64_t)total);
    cr_expect(wakes > 0);
    close(ep);
    qf_serve_free(s);
    free(rq);
}

Test(serve_fd, epoll_level_triggered_two_model_threads)
{
    run_loop(false, 0, 20000, 2);
}

Test(serve_fd, epoll_edge_triggered_collect_limited)
{
    /* Edge-triggered, collecting 5 per wake: what a collect leaves behind
     * must produce a new edge, or the loop hangs (the watchdog fails it). */
    run_loop(true, 5, 5000, 3);
}

static size_t pending_bytes(int fd)
{
    struct epoll_event ev = {.events = EPOLLIN};
    int ep = epoll_create1(0);
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    int r = epoll_wait(ep, &ev, 1, 0);
    close(ep);
    return (size_t)r;
}

Test(serve_fd, wake_semantics_post_before_fd_spurious_and_polled)
{
    qf_serve *s;
    cr_assert_eq(
        qf_serve_new(&(qf_serve_options){.max_batch_size = 4, .max_queue_delay_ns = 0}, &s), QF_OK);
    size_t n = 99;
    cr_expect_eq(qf_serve_collect(s, 0, &n), QF_OK);
    cr_expect_eq(n, 0, "polled, nothing posted");
    int answered = 0;
    loopreq q[3];
    for (int i = 0; i < 3; i++) {
        qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, 0, on_answer, &answered);
        q[i].id = i;
        cr_assert_eq(qf_serve_submit(s, &q[i].req), QF_OK);
    }
    qf_serve_request *b[4];
    cr_assert_eq(qf_serve_try_next_batch(s, b, &n), QF_OK);
    cr_assert_eq(n, 3);
    /* Posted before any fd exists: the fd made later is readable at once. */
    cr_assert_eq(qf_serve_post_complete(s, b, 2, QF_OK), QF_OK);
    cr_expect_eq(answered, 0, "a post only queues");
    int fd;
    cr_assert_eq(qf_serve_completion_fd(s, &fd), QF_OK);
    cr_expect_eq(pending_bytes(fd), 1, "readable: a post waits");
    /* Posting the same request again is refused as complete refuses it. */
    cr_expect_eq(qf_serve_post_complete(s, b, 1, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect_eq(qf_serve_complete(s, b, 1, QF_OK), QF_FAILED_PRECONDITION);
    cr_assert_eq(qf_serve_post_complete(s, &b[2], 1, QF_INTERNAL), QF_OK);
    cr_expect_eq(qf_serve_collect(s, 1, &n), QF_OK);
    cr_expect_eq(n, 1);
    cr_expect_eq(pending_bytes(fd), 1, "posts left behind keep it readable");
    cr_expect_eq(qf_serve_collect(s, 0, &n), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(answered, 3);
    cr_expect_eq(q[0].status, QF_OK);
    cr_expect_eq(q[2].status, QF_INTERNAL, "each post's status");
    cr_expect_eq(pending_bytes(fd), 0, "collected: not readable");
    cr_expect_eq(qf_serve_collect(s, 0, &n), QF_OK);
    cr_expect_eq(n, 0, "a spurious collect answers nothing");
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.completed_ok, 2);
    cr_expect_eq(st.completed_error, 1);
    qf_serve_free(s);
}

Test(serve_fd, free_answers_posts_nobody_collected)
{
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.max_batch_size = 4}, &s), QF_OK);
    int answered = 0;
    loopreq q[2];
    for (int i = 0; i < 2; i++) {
        qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, 0, on_answer, &answered);
        cr_assert_eq(qf_serve_submit(s, &q[i].req), QF_OK);
    }
    qf_serve_request *b[4];
    size_t n;
    cr_assert_eq(qf_serve_end_input(s), QF_OK);
    cr_assert_eq(qf_serve_try_next_batch(s, b, &n), QF_OK);
    cr_assert_eq(qf_serve_post_complete(s, b, n, QF_OK), QF_OK);
    qf_serve_free(s);
    cr_expect_eq(answered, 2);
    cr_expect_eq(q[1].status, QF_OK);
}

/* ------------------------------------------------------------ end of input */

Test(serve_fd, end_input_sends_the_partial_batch_at_once_then_ends)
{
    qf_serve *s;
    /* No delay bound: without the end of input this batch would wait until
     * it is full. */
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "eoi",
                                                  .max_batch_size = 8,
                                                  .max_queue_delay_ns = INT64_MAX},
                              &s),
                 QF_OK);
    int answered = 0;
    loopreq q[4];
    for (int i = 0; i < 3; i++) {
        qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, 0, on_answer, &answered);
        cr_assert_eq(qf_serve_submit(s, &q[i].req), QF_OK);
    }
    qf_serve_request *b[8];
    size_t n;
    cr_expect_eq(qf_serve_try_next_batch(s, b, &n), QF_UNAVAILABLE, "open batch waits");
    cr_assert_eq(qf_serve_end_input(s), QF_OK);
    cr_assert_eq(qf_serve_end_input(s), QF_OK, "idempotent");
    cr_expect(qf_serve_is_draining(s));
    /* A submit after it: refused, not answered, still the caller's. */
    qf_serve_request_init(&q[3].req, &q[3], QF_FOREVER, 0, on_answer, &answered);
    cr_expect_eq(qf_serve_submit(s, &q[3].req), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "input ended") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_serve_try_submit(s, &q[3].req), QF_FAILED_PRECONDITION);
    cr_expect_eq(answered, 0, "a refused submit is not answered");
    int64_t t0 = qf_now_ns();
    cr_assert_eq(qf_serve_next_batch_until(s, qf_deadline_in_s(5), b, &n), QF_OK);
    cr_expect_eq(n, 3, "the partial batch goes out");
    cr_expect_lt(qf_now_ns() - t0, 1000000000, "without waiting");
    qf_serve_complete(s, b, n, QF_OK);
    cr_expect_eq(qf_serve_next_batch(s, b, &n), QF_OUT_OF_RANGE);
    cr_expect(strstr(qf_last_message(), "input ended") != NULL, "%s", qf_last_message());
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_deadline wake_at;
    cr_expect_eq(qf_serve_poll_next_batch(s, &w, b, &n, &wake_at), QF_OUT_OF_RANGE);
    cr_expect_eq(qf_serve_try_next_batch(s, b, &n), QF_OUT_OF_RANGE);
    cr_expect_eq(answered, 3);
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.counts.cancelled, 0, "nothing cancelled");
    cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_DRAIN], 1);
    cr_expect_eq(st.counts.rejected, 0, "refusals after the end are not counted as rejects");
    qf_serve_free(s);
    /* The refused request was never submitted: it can go elsewhere. */
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.max_batch_size = 1}, &s), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &q[3].req), QF_OK);
    qf_serve_free(s); /* cancels it */
    cr_expect_eq(q[3].status, QF_CANCELLED);
}

static qf_code run_ok(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)reqs;
    atomic_fetch_add((atomic_int *)arg, (int)n);
    return QF_OK;
}

typedef struct racer {
    qf_serve *s;
    loopreq *q;
    int n;
    atomic_int *admitted, *refused;
} racer;

static void on_answer_atomic(qf_serve_request *r, qf_code st, void *arg)
{
    loopreq *q = (loopreq *)r;
    q->status = st;
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void *race_submit(void *a)
{
    racer *r = a;
    for (int i = 0; i < r->n; i++) {
        qf_code rc = qf_serve_submit(r->s, &r->q[i].req);
        if (rc == QF_OK)
            atomic_fetch_add(r->admitted, 1);
        else if (rc == QF_FAILED_PRECONDITION)
            atomic_fetch_add(r->refused, 1);
        else
            cr_assert_fail("submit: %d %s", rc, qf_last_message());
    }
    return NULL;
}

/* Submitters racing with the end of input and a thread executor: every
 * request is either admitted and served OK, or refused and never answered;
 * the executor (qf_serve_run) ends with QF_OK. */
Test(serve_fd, end_input_races_submitters, .timeout = 60)
{
    for (int round = 0; round < 20; round++) {
        qf_serve *s;
        cr_assert_eq(
            qf_serve_new(&(qf_serve_options){.max_batch_size = 8, .max_queue_delay_ns = 50000}, &s),
            QF_OK);
        enum { PER = 2000, T = 3 };
        loopreq *q = calloc(PER * T, sizeof(*q));
        atomic_int admitted = 0, refused = 0, answered = 0, ran = 0;
        for (int i = 0; i < PER * T; i++)
            qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, 0, on_answer_atomic, &answered);
        racer rs[T];
        pthread_t th[T];
        for (int t = 0; t < T; t++) {
            rs[t] = (racer){s, q + t * PER, PER, &admitted, &refused};
            pthread_create(&th[t], NULL, race_submit, &rs[t]);
        }
        /* End the input once some requests are in (observable state). */
        while (qf_serve_depth(s) == 0 && atomic_load(&admitted) == 0)
            sched_yield();
        cr_assert_eq(qf_serve_end_input(s), QF_OK);
        cr_expect_eq(qf_serve_run(s, run_ok, &ran), QF_OK, "%s", qf_last_message());
        for (int t = 0; t < T; t++)
            pthread_join(th[t], NULL);
        cr_assert_eq(atomic_load(&admitted) + atomic_load(&refused), PER * T);
        cr_assert_eq(atomic_load(&answered), atomic_load(&admitted));
        cr_assert_eq(atomic_load(&ran), atomic_load(&admitted));
        for (int i = 0; i < PER * T; i++)
            cr_assert(q[i].status == QF_OK);
        qf_serve_free(s);
        free(q);
    }
}

Test(serve_fd, end_input_ends_a_spawned_executor_ok)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    qf_serve *s;
    cr_assert_eq(
        qf_serve_new(&(qf_serve_options){.max_batch_size = 4, .max_queue_delay_ns = INT64_MAX}, &s),
        QF_OK);
    atomic_int ran = 0, answered = 0;
    qf_task *t;
    cr_assert_eq(qf_serve_spawn(s, rt, run_ok, &ran, NULL, &t), QF_OK);
    loopreq q[6];
    for (int i = 0; i < 6; i++) {
        qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, 0, on_answer_atomic, &answered);
        cr_assert_eq(qf_serve_submit(s, &q[i].req), QF_OK);
    }
    cr_assert_eq(qf_serve_end_input(s), QF_OK);
    cr_expect_eq(qf_task_join(t, qf_deadline_in_s(10), NULL), QF_OK);
    qf_task_unref(t);
    cr_expect_eq(atomic_load(&ran), 6);
    qf_serve_free(s);
    qf_runtime_free(rt);
}

/* ------------------------------------------------------------ histograms */

Test(serve_fd, histograms_by_level_with_configured_buckets)
{
    static const int64_t db[] = {1000, 1000000000};
    static const int64_t mb[] = {5000000, 50000000, 2000000000};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "h",
                                                  .max_batch_size = 8,
                                                  .priority_levels = 3,
                                                  .delay_buckets_ns = db,
                                                  .num_delay_buckets = 2,
                                                  .model_buckets_ns = mb,
                                                  .num_model_buckets = 3},
                              &s),
                 QF_OK);
    int answered = 0;
    loopreq q[5];
    uint32_t lv[5] = {0, 2, 2, 0, 2};
    for (int i = 0; i < 5; i++) {
        qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, lv[i], on_answer, &answered);
        cr_assert_eq(qf_serve_submit(s, &q[i].req), QF_OK);
    }
    qf_serve_end_input(s);
    qf_serve_request *b[8];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, b, &n), QF_OK);
    cr_assert_eq(n, 5);
    struct timespec ts = {0, 10000000}; /* the model takes >= 10 ms */
    nanosleep(&ts, NULL);
    cr_assert_eq(qf_serve_complete(s, b, n, QF_OK), QF_OK);

    qf_serve_histogram h;
    cr_assert_eq(qf_serve_get_histogram(s, QF_SERVE_HIST_QUEUE_DELAY, 2, &h), QF_OK);
    cr_expect_eq(h.num_buckets, 3);
    cr_expect_eq(h.bounds_ns[0], 1000);
    cr_expect_eq(h.bounds_ns[2], INT64_MAX);
    cr_expect_eq(h.count, 3);
    cr_assert_eq(qf_serve_get_histogram(s, QF_SERVE_HIST_MODEL_TIME, 0, &h), QF_OK);
    cr_expect_eq(h.count, 2);
    cr_expect_eq(h.counts[0], 0, "the model took >= 10 ms, above 5 ms");
    cr_expect_eq(h.counts[1] + h.counts[2], 2);
    cr_expect_geq(h.sum_ns, 2 * 10000000);
    cr_assert_eq(qf_serve_get_histogram(s, QF_SERVE_HIST_LATENCY, QF_SERVE_ALL_LEVELS, &h), QF_OK);
    cr_expect_eq(h.count, 5);
    cr_expect_eq(h.num_buckets, QF_SERVE_DELAY_BUCKETS, "the default buckets");
    cr_assert_eq(qf_serve_get_histogram(s, QF_SERVE_HIST_LATENCY, 1, &h), QF_OK);
    cr_expect_eq(h.count, 0);
    cr_expect_eq(qf_serve_get_histogram(s, QF_SERVE_HIST_LATENCY, 3, &h), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_get_histogram(s, (qf_serve_hist_kind)3, 0, &h), QF_INVALID_ARGUMENT);
    qf_serve_free(s);

    /* Bad bucket lists are refused, naming the field. */
    static const int64_t down[] = {5, 5};
    static const int64_t zero[] = {0};
    qf_serve *bad = NULL;
    cr_expect_eq(qf_serve_new(&(qf_serve_options){.max_batch_size = 1,
                                                  .latency_buckets_ns = down,
                                                  .num_latency_buckets = 2},
                              &bad),
                 QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "latency_buckets_ns") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_serve_new(&(qf_serve_options){.max_batch_size = 1,
                                                  .model_buckets_ns = zero,
                                                  .num_model_buckets = 1},
                              &bad),
                 QF_INVALID_ARGUMENT);
    cr_expect_eq(
        qf_serve_new(&(qf_serve_options){.max_batch_size = 1, .num_delay_buckets = 3}, &bad),
        QF_INVALID_ARGUMENT);
    cr_expect_eq(
        qf_serve_new(&(qf_serve_options){.max_batch_size = 1,
                                         .delay_buckets_ns = db,
                                         .num_delay_buckets = QF_SERVE_MAX_TIME_BUCKETS + 1},
                     &bad),
        QF_INVALID_ARGUMENT);
    cr_expect_null(bad);
}

/* Write the exposition to a file and have `parser` (a python3 snippet
 * reading argv[1]) parse it; returns its exit status and output. */
static int parse_with_python(const char *text, const char *parser, char *out, size_t cap)
{
    char path[] = "/tmp/qf-om-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[4096];
    /* Debian's python3 (the package installs its module there). */
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c '%s' %s 2>&1", parser, path);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t len = fread(out, 1, cap - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char om_parser[] =
    "import sys\n"
    "from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n"
    "fams = list(p(open(sys.argv[1]).read()))\n"
    "for f in fams:\n"
    "    n = len(f.samples)\n"
    "    print(f.name, f.type, f.unit, n)\n";

static const char prom_parser[] =
    "import sys\n"
    "from prometheus_client.parser import text_string_to_metric_families as p\n"
    "for f in p(open(sys.argv[1]).read()):\n"
    "    print(f.name, f.type, len(f.samples))\n";

static char *fill_for_metrics(qf_serve **ret)
{
    qf_serve *s;
    static const int64_t lb[] = {1, 1000, 1001, 2500000000};
    /* A level policy and adaptive mode, so that their families are there
     * for the parsers too. */
    static qf_serve_level_policy lp[2] = {{.max_queued = 100}, {0}};
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "om\"b\\x\ny",
                                                  .max_batch_size = 4,
                                                  .priority_levels = 2,
                                                  .level_policy = lp,
                                                  .p99_target_ns = 2000000,
                                                  .latency_buckets_ns = lb,
                                                  .num_latency_buckets = 4},
                              &s),
                 QF_OK);
    static int answered; /* the callbacks run until qf_serve_free() */
    answered = 0;
    static loopreq q[6];
    for (int i = 0; i < 6; i++) {
        qf_serve_request_init(&q[i].req, &q[i], QF_FOREVER, (uint32_t)i % 2, on_answer, &answered);
        cr_assert_eq(qf_serve_submit(s, &q[i].req), QF_OK);
    }
    qf_serve_request *b[4];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, b, &n), QF_OK);
    qf_serve_post_complete(s, b, n, QF_OK);
    qf_serve_collect(s, 0, NULL);
    *ret = s;
    return NULL;
}

Test(serve_fd, openmetrics_text_passes_a_strict_parser)
{
    qf_serve *s;
    fill_for_metrics(&s);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(qf_serve_metrics_write_openmetrics(f), QF_OK);
    fclose(f);
    cr_expect(len > 7 && !strcmp(buf + len - 6, "# EOF\n"), "ends with # EOF");
    cr_expect(strstr(buf, "# TYPE qflow_serve_requests counter\n") != NULL);
    cr_expect(strstr(buf, "# UNIT qflow_serve_model_seconds seconds\n") != NULL);
    /* Exact decimal bounds: 1000 and 1001 ns stay apart, 2.5 s exact. */
    cr_expect(strstr(buf, "le=\"0.000001\"") && strstr(buf, "le=\"0.000001001\"") &&
                  strstr(buf, "le=\"2.5\"") && strstr(buf, "le=\"0.000000001\""),
              "%s", buf);
    cr_expect(strstr(buf, "qflow_serve_latency_seconds_count{batcher=\"om\\\"b\\\\x\\ny\","
                          "priority=\"0\"} 3\n") != NULL,
              "%s", buf);
    char out[16384];
    int rc = parse_with_python(buf, om_parser, out, sizeof(out));
    if (rc != 0 && (strstr(out, "No module named") || strstr(out, "not found"))) {
        free(buf);
        qf_serve_free(s);
        cr_skip_test("the parser is not installed (Debian: apt-get install "
                     "python3-prometheus-client): %s",
                     out);
    }
    cr_assert_eq(rc, 0,
                 "OpenMetrics parser refused the text (python3-prometheus-client "
                 "installed?):\n%s\n--- text:\n%s",
                 out, buf);
    cr_expect(strstr(out, "qflow_serve_model_seconds histogram seconds") != NULL, "%s", out);
    cr_expect(strstr(out, "qflow_serve_queue_delay_seconds histogram seconds") != NULL, "%s", out);
    cr_expect(strstr(out, "qflow_serve_latency_seconds histogram seconds") != NULL, "%s", out);
    cr_expect(strstr(out, "qflow_serve_requests counter") != NULL, "%s", out);
    cr_expect(strstr(out, "qflow_serve_policy counter") != NULL, "%s", out);
    cr_expect(strstr(out, "qflow_serve_level_depth gauge") != NULL, "%s", out);
    cr_expect(strstr(out, "qflow_serve_adaptive_p99_seconds gauge seconds") != NULL, "%s", out);
    free(buf);

    /* The 0.0.4 text through the Prometheus parser of the same package. */
    cr_assert_eq(qf_serve_metrics_text(&buf, &len), QF_OK);
    rc = parse_with_python(buf, prom_parser, out, sizeof(out));
    cr_assert_eq(rc, 0, "Prometheus parser refused the text:\n%s\n--- text:\n%s", out, buf);
    cr_expect(strstr(out, "qflow_serve_latency_seconds histogram") != NULL, "%s", out);
    free(buf);
    qf_serve_free(s);
    cr_expect_eq(qf_serve_metrics_write_openmetrics(NULL), QF_INVALID_ARGUMENT);
}

/* ------------------------------------------------------------ stress */

typedef struct sreq {
    qf_serve_request req;
    atomic_int answers;
    atomic_int status;
} sreq;

static void on_sanswer(qf_serve_request *r, qf_code st, void *arg)
{
    (void)arg;
    sreq *q = (sreq *)r;
    atomic_store(&q->status, (int)st);
    atomic_fetch_add(&q->answers, 1);
}

typedef struct sworld {
    qf_serve *s;
    sreq *q;
    int per, submitters;
    atomic_int *refused_fp; /* FAILED_PRECONDITION: never answered */
    atomic_int models_done;
} sworld;

typedef struct ssub {
    sworld *w;
    int first;
} ssub;

static void *stress_submit(void *a)
{
    ssub *p = a;
    for (int i = 0; i < p->w->per; i++) {
        sreq *q = &p->w->q[p->first + i];
        qf_code rc = qf_serve_try_submit(p->w->s, &q->req);
        if (rc == QF_FAILED_PRECONDITION)
            atomic_fetch_add(p->w->refused_fp, 1);
        else
            cr_assert(rc == QF_OK || rc == QF_UNAVAILABLE, "submit: %d %s", rc, qf_last_message());
    }
    return NULL;
}

static void *stress_model(void *a)
{
    sworld *w = a;
    qf_serve_request *b[8];
    size_t n;
    unsigned seed = (unsigned)(uintptr_t)&n;
    while (qf_serve_next_batch(w->s, b, &n) == QF_OK) {
        if (rand_r(&seed) % 4 == 0)
            sched_yield(); /* a slower batch now and then */
        cr_assert_eq(qf_serve_post_complete(w->s, b, n, rand_r(&seed) % 8 ? QF_OK : QF_INTERNAL),
                     QF_OK);
    }
    atomic_fetch_add(&w->models_done, 1);
    return NULL;
}

/* Submitters, two model threads posting and an epoll loop collecting, while
 * the input ends or a drain with a random deadline (0 to 2 ms) begins at a
 * random point: every request is answered exactly once (or refused
 * unanswered after the end of input), the counts add up, nothing stays in
 * flight. Bounded: 40 rounds, a 10 s watchdog on every wait. */
Test(serve_fd, stress_posts_collects_and_random_drains, .timeout = 120)
{
    unsigned seed = 12345;
    uint64_t batched = 0, cancelled = 0;
    for (int round = 0; round < 40; round++) {
        enum { SUBS = 2, PER = 1500, MODELS = 2 };
        qf_serve *s;
        cr_assert_eq(qf_serve_new(&(qf_serve_options){.max_batch_size = 8,
                                                      .max_queue_delay_ns = 100000,
                                                      .max_queued = 4096},
                                  &s),
                     QF_OK);
        atomic_int refused_fp = 0;
        sworld w = {.s = s, .per = PER, .submitters = SUBS, .refused_fp = &refused_fp};
        w.q = calloc(SUBS * PER, sizeof(sreq));
        for (int i = 0; i < SUBS * PER; i++)
            qf_serve_request_init(&w.q[i].req, NULL, QF_FOREVER, 0, on_sanswer, NULL);
        int fd;
        cr_assert_eq(qf_serve_completion_fd(s, &fd), QF_OK);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN | (round % 2 ? EPOLLET : 0)};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        pthread_t mt[MODELS], st[SUBS];
        ssub subs[SUBS];
        for (int i = 0; i < MODELS; i++)
            pthread_create(&mt[i], NULL, stress_model, &w);
        for (int i = 0; i < SUBS; i++) {
            subs[i] = (ssub){&w, i * PER};
            pthread_create(&st[i], NULL, stress_submit, &subs[i]);
        }
        /* The end comes after a random number of admissions. */
        uint64_t at = (uint64_t)(rand_r(&seed) % (SUBS * PER));
        int how = rand_r(&seed) % 3;
        bool ended = false;
        qf_deadline watchdog = qf_deadline_in_s(WATCHDOG_MS / 1000);
        while (atomic_load(&w.models_done) < MODELS) {
            cr_assert(qf_now_ns() < watchdog, "round %d: models still running after %d ms", round,
                      WATCHDOG_MS);
            qf_serve_stats sst;
            qf_serve_get_stats(s, &sst);
            if (!ended && sst.counts.admitted + sst.counts.rejected >= at) {
                ended = true;
                if (how == 0)
                    qf_serve_end_input(s);
                else
                    qf_serve_begin_drain(s, qf_deadline_in_ns(how == 1 ? 0 : 2000000));
            }
            struct epoll_event got;
            /* Short waits: the models' end is not an fd event. */
            int r = epoll_wait(ep, &got, 1, 1);
            cr_assert(r >= 0);
            if (r == 1)
                qf_serve_collect(s, (size_t)(round % 3) * 4, NULL);
        }
        for (int i = 0; i < SUBS; i++)
            pthread_join(st[i], NULL);
        for (int i = 0; i < MODELS; i++)
            pthread_join(mt[i], NULL);
        /* Submits after the models ended may still be queued: a drain with
         * no grace answers them; then collect what was posted last. */
        qf_serve_report rep;
        qf_serve_begin_drain(s, QF_NO_WAIT);
        size_t n;
        do
            cr_assert_eq(qf_serve_collect(s, 0, &n), QF_OK);
        while (n);
        cr_assert_eq(qf_serve_drain(s, qf_deadline_in_s(10), &rep), QF_OK, "%s", qf_last_message());
        int answered = 0, unanswered = 0;
        for (int i = 0; i < SUBS * PER; i++) {
            int a = atomic_load(&w.q[i].answers);
            cr_assert(a <= 1, "round %d: request %d answered %d times", round, i, a);
            answered += a;
            unanswered += a == 0;
        }
        cr_assert_eq(unanswered, atomic_load(&refused_fp), "round %d", round);
        cr_assert_eq(rep.admitted, rep.batched + rep.expired + rep.dropped + rep.cancelled);
        cr_assert_eq(rep.in_flight, 0);
        cr_assert_eq(rep.queued, 0);
        cr_assert_eq((uint64_t)answered, rep.admitted + rep.rejected, "round %d", round);
        batched += rep.batched;
        cancelled += rep.cancelled;
        close(ep);
        qf_serve_free(s);
        free(w.q);
    }
    cr_expect_gt(batched, 1000, "the rounds ran the model");
    printf("stress: %llu batched, %llu cancelled in 40 rounds\n", (unsigned long long)batched,
           (unsigned long long)cancelled);
}
