/* fuzz_queue.c - libFuzzer target: a sequence of non-blocking calls on one
 * queue of any kind, decoded from the input, checked against a model.
 *
 * The input picks a queue (FIFOQueue, RandomShuffleQueue, PaddingFIFOQueue,
 * PriorityQueue or a pointer queue), its capacity, its components (an int64
 * tag, with a float32 row, a string, or no shapes at all) and then up to
 * 256 calls: the try forms of enqueue, enqueue_many, dequeue, dequeue_many,
 * dequeue_up_to, the bulk take and the values and pointer calls, the poll
 * forms (abandoned when pending), elements and batches that break the
 * queue's contract (wrong count, dtype, shape or first dimensions), close
 * and cancel. Every element carries a tag no other has, and the model holds
 * the tags the queue should hold. After each call:
 *   - a call that fails leaves the queue as it was, and the caller's
 *     element with the caller (ASan reports a leak or a double free);
 *   - what a dequeue returns was in the model: the oldest for the FIFO
 *     kinds, one of the smallest priorities for a PriorityQueue, any for
 *     a RandomShuffleQueue; every component row matches its tag;
 *   - qf_queue_size() equals the model's count, never above the capacity;
 *   - an element or batch that breaks the contract is refused with
 *     QF_INVALID_ARGUMENT, closed queue or not;
 *   - a close succeeds, but for a second plain one (spec 34);
 *   - a try enqueue on an open queue with room succeeds, on a full one
 *     fails with QF_UNAVAILABLE, on a closed one with QF_CANCELLED; a try
 *     dequeue succeeds exactly when an element may leave (for a shuffle
 *     queue while open: more than min_after_dequeue present) and fails
 *     with QF_OUT_OF_RANGE when closed and empty.
 * At the end the queue is closed and drained: exactly the model's tags come
 * out (nothing lost, nothing twice). No call may block: a hang is a
 * finding (libFuzzer's -timeout). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "qflow.h"

#define MAX_CALLS 256
#define MAX_ROWS 6
#define MAX_TAGS 4096

enum kind { K_FIFO, K_SHUFFLE, K_PADDING, K_PRIORITY, K_PTR, K_COUNT };
enum extra { X_NONE, X_FLOATS, X_STRING, X_UNSHAPED, X_COUNT };

/* The queue under test and what it should hold. */
typedef struct model {
    qf_queue *q;
    enum kind kind;
    enum extra extra;
    int64_t cap; /* -1: unbounded */
    int64_t mad; /* min_after_dequeue (shuffle) */
    int nfloat;  /* floats per row with X_FLOATS */
    bool closed;
    int64_t tags[MAX_TAGS]; /* in arrival order */
    int64_t prio[MAX_TAGS]; /* PriorityQueue: each tag's priority */
    int len[MAX_TAGS];      /* PaddingFIFOQueue: each element's length */
    size_t n;
    int64_t next_tag;
} model;

/* The float row of a tag: whole numbers below 2^24, exact in float32. */
static float row_value(int64_t tag, int i)
{
    return (float)((tag & 0xffff) * 16 + i);
}

static bool fifo_like(const model *m)
{
    return m->kind == K_FIFO || m->kind == K_PADDING || m->kind == K_PTR;
}

/* Components an element of this queue has (the priority included). */
static size_t ncomp(const model *m)
{
    if (m->kind == K_PTR)
        return 1;
    size_t c = m->extra == X_NONE ? 1 : 2;
    return m->kind == K_PRIORITY ? c + 1 : c;
}

/* Index of the tag component (after the priority). */
static size_t tag_comp(const model *m)
{
    return m->kind == K_PRIORITY ? 1 : 0;
}

/* ------------------------------------------------------------ the queue */

