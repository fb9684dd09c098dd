/* test_serve.c - the serving batcher (qf_serve.h): options and bad input,
 * batch formation (full, delay, preferred sizes), expiry, priority order
 * and anti-starvation, admission policies, waitable requests in thread
 * and task form, drain and its report, the Coordinator hook, executors on
 * threads and on a shared pool, runtime shutdown, and the Prometheus text;
 * then what issue 24 found: complete accepts only handed-out requests (one
 * of racing completes wins), a model's non-code return, cancel_poll of a
 * waker the request does not hold, and delays past the clock's range.
 *
 * No test waits on a sleep for ordering: threads that must be blocked are
 * detected asleep (qf_test_park.h); time-based closes are checked as lower
 * bounds (a batch never closes by delay before its oldest request waited
 * max_queue_delay), never as "fast enough". */
#include <criterion/criterion.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "qf_serve-impl.h"
#include "qf_test_park.h"
#include "qf_test_sched.h"
#include "qflow.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(serve, .timeout = 120);
#endif

#define SEC 1000000000LL

typedef struct treq {
    qf_serve_request req; /* first: the callback casts back */
    atomic_int answers;
    atomic_int status;
    int id;
} treq;

static void on_done(qf_serve_request *r, qf_code st, void *arg)
{
    (void)arg;
    treq *t = (treq *)r;
    atomic_store(&t->status, (int)st);
    atomic_fetch_add(&t->answers, 1);
}

static void treq_init(treq *t, int id, qf_deadline dl, uint32_t prio)
{
    qf_serve_request_init(&t->req, t, dl, prio, on_done, NULL);
    atomic_init(&t->answers, 0);
    atomic_init(&t->status, -1);
    t->id = id;
}

static qf_serve *make(size_t max_batch, int64_t delay_ns, qf_serve_options *extra)
{
    qf_serve_options o = extra ? *extra : (qf_serve_options){0};
    if (!o.name)
        o.name = "t";
    o.max_batch_size = max_batch;
    o.max_queue_delay_ns = delay_ns;
    qf_serve *s = NULL;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    return s;
}

static int id_of(qf_serve_request *r)
{
    return ((treq *)r)->id;
}

/* ------------------------------------------------------------ bad input */

Test(serve, options_bad_input_named_and_nothing_made)
{
    qf_serve *s = (qf_serve *)0x1;
    qf_serve_options o = {.max_batch_size = 8, .max_queue_delay_ns = 1000};
    cr_expect_eq(qf_serve_new(NULL, &s), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_new(&o, NULL), QF_INVALID_ARGUMENT);
    struct {
        qf_serve_options o;
        const char *word;
    } bad[] = {
        {{.max_batch_size = 0}, "max_batch_size"},
        {{.max_batch_size = QF_SERVE_MAX_BATCH + 1}, "max_batch_size"},
        {{.max_batch_size = 4, .max_queue_delay_ns = -1}, "max_queue_delay_ns"},
        {{.max_batch_size = 4, .num_preferred = 1}, "preferred_batch_sizes"},
        {{.max_batch_size = 4, .preferred_batch_sizes = (size_t[]){0}, .num_preferred = 1},
         "preferred_batch_sizes[0]"},
        {{.max_batch_size = 4, .preferred_batch_sizes = (size_t[]){2, 5}, .num_preferred = 2},
         "preferred_batch_sizes[1]"},
        {{.max_batch_size = 4, .priority_levels = QF_SERVE_MAX_LEVELS + 1}, "priority_levels"},
        {{.max_batch_size = 4, .max_queued = -1}, "max_queued"},
        {{.max_batch_size = 4, .admission = (qf_serve_admission)7}, "admission"},
        {{.max_batch_size = 4, .drain_grace_ns = -5}, "drain_grace_ns"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(qf_serve_new(&bad[i].o, &s), QF_INVALID_ARGUMENT, "case %zu", i);
        cr_expect(strstr(qf_last_message(), bad[i].word) != NULL, "case %zu: '%s'", i,
                  qf_last_message());
        cr_expect_eq(s, (qf_serve *)0x1, "case %zu: output touched", i);
    }
}

Test(serve, submit_bad_input_changes_nothing)
{
    qf_serve *s = make(4, SEC, &(qf_serve_options){.priority_levels = 2});
    treq t;
    treq_init(&t, 1, QF_FOREVER, 2);
    cr_expect_eq(qf_serve_submit(NULL, &t.req), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_submit(s, NULL), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_submit(s, &t.req), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "priority 2 out of range") != NULL, "%s",
              qf_last_message());
    cr_expect_eq(atomic_load(&t.answers), 0);
    cr_expect_eq(qf_serve_depth(s), 0);
    t.req.priority = 1;
    cr_assert_eq(qf_serve_submit(s, &t.req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &t.req), QF_INVALID_ARGUMENT, "submitted twice");
    cr_expect(strstr(qf_last_message(), "already submitted") != NULL);
    cr_expect_eq(qf_serve_depth(s), 1);
    cr_expect_eq(qf_serve_poll_submit(s, &t.req, NULL), QF_INVALID_ARGUMENT);
    qf_serve_request *out[4];
    size_t n;
    cr_expect_eq(qf_serve_try_next_batch(s, NULL, &n), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_try_next_batch(s, out, NULL), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_complete(s, out, 1, QF_OK), QF_FAILED_PRECONDITION, "nothing in flight");
    qf_serve_free(s); /* cancels the queued one */
    cr_expect_eq(atomic_load(&t.answers), 1);
    cr_expect_eq(atomic_load(&t.status), QF_CANCELLED);
}

Test(serve, submit_after_drain_is_refused_and_answered)
{
    qf_serve *s = make(4, SEC, NULL);
    qf_serve_report rep;
    cr_assert_eq(qf_serve_drain(s, QF_NO_WAIT, &rep), QF_OK);
    cr_expect(qf_serve_is_draining(s));
    treq t;
    treq_init(&t, 1, QF_FOREVER, 0);
    cr_expect_eq(qf_serve_submit(s, &t.req), QF_UNAVAILABLE);
    cr_expect(strstr(qf_last_message(), "draining") != NULL, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&t.answers), 1);
    cr_expect_eq(atomic_load(&t.status), QF_UNAVAILABLE);
    qf_serve_request *out[4];
    size_t n;
    cr_expect_eq(qf_serve_next_batch(s, out, &n), QF_OUT_OF_RANGE);
    qf_serve_drain(s, QF_NO_WAIT, &rep);
    cr_expect_eq(rep.rejected, 1);
    cr_expect_eq(rep.admitted, 0);
    qf_serve_free(s);
}

Test(serve, complete_bad_input_answers_nothing)
{
    qf_serve *s = make(2, 0, NULL);
    treq a, b;
    treq_init(&a, 1, QF_FOREVER, 0);
    treq_init(&b, 2, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &b.req), QF_OK);
    qf_serve_request *out[2];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_eq(qf_serve_complete(s, out, 2, (qf_code)99), QF_INVALID_ARGUMENT);
    treq stranger;
    treq_init(&stranger, 3, QF_FOREVER, 0);
    qf_serve_request *mix[2] = {out[0], &stranger.req};
    cr_expect_eq(qf_serve_complete(s, mix, 2, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect(
        strstr(qf_last_message(), "request 1 of the batch is not handed out: never submitted"),
        "%s", qf_last_message());
    qf_serve_request *nul[2] = {out[0], NULL};
    cr_expect_eq(qf_serve_complete(s, nul, 2, QF_OK), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "request 1 of the batch is NULL"), "%s", qf_last_message());
    cr_expect_eq(atomic_load(&a.answers) + atomic_load(&b.answers), 0);
    cr_expect_eq(qf_serve_complete(s, out, 2, QF_OK), QF_OK);
    cr_expect_eq(atomic_load(&a.status), QF_OK);
    cr_expect_eq(qf_serve_complete(s, out, 1, QF_OK), QF_FAILED_PRECONDITION, "twice");
    cr_expect_eq(atomic_load(&a.answers), 1);
    qf_serve_free(s);
}

/* ------------------------------------------------------------ formation */

