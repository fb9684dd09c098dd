/* test_coordinator.c - the Coordinator (spec 107-123) and its stop word,
 * stop actions, wakers, signal-handler stops and join.
 *
 * Ordering in these tests comes from observable state (gates, counters,
 * the stop word, wait_for_stop), never from sleeps: a laggard blocks on a
 * gate the test opens after join has returned, so a grace of 1e-10 s or
 * 2 ms gives the same result on any machine. Assertions run on the test's
 * main thread; helper threads only record what they saw.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "qf_coordinator-impl.h"
#include "qf_coordinator.h"
#include "qf_futex.h"
#include "qf_test_park.h"

/* ------------------------------------------------------------------------
 * Helpers: a one-shot gate and a counter that threads can sleep on.
 */

typedef struct gate {
    _Atomic uint32_t v;
} gate;

static void gate_open(gate *g)
{
    atomic_store(&g->v, 1);
    qf_futex_wake(&g->v, INT32_MAX);
}

static void gate_wait(gate *g)
{
    while (!atomic_load(&g->v))
        qf_futex_wait(&g->v, 0, QF_FOREVER);
}

typedef struct counter {
    _Atomic uint32_t v;
} counter;

static void counter_add(counter *c)
{
    atomic_fetch_add(&c->v, 1);
    qf_futex_wake(&c->v, INT32_MAX);
}

static void counter_wait_ge(counter *c, uint32_t n)
{
    for (uint32_t cur; (cur = atomic_load(&c->v)) < n;)
        qf_futex_wait(&c->v, cur, QF_FOREVER);
}

static qf_coord *new_coord(void)
{
    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    cr_assert_not_null(c);
    return c;
}

/* Wait until some thread announced a futex sleep on the stop word. */
static void wait_for_sleeper(qf_coord *c)
{
    while (!(qf__coord_word(c) & QF__COORD_SLEEPERS))
        sched_yield();
}

static void count_action(void *arg)
{
    counter_add(arg);
}

/* ------------------------------------------------------------------------
 * spec 107-108: should_stop and wait_for_stop
 */

/* spec 107 */
Test(coordinator, new_coordinator_is_not_stopped_and_wait_times_out, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_not(qf_coord_should_stop(c));
    cr_assert_not(qf_coord_check_stop(c));
    cr_assert_not(qf_coord_wait_for_stop(c, QF_NO_WAIT));
    cr_assert_not(qf_coord_wait_for_stop(c, qf_deadline_in_s(0.01)));
    cr_assert_not(qf_coord_joined(c));
    qf_coord_free(c);
}

/* spec 107 */
Test(coordinator, request_stop_is_seen_by_should_stop_and_wait, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_assert(qf_coord_should_stop(c));
    cr_assert(qf_coord_check_stop(c));
    cr_assert(qf_coord_wait_for_stop(c, qf_deadline_in_s(0.01)));
    cr_assert(qf_coord_wait_for_stop(c, QF_NO_WAIT));
    cr_assert(qf_coord_wait_for_stop(c, QF_FOREVER));
    qf_coord_free(c);
}

static void *request_stop_thread(void *arg)
{
    qf_coord_request_stop(arg, NULL);
    return NULL;
}

/* spec 108 */
Test(coordinator, stop_from_another_thread_is_seen_by_waiters, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_not(qf_coord_wait_for_stop(c, qf_deadline_in_s(0.01)));
    pthread_t t;
    pthread_create(&t, NULL, request_stop_thread, c);
    pthread_join(t, NULL);
    cr_assert(qf_coord_wait_for_stop(c, qf_deadline_in_s(0.05)));
    cr_assert(qf_coord_should_stop(c));
    qf_coord_free(c);
}

struct waiter {
    qf_coord *c;
    qf_deadline deadline;
    counter *entered;
    _Atomic int result;
};

static void *waiter_thread(void *arg)
{
    struct waiter *w = arg;
    if (w->entered)
        counter_add(w->entered);
    atomic_store(&w->result, qf_coord_wait_for_stop(w->c, w->deadline) ? 1 : 0);
    return NULL;
}

/* spec 108 */
Test(coordinator, wait_forever_returns_when_another_thread_stops, .timeout = 10)
{
    qf_coord *c = new_coord();
    struct waiter w = {.c = c, .deadline = QF_FOREVER, .result = -1};
    pthread_t t;
    pthread_create(&t, NULL, waiter_thread, &w);
    wait_for_sleeper(c); /* the waiter is (about to be) asleep on the word */
    pthread_t s;
    pthread_create(&s, NULL, request_stop_thread, c);
    pthread_join(s, NULL);
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&w.result), 1);
    qf_coord_free(c);
}

Test(coordinator, sixty_four_waiters_all_wake_on_one_stop, .timeout = 10)
{
    enum { N = 64 };
    qf_coord *c = new_coord();
    counter entered = {0};
    struct waiter w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct waiter){.c = c, .deadline = QF_FOREVER, .entered = &entered, .result = -1};
        pthread_create(&t[i], NULL, waiter_thread, &w[i]);
    }
    counter_wait_ge(&entered, N);
    wait_for_sleeper(c);
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(atomic_load(&w[i].result), 1, "waiter %d", i);
    }
    qf_coord_free(c);
}

Test(coordinator, waiter_of_a_stopped_epoch_returns_true_after_clear, .timeout = 10)
{
    qf_coord *c = new_coord();
    struct waiter w = {.c = c, .deadline = QF_FOREVER, .result = -1};
    pthread_t t;
    pthread_create(&t, NULL, waiter_thread, &w);
    wait_for_sleeper(c); /* it read the word in this epoch */
    qf_coord_request_stop(c, NULL);
    qf_coord_clear_stop(c);
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&w.result), 1);
    cr_assert_not(qf_coord_should_stop(c));
    qf_coord_free(c);
}

Test(coordinator, wait_with_deadline_times_out_in_a_new_epoch, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_request_stop(c, NULL);
    qf_coord_clear_stop(c);
    cr_assert_not(qf_coord_should_stop(c));
    cr_assert_not(qf_coord_wait_for_stop(c, qf_deadline_in_s(0.002)));
    qf_coord_request_stop(c, NULL);
    cr_assert(qf_coord_wait_for_stop(c, QF_NO_WAIT));
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * spec 109-113: recording errors
 */

/* spec 109 */
Test(coordinator, first_error_is_recorded_and_owned_by_the_coordinator, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "boom %d", 1)), QF_OK);
    qf_status *st = NULL;
    cr_assert_eq(qf_coord_raise_requested_exception(c, &st), QF_INTERNAL);
    cr_assert_str_eq(qf_status_message(st), "boom 1");
    qf_status_free(st);
    qf_coord_free(c); /* frees the recorded status (ASan checks) */
}

/* spec 109 */
Test(coordinator, ok_status_is_a_stop_without_error, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_OK, "fine")), QF_OK);
    cr_assert(qf_coord_should_stop(c));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    qf_coord_free(c);
}

struct two_reporters {
    qf_coord *c;
    gate first_done;
    int mode; /* 0: request_stop(status), 1: qf_coord_report */
};

static void report_msg(struct two_reporters *r, const char *msg)
{
    if (r->mode == 0) {
        qf_coord_request_stop(r->c, qf_status_new(QF_INTERNAL, "%s", msg));
    } else {
        qf_code rc = qf_set_error(QF_INTERNAL, "%s", msg);
        qf_coord_report(r->c, rc);
    }
}

static void *reporter_first(void *arg)
{
    struct two_reporters *r = arg;
    report_msg(r, "First");
    gate_open(&r->first_done);
    return NULL;
}

static void *reporter_too_late(void *arg)
{
    struct two_reporters *r = arg;
    gate_wait(&r->first_done);
    report_msg(r, "Too late");
    return NULL;
}

