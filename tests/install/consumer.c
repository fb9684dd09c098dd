/* consumer.c - a program outside the tree, built against an installed
 * qflow with pkg-config alone (tests/install/check-installed.sh): the
 * include line of the README, a queue, a typed element, a Coordinator
 * thread and a host-driven runtime. Exits 0 when everything behaves. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qflow/qflow.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "consumer: %s failed: %s\n", #cond, qf_last_message());                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static void *worker(void *arg)
{
    qf_coord *c = arg;
    qf_coord_wait_for_stop(c, QF_FOREVER);
    return NULL;
}

static qf_code count_task(qf_task *t, void *arg)
{
    (void)t;
    ++*(int *)arg;
    return QF_OK;
}

int main(void)
{
    CHECK(strcmp(qf_version(), QF_VERSION_STRING) == 0);

    qf_queue *pq;
    CHECK(qf_ptr_queue_new(4, "requests", 0, NULL, &pq) == QF_OK);
    void *in[3] = {(void *)1, (void *)2, (void *)3}, *out[3];
    CHECK(qf_queue_enqueue_many_ptrs(pq, in, 3, NULL) == QF_OK);
    CHECK(qf_queue_dequeue_many_ptrs(pq, 3, out) == QF_OK);
    CHECK(out[2] == (void *)3);
    CHECK(qf_queue_try_dequeue_ptr(pq, out) == QF_UNAVAILABLE);
    CHECK(strcmp(qf_last_message(), "FIFOQueue 'requests' is empty") == 0);
    qf_queue_unref(pq);

    qf_dtype dt = QF_FLOAT32;
    qf_shape sh = QF_SHAPE(2);
    qf_queue_options o = {
        .capacity = 2, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "q"};
    qf_queue *q;
    CHECK(qf_fifo_queue_new(&o, &q) == QF_OK);
    qf_tensor *t = qf_tensor_new(QF_FLOAT32, &sh);
    CHECK(qf_queue_enqueue(q, qf_element_of(1, &t)) == QF_OK);
    qf_element *e;
    CHECK(qf_queue_dequeue_until(q, qf_deadline_in_s(1.0), &e) == QF_OK);
    qf_element_free(e);
    qf_queue_unref(q);

    qf_coord *c;
    pthread_t th;
    CHECK(qf_coord_new(NULL, 0, &c) == QF_OK);
    CHECK(qf_coord_thread_create(c, "worker", worker, c, &th) == QF_OK);
    qf_coord_request_stop(c, NULL);
    CHECK(qf_coord_join_until(c, NULL, 0, qf_deadline_in_s(10), false, NULL) == QF_OK);

    qf_runtime *rt;
    CHECK(qf_runtime_new(&(qf_runtime_options){.workers = 0}, &rt) == QF_OK);
    int ran = 0;
    CHECK(qf_task_spawn(rt, count_task, &ran, NULL, NULL) == QF_OK);
    int64_t polls = 0;
    CHECK(qf_runtime_try_run_once(rt, &polls) == QF_OK && polls == 1 && ran == 1);
    qf_runtime_free(rt);
    qf_coord_free(c);
    printf("consumer: qflow %s works\n", qf_version());
    return 0;
}