Test(serve, full_batch_closes_at_max_in_order)
{
    qf_serve *s = make(4, 100 * SEC, NULL);
    treq t[9];
    for (int i = 0; i < 9; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[4];
    size_t n;
    for (int b = 0; b < 2; b++) {
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
        cr_assert_eq(n, 4);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(id_of(out[i]), b * 4 + i);
        cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    }
    cr_expect_eq(qf_serve_try_next_batch(s, out, &n), QF_UNAVAILABLE, "1 of 4, delay not up");
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_FULL], 2);
    cr_expect_eq(st.size_max, 4);
    cr_expect_eq(st.depth, 1);
    qf_serve_free(s);
    cr_expect_eq(atomic_load(&t[8].status), QF_CANCELLED);
}

Test(serve, delay_closes_only_after_the_oldest_waited)
{
    const int64_t delay = 2000000; /* 2 ms */
    qf_serve *s = make(32, delay, NULL);
    treq t[3];
    for (int i = 0; i < 3; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[32];
    size_t n;
    cr_assert_eq(qf_serve_next_batch_until(s, qf_deadline_in_s(30), out, &n), QF_OK);
    int64_t now = qf_now_ns();
    cr_expect_eq(n, 3);
    /* It may close up to a quarter of the delay early (the consumers' usual
     * wake-up lateness, learnt), never earlier. */
    cr_expect_geq(now - t[0].req.qf__admit_ns, delay - delay / 4, "closed before the delay");
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_DELAY], 1);
    cr_expect_geq(st.delay_max_ns, delay - delay / 4);
    qf_serve_complete(s, out, n, QF_OK);
    /* _until with nothing queued: DEADLINE_EXCEEDED, nothing touched. */
    n = 77;
    cr_expect_eq(qf_serve_next_batch_until(s, qf_deadline_in_s(0.001), out, &n),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(n, 77);
    qf_serve_free(s);
}

Test(serve, zero_delay_hands_out_what_is_there)
{
    qf_serve *s = make(8, 0, NULL);
    treq t[3];
    for (int i = 0; i < 3; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[8];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 3);
    qf_serve_complete(s, out, n, QF_OK);
    qf_serve_free(s);
}

Test(serve, preferred_size_closes_early_when_nothing_more_is_queued)
{
    qf_serve_options o = {.preferred_batch_sizes = (size_t[]){8, 4, 4}, .num_preferred = 3};
    qf_serve *s = make(32, 100 * SEC, &o);
    treq t[16];
    for (int i = 0; i < 5; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[32];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 4, "largest preferred size <= 5");
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(id_of(out[i]), (int)i);
    qf_serve_complete(s, out, n, QF_OK);
    cr_expect_eq(qf_serve_try_next_batch(s, out, &n), QF_UNAVAILABLE, "1 left, below 4");
    for (int i = 5; i < 13; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 8, "9 pending: the preferred 8");
    cr_expect_eq(id_of(out[0]), 4, "the leftover goes first");
    qf_serve_complete(s, out, n, QF_OK);
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_PREFERRED], 2);
    qf_serve_free(s);
}

Test(serve, expired_requests_never_reach_the_model)
{
    qf_serve *s = make(4, 0, NULL);
    treq late, soon, fine;
    treq_init(&late, 1, qf_now_ns() - 1, 0);
    cr_expect_eq(qf_serve_submit(s, &late.req), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&late.answers), 1);
    cr_expect_eq(atomic_load(&late.status), QF_DEADLINE_EXCEEDED);
    qf_deadline dl = qf_deadline_in_s(0.002);
    treq_init(&soon, 2, dl, 0);
    treq_init(&fine, 3, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &soon.req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &fine.req), QF_OK);
    while (!qf_deadline_passed(dl)) /* waiting for time itself, not for a thread */
        ;
    qf_serve_request *out[4];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 1);
    cr_expect_eq(id_of(out[0]), 3);
    cr_expect_eq(atomic_load(&soon.status), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&soon.answers), 1);
    qf_serve_complete(s, out, n, QF_OK);
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, QF_NO_WAIT, &rep), QF_OK);
    cr_expect_eq(rep.admitted, 3);
    cr_expect_eq(rep.expired, 2);
    cr_expect_eq(rep.batched, 1);
    qf_serve_free(s);
}

/* ------------------------------------------------------------ priorities */

Test(serve, urgent_levels_first_fifo_within_a_level)
{
    qf_serve *s = make(4, 100 * SEC, &(qf_serve_options){.priority_levels = 3});
    /* ids: level*10 + arrival order within the level */
    int plan[] = {20, 21, 10, 11, 0, 1, 2, 12};
    treq t[8];
    for (int i = 0; i < 8; i++) {
        treq_init(&t[i], plan[i], QF_FOREVER, (uint32_t)(plan[i] / 10));
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    int want[] = {0, 1, 2, 10, 11, 12, 20, 21};
    qf_serve_request *out[4];
    size_t n;
    for (int b = 0; b < 2; b++) {
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
        cr_assert_eq(n, 4);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(id_of(out[i]), want[b * 4 + i], "batch %d slot %d", b, i);
        qf_serve_complete(s, out, n, QF_OK);
    }
    qf_serve_free(s);
}

Test(serve, max_bypass_serves_a_starved_level)
{
    qf_serve *s = make(2, 100 * SEC, &(qf_serve_options){.priority_levels = 2, .max_bypass = 2});
    treq low, hi[8];
    treq_init(&low, 100, QF_FOREVER, 1);
    cr_assert_eq(qf_serve_submit(s, &low.req), QF_OK);
    qf_serve_request *out[2];
    size_t n;
    int batches_before_low = -1;
    for (int b = 0, k = 0; b < 4; b++) {
        for (int j = 0; j < 2; j++, k++) { /* keep level 0 full */
            treq_init(&hi[k], k, QF_FOREVER, 0);
            cr_assert_eq(qf_serve_submit(s, &hi[k].req), QF_OK);
        }
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
        cr_assert_eq(n, 2);
        for (size_t i = 0; i < n; i++)
            if (id_of(out[i]) == 100 && batches_before_low < 0)
                batches_before_low = b;
        qf_serve_complete(s, out, n, QF_OK);
    }
    cr_expect_eq(batches_before_low, 2, "served after 2 bypasses, got %d", batches_before_low);
    qf_serve_drain(s, QF_NO_WAIT, NULL);
    qf_serve_free(s);
}

/* ------------------------------------------------------------ admission */

Test(serve, reject_when_full)
{
    qf_serve *s = make(8, 100 * SEC, &(qf_serve_options){.max_queued = 2});
    treq t[3];
    for (int i = 0; i < 3; i++)
        treq_init(&t[i], i, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &t[0].req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &t[1].req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &t[2].req), QF_UNAVAILABLE);
    cr_expect(strstr(qf_last_message(), "full") != NULL, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&t[2].status), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&t[0].answers), 0);
    qf_serve_report rep;
    qf_serve_drain(s, QF_NO_WAIT, &rep);
    cr_expect_eq(rep.rejected, 1);
    cr_expect_eq(rep.admitted, 2);
    cr_expect_eq(rep.cancelled, 2);
    qf_serve_free(s);
}

Test(serve, drop_oldest_of_the_least_urgent_level)
{
    qf_serve *s =
        make(8, 100 * SEC,
             &(qf_serve_options){
                 .max_queued = 2, .priority_levels = 2, .admission = QF_SERVE_DROP_OLDEST});
    treq a, b, c, d, e, f;
    treq_init(&a, 1, QF_FOREVER, 1);
    treq_init(&b, 2, QF_FOREVER, 1);
    treq_init(&c, 3, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &b.req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &c.req), QF_OK);
    cr_expect_eq(atomic_load(&a.status), QF_UNAVAILABLE, "a, oldest of level 1, dropped");
    cr_expect_eq(atomic_load(&b.answers), 0);
    treq_init(&d, 4, QF_FOREVER, 1);
    cr_assert_eq(qf_serve_submit(s, &d.req), QF_OK);
    cr_expect_eq(atomic_load(&b.status), QF_UNAVAILABLE, "b dropped for d (same level)");
    cr_expect_eq(atomic_load(&c.answers), 0);
    treq_init(&e, 5, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &e.req), QF_OK);
    cr_expect_eq(atomic_load(&d.status), QF_UNAVAILABLE);
    /* Queue: c, e (both level 0): a level-1 newcomer may drop neither. */
    treq_init(&f, 6, QF_FOREVER, 1);
    cr_expect_eq(qf_serve_submit(s, &f.req), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&f.status), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&c.answers) + atomic_load(&e.answers), 0);
    qf_serve_report rep;
    qf_serve_drain(s, QF_NO_WAIT, &rep);
    cr_expect_eq(rep.admitted, 5);
    cr_expect_eq(rep.dropped, 3);
    cr_expect_eq(rep.rejected, 1);
    cr_expect_eq(rep.cancelled, 2);
    cr_expect_eq(rep.admitted, rep.batched + rep.expired + rep.dropped + rep.cancelled);
    qf_serve_free(s);
}

