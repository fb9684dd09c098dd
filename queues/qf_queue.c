/* qf_queue.c - queue objects: creation, attributes, and the element and
 * pointer APIs over the kinds' operations (qf__queue_ops: the FIFO engine's
 * in qf_fifo_queue.c, the locked engine's in qf_locked_queue.c).
 *
 * Inline mode: a one-component scalar queue whose dtype fits in a slot
 * stores the value bits in the ring. The element API converts at the edge
 * (a tensor in, a tensor out); the _ptr API moves the pointer with nothing
 * allocated at all.
 */
#include <assert.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "qf_fifo-impl.h"
#include "qf_lock-impl.h"
#include "qf_queue-impl.h"
#include "qf_queue_packed-impl.h"
#include "qf_queue_metrics-impl.h"
#include "qf_queue_put-impl.h"
#include "qf_queue_trusted-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"
#include "qf_strblock-impl.h"
#include "qf_tensor-impl.h"
#include "qf_waitlist-impl.h"

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

/* A number of sz <= 8 bytes as a slot value: its bytes first, so memcpy
 * back out of the slot works. */
static void *number_slot(const void *src, size_t sz)
{
    uintptr_t u = 0;
    memcpy(&u, src, sz);
    return (void *)u;
}

/* n numbers of sz bytes from src as slot values. On this layout
 * (inline_dtype()) 8-byte numbers are the slots' bytes already: one copy. */
static void number_slots(void **slots, const void *src, size_t n, size_t sz)
{
    if (sz == sizeof(void *)) {
        memcpy(slots, src, n * sz);
        return;
    }
    for (size_t i = 0; i < n; i++)
        slots[i] = number_slot((const char *)src + i * sz, sz);
}

/* The reverse: the low sz bytes of each of n slot values into dst. */
static void slot_numbers(void *dst, void *const *slots, size_t n, size_t sz)
{
    if (sz == sizeof(void *)) {
        memcpy(dst, slots, n * sz);
        return;
    }
    for (size_t i = 0; i < n; i++)
        memcpy((char *)dst + i * sz, &slots[i], sz);
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

/* The attributes' answer to a NULL queue: a neutral value (NULL, 0, false,
 * QF_DT_INVALID) and the error recorded, with a static message. */
static bool null_queue(const qf_queue *q, const char *msg)
{
    if (q)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
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

/* Slots a consumer took but cannot deliver go back to the front. */
static void give_back(qf_queue *q, void *const *slots, size_t n)
{
    if (q->ops->give_back) {
        q->ops->give_back(q, slots, n);
        return;
    }
    qf__wait now = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    q->ops->put(q, slots, n, &now, NULL);
}

/* The engines report "full", "empty" and timeouts with static messages,
 * formatting nothing on paths a caller may poll in a loop; the queue's name
 * is added the same way: qf_last_message() formats it when asked. */
static qf_code engine_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                          size_t *ret_done)
{
    qf_code rc = q->ops->put(q, slots, n, w, ret_done);
    if (rc == QF_UNAVAILABLE)
        return qf__set_error_named(
            rc, n > 1 ? "%s '%s' has no room for %lld elements" : "%s '%s' is full", q->kind_name,
            q->name, (long long)n);
    if (rc == QF_DEADLINE_EXCEEDED)
        return qf__set_error_named(rc, "%s '%s': Timed out waiting for notification", q->kind_name,
                                   q->name, 0);
    return rc;
}

static qf_code engine_take(qf_queue *q, size_t min, size_t max, bool up_to, const qf__wait *w,
                           void **ret_slots, size_t *ret_got)
{
    qf_code rc = q->ops->take(q, min, max, up_to, w, ret_slots, ret_got);
    if (rc == QF_UNAVAILABLE)
        return qf__set_error_named(
            rc, min > 1 ? "%s '%s' has fewer than %lld elements" : "%s '%s' is empty", q->kind_name,
            q->name, (long long)min);
    if (rc == QF_DEADLINE_EXCEEDED)
        return qf__set_error_named(rc, "%s '%s': Timed out waiting for notification", q->kind_name,
                                   q->name, 0);
    return rc;
}

/* ----------------------------------------------------- inline conversions */

/* The slot value of a validated one-component scalar element. */
static void *inline_bits(const qf_queue *q, const qf_tensor *t)
{
    if (q->dtypes[0] == QF_PTR)
        return qf_tensor_ptr(t, 0);
    return number_slot(qf_tensor_cdata(t), qf_dtype_size(q->dtypes[0]));
}

/* A QF_PTR tensor that owns its objects can only hand them over when the
 * caller's reference is the only one. Checked before anything moves. */
static qf_code check_ptr_movable(const qf_queue *q, const qf_element *e)
{
    for (size_t i = 0; i < q->ncomp; i++) {
        const qf_tensor *t = qf_element_get(e, i);
        if (qf_tensor_dtype(t) == QF_PTR && qf_tensor_ptr_dtor(t) && qf_tensor_refcount(t) != 1)
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "Component %zu of the element for %s '%s' owns pointers and is "
                                "shared; it cannot be moved into the queue",
                                i, q->kind_name, q->name);
    }
    return QF_OK;
}

/* The queue now owns the value: make sure the tensor will not free it. */
static void disown_inline_ptr(const qf_queue *q, qf_tensor *t, int64_t i)
{
    if (q->dtypes[0] == QF_PTR && qf_tensor_ptr_dtor(t)) {
        void *p;
        qf_tensor_take_ptr(t, i, &p);
    }
}

static qf_element *inline_element(const qf_queue *q, void *v)
{
    qf_tensor *t;
    if (q->dtypes[0] == QF_PTR) {
        t = qf_tensor_new_scalar_ptr(v, q->ptr_dtor);
    } else {
        t = qf__tensor_new_scalar(q->dtypes[0], &v);
    }
    if (!t)
        return NULL;
    qf_element *e = qf_element_of(1, &t);
    if (e && q->names && qf_element_set_names(e, (const char *const *)q->names) != QF_OK) {
        qf_element_free(e);
        return NULL;
    }
    return e;
}