static void first_error_wins(int mode)
{
    struct two_reporters r = {.c = new_coord(), .mode = mode};
    pthread_t t1, t2;
    cr_assert_eq(qf_coord_thread_create(r.c, "first", reporter_first, &r, &t1), QF_OK);
    cr_assert_eq(qf_coord_thread_create(r.c, "late", reporter_too_late, &r, &t2), QF_OK);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(r.c, NULL, 0, 10.0, false, &rep), QF_INTERNAL);
    cr_assert_str_eq(qf_last_message(), "First");
    cr_assert_str_eq(qf_status_message(rep.status), "First");
    cr_assert_eq(rep.n_dropped, 1);
    cr_assert_eq(rep.n_finished, 2);
    cr_assert_eq(rep.n_running, 0);
    qf_coord_join_report_clear(&rep);
    qf_coord_free(r.c);
}

/* spec 110 */
Test(coordinator, first_error_wins_with_request_stop, .timeout = 10)
{
    first_error_wins(0);
}

/* spec 110, 113 */
Test(coordinator, first_error_wins_with_report_helper, .timeout = 10)
{
    first_error_wins(1);
}

struct racer {
    qf_coord *c;
    pthread_barrier_t *b;
    int id;
};

static void *racing_reporter(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->b);
    qf_coord_request_stop(r->c, qf_status_new(QF_ABORTED, "e%d", r->id));
    return NULL;
}

/* spec 110 */
Test(coordinator, racing_errors_record_exactly_one_and_count_the_rest, .timeout = 10)
{
    enum { N = 16 };
    qf_coord *c = new_coord();
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, N);
    struct racer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){c, &b, i};
        cr_assert_eq(qf_coord_thread_create(c, NULL, racing_reporter, &r[i], &t[i]), QF_OK);
    }
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, &rep), QF_ABORTED);
    cr_assert_eq(qf_last_message()[0], 'e');
    cr_assert_eq(rep.n_dropped, N - 1);
    cr_assert_eq(rep.n_finished, N);
    qf_coord_join_report_clear(&rep);
    pthread_barrier_destroy(&b);
    qf_coord_free(c);
}

/* spec 111 */
Test(coordinator, stop_without_error_first_ignores_later_error, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "ignored")), QF_OK);
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, &rep), QF_OK);
    cr_assert_eq(rep.n_dropped, 1);
    cr_assert(rep.stop_requested);
    cr_assert_null(rep.status);
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

/* spec 112 */
Test(coordinator, out_of_range_is_a_clean_stop_by_default, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_OUT_OF_RANGE, "First")), QF_OK);
    cr_assert(qf_coord_should_stop(c));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    /* A clean stop is a stop: a later error is ignored too (spec 111). */
    qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "later"));
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    qf_coord_free(c);
}

/* spec 112 */
Test(coordinator, custom_clean_codes_replace_the_default, .timeout = 10)
{
    const qf_code clean[] = {QF_INVALID_ARGUMENT};
    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(clean, 1, &c), QF_OK);
    qf_coord_request_stop(c, qf_status_new(QF_INVALID_ARGUMENT, "Clean stop"));
    cr_assert(qf_coord_should_stop(c));
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    qf_coord_free(c);

    cr_assert_eq(qf_coord_new(clean, 1, &c), QF_OK);
    qf_coord_request_stop(c, qf_status_new(QF_OUT_OF_RANGE, "not clean here"));
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OUT_OF_RANGE);
    cr_assert_str_eq(qf_last_message(), "not clean here");
    qf_coord_free(c);
}

/* spec 112 */
Test(coordinator, empty_clean_set_makes_every_error_reportable, .timeout = 10)
{
    const qf_code none[1] = {QF_OK};
    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(none, 0, &c), QF_OK);
    qf_coord_request_stop(c, qf_status_new(QF_OUT_OF_RANGE, "end"));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OUT_OF_RANGE);
    qf_coord_free(c);

    const qf_code bad[] = {(qf_code)99};
    c = NULL;
    cr_assert_eq(qf_coord_new(bad, 1, &c), QF_INVALID_ARGUMENT);
    cr_assert_null(c);
}

static void *failing_worker(void *arg)
{
    qf_coord *c = arg;
    qf_code rc = qf_set_error(QF_DATA_LOSS, "disk on fire");
    /* The one-liner returns the code so the worker can leave its loop. */
    if (qf_coord_report(c, rc) != QF_DATA_LOSS)
        return (void *)1;
    return NULL;
}

/* spec 113 */
Test(coordinator, report_requests_stop_with_the_last_error, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_report(c, QF_OK), QF_OK);
    cr_assert_not(qf_coord_should_stop(c));

    pthread_t t;
    cr_assert_eq(qf_coord_thread_create(c, "w", failing_worker, c, &t), QF_OK);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_DATA_LOSS);
    cr_assert_str_eq(qf_last_message(), "disk on fire");
    qf_coord_free(c);
}

/* spec 113 */
Test(coordinator, report_without_matching_last_error_uses_the_code_name, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_set_error(QF_CANCELLED, "unrelated");
    cr_assert_eq(qf_coord_report(c, QF_UNAVAILABLE), QF_UNAVAILABLE);
    qf_status *st = NULL;
    cr_assert_eq(qf_coord_raise_requested_exception(c, &st), QF_UNAVAILABLE);
    cr_assert_str_eq(qf_status_message(st), "UNAVAILABLE");
    qf_status_free(st);
    /* A clean code through the helper: a clean stop, code returned. */
    qf_coord_clear_stop(c);
    cr_assert_eq(qf_coord_report(c, QF_OUT_OF_RANGE), QF_OUT_OF_RANGE);
    cr_assert(qf_coord_should_stop(c));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * spec 114-120: join
 */

struct flag_arg {
    _Atomic int *flag;
    gate *g; /* optional: wait for it first */
};

static void *set_flag_thread(void *arg)
{
    struct flag_arg *f = arg;
    if (f->g)
        gate_wait(f->g);
    atomic_store(f->flag, 1);
    return NULL;
}

/* spec 114 */
Test(coordinator, join_returns_once_extra_threads_finished, .timeout = 10)
{
    qf_coord *c = new_coord();
    _Atomic int flags[3] = {0, 0, 0};
    struct flag_arg fa[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        fa[i] = (struct flag_arg){&flags[i], NULL};
        pthread_create(&t[i], NULL, set_flag_thread, &fa[i]);
    }
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, t, 3, QF_COORD_DEFAULT_GRACE_SECS, false, &rep), QF_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(atomic_load(&flags[i]), 1);
    cr_assert_eq(rep.n_members, 3);
    cr_assert_eq(rep.n_finished, 3);
    cr_assert_str_eq(rep.finished[0], "thread-0");
    cr_assert_str_eq(rep.finished[2], "thread-2");
    cr_assert_not(rep.stop_requested);
    qf_coord_join_report_clear(&rep);
    cr_assert(qf_coord_joined(c));
    qf_coord_free(c);
}

