/* embed_epoll.c - qflow inside a program's own epoll loop: a runtime of 0
 * workers (no thread besides main), a QueueRunner feeding a queue of
 * requests, and SIGTERM or SIGINT stopping everything through the
 * Coordinator. `embed_epoll N` handles N requests and exits; without N it
 * runs until a signal. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
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

static qf_coord *coord; /* for the signal handler */

static void on_signal(int sig)
{
    (void)sig;
    qf_coord_request_stop_from_signal(coord); /* async-signal-safe */
}

typedef struct source {
    uintptr_t next, limit; /* limit 0: forever */
} source;

/* The runner's op: the next request, until the limit ends the input. */
static qf_code next_request(void *arg, void **ret_p)
{
    source *s = arg;
    if (s->limit && s->next > s->limit)
        return QF_OUT_OF_RANGE; /* the runner closes the queue: end of data */
    *ret_p = (void *)s->next++;
    return QF_OK;
}

static void watch(int ep, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        exit(1);
}

int main(int argc, char **argv)
{
    source src = {.next = 1, .limit = argc > 1 ? strtoull(argv[1], NULL, 10) : 0};
    qf_runtime *rt;
    qf_queue *requests;
    qf_queue_runner *runner;
    CHECK(qf_runtime_new(&(qf_runtime_options){.workers = 0}, &rt)); /* main runs the tasks */
    CHECK(qf_coord_new(NULL, 0, &coord));
    CHECK(qf_ptr_queue_new(64, "requests", 0, NULL, &requests));
    qf_enqueue_op op = {.name = "next_request",
                        .kind = QF_OP_PRODUCE_PTR,
                        .produce_ptr = next_request,
                        .arg = &src};
    CHECK(qf_queue_runner_new(requests, &op, 1, NULL, &runner));
    CHECK(qf_queue_runner_start(runner, rt, coord, QF_RUNNER_START, NULL, NULL));

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int stop_fd, ep = epoll_create1(EPOLL_CLOEXEC);
    /* Task timers wake the loop through a timerfd set to the runtime's next
     * deadline, to the nanosecond: an epoll_wait timeout in whole
     * milliseconds, rounded up, would make every timed task up to 1 ms late. */
    int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    CHECK(qf_coord_stop_fd(coord, &stop_fd)); /* readable once a stop is requested */
    watch(ep, qf_runtime_fd(rt));             /* readable when a task is runnable */
    watch(ep, stop_fd);                       /* ... and the program's own sockets */
    watch(ep, timer_fd);
    printf("ready\n");
    fflush(stdout);

    uintptr_t handled = 0, sum = 0;
    while (!qf_coord_check_stop(coord)) {
        CHECK(qf_runtime_try_run_once(rt, NULL)); /* the runner fills the queue */
        void *req;
        qf_code rc;
        while ((rc = qf_queue_try_dequeue_ptr(requests, &req)) == QF_OK) {
            handled++; /* handle the request */
            sum += (uintptr_t)req;
        }
        if (rc == QF_OUT_OF_RANGE) /* input ended and the queue is drained */
            break;
        /* Sleep until an fd is readable or a task's timer is due: qflow's
         * deadlines are CLOCK_MONOTONIC nanoseconds, as the timerfd's. An
         * all-zero time disarms it (no timer pending). */
        qf_deadline next = qf_runtime_next_deadline(rt);
        struct itimerspec at = {{0, 0}, {0, 0}};
        if (next != QF_FOREVER)
            at.it_value = (struct timespec){next / 1000000000, next % 1000000000};
        if (next != QF_FOREVER && next <= 0)
            at.it_value.tv_nsec = 1; /* due already: fire at once */
        timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &at, NULL);
        struct epoll_event ev[4];
        int n = epoll_wait(ep, ev, 4, -1);
        if (n < 0 && errno != EINTR)
            exit(1);
        uint64_t ticks; /* settime resets it too; read to keep it quiet */
        for (int i = 0; i < n; i++)
            if (ev[i].data.fd == timer_fd && read(timer_fd, &ticks, sizeof(ticks)) < 0)
                ticks = 0;
    }
    bool by_signal = qf_coord_should_stop(coord);
    /* Stop the runner (its cancel op closes the queue) and run its task to
     * its end: qf_coord_join() on this thread would wait for a task that
     * only this thread can run. */
    qf_coord_request_stop(coord, NULL);
    qf_code rc = qf_runtime_join_coord_until(rt, coord, qf_deadline_in_s(10), false, NULL);
    if (rc != QF_OK)
        fprintf(stderr, "join: %s\n", qf_last_message());
    printf("%s: handled %ju requests, sum %ju\n", by_signal ? "stopped" : "done",
           (uintmax_t)handled, (uintmax_t)sum);
    close(timer_fd);
    close(ep);
    qf_queue_runner_free(runner);
    qf_queue_unref(requests);
    qf_runtime_free(rt);
    qf_coord_free(coord);
    return rc == QF_OK ? 0 : 1;
}
