/* test_queue.c - the FIFOQueue element API of qf_queue.h, item by item
 * against docs/semantics.md items 5-62: the common queue runtime (A)
 * and the FIFOQueue (B). Every test names the spec item(s) it checks.
 *
 * Items mapped onto their nearest C behaviour:
 *   5      the attributes (capacity, component types, shapes, names,
 *          shared name) and the default name are read back; TensorFlow's
 *          `container` is a qf_queue_registry here.
 *   9-11   shared_name through a private qf_queue_registry (and the
 *          default one); spec 10 also as two references (qf_queue_ref).
 *   12-14  graph-time ValueErrors of the Python wrapper: the run-time
 *          validation returns INVALID_ARGUMENT with TensorFlow's kernel text
 *          and leaves the queue and the caller's element unchanged.
 *   15-16  dictionaries: elements carrying component names.
 *   26     static shapes: the shapes of the run-time results and
 *          qf_queue_shape().
 *   27     a bare tensor: a one-component element.
 *   39     several dequeues in one session.run: three threads dequeue once.
 *   61     a run-time count: the count is dequeued from a second queue.
 *
 * Items skipped, and why:
 *   7 (second half)   "Queue shapes must have the same length as dtypes":
 *          a C caller passes one shapes array of num_components entries, a
 *          length mismatch cannot be expressed.
 *   13 (second half)  conversion of Python lists to the queue dtypes: C
 *          tensors carry their dtype (zero-row batches of the queue dtypes
 *          are tested instead).
 *   37     closing the Session cancels blocked operations: qflow has no
 *          session; the enqueue side (close with cancel_pending_enqueues)
 *          is spec 32-33.
 *   41-42  QueueBase.from_list and its static shape merging: no such API (a
 *          C caller selects the queue pointer at run time).
 *
 * Deliberate differences documented in qf_queue.h, tested as qflow behaves:
 *   28     waiters are served roughly, not strictly, in arrival order: the
 *          tests check what is kept (nothing lost or duplicated, each
 *          producer's and each consumer's order, nobody blocked forever).
 *   25, 30, 33, 59  a plain close takes effect at once (close returns and
 *          is_closed is true while enqueues are blocked); the blocked
 *          enqueues still complete and dequeuers see end-of-data only after
 *          they finished, so the same elements arrive in the same order as
 *          in TensorFlow.
 *
 * Synchronisation. Blocking calls run on real threads; the test waits on
 * observable state, never on a sleep: the queue's size, the thread's
 * "done" flag, or that the thread is parked, read from
 * /proc/self/task/<tid>/syscall: a futex wait on a word outside the queue
 * object is the thread's own waker (the queue's internal locks and the
 * ring's commit word live inside the queue object). A thread parks only
 * after the queue counted it as a waiter, so a close that follows sees a
 * blocked enqueue, deterministically.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "qf_test_park.h"
#include "qflow.h"

/* Generous: sanitizers and valgrind are slow. Only a bug waits this long. */
#define LONG_WAIT_NS (INT64_C(60) * 1000000000)

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(queue, .timeout = 240);
#endif

/* ------------------------------------------------------------ messages */

static bool has(const char *s, const char *sub)
{
    return s && strstr(s, sub) != NULL;
}

#define EXPECT_MSG(sub)                                                                            \
    cr_expect(has(qf_last_message(), (sub)), "last message \"%s\" lacks \"%s\"",                   \
              qf_last_message(), (sub))

/* A call that must fail with `code` and a message containing `sub`. A wrong
 * success ends the test: an element it took is no longer the caller's. */
#define REFUSED(call, code, sub)                                                                   \
    do {                                                                                           \
        qf_code rc_ = (call);                                                                      \
        cr_assert_neq(rc_, QF_OK, "%s succeeded", #call);                                          \
        cr_expect_eq(rc_, (code), "%s: %s, expected %s (%s)", #call, qf_code_name(rc_),            \
                     qf_code_name(code), qf_last_message());                                       \
        EXPECT_MSG(sub);                                                                           \
    } while (0)

#define OK(call)                                                                                   \
    do {                                                                                           \
        qf_code rc_ = (call);                                                                      \
        cr_assert_eq(rc_, QF_OK, "%s: %s (%s)", #call, qf_code_name(rc_), qf_last_message());      \
    } while (0)

/* ------------------------------------------------------------- tensors */

static qf_tensor *t_from(qf_dtype dt, qf_shape sh, const void *data)
{
    size_t bytes = (size_t)qf_shape_num_elements(&sh) * qf_dtype_size(dt);
    qf_tensor *t = qf_tensor_new_from(dt, &sh, data, bytes);
    cr_assert_not_null(t, "qf_tensor_new_from: %s", qf_last_message());
    return t;
}

static qf_tensor *vec_i32(size_t n, const int32_t *v)
{
    return t_from(QF_INT32, QF_SHAPE((int64_t)n), v);
}

static qf_tensor *vec_f32(size_t n, const float *v)
{
    return t_from(QF_FLOAT32, QF_SHAPE((int64_t)n), v);
}

static qf_tensor *vec_str(size_t n, const char *const *s)
{
    qf_shape sh = QF_SHAPE((int64_t)n);
    qf_tensor *t = qf_tensor_new(QF_STRING, &sh);
    cr_assert_not_null(t);
    for (size_t i = 0; i < n; i++)
        OK(qf_tensor_set_string(t, (int64_t)i, s[i], strlen(s[i])));
    return t;
}

/* An element of n tensors (takes them). */
static qf_element *el(size_t n, ...)
{
    qf_tensor *ts[8];
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        ts[i] = va_arg(ap, qf_tensor *);
    va_end(ap);
    qf_element *e = qf_element_of(n, ts);
    cr_assert_not_null(e);
    return e;
}

static qf_element *named(qf_element *e, const char *const *names)
{
    OK(qf_element_set_names(e, names));
    return e;
}

static const char *shape_txt(const qf_element *e, size_t c)
{
    static char buf[4][64];
    static int k;
    char *b = buf[k++ & 3];
    qf_shape_format(qf_tensor_shape(qf_element_get(e, c)), b, 64);
    return b;
}

static const void *cdata(const qf_element *e, size_t c)
{
    const qf_tensor *t = qf_element_get(e, c);
    cr_assert_not_null(t);
    return qf_tensor_cdata(t);
}

static int32_t i32_at(const qf_element *e, size_t c, int64_t i)
{
    cr_assert_eq(qf_tensor_dtype(qf_element_get(e, c)), QF_INT32);
    return ((const int32_t *)cdata(e, c))[i];
}

static float f32_at(const qf_element *e, size_t c, int64_t i)
{
    cr_assert_eq(qf_tensor_dtype(qf_element_get(e, c)), QF_FLOAT32);
    return ((const float *)cdata(e, c))[i];
}

static const char *str_at(const qf_element *e, size_t c, int64_t i)
{
    const char *s = qf_tensor_string(qf_element_get(e, c), i, NULL);
    cr_assert_not_null(s);
    return s;
}

static int64_t rows(const qf_element *e)
{
    return qf_tensor_shape(qf_element_get(e, 0))->dims[0];
}

/* -------------------------------------------------------------- queues */

static qf_queue *new_queue(int64_t cap, size_t n, const qf_dtype *dts, const qf_shape *shapes,
                           const char *const *names, const char *name)
{
    qf_queue_options o = {.capacity = cap,
                          .num_components = n,
                          .dtypes = dts,
                          .shapes = shapes,
                          .names = names,
                          .name = name};
    qf_queue *q = NULL;
    OK(qf_fifo_queue_new(&o, &q));
    cr_assert_not_null(q);
    return q;
}

/* One float32 component, no shapes (element pointers in the ring). */
static qf_queue *float_q(int64_t cap)
{
    qf_dtype dt = QF_FLOAT32;
    return new_queue(cap, 1, &dt, NULL, NULL, "q");
}

/* One float32 scalar component with its shape (inline per qf_queue.h). */
static qf_queue *float_scalar_q(int64_t cap)
{
    qf_dtype dt = QF_FLOAT32;
    qf_shape sh = qf_shape_scalar();
    return new_queue(cap, 1, &dt, &sh, NULL, "q");
}

static void enq_f(qf_queue *q, float v)
{
    qf_element *e = el(1, qf_tensor_new_f32(v));
    qf_code rc = qf_queue_enqueue(q, e);
    if (rc != QF_OK)
        qf_element_free(e);
    cr_assert_eq(rc, QF_OK, "enqueue %g: %s", (double)v, qf_last_message());
}

static void enq_many_f(qf_queue *q, size_t n, const float *v)
{
    qf_element *b = el(1, vec_f32(n, v));
    qf_code rc = qf_queue_enqueue_many(q, b, NULL);
    if (rc != QF_OK)
        qf_element_free(b);
    cr_assert_eq(rc, QF_OK, "enqueue_many: %s", qf_last_message());
}

static float deq_f(qf_queue *q)
{
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    cr_assert_eq(qf_element_size(e), 1);
    cr_expect_str_eq(shape_txt(e, 0), "[]");
    float v = f32_at(e, 0, 0);
    qf_element_free(e);
    return v;
}

/* Three storage layouts for int32-valued elements, to run the blocking and
 * closing cases through every path of the engine:
 *   LAYOUT_SCALAR: one int32 scalar component (inline per qf_queue.h: a
 *                  number that fits a slot);
 *   LAYOUT_PTR:    one QF_PTR scalar component without destructor, the
 *                  value encoded in the pointer bits (2v+1: never NULL); a
 *                  pointer queue is always inline;
 *   LAYOUT_BOXED:  (int32 v, string "v<v>"), both scalars; the slots hold
 *                  element pointers, and the string checks that the two
 *                  components of a row stay together. */
enum { LAYOUT_SCALAR, LAYOUT_PTR, LAYOUT_BOXED, NLAYOUTS };

static void *enc(int32_t v)
{
    return (void *)(uintptr_t)((uint64_t)(int64_t)v * 2 + 1);
}

static int32_t dec(const void *p)
{
    return (int32_t)(((int64_t)(uintptr_t)p - 1) / 2);
}

static qf_queue *iq_new(int layout, int64_t cap)
{
    qf_dtype dts[2] = {layout == LAYOUT_PTR ? QF_PTR : QF_INT32, QF_STRING};
    qf_shape shs[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue *q = new_queue(cap, layout == LAYOUT_BOXED ? 2 : 1, dts, shs, NULL, "q");
    if (layout == LAYOUT_PTR)
        cr_assert(qf_queue_is_inline(q));
    if (layout == LAYOUT_BOXED)
        cr_assert_not(qf_queue_is_inline(q));
    return q;
}

static void tag_of(int32_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "v%d", (int)v);
}

static qf_element *iq_elem(int layout, int32_t v)
{
    if (layout == LAYOUT_SCALAR)
        return el(1, qf_tensor_new_i32(v));
    if (layout == LAYOUT_PTR)
        return el(1, qf_tensor_new_scalar_ptr(enc(v), NULL));
    char tag[16];
    tag_of(v, tag, sizeof(tag));
    return el(2, qf_tensor_new_i32(v), qf_tensor_new_cstr(tag));
}

static qf_element *iq_batch(int layout, size_t n, const int32_t *v)
{
    qf_shape sh = QF_SHAPE((int64_t)n);
    if (layout == LAYOUT_SCALAR)
        return el(1, vec_i32(n, v));
    if (layout == LAYOUT_PTR) {
        qf_tensor *t = qf_tensor_new_ptr(&sh, NULL);
        cr_assert_not_null(t);
        for (size_t i = 0; i < n; i++)
            OK(qf_tensor_set_ptr(t, (int64_t)i, enc(v[i])));
        return el(1, t);
    }
    qf_tensor *tags = qf_tensor_new(QF_STRING, &sh);
    cr_assert_not_null(tags);
    for (size_t i = 0; i < n; i++) {
        char tag[16];
        tag_of(v[i], tag, sizeof(tag));
        OK(qf_tensor_set_string(tags, (int64_t)i, tag, strlen(tag)));
    }
    return el(2, vec_i32(n, v), tags);
}

/* Thread-safe (no Criterion calls): the int32 values of an element (rank
 * 0) or batch (rank 1) of an iq queue into out; false if it is malformed
 * or a row lost its tag. Frees e. */
static bool values_of(int layout, qf_element *e, int32_t *out, size_t cap, size_t *ret_n)
{
    *ret_n = 0;
    const qf_tensor *t = e ? qf_element_get(e, 0) : NULL;
    qf_dtype want = layout == LAYOUT_PTR ? QF_PTR : QF_INT32;
    bool ok = t && qf_element_size(e) == (layout == LAYOUT_BOXED ? 2u : 1u) &&
              qf_tensor_dtype(t) == want && qf_tensor_shape(t)->rank <= 1 &&
              qf_tensor_num_elements(t) <= (int64_t)cap;
    size_t n = ok ? (size_t)qf_tensor_num_elements(t) : 0;
    for (size_t i = 0; ok && i < n; i++)
        out[i] = layout == LAYOUT_PTR ? dec(qf_tensor_ptr(t, (int64_t)i))
                                      : ((const int32_t *)qf_tensor_cdata(t))[i];
    if (ok && layout == LAYOUT_BOXED) {
        const qf_tensor *s = qf_element_get(e, 1);
        ok = s && qf_tensor_dtype(s) == QF_STRING && qf_tensor_num_elements(s) == (int64_t)n;
        for (size_t i = 0; ok && i < n; i++) {
            char tag[16];
            tag_of(out[i], tag, sizeof(tag));
            const char *got = qf_tensor_string(s, (int64_t)i, NULL);
            ok = got && strcmp(got, tag) == 0;
        }
    }
    qf_element_free(e);
    *ret_n = n;
    return ok;
}

/* values_of() for the test's own thread. */
static size_t iq_values(int layout, qf_element *e, int32_t *out, size_t cap)
{
    cr_assert_not_null(e);
    size_t n;
    cr_assert(values_of(layout, e, out, cap, &n),
              "malformed element (components, dtype, size) or a row lost its pair");
    return n;
}

static int32_t iq_value(int layout, qf_element *e)
{
    cr_assert_not_null(e);
    cr_assert_eq(qf_tensor_shape(qf_element_get(e, 0))->rank, 0);
    int32_t v;
    iq_values(layout, e, &v, 1);
    return v;
}

/* Row i of a batch, without taking it. */
static int32_t iq_peek(int layout, const qf_element *b, int64_t i)
{
    const qf_tensor *t = qf_element_get(b, 0);
    cr_assert_not_null(t);
    return layout == LAYOUT_PTR ? dec(qf_tensor_ptr(t, i))
                                : ((const int32_t *)qf_tensor_cdata(t))[i];
}

static void enq_i(int layout, qf_queue *q, int32_t v)
{
    qf_element *e = iq_elem(layout, v);
    qf_code rc = qf_queue_enqueue(q, e);
    if (rc != QF_OK)
        qf_element_free(e);
    cr_assert_eq(rc, QF_OK, "enqueue %d: %s", (int)v, qf_last_message());
}

static void enq_many_i(int layout, qf_queue *q, size_t n, const int32_t *v)
{
    qf_element *b = iq_batch(layout, n, v);
    qf_code rc = qf_queue_enqueue_many(q, b, NULL);
    if (rc != QF_OK)
        qf_element_free(b);
    cr_assert_eq(rc, QF_OK, "enqueue_many: %s", qf_last_message());
}

static int32_t deq_i(int layout, qf_queue *q)
{
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    return iq_value(layout, e);
}

static void expect_drained(qf_queue *q)
{
    qf_element *e = NULL;
    REFUSED(qf_queue_dequeue(q, &e), QF_OUT_OF_RANGE, "is closed and has insufficient");
    cr_expect_null(e, "*ret_elem untouched on failure");
    cr_expect_eq(qf_queue_size(q), 0);
}

/* ------------------------------------------------------------- waiting */

static void nap(void)
{
    qft_nap(); /* a polling interval, not an ordering */
}

#define WAIT_UNTIL(cond)                                                                           \
    do {                                                                                           \
        int64_t end_ = qf_now_ns() + LONG_WAIT_NS;                                                 \
        while (!(cond) && qf_now_ns() < end_)                                                      \
            nap();                                                                                 \
        cr_assert((cond), "timed out waiting for %s", #cond);                                      \
    } while (0)

/* ------------------------------------------------ a call on its own thread */

typedef enum {
    OP_ENQUEUE,
    OP_ENQUEUE_MANY,
    OP_DEQUEUE,
    OP_DEQUEUE_MANY,
    OP_DEQUEUE_UP_TO,
} op_kind;

typedef struct {
    qf_queue *q;
    op_kind kind;
    int64_t n; /* dequeue_many / dequeue_up_to */
    /* enqueue: the element or batch; after a failure what the caller kept,
     * NULL after success. dequeue: the result (NULL on failure). */
    qf_element *elem;
    size_t enqueued;    /* enqueue_many's *ret_enqueued */
    bool out_untouched; /* dequeue failed and left *ret_elem alone */
    qf_code rc;
    char msg[256]; /* the thread's qf_last_message() after a failure */
    pthread_t th;
    atomic_int tid;
    atomic_bool done;
} op_thread;

static char untouched_marker;
#define UNTOUCHED ((qf_element *)(void *)&untouched_marker)

static void *op_main(void *arg)
{
    op_thread *t = arg;
    atomic_store(&t->tid, (int)syscall(SYS_gettid));
    qf_element *out = UNTOUCHED;
    switch (t->kind) {
    case OP_ENQUEUE:
        t->rc = qf_queue_enqueue(t->q, t->elem);
        break;
    case OP_ENQUEUE_MANY:
        t->rc = qf_queue_enqueue_many(t->q, t->elem, &t->enqueued);
        break;
    case OP_DEQUEUE:
        t->rc = qf_queue_dequeue(t->q, &out);
        break;
    case OP_DEQUEUE_MANY:
        t->rc = qf_queue_dequeue_many(t->q, t->n, &out);
        break;
    case OP_DEQUEUE_UP_TO:
        t->rc = qf_queue_dequeue_up_to(t->q, t->n, &out);
        break;
    }
    if (t->kind == OP_ENQUEUE || t->kind == OP_ENQUEUE_MANY) {
        if (t->rc == QF_OK)
            t->elem = NULL; /* the queue owns it now */
    } else if (t->rc == QF_OK) {
        t->elem = out;
    } else {
        t->out_untouched = out == UNTOUCHED;
        t->elem = NULL;
    }
    if (t->rc != QF_OK)
        snprintf(t->msg, sizeof(t->msg), "%s", qf_last_message());
    atomic_store(&t->done, true);
    return NULL;
}

static void op_start(op_thread *t, qf_queue *q, op_kind kind, qf_element *elem, int64_t n)
{
    memset(t, 0, sizeof(*t));
    t->q = q;
    t->kind = kind;
    t->elem = elem;
    t->n = n;
    atomic_init(&t->tid, 0);
    atomic_init(&t->done, false);
    cr_assert_eq(pthread_create(&t->th, NULL, op_main, t), 0);
}

/* Wait for the thread to finish. A thread still blocked after the long
 * wait is a failure; the queue is then cancelled to free it. */
static void op_join(op_thread *t)
{
    int64_t end = qf_now_ns() + LONG_WAIT_NS;
    while (!atomic_load(&t->done) && qf_now_ns() < end)
        nap();
    if (!atomic_load(&t->done)) {
        cr_expect_fail("the thread is still blocked; cancelling the queue to free it");
        qf_queue_close(t->q, true);
    }
    pthread_join(t->th, NULL);
}

/* Wait until the thread is blocked inside its queue call (the queue's own
 * locks live in the first 4 KiB of the queue object). */
static void wait_parked(op_thread *t)
{
    WAIT_UNTIL(atomic_load(&t->tid) != 0);
    int p = qft_wait_parked(atomic_load(&t->tid), t->q, 4096, &t->done, LONG_WAIT_NS);
    if (p < 0)
        cr_log_info("cannot read /proc/self/task/<tid>/syscall; slept instead");
    cr_assert_not(atomic_load(&t->done), "the call returned instead of blocking: %s (%s)",
                  qf_code_name(t->rc), t->msg);
    cr_assert(p != 0, "the thread never blocked");
}

/* ------------------------------------------------------------------ rng */

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* ====================================================================== */
/* Construction and attributes                                            */
/* ====================================================================== */

/* spec 5: the attributes a queue is made from: capacity, component types,
 * shapes (none when not given), names; the default op name. */
Test(queue, attributes_reflect_the_options_and_default_name)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_queue_options o = {.capacity = 7, .num_components = 2, .dtypes = dts};
    qf_queue *q = NULL;
    OK(qf_fifo_queue_new(&o, &q));
    cr_expect_str_eq(qf_queue_name(q), "fifo_queue");
    cr_expect_eq(qf_queue_get_kind(q), QF_QUEUE_FIFO);
    cr_expect_str_eq(qf_queue_kind_name(q), "FIFOQueue");
    cr_expect_eq(qf_queue_capacity(q), 7);
    cr_expect_eq(qf_queue_num_components(q), 2);
    cr_expect_eq(qf_queue_dtype(q, 0), QF_INT32);
    cr_expect_eq(qf_queue_dtype(q, 1), QF_FLOAT32);
    cr_expect_null(qf_queue_shape(q, 0), "no shapes given: none reported");
    cr_expect_null(qf_queue_component_name(q, 0));
    cr_expect_null(qf_queue_shared_name(q));
    cr_expect_not(qf_queue_is_inline(q));
    cr_expect_eq(qf_queue_size(q), 0);
    cr_expect_not(qf_queue_is_closed(q));
    qf_queue_unref(q);

    char name[8] = "mine";
    const char *names[2] = {"a", "b"};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(3, 2)};
    o.shapes = shs;
    o.names = names;
    o.name = name;
    OK(qf_fifo_queue_new(&o, &q));
    name[0] = 'X';
    cr_expect_str_eq(qf_queue_name(q), "mine", "the name is copied");
    cr_assert_not_null(qf_queue_shape(q, 1));
    cr_expect(qf_shape_equal(qf_queue_shape(q, 0), &shs[0]));
    cr_expect(qf_shape_equal(qf_queue_shape(q, 1), &shs[1]));
    cr_expect_str_eq(qf_queue_component_name(q, 0), "a");
    cr_expect_str_eq(qf_queue_component_name(q, 1), "b");
    qf_queue_unref(q);
}

/* spec 6: a negative capacity means unbounded, reported as INT32_MAX;
 * 10,000 elements go in without ever finding the queue full, and come out
 * in order (single and batch calls). */
Test(queue, negative_capacity_is_unbounded)
{
    enum { N = 10000 };
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, layout == LAYOUT_SCALAR ? -1 : -5);
        cr_expect_eq(qf_queue_capacity(q), INT32_MAX);
        for (int32_t i = 0; i < N / 2; i++) {
            qf_element *e = iq_elem(layout, i);
            qf_code rc = qf_queue_try_enqueue(q, e);
            if (rc != QF_OK)
                qf_element_free(e);
            cr_assert_eq(rc, QF_OK, "try_enqueue #%d: %s", (int)i, qf_last_message());
        }
        int32_t *v = malloc(N * sizeof(int32_t));
        cr_assert_not_null(v);
        for (int32_t i = 0; i < N / 2; i++)
            v[i] = N / 2 + i;
        qf_element *b = iq_batch(layout, N / 2, v);
        qf_code rc = qf_queue_try_enqueue_many(q, b);
        cr_expect_eq(rc, QF_OK, "try_enqueue_many of %d rows: %s (%s)", N / 2, qf_code_name(rc),
                     qf_last_message());
        if (rc != QF_OK) {
            qf_element_free(b);
            for (int32_t i = N / 2; i < N; i++)
                enq_i(layout, q, i); /* go on with single enqueues */
        }
        cr_expect_eq(qf_queue_size(q), N);
        for (int32_t i = 0; i < 100; i++) {
            qf_element *e = NULL;
            OK(qf_queue_try_dequeue(q, &e));
            cr_assert_eq(iq_value(layout, e), i);
        }
        qf_element *out = NULL;
        OK(qf_queue_try_dequeue_many(q, N - 100, &out));
        cr_assert_eq(iq_values(layout, out, v, N), (size_t)(N - 100));
        for (int32_t i = 0; i < N - 100; i++)
            cr_assert_eq(v[i], 100 + i, "element %d out of order", (int)(100 + i));
        cr_expect_eq(qf_queue_size(q), 0);
        free(v);
        qf_queue_unref(q);
    }
}