static bool make_queue(model *m, fuzz_input *in)
{
    static const int64_t caps[8] = {1, 2, 3, 4, 8, 16, 64, -1};
    m->kind = (enum kind)(fuzz_next(in) % K_COUNT);
    m->extra = (enum extra)(fuzz_next(in) % X_COUNT);
    m->cap = caps[fuzz_next(in) % 8];
    m->nfloat = 1 + (int)(fuzz_next(in) % 16);
    if (m->kind == K_PTR) {
        m->extra = X_NONE; /* one pointer, no tensors */
        return qf_ptr_queue_new(m->cap, "fz", 0, NULL, &m->q) == QF_OK;
    }
    if (m->kind == K_PADDING && m->extra == X_UNSHAPED)
        m->extra = X_NONE; /* a padding queue needs shapes */
    qf_dtype dt[2] = {QF_INT64, m->extra == X_STRING ? QF_STRING : QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(m->nfloat)};
    if (m->kind == K_PADDING)
        sh[0] = QF_SHAPE(QF_UNKNOWN_DIM); /* the tag first, then 0..2 more */
    if (m->extra == X_STRING)
        sh[1] = qf_shape_scalar();
    qf_queue_options o = {.capacity = m->cap,
                          .num_components = m->extra == X_NONE ? 1 : 2,
                          .dtypes = dt,
                          .shapes = m->extra == X_UNSHAPED ? NULL : sh,
                          .name = "fz",
                          .seed = 1,
                          .seed2 = 2};
    qf_code rc;
    switch (m->kind) {
    case K_SHUFFLE:
        m->mad = m->cap > 1 ? (int64_t)(fuzz_next(in) % (unsigned)m->cap) : 0;
        if (m->cap < 0)
            m->mad = fuzz_next(in) % 4;
        o.min_after_dequeue = m->mad;
        rc = qf_random_shuffle_queue_new(&o, &m->q);
        break;
    case K_PADDING:
        rc = qf_padding_fifo_queue_new(&o, &m->q);
        break;
    case K_PRIORITY:
        rc = qf_priority_queue_new(&o, &m->q);
        break;
    default:
        rc = qf_fifo_queue_new(&o, &m->q);
        break;
    }
    return rc == QF_OK;
}

/* ------------------------------------------------------- elements */

/* The element of one new tag, in the queue's shape (rows: padding length). */
static qf_element *good_element(model *m, int64_t tag, int64_t prio, int pad_len)
{
    qf_tensor *t[3] = {NULL, NULL, NULL};
    size_t k = 0;
    if (m->kind == K_PRIORITY)
        t[k++] = qf_tensor_new_i64(prio);
    if (m->kind == K_PADDING) {
        qf_shape s = QF_SHAPE(1 + pad_len);
        qf_tensor *v = qf_tensor_new(QF_INT64, &s);
        check(v);
        int64_t *d = qf_tensor_data(v);
        for (int i = 0; i <= pad_len; i++)
            d[i] = i == 0 ? tag : -tag;
        t[k++] = v;
    } else {
        t[k++] = qf_tensor_new_i64(tag);
    }
    if (m->extra == X_FLOATS || m->extra == X_UNSHAPED) {
        qf_shape s = QF_SHAPE(m->nfloat);
        qf_tensor *f = qf_tensor_new(QF_FLOAT32, &s);
        check(f);
        float *d = qf_tensor_data(f);
        for (int i = 0; i < m->nfloat; i++)
            d[i] = row_value(tag, i);
        t[k++] = f;
    } else if (m->extra == X_STRING) {
        char buf[32];
        snprintf(buf, sizeof(buf), "tag-%lld", (long long)tag);
        t[k++] = qf_tensor_new_cstr(buf);
    }
    qf_element *e = qf_element_of(k, t);
    check(e);
    return e;
}

/* An element that breaks the queue's contract in the way `how` picks, or
 * NULL when this queue has no such way (the caller then skips). */
static qf_element *bad_element(model *m, unsigned how)
{
    size_t n = ncomp(m);
    switch (how % 3) {
    case 0: { /* one component too many */
        qf_tensor *t[4];
        for (size_t i = 0; i <= n; i++)
            t[i] = qf_tensor_new_i64((int64_t)i);
        return qf_element_of(n + 1, t);
    }
    case 1: { /* the tag as a float */
        qf_element *e = good_element(m, -1, 0, 0);
        qf_shape s = m->kind == K_PADDING ? QF_SHAPE(1) : qf_shape_scalar();
        check(qf_element_set(e, tag_comp(m), qf_tensor_new(QF_FLOAT32, &s)) == QF_OK);
        return e;
    }
    default: /* the tag with a shape the queue does not have */
        if (m->extra == X_UNSHAPED || m->kind == K_PADDING)
            return NULL; /* any shape fits, or any length does */
        qf_element *e = good_element(m, -1, 0, 0);
        qf_shape s = QF_SHAPE(2);
        check(qf_element_set(e, tag_comp(m), qf_tensor_new(QF_INT64, &s)) == QF_OK);
        return e;
    }
}

