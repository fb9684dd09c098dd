/* test_priority_queue.c - PriorityQueue (qf_priority_queue_new), spec items
 * 97-106 plus the common queue semantics (25-38) for this kind.
 *
 * Not covered here:
 *   - spec 101 as stated (a TypeError when the Python graph is built): C has
 *     no graph-construction step; the run-time equivalent, a non-int64
 *     priority refused with "Type mismatch in tuple component 0", is
 *     tested instead.
 *
 * Threads are synchronised on observable state only: qf_queue_size(), the
 * number of wakers registered on the queue's wait lists (white-box, through
 * qf_locked_queue-impl.h), and flags set by the threads. No sleeps order
 * anything; short deadlines only demonstrate that a call would block.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_locked_queue-impl.h"
#include "qflow.h"

/* ------------------------------------------------------------- helpers */

/* A PriorityQueue of (priority, int32 value), shapes given. */
static qf_queue *mkq(int64_t cap)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = cap, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "q"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

static qf_element *el(int64_t prio, int32_t v)
{
    qf_tensor *t[2] = {qf_tensor_new_i64(prio), qf_tensor_new_i32(v)};
    return qf_element_of(2, t);
}

static qf_element *batch(const int64_t *prio, const int32_t *v, int64_t n)
{
    qf_shape sh = QF_SHAPE(n);
    qf_tensor *t[2] = {qf_tensor_new_from(QF_INT64, &sh, prio, (size_t)n * sizeof(int64_t)),
                       qf_tensor_new_from(QF_INT32, &sh, v, (size_t)n * sizeof(int32_t))};
    return qf_element_of(2, t);
}

static int64_t prio_of(const qf_element *e, int64_t i)
{
    return ((const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)))[i];
}

static int32_t val_of(const qf_element *e, int64_t i)
{
    return ((const int32_t *)qf_tensor_cdata(qf_element_get(e, 1)))[i];
}

static int64_t rows(const qf_element *e)
{
    return qf_tensor_shape(qf_element_get(e, 0))->dims[0];
}

static void enq(qf_queue *q, int64_t prio, int32_t v)
{
    cr_assert_eq(qf_queue_enqueue(q, el(prio, v)), QF_OK, "%s", qf_last_message());
}

static int64_t deq_prio(qf_queue *q, int32_t *ret_v)
{
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK, "%s", qf_last_message());
    int64_t p = prio_of(e, 0);
    if (ret_v)
        *ret_v = val_of(e, 0);
    qf_element_free(e);
    return p;
}

static bool sorted(const qf_element *b)
{
    for (int64_t i = 1; i < rows(b); i++)
        if (prio_of(b, i - 1) > prio_of(b, i))
            return false;
    return true;
}

/* A small deterministic generator for test data. */
static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static qf_waitlist *many_waiters(qf_queue *q)
{
    return &((qf__locked *)q->impl)->many_waiters;
}

static void wait_registered(qf_waitlist *wl, uint32_t k)
{
    qf_deadline d = qf_deadline_in_s(20);
    while (qf_waitlist_count(wl) < k) {
        cr_assert(!qf_deadline_passed(d), "no waiter registered");
        sched_yield();
    }
}

/* The same for producers: blocked threads wait in line as put requests. */
static void wait_producers(qf_queue *q, size_t k)
{
    qf_deadline d = qf_deadline_in_s(20);
    while (qf__locked_producers_waiting(qf__locked_of(q)) < k) {
        cr_assert(!qf_deadline_passed(d), "no producer waiting");
        sched_yield();
    }
}

typedef enum { OP_DEQ, OP_MANY, OP_UPTO, OP_ENQ, OP_ENQ_MANY } op_kind;

typedef struct {
    qf_queue *q;
    op_kind op;
    int64_t n;
    qf_element *in;
    qf_element *out;
    qf_code rc;
    char msg[256];
    atomic_bool done;
    pthread_t th;
} job;

