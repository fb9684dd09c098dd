/* test_bad_input.c - every exported function, given bad input (reliability
 * suite).
 *
 * One test per exported function, named after it: what NULL, out-of-range
 * and nonsense arguments give. tests/reliability/bad_input_coverage.py
 * compares these names with the functions libqflow.so exports and the
 * public headers declare, and fails when one has no case here, so a new
 * function cannot be forgotten.
 *
 * The rules checked (README, "Bad input"):
 *   - a call returning a qf_code refuses with QF_INVALID_ARGUMENT (or the
 *     code its contract documents), qf_last_message() naming the argument;
 *   - a call returning a value returns a neutral one (NULL, 0, false,
 *     QF_DT_INVALID, an invalid shape) and records the same error, except
 *     where the contract gives NULL a meaning (free functions, "NULL-safe",
 *     the default scope, ...) and in the async-signal-safe calls, which
 *     record nothing;
 *   - nothing changes: out-parameters stay untouched, objects keep their
 *     state (sizes, stop flags, registrations), ownership that the contract
 *     says is taken "also on failure" is taken, and nothing leaks (ASan).
 *
 * Cases whose fix belongs to code another change is reworking (the
 * scheduler, runtime/sched/) say so with PENDING(): they are skipped unless
 * QF_BAD_INPUT_PENDING=1, which runs them to show what still fails.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qflow.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(bad_input, .timeout = 60);
#endif

/* ---------------------------------------------------------------- helpers */

/* Forget the thread's last error, so a case sees what its call recorded. */
static void clear_last(void)
{
    qf_set_error(QF_OK, "(nothing recorded)");
}

/* The last error is `code` and its message contains `word`. */
#define EXPECT_RECORDED(code, word)                                                                \
    do {                                                                                           \
        cr_expect_eq(qf_last_code(), (code), "recorded %s (%s), expected %s",                      \
                     qf_code_name(qf_last_code()), qf_last_message(), qf_code_name(code));         \
        cr_expect(strstr(qf_last_message(), (word)) != NULL,                                       \
                  "message \"%s\" does not name \"%s\"", qf_last_message(), (word));               \
    } while (0)

/* A qf_code call refuses with `code`, naming `word`. */
#define EXPECT_CODE(code, call, word)                                                              \
    do {                                                                                           \
        clear_last();                                                                              \
        qf_code rc_ = (call);                                                                      \
        cr_expect_eq(rc_, (code), "%s gave %s (%s)", #call, qf_code_name(rc_), qf_last_message()); \
        EXPECT_RECORDED(code, word);                                                               \
    } while (0)
#define INVALID(call, word) EXPECT_CODE(QF_INVALID_ARGUMENT, call, word)

/* A value-returning call gives `value` and records INVALID_ARGUMENT naming
 * `word`. */
#define NEUTRAL(call, value, word)                                                                 \
    do {                                                                                           \
        clear_last();                                                                              \
        cr_expect((call) == (value), "%s is not %s", #call, #value);                               \
        EXPECT_RECORDED(QF_INVALID_ARGUMENT, word);                                                \
    } while (0)

/* A void call refuses (records INVALID_ARGUMENT naming `word`). */
#define REFUSED(call, word)                                                                        \
    do {                                                                                           \
        clear_last();                                                                              \
        call;                                                                                      \
        EXPECT_RECORDED(QF_INVALID_ARGUMENT, word);                                                \
    } while (0)

/* A call where NULL is documented as harmless: it runs and records nothing. */
#define QUIET(call)                                                                                \
    do {                                                                                           \
        clear_last();                                                                              \
        call;                                                                                      \
        cr_expect_eq(qf_last_code(), QF_OK, "%s recorded %s (%s)", #call,                          \
                     qf_code_name(qf_last_code()), qf_last_message());                             \
    } while (0)

/* The fix lives in code another change is reworking: skipped unless
 * QF_BAD_INPUT_PENDING=1. */
#define PENDING(why)                                                                               \
    do {                                                                                           \
        const char *run_ = getenv("QF_BAD_INPUT_PENDING");                                         \
        if (!run_ || strcmp(run_, "1") != 0)                                                       \
            cr_skip_test("pending: %s", why);                                                      \
    } while (0)

/* A sentinel an out-parameter starts with, to see that it stays untouched. */
#define UNTOUCHED ((void *)0x5a5a5a5a)

__attribute__((unused)) static qf_deadline soon(void)
{
    return qf_deadline_in_s(10);
}

/* Fixtures. */
static const qf_dtype I64 = QF_INT64;

__attribute__((unused)) static qf_queue *mkq(int64_t capacity)
{
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = capacity, .num_components = 1, .dtypes = &I64, .shapes = &sh, .name = "q"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

__attribute__((unused)) static qf_queue *mkstrq(void)
{
    qf_dtype dt = QF_STRING;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = 8, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "files"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

__attribute__((unused)) static qf_queue *mkptrq(void)
{
    qf_queue *q = NULL;
    cr_assert_eq(qf_ptr_queue_new(8, "p", 0, NULL, &q), QF_OK);
    return q;
}

__attribute__((unused)) static qf_element *mkelem(int64_t v)
{
    qf_tensor *t = qf_tensor_new_i64(v);
    return qf_element_of(1, &t);
}

static qf_coord *mkcoord(void)
{
    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    return c;
}

__attribute__((unused)) static qf_runtime *mkrt(int workers)
{
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = workers, .name = "bad"}, &rt),
                 QF_OK);
    return rt;
}

__attribute__((unused)) static qf_scope *mkscope(void)
{
    qf_scope *s = NULL;
    cr_assert_eq(qf_scope_new(&s), QF_OK);
    return s;
}

static void noop_action(void *arg)
{
    (void)arg;
}

static void noop_wake(qf_waker *w)
{
    (void)w;
}

/* ========================================================== qf_status.h */

Test(bad_input, qf_code_name)
{
    QUIET(cr_expect_str_eq(qf_code_name(-1), "UNKNOWN_CODE"));
    QUIET(cr_expect_str_eq(qf_code_name(QF_CODE_COUNT), "UNKNOWN_CODE"));
    QUIET(cr_expect_str_eq(qf_code_name(12345), "UNKNOWN_CODE"));
}

Test(bad_input, qf_code_is_valid)
{
    QUIET(cr_expect_not(qf_code_is_valid(-1)));
    QUIET(cr_expect_not(qf_code_is_valid(-2)));
    QUIET(cr_expect_not(qf_code_is_valid(QF_CODE_COUNT)));
    QUIET(cr_expect_not(qf_code_is_valid(777)));
}

Test(bad_input, qf_status_new)
{
    /* the issue: codes outside the canonical set passed through */
    qf_status *s = qf_status_new((qf_code)777, "boom");
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_status_message(s), "code 777") != NULL, "%s", qf_status_message(s));
    qf_status_free(s);
    s = qf_status_new((qf_code)-7, "boom");
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_status_message(s), "code -7") != NULL, "%s", qf_status_message(s));
    qf_status_free(s);
    /* and a NULL format was accepted */
    s = qf_status_new(QF_CANCELLED, NULL);
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_status_message(s), "fmt") != NULL, "%s", qf_status_message(s));
    qf_status_free(s);
}

static qf_status *newv(qf_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qf_status *s = qf_status_newv(code, fmt, ap);
    va_end(ap);
    return s;
}

Test(bad_input, qf_status_newv)
{
    qf_status *s = newv((qf_code)QF_CODE_COUNT, "x");
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    qf_status_free(s);
    s = newv(QF_ABORTED, NULL);
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_status_message(s), "fmt") != NULL, "%s", qf_status_message(s));
    qf_status_free(s);
}

Test(bad_input, qf_status_copy)
{
    QUIET(cr_expect_null(qf_status_copy(NULL))); /* NULL-safe */
}

Test(bad_input, qf_status_free)
{
    QUIET(qf_status_free(NULL));
}

Test(bad_input, qf_status_code)
{
    QUIET(cr_expect_eq(qf_status_code(NULL), QF_OK)); /* documented */
}

Test(bad_input, qf_status_message)
{
    QUIET(cr_expect_str_eq(qf_status_message(NULL), ""));
}

static void *fresh_thread_last(void *arg)
{
    /* a thread that never failed: OK and an empty message */
    int *ok = arg;
    *ok = qf_last_code() == QF_OK && qf_last_message()[0] == 0;
    qf_status *s = qf_last_status();
    *ok = *ok && qf_status_code(s) == QF_OK;
    qf_status_free(s);
    return NULL;
}

static void fresh_thread_check(void)
{
    pthread_t t;
    int ok = 0;
    cr_assert_eq(pthread_create(&t, NULL, fresh_thread_last, &ok), 0);
    pthread_join(t, NULL);
    cr_expect(ok, "a fresh thread's last error is OK and empty");
}

Test(bad_input, qf_last_code)
{
    fresh_thread_check(); /* no argument: what there is before any failure */
}

Test(bad_input, qf_last_message)
{
    fresh_thread_check();
}

Test(bad_input, qf_last_status)
{
    fresh_thread_check();
}

