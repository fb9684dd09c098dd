/* qf_priority_queue.c - PriorityQueue: smallest priority first (spec
 * 97-106), on the locked engine (queues/engine/qf_locked.c).
 *
 * Components. The caller's options describe the components after the
 * priority; the queue itself has num_components + 1, component 0 being an
 * int64 scalar (spec 97). So dtypes become [int64] + dtypes; shapes, when
 * given, become [[]] + shapes and normal validation rejects a non-scalar
 * priority with TensorFlow's text (spec 102); names, when given, become
 * ["priority"] + names (a caller's component may therefore not be named
 * "priority"). A queue of priorities only (num_components == 0) is allowed,
 * as in TensorFlow, and has shapes [[]]; its one int64 scalar component
 * makes it inline (qf_queue.c stores numbers of up to 8 bytes in the
 * slots), so it uses the inline heap storage below.
 *
 * Without shapes: the queue has none (so dequeue_many and dequeue_up_to are
 * refused, spec 105), and this file checks that each priority is a scalar
 * before anything is inserted ("Shape mismatch in tuple component 0.
 * Expected [], got [2]"; for enqueue_many the rows are checked, so the
 * batch text of spec 102 needs shapes).
 *
 * Storage: a binary min-heap of (priority, slot) pairs, 16 bytes each. The
 * priority is read from the element before the engine takes its lock, so
 * comparisons under the lock touch only the heap array. Insert and remove
 * are O(log n) under the lock; a whole batch is n removals (spec 103: a
 * dequeue_many takes nothing until n elements are present, then takes the
 * n smallest in order, so each batch is globally sorted). Equal priorities
 * leave in no particular order (spec 99).
 */
#include <stdlib.h>
#include <string.h>

#include "qf_locked_queue-impl.h"
#include "qf_tensor-impl.h"
#include "qf_status.h"

typedef struct heap_entry {
    int64_t key;
    void *slot;
} heap_entry;

/* -------------------------------------------------------------- storage */

static int64_t prio_key(void *slot)
{
    const qf_tensor *t = qf_element_get(slot, 0);
    int64_t v;
    memcpy(&v, qf_tensor_cdata(t), sizeof(v));
    return v;
}

/* Inline mode (a queue of priorities only): the slot holds the value. */
static int64_t inline_key(void *slot)
{
    int64_t v;
    memcpy(&v, &slot, sizeof(v));
    return v;
}

static void heap_insert(qf__locked *L, void *slot, int64_t key)
{
    heap_entry *h = L->buf;
    size_t i = L->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].key <= key)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i].key = key;
    h[i].slot = slot;
}

static void *heap_remove(qf__locked *L)
{
    heap_entry *h = L->buf;
    void *top = h[0].slot;
    size_t n = --L->n;
    if (n == 0)
        return top;
    heap_entry last = h[n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1].key < h[c].key)
            c++;
        if (last.key <= h[c].key)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void *heap_slot_at(const qf__locked *L, size_t i)
{
    return ((const heap_entry *)L->buf)[i].slot;
}

static const qf__locked_storage heap_storage = {
    .entry_size = sizeof(heap_entry),
    .whole_batches = true,
    .key = prio_key,
    .insert = heap_insert,
    .remove = heap_remove,
    .slot_at = heap_slot_at,
};

static const qf__locked_storage heap_storage_inline = {
    .entry_size = sizeof(heap_entry),
    .whole_batches = true,
    .key = inline_key,
    .insert = heap_insert,
    .remove = heap_remove,
    .slot_at = heap_slot_at,
};

/* ------------------------------------------------------------------ put */

/* Without shapes nothing else checks that the priorities are scalars. */
static qf_code prio_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                        size_t *ret_done)
{
    if (!q->shapes) {
        for (size_t i = 0; i < n; i++) {
            const qf_shape *got = qf_tensor_shape(qf_element_get(slots[i], 0));
            if (got->rank != 0) {
                char a[16], b[160];
                qf_shape want = qf_shape_scalar();
                if (ret_done)
                    *ret_done = 0;
                return qf_set_error(
                    QF_INVALID_ARGUMENT, "Shape mismatch in tuple component 0. Expected %s, got %s",
                    qf_shape_format(&want, a, sizeof(a)), qf_shape_format(got, b, sizeof(b)));
            }
        }
    }
    return qf__locked_queue_put(q, slots, n, w, ret_done);
}