static void *job_main(void *a)
{
    job *j = a;
    switch (j->op) {
    case OP_DEQ:
        j->rc = qf_queue_dequeue(j->q, &j->out);
        break;
    case OP_MANY:
        j->rc = qf_queue_dequeue_many(j->q, j->n, &j->out);
        break;
    case OP_UPTO:
        j->rc = qf_queue_dequeue_up_to(j->q, j->n, &j->out);
        break;
    case OP_ENQ:
        j->rc = qf_queue_enqueue(j->q, j->in);
        break;
    case OP_ENQ_MANY:
        j->rc = qf_queue_enqueue_many(j->q, j->in, NULL);
        break;
    }
    if (j->rc != QF_OK)
        strncpy(j->msg, qf_last_message(), sizeof(j->msg) - 1);
    else if (j->op == OP_ENQ || j->op == OP_ENQ_MANY)
        j->in = NULL;
    atomic_store(&j->done, true);
    return NULL;
}

static void job_start(job *j, qf_queue *q, op_kind op, int64_t n, qf_element *in)
{
    memset(j, 0, sizeof(*j));
    j->q = q;
    j->op = op;
    j->n = n;
    j->in = in;
    atomic_init(&j->done, false);
    cr_assert_eq(pthread_create(&j->th, NULL, job_main, j), 0);
}

static void job_join(job *j)
{
    pthread_join(j->th, NULL);
}

/* ---------------------------------------------------------- components */

/* spec 97, 5: the queue adds an int64 scalar priority as component 0. */
Test(priority_queue, priority_is_component_zero)
{
    qf_dtype dt[2] = {QF_STRING, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    qf_queue_options o = {.capacity = 10, .num_components = 2, .dtypes = dt, .shapes = sh};
    qf_queue *q = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
    cr_expect_str_eq(qf_queue_name(q), "priority_queue");
    cr_expect_str_eq(qf_queue_kind_name(q), "PriorityQueue");
    cr_expect_eq(qf_queue_get_kind(q), QF_QUEUE_PRIORITY);
    cr_expect_eq(qf_queue_num_components(q), 3);
    cr_expect_eq(qf_queue_dtype(q, 0), QF_INT64);
    cr_expect_eq(qf_queue_dtype(q, 1), QF_STRING);
    cr_expect_eq(qf_queue_dtype(q, 2), QF_FLOAT32);
    cr_expect_eq(qf_queue_shape(q, 0)->rank, 0);
    cr_expect_eq(qf_queue_shape(q, 2)->dims[0], 2);
    cr_expect(!qf_queue_is_inline(q));
    float f[2] = {1.5f, 2.5f};
    qf_tensor *t[3] = {qf_tensor_new_i64(7), qf_tensor_new_cstr("x"),
                       qf_tensor_new_from(QF_FLOAT32, &sh[1], f, sizeof(f))};
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(3, t)), QF_OK);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect_eq(qf_element_size(e), 3, "dequeue returns [priority, components...]");
    cr_expect_eq(prio_of(e, 0), 7);
    cr_expect_str_eq(qf_tensor_string(qf_element_get(e, 1), 0, NULL), "x");
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 97: names describe the caller's components; the priority is
 * named "priority". */
Test(priority_queue, names_get_a_priority_entry)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    const char *names[1] = {"v"};
    qf_queue_options o = {
        .capacity = 4, .num_components = 1, .dtypes = &dt, .shapes = &sh, .names = names};
    qf_queue *q = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
    cr_expect_str_eq(qf_queue_component_name(q, 0), "priority");
    cr_expect_str_eq(qf_queue_component_name(q, 1), "v");
    const char *enames[2] = {"priority", "v"};
    qf_element *e = el(3, 30);
    cr_assert_eq(qf_element_set_names(e, enames), QF_OK);
    cr_assert_eq(qf_queue_enqueue(q, e), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect_eq(((const int64_t *)qf_tensor_cdata(qf_element_get_by_name(e, "priority")))[0], 3);
    cr_expect_eq(((const int32_t *)qf_tensor_cdata(qf_element_get_by_name(e, "v")))[0], 30);
    qf_element_free(e);
    qf_queue_unref(q);
    names[0] = "priority";
    cr_expect_eq(qf_priority_queue_new(&o, &q), QF_INVALID_ARGUMENT, "name taken by the priority");
}

