/* qf_queue.c - queue objects: creation, life and attributes.
 *
 * What every kind's constructor shares (qf__queue_new()) and what every
 * queue answers whatever its kind. The calls that move elements are in a
 * file per API (qf_queue_element.c, qf_queue_batch.c, qf_queue_values.c,
 * qf_queue_ptr.c, qf_queue_line.c) over the kinds' operations
 * (qf__queue_ops: the FIFO engine's in qf_fifo_queue.c, the locked
 * engine's in qf_locked_queue.c).
 *
 * Inline mode: a one-component scalar queue whose dtype fits in a slot
 * stores the value bits in the ring. It is decided here, once; the element
 * API converts at the edge (a tensor in, a tensor out); the _ptr API moves
 * the pointer with nothing allocated at all.
 */
#include <stdlib.h>
#include <string.h>

#include "qf_fifo-impl.h"
#include "qf_queue_metrics-impl.h"
#include "qf_queue_ops-impl.h"
#include "qf_queue_packed-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"
#include "qf_strblock-impl.h"
#include "qf_tensor-impl.h"

/* ------------------------------------------------------------- creation */

/* Values a slot can hold itself: pointers and numbers of up to 8 bytes,
 * any bit pattern (abandoned slots are tagged beside the ring, not marked
 * by a reserved value: qf_ring-impl.h note 7). Strings and sparse tensors
 * own storage and stay elements. */
static bool inline_dtype(qf_dtype dt)
{
#if UINTPTR_MAX == UINT64_MAX && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return dt == QF_PTR ||
           (dt != QF_STRING && dt != QF_SPARSE && qf_dtype_size(dt) <= sizeof(void *));
#else
    return dt == QF_PTR;
#endif
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void queue_destroy_fields(qf_queue *q)
{
    if (q->names) {
        for (size_t i = 0; i < q->ncomp; i++)
            free(q->names[i]);
        free(q->names);
    }
    free(q->name);
    free(q->dtypes);
    free(q->shapes);
    qf__packed_destroy(q);
    qf__fifo_destroy(&q->fifo);
    free(q);
}

/* Component dtypes, shapes (fully defined unless the queue pads) and
 * names (non-empty, distinct). */
static qf_code check_components(const qf_queue_options *o, bool allow_partial)
{
    for (size_t i = 0; i < o->num_components; i++)
        if (!qf_dtype_is_valid(o->dtypes[i]))
            return qf_set_error(QF_INVALID_ARGUMENT, "Invalid dtype %d for component %zu",
                                (int)o->dtypes[i], i);
    if (o->shapes)
        for (size_t i = 0; i < o->num_components; i++) {
            if (allow_partial && !qf_shape_is_valid(&o->shapes[i]))
                return qf_set_error(QF_INVALID_ARGUMENT, "Shape of component %zu is invalid", i);
            if (allow_partial && o->shapes[i].rank < 0)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "Shape of component %zu must have a defined rank", i);
            if (!allow_partial && !qf_shape_is_fully_defined(&o->shapes[i]))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "All shapes must be fully defined (component %zu)", i);
        }
    if (o->names) {
        for (size_t i = 0; i < o->num_components; i++) {
            if (!o->names[i] || !o->names[i][0])
                return qf_set_error(QF_INVALID_ARGUMENT, "Queue component name %zu is empty", i);
            for (size_t j = 0; j < i; j++)
                if (strcmp(o->names[i], o->names[j]) == 0)
                    return qf_set_error(QF_INVALID_ARGUMENT,
                                        "Queue component name '%s' is repeated", o->names[i]);
        }
    }
    return QF_OK;
}