/* spec 6 (nearest C behaviour): capacity 0 is neither bounded nor
 * unbounded and is refused. */
Test(queue, capacity_zero_is_rejected)
{
    qf_dtype dt = QF_INT32;
    qf_queue_options o = {.capacity = 0, .num_components = 1, .dtypes = &dt};
    qf_queue *const sentinel = (qf_queue *)(void *)&untouched_marker;
    qf_queue *q = sentinel;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "capacity");
    cr_expect_eq(q, sentinel, "*ret_q untouched on failure");
    REFUSED(qf_ptr_queue_new(0, "p", 0, NULL, &q), QF_INVALID_ARGUMENT, "capacity");
    cr_expect_eq(q, sentinel);
}

/* spec 7: no component types. */
Test(queue, empty_component_types_are_rejected)
{
    qf_dtype dt = QF_INT32;
    qf_queue_options o = {.capacity = 4, .num_components = 0, .dtypes = &dt};
    qf_queue *const sentinel = (qf_queue *)(void *)&untouched_marker;
    qf_queue *q = sentinel;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "Empty component types for queue");
    cr_expect_eq(q, sentinel);
    o.num_components = 1;
    o.dtypes = NULL;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "Empty component types for queue");
    cr_expect_eq(q, sentinel);
    REFUSED(qf_fifo_queue_new(NULL, &q), QF_INVALID_ARGUMENT, "");
    cr_expect_eq(q, sentinel);
}

/* spec 7 (nearest C behaviour): a component type that is not a dtype. */
Test(queue, invalid_dtype_is_rejected)
{
    qf_dtype dts[2] = {QF_INT32, QF_DT_INVALID};
    qf_queue_options o = {.capacity = 4, .num_components = 2, .dtypes = dts};
    qf_queue *const sentinel = (qf_queue *)(void *)&untouched_marker;
    qf_queue *q = sentinel;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "");
    dts[1] = (qf_dtype)42;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "");
    cr_expect_eq(q, sentinel);
}

/* spec 8: shapes, when given, must be fully defined; a shape such as
 * (3,2) is one shape of one component. */
Test(queue, shapes_must_be_fully_defined)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(QF_UNKNOWN_DIM, 2)};
    qf_queue_options o = {.capacity = 4, .num_components = 2, .dtypes = dts, .shapes = shs};
    qf_queue *const sentinel = (qf_queue *)(void *)&untouched_marker;
    qf_queue *q = sentinel;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "All shapes must be fully defined");
    shs[1] = qf_shape_unknown();
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "All shapes must be fully defined");
    cr_expect_eq(q, sentinel);

    qf_dtype dt = QF_INT32;
    qf_shape one = QF_SHAPE(3, 2);
    q = new_queue(4, 1, &dt, &one, NULL, "q");
    int32_t v[6] = {1, 2, 3, 4, 5, 6};
    OK(qf_queue_enqueue(q, el(1, t_from(QF_INT32, QF_SHAPE(3, 2), v))));
    qf_element *b = NULL;
    OK(qf_queue_dequeue_many(q, 1, &b));
    cr_expect_str_eq(shape_txt(b, 0), "[1,3,2]");
    cr_expect_arr_eq(cdata(b, 0), v, sizeof(v));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 15 (queue side): component names must be distinct and non-empty. */
Test(queue, duplicate_or_empty_component_names_are_rejected)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    const char *dup[2] = {"a", "a"}, *empty[2] = {"a", ""};
    qf_queue_options o = {.capacity = 4, .num_components = 2, .dtypes = dts, .names = dup};
    qf_queue *const sentinel = (qf_queue *)(void *)&untouched_marker;
    qf_queue *q = sentinel;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "");
    o.names = empty;
    REFUSED(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT, "");
    cr_expect_eq(q, sentinel);
}

/* spec 9: two queues are independent. */
Test(queue, two_queues_are_independent)
{
    qf_queue *q = float_q(10), *q2 = float_q(10);
    enq_f(q, 1.0f);
    enq_f(q2, 2.0f);
    cr_expect_eq(qf_queue_size(q), 1);
    cr_expect_eq(qf_queue_size(q2), 1);
    cr_expect_eq(deq_f(q2), 2.0f);
    cr_expect_eq(deq_f(q), 1.0f);
    qf_queue_unref(q);
    qf_queue_unref(q2);
}

/* spec 10 (nearest C behaviour): two references address one queue. */
Test(queue, two_references_address_one_queue)
{
    qf_queue *q1 = float_q(1);
    qf_queue *q2 = qf_queue_ref(q1);
    cr_assert_eq(q2, q1);
    enq_f(q1, 10.0f);
    cr_expect_eq(qf_queue_size(q1), 1);
    cr_expect_eq(qf_queue_size(q2), 1);
    cr_expect_eq(deq_f(q2), 10.0f);
    cr_expect_eq(qf_queue_size(q1), 0);
    cr_expect_eq(qf_queue_size(q2), 0);
    enq_f(q2, 20.0f);
    qf_queue_unref(q2); /* the queue lives on through q1, element and all */
    cr_expect_eq(qf_queue_size(q1), 1);
    cr_expect_eq(deq_f(q1), 20.0f);
    qf_queue_unref(q1);
}

/* A FIFOQueue opened through `reg` under `shared`. */
static qf_code open_shared(qf_queue_registry *reg, const char *shared, int64_t cap, size_t n,
                           const qf_dtype *dts, const qf_shape *shapes, qf_queue **ret_q)
{
    qf_queue_options o = {.capacity = cap,
                          .num_components = n,
                          .dtypes = dts,
                          .shapes = shapes,
                          .shared_name = shared,
                          .registry = reg};
    return qf_fifo_queue_new(&o, ret_q);
}

/* spec 10: two opens with the same shared_name address one queue. Capacity
 * 1: enqueue 10.0 via q1, size 1 via both, q2 dequeues 10.0, size 0 via
 * both; enqueue 20.0 via q2 and q1 dequeues 20.0. */
Test(queue, same_shared_name_addresses_one_queue)
{
    qf_queue_registry *reg = NULL;
    OK(qf_queue_registry_new(&reg));
    qf_dtype dt = QF_FLOAT32;
    qf_queue *q1 = NULL, *q2 = NULL;
    OK(open_shared(reg, "q", 1, 1, &dt, NULL, &q1));
    OK(open_shared(reg, "q", 1, 1, &dt, NULL, &q2));
    cr_expect_str_eq(qf_queue_shared_name(q1), "q");
    enq_f(q1, 10.0f);
    cr_expect_eq(qf_queue_size(q1), 1);
    cr_expect_eq(qf_queue_size(q2), 1);
    cr_expect_eq(deq_f(q2), 10.0f);
    cr_expect_eq(qf_queue_size(q1), 0);
    cr_expect_eq(qf_queue_size(q2), 0);
    enq_f(q2, 20.0f);
    cr_expect_eq(deq_f(q1), 20.0f);
    qf_queue *found = qf_queue_registry_lookup(reg, "q");
    cr_expect_eq(found, q1);
    qf_queue_unref(found);
    qf_queue_unref(q1);
    qf_queue_unref(q2);
    qf_queue_registry_free(reg);
}

/* spec 9-10 with the process-wide registry (registry NULL): a shared name
 * is shared, no shared name is not. */
Test(queue, default_registry_shares_by_name_only)
{
    qf_dtype dt = QF_FLOAT32;
    qf_queue *a = NULL, *b = NULL;
    const char *name = "test_queue/default_registry_shares_by_name_only";
    OK(open_shared(NULL, name, 4, 1, &dt, NULL, &a));
    OK(open_shared(NULL, name, 4, 1, &dt, NULL, &b));
    enq_f(a, 1.0f);
    cr_expect_eq(qf_queue_size(b), 1);
    cr_expect_eq(deq_f(b), 1.0f);
    qf_queue *c = float_q(4);
    enq_f(c, 2.0f);
    cr_expect_eq(qf_queue_size(a), 0, "a queue without shared name is independent");
    cr_expect(qf_queue_registry_remove(qf_queue_registry_default(), name));
    qf_queue_unref(a);
    qf_queue_unref(b);
    qf_queue_unref(c);
}

/* spec 11: opening an existing shared queue with other settings fails and
 * leaves the existing queue alone: capacity 10 vs 15 ("capacity"), float32
 * vs int32 or 1 vs 2 components ("component types"), no shapes vs shapes,
 * shapes vs no shapes, [1,1,2,3] vs [1,1,2,4] ("component shapes"). */
Test(queue, shared_queue_opened_with_other_settings_is_refused)
{
    qf_queue_registry *reg = NULL;
    OK(qf_queue_registry_new(&reg));
    qf_dtype f = QF_FLOAT32, i = QF_INT32, ff[2] = {QF_FLOAT32, QF_FLOAT32};
    qf_shape s3 = QF_SHAPE(1, 1, 2, 3), s4 = QF_SHAPE(1, 1, 2, 4);
    qf_queue *a = NULL, *b = NULL, *c = NULL;
    qf_queue *const sentinel = (qf_queue *)(void *)&untouched_marker;
    qf_queue *x = sentinel;
    OK(open_shared(reg, "q_a", 10, 1, &f, NULL, &a));
    REFUSED(open_shared(reg, "q_a", 15, 1, &f, NULL, &x), QF_INVALID_ARGUMENT,
            "Shared queue 'q_a' has capacity 10 but requested capacity was 15");
    REFUSED(open_shared(reg, "q_a", 10, 1, &i, NULL, &x), QF_INVALID_ARGUMENT, "component types");
    REFUSED(open_shared(reg, "q_a", 10, 2, ff, NULL, &x), QF_INVALID_ARGUMENT, "component types");
    REFUSED(open_shared(reg, "q_a", 10, 1, &f, &s3, &x), QF_INVALID_ARGUMENT, "component shapes");
    OK(open_shared(reg, "q_b", 10, 1, &f, &s3, &b));
    REFUSED(open_shared(reg, "q_b", 10, 1, &f, NULL, &x), QF_INVALID_ARGUMENT, "component shapes");
    REFUSED(open_shared(reg, "q_b", 10, 1, &f, &s4, &x), QF_INVALID_ARGUMENT, "component shapes");
    cr_expect_eq(x, sentinel, "*ret_q untouched on failure");
    /* spec 6: a negative request matches an unbounded shared queue */
    OK(open_shared(reg, "q_c", -1, 1, &f, NULL, &c));
    x = NULL;
    OK(open_shared(reg, "q_c", -5, 1, &f, NULL, &x));
    cr_expect_eq(x, c);
    qf_queue_unref(x);
    enq_f(a, 3.0f);
    cr_expect_eq(qf_queue_capacity(a), 10);
    cr_expect_eq(deq_f(a), 3.0f, "the existing queue still works");
    qf_queue_unref(a);
    qf_queue_unref(b);
    qf_queue_unref(c);
    qf_queue_registry_free(reg);
}

/* ====================================================================== */
/* Enqueue validation                                                     */
/* ====================================================================== */

/* spec 12, 18: an element of the wrong shape is refused by every form of
 * enqueue; the queue keeps its one element and the caller keeps hers. */
Test(queue, enqueue_of_wrong_shape_is_refused_and_queue_unchanged)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(3, 2);
    qf_queue *q = new_queue(10, 1, &dt, &sh, NULL, "q");
    int32_t good[6] = {1, 2, 3, 4, 5, 6};
    OK(qf_queue_enqueue(q, el(1, t_from(QF_INT32, QF_SHAPE(3, 2), good))));
    qf_element *bad = el(1, t_from(QF_INT32, QF_SHAPE(2, 3), good));
    const char *want = "Shape mismatch in tuple component 0. Expected [3,2], got [2,3]";
    REFUSED(qf_queue_enqueue(q, bad), QF_INVALID_ARGUMENT, want);
    REFUSED(qf_queue_try_enqueue(q, bad), QF_INVALID_ARGUMENT, want);
    REFUSED(qf_queue_enqueue_until(q, bad, qf_deadline_in_s(1)), QF_INVALID_ARGUMENT, want);
    cr_expect_eq(qf_queue_size(q), 1);
    cr_expect_str_eq(shape_txt(bad, 0), "[2,3]", "the caller keeps her element");
    qf_element_free(bad);
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    cr_expect_str_eq(shape_txt(e, 0), "[3,2]");
    cr_expect_arr_eq(cdata(e, 0), good, sizeof(good));
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 13, 17: a component of the wrong dtype ("Type mismatch"), for
 * enqueue and enqueue_many; the queue is unchanged. */