typedef struct blocker {
    qf_serve *s;
    treq *t;
    _Atomic int tid;
    _Atomic int rc;
    atomic_bool done;
} blocker;

static void *block_submit(void *arg)
{
    blocker *b = arg;
    atomic_store(&b->tid, qft_tid());
    atomic_store(&b->rc, (int)qf_serve_submit(b->s, &b->t->req));
    atomic_store(&b->done, true);
    return NULL;
}

Test(serve, block_waits_for_room)
{
    qf_serve *s = make(1, 0, &(qf_serve_options){.max_queued = 1, .admission = QF_SERVE_BLOCK});
    treq a, b;
    treq_init(&a, 1, QF_FOREVER, 0);
    treq_init(&b, 2, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    cr_expect_eq(qf_serve_try_submit(s, &b.req), QF_UNAVAILABLE, "try form never waits");
    treq_init(&b, 2, QF_FOREVER, 0);
    blocker bl = {.s = s, .t = &b};
    pthread_t th;
    pthread_create(&th, NULL, block_submit, &bl);
    while (!atomic_load(&bl.tid))
        ;
    qft_wait_parked(atomic_load(&bl.tid), s, sizeof(*s), &bl.done, 10 * SEC);
    cr_expect_not(atomic_load(&bl.done), "submit returned while full");
    qf_serve_request *out[1];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    pthread_join(th, NULL);
    cr_expect_eq(atomic_load(&bl.rc), QF_OK);
    cr_expect_eq(qf_serve_depth(s), 1);
    qf_serve_complete(s, out, n, QF_OK);
    qf_serve_free(s);
    cr_expect_eq(atomic_load(&b.status), QF_CANCELLED);
}

Test(serve, block_refuses_at_the_request_deadline_and_on_drain)
{
    qf_serve *s =
        make(4, 100 * SEC, &(qf_serve_options){.max_queued = 1, .admission = QF_SERVE_BLOCK});
    treq a, b, c;
    treq_init(&a, 1, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    treq_init(&b, 2, qf_deadline_in_s(0.005), 0);
    cr_expect_eq(qf_serve_submit(s, &b.req), QF_UNAVAILABLE);
    cr_expect(strstr(qf_last_message(), "deadline") != NULL, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&b.status), QF_UNAVAILABLE);
    treq_init(&c, 3, QF_FOREVER, 0);
    blocker bl = {.s = s, .t = &c};
    pthread_t th;
    pthread_create(&th, NULL, block_submit, &bl);
    while (!atomic_load(&bl.tid))
        ;
    qft_wait_parked(atomic_load(&bl.tid), s, sizeof(*s), &bl.done, 10 * SEC);
    qf_serve_begin_drain(s, QF_FOREVER);
    pthread_join(th, NULL);
    cr_expect_eq(atomic_load(&bl.rc), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&c.status), QF_UNAVAILABLE);
    qf_serve_free(s);
    cr_expect_eq(atomic_load(&a.status), QF_CANCELLED);
}

/* ------------------------------------------------- waitable requests, tasks */

typedef struct flag_waker {
    qf_waker w;
    atomic_int woken;
} flag_waker;

static void flag_wake(qf_waker *w)
{
    atomic_fetch_add(&((flag_waker *)w)->woken, 1);
}

static void flag_init(flag_waker *f)
{
    qf_waker_init(&f->w, flag_wake, NULL);
    atomic_init(&f->woken, 0);
}

typedef struct waiter {
    qf_serve_request *r;
    _Atomic int tid;
    _Atomic int rc, st;
    atomic_bool done;
} waiter;

static void *wait_req(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->tid, qft_tid());
    qf_code st = (qf_code)-7;
    atomic_store(&w->rc, (int)qf_serve_request_wait(w->r, &st));
    atomic_store(&w->st, (int)st);
    atomic_store(&w->done, true);
    return NULL;
}

Test(serve, waitable_request_thread_and_task_forms)
{
    qf_serve *s = make(2, 0, NULL);
    qf_serve_request r1, r2;
    int u1 = 1, u2 = 2;
    qf_serve_request_init(&r1, &u1, QF_FOREVER, 0, NULL, NULL);
    qf_serve_request_init(&r2, &u2, QF_FOREVER, 0, NULL, NULL);
    qf_code st = (qf_code)-7;
    cr_expect_eq(qf_serve_request_try_wait(&r1, &st), QF_INVALID_ARGUMENT, "not submitted");
    cr_assert_eq(qf_serve_submit(s, &r1), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &r2), QF_OK);
    cr_expect_eq(qf_serve_request_try_wait(&r1, &st), QF_UNAVAILABLE);
    cr_expect_eq(qf_serve_request_wait_until(&r1, qf_deadline_in_s(0.001), &st),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(st, (qf_code)-7);

    waiter w = {.r = &r1};
    pthread_t th;
    pthread_create(&th, NULL, wait_req, &w);
    while (!atomic_load(&w.tid))
        ;
    qft_wait_parked(atomic_load(&w.tid), NULL, 0, &w.done, 10 * SEC);
    flag_waker fw;
    flag_init(&fw);
    cr_expect_eq(qf_serve_request_poll(&r2, &fw.w, &st), QF_PENDING);

    qf_serve_request *out[2];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_eq(out[0]->user, &u1);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_INTERNAL), QF_OK);
    pthread_join(th, NULL);
    cr_expect_eq(atomic_load(&w.rc), QF_OK);
    cr_expect_eq(atomic_load(&w.st), QF_INTERNAL, "the executor's error is the answer");
    cr_expect_eq(atomic_load(&fw.woken), 1);
    cr_expect_eq(qf_serve_request_poll(&r2, &fw.w, &st), QF_OK);
    cr_expect_eq(st, QF_INTERNAL);
    qf_serve_stats ss;
    qf_serve_get_stats(s, &ss);
    cr_expect_eq(ss.completed_error, 2);
    qf_serve_free(s);
}