/* A batch of k new tags (row r: tags[r], priorities prios[r]). */
static qf_element *good_batch(model *m, const int64_t *tags, const int64_t *prios, int k,
                              int pad_len)
{
    qf_tensor *t[3];
    size_t c = 0;
    if (m->kind == K_PRIORITY) {
        qf_shape s = QF_SHAPE(k);
        t[c] = qf_tensor_new(QF_INT64, &s);
        check(t[c]);
        memcpy(qf_tensor_data(t[c]), prios, (size_t)k * sizeof(int64_t));
        c++;
    }
    qf_shape s = m->kind == K_PADDING ? QF_SHAPE(k, 1 + pad_len) : QF_SHAPE(k);
    t[c] = qf_tensor_new(QF_INT64, &s);
    check(t[c]);
    int64_t *d = qf_tensor_data(t[c]);
    for (int r = 0; r < k; r++)
        for (int i = 0; i <= (m->kind == K_PADDING ? pad_len : 0); i++)
            *d++ = i == 0 ? tags[r] : -tags[r];
    c++;
    if (m->extra == X_FLOATS || m->extra == X_UNSHAPED) {
        qf_shape fs = QF_SHAPE(k, m->nfloat);
        t[c] = qf_tensor_new(QF_FLOAT32, &fs);
        check(t[c]);
        float *f = qf_tensor_data(t[c]);
        for (int r = 0; r < k; r++)
            for (int i = 0; i < m->nfloat; i++)
                *f++ = row_value(tags[r], i);
        c++;
    } else if (m->extra == X_STRING) {
        qf_shape ss = QF_SHAPE(k);
        t[c] = qf_tensor_new(QF_STRING, &ss);
        check(t[c]);
        for (int r = 0; r < k; r++) {
            char buf[32];
            int len = snprintf(buf, sizeof(buf), "tag-%lld", (long long)tags[r]);
            check(qf_tensor_set_string(t[c], r, buf, (size_t)len) == QF_OK);
        }
        c++;
    }
    qf_element *e = qf_element_of(c, t);
    check(e);
    return e;
}

/* ------------------------------------------------------------ the model */

static void model_add(model *m, int64_t tag, int64_t prio, int len)
{
    check(m->n < MAX_TAGS);
    m->tags[m->n] = tag;
    m->prio[m->n] = prio;
    m->len[m->n] = len;
    m->n++;
}

/* Where tag is in the model; m->n when it is not there. */
static size_t model_find(const model *m, int64_t tag)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->tags[i] == tag)
            return i;
    return m->n;
}

/* The tag may leave now: remove it from the model (checking the kind's
 * order rule) and return its priority. */
static int64_t model_take(model *m, int64_t tag)
{
    size_t at = model_find(m, tag);
    check(at < m->n); /* it was in the queue, once */
    if (fifo_like(m))
        check(at == 0); /* the oldest */
    int64_t p = m->prio[at];
    if (m->kind == K_PRIORITY)
        for (size_t i = 0; i < m->n; i++)
            check(m->prio[i] >= p); /* one of the smallest */
    memmove(&m->tags[at], &m->tags[at + 1], (m->n - at - 1) * sizeof(int64_t));
    memmove(&m->prio[at], &m->prio[at + 1], (m->n - at - 1) * sizeof(int64_t));
    memmove(&m->len[at], &m->len[at + 1], (m->n - at - 1) * sizeof(int));
    m->n--;
    return p;
}

/* Elements that may leave now through single takes. */
static int64_t takeable(const model *m)
{
    if (m->kind == K_SHUFFLE && !m->closed)
        return (int64_t)m->n > m->mad ? (int64_t)m->n - m->mad : 0;
    return (int64_t)m->n;
}

static bool has_room(const model *m, int64_t k)
{
    return m->cap < 0 || (int64_t)m->n + k <= m->cap;
}