static qf_code check_options(const qf_queue_options *o, bool allow_partial)
{
    if (!o)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL queue options");
    if (o->num_components == 0 || !o->dtypes)
        return qf_set_error(QF_INVALID_ARGUMENT, "Empty component types for queue");
    if (o->num_components > QF__MAX_COMPONENTS)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "num_components %zu is more than an element holds (%d)",
                            o->num_components, QF__MAX_COMPONENTS);
    if (o->flags & ~(unsigned)(QF_QUEUE_SINGLE_PRODUCER | QF_QUEUE_SINGLE_CONSUMER))
        return qf_set_error(QF_INVALID_ARGUMENT, "flags 0x%x has unknown bits (0x%x)", o->flags,
                            o->flags &
                                ~(unsigned)(QF_QUEUE_SINGLE_PRODUCER | QF_QUEUE_SINGLE_CONSUMER));
    if (o->capacity == 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "capacity must be > 0, or negative for an unbounded queue");
    if (o->capacity > INT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "capacity %lld is larger than %d",
                            (long long)o->capacity, INT32_MAX);
    return check_components(o, allow_partial);
}

/* The shared name a request asks for: TensorFlow treats "" as no name. */
static const char *requested_shared_name(const qf_queue_options *o)
{
    return o->shared_name && o->shared_name[0] ? o->shared_name : NULL;
}

/* The queue's one allocation: the struct, zeroed, and the shared name (if
 * any) after it. NULL when out of memory. */
static qf_queue *alloc_queue(const qf_queue_options *o, const char *shared)
{
    size_t shared_len = shared ? strlen(shared) + 1 : 0;
    qf_queue *q = aligned_alloc(64, (sizeof(qf_queue) + shared_len + 63) & ~(size_t)63);
    if (!q)
        return NULL;
    memset(q, 0, sizeof(*q));
    if (shared) {
        char *tail = (char *)(q + 1);
        memcpy(tail, shared, shared_len);
        q->shared_name = tail;
        q->shared_reg = o->registry ? o->registry : qf_queue_registry_default();
    }
    return q;
}

/* The options that are plain values: kind, capacity, flags, spinning. */
static void init_settings(qf_queue *q, const qf_queue_options *o, qf_queue_kind kind,
                          const char *kind_name, const qf__queue_ops *ops, bool allow_partial)
{
    if (kind == QF_QUEUE_RANDOM_SHUFFLE) {
        q->min_after_dequeue = o->min_after_dequeue;
        q->seed = o->seed;
        q->seed2 = o->seed2;
    }
    atomic_init(&q->refs, 1);
    q->ops = ops;
    q->padded = allow_partial;
    q->kind = kind;
    q->kind_name = kind_name;
    q->unbounded = o->capacity < 0;
    q->capacity = q->unbounded ? INT32_MAX : o->capacity;
    q->ncomp = o->num_components;
    q->single_producer = (o->flags & QF_QUEUE_SINGLE_PRODUCER) != 0;
    q->single_consumer = (o->flags & QF_QUEUE_SINGLE_CONSUMER) != 0;
    q->ptr_dtor = o->ptr_dtor;
    q->spin_ns = o->spin_ns == 0 ? QF_QUEUE_DEFAULT_SPIN_NS : (o->spin_ns < 0 ? 0 : o->spin_ns);
    if (q->spin_ns > 1000000000)
        q->spin_ns = 1000000000;
}

/* The queue's own copies of its name and component dtypes, shapes and
 * names. False when out of memory (what was copied is the queue's). */
static bool copy_components(qf_queue *q, const qf_queue_options *o, const char *default_name)
{
    /* A shared queue is named after its shared name, as in TensorFlow. */
    q->name = dup_str(o->name ? o->name : q->shared_name ? q->shared_name : default_name);
    q->dtypes = malloc(q->ncomp * sizeof(qf_dtype));
    if (!q->name || !q->dtypes)
        return false;
    memcpy(q->dtypes, o->dtypes, q->ncomp * sizeof(qf_dtype));
    if (o->shapes) {
        q->shapes = malloc(q->ncomp * sizeof(qf_shape));
        if (!q->shapes)
            return false;
        memcpy(q->shapes, o->shapes, q->ncomp * sizeof(qf_shape));
    }
    if (o->names) {
        q->names = calloc(q->ncomp, sizeof(char *));
        if (!q->names)
            return false;
        for (size_t i = 0; i < q->ncomp; i++)
            if (!(q->names[i] = dup_str(o->names[i])))
                return false;
    }
    /* Rank 0 only: a padding queue's scalar component has nothing to pad,
     * so inline mode is safe for it too. */
    q->inline_mode =
        q->ncomp == 1 && q->shapes && q->shapes[0].rank == 0 && inline_dtype(q->dtypes[0]);
    q->ptr_queue = q->inline_mode && q->dtypes[0] == QF_PTR;
    return qf__packed_init(q);
}