/* A queue of priorities only (no other component), as TensorFlow allows. */
Test(priority_queue, priorities_only)
{
    qf_queue_options o = {.capacity = 8};
    qf_queue *q = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_num_components(q), 1);
    int64_t p[5] = {4, -1, 9, 0, 2};
    qf_shape sh = QF_SHAPE(5);
    qf_tensor *t = qf_tensor_new_from(QF_INT64, &sh, p, sizeof(p));
    cr_assert_eq(qf_queue_enqueue_many(q, qf_element_of(1, &t), NULL), QF_OK);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 5, &b), QF_OK);
    int64_t want[5] = {-1, 0, 2, 4, 9};
    cr_expect_arr_eq(qf_tensor_cdata(qf_element_get(b, 0)), want, sizeof(want));
    qf_element_free(b);
    /* One int64 scalar component: the slots hold the priorities (inline),
     * extreme ones included. */
    cr_expect(qf_queue_is_inline(q));
    int64_t ext[3] = {INT64_MAX, INT64_MIN, -1};
    for (int i = 0; i < 3; i++) {
        qf_tensor *one = qf_tensor_new_i64(ext[i]);
        cr_assert_eq(qf_queue_enqueue(q, qf_element_of(1, &one)), QF_OK);
    }
    int64_t order[3] = {INT64_MIN, -1, INT64_MAX};
    for (int i = 0; i < 3; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
        cr_expect_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)), order[i]);
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* -------------------------------------------------------------- order */

/* spec 98: 100 random priorities in [-5, 5) with two string values each;
 * dequeue_many(100) is sorted and every pair keeps its own priority. */
Test(priority_queue, ascending_order_pairs_stay_with_their_priority)
{
    qf_dtype dt[2] = {QF_STRING, QF_STRING};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options o = {.capacity = 100, .num_components = 2, .dtypes = dt, .shapes = sh};
    qf_queue *q = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
    uint32_t s = 98;
    int64_t prio[100];
    for (int i = 0; i < 100; i++) {
        char a[16], b[16];
        prio[i] = (int64_t)(lcg(&s) % 10) - 5;
        snprintf(a, sizeof(a), "a%d", i);
        snprintf(b, sizeof(b), "b%d", i);
        qf_tensor *t[3] = {qf_tensor_new_i64(prio[i]), qf_tensor_new_cstr(a),
                           qf_tensor_new_cstr(b)};
        cr_assert_eq(qf_queue_enqueue(q, qf_element_of(3, t)), QF_OK);
    }
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 100, &e), QF_OK);
    cr_expect(sorted(e));
    bool seen[100] = {false};
    for (int64_t r = 0; r < 100; r++) {
        int i = -1, j = -1;
        sscanf(qf_tensor_string(qf_element_get(e, 1), r, NULL), "a%d", &i);
        sscanf(qf_tensor_string(qf_element_get(e, 2), r, NULL), "b%d", &j);
        cr_assert(i >= 0 && i < 100 && i == j, "pair (a%d, b%d) split", i, j);
        cr_expect(!seen[i], "pair %d twice", i);
        seen[i] = true;
        cr_expect_eq(prio_of(e, r), prio[i], "pair %d has another priority", i);
    }
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 99: equal priorities leave in some order, components together. */
Test(priority_queue, equal_priorities_keep_components_together)
{
    qf_queue *q = mkq(10);
    for (int i = 0; i < 6; i++)
        enq(q, i % 2, 100 + i);
    int mask = 0;
    for (int i = 0; i < 6; i++) {
        int32_t v;
        int64_t p = deq_prio(q, &v);
        cr_expect_eq(p, i < 3 ? 0 : 1);
        cr_expect_eq((v - 100) % 2, p, "value %d left its priority", v);
        mask |= 1 << (v - 100);
    }
    cr_expect_eq(mask, 0x3f);
    qf_queue_unref(q);
}