Test(queue, enqueue_of_wrong_dtype_is_refused)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_shape shs[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue *q = new_queue(10, 2, dts, shs, NULL, "q");
    qf_element *e = el(2, qf_tensor_new_i32(1), qf_tensor_new_i32(2));
    const char *want = "Type mismatch in tuple component 1. Expected float, got int32";
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, want);
    qf_element_free(e);
    int32_t iv[2] = {1, 2};
    qf_element *b = el(2, vec_i32(2, iv), vec_i32(2, iv));
    REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT, want);
    REFUSED(qf_queue_try_enqueue_many(q, b), QF_INVALID_ARGUMENT, want);
    qf_element_free(b);
    e = el(2, qf_tensor_new_f32(1.0f), qf_tensor_new_f32(2.0f));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT,
            "Type mismatch in tuple component 0. Expected int32, got float");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 13 (second half, nearest C behaviour), 22: an empty enqueue_many of
 * the queue's dtypes (int32 and float32) succeeds and adds nothing. */
Test(queue, empty_enqueue_many_of_the_queue_dtypes_succeeds)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_queue *q = new_queue(10, 2, dts, NULL, NULL, "q");
    OK(qf_queue_enqueue_many(q, el(2, vec_i32(0, NULL), vec_f32(0, NULL)), NULL));
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 17: the wrong number of components, for enqueue and enqueue_many; a
 * missing component. */
Test(queue, wrong_number_of_components_is_refused)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_queue *q = new_queue(10, 2, dts, NULL, NULL, "q");
    qf_element *e = el(1, qf_tensor_new_i32(1));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT,
            "Wrong number of components in tuple. Expected 2, got 1");
    qf_element_free(e);
    e = el(3, qf_tensor_new_i32(1), qf_tensor_new_f32(1.0f), qf_tensor_new_f32(1.0f));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT,
            "Wrong number of components in tuple. Expected 2, got 3");
    qf_element_free(e);
    int32_t iv[2] = {1, 2};
    qf_element *b = el(1, vec_i32(2, iv));
    REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT,
            "Wrong number of components in tuple. Expected 2, got 1");
    qf_element_free(b);
    e = qf_element_new(2);
    cr_assert_not_null(e);
    OK(qf_element_set(e, 0, qf_tensor_new_i32(1)));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* Bad input (issue 2): NULL queue, element, batch or output pointer. */
Test(queue, null_arguments_are_refused)
{
    qf_queue *q = float_scalar_q(4);
    qf_element *e = el(1, qf_tensor_new_f32(1.0f)), *out = NULL;
    REFUSED(qf_queue_enqueue(NULL, e), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_try_enqueue(NULL, e), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_enqueue(q, NULL), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_enqueue_many(q, NULL, NULL), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_enqueue_many(NULL, e, NULL), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_dequeue(NULL, &out), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_dequeue_many(NULL, 1, &out), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_dequeue_up_to(NULL, 1, &out), QF_INVALID_ARGUMENT, "");
    OK(qf_queue_enqueue(q, e));
    REFUSED(qf_queue_dequeue(q, NULL), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_dequeue_many(q, 1, NULL), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_dequeue_up_to(q, 1, NULL), QF_INVALID_ARGUMENT, "");
    REFUSED(qf_queue_close(NULL, false), QF_INVALID_ARGUMENT, "");
    cr_expect_eq(qf_queue_size(q), 1, "nothing was taken");
    cr_expect_null(out);
    qf_queue_unref(q);
    qf_queue_unref(NULL);
}

/* spec 14, 18, 19: enqueue_many components must agree on the 0th dimension
 * ([1,2,3] vs [1,2]), with and without queue shapes; the queue and the
 * caller's batch are unchanged. Without shapes TensorFlow says so in those
 * words (spec 19); with shapes every component must be [rows] + its shape,
 * rows being component 0's, and a wrong 0th dimension is a shape mismatch
 * like any other (spec 18). */
Test(queue, enqueue_many_components_must_agree_on_dimension_0)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_shape shs[2] = {qf_shape_scalar(), qf_shape_scalar()};
    for (int with_shapes = 0; with_shapes < 2; with_shapes++) {
        const char *want = with_shapes
                               ? "Shape mismatch in tuple component 1. Expected [3], got [2]"
                               : "All input tensors must have the same size in the 0th "
                                 "dimension. Component 1 has 2, and should have 3";
        qf_queue *q = new_queue(10, 2, dts, with_shapes ? shs : NULL, NULL, "q");
        int32_t iv[3] = {1, 2, 3};
        float fv[2] = {1.0f, 2.0f};
        qf_element *b = el(2, vec_i32(3, iv), vec_f32(2, fv));
        REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT, want);
        REFUSED(qf_queue_try_enqueue_many(q, b), QF_INVALID_ARGUMENT, want);
        REFUSED(qf_queue_enqueue_many_until(q, b, qf_deadline_in_s(1), NULL), QF_INVALID_ARGUMENT,
                want);
        cr_expect_eq(qf_queue_size(q), 0);
        cr_expect_str_eq(shape_txt(b, 0), "[3]");
        cr_expect_str_eq(shape_txt(b, 1), "[2]");
        qf_element_free(b);
        qf_queue_unref(q);
    }
}

/* spec 14: every component of an enqueue_many batch needs rank >= 1; a
 * scalar 7 is refused. */
Test(queue, enqueue_many_of_a_scalar_is_refused)
{
    qf_dtype dt = QF_INT32;
    qf_queue *q = new_queue(10, 1, &dt, NULL, NULL, "q");
    qf_element *b = el(1, qf_tensor_new_i32(7));
    REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT, "rank >= 1");
    qf_element_free(b);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 18: queue shapes ((2,2),(3,3)); a [3,4] second component is refused
 * naming both shapes; for enqueue_many the batch dimension is in front. */
Test(queue, shape_mismatch_names_expected_and_actual_shapes)
{
    qf_dtype dts[2] = {QF_INT32, QF_INT32};
    qf_shape shs[2] = {QF_SHAPE(2, 2), QF_SHAPE(3, 3)};
    qf_queue *q = new_queue(10, 2, dts, shs, NULL, "q");
    int32_t z[24] = {0};
    qf_element *e = el(2, t_from(QF_INT32, QF_SHAPE(2, 2), z), t_from(QF_INT32, QF_SHAPE(3, 4), z));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT,
            "Shape mismatch in tuple component 1. Expected [3,3], got [3,4]");
    qf_element_free(e);
    qf_element *b =
        el(2, t_from(QF_INT32, QF_SHAPE(2, 2, 2), z), t_from(QF_INT32, QF_SHAPE(2, 3, 4), z));
    REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT,
            "Shape mismatch in tuple component 1. Expected [2,3,3], got [2,3,4]");
    qf_element_free(b);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* ====================================================================== */
/* Names (spec 15-16)                                                     */
/* ====================================================================== */

static const char *const FIS[3] = {"f", "i", "s"};

static qf_queue *fis_queue(int64_t cap)
{
    qf_dtype dts[3] = {QF_FLOAT32, QF_INT32, QF_STRING};
    qf_shape shs[3] = {qf_shape_scalar(), qf_shape_scalar(), qf_shape_scalar()};
    return new_queue(cap, 3, dts, shs, FIS, "q");
}

/* spec 15: a queue with names takes only elements with names ("enqueue a
 * dictionary"), a queue without names only elements without ("must have
 * names"). */
Test(queue, names_required_exactly_when_the_queue_has_names)
{
    qf_queue *q = fis_queue(10);
    qf_element *e = el(3, qf_tensor_new_f32(1.0f), qf_tensor_new_i32(1), qf_tensor_new_cstr("a"));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "enqueue a dictionary");
    qf_element_free(e);
    float fv[1] = {1.0f};
    int32_t iv[1] = {1};
    const char *sv[1] = {"a"};
    qf_element *b = el(3, vec_f32(1, fv), vec_i32(1, iv), vec_str(1, sv));
    REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT, "enqueue a dictionary");
    qf_element_free(b);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);

    q = float_q(10);
    const char *a[1] = {"a"};
    e = named(el(1, qf_tensor_new_f32(12.0f)), a);
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "must have names");
    qf_element_free(e);
    float two[2] = {12.0f, 13.0f};
    b = named(el(1, vec_f32(2, two)), a);
    REFUSED(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT, "must have names");
    qf_element_free(b);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 15: an unknown name (the right number of components). */
Test(queue, unknown_component_name_is_a_name_mismatch)
{
    qf_queue *q = fis_queue(10);
    const char *fix[3] = {"f", "i", "x"};
    qf_element *e =
        named(el(3, qf_tensor_new_f32(1.0f), qf_tensor_new_i32(1), qf_tensor_new_cstr("a")), fix);
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "match names of Queue");
    cr_expect_str_eq(qf_element_name(e, 2), "x", "the caller's element is unchanged");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 15: a missing name ({f, i} for a queue named f, i, s) is a name
 * mismatch: TensorFlow's tests match "match names of Queue". */
Test(queue, missing_component_name_is_a_name_mismatch)
{
    qf_queue *q = fis_queue(10);
    const char *fi[2] = {"f", "i"};
    qf_element *e = named(el(2, qf_tensor_new_f32(1.0f), qf_tensor_new_i32(1)), fi);
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "match names of Queue");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 15: an extra name ({f, i, s, x}) is a name mismatch too. */
Test(queue, extra_component_name_is_a_name_mismatch)
{
    qf_queue *q = fis_queue(10);
    const char *fisx[4] = {"f", "i", "s", "x"};
    qf_element *e = named(el(4, qf_tensor_new_f32(1.0f), qf_tensor_new_i32(1),
                             qf_tensor_new_cstr("a"), qf_tensor_new_i32(2)),
                          fisx);
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "match names of Queue");
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 16: with names set, dequeue, dequeue_many and dequeue_up_to return
 * elements carrying the queue's names; the values are the item's
 * ({f:10.0, i:123, s:"aa"}, ..., enqueue_many {f:[40,50], i:[126,127],
 * s:["dd","ee"]}), enqueued with names in the queue's order. */