/* spec 115 */
Test(coordinator, join_waits_for_registered_and_extra_threads, .timeout = 10)
{
    qf_coord *c = new_coord();
    _Atomic int flags[3] = {0, 0, 0};
    struct flag_arg fa[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        fa[i] = (struct flag_arg){&flags[i], NULL};
    cr_assert_eq(qf_coord_thread_create(c, "r0", set_flag_thread, &fa[0], &t[0]), QF_OK);
    pthread_create(&t[1], NULL, set_flag_thread, &fa[1]);
    cr_assert_eq(qf_coord_register_thread(c, t[1], "r1"), QF_OK);
    pthread_create(&t[2], NULL, set_flag_thread, &fa[2]);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, &t[2], 1, 10.0, false, &rep), QF_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(atomic_load(&flags[i]), 1);
    cr_assert_eq(rep.n_members, 3);
    cr_assert_str_eq(rep.finished[0], "r0");
    cr_assert_str_eq(rep.finished[1], "r1");
    cr_assert_str_eq(rep.finished[2], "thread-0");
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

struct self_reg {
    qf_coord *c;
    counter *registered;
    gate *go;
    _Atomic int *flag;
    int use_pthread_exit;
};

static void *self_registering_thread(void *arg)
{
    struct self_reg *s = arg;
    qf_coord_register_thread(s->c, pthread_self(), "self");
    counter_add(s->registered);
    gate_wait(s->go);
    atomic_store(s->flag, 1);
    if (s->use_pthread_exit)
        pthread_exit(NULL);
    return NULL;
}

/* spec 115 */
Test(coordinator, join_with_no_argument_joins_registered_threads, .timeout = 10)
{
    qf_coord *c = new_coord();
    counter registered = {0};
    gate go = {0};
    _Atomic int flags[2] = {0, 0};
    struct self_reg s[2] = {{c, &registered, &go, &flags[0], 0},
                            {c, &registered, &go, &flags[1], 1}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, self_registering_thread, &s[i]);
    counter_wait_ge(&registered, 2);
    gate_open(&go); /* they may end before or during join: same result */
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, &rep), QF_OK);
    cr_assert_eq(atomic_load(&flags[0]), 1);
    cr_assert_eq(atomic_load(&flags[1]), 1);
    cr_assert_eq(rep.n_members, 2);
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

/* spec 115 */
Test(coordinator, thread_registered_and_passed_is_joined_once, .timeout = 10)
{
    qf_coord *c = new_coord();
    _Atomic int flag = 0;
    struct flag_arg fa = {&flag, NULL};
    pthread_t t;
    pthread_create(&t, NULL, set_flag_thread, &fa);
    cr_assert_eq(qf_coord_register_thread(c, t, "t"), QF_OK);
    cr_assert_eq(qf_coord_register_thread(c, t, "again"), QF_OK);
    pthread_t extra[2] = {t, t};
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, extra, 2, 10.0, false, &rep), QF_OK);
    cr_assert_eq(rep.n_members, 1);
    cr_assert_eq(rep.n_finished, 1);
    cr_assert_str_eq(rep.finished[0], "t");
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

struct late_done {
    qf_coord_member *m;
    _Atomic int *flag;
    int joiner_tid; /* finish once it waits in join */
};

static void *finish_member_later(void *arg)
{
    struct late_done *d = arg;
    /* Not for ordering: join's result is the same whether this runs
     * before or during join. Waiting until the joiner sleeps makes it the
     * "during" case. */
    qft_wait_parked(d->joiner_tid, NULL, 0, NULL, 10 * 1000000000LL);
    atomic_store(d->flag, 1);
    qf_coord_member_done(d->m);
    return NULL;
}

/* spec 116 */
Test(coordinator, join_without_stop_waits_for_members_indefinitely, .timeout = 10)
{
    qf_coord *c = new_coord();
    _Atomic int flag = 0;
    struct late_done d = {NULL, &flag, qft_tid()};
    cr_assert_eq(qf_coord_member_new(c, "task", &d.m), QF_OK);
    pthread_t t;
    pthread_create(&t, NULL, finish_member_later, &d);
    /* A grace of 1e-10 s does not matter: no stop, so no grace period. */
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1e-10, false, &rep), QF_OK);
    cr_assert_eq(atomic_load(&flag), 1);
    cr_assert_not(rep.stop_requested);
    cr_assert_not(rep.grace_expired);
    cr_assert_eq(rep.n_finished, 1);
    qf_coord_join_report_clear(&rep);
    pthread_join(t, NULL);
    qf_coord_free(c);
}

/* spec 116 */
Test(coordinator, join_with_only_foreign_threads_and_no_stop_waits, .timeout = 10)
{
    qf_coord *c = new_coord();
    _Atomic int flag = 0;
    gate g = {0};
    struct flag_arg fa = {&flag, &g};
    pthread_t t;
    pthread_create(&t, NULL, set_flag_thread, &fa);
    cr_assert_eq(qf_coord_register_thread(c, t, "foreign"), QF_OK);
    gate_open(&g);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1e-10, false, NULL), QF_OK);
    cr_assert_eq(atomic_load(&flag), 1);
    qf_coord_free(c);
}

static void *gated_thread(void *arg)
{
    gate_wait(arg);
    return NULL;
}

struct laggard_setup {
    qf_coord *c;
    gate release;
    pthread_t lag_thread;
    pthread_t foreign;
    qf_coord_member *task;
    qf_coord_member *stopper;
};

static void *stopper_thread(void *arg)
{
    qf_coord_request_stop(arg, NULL);
    return NULL;
}

/* Requests the stop and finishes: the TensorFlow test's first thread. */
static void *stop_and_finish(void *arg)
{
    struct laggard_setup *s = arg;
    qf_coord_request_stop(s->c, NULL);
    qf_coord_member_done(s->stopper);
    return NULL;
}

/* Three laggards that stay blocked until the test opens `release`: a
 * created thread, a task member and (passed as extra) a foreign thread;
 * optionally a member that requests the stop and has finished before join
 * is called (so a 1e-10 s grace cannot catch it still exiting). */
static void laggards_start(struct laggard_setup *s, bool with_stopper)
{
    s->c = new_coord();
    atomic_store(&s->release.v, 0);
    cr_assert_eq(qf_coord_thread_create(s->c, "lag", gated_thread, &s->release, &s->lag_thread),
                 QF_OK);
    cr_assert_eq(qf_coord_member_new(s->c, "task-lag", &s->task), QF_OK);
    if (with_stopper) {
        cr_assert_eq(qf_coord_member_new(s->c, "stopper", &s->stopper), QF_OK);
        pthread_t st;
        pthread_create(&st, NULL, stop_and_finish, s);
        pthread_join(st, NULL);
    }
    pthread_create(&s->foreign, NULL, gated_thread, &s->release);
}

static void laggards_finish(struct laggard_setup *s)
{
    gate_open(&s->release);
    /* join reaps only what finished: the laggards are still ours. */
    pthread_join(s->lag_thread, NULL);
    pthread_join(s->foreign, NULL);
    qf_coord_member_done(s->task); /* after join gave up on it: allowed */
    qf_coord_free(s->c);
}

static void grace_expires_with_message(double grace)
{
    struct laggard_setup s;
    laggards_start(&s, true);
    qf_coord_join_report rep = {0};
    qf_code rc = qf_coord_join(s.c, &s.foreign, 1, grace, false, &rep);
    cr_assert_eq(rc, QF_DEADLINE_EXCEEDED);
    cr_assert_str_eq(qf_last_message(),
                     "Coordinator stopped with threads still running: lag task-lag thread-0");
    cr_assert_str_eq(qf_status_message(rep.status), qf_last_message());
    cr_assert(rep.stop_requested);
    cr_assert(rep.grace_expired);
    cr_assert_eq(rep.n_members, 4);
    cr_assert_eq(rep.n_finished, 1);
    cr_assert_str_eq(rep.finished[0], "stopper");
    cr_assert_eq(rep.n_running, 3);
    cr_assert_str_eq(rep.running[0], "lag");
    cr_assert_str_eq(rep.running[1], "task-lag");
    cr_assert_str_eq(rep.running[2], "thread-0");
    qf_coord_join_report_clear(&rep);
    laggards_finish(&s);
}

/* spec 117 */
Test(coordinator, grace_of_1e_10_expires_and_names_laggards, .timeout = 10)
{
    grace_expires_with_message(1e-10);
}