/* The FIFO engine: the ring, the state word and the wait lists. False
 * when out of memory. */
static bool init_engine(qf_queue *q)
{
    qf__fifo_config c = {
        .kind_name = q->kind_name,
        .name = q->name,
        .capacity = q->capacity,
        .unbounded = q->unbounded,
        .single_producer = q->single_producer,
        .single_consumer = q->single_consumer,
        .spin_ns = q->spin_ns,
        .value_bytes = q->packed ? q->packed->bytes : 0,
    };
    if (!qf__fifo_init(&q->fifo, &c))
        return false;
    if (q->packed)
        q->packed->cells = qf__fifo_cells(&q->fifo);
    return true;
}

qf_code qf__queue_new(const qf_queue_options *o, qf_queue_kind kind, const char *kind_name,
                      const char *default_name, const qf__queue_ops *ops, bool allow_partial,
                      qf_queue **ret_q)
{
    qf_code rc = check_options(o, allow_partial);
    if (rc != QF_OK)
        return rc;
    if (!ret_q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_q");

    /* Shared queues (spec 9-11): an existing queue of that name, after the
     * checks, is the result; otherwise create one and publish it below. */
    const char *shared = requested_shared_name(o);
    if (shared) {
        qf_queue *existing = NULL;
        rc = qf__queue_find_shared(o, kind, kind_name, allow_partial, &existing);
        if (rc != QF_OK)
            return rc;
        if (existing) {
            *ret_q = existing;
            return QF_OK;
        }
    }

    qf_queue *q = alloc_queue(o, shared);
    if (!q)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    init_settings(q, o, kind, kind_name, ops, allow_partial);
    if (!copy_components(q, o, default_name) || !init_engine(q)) {
        queue_destroy_fields(q);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue");
    }
    /* The FIFO engine needs nothing more: publish now. Other kinds finish
     * their own storage first and publish themselves. */
    if (shared && ops == &qf__fifo_ops)
        return qf__queue_publish(q, ret_q);
    if (ops == &qf__fifo_ops) /* complete: other kinds are tracked when published */
        qf__queue_track(q);
    *ret_q = q;
    return QF_OK;
}

qf_code qf_fifo_queue_new(const qf_queue_options *opts, qf_queue **ret_q)
{
    return qf__queue_new(opts, QF_QUEUE_FIFO, "FIFOQueue", "fifo_queue", &qf__fifo_ops, false,
                         ret_q);
}

qf_code qf_ptr_queue_new(int64_t capacity, const char *name, unsigned flags, qf_ptr_dtor dtor,
                         qf_queue **ret_q)
{
    qf_dtype dt = QF_PTR;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = capacity,
        .num_components = 1,
        .dtypes = &dt,
        .shapes = &sh,
        .name = name,
        .flags = flags,
        .ptr_dtor = dtor,
    };
    return qf_fifo_queue_new(&o, ret_q);
}

/* ------------------------------------------------------ life and attributes */

static void release_slot(void *ctx, void *slot)
{
    qf_queue *q = ctx;
    if (q->packed)
        qf__packed_free(q, &slot, 1);
    else if (!q->inline_mode)
        qf__slot_free(slot);
    else if (q->dtypes[0] == QF_PTR && q->ptr_dtor && slot)
        q->ptr_dtor(slot);
}