Test(queue, dequeued_elements_and_batches_carry_the_names)
{
    qf_queue *q = fis_queue(10);
    const float f[3] = {10.0f, 20.0f, 30.0f};
    const int32_t i3[3] = {123, 124, 125};
    const char *s3[3] = {"aa", "bb", "cc"};
    for (int k = 0; k < 3; k++)
        OK(qf_queue_enqueue(q, named(el(3, qf_tensor_new_f32(f[k]), qf_tensor_new_i32(i3[k]),
                                        qf_tensor_new_cstr(s3[k])),
                                     FIS)));
    float fv[2] = {40.0f, 50.0f};
    int32_t iv[2] = {126, 127};
    const char *sv[2] = {"dd", "ee"};
    OK(qf_queue_enqueue_many(q, named(el(3, vec_f32(2, fv), vec_i32(2, iv), vec_str(2, sv)), FIS),
                             NULL));
    OK(qf_queue_enqueue(
        q, named(el(3, qf_tensor_new_f32(60.0f), qf_tensor_new_i32(128), qf_tensor_new_cstr("ff")),
                 FIS)));
    cr_expect_eq(qf_queue_size(q), 6);

    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    cr_assert(qf_element_has_names(e));
    for (size_t c = 0; c < 3; c++)
        cr_expect_str_eq(qf_element_name(e, c), FIS[c]);
    cr_assert_not_null(qf_element_get_by_name(e, "i"));
    cr_expect_eq(*(const int32_t *)qf_tensor_cdata(qf_element_get_by_name(e, "i")), 123);
    cr_expect_eq(*(const float *)qf_tensor_cdata(qf_element_get_by_name(e, "f")), 10.0f);
    cr_expect_str_eq(qf_tensor_string(qf_element_get_by_name(e, "s"), 0, NULL), "aa");
    qf_element_free(e);

    OK(qf_queue_dequeue_many(q, 2, &e));
    cr_assert(qf_element_has_names(e));
    for (size_t c = 0; c < 3; c++)
        cr_expect_str_eq(qf_element_name(e, c), FIS[c]);
    const int32_t *i = qf_tensor_cdata(qf_element_get_by_name(e, "i"));
    cr_expect(i[0] == 124 && i[1] == 125, "i = [%d, %d]", (int)i[0], (int)i[1]);
    cr_expect_eq(f32_at(e, 0, 0), 20.0f);
    cr_expect_eq(f32_at(e, 0, 1), 30.0f);
    cr_expect_str_eq(str_at(e, 2, 0), "bb");
    cr_expect_str_eq(str_at(e, 2, 1), "cc");
    qf_element_free(e);

    OK(qf_queue_dequeue_many(q, 2, &e));
    cr_assert(qf_element_has_names(e));
    i = qf_tensor_cdata(qf_element_get_by_name(e, "i"));
    cr_expect(i[0] == 126 && i[1] == 127, "i = [%d, %d]", (int)i[0], (int)i[1]);
    cr_expect_eq(f32_at(e, 0, 0), 40.0f);
    cr_expect_eq(f32_at(e, 0, 1), 50.0f);
    cr_expect_str_eq(str_at(e, 2, 0), "dd");
    cr_expect_str_eq(str_at(e, 2, 1), "ee");
    qf_element_free(e);

    OK(qf_queue_close(q, false));
    OK(qf_queue_dequeue_up_to(q, 5, &e));
    cr_assert(qf_element_has_names(e));
    cr_expect_str_eq(qf_element_name(e, 1), "i");
    cr_expect_eq(rows(e), 1);
    cr_expect_eq(i32_at(e, 1, 0), 128);
    cr_expect_str_eq(str_at(e, 2, 0), "ff");
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 15-16: a dictionary's keys have no order: an element naming its
 * components in another order (all of one dtype here) is put in the
 * queue's order. */
Test(queue, names_in_another_order_are_reordered_same_dtypes)
{
    qf_dtype dts[3] = {QF_INT32, QF_INT32, QF_INT32};
    const char *abc[3] = {"a", "b", "c"}, *cab[3] = {"c", "a", "b"};
    qf_queue *q = new_queue(10, 3, dts, NULL, abc, "q");
    OK(qf_queue_enqueue(
        q, named(el(3, qf_tensor_new_i32(3), qf_tensor_new_i32(1), qf_tensor_new_i32(2)), cab)));
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    for (int c = 0; c < 3; c++) {
        cr_expect_str_eq(qf_element_name(e, (size_t)c), abc[c]);
        cr_expect_eq(i32_at(e, (size_t)c, 0), c + 1);
    }
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 15-16: the same with components of different dtypes, as in the
 * item's example (f float, i int32, s string), for enqueue ({i, s, f},
 * {s, f, i}) and enqueue_many ({i, f, s}). */
Test(queue, names_in_another_order_are_reordered_mixed_dtypes)
{
    qf_queue *q = fis_queue(10);
    const char *isf[3] = {"i", "s", "f"}, *sfi[3] = {"s", "f", "i"}, *ifs[3] = {"i", "f", "s"};
    float fv[2] = {40.0f, 50.0f};
    int32_t iv[2] = {126, 127};
    const char *sv[2] = {"dd", "ee"};
    qf_element *in[3] = {
        named(el(3, qf_tensor_new_i32(124), qf_tensor_new_cstr("bb"), qf_tensor_new_f32(20.0f)),
              isf),
        named(el(3, qf_tensor_new_cstr("cc"), qf_tensor_new_f32(30.0f), qf_tensor_new_i32(125)),
              sfi),
        named(el(3, vec_i32(2, iv), vec_f32(2, fv), vec_str(2, sv)), ifs),
    };
    for (int k = 0; k < 3; k++) {
        qf_code rc = k < 2 ? qf_queue_enqueue(q, in[k]) : qf_queue_enqueue_many(q, in[k], NULL);
        cr_expect_eq(rc, QF_OK, "%s #%d: %s (%s)", k < 2 ? "enqueue" : "enqueue_many", k,
                     qf_code_name(rc), qf_last_message());
        if (rc != QF_OK)
            qf_element_free(in[k]);
    }
    if (qf_queue_size(q) == 4) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue_many(q, 4, &e));
        for (size_t c = 0; c < 3; c++)
            cr_expect_str_eq(qf_element_name(e, c), FIS[c]);
        const float want_f[4] = {20.0f, 30.0f, 40.0f, 50.0f};
        const int32_t want_i[4] = {124, 125, 126, 127};
        const char *want_s[4] = {"bb", "cc", "dd", "ee"};
        for (int k = 0; k < 4; k++) {
            cr_expect_eq(f32_at(e, 0, k), want_f[k]);
            cr_expect_eq(i32_at(e, 1, k), want_i[k]);
            cr_expect_str_eq(str_at(e, 2, k), want_s[k]);
        }
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* spec 15-16 on an inline queue (one QF_PTR scalar named "x"): names are
 * required and come back on dequeued elements and batches. */
Test(queue, names_on_an_inline_queue)
{
    qf_dtype dt = QF_PTR;
    qf_shape sh = qf_shape_scalar();
    const char *x[1] = {"x"};
    qf_queue *q = new_queue(4, 1, &dt, &sh, x, "q");
    cr_expect(qf_queue_is_inline(q));
    qf_element *e = el(1, qf_tensor_new_scalar_ptr(enc(1), NULL));
    REFUSED(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT, "enqueue a dictionary");
    OK(qf_queue_enqueue(q, named(e, x)));
    OK(qf_queue_enqueue(q, named(el(1, qf_tensor_new_scalar_ptr(enc(2), NULL)), x)));
    OK(qf_queue_dequeue(q, &e));
    cr_assert(qf_element_has_names(e));
    cr_expect_str_eq(qf_element_name(e, 0), "x");
    cr_assert_not_null(qf_element_get_by_name(e, "x"));
    cr_expect_eq(dec(qf_tensor_ptr(qf_element_get_by_name(e, "x"), 0)), 1);
    qf_element_free(e);
    OK(qf_queue_dequeue_many(q, 1, &e));
    cr_assert(qf_element_has_names(e));
    cr_expect_str_eq(qf_element_name(e, 0), "x");
    cr_expect_eq(dec(qf_tensor_ptr(qf_element_get(e, 0), 0)), 2);
    qf_element_free(e);
    qf_queue_unref(q);
}

/* ====================================================================== */
/* Dequeue validation and zero-sized operations                           */
/* ====================================================================== */

/* spec 20: without shapes, dequeue_many and dequeue_up_to are refused,
 * even for n = 0, before and after elements were enqueued, in every form;
 * plain dequeue works. */
Test(queue, batch_dequeues_need_shapes)
{
    const char *want = "FIFOQueue's DequeueMany and DequeueUpTo require the components to have "
                       "specified shapes.";
    qf_queue *q = float_q(10);
    for (int round = 0; round < 2; round++) {
        for (int64_t n = 0; n <= 1; n++) {
            qf_element *b = UNTOUCHED;
            REFUSED(qf_queue_dequeue_many(q, n, &b), QF_INVALID_ARGUMENT, want);
            REFUSED(qf_queue_dequeue_up_to(q, n, &b), QF_INVALID_ARGUMENT, want);
            REFUSED(qf_queue_try_dequeue_many(q, n, &b), QF_INVALID_ARGUMENT, want);
            REFUSED(qf_queue_try_dequeue_up_to(q, n, &b), QF_INVALID_ARGUMENT, want);
            REFUSED(qf_queue_dequeue_many_until(q, n, qf_deadline_in_s(1), &b), QF_INVALID_ARGUMENT,
                    want);
            REFUSED(qf_queue_dequeue_up_to_until(q, n, qf_deadline_in_s(1), &b),
                    QF_INVALID_ARGUMENT, want);
            cr_expect_eq(b, UNTOUCHED);
        }
        if (round == 0)
            enq_f(q, 10.0f);
    }
    cr_expect_eq(qf_queue_size(q), 1);
    cr_expect_eq(deq_f(q), 10.0f);
    qf_queue_unref(q);
}

/* spec 21: a negative count. */
Test(queue, negative_batch_count_is_refused)
{
    qf_queue *q = float_scalar_q(10);
    enq_f(q, 1.0f);
    qf_element *b = UNTOUCHED;
    REFUSED(qf_queue_dequeue_many(q, -1, &b), QF_INVALID_ARGUMENT,
            "DequeueManyOp requested -1 < 0 elements");
    REFUSED(qf_queue_try_dequeue_many(q, -1, &b), QF_INVALID_ARGUMENT,
            "DequeueManyOp requested -1 < 0 elements");
    REFUSED(qf_queue_dequeue_up_to(q, -1, &b), QF_INVALID_ARGUMENT,
            "DequeueUpToOp requested -1 < 0 elements");
    REFUSED(qf_queue_dequeue_up_to_until(q, -1, qf_deadline_in_s(1), &b), QF_INVALID_ARGUMENT,
            "DequeueUpToOp requested -1 < 0 elements");
    cr_expect_eq(b, UNTOUCHED);
    cr_expect_eq(qf_queue_size(q), 1);
    qf_queue_unref(q);
}

/* A bad element is refused as bad before the queue's state counts: on a
 * closed queue it gets QF_INVALID_ARGUMENT, not QF_CANCELLED, whatever the
 * kind (qf_queue.h; checked by tests/fuzz/fuzz_queue.c too). And
 * dequeue_up_to(0) on a closed, drained queue is an empty batch (spec 23). */
Test(queue, bad_elements_are_refused_as_bad_on_closed_queues)
{
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = 4, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *qs[4] = {NULL, NULL, NULL, NULL};
    OK(qf_fifo_queue_new(&o, &qs[0]));
    OK(qf_random_shuffle_queue_new(&o, &qs[1]));
    OK(qf_priority_queue_new(&o, &qs[2]));
    qf_shape vec = QF_SHAPE(QF_UNKNOWN_DIM);
    o.shapes = &vec;
    OK(qf_padding_fifo_queue_new(&o, &qs[3]));
    for (int k = 0; k < 4; k++) {
        qf_queue *q = qs[k];
        OK(qf_queue_close(q, false));
        float f = 1;
        qf_element *wrong_dtype = el(1, t_from(QF_FLOAT32, qf_shape_scalar(), &f));
        qf_element *too_many =
            el(3, qf_tensor_new_i64(1), qf_tensor_new_i64(2), qf_tensor_new_i64(3));
        cr_expect_eq(qf_queue_try_enqueue(q, wrong_dtype), QF_INVALID_ARGUMENT, "kind %d", k);
        cr_expect_eq(qf_queue_enqueue(q, too_many), QF_INVALID_ARGUMENT, "kind %d", k);
        qf_element *scalar_batch = k == 2 ? el(2, qf_tensor_new_i64(1), qf_tensor_new_i64(2))
                                          : el(1, qf_tensor_new_i64(1));
        cr_expect_eq(qf_queue_try_enqueue_many(q, scalar_batch), QF_INVALID_ARGUMENT, "kind %d", k);
        qf_element *b = NULL;
        cr_expect_eq(qf_queue_try_dequeue_up_to(q, 0, &b), QF_OK, "kind %d", k);
        cr_expect(b && qf_tensor_shape(qf_element_get(b, 0))->dims[0] == 0, "kind %d", k);
        qf_element_free(b);
        qf_element_free(wrong_dtype);
        qf_element_free(too_many);
        qf_element_free(scalar_batch);
        qf_queue_unref(q);
    }
}

/* spec 22: an enqueue_many of zero rows ([0,2,3]) succeeds and leaves the
 * size at 0, also on a full queue (try form) and on a closed queue. */
Test(queue, zero_row_enqueue_many_succeeds_even_when_closed)
{
    qf_dtype dt = QF_FLOAT32;
    qf_shape sh = QF_SHAPE(2, 3);
    qf_queue *q = new_queue(1, 1, &dt, &sh, NULL, "q");
    OK(qf_queue_enqueue_many(q, el(1, t_from(QF_FLOAT32, QF_SHAPE(0, 2, 3), NULL)), NULL));
    cr_expect_eq(qf_queue_size(q), 0);
    float z[6] = {0};
    OK(qf_queue_enqueue(q, el(1, t_from(QF_FLOAT32, QF_SHAPE(2, 3), z))));
    OK(qf_queue_try_enqueue_many(q, el(1, t_from(QF_FLOAT32, QF_SHAPE(0, 2, 3), NULL))));
    cr_expect_eq(qf_queue_size(q), 1);
    OK(qf_queue_close(q, false));
    OK(qf_queue_enqueue_many(q, el(1, t_from(QF_FLOAT32, QF_SHAPE(0, 2, 3), NULL)), NULL));
    OK(qf_queue_try_enqueue_many(q, el(1, t_from(QF_FLOAT32, QF_SHAPE(0, 2, 3), NULL))));
    OK(qf_queue_enqueue_many_until(q, el(1, t_from(QF_FLOAT32, QF_SHAPE(0, 2, 3), NULL)),
                                   qf_deadline_in_s(1), NULL));
    cr_expect_eq(qf_queue_size(q), 1);
    qf_queue_unref(q);
}

static void expect_empty_batch(qf_element *b)
{
    cr_assert_not_null(b);
    cr_assert_eq(qf_element_size(b), 2);
    cr_expect_eq(qf_tensor_dtype(qf_element_get(b, 0)), QF_FLOAT32);
    cr_expect_eq(qf_tensor_dtype(qf_element_get(b, 1)), QF_INT32);
    cr_expect_str_eq(shape_txt(b, 0), "[0]");
    cr_expect_str_eq(shape_txt(b, 1), "[0,2]");
    qf_element_free(b);
}

/* spec 23: dequeue_many(0) and dequeue_up_to(0) return an empty batch of
 * shape [0]+shape at once, with 0 or 1 elements in the queue, and on a
 * closed empty queue too; they take nothing. */
Test(queue, zero_count_batch_dequeues_return_empty_batches_at_once)
{
    qf_dtype dts[2] = {QF_FLOAT32, QF_INT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    qf_queue *q = new_queue(1, 2, dts, shs, NULL, "q");
    for (int round = 0; round < 3; round++) {
        qf_element *b = NULL;
        OK(qf_queue_dequeue_many(q, 0, &b));
        expect_empty_batch(b);
        OK(qf_queue_dequeue_up_to(q, 0, &b));
        expect_empty_batch(b);
        OK(qf_queue_try_dequeue_many(q, 0, &b));
        expect_empty_batch(b);
        OK(qf_queue_try_dequeue_up_to(q, 0, &b));
        expect_empty_batch(b);
        OK(qf_queue_dequeue_many_until(q, 0, QF_NO_WAIT, &b));
        expect_empty_batch(b);
        OK(qf_queue_dequeue_up_to_until(q, 0, QF_NO_WAIT, &b));
        expect_empty_batch(b);
        if (round == 0) {
            int32_t iv[2] = {1, 2};
            OK(qf_queue_enqueue(q, el(2, qf_tensor_new_f32(1.0f), vec_i32(2, iv))));
        } else if (round == 1) {
            cr_expect_eq(qf_queue_size(q), 1, "a zero-count dequeue takes nothing");
            qf_element *e = NULL;
            OK(qf_queue_dequeue(q, &e));
            qf_element_free(e);
            OK(qf_queue_close(q, false));
        }
    }
    qf_queue_unref(q);
}

/* ====================================================================== */
/* size, is_closed, close, result shapes                                  */
/* ====================================================================== */

/* spec 24: size counts what a dequeue could take; reading it consumes
 * nothing. */
Test(queue, size_counts_elements_and_reading_it_consumes_nothing)
{
    qf_queue *q = float_q(1);
    cr_expect_eq(qf_queue_size(q), 0);
    enq_f(q, 10.0f);
    cr_expect_eq(qf_queue_size(q), 1);
    cr_expect_eq(deq_f(q), 10.0f);
    cr_expect_eq(qf_queue_size(q), 0);
    enq_f(q, 10.0f);
    for (int i = 0; i < 500; i++)
        cr_assert_eq(qf_queue_size(q), 1);
    qf_queue_unref(q);
}

/* spec 25, 34, 2: is_closed is false until a close of either kind; a second
 * plain close fails ("already closed"), a cancelling close of a closed
 * queue succeeds. */
Test(queue, is_closed_after_either_close_and_second_plain_close_fails)
{
    qf_queue *q = float_q(4);
    cr_expect_not(qf_queue_is_closed(q));
    OK(qf_queue_close(q, false));
    cr_expect(qf_queue_is_closed(q));
    REFUSED(qf_queue_close(q, false), QF_CANCELLED, "Queue 'q' is already closed.");
    OK(qf_queue_close(q, true));
    cr_expect(qf_queue_is_closed(q));
    qf_queue_unref(q);

    q = float_q(4);
    OK(qf_queue_close(q, true));
    cr_expect(qf_queue_is_closed(q));
    OK(qf_queue_close(q, true));
    REFUSED(qf_queue_close(q, false), QF_CANCELLED, "already closed");
    qf_queue_unref(q);
}

/* spec 26 (run-time shapes), 27: dequeue gives each component's queue
 * shape, dequeue_many(4) [4]+shape (float [4], int [4,2]), dequeue_up_to
 * [k]+shape; a one-component queue gives a one-component element. */
Test(queue, results_have_the_queue_shapes)
{
    qf_dtype dts[2] = {QF_FLOAT32, QF_INT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    qf_queue *q = new_queue(10, 2, dts, shs, NULL, "q");
    for (int i = 0; i < 6; i++) {
        int32_t iv[2] = {i, -i};
        OK(qf_queue_enqueue(q, el(2, qf_tensor_new_f32((float)i), vec_i32(2, iv))));
    }
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    cr_expect_str_eq(shape_txt(e, 0), "[]");
    cr_expect_str_eq(shape_txt(e, 1), "[2]");
    qf_element_free(e);
    OK(qf_queue_dequeue_many(q, 4, &e));
    cr_expect_str_eq(shape_txt(e, 0), "[4]");
    cr_expect_str_eq(shape_txt(e, 1), "[4,2]");
    qf_element_free(e);
    OK(qf_queue_close(q, false));
    OK(qf_queue_dequeue_up_to(q, 3, &e));
    cr_expect_str_eq(shape_txt(e, 0), "[1]");
    cr_expect_str_eq(shape_txt(e, 1), "[1,2]");
    qf_element_free(e);
    qf_queue_unref(q);

    q = float_q(10);
    enq_f(q, 1.0f);
    OK(qf_queue_dequeue(q, &e));
    cr_expect_eq(qf_element_size(e), 1);
    qf_element_free(e);
    qf_queue_unref(q);
}

/* ====================================================================== */
/* Basic order (spec 43-49)                                               */
/* ====================================================================== */

/* spec 43 */
Test(queue, enqueue_then_dequeue_in_order)
{
    qf_queue *q = float_q(10);
    enq_f(q, 10.0f);
    enq_f(q, 20.0f);
    enq_f(q, 30.0f);
    cr_expect_eq(deq_f(q), 10.0f);
    cr_expect_eq(deq_f(q), 20.0f);
    cr_expect_eq(deq_f(q), 30.0f);
    qf_queue_unref(q);
}

/* spec 44: two components (int32, float32) stay paired and in order. */
Test(queue, two_component_elements_in_order)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_queue *q = new_queue(10, 2, dts, NULL, NULL, "q");
    int32_t iv[3] = {5, 10, 15};
    float fv[3] = {10.0f, 20.0f, 30.0f};
    for (int k = 0; k < 3; k++)
        OK(qf_queue_enqueue(q, el(2, qf_tensor_new_i32(iv[k]), qf_tensor_new_f32(fv[k]))));
    for (int k = 0; k < 3; k++) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(i32_at(e, 0, 0), iv[k]);
        cr_expect_eq(f32_at(e, 1, 0), fv[k]);
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* spec 45: enqueue_many([10,20,30,40]) twice gives eight dequeues in
 * order; with an int component [[1,2],[3,4],[5,6],[7,8]] the rows stay
 * paired. */
Test(queue, enqueue_many_twice_then_single_dequeues)
{
    float fv[4] = {10.0f, 20.0f, 30.0f, 40.0f};
    qf_queue *q = float_q(10);
    enq_many_f(q, 4, fv);
    enq_many_f(q, 4, fv);
    for (int k = 0; k < 8; k++)
        cr_expect_eq(deq_f(q), fv[k % 4]);
    qf_queue_unref(q);

    qf_dtype dts[2] = {QF_FLOAT32, QF_INT32};
    q = new_queue(10, 2, dts, NULL, NULL, "q");
    int32_t iv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int r = 0; r < 2; r++)
        OK(qf_queue_enqueue_many(q, el(2, vec_f32(4, fv), t_from(QF_INT32, QF_SHAPE(4, 2), iv)),
                                 NULL));
    for (int k = 0; k < 8; k++) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(f32_at(e, 0, 0), fv[k % 4]);
        cr_expect_str_eq(shape_txt(e, 1), "[2]");
        cr_expect_eq(i32_at(e, 1, 0), iv[2 * (k % 4)]);
        cr_expect_eq(i32_at(e, 1, 1), iv[2 * (k % 4) + 1]);
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* spec 46: component 0 as scalars, component 1 as (2,) rows; size 4. */
Test(queue, enqueue_many_splits_every_component_along_dimension_0)
{
    qf_dtype dts[2] = {QF_INT32, QF_INT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    qf_queue *q = new_queue(10, 2, dts, shs, NULL, "q");
    int32_t a[4] = {1, 2, 3, 4}, b[8] = {1, 1, 2, 2, 3, 3, 4, 4};
    OK(qf_queue_enqueue_many(q, el(2, vec_i32(4, a), t_from(QF_INT32, QF_SHAPE(4, 2), b)), NULL));
    cr_expect_eq(qf_queue_size(q), 4);
    for (int k = 0; k < 4; k++) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(i32_at(e, 0, 0), a[k]);
        cr_expect_eq(i32_at(e, 1, 0), a[k]);
        cr_expect_eq(i32_at(e, 1, 1), a[k]);
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* (float [], int32 [2]) queue holding 10..100 paired with [1,2]..[19,20]. */
static qf_queue *ten_pairs(void)
{
    qf_dtype dts[2] = {QF_FLOAT32, QF_INT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    qf_queue *q = new_queue(10, 2, dts, shs, NULL, "q");
    float fv[10];
    int32_t iv[20];
    for (int k = 0; k < 10; k++) {
        fv[k] = 10.0f * (float)(k + 1);
        iv[2 * k] = 2 * k + 1;
        iv[2 * k + 1] = 2 * k + 2;
    }
    OK(qf_queue_enqueue_many(q, el(2, vec_f32(10, fv), t_from(QF_INT32, QF_SHAPE(10, 2), iv)),
                             NULL));
    return q;
}

static void expect_pairs(qf_element *b, int first, int n)
{
    cr_assert_eq(rows(b), n);
    for (int k = 0; k < n; k++) {
        int j = first + k;
        cr_expect_eq(f32_at(b, 0, k), 10.0f * (float)(j + 1));
        cr_expect_eq(i32_at(b, 1, 2 * k), 2 * j + 1);
        cr_expect_eq(i32_at(b, 1, 2 * k + 1), 2 * j + 2);
    }
    qf_element_free(b);
}

/* spec 47: dequeue_many(4) twice, then a plain dequeue gives 90; the int
 * rows follow their floats. */
Test(queue, dequeue_many_takes_batches_in_order)
{
    qf_queue *q = ten_pairs();
    qf_element *b = NULL;
    OK(qf_queue_dequeue_many(q, 4, &b));
    expect_pairs(b, 0, 4);
    OK(qf_queue_dequeue_many(q, 4, &b));
    expect_pairs(b, 4, 4);
    OK(qf_queue_dequeue(q, &b));
    cr_expect_eq(f32_at(b, 0, 0), 90.0f);
    cr_expect_eq(i32_at(b, 1, 0), 17);
    cr_expect_eq(i32_at(b, 1, 1), 18);
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 48: on an open queue with enough elements dequeue_up_to(4) is
 * dequeue_many(4). */
Test(queue, dequeue_up_to_on_open_queue_behaves_like_dequeue_many)
{
    qf_queue *q = ten_pairs();
    qf_element *b = NULL;
    OK(qf_queue_dequeue_up_to(q, 4, &b));
    expect_pairs(b, 0, 4);
    OK(qf_queue_dequeue_up_to(q, 4, &b));
    expect_pairs(b, 4, 4);
    OK(qf_queue_try_dequeue_up_to(q, 4, &b));
    expect_pairs(b, 8, 2);
    qf_queue_unref(q);
}

static const qf_dtype ALL_DTYPES[] = {
    QF_FLOAT16, QF_FLOAT32, QF_FLOAT64, QF_INT8, QF_INT16,  QF_INT32, QF_INT64,     QF_UINT8,
    QF_UINT16,  QF_UINT32,  QF_UINT64,  QF_BOOL, QF_STRING, QF_PTR,   QF_COMPLEX64, QF_COMPLEX128,
};
#define N_DTYPES (sizeof(ALL_DTYPES) / sizeof(ALL_DTYPES[0]))

/* Random contents of any dtype (strings of 0-7 random bytes, NULs
 * included; pointers as opaque bits, not owned; bools 0/1). */
static qf_tensor *random_tensor(qf_dtype dt, const qf_shape *sh, uint64_t *rng)
{
    qf_tensor *t = qf_tensor_new(dt, sh);
    cr_assert_not_null(t, "%s: %s", qf_dtype_name(dt), qf_last_message());
    int64_t n = qf_tensor_num_elements(t);
    if (dt == QF_STRING) {
        for (int64_t i = 0; i < n; i++) {
            char buf[8];
            size_t len = (size_t)(rnd(rng) % 8);
            for (size_t j = 0; j < len; j++)
                buf[j] = (char)rnd(rng);
            OK(qf_tensor_set_string(t, i, buf, len));
        }
    } else if (dt == QF_BOOL) {
        bool *b = qf_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            b[i] = rnd(rng) & 1;
    } else {
        unsigned char *p = qf_tensor_data(t);
        for (size_t i = 0; i < (size_t)n * qf_dtype_size(dt); i++)
            p[i] = (unsigned char)rnd(rng);
    }
    return t;
}

/* spec 40: a 32x4x128 random tensor of every dtype makes an exact round
 * trip through enqueue_many and dequeue_many(32). */
Test(queue, every_dtype_round_trips_through_enqueue_many_and_dequeue_many)
{
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);
    for (size_t d = 0; d < N_DTYPES; d++) {
        qf_dtype dt = ALL_DTYPES[d];
        qf_shape row = QF_SHAPE(4, 128), batch = QF_SHAPE(32, 4, 128);
        qf_queue *q = new_queue(32, 1, &dt, &row, NULL, "q");
        cr_expect_not(qf_queue_is_inline(q));
        qf_tensor *in = random_tensor(dt, &batch, &rng);
        qf_tensor *want = qf_tensor_copy(in);
        cr_assert_not_null(want);
        qf_element *b = el(1, in);
        qf_code rc = qf_queue_enqueue_many(q, b, NULL);
        if (rc != QF_OK)
            qf_element_free(b);
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_dtype_name(dt), qf_last_message());
        cr_expect_eq(qf_queue_size(q), 32);
        qf_element *out = NULL;
        OK(qf_queue_dequeue_many(q, 32, &out));
        cr_expect_eq(qf_tensor_dtype(qf_element_get(out, 0)), dt);
        cr_expect(qf_tensor_equal(qf_element_get(out, 0), want), "%s: round trip changed data",
                  qf_dtype_name(dt));
        qf_element_free(out);
        qf_tensor_unref(want);
        qf_queue_unref(q);
    }
}

/* spec 40 for scalar queues: every dtype that fits a slot makes the queue
 * inline; single and batch round trips through the element API are exact
 * either way (the element API converts at the edge). */
Test(queue, every_scalar_dtype_round_trips_inline_or_not)
{
    uint64_t rng = 12345;
    for (size_t d = 0; d < N_DTYPES; d++) {
        qf_dtype dt = ALL_DTYPES[d];
        qf_shape sc = qf_shape_scalar(), batch = QF_SHAPE(16);
        qf_queue *q = new_queue(32, 1, &dt, &sc, NULL, "q");
        /* Pointers and numbers up to 8 bytes (qf_queue_is_inline()). */
        bool want_inline =
            dt == QF_PTR || (dt != QF_STRING && dt != QF_SPARSE && qf_dtype_size(dt) <= 8);
        cr_expect_eq(qf_queue_is_inline(q), want_inline, "%s", qf_dtype_name(dt));
        qf_tensor *singles = random_tensor(dt, &batch, &rng);
        qf_tensor *many = random_tensor(dt, &batch, &rng);
        for (int64_t i = 0; i < 16; i++) {
            qf_tensor *one = qf_tensor_slice(singles, i);
            cr_assert_not_null(one);
            OK(qf_queue_enqueue(q, el(1, one)));
        }
        OK(qf_queue_enqueue_many(q, el(1, qf_tensor_copy(many)), NULL));
        cr_expect_eq(qf_queue_size(q), 32);
        for (int64_t i = 0; i < 16; i++) {
            qf_element *e = NULL;
            OK(qf_queue_dequeue(q, &e));
            qf_tensor *want = qf_tensor_slice(singles, i);
            cr_expect_eq(qf_tensor_dtype(qf_element_get(e, 0)), dt);
            cr_expect_str_eq(shape_txt(e, 0), "[]");
            cr_expect(qf_tensor_equal(qf_element_get(e, 0), want), "%s: element %lld changed",
                      qf_dtype_name(dt), (long long)i);
            qf_tensor_unref(want);
            qf_element_free(e);
        }
        qf_element *b = NULL;
        OK(qf_queue_dequeue_many(q, 16, &b));
        cr_expect(qf_tensor_equal(qf_element_get(b, 0), many), "%s: batch changed",
                  qf_dtype_name(dt));
        qf_element_free(b);
        qf_tensor_unref(singles);
        qf_tensor_unref(many);
        qf_queue_unref(q);
    }
}

/* int64 scalar queue: extreme values survive (8-byte numbers are stored in
 * the slots, any bit pattern: qf_queue_is_inline()). */
Test(queue, int64_scalar_queue_round_trips_extreme_values)
{
    qf_dtype dt = QF_INT64;
    qf_shape sc = qf_shape_scalar();
    qf_queue *q = new_queue(8, 1, &dt, &sc, NULL, "q");
    cr_expect(qf_queue_is_inline(q), "8-byte numbers are inline per qf_queue.h");
    const int64_t v[6] = {INT64_MIN, -1, 0, 1, INT64_MAX, INT64_C(0x0123456789abcdef)};
    for (int i = 0; i < 3; i++)
        OK(qf_queue_enqueue(q, el(1, qf_tensor_new_i64(v[i]))));
    OK(qf_queue_enqueue_many(q, el(1, t_from(QF_INT64, QF_SHAPE(3), v + 3)), NULL));
    for (int i = 0; i < 2; i++) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(qf_tensor_dtype(qf_element_get(e, 0)), QF_INT64);
        cr_expect_eq(*(const int64_t *)cdata(e, 0), v[i]);
        qf_element_free(e);
    }
    qf_element *b = NULL;
    OK(qf_queue_dequeue_many(q, 4, &b));
    cr_expect_str_eq(shape_txt(b, 0), "[4]");
    cr_expect_arr_eq(cdata(b, 0), v + 2, 4 * sizeof(int64_t));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 49: a 10x4x4x4x4 int32 batch round-trips exactly. */
Test(queue, rank_5_int32_batch_round_trips)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(4, 4, 4, 4);
    qf_queue *q = new_queue(10, 1, &dt, &sh, NULL, "q");
    static int32_t v[10 * 256];
    for (int i = 0; i < 10 * 256; i++)
        v[i] = i * 7 - 1000;
    OK(qf_queue_enqueue_many(q, el(1, t_from(QF_INT32, QF_SHAPE(10, 4, 4, 4, 4), v)), NULL));
    qf_element *b = NULL;
    OK(qf_queue_dequeue_many(q, 10, &b));
    cr_expect_str_eq(shape_txt(b, 0), "[10,4,4,4,4]");
    cr_expect_arr_eq(cdata(b, 0), v, sizeof(v));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* ====================================================================== */
/* Blocking (spec 29, 50-52)                                              */
/* ====================================================================== */

/* Wait for `cond` while the thread `t` must still be blocked. */
#define WAIT_WHILE_BLOCKED(cond, t)                                                                \
    do {                                                                                           \
        WAIT_UNTIL((cond) || atomic_load(&(t)->done));                                             \
        cr_assert_not(atomic_load(&(t)->done), "the call returned early: %s (%s)",                 \
                      qf_code_name((t)->rc), (t)->msg);                                            \
    } while (0)

/* spec 29: capacity 5, enqueue_many 1..10 inserts 5 at once and waits;
 * each of the first four dequeues lets one more in (size back at 5, still
 * blocked), the fifth lets it finish; then sizes 5,4,3,2,1,0 and the order
 * is 1..10. */
Test(queue, enqueue_many_larger_than_free_space_inserts_what_fits_and_waits)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 5);
        int32_t v[10];
        for (int i = 0; i < 10; i++)
            v[i] = i + 1;
        op_thread t;
        op_start(&t, q, OP_ENQUEUE_MANY, iq_batch(layout, 10, v), 0);
        WAIT_WHILE_BLOCKED(qf_queue_size(q) == 5, &t);
        for (int k = 1; k <= 4; k++) {
            cr_expect_eq(deq_i(layout, q), k);
            WAIT_WHILE_BLOCKED(qf_queue_size(q) == 5, &t);
        }
        cr_expect_eq(deq_i(layout, q), 5);
        op_join(&t);
        cr_expect_eq(t.rc, QF_OK, "%s", t.msg);
        cr_expect_eq(t.enqueued, 10);
        for (int k = 6; k <= 10; k++) {
            cr_expect_eq(qf_queue_size(q), 11 - k);
            cr_expect_eq(deq_i(layout, q), k);
        }
        cr_expect_eq(qf_queue_size(q), 0);
        qf_queue_unref(q);
    }
}

/* spec 50: a dequeue on an empty queue blocks until an element arrives;
 * the elements arrive in order. */
Test(queue, dequeue_blocks_until_an_element_arrives)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 3);
        for (int32_t v = 10; v <= 30; v += 10) {
            op_thread t;
            op_start(&t, q, OP_DEQUEUE, NULL, 0);
            wait_parked(&t);
            enq_i(layout, q, v);
            op_join(&t);
            cr_assert_eq(t.rc, QF_OK, "%s", t.msg);
            cr_expect_eq(iq_value(layout, t.elem), v);
        }
        qf_queue_unref(q);
    }
}