/* spec 117 */
Test(coordinator, grace_of_2ms_expires_and_names_laggards, .timeout = 10)
{
    grace_expires_with_message(0.002);
}

static void *stop_then_exit(void *arg)
{
    qf_coord *c = arg;
    qf_coord_wait_for_stop(c, QF_FOREVER);
    return NULL;
}

/* spec 117 */
Test(coordinator, members_stopping_within_grace_make_join_succeed, .timeout = 10)
{
    qf_coord *c = new_coord();
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(qf_coord_thread_create(c, NULL, stop_then_exit, c, &t[i]), QF_OK);
    pthread_t s;
    cr_assert_eq(qf_coord_thread_create(c, "stopper", stopper_thread, c, &s), QF_OK);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, &rep), QF_OK);
    cr_assert(rep.stop_requested);
    cr_assert_not(rep.grace_expired);
    cr_assert_eq(rep.n_finished, 5);
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

struct join_call {
    qf_coord *c;
    double grace;
    qf_code rc;
    char msg[256];
    counter *started;
};

static void *join_thread(void *arg)
{
    struct join_call *j = arg;
    if (j->started)
        counter_add(j->started);
    j->rc = qf_coord_join(j->c, NULL, 0, j->grace, false, NULL);
    snprintf(j->msg, sizeof(j->msg), "%s", j->rc ? qf_last_message() : "");
    return NULL;
}

/* spec 116, 117: a stop requested while join waits starts the grace. */
Test(coordinator, stop_during_join_wakes_it_and_starts_the_grace, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *m;
    cr_assert_eq(qf_coord_member_new(c, "slow", &m), QF_OK);
    counter started = {0};
    struct join_call j = {.c = c, .grace = 0.002, .started = &started};
    pthread_t jt;
    pthread_create(&jt, NULL, join_thread, &j);
    counter_wait_ge(&started, 1);
    qf_coord_request_stop(c, NULL);
    pthread_join(jt, NULL);
    cr_assert_eq(j.rc, QF_DEADLINE_EXCEEDED);
    cr_assert_str_eq(j.msg, "Coordinator stopped with threads still running: slow");
    qf_coord_member_done(m);
    qf_coord_free(c);
}

/* spec 118 */
Test(coordinator, ignore_live_threads_returns_ok_and_reports_laggards, .timeout = 10)
{
    struct laggard_setup s;
    laggards_start(&s, true);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(s.c, &s.foreign, 1, 1e-10, true, &rep), QF_OK);
    cr_assert_eq(rep.code, QF_OK);
    cr_assert_null(rep.status);
    cr_assert(rep.grace_expired);
    cr_assert_eq(rep.n_running, 3);
    qf_coord_join_report_clear(&rep);
    laggards_finish(&s);
}

/* spec 119 */
Test(coordinator, recorded_error_takes_precedence_over_laggards, .timeout = 10)
{
    struct laggard_setup s;
    laggards_start(&s, false);
    qf_coord_request_stop(s.c, qf_status_new(QF_INTERNAL, "real cause"));
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(s.c, &s.foreign, 1, 1e-10, false, &rep), QF_INTERNAL);
    cr_assert_str_eq(qf_last_message(), "real cause");
    cr_assert_eq(rep.n_running, 3); /* the laggards are still reported */
    qf_coord_join_report_clear(&rep);
    laggards_finish(&s);
}

static void *error_then_exit(void *arg)
{
    qf_coord_request_stop(arg, qf_status_new(QF_PERMISSION_DENIED, "nope"));
    return NULL;
}

/* spec 119 */
Test(coordinator, recorded_error_is_returned_when_every_member_finished, .timeout = 10)
{
    qf_coord *c = new_coord();
    pthread_t t[2];
    cr_assert_eq(qf_coord_thread_create(c, "bad", error_then_exit, c, &t[0]), QF_OK);
    cr_assert_eq(qf_coord_thread_create(c, "good", stop_then_exit, c, &t[1]), QF_OK);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, &rep), QF_PERMISSION_DENIED);
    cr_assert_str_eq(qf_last_message(), "nope");
    cr_assert_eq(rep.n_running, 0);
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

/* spec 120 */
Test(coordinator, join_sets_joined_and_empties_the_registered_set, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *m;
    cr_assert_eq(qf_coord_member_new(c, "lag", &m), QF_OK);
    qf_coord_request_stop(c, NULL);
    cr_assert_not(qf_coord_joined(c));
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1e-10, true, &rep), QF_OK);
    cr_assert(qf_coord_joined(c));
    cr_assert_eq(rep.n_members, 1);
    cr_assert_eq(rep.n_running, 1);
    qf_coord_join_report_clear(&rep);
    /* The laggard was forgotten: a second join has nothing to wait for. */
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1e-10, false, &rep), QF_OK);
    cr_assert_eq(rep.n_members, 0);
    qf_coord_join_report_clear(&rep);
    qf_coord_member_done(m);
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * spec 121-123: after join, clear_stop, raise_requested_exception
 */

/* spec 121 */
Test(coordinator, request_stop_after_join_hands_the_error_back, .timeout = 10)
{
    qf_coord *c = new_coord();
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    cr_assert(qf_coord_joined(c));
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "Too late")), QF_INTERNAL);
    cr_assert_str_eq(qf_last_message(), "Too late");
    /* Handed back, not recorded, and no stop requested (as TensorFlow). */
    cr_assert_not(qf_coord_should_stop(c));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    /* The helper hands it back as well. */
    qf_set_error(QF_ABORTED, "Too late again");
    cr_assert_eq(qf_coord_report(c, QF_ABORTED), QF_ABORTED);
    cr_assert_str_eq(qf_last_message(), "Too late again");
    cr_assert_not(qf_coord_should_stop(c));
    /* A clean code or no status still stops. */
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_OUT_OF_RANGE, "end")), QF_OK);
    cr_assert(qf_coord_should_stop(c));
    qf_coord_free(c);
}

/* spec 122 */
Test(coordinator, clear_stop_resets_stop_error_and_joined, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "First"));
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_INTERNAL);
    cr_assert(qf_coord_joined(c));
    qf_coord_clear_stop(c);
    cr_assert_not(qf_coord_should_stop(c));
    cr_assert_not(qf_coord_joined(c));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    cr_assert_eq(qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "After clear")), QF_OK);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_INTERNAL);
    cr_assert_str_eq(qf_last_message(), "After clear");
    qf_coord_free(c);
}

static void *report_second(void *arg)
{
    qf_coord_request_stop(arg, qf_status_new(QF_INTERNAL, "Second"));
    return NULL;
}

/* spec 122 */
Test(coordinator, after_clear_a_new_thread_error_wins, .timeout = 10)
{
    struct two_reporters r = {.c = new_coord(), .mode = 0};
    pthread_t t;
    cr_assert_eq(qf_coord_thread_create(r.c, "first", reporter_first, &r, &t), QF_OK);
    cr_assert_eq(qf_coord_join(r.c, NULL, 0, 10.0, false, NULL), QF_INTERNAL);
    cr_assert_str_eq(qf_last_message(), "First");
    qf_coord_clear_stop(r.c);
    cr_assert_eq(qf_coord_thread_create(r.c, "second", report_second, r.c, &t), QF_OK);
    cr_assert_eq(qf_coord_join(r.c, NULL, 0, 10.0, false, NULL), QF_INTERNAL);
    cr_assert_str_eq(qf_last_message(), "Second");
    qf_coord_free(r.c);
}