Test(bad_input, qf_set_error)
{
    INVALID(qf_set_error((qf_code)777, "what I meant"), "code 777");
    cr_expect(strstr(qf_last_message(), "what I meant") != NULL, "%s", qf_last_message());
    INVALID(qf_set_error((qf_code)-2, "x"), "code -2");
    INVALID(qf_set_error(QF_NOT_FOUND, NULL), "fmt");
}

/* ============================================================ qf_time.h */

Test(bad_input, qf_now_ns)
{
    int64_t a = qf_now_ns(), b = qf_now_ns();
    cr_expect_geq(b, a, "monotonic");
}

Test(bad_input, qf_deadline_in_ns)
{
    cr_expect_eq(qf_deadline_in_ns(-5), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_ns(INT64_MIN), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_ns(INT64_MAX), QF_FOREVER, "saturates");
}

Test(bad_input, qf_deadline_in_s)
{
    cr_expect_eq(qf_deadline_in_s(NAN), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(-INFINITY), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(-1.0), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(INFINITY), QF_FOREVER);
    cr_expect_eq(qf_deadline_in_s(1e300), QF_FOREVER);
}

Test(bad_input, qf_deadline_passed)
{
    cr_expect(qf_deadline_passed(-7), "any other negative deadline is in the past");
    cr_expect(qf_deadline_passed(QF_NO_WAIT));
    cr_expect_not(qf_deadline_passed(QF_FOREVER));
}

Test(bad_input, qf_deadline_min)
{
    cr_expect_eq(qf_deadline_min(QF_FOREVER, QF_FOREVER), QF_FOREVER);
    cr_expect_eq(qf_deadline_min(-7, QF_FOREVER), -7);
    cr_expect_eq(qf_deadline_min(INT64_MAX, 5), 5);
}

/* =========================================================== qf_futex.h */

Test(bad_input, qf_futex_wait)
{
    INVALID(qf_futex_wait(NULL, 0, QF_NO_WAIT), "word");
    INVALID(qf_futex_wait(NULL, 0, QF_FOREVER), "word"); /* returns, does not spin */
}

Test(bad_input, qf_futex_wake)
{
    /* async-signal-safe: 0 woken, nothing recorded */
    QUIET(cr_expect_eq(qf_futex_wake(NULL, 1), 0));
    _Atomic uint32_t w = 0;
    QUIET(cr_expect_eq(qf_futex_wake(&w, -3), 0));
}

/* ========================================================== qf_waker.h */

Test(bad_input, qf_waker_init)
{
    REFUSED(qf_waker_init(NULL, noop_wake, NULL), "waker");
}

Test(bad_input, qf_waker_init_thread)
{
    REFUSED(qf_waker_init_thread(NULL), "waker");
}

Test(bad_input, qf_waker_state)
{
    NEUTRAL(qf_waker_state(NULL), QF_WAKER_IDLE, "waker");
}

Test(bad_input, qf_waker_wait)
{
    INVALID(qf_waker_wait(NULL, QF_FOREVER), "waker");
}

Test(bad_input, qf_waker_withdraw)
{
    NEUTRAL(qf_waker_withdraw(NULL), false, "waker");
}

Test(bad_input, qf_waker_consumed)
{
    REFUSED(qf_waker_consumed(NULL), "waker");
}

Test(bad_input, qf_waitlist_init)
{
    REFUSED(qf_waitlist_init(NULL), "wait list");
}

Test(bad_input, qf_waitlist_destroy)
{
    QUIET(qf_waitlist_destroy(NULL));
}

Test(bad_input, qf_waitlist_register)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w;
    qf_waker_init_thread(&w);
    REFUSED(qf_waitlist_register(NULL, &w), "wait list");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE, "the waker was not registered");
    REFUSED(qf_waitlist_register(&wl, NULL), "waker");
    cr_expect_eq(qf_waitlist_count(&wl), 0);
    qf_waitlist_destroy(&wl);
}

Test(bad_input, qf_waitlist_cancel)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_waitlist_register(&wl, &w);
    NEUTRAL(qf_waitlist_cancel(NULL, &w), false, "wait list");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "still registered");
    NEUTRAL(qf_waitlist_cancel(&wl, NULL), false, "waker");
    cr_expect(qf_waitlist_cancel(&wl, &w));
    qf_waitlist_destroy(&wl);
}

Test(bad_input, qf_waitlist_wake)
{
    NEUTRAL(qf_waitlist_wake(NULL, 1), 0, "wait list");
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_waitlist_register(&wl, &w);
    QUIET(cr_expect_eq(qf_waitlist_wake(&wl, 0), 0));
    QUIET(cr_expect_eq(qf_waitlist_wake(&wl, -5), 0));
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "n <= 0 wakes nobody");
    cr_expect(qf_waitlist_cancel(&wl, &w));
    qf_waitlist_destroy(&wl);
}

Test(bad_input, qf_waitlist_count)
{
    NEUTRAL(qf_waitlist_count(NULL), 0u, "wait list");
}

Test(bad_input, qf_eventcount_init)
{
    REFUSED(qf_eventcount_init(NULL), "event count");
}

Test(bad_input, qf_eventcount_prepare)
{
    NEUTRAL(qf_eventcount_prepare(NULL), 0u, "event count");
}

Test(bad_input, qf_eventcount_cancel)
{
    REFUSED(qf_eventcount_cancel(NULL), "event count");
}

Test(bad_input, qf_eventcount_wait)
{
    INVALID(qf_eventcount_wait(NULL, 0, QF_FOREVER), "event count");
}

Test(bad_input, qf_eventcount_notify)
{
    QUIET(qf_eventcount_notify(NULL, true)); /* async-signal-safe: nothing recorded */
}

/* ===================================================== qf_coordinator.h */

Test(bad_input, qf_coord_new)
{
    qf_coord *c = UNTOUCHED;
    INVALID(qf_coord_new(NULL, 0, NULL), "ret_c");
    INVALID(qf_coord_new((qf_code[]){QF_OUT_OF_RANGE, (qf_code)777}, 2, &c), "777");
    INVALID(qf_coord_new((qf_code[]){(qf_code)-1}, 1, &c), "-1");
    cr_expect_eq(c, UNTOUCHED);
}

Test(bad_input, qf_coord_free)
{
    QUIET(qf_coord_free(NULL));
}

Test(bad_input, qf_coord_should_stop)
{
    QUIET(cr_expect_not(qf_coord_should_stop(NULL))); /* async-signal-safe */
}

Test(bad_input, qf_coord_check_stop)
{
    NEUTRAL(qf_coord_check_stop(NULL), false, "coordinator");
}

Test(bad_input, qf_coord_request_stop)
{
    INVALID(qf_coord_request_stop(NULL, qf_status_new(QF_INTERNAL, "x")), "coordinator");
    /* the issue: a code of -7 came out of join as -7 */
    qf_coord *c = mkcoord();
    cr_expect_eq(qf_coord_request_stop(c, qf_status_new((qf_code)-7, "boom")), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "code -7") != NULL, "%s", qf_last_message());
    qf_coord_free(c);
}

Test(bad_input, qf_coord_request_stop_from_signal)
{
    QUIET(qf_coord_request_stop_from_signal(NULL)); /* async-signal-safe */
}

Test(bad_input, qf_coord_report)
{
    /* the issue: qf_coord_report(777) made join return 777 */
    qf_coord *c = mkcoord();
    INVALID(qf_coord_report(c, (qf_code)777), "code 777");
    INVALID(qf_coord_report(c, QF_PENDING), "code -1");
    cr_expect_not(qf_coord_should_stop(c), "no stop was requested");
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "nothing recorded");
    INVALID(qf_coord_report(NULL, QF_INTERNAL), "coordinator");
    qf_coord_free(c);
}

Test(bad_input, qf_coord_wait_for_stop)
{
    NEUTRAL(qf_coord_wait_for_stop(NULL, QF_FOREVER), false, "coordinator");
}

Test(bad_input, qf_coord_clear_stop)
{
    REFUSED(qf_coord_clear_stop(NULL), "coordinator");
}

Test(bad_input, qf_coord_raise_requested_exception)
{
    qf_status *st = UNTOUCHED;
    INVALID(qf_coord_raise_requested_exception(NULL, &st), "coordinator");
    cr_expect_eq(st, UNTOUCHED);
}

Test(bad_input, qf_coord_joined)
{
    NEUTRAL(qf_coord_joined(NULL), false, "coordinator");
}

Test(bad_input, qf_coord_add_stop_action)
{
    qf_coord_action *a = UNTOUCHED;
    INVALID(qf_coord_add_stop_action(NULL, noop_action, NULL, &a), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_add_stop_action(c, NULL, NULL, &a), "fn");
    cr_expect_eq(a, UNTOUCHED);
    qf_coord_free(c);
}