/* spec 50, 52: dequeue_many(4) and dequeue_up_to(4) on an open queue wait
 * until 4 have arrived, gathering them as they come: with capacity 10
 * (spec 50) and with capacity 2 < 4 (spec 52); the result stays empty
 * until the 4th enqueue, then is [0,1,2,3]. */
Test(queue, batch_dequeues_gather_until_n_have_arrived)
{
    const int64_t caps[2] = {10, 2};
    for (int layout = 0; layout < NLAYOUTS; layout++)
        for (int c = 0; c < 2; c++)
            for (int up_to = 0; up_to < 2; up_to++) {
                qf_queue *q = iq_new(layout, caps[c]);
                op_thread t;
                op_start(&t, q, up_to ? OP_DEQUEUE_UP_TO : OP_DEQUEUE_MANY, NULL, 4);
                wait_parked(&t);
                for (int32_t v = 0; v < 3; v++) {
                    enq_i(layout, q, v);
                    if (caps[c] < 4) /* a batch over the capacity gathers: it holds v */
                        WAIT_WHILE_BLOCKED(qf_queue_size(q) == 0, &t);
                    else /* it waits for all 4, leaving v in the queue */
                        WAIT_WHILE_BLOCKED(qf_queue_size(q) == v + 1, &t);
                }
                enq_i(layout, q, 3);
                op_join(&t);
                cr_assert_eq(t.rc, QF_OK, "%s", t.msg);
                int32_t got[4];
                cr_assert_eq(iq_values(layout, t.elem, got, 4), 4);
                for (int32_t v = 0; v < 4; v++)
                    cr_expect_eq(got[v], v);
                cr_expect_eq(qf_queue_size(q), 0);
                qf_queue_unref(q);
            }
}

/* spec 51: capacity 4 holding 10..40: enqueue(50) blocks until the first
 * dequeue, and the order is 10,20,30,40,50; likewise enqueue_many([50,60])
 * gives 10..60. */
Test(queue, enqueue_into_a_full_queue_blocks_until_room)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 4);
        const int32_t full[4] = {10, 20, 30, 40}, more[2] = {50, 60};
        enq_many_i(layout, q, 4, full);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE, iq_elem(layout, 50), 0);
        wait_parked(&t);
        cr_expect_eq(qf_queue_size(q), 4);
        cr_expect_eq(deq_i(layout, q), 10);
        op_join(&t);
        cr_expect_eq(t.rc, QF_OK, "%s", t.msg);
        for (int32_t v = 20; v <= 50; v += 10)
            cr_expect_eq(deq_i(layout, q), v);

        enq_many_i(layout, q, 4, full);
        op_start(&t, q, OP_ENQUEUE_MANY, iq_batch(layout, 2, more), 0);
        wait_parked(&t);
        cr_expect_eq(deq_i(layout, q), 10);
        cr_expect_eq(deq_i(layout, q), 20);
        op_join(&t);
        cr_expect_eq(t.rc, QF_OK, "%s", t.msg);
        cr_expect_eq(t.enqueued, 2);
        for (int32_t v = 30; v <= 60; v += 10)
            cr_expect_eq(deq_i(layout, q), v);
        qf_queue_unref(q);
    }
}

/* ====================================================================== */
/* Close (spec 25, 30-36, 53-59)                                          */
/* ====================================================================== */

/* spec 1, 31: once closed, every enqueue form fails with CANCELLED
 * "<QueueType> '<name>' is closed." and the caller keeps the element,
 * after a cancelling close too: "Enqueue operation was cancelled" is for
 * enqueues already waiting then (spec 32-34). A batch of several rows
 * used to get that message after close(cancel_pending_enqueues). */
static void expect_enqueues_refused_after_close(bool cancel)
{
    qf_dtype dt = QF_FLOAT32;
    qf_queue *q = new_queue(4, 1, &dt, NULL, NULL, "my_q");
    OK(qf_queue_close(q, cancel));
    const char *want = "FIFOQueue 'my_q' is closed.";
    qf_element *e = el(1, qf_tensor_new_f32(1.0f));
    REFUSED(qf_queue_enqueue(q, e), QF_CANCELLED, want);
    REFUSED(qf_queue_try_enqueue(q, e), QF_CANCELLED, want);
    REFUSED(qf_queue_enqueue_until(q, e, qf_deadline_in_s(1)), QF_CANCELLED, want);
    cr_expect_eq(f32_at(e, 0, 0), 1.0f, "the caller keeps her element");
    qf_element_free(e);
    float fv[2] = {1.0f, 2.0f};
    qf_element *b = el(1, vec_f32(2, fv));
    size_t n = 99;
    REFUSED(qf_queue_enqueue_many(q, b, &n), QF_CANCELLED, want);
    cr_expect_eq(n, 0);
    REFUSED(qf_queue_try_enqueue_many(q, b), QF_CANCELLED, want);
    n = 99;
    REFUSED(qf_queue_enqueue_many_until(q, b, qf_deadline_in_s(1), &n), QF_CANCELLED, want);
    cr_expect_eq(n, 0);
    cr_expect_str_eq(shape_txt(b, 0), "[2]");
    qf_element_free(b);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

Test(queue, enqueue_after_close_is_cancelled)
{
    expect_enqueues_refused_after_close(false);
}

Test(queue, enqueue_after_cancelling_close_is_refused_as_closed)
{
    expect_enqueues_refused_after_close(true);
}

/* spec 25, 30 (qflow difference): capacity 4 holding 10..40, enqueue(50)
 * blocked. A plain close returns at once and is_closed() is true at once
 * (TensorFlow: the close waits behind the enqueue); new enqueues are
 * refused, but the blocked one completes after one dequeue; then
 * 20,30,40,50 and end-of-data. */
Test(queue, plain_close_takes_effect_at_once_and_blocked_enqueue_completes)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 4);
        const int32_t full[4] = {10, 20, 30, 40};
        enq_many_i(layout, q, 4, full);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE, iq_elem(layout, 50), 0);
        wait_parked(&t);
        OK(qf_queue_close(q, false));
        cr_expect(qf_queue_is_closed(q));
        cr_expect_not(atomic_load(&t.done), "the blocked enqueue still waits for room");
        qf_element *late = iq_elem(layout, 60);
        REFUSED(qf_queue_enqueue(q, late), QF_CANCELLED, "FIFOQueue 'q' is closed.");
        REFUSED(qf_queue_try_enqueue(q, late), QF_CANCELLED, "FIFOQueue 'q' is closed.");
        qf_element_free(late);
        cr_expect_eq(deq_i(layout, q), 10);
        op_join(&t);
        cr_expect_eq(t.rc, QF_OK, "the enqueue blocked before the close: %s", t.msg);
        for (int32_t v = 20; v <= 50; v += 10)
            cr_expect_eq(deq_i(layout, q), v);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 30, 35 (qflow difference): after a plain close, a dequeuer sees
 * end-of-data only once the enqueues blocked before the close finished:
 * capacity 1 holding 10, enqueue(50) blocked, close, dequeue 10; the next
 * dequeue returns 50 (never OUT_OF_RANGE), then end-of-data. */
Test(queue, end_of_data_waits_for_enqueues_blocked_before_close)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 1);
        enq_i(layout, q, 10);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE, iq_elem(layout, 50), 0);
        wait_parked(&t);
        OK(qf_queue_close(q, false));
        cr_expect_eq(deq_i(layout, q), 10);
        qf_element *e = NULL;
        qf_code rc = qf_queue_try_dequeue(q, &e);
        cr_expect(rc == QF_OK || rc == QF_UNAVAILABLE,
                  "try_dequeue while an enqueue is pending: %s (%s)", qf_code_name(rc),
                  qf_last_message());
        if (rc != QF_OK)
            OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(iq_value(layout, e), 50);
        op_join(&t);
        cr_expect_eq(t.rc, QF_OK, "%s", t.msg);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 59 (qflow difference as in 30): capacity 4 holding 10,20,30;
 * enqueue_many([50,60]) inserts 50 and blocks; close returns at once; one
 * dequeue (10) lets 60 in; the rest is 20,30,50,60. */
Test(queue, plain_close_with_a_blocked_enqueue_many)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 4);
        const int32_t three[3] = {10, 20, 30}, more[2] = {50, 60};
        enq_many_i(layout, q, 3, three);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE_MANY, iq_batch(layout, 2, more), 0);
        WAIT_WHILE_BLOCKED(qf_queue_size(q) == 4, &t);
        wait_parked(&t);
        OK(qf_queue_close(q, false));
        cr_expect(qf_queue_is_closed(q));
        cr_expect_not(atomic_load(&t.done));
        cr_expect_eq(deq_i(layout, q), 10);
        op_join(&t);
        cr_expect_eq(t.rc, QF_OK, "%s", t.msg);
        cr_expect_eq(t.enqueued, 2);
        const int32_t rest[4] = {20, 30, 50, 60};
        for (int k = 0; k < 4; k++)
            cr_expect_eq(deq_i(layout, q), rest[k]);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 32: close(cancel_pending_enqueues) returns at once, marks the queue
 * closed and fails the blocked enqueue with CANCELLED "Enqueue operation
 * was cancelled"; the caller keeps the element; the queue keeps its
 * elements. */