/* spec 100: 1000 elements from one enqueue_many, 10 x dequeue_many(100). */
Test(priority_queue, sorted_in_batches_of_100)
{
    qf_queue *q = mkq(1000);
    static int64_t p[1000];
    static int32_t v[1000];
    uint32_t s = 100;
    for (int i = 0; i < 1000; i++) {
        p[i] = (int64_t)(lcg(&s) % 100000) - 50000;
        v[i] = i;
    }
    cr_assert_eq(qf_queue_enqueue_many(q, batch(p, v, 1000), NULL), QF_OK);
    int64_t last = INT64_MIN;
    int count = 0;
    for (int r = 0; r < 10; r++) {
        qf_element *b = NULL;
        cr_assert_eq(qf_queue_dequeue_many(q, 100, &b), QF_OK);
        cr_expect(sorted(b));
        cr_expect_geq(prio_of(b, 0), last, "batches are globally sorted");
        last = prio_of(b, 99);
        for (int64_t i = 0; i < 100; i++, count++)
            cr_expect_eq(p[val_of(b, i)], prio_of(b, i));
        qf_element_free(b);
    }
    cr_expect_eq(count, 1000);
    qf_queue_unref(q);
}

/* spec 100: 1000 single dequeues. */
Test(priority_queue, sorted_single_dequeues)
{
    qf_queue *q = mkq(1000);
    uint32_t s = 1000;
    for (int i = 0; i < 1000; i++)
        enq(q, (int64_t)(lcg(&s) % 1000), i);
    int64_t last = INT64_MIN;
    for (int i = 0; i < 1000; i++) {
        int64_t p = deq_prio(q, NULL);
        cr_assert_geq(p, last);
        last = p;
    }
    qf_queue_unref(q);
}

typedef struct {
    qf_queue *q;
    int id;
} prod_arg;

static void *five_enqueues(void *a)
{
    prod_arg *pa = a;
    uint32_t s = (uint32_t)pa->id * 7919u + 1;
    for (int i = 0; i < 5; i++)
        if (qf_queue_enqueue(pa->q, el((int64_t)(lcg(&s) % 50), pa->id * 5 + i)) != QF_OK)
            return (void *)1;
    return NULL;
}

/* spec 100: 20 threads each enqueue 5, then one dequeue_many(100). */
Test(priority_queue, sorted_after_concurrent_enqueues)
{
    qf_queue *q = mkq(100);
    pthread_t th[20];
    prod_arg pa[20];
    job j;
    job_start(&j, q, OP_MANY, 100, NULL);
    for (int i = 0; i < 20; i++) {
        pa[i] = (prod_arg){q, i};
        pthread_create(&th[i], NULL, five_enqueues, &pa[i]);
    }
    for (int i = 0; i < 20; i++) {
        void *r;
        pthread_join(th[i], &r);
        cr_expect_null(r);
    }
    job_join(&j);
    cr_assert_eq(j.rc, QF_OK, "%s", j.msg);
    cr_expect(sorted(j.out));
    int mask[100] = {0};
    for (int64_t i = 0; i < 100; i++)
        mask[val_of(j.out, i)]++;
    for (int i = 0; i < 100; i++)
        cr_expect_eq(mask[i], 1);
    qf_element_free(j.out);
    qf_queue_unref(q);
}

/* ---------------------------------------------------------- validation */