Test(bad_input, qf_coord_remove_stop_action)
{
    qf_coord *c = mkcoord();
    qf_coord_action *a = NULL;
    cr_assert_eq(qf_coord_add_stop_action(c, noop_action, NULL, &a), QF_OK);
    QUIET(qf_coord_remove_stop_action(c, NULL)); /* NULL-safe */
    REFUSED(qf_coord_remove_stop_action(NULL, a), "coordinator");
    qf_coord_remove_stop_action(c, a); /* still there to remove */
    qf_coord_free(c);
}

Test(bad_input, qf_coord_register_waker)
{
    qf_coord *c = mkcoord();
    qf_waker w;
    qf_waker_init_thread(&w);
    NEUTRAL(qf_coord_register_waker(NULL, &w), false, "coordinator");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE);
    NEUTRAL(qf_coord_register_waker(c, NULL), false, "waker");
    qf_coord_free(c);
}

Test(bad_input, qf_coord_cancel_waker)
{
    qf_coord *c = mkcoord();
    qf_waker w;
    qf_waker_init_thread(&w);
    cr_assert(qf_coord_register_waker(c, &w));
    NEUTRAL(qf_coord_cancel_waker(NULL, &w), false, "coordinator");
    NEUTRAL(qf_coord_cancel_waker(c, NULL), false, "waker");
    cr_expect(qf_coord_cancel_waker(c, &w), "still registered");
    qf_coord_free(c);
}

static void *nothing(void *arg)
{
    return arg;
}

Test(bad_input, qf_coord_thread_create)
{
    pthread_t t;
    INVALID(qf_coord_thread_create(NULL, "t", nothing, NULL, &t), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_thread_create(c, "t", NULL, NULL, &t), "fn");
    INVALID(qf_coord_thread_create(c, "t", nothing, NULL, NULL), "ret_thread");
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "no member was added");
    qf_coord_free(c);
}

Test(bad_input, qf_coord_register_thread)
{
    INVALID(qf_coord_register_thread(NULL, pthread_self(), "me"), "coordinator");
}

Test(bad_input, qf_coord_member_new)
{
    qf_coord_member *m = UNTOUCHED;
    INVALID(qf_coord_member_new(NULL, "m", &m), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_member_new(c, "m", NULL), "ret_m");
    cr_expect_eq(m, UNTOUCHED);
    qf_coord_free(c);
}

Test(bad_input, qf_coord_member_done)
{
    QUIET(qf_coord_member_done(NULL));
}

Test(bad_input, qf_coord_join_report_clear)
{
    QUIET(qf_coord_join_report_clear(NULL));
    qf_coord_join_report r = {0};
    QUIET(qf_coord_join_report_clear(&r)); /* a zeroed report is valid */
}

Test(bad_input, qf_coord_join)
{
    qf_coord_join_report r = {.code = (qf_code)99};
    INVALID(qf_coord_join(NULL, NULL, 0, 1.0, false, &r), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_join(c, NULL, 2, 1.0, false, &r), "extra_threads");
    INVALID(qf_coord_join(c, NULL, 0, -1.0, false, &r), "stop_grace_period_secs");
    INVALID(qf_coord_join(c, NULL, 0, NAN, false, &r), "stop_grace_period_secs");
    cr_expect_eq(r.code, (qf_code)99, "the report is untouched");
    cr_expect_not(qf_coord_joined(c), "nothing was joined");
    qf_coord_free(c);
}

/* ========================================================== qf_tensor.h */

static void count_dtor(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

Test(bad_input, qf_dtype_is_valid)
{
    QUIET(cr_expect_not(qf_dtype_is_valid(QF_DT_INVALID)));
    QUIET(cr_expect_not(qf_dtype_is_valid((qf_dtype)11)));
    QUIET(cr_expect_not(qf_dtype_is_valid((qf_dtype)-3)));
}

Test(bad_input, qf_dtype_name)
{
    QUIET(cr_expect_str_eq(qf_dtype_name((qf_dtype)999), "invalid"));
}

Test(bad_input, qf_dtype_size)
{
    QUIET(cr_expect_eq(qf_dtype_size((qf_dtype)999), 0));
}

Test(bad_input, qf_shape_scalar)
{
    qf_shape s = qf_shape_scalar(); /* no argument: the value is what it says */
    cr_expect_eq(s.rank, 0);
    cr_expect(qf_shape_is_fully_defined(&s));
}

Test(bad_input, qf_shape_unknown)
{
    qf_shape s = qf_shape_unknown();
    cr_expect_eq(s.rank, QF_UNKNOWN_RANK);
    cr_expect(qf_shape_is_valid(&s));
}

Test(bad_input, qf_shape_make)
{
    /* documented: an invalid shape, which every shape function refuses */
    QUIET(cr_expect_not(qf_shape_is_valid(&(qf_shape){qf_shape_make(-1, NULL).rank, {0}})));
    qf_shape s = qf_shape_make(QF_MAX_RANK + 1, (const int64_t[QF_MAX_RANK + 1]){0});
    cr_expect_not(qf_shape_is_valid(&s));
    s = qf_shape_make(2, NULL);
    cr_expect_not(qf_shape_is_valid(&s));
    s = qf_shape_make(1, (const int64_t[]){-5});
    cr_expect_not(qf_shape_is_valid(&s));
}

/* NULL is an invalid shape to every shape function (documented). */
Test(bad_input, qf_shape_is_valid)
{
    QUIET(cr_expect_not(qf_shape_is_valid(NULL)));
    qf_shape s = {.rank = 3, .dims = {2, -9, 1}};
    QUIET(cr_expect_not(qf_shape_is_valid(&s)));
}

Test(bad_input, qf_shape_is_fully_defined)
{
    QUIET(cr_expect_not(qf_shape_is_fully_defined(NULL)));
}

Test(bad_input, qf_shape_num_elements)
{
    QUIET(cr_expect_eq(qf_shape_num_elements(NULL), -1));
    qf_shape big = QF_SHAPE(INT64_MAX / 2, 4);
    QUIET(cr_expect_eq(qf_shape_num_elements(&big), -1, "overflow"));
}

Test(bad_input, qf_shape_equal)
{
    qf_shape s = qf_shape_scalar();
    QUIET(cr_expect_not(qf_shape_equal(NULL, &s)));
    QUIET(cr_expect_not(qf_shape_equal(&s, NULL)));
}

Test(bad_input, qf_shape_compatible)
{
    qf_shape s = qf_shape_unknown();
    QUIET(cr_expect_not(qf_shape_compatible(NULL, &s)));
    QUIET(cr_expect_not(qf_shape_compatible(&s, NULL)));
}

Test(bad_input, qf_shape_prepend)
{
    qf_shape s = qf_shape_scalar();
    QUIET(cr_expect_not(qf_shape_is_valid(&(qf_shape){qf_shape_prepend(3, NULL).rank, {0}})));
    qf_shape r = qf_shape_prepend(-7, &s);
    cr_expect_not(qf_shape_is_valid(&r));
    qf_shape full = QF_SHAPE(1, 1, 1, 1, 1, 1, 1, 1);
    r = qf_shape_prepend(2, &full);
    cr_expect_not(qf_shape_is_valid(&r), "above QF_MAX_RANK");
}

Test(bad_input, qf_shape_format)
{
    char buf[32];
    QUIET(cr_expect_str_eq(qf_shape_format(NULL, buf, sizeof(buf)), "<invalid>"));
    qf_shape s = QF_SHAPE(3, 4);
    QUIET(cr_expect_null(qf_shape_format(&s, NULL, 10)));
    buf[0] = 'x';
    QUIET(qf_shape_format(&s, buf, 0));
    cr_expect_eq(buf[0], 'x', "cap 0 writes nothing");
}

Test(bad_input, qf_tensor_new)
{
    qf_shape s = qf_shape_scalar();
    NEUTRAL(qf_tensor_new((qf_dtype)999, &s), NULL, "dtype");
    NEUTRAL(qf_tensor_new(QF_INT64, NULL), NULL, "shape");
    qf_shape unk = QF_SHAPE(QF_UNKNOWN_DIM);
    NEUTRAL(qf_tensor_new(QF_INT64, &unk), NULL, "not fully defined");
    qf_shape bad = {.rank = 12};
    NEUTRAL(qf_tensor_new(QF_INT64, &bad), NULL, "shape");
    qf_shape huge = QF_SHAPE(INT64_MAX / 4, 8);
    clear_last();
    cr_expect_null(qf_tensor_new(QF_INT64, &huge));
    EXPECT_RECORDED(QF_RESOURCE_EXHAUSTED, "overflow");
}

Test(bad_input, qf_tensor_new_ptr)
{
    NEUTRAL(qf_tensor_new_ptr(NULL, NULL), NULL, "shape");
}

Test(bad_input, qf_tensor_new_from)
{
    qf_shape s = QF_SHAPE(2);
    int64_t v[2] = {1, 2};
    NEUTRAL(qf_tensor_new_from(QF_STRING, &s, v, sizeof(v)), NULL, "numeric");
    NEUTRAL(qf_tensor_new_from(QF_INT64, &s, NULL, sizeof(v)), NULL, "NULL");
    NEUTRAL(qf_tensor_new_from(QF_INT64, &s, v, 3), NULL, "bytes");
    NEUTRAL(qf_tensor_new_from(QF_INT64, NULL, v, sizeof(v)), NULL, "shape");
}

/* Scalars of any value are valid: nothing to refuse. */
Test(bad_input, qf_tensor_new_bool)
{
    qf_tensor *t = qf_tensor_new_bool((bool)1);
    cr_expect_eq(((const bool *)qf_tensor_cdata(t))[0], true);
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_new_i32)
{
    qf_tensor *t = qf_tensor_new_i32(INT32_MIN);
    cr_expect_eq(((const int32_t *)qf_tensor_cdata(t))[0], INT32_MIN);
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_new_i64)
{
    qf_tensor *t = qf_tensor_new_i64(INT64_MIN);
    cr_expect_eq(((const int64_t *)qf_tensor_cdata(t))[0], INT64_MIN);
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_new_f32)
{
    qf_tensor *t = qf_tensor_new_f32(NAN);
    cr_expect(isnan(((const float *)qf_tensor_cdata(t))[0]));
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_new_f64)
{
    qf_tensor *t = qf_tensor_new_f64(-INFINITY);
    cr_expect(isinf(((const double *)qf_tensor_cdata(t))[0]));
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_new_string)
{
    NEUTRAL(qf_tensor_new_string(NULL, 5), NULL, "NULL");
    qf_tensor *t = qf_tensor_new_string(NULL, 0); /* the empty string */
    cr_expect_not_null(t);
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_new_cstr)
{
    NEUTRAL(qf_tensor_new_cstr(NULL), NULL, "String");
}

Test(bad_input, qf_tensor_new_scalar_ptr)
{
    qf_tensor *t = qf_tensor_new_scalar_ptr(NULL, NULL); /* a NULL object is a value */
    cr_expect_not_null(t);
    cr_expect_null(qf_tensor_ptr(t, 0));
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_ref)
{
    QUIET(cr_expect_null(qf_tensor_ref(NULL)));
}

Test(bad_input, qf_tensor_unref)
{
    QUIET(qf_tensor_unref(NULL));
}

Test(bad_input, qf_tensor_refcount)
{
    NEUTRAL(qf_tensor_refcount(NULL), 0u, "tensor");
}

Test(bad_input, qf_tensor_dtype)
{
    NEUTRAL(qf_tensor_dtype(NULL), QF_DT_INVALID, "tensor");
}

Test(bad_input, qf_tensor_shape)
{
    NEUTRAL(qf_tensor_shape(NULL), NULL, "tensor");
}

Test(bad_input, qf_tensor_num_elements)
{
    NEUTRAL(qf_tensor_num_elements(NULL), -1, "tensor");
}

Test(bad_input, qf_tensor_data)
{
    NEUTRAL(qf_tensor_data(NULL), NULL, "tensor");
}

Test(bad_input, qf_tensor_cdata)
{
    NEUTRAL(qf_tensor_cdata(NULL), NULL, "tensor");
}

Test(bad_input, qf_tensor_ptr_dtor)
{
    NEUTRAL(qf_tensor_ptr_dtor(NULL), NULL, "tensor");
}

Test(bad_input, qf_tensor_string)
{
    size_t len = 77;
    NEUTRAL(qf_tensor_string(NULL, 0, &len), NULL, "Tensor");
    qf_tensor *s = qf_tensor_new_cstr("abc"), *i = qf_tensor_new_i64(1);
    NEUTRAL(qf_tensor_string(s, 1, &len), NULL, "out of range");
    NEUTRAL(qf_tensor_string(s, -1, &len), NULL, "out of range");
    NEUTRAL(qf_tensor_string(i, 0, &len), NULL, "string");
    cr_expect_eq(len, 77, "ret_len untouched");
    qf_tensor_unref(s);
    qf_tensor_unref(i);
}

Test(bad_input, qf_tensor_set_string)
{
    INVALID(qf_tensor_set_string(NULL, 0, "x", 1), "Tensor");
    qf_tensor *s = qf_tensor_new_cstr("abc");
    INVALID(qf_tensor_set_string(s, 3, "x", 1), "out of range");
    INVALID(qf_tensor_set_string(s, 0, NULL, 2), "NULL");
    qf_tensor_ref(s);
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_tensor_set_string(s, 0, "x", 1), "shared");
    qf_tensor_unref(s);
    cr_expect_str_eq(qf_tensor_string(s, 0, NULL), "abc", "unchanged");
    qf_tensor_unref(s);
}