static const qf__queue_ops prio_ops = {
    .put = prio_put,
    .take = qf__locked_queue_take,
    .size = qf__locked_queue_size,
    .close = qf__locked_queue_close,
    .cancel_poll = qf__locked_queue_cancel_poll,
    .drain_all = qf__locked_queue_drain_all,
    .give_back = qf__locked_queue_give_back,
    .destroy = qf__locked_queue_destroy,
};

/* ---------------------------------------------------------- constructor */

typedef struct prio_queue {
    qf__locked L; /* first: q->impl is also the engine */
} prio_queue;

/* The options this kind checks itself (qf__queue_new() checks the rest). */
static qf_code check_priority_options(const qf_queue_options *opts, qf_queue **ret_q)
{
    if (!opts)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL queue options");
    if (opts->num_components > 0 && !opts->dtypes)
        return qf_set_error(QF_INVALID_ARGUMENT, "Empty component types for queue");
    if (opts->num_components >= QF__MAX_COMPONENTS) /* + the priority */
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "num_components %zu is more than an element holds besides the "
                            "priority (%d)",
                            opts->num_components, QF__MAX_COMPONENTS - 1);
    if (!ret_q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_q");
    return QF_OK;
}

/* The queue's own components: the int64 scalar priority, then the
 * caller's (spec 97). o is opts with them; the arrays are freed with
 * prio_plan_free(). */
typedef struct prio_plan {
    qf_queue_options o;
    qf_dtype *dts;
    qf_shape *shs;
    const char **nms;
} prio_plan;

static void prio_plan_free(prio_plan *p)
{
    free(p->dts);
    free(p->shs);
    free(p->nms);
}

/* False when out of memory (nothing is left to free). */
static bool prio_plan_make(const qf_queue_options *opts, prio_plan *p)
{
    size_t nc = opts->num_components + 1;
    bool with_shapes = opts->shapes || opts->num_components == 0;
    *p = (prio_plan){.dts = malloc(nc * sizeof(qf_dtype))};
    if (with_shapes)
        p->shs = malloc(nc * sizeof(qf_shape));
    if (opts->names)
        p->nms = malloc(nc * sizeof(char *));
    if (!p->dts || (with_shapes && !p->shs) || (opts->names && !p->nms)) {
        prio_plan_free(p);
        return false;
    }
    p->dts[0] = QF_INT64;
    if (opts->num_components)
        memcpy(p->dts + 1, opts->dtypes, opts->num_components * sizeof(qf_dtype));
    if (p->shs) {
        p->shs[0] = qf_shape_scalar();
        if (opts->num_components)
            memcpy(p->shs + 1, opts->shapes, opts->num_components * sizeof(qf_shape));
    }
    if (p->nms) {
        p->nms[0] = "priority";
        for (size_t i = 0; i < opts->num_components; i++)
            p->nms[i + 1] = opts->names[i];
    }
    p->o = *opts;
    p->o.num_components = nc;
    p->o.dtypes = p->dts;
    p->o.shapes = p->shs;
    p->o.names = p->nms;
    return true;
}

/* The heap on the locked engine, for a queue qf__queue_new() made fresh. */
static qf_code build_heap(qf_queue *q, qf_queue **ret_q)
{
    /* The ring qf__queue_new() sized for the capacity is never used. */
    qf__fifo_free_ring(&q->fifo);

    prio_queue *p = aligned_alloc(64, (sizeof(prio_queue) + 63) & ~(size_t)63);
    if (!p) {
        qf_queue_unref(q);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    }
    memset(p, 0, sizeof(*p));
    qf_code rc =
        qf__locked_queue_init(q, &p->L, q->inline_mode ? &heap_storage_inline : &heap_storage, 0);
    q->impl = p;
    if (rc != QF_OK) {
        qf_queue_unref(q);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    }
    /* Registers a shared queue (or attaches to the one that won a race for
     * the name); otherwise just *ret_q = q. */
    return qf__queue_publish(q, ret_q);
}

qf_code qf_priority_queue_new(const qf_queue_options *opts, qf_queue **ret_q)
{
    qf_code rc = check_priority_options(opts, ret_q);
    if (rc != QF_OK)
        return rc;
    prio_plan plan;
    if (!prio_plan_make(opts, &plan))
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    qf_queue *q = NULL;
    rc = qf__queue_new(&plan.o, QF_QUEUE_PRIORITY, "PriorityQueue", "priority_queue", &prio_ops,
                       false, &q);
    prio_plan_free(&plan);
    if (rc != QF_OK)
        return rc;
    if (q->published) {
        /* An existing shared queue, already checked against the request
         * (spec 10-11): it is the result, as it is. */
        *ret_q = q;
        return QF_OK;
    }
    return build_heap(q, ret_q);
}