/* A poll form's op has ended (not QF_PENDING). `was_registered`: the
 * waker was still on a wait list when the op began, left there by an
 * earlier poll that returned pending, and this op completed without it;
 * a wake claiming that registration now, or since the op began, went to a
 * task that no longer waits: withdraw it, which hands such a wake on to the
 * next waiter. Otherwise a wake that came before the op was the one it
 * used. */
static void poll_ended(qf_waker *wk, bool was_registered)
{
    if (was_registered)
        qf_waker_withdraw(wk);
    else
        qf__waker_consumed_fast(wk);
}

static bool poll_begins(const qf_waker *wk)
{
    return qf__waker_state_fast(wk) == QF_WAKER_REGISTERED;
}

/* --------------------------------------------------------- element API */

static qf_code enqueue_one(qf_queue *q, qf_element *elem, const qf__wait *w)
{
    if (!q || !elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "element" : "queue");
    qf_code rc;
    if (!qf__element_plainly_fits(q, elem)) {
        rc = qf__validate_element(q, elem);
        if (rc == QF_OK)
            rc = check_ptr_movable(q, elem);
        if (rc != QF_OK)
            return rc;
    }
    if (q->packed && q->packed->cells) {
        /* The values go into a cell of the ring: no block crosses. */
        uint64_t buf[QF__PACKED_MAX_BYTES / 8];
        void *slot = buf;
        qf__packed_pack_into(q, elem, buf);
        rc = engine_put(q, &slot, 1, w, NULL);
        if (rc == QF_OK)
            qf_element_free(elem);
        return rc;
    }
    if (q->packed) {
        /* The values go; the element and its tensors stay on this thread. */
        void *slot = qf__packed_pack(q, elem);
        if (!slot)
            return QF_RESOURCE_EXHAUSTED;
        rc = engine_put(q, &slot, 1, w, NULL);
        if (rc == QF_OK)
            qf_element_free(elem);
        else
            qf__packed_free(q, &slot, 1);
        return rc;
    }
    if (!q->inline_mode)
        return engine_put(q, (void *const *)&elem, 1, w, NULL);
    void *v = inline_bits(q, qf_element_get(elem, 0));
    rc = engine_put(q, &v, 1, w, NULL);
    if (rc == QF_OK) {
        disown_inline_ptr(q, qf_element_get(elem, 0), 0);
        qf_element_free(elem);
    }
    return rc;
}

qf_code qf_queue_enqueue(qf_queue *q, qf_element *elem)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return enqueue_one(q, elem, &w);
}

qf_code qf_queue_enqueue_until(qf_queue *q, qf_element *elem, qf_deadline deadline)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return enqueue_one(q, elem, &w);
}

qf_code qf_queue_try_enqueue(qf_queue *q, qf_element *elem)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return enqueue_one(q, elem, &w);
}

