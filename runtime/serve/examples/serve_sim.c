/* qflow-serve-sim - a simulated inference server on qflow's serving batcher.
 *
 * N handler threads submit requests at a given total rate (open loop: each
 * handler keeps its own schedule, whatever the server does), each with a
 * deadline. A model takes batches and costs a fixed time per batch plus a
 * time per item (it sleeps: a model on an accelerator leaves the CPU
 * idle). At the end, or on SIGTERM / SIGINT, the program stops through a
 * Coordinator: the handlers stop submitting, the batcher drains (what is
 * queued is still handed to the model, what is left at the grace deadline
 * is answered CANCELLED), and it prints throughput, the added latency
 * (submit to batch hand-off) percentiles, the batch size distribution,
 * the outcome counts and the drain report, then exits 0.
 *
 *   build/runtime/serve/examples/qflow-serve-sim --rate 10000 --duration 5
 *
 * Run with --help for the options.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qflow.h"

typedef struct config {
    int handlers;
    double rate;     /* requests/s, all handlers together */
    double duration; /* s; 0: until a signal */
    double deadline_ms;
    size_t max_batch;
    double max_delay_us;
    double batch_cost_us;
    double item_cost_us;
    unsigned priorities;
    int64_t max_queued;
    qf_serve_admission policy;
    bool task_executor;
    bool metrics;
    double grace_s;
    double p99_target_us; /* issue 30: adaptive mode; 0 off */
} config;

#define MAX_SAMPLES (4u << 20)

typedef struct sim {
    config cfg;
    qf_coord *coord;
    qf_serve *serve;
    /* Added latency samples (ns), filled by completions on OK. */
    int64_t *lat;
    atomic_uint_fast64_t nlat;
    atomic_uint_fast64_t outcome[QF_CODE_COUNT];
    atomic_uint_fast64_t submitted;
    uint64_t *sizes; /* batches per size, written by the model only */
    int64_t t_start;
} sim;

/* One request in flight: the handler's own record around the batcher's. */
typedef struct rec {
    qf_serve_request req;
    sim *sim;
    int64_t t_submit;
    int64_t t_handoff;
} rec;

static sim S;

/* Until a stop signal in `stops` (taken here: it is blocked in every
 * thread), a stop requested elsewhere, or `end`. True for a stop, false
 * at the end. Slices of 50 ms, so a stop from elsewhere is seen. */
static bool wait_for_stop(sim *s, const sigset_t *stops, qf_deadline end)
{
    for (;;) {
        if (qf_coord_should_stop(s->coord))
            return true;
        int64_t left = end == QF_FOREVER ? INT64_MAX : end - qf_now_ns();
        if (left <= 0)
            return false;
        int64_t slice = left < 50000000 ? left : 50000000;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)slice};
        int sig = sigtimedwait(stops, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            qf_coord_request_stop(s->coord, NULL);
            return true;
        }
    }
}