Test(serve, poll_next_batch_parks_with_a_close_time)
{
    const int64_t delay = 100 * SEC;
    qf_serve *s = make(2, delay, NULL);
    flag_waker fw;
    flag_init(&fw);
    qf_serve_request *out[2];
    size_t n;
    qf_deadline at = 0;
    cr_expect_eq(qf_serve_poll_next_batch(s, &fw.w, out, &n, &at), QF_PENDING);
    cr_expect_eq(at, QF_FOREVER, "nothing queued: no close time");
    treq a, b;
    treq_init(&a, 1, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    cr_expect_eq(atomic_load(&fw.woken), 1, "a first request can open a batch");
    cr_expect_eq(qf_serve_poll_next_batch(s, &fw.w, out, &n, &at), QF_PENDING);
    cr_expect_eq(at, a.req.qf__admit_ns + delay);
    treq_init(&b, 2, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &b.req), QF_OK);
    cr_expect_eq(atomic_load(&fw.woken), 2, "the second fills it");
    cr_expect_eq(qf_serve_poll_next_batch(s, &fw.w, out, &n, &at), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(qf_waker_state(&fw.w), QF_WAKER_DONE);
    qf_serve_complete(s, out, n, QF_OK);
    qf_serve_free(s);
}

Test(serve, poll_submit_under_block)
{
    qf_serve *s = make(1, 0, &(qf_serve_options){.max_queued = 1, .admission = QF_SERVE_BLOCK});
    treq a, b;
    treq_init(&a, 1, QF_FOREVER, 0);
    treq_init(&b, 2, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    flag_waker fw;
    flag_init(&fw);
    cr_expect_eq(qf_serve_poll_submit(s, &b.req, &fw.w), QF_PENDING);
    cr_expect_eq(atomic_load(&b.answers), 0, "pending: not submitted, not answered");
    qf_serve_request *out[1];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(atomic_load(&fw.woken), 1);
    cr_expect_eq(qf_serve_poll_submit(s, &b.req, &fw.w), QF_OK);
    qf_serve_complete(s, out, n, QF_OK);
    cr_expect_eq(qf_serve_poll_submit(s, &a.req, &fw.w), QF_PENDING, "full again");
    cr_expect(qf_serve_cancel_poll(s, &fw.w));
    qf_serve_free(s);
    cr_expect_eq(atomic_load(&b.status), QF_CANCELLED);
}

/* ------------------------------------------------------------ drain */

Test(serve, drain_report_adds_up_and_waits_for_in_flight)
{
    qf_serve *s = make(4, 100 * SEC, NULL);
    treq t[10];
    for (int i = 0; i < 10; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[4];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    /* No consumer: the 6 still queued are cancelled at the deadline, the
     * 4 in flight are reported. */
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, qf_deadline_in_s(0.01), &rep), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(rep.admitted, 10);
    cr_expect_eq(rep.batched, 4);
    cr_expect_eq(rep.cancelled, 6);
    cr_expect_eq(rep.in_flight, 4);
    cr_expect_eq(rep.queued, 0);
    for (int i = 4; i < 10; i++)
        cr_expect_eq(atomic_load(&t[i].status), QF_CANCELLED);
    qf_serve_complete(s, out, n, QF_OK);
    cr_expect_eq(qf_serve_drain(s, QF_NO_WAIT, &rep), QF_OK);
    cr_expect_eq(rep.in_flight, 0);
    cr_expect_eq(qf_serve_next_batch(s, out, &n), QF_OUT_OF_RANGE);
    for (int i = 0; i < 10; i++)
        cr_expect_eq(atomic_load(&t[i].answers), 1);
    qf_serve_free(s);
}

static qf_code model_ok(void *arg, qf_serve_request *const *reqs, size_t n)
{
    atomic_int *batches = arg;
    (void)reqs;
    cr_expect_leq(n, 4);
    atomic_fetch_add(batches, 1);
    return QF_OK;
}

typedef struct runner_arg {
    qf_serve *s;
    atomic_int *batches;
    _Atomic int rc;
} runner_arg;

static void *run_thread(void *arg)
{
    runner_arg *r = arg;
    atomic_store(&r->rc, (int)qf_serve_run(r->s, model_ok, r->batches));
    return NULL;
}

Test(serve, drain_hands_out_queued_batches_to_a_thread_executor)
{
    qf_serve *s = make(4, 100 * SEC, NULL);
    treq t[10];
    for (int i = 0; i < 10; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    atomic_int batches = 0;
    runner_arg ra = {.s = s, .batches = &batches};
    pthread_t th;
    pthread_create(&th, NULL, run_thread, &ra);
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, qf_deadline_in_s(60), &rep), QF_OK);
    pthread_join(th, NULL);
    cr_expect_eq(atomic_load(&ra.rc), QF_OK);
    cr_expect_eq(rep.batched, 10, "drain hands out what is queued");
    cr_expect_eq(rep.cancelled, 0);
    cr_expect_eq(atomic_load(&batches), 3);
    for (int i = 0; i < 10; i++)
        cr_expect_eq(atomic_load(&t[i].status), QF_OK);
    qf_serve_free(s);
}

Test(serve, coordinator_stop_drains_every_batcher_on_a_shared_pool)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2}, &rt), QF_OK);
    qf_coord *c;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    enum { NB = 3, NR = 20 };
    qf_serve *s[NB];
    atomic_int batches[NB];
    treq t[NB][NR];
    for (int b = 0; b < NB; b++) {
        char name[16];
        snprintf(name, sizeof(name), "m%d", b);
        s[b] = make(4, 100 * SEC, &(qf_serve_options){.name = name, .coord = c});
        atomic_init(&batches[b], 0);
        cr_assert_eq(qf_serve_spawn(s[b], rt, model_ok, &batches[b], NULL, NULL), QF_OK);
        for (int i = 0; i < NR; i++) {
            treq_init(&t[b][i], i, QF_FOREVER, 0);
            cr_assert_eq(qf_serve_submit(s[b], &t[b][i].req), QF_OK);
        }
    }
    qf_coord_request_stop_from_signal(c); /* what a SIGTERM handler does */
    cr_expect_eq(qf_coord_join(c, NULL, 0, 60, false, NULL), QF_OK, "%s", qf_last_message());
    for (int b = 0; b < NB; b++) {
        qf_serve_report rep;
        cr_expect_eq(qf_serve_drain(s[b], QF_NO_WAIT, &rep), QF_OK);
        cr_expect_eq(rep.batched, NR);
        cr_expect_eq(atomic_load(&batches[b]), NR / 4);
        for (int i = 0; i < NR; i++)
            cr_expect_eq(atomic_load(&t[b][i].status), QF_OK);
        qf_serve_free(s[b]);
    }
    qf_runtime_free(rt);
    qf_coord_free(c);
}

Test(serve, runtime_shutdown_cancels_what_is_queued)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    qf_serve *s = make(4, 100 * SEC, NULL);
    atomic_int batches = 0;
    qf_task *task;
    cr_assert_eq(qf_serve_spawn(s, rt, model_ok, &batches, NULL, &task), QF_OK);
    treq t[3];
    for (int i = 0; i < 3; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(30)), QF_OK);
    cr_expect_eq(qf_task_join(task, QF_NO_WAIT, NULL), QF_CANCELLED);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(atomic_load(&t[i].answers), 1);
        cr_expect_eq(atomic_load(&t[i].status), QF_CANCELLED);
    }
    qf_task_unref(task);
    qf_runtime_free(rt);
    qf_serve_free(s);
}

/* ------------------------------------------------------------ metrics */

Test(serve, prometheus_text_is_well_formed)
{
    qf_serve *s = make(4, 0, &(qf_serve_options){.name = "m\"x\\y"});
    treq t[5];
    for (int i = 0; i < 5; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[4];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    qf_serve_complete(s, out, n, QF_OK);
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(qf_serve_metrics_text(&text, &len), QF_OK);
    cr_expect_eq(strlen(text), len);
    cr_expect(strstr(text,
                     "qflow_serve_requests_total{batcher=\"m\\\"x\\\\y\",outcome=\"admitted\"}"
                     " 5\n") != NULL,
              "%s", text);
    cr_expect(strstr(text, ",outcome=\"batched\"} 4\n") != NULL);
    cr_expect(strstr(text, "qflow_serve_queue_depth{batcher=\"m\\\"x\\\\y\"} 1\n") != NULL);
    cr_expect(strstr(text, "qflow_serve_batch_size_count{batcher=\"m\\\"x\\\\y\"} 1\n") != NULL);
    cr_expect(strstr(text, "qflow_serve_queue_delay_seconds_count{batcher=\"m\\\"x\\\\y\","
                           "priority=\"0\"} 4\n") != NULL);
    cr_expect(
        strstr(text, "qflow_queue_size{queue=\"m\\\"x\\\\y/level0\",kind=\"FIFOQueue\"} 1\n") !=
        NULL);
    cr_expect(strstr(text, "# TYPE qflow_serve_queue_delay_seconds histogram\n") != NULL);
    /* Every line is a comment or `name{labels} value`; buckets of a series
     * never decrease and end at +Inf. */
    regex_t re;
    cr_assert_eq(
        regcomp(&re,
                "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\""
                "(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\")*\\})? "
                "[-+]?([0-9.eE+-]+|Inf|NaN)$",
                REG_EXTENDED | REG_NOSUB),
        0);
    char *save = NULL;
    double prev = -1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            cr_expect(!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7), "%s", line);
            continue;
        }
        cr_expect_eq(regexec(&re, line, 0, NULL, 0), 0, "malformed: %s", line);
        if (strstr(line, "_bucket{") && strstr(line, "m\\\"x")) {
            double v = strtod(strrchr(line, ' ') + 1, NULL);
            if (strstr(line, "le=\"0.00001\"") || strstr(line, "le=\"1\""))
                prev = -1; /* a new series starts */
            cr_expect_geq(v, prev, "buckets decrease: %s", line);
            prev = v;
        }
    }
    regfree(&re);
    free(text);
    qf_serve_free(s);
    cr_expect_eq(qf_serve_metrics_write(NULL), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_metrics_text(NULL, NULL), QF_INVALID_ARGUMENT);
}