qf_code qf_queue_poll_enqueue(qf_queue *q, qf_element *elem, qf_waker *wk)
{
    /* NULLs are refused before the waker is looked at: a registration
     * left by an earlier poll stays as it is. */
    if (!q || !elem || !wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !q      ? "queue"
                            : !elem ? "element"
                                    : "waker");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    qf_code rc = enqueue_one(q, elem, &w);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

void qf__queue_rows_without_keys(qf_queue *q)
{
    q->rows_no_keys = true;
}

void qf__queue_use_symmetric_fences(qf_queue *q)
{
    if (q->ops == &qf__fifo_ops)
        qf__ring_set_symmetric(&q->fifo.ring);
}

/* The FIFO engine's count of what the capacity holds (reserved slots,
 * published or not, the stash and the overflow list) from its cheap
 * loads, where qf_queue_size() would scan the published run. */
int64_t qf__queue_room_guess(const qf_queue *q)
{
    int64_t used = q->ops == &qf__fifo_ops ? (int64_t)qf__fifo_used((qf__fifo *)&q->fifo, false)
                                           : q->ops->size(q);
    return used >= q->capacity ? 0 : q->capacity - used;
}

/* qf_queue_poll_enqueue() without the per-element checks, for the batch
 * ops in runtime/pipeline/qf_batch_op.c (qf_queue_trusted-impl.h) whose
 * source qf_batch.c's trusted_source() accepted: their record sources make
 * every element themselves (two scalar strings, no names, see
 * qf_record_to_element()) and the op only takes this path after matching
 * that against the queue when it was built, so qf__validate_element() and
 * check_ptr_movable() cannot fail there and cost a third of the enqueue.
 * Such a queue is never inline (strings are not). Several slots (elements
 * or rows of string blocks, qf_strblock-impl.h) go in with one engine call; *ret_done
 * says how many went in, also when the call parks (QF_PENDING) or fails. */
qf_code qf__queue_poll_enqueue_trusted(qf_queue *q, void *const *slots, size_t n, qf_waker *wk,
                                       size_t *ret_done)
{
    /* The running task's own waker (qf_task_waker()): never NULL, so the
     * inlined waker checks below need no NULL test, as the public poll
     * forms' have none after their argument checks. */
    assert(wk != NULL);
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    size_t done = 0;
    qf_code rc = q->ops->put(q, slots, n, &w, &done);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    *ret_done = done;
    return rc;
}

/* Rows [from, rows) of an inline batch as a new tensor (moving owned
 * pointers out of `t`). */
static qf_tensor *inline_remainder(const qf_queue *q, qf_tensor *t, int64_t from, int64_t rows)
{
    qf_shape sh = qf_shape_prepend(rows - from, &q->shapes[0]);
    if (q->dtypes[0] == QF_PTR) {
        qf_tensor *r = qf_tensor_new_ptr(&sh, qf_tensor_ptr_dtor(t));
        for (int64_t i = from; r && i < rows; i++) {
            void *p = qf_tensor_ptr(t, i);
            disown_inline_ptr(q, t, i);
            qf_tensor_set_ptr(r, i - from, p);
        }
        return r;
    }
    size_t sz = qf_dtype_size(q->dtypes[0]);
    return qf_tensor_new_from(q->dtypes[0], &sh, (const char *)qf_tensor_cdata(t) + from * sz,
                              (size_t)(rows - from) * sz);
}

static qf_code enqueue_many_inline(qf_queue *q, qf_element *batch, int64_t rows, const qf__wait *w,
                                   size_t *ret_done)
{
    qf_tensor *t = qf_element_get(batch, 0);
    void *small[64];
    void **slots = rows <= 64 ? small : malloc((size_t)rows * sizeof(void *));
    if (!slots)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
    if (q->dtypes[0] == QF_PTR) {
        for (int64_t i = 0; i < rows; i++)
            slots[i] = qf_tensor_ptr(t, i);
    } else {
        number_slots(slots, t->buf, (size_t)rows, qf_dtype_size(q->dtypes[0]));
    }
    size_t done = 0;
    qf_code rc = engine_put(q, slots, (size_t)rows, w, &done);
    if (slots != small)
        free(slots);
    bool ptrs = q->dtypes[0] == QF_PTR;
    if (rc == QF_OK) {
        for (int64_t i = 0; ptrs && i < rows; i++)
            disown_inline_ptr(q, t, i);
        qf_element_free(batch);
    } else if (done > 0) {
        for (size_t i = 0; ptrs && i < done; i++)
            disown_inline_ptr(q, t, (int64_t)i);
        qf_tensor *rest = inline_remainder(q, t, (int64_t)done, rows);
        if (rest)
            qf_element_set(batch, 0, rest);
    }
    *ret_done = done;
    return rc;
}

/* The rows of a packed queue's batch go as slots of values; what did not
 * go in stays in the caller's batch. */
static qf_code enqueue_many_packed(qf_queue *q, qf_element *batch, int64_t rows, const qf__wait *w,
                                   size_t *ret_done)
{
    void *small[64];
    void **slots = rows <= 64 ? small : malloc((size_t)rows * sizeof(void *));
    char *stage = NULL;
    if (slots && q->packed->cells)
        stage = malloc((size_t)rows * q->packed->room);
    if (!slots || (q->packed->cells && !stage)) {
        if (slots != small)
            free(slots);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
    }
    qf_code rc = QF_OK;
    if (stage)
        qf__packed_pack_rows_into(q, batch, 0, (size_t)rows, stage, slots);
    else
        rc = qf__packed_pack_rows(q, batch, 0, (size_t)rows, slots);
    size_t done = 0;
    if (rc == QF_OK) {
        rc = engine_put(q, slots, (size_t)rows, w, &done);
        if (rc == QF_OK) {
            qf_element_free(batch);
        } else {
            qf__packed_free(q, slots + done, (size_t)rows - done);
            if (done > 0)
                qf__packed_keep_rows(q, batch, (int64_t)done, rows);
        }
    }
    if (slots != small)
        free(slots);
    free(stage);
    *ret_done = done;
    return rc;
}

/* Split the batch into row elements (consumes its tensors). On failure the
 * batch is rebuilt from the rows, so the caller keeps every row. */
static qf_code split_rows(qf_queue *q, qf_element *batch, int64_t rows, qf_element **out)
{
    size_t nc = q->ncomp;
    qf_tensor **parts = malloc((size_t)rows * nc * sizeof(qf_tensor *));
    if (!parts)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
    for (size_t c = 0; c < nc; c++) {
        qf_tensor *t = qf_element_take(batch, c);
        qf_code rc = qf_tensor_unstack(t, parts + c * (size_t)rows);
        if (rc != QF_OK) {
            /* Unreachable after validation and check_ptr_movable(); keep
             * the rows already split rather than lose them. */
            for (size_t c2 = 0; c2 < c; c2++) {
                qf_tensor *b = NULL;
                qf_tensor_stack(parts + c2 * (size_t)rows, (size_t)rows, q->dtypes[c2], NULL, &b);
                qf_element_set(batch, c2, b);
            }
            free(parts);
            return rc;
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        qf_tensor *row[64];
        qf_tensor **rp = nc <= 64 ? row : malloc(nc * sizeof(qf_tensor *));
        for (size_t c = 0; rp && c < nc; c++)
            rp[c] = parts[c * (size_t)rows + (size_t)r];
        out[r] = rp ? qf_element_of(nc, rp) : NULL;
        if (rp != row)
            free(rp);
        if (out[r] && q->names)
            qf_element_set_names(out[r], (const char *const *)q->names);
    }
    free(parts);
    return QF_OK;
}

/* Put rows [from, rows) back together into the caller's batch. */
static void rejoin_rows(qf_queue *q, qf_element *batch, qf_element **rows_e, size_t from,
                        size_t rows)
{
    size_t n = rows - from;
    qf_tensor **parts = malloc((n ? n : 1) * sizeof(qf_tensor *));
    for (size_t c = 0; parts && c < q->ncomp; c++) {
        for (size_t r = 0; r < n; r++)
            parts[r] = qf_element_take(rows_e[from + r], c);
        qf_tensor *b = NULL;
        /* the rows came from one batch: same shapes, no padding needed */
        const qf_shape *sh = q->shapes && !q->padded ? &q->shapes[c] : NULL;
        if (qf_tensor_stack(parts, n, q->dtypes[c], sh, &b) == QF_OK)
            qf_element_set(batch, c, b);
    }
    free(parts);
    for (size_t r = from; r < rows; r++)
        qf_element_free(rows_e[r]);
}

static qf_code enqueue_many(qf_queue *q, qf_element *batch, const qf__wait *w, size_t *ret_enqueued)
{
    size_t done = 0;
    if (ret_enqueued)
        *ret_enqueued = 0;
    if (!q || !batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "batch" : "queue");
    int64_t rows = 0;
    qf_code rc = qf__validate_batch(q, batch, &rows);
    if (rc == QF_OK)
        rc = check_ptr_movable(q, batch);
    if (rc != QF_OK)
        return rc;
    if (rows == 0) {
        qf_element_free(batch); /* spec 22: succeeds even when closed */
        return QF_OK;
    }
    if (w->mode == QF__WAIT_TRY) {
        uint64_t s = atomic_load_explicit(&q->fifo.state, memory_order_relaxed);
        if (s & QF__CLOSED)
            return qf_set_error(QF_CANCELLED, "%s '%s' is closed.", q->kind_name, q->name);
    }
    if (q->inline_mode) {
        rc = enqueue_many_inline(q, batch, rows, w, &done);
    } else if (q->packed) {
        rc = enqueue_many_packed(q, batch, rows, w, &done);
    } else {
        qf_element **els = malloc((size_t)rows * sizeof(qf_element *));
        if (!els)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
        rc = split_rows(q, batch, rows, els);
        if (rc == QF_OK) {
            rc = engine_put(q, (void *const *)els, (size_t)rows, w, &done);
            if (rc == QF_OK)
                qf_element_free(batch);
            else
                rejoin_rows(q, batch, els, done, (size_t)rows);
        }
        free(els);
    }
    if (ret_enqueued)
        *ret_enqueued = done;
    return rc;
}

qf_code qf_queue_enqueue_many(qf_queue *q, qf_element *batch, size_t *ret_enqueued)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return enqueue_many(q, batch, &w, ret_enqueued);
}

qf_code qf_queue_enqueue_many_until(qf_queue *q, qf_element *batch, qf_deadline deadline,
                                    size_t *ret_enqueued)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return enqueue_many(q, batch, &w, ret_enqueued);
}

