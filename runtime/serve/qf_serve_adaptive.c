/* qf_serve_adaptive.c - adaptive mode: the batcher picks its own batching
 * delay and batch size cap to keep p99 latency under a target (issue 30).
 *
 * What is measured. Every qf_serve_complete() of a batch gives
 *   - each request's latency, admission to completion: into a histogram of
 *     the current window (linear buckets of target/32 up to 4 x target, and
 *     one beyond), from which the window's p99 is read;
 *   - the model time of the batch (hand-out to completion) against its
 *     size: into exponentially forgetting least-squares sums (factor 0.99
 *     per batch, a memory of about a hundred batches), giving the fit
 *     t(b) = a + c*b; a sample over four times the last fit counts as four
 *     times it (a preempted executor must not tilt the slope);
 *   - the admissions per second of the window (the load) and the depth at
 *     its end (a backlog of more than two batches sets the cap back to
 *     max_batch_size: only big batches drain it).
 *
 * What is decided, once a window is over (>= 50 ms and >= 200
 * completions, or 1 s whatever the count; the first window, which holds
 * the start, is not judged), by the consumer that forms the
 * next batch (under the consumer mutex, so delay and cap change between
 * batches, never inside a decision):
 *
 *   AIMD with a dead band (Clipper's additive increase, multiplicative
 *   decrease, applied to both knobs):
 *     p99 > 0.8 x target   delay /= 2, and cap_aimd *= 0.9 when the model
 *                          time at the cap is over half the target
 *                          and no backlog of a batch is queued (back off
 *                          fast)
 *     p99 < 0.6 x target   cap_aimd += 1, and delay += target/40 when the
 *                          model was busy more than half the window (bigger
 *                          batches only pay when the model is the
 *                          bottleneck), delay -= target/40 otherwise
 *     otherwise            hold
 *   then bounds from the fit, so one window's step never needs a violation
 *   to find the limit:
 *     cap   <= the largest b with t(b) <= target/2 (a batch in the model
 *              leaves room for the queueing before it);
 *     cap   >= the smallest b whose per-request model time keeps the model
 *              under 50% busy at the arrival rate, a*load / (0.5 - c*load):
 *              a cap below that would make the queue grow without bound
 *              (half, not all: the fit is noisy on a loaded machine, and a
 *              cap cut on noise costs throughput, which costs latency),
 *              so it wins over the cap from the target (when the two cross
 *              the model cannot meet the target at that load at all);
 *     delay <= target - 2 t(cap) - target/10: a request may wait for the
 *              batch in service, then for its own batch to fill, then ride
 *              it; the tenth is slack for scheduling noise;
 *     delay <= min(max_queue_delay_ns, target).
 *
 * Why delay and not only the cap: under light load a batch closes by its
 * delay, so the delay is what trades latency for batching there; under
 * heavy load batches fill while the model runs (natural batching) and the
 * cap is what bounds the model time. The controller starts at delay 0 and
 * the full cap, which is safe at any load, and grows the delay only while
 * the measured p99 has room and the model is busy more than half the time
 * (at light load the best delay is none: a batch of one costs the model
 * little, and every microsecond of delay is added to every request).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qf_lock-impl.h"
#include "qf_serve-impl.h"
#include "qf_status-impl.h"

#define AD_BUCKETS 128
#define AD_FORGET 0.99
#define AD_WINDOW_NS 50000000LL
#define AD_WINDOW_MAX_NS 1000000000LL
#define AD_WINDOW_MIN_COUNT 200

struct qf__serve_adapt {
    int64_t target;
    int64_t max_delay;
    size_t max_cap;
    int64_t width; /* histogram bucket width */

    /* Fed by completions, under `lock`. */
    _Alignas(64) _Atomic uint32_t lock;
    double w, sx, sy, sxx, sxy;
    uint64_t hist[AD_BUCKETS + 1];
    uint64_t count;
    double busy;   /* model time in the window, ns */
    double fa, fc; /* the last fit, to clip outliers; fc < 0: none yet */

    /* The controller, under the batcher's consumer mutex. */
    _Alignas(64) int64_t window_start;
    double delay;
    double cap_aimd;
    uint64_t admitted; /* n_admitted at the window's start: the load */
    bool warmed;       /* the first window was skipped */

    /* For qf_serve_get_policy_stats(). */
    _Atomic int64_t st_delay;
    _Atomic uint64_t st_cap;
    _Atomic int64_t st_p99;
    _Atomic int64_t st_model;
    _Atomic uint64_t st_windows;
};

