/* test_queue_metrics.c - the live-queue set (qf_queue_metrics.h): every
 * queue kind is enumerated from its constructor's return until its last
 * reference is dropped, shared queues once, failed constructions never. */
#include <criterion/criterion.h>
#include <string.h>

#include "qflow.h"

typedef struct seen {
    const qf_queue *want[8];
    int hits[8];
    size_t total;
} seen;

static void visit(qf_queue *q, void *arg)
{
    seen *s = arg;
    s->total++;
    for (int i = 0; i < 8; i++)
        if (s->want[i] == q)
            s->hits[i]++;
}

Test(queue_metrics, every_kind_is_live_until_its_last_unref)
{
    size_t before = qf_queue_live_count();
    qf_dtype dt = QF_INT32;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = 4, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *q[5];
    cr_assert_eq(qf_fifo_queue_new(&o, &q[0]), QF_OK);
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &q[1]), QF_OK);
    cr_assert_eq(qf_padding_fifo_queue_new(&o, &q[2]), QF_OK);
    cr_assert_eq(qf_priority_queue_new(&o, &q[3]), QF_OK);
    cr_assert_eq(qf_ptr_queue_new(4, "p", 0, NULL, &q[4]), QF_OK);
    cr_expect_eq(qf_queue_live_count(), before + 5);
    seen s = {0};
    for (int i = 0; i < 5; i++)
        s.want[i] = q[i];
    size_t n = qf_queue_foreach_live(visit, &s);
    cr_expect_eq(n, s.total);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(s.hits[i], 1, "queue %d seen %d times", i, s.hits[i]);
    qf_queue_ref(q[0]);
    qf_queue_unref(q[0]);
    cr_expect_eq(qf_queue_live_count(), before + 5, "a reference is still held");
    for (int i = 0; i < 5; i++)
        qf_queue_unref(q[i]);
    cr_expect_eq(qf_queue_live_count(), before);
    cr_expect_eq(qf_queue_foreach_live(NULL, NULL), 0);
}

Test(queue_metrics, shared_queues_count_once_and_failures_never)
{
    size_t before = qf_queue_live_count();
    qf_queue_registry *reg;
    cr_assert_eq(qf_queue_registry_new(&reg), QF_OK);
    qf_dtype dt = QF_INT32;
    qf_queue_options o = {.capacity = 4,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shared_name = "shared",
                          .registry = reg};
    qf_queue *a, *b, *c, *d;
    cr_assert_eq(qf_fifo_queue_new(&o, &a), QF_OK);
    cr_assert_eq(qf_fifo_queue_new(&o, &b), QF_OK);
    cr_expect_eq(a, b);
    o.shared_name = "shared-shuffle";
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &c), QF_OK);
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &d), QF_OK);
    cr_expect_eq(qf_queue_live_count(), before + 2);
    qf_queue_options bad = {.capacity = 4, .num_components = 0, .dtypes = &dt};
    qf_queue *e = NULL;
    cr_expect_eq(qf_fifo_queue_new(&bad, &e), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_queue_live_count(), before + 2);
    qf_queue_unref(a);
    qf_queue_unref(b);
    qf_queue_unref(c);
    qf_queue_unref(d);
    qf_queue_registry_free(reg);
    cr_expect_eq(qf_queue_live_count(), before);
}