Test(queue, cancelling_close_fails_a_blocked_enqueue)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 2);
        enq_i(layout, q, 1);
        enq_i(layout, q, 2);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE, iq_elem(layout, 3), 0);
        wait_parked(&t);
        OK(qf_queue_close(q, true));
        cr_expect(qf_queue_is_closed(q));
        op_join(&t);
        cr_expect_eq(t.rc, QF_CANCELLED, "%s", qf_code_name(t.rc));
        cr_expect(has(t.msg, "Enqueue operation was cancelled"), "message: %s", t.msg);
        cr_assert_not_null(t.elem, "the caller keeps the element");
        cr_expect_eq(iq_value(layout, t.elem), 3);
        cr_expect_eq(deq_i(layout, q), 1);
        cr_expect_eq(deq_i(layout, q), 2);
        expect_drained(q);
        qf_element *late = iq_elem(layout, 4);
        REFUSED(qf_queue_enqueue(q, late), QF_CANCELLED, "FIFOQueue 'q' is closed.");
        qf_element_free(late);
        qf_queue_unref(q);
    }
}

/* spec 32: a cancelled enqueue_many keeps the rows it already inserted in
 * the queue; the caller's batch then holds only the rows that did not go
 * in, and *ret_enqueued says how many did. */
Test(queue, cancelling_close_keeps_inserted_rows_and_returns_the_rest)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 4);
        const int32_t three[3] = {10, 20, 30}, more[3] = {50, 60, 70};
        enq_many_i(layout, q, 3, three);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE_MANY, iq_batch(layout, 3, more), 0);
        WAIT_WHILE_BLOCKED(qf_queue_size(q) == 4, &t);
        wait_parked(&t);
        OK(qf_queue_close(q, true));
        op_join(&t);
        cr_expect_eq(t.rc, QF_CANCELLED, "%s", qf_code_name(t.rc));
        cr_expect(has(t.msg, "Enqueue operation was cancelled"), "message: %s", t.msg);
        cr_expect_eq(t.enqueued, 1);
        cr_assert_not_null(t.elem);
        int32_t left[3];
        cr_assert_eq(iq_values(layout, t.elem, left, 3), 2, "the batch keeps the 2 rows left");
        cr_expect(left[0] == 60 && left[1] == 70, "left: %d %d", (int)left[0], (int)left[1]);
        const int32_t in_q[4] = {10, 20, 30, 50};
        for (int k = 0; k < 4; k++)
            cr_expect_eq(deq_i(layout, q), in_q[k]);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 33, 34 (qflow difference: a plain close never waits in line, so
 * it cannot be the one that fails): a blocked enqueue, a plain close that
 * returns at once, then a cancelling close: the enqueue fails with
 * "Enqueue operation was cancelled" and the queue is closed; a further
 * plain close fails ("already closed"). */
Test(queue, cancelling_close_after_plain_close_cancels_the_blocked_enqueue)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 1);
        enq_i(layout, q, 1);
        op_thread t;
        op_start(&t, q, OP_ENQUEUE, iq_elem(layout, 2), 0);
        wait_parked(&t);
        OK(qf_queue_close(q, false));
        cr_expect_not(atomic_load(&t.done));
        OK(qf_queue_close(q, true));
        op_join(&t);
        cr_expect_eq(t.rc, QF_CANCELLED, "%s", qf_code_name(t.rc));
        cr_expect(has(t.msg, "Enqueue operation was cancelled"), "message: %s", t.msg);
        cr_assert_not_null(t.elem);
        cr_expect_eq(iq_value(layout, t.elem), 2);
        cr_expect(qf_queue_is_closed(q));
        REFUSED(qf_queue_close(q, false), QF_CANCELLED, "Queue 'q' is already closed.");
        cr_expect_eq(deq_i(layout, q), 1);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 35, 54: a dequeue, dequeue_many(4) or dequeue_up_to(4) blocked on
 * an empty queue is woken by close and fails with OUT_OF_RANGE "FIFOQueue
 * 'q' is closed and has insufficient elements (requested N, current size
 * 0)", leaving its output alone. */
Test(queue, close_wakes_blocked_dequeues_with_out_of_range)
{
    const op_kind kinds[3] = {OP_DEQUEUE, OP_DEQUEUE_MANY, OP_DEQUEUE_UP_TO};
    const char *want[3] = {"(requested 1, current size 0)", "(requested 4, current size 0)",
                           "(requested 4, current size 0)"};
    for (int layout = 0; layout < NLAYOUTS; layout++)
        for (int k = 0; k < 3; k++) {
            qf_queue *q = iq_new(layout, 10);
            op_thread t;
            op_start(&t, q, kinds[k], NULL, 4);
            wait_parked(&t);
            OK(qf_queue_close(q, false));
            op_join(&t);
            cr_expect_eq(t.rc, QF_OUT_OF_RANGE, "%s", qf_code_name(t.rc));
            cr_expect(has(t.msg, "FIFOQueue 'q' is closed and has insufficient elements"),
                      "message: %s", t.msg);
            cr_expect(has(t.msg, want[k]), "message: %s", t.msg);
            cr_expect(t.out_untouched);
            qf_queue_unref(q);
        }
}

/* spec 23, 35, 53, 54: on a closed empty queue every dequeue form fails at
 * once with OUT_OF_RANGE (not UNAVAILABLE or DEADLINE_EXCEEDED). */
Test(queue, every_dequeue_form_reports_end_of_data_on_a_closed_empty_queue)
{
    qf_queue *q = float_scalar_q(10);
    OK(qf_queue_close(q, false));
    const char *want = "FIFOQueue 'q' is closed and has insufficient elements";
    qf_element *e = UNTOUCHED;
    REFUSED(qf_queue_dequeue(q, &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_try_dequeue(q, &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_dequeue_until(q, qf_deadline_in_s(30), &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_dequeue_many(q, 4, &e), QF_OUT_OF_RANGE, "(requested 4, current size 0)");
    REFUSED(qf_queue_try_dequeue_many(q, 4, &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_dequeue_many_until(q, 4, qf_deadline_in_s(30), &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_dequeue_up_to(q, 4, &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_try_dequeue_up_to(q, 4, &e), QF_OUT_OF_RANGE, want);
    REFUSED(qf_queue_dequeue_up_to_until(q, 4, qf_deadline_in_s(30), &e), QF_OUT_OF_RANGE, want);
    cr_expect_eq(e, UNTOUCHED);
    qf_queue_unref(q);
}

/* spec 53: capacity 10, enqueue_many [10,20,30,40], close: four dequeues
 * give 10..40, the fifth fails with OUT_OF_RANGE. */
Test(queue, closed_queue_drains_then_reports_out_of_range)
{
    qf_queue *q = float_q(10);
    float fv[4] = {10.0f, 20.0f, 30.0f, 40.0f};
    enq_many_f(q, 4, fv);
    OK(qf_queue_close(q, false));
    cr_expect_eq(qf_queue_size(q), 4);
    for (int k = 0; k < 4; k++)
        cr_expect_eq(deq_f(q), fv[k]);
    qf_element *e = NULL;
    REFUSED(qf_queue_dequeue(q, &e), QF_OUT_OF_RANGE,
            "FIFOQueue 'q' is closed and has insufficient elements (requested 1, current size 0)");
    qf_queue_unref(q);
}

/* spec 36, 55: capacity 4 holding 1,2,3; a dequeue_many(4) blocks (in
 * qflow it takes nothing until all four are there, so size reads 3); close
 * makes it fail with OUT_OF_RANGE and the three are there in their order. */
Test(queue, dequeue_many_cut_short_by_close_puts_its_elements_back)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 4);
        const int32_t v[3] = {1, 2, 3};
        enq_many_i(layout, q, 3, v);
        op_thread t;
        op_start(&t, q, OP_DEQUEUE_MANY, NULL, 4);
        wait_parked(&t);
        cr_assert_not(atomic_load(&t.done));
        cr_expect_eq(qf_queue_size(q), 3);
        OK(qf_queue_close(q, false));
        op_join(&t);
        cr_expect_eq(t.rc, QF_OUT_OF_RANGE, "%s", qf_code_name(t.rc));
        cr_expect(has(t.msg, "is closed and has insufficient elements (requested 4"), "message: %s",
                  t.msg);
        cr_expect_eq(qf_queue_size(q), 3);
        for (int32_t k = 1; k <= 3; k++)
            cr_expect_eq(deq_i(layout, q), k);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 36, 56: capacity 10, [10,20,30,40]; dequeue_many(3) gives
 * [10,20,30]; the next one waits (leaving 40 in the queue), fails after
 * close, and a plain dequeue then still returns 40. */
Test(queue, failed_dequeue_many_leaves_its_element_for_the_next_dequeue)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 10);
        const int32_t v[4] = {10, 20, 30, 40};
        enq_many_i(layout, q, 4, v);
        qf_element *b = NULL;
        OK(qf_queue_dequeue_many(q, 3, &b));
        int32_t got[3];
        cr_assert_eq(iq_values(layout, b, got, 3), 3);
        cr_expect(got[0] == 10 && got[1] == 20 && got[2] == 30);
        op_thread t;
        op_start(&t, q, OP_DEQUEUE_MANY, NULL, 3);
        wait_parked(&t);
        cr_assert_not(atomic_load(&t.done));
        OK(qf_queue_close(q, false));
        op_join(&t);
        cr_expect_eq(t.rc, QF_OUT_OF_RANGE, "%s", qf_code_name(t.rc));
        cr_expect(has(t.msg, "is closed and has insufficient"), "message: %s", t.msg);
        cr_expect_eq(deq_i(layout, q), 40);
        expect_drained(q);
        qf_queue_unref(q);
    }
}

/* spec 57: the same start with dequeue_up_to(3): [10,20,30]; the next call
 * waits (open queue) and returns [40] once the queue is closed; a third
 * call fails with OUT_OF_RANGE. */
Test(queue, dequeue_up_to_returns_the_remainder_after_close)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 10);
        const int32_t v[4] = {10, 20, 30, 40};
        enq_many_i(layout, q, 4, v);
        qf_element *b = NULL;
        OK(qf_queue_dequeue_up_to(q, 3, &b));
        int32_t got[3];
        cr_assert_eq(iq_values(layout, b, got, 3), 3);
        cr_expect(got[0] == 10 && got[1] == 20 && got[2] == 30);
        op_thread t;
        op_start(&t, q, OP_DEQUEUE_UP_TO, NULL, 3);
        wait_parked(&t);
        cr_assert_not(atomic_load(&t.done));
        OK(qf_queue_close(q, false));
        op_join(&t);
        cr_assert_eq(t.rc, QF_OK, "%s", t.msg);
        cr_assert_eq(iq_values(layout, t.elem, got, 3), 1);
        cr_expect_eq(got[0], 40);
        b = UNTOUCHED;
        REFUSED(qf_queue_dequeue_up_to(q, 3, &b), QF_OUT_OF_RANGE,
                "is closed and has insufficient");
        cr_expect_eq(b, UNTOUCHED);
        qf_queue_unref(q);
    }
}

typedef struct {
    qf_queue *q;
    pthread_barrier_t *go;
    int64_t n;
    qf_code rc;
    qf_element *out;
    pthread_t th;
} up_to_worker;

static void *up_to_main(void *arg)
{
    up_to_worker *w = arg;
    pthread_barrier_wait(w->go);
    w->rc = qf_queue_dequeue_up_to(w->q, w->n, &w->out);
    return NULL;
}

/* spec 58: a closed queue of 1000 elements read by 10 threads each running
 * dequeue_up_to(101): all 1000 come out exactly once, in order within each
 * result, and exactly one thread gets fewer than 101: the 91 left over. */
Test(queue, concurrent_dequeue_up_to_on_a_closed_queue_splits_the_remainder)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 1000);
        int32_t *v = malloc(1000 * sizeof(int32_t));
        cr_assert_not_null(v);
        for (int i = 0; i < 1000; i++)
            v[i] = i;
        enq_many_i(layout, q, 1000, v);
        OK(qf_queue_close(q, false));
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 10);
        up_to_worker w[10];
        for (int i = 0; i < 10; i++) {
            w[i] = (up_to_worker){.q = q, .go = &go, .n = 101};
            cr_assert_eq(pthread_create(&w[i].th, NULL, up_to_main, &w[i]), 0);
        }
        for (int i = 0; i < 10; i++)
            pthread_join(w[i].th, NULL);
        pthread_barrier_destroy(&go);
        int seen[1000] = {0}, short_results = 0, short_size = -1;
        for (int i = 0; i < 10; i++) {
            cr_assert_eq(w[i].rc, QF_OK, "thread %d: %s", i, qf_code_name(w[i].rc));
            size_t n = iq_values(layout, w[i].out, v, 101);
            for (size_t j = 0; j < n; j++) {
                cr_assert(v[j] >= 0 && v[j] < 1000);
                seen[v[j]]++;
                if (j > 0)
                    cr_expect_gt(v[j], v[j - 1], "a result out of order");
            }
            if (n < 101) {
                short_results++;
                short_size = (int)n;
            }
        }
        for (int i = 0; i < 1000; i++)
            cr_expect_eq(seen[i], 1, "element %d seen %d times", i, seen[i]);
        cr_expect_eq(short_results, 1, "%d results shorter than 101", short_results);
        cr_expect_eq(short_size, 91);
        expect_drained(q);
        free(v);
        qf_queue_unref(q);
    }
}

/* ====================================================================== */
/* Deadlines (spec 38) and try forms                                      */
/* ====================================================================== */

/* spec 38: a dequeue that times out on an empty queue fails with
 * DEADLINE_EXCEEDED "Timed out waiting for notification" and leaves the
 * queue usable: after two timeouts, enqueue 37 and dequeue returns 37.
 * Likewise for an enqueue on a full queue. */
Test(queue, deadline_exceeded_leaves_the_queue_usable)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 1);
        const char *want = "FIFOQueue 'q': Timed out waiting for notification";
        qf_element *e = UNTOUCHED;
        int64_t t0 = qf_now_ns();
        REFUSED(qf_queue_dequeue_until(q, qf_deadline_in_s(0.01), &e), QF_DEADLINE_EXCEEDED, want);
        cr_expect_geq(qf_now_ns() - t0, 10000000, "returned before its deadline");
        REFUSED(qf_queue_dequeue_until(q, qf_deadline_in_s(0.01), &e), QF_DEADLINE_EXCEEDED, want);
        REFUSED(qf_queue_dequeue_until(q, QF_NO_WAIT, &e), QF_DEADLINE_EXCEEDED, want);
        REFUSED(qf_queue_dequeue_many_until(q, 1, qf_deadline_in_s(0.01), &e), QF_DEADLINE_EXCEEDED,
                want);
        REFUSED(qf_queue_dequeue_up_to_until(q, 1, qf_deadline_in_s(0.01), &e),
                QF_DEADLINE_EXCEEDED, want);
        cr_expect_eq(e, UNTOUCHED);
        enq_i(layout, q, 37);
        cr_expect_eq(deq_i(layout, q), 37);

        enq_i(layout, q, 37);
        qf_element *x = iq_elem(layout, 38);
        REFUSED(qf_queue_enqueue_until(q, x, qf_deadline_in_s(0.01)), QF_DEADLINE_EXCEEDED, want);
        REFUSED(qf_queue_enqueue_until(q, x, QF_NO_WAIT), QF_DEADLINE_EXCEEDED, want);
        cr_expect_eq(qf_queue_size(q), 1);
        cr_expect_eq(deq_i(layout, q), 37);
        OK(qf_queue_enqueue_until(q, x, qf_deadline_in_s(30)));
        cr_expect_eq(deq_i(layout, q), 38);
        qf_queue_unref(q);
    }
}

/* spec 36, 38: a batch dequeue that times out puts back what it held, in
 * order; dequeue_up_to on an open queue also waits for n (spec 48). */
Test(queue, timed_out_batch_dequeue_puts_back_what_it_held)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 10);
        const int32_t v[3] = {1, 2, 3};
        enq_many_i(layout, q, 3, v);
        qf_element *b = UNTOUCHED;
        REFUSED(qf_queue_dequeue_many_until(q, 5, qf_deadline_in_s(0.02), &b), QF_DEADLINE_EXCEEDED,
                "Timed out waiting for notification");
        cr_expect_eq(qf_queue_size(q), 3);
        REFUSED(qf_queue_dequeue_up_to_until(q, 5, qf_deadline_in_s(0.02), &b),
                QF_DEADLINE_EXCEEDED, "Timed out waiting for notification");
        cr_expect_eq(b, UNTOUCHED);
        cr_expect_eq(qf_queue_size(q), 3);
        enq_i(layout, q, 4);
        for (int32_t k = 1; k <= 4; k++)
            cr_expect_eq(deq_i(layout, q), k);
        qf_queue_unref(q);
    }
}

/* spec 29, 38: an enqueue_many that times out keeps the rows it inserted
 * in the queue; the caller's batch holds the others, *ret_enqueued says
 * how many went in, and the batch can be enqueued again. */
Test(queue, timed_out_enqueue_many_keeps_inserted_rows_and_returns_the_rest)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 3);
        enq_i(layout, q, 1);
        const int32_t v[4] = {2, 3, 4, 5};
        qf_element *b = iq_batch(layout, 4, v);
        size_t n = 99;
        REFUSED(qf_queue_enqueue_many_until(q, b, qf_deadline_in_s(0.02), &n), QF_DEADLINE_EXCEEDED,
                "Timed out waiting for notification");
        cr_expect_eq(n, 2);
        cr_assert_eq(rows(b), 2);
        cr_expect_eq(iq_peek(layout, b, 0), 4);
        cr_expect_eq(iq_peek(layout, b, 1), 5);
        if (layout == LAYOUT_BOXED) {
            cr_expect_str_eq(str_at(b, 1, 0), "v4");
            cr_expect_str_eq(str_at(b, 1, 1), "v5");
        }
        for (int32_t k = 1; k <= 3; k++)
            cr_expect_eq(deq_i(layout, q), k);
        OK(qf_queue_enqueue_many(q, b, NULL));
        cr_expect_eq(deq_i(layout, q), 4);
        cr_expect_eq(deq_i(layout, q), 5);
        qf_queue_unref(q);
    }
}

/* The try forms never block: QF_UNAVAILABLE when full or empty (the
 * caller keeps her element, outputs are untouched); try_enqueue_many and
 * try_dequeue_many are all or nothing; try_dequeue_up_to returns what is
 * there; on a closed queue they report closing, not UNAVAILABLE. */