/* spec 101 (run-time form): a non-int64 priority is refused. */
Test(priority_queue, non_int64_priority_rejected)
{
    qf_queue *q = mkq(10);
    qf_tensor *t[2] = {qf_tensor_new_cstr("a"), qf_tensor_new_i32(1)};
    qf_element *e = qf_element_of(2, t);
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Type mismatch in tuple component 0. Expected int64, got string");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 102: a non-scalar priority fails at run time. */
Test(priority_queue, non_scalar_priority_rejected)
{
    qf_queue *q = mkq(10);
    int64_t p2[2] = {0, 2}, p22[4] = {0, 2, 3, 4};
    int32_t v[2] = {1, 2};
    qf_shape s2 = QF_SHAPE(2), s22 = QF_SHAPE(2, 2);
    qf_tensor *t[2] = {qf_tensor_new_from(QF_INT64, &s2, p2, sizeof(p2)), qf_tensor_new_i32(1)};
    qf_element *e = qf_element_of(2, t);
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Shape mismatch in tuple component 0. Expected [], got [2]");
    qf_element_free(e);
    qf_tensor *u[2] = {qf_tensor_new_from(QF_INT64, &s22, p22, sizeof(p22)),
                       qf_tensor_new_from(QF_INT32, &s2, v, sizeof(v))};
    e = qf_element_of(2, u);
    cr_expect_eq(qf_queue_enqueue_many(q, e, NULL), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Shape mismatch in tuple component 0. Expected [2], got [2,2]");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 102, 105 without shapes: the priority is still checked; dequeue_many
 * and dequeue_up_to are refused. */
Test(priority_queue, without_shapes)
{
    qf_dtype dt = QF_INT32;
    qf_queue_options o = {.capacity = 10, .num_components = 1, .dtypes = &dt, .name = "q"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
    cr_expect_null(qf_queue_shape(q, 0));
    int64_t p2[2] = {0, 2}, p22[4] = {0, 2, 3, 4};
    int32_t v[2] = {1, 2};
    qf_shape s2 = QF_SHAPE(2), s22 = QF_SHAPE(2, 2);
    qf_tensor *t[2] = {qf_tensor_new_from(QF_INT64, &s2, p2, sizeof(p2)), qf_tensor_new_i32(1)};
    qf_element *e = qf_element_of(2, t);
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Shape mismatch in tuple component 0. Expected [], got [2]");
    qf_element_free(e);
    qf_tensor *u[2] = {qf_tensor_new_from(QF_INT64, &s22, p22, sizeof(p22)),
                       qf_tensor_new_from(QF_INT32, &s2, v, sizeof(v))};
    e = qf_element_of(2, u);
    size_t done = 99;
    cr_expect_eq(qf_queue_enqueue_many(q, e, &done), QF_INVALID_ARGUMENT);
    cr_expect_eq(done, 0);
    cr_expect(strstr(qf_last_message(), "Shape mismatch in tuple component 0"));
    cr_expect_eq(qf_tensor_shape(qf_element_get(e, 0))->dims[0], 2, "the caller keeps the batch");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    /* a scalar priority with any component shape goes in */
    qf_tensor *w[2] = {qf_tensor_new_i64(1), qf_tensor_new_from(QF_INT32, &s2, v, sizeof(v))};
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, w)), QF_OK);
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_dequeue_many(q, 1, &b), QF_INVALID_ARGUMENT);
    /* spec 105: TensorFlow's words */
    cr_expect_str_eq(qf_last_message(),
                     "PriorityQueue's DequeueMany requires the components to have specified "
                     "shapes.");
    cr_expect_eq(qf_queue_dequeue_up_to(q, 1, &b), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "PriorityQueue's DequeueMany requires the components to have specified "
                     "shapes.",
                     "TensorFlow's DequeueUpTo goes through TryDequeueMany and says so too");
    cr_expect_eq(deq_prio(q, NULL), 1, "plain dequeue works without shapes");
    qf_queue_unref(q);
}

/* ------------------------------------------------- batches and closing */

/* spec 103: dequeue_many(n) takes nothing until n are present at once. */
Test(priority_queue, dequeue_many_waits_for_n_at_once)
{
    qf_queue *q = mkq(10);
    job j;
    job_start(&j, q, OP_MANY, 3, NULL);
    wait_registered(many_waiters(q), 1);
    enq(q, 5, 5);
    enq(q, 1, 1);
    /* the waiter was woken by neither (fewer than 3): it is still
     * registered, and nothing was taken */
    wait_registered(many_waiters(q), 1);
    cr_expect_eq(qf_queue_size(q), 2);
    cr_expect(!atomic_load(&j.done));
    enq(q, 3, 3);
    job_join(&j);
    cr_assert_eq(j.rc, QF_OK, "%s", j.msg);
    cr_expect_eq(rows(j.out), 3);
    cr_expect(prio_of(j.out, 0) == 1 && prio_of(j.out, 1) == 3 && prio_of(j.out, 2) == 5);
    qf_element_free(j.out);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 103: dequeue_many(n > capacity) can never complete while open. */
Test(priority_queue, dequeue_many_beyond_capacity_is_refused)
{
    /* spec 103: it could never complete while the queue is open (TensorFlow
     * waits for ever); qflow refuses it at once instead */
    qf_queue *q = mkq(4);
    for (int i = 0; i < 4; i++)
        enq(q, 4 - i, i);
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_dequeue_many_until(q, 5, qf_deadline_in_s(0.02), &b),
                 QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "capacity is 4") != NULL, "%s", qf_last_message());
    cr_expect_null(b);
    cr_expect_eq(qf_queue_size(q), 4, "nothing removed");
    cr_expect_eq(qf_queue_try_dequeue_many(q, 5, &b), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_dequeue_many(q, 5, &b), QF_INVALID_ARGUMENT, "does not wait");
    cr_expect_eq(qf_queue_dequeue_up_to_until(q, 5, qf_deadline_in_s(0.02), &b),
                 QF_DEADLINE_EXCEEDED, "open: up_to waits for n too");
    cr_expect_eq(qf_queue_size(q), 4);
    cr_assert_eq(qf_queue_dequeue_many(q, 4, &b), QF_OK);
    cr_expect(sorted(b));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 104 */