Test(serve, stats_histograms_count_every_hand_off)
{
    qf_serve *s = make(3, 0, NULL);
    treq t[7];
    for (int i = 0; i < 7; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_request *out[3];
    size_t n, total = 0;
    while (qf_serve_try_next_batch(s, out, &n) == QF_OK) {
        total += n;
        qf_serve_complete(s, out, n, QF_OK);
    }
    cr_expect_eq(total, 7);
    qf_serve_stats st;
    cr_assert_eq(qf_serve_get_stats(s, &st), QF_OK);
    uint64_t dsum = 0, ssum = 0;
    for (int i = 0; i < QF_SERVE_DELAY_BUCKETS; i++)
        dsum += st.delay_buckets[i];
    for (int i = 0; i < QF_SERVE_SIZE_BUCKETS; i++)
        ssum += st.size_buckets[i];
    cr_expect_eq(dsum, 7);
    cr_expect_eq(ssum, 3);
    cr_expect_eq(st.size_buckets[2], 2, "two batches of 3 in the (2,4] bucket");
    cr_expect_eq(st.size_buckets[0], 1, "one of 1");
    cr_expect_eq(st.completed_ok, 7);
    cr_expect_eq(qf_serve_delay_bucket_bound_ns(QF_SERVE_DELAY_BUCKETS - 1), INT64_MAX);
    cr_expect_eq(qf_serve_size_bucket_bound(5), 32);
    qf_serve_free(s);
}

typedef struct in_task_arg {
    qf_serve *s;
    _Atomic int next_rc, wait_rc, run_rc;
} in_task_arg;

static qf_code blocking_in_task(qf_task *t, void *arg)
{
    (void)t;
    in_task_arg *a = arg;
    qf_serve_request *out[2];
    size_t n;
    atomic_store(&a->next_rc, (int)qf_serve_next_batch(a->s, out, &n));
    qf_serve_request r;
    qf_serve_request_init(&r, NULL, QF_FOREVER, 0, NULL, NULL);
    qf_serve_submit(a->s, &r); /* admitted: depth 1 */
    qf_code st;
    atomic_store(&a->wait_rc, (int)qf_serve_request_wait(&r, &st));
    atomic_store(&a->run_rc, (int)qf_serve_run(a->s, model_ok, NULL));
    qf_serve_drain(a->s, QF_FOREVER, NULL); /* in a task: no wait, cancels */
    return QF_OK;
}

Test(serve, blocking_forms_refuse_inside_a_task)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    in_task_arg a = {.s = make(2, 100 * SEC, NULL)};
    qf_task *t;
    cr_assert_eq(qf_task_spawn(rt, blocking_in_task, &a, NULL, &t), QF_OK);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK);
    cr_expect_eq(atomic_load(&a.next_rc), QF_FAILED_PRECONDITION);
    cr_expect_eq(atomic_load(&a.wait_rc), QF_FAILED_PRECONDITION);
    cr_expect_eq(atomic_load(&a.run_rc), QF_FAILED_PRECONDITION);
    cr_expect_eq(qf_serve_depth(a.s), 0, "the drain in the task cancelled the request");
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_serve_free(a.s);
}

/* ------------------------------------------- complete: handed out only */

Test(serve, complete_twice_answers_once_and_the_batch_mate_is_still_answered)
{
    qf_serve *s = make(2, 0, NULL);
    treq a, b;
    treq_init(&a, 1, QF_FOREVER, 0);
    treq_init(&b, 2, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &b.req), QF_OK);
    qf_serve_request *out[2];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_expect_eq(qf_serve_complete(s, &out[0], 1, QF_OK), QF_OK);
    /* b is still in flight, so the count alone would let a through. */
    cr_expect_eq(qf_serve_complete(s, &out[0], 1, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "already answered"), "%s", qf_last_message());
    cr_expect_eq(atomic_load(&a.answers), 1);
    cr_expect_eq(atomic_load(&b.answers), 0);
    cr_expect_eq(qf_serve_complete(s, &out[1], 1, QF_ABORTED), QF_OK, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&b.answers), 1);
    cr_expect_eq(atomic_load(&b.status), QF_ABORTED);
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, QF_NO_WAIT, &rep), QF_OK, "nothing left in flight");
    cr_expect_eq(rep.in_flight, 0);
    qf_serve_free(s);
}

Test(serve, complete_of_a_queued_request_is_refused_and_it_still_reaches_the_model)
{
    qf_serve *s = make(2, 100 * SEC, NULL);
    treq a, b, c;
    treq_init(&a, 1, QF_FOREVER, 0);
    treq_init(&b, 2, QF_FOREVER, 0);
    treq_init(&c, 3, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &b.req), QF_OK);
    qf_serve_request *out[2];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(qf_serve_submit(s, &c.req), QF_OK); /* queued: not due for 100 s */
    /* The in-flight count (2) would admit one more; c's state must not. */
    qf_serve_request *q = &c.req;
    cr_expect_eq(qf_serve_complete(s, &q, 1, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "still queued"), "%s", qf_last_message());
    /* All or nothing: a batch naming it answers none of the others. */
    qf_serve_request *mix[2] = {out[0], &c.req};
    cr_expect_eq(qf_serve_complete(s, mix, 2, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "request 1 of the batch"), "%s", qf_last_message());
    /* Listed twice in one call: the second is refused, the first given back. */
    qf_serve_request *twice[2] = {out[0], out[0]};
    cr_expect_eq(qf_serve_complete(s, twice, 2, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "listed twice"), "%s", qf_last_message());
    cr_expect_eq(atomic_load(&a.answers) + atomic_load(&b.answers) + atomic_load(&c.answers), 0);
    cr_expect_eq(qf_serve_depth(s), 1);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK, "%s", qf_last_message());
    /* c goes to the model as usual: the drain hands it out. */
    qf_serve_begin_drain(s, QF_FOREVER);
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_assert_eq(n, 1);
    cr_expect_eq(out[0], &c.req);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    for (treq *t = &a; t; t = t == &a ? &b : t == &b ? &c : NULL) {
        cr_expect_eq(atomic_load(&t->answers), 1, "request %d", t->id);
        cr_expect_eq(atomic_load(&t->status), QF_OK, "request %d", t->id);
    }
    qf_serve_free(s);
}

/* A callback that submits its request again once: the old batch's pointer
 * then names a queued request, which a second complete must not answer. */
static void resubmit_once(qf_serve_request *r, qf_code st, void *arg)
{
    on_done(r, st, NULL);
    if (atomic_load(&((treq *)r)->answers) == 1)
        cr_expect_eq(qf_serve_submit(arg, r), QF_OK);
}

Test(serve, complete_twice_after_a_resubmit_does_not_answer_the_new_submission)
{
    qf_serve *s = make(1, 100 * SEC, NULL);
    treq a;
    treq_init(&a, 1, QF_FOREVER, 0);
    a.req.done = resubmit_once;
    a.req.done_arg = s;
    cr_assert_eq(qf_serve_submit(s, &a.req), QF_OK);
    qf_serve_request *out[1], *out2[1];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(qf_serve_complete(s, out, 1, QF_OK), QF_OK);
    cr_expect_eq(atomic_load(&a.answers), 1);
    cr_expect_eq(qf_serve_depth(s), 1, "resubmitted");
    cr_expect_eq(qf_serve_complete(s, out, 1, QF_OK), QF_FAILED_PRECONDITION);
    cr_expect_eq(atomic_load(&a.answers), 1, "the new submission is not answered");
    cr_assert_eq(qf_serve_try_next_batch(s, out2, &n), QF_OK, "and still reaches the model");
    cr_expect_eq(qf_serve_complete(s, out2, 1, QF_UNKNOWN), QF_OK);
    cr_expect_eq(atomic_load(&a.answers), 2);
    cr_expect_eq(atomic_load(&a.status), QF_UNKNOWN);
    qf_serve_free(s);
}

/* Two threads complete the same batch at once, round after round. */
typedef struct racer {
    qf_serve *s;
    qf_serve_request **batch;
    size_t n;
    atomic_int *go;     /* round number to run */
    atomic_int *ended;  /* racers done with their round */
    _Atomic int result; /* of the latest round */
} racer;

static void *race_complete(void *arg)
{
    racer *r = arg;
    for (int round = 1;; round++) {
        int g;
        for (unsigned i = 0; (g = atomic_load(r->go)) >= 0 && g < round; i++)
            if (i > 64)
                sched_yield();
        if (g < 0)
            return NULL;
        atomic_store(&r->result, (int)qf_serve_complete(r->s, r->batch, r->n, QF_OK));
        atomic_fetch_add(r->ended, 1);
    }
}