Test(bad_input, qf_tensor_ptr)
{
    NEUTRAL(qf_tensor_ptr(NULL, 0), NULL, "Tensor");
    qf_tensor *p = qf_tensor_new_scalar_ptr(&p, NULL);
    NEUTRAL(qf_tensor_ptr(p, 1), NULL, "out of range");
    qf_tensor_unref(p);
}

Test(bad_input, qf_tensor_set_ptr)
{
    INVALID(qf_tensor_set_ptr(NULL, 0, NULL), "Tensor");
    qf_tensor *i = qf_tensor_new_i64(3);
    INVALID(qf_tensor_set_ptr(i, 0, &i), "ptr");
    qf_tensor_unref(i);
}

Test(bad_input, qf_tensor_take_ptr)
{
    void *got = UNTOUCHED;
    INVALID(qf_tensor_take_ptr(NULL, 0, &got), "Tensor");
    atomic_int freed = 0;
    qf_tensor *p = qf_tensor_new_scalar_ptr(&freed, count_dtor);
    INVALID(qf_tensor_take_ptr(p, 0, NULL), "ret_p");
    INVALID(qf_tensor_take_ptr(p, 5, &got), "out of range");
    cr_expect_eq(got, UNTOUCHED);
    qf_tensor_unref(p);
    cr_expect_eq(atomic_load(&freed), 1, "the object stayed with the tensor");
}

Test(bad_input, qf_tensor_equal)
{
    qf_tensor *t = qf_tensor_new_i64(1);
    QUIET(cr_expect_not(qf_tensor_equal(NULL, t)));
    QUIET(cr_expect_not(qf_tensor_equal(t, NULL)));
    qf_tensor_unref(t);
}

Test(bad_input, qf_tensor_copy)
{
    NEUTRAL(qf_tensor_copy(NULL), NULL, "Tensor");
    atomic_int freed = 0;
    qf_tensor *p = qf_tensor_new_scalar_ptr(&freed, count_dtor);
    clear_last();
    cr_expect_null(qf_tensor_copy(p));
    EXPECT_RECORDED(QF_FAILED_PRECONDITION, "owns");
    qf_tensor_unref(p);
}

Test(bad_input, qf_tensor_stack)
{
    qf_shape s = qf_shape_scalar();
    qf_tensor *out = UNTOUCHED;
    INVALID(qf_tensor_stack(NULL, 2, QF_INT64, &s, &out), "parts");
    qf_tensor *parts[2] = {qf_tensor_new_i64(1), qf_tensor_new_i64(2)};
    INVALID(qf_tensor_stack(parts, 2, QF_INT64, &s, NULL), "ret_batch"); /* parts consumed */
    qf_tensor *withnull[2] = {qf_tensor_new_i64(1), NULL};
    INVALID(qf_tensor_stack(withnull, 2, QF_INT64, &s, &out), "NULL");
    qf_tensor *mixed[2] = {qf_tensor_new_i64(1), qf_tensor_new_f64(2)};
    INVALID(qf_tensor_stack(mixed, 2, QF_INT64, &s, &out), "");
    INVALID(qf_tensor_stack(NULL, 0, QF_INT64, NULL, &out), "shape");
    cr_expect_eq(out, UNTOUCHED, "ret_batch untouched on failure");
}

Test(bad_input, qf_tensor_stack_padded)
{
    qf_shape pad = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_tensor *out = UNTOUCHED;
    INVALID(qf_tensor_stack_padded(NULL, 1, QF_INT64, &pad, &out), "parts");
    qf_tensor *parts[1] = {qf_tensor_new_i64(1)};
    INVALID(qf_tensor_stack_padded(parts, 1, QF_INT64, &pad, &out), ""); /* rank differs */
    qf_tensor *p2[1] = {qf_tensor_new_i64(1)};
    INVALID(qf_tensor_stack_padded(p2, 1, QF_INT64, &pad, NULL), "ret_batch");
    cr_expect_eq(out, UNTOUCHED);
}

Test(bad_input, qf_tensor_unstack)
{
    qf_tensor *parts[4];
    INVALID(qf_tensor_unstack(NULL, parts), "NULL");
    INVALID(qf_tensor_unstack(qf_tensor_new_i64(1), parts), "scalar"); /* consumed */
    qf_shape s = QF_SHAPE(2);
    INVALID(qf_tensor_unstack(qf_tensor_new(QF_INT64, &s), NULL), "ret_parts");
}

