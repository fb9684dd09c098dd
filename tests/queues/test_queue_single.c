/* test_queue_single.c - QF_QUEUE_SINGLE_PRODUCER / _CONSUMER used by
 * several threads at once (issue 24 item 12: 42,908 of 60,000 arrived).
 * A call on a side that another call is using is refused with
 * QF_FAILED_PRECONDITION naming the queue and the flag; nothing accepted
 * is lost.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"

typedef struct blocked {
    qf_queue *q;
    bool consumer;
    pthread_t th;
    qf_code rc;
    void *got;
} blocked;

static int token;

static void *blocked_main(void *arg)
{
    blocked *b = arg;
    do /* refused only while the test's probe is inside */
        b->rc =
            b->consumer ? qf_queue_dequeue_ptr(b->q, &b->got) : qf_queue_enqueue_ptr(b->q, &token);
    while (b->rc == QF_FAILED_PRECONDITION);
    return NULL;
}

/* One producer blocked in enqueue on a full single-producer queue: every
 * other enqueue form is refused while it waits (we know it is inside once
 * a try is refused rather than reported full); after a dequeue lets it
 * finish, another thread may produce again. */
Test(queue_single, second_producer_is_refused_while_the_first_waits, .timeout = 60)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(1, "lines", QF_QUEUE_SINGLE_PRODUCER, NULL, &q), QF_OK);
    cr_assert_eq(qf_queue_enqueue_ptr(q, &token), QF_OK);
    blocked b = {.q = q};
    cr_assert_eq(pthread_create(&b.th, NULL, blocked_main, &b), 0);
    qf_deadline d = qf_deadline_in_s(30);
    qf_code rc;
    while ((rc = qf_queue_try_enqueue_ptr(q, &token)) == QF_UNAVAILABLE)
        cr_assert(!qf_deadline_passed(d), "the producer never got inside");
    cr_assert_eq(rc, QF_FAILED_PRECONDITION, "%s", qf_last_message());
    const char *m = qf_last_message();
    cr_expect(strstr(m, "'lines'") && strstr(m, "single-producer"), "message: %s", m);
    cr_expect_eq(qf_queue_enqueue_ptr_until(q, &token, qf_deadline_in_s(5)),
                 QF_FAILED_PRECONDITION);
    void *ps[2] = {&token, &token};
    cr_expect_eq(qf_queue_enqueue_many_ptrs(q, ps, 2, NULL), QF_FAILED_PRECONDITION);
    cr_expect_eq(qf_queue_size(q), 1, "nothing of the refused calls went in");
    void *p;
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    pthread_join(b.th, NULL);
    cr_expect_eq(b.rc, QF_OK);
    cr_expect_eq(qf_queue_size(q), 1);
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(qf_queue_try_enqueue_ptr(q, &token), QF_OK, "one at a time from another thread");
    qf_queue_unref(q);
}

Test(queue_single, second_consumer_is_refused_while_the_first_waits, .timeout = 60)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(1, "batches", QF_QUEUE_SINGLE_CONSUMER, NULL, &q), QF_OK);
    blocked b = {.q = q, .consumer = true};
    cr_assert_eq(pthread_create(&b.th, NULL, blocked_main, &b), 0);
    qf_deadline d = qf_deadline_in_s(30);
    qf_code rc;
    void *p;
    while ((rc = qf_queue_try_dequeue_ptr(q, &p)) == QF_UNAVAILABLE)
        cr_assert(!qf_deadline_passed(d), "the consumer never got inside");
    cr_assert_eq(rc, QF_FAILED_PRECONDITION, "%s", qf_last_message());
    const char *m = qf_last_message();
    cr_expect(strstr(m, "'batches'") && strstr(m, "single-consumer"), "message: %s", m);
    cr_assert_eq(qf_queue_enqueue_ptr(q, &token), QF_OK);
    pthread_join(b.th, NULL);
    cr_expect_eq(b.rc, QF_OK);
    cr_expect_eq(b.got, &token);
    qf_queue_unref(q);
}

/* Three producers of 20,000 values each on a single-producer queue, as in
 * the report: refused calls are retried, and the consumer gets every
 * value exactly once. */
#define NPROD 3
#define PER 20000

typedef struct prod {
    qf_queue *q;
    int id;
    pthread_t th;
    long refused;
    qf_code bad;
} prod;

static void *prod_main(void *arg)
{
    prod *p = arg;
    for (uintptr_t i = 0; i < PER; i++) {
        uintptr_t v = (uintptr_t)p->id * PER + i + 1;
        qf_code rc;
        while ((rc = qf_queue_enqueue_ptr(p->q, (void *)v)) == QF_FAILED_PRECONDITION) {
            p->refused++;
            sched_yield();
        }
        if (rc != QF_OK) {
            p->bad = rc;
            return NULL;
        }
    }
    return NULL;
}

Test(queue_single, several_producers_lose_nothing, .timeout = 120)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(8, "sp", QF_QUEUE_SINGLE_PRODUCER, NULL, &q), QF_OK);
    prod ps[NPROD];
    for (int i = 0; i < NPROD; i++) {
        ps[i] = (prod){.q = q, .id = i};
        cr_assert_eq(pthread_create(&ps[i].th, NULL, prod_main, &ps[i]), 0);
    }
    uint8_t *seen = calloc(NPROD * PER + 1, 1);
    cr_assert(seen);
    for (long n = 0; n < NPROD * PER; n++) {
        void *p;
        cr_assert_eq(qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(30), &p), QF_OK,
                     "after %ld values: %s", n, qf_last_message());
        uintptr_t v = (uintptr_t)p;
        cr_assert(v >= 1 && v <= NPROD * PER, "value %lu", (unsigned long)v);
        cr_assert_eq(seen[v], 0, "value %lu twice", (unsigned long)v);
        seen[v] = 1;
    }
    long refused = 0;
    for (int i = 0; i < NPROD; i++) {
        pthread_join(ps[i].th, NULL);
        cr_expect_eq(ps[i].bad, QF_OK);
        refused += ps[i].refused;
    }
    cr_expect_eq(qf_queue_size(q), 0);
    cr_log_info("%ld enqueue calls refused", refused);
    free(seen);
    qf_queue_unref(q);
}