Test(serve, racing_completes_of_one_batch_exactly_one_wins)
{
    qf_serve *s = make(2, 0, NULL);
    atomic_int go = 0, ended = 0;
    qf_serve_request *batch[2];
    racer rs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        rs[i] = (racer){.s = s, .batch = batch, .go = &go, .ended = &ended};
        pthread_create(&th[i], NULL, race_complete, &rs[i]);
    }
    const int64_t stop_at = qf_now_ns() + 5 * SEC;
    int rounds = 0;
    for (int round = 1; round <= 3000 && qf_now_ns() < stop_at; round++) {
        size_t want = 1 + (size_t)(round & 1); /* one request, then two */
        treq t[2];
        for (size_t i = 0; i < want; i++) {
            treq_init(&t[i], (int)i, QF_FOREVER, 0);
            cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
        }
        size_t n;
        cr_assert_eq(qf_serve_try_next_batch(s, batch, &n), QF_OK);
        cr_assert_eq(n, want);
        rs[0].n = rs[1].n = n;
        atomic_store(&go, round);
        /* Watchdog: a lost or hung complete fails here, not at the suite
         * timeout. */
        for (unsigned i = 0; atomic_load(&ended) < 2 * round; i++) {
            if (i > 64)
                sched_yield();
            cr_assert_lt(qf_now_ns(), stop_at + 10 * SEC, "round %d: a complete never returned",
                         round);
        }
        int ok = 0, refused = 0;
        for (int i = 0; i < 2; i++) {
            int rc = atomic_load(&rs[i].result);
            ok += rc == QF_OK;
            refused += rc == QF_FAILED_PRECONDITION;
        }
        cr_assert_eq(ok, 1, "round %d: %d completes won", round, ok);
        cr_assert_eq(refused, 1, "round %d", round);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(atomic_load(&t[i].answers), 1, "round %d: request %zu", round, i);
        rounds = round;
    }
    atomic_store(&go, -1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    cr_log_info("%d rounds", rounds);
    cr_expect_gt(rounds, 10);
    qf_serve_stats st;
    qf_serve_get_stats(s, &st);
    cr_expect_eq(st.counts.in_flight, 0);
    cr_expect_eq(st.completed_ok, st.counts.batched);
    qf_serve_free(s);
}

/* ------------------------------------------ a model returning a non-code */

static qf_code model_returns(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)reqs;
    (void)n;
    return (qf_code) * (const int *)arg;
}

typedef struct msg_req {
    treq t; /* first */
    char msg[256];
} msg_req;

/* On the executor's thread: what it recorded before answering. */
static void on_done_msg(qf_serve_request *r, qf_code st, void *arg)
{
    msg_req *m = (msg_req *)r;
    snprintf(m->msg, sizeof(m->msg), "%s", qf_last_message());
    on_done(r, st, arg);
}

/* wait_req with a watchdog: an answer that never comes fails the test. */
static void *wait_req_30s(void *arg)
{
    waiter *w = arg;
    qf_code st = (qf_code)-7;
    atomic_store(&w->rc, (int)qf_serve_request_wait_until(w->r, qf_deadline_in_s(30), &st));
    atomic_store(&w->st, (int)st);
    return NULL;
}

typedef struct bad_runner {
    qf_serve *s;
    const int *value;
    _Atomic int rc;
    char msg[256];
} bad_runner;

static void *run_bad_model(void *arg)
{
    bad_runner *b = arg;
    atomic_store(&b->rc, (int)qf_serve_run(b->s, model_returns, (void *)b->value));
    snprintf(b->msg, sizeof(b->msg), "%s", qf_last_message());
    return NULL;
}

Test(serve, a_model_returning_a_non_code_answers_its_batch_invalid_argument)
{
    static const int values[] = {(int)QF_PENDING, 99, (int)QF_YIELD, -1000};
    for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
        char val[16];
        snprintf(val, sizeof(val), "%d", values[v]);
        qf_serve *s = make(2, 0, NULL);
        /* Two waitable requests with a thread each waiting, two callbacks. */
        qf_serve_request w[2];
        waiter wt[2];
        pthread_t wth[2];
        for (int i = 0; i < 2; i++) {
            qf_serve_request_init(&w[i], NULL, QF_FOREVER, 0, NULL, NULL);
            cr_assert_eq(qf_serve_submit(s, &w[i]), QF_OK);
            wt[i] = (waiter){.r = &w[i]};
            pthread_create(&wth[i], NULL, wait_req_30s, &wt[i]);
        }
        msg_req m[2];
        for (int i = 0; i < 2; i++) {
            treq_init(&m[i].t, i, QF_FOREVER, 0);
            m[i].t.req.done = on_done_msg;
            m[i].msg[0] = 0;
            cr_assert_eq(qf_serve_submit(s, &m[i].t.req), QF_OK);
        }
        bad_runner br = {.s = s, .value = &values[v]};
        pthread_t eth;
        pthread_create(&eth, NULL, run_bad_model, &br);
        for (int i = 0; i < 2; i++) {
            pthread_join(wth[i], NULL); /* they wake */
            cr_expect_eq(atomic_load(&wt[i].rc), QF_OK);
            cr_expect_eq(atomic_load(&wt[i].st), QF_INVALID_ARGUMENT, "value %s", val);
        }
        qf_serve_report rep;
        cr_expect_eq(qf_serve_drain(s, qf_deadline_in_s(30), &rep), QF_OK, "value %s: %s", val,
                     qf_last_message());
        pthread_join(eth, NULL);
        cr_expect_eq(rep.in_flight, 0);
        cr_expect_eq(rep.batched, 4);
        for (int i = 0; i < 2; i++) {
            cr_expect_eq(atomic_load(&m[i].t.answers), 1);
            cr_expect_eq(atomic_load(&m[i].t.status), QF_INVALID_ARGUMENT);
            cr_expect(strstr(m[i].msg, val) && strstr(m[i].msg, "not a status code"),
                      "value %s: the callback saw \"%s\"", val, m[i].msg);
        }
        /* The executor serves on, and says at the end what went wrong. */
        cr_expect_eq(atomic_load(&br.rc), QF_INVALID_ARGUMENT, "value %s", val);
        cr_expect(strstr(br.msg, val) && strstr(br.msg, "2 batches"), "value %s: \"%s\"", val,
                  br.msg);
        if (values[v] == (int)QF_PENDING)
            cr_expect(strstr(br.msg, "QF_PENDING"), "%s", br.msg);
        qf_serve_stats st;
        qf_serve_get_stats(s, &st);
        cr_expect_eq(st.completed_error, 4);
        qf_serve_free(s);
    }
}

Test(serve, a_spawned_executor_answers_a_non_code_batch_and_finishes_with_the_error)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    qf_serve *s = make(4, 0, NULL);
    static const int value = 99;
    qf_task *task;
    cr_assert_eq(qf_serve_spawn(s, rt, model_returns, (void *)&value, NULL, &task), QF_OK);
    treq t[3];
    qf_serve_request w;
    qf_serve_request_init(&w, NULL, QF_FOREVER, 0, NULL, NULL);
    cr_assert_eq(qf_serve_submit(s, &w), QF_OK);
    for (int i = 0; i < 3; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_code st = QF_OK;
    cr_expect_eq(qf_serve_request_wait_until(&w, qf_deadline_in_s(30), &st), QF_OK);
    cr_expect_eq(st, QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_drain(s, qf_deadline_in_s(30), NULL), QF_OK, "%s", qf_last_message());
    qf_status *ts = NULL;
    cr_expect_eq(qf_task_join(task, qf_deadline_in_s(30), &ts), QF_INVALID_ARGUMENT);
    cr_expect(ts && strstr(qf_status_message(ts), "returned 99"), "%s",
              ts ? qf_status_message(ts) : "(no status)");
    qf_status_free(ts);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(atomic_load(&t[i].answers), 1);
        cr_expect_eq(atomic_load(&t[i].status), QF_INVALID_ARGUMENT);
    }
    qf_task_unref(task);
    qf_runtime_free(rt);
    qf_serve_free(s);
}

/* -------------------------------- qf_serve_request_cancel_poll never waits */

typedef struct cancel_call {
    qf_serve_request *r;
    qf_waker *w;
    _Atomic int result; /* -1 until it returns */
} cancel_call;

static void *do_cancel_poll(void *arg)
{
    cancel_call *c = arg;
    atomic_store(&c->result, qf_serve_request_cancel_poll(c->r, c->w) ? 1 : 0);
    return NULL;
}

/* cancel_poll on another thread, failing (not hanging) if it does not
 * return within 10 s. */
static bool cancel_poll_watched(qf_serve_request *r, qf_waker *w)
{
    cancel_call c = {.r = r, .w = w, .result = -1};
    pthread_t th;
    pthread_create(&th, NULL, do_cancel_poll, &c);
    const int64_t give_up = qf_now_ns() + 10 * SEC;
    while (atomic_load(&c.result) < 0) {
        cr_assert_lt(qf_now_ns(), give_up, "qf_serve_request_cancel_poll did not return");
        sched_yield();
    }
    pthread_join(th, NULL);
    return atomic_load(&c.result) == 1;
}