qf_code qf_queue_try_enqueue_many(qf_queue *q, qf_element *batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return enqueue_many(q, batch, &w, NULL);
}

static qf_code dequeue_one(qf_queue *q, const qf__wait *w, qf_element **ret_elem)
{
    if (!q || !ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_elem" : "queue");
    /* A queue of cells copies the value here (qf__fifo_config). */
    uint64_t buf[QF__PACKED_MAX_BYTES / 8];
    void *slot = buf;
    qf_code rc = engine_take(q, 1, 1, false, w, &slot, NULL);
    if (rc != QF_OK)
        return rc;
    qf_element *e = q->packed        ? qf__packed_unpack(q, slot)
                    : q->inline_mode ? inline_element(q, slot)
                                     : qf__slot_element(slot);
    if (!e) {
        /* Give the value back (to the front) rather than lose it. */
        give_back(q, &slot, 1);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in dequeue");
    }
    *ret_elem = e;
    return QF_OK;
}

qf_code qf_queue_dequeue(qf_queue *q, qf_element **ret_elem)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_one(q, &w, ret_elem);
}

qf_code qf_queue_dequeue_until(qf_queue *q, qf_deadline deadline, qf_element **ret_elem)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_one(q, &w, ret_elem);
}

qf_code qf_queue_try_dequeue(qf_queue *q, qf_element **ret_elem)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_one(q, &w, ret_elem);
}

qf_code qf_queue_poll_dequeue(qf_queue *q, qf_waker *wk, qf_element **ret_elem)
{
    if (!q || !wk || !ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !q    ? "queue"
                            : !wk ? "waker"
                                  : "ret_elem");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    qf_code rc = dequeue_one(q, &w, ret_elem);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

/* ---------------------------------------------------------- values API */

/* Whether the _values calls may run on q with these buffers (NULL when a
 * buffer is missing); records the reason when not. */
static qf_code values_usable(const qf_queue *q, const void *const *bufs, const char *what)
{
    if (!q || !bufs)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? what : "queue");
    if (!q->packed) {
        const char *why = qf__packed_refusal(q);
        return qf_set_error(QF_INVALID_ARGUMENT, "%s '%s' does not take values: %s", q->kind_name,
                            q->name, why ? why : "not a queue of packed values");
    }
    for (size_t c = 0; c < q->ncomp; c++)
        if (!bufs[c])
            return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s[%zu]", what, c);
    return QF_OK;
}

/* The put of values_usable() vals. */
static qf_code put_values(qf_queue *q, const void *const *vals, const qf__wait *w)
{
    if (q->packed->cells) {
        uint64_t buf[QF__PACKED_MAX_BYTES / 8];
        void *slot = buf;
        qf__packed_pack_values_into(q, vals, buf);
        return engine_put(q, &slot, 1, w, NULL);
    }
    void *slot = qf__packed_pack_values(q, vals);
    if (!slot)
        return QF_RESOURCE_EXHAUSTED;
    qf_code rc = engine_put(q, &slot, 1, w, NULL);
    if (rc != QF_OK)
        qf__packed_free(q, &slot, 1);
    return rc;
}

static qf_code enqueue_values(qf_queue *q, const void *const *vals, const qf__wait *w)
{
    qf_code rc = values_usable(q, vals, "vals");
    return rc == QF_OK ? put_values(q, vals, w) : rc;
}

qf_code qf_queue_enqueue_values(qf_queue *q, const void *const *vals)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return enqueue_values(q, vals, &w);
}

qf_code qf_queue_enqueue_values_until(qf_queue *q, const void *const *vals, qf_deadline deadline)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return enqueue_values(q, vals, &w);
}

qf_code qf_queue_try_enqueue_values(qf_queue *q, const void *const *vals)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return enqueue_values(q, vals, &w);
}