static void check_size(const model *m)
{
    check(qf_queue_size(m->q) == (int64_t)m->n);
    check(m->cap < 0 || (int64_t)m->n <= m->cap);
    check(qf_queue_is_closed(m->q) == m->closed);
}

/* Row r of a dequeued element or batch (rank 0 when not a batch): check its
 * components against its tag and take the tag out of the model. A padding
 * queue's element comes back as it went in (spec 89), a batch's rows padded
 * with 0 to the batch's longest (spec 90-91). */
static void take_row(model *m, const qf_element *e, int64_t r, bool batch)
{
    check(qf_element_size(e) == ncomp(m));
    size_t tc = tag_comp(m);
    const qf_tensor *tt = qf_element_get(e, tc);
    check(tt && qf_tensor_dtype(tt) == QF_INT64);
    const qf_shape *ts = qf_tensor_shape(tt);
    int64_t width = 1;
    if (m->kind == K_PADDING) {
        check(ts->rank == (batch ? 2 : 1));
        width = ts->dims[ts->rank - 1];
        check(width >= 1);
    } else {
        check(ts->rank == (batch ? 1 : 0));
    }
    const int64_t *td = qf_tensor_cdata(tt);
    int64_t tag = td[r * width];
    if (m->kind == K_PADDING) {
        size_t at = model_find(m, tag);
        check(at < m->n);
        int len = m->len[at];
        check(batch ? width >= len : width == len);
        for (int64_t i = 1; i < width; i++) /* the element's own -tag, then padding 0 */
            check(td[r * width + i] == (i < len ? -tag : 0));
    }
    int64_t prio = model_take(m, tag);
    if (m->kind == K_PRIORITY) {
        const qf_tensor *pt = qf_element_get(e, 0);
        check(pt && qf_tensor_dtype(pt) == QF_INT64);
        check(((const int64_t *)qf_tensor_cdata(pt))[r] == prio);
    }
    if (m->extra == X_FLOATS || m->extra == X_UNSHAPED) {
        const qf_tensor *ft = qf_element_get(e, tc + 1);
        check(ft && qf_tensor_dtype(ft) == QF_FLOAT32);
        const float *f = (const float *)qf_tensor_cdata(ft) + r * m->nfloat;
        for (int i = 0; i < m->nfloat; i++)
            check(f[i] == row_value(tag, i));
    } else if (m->extra == X_STRING) {
        const qf_tensor *st = qf_element_get(e, tc + 1);
        check(st && qf_tensor_dtype(st) == QF_STRING);
        size_t len = 0;
        const char *s = qf_tensor_string(st, r, &len);
        char buf[32];
        int want = snprintf(buf, sizeof(buf), "tag-%lld", (long long)tag);
        check(s && len == (size_t)want && memcmp(s, buf, len) == 0);
    }
}

static void take_batch(model *m, const qf_element *b, int64_t *ret_rows)
{
    const qf_tensor *tt = qf_element_get(b, tag_comp(m));
    check(tt);
    const qf_shape *ts = qf_tensor_shape(tt);
    int64_t rows = ts->dims[0];
    if (m->kind == K_PADDING && rows > 0) { /* as wide as the longest row */
        int64_t width = ts->dims[1], longest = 0;
        const int64_t *td = qf_tensor_cdata(tt);
        for (int64_t r = 0; r < rows; r++) {
            size_t at = model_find(m, td[r * width]);
            check(at < m->n);
            longest = m->len[at] > longest ? m->len[at] : longest;
        }
        check(width == longest);
    }
    for (int64_t r = 0; r < rows; r++)
        take_row(m, b, r, true);
    *ret_rows = rows;
}

/* ------------------------------------------------------------ the calls */

/* One element in, by the try form (w NULL) or the poll form: it goes in
 * exactly when the queue is open with room; a full queue gives
 * QF_UNAVAILABLE (try) or QF_PENDING (poll), a closed one QF_CANCELLED. */