qf_code qf__serve_adapt_init(qf_serve *s, const qf_serve_options *o)
{
    if (o->p99_target_ns <= 0)
        return QF_OK;
    struct qf__serve_adapt *ad = aligned_alloc(64, (sizeof(*ad) + 63) & ~(size_t)63);
    if (!ad)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a batcher");
    memset(ad, 0, sizeof(*ad));
    ad->target = o->p99_target_ns;
    int64_t md = o->max_queue_delay_ns > 0 ? o->max_queue_delay_ns : ad->target;
    ad->max_delay = md < ad->target ? md : ad->target;
    ad->max_cap = s->max_batch;
    ad->width = ad->target / 32 > 0 ? ad->target / 32 : 1;
    atomic_init(&ad->lock, 0);
    ad->window_start = qf_now_ns();
    ad->delay = 0;
    ad->cap_aimd = (double)s->max_batch;
    ad->admitted = 0;
    ad->warmed = false;
    ad->fc = -1;
    atomic_init(&ad->st_delay, 0);
    atomic_init(&ad->st_cap, s->max_batch);
    atomic_init(&ad->st_p99, 0);
    atomic_init(&ad->st_model, 0);
    atomic_init(&ad->st_windows, 0);
    s->ad = ad;
    s->delay_ns = 0;
    s->cap = s->max_batch;
    return QF_OK;
}

void qf__serve_adapt_destroy(qf_serve *s)
{
    free(s->ad);
    s->ad = NULL;
}

void qf__serve_adapt_record(qf_serve *s, qf_serve_request *const *reqs, size_t n)
{
    struct qf__serve_adapt *ad = s->ad;
    if (!ad || n == 0)
        return;
    int64_t now = qf_now_ns();
    double mt = (double)(now - reqs[0]->qf__hand_ns);
    qf__lock(&ad->lock);
    double x = (double)n;
    /* A batch whose executor was preempted (a loaded machine) can take ten
     * times its model time; one such sample would tilt the slope for a
     * hundred batches. Past four times the fit, it counts as four times. */
    if (ad->fc >= 0 && mt > 4 * (ad->fa + ad->fc * x) + 1000)
        mt = 4 * (ad->fa + ad->fc * x) + 1000;
    ad->w = ad->w * AD_FORGET + 1;
    ad->sx = ad->sx * AD_FORGET + x;
    ad->sy = ad->sy * AD_FORGET + mt;
    ad->sxx = ad->sxx * AD_FORGET + x * x;
    ad->sxy = ad->sxy * AD_FORGET + x * mt;
    for (size_t i = 0; i < n; i++) {
        int64_t lat = now - reqs[i]->qf__admit_ns;
        uint64_t b = lat <= 0 ? 0 : (uint64_t)(lat / ad->width);
        ad->hist[b > AD_BUCKETS ? AD_BUCKETS : b]++;
    }
    ad->count += n;
    ad->busy += mt;
    qf__unlock(&ad->lock);
}

/* The p99 of the window's histogram: the upper bound of the bucket holding
 * the nearest-rank 99th percentile (4 x target and beyond: 8 x target). */
static int64_t window_p99(const struct qf__serve_adapt *ad)
{
    uint64_t rank = (ad->count * 99 + 99) / 100, seen = 0;
    for (size_t b = 0; b <= AD_BUCKETS; b++) {
        seen += ad->hist[b];
        if (seen >= rank)
            return b == AD_BUCKETS ? 8 * ad->target : (int64_t)(b + 1) * ad->width;
    }
    return 8 * ad->target;
}