Test(bad_input, qf_tensor_slice)
{
    NEUTRAL(qf_tensor_slice(NULL, 0), NULL, "NULL");
    qf_tensor *sc = qf_tensor_new_i64(1);
    NEUTRAL(qf_tensor_slice(sc, 0), NULL, "scalar");
    qf_tensor_unref(sc);
    qf_shape s = QF_SHAPE(2);
    qf_tensor *v = qf_tensor_new(QF_INT64, &s);
    NEUTRAL(qf_tensor_slice(v, 2), NULL, "Slice index");
    NEUTRAL(qf_tensor_slice(v, -1), NULL, "Slice index");
    qf_tensor_unref(v);
}

Test(bad_input, qf_element_new)
{
    NEUTRAL(qf_element_new(0), NULL, "components");
    NEUTRAL(qf_element_new(4097), NULL, "components");
    NEUTRAL(qf_element_new(SIZE_MAX), NULL, "components");
}

Test(bad_input, qf_element_of)
{
    NEUTRAL(qf_element_of(2, NULL), NULL, "tensors");
    NEUTRAL(qf_element_of(0, NULL), NULL, "components");
    atomic_int freed = 0;
    qf_tensor *t = qf_tensor_new_scalar_ptr(&freed, count_dtor);
    qf_tensor *many[4097] = {t}; /* taken also on failure */
    NEUTRAL(qf_element_of(4097, many), NULL, "components");
    cr_expect_eq(atomic_load(&freed), 1);
}

Test(bad_input, qf_element_free)
{
    QUIET(qf_element_free(NULL));
}

Test(bad_input, qf_element_size)
{
    NEUTRAL(qf_element_size(NULL), 0, "Element");
}

Test(bad_input, qf_element_set)
{
    atomic_int freed = 0;
    INVALID(qf_element_set(NULL, 0, qf_tensor_new_scalar_ptr(&freed, count_dtor)), "Element");
    cr_expect_eq(atomic_load(&freed), 1, "the tensor is taken also on failure");
    qf_element *e = mkelem(1);
    INVALID(qf_element_set(e, 1, qf_tensor_new_scalar_ptr(&freed, count_dtor)), "out of range");
    cr_expect_eq(atomic_load(&freed), 2);
    cr_expect_eq(((const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)))[0], 1, "unchanged");
    qf_element_free(e);
}

Test(bad_input, qf_element_get)
{
    NEUTRAL(qf_element_get(NULL, 0), NULL, "Element");
    qf_element *e = mkelem(1);
    NEUTRAL(qf_element_get(e, 3), NULL, "out of range");
    qf_element_free(e);
}

Test(bad_input, qf_element_take)
{
    NEUTRAL(qf_element_take(NULL, 0), NULL, "Element");
    qf_element *e = mkelem(1);
    NEUTRAL(qf_element_take(e, 1), NULL, "out of range");
    cr_expect_not_null(qf_element_get(e, 0), "unchanged");
    qf_element_free(e);
}

Test(bad_input, qf_element_set_names)
{
    INVALID(qf_element_set_names(NULL, (const char *[]){"a"}), "Element");
    qf_tensor *ts[2] = {qf_tensor_new_i64(1), qf_tensor_new_i64(2)};
    qf_element *e = qf_element_of(2, ts);
    cr_assert_eq(qf_element_set_names(e, (const char *[]){"a", "b"}), QF_OK);
    INVALID(qf_element_set_names(e, (const char *[]){"a", "a"}), "Duplicate");
    INVALID(qf_element_set_names(e, (const char *[]){"a", NULL}), "empty");
    INVALID(qf_element_set_names(e, (const char *[]){"", "b"}), "empty");
    cr_expect_str_eq(qf_element_name(e, 1), "b", "the old names stay");
    qf_element_free(e);
}

Test(bad_input, qf_element_has_names)
{
    NEUTRAL(qf_element_has_names(NULL), false, "Element");
}

Test(bad_input, qf_element_name)
{
    NEUTRAL(qf_element_name(NULL, 0), NULL, "Element");
    qf_element *e = mkelem(1);
    QUIET(cr_expect_null(qf_element_name(e, 0))); /* documented: unnamed */
    qf_element_free(e);
}

Test(bad_input, qf_element_get_by_name)
{
    NEUTRAL(qf_element_get_by_name(NULL, "a"), NULL, "Element");
    qf_element *e = mkelem(1);
    cr_assert_eq(qf_element_set_names(e, (const char *[]){"a"}), QF_OK);
    NEUTRAL(qf_element_get_by_name(e, NULL), NULL, "name");
    QUIET(cr_expect_null(qf_element_get_by_name(e, "zz"))); /* documented: none */
    qf_element_free(e);
}

/* =========================================================== qf_queue.h */

static qf_queue_options i64_opts(void)
{
    static const qf_shape sh[1] = {{0, {0}}};
    return (qf_queue_options){
        .capacity = 4, .num_components = 1, .dtypes = &I64, .shapes = sh, .name = "q"};
}

/* The option errors every constructor shares. */
static void bad_options(qf_code (*make)(const qf_queue_options *, qf_queue **))
{
    qf_queue *q = UNTOUCHED;
    INVALID(make(NULL, &q), "options");
    qf_queue_options o = i64_opts();
    INVALID(make(&o, NULL), "ret_q");
    o.num_components = 0;
    INVALID(make(&o, &q), "Empty component types");
    o = i64_opts();
    o.dtypes = NULL;
    INVALID(make(&o, &q), "Empty component types");
    /* the issue: unknown flag bits were accepted */
    o = i64_opts();
    o.flags = 1u << 7;
    INVALID(make(&o, &q), "flags");
    /* ... and a queue of 5,000 components, more than an element holds */
    o = i64_opts();
    qf_dtype *many = calloc(5000, sizeof(*many));
    for (int i = 0; i < 5000; i++)
        many[i] = QF_INT64;
    qf_shape *scalars = calloc(5000, sizeof(*scalars));
    o.dtypes = many;
    o.shapes = scalars;
    o.num_components = 5000;
    INVALID(make(&o, &q), "num_components");
    free(many);
    free(scalars);
    o = i64_opts();
    o.capacity = 0;
    INVALID(make(&o, &q), "capacity");
    o.capacity = (int64_t)INT32_MAX + 1;
    INVALID(make(&o, &q), "capacity");
    o = i64_opts();
    o.dtypes = (const qf_dtype[]){(qf_dtype)55};
    INVALID(make(&o, &q), "dtype");
    o = i64_opts();
    o.names = (const char *const[]){""};
    INVALID(make(&o, &q), "name");
    cr_expect_eq(q, UNTOUCHED, "ret_q untouched");
}

Test(bad_input, qf_fifo_queue_new)
{
    bad_options(qf_fifo_queue_new);
    qf_queue *q = UNTOUCHED;
    qf_queue_options o = i64_opts();
    o.shapes = (const qf_shape[]){QF_SHAPE(QF_UNKNOWN_DIM)};
    INVALID(qf_fifo_queue_new(&o, &q), "fully defined");
    /* the issue: a shared name reused with different component names was
     * accepted (the second handle silently got the first one's names) */
    qf_queue_registry *reg = NULL;
    cr_assert_eq(qf_queue_registry_new(&reg), QF_OK);
    qf_queue *first = NULL;
    o = i64_opts();
    o.shared_name = "shared";
    o.registry = reg;
    o.names = (const char *const[]){"a"};
    cr_assert_eq(qf_fifo_queue_new(&o, &first), QF_OK);
    o.names = (const char *const[]){"b"};
    INVALID(qf_fifo_queue_new(&o, &q), "component names");
    o.names = NULL; /* no names asked for: attaches */
    qf_queue *second = NULL;
    cr_expect_eq(qf_fifo_queue_new(&o, &second), QF_OK);
    cr_expect_eq(second, first);
    qf_queue_unref(second);
    qf_queue_unref(first);
    qf_queue_registry_free(reg);
    cr_expect_eq(q, UNTOUCHED);
}

Test(bad_input, qf_random_shuffle_queue_new)
{
    bad_options(qf_random_shuffle_queue_new);
    qf_queue *q = UNTOUCHED;
    qf_queue_options o = i64_opts();
    o.min_after_dequeue = -1;
    INVALID(qf_random_shuffle_queue_new(&o, &q), "min_after_dequeue");
    o.min_after_dequeue = 4;
    INVALID(qf_random_shuffle_queue_new(&o, &q), "min_after_dequeue");
    cr_expect_eq(q, UNTOUCHED);
}

Test(bad_input, qf_padding_fifo_queue_new)
{
    bad_options(qf_padding_fifo_queue_new);
    qf_queue *q = UNTOUCHED;
    qf_queue_options o = i64_opts();
    o.shapes = NULL;
    INVALID(qf_padding_fifo_queue_new(&o, &q), "shape");
    o.shapes = (const qf_shape[]){{QF_UNKNOWN_RANK, {0}}};
    INVALID(qf_padding_fifo_queue_new(&o, &q), "rank");
    cr_expect_eq(q, UNTOUCHED);
}