static qf_code put_one(model *m, qf_waker *w, fuzz_input *in)
{
    int64_t tag = m->next_tag++, prio = fuzz_next(in) % 4;
    int pad = (int)(fuzz_next(in) % 3);
    bool room = has_room(m, 1);
    qf_code rc;
    if (m->kind == K_PTR) {
        void *p = (void *)(uintptr_t)(tag + 1);
        rc = w ? qf_queue_poll_enqueue_ptr(m->q, p, w) : qf_queue_try_enqueue_ptr(m->q, p);
    } else {
        qf_element *e = good_element(m, tag, prio, pad);
        rc = w ? qf_queue_poll_enqueue(m->q, e, w) : qf_queue_try_enqueue(m->q, e);
        if (rc != QF_OK)
            qf_element_free(e); /* a failed or pending enqueue leaves it with us */
    }
    check(m->closed ? rc == QF_CANCELLED
          : room    ? rc == QF_OK
                    : rc == (w ? QF_PENDING : QF_UNAVAILABLE));
    if (rc == QF_OK)
        model_add(m, tag, prio, 1 + pad);
    return rc;
}

static void do_enqueue(model *m, fuzz_input *in)
{
    put_one(m, NULL, in);
}

static void do_enqueue_bad(model *m, fuzz_input *in)
{
    if (m->kind == K_PTR) {
        /* the element API on a pointer queue, and a NULL element */
        check(qf_queue_try_enqueue(m->q, NULL) == QF_INVALID_ARGUMENT);
        return;
    }
    qf_element *e = bad_element(m, fuzz_next(in));
    if (!e)
        return;
    /* refused as bad before the queue's state is looked at: closed or not */
    check(qf_queue_try_enqueue(m->q, e) == QF_INVALID_ARGUMENT);
    qf_element_free(e);
}

static void do_enqueue_many(model *m, fuzz_input *in)
{
    int k = (int)(fuzz_next(in) % MAX_ROWS);
    int64_t tags[MAX_ROWS], prios[MAX_ROWS];
    for (int r = 0; r < k; r++) {
        tags[r] = m->next_tag++;
        prios[r] = fuzz_next(in) % 4;
    }
    qf_code rc;
    int pad = (int)(fuzz_next(in) % 3);
    if (m->kind == K_PTR) {
        void *ps[MAX_ROWS];
        for (int r = 0; r < k; r++)
            ps[r] = (void *)(uintptr_t)(tags[r] + 1);
        rc = qf_queue_try_enqueue_many_ptrs(m->q, ps, (size_t)k);
    } else {
        qf_element *b = good_batch(m, tags, prios, k, pad);
        rc = qf_queue_try_enqueue_many(m->q, b);
        if (rc != QF_OK)
            qf_element_free(b);
    }
    if (k == 0)
        check(rc == QF_OK); /* spec 22: even on a closed queue */
    else
        check(m->closed ? rc == QF_CANCELLED : has_room(m, k) ? rc == QF_OK : rc == QF_UNAVAILABLE);
    if (rc == QF_OK)
        for (int r = 0; r < k; r++)
            model_add(m, tags[r], prios[r], 1 + pad);
}

/* One element out, by the try form (w NULL) or the poll form: it comes
 * out exactly when one may leave; a closed and drained queue gives
 * QF_OUT_OF_RANGE, otherwise QF_UNAVAILABLE (try) or QF_PENDING (poll). */
static qf_code take_one(model *m, qf_waker *w)
{
    int64_t can = takeable(m);
    bool drained = m->closed && m->n == 0;
    qf_code rc;
    if (m->kind == K_PTR) {
        void *p = NULL;
        rc = w ? qf_queue_poll_dequeue_ptr(m->q, w, &p) : qf_queue_try_dequeue_ptr(m->q, &p);
        if (rc == QF_OK)
            model_take(m, (int64_t)(uintptr_t)p - 1);
    } else {
        qf_element *e = NULL;
        rc = w ? qf_queue_poll_dequeue(m->q, w, &e) : qf_queue_try_dequeue(m->q, &e);
        if (rc == QF_OK) {
            take_row(m, e, 0, false);
            qf_element_free(e);
        }
    }
    if (can > 0)
        check(rc == QF_OK);
    else
        check(rc == (drained ? QF_OUT_OF_RANGE : w ? QF_PENDING : QF_UNAVAILABLE));
    return rc;
}

static void do_dequeue(model *m)
{
    take_one(m, NULL);
}