/* spec 123 */
Test(coordinator, raise_requested_exception_returns_a_copy, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_status *st = (qf_status *)&st; /* untouched when nothing is recorded */
    cr_assert_eq(qf_coord_raise_requested_exception(c, &st), QF_OK);
    cr_assert_eq(st, (qf_status *)&st);
    qf_coord_request_stop(c, qf_status_new(QF_UNAUTHENTICATED, "who?"));
    st = NULL;
    cr_assert_eq(qf_coord_raise_requested_exception(c, &st), QF_UNAUTHENTICATED);
    cr_assert_str_eq(qf_last_message(), "who?");
    cr_assert_str_eq(qf_status_message(st), "who?");
    qf_status_free(st); /* a copy: the recorded one stays */
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_UNAUTHENTICATED);
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * Stop actions
 */

Test(coordinator, stop_action_runs_on_request_stop_before_it_returns, .timeout = 10)
{
    qf_coord *c = new_coord();
    counter n = {0};
    qf_coord_action *a = NULL;
    cr_assert_eq(qf_coord_add_stop_action(c, count_action, &n, &a), QF_OK);
    cr_assert_eq(atomic_load(&n.v), 0);
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(atomic_load(&n.v), 1);
    qf_coord_request_stop(c, NULL); /* same epoch: not again */
    cr_assert_eq(atomic_load(&n.v), 1);
    qf_coord_remove_stop_action(c, a);
    cr_assert_eq(qf_coord_add_stop_action(c, NULL, NULL, NULL), QF_INVALID_ARGUMENT);
    qf_coord_free(c);
}

Test(coordinator, stop_action_added_after_stop_runs_at_once, .timeout = 10)
{
    qf_coord *c = new_coord();
    counter n = {0};
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(qf_coord_add_stop_action(c, count_action, &n, NULL), QF_OK);
    cr_assert_eq(atomic_load(&n.v), 1);
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(atomic_load(&n.v), 1);
    qf_coord_clear_stop(c);
    cr_assert_eq(atomic_load(&n.v), 1);
    qf_coord_request_stop(c, NULL); /* a new epoch: runs again */
    cr_assert_eq(atomic_load(&n.v), 2);
    qf_coord_free(c); /* frees the action without a handle */
}

struct epoch_race {
    qf_coord *c;
    pthread_barrier_t *start, *done;
    int epochs;
};

static void *epoch_racer(void *arg)
{
    struct epoch_race *r = arg;
    for (int e = 0; e < r->epochs; e++) {
        pthread_barrier_wait(r->start);
        qf_coord_request_stop(r->c, NULL);
        pthread_barrier_wait(r->done);
    }
    return NULL;
}

Test(coordinator, stop_actions_run_exactly_once_per_epoch_under_racing_requests, .timeout = 10)
{
    enum { T = 8, EPOCHS = 50, A = 3 };
    qf_coord *c = new_coord();
    counter n[A] = {{0}};
    for (int i = 0; i < A; i++)
        cr_assert_eq(qf_coord_add_stop_action(c, count_action, &n[i], NULL), QF_OK);
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, T + 1);
    pthread_barrier_init(&done, NULL, T + 1);
    struct epoch_race r = {c, &start, &done, EPOCHS};
    pthread_t t[T];
    for (int i = 0; i < T; i++)
        pthread_create(&t[i], NULL, epoch_racer, &r);
    for (int e = 0; e < EPOCHS; e++) {
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&done);
        for (int i = 0; i < A; i++)
            cr_assert_eq(atomic_load(&n[i].v), (uint32_t)e + 1, "action %d epoch %d", i, e);
        qf_coord_clear_stop(c);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
    qf_coord_free(c);
}

struct add_race {
    qf_coord *c;
    pthread_barrier_t *b;
    counter *n;
    qf_coord_action *a;
};

static void *adder(void *arg)
{
    struct add_race *r = arg;
    pthread_barrier_wait(r->b);
    qf_coord_add_stop_action(r->c, count_action, r->n, &r->a);
    return NULL;
}

static void *stopper_at_barrier(void *arg)
{
    struct add_race *r = arg;
    pthread_barrier_wait(r->b);
    qf_coord_request_stop(r->c, NULL);
    return NULL;
}

Test(coordinator, add_stop_action_racing_request_stop_runs_exactly_once, .timeout = 10)
{
    qf_coord *c = new_coord();
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 2);
    for (int i = 0; i < 300; i++) {
        counter n = {0};
        struct add_race r = {c, &b, &n, NULL};
        pthread_t t1, t2;
        pthread_create(&t1, NULL, adder, &r);
        pthread_create(&t2, NULL, stopper_at_barrier, &r);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        cr_assert_eq(atomic_load(&n.v), 1, "iteration %d", i);
        qf_coord_clear_stop(c);
        qf_coord_remove_stop_action(c, r.a);
        cr_assert_eq(atomic_load(&n.v), 1, "iteration %d after clear", i);
    }
    pthread_barrier_destroy(&b);
    qf_coord_free(c);
}

Test(coordinator, removed_stop_action_does_not_run, .timeout = 10)
{
    qf_coord *c = new_coord();
    counter n = {0}, m = {0};
    qf_coord_action *a, *b;
    qf_coord_add_stop_action(c, count_action, &n, &a);
    qf_coord_add_stop_action(c, count_action, &m, &b);
    qf_coord_remove_stop_action(c, a);
    qf_coord_remove_stop_action(c, NULL);
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(atomic_load(&n.v), 0);
    cr_assert_eq(atomic_load(&m.v), 1);
    qf_coord_free(c);
}

struct self_remover {
    qf_coord *c;
    qf_coord_action *a;
    counter n;
};

static void remove_myself(void *arg)
{
    struct self_remover *s = arg;
    counter_add(&s->n);
    qf_coord_remove_stop_action(s->c, s->a); /* does not wait for itself */
}

Test(coordinator, stop_action_may_remove_itself, .timeout = 10)
{
    qf_coord *c = new_coord();
    struct self_remover s = {.c = c};
    qf_coord_add_stop_action(c, remove_myself, &s, &s.a);
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(atomic_load(&s.n.v), 1);
    qf_coord_clear_stop(c);
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(atomic_load(&s.n.v), 1);
    qf_coord_free(c);
}

static void clear_from_action(void *arg)
{
    qf_coord_clear_stop(arg); /* must not wait for itself */
}

Test(coordinator, clear_stop_from_inside_a_stop_action, .timeout = 10)
{
    qf_coord *c = new_coord();
    counter n = {0};
    qf_coord_add_stop_action(c, clear_from_action, c, NULL);
    qf_coord_add_stop_action(c, count_action, &n, NULL);
    qf_coord_request_stop(c, NULL);
    /* clear_stop finished the epoch's work (the second action) first. */
    cr_assert_eq(atomic_load(&n.v), 1);
    cr_assert_not(qf_coord_should_stop(c));
    qf_coord_free(c);
}

struct slow_action {
    gate started, release;
    _Atomic int returned;
};

static void slow_action_fn(void *arg)
{
    struct slow_action *s = arg;
    gate_open(&s->started);
    gate_wait(&s->release);
    atomic_store(&s->returned, 1);
}

struct remover_arg {
    qf_coord *c;
    qf_coord_action *a;
    struct slow_action *s;
    int seen_returned; /* read by the test after joining */
    int clear;         /* clear_stop instead of remove */
};

static void *remover_thread(void *arg)
{
    struct remover_arg *r = arg;
    gate_wait(&r->s->started);
    if (r->clear)
        qf_coord_clear_stop(r->c);
    else
        qf_coord_remove_stop_action(r->c, r->a);
    r->seen_returned = atomic_load(&r->s->returned);
    return NULL;
}