Test(queue, try_forms_never_block_and_are_all_or_nothing)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 2);
        qf_element *out = UNTOUCHED;
        REFUSED(qf_queue_try_dequeue(q, &out), QF_UNAVAILABLE, "FIFOQueue 'q' is empty");
        REFUSED(qf_queue_try_dequeue_many(q, 1, &out), QF_UNAVAILABLE, "FIFOQueue 'q' is empty");
        REFUSED(qf_queue_try_dequeue_up_to(q, 1, &out), QF_UNAVAILABLE, "FIFOQueue 'q' is empty");
        cr_expect_eq(out, UNTOUCHED);

        OK(qf_queue_try_enqueue(q, iq_elem(layout, 1)));
        OK(qf_queue_try_enqueue(q, iq_elem(layout, 2)));
        qf_element *e = iq_elem(layout, 3);
        REFUSED(qf_queue_try_enqueue(q, e), QF_UNAVAILABLE, "FIFOQueue 'q' is full");
        const int32_t v34[2] = {3, 4};
        qf_element *b = iq_batch(layout, 2, v34);
        REFUSED(qf_queue_try_enqueue_many(q, b), QF_UNAVAILABLE,
                "FIFOQueue 'q' has no room for 2 elements");
        cr_expect_eq(qf_queue_size(q), 2);
        cr_expect_eq(deq_i(layout, q), 1);
        /* room for one row of two: nothing goes in */
        REFUSED(qf_queue_try_enqueue_many(q, b), QF_UNAVAILABLE,
                "FIFOQueue 'q' has no room for 2 elements");
        cr_expect_eq(rows(b), 2, "the batch is intact");
        cr_expect_eq(qf_queue_size(q), 1);
        /* one element of two wanted: nothing is taken */
        REFUSED(qf_queue_try_dequeue_many(q, 2, &out), QF_UNAVAILABLE,
                "FIFOQueue 'q' has fewer than 2 elements");
        cr_expect_eq(out, UNTOUCHED);
        cr_expect_eq(qf_queue_size(q), 1);
        OK(qf_queue_try_enqueue(q, e));
        qf_element_free(b);
        OK(qf_queue_try_dequeue_many(q, 2, &out));
        int32_t got[4];
        cr_assert_eq(iq_values(layout, out, got, 4), 2);
        cr_expect(got[0] == 2 && got[1] == 3, "got %d %d", (int)got[0], (int)got[1]);

        OK(qf_queue_try_enqueue(q, iq_elem(layout, 5)));
        OK(qf_queue_try_dequeue_up_to(q, 4, &out));
        cr_assert_eq(iq_values(layout, out, got, 4), 1, "what is there now");
        cr_expect_eq(got[0], 5);

        OK(qf_queue_try_enqueue(q, iq_elem(layout, 6)));
        OK(qf_queue_close(q, false));
        e = iq_elem(layout, 7);
        REFUSED(qf_queue_try_enqueue(q, e), QF_CANCELLED, "is closed.");
        qf_element_free(e);
        OK(qf_queue_try_dequeue_up_to(q, 4, &out));
        cr_assert_eq(iq_values(layout, out, got, 4), 1);
        cr_expect_eq(got[0], 6);
        out = UNTOUCHED;
        REFUSED(qf_queue_try_dequeue(q, &out), QF_OUT_OF_RANGE, "is closed and has insufficient");
        REFUSED(qf_queue_try_dequeue_up_to(q, 4, &out), QF_OUT_OF_RANGE, "is closed");
        cr_expect_eq(out, UNTOUCHED);
        qf_queue_unref(q);
    }
}

/* ====================================================================== */
/* Ordering and concurrency (spec 28, 39, 60-62)                          */
/* ====================================================================== */

typedef struct {
    qf_queue *q;
    int layout;
    int n; /* single dequeues to do */
    int32_t got[256];
    int ngot;
    qf_code rc;
    bool malformed;
    pthread_t th;
} single_consumer;

static void *single_consumer_main(void *arg)
{
    single_consumer *c = arg;
    for (c->ngot = 0; c->ngot < c->n; c->ngot++) {
        qf_element *e = NULL;
        c->rc = qf_queue_dequeue(c->q, &e);
        if (c->rc != QF_OK)
            break;
        size_t n;
        if (!values_of(c->layout, e, &c->got[c->ngot], 1, &n) || n != 1) {
            c->malformed = true;
            break;
        }
    }
    return NULL;
}

/* spec 28 (qflow difference: roughly, not strictly, in arrival order): a
 * dequeue_many(5) that arrived first and single dequeues share a capacity-2
 * queue fed 1..10. TensorFlow would give the batch 1..5; qflow lets later
 * dequeues through, so the split may differ, but every element arrives
 * exactly once, each consumer's elements are in order, and nobody stays
 * blocked. */
Test(queue, waiting_consumers_are_served_roughly_in_order)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 2);
        op_thread batch;
        op_start(&batch, q, OP_DEQUEUE_MANY, NULL, 5);
        wait_parked(&batch);
        single_consumer c = {.q = q, .layout = layout, .n = 5};
        cr_assert_eq(pthread_create(&c.th, NULL, single_consumer_main, &c), 0);
        for (int32_t v = 1; v <= 10; v++)
            enq_i(layout, q, v);
        op_join(&batch);
        pthread_join(c.th, NULL);
        cr_assert_eq(batch.rc, QF_OK, "%s", batch.msg);
        cr_assert_eq(c.rc, QF_OK, "%s", qf_code_name(c.rc));
        cr_assert_not(c.malformed);
        int32_t got[5];
        cr_assert_eq(iq_values(layout, batch.elem, got, 5), 5);
        int seen[11] = {0};
        for (int i = 0; i < 5; i++) {
            seen[got[i]]++;
            seen[c.got[i]]++;
            if (i > 0) {
                cr_expect_gt(got[i], got[i - 1], "the batch is out of order");
                cr_expect_gt(c.got[i], c.got[i - 1], "single dequeues out of order");
            }
        }
        for (int v = 1; v <= 10; v++)
            cr_expect_eq(seen[v], 1, "%d seen %d times", v, seen[v]);
        cr_expect_eq(qf_queue_size(q), 0);
        qf_queue_unref(q);
    }
}

/* spec 28 (qflow difference): two enqueue_many of 50 rows waiting for room
 * in a capacity-4 queue may interleave, but each producer's rows arrive in
 * its order and none is lost or duplicated. */
Test(queue, waiting_producers_keep_their_own_order)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 4);
        int32_t a[50], b[50];
        for (int i = 0; i < 50; i++) {
            a[i] = 1 + i;
            b[i] = 101 + i;
        }
        op_thread pa, pb;
        op_start(&pa, q, OP_ENQUEUE_MANY, iq_batch(layout, 50, a), 0);
        op_start(&pb, q, OP_ENQUEUE_MANY, iq_batch(layout, 50, b), 0);
        int32_t last_a = 0, last_b = 100;
        for (int i = 0; i < 100; i++) {
            int32_t v = deq_i(layout, q);
            if (v <= 50) {
                cr_assert_eq(v, last_a + 1, "producer a: %d after %d", (int)v, (int)last_a);
                last_a = v;
            } else {
                cr_assert_eq(v, last_b + 1, "producer b: %d after %d", (int)v, (int)last_b);
                last_b = v;
            }
        }
        op_join(&pa);
        op_join(&pb);
        cr_expect_eq(pa.rc, QF_OK, "%s", pa.msg);
        cr_expect_eq(pb.rc, QF_OK, "%s", pb.msg);
        cr_expect_eq(qf_queue_size(q), 0);
        qf_queue_unref(q);
    }
}

/* spec 39 (nearest C behaviour): three dequeues running at once on
 * [1,2,3] each take a different element. */
Test(queue, concurrent_dequeues_each_take_a_different_element)
{
    qf_queue *q = iq_new(LAYOUT_BOXED, 10);
    const int32_t v[3] = {1, 2, 3};
    enq_many_i(LAYOUT_BOXED, q, 3, v);
    op_thread t[3];
    for (int i = 0; i < 3; i++)
        op_start(&t[i], q, OP_DEQUEUE, NULL, 0);
    int seen[4] = {0};
    for (int i = 0; i < 3; i++) {
        op_join(&t[i]);
        cr_assert_eq(t[i].rc, QF_OK, "%s", t[i].msg);
        int32_t x = iq_value(LAYOUT_BOXED, t[i].elem);
        cr_assert(x >= 1 && x <= 3);
        seen[x]++;
    }
    cr_expect(seen[1] == 1 && seen[2] == 1 && seen[3] == 1);
    qf_queue_unref(q);
}

typedef struct {
    qf_queue *q;
    int layout;
    int n;
    int32_t *got;
    int ngot;
    qf_code rc;
    bool malformed;
    pthread_t th;
} drain_consumer;

static void *drain_consumer_main(void *arg)
{
    drain_consumer *c = arg;
    while (c->ngot < c->n) {
        qf_element *e = NULL;
        c->rc = qf_queue_dequeue(c->q, &e);
        if (c->rc != QF_OK)
            break;
        size_t n;
        if (!values_of(c->layout, e, &c->got[c->ngot], 1, &n) || n != 1) {
            c->malformed = true;
            break;
        }
        c->ngot++;
    }
    return NULL;
}

/* spec 60: FIFO order survives mixing enqueue with enqueue_many (random
 * counts 0..20) against one dequeuer; and mixing dequeue with
 * dequeue_many (random counts 0..20) against an enqueue_many of 0..249 on
 * a capacity-10 queue. */
Test(queue, fifo_order_survives_mixing_single_and_batch_calls)
{
    enum { N = 250 };
    uint64_t rng = 42;
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 10);
        int32_t got[N];
        drain_consumer c = {.q = q, .layout = layout, .n = N, .got = got};
        cr_assert_eq(pthread_create(&c.th, NULL, drain_consumer_main, &c), 0);
        int32_t next = 0, buf[20];
        while (next < N) {
            int k = (int)(rnd(&rng) % 21);
            if (k > N - next)
                k = N - next;
            if (rnd(&rng) & 1) {
                for (int i = 0; i < k; i++)
                    buf[i] = next + i;
                enq_many_i(layout, q, (size_t)k, buf);
                next += k;
            } else {
                enq_i(layout, q, next++);
            }
        }
        pthread_join(c.th, NULL);
        cr_assert_eq(c.rc, QF_OK, "%s", qf_code_name(c.rc));
        cr_assert_not(c.malformed);
        cr_assert_eq(c.ngot, N);
        for (int i = 0; i < N; i++)
            cr_assert_eq(got[i], i, "position %d holds %d", i, (int)got[i]);

        int32_t all[N];
        for (int i = 0; i < N; i++)
            all[i] = i;
        op_thread p;
        op_start(&p, q, OP_ENQUEUE_MANY, iq_batch(layout, N, all), 0);
        int have = 0;
        while (have < N) {
            int k = (int)(rnd(&rng) % 21);
            if (k > N - have)
                k = N - have;
            if (rnd(&rng) & 1) {
                qf_element *b = NULL;
                OK(qf_queue_dequeue_many(q, k, &b));
                cr_assert_eq(iq_values(layout, b, got + have, (size_t)(N - have)), (size_t)k);
                have += k;
            } else {
                got[have++] = deq_i(layout, q);
            }
        }
        op_join(&p);
        cr_expect_eq(p.rc, QF_OK, "%s", p.msg);
        for (int i = 0; i < N; i++)
            cr_assert_eq(got[i], i, "position %d holds %d", i, (int)got[i]);
        qf_queue_unref(q);
    }
}

/* spec 61 (nearest C behaviour): the count of each dequeue_many (and
 * dequeue_up_to) is itself dequeued from a second queue at run time; the
 * concatenated results are the enqueued list in order. */
Test(queue, batch_count_taken_from_another_queue_at_run_time)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *data = iq_new(layout, 100);
        qf_queue *counts = iq_new(LAYOUT_SCALAR, 20);
        const int32_t cnt[8] = {3, 0, 7, 1, 0, 9, 4, 6};
        int32_t v[30], got[30];
        for (int i = 0; i < 30; i++)
            v[i] = 100 + i;
        enq_many_i(layout, data, 30, v);
        enq_many_i(LAYOUT_SCALAR, counts, 8, cnt);
        size_t have = 0;
        for (int k = 0; k < 8; k++) {
            int32_t n = deq_i(LAYOUT_SCALAR, counts);
            qf_element *b = NULL;
            if (k % 2)
                OK(qf_queue_dequeue_up_to(data, n, &b));
            else
                OK(qf_queue_dequeue_many(data, n, &b));
            have += iq_values(layout, b, got + have, 30 - have);
        }
        cr_assert_eq(have, 30);
        cr_expect_arr_eq(got, v, sizeof(v));
        qf_queue_unref(data);
        qf_queue_unref(counts);
    }
}

/* spec 62: 10 threads each enqueue_many 100 values; one dequeue_many(1000)
 * gets every value 10 times. */
Test(queue, parallel_enqueue_many_then_one_dequeue_many)
{
    qf_queue *q = float_scalar_q(1000);
    float v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 10.0f * (float)i;
    op_thread t[10];
    for (int i = 0; i < 10; i++)
        op_start(&t[i], q, OP_ENQUEUE_MANY, el(1, vec_f32(100, v)), 0);
    qf_element *b = NULL;
    OK(qf_queue_dequeue_many(q, 1000, &b));
    for (int i = 0; i < 10; i++) {
        op_join(&t[i]);
        cr_expect_eq(t[i].rc, QF_OK, "%s", t[i].msg);
    }
    cr_assert_eq(rows(b), 1000);
    int count[100] = {0};
    const float *f = cdata(b, 0);
    for (int i = 0; i < 1000; i++) {
        int k = (int)(f[i] / 10.0f);
        cr_assert(k >= 0 && k < 100 && f[i] == 10.0f * (float)k, "stray value %g", (double)f[i]);
        count[k]++;
    }
    for (int k = 0; k < 100; k++)
        cr_expect_eq(count[k], 10, "value %d seen %d times", 10 * k, count[k]);
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 62: 10 threads each dequeue_many(100) from 1000 values and together
 * get every value exactly once (each batch in order). */
Test(queue, parallel_dequeue_many_gets_everything_once)
{
    qf_queue *q = float_scalar_q(1000);
    float v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = (float)i;
    enq_many_f(q, 1000, v);
    op_thread t[10];
    for (int i = 0; i < 10; i++)
        op_start(&t[i], q, OP_DEQUEUE_MANY, NULL, 100);
    int seen[1000] = {0};
    for (int i = 0; i < 10; i++) {
        op_join(&t[i]);
        cr_assert_eq(t[i].rc, QF_OK, "%s", t[i].msg);
        cr_assert_eq(rows(t[i].elem), 100);
        const float *f = cdata(t[i].elem, 0);
        for (int j = 0; j < 100; j++) {
            int k = (int)f[j];
            cr_assert(k >= 0 && k < 1000);
            seen[k]++;
            if (j > 0)
                cr_expect_gt(f[j], f[j - 1]);
        }
        qf_element_free(t[i].elem);
    }
    for (int i = 0; i < 1000; i++)
        cr_expect_eq(seen[i], 1, "value %d seen %d times", i, seen[i]);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

typedef struct {
    qf_queue *q;
    int n;
    float value;
    int bad;
    qf_code rc;
    pthread_t th;
} smoke_worker;

static void *smoke_producer(void *arg)
{
    smoke_worker *w = arg;
    for (int i = 0; i < w->n && w->rc == QF_OK; i++) {
        qf_tensor *t = qf_tensor_new_f32(w->value);
        qf_element *e = t ? qf_element_of(1, &t) : NULL;
        w->rc = e ? qf_queue_enqueue(w->q, e) : QF_RESOURCE_EXHAUSTED;
        if (w->rc != QF_OK)
            qf_element_free(e);
    }
    return NULL;
}

static void *smoke_consumer(void *arg)
{
    smoke_worker *w = arg;
    for (int i = 0; i < w->n && w->rc == QF_OK; i++) {
        qf_element *e = NULL;
        w->rc = qf_queue_dequeue(w->q, &e);
        if (w->rc != QF_OK)
            break;
        const qf_tensor *t = qf_element_get(e, 0);
        float f = t && qf_tensor_dtype(t) == QF_FLOAT32 ? *(const float *)qf_tensor_cdata(t) : 0;
        if (f != 10.0f && f != 20.0f)
            w->bad++;
        qf_element_free(e);
    }
    return NULL;
}

/* spec 62: 10 producers (100 enqueues of 20.0 each) and 10 consumers (100
 * dequeues each) share a capacity-50 queue prefilled with 49 x 10.0: every
 * value seen is 10.0 or 20.0, and 49 elements remain. */
Test(queue, parallel_producers_and_consumers_on_a_small_queue)
{
    qf_queue *q = float_q(50);
    for (int i = 0; i < 49; i++)
        enq_f(q, 10.0f);
    smoke_worker prod[10], cons[10];
    for (int i = 0; i < 10; i++) {
        prod[i] = (smoke_worker){.q = q, .n = 100, .value = 20.0f};
        cons[i] = (smoke_worker){.q = q, .n = 100};
        cr_assert_eq(pthread_create(&prod[i].th, NULL, smoke_producer, &prod[i]), 0);
        cr_assert_eq(pthread_create(&cons[i].th, NULL, smoke_consumer, &cons[i]), 0);
    }
    for (int i = 0; i < 10; i++) {
        pthread_join(prod[i].th, NULL);
        pthread_join(cons[i].th, NULL);
    }
    for (int i = 0; i < 10; i++) {
        cr_expect_eq(prod[i].rc, QF_OK, "producer %d: %s", i, qf_code_name(prod[i].rc));
        cr_expect_eq(cons[i].rc, QF_OK, "consumer %d: %s", i, qf_code_name(cons[i].rc));
        cr_expect_eq(cons[i].bad, 0, "consumer %d saw %d stray values", i, cons[i].bad);
    }
    cr_expect_eq(qf_queue_size(q), 49);
    qf_queue_unref(q);
}

/* Single-producer / single-consumer queues (creation flags) through the
 * element API: one enqueue_many thread, one dequeue_up_to consumer, order
 * kept. */
Test(queue, single_producer_single_consumer_flags_keep_order)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_dtype dts[2] = {layout == LAYOUT_PTR ? QF_PTR : QF_INT32, QF_STRING};
        qf_shape shs[2] = {qf_shape_scalar(), qf_shape_scalar()};
        qf_queue_options o = {.capacity = 8,
                              .num_components = layout == LAYOUT_BOXED ? 2 : 1,
                              .dtypes = dts,
                              .shapes = shs,
                              .name = "q",
                              .flags = QF_QUEUE_SINGLE_PRODUCER | QF_QUEUE_SINGLE_CONSUMER};
        qf_queue *q = NULL;
        OK(qf_fifo_queue_new(&o, &q));
        int32_t v[1000], got[1000];
        for (int i = 0; i < 1000; i++)
            v[i] = i;
        op_thread p;
        op_start(&p, q, OP_ENQUEUE_MANY, iq_batch(layout, 1000, v), 0);
        size_t have = 0;
        while (have < 1000) {
            /* an open queue's dequeue_up_to waits for n: ask for what is left */
            int64_t k = 1000 - (int64_t)have < 7 ? 1000 - (int64_t)have : 7;
            qf_element *b = NULL;
            OK(qf_queue_dequeue_up_to(q, k, &b));
            have += iq_values(layout, b, got + have, 1000 - have);
        }
        op_join(&p);
        cr_expect_eq(p.rc, QF_OK, "%s", p.msg);
        cr_expect_arr_eq(got, v, sizeof(v));
        qf_queue_unref(q);
    }
}

