/* bench_serve_fd.c - qflow's batcher with the model on a thread of its own
 * and completions through the batcher's fd (issue 30), behind the serving
 * benchmark's interface: the benchmark's model thread takes batches
 * (qf_serve_next_batch) and posts them (qf_serve_post_complete); a loop
 * thread waits in epoll on the completion fd and collects, so every
 * answer (its callback) runs on the loop thread, as in an event-loop
 * server. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"
#include "bench_serve.h"

typedef struct fb {
    qf_serve *s;
    int ep, done_fd, stop_fd;
    pthread_t loop;
} fb;

static void on_done(qf_serve_request *req, qf_code st, void *arg)
{
    (void)arg;
    sv_item *it = (sv_item *)req;
    it->t_answer = (int64_t)bench_now_ns();
    it->status = (int)st;
}

static void *loop(void *a)
{
    fb *b = a;
    for (;;) {
        struct epoll_event ev[2];
        int n = epoll_wait(b->ep, ev, 2, -1);
        if (n < 0 && errno != EINTR)
            bench_fail("epoll_wait failed");
        for (int i = 0; i < n; i++) {
            if (qf_serve_collect(b->s, 0, NULL) != QF_OK)
                bench_fail("qf_serve_collect: %s", qf_last_message());
            if (ev[i].data.fd == b->stop_fd)
                return NULL; /* the model is done: the collect above took the last */
        }
    }
}

static void watch(int ep, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        bench_fail("epoll_ctl failed");
}

static void *f_create(size_t max_batch, int64_t delay_ns)
{
    fb *b = calloc(1, sizeof(*b));
    qf_serve_options o = {
        .name = "bench_fd", .max_batch_size = max_batch, .max_queue_delay_ns = delay_ns};
    if (!b || qf_serve_new(&o, &b->s) != QF_OK ||
        qf_serve_completion_fd(b->s, &b->done_fd) != QF_OK)
        bench_fail("qf_serve_new: %s", qf_last_message());
    b->ep = epoll_create1(EPOLL_CLOEXEC);
    b->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (b->ep < 0 || b->stop_fd < 0)
        bench_fail("epoll_create1 or eventfd failed");
    watch(b->ep, b->done_fd);
    watch(b->ep, b->stop_fd);
    if (pthread_create(&b->loop, NULL, loop, b) != 0)
        bench_fail("pthread_create failed");
    return b;
}

static void f_submit(void *vb, sv_item *it)
{
    fb *b = vb;
    qf_serve_request_init(&it->req, it, it->deadline, 0, on_done, NULL);
    qf_code rc = qf_serve_submit(b->s, &it->req);
    if (rc != QF_OK && rc != QF_DEADLINE_EXCEEDED)
        bench_fail("qf_serve_submit: %s", qf_last_message());
}

/* The model thread: batches in, results posted to the loop. */
static void f_run(void *vb, sv_model_fn model, void *arg)
{
    fb *b = vb;
    size_t cap = qf_serve_max_batch_size(b->s), n;
    qf_serve_request **buf = malloc(cap * sizeof(*buf));
    qf_code rc;
    /* As the README's serve_epoll example's model threads do (what
     * qf_serve_run() does for its own thread); best effort. */
    (void)qf_thread_prefer_latency(QF_SERVE_DEFAULT_EXEC_SLICE_NS, NULL);
    while ((rc = qf_serve_next_batch(b->s, buf, &n)) == QF_OK) {
        model(arg, (sv_item *const *)buf, n);
        if (qf_serve_post_complete(b->s, buf, n, QF_OK) != QF_OK)
            bench_fail("qf_serve_post_complete: %s", qf_last_message());
    }
    if (rc != QF_OUT_OF_RANGE)
        bench_fail("qf_serve_next_batch: %s", qf_last_message());
    free(buf);
    /* Every batch is posted: the loop's last collect answers what is left,
     * then it ends, so the benchmark reads final answers after run(). */
    uint64_t one = 1;
    if (write(b->stop_fd, &one, sizeof(one)) != sizeof(one))
        bench_fail("write to the stop eventfd failed");
    pthread_join(b->loop, NULL);
}

static void f_drain(void *vb)
{
    fb *b = vb;
    qf_serve_end_input(b->s);
}

static uint64_t f_expired(void *vb)
{
    fb *b = vb;
    qf_serve_stats st;
    qf_serve_get_stats(b->s, &st);
    return st.counts.expired;
}

static void f_destroy(void *vb)
{
    fb *b = vb;
    close(b->ep);
    close(b->stop_fd);
    qf_serve_free(b->s);
    free(b);
}

const sv_impl sv_qflow_fd = {"qflow_fd", f_create, f_submit, f_run, f_drain, f_expired, f_destroy};