static void wait_for_running_action(int clear)
{
    qf_coord *c = new_coord();
    struct slow_action s = {0};
    struct remover_arg r = {.c = c, .s = &s, .clear = clear};
    cr_assert_eq(qf_coord_add_stop_action(c, slow_action_fn, &s, &r.a), QF_OK);
    pthread_t st, rt;
    pthread_create(&rt, NULL, remover_thread, &r);
    pthread_create(&st, NULL, stopper_thread, c);
    gate_wait(&s.started);
    gate_open(&s.release); /* whether or not the remover already waits */
    pthread_join(st, NULL);
    pthread_join(rt, NULL);
    cr_assert_eq(r.seen_returned, 1);
    qf_coord_free(c);
}

Test(coordinator, remove_waits_for_a_running_stop_action, .timeout = 10)
{
    wait_for_running_action(0);
}

Test(coordinator, clear_stop_waits_for_running_stop_actions, .timeout = 10)
{
    wait_for_running_action(1);
}

/* ------------------------------------------------------------------------
 * Wakers
 */

static void *wake_soon(void *arg)
{
    qf_coord_request_stop(arg, NULL);
    return NULL;
}

Test(coordinator, registered_thread_waker_is_woken_by_stop, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_waker w;
    qf_waker_init_thread(&w);
    cr_assert(qf_coord_register_waker(c, &w));
    pthread_t t;
    pthread_create(&t, NULL, wake_soon, c);
    cr_assert_eq(qf_waker_wait(&w, QF_FOREVER), QF_OK);
    cr_assert_eq(qf_waker_state(&w), QF_WAKER_DONE);
    pthread_join(t, NULL);
    qf_coord_free(c);
}

static void count_wake(qf_waker *w)
{
    counter_add(w->ctx);
}

Test(coordinator, task_waker_runs_once_and_late_registration_is_refused, .timeout = 10)
{
    qf_coord *c = new_coord();
    counter n = {0};
    qf_waker w, cancelled;
    qf_waker_init(&w, count_wake, &n);
    qf_waker_init(&cancelled, count_wake, &n);
    cr_assert(qf_coord_register_waker(c, &w));
    cr_assert(qf_coord_register_waker(c, &cancelled));
    cr_assert(qf_coord_cancel_waker(c, &cancelled)); /* not woken: IDLE */
    qf_coord_request_stop(c, NULL);
    cr_assert_eq(atomic_load(&n.v), 1);
    cr_assert_eq(qf_waker_state(&w), QF_WAKER_DONE);
    cr_assert_not(qf_coord_cancel_waker(c, &w)); /* already woken */

    qf_waker late;
    qf_waker_init(&late, count_wake, &n);
    cr_assert_not(qf_coord_register_waker(c, &late));
    cr_assert_eq(qf_waker_state(&late), QF_WAKER_IDLE);
    cr_assert_eq(atomic_load(&n.v), 1);
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * Stop from a signal handler
 */

static qf_coord *_Atomic g_signal_coord;

static void on_sigusr1(int sig)
{
    (void)sig;
    qf_coord_request_stop_from_signal(atomic_load(&g_signal_coord));
}

static void install_handler(qf_coord *c)
{
    atomic_store(&g_signal_coord, c);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
}

Test(coordinator, signal_handler_stop_wakes_waiters_and_runs_actions_later, .timeout = 10)
{
    qf_coord *c = new_coord();
    install_handler(c);
    counter n = {0};
    qf_coord_add_stop_action(c, count_action, &n, NULL);
    struct waiter w = {.c = c, .deadline = QF_FOREVER, .result = -1};
    pthread_t t;
    pthread_create(&t, NULL, waiter_thread, &w);
    wait_for_sleeper(c);
    errno = 1234;
    cr_assert_eq(raise(SIGUSR1), 0);
    cr_assert_eq(errno, 1234);
    cr_assert(qf_coord_should_stop(c));
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&w.result), 1);
    /* The waiter's wait_for_stop ran the deferred stop work; once. */
    cr_assert_eq(atomic_load(&n.v), 1);
    cr_assert(qf_coord_check_stop(c));
    cr_assert_eq(atomic_load(&n.v), 1);
    /* No error was recorded, and later errors count as dropped. */
    qf_coord_request_stop(c, qf_status_new(QF_INTERNAL, "after signal"));
    cr_assert_eq(qf_coord_raise_requested_exception(c, NULL), QF_OK);
    signal(SIGUSR1, SIG_DFL);
    qf_coord_free(c);
}

Test(coordinator, signal_handler_stop_then_check_stop_runs_pending_work, .timeout = 10)
{
    qf_coord *c = new_coord();
    install_handler(c);
    counter n = {0};
    qf_waker w;
    qf_waker_init(&w, count_wake, &n);
    cr_assert(qf_coord_register_waker(c, &w));
    qf_coord_add_stop_action(c, count_action, &n, NULL);
    raise(SIGUSR1);
    cr_assert(qf_coord_should_stop(c));
    cr_assert_eq(atomic_load(&n.v), 0); /* nothing ran in the handler */
    cr_assert(qf_coord_check_stop(c));
    cr_assert_eq(atomic_load(&n.v), 2); /* waker + action */
    signal(SIGUSR1, SIG_DFL);
    qf_coord_free(c);
}

Test(coordinator, signal_handler_stop_then_clear_still_runs_the_actions_once, .timeout = 10)
{
    qf_coord *c = new_coord();
    install_handler(c);
    counter n = {0};
    qf_coord_add_stop_action(c, count_action, &n, NULL);
    raise(SIGUSR1);
    qf_coord_clear_stop(c);
    cr_assert_eq(atomic_load(&n.v), 1);
    cr_assert_not(qf_coord_should_stop(c));
    raise(SIGUSR1);
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK);
    cr_assert_eq(atomic_load(&n.v), 2);
    signal(SIGUSR1, SIG_DFL);
    qf_coord_free(c);
}

Test(coordinator, signal_handler_stop_wakes_join, .timeout = 10)
{
    qf_coord *c = new_coord();
    install_handler(c);
    counter n = {0};
    qf_coord_add_stop_action(c, count_action, &n, NULL);
    qf_coord_member *m;
    cr_assert_eq(qf_coord_member_new(c, "server", &m), QF_OK);
    counter started = {0};
    struct join_call j = {.c = c, .grace = 1e-10, .started = &started};
    pthread_t jt;
    pthread_create(&jt, NULL, join_thread, &j);
    counter_wait_ge(&started, 1);
    raise(SIGUSR1); /* before or during join: join must see it either way */
    pthread_join(jt, NULL);
    cr_assert_eq(j.rc, QF_DEADLINE_EXCEEDED);
    cr_assert_str_eq(j.msg, "Coordinator stopped with threads still running: server");
    cr_assert_eq(atomic_load(&n.v), 1); /* join ran the stop work */
    qf_coord_member_done(m);
    signal(SIGUSR1, SIG_DFL);
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * Odds and ends
 */

static void *exit_early(void *arg)
{
    atomic_store((_Atomic int *)arg, 1);
    pthread_exit(NULL);
}

Test(coordinator, created_thread_ending_with_pthread_exit_counts_as_finished, .timeout = 10)
{
    qf_coord *c = new_coord();
    _Atomic int flag = 0;
    pthread_t t;
    cr_assert_eq(qf_coord_thread_create(c, "exiter", exit_early, &flag, &t), QF_OK);
    qf_coord_request_stop(c, NULL);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 10.0, false, &rep), QF_OK);
    cr_assert_eq(atomic_load(&flag), 1);
    cr_assert_eq(rep.n_finished, 1);
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

Test(coordinator, join_rejects_bad_arguments, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 1, 1.0, false, &rep), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_coord_join(c, NULL, 0, -1.0, false, &rep), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_coord_join(c, NULL, 0, NAN, false, &rep), QF_INVALID_ARGUMENT);
    cr_assert_not(qf_coord_joined(c));
    qf_coord_join_report_clear(&rep);
    qf_coord_join_report_clear(NULL);
    qf_coord_free(NULL);
    qf_coord_free(c);
}

