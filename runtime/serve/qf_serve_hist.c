/* qf_serve_hist.c - the time histograms kept per priority level (queue
 * delay, model time, end-to-end latency; issue 30): their buckets, where
 * they are fed, and their text exposition.
 *
 * Each histogram is levels x (buckets + 1) relaxed atomic counters and a
 * sum per level, allocated when the batcher is made; an observation is a
 * binary search over the bounds and two relaxed adds, so feeding them from
 * the hand-out path costs no lock.
 *
 * Where the observations come from: the queue delay when a request is
 * handed out (qf_serve_batch.c); the model time when its batch is completed
 * or posted (hand-off to the model's end); the end-to-end latency when a
 * request the model ran is answered. The model time runs from the
 * request's hand-off time (qf__hand_ns, set by hand_out()).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qf_serve-impl.h"
#include "qf_status-impl.h"

static const char *const kind_field[QF_SERVE_HIST_KINDS] = {"delay_buckets_ns", "model_buckets_ns",
                                                            "latency_buckets_ns"};

static qf_code check_bounds(const char *nm, const char *field, const int64_t *b, size_t n)
{
    if (n > 0 && !b)
        return qf_set_error(QF_INVALID_ARGUMENT, "batcher '%s': %s is NULL with %zu buckets", nm,
                            field, n);
    if (n > QF_SERVE_MAX_TIME_BUCKETS)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': %s has %zu buckets, at most %d (QF_SERVE_MAX_TIME_"
                            "BUCKETS; +Inf is added)",
                            nm, field, n, QF_SERVE_MAX_TIME_BUCKETS);
    for (size_t i = 0; i < n; i++) {
        if (b[i] <= 0 || b[i] == INT64_MAX)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "batcher '%s': %s[%zu] = %lld must be > 0 and finite", nm, field, i,
                                (long long)b[i]);
        if (i > 0 && b[i] <= b[i - 1])
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "batcher '%s': %s must be strictly increasing ([%zu] = %lld after "
                                "%lld)",
                                nm, field, i, (long long)b[i], (long long)b[i - 1]);
    }
    return QF_OK;
}

qf_code qf__serve_hist_init(qf_serve *s, const qf_serve_options *o)
{
    const int64_t *given[QF_SERVE_HIST_KINDS] = {o->delay_buckets_ns, o->model_buckets_ns,
                                                 o->latency_buckets_ns};
    size_t num[QF_SERVE_HIST_KINDS] = {o->num_delay_buckets, o->num_model_buckets,
                                       o->num_latency_buckets};
    const char *nm = o->name ? o->name : "batcher";
    for (int k = 0; k < QF_SERVE_HIST_KINDS; k++) {
        qf_code rc = check_bounds(nm, kind_field[k], given[k], num[k]);
        if (rc != QF_OK)
            return rc;
    }
    for (int k = 0; k < QF_SERVE_HIST_KINDS; k++) {
        qf__serve_hist *h = &s->hist[k];
        h->nb = num[k] ? num[k] : QF_SERVE_DELAY_BUCKETS - 1;
        h->bounds = malloc(h->nb * sizeof(int64_t));
        h->counts = calloc((size_t)s->levels * (h->nb + 1), sizeof(*h->counts));
        h->sums = calloc(s->levels, sizeof(*h->sums));
        if (!h->bounds || !h->counts || !h->sums)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a batcher");
        for (size_t i = 0; i < h->nb; i++)
            h->bounds[i] = num[k] ? given[k][i] : qf_serve_delay_bucket_bound_ns(i);
    }
    return QF_OK;
}

void qf__serve_hist_free(qf_serve *s)
{
    for (int k = 0; k < QF_SERVE_HIST_KINDS; k++) {
        free(s->hist[k].bounds);
        free(s->hist[k].counts);
        free(s->hist[k].sums);
    }
}

void qf__serve_hist_add(qf_serve *s, qf_serve_hist_kind k, uint32_t level, int64_t ns)
{
    qf__serve_hist *h = &s->hist[k];
    if (ns < 0)
        ns = 0;
    size_t lo = 0, hi = h->nb; /* the first bound >= ns, or nb (+Inf) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (h->bounds[mid] < ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    atomic_fetch_add_explicit(&h->counts[(size_t)level * (h->nb + 1) + lo], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sums[level], ns, memory_order_relaxed);
}

qf_code qf_serve_get_histogram(const qf_serve *s, qf_serve_hist_kind kind, uint32_t level,
                               qf_serve_histogram *ret_hist)
{
    if (!s || !ret_hist)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_get_histogram: NULL %s",
                            s ? "ret_hist" : "batcher");
    if ((int)kind < 0 || (int)kind >= QF_SERVE_HIST_KINDS)
        return qf_set_error(QF_INVALID_ARGUMENT, "batcher '%s': unknown histogram kind %d", s->name,
                            (int)kind);
    if (level != QF_SERVE_ALL_LEVELS && level >= s->levels)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': level %u out of range [0, %u) (or QF_SERVE_ALL_LEVELS)",
                            s->name, level, s->levels);
    const qf__serve_hist *h = &s->hist[kind];
    qf_serve_histogram out;
    memset(&out, 0, sizeof(out));
    out.num_buckets = h->nb + 1;
    memcpy(out.bounds_ns, h->bounds, h->nb * sizeof(int64_t));
    out.bounds_ns[h->nb] = INT64_MAX;
    uint32_t first = level == QF_SERVE_ALL_LEVELS ? 0 : level;
    uint32_t end = level == QF_SERVE_ALL_LEVELS ? s->levels : level + 1;
    for (uint32_t l = first; l < end; l++) {
        for (size_t i = 0; i <= h->nb; i++) {
            uint64_t c =
                atomic_load_explicit(&h->counts[(size_t)l * (h->nb + 1) + i], memory_order_relaxed);
            out.counts[i] += c;
            out.count += c;
        }
        out.sum_ns += atomic_load_explicit(&h->sums[l], memory_order_relaxed);
    }
    *ret_hist = out;
    return QF_OK;
}

/* ns as seconds in exact decimal ("0.00025", "2", "1.5"): no rounding, so
 * configured bounds 1 ns apart stay apart, and no exponent. */