static void sleep_until_ns(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The completion: runs once per request, on whichever thread settles it. */
static void done(qf_serve_request *req, qf_code status, void *arg)
{
    rec *r = (rec *)req; /* req is the first member */
    sim *s = arg;
    atomic_fetch_add_explicit(&s->outcome[status], 1, memory_order_relaxed);
    if (status == QF_OK) {
        uint_fast64_t i = atomic_fetch_add_explicit(&s->nlat, 1, memory_order_relaxed);
        if (i < MAX_SAMPLES)
            s->lat[i] = r->t_handoff - r->t_submit;
    }
    free(r);
}

/* The model: stamp the hand-off, then cost batch + n * item. */
static qf_code model(void *arg, qf_serve_request *const *reqs, size_t n)
{
    sim *s = arg;
    int64_t now = qf_now_ns();
    for (size_t i = 0; i < n; i++)
        ((rec *)reqs[i])->t_handoff = now;
    s->sizes[n]++;
    double cost_ns = (s->cfg.batch_cost_us + (double)n * s->cfg.item_cost_us) * 1e3;
    if (cost_ns > 0)
        sleep_until_ns(now + (int64_t)cost_ns);
    return QF_OK;
}

typedef struct handler {
    sim *s;
    int id;
} handler;

static void *handler_main(void *arg)
{
    handler *h = arg;
    sim *s = h->s;
    const config *c = &s->cfg;
    double per = c->rate / c->handlers;
    int64_t interval = per > 0 ? (int64_t)(1e9 / per) : 1000000000;
    /* Spread the handlers' schedules over one interval. */
    int64_t next = s->t_start + interval * h->id / c->handlers;
    uint32_t prio = c->priorities ? (uint32_t)(h->id % (int)c->priorities) : 0;
    while (!qf_coord_should_stop(s->coord)) {
        int64_t now = qf_now_ns();
        if (now < next) {
            sleep_until_ns(next);
            continue;
        }
        next += interval;
        rec *r = malloc(sizeof(*r));
        if (!r)
            break;
        r->sim = s;
        r->t_submit = qf_now_ns();
        qf_serve_request_init(&r->req, r, r->t_submit + (int64_t)(c->deadline_ms * 1e6), prio, done,
                              s);
        atomic_fetch_add_explicit(&s->submitted, 1, memory_order_relaxed);
        qf_serve_submit(s->serve, &r->req); /* refusals are answered too */
    }
    return NULL;
}

static void *executor_main(void *arg)
{
    sim *s = arg;
    qf_serve_run(s->serve, model, s);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(const int64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);
    return (double)v[k ? k - 1 : 0];
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qflow-serve-sim [options]\n"
            "  --handlers N        handler threads submitting requests (default 4)\n"
            "  --rate R            requests per second, all handlers together (default 10000)\n"
            "  --duration S        seconds to run; 0 runs until SIGTERM/SIGINT (default 5)\n"
            "  --deadline-ms D     each request's deadline after its submit (default 20)\n"
            "  --max-batch B       largest batch (default 32)\n"
            "  --max-delay-us U    max_queue_delay (default 500)\n"
            "  --batch-cost-us C   model cost per batch (default 200)\n"
            "  --item-cost-us I    model cost per item (default 5)\n"
            "  --priorities K      priority levels; handler i submits at level i %% K (default 1)\n"
            "  --max-queued Q      admission bound, 0 unbounded (default 4096)\n"
            "  --policy P          reject | block | drop-oldest (default reject)\n"
            "  --executor E        task (on a worker pool) | thread (default task)\n"
            "  --grace S           drain grace on stop, seconds (default 2)\n"
            "  --metrics           print the Prometheus metrics at the end\n"
            "  --p99-target-us T   adaptive mode: the batcher picks delay and batch size\n"
            "                      for this p99 (admission to completion); 0 off (default)\n");
}