void qf__serve_adapt_tick(qf_serve *s, int64_t now)
{
    QF__ASSERT_HELD(&s->lock);
    struct qf__serve_adapt *ad = s->ad;
    int64_t span = now - ad->window_start;
    if (span < AD_WINDOW_NS)
        return;
    qf__lock(&ad->lock);
    if (ad->count < AD_WINDOW_MIN_COUNT && span < AD_WINDOW_MAX_NS) {
        qf__unlock(&ad->lock);
        return;
    }
    uint64_t count = ad->count;
    int64_t p99 = count ? window_p99(ad) : 0;
    memset(ad->hist, 0, sizeof(ad->hist));
    ad->count = 0;
    double util = ad->busy / (double)span; /* the model's busy fraction */
    ad->busy = 0;
    double a = 0, c = 0;
    bool fitted = ad->w > 0;
    if (fitted) {
        double mx = ad->sx / ad->w, my = ad->sy / ad->w;
        double var = ad->sxx / ad->w - mx * mx;
        double cov = ad->sxy / ad->w - mx * my;
        /* One batch size only (light load: all singletons): no slope can
         * be told; take the mean as a fixed cost. */
        c = var > 0.25 ? cov / var : 0;
        if (c < 0)
            c = 0;
        a = my - c * mx;
        if (a < 0)
            a = 0;
        ad->fa = a;
        ad->fc = c;
    }
    qf__unlock(&ad->lock);
    ad->window_start = now;
    if (atomic_load_explicit(&ad->st_windows, memory_order_relaxed) == 0 && ad->delay == 0 &&
        ad->admitted == 0 && !ad->warmed) {
        /* The first window holds the start (threads waking for the first
         * time, pages touched for the first time): it is not judged. */
        ad->warmed = true;
        ad->admitted = atomic_load_explicit(&s->n_admitted, memory_order_relaxed);
        return;
    }
    double target = (double)ad->target;
    /* The load is what arrives, not what completes: when the model falls
     * behind, completions measure the model, and a cap sized from them
     * would keep it behind. */
    uint64_t adm = atomic_load_explicit(&s->n_admitted, memory_order_relaxed);
    double load = (double)(adm - ad->admitted) * 1e9 / (double)span; /* per s */
    ad->admitted = adm;
    int64_t depth = (int64_t)(atomic_load_explicit(&s->adm, memory_order_relaxed) & QF__ADM_DEPTH);

    if (count) {
        if ((double)p99 > 0.8 * target) {
            ad->delay /= 2;
            /* A smaller batch only helps when its model time is a large
             * part of the target (Clipper's case); when the latency comes
             * from queueing, smaller batches would only queue more. */
            if (fitted && a + c * floor(ad->cap_aimd) > target / 2 && depth < (int64_t)ad->cap_aimd)
                ad->cap_aimd *= 0.9;
        } else if ((double)p99 < 0.6 * target) {
            /* Waiting longer buys bigger batches, which only pay when the
             * model is the bottleneck; an idle model gains nothing from
             * them, so the delay walks back down instead. */
            if (util > 0.5)
                ad->delay += target / 40;
            else
                ad->delay -= target / 40;
            ad->cap_aimd += 1;
        }
    }
    double max_cap = (double)ad->max_cap;
    /* A backlog of more than two full batches: drain it in the largest
     * batches allowed. */
    if (depth > 2 * (int64_t)floor(ad->cap_aimd))
        ad->cap_aimd = max_cap;
    if (ad->cap_aimd > max_cap)
        ad->cap_aimd = max_cap;
    if (ad->cap_aimd < 1)
        ad->cap_aimd = 1;
    double cap = floor(ad->cap_aimd);
    if (fitted) {
        double fit_cap = c > 0 ? floor((target / 2 - a) / c) : (a <= target / 2 ? max_cap : 1);
        if (cap > fit_cap)
            cap = fit_cap;
        /* Seconds of model time per second at this load, per request, must
         * stay below 0.8: a/b + c <= 0.8/load. */
        double room = 0.5 - c * 1e-9 * load;
        double floor_cap = room > 0 ? ceil(a * 1e-9 * load / room) : max_cap;
        if (cap < floor_cap)
            cap = floor_cap;
    }
    if (cap > max_cap)
        cap = max_cap;
    if (cap < 1)
        cap = 1;
    double t_cap = a + c * cap;
    double dmax = target - 2 * t_cap - target / 10;
    if (dmax > (double)ad->max_delay)
        dmax = (double)ad->max_delay;
    if (dmax < 0)
        dmax = 0;
    if (ad->delay > dmax)
        ad->delay = dmax;
    if (ad->delay < 0)
        ad->delay = 0;
    s->delay_ns = (int64_t)ad->delay;
    s->cap = (size_t)cap;
    atomic_store_explicit(&ad->st_delay, s->delay_ns, memory_order_relaxed);
    atomic_store_explicit(&ad->st_cap, (uint64_t)s->cap, memory_order_relaxed);
    atomic_store_explicit(&ad->st_p99, p99, memory_order_relaxed);
    atomic_store_explicit(&ad->st_model, (int64_t)t_cap, memory_order_relaxed);
    atomic_fetch_add_explicit(&ad->st_windows, 1, memory_order_relaxed);
}

void qf__serve_adapt_stats(const qf_serve *s, qf_serve_policy_stats *st)
{
    struct qf__serve_adapt *ad = s->ad;
    if (!ad)
        return;
    st->adaptive_delay_ns = atomic_load_explicit(&ad->st_delay, memory_order_relaxed);
    st->adaptive_max_batch = atomic_load_explicit(&ad->st_cap, memory_order_relaxed);
    st->adaptive_p99_ns = atomic_load_explicit(&ad->st_p99, memory_order_relaxed);
    st->adaptive_model_ns = atomic_load_explicit(&ad->st_model, memory_order_relaxed);
    st->adaptive_windows = atomic_load_explicit(&ad->st_windows, memory_order_relaxed);
}