Test(priority_queue, closed_queue_rules)
{
    qf_queue *q = mkq(10);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue(q, &e), QF_OUT_OF_RANGE);
    cr_expect_str_eq(qf_last_message(), "PriorityQueue 'q' is closed and has insufficient "
                                        "elements (requested 1, current size 0)");
    cr_expect_eq(qf_queue_dequeue_many(q, 2, &e), QF_OUT_OF_RANGE);
    cr_expect_eq(qf_queue_dequeue_up_to(q, 2, &e), QF_OUT_OF_RANGE);
    qf_queue_unref(q);

    q = mkq(10);
    enq(q, 9, 9);
    enq(q, 2, 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect_eq(qf_queue_dequeue_many(q, 3, &e), QF_OUT_OF_RANGE);
    cr_expect_str_eq(qf_last_message(), "PriorityQueue 'q' is closed and has insufficient "
                                        "elements (requested 3, current size 2)");
    cr_expect_eq(qf_queue_size(q), 2, "nothing removed");
    cr_assert_eq(qf_queue_dequeue_up_to(q, 3, &e), QF_OK);
    cr_expect_eq(rows(e), 2);
    cr_expect(prio_of(e, 0) == 2 && prio_of(e, 1) == 9);
    qf_element_free(e);
    cr_expect_eq(qf_queue_dequeue_up_to(q, 3, &e), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* spec 104, 35: blocked batch dequeues are woken by close. */
Test(priority_queue, close_wakes_blocked_batches)
{
    qf_queue *q = mkq(10);
    enq(q, 4, 4);
    enq(q, 3, 3);
    job many, upto, one;
    job_start(&many, q, OP_MANY, 3, NULL);
    job_start(&upto, q, OP_UPTO, 5, NULL);
    wait_registered(many_waiters(q), 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    job_join(&many);
    job_join(&upto);
    cr_expect_eq(many.rc, QF_OUT_OF_RANGE, "%s", many.msg);
    cr_assert_eq(upto.rc, QF_OK, "%s", upto.msg);
    cr_expect_eq(rows(upto.out), 2);
    cr_expect(prio_of(upto.out, 0) == 3 && prio_of(upto.out, 1) == 4);
    qf_element_free(upto.out);
    job_start(&one, q, OP_DEQ, 1, NULL);
    job_join(&one);
    cr_expect_eq(one.rc, QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* spec 105, 31, 2, 34 */
Test(priority_queue, enqueue_on_closed_queue_is_cancelled)
{
    qf_queue *q = mkq(10);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect(qf_queue_is_closed(q));
    qf_element *e = el(1, 1);
    cr_expect_eq(qf_queue_enqueue(q, e), QF_CANCELLED);
    cr_expect_str_eq(qf_last_message(), "PriorityQueue 'q' is closed.");
    qf_element_free(e);
    cr_expect_eq(qf_queue_close(q, false), QF_CANCELLED);
    cr_expect_str_eq(qf_last_message(), "Queue 'q' is already closed.");
    cr_expect_eq(qf_queue_close(q, true), QF_OK);
    qf_queue_unref(q);
}

/* spec 106: capacity 10; 40 threads each enqueue_many up to 9 elements,
 * 40 threads dequeue_many the same counts in shuffled order; every value
 * is delivered once. */
typedef struct {
    qf_queue *q;
    int count, base;
    qf_element *out;
    qf_code rc;
} many_arg;

static void *enqueue_many_thread(void *a)
{
    many_arg *m = a;
    int64_t p[9];
    int32_t v[9];
    for (int i = 0; i < m->count; i++) {
        p[i] = (m->base + i * 37) % 101;
        v[i] = m->base + i;
    }
    m->rc = qf_queue_enqueue_many(m->q, batch(p, v, m->count), NULL);
    return NULL;
}

static void *dequeue_many_thread(void *a)
{
    many_arg *m = a;
    m->rc = qf_queue_dequeue_many(m->q, m->count, &m->out);
    return NULL;
}

Test(priority_queue, concurrent_enqueue_many_and_dequeue_many)
{
    enum { T = 40 };
    qf_queue *q = mkq(10);
    many_arg prod[T], cons[T];
    pthread_t pt[T], ct[T];
    uint32_t s = 106;
    int total = 0;
    for (int i = 0; i < T; i++) {
        prod[i] = (many_arg){q, 1 + (int)(lcg(&s) % 9), total, NULL, QF_OK};
        total += prod[i].count;
        cons[i] = (many_arg){q, prod[i].count, 0, NULL, QF_OK};
    }
    for (int i = T - 1; i > 0; i--) { /* shuffle the consumers' counts */
        int j = (int)(lcg(&s) % (uint32_t)(i + 1));
        int c = cons[i].count;
        cons[i].count = cons[j].count;
        cons[j].count = c;
    }
    for (int i = 0; i < T; i++) {
        pthread_create(&ct[i], NULL, dequeue_many_thread, &cons[i]);
        pthread_create(&pt[i], NULL, enqueue_many_thread, &prod[i]);
    }
    bool *seen = calloc((size_t)total, 1);
    for (int i = 0; i < T; i++) {
        pthread_join(pt[i], NULL);
        cr_expect_eq(prod[i].rc, QF_OK);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(ct[i], NULL);
        cr_assert_eq(cons[i].rc, QF_OK);
        cr_expect_eq(rows(cons[i].out), cons[i].count);
        cr_expect(sorted(cons[i].out));
        for (int64_t r = 0; r < rows(cons[i].out); r++) {
            int32_t v = val_of(cons[i].out, r);
            cr_assert(v >= 0 && v < total);
            cr_expect(!seen[v], "value %d twice", v);
            seen[v] = true;
        }
        qf_element_free(cons[i].out);
    }
    for (int i = 0; i < total; i++)
        cr_expect(seen[i], "value %d lost", i);
    free(seen);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* --------------------------------------- common semantics for this kind */

/* spec 38 */
Test(priority_queue, deadline_exceeded_then_usable)
{
    qf_queue *q = mkq(1);
    qf_element *e = NULL;
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(qf_queue_dequeue_until(q, qf_deadline_in_s(0.01), &e), QF_DEADLINE_EXCEEDED);
        cr_expect_str_eq(qf_last_message(),
                         "PriorityQueue 'q': Timed out waiting for notification");
    }
    enq(q, 37, 37);
    qf_element *x = el(1, 1);
    cr_expect_eq(qf_queue_enqueue_until(q, x, qf_deadline_in_s(0.01)), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_queue_try_enqueue(q, x), QF_UNAVAILABLE);
    qf_element_free(x);
    cr_expect_eq(deq_prio(q, NULL), 37);
    cr_expect_eq(qf_queue_try_dequeue(q, &e), QF_UNAVAILABLE);
    qf_queue_unref(q);
}

/* spec 29, 30: enqueue_many beyond the capacity inserts what fits and
 * waits; a plain close lets it finish and consumers wait for it. */
Test(priority_queue, blocked_enqueue_many_finishes_after_plain_close)
{
    qf_queue *q = mkq(2);
    int64_t p[4] = {40, 30, 20, 10};
    int32_t v[4] = {0, 1, 2, 3};
    job j;
    job_start(&j, q, OP_ENQ_MANY, 4, batch(p, v, 4));
    wait_producers(q, 1);
    cr_expect_eq(qf_queue_size(q), 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect_eq(deq_prio(q, NULL), 30);
    int got = 1;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_queue_dequeue(q, &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK);
        got++;
        qf_element_free(e);
    }
    cr_expect_eq(got, 4, "end of data only after the pending enqueue finished");
    job_join(&j);
    cr_expect_eq(j.rc, QF_OK);
    qf_queue_unref(q);
}

/* spec 32: a cancelling close fails blocked enqueues. */
Test(priority_queue, cancel_pending_enqueues)
{
    qf_queue *q = mkq(1);
    enq(q, 1, 1);
    job j;
    job_start(&j, q, OP_ENQ, 1, el(2, 2));
    wait_producers(q, 1);
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    job_join(&j);
    cr_expect_eq(j.rc, QF_CANCELLED);
    cr_expect_str_eq(j.msg, "Enqueue operation was cancelled");
    qf_element_free(j.in);
    cr_expect_eq(deq_prio(q, NULL), 1);
    qf_queue_unref(q);
}

static atomic_int wakes;
static void on_wake(qf_waker *w)
{
    (void)w;
    atomic_fetch_add(&wakes, 1);
}

/* The poll (task) forms. */
Test(priority_queue, poll_forms)
{
    qf_queue *q = mkq(1);
    qf_waker w;
    qf_waker_init(&w, on_wake, NULL);
    atomic_store(&wakes, 0);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_poll_dequeue(q, &w, &e), QF_PENDING);
    enq(q, 4, 4);
    cr_expect_eq(atomic_load(&wakes), 1);
    qf_waker_init(&w, on_wake, NULL);
    qf_element *x = el(5, 5);
    cr_assert_eq(qf_queue_poll_enqueue(q, x, &w), QF_PENDING);
    cr_expect(qf_queue_cancel_poll(q, &w));
    cr_assert_eq(qf_queue_poll_enqueue(q, x, &w), QF_PENDING);
    cr_expect_eq(deq_prio(q, NULL), 4);
    cr_expect_eq(atomic_load(&wakes), 2);
    qf_waker_init(&w, on_wake, NULL);
    cr_assert_eq(qf_queue_poll_enqueue(q, x, &w), QF_OK);
    cr_assert_eq(qf_queue_poll_dequeue(q, &w, &e), QF_OK);
    cr_expect_eq(prio_of(e, 0), 5);
    qf_element_free(e);
    qf_queue_unref(q);
}

/* Unbounded: storage grows; freeing a queue releases what it holds. */
Test(priority_queue, unbounded_growth_and_free_with_elements)
{
    qf_queue *q = mkq(-1);
    enum { N = 3000 };
    static int64_t p[N];
    static int32_t v[N];
    for (int i = 0; i < N; i++) {
        p[i] = N - i;
        v[i] = i;
    }
    cr_assert_eq(qf_queue_enqueue_many(q, batch(p, v, N), NULL), QF_OK);
    cr_expect_eq(qf_queue_size(q), N);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, N - 10, &b), QF_OK);
    cr_expect(sorted(b));
    cr_expect_eq(prio_of(b, 0), 1);
    qf_element_free(b);
    qf_queue_unref(q); /* 10 left */
}

/* spec 10: a shared name addresses one queue; this kind registers itself
 * once its storage is ready, with the priority among its components. */
Test(priority_queue, shared_name_gives_one_queue)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = 1,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .shared_name = "test_pq_shared"};
    qf_queue *q1 = NULL, *q2 = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &q1), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_priority_queue_new(&o, &q2), QF_OK, "%s", qf_last_message());
    cr_expect_eq((void *)q1, (void *)q2);
    enq(q1, 1, 10);
    cr_expect_eq(qf_queue_size(q2), 1);
    cr_expect_eq(deq_prio(q2, NULL), 1);
    qf_queue *q3 = NULL;
    dt = QF_FLOAT32;
    cr_expect_eq(qf_priority_queue_new(&o, &q3), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "component types"), "%s", qf_last_message());
    qf_queue_unref(q1);
    cr_expect(qf_queue_registry_remove(NULL, "test_pq_shared"));
    qf_queue_unref(q2);
}