void qf__serve_put_seconds(FILE *f, int64_t ns)
{
    if (ns < 0) {
        fputc('-', f);
        ns = ns == INT64_MIN ? INT64_MAX : -ns;
    }
    char frac[10];
    snprintf(frac, sizeof(frac), "%09" PRId64, ns % 1000000000);
    int len = 9;
    while (len > 0 && frac[len - 1] == '0')
        len--;
    frac[len] = '\0';
    fprintf(f, "%" PRId64 "%s%s", ns / 1000000000, len ? "." : "", frac);
}

static void sample(FILE *f, const char *name, const char *suffix, const qf_serve *s, uint32_t l)
{
    fprintf(f, "%s%s{batcher=\"", name, suffix);
    qf__serve_put_label(f, s->name);
    fprintf(f, "\",priority=\"%u\"", l);
}

void qf__serve_write_hists(FILE *f, qf_serve *head, bool openmetrics)
{
    static const char *const names[QF_SERVE_HIST_KINDS] = {"qflow_serve_queue_delay_seconds",
                                                           "qflow_serve_model_seconds",
                                                           "qflow_serve_latency_seconds"};
    static const char *const helps[QF_SERVE_HIST_KINDS] = {
        "Time from admission to batch hand-off, by priority level.",
        "Time from batch hand-off to its completion (the model's time), by priority level.",
        "Time from admission to the answer of requests the model ran, by priority level."};
    for (int k = 0; k < QF_SERVE_HIST_KINDS; k++) {
        const char *n = names[k];
        fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", n, helps[k], n);
        if (openmetrics)
            fprintf(f, "# UNIT %s seconds\n", n);
        for (qf_serve *s = head; s; s = s->reg_next) {
            for (uint32_t l = 0; l < s->levels; l++) {
                qf_serve_histogram h;
                qf_serve_get_histogram(s, (qf_serve_hist_kind)k, l, &h);
                uint64_t cum = 0;
                for (size_t i = 0; i < h.num_buckets; i++) {
                    cum += h.counts[i];
                    sample(f, n, "_bucket", s, l);
                    fputs(",le=\"", f);
                    if (i + 1 < h.num_buckets)
                        qf__serve_put_seconds(f, h.bounds_ns[i]);
                    else
                        fputs("+Inf", f);
                    fprintf(f, "\"} %" PRIu64 "\n", cum);
                }
                sample(f, n, "_sum", s, l);
                fputs("} ", f);
                qf__serve_put_seconds(f, h.sum_ns);
                fputc('\n', f);
                sample(f, n, "_count", s, l);
                fprintf(f, "} %" PRIu64 "\n", cum);
            }
        }
    }
}
