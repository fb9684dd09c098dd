/* qf_queue_list.c - TensorFlow's QueueBase.from_list (spec 41-42): a fixed
 * list of compatible queues, one of which is picked by index at run time.
 *
 * In a graph the index is a tensor evaluated per step; in C the caller has
 * the index in hand, so the list's value is the checks TensorFlow makes
 * when it builds the op (same dtypes and names in every queue), the check
 * it makes when it runs (index in range), and the merged static shapes a
 * consumer can rely on whichever queue is picked.
 */
#include <stdlib.h>
#include <string.h>

#include "qf_queue-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"

struct qf_queue_list {
    size_t n;
    qf_queue **queues;
    qf_shape *shapes; /* merged; NULL when the first queue has no shapes */
};

static bool same_names(const qf_queue *a, const qf_queue *b)
{
    if (!a->names || !b->names)
        return !a->names && !b->names;
    for (size_t i = 0; i < a->ncomp; i++)
        if (strcmp(a->names[i], b->names[i]) != 0)
            return false;
    return true;
}

static qf_code check_compatible(qf_queue *const *queues, size_t n)
{
    const qf_queue *q0 = queues[0];
    for (size_t k = 1; k < n; k++) {
        const qf_queue *q = queues[k];
        if (!q)
            return qf_set_error(QF_INVALID_ARGUMENT, "from_list: queue %zu is NULL", k);
        bool same = q->ncomp == q0->ncomp;
        for (size_t i = 0; same && i < q0->ncomp; i++)
            same = q->dtypes[i] == q0->dtypes[i];
        if (!same)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Queue %zu ('%s') has different types from queue 0 ('%s')", k,
                                q->name, q0->name);
        if (!same_names(q, q0))
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Queue %zu ('%s') has different names from queue 0 ('%s')", k,
                                q->name, q0->name);
    }
    return QF_OK;
}

/* spec 42: equal dimensions stay, differing ones become unknown, and a
 * rank difference (or a queue without shapes) makes the rank unknown. */
static void merge_shape(qf_shape *into, const qf_shape *s)
{
    if (into->rank == QF_UNKNOWN_RANK)
        return;
    if (!s || s->rank != into->rank) {
        *into = qf_shape_unknown();
        return;
    }
    for (int32_t d = 0; d < into->rank; d++)
        if (into->dims[d] != s->dims[d])
            into->dims[d] = QF_UNKNOWN_DIM;
}

qf_code qf_queue_list_new(qf_queue *const *queues, size_t n, qf_queue_list **ret_list)
{
    if (!ret_list)
        return qf_set_error(QF_INVALID_ARGUMENT, "from_list: NULL result pointer (ret_list)");
    if (!queues || n == 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "from_list: the list of queues is empty");
    if (!queues[0])
        return qf_set_error(QF_INVALID_ARGUMENT, "from_list: queue 0 is NULL");
    qf_code rc = check_compatible(queues, n);
    if (rc != QF_OK)
        return rc;
    qf_queue_list *l = calloc(1, sizeof(*l));
    if (l)
        l->queues = malloc(n * sizeof(qf_queue *));
    size_t nc = queues[0]->ncomp;
    bool any_shapes = false;
    for (size_t k = 0; k < n; k++)
        any_shapes = any_shapes || queues[k]->shapes;
    if (l && any_shapes)
        l->shapes = malloc(nc * sizeof(qf_shape));
    if (!l || !l->queues || (any_shapes && !l->shapes)) {
        if (l)
            free(l->queues);
        free(l);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "from_list: out of memory");
    }
    l->n = n;
    for (size_t k = 0; k < n; k++)
        l->queues[k] = qf_queue_ref(queues[k]);
    if (any_shapes) {
        for (size_t i = 0; i < nc; i++) {
            l->shapes[i] = queues[0]->shapes ? queues[0]->shapes[i] : qf_shape_unknown();
            for (size_t k = 1; k < n; k++)
                merge_shape(&l->shapes[i], queues[k]->shapes ? &queues[k]->shapes[i] : NULL);
        }
    }
    *ret_list = l;
    return QF_OK;
}

qf_code qf_queue_list_pick(const qf_queue_list *l, int64_t index, qf_queue **ret_queue)
{
    if (!l || !ret_queue)
        return qf_set_error(QF_INVALID_ARGUMENT, "from_list: NULL %s",
                            l ? "result (ret_queue)" : "list");
    if (index < 0 || (uint64_t)index >= l->n)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Index %lld is not in the range [0, %zu) of the queue list",
                            (long long)index, l->n);
    *ret_queue = qf_queue_ref(l->queues[index]);
    return QF_OK;
}

size_t qf_queue_list_size(const qf_queue_list *l)
{
    if (!l) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_list_size: list (l) is NULL");
        return 0;
    }
    return l->n;
}

const qf_shape *qf_queue_list_shape(const qf_queue_list *l, size_t i)
{
    if (!l) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_list_shape: list (l) is NULL");
        return NULL;
    }
    if (!l->shapes || i >= l->queues[0]->ncomp)
        return NULL;
    return &l->shapes[i];
}

void qf_queue_list_free(qf_queue_list *l)
{
    if (!l)
        return;
    for (size_t k = 0; k < l->n; k++)
        qf_queue_unref(l->queues[k]);
    free(l->queues);
    free(l->shapes);
    free(l);
}