Test(coordinator, many_task_members_are_joined, .timeout = 10)
{
    enum { N = 10000 };
    qf_coord *c = new_coord();
    static qf_coord_member *ms[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(qf_coord_member_new(c, NULL, &ms[i]), QF_OK);
    for (int i = 0; i < N; i++)
        qf_coord_member_done(ms[i]);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join(c, NULL, 0, 1.0, false, &rep), QF_OK);
    cr_assert_eq(rep.n_finished, N);
    cr_assert_str_eq(rep.finished[0], "member-0");
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * join_until: the absolute-deadline form of join
 */

/* With a stop in effect the deadline plays the grace period: members that
 * finish are joined, laggards make it fail with the usual message. */
Test(coordinator, join_until_after_a_stop_is_join_with_an_absolute_grace, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *done, *lag;
    cr_assert_eq(qf_coord_member_new(c, "done", &done), QF_OK);
    cr_assert_eq(qf_coord_member_new(c, "lag", &lag), QF_OK);
    qf_coord_member_done(done);
    qf_coord_request_stop(c, NULL);
    qf_coord_join_report rep = {0};
    qf_deadline d = qf_deadline_in_ns(5000000);
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, d, false, &rep), QF_DEADLINE_EXCEEDED);
    cr_assert_geq(qf_now_ns(), d);
    cr_assert_str_eq(qf_last_message(), QF_COORD_LAGGARD_PREFIX "lag");
    cr_assert(rep.stop_requested);
    cr_assert(rep.grace_expired);
    cr_assert_eq(rep.n_finished, 1);
    cr_assert_eq(rep.n_running, 1);
    cr_assert(qf_coord_joined(c));
    qf_coord_join_report_clear(&rep);
    qf_coord_member_done(lag);
    qf_coord_free(c);
}

/* The look that decides whether to wait stops at the first member still
 * running (qf_coord_join.c, members_left()); the members after it are
 * still counted and named right when the wait ends without them: a
 * running member registered first, nine that finished after it, and the
 * registered set afterwards holds only the one still running. */
Test(coordinator, join_until_counts_members_behind_a_laggard, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *lag, *ms[9];
    cr_assert_eq(qf_coord_member_new(c, "lag", &lag), QF_OK);
    for (int i = 0; i < 9; i++) {
        char name[8];
        snprintf(name, sizeof(name), "m%d", i);
        cr_assert_eq(qf_coord_member_new(c, name, &ms[i]), QF_OK);
    }
    for (int i = 0; i < 9; i++)
        qf_coord_member_done(ms[i]);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, qf_deadline_in_ns(2000000), false, &rep),
                 QF_DEADLINE_EXCEEDED);
    cr_assert_eq(rep.n_members, 10);
    cr_assert_eq(rep.n_finished, 9);
    cr_assert_eq(rep.n_running, 1);
    cr_assert_str_eq(rep.running[0], "lag");
    cr_assert_str_eq(rep.finished[8], "m8");
    qf_coord_join_report_clear(&rep);

    qf_coord_member_done(lag);
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, QF_NO_WAIT, false, &rep), QF_OK);
    cr_assert_eq(rep.n_members, 1, "the finished ones were released by the first join");
    cr_assert_str_eq(rep.finished[0], "lag");
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

/* spec 118 under join_until: laggards listed, not an error. */
Test(coordinator, join_until_ignore_live_threads, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *lag;
    cr_assert_eq(qf_coord_member_new(c, "lag", &lag), QF_OK);
    qf_coord_request_stop(c, NULL);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, QF_NO_WAIT, true, &rep), QF_OK);
    cr_assert_eq(rep.n_running, 1);
    cr_assert_str_eq(rep.running[0], "lag");
    qf_coord_join_report_clear(&rep);
    qf_coord_member_done(lag);
    qf_coord_free(c);
}

/* Before any stop, the deadline ends the wait without joining: the member
 * still running stays registered (a finished one is released), joined is
 * false, and a later join waits for the rest. */
Test(coordinator, join_until_before_a_stop_joins_nothing, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *a, *b;
    cr_assert_eq(qf_coord_member_new(c, "a", &a), QF_OK);
    cr_assert_eq(qf_coord_member_new(c, "b", &b), QF_OK);
    qf_coord_member_done(a);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, qf_deadline_in_ns(2000000), true, &rep),
                 QF_DEADLINE_EXCEEDED, "ignore_live_threads does not apply before a stop");
    cr_assert_str_eq(qf_last_message(), "qf_coord_join_until: the deadline passed before a stop "
                                        "was requested; still running: b");
    cr_assert_eq(rep.code, QF_DEADLINE_EXCEEDED);
    cr_assert_not(rep.stop_requested);
    cr_assert_not(rep.grace_expired);
    cr_assert(rep.n_finished == 1 && rep.n_running == 1);
    cr_assert_not(qf_coord_joined(c));
    qf_coord_join_report_clear(&rep);

    qf_coord_member_done(b);
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, QF_NO_WAIT, false, &rep), QF_OK);
    cr_assert_eq(rep.n_members, 1, "only b was left registered");
    cr_assert_str_eq(rep.finished[0], "b");
    cr_assert(qf_coord_joined(c));
    qf_coord_join_report_clear(&rep);
    qf_coord_free(c);
}

struct join_until_call {
    qf_coord *c;
    qf_deadline deadline;
    counter *started;
    qf_code rc;
};

static void *join_until_thread(void *arg)
{
    struct join_until_call *j = arg;
    counter_add(j->started);
    j->rc = qf_coord_join_until(j->c, NULL, 0, j->deadline, false, NULL);
    return NULL;
}

/* QF_FOREVER waits like join (spec 116): until the member ends. */
Test(coordinator, join_until_forever_waits_for_the_members, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_member *m;
    cr_assert_eq(qf_coord_member_new(c, "m", &m), QF_OK);
    counter started = {0};
    struct join_until_call j = {
        .c = c, .deadline = QF_FOREVER, .started = &started, .rc = QF_UNKNOWN};
    pthread_t t;
    pthread_create(&t, NULL, join_until_thread, &j);
    counter_wait_ge(&started, 1);
    qf_coord_member_done(m);
    pthread_join(t, NULL);
    cr_assert_eq(j.rc, QF_OK);
    cr_assert(qf_coord_joined(c));
    qf_coord_free(c);
}

static void *block_on_gate(void *arg)
{
    gate_wait(arg);
    return NULL;
}

/* An extra thread still running at the deadline (no stop) is reported and
 * stays the caller's to join. */
Test(coordinator, join_until_bounds_the_wait_for_extra_threads, .timeout = 10)
{
    qf_coord *c = new_coord();
    gate g = {0};
    pthread_t t;
    pthread_create(&t, NULL, block_on_gate, &g);
    qf_coord_join_report rep = {0};
    cr_assert_eq(qf_coord_join_until(c, &t, 1, qf_deadline_in_ns(2000000), false, &rep),
                 QF_DEADLINE_EXCEEDED);
    cr_assert_str_eq(rep.running[0], "thread-0");
    qf_coord_join_report_clear(&rep);
    gate_open(&g);
    pthread_join(t, NULL);
    qf_coord_free(c);
}