Test(bad_input, qf_priority_queue_new)
{
    qf_queue *q = UNTOUCHED;
    INVALID(qf_priority_queue_new(NULL, &q), "options");
    qf_queue_options o = i64_opts();
    INVALID(qf_priority_queue_new(&o, NULL), "ret_q");
    o.flags = 1u << 9;
    INVALID(qf_priority_queue_new(&o, &q), "flags");
    o = i64_opts();
    qf_dtype many[4096];
    for (int i = 0; i < 4096; i++)
        many[i] = QF_INT64;
    o.dtypes = many;
    o.shapes = NULL;
    o.num_components = 4096; /* plus the priority: one too many */
    INVALID(qf_priority_queue_new(&o, &q), "num_components");
    o.num_components = SIZE_MAX;
    INVALID(qf_priority_queue_new(&o, &q), "num_components");
    cr_expect_eq(q, UNTOUCHED);
}

Test(bad_input, qf_queue_registry_new)
{
    INVALID(qf_queue_registry_new(NULL), "ret_reg");
}

Test(bad_input, qf_queue_registry_free)
{
    QUIET(qf_queue_registry_free(NULL));
    QUIET(qf_queue_registry_free(qf_queue_registry_default())); /* never freed */
}

Test(bad_input, qf_queue_registry_default)
{
    cr_expect_not_null(qf_queue_registry_default()); /* no argument */
}

Test(bad_input, qf_queue_registry_lookup)
{
    NEUTRAL(qf_queue_registry_lookup(NULL, NULL), NULL, "shared_name");
    QUIET(cr_expect_null(qf_queue_registry_lookup(NULL, "no such queue"))); /* NULL: default */
}

Test(bad_input, qf_queue_registry_remove)
{
    NEUTRAL(qf_queue_registry_remove(NULL, NULL), false, "shared_name");
    QUIET(cr_expect_not(qf_queue_registry_remove(NULL, "no such queue")));
}

Test(bad_input, qf_queue_shared_name)
{
    NEUTRAL(qf_queue_shared_name(NULL), NULL, "queue");
}

Test(bad_input, qf_queue_min_after_dequeue)
{
    NEUTRAL(qf_queue_min_after_dequeue(NULL), 0, "queue");
}

Test(bad_input, qf_ptr_queue_new)
{
    qf_queue *q = UNTOUCHED;
    INVALID(qf_ptr_queue_new(0, "p", 0, NULL, &q), "capacity");
    INVALID(qf_ptr_queue_new(4, "p", 0x40, NULL, &q), "flags");
    INVALID(qf_ptr_queue_new(4, "p", 0, NULL, NULL), "ret_q");
    cr_expect_eq(q, UNTOUCHED);
}

Test(bad_input, qf_queue_ref)
{
    QUIET(cr_expect_null(qf_queue_ref(NULL)));
}

Test(bad_input, qf_queue_unref)
{
    QUIET(qf_queue_unref(NULL));
}

/* The issue: name, capacity and num_components segfaulted on NULL while
 * size returned 0. */
Test(bad_input, qf_queue_name)
{
    NEUTRAL(qf_queue_name(NULL), NULL, "queue");
}

Test(bad_input, qf_queue_get_kind)
{
    NEUTRAL(qf_queue_get_kind(NULL), QF_QUEUE_FIFO, "queue");
}

Test(bad_input, qf_queue_kind_name)
{
    NEUTRAL(qf_queue_kind_name(NULL), NULL, "queue");
}

Test(bad_input, qf_queue_capacity)
{
    NEUTRAL(qf_queue_capacity(NULL), 0, "queue");
}

Test(bad_input, qf_queue_num_components)
{
    NEUTRAL(qf_queue_num_components(NULL), 0, "queue");
}

Test(bad_input, qf_queue_dtype)
{
    NEUTRAL(qf_queue_dtype(NULL, 0), QF_DT_INVALID, "queue");
    qf_queue *q = mkq(2);
    QUIET(cr_expect_eq(qf_queue_dtype(q, 1), QF_DT_INVALID)); /* out of range: documented */
    qf_queue_unref(q);
}

Test(bad_input, qf_queue_shape)
{
    NEUTRAL(qf_queue_shape(NULL, 0), NULL, "queue");
    qf_queue *q = mkq(2);
    QUIET(cr_expect_null(qf_queue_shape(q, 9)));
    qf_queue_unref(q);
}

Test(bad_input, qf_queue_component_name)
{
    NEUTRAL(qf_queue_component_name(NULL, 0), NULL, "queue");
}

Test(bad_input, qf_queue_is_inline)
{
    NEUTRAL(qf_queue_is_inline(NULL), false, "queue");
}

Test(bad_input, qf_queue_ptr_dtor)
{
    NEUTRAL(qf_queue_ptr_dtor(NULL), NULL, "queue");
}

Test(bad_input, qf_queue_size)
{
    NEUTRAL(qf_queue_size(NULL), 0, "queue");
}

Test(bad_input, qf_queue_is_closed)
{
    NEUTRAL(qf_queue_is_closed(NULL), false, "queue");
}

Test(bad_input, qf_queue_close)
{
    INVALID(qf_queue_close(NULL, false), "queue");
    INVALID(qf_queue_close(NULL, true), "queue");
}

/* An enqueue form refuses a NULL queue, a NULL element, and an element that
 * does not match; the queue stays as it was and the element is the
 * caller's. */
static void bad_enqueue(qf_code (*enq)(qf_queue *, qf_element *, void *), void *arg)
{
    qf_queue *q = mkq(4);
    qf_element *e = mkelem(1);
    INVALID(enq(NULL, e, arg), "queue");
    INVALID(enq(q, NULL, arg), "element");
    qf_tensor *two[2] = {qf_tensor_new_i64(1), qf_tensor_new_i64(2)};
    qf_element *e2 = qf_element_of(2, two);
    INVALID(enq(q, e2, arg), "Wrong number of components");
    qf_element *ef = qf_element_of(1, (qf_tensor *[]){qf_tensor_new_f64(1)});
    INVALID(enq(q, ef, arg), "Type mismatch");
    cr_expect_eq(qf_queue_size(q), 0, "nothing went in");
    qf_element_free(e);
    qf_element_free(e2);
    qf_element_free(ef);
    qf_queue_unref(q);
}

static qf_code enq_plain(qf_queue *q, qf_element *e, void *arg)
{
    (void)arg;
    return qf_queue_enqueue(q, e);
}
static qf_code enq_until(qf_queue *q, qf_element *e, void *arg)
{
    (void)arg;
    return qf_queue_enqueue_until(q, e, soon());
}
static qf_code enq_try(qf_queue *q, qf_element *e, void *arg)
{
    (void)arg;
    return qf_queue_try_enqueue(q, e);
}
static qf_code enq_poll(qf_queue *q, qf_element *e, void *arg)
{
    return qf_queue_poll_enqueue(q, e, arg);
}

Test(bad_input, qf_queue_enqueue)
{
    bad_enqueue(enq_plain, NULL);
}

Test(bad_input, qf_queue_enqueue_until)
{
    bad_enqueue(enq_until, NULL);
}

Test(bad_input, qf_queue_try_enqueue)
{
    bad_enqueue(enq_try, NULL);
}

Test(bad_input, qf_queue_poll_enqueue)
{
    qf_waker w;
    qf_waker_init_thread(&w);
    bad_enqueue(enq_poll, &w);
    qf_queue *q = mkq(1);
    qf_element *e = mkelem(1);
    INVALID(qf_queue_poll_enqueue(q, e, NULL), "waker");
    cr_expect_eq(qf_queue_size(q), 0);
    qf_element_free(e);
    qf_queue_unref(q);
}

static qf_element *batch_of(int64_t rows)
{
    qf_shape sh = QF_SHAPE(rows);
    return qf_element_of(1, (qf_tensor *[]){qf_tensor_new(QF_INT64, &sh)});
}

static void bad_enqueue_many(int form)
{
    qf_queue *q = mkq(4);
    qf_element *b = batch_of(2);
    size_t done = 99;
    qf_code (*call)(qf_queue *, qf_element *, size_t *) = NULL;
#define MANY(qq, bb)                                                                               \
    (form == 0   ? qf_queue_enqueue_many(qq, bb, &done)                                            \
     : form == 1 ? qf_queue_enqueue_many_until(qq, bb, soon(), &done)                              \
                 : qf_queue_try_enqueue_many(qq, bb))
    (void)call;
    INVALID(MANY(NULL, b), "queue");
    INVALID(MANY(q, NULL), "");
    qf_element *scalar = mkelem(5);
    INVALID(MANY(q, scalar), "rank");
    qf_element *mixed = qf_element_of(1, (qf_tensor *[]){qf_tensor_new_f64(1)});
    INVALID(MANY(q, mixed), "");
#undef MANY
    cr_expect_eq(qf_queue_size(q), 0, "nothing went in");
    cr_expect_eq(qf_element_size(b), 1, "the batch is the caller's");
    qf_element_free(b);
    qf_element_free(scalar);
    qf_element_free(mixed);
    qf_queue_unref(q);
}

Test(bad_input, qf_queue_enqueue_many)
{
    bad_enqueue_many(0);
}

Test(bad_input, qf_queue_enqueue_many_until)
{
    bad_enqueue_many(1);
}

Test(bad_input, qf_queue_try_enqueue_many)
{
    bad_enqueue_many(2);
}

