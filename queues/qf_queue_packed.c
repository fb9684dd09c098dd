/* qf_queue_packed.c - slots of packed values (qf_queue_packed-impl.h).
 *
 * The components' values lie one after another at 8-byte offsets: in a
 * cell of the queue's ring (the caller's buffer on the way in and out), or
 * in a slot that is a block of the block cache (qf_blockcache-impl.h). The producer
 * allocates it from its own thread's lists and the consumer frees it into
 * its own, from where chains of them go back to the producer: one block per
 * element travels, where the element and each tensor did before. */
#include "qf_queue_packed-impl.h"

#include <stdlib.h>
#include <string.h>

#include "qf_blockcache-impl.h"
#include "qf_status.h"
#include "qf_tensor-impl.h"

static bool packable_dtype(qf_dtype dt)
{
    return qf_dtype_is_valid(dt) && dt != QF_STRING && dt != QF_PTR && dt != QF_SPARSE;
}

const char *qf__packed_refusal(const qf_queue *q)
{
    if (q->ops != &qf__fifo_ops || q->padded)
        return "not a FIFOQueue (padding, shuffle and priority queues keep elements)";
    if (q->inline_mode)
        return q->dtypes[0] == QF_PTR
                   ? "an inline pointer queue (use the _ptr calls)"
                   : "an inline queue (one scalar of at most 8 bytes: use the element calls)";
    if (!q->shapes)
        return "its shapes are not given";
    if (q->ncomp > QF__PACKED_MAX_COMPONENTS)
        return "more than 16 components";
    size_t off = 0;
    for (size_t c = 0; c < q->ncomp; c++) {
        const qf_shape *sh = &q->shapes[c];
        if (!packable_dtype(q->dtypes[c]))
            return "a component that is not numeric or bool";
        if (!qf_shape_is_fully_defined(sh))
            return "a component whose shape is not fully defined";
        if (sh->rank >= QF_MAX_RANK)
            return "a component of rank QF_MAX_RANK (its batches would have one more)";
        int64_t n = qf_shape_num_elements(sh);
        if (n < 0 || (uint64_t)n > QF__PACKED_MAX_BYTES)
            return "more than 512 bytes of values";
        off = (off + 7) & ~(size_t)7;
        off += (size_t)n * qf_dtype_size(q->dtypes[c]);
        if (off > QF__PACKED_MAX_BYTES)
            return "more than 512 bytes of values";
    }
    return NULL;
}

bool qf__packed_init(qf_queue *q)
{
    q->packed = NULL;
    if (qf__packed_refusal(q))
        return true;
    qf__packed *p = malloc(sizeof(qf__packed) + q->ncomp * sizeof(qf__dense_comp));
    if (!p)
        return false;
    size_t off = 0;
    for (size_t c = 0; c < q->ncomp; c++) {
        qf__dense_comp *pc = &p->comp[c];
        const qf_shape *sh = &q->shapes[c];
        off = (off + 7) & ~(size_t)7;
        pc->dtype = q->dtypes[c];
        pc->off = off;
        pc->n = qf_shape_num_elements(sh);
        pc->nbytes = (size_t)pc->n * qf_dtype_size(q->dtypes[c]);
        memset(&pc->shape, 0, sizeof(pc->shape));
        pc->shape.rank = sh->rank;
        for (int d = 0; d < sh->rank; d++)
            pc->shape.dims[d] = sh->dims[d];
        off += pc->nbytes;
    }
    p->bytes = off;
    p->cells = false; /* the engine decides (init_engine() in qf_queue.c) */
    p->room = (off + 7) & ~(size_t)7;
    p->gapless = true;
    for (size_t c = 0; c < q->ncomp; c++)
        p->gapless &= p->comp[c].nbytes % 8 == 0;
    p->cls = qf__block_class(off);
    p->home_bytes = qf__dense_layout(q->ncomp, p->comp);
    q->packed = p;
    return true;
}

void qf__packed_destroy(qf_queue *q)
{
    free(q->packed);
    q->packed = NULL;
}

static void *slot_alloc(const qf__packed *p)
{
    uint8_t cls;
    void *s = qf__block_alloc(p->bytes, &cls);
    if (!s)
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a queue slot of %zu bytes",
                     p->bytes);
    return s;
}

/* nb bytes from src to dst: a scalar of 8 bytes (a label, a float64) as
 * one move rather than a call into memcpy for each component. */
static inline void copy_value(void *dst, const void *src, size_t nb)
{
    if (nb == 8) {
        uint64_t v;
        memcpy(&v, src, 8);
        memcpy(dst, &v, 8);
        return;
    }
    memcpy(dst, src, nb);
}

/* Component c's values from vals[c] to dst, at the packed offsets. */
static void copy_values_in(const qf__packed *p, size_t ncomp, const void *const *vals, char *dst)
{
    for (size_t c = 0; c < ncomp; c++)
        copy_value(dst + p->comp[c].off, vals[c], p->comp[c].nbytes);
}

