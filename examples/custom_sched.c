/* custom_sched.c - a scheduler of your own driving qflow: one loop thread
 * runs tasks of its own (a step function and a waker each) over qflow's
 * poll forms, and a Coordinator tracks them as members. A client thread
 * feeds a queue with the blocking form; the loop's task drains it with the
 * poll form and parks when it is empty. `custom_sched N` moves N requests
 * and exits 0 when their sum is right. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <qflow/qflow.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != QF_OK) {                                                                     \
            fprintf(stderr, "%s: %s\n", #call, qf_last_message());                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* A task: step() runs it until it finishes (QF_OK) or parks (QF_PENDING,
 * its waker handed to a poll form). */
typedef struct task task;
struct task {
    qf_code (*step)(task *t);
    qf_waker waker; /* one wait at a time (qf_waker.h) */
    task *next;     /* run queue link */
    bool queued;
    qf_coord_member *member;
    qf_queue *q;
    uintptr_t sum;
};

/* The run queue. Wakes come from other threads (the client's enqueue
 * wakes the parked task), so it takes a lock and rings an eventfd. */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static task *run_head, *run_tail;
static int run_fd;

static void make_runnable(task *t)
{
    pthread_mutex_lock(&run_lock);
    bool ring = !t->queued;
    if (ring) {
        t->queued = true;
        t->next = NULL;
        if (run_tail)
            run_tail->next = t;
        else
            run_head = t;
        run_tail = t;
    }
    pthread_mutex_unlock(&run_lock);
    uint64_t one = 1;
    if (ring && write(run_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        abort();
}

static task *next_runnable(void)
{
    pthread_mutex_lock(&run_lock);
    task *t = run_head;
    if (t) {
        run_head = t->next;
        if (!run_head)
            run_tail = NULL;
        t->queued = false;
    }
    pthread_mutex_unlock(&run_lock);
    return t;
}

/* The wake function: runs on the waking thread; it only queues the task,
 * which polls again (re-registering the same waker) on the loop thread. */
static void on_wake(qf_waker *w)
{
    make_runnable(w->ctx);
}

/* Drain the queue until it is closed and empty. */
static qf_code handle_requests(task *t)
{
    for (;;) {
        void *req;
        qf_code rc = qf_queue_poll_dequeue_ptr(t->q, &t->waker, &req);
        if (rc == QF_PENDING)
            return QF_PENDING; /* empty: parked until the client enqueues */
        if (rc == QF_OUT_OF_RANGE) {
            qf_coord_member_done(t->member); /* closed and drained */
            return QF_OK;
        }
        if (rc != QF_OK)
            return rc;
        t->sum += (uintptr_t)req;
    }
}

typedef struct client {
    qf_queue *q;
    uintptr_t n;
} client;

static void *run_client(void *arg)
{
    client *c = arg;
    for (uintptr_t i = 1; i <= c->n; i++)
        CHECK(qf_queue_enqueue_ptr(c->q, (void *)i)); /* blocks while full */
    CHECK(qf_queue_close(c->q, false));
    return NULL;
}

int main(int argc, char **argv)
{
    client cl = {.n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000};
    qf_coord *coord;
    CHECK(qf_coord_new(NULL, 0, &coord));
    CHECK(qf_ptr_queue_new(8, "requests", 0, NULL, &cl.q));
    run_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

    task handler = {.step = handle_requests, .q = cl.q};
    qf_waker_init(&handler.waker, on_wake, &handler);
    CHECK(qf_coord_member_new(coord, "handler", &handler.member));
    make_runnable(&handler);
    /* Not a member: its end would ring no fd of the loop (see the README). */
    pthread_t client_thread;
    if (pthread_create(&client_thread, NULL, run_client, &cl) != 0)
        return 1;

    /* The loop: run what is runnable, else sleep on the eventfd, until
     * every member of the Coordinator has finished. */
    while (!qf_coord_members_done(coord)) {
        task *t = next_runnable();
        if (t) {
            /* Inside a task, qflow's blocking calls refuse (pointing at
             * the poll form) instead of holding the loop. */
            qf_thread_set_task_runner(true);
            qf_code rc = t->step(t);
            qf_thread_set_task_runner(false);
            if (rc != QF_OK && rc != QF_PENDING) {
                qf_coord_request_stop(coord, qf_last_status()); /* join returns it */
                qf_coord_member_done(t->member);
            }
            continue;
        }
        /* Idle: sleep until a wake rings the eventfd (a real loop watches
         * its sockets and qf_coord_stop_fd() in the same poll). */
        struct pollfd pfd = {.fd = run_fd, .events = POLLIN};
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
            return 1;
        uint64_t rang;
        if (read(run_fd, &rang, sizeof(rang)) < 0 && errno != EAGAIN)
            return 1;
    }
    /* Every member finished, so join does not wait: it returns the
     * recorded status (QF_OK when no task failed). */
    qf_code rc = qf_coord_join(coord, NULL, 0, 10.0, false, NULL);
    pthread_join(client_thread, NULL);
    if (rc != QF_OK)
        fprintf(stderr, "join: %s\n", qf_last_message());
    uintptr_t want = cl.n * (cl.n + 1) / 2;
    printf("handled %ju requests, sum %ju (want %ju)\n", (uintmax_t)cl.n, (uintmax_t)handler.sum,
           (uintmax_t)want);
    close(run_fd);
    qf_queue_unref(cl.q);
    qf_coord_free(coord);
    return rc == QF_OK && handler.sum == want ? 0 : 1;
}