Test(serve, request_cancel_poll_returns_at_once_for_a_waker_it_does_not_hold)
{
    qf_serve *s = make(2, 0, NULL);
    qf_serve_request r1, r2;
    qf_serve_request_init(&r1, NULL, QF_FOREVER, 0, NULL, NULL);
    qf_serve_request_init(&r2, NULL, QF_FOREVER, 0, NULL, NULL);
    flag_waker fw;
    flag_init(&fw);
    /* Never registered. */
    cr_expect_not(cancel_poll_watched(&r1, &fw.w));
    cr_assert_eq(qf_serve_submit(s, &r1), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &r2), QF_OK);
    qf_code st;
    /* Registered on r1, not woken: withdrawn; then again: idle. */
    cr_assert_eq(qf_serve_request_poll(&r1, &fw.w, &st), QF_PENDING);
    cr_expect(cancel_poll_watched(&r1, &fw.w));
    cr_expect_eq(qf_waker_state(&fw.w), QF_WAKER_IDLE);
    cr_expect_not(cancel_poll_watched(&r1, &fw.w));
    /* Registered on r2: cancelling on r1 leaves that registration alone
     * (and r1's list intact). */
    cr_assert_eq(qf_serve_request_poll(&r2, &fw.w, &st), QF_PENDING);
    cr_expect_not(cancel_poll_watched(&r1, &fw.w));
    cr_expect_eq(qf_waker_state(&fw.w), QF_WAKER_REGISTERED);
    cr_expect_eq(qf_waitlist_count(&r1.qf__waiters), 0);
    cr_expect_eq(qf_waitlist_count(&r2.qf__waiters), 1);
    qf_serve_request *out[2];
    size_t n;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_assert_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    cr_expect_eq(atomic_load(&fw.woken), 1, "r2's answer still wakes it");
    /* Woken: false, and the waker is free for reuse. */
    cr_expect_not(cancel_poll_watched(&r2, &fw.w));
    /* The poll finds the answer at once: nothing registered to withdraw. */
    flag_waker fresh;
    flag_init(&fresh);
    cr_expect_eq(qf_serve_request_poll(&r1, &fresh.w, &st), QF_OK);
    cr_expect_not(cancel_poll_watched(&r1, &fresh.w));
    qf_serve_free(s);
}

/* A task that waits for a request it owns on the heap: poll, and once
 * answered, cancel_poll (what a task giving up would do), free it, end. */
typedef struct poll_owner {
    qf_serve_request *r;
    atomic_int pending; /* polls that returned QF_PENDING */
    _Atomic int status;
    _Atomic int cancelled;
} poll_owner;

static qf_code poll_and_free(qf_task *t, void *arg)
{
    poll_owner *p = arg;
    qf_code st;
    qf_code rc = qf_serve_request_poll(p->r, qf_task_waker(t), &st);
    if (rc == QF_PENDING) {
        atomic_fetch_add(&p->pending, 1);
        return QF_PENDING;
    }
    atomic_store(&p->status, rc == QF_OK ? (int)st : -(int)rc);
    atomic_store(&p->cancelled, qf_serve_request_cancel_poll(p->r, qf_task_waker(t)));
    free(p->r); /* answered: the request is ours again */
    p->r = NULL;
    return QF_OK;
}

Test(serve, a_task_polling_a_request_cancels_and_frees_it_without_hanging)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    qf_serve *s = make(1, 0, NULL);
    for (int woken = 1; woken >= 0; woken--) {
        poll_owner p = {.r = malloc(sizeof(qf_serve_request)), .status = -1, .cancelled = -1};
        qf_serve_request_init(p.r, NULL, QF_FOREVER, 0, NULL, NULL);
        cr_assert_eq(qf_serve_submit(s, p.r), QF_OK);
        qf_serve_request *out[1];
        size_t n;
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
        if (!woken) /* answered before the task's first poll */
            cr_assert_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
        qf_task *task;
        cr_assert_eq(qf_task_spawn(rt, poll_and_free, &p, NULL, &task), QF_OK);
        if (woken) {
            /* The task parks on the request; its answer wakes it. */
            const int64_t give_up = qf_now_ns() + 10 * SEC;
            while (atomic_load(&p.pending) == 0 ||
                   qf_waker_state(qf_task_waker(task)) != QF_WAKER_REGISTERED) {
                cr_assert_lt(qf_now_ns(), give_up, "the task never parked");
                sched_yield();
            }
            cr_assert_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
        }
        /* A worker lost in cancel_poll fails here. */
        cr_expect_eq(qf_task_join(task, qf_deadline_in_s(10), NULL), QF_OK,
                     "woken %d: the task did not finish", woken);
        cr_expect_eq(atomic_load(&p.status), QF_OK);
        cr_expect_eq(atomic_load(&p.cancelled), 0);
        qf_task_unref(task);
    }
    qf_runtime_free(rt);
    qf_serve_free(s);
}

/* ------------------------------------------- delays past the clock's range */

Test(serve, a_huge_max_queue_delay_waits_until_full_or_drained)
{
    /* Past the clock's range from any admission time, and one that is not
     * (146 years: a real close time, which must not wrap either). */
    const int64_t delays[] = {INT64_MAX, INT64_MAX - 1000, INT64_MAX / 2 + 1};
    for (size_t d = 0; d < sizeof(delays) / sizeof(delays[0]); d++) {
        qf_serve *s = make(3, delays[d], &(qf_serve_options){.drain_grace_ns = INT64_MAX});
        treq t[5];
        for (int i = 0; i < 5; i++)
            treq_init(&t[i], i, QF_FOREVER, 0);
        qf_serve_request *out[3];
        size_t n = 0;
        flag_waker fw;
        flag_init(&fw);
        qf_deadline at = 0;
        cr_assert_eq(qf_serve_submit(s, &t[0].req), QF_OK);
        cr_expect_eq(qf_serve_try_next_batch(s, out, &n), QF_UNAVAILABLE, "delay %zu: closed", d);
        cr_expect_eq(qf_serve_poll_next_batch(s, &fw.w, out, &n, &at), QF_PENDING);
        if (d < 2)
            cr_expect_eq(at, QF_FOREVER, "delay %zu: no close time", d);
        else
            cr_expect_eq(at, t[0].req.qf__admit_ns + delays[d]);
        cr_expect(qf_serve_cancel_poll(s, &fw.w));
        cr_expect_eq(qf_serve_next_batch_until(s, qf_deadline_in_s(0.02), out, &n),
                     QF_DEADLINE_EXCEEDED, "delay %zu", d);
        for (int i = 1; i < 4; i++)
            cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK, "delay %zu: full", d);
        cr_expect_eq(n, 3);
        cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
        cr_expect_eq(qf_serve_try_next_batch(s, out, &n), QF_UNAVAILABLE, "the 4th waits");
        cr_assert_eq(qf_serve_submit(s, &t[4].req), QF_OK);
        cr_expect_eq(qf_serve_try_next_batch(s, out, &n), QF_UNAVAILABLE);
        qf_serve_begin_drain(s, QF_FOREVER);
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK, "drained at once");
        cr_expect_eq(n, 2);
        cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
        qf_serve_stats st;
        qf_serve_get_stats(s, &st);
        cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_FULL], 1);
        cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_DRAIN], 1);
        cr_expect_eq(st.batches_by_reason[QF_SERVE_CLOSE_DELAY], 0);
        cr_expect_eq(qf_serve_drain(s, QF_NO_WAIT, NULL), QF_OK);
        qf_serve_free(s);
        for (int i = 0; i < 5; i++)
            cr_expect_eq(atomic_load(&t[i].status), QF_OK);
    }
}

/* The same on a spawned executor with a huge stop grace: a Coordinator
 * stop drains it (no deadline computed past the clock's range). */