void qf__packed_pack_values_into(const qf_queue *q, const void *const *vals, void *dst)
{
    if (!q->packed->gapless)
        memset(dst, 0, q->packed->room); /* the padding too: whole words are copied */
    copy_values_in(q->packed, q->ncomp, vals, dst);
}

void *qf__packed_pack_values(const qf_queue *q, const void *const *vals)
{
    char *s = slot_alloc(q->packed);
    if (s)
        copy_values_in(q->packed, q->ncomp, vals, s);
    return s;
}

void qf__packed_unpack_values(const qf_queue *q, void *slot, void *const *outs)
{
    const qf__packed *p = q->packed;
    for (size_t c = 0; c < q->ncomp; c++)
        copy_value(outs[c], (const char *)slot + p->comp[c].off, p->comp[c].nbytes);
    if (!p->cells)
        qf__block_free(slot, p->cls);
}

/* Row `row` of src's components (0 for an element's own values) to dst,
 * at the packed offsets. */
static void copy_row(const qf_queue *q, const qf_element *src, size_t row, char *dst)
{
    const qf__packed *p = q->packed;
    for (size_t c = 0; c < q->ncomp; c++) {
        size_t nb = p->comp[c].nbytes;
        copy_value(dst + p->comp[c].off, src->comps[c]->buf + row * nb, nb);
    }
}

void *qf__packed_pack(const qf_queue *q, const qf_element *e)
{
    char *s = slot_alloc(q->packed);
    if (s)
        copy_row(q, e, 0, s);
    return s;
}

void qf__packed_pack_into(const qf_queue *q, const qf_element *e, void *dst)
{
    if (!q->packed->gapless)
        memset(dst, 0, q->packed->room); /* the padding too: whole words are copied */
    copy_row(q, e, 0, dst);
}

void qf__packed_pack_rows_into(const qf_queue *q, const qf_element *b, int64_t from, size_t n,
                               char *stage, void **ret_slots)
{
    size_t room = q->packed->room;
    memset(stage, 0, n * room);
    for (size_t i = 0; i < n; i++) {
        copy_row(q, b, (size_t)from + i, stage + i * room);
        ret_slots[i] = stage + i * room;
    }
}

qf_code qf__packed_pack_rows(const qf_queue *q, const qf_element *b, int64_t from, size_t n,
                             void **ret_slots)
{
    for (size_t i = 0; i < n; i++) {
        char *s = slot_alloc(q->packed);
        if (!s) {
            qf__packed_free(q, ret_slots, i);
            return QF_RESOURCE_EXHAUSTED;
        }
        copy_row(q, b, (size_t)from + i, s);
        ret_slots[i] = s;
    }
    return QF_OK;
}

qf_element *qf__packed_unpack(const qf_queue *q, void *slot)
{
    const qf__packed *p = q->packed;
    qf_element *e = qf__element_of_dense(q->ncomp, p->comp, p->home_bytes, slot);
    if (!e)
        return NULL;
    if (q->names && qf_element_set_names(e, (const char *const *)q->names) != QF_OK) {
        qf_element_free(e);
        return NULL;
    }
    if (!p->cells)
        qf__block_free(slot, p->cls);
    return e;
}

qf_code qf__packed_batch(const qf_queue *q, void *const *slots, size_t n, qf_element *b)
{
    const qf__packed *p = q->packed;
    for (size_t c = 0; c < q->ncomp; c++) {
        const qf__dense_comp *pc = &p->comp[c];
        qf_shape sh = qf_shape_prepend((int64_t)n, &pc->shape);
        qf_tensor *t =
            qf__tensor_new_dense(q->dtypes[c], &sh, (int64_t)n * pc->n, n * pc->nbytes, NULL);
        if (!t) {
            for (size_t j = 0; j < c; j++)
                qf_element_set(b, j, NULL);
            return QF_RESOURCE_EXHAUSTED;
        }
        for (size_t i = 0; i < n; i++)
            memcpy(t->buf + i * pc->nbytes, (const char *)slots[i] + pc->off, pc->nbytes);
        b->comps[c] = t;
    }
    qf__packed_free(q, slots, n);
    return QF_OK;
}

void qf__packed_keep_rows(const qf_queue *q, qf_element *b, int64_t from, int64_t rows)
{
    const qf__packed *p = q->packed;
    for (size_t c = 0; c < q->ncomp; c++) {
        const qf__dense_comp *pc = &p->comp[c];
        qf_shape sh = qf_shape_prepend(rows - from, &pc->shape);
        qf_tensor *t = qf__tensor_new_dense(q->dtypes[c], &sh, (rows - from) * pc->n,
                                            (size_t)(rows - from) * pc->nbytes,
                                            b->comps[c]->buf + (size_t)from * pc->nbytes);
        if (t)
            qf_element_set(b, c, t);
    }
}

void qf__packed_free(const qf_queue *q, void *const *slots, size_t n)
{
    if (q->packed->cells)
        return; /* the caller's buffers */
    uint8_t cls = q->packed->cls;
    for (size_t i = 0; i < n; i++)
        qf__block_free(slots[i], cls);
}