qf_code qf_queue_poll_enqueue_values(qf_queue *q, const void *const *vals, qf_waker *wk)
{
    /* Refused before the waker is looked at, as qf_queue_poll_enqueue(). */
    if (!wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    qf_code rc = values_usable(q, vals, "vals");
    if (rc != QF_OK)
        return rc;
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    rc = put_values(q, vals, &w);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

/* The take into values_usable() outs. */
static qf_code take_values(qf_queue *q, const qf__wait *w, void *const *outs)
{
    uint64_t buf[QF__PACKED_MAX_BYTES / 8]; /* a queue of cells copies the value here */
    void *slot = buf;
    qf_code rc = engine_take(q, 1, 1, false, w, &slot, NULL);
    if (rc == QF_OK)
        qf__packed_unpack_values(q, slot, outs);
    return rc;
}

static qf_code dequeue_values(qf_queue *q, const qf__wait *w, void *const *outs)
{
    qf_code rc = values_usable(q, (const void *const *)outs, "outs");
    return rc == QF_OK ? take_values(q, w, outs) : rc;
}

qf_code qf_queue_dequeue_values(qf_queue *q, void *const *outs)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_values(q, &w, outs);
}

qf_code qf_queue_dequeue_values_until(qf_queue *q, qf_deadline deadline, void *const *outs)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_values(q, &w, outs);
}

qf_code qf_queue_try_dequeue_values(qf_queue *q, void *const *outs)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_values(q, &w, outs);
}

qf_code qf_queue_poll_dequeue_values(qf_queue *q, qf_waker *wk, void *const *outs)
{
    if (!wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    qf_code rc = values_usable(q, (const void *const *)outs, "outs");
    if (rc != QF_OK)
        return rc;
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    rc = take_values(q, &w, outs);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

bool qf_queue_takes_values(const qf_queue *q)
{
    return !null_queue(q, "qf_queue_takes_values: queue (q) is NULL") && q->packed;
}

/* Keys of a batch of n rows of a queue that makes none
 * (qf__queue_rows_without_keys()): n empty strings, which destroying the
 * tensor need not look at one by one. */
static qf_code empty_keys(size_t n, qf_tensor **ret)
{
    qf_tensor *t = qf_tensor_new(QF_STRING, &(qf_shape){.rank = 1, .dims = {(int64_t)n}});
    if (!t)
        return qf_last_code();
    t->all_borrowed = true; /* no string of its own: nothing to free */
    *ret = t;
    return QF_OK;
}

/* The common case of build_batch(): every component of every element is a
 * scalar (a record's key and value, a label): fill the batch tensors
 * straight from the elements. False (b untouched) when some component is
 * not, and the general path runs. When the slots are all rows of string blocks the
 * values are not copied: the value tensor borrows them and takes the slots
 * over (*ret_took true); else the caller still owns the slots. */
static bool stack_scalars(qf_queue *q, void **slots, size_t n, qf_element *b, bool *ret_took)
{
    *ret_took = false;
    for (size_t c = 0; c < q->ncomp; c++) {
        qf_tensor *t = NULL;
        qf_code rc = QF_UNIMPLEMENTED;
        /* Rows live only in queues of (key, value) strings (qf_strblock-impl.h). */
        if (c == 1 && q->ncomp == 2 && q->dtypes[c] == QF_STRING) {
            rc = qf__stack_rows_borrowed(slots, n, &t);
            *ret_took = rc == QF_OK;
        } else if (c == 0 && q->rows_no_keys && q->ncomp == 2 && n > 0 && qf__rows_all(slots, n)) {
            rc = empty_keys(n, &t); /* takes nothing: the values take the rows */
        }
        if (rc == QF_UNIMPLEMENTED)
            rc = qf__stack_scalars(slots, n, c, q->dtypes[c], &t);
        if (rc != QF_OK) {
            for (size_t j = 0; j < c; j++)
                qf_element_set(b, j, NULL);
            return false;
        }
        qf_element_set(b, c, t);
    }
    return true;
}

/* Stack n taken slots into one batch element. Consumes the slots. */
static qf_code build_batch(qf_queue *q, void **slots, size_t n, qf_element **ret_batch)
{
    qf_element *b = qf_element_new(q->ncomp);
    if (!b)
        return QF_RESOURCE_EXHAUSTED;
    bool took;
    if (q->inline_mode) {
        qf_shape sh = qf_shape_prepend((int64_t)n, &q->shapes[0]);
        qf_tensor *t;
        if (q->dtypes[0] == QF_PTR) {
            t = qf_tensor_new_ptr(&sh, q->ptr_dtor);
            for (size_t i = 0; t && i < n; i++)
                qf_tensor_set_ptr(t, (int64_t)i, slots[i]);
        } else {
            size_t sz = qf_dtype_size(q->dtypes[0]);
            t = qf__tensor_new_dense(q->dtypes[0], &sh, (int64_t)n, n * sz, NULL);
            if (t)
                slot_numbers(t->buf, slots, n, sz);
        }
        if (!t) {
            qf_element_free(b);
            return QF_RESOURCE_EXHAUSTED;
        }
        qf_element_set(b, 0, t);
    } else if (q->packed) {
        if (qf__packed_batch(q, slots, n, b) != QF_OK) {
            qf_element_free(b);
            return QF_RESOURCE_EXHAUSTED;
        }
    } else if (!q->padded && stack_scalars(q, slots, n, b, &took)) {
        if (!took)
            qf__slots_free(slots, n);
    } else {
        /* Rows of string blocks become elements first (the runtime never
         * sends them here; a padded queue of rows would). */
        for (size_t i = 0; i < n; i++) {
            qf_element *e = qf__slot_element(slots[i]);
            if (!e) {
                qf_element_free(b);
                return QF_RESOURCE_EXHAUSTED;
            }
            slots[i] = e;
        }
        qf_tensor **parts = malloc((n ? n : 1) * sizeof(qf_tensor *));
        if (!parts) {
            qf_element_free(b);
            return QF_RESOURCE_EXHAUSTED;
        }
        for (size_t c = 0; c < q->ncomp; c++) {
            for (size_t i = 0; i < n; i++)
                parts[i] = qf_element_take(slots[i], c);
            qf_tensor *t = NULL;
            qf_code rc = q->padded
                             ? qf_tensor_stack_padded(parts, n, q->dtypes[c], &q->shapes[c], &t)
                             : qf_tensor_stack(parts, n, q->dtypes[c], &q->shapes[c], &t);
            if (rc != QF_OK) {
                free(parts);
                qf_element_free(b);
                return rc;
            }
            qf_element_set(b, c, t);
        }
        free(parts);
        for (size_t i = 0; i < n; i++)
            qf_element_free(slots[i]);
    }
    if (q->names)
        qf_element_set_names(b, (const char *const *)q->names);
    *ret_batch = b;
    return QF_OK;
}

/* The queue stores its values in its ring's cells (qf__fifo_config). */
static bool cells(const qf_queue *q)
{
    return q->packed && q->packed->cells;
}

/* For a take of up to n values of a queue of cells: n buffers, slots[i]
 * pointing to each; what to free after (NULL: none needed, or out of
 * memory when cells(q)). */
static char *value_buffers(const qf_queue *q, void **slots, size_t n)
{
    if (!cells(q) || n == 0)
        return NULL;
    size_t room = q->packed->room;
    if (n > SIZE_MAX / room)
        return NULL;
    char *stage = malloc(n * room);
    for (size_t i = 0; stage && i < n; i++)
        slots[i] = stage + i * room;
    return stage;
}

static qf_code dequeue_batch(qf_queue *q, int64_t n, bool up_to, const qf__wait *w,
                             qf_element **ret_batch)
{
    if (!q || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_batch" : "queue");
    qf_code rc = qf__check_many_allowed(q, n, up_to);
    if (rc != QF_OK)
        return rc;
    /* TensorFlow's n is an int32; above it the slot array the batch is
     * gathered in would not fit in memory (and its size would wrap). */
    if (n > INT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s requested %lld > %d elements",
                            up_to ? "DequeueUpToOp" : "DequeueManyOp", (long long)n, INT32_MAX);
    void **slots = malloc((size_t)(n ? n : 1) * sizeof(void *));
    char *stage = slots ? value_buffers(q, slots, (size_t)n) : NULL;
    if (!slots || (cells(q) && n > 0 && !stage)) {
        free(slots);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in dequeue_many");
    }
    size_t got = 0;
    /* A tried dequeue_up_to returns the 1..n that are there now. */
    size_t min = up_to && w->mode == QF__WAIT_TRY ? 1 : (size_t)n;
    if (n > 0)
        rc = engine_take(q, min, (size_t)n, up_to, w, slots, &got);
    if (rc == QF_OK) {
        qf_code brc = build_batch(q, slots, got, ret_batch);
        if (brc != QF_OK) {
            give_back(q, slots, got);
            rc = qf_set_error(brc, "could not build the batch of %s '%s'", q->kind_name, q->name);
        }
    }
    free(slots);
    free(stage);
    return rc;
}

qf_code qf_queue_dequeue_many(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_batch(q, n, false, &w, ret_batch);
}

qf_code qf_queue_dequeue_many_until(qf_queue *q, int64_t n, qf_deadline deadline,
                                    qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_batch(q, n, false, &w, ret_batch);
}

qf_code qf_queue_try_dequeue_many(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_batch(q, n, false, &w, ret_batch);
}

qf_code qf_queue_dequeue_up_to(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_batch(q, n, true, &w, ret_batch);
}

qf_code qf_queue_dequeue_up_to_until(qf_queue *q, int64_t n, qf_deadline deadline,
                                     qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_batch(q, n, true, &w, ret_batch);
}

qf_code qf_queue_try_dequeue_up_to(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_batch(q, n, true, &w, ret_batch);
}

/* ------------------------------------------------------------ pointer API */

static qf_code check_ptr_queue(const qf_queue *q)
{
    if (!q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL queue");
    if (!q->ptr_queue)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "%s '%s' is not a pointer queue (one scalar QF_PTR component)",
                            q->kind_name, q->name);
    return QF_OK;
}

static qf_code put_ptrs(qf_queue *q, void *const *ps, size_t n, const qf__wait *w, size_t *ret_done)
{
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK) {
        if (ret_done)
            *ret_done = 0;
        return rc;
    }
    return engine_put(q, ps, n, w, ret_done);
}

qf_code qf_queue_enqueue_ptr(qf_queue *q, void *p)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return put_ptrs(q, &p, 1, &w, NULL);
}

qf_code qf_queue_enqueue_ptr_until(qf_queue *q, void *p, qf_deadline deadline)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return put_ptrs(q, &p, 1, &w, NULL);
}