static void do_dequeue_many(model *m, fuzz_input *in, bool up_to)
{
    int64_t n = (int64_t)(fuzz_next(in) % 8) - 1; /* -1 .. 6 */
    int64_t can = takeable(m);
    qf_element *b = NULL;
    int64_t rows = 0;
    qf_code rc;
    if (m->kind == K_PTR) {
        void *ps[8];
        size_t got = 0;
        if (n < 0)
            return;
        rc = up_to ? qf_queue_try_dequeue_up_to_ptrs(m->q, (size_t)n, ps, &got)
                   : qf_queue_try_dequeue_many_ptrs(m->q, (size_t)n, ps);
        if (rc == QF_OK) {
            if (!up_to)
                got = (size_t)n;
            for (size_t i = 0; i < got; i++)
                model_take(m, (int64_t)(uintptr_t)ps[i] - 1);
            rows = (int64_t)got;
        }
    } else {
        rc = up_to ? qf_queue_try_dequeue_up_to(m->q, n, &b)
                   : qf_queue_try_dequeue_many(m->q, n, &b);
        if (rc == QF_OK) {
            take_batch(m, b, &rows);
            qf_element_free(b);
        }
    }
    if (n < 0 || m->extra == X_UNSHAPED) {
        check(rc == QF_INVALID_ARGUMENT);
        return;
    }
    if (m->kind == K_PRIORITY && !up_to && m->cap >= 0 && n > m->cap) {
        check(rc == QF_INVALID_ARGUMENT);
        return;
    }
    if (rc == QF_OK) { /* never more than may leave (a shuffle queue's floor) */
        check(rows <= can && rows <= n);
        if (up_to)
            check(rows >= (n > 0 ? 1 : 0));
        else
            check(rows == n);
        if (up_to && fifo_like(m))
            check(rows == (can < n ? can : n)); /* all that is there, up to n */
        return;
    }
    /* A take that fails took nothing: the model is unchanged, and it failed
     * only because too few could leave. */
    check(rc == QF_UNAVAILABLE || rc == QF_OUT_OF_RANGE);
    check(n > 0);
    if (up_to)
        check(can == 0);
    else
        check(can < n);
    if (rc == QF_OUT_OF_RANGE)
        check(m->closed);
}

static void do_values(model *m, fuzz_input *in)
{
    if (!qf_queue_takes_values(m->q))
        return;
    int64_t tag = m->next_tag, v;
    float f[16], g[16];
    const void *vals[2] = {&tag, f};
    void *outs[2] = {&v, g};
    if (fuzz_next(in) & 1) {
        m->next_tag++;
        for (int i = 0; i < m->nfloat; i++)
            f[i] = row_value(tag, i);
        qf_code rc = qf_queue_try_enqueue_values(m->q, vals);
        check(m->closed ? rc == QF_CANCELLED : has_room(m, 1) ? rc == QF_OK : rc == QF_UNAVAILABLE);
        if (rc == QF_OK)
            model_add(m, tag, 0, 1);
        return;
    }
    int64_t can = takeable(m);
    qf_code rc = qf_queue_try_dequeue_values(m->q, outs);
    if (can > 0) {
        check(rc == QF_OK);
        model_take(m, v);
        for (int i = 0; m->extra == X_FLOATS && i < m->nfloat; i++)
            check(g[i] == row_value(v, i));
    } else {
        check(m->closed && m->n == 0 ? rc == QF_OUT_OF_RANGE : rc == QF_UNAVAILABLE);
    }
}

/* A batch that breaks enqueue_many's contract: components that disagree
 * in their first dimension, or a scalar where rows are needed. */
static void do_enqueue_many_bad(model *m, fuzz_input *in)
{
    if (m->kind == K_PTR)
        return;
    int64_t tags[2] = {m->next_tag, m->next_tag + 1}, prios[2] = {0, 0};
    qf_element *b = good_batch(m, tags, prios, 2, 0);
    size_t c = tag_comp(m);
    if ((fuzz_next(in) & 1) && ncomp(m) > 1) {
        /* the tags get 3 rows, the other component keeps 2 */
        qf_shape s = m->kind == K_PADDING ? QF_SHAPE(3, 1) : QF_SHAPE(3);
        check(qf_element_set(b, c, qf_tensor_new(QF_INT64, &s)) == QF_OK);
    } else {
        check(qf_element_set(b, c, qf_tensor_new_i64(7)) == QF_OK);
    }
    check(qf_queue_try_enqueue_many(m->q, b) == QF_INVALID_ARGUMENT); /* closed or not */
    qf_element_free(b);
}