/* A dequeue form refuses NULL queue and output; nothing is taken. */
static void bad_dequeue(int form)
{
    qf_queue *q = mkq(4);
    cr_assert_eq(qf_queue_enqueue(q, mkelem(1)), QF_OK);
    qf_element *e = UNTOUCHED;
    qf_waker w;
    qf_waker_init_thread(&w);
#define DEQ(qq, ret)                                                                               \
    (form == 0   ? qf_queue_dequeue(qq, ret)                                                       \
     : form == 1 ? qf_queue_dequeue_until(qq, soon(), ret)                                         \
     : form == 2 ? qf_queue_try_dequeue(qq, ret)                                                   \
                 : qf_queue_poll_dequeue(qq, &w, ret))
    INVALID(DEQ(NULL, &e), "queue");
    INVALID(DEQ(q, NULL), "ret_elem");
#undef DEQ
    cr_expect_eq(e, UNTOUCHED);
    cr_expect_eq(qf_queue_size(q), 1, "nothing was taken");
    qf_queue_unref(q);
}

Test(bad_input, qf_queue_dequeue)
{
    bad_dequeue(0);
}

Test(bad_input, qf_queue_dequeue_until)
{
    bad_dequeue(1);
}

Test(bad_input, qf_queue_try_dequeue)
{
    bad_dequeue(2);
}

Test(bad_input, qf_queue_poll_dequeue)
{
    bad_dequeue(3);
    qf_queue *q = mkq(1);
    qf_element *e = UNTOUCHED;
    INVALID(qf_queue_poll_dequeue(q, NULL, &e), "waker");
    cr_expect_eq(e, UNTOUCHED);
    qf_queue_unref(q);
}

/* dequeue_many / dequeue_up_to: n < 0, NULL output, no shapes, and the
 * PriorityQueue's n > capacity. */
static void bad_dequeue_batch(bool up_to, int form)
{
    qf_queue *q = mkq(4);
    cr_assert_eq(qf_queue_enqueue(q, mkelem(1)), QF_OK);
    qf_element *b = UNTOUCHED;
#define DEQB(qq, n, ret)                                                                            \
    (form == 0   ? (up_to ? qf_queue_dequeue_up_to(qq, n, ret) : qf_queue_dequeue_many(qq, n, ret)) \
     : form == 1 ? (up_to ? qf_queue_dequeue_up_to_until(qq, n, soon(), ret)                        \
                          : qf_queue_dequeue_many_until(qq, n, soon(), ret))                        \
                 : (up_to ? qf_queue_try_dequeue_up_to(qq, n, ret)                                  \
                          : qf_queue_try_dequeue_many(qq, n, ret)))
    INVALID(DEQB(NULL, 1, &b), "queue");
    INVALID(DEQB(q, 1, NULL), "ret_batch");
    INVALID(DEQB(q, -1, &b), "< 0");
    cr_expect_eq(qf_queue_size(q), 1, "nothing was taken");
    qf_queue_unref(q);
    /* no shapes (spec 20) */
    qf_queue_options o = i64_opts();
    o.shapes = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
    INVALID(DEQB(q, 1, &b), "shapes");
    qf_queue_unref(q);
    /* the issue: a PriorityQueue's dequeue_many(n > capacity) waited
     * forever on an open queue (spec 103: it can never complete) */
    o = i64_opts();
    cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
    if (!up_to)
        INVALID(DEQB(q, 5, &b), "capacity");
    else /* dequeue_up_to can: it returns what is left once closed */
        cr_expect_eq(qf_queue_try_dequeue_up_to(q, 5, &b), QF_UNAVAILABLE);
#undef DEQB
    qf_queue_unref(q);
    cr_expect_eq(b, UNTOUCHED);
}

Test(bad_input, qf_queue_dequeue_many)
{
    bad_dequeue_batch(false, 0);
}

Test(bad_input, qf_queue_dequeue_many_until)
{
    bad_dequeue_batch(false, 1);
}

Test(bad_input, qf_queue_try_dequeue_many)
{
    bad_dequeue_batch(false, 2);
}

Test(bad_input, qf_queue_dequeue_up_to)
{
    bad_dequeue_batch(true, 0);
}

Test(bad_input, qf_queue_dequeue_up_to_until)
{
    bad_dequeue_batch(true, 1);
}

Test(bad_input, qf_queue_try_dequeue_up_to)
{
    bad_dequeue_batch(true, 2);
}