qf_code qf_queue_try_enqueue_ptr(qf_queue *q, void *p)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return put_ptrs(q, &p, 1, &w, NULL);
}

qf_code qf_queue_poll_enqueue_ptr(qf_queue *q, void *p, qf_waker *wk)
{
    qf_code rc0 = check_ptr_queue(q);
    if (rc0 != QF_OK)
        return rc0;
    if (!wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    qf_code rc = put_ptrs(q, &p, 1, &w, NULL);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

qf_code qf_queue_enqueue_many_ptrs(qf_queue *q, void *const *ps, size_t n, size_t *ret_enqueued)
{
    return qf_queue_enqueue_many_ptrs_until(q, ps, n, QF_FOREVER, ret_enqueued);
}

qf_code qf_queue_enqueue_many_ptrs_until(qf_queue *q, void *const *ps, size_t n,
                                         qf_deadline deadline, size_t *ret_enqueued)
{
    if (!ps && n > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL pointer array");
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return put_ptrs(q, ps, n, &w, ret_enqueued);
}

qf_code qf_queue_try_enqueue_many_ptrs(qf_queue *q, void *const *ps, size_t n)
{
    if (!ps && n > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL pointer array");
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return put_ptrs(q, ps, n, &w, NULL);
}

/* Deprecated spelling: QF_NO_WAIT selects the try form. */
qf_code qf_queue_enqueue_many_ptr(qf_queue *q, void *const *ps, size_t n, qf_deadline deadline,
                                  size_t *ret_enqueued)
{
    if (!ps && n > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL pointer array");
    qf__wait w = {deadline == QF_NO_WAIT ? QF__WAIT_TRY : QF__WAIT_DEADLINE, deadline, NULL};
    return put_ptrs(q, ps, n, &w, ret_enqueued);
}

static qf_code take_ptrs(qf_queue *q, size_t n, bool up_to, const qf__wait *w, void **ret_ps,
                         size_t *ret_n)
{
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK)
        return rc;
    if (!ret_ps)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL output array (ret_ps)");
    if (up_to && !ret_n) /* the count is the only way to know what was taken */
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n: dequeue_up_to_ptr must say how "
                                                 "many it took");
    if (n == 0) {
        if (ret_n)
            *ret_n = 0;
        return QF_OK;
    }
    size_t min = up_to && w->mode == QF__WAIT_TRY ? 1 : n;
    return engine_take(q, min, n, up_to, w, ret_ps, ret_n);
}

qf_code qf_queue_dequeue_ptr(qf_queue *q, void **ret_p)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return take_ptrs(q, 1, false, &w, ret_p, NULL);
}

qf_code qf_queue_dequeue_ptr_until(qf_queue *q, qf_deadline deadline, void **ret_p)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, 1, false, &w, ret_p, NULL);
}