qf_queue *qf_queue_ref(qf_queue *q)
{
    if (q)
        atomic_fetch_add_explicit(&q->refs, 1, memory_order_relaxed);
    return q;
}

void qf_queue_unref(qf_queue *q)
{
    if (!q || atomic_fetch_sub_explicit(&q->refs, 1, memory_order_release) != 1)
        return;
    atomic_thread_fence(memory_order_acquire);
    qf__queue_untrack(q); /* before anything is freed: metrics readers */
    q->ops->drain_all(q, release_slot, q);
    if (q->ops->destroy)
        q->ops->destroy(q);
    queue_destroy_fields(q);
}

const char *qf_queue_name(const qf_queue *q)
{
    return null_queue(q, "qf_queue_name: queue (q) is NULL") ? NULL : q->name;
}
qf_queue_kind qf_queue_get_kind(const qf_queue *q)
{
    /* There is no invalid kind: FIFO, with the error recorded. */
    return null_queue(q, "qf_queue_get_kind: queue (q) is NULL") ? QF_QUEUE_FIFO : q->kind;
}
const char *qf_queue_kind_name(const qf_queue *q)
{
    return null_queue(q, "qf_queue_kind_name: queue (q) is NULL") ? NULL : q->kind_name;
}
int64_t qf_queue_capacity(const qf_queue *q)
{
    return null_queue(q, "qf_queue_capacity: queue (q) is NULL") ? 0 : q->capacity;
}
size_t qf_queue_num_components(const qf_queue *q)
{
    return null_queue(q, "qf_queue_num_components: queue (q) is NULL") ? 0 : q->ncomp;
}
qf_dtype qf_queue_dtype(const qf_queue *q, size_t i)
{
    if (null_queue(q, "qf_queue_dtype: queue (q) is NULL"))
        return QF_DT_INVALID;
    return i < q->ncomp ? q->dtypes[i] : QF_DT_INVALID;
}
const qf_shape *qf_queue_shape(const qf_queue *q, size_t i)
{
    if (null_queue(q, "qf_queue_shape: queue (q) is NULL"))
        return NULL;
    return q->shapes && i < q->ncomp ? &q->shapes[i] : NULL;
}
const char *qf_queue_component_name(const qf_queue *q, size_t i)
{
    if (null_queue(q, "qf_queue_component_name: queue (q) is NULL"))
        return NULL;
    return q->names && i < q->ncomp ? q->names[i] : NULL;
}
qf_ptr_dtor qf_queue_ptr_dtor(const qf_queue *q)
{
    return null_queue(q, "qf_queue_ptr_dtor: queue (q) is NULL") ? NULL : q->ptr_dtor;
}

bool qf_queue_is_inline(const qf_queue *q)
{
    return !null_queue(q, "qf_queue_is_inline: queue (q) is NULL") && q->inline_mode;
}

int64_t qf_queue_size(const qf_queue *q)
{
    return null_queue(q, "qf_queue_size: queue (q) is NULL") ? 0 : q->ops->size(q);
}

bool qf_queue_is_closed(const qf_queue *q)
{
    return !null_queue(q, "qf_queue_is_closed: queue (q) is NULL") &&
           (atomic_load_explicit(&((qf_queue *)q)->fifo.state, memory_order_acquire) &
            QF__CLOSED) != 0;
}

qf_code qf_queue_close(qf_queue *q, bool cancel_pending_enqueues)
{
    if (!q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL queue");
    return q->ops->close(q, cancel_pending_enqueues);
}

bool qf_queue_cancel_poll(qf_queue *q, qf_waker *w)
{
    if (!q || !w) {
        qf__set_error_static(QF_INVALID_ARGUMENT, !q ? "qf_queue_cancel_poll: queue (q) is NULL"
                                                     : "qf_queue_cancel_poll: waker (w) is NULL");
        return false;
    }
    return q->ops->cancel_poll(q, w);
}
