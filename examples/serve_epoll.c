/* serve_epoll.c - a serving batcher inside a program's own epoll loop, with
 * the model on threads of its own. The loop submits requests (here paced by
 * a timerfd at exact times, as a network would bring them), model threads
 * take batches and post their results, and the loop, woken by the
 * batcher's completion fd, collects them: every request's callback runs on
 * the loop's thread, next to its sockets. Once all are sent the loop ends
 * the input: the last partial batch goes out at once and the model threads
 * see the end. `serve_epoll N RATE` sends N requests at RATE per second. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <qflow/qflow.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != QF_OK) {                                                                     \
            fprintf(stderr, "%s: %s\n", #call, qf_last_message());                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct query {
    qf_serve_request req; /* first: a request pointer is a query pointer */
    uint64_t x, y;        /* the model computes y = 2x */
} query;

typedef struct tally {
    uint64_t answered, failed, sum;
} tally;

/* The completion: on the loop's thread (qf_serve_collect runs it). */
static void on_answer(qf_serve_request *req, qf_code status, void *arg)
{
    tally *t = arg;
    query *q = (query *)req;
    t->answered++;
    if (status != QF_OK || q->y != 2 * q->x)
        t->failed++;
    t->sum += q->y;
}

/* A model thread: batches in, results posted back to the loop. */
static void *model(void *arg)
{
    qf_serve *s = arg;
    qf_serve_request *batch[32];
    size_t n;
    qf_code rc;
    /* Take each batch at its close time on a busy machine too (a short
     * slice and timer slack, as qf_serve_run() gives its own thread; before
     * Linux 6.12 the timer slack only). */
    (void)qf_thread_prefer_latency(QF_SERVE_DEFAULT_EXEC_SLICE_NS, NULL);
    while ((rc = qf_serve_next_batch(s, batch, &n)) == QF_OK) {
        for (size_t i = 0; i < n; i++) {
            query *q = (query *)batch[i];
            q->y = 2 * q->x; /* the inference */
        }
        CHECK(qf_serve_post_complete(s, batch, n, QF_OK)); /* wakes the loop */
    }
    if (rc != QF_OUT_OF_RANGE) /* OUT_OF_RANGE: the input ended, all served */
        fprintf(stderr, "model: %s\n", qf_last_message());
    return NULL;
}

static void watch(int ep, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        exit(1);
}

/* Arm the timerfd at an absolute CLOCK_MONOTONIC time in ns (qflow's
 * clock): exact, where an epoll_wait timeout would round to milliseconds. */
static void arm(int tfd, int64_t at_ns)
{
    struct itimerspec at = {.it_value = {at_ns / 1000000000, at_ns % 1000000000}};
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &at, NULL) != 0)
        exit(1);
}

int main(int argc, char **argv)
{
    size_t total = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
    double rate = argc > 2 ? strtod(argv[2], NULL) : 10000;
    query *qs = calloc(total ? total : 1, sizeof(*qs));
    qf_serve *s;
    CHECK(qf_serve_new(
        &(qf_serve_options){.name = "epoll", .max_batch_size = 32, .max_queue_delay_ns = 500000},
        &s));
    pthread_t models[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&models[i], NULL, model, s);

    int done_fd, ep = epoll_create1(EPOLL_CLOEXEC);
    int tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    CHECK(qf_serve_completion_fd(s, &done_fd)); /* owned by the batcher */
    watch(ep, done_fd);
    watch(ep, tick_fd);

    tally t = {0, 0, 0};
    size_t sent = 0;
    int64_t t0 = qf_now_ns(), interval = (int64_t)(1e9 / rate);
    arm(tick_fd, t0);
    if (total == 0)
        CHECK(qf_serve_end_input(s));
    while (t.answered < total) {
        struct epoll_event ev[2];
        int n = epoll_wait(ep, ev, 2, -1);
        if (n < 0 && errno != EINTR)
            exit(1);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == done_fd) {
                CHECK(qf_serve_collect(s, 0, NULL)); /* runs on_answer here */
                continue;
            }
            uint64_t ticks;
            if (read(tick_fd, &ticks, sizeof(ticks)) < 0)
                continue;
            /* Send what is due, then sleep until the next one is. */
            int64_t now = qf_now_ns();
            for (; sent < total && t0 + (int64_t)sent * interval <= now; sent++) {
                query *q = &qs[sent];
                q->x = sent + 1;
                qf_serve_request_init(&q->req, q, QF_FOREVER, 0, on_answer, &t);
                CHECK(qf_serve_try_submit(s, &q->req));
            }
            if (sent < total)
                arm(tick_fd, t0 + (int64_t)sent * interval);
            else
                CHECK(qf_serve_end_input(s)); /* no more requests */
        }
    }
    for (int i = 0; i < 2; i++)
        pthread_join(models[i], NULL);
    qf_serve_stats st;
    CHECK(qf_serve_get_stats(s, &st));
    printf("served %llu of %zu, %llu failed, sum %llu, %llu batches\n",
           (unsigned long long)t.answered, total, (unsigned long long)t.failed,
           (unsigned long long)t.sum, (unsigned long long)st.batches);
    close(tick_fd);
    close(ep);
    qf_serve_free(s); /* closes done_fd */
    free(qs);
    return t.failed == 0 && t.answered == total ? 0 : 1;
}
