/* qf_serve_metrics.c - counters, histograms and the Prometheus text
 * exposition of every live batcher and queue.
 *
 * Live batchers are kept on a list behind a mutex taken when a batcher is
 * created or freed and while metrics are written; a writer therefore never
 * reads a freed batcher. Counters are atomics updated with relaxed RMWs by
 * submitters and consumers, so reading them needs no lock of the batcher.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "qf_queue_metrics.h"
#include "qf_serve-impl.h"

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static qf_serve *reg_head;

void qf__serve_register(qf_serve *s)
{
    pthread_mutex_lock(&reg_mu);
    s->reg_prev = NULL;
    s->reg_next = reg_head;
    if (reg_head)
        reg_head->reg_prev = s;
    reg_head = s;
    pthread_mutex_unlock(&reg_mu);
}

void qf__serve_unregister(qf_serve *s)
{
    pthread_mutex_lock(&reg_mu);
    if (s->reg_prev)
        s->reg_prev->reg_next = s->reg_next;
    else if (reg_head == s)
        reg_head = s->reg_next;
    if (s->reg_next)
        s->reg_next->reg_prev = s->reg_prev;
    s->reg_prev = s->reg_next = NULL;
    pthread_mutex_unlock(&reg_mu);
}

/* Upper bounds in ns, Prometheus-style 1-2.5-5 steps; the last is +Inf. */
static const int64_t delay_bounds[QF_SERVE_DELAY_BUCKETS - 1] = {
    10000,     25000,      50000,      100000,     250000,      500000,    1000000,
    2500000,   5000000,    10000000,   25000000,   50000000,    100000000, 250000000,
    500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

int64_t qf_serve_delay_bucket_bound_ns(size_t i)
{
    return i < QF_SERVE_DELAY_BUCKETS - 1 ? delay_bounds[i] : INT64_MAX;
}

uint64_t qf_serve_size_bucket_bound(size_t i)
{
    return i < QF_SERVE_SIZE_BUCKETS - 1 ? (uint64_t)1 << i : UINT64_MAX;
}

size_t qf__serve_delay_bucket(int64_t ns)
{
    size_t i = 0;
    while (i < QF_SERVE_DELAY_BUCKETS - 1 && ns > delay_bounds[i])
        i++;
    return i;
}

size_t qf__serve_size_bucket(uint64_t n)
{
    size_t i = 0;
    while (i < QF_SERVE_SIZE_BUCKETS - 1 && n > ((uint64_t)1 << i))
        i++;
    return i;
}

static uint64_t ld(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

qf_code qf_serve_get_stats(const qf_serve *s, qf_serve_stats *ret_stats)
{
    if (!s || !ret_stats)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_get_stats: NULL %s",
                            s ? "ret_stats" : "batcher");
    qf_serve_stats st;
    memset(&st, 0, sizeof(st));
    /* Settled outcomes first, admissions last: a snapshot taken while
     * requests move never shows more settled than admitted. */
    st.counts.batched = ld(&s->n_batched);
    st.counts.expired = ld(&s->n_expired);
    st.counts.dropped = ld(&s->n_dropped);
    st.counts.cancelled = ld(&s->n_cancelled);
    st.counts.in_flight = ld(&s->in_flight);
    st.depth = qf_serve_depth(s);
    st.counts.queued = (uint64_t)st.depth;
    st.counts.rejected = ld(&s->n_rejected);
    st.counts.admitted = ld(&s->n_admitted);
    st.completed_ok = ld(&s->n_ok);
    st.completed_error = ld(&s->n_error);
    for (int r = 0; r < QF_SERVE_CLOSE_REASONS; r++) {
        st.batches_by_reason[r] = ld(&s->n_batches[r]);
        st.batches += st.batches_by_reason[r];
    }
    for (int i = 0; i < QF_SERVE_DELAY_BUCKETS; i++)
        st.delay_buckets[i] = ld(&s->delay_hist[i]);
    for (int i = 0; i < QF_SERVE_SIZE_BUCKETS; i++)
        st.size_buckets[i] = ld(&s->size_hist[i]);
    st.delay_sum_ns = atomic_load_explicit(&((qf_serve *)s)->delay_sum, memory_order_relaxed);
    st.delay_max_ns = atomic_load_explicit(&((qf_serve *)s)->delay_max, memory_order_relaxed);
    st.size_max = ld(&s->size_max);
    *ret_stats = st;
    return QF_OK;
}

/* ------------------------------------------------------------ Prometheus */

void qf__serve_put_label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A counter family: OpenMetrics names the family without the _total its
 * samples carry. */
static void counter_family(FILE *f, const char *name, const char *help, bool om)
{
    if (!om) {
        family(f, name, "counter", help);
        return;
    }
    int base = (int)(strlen(name) - strlen("_total"));
    fprintf(f, "# HELP %.*s %s\n# TYPE %.*s counter\n", base, name, help, base, name);
}

static void sample_start(FILE *f, const char *name, const char *suffix, const qf_serve *s)
{
    fprintf(f, "%s%s{batcher=\"", name, suffix);
    qf__serve_put_label(f, s->name);
    fputc('"', f);
}

static void counter(FILE *f, const char *name, const qf_serve *s, const char *key, const char *val,
                    uint64_t v)
{
    sample_start(f, name, "", s);
    fprintf(f, ",%s=\"%s\"} %" PRIu64 "\n", key, val, v);
}

/* A gauge sample in seconds (exact decimal, as the histograms' bounds). */
static void seconds_gauge(FILE *f, const char *name, const qf_serve *s, int64_t ns)
{
    sample_start(f, name, "", s);
    fputs("} ", f);
    qf__serve_put_seconds(f, ns);
    fputc('\n', f);
}

/* What the per-level policies, the cost budget and the adaptive controller
 * did (qf_serve_get_policy_stats()). The per-level depth only for batchers
 * with a level policy (they alone count it); the adaptive gauges only for
 * batchers in adaptive mode. A family none of the batchers has is left
 * out, header and all. */
static void write_policy(FILE *f, bool om)
{
    static const char *const actions[] = {"level_rejected", "timed_out", "demoted", "cost_refused",
                                          "cost_closed_batch"};
    const char *n = "qflow_serve_policy_total";
    counter_family(f, n,
                   "What a serving batcher's policies did: requests refused at a level's "
                   "limit, rejected or demoted by a level timeout, refused for their cost, and "
                   "batches closed by the cost budget.",
                   om);
    bool any_levels = false, any_adaptive = false;
    for (qf_serve *s = reg_head; s; s = s->reg_next) {
        qf_serve_policy_stats st;
        qf_serve_get_policy_stats(s, &st);
        const uint64_t v[] = {st.level_rejected, st.timed_out, st.demoted, st.cost_refused,
                              st.cost_closed};
        for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
            counter(f, n, s, "action", actions[i], v[i]);
        any_levels |= s->lvl != NULL;
        any_adaptive |= s->ad != NULL;
    }
    if (any_levels) {
        n = "qflow_serve_level_depth";
        family(f, n, "gauge",
               "Requests queued at each priority level (batchers with a level policy).");
        for (qf_serve *s = reg_head; s; s = s->reg_next) {
            if (!s->lvl)
                continue;
            qf_serve_policy_stats st;
            qf_serve_get_policy_stats(s, &st);
            for (uint32_t l = 0; l < s->levels; l++) {
                sample_start(f, n, "", s);
                fprintf(f, ",priority=\"%u\"} %" PRId64 "\n", l, st.level_depth[l]);
            }
        }
    }
    if (!any_adaptive)
        return;
    static const char *const gauges[] = {"qflow_serve_adaptive_delay_seconds",
                                         "qflow_serve_adaptive_max_batch",
                                         "qflow_serve_adaptive_p99_seconds"};
    static const char *const helps[] = {
        "Batching delay the adaptive controller has in force.",
        "Batch size cap the adaptive controller has in force.",
        "Windowed p99 latency the adaptive controller last judged."};
    for (int g = 0; g < 3; g++) {
        family(f, gauges[g], "gauge", helps[g]);
        if (om && g != 1)
            fprintf(f, "# UNIT %s seconds\n", gauges[g]);
        for (qf_serve *s = reg_head; s; s = s->reg_next) {
            if (!s->ad)
                continue;
            qf_serve_policy_stats st;
            qf_serve_get_policy_stats(s, &st);
            if (g == 0) {
                seconds_gauge(f, gauges[g], s, st.adaptive_delay_ns);
            } else if (g == 1) {
                sample_start(f, gauges[g], "", s);
                fprintf(f, "} %" PRIu64 "\n", st.adaptive_max_batch);
            } else {
                seconds_gauge(f, gauges[g], s, st.adaptive_p99_ns);
            }
        }
    }
}

static void write_batchers(FILE *f, bool om)
{
    static const char *const reasons[QF_SERVE_CLOSE_REASONS] = {"full", "delay", "preferred",
                                                                "drain"};
    const char *n;

    n = "qflow_serve_requests_total";
    counter_family(f, n, "Requests seen by a serving batcher, by outcome.", om);
    for (qf_serve *s = reg_head; s; s = s->reg_next) {
        qf_serve_stats st;
        qf_serve_get_stats(s, &st);
        counter(f, n, s, "outcome", "admitted", st.counts.admitted);
        counter(f, n, s, "outcome", "rejected", st.counts.rejected);
        counter(f, n, s, "outcome", "batched", st.counts.batched);
        counter(f, n, s, "outcome", "expired", st.counts.expired);
        counter(f, n, s, "outcome", "dropped", st.counts.dropped);
        counter(f, n, s, "outcome", "cancelled", st.counts.cancelled);
        counter(f, n, s, "outcome", "completed_ok", st.completed_ok);
        counter(f, n, s, "outcome", "completed_error", st.completed_error);
    }
    n = "qflow_serve_batches_total";
    counter_family(f, n, "Batches handed to the model, by why they closed.", om);
    for (qf_serve *s = reg_head; s; s = s->reg_next)
        for (int r = 0; r < QF_SERVE_CLOSE_REASONS; r++)
            counter(f, n, s, "reason", reasons[r], ld(&s->n_batches[r]));
    n = "qflow_serve_queue_depth";
    family(f, n, "gauge", "Requests queued in a serving batcher (admitted, not yet handed out).");
    for (qf_serve *s = reg_head; s; s = s->reg_next) {
        sample_start(f, n, "", s);
        fprintf(f, "} %" PRId64 "\n", qf_serve_depth(s));
    }
    n = "qflow_serve_in_flight";
    family(f, n, "gauge", "Requests handed to the model and not yet completed.");
    for (qf_serve *s = reg_head; s; s = s->reg_next) {
        sample_start(f, n, "", s);
        fprintf(f, "} %" PRIu64 "\n", ld(&s->in_flight));
    }

    write_policy(f, om);
    qf__serve_write_hists(f, reg_head, om);

    n = "qflow_serve_batch_size";
    family(f, n, "histogram", "Requests per batch handed to the model.");
    for (qf_serve *s = reg_head; s; s = s->reg_next) {
        qf_serve_stats st;
        qf_serve_get_stats(s, &st);
        uint64_t cum = 0;
        /* Buckets up to the first bound holding max_batch_size; larger
         * ones would always equal +Inf. */
        for (size_t i = 0; i < QF_SERVE_SIZE_BUCKETS; i++) {
            cum += st.size_buckets[i];
            bool last = i == QF_SERVE_SIZE_BUCKETS - 1;
            if (!last && ((uint64_t)1 << i) >= 2 * s->max_batch)
                continue;
            sample_start(f, n, "_bucket", s);
            if (!last)
                fprintf(f, ",le=\"%" PRIu64 "\"} %" PRIu64 "\n", (uint64_t)1 << i, cum);
            else
                fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
        }
        sample_start(f, n, "_sum", s);
        fprintf(f, "} %" PRIu64 "\n", st.counts.batched);
        sample_start(f, n, "_count", s);
        fprintf(f, "} %" PRIu64 "\n", cum);
    }
}

typedef struct qwrite {
    FILE *f;
    int what; /* 0 size, 1 capacity, 2 closed */
} qwrite;

static void queue_sample(qf_queue *q, void *arg)
{
    qwrite *w = arg;
    static const char *const names[] = {"qflow_queue_size", "qflow_queue_capacity",
                                        "qflow_queue_closed"};
    fprintf(w->f, "%s{queue=\"", names[w->what]);
    qf__serve_put_label(w->f, qf_queue_name(q));
    fprintf(w->f, "\",kind=\"%s\"} ", qf_queue_kind_name(q));
    if (w->what == 0)
        fprintf(w->f, "%" PRId64 "\n", qf_queue_size(q));
    else if (w->what == 1)
        fprintf(w->f, "%" PRId64 "\n", qf_queue_capacity(q));
    else
        fprintf(w->f, "%d\n", qf_queue_is_closed(q) ? 1 : 0);
}

static void write_queues(FILE *f)
{
    family(f, "qflow_queue_size", "gauge", "Elements a dequeue could take now, per live queue.");
    qf_queue_foreach_live(queue_sample, &(qwrite){f, 0});
    family(f, "qflow_queue_capacity", "gauge",
           "Capacity of each live queue (2147483647 when unbounded).");
    qf_queue_foreach_live(queue_sample, &(qwrite){f, 1});
    family(f, "qflow_queue_closed", "gauge", "1 when the queue has been closed.");
    qf_queue_foreach_live(queue_sample, &(qwrite){f, 2});
}

static qf_code write_all(FILE *f, bool om, const char *fn)
{
    if (!f)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: NULL file", fn);
    pthread_mutex_lock(&reg_mu);
    write_batchers(f, om);
    pthread_mutex_unlock(&reg_mu);
    write_queues(f);
    if (om)
        fputs("# EOF\n", f);
    if (fflush(f) != 0 || ferror(f))
        return qf_set_error(QF_INTERNAL, "%s: writing failed", fn);
    return QF_OK;
}

qf_code qf_serve_metrics_write(FILE *f)
{
    return write_all(f, false, "qf_serve_metrics_write");
}

qf_code qf_serve_metrics_write_openmetrics(FILE *f)
{
    return write_all(f, true, "qf_serve_metrics_write_openmetrics");
}

qf_code qf_serve_metrics_text(char **ret_text, size_t *ret_len)
{
    if (!ret_text)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_metrics_text: NULL ret_text");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_serve_metrics_text: out of memory");
    qf_code rc = qf_serve_metrics_write(f);
    if (fclose(f) != 0 && rc == QF_OK)
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_serve_metrics_text: out of memory");
    if (rc != QF_OK) {
        free(buf);
        return rc;
    }
    *ret_text = buf;
    if (ret_len)
        *ret_len = len;
    return QF_OK;
}