static int parse(int argc, char **argv, config *c)
{
    *c = (config){.handlers = 4,
                  .rate = 10000,
                  .duration = 5,
                  .deadline_ms = 20,
                  .max_batch = 32,
                  .max_delay_us = 500,
                  .batch_cost_us = 200,
                  .item_cost_us = 5,
                  .priorities = 1,
                  .max_queued = 4096,
                  .policy = QF_SERVE_REJECT,
                  .task_executor = true,
                  .grace_s = 2};
    static const struct option opts[] = {{"handlers", required_argument, NULL, 'h'},
                                         {"rate", required_argument, NULL, 'r'},
                                         {"duration", required_argument, NULL, 'd'},
                                         {"deadline-ms", required_argument, NULL, 'D'},
                                         {"max-batch", required_argument, NULL, 'b'},
                                         {"max-delay-us", required_argument, NULL, 'u'},
                                         {"batch-cost-us", required_argument, NULL, 'c'},
                                         {"item-cost-us", required_argument, NULL, 'i'},
                                         {"priorities", required_argument, NULL, 'p'},
                                         {"max-queued", required_argument, NULL, 'q'},
                                         {"policy", required_argument, NULL, 'P'},
                                         {"executor", required_argument, NULL, 'e'},
                                         {"grace", required_argument, NULL, 'g'},
                                         {"metrics", no_argument, NULL, 'm'},
                                         {"p99-target-us", required_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'H'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        double v = optarg ? strtod(optarg, &end) : 0;
        bool num_ok = optarg && end != optarg && *end == 0 && v >= 0;
        switch (o) {
        case 'h':
            c->handlers = (int)v;
            break;
        case 'r':
            c->rate = v;
            break;
        case 'd':
            c->duration = v;
            break;
        case 'D':
            c->deadline_ms = v;
            break;
        case 'b':
            c->max_batch = (size_t)v;
            break;
        case 'u':
            c->max_delay_us = v;
            break;
        case 'c':
            c->batch_cost_us = v;
            break;
        case 'i':
            c->item_cost_us = v;
            break;
        case 'p':
            c->priorities = (unsigned)v;
            break;
        case 'q':
            c->max_queued = (int64_t)v;
            break;
        case 'g':
            c->grace_s = v;
            break;
        case 'T':
            c->p99_target_us = v;
            break;
        case 'm':
            c->metrics = true;
            continue;
        case 'H':
            usage(stdout);
            exit(0);
        case 'P':
            if (!strcmp(optarg, "reject"))
                c->policy = QF_SERVE_REJECT;
            else if (!strcmp(optarg, "block"))
                c->policy = QF_SERVE_BLOCK;
            else if (!strcmp(optarg, "drop-oldest"))
                c->policy = QF_SERVE_DROP_OLDEST;
            else {
                fprintf(stderr, "qflow-serve-sim: unknown --policy '%s'\n", optarg);
                return 2;
            }
            continue;
        case 'e':
            if (!strcmp(optarg, "task") || !strcmp(optarg, "thread")) {
                c->task_executor = !strcmp(optarg, "task");
                continue;
            }
            fprintf(stderr, "qflow-serve-sim: unknown --executor '%s'\n", optarg);
            return 2;
        default:
            usage(stderr);
            return 2;
        }
        if (!num_ok) {
            fprintf(stderr, "qflow-serve-sim: bad number '%s'\n", optarg);
            return 2;
        }
    }
    if (optind < argc || c->handlers < 1 || c->handlers > 1024 || c->rate <= 0) {
        fprintf(stderr, "qflow-serve-sim: need 1..1024 handlers and a rate > 0\n");
        return 2;
    }
    return 0;
}

static const char *reason_name[QF_SERVE_CLOSE_REASONS] = {"full", "delay", "preferred", "drain"};

static void print_results(sim *s, double elapsed, const qf_serve_report *rep, qf_code drc)
{
    qf_serve_stats st;
    qf_serve_get_stats(s->serve, &st);
    size_t n = atomic_load(&s->nlat);
    if (n > MAX_SAMPLES)
        n = MAX_SAMPLES;
    qsort(s->lat, n, sizeof(int64_t), cmp_i64);
    printf("submitted   %" PRIu64 " requests in %.2f s (%.0f/s offered)\n",
           (uint64_t)atomic_load(&s->submitted), elapsed,
           (double)atomic_load(&s->submitted) / elapsed);
    printf("throughput  %.0f requests/s handed to the model, %" PRIu64 " batches\n",
           (double)st.counts.batched / elapsed, st.batches);
    printf("added latency (submit to batch hand-off), %zu samples:\n", n);
    printf("  p50 %.1f us  p90 %.1f us  p99 %.1f us  p99.9 %.1f us  max %.1f us\n",
           pct(s->lat, n, 50) / 1e3, pct(s->lat, n, 90) / 1e3, pct(s->lat, n, 99) / 1e3,
           pct(s->lat, n, 99.9) / 1e3, n ? (double)s->lat[n - 1] / 1e3 : 0.0);
    printf("batch sizes (size: batches):");
    for (size_t k = 1; k <= s->cfg.max_batch; k++)
        if (s->sizes[k])
            printf(" %zu:%" PRIu64, k, s->sizes[k]);
    printf("\nbatches closed by:");
    for (int r = 0; r < QF_SERVE_CLOSE_REASONS; r++)
        printf(" %s %" PRIu64, reason_name[r], st.batches_by_reason[r]);
    printf("\noutcomes    ok %" PRIu64 "  deadline_exceeded %" PRIu64 "  unavailable %" PRIu64
           "  cancelled %" PRIu64 "\n",
           (uint64_t)atomic_load(&s->outcome[QF_OK]),
           (uint64_t)atomic_load(&s->outcome[QF_DEADLINE_EXCEEDED]),
           (uint64_t)atomic_load(&s->outcome[QF_UNAVAILABLE]),
           (uint64_t)atomic_load(&s->outcome[QF_CANCELLED]));
    printf("drain       %s: admitted %" PRIu64 " = batched %" PRIu64 " + expired %" PRIu64
           " + dropped %" PRIu64 " + cancelled %" PRIu64 " + queued %" PRIu64 "; rejected %" PRIu64
           "; in flight %" PRIu64 "\n",
           drc == QF_OK ? "clean" : qf_code_name(drc), rep->admitted, rep->batched, rep->expired,
           rep->dropped, rep->cancelled, rep->queued, rep->rejected, rep->in_flight);
    qf_serve_policy_stats pst; /* issue 30 */
    if (s->cfg.p99_target_us > 0 && qf_serve_get_policy_stats(s->serve, &pst) == QF_OK)
        printf("adaptive    delay %.1f us  max batch %" PRIu64 "  last window p99 %.1f us  model "
               "%.1f us/batch  windows %" PRIu64 "\n",
               (double)pst.adaptive_delay_ns / 1e3, pst.adaptive_max_batch,
               (double)pst.adaptive_p99_ns / 1e3, (double)pst.adaptive_model_ns / 1e3,
               pst.adaptive_windows);
    if (s->cfg.metrics)
        qf_serve_metrics_write(stdout);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    sim *s = &S;
    int prc = parse(argc, argv, &s->cfg);
    if (prc)
        return prc;
    const config *c = &s->cfg;
    s->lat = malloc(MAX_SAMPLES * sizeof(int64_t));
    s->sizes = calloc(c->max_batch + 1, sizeof(uint64_t));
    if (!s->lat || !s->sizes || qf_coord_new(NULL, 0, &s->coord) != QF_OK)
        return 1;

    qf_serve_options o = {.name = "sim",
                          .max_batch_size = c->max_batch,
                          .max_queue_delay_ns = (int64_t)(c->max_delay_us * 1e3),
                          .priority_levels = c->priorities,
                          .max_queued = c->max_queued,
                          .admission = c->policy,
                          .coord = s->coord,
                          .drain_grace_ns = (int64_t)(c->grace_s * 1e9) + 1,
                          .p99_target_ns = (int64_t)(c->p99_target_us * 1e3)};
    if (qf_serve_new(&o, &s->serve) != QF_OK) {
        fprintf(stderr, "qflow-serve-sim: %s\n", qf_last_message());
        return 2;
    }
    /* SIGTERM and SIGINT stay blocked in every thread, this one and the
     * threads started below (which inherit the mask), and this thread takes
     * them with sigtimedwait() where it waits for the stop. No handler: under
     * ThreadSanitizer a handler runs only once its thread next enters the
     * sanitizer's runtime, which a thread asleep in a futex wait does not,
     * and the SIGTERM test hung 120 s with only the "running" line printed
     * (twice, with the handler on a worker and then on this thread). */
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stops, NULL);

    qf_runtime *rt = NULL;
    s->t_start = qf_now_ns();
    if (c->task_executor) {
        if (qf_runtime_new(&(qf_runtime_options){.workers = -1, .name = "model"}, &rt) != QF_OK ||
            qf_serve_spawn(s->serve, rt, model, s, NULL, NULL) != QF_OK) {
            fprintf(stderr, "qflow-serve-sim: %s\n", qf_last_message());
            return 1;
        }
    } else {
        pthread_t t;
        if (qf_coord_thread_create(s->coord, "model", executor_main, s, &t) != QF_OK)
            return 1;
    }
    handler *hs = calloc((size_t)c->handlers, sizeof(*hs));
    for (int i = 0; i < c->handlers; i++) {
        hs[i] = (handler){s, i};
        pthread_t t;
        if (qf_coord_thread_create(s->coord, "handler", handler_main, &hs[i], &t) != QF_OK)
            return 1;
    }
    printf("serve_sim: running: %d handlers, %.0f requests/s, deadline %.1f ms, max batch %zu, "
           "max delay %.0f us, model %.0f us + %.1f us/item, %s executor%s\n",
           c->handlers, c->rate, c->deadline_ms, c->max_batch, c->max_delay_us, c->batch_cost_us,
           c->item_cost_us, c->task_executor ? "task" : "thread",
           c->duration > 0 ? "" : "; until SIGTERM");
    fflush(stdout);

    /* Wait for the end of the run or a signal; either way the stop runs the
     * batcher's stop action (begin drain) on this thread. */
    qf_deadline end = c->duration > 0 ? s->t_start + (int64_t)(c->duration * 1e9) : QF_FOREVER;
    bool signalled = wait_for_stop(s, &stops, end);
    if (!signalled)
        qf_coord_request_stop(s->coord, NULL);
    int64_t t_stop = qf_now_ns();
    qf_code jrc = qf_coord_join(s->coord, NULL, 0, c->grace_s + 5, false, NULL);
    qf_serve_report rep;
    qf_code drc = qf_serve_drain(s->serve, qf_deadline_in_s(c->grace_s), &rep);
    printf("serve_sim: stopped by %s, drained in %.1f ms\n", signalled ? "signal" : "end of run",
           (double)(qf_now_ns() - t_stop) / 1e6);
    print_results(s, (double)(t_stop - s->t_start) / 1e9, &rep, drc);
    if (rt)
        qf_runtime_free(rt);
    qf_serve_free(s->serve);
    qf_coord_free(s->coord);
    free(hs);
    free(s->lat);
    free(s->sizes);
    if (jrc != QF_OK) {
        fprintf(stderr, "qflow-serve-sim: %s\n", qf_last_message());
        return 1;
    }
    return 0;
}