/* The bulk take: between min and max, what is there now. */
static void do_bulk(model *m, fuzz_input *in)
{
    int64_t min = fuzz_next(in) % 5, max = fuzz_next(in) % 7, can = takeable(m), rows = 0;
    qf_code rc;
    if (m->kind == K_PTR) {
        void *ps[8];
        size_t got = 0;
        rc = qf_queue_try_dequeue_bulk_ptr(m->q, (size_t)min, (size_t)max, ps, &got);
        for (size_t i = 0; rc == QF_OK && i < got; i++)
            model_take(m, (int64_t)(uintptr_t)ps[i] - 1);
        rows = (int64_t)got;
    } else {
        qf_element *b = NULL;
        rc = qf_queue_try_dequeue_bulk(m->q, min, max, &b);
        if (rc == QF_OK) {
            take_batch(m, b, &rows);
            qf_element_free(b);
        }
    }
    if (min == 0 || min > max || (m->cap >= 0 && min > m->cap) || m->extra == X_UNSHAPED) {
        check(rc == QF_INVALID_ARGUMENT);
        return;
    }
    if (rc == QF_OK) {
        check(rows >= 1 && rows <= max && rows <= can);
        if (!m->closed)
            check(rows >= min);
        if (fifo_like(m))
            check(rows == (can < max ? can : max)); /* all that is there, up to max */
        return;
    }
    if (m->closed)
        check(can == 0 && rc == QF_OUT_OF_RANGE);
    else
        check(can < min && rc == QF_UNAVAILABLE);
}

static void on_wake(qf_waker *w)
{
    (void)w;
}

/* A poll that cannot finish registers its waker and returns QF_PENDING;
 * abandoned at once, it leaves the queue as it was. */
static void do_poll(model *m, fuzz_input *in)
{
    qf_waker w;
    qf_waker_init(&w, on_wake, NULL);
    qf_code rc = (fuzz_next(in) & 1) ? take_one(m, &w) : put_one(m, &w, in);
    if (rc == QF_PENDING)
        qf_queue_cancel_poll(m->q, &w);
}

/* Close, then take everything: exactly the model's tags come out. */
static void drain(model *m)
{
    check(qf_queue_close(m->q, true) == QF_OK);
    m->closed = true;
    for (;;) {
        size_t before = m->n;
        do_dequeue(m);
        if (m->n == before)
            break;
    }
    check(m->n == 0);
    check_size(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    static model m;
    memset(&m, 0, sizeof(m));
    m.next_tag = 1;
    if (!make_queue(&m, &in))
        return 0; /* an options combination the queue refuses */
    for (int call = 0; call < MAX_CALLS && in.n > 0; call++) {
        switch (fuzz_next(&in) % 14) {
        case 0:
        case 1:
            do_enqueue(&m, &in);
            break;
        case 2:
            do_enqueue_bad(&m, &in);
            break;
        case 3:
            do_enqueue_many(&m, &in);
            break;
        case 4:
        case 5:
            do_dequeue(&m);
            break;
        case 6:
            do_dequeue_many(&m, &in, false);
            break;
        case 7:
            do_dequeue_many(&m, &in, true);
            break;
        case 8:
            do_values(&m, &in);
            break;
        case 9:
            do_enqueue_many_bad(&m, &in);
            break;
        case 10:
            do_bulk(&m, &in);
            break;
        case 11:
        case 12:
            do_poll(&m, &in);
            break;
        default:
            if (fuzz_next(&in) % 4 == 0) { /* a close now and then, of either kind */
                bool cancel = fuzz_next(&in) & 1;
                qf_code rc = qf_queue_close(m.q, cancel);
                /* spec 34: a second plain close is refused, a cancelling one is not */
                check(m.closed && !cancel ? rc == QF_CANCELLED : rc == QF_OK);
                m.closed = true;
            }
            break;
        }
        check_size(&m);
    }
    drain(&m);
    qf_queue_unref(m.q);
    return 0;
}