/* The pointer calls refuse a queue that is not a pointer queue. */
static void bad_enqueue_ptr(int form)
{
    qf_queue *q = mkq(4), *pq = mkptrq();
    qf_waker w;
    qf_waker_init_thread(&w);
    int x;
#define ENQP(qq)                                                                                   \
    (form == 0   ? qf_queue_enqueue_ptr(qq, &x)                                                    \
     : form == 1 ? qf_queue_enqueue_ptr_until(qq, &x, soon())                                      \
     : form == 2 ? qf_queue_try_enqueue_ptr(qq, &x)                                                \
                 : qf_queue_poll_enqueue_ptr(qq, &x, &w))
    INVALID(ENQP(NULL), "queue");
    INVALID(ENQP(q), "pointer queue");
#undef ENQP
    if (form == 3)
        INVALID(qf_queue_poll_enqueue_ptr(pq, &x, NULL), "waker");
    cr_expect_eq(qf_queue_size(q) + qf_queue_size(pq), 0);
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

Test(bad_input, qf_queue_enqueue_ptr)
{
    bad_enqueue_ptr(0);
}

Test(bad_input, qf_queue_enqueue_ptr_until)
{
    bad_enqueue_ptr(1);
}

Test(bad_input, qf_queue_try_enqueue_ptr)
{
    bad_enqueue_ptr(2);
}

Test(bad_input, qf_queue_poll_enqueue_ptr)
{
    bad_enqueue_ptr(3);
}

static void bad_dequeue_ptr(int form)
{
    qf_queue *q = mkq(4), *pq = mkptrq();
    int x;
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    qf_waker w;
    qf_waker_init_thread(&w);
    void *p = UNTOUCHED;
#define DEQP(qq, ret)                                                                              \
    (form == 0   ? qf_queue_dequeue_ptr(qq, ret)                                                   \
     : form == 1 ? qf_queue_dequeue_ptr_until(qq, soon(), ret)                                     \
     : form == 2 ? qf_queue_try_dequeue_ptr(qq, ret)                                               \
                 : qf_queue_poll_dequeue_ptr(qq, &w, ret))
    INVALID(DEQP(NULL, &p), "queue");
    INVALID(DEQP(q, &p), "pointer queue");
    INVALID(DEQP(pq, NULL), "ret_p");
#undef DEQP
    cr_expect_eq(p, UNTOUCHED);
    cr_expect_eq(qf_queue_size(pq), 1, "nothing was taken");
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

Test(bad_input, qf_queue_dequeue_ptr)
{
    bad_dequeue_ptr(0);
}

Test(bad_input, qf_queue_dequeue_ptr_until)
{
    bad_dequeue_ptr(1);
}

Test(bad_input, qf_queue_try_dequeue_ptr)
{
    bad_dequeue_ptr(2);
}

Test(bad_input, qf_queue_poll_dequeue_ptr)
{
    bad_dequeue_ptr(3);
    qf_queue *pq = mkptrq();
    void *p = UNTOUCHED;
    INVALID(qf_queue_poll_dequeue_ptr(pq, NULL, &p), "waker");
    cr_expect_eq(p, UNTOUCHED);
    qf_queue_unref(pq);
}

Test(bad_input, qf_queue_enqueue_many_ptr)
{
    qf_queue *q = mkq(4), *pq = mkptrq();
    int x;
    void *ps[2] = {&x, &x};
    size_t done = 77;
    INVALID(qf_queue_enqueue_many_ptr(NULL, ps, 2, QF_NO_WAIT, &done), "queue");
    INVALID(qf_queue_enqueue_many_ptr(q, ps, 2, QF_NO_WAIT, &done), "pointer queue");
    INVALID(qf_queue_enqueue_many_ptr(pq, NULL, 2, QF_NO_WAIT, &done), "NULL");
    cr_expect_eq(qf_queue_size(pq), 0);
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

Test(bad_input, qf_queue_dequeue_many_ptr)
{
    qf_queue *pq = mkptrq();
    int x;
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    void *ps[2] = {UNTOUCHED, UNTOUCHED};
    INVALID(qf_queue_dequeue_many_ptr(NULL, 1, QF_NO_WAIT, ps), "queue");
    INVALID(qf_queue_dequeue_many_ptr(pq, 1, QF_NO_WAIT, NULL), "ret_ps");
    cr_expect_eq(ps[0], UNTOUCHED);
    cr_expect_eq(qf_queue_size(pq), 1);
    qf_queue_unref(pq);
}

Test(bad_input, qf_queue_dequeue_up_to_ptr)
{
    /* the issue: ret_n NULL returned OK and consumed elements */
    qf_queue *pq = mkptrq();
    int x;
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    void *ps[2] = {UNTOUCHED, UNTOUCHED};
    size_t n = 77;
    INVALID(qf_queue_dequeue_up_to_ptr(pq, 2, QF_NO_WAIT, ps, NULL), "ret_n");
    INVALID(qf_queue_dequeue_up_to_ptr(pq, 2, QF_NO_WAIT, NULL, &n), "ret_ps");
    INVALID(qf_queue_dequeue_up_to_ptr(NULL, 2, QF_NO_WAIT, ps, &n), "queue");
    cr_expect_eq(qf_queue_size(pq), 2, "nothing was consumed");
    cr_expect_eq(n, 77);
    cr_expect_eq(ps[0], UNTOUCHED);
    qf_queue_unref(pq);
}

Test(bad_input, qf_queue_cancel_poll)
{
    qf_queue *q = mkq(1);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_poll_dequeue(q, &w, &e), QF_PENDING);
    NEUTRAL(qf_queue_cancel_poll(NULL, &w), false, "queue");
    NEUTRAL(qf_queue_cancel_poll(q, NULL), false, "waker");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "still registered");
    cr_expect(qf_queue_cancel_poll(q, &w));
    qf_queue_unref(q);
}

Test(bad_input, qf_queue_list_new)
{
    qf_queue_list *l = UNTOUCHED;
    qf_queue *a = mkq(2), *b = mkptrq();
    INVALID(qf_queue_list_new(NULL, 2, &l), "empty");
    INVALID(qf_queue_list_new((qf_queue *[]){a}, 0, &l), "empty");
    INVALID(qf_queue_list_new((qf_queue *[]){a, NULL}, 2, &l), "NULL");
    INVALID(qf_queue_list_new((qf_queue *[]){NULL, a}, 2, &l), "NULL");
    INVALID(qf_queue_list_new((qf_queue *[]){a, b}, 2, &l), "different types");
    INVALID(qf_queue_list_new((qf_queue *[]){a}, 1, NULL), "ret_list");
    cr_expect_eq(l, UNTOUCHED);
    qf_queue_unref(a);
    qf_queue_unref(b);
}

Test(bad_input, qf_queue_list_pick)
{
    qf_queue *a = mkq(2);
    qf_queue_list *l = NULL;
    cr_assert_eq(qf_queue_list_new(&a, 1, &l), QF_OK);
    qf_queue *got = UNTOUCHED;
    INVALID(qf_queue_list_pick(NULL, 0, &got), "list");
    INVALID(qf_queue_list_pick(l, 1, &got), "Index 1");
    INVALID(qf_queue_list_pick(l, -1, &got), "Index -1");
    INVALID(qf_queue_list_pick(l, 0, NULL), "ret_queue");
    cr_expect_eq(got, UNTOUCHED);
    qf_queue_list_free(l);
    qf_queue_unref(a);
}

Test(bad_input, qf_queue_list_size)
{
    NEUTRAL(qf_queue_list_size(NULL), 0, "list");
}

Test(bad_input, qf_queue_list_shape)
{
    NEUTRAL(qf_queue_list_shape(NULL, 0), NULL, "list");
}

Test(bad_input, qf_queue_list_free)
{
    QUIET(qf_queue_list_free(NULL));
}

/* ========================================================= qf_runtime.h
 *
 * The scheduler (runtime/sched/) is being reworked by another change; the
 * NULL checks its accessors lack are PENDING there (see the report of this
 * change for the patch). */
#define SCHED_PENDING PENDING("runtime/sched/ (qf_task.c, qf_scheduler.c) is being reworked")

static qf_code bogus_task(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return (qf_code)12345;
}

static qf_code done_task(qf_task *t, void *arg)
{
    (void)t;
    (void)arg;
    return QF_OK;
}

Test(bad_input, qf_runtime_new)
{
    qf_runtime *rt = UNTOUCHED;
    INVALID(qf_runtime_new(NULL, NULL), "ret_rt");
    INVALID(qf_runtime_new(&(qf_runtime_options){.workers = 5000}, &rt), "1024");
    cr_expect_eq(rt, UNTOUCHED);
}

Test(bad_input, qf_runtime_default)
{
    cr_expect_not_null(qf_runtime_default()); /* no argument */
}

Test(bad_input, qf_runtime_shutdown)
{
    INVALID(qf_runtime_shutdown(NULL, QF_NO_WAIT), "runtime");
}

Test(bad_input, qf_runtime_free)
{
    QUIET(qf_runtime_free(NULL));
}

Test(bad_input, qf_runtime_num_workers)
{
    SCHED_PENDING;
    NEUTRAL(qf_runtime_num_workers(NULL), 0, "runtime");
}

Test(bad_input, qf_runtime_num_tasks)
{
    SCHED_PENDING;
    NEUTRAL(qf_runtime_num_tasks(NULL), 0, "runtime");
}

Test(bad_input, qf_runtime_run_once)
{
    qf_runtime *rt = mkrt(1);
    clear_last();
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), -1, "a runtime with workers");
    EXPECT_RECORDED(QF_FAILED_PRECONDITION, "0 workers");
    qf_runtime_free(rt);
    SCHED_PENDING;
    NEUTRAL(qf_runtime_run_once(NULL, QF_NO_WAIT), -1, "runtime");
}

Test(bad_input, qf_runtime_fd)
{
    SCHED_PENDING;
    NEUTRAL(qf_runtime_fd(NULL), -1, "runtime");
}

Test(bad_input, qf_runtime_next_deadline)
{
    SCHED_PENDING;
    NEUTRAL(qf_runtime_next_deadline(NULL), QF_FOREVER, "runtime");
}

Test(bad_input, qf_task_spawn)
{
    qf_task *t = UNTOUCHED;
    INVALID(qf_task_spawn(NULL, done_task, NULL, NULL, &t), "runtime");
    qf_runtime *rt = mkrt(1);
    INVALID(qf_task_spawn(rt, NULL, NULL, NULL, &t), "task function");
    cr_expect_eq(t, UNTOUCHED);
    cr_expect_eq(qf_runtime_num_tasks(rt), 0);
    /* the issue: a task returning 12345 finished with 12345 */
    cr_assert_eq(qf_task_spawn(rt, bogus_task, NULL, NULL, &t), QF_OK);
    qf_code rc = qf_task_join(t, soon(), NULL);
    qf_task_unref(t);
    qf_runtime_free(rt);
    SCHED_PENDING;
    cr_expect_eq(rc, QF_INVALID_ARGUMENT, "got %d", (int)rc);
    cr_expect(strstr(qf_last_message(), "12345") != NULL, "%s", qf_last_message());
}

Test(bad_input, qf_task_ref)
{
    QUIET(cr_expect_null(qf_task_ref(NULL)));
}

Test(bad_input, qf_task_unref)
{
    QUIET(qf_task_unref(NULL));
}

Test(bad_input, qf_task_wake)
{
    SCHED_PENDING;
    REFUSED(qf_task_wake(NULL), "task");
}

Test(bad_input, qf_task_waker)
{
    SCHED_PENDING;
    NEUTRAL(qf_task_waker(NULL), NULL, "task");
}

Test(bad_input, qf_task_waker_init)
{
    qf_runtime *rt = mkrt(1);
    qf_task *t = NULL;
    cr_assert_eq(qf_task_spawn(rt, done_task, NULL, &(qf_task_options){.suspended = true}, &t),
                 QF_OK);
    REFUSED(qf_task_waker_init(t, NULL), "waker");
    qf_task_wake(t);
    cr_expect_eq(qf_task_join(t, soon(), NULL), QF_OK);
    qf_task_unref(t);
    qf_runtime_free(rt);
    SCHED_PENDING;
    qf_waker w;
    REFUSED(qf_task_waker_init(NULL, &w), "task");
}

Test(bad_input, qf_task_sleep_until)
{
    SCHED_PENDING;
    REFUSED(qf_task_sleep_until(NULL, QF_FOREVER), "task");
}

Test(bad_input, qf_task_is_cancelled)
{
    SCHED_PENDING;
    NEUTRAL(qf_task_is_cancelled(NULL), false, "task");
}

Test(bad_input, qf_task_current)
{
    QUIET(cr_expect_null(qf_task_current())); /* no argument: not in a task */
}

Test(bad_input, qf_task_name)
{
    SCHED_PENDING;
    NEUTRAL(qf_task_name(NULL), NULL, "task");
}

Test(bad_input, qf_task_is_daemon)
{
    SCHED_PENDING;
    NEUTRAL(qf_task_is_daemon(NULL), false, "task");
}

Test(bad_input, qf_task_arg)
{
    SCHED_PENDING;
    NEUTRAL(qf_task_arg(NULL), NULL, "task");
}

Test(bad_input, qf_task_is_done)
{
    SCHED_PENDING;
    NEUTRAL(qf_task_is_done(NULL), false, "task");
}

Test(bad_input, qf_task_join)
{
    qf_status *st = UNTOUCHED;
    INVALID(qf_task_join(NULL, QF_NO_WAIT, &st), "task");
    cr_expect_eq(st, UNTOUCHED);
}