qf_code qf_queue_try_dequeue_ptr(qf_queue *q, void **ret_p)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return take_ptrs(q, 1, false, &w, ret_p, NULL);
}

qf_code qf_queue_poll_dequeue_ptr(qf_queue *q, qf_waker *wk, void **ret_p)
{
    qf_code rc0 = check_ptr_queue(q);
    if (rc0 != QF_OK)
        return rc0;
    if (!wk || !ret_p)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", !wk ? "waker" : "ret_p");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    qf_code rc = take_ptrs(q, 1, false, &w, ret_p, NULL);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

qf_code qf_queue_dequeue_many_ptrs(qf_queue *q, size_t n, void **ret_ps)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_dequeue_many_ptrs_until(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_try_dequeue_many_ptrs(qf_queue *q, size_t n, void **ret_ps)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_dequeue_up_to_ptrs(qf_queue *q, size_t n, void **ret_ps, size_t *ret_n)
{
    if (!ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n (the count of pointers taken)");
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

qf_code qf_queue_dequeue_up_to_ptrs_until(qf_queue *q, size_t n, qf_deadline deadline,
                                          void **ret_ps, size_t *ret_n)
{
    if (!ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n (the count of pointers taken)");
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

qf_code qf_queue_try_dequeue_up_to_ptrs(qf_queue *q, size_t n, void **ret_ps, size_t *ret_n)
{
    if (!ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n (the count of pointers taken)");
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

/* Deprecated spellings: QF_NO_WAIT selects the try form. */
qf_code qf_queue_dequeue_many_ptr(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps)
{
    qf__wait w = {deadline == QF_NO_WAIT ? QF__WAIT_TRY : QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_dequeue_up_to_ptr(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps,
                                   size_t *ret_n)
{
    qf__wait w = {deadline == QF_NO_WAIT ? QF__WAIT_TRY : QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

/* ------------------------------------------------ enqueue that waits in line */

/* One slot in line (qf_queue_put-impl.h). The FIFO engine only. */
static qf_code poll_put_slot_claimed(qf_queue *q, void *slot, qf_waker *wk, qf__put_ticket *tk);

/* The consumer or closer that gave a task's request its final state may
 * still be waking the task through the request's waker (finish_request()
 * in queues/engine/qf_fifo_wait.c holds it CLAIMED until then): wait that out before the
 * ticket and the waker are used again. A wake function call: spin a
 * little, then yield (the consumer may be off its core because the woken
 * task took it). */
static void put_ticket_settle(const qf__put_ticket *tk)
{
    qf_waker *wk = tk->req.waker;
    for (unsigned i = 0; wk && qf_waker_state(wk) == QF_WAKER_CLAIMED; i++)
        qf__spin_then_yield(i);
}

/* A single-producer queue's producer side stays claimed while a ticket is
 * in line: consumers put its slot in for it, as the single producer. */
static qf_code poll_put_slot(qf_queue *q, void *slot, qf_waker *wk, qf__put_ticket *tk)
{
    bool sp = q->single_producer;
    if (tk->active) {
        uint32_t st = atomic_load_explicit(&tk->req.state, memory_order_acquire);
        if (st == QF__REQ_WAITING)
            return QF_PENDING; /* still in line: a wake for something else */
        put_ticket_settle(tk);
        tk->active = false;
        if (sp)
            qf__fifo_sp_release(&q->fifo);
        return st == QF__REQ_DONE ? QF_OK : qf__fifo_err_enqueue_cancelled();
    }
    if (!sp)
        return poll_put_slot_claimed(q, slot, wk, tk);
    qf_code rc = qf__fifo_sp_claim(&q->fifo);
    if (rc != QF_OK)
        return rc;
    rc = poll_put_slot_claimed(q, slot, wk, tk);
    if (rc != QF_PENDING)
        qf__fifo_sp_release(&q->fifo);
    return rc;
}

static qf_code poll_put_slot_claimed(qf_queue *q, void *slot, qf_waker *wk, qf__put_ticket *tk)
{
    for (;;) {
        qf_code rc = qf__fifo_closed_for(
            &q->fifo, atomic_load_explicit(&q->fifo.state, memory_order_acquire), false);
        if (rc != QF_OK)
            return rc;
        size_t published = 0;
        size_t k = qf__fifo_put_now(&q->fifo, &slot, 1, false, false, NULL, &rc, &published);
        qf__fifo_wake_consumers(&q->fifo, published);
        if (k == 1)
            return QF_OK;
        if (rc != QF_OK)
            return rc;
        /* Full: in line, pending like a blocked thread (a plain close lets
         * it finish; consumers wait for it before end-of-data). */
        if (!qf__fifo_become_pending(&q->fifo, &rc))
            return rc;
        tk->slot = slot;
        tk->req = (qf__put_req){.slots = &tk->slot, .n = 1, .owns_pending = true, .waker = wk};
        tk->active = true;
        if (qf__fifo_enlist(&q->fifo, &tk->req) == QF_PENDING)
            return QF_PENDING;
        tk->active = false; /* room showed up meanwhile: again */
    }
}

qf_code qf__queue_poll_put_ptr(qf_queue *q, void *p, qf_waker *wk, qf__put_ticket *tk)
{
    if (!tk || !wk || q->ops != &qf__fifo_ops)
        return qf_queue_poll_enqueue_ptr(q, p, wk);
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK)
        return rc;
    return poll_put_slot(q, p, wk, tk);
}

qf_code qf__queue_poll_put_elem(qf_queue *q, qf_element *e, qf_waker *wk, qf__put_ticket *tk)
{
    if (!tk || !wk || !q || !e || q->ops != &qf__fifo_ops || q->inline_mode || q->packed)
        return qf_queue_poll_enqueue(q, e, wk);
    if (!tk->active && !qf__element_plainly_fits(q, e)) {
        qf_code rc = qf__validate_element(q, e);
        if (rc == QF_OK)
            rc = check_ptr_movable(q, e);
        if (rc != QF_OK)
            return rc;
    }
    return poll_put_slot(q, e, wk, tk);
}

bool qf__queue_put_abandon(qf_queue *q, qf__put_ticket *tk)
{
    if (!tk || !tk->active)
        return true;
    tk->active = false;
    bool mine = qf__fifo_withdraw(&q->fifo, &tk->req);
    uint32_t st = QF__REQ_CANCELLED;
    /* Else a consumer or the closer has it: its final state is stored right
     * after their lock is dropped. */
    while (!mine &&
           (st = atomic_load_explicit(&tk->req.state, memory_order_acquire)) == QF__REQ_WAITING)
        qf__cpu_relax();
    if (!mine)
        put_ticket_settle(tk);
    if (q->single_producer)
        qf__fifo_sp_release(&q->fifo);
    return mine || st != QF__REQ_DONE;
}

/* ------------------------------------------------------------------ bulk */

static qf_code check_bulk(const qf_queue *q, int64_t min, int64_t max)
{
    if (min < 1 || max < min)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "bulk dequeue of %s '%s' needs 1 <= min <= max (min %lld, max %lld)",
                            q->kind_name, q->name, (long long)min, (long long)max);
    if (!q->unbounded && min > q->capacity)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "bulk dequeue of %s '%s': min %lld exceeds the capacity %lld",
                            q->kind_name, q->name, (long long)min, (long long)q->capacity);
    return QF_OK;
}

static qf_code bulk_ptrs(qf_queue *q, size_t min, size_t max, const qf__wait *w, void **ret_ps,
                         size_t *ret_n)
{
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK)
        return rc;
    if (!ret_ps || !ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", ret_ps ? "ret_n" : "output array");
    if (max > INT64_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "bulk dequeue: max %zu is too large", max);
    rc = check_bulk(q, (int64_t)min, (int64_t)max);
    if (rc != QF_OK)
        return rc;
    size_t got = 0;
    rc = q->ops->take(q, min, max, true, w, ret_ps, &got);
    if (rc == QF_OK)
        *ret_n = got;
    return rc;
}

qf_code qf_queue_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, void **ret_ps, size_t *ret_n)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
}

qf_code qf_queue_dequeue_bulk_ptr_until(qf_queue *q, size_t min, size_t max, qf_deadline deadline,
                                        void **ret_ps, size_t *ret_n)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
}

qf_code qf_queue_try_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, void **ret_ps,
                                      size_t *ret_n)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
}

qf_code qf_queue_poll_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, qf_waker *wk,
                                       void **ret_ps, size_t *ret_n)
{
    /* NULLs are refused before the waker is looked at (see poll_dequeue). */
    qf_code rc0 = check_ptr_queue(q);
    if (rc0 != QF_OK)
        return rc0;
    if (!wk || !ret_ps || !ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !wk       ? "waker"
                            : !ret_ps ? "output array"
                                      : "ret_n");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    qf_code rc = bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
}

static qf_code bulk_batch(qf_queue *q, int64_t min, int64_t max, const qf__wait *w,
                          qf_element **ret_batch)
{
    if (!q || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_batch" : "queue");
    qf_code rc = check_bulk(q, min, max);
    if (rc == QF_OK)
        rc = qf__check_many_allowed(q, max, true);
    if (rc != QF_OK)
        return rc;
    /* What the caller can take at most is what it may need room for. */
    int64_t room = max;
    if (!q->unbounded && room > q->capacity)
        room = q->capacity;
    void **slots = malloc((size_t)room * sizeof(void *));
    char *stage = slots ? value_buffers(q, slots, (size_t)room) : NULL;
    if (!slots || (cells(q) && room > 0 && !stage)) {
        free(slots);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in a bulk dequeue");
    }
    size_t got = 0;
    rc = q->ops->take(q, (size_t)min, (size_t)room, true, w, slots, &got);
    if (rc == QF_OK) {
        qf_code brc = build_batch(q, slots, got, ret_batch);
        if (brc != QF_OK) {
            give_back(q, slots, got);
            rc = qf_set_error(brc, "could not build the batch of %s '%s'", q->kind_name, q->name);
        }
    }
    free(slots);
    free(stage);
    return rc;
}

qf_code qf_queue_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return bulk_batch(q, min, max, &w, ret_batch);
}

qf_code qf_queue_dequeue_bulk_until(qf_queue *q, int64_t min, int64_t max, qf_deadline deadline,
                                    qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return bulk_batch(q, min, max, &w, ret_batch);
}

qf_code qf_queue_try_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return bulk_batch(q, min, max, &w, ret_batch);
}

qf_code qf_queue_poll_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_waker *wk,
                                   qf_element **ret_batch)
{
    if (!q || !wk || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !q    ? "queue"
                            : !wk ? "waker"
                                  : "ret_batch");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    qf_code rc = bulk_batch(q, min, max, &w, ret_batch);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    return rc;
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