Test(coordinator, join_until_rejects_bad_arguments, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_join_report rep = {.n_members = 5};
    cr_assert_eq(qf_coord_join_until(NULL, NULL, 0, QF_FOREVER, false, &rep), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "qf_coord_join_until: the coordinator is NULL");
    cr_assert_eq(qf_coord_join_until(c, NULL, 2, QF_FOREVER, false, &rep), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_coord_join_until(c, NULL, 0, -2, false, &rep), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "qf_coord_join_until: deadline -2 is not a deadline (>= 0, "
                                        "or QF_FOREVER)");
    cr_assert_eq(rep.n_members, 5, "report untouched");
    cr_assert_not(qf_coord_joined(c));
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * The stop fd: readable while a stop is in effect
 */

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

Test(coordinator, stop_fd_is_readable_while_a_stop_is_in_effect, .timeout = 10)
{
    qf_coord *c = new_coord();
    int fd = -1, fd2 = -2;
    cr_assert_eq(qf_coord_stop_fd(c, &fd), QF_OK);
    cr_assert_geq(fd, 0);
    cr_assert_eq(qf_coord_stop_fd(c, &fd2), QF_OK);
    cr_assert_eq(fd, fd2, "one fd per coordinator");
    cr_assert_not(readable(fd));
    qf_coord_request_stop(c, NULL);
    cr_assert(readable(fd));
    cr_assert(readable(fd), "level: it stays readable");
    qf_coord_request_stop(c, NULL);
    qf_coord_clear_stop(c);
    cr_assert_not(readable(fd), "a new epoch resets it");
    qf_coord_report(c, QF_OUT_OF_RANGE);
    cr_assert(readable(fd), "and the next stop sets it again");
    qf_coord_free(c);
}

Test(coordinator, stop_fd_made_during_a_stop_is_readable_at_once, .timeout = 10)
{
    qf_coord *c = new_coord();
    qf_coord_request_stop(c, NULL);
    int fd = -1;
    cr_assert_eq(qf_coord_stop_fd(c, &fd), QF_OK);
    cr_assert(readable(fd));
    qf_coord_free(c);
}

/* What an event loop does: sleep in poll on the fd; a SIGTERM-style stop
 * from a signal handler (on another thread) wakes it, and check_stop then
 * runs the stop work the handler could not. */
struct fd_poller {
    int fd;
    counter *entered;
    int polled;
};

static void *poll_fd_thread(void *arg)
{
    struct fd_poller *p = arg;
    struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
    counter_add(p->entered);
    p->polled = poll(&pfd, 1, -1);
    return NULL;
}

Test(coordinator, stop_fd_wakes_a_poll_on_a_signal_handler_stop, .timeout = 10)
{
    qf_coord *c = new_coord();
    install_handler(c);
    counter n = {0}, entered = {0};
    qf_coord_add_stop_action(c, count_action, &n, NULL);
    struct fd_poller p = {.entered = &entered};
    cr_assert_eq(qf_coord_stop_fd(c, &p.fd), QF_OK);
    pthread_t t;
    pthread_create(&t, NULL, poll_fd_thread, &p);
    counter_wait_ge(&entered, 1);
    raise(SIGUSR1);
    pthread_join(t, NULL); /* the poll returned: no timeout was given */
    cr_assert_eq(p.polled, 1);
    cr_assert_eq(atomic_load(&n.v), 0, "nothing ran in the handler");
    cr_assert(qf_coord_check_stop(c));
    cr_assert_eq(atomic_load(&n.v), 1);
    signal(SIGUSR1, SIG_DFL);
    qf_coord_free(c);
}

Test(coordinator, stop_fd_rejects_bad_arguments, .timeout = 10)
{
    qf_coord *c = new_coord();
    int fd = -7;
    cr_assert_eq(qf_coord_stop_fd(NULL, &fd), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "qf_coord_stop_fd: the coordinator is NULL");
    cr_assert_eq(fd, -7);
    cr_assert_eq(qf_coord_stop_fd(c, NULL), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "qf_coord_stop_fd: ret_fd is NULL");
    qf_coord_free(c);
}

/* ------------------------------------------------------------------------
 * qf_coord_members_done: join's non-blocking counterpart (issue 30).
 */

static void *wait_on_gate(void *arg)
{
    gate_wait(arg);
    return NULL;
}

static void *ends_at_once(void *arg)
{
    (void)arg;
    return NULL;
}

Test(coordinator, members_done_follows_task_members_and_threads, .timeout = 30)
{
    qf_coord *c = new_coord();
    cr_expect(qf_coord_members_done(c), "nothing registered");
    qf_coord_member *m1, *m2;
    cr_assert_eq(qf_coord_member_new(c, "m1", &m1), QF_OK);
    cr_assert_eq(qf_coord_member_new(c, "m2", &m2), QF_OK);
    cr_expect(!qf_coord_members_done(c));
    qf_coord_member_done(m1);
    cr_expect(!qf_coord_members_done(c), "m2 still running");
    qf_coord_member_done(m2);
    cr_expect(qf_coord_members_done(c));

    gate g = {0};
    pthread_t t;
    cr_assert_eq(qf_coord_thread_create(c, "waiter", wait_on_gate, &g, &t), QF_OK);
    cr_expect(!qf_coord_members_done(c), "the thread waits on the gate");
    /* A stop does not finish members. */
    cr_expect_eq(qf_coord_request_stop(c, NULL), QF_OK);
    cr_expect(!qf_coord_members_done(c));
    gate_open(&g);
    while (!qf_coord_members_done(c)) /* the thread's exit hook; the timeout is the watchdog */
        sched_yield();
    /* Every member finished: join does not wait, and reaps the thread. */
    qf_coord_join_report r = {0};
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, &r), QF_OK, "%s", qf_last_message());
    cr_expect_eq(r.n_running, 0);
    cr_expect_eq(r.n_finished, 3);
    qf_coord_join_report_clear(&r);
    cr_expect(qf_coord_members_done(c), "join emptied the registered set");
    qf_coord_free(c);
}

Test(coordinator, members_done_counts_a_foreign_thread_as_running_until_joined, .timeout = 30)
{
    qf_coord *c = new_coord();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ends_at_once, NULL), 0);
    cr_assert_eq(qf_coord_register_thread(c, t, "foreign"), QF_OK);
    /* Its end is known only by joining it: never reported done here, even
     * after it ended (which join_until with a past deadline then sees). */
    cr_expect(!qf_coord_members_done(c));
    qf_code rc;
    while ((rc = qf_coord_join_until(c, NULL, 0, 0, false, NULL)) == QF_DEADLINE_EXCEEDED)
        sched_yield();
    cr_expect_eq(rc, QF_OK, "%s", qf_last_message());
    cr_expect(qf_coord_members_done(c));
    qf_coord_free(c);
}

Test(coordinator, members_done_is_callable_inside_a_task_where_join_is_refused, .timeout = 30)
{
    qf_coord *c = new_coord();
    qf_coord_member *m;
    cr_assert_eq(qf_coord_member_new(c, "m", &m), QF_OK);
    bool was = qf_thread_set_task_runner(true);
    cr_expect(!was);
    qf_set_error(QF_OK, "(nothing recorded)");
    cr_expect(!qf_coord_members_done(c));
    cr_expect_eq(qf_last_code(), QF_OK, "members_done records nothing: %s", qf_last_message());
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "qf_coord_members_done") != NULL, "%s", qf_last_message());
    cr_expect(strstr(qf_last_message(), "use the poll form") == NULL, "join has no poll form: %s",
              qf_last_message());
    cr_expect_eq(qf_coord_join_until(c, NULL, 0, QF_FOREVER, false, NULL), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "qf_coord_members_done") != NULL, "%s", qf_last_message());
    cr_expect(!qf_coord_wait_for_stop(c, QF_FOREVER), "refused, not blocked");
    cr_expect_eq(qf_last_code(), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "qf_coord_register_waker") != NULL, "%s",
              qf_last_message());
    qf_coord_member_done(m);
    cr_expect(qf_coord_members_done(c));
    cr_expect(qf_thread_set_task_runner(false));
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "%s", qf_last_message());
    qf_coord_free(c);
}