/* ====================================================================== */
/* Poll forms with elements                                               */
/* ====================================================================== */

typedef struct {
    qf_waker w;
    atomic_int wakes;
} counting_waker;

static void on_wake(qf_waker *w)
{
    atomic_fetch_add(&((counting_waker *)(void *)w)->wakes, 1);
}

static void cw_init(counting_waker *cw)
{
    atomic_init(&cw->wakes, 0);
    qf_waker_init(&cw->w, on_wake, NULL);
}

/* The poll forms of the element API: QF_PENDING parks the waker (the
 * caller keeps her element), the other side's progress or a close wakes
 * it, and polling again finishes. */
Test(queue, poll_forms_park_a_waker_until_the_call_can_finish)
{
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        qf_queue *q = iq_new(layout, 1);
        counting_waker pw, cw;
        cw_init(&pw);
        cw_init(&cw);
        OK(qf_queue_poll_enqueue(q, iq_elem(layout, 1), &pw.w));
        qf_element *e2 = iq_elem(layout, 2);
        cr_assert_eq(qf_queue_poll_enqueue(q, e2, &pw.w), QF_PENDING);
        cr_expect_eq(atomic_load(&pw.wakes), 0);
        cr_expect_eq(deq_i(layout, q), 1);
        cr_expect_eq(atomic_load(&pw.wakes), 1, "the dequeue woke the parked producer");
        OK(qf_queue_poll_enqueue(q, e2, &pw.w));

        qf_element *out = NULL;
        OK(qf_queue_poll_dequeue(q, &cw.w, &out));
        cr_expect_eq(iq_value(layout, out), 2);
        out = UNTOUCHED;
        cr_assert_eq(qf_queue_poll_dequeue(q, &cw.w, &out), QF_PENDING);
        cr_expect_eq(out, UNTOUCHED);
        enq_i(layout, q, 3);
        cr_expect_eq(atomic_load(&cw.wakes), 1, "the enqueue woke the parked consumer");
        OK(qf_queue_poll_dequeue(q, &cw.w, &out));
        cr_expect_eq(iq_value(layout, out), 3);

        out = UNTOUCHED;
        cr_assert_eq(qf_queue_poll_dequeue(q, &cw.w, &out), QF_PENDING);
        OK(qf_queue_close(q, false));
        cr_expect_eq(atomic_load(&cw.wakes), 2, "the close woke the parked consumer");
        REFUSED(qf_queue_poll_dequeue(q, &cw.w, &out), QF_OUT_OF_RANGE, "is closed");
        cr_expect_eq(out, UNTOUCHED);
        qf_queue_unref(q);
    }
}

/* ====================================================================== */
/* QF_PTR elements on a pointer queue: ownership                          */
/* ====================================================================== */

#define N_OBJS 16
static atomic_int destroyed_ids[N_OBJS];

typedef struct {
    int id;
} obj;

static void obj_dtor(void *p)
{
    obj *o = p;
    atomic_fetch_add(&destroyed_ids[o->id], 1);
    free(o);
}

static obj *obj_new(int id)
{
    obj *o = malloc(sizeof(*o));
    cr_assert_not_null(o);
    o->id = id;
    return o;
}

static void reset_objs(void)
{
    for (int i = 0; i < N_OBJS; i++)
        atomic_store(&destroyed_ids[i], 0);
}

static int destroyed(int id)
{
    return atomic_load(&destroyed_ids[id]);
}

static qf_element *owned_ptr(int id)
{
    qf_tensor *t = qf_tensor_new_scalar_ptr(obj_new(id), obj_dtor);
    cr_assert_not_null(t);
    return el(1, t);
}

static qf_element *owned_ptrs(int first, int n)
{
    qf_shape sh = QF_SHAPE(n);
    qf_tensor *t = qf_tensor_new_ptr(&sh, obj_dtor);
    cr_assert_not_null(t);
    for (int i = 0; i < n; i++)
        OK(qf_tensor_set_ptr(t, i, obj_new(first + i)));
    return el(1, t);
}

static int id_of(const qf_tensor *t, int64_t i)
{
    const obj *o = qf_tensor_ptr(t, i);
    cr_assert_not_null(o);
    return o->id;
}

/* The element API on a pointer queue with a destructor: enqueue moves the
 * objects into the queue; a dequeued element (or batch) owns its objects
 * (freeing it destroys them), or the caller takes them out; objects left
 * in the queue are destroyed exactly once when it is freed. */
Test(queue, pointer_queue_element_api_moves_object_ownership)
{
    reset_objs();
    qf_queue *q = NULL;
    OK(qf_ptr_queue_new(8, "pq", 0, obj_dtor, &q));
    cr_expect(qf_queue_is_inline(q));
    cr_expect_eq(qf_queue_dtype(q, 0), QF_PTR);
    for (int id = 0; id < 4; id++)
        OK(qf_queue_enqueue(q, owned_ptr(id)));
    OK(qf_queue_enqueue_many(q, owned_ptrs(4, 3), NULL));
    cr_expect_eq(qf_queue_size(q), 7);
    for (int id = 0; id < 7; id++)
        cr_expect_eq(destroyed(id), 0, "object %d destroyed while in the queue", id);

    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    const qf_tensor *t = qf_element_get(e, 0);
    cr_expect_eq(qf_tensor_dtype(t), QF_PTR);
    cr_expect_str_eq(shape_txt(e, 0), "[]");
    cr_expect(qf_tensor_ptr_dtor(t) == obj_dtor, "the dequeued element owns its object");
    cr_expect_eq(id_of(t, 0), 0);
    qf_element_free(e);
    cr_expect_eq(destroyed(0), 1);

    OK(qf_queue_dequeue(q, &e));
    void *p = NULL;
    OK(qf_tensor_take_ptr(qf_element_get(e, 0), 0, &p));
    qf_element_free(e);
    cr_expect_eq(destroyed(1), 0, "taken out: the caller's object");
    obj_dtor(p);

    OK(qf_queue_dequeue_many(q, 2, &e));
    t = qf_element_get(e, 0);
    cr_expect_str_eq(shape_txt(e, 0), "[2]");
    cr_expect(qf_tensor_ptr_dtor(t) == obj_dtor);
    cr_expect(id_of(t, 0) == 2 && id_of(t, 1) == 3);
    qf_element_free(e);

    qf_queue_unref(q); /* 4, 5, 6 are still inside */
    for (int id = 0; id < 7; id++)
        cr_expect_eq(destroyed(id), 1, "object %d destroyed %d times", id, destroyed(id));
}

/* A refused enqueue leaves the objects with the caller: full (try form),
 * shared owning tensor (FAILED_PRECONDITION, nothing moves), closed. */
Test(queue, pointer_queue_refused_enqueue_leaves_objects_with_the_caller)
{
    reset_objs();
    qf_queue *q = NULL;
    OK(qf_ptr_queue_new(1, "pq", 0, obj_dtor, &q));
    OK(qf_queue_enqueue(q, owned_ptr(0)));
    qf_element *e1 = owned_ptr(1);
    REFUSED(qf_queue_try_enqueue(q, e1), QF_UNAVAILABLE, "");
    cr_expect_eq(id_of(qf_element_get(e1, 0), 0), 1);

    qf_element *dummy = NULL;
    OK(qf_queue_dequeue(q, &dummy));
    qf_element_free(dummy);
    cr_expect_eq(destroyed(0), 1);
    qf_tensor *shared = qf_tensor_new_scalar_ptr(obj_new(2), obj_dtor);
    cr_assert_not_null(shared);
    qf_element *e2 = el(1, qf_tensor_ref(shared));
    REFUSED(qf_queue_enqueue(q, e2), QF_FAILED_PRECONDITION, "");
    cr_expect_eq(qf_queue_size(q), 0);
    qf_element_free(e2);
    cr_expect_eq(destroyed(2), 0);
    qf_tensor_unref(shared);
    cr_expect_eq(destroyed(2), 1);

    OK(qf_queue_close(q, false));
    REFUSED(qf_queue_enqueue(q, e1), QF_CANCELLED, "FIFOQueue 'pq' is closed.");
    cr_expect_eq(destroyed(1), 0);
    qf_element_free(e1);
    cr_expect_eq(destroyed(1), 1);
    qf_queue_unref(q);
    for (int id = 0; id < 3; id++)
        cr_expect_eq(destroyed(id), 1, "object %d destroyed %d times", id, destroyed(id));
}

/* A batch refused for what its elements hold leaves them whole in the
 * queue, in their order: elements of rank QF_MAX_RANK have no batch shape
 * (it would need one more dimension), so dequeue_many and dequeue_up_to
 * fail with Unimplemented, naming the queue and the reason, and plain
 * dequeues still get every element. */
Test(queue, refused_batch_leaves_the_elements_whole)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = {.rank = QF_MAX_RANK};
    for (int d = 0; d < QF_MAX_RANK; d++)
        sh.dims[d] = 1;
    qf_queue *q = new_queue(4, 1, &dt, &sh, NULL, "q");
    int32_t v[2] = {10, 11};
    OK(qf_queue_enqueue(q, el(1, t_from(QF_INT32, sh, &v[0]))));
    OK(qf_queue_enqueue(q, el(1, t_from(QF_INT32, sh, &v[1]))));

    qf_element *b = NULL;
    REFUSED(qf_queue_dequeue_many(q, 2, &b), QF_UNIMPLEMENTED,
            "could not build the batch of FIFOQueue 'q': component 0 has rank 8");
    cr_expect_null(b);
    REFUSED(qf_queue_dequeue_up_to(q, 1, &b), QF_UNIMPLEMENTED, "its batch would need rank 9");
    cr_expect_null(b);
    cr_expect_eq(qf_queue_size(q), 2);
    for (int i = 0; i < 2; i++) {
        qf_element *e = NULL;
        OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(i32_at(e, 0, 0), v[i]);
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* spec 32 with owned objects: a cancelled enqueue_many of three objects
 * inserted one; the caller's batch owns the other two, the queue the one
 * it took; each object is destroyed exactly once. */
Test(queue, pointer_queue_cancelled_enqueue_many_splits_ownership)
{
    reset_objs();
    qf_queue *q = NULL;
    OK(qf_ptr_queue_new(2, "pq", 0, obj_dtor, &q));
    OK(qf_queue_enqueue(q, owned_ptr(0)));
    op_thread t;
    op_start(&t, q, OP_ENQUEUE_MANY, owned_ptrs(1, 3), 0);
    WAIT_WHILE_BLOCKED(qf_queue_size(q) == 2, &t);
    wait_parked(&t);
    OK(qf_queue_close(q, true));
    op_join(&t);
    cr_expect_eq(t.rc, QF_CANCELLED, "%s", qf_code_name(t.rc));
    cr_expect(has(t.msg, "Enqueue operation was cancelled"), "message: %s", t.msg);
    cr_expect_eq(t.enqueued, 1);
    cr_assert_not_null(t.elem);
    const qf_tensor *left = qf_element_get(t.elem, 0);
    cr_assert_eq(qf_tensor_num_elements(left), 2);
    cr_expect(id_of(left, 0) == 2 && id_of(left, 1) == 3);
    cr_expect(qf_tensor_ptr_dtor(left) == obj_dtor, "the caller's rows are still owned");
    for (int id = 0; id < 4; id++)
        cr_expect_eq(destroyed(id), 0);
    qf_element_free(t.elem);
    cr_expect(destroyed(2) == 1 && destroyed(3) == 1);
    cr_expect(destroyed(0) == 0 && destroyed(1) == 0, "the queue's objects are untouched");
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    cr_expect_eq(id_of(qf_element_get(e, 0), 0), 0);
    qf_element_free(e);
    qf_queue_unref(q);
    for (int id = 0; id < 4; id++)
        cr_expect_eq(destroyed(id), 1, "object %d destroyed %d times", id, destroyed(id));
}

/* A pointer queue without a destructor never frees user objects; dequeued
 * tensors do not own them either. */
Test(queue, pointer_queue_without_destructor_owns_nothing)
{
    static int x, y;
    qf_queue *q = NULL;
    OK(qf_ptr_queue_new(4, NULL, 0, NULL, &q));
    cr_expect_str_eq(qf_queue_name(q), "fifo_queue");
    OK(qf_queue_enqueue(q, el(1, qf_tensor_new_scalar_ptr(&x, NULL))));
    OK(qf_queue_enqueue(q, el(1, qf_tensor_new_scalar_ptr(&y, NULL))));
    qf_element *e = NULL;
    OK(qf_queue_dequeue(q, &e));
    cr_expect(qf_tensor_ptr(qf_element_get(e, 0), 0) == &x);
    cr_expect(qf_tensor_ptr_dtor(qf_element_get(e, 0)) == NULL);
    qf_element_free(e);
    qf_queue_unref(q); /* &y is left inside: nothing to destroy */
}

/* ====================================================================== */
/* from_list (spec 41-42)                                                 */
/* ====================================================================== */

static qf_queue *f32_queue(const char *name, const qf_shape *shape)
{
    qf_dtype dt = QF_FLOAT32;
    qf_queue_options o = {
        .capacity = 10, .num_components = 1, .dtypes = &dt, .shapes = shape, .name = name};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

/* spec 41: 20 random picks among 10 queues each enqueue 10.0 and dequeue
 * 10.0 through the picked queue; index 3 of 2 queues fails when run. */
Test(queue, spec_41_from_list_picks_a_queue_by_index)
{
    qf_shape sc = qf_shape_scalar();
    qf_queue *qs[10];
    for (int i = 0; i < 10; i++)
        qs[i] = f32_queue("q", &sc);
    qf_queue_list *l = NULL;
    OK(qf_queue_list_new(qs, 10, &l));
    cr_expect_eq(qf_queue_list_size(l), 10);
    uint64_t rng = 7;
    for (int k = 0; k < 20; k++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t idx = (int64_t)((rng >> 33) % 10);
        qf_queue *q = NULL;
        OK(qf_queue_list_pick(l, idx, &q));
        cr_expect_eq(q, qs[idx]);
        OK(qf_queue_enqueue(q, el(1, qf_tensor_new_f32(10.0f))));
        qf_element *e = NULL;
        OK(qf_queue_dequeue(q, &e));
        cr_expect_eq(f32_at(e, 0, 0), 10.0f);
        qf_element_free(e);
        qf_queue_unref(q);
    }
    qf_queue_list_free(l);
    OK(qf_queue_list_new(qs, 2, &l));
    qf_queue *q = (qf_queue *)1;
    REFUSED(qf_queue_list_pick(l, 3, &q), QF_INVALID_ARGUMENT, "is not in");
    cr_expect_eq(q, (qf_queue *)1, "untouched on failure");
    qf_queue_list_free(l);
    for (int i = 0; i < 10; i++)
        qf_queue_unref(qs[i]);
}

/* spec 41: an empty list, or queues with other dtypes or names, are
 * refused when the list is made. */
Test(queue, spec_41_from_list_needs_identical_dtypes_and_names)
{
    qf_queue_list *l = (qf_queue_list *)1;
    REFUSED(qf_queue_list_new(NULL, 0, &l), QF_INVALID_ARGUMENT, "empty");
    cr_expect_eq(l, (qf_queue_list *)1, "untouched on failure");
    qf_shape sc = qf_shape_scalar();
    qf_queue *a = f32_queue("a", &sc);
    qf_dtype it = QF_INT32;
    qf_queue_options o = {.capacity = 10, .num_components = 1, .dtypes = &it, .name = "b"};
    qf_queue *b = NULL;
    OK(qf_fifo_queue_new(&o, &b));
    qf_queue *ab[2] = {a, b};
    REFUSED(qf_queue_list_new(ab, 2, &l), QF_INVALID_ARGUMENT, "different types");
    qf_dtype ft = QF_FLOAT32;
    const char *nm[1] = {"x"};
    qf_queue_options on = {
        .capacity = 10, .num_components = 1, .dtypes = &ft, .names = nm, .name = "c"};
    qf_queue *c = NULL;
    OK(qf_fifo_queue_new(&on, &c));
    qf_queue *ac[2] = {a, c};
    REFUSED(qf_queue_list_new(ac, 2, &l), QF_INVALID_ARGUMENT, "different names");
    qf_queue_unref(a);
    qf_queue_unref(b);
    qf_queue_unref(c);
}

/* spec 42: merged static shapes. */
Test(queue, spec_42_from_list_merges_static_shapes)
{
    struct {
        qf_shape a, b, want;
    } cases[] = {
        {QF_SHAPE(1), QF_SHAPE(2), QF_SHAPE(QF_UNKNOWN_DIM)},
        {QF_SHAPE(1, 1), QF_SHAPE(1, 2), QF_SHAPE(1, QF_UNKNOWN_DIM)},
        {QF_SHAPE(QF_UNKNOWN_DIM, 1), QF_SHAPE(1, QF_UNKNOWN_DIM),
         QF_SHAPE(QF_UNKNOWN_DIM, QF_UNKNOWN_DIM)},
        {QF_SHAPE(1, QF_UNKNOWN_DIM), QF_SHAPE(QF_UNKNOWN_DIM), qf_shape_unknown()},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        /* Unknown dimensions need a padding queue. */
        qf_dtype dt = QF_FLOAT32;
        qf_queue_options oa = {
            .capacity = 10, .num_components = 1, .dtypes = &dt, .shapes = &cases[k].a, .name = "a"};
        qf_queue_options ob = oa;
        ob.shapes = &cases[k].b;
        ob.name = "b";
        qf_queue *qa = NULL, *qb = NULL;
        OK(qf_padding_fifo_queue_new(&oa, &qa));
        OK(qf_padding_fifo_queue_new(&ob, &qb));
        qf_queue *two[2] = {qa, qb};
        qf_queue_list *l = NULL;
        OK(qf_queue_list_new(two, 2, &l));
        const qf_shape *got = qf_queue_list_shape(l, 0);
        cr_assert_not_null(got);
        char g[64], w[64];
        cr_expect(qf_shape_equal(got, &cases[k].want), "case %zu: got %s, want %s", k,
                  qf_shape_format(got, g, sizeof(g)),
                  qf_shape_format(&cases[k].want, w, sizeof(w)));
        qf_queue_list_free(l);
        qf_queue_unref(qa);
        qf_queue_unref(qb);
    }
}