Test(serve, a_huge_delay_and_grace_on_a_spawned_executor_drain_on_stop)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    qf_coord *c;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    qf_serve *s = make(4, INT64_MAX, &(qf_serve_options){.coord = c, .drain_grace_ns = INT64_MAX});
    atomic_int batches = 0;
    cr_assert_eq(qf_serve_spawn(s, rt, model_ok, &batches, NULL, NULL), QF_OK);
    treq t[6];
    for (int i = 0; i < 6; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    /* The full batch goes; the other two wait (no close time) until the
     * stop. */
    const int64_t give_up = qf_now_ns() + 10 * SEC;
    while (atomic_load(&t[3].answers) == 0)
        cr_assert_lt(qf_now_ns(), give_up, "the full batch never ran");
    cr_expect_eq(atomic_load(&t[4].answers) + atomic_load(&t[5].answers), 0);
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 60, false, NULL), QF_OK, "%s", qf_last_message());
    for (int i = 0; i < 6; i++)
        cr_expect_eq(atomic_load(&t[i].status), QF_OK);
    cr_expect_eq(atomic_load(&batches), 2);
    qf_serve_free(s);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* A model that (against its contract) completes part of its batch itself:
 * the executor's complete of the whole batch is refused, and it answers
 * the rest one by one rather than leave them. */
static qf_code model_completes_first(void *arg, qf_serve_request *const *reqs, size_t n)
{
    cr_expect_eq(n, 3);
    cr_expect_eq(qf_serve_complete(arg, reqs, 1, QF_ABORTED), QF_OK);
    return QF_OK;
}

Test(serve, an_executor_answers_what_a_refused_complete_left)
{
    qf_serve *s = make(4, 100 * SEC, NULL);
    treq t[3];
    for (int i = 0; i < 3; i++) {
        treq_init(&t[i], i, QF_FOREVER, 0);
        cr_assert_eq(qf_serve_submit(s, &t[i].req), QF_OK);
    }
    qf_serve_begin_drain(s, QF_FOREVER);
    cr_expect_eq(qf_serve_run(s, model_completes_first, s), QF_OK, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&t[0].status), QF_ABORTED);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(atomic_load(&t[i].answers), 1, "request %d", i);
    cr_expect_eq(atomic_load(&t[1].status), QF_OK);
    cr_expect_eq(atomic_load(&t[2].status), QF_OK);
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, QF_NO_WAIT, &rep), QF_OK);
    cr_expect_eq(rep.in_flight, 0);
    qf_serve_free(s);
}

/* ------------------------------------------- the executor's slice (issue 30) */

typedef struct slice_seen {
    qf_serve *s;
    int64_t set; /* what qf_serve_set_exec_slice() gets; -1: no call */
    uint64_t before, during, after;
    uint64_t slack_before, slack_during, slack_after;
    qf_code rc;
} slice_seen;

static qf_code model_looks(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)reqs;
    (void)n;
    slice_seen *v = arg;
    v->during = qft_slice_ns();
    v->slack_during = qft_timer_slack_ns();
    return QF_OK;
}

/* On a thread of its own (the runner's thread keeps its settings): run the
 * executor over one queued request and a drain, looking before, inside the
 * model and after. */
static void *slice_executor(void *arg)
{
    slice_seen *v = arg;
    if (v->set >= 0 && qf_serve_set_exec_slice(v->s, v->set) != QF_OK) {
        v->rc = QF_INTERNAL;
        return NULL;
    }
    v->before = qft_slice_ns();
    v->slack_before = qft_timer_slack_ns();
    v->rc = qf_serve_run(v->s, model_looks, v);
    v->after = qft_slice_ns();
    v->slack_after = qft_timer_slack_ns();
    return NULL;
}

static slice_seen run_once_with_slice(int64_t set)
{
    slice_seen v = {.s = make(4, 100 * SEC, NULL), .set = set};
    treq t;
    treq_init(&t, 0, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(v.s, &t.req), QF_OK);
    qf_serve_begin_drain(v.s, QF_FOREVER);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, slice_executor, &v), 0);
    pthread_join(th, NULL);
    cr_expect_eq(v.rc, QF_OK, "%s", qf_code_name(v.rc));
    cr_expect_eq(atomic_load(&t.answers), 1);
    qf_serve_free(v.s);
    return v;
}

Test(serve, the_executor_thread_has_the_exec_slice_while_it_runs)
{
    if (!qft_kernel_has_slices())
        cr_skip_test("this kernel has no per-thread slices (Linux 6.12 or later)");
    slice_seen v = run_once_with_slice(-1); /* the default */
    cr_expect_eq(v.during, (uint64_t)QF_SERVE_DEFAULT_EXEC_SLICE_NS);
    cr_expect_eq(v.slack_during, (uint64_t)QF_THREAD_LATENCY_TIMER_SLACK_NS);
    cr_expect_eq(v.after, v.before, "the thread's slice was not put back");
    cr_expect_eq(v.slack_after, v.slack_before, "the thread's timer slack was not put back");
    v = run_once_with_slice(2000000);
    cr_expect_eq(v.during, 2000000);
    cr_expect_eq(v.after, v.before);
}

Test(serve, exec_slice_zero_leaves_the_executor_thread_alone)
{
    slice_seen v = run_once_with_slice(0);
    cr_expect_eq(v.during, v.before);
    cr_expect_eq(v.slack_during, v.slack_before);
    cr_expect_eq(v.after, v.before);
}

Test(serve, exec_slice_outside_the_range_is_refused_and_kept)
{
    qf_serve *s = make(4, SEC, NULL);
    cr_expect_eq(qf_serve_set_exec_slice(s, QF_THREAD_SLICE_MIN_NS - 1), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "'t'") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_serve_set_exec_slice(s, -5), QF_INVALID_ARGUMENT);
    cr_expect_eq(atomic_load(&s->exec_slice_ns), QF_SERVE_DEFAULT_EXEC_SLICE_NS);
    qf_serve_free(s);
}

static qf_code slice_nothing(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return QF_OK;
}

/* A spawned executor may run on any worker: qf_serve_spawn() gives them all
 * the executor slice, unless the runtime's owner set theirs. */
static void spawn_and_serve_one(qf_runtime *rt)
{
    qf_serve *s = make(4, 0, NULL);
    qf_task *t = NULL;
    atomic_int batches = 0;
    cr_assert_eq(qf_serve_spawn(s, rt, model_ok, &batches, NULL, &t), QF_OK, "%s",
                 qf_last_message());
    treq r;
    treq_init(&r, 0, QF_FOREVER, 0);
    cr_assert_eq(qf_serve_submit(s, &r.req), QF_OK);
    qf_serve_begin_drain(s, QF_FOREVER);
    cr_expect_eq(qf_task_join(t, QF_FOREVER, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&r.answers), 1);
    cr_expect_eq(atomic_load(&batches), 1);
    qf_task_unref(t);
    qf_serve_free(s);
}

/* Until the runtime's one worker (named `name`-0) has `want` as its slice,
 * spawning tasks so that it wakes, or 20 s; its slice then. */
static uint64_t worker_slice_becomes(qf_runtime *rt, const char *name, uint64_t want)
{
    char n0[16];
    snprintf(n0, sizeof(n0), "%s-0", name);
    int tid = qft_wait_thread_named(n0);
    cr_assert(tid > 0, "worker %s not found", n0);
    qf_deadline limit = qf_deadline_in_s(20);
    uint64_t got;
    while ((got = qft_slice_of(tid)) != want && !qf_deadline_passed(limit)) {
        qf_task *t;
        cr_assert_eq(qf_task_spawn(rt, slice_nothing, NULL, NULL, &t), QF_OK);
        qf_task_join(t, QF_FOREVER, NULL);
        qf_task_unref(t);
    }
    return got;
}

Test(serve, spawn_gives_the_workers_the_exec_slice_unless_their_owner_chose)
{
    if (!qft_kernel_has_slices())
        cr_skip_test("this kernel has no per-thread slices (Linux 6.12 or later)");
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1, .name = "svs"}, &rt), QF_OK);
    uint64_t before = qft_slice_of(qft_wait_thread_named("svs-0"));
    spawn_and_serve_one(rt);
    cr_expect_eq(worker_slice_becomes(rt, "svs", QF_SERVE_DEFAULT_EXEC_SLICE_NS),
                 (uint64_t)QF_SERVE_DEFAULT_EXEC_SLICE_NS);
    qf_runtime_free(rt);

    /* The owner said 0 first: the workers keep their own. */
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1, .name = "svk"}, &rt), QF_OK);
    cr_assert_eq(qf_runtime_set_worker_slice(rt, 0), QF_OK);
    spawn_and_serve_one(rt);
    spawn_and_serve_one(rt); /* the worker has looked at the setting since */
    cr_expect_eq(qft_slice_of(qft_wait_thread_named("svk-0")), before);
    qf_runtime_free(rt);
}
