/* test_bad_input.c - every exported function, given bad input (reliability
 * suite).
 *
 * One case per exported function, named after it (CASE(qf_x) below): what
 * NULL, out-of-range and nonsense arguments give.
 * tests/reliability/bad_input_coverage.py compares these names with the
 * functions libqflow.so exports and the public headers declare, and fails
 * when one has no case here, so a new function cannot be forgotten.
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
 * The cases run one after another in one test (one process: a fork per
 * case cost minutes under AddressSanitizer); each is announced on stderr
 * before it runs, so a crash names its case. QF_BAD_INPUT_CASE=qf_x runs
 * only the cases whose name contains qf_x.

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
#define QFT_RT_NAME "bad"
#define QFT_SOON_S 10
#include "qf_test.h"
#ifdef QF_HAVE_NATS
#include "qf_nats.h"
#endif

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(bad_input, .timeout = 300);
#endif

/* ------------------------------------------------------------------ cases */

typedef struct bad_case {
    const char *name;
    void (*fn)(void);
    struct bad_case *next;
} bad_case;

static bad_case *cases_head, **cases_tail = &cases_head;

/* CASE(qf_x) { ... }: the bad-input case of qf_x, registered before main. */
#define CASE(fn_)                                                                                  \
    static void case_##fn_(void);                                                                  \
    static bad_case reg_##fn_ = {#fn_, case_##fn_, NULL};                                          \
    __attribute__((constructor)) static void add_##fn_(void)                                       \
    {                                                                                              \
        *cases_tail = &reg_##fn_;                                                                  \
        cases_tail = &reg_##fn_.next;                                                              \
    }                                                                                              \
    static void case_##fn_(void)

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

static const char *current_case;

/* A sentinel an out-parameter starts with, to see that it stays untouched. */
#define UNTOUCHED ((void *)0x5a5a5a5a)

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

static void noop_action(void *arg)
{
    (void)arg;
}

static void noop_wake(qf_waker *w)
{
    (void)w;
}

/* ========================================================== qf_status.h */

CASE(qf_code_name)
{
    QUIET(cr_expect_str_eq(qf_code_name(-1), "UNKNOWN_CODE"));
    QUIET(cr_expect_str_eq(qf_code_name(QF_CODE_COUNT), "UNKNOWN_CODE"));
    QUIET(cr_expect_str_eq(qf_code_name(12345), "UNKNOWN_CODE"));
}

CASE(qf_code_is_valid)
{
    QUIET(cr_expect_not(qf_code_is_valid(-1)));
    QUIET(cr_expect_not(qf_code_is_valid(-2)));
    QUIET(cr_expect_not(qf_code_is_valid(QF_CODE_COUNT)));
    QUIET(cr_expect_not(qf_code_is_valid(777)));
}

CASE(qf_status_new)
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

CASE(qf_status_newv)
{
    qf_status *s = newv((qf_code)QF_CODE_COUNT, "x");
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    qf_status_free(s);
    s = newv(QF_ABORTED, NULL);
    cr_expect_eq(qf_status_code(s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_status_message(s), "fmt") != NULL, "%s", qf_status_message(s));
    qf_status_free(s);
}

CASE(qf_status_copy)
{
    QUIET(cr_expect_null(qf_status_copy(NULL))); /* NULL-safe */
}

CASE(qf_status_free)
{
    QUIET(qf_status_free(NULL));
}

CASE(qf_status_code)
{
    QUIET(cr_expect_eq(qf_status_code(NULL), QF_OK)); /* documented */
}

CASE(qf_status_message)
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

CASE(qf_last_code)
{
    fresh_thread_check(); /* no argument: what there is before any failure */
}

CASE(qf_last_message)
{
    fresh_thread_check();
}

CASE(qf_last_status)
{
    fresh_thread_check();
}

CASE(qf_set_error)
{
    INVALID(qf_set_error((qf_code)777, "what I meant"), "code 777");
    cr_expect(strstr(qf_last_message(), "what I meant") != NULL, "%s", qf_last_message());
    INVALID(qf_set_error((qf_code)-2, "x"), "code -2");
    INVALID(qf_set_error(QF_NOT_FOUND, NULL), "fmt");
}

/* ============================================================ qf_time.h */

CASE(qf_now_ns)
{
    int64_t a = qf_now_ns(), b = qf_now_ns();
    cr_expect_geq(b, a, "monotonic");
}

CASE(qf_deadline_in_ns)
{
    cr_expect_eq(qf_deadline_in_ns(-5), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_ns(INT64_MIN), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_ns(INT64_MAX), QF_FOREVER, "saturates");
}

CASE(qf_deadline_in_s)
{
    cr_expect_eq(qf_deadline_in_s(NAN), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(-INFINITY), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(-1.0), QF_NO_WAIT);
    cr_expect_eq(qf_deadline_in_s(INFINITY), QF_FOREVER);
    cr_expect_eq(qf_deadline_in_s(1e300), QF_FOREVER);
}

CASE(qf_deadline_passed)
{
    cr_expect(qf_deadline_passed(-7), "any other negative deadline is in the past");
    cr_expect(qf_deadline_passed(QF_NO_WAIT));
    cr_expect_not(qf_deadline_passed(QF_FOREVER));
}

CASE(qf_deadline_min)
{
    cr_expect_eq(qf_deadline_min(QF_FOREVER, QF_FOREVER), QF_FOREVER);
    cr_expect_eq(qf_deadline_min(-7, QF_FOREVER), -7);
    cr_expect_eq(qf_deadline_min(INT64_MAX, 5), 5);
}

/* =========================================================== qf_futex.h */

CASE(qf_futex_wait)
{
    INVALID(qf_futex_wait(NULL, 0, QF_NO_WAIT), "word");
    INVALID(qf_futex_wait(NULL, 0, QF_FOREVER), "word"); /* returns, does not spin */
}

CASE(qf_futex_wait_until)
{
    INVALID(qf_futex_wait_until(NULL, 0, QF_NO_WAIT), "word");
    INVALID(qf_futex_wait_until(NULL, 0, QF_FOREVER), "word"); /* returns, does not spin */
}

CASE(qf_futex_wake)
{
    /* async-signal-safe: 0 woken, nothing recorded */
    QUIET(cr_expect_eq(qf_futex_wake(NULL, 1), 0));
    _Atomic uint32_t w = 0;
    QUIET(cr_expect_eq(qf_futex_wake(&w, -3), 0));
}

/* ========================================================== qf_waker.h */

CASE(qf_waker_init)
{
    REFUSED(qf_waker_init(NULL, noop_wake, NULL), "waker");
}

CASE(qf_waker_init_thread)
{
    REFUSED(qf_waker_init_thread(NULL), "waker");
}

CASE(qf_waker_state)
{
    NEUTRAL(qf_waker_state(NULL), QF_WAKER_IDLE, "waker");
}

CASE(qf_waker_wait)
{
    INVALID(qf_waker_wait(NULL, QF_FOREVER), "waker");
}

CASE(qf_waker_wait_until)
{
    INVALID(qf_waker_wait_until(NULL, QF_FOREVER), "waker");
}

CASE(qf_waker_withdraw)
{
    NEUTRAL(qf_waker_withdraw(NULL), false, "waker");
}

CASE(qf_waker_consumed)
{
    REFUSED(qf_waker_consumed(NULL), "waker");
}

/* No argument to get wrong: the mark is the calling thread's own, and a
 * marked thread's blocking call refuses instead of sleeping. */
CASE(qf_thread_set_task_runner)
{
    QUIET(cr_expect(!qf_thread_set_task_runner(true)));
    QUIET(cr_expect(qf_thread_set_task_runner(true), "idempotent"));
    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    clear_last();
    cr_expect(!qf_coord_wait_for_stop(c, QF_FOREVER), "refused, not asleep");
    EXPECT_RECORDED(QF_FAILED_PRECONDITION, "qf_thread_set_task_runner");
    QUIET(cr_expect(qf_thread_set_task_runner(false)));
    qf_coord_free(c);
}

CASE(qf_thread_is_task_runner)
{
    QUIET(cr_expect(!qf_thread_is_task_runner()));
}

CASE(qf_waitlist_init)
{
    REFUSED(qf_waitlist_init(NULL), "wait list");
}

CASE(qf_waitlist_destroy)
{
    QUIET(qf_waitlist_destroy(NULL));
}

CASE(qf_waitlist_register)
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

CASE(qf_waitlist_cancel)
{
    qf_waitlist wl;
    qf_waitlist_init(&wl);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_waitlist_register(&wl, &w);
    NEUTRAL(qf_waitlist_cancel(NULL, &w), false, "wait list");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "still registered");
    NEUTRAL(qf_waitlist_cancel(&wl, NULL), false, "waker");
    /* Registered on another list: refused at once, left where it is. */
    qf_waitlist other;
    qf_waitlist_init(&other);
    NEUTRAL(qf_waitlist_cancel(&other, &w), false, "another wait list");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "still registered");
    cr_expect_eq(qf_waitlist_count(&wl), 1);
    cr_expect(qf_waitlist_cancel(&wl, &w));
    /* IDLE: nothing to withdraw, nothing to wait for; not an error. */
    QUIET(cr_expect(!qf_waitlist_cancel(&wl, &w)));
    qf_waitlist_destroy(&other);
    qf_waitlist_destroy(&wl);
}

CASE(qf_waitlist_wake)
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

CASE(qf_waitlist_count)
{
    NEUTRAL(qf_waitlist_count(NULL), 0u, "wait list");
}

CASE(qf_eventcount_init)
{
    REFUSED(qf_eventcount_init(NULL), "event count");
}

CASE(qf_eventcount_prepare)
{
    NEUTRAL(qf_eventcount_prepare(NULL), 0u, "event count");
}

CASE(qf_eventcount_cancel)
{
    REFUSED(qf_eventcount_cancel(NULL), "event count");
}

CASE(qf_eventcount_wait)
{
    INVALID(qf_eventcount_wait(NULL, 0, QF_FOREVER), "event count");
}

CASE(qf_eventcount_wait_until)
{
    INVALID(qf_eventcount_wait_until(NULL, 0, QF_FOREVER), "event count");
}

CASE(qf_eventcount_notify)
{
    QUIET(qf_eventcount_notify(NULL, true)); /* async-signal-safe: nothing recorded */
}

/* ===================================================== qf_coordinator.h */

CASE(qf_coord_new)
{
    qf_coord *c = UNTOUCHED;
    INVALID(qf_coord_new(NULL, 0, NULL), "ret_c");
    INVALID(qf_coord_new((qf_code[]){QF_OUT_OF_RANGE, (qf_code)777}, 2, &c), "777");
    INVALID(qf_coord_new((qf_code[]){(qf_code)-1}, 1, &c), "-1");
    cr_expect_eq(c, UNTOUCHED);
}

CASE(qf_coord_free)
{
    QUIET(qf_coord_free(NULL));
}

CASE(qf_coord_should_stop)
{
    QUIET(cr_expect_not(qf_coord_should_stop(NULL))); /* async-signal-safe */
}

CASE(qf_coord_check_stop)
{
    NEUTRAL(qf_coord_check_stop(NULL), false, "coordinator");
}

CASE(qf_coord_request_stop)
{
    INVALID(qf_coord_request_stop(NULL, qf_status_new(QF_INTERNAL, "x")), "coordinator");
    /* the issue: a code of -7 came out of join as -7 */
    qf_coord *c = mkcoord();
    cr_expect_eq(qf_coord_request_stop(c, qf_status_new((qf_code)-7, "boom")), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "code -7") != NULL, "%s", qf_last_message());
    qf_coord_free(c);
}

CASE(qf_coord_request_stop_from_signal)
{
    QUIET(qf_coord_request_stop_from_signal(NULL)); /* async-signal-safe */
}

CASE(qf_coord_report)
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

CASE(qf_coord_wait_for_stop)
{
    NEUTRAL(qf_coord_wait_for_stop(NULL, QF_FOREVER), false, "coordinator");
}

CASE(qf_coord_clear_stop)
{
    REFUSED(qf_coord_clear_stop(NULL), "coordinator");
}

CASE(qf_coord_raise_requested_exception)
{
    qf_status *st = UNTOUCHED;
    INVALID(qf_coord_raise_requested_exception(NULL, &st), "coordinator");
    cr_expect_eq(st, UNTOUCHED);
}

CASE(qf_coord_joined)
{
    NEUTRAL(qf_coord_joined(NULL), false, "coordinator");
}

CASE(qf_coord_members_done)
{
    NEUTRAL(qf_coord_members_done(NULL), false, "coordinator");
}

CASE(qf_coord_add_stop_action)
{
    qf_coord_action *a = UNTOUCHED;
    INVALID(qf_coord_add_stop_action(NULL, noop_action, NULL, &a), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_add_stop_action(c, NULL, NULL, &a), "fn");
    cr_expect_eq(a, UNTOUCHED);
    qf_coord_free(c);
}

CASE(qf_coord_remove_stop_action)
{
    qf_coord *c = mkcoord();
    qf_coord_action *a = NULL;
    cr_assert_eq(qf_coord_add_stop_action(c, noop_action, NULL, &a), QF_OK);
    QUIET(qf_coord_remove_stop_action(c, NULL)); /* NULL-safe */
    REFUSED(qf_coord_remove_stop_action(NULL, a), "coordinator");
    qf_coord_remove_stop_action(c, a); /* still there to remove */
    qf_coord_free(c);
}

CASE(qf_coord_register_waker)
{
    qf_coord *c = mkcoord();
    qf_waker w;
    qf_waker_init_thread(&w);
    NEUTRAL(qf_coord_register_waker(NULL, &w), false, "coordinator");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE);
    NEUTRAL(qf_coord_register_waker(c, NULL), false, "waker");
    qf_coord_free(c);
}

CASE(qf_coord_cancel_waker)
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

CASE(qf_coord_thread_create)
{
    pthread_t t;
    INVALID(qf_coord_thread_create(NULL, "t", nothing, NULL, &t), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_thread_create(c, "t", NULL, NULL, &t), "fn");
    INVALID(qf_coord_thread_create(c, "t", nothing, NULL, NULL), "ret_thread");
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "no member was added");
    qf_coord_free(c);
}

CASE(qf_coord_register_thread)
{
    INVALID(qf_coord_register_thread(NULL, pthread_self(), "me"), "coordinator");
}

CASE(qf_coord_member_new)
{
    qf_coord_member *m = UNTOUCHED;
    INVALID(qf_coord_member_new(NULL, "m", &m), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_member_new(c, "m", NULL), "ret_m");
    cr_expect_eq(m, UNTOUCHED);
    qf_coord_free(c);
}

CASE(qf_coord_member_done)
{
    QUIET(qf_coord_member_done(NULL));
}

CASE(qf_coord_join_report_clear)
{
    QUIET(qf_coord_join_report_clear(NULL));
    qf_coord_join_report r = {0};
    QUIET(qf_coord_join_report_clear(&r)); /* a zeroed report is valid */
}

CASE(qf_coord_join)
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

CASE(qf_coord_join_until)
{
    qf_coord_join_report r = {.code = (qf_code)99};
    INVALID(qf_coord_join_until(NULL, NULL, 0, QF_NO_WAIT, false, &r), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_join_until(c, NULL, 2, QF_NO_WAIT, false, &r), "extra_threads");
    INVALID(qf_coord_join_until(c, NULL, 0, (qf_deadline)-5, false, &r), "deadline");
    cr_expect_eq(r.code, (qf_code)99, "the report is untouched");
    cr_expect_not(qf_coord_joined(c), "nothing was joined");
    qf_coord_free(c);
}

CASE(qf_coord_stop_fd)
{
    int fd = 77;
    INVALID(qf_coord_stop_fd(NULL, &fd), "coordinator");
    qf_coord *c = mkcoord();
    INVALID(qf_coord_stop_fd(c, NULL), "ret_fd");
    cr_expect_eq(fd, 77, "ret_fd untouched");
    cr_expect_not(qf_coord_should_stop(c));
    qf_coord_free(c);
}

/* ========================================================== qf_tensor.h */

static void count_dtor(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

CASE(qf_dtype_is_valid)
{
    QUIET(cr_expect_not(qf_dtype_is_valid(QF_DT_INVALID)));
    QUIET(cr_expect_not(qf_dtype_is_valid((qf_dtype)11)));
    QUIET(cr_expect_not(qf_dtype_is_valid((qf_dtype)-3)));
}

CASE(qf_dtype_name)
{
    QUIET(cr_expect_str_eq(qf_dtype_name((qf_dtype)999), "invalid"));
}

CASE(qf_dtype_size)
{
    QUIET(cr_expect_eq(qf_dtype_size((qf_dtype)999), 0));
}

CASE(qf_shape_scalar)
{
    qf_shape s = qf_shape_scalar(); /* no argument: the value is what it says */
    cr_expect_eq(s.rank, 0);
    cr_expect(qf_shape_is_fully_defined(&s));
}

CASE(qf_shape_unknown)
{
    qf_shape s = qf_shape_unknown();
    cr_expect_eq(s.rank, QF_UNKNOWN_RANK);
    cr_expect(qf_shape_is_valid(&s));
}

CASE(qf_shape_make)
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
CASE(qf_shape_is_valid)
{
    QUIET(cr_expect_not(qf_shape_is_valid(NULL)));
    qf_shape s = {.rank = 3, .dims = {2, -9, 1}};
    QUIET(cr_expect_not(qf_shape_is_valid(&s)));
}

CASE(qf_shape_is_fully_defined)
{
    QUIET(cr_expect_not(qf_shape_is_fully_defined(NULL)));
}

CASE(qf_shape_num_elements)
{
    QUIET(cr_expect_eq(qf_shape_num_elements(NULL), -1));
    qf_shape big = QF_SHAPE(INT64_MAX / 2, 4);
    QUIET(cr_expect_eq(qf_shape_num_elements(&big), -1, "overflow"));
}

CASE(qf_shape_equal)
{
    qf_shape s = qf_shape_scalar();
    QUIET(cr_expect_not(qf_shape_equal(NULL, &s)));
    QUIET(cr_expect_not(qf_shape_equal(&s, NULL)));
}

CASE(qf_shape_compatible)
{
    qf_shape s = qf_shape_unknown();
    QUIET(cr_expect_not(qf_shape_compatible(NULL, &s)));
    QUIET(cr_expect_not(qf_shape_compatible(&s, NULL)));
}

CASE(qf_shape_prepend)
{
    qf_shape s = qf_shape_scalar();
    QUIET(cr_expect_not(qf_shape_is_valid(&(qf_shape){qf_shape_prepend(3, NULL).rank, {0}})));
    qf_shape r = qf_shape_prepend(-7, &s);
    cr_expect_not(qf_shape_is_valid(&r));
    qf_shape full = QF_SHAPE(1, 1, 1, 1, 1, 1, 1, 1);
    r = qf_shape_prepend(2, &full);
    cr_expect_not(qf_shape_is_valid(&r), "above QF_MAX_RANK");
}

CASE(qf_shape_format)
{
    char buf[32];
    QUIET(cr_expect_str_eq(qf_shape_format(NULL, buf, sizeof(buf)), "<invalid>"));
    qf_shape s = QF_SHAPE(3, 4);
    QUIET(cr_expect_null(qf_shape_format(&s, NULL, 10)));
    buf[0] = 'x';
    QUIET(qf_shape_format(&s, buf, 0));
    cr_expect_eq(buf[0], 'x', "cap 0 writes nothing");
}

CASE(qf_tensor_new)
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

CASE(qf_tensor_new_ptr)
{
    NEUTRAL(qf_tensor_new_ptr(NULL, NULL), NULL, "shape");
}

CASE(qf_tensor_new_from)
{
    qf_shape s = QF_SHAPE(2);
    int64_t v[2] = {1, 2};
    NEUTRAL(qf_tensor_new_from(QF_STRING, &s, v, sizeof(v)), NULL, "numeric");
    NEUTRAL(qf_tensor_new_from(QF_INT64, &s, NULL, sizeof(v)), NULL, "NULL");
    NEUTRAL(qf_tensor_new_from(QF_INT64, &s, v, 3), NULL, "bytes");
    NEUTRAL(qf_tensor_new_from(QF_INT64, NULL, v, sizeof(v)), NULL, "shape");
}

/* Scalars of any value are valid: nothing to refuse. */
CASE(qf_tensor_new_bool)
{
    qf_tensor *t = qf_tensor_new_bool((bool)1);
    cr_expect_eq(((const bool *)qf_tensor_cdata(t))[0], true);
    qf_tensor_unref(t);
}

CASE(qf_tensor_new_i32)
{
    qf_tensor *t = qf_tensor_new_i32(INT32_MIN);
    cr_expect_eq(((const int32_t *)qf_tensor_cdata(t))[0], INT32_MIN);
    qf_tensor_unref(t);
}

CASE(qf_tensor_new_i64)
{
    qf_tensor *t = qf_tensor_new_i64(INT64_MIN);
    cr_expect_eq(((const int64_t *)qf_tensor_cdata(t))[0], INT64_MIN);
    qf_tensor_unref(t);
}

CASE(qf_tensor_new_f32)
{
    qf_tensor *t = qf_tensor_new_f32(NAN);
    cr_expect(isnan(((const float *)qf_tensor_cdata(t))[0]));
    qf_tensor_unref(t);
}

CASE(qf_tensor_new_f64)
{
    qf_tensor *t = qf_tensor_new_f64(-INFINITY);
    cr_expect(isinf(((const double *)qf_tensor_cdata(t))[0]));
    qf_tensor_unref(t);
}

CASE(qf_tensor_new_string)
{
    NEUTRAL(qf_tensor_new_string(NULL, 5), NULL, "NULL");
    qf_tensor *t = qf_tensor_new_string(NULL, 0); /* the empty string */
    cr_expect_not_null(t);
    qf_tensor_unref(t);
}

CASE(qf_tensor_new_cstr)
{
    NEUTRAL(qf_tensor_new_cstr(NULL), NULL, "String");
}

CASE(qf_tensor_new_scalar_ptr)
{
    qf_tensor *t = qf_tensor_new_scalar_ptr(NULL, NULL); /* a NULL object is a value */
    cr_expect_not_null(t);
    cr_expect_null(qf_tensor_ptr(t, 0));
    qf_tensor_unref(t);
}

CASE(qf_tensor_ref)
{
    QUIET(cr_expect_null(qf_tensor_ref(NULL)));
}

CASE(qf_tensor_unref)
{
    QUIET(qf_tensor_unref(NULL));
}

CASE(qf_tensor_refcount)
{
    NEUTRAL(qf_tensor_refcount(NULL), 0u, "tensor");
}

CASE(qf_tensor_dtype)
{
    NEUTRAL(qf_tensor_dtype(NULL), QF_DT_INVALID, "tensor");
}

CASE(qf_tensor_shape)
{
    NEUTRAL(qf_tensor_shape(NULL), NULL, "tensor");
}

CASE(qf_tensor_num_elements)
{
    NEUTRAL(qf_tensor_num_elements(NULL), -1, "tensor");
}

CASE(qf_tensor_data)
{
    NEUTRAL(qf_tensor_data(NULL), NULL, "tensor");
}

CASE(qf_tensor_cdata)
{
    NEUTRAL(qf_tensor_cdata(NULL), NULL, "tensor");
}

CASE(qf_tensor_ptr_dtor)
{
    NEUTRAL(qf_tensor_ptr_dtor(NULL), NULL, "tensor");
}

CASE(qf_tensor_string)
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

CASE(qf_tensor_set_string)
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

CASE(qf_tensor_ptr)
{
    NEUTRAL(qf_tensor_ptr(NULL, 0), NULL, "Tensor");
    qf_tensor *p = qf_tensor_new_scalar_ptr(&p, NULL);
    NEUTRAL(qf_tensor_ptr(p, 1), NULL, "out of range");
    qf_tensor_unref(p);
}

CASE(qf_tensor_set_ptr)
{
    INVALID(qf_tensor_set_ptr(NULL, 0, NULL), "Tensor");
    qf_tensor *i = qf_tensor_new_i64(3);
    INVALID(qf_tensor_set_ptr(i, 0, &i), "ptr");
    qf_tensor_unref(i);
}

CASE(qf_tensor_take_ptr)
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

CASE(qf_tensor_equal)
{
    qf_tensor *t = qf_tensor_new_i64(1);
    QUIET(cr_expect_not(qf_tensor_equal(NULL, t)));
    QUIET(cr_expect_not(qf_tensor_equal(t, NULL)));
    qf_tensor_unref(t);
}

CASE(qf_tensor_copy)
{
    NEUTRAL(qf_tensor_copy(NULL), NULL, "Tensor");
    atomic_int freed = 0;
    qf_tensor *p = qf_tensor_new_scalar_ptr(&freed, count_dtor);
    clear_last();
    cr_expect_null(qf_tensor_copy(p));
    EXPECT_RECORDED(QF_FAILED_PRECONDITION, "owns");
    qf_tensor_unref(p);
}

CASE(qf_tensor_stack)
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

CASE(qf_tensor_stack_padded)
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

CASE(qf_tensor_unstack)
{
    qf_tensor *parts[4];
    INVALID(qf_tensor_unstack(NULL, parts), "NULL");
    INVALID(qf_tensor_unstack(qf_tensor_new_i64(1), parts), "scalar"); /* consumed */
    qf_shape s = QF_SHAPE(2);
    INVALID(qf_tensor_unstack(qf_tensor_new(QF_INT64, &s), NULL), "ret_parts");
}

CASE(qf_tensor_slice)
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

CASE(qf_element_new)
{
    NEUTRAL(qf_element_new(0), NULL, "components");
    NEUTRAL(qf_element_new(4097), NULL, "components");
    NEUTRAL(qf_element_new(SIZE_MAX), NULL, "components");
}

CASE(qf_element_of)
{
    NEUTRAL(qf_element_of(2, NULL), NULL, "tensors");
    NEUTRAL(qf_element_of(0, NULL), NULL, "components");
    atomic_int freed = 0;
    qf_tensor *t = qf_tensor_new_scalar_ptr(&freed, count_dtor);
    qf_tensor *many[4097] = {t}; /* taken also on failure */
    NEUTRAL(qf_element_of(4097, many), NULL, "components");
    cr_expect_eq(atomic_load(&freed), 1);
}

CASE(qf_element_free)
{
    QUIET(qf_element_free(NULL));
}

CASE(qf_element_size)
{
    NEUTRAL(qf_element_size(NULL), 0, "Element");
}

CASE(qf_element_set)
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

CASE(qf_element_get)
{
    NEUTRAL(qf_element_get(NULL, 0), NULL, "Element");
    qf_element *e = mkelem(1);
    NEUTRAL(qf_element_get(e, 3), NULL, "out of range");
    qf_element_free(e);
}

CASE(qf_element_take)
{
    NEUTRAL(qf_element_take(NULL, 0), NULL, "Element");
    qf_element *e = mkelem(1);
    NEUTRAL(qf_element_take(e, 1), NULL, "out of range");
    cr_expect_not_null(qf_element_get(e, 0), "unchanged");
    qf_element_free(e);
}

CASE(qf_element_set_names)
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

CASE(qf_element_has_names)
{
    NEUTRAL(qf_element_has_names(NULL), false, "Element");
}

CASE(qf_element_name)
{
    NEUTRAL(qf_element_name(NULL, 0), NULL, "Element");
    qf_element *e = mkelem(1);
    QUIET(cr_expect_null(qf_element_name(e, 0))); /* documented: unnamed */
    qf_element_free(e);
}

CASE(qf_element_get_by_name)
{
    NEUTRAL(qf_element_get_by_name(NULL, "a"), NULL, "Element");
    qf_element *e = mkelem(1);
    cr_assert_eq(qf_element_set_names(e, (const char *[]){"a"}), QF_OK);
    NEUTRAL(qf_element_get_by_name(e, NULL), NULL, "name");
    QUIET(cr_expect_null(qf_element_get_by_name(e, "zz"))); /* documented: none */
    qf_element_free(e);
}

/* ========================================================== qf_sparse.h */

/* A sparse tensor [[0], [2]] -> {1, 2} of dense shape [3]. */
static qf_sparse *mksparse(void)
{
    qf_sparse *sp = NULL;
    cr_assert_eq(qf_sparse_new_from(QF_INT64, 2, 1, (const int64_t[]){0, 2},
                                    (const int64_t[]){1, 2}, (const int64_t[]){3}, &sp),
                 QF_OK, "%s", qf_last_message());
    return sp;
}

CASE(qf_sparse_new)
{
    qf_sparse *sp = UNTOUCHED;
    qf_shape is = QF_SHAPE(1, 1), vs = QF_SHAPE(1), ss = QF_SHAPE(1);
    /* every part is taken, also on failure: ASan would report a leak */
    INVALID(qf_sparse_new(NULL, qf_tensor_new(QF_INT64, &vs), qf_tensor_new(QF_INT64, &ss), &sp),
            "indices");
    INVALID(qf_sparse_new(qf_tensor_new(QF_INT64, &is), NULL, qf_tensor_new(QF_INT64, &ss), &sp),
            "values");
    INVALID(qf_sparse_new(qf_tensor_new(QF_INT64, &is), qf_tensor_new(QF_INT64, &vs), NULL, &sp),
            "dense_shape");
    INVALID(qf_sparse_new(qf_tensor_new(QF_INT64, &is), qf_tensor_new(QF_INT64, &vs),
                          qf_tensor_new(QF_INT64, &ss), NULL),
            "ret");
    /* an index outside dense_shape [0] */
    INVALID(qf_sparse_new(qf_tensor_new(QF_INT64, &is), qf_tensor_new(QF_INT64, &vs),
                          qf_tensor_new(QF_INT64, &ss), &sp),
            "out of bounds");
    cr_expect_eq(sp, UNTOUCHED);
}

CASE(qf_sparse_new_from)
{
    qf_sparse *sp = UNTOUCHED;
    const int64_t idx[] = {0}, val[] = {1}, dense[] = {2};
    INVALID(qf_sparse_new_from(QF_INT64, 1, 1, idx, val, dense, NULL), "ret");
    INVALID(qf_sparse_new_from(QF_INT64, -1, 1, idx, val, dense, &sp), "nnz");
    INVALID(qf_sparse_new_from(QF_INT64, 1, -1, idx, val, dense, &sp), "rank");
    INVALID(qf_sparse_new_from(QF_INT64, 1, 1, NULL, val, dense, &sp), "indices");
    INVALID(qf_sparse_new_from(QF_INT64, 1, 1, idx, NULL, dense, &sp), "values");
    INVALID(qf_sparse_new_from(QF_INT64, 1, 1, idx, val, NULL, &sp), "dense_shape");
    INVALID(qf_sparse_new_from(QF_SPARSE, 1, 1, idx, val, dense, &sp), "sparse");
    cr_expect_eq(sp, UNTOUCHED);
}

CASE(qf_sparse_ref)
{
    QUIET(cr_expect_null(qf_sparse_ref(NULL)));
}

CASE(qf_sparse_unref)
{
    QUIET(qf_sparse_unref(NULL));
}

CASE(qf_sparse_indices)
{
    NEUTRAL(qf_sparse_indices(NULL), NULL, "sparse tensor");
}

CASE(qf_sparse_values)
{
    NEUTRAL(qf_sparse_values(NULL), NULL, "sparse tensor");
}

CASE(qf_sparse_dense_shape)
{
    NEUTRAL(qf_sparse_dense_shape(NULL), NULL, "sparse tensor");
}

CASE(qf_sparse_dtype)
{
    NEUTRAL(qf_sparse_dtype(NULL), QF_DT_INVALID, "sparse tensor");
}

CASE(qf_sparse_rank)
{
    NEUTRAL(qf_sparse_rank(NULL), -1, "sparse tensor");
}

CASE(qf_sparse_nnz)
{
    NEUTRAL(qf_sparse_nnz(NULL), 0, "sparse tensor");
}

CASE(qf_sparse_dim)
{
    NEUTRAL(qf_sparse_dim(NULL, 0), -1, "sparse tensor");
    qf_sparse *sp = mksparse();
    QUIET(cr_expect_eq(qf_sparse_dim(sp, 1), -1, "out of range"));
    QUIET(cr_expect_eq(qf_sparse_dim(sp, -1), -1, "out of range"));
    qf_sparse_unref(sp);
}

CASE(qf_sparse_shape)
{
    clear_last();
    qf_shape s = qf_sparse_shape(NULL);
    cr_expect_not(qf_shape_is_valid(&s), "an invalid shape");
    EXPECT_RECORDED(QF_INVALID_ARGUMENT, "sparse tensor");
}

CASE(qf_sparse_equal)
{
    qf_sparse *sp = mksparse();
    QUIET(cr_expect_not(qf_sparse_equal(NULL, sp)));
    QUIET(cr_expect_not(qf_sparse_equal(sp, NULL)));
    qf_sparse_unref(sp);
}

CASE(qf_sparse_stack)
{
    qf_sparse *sp = mksparse(), *out = UNTOUCHED;
    INVALID(qf_sparse_stack(NULL, 1, &out), "sparse");
    INVALID(qf_sparse_stack(&sp, 0, &out), "at least one");
    INVALID(qf_sparse_stack(&sp, 1, NULL), "ret");
    INVALID(qf_sparse_stack((qf_sparse *[]){sp, NULL}, 2, &out), "SparseTensor[1]");
    qf_sparse *two = NULL;
    cr_assert_eq(qf_sparse_new_from(QF_INT64, 1, 2, (const int64_t[]){0, 0}, (const int64_t[]){7},
                                    (const int64_t[]){1, 1}, &two),
                 QF_OK);
    INVALID(qf_sparse_stack((qf_sparse *[]){sp, two}, 2, &out), "Inconsistent rank");
    cr_expect_eq(out, UNTOUCHED);
    cr_expect_eq(qf_sparse_nnz(sp), 2, "the parts are unchanged");
    qf_sparse_unref(two);
    qf_sparse_unref(sp);
}

CASE(qf_sparse_unstack)
{
    qf_sparse *sp = mksparse(), *parts[3] = {UNTOUCHED, UNTOUCHED, UNTOUCHED};
    INVALID(qf_sparse_unstack(NULL, parts), "sparse tensor");
    INVALID(qf_sparse_unstack(sp, NULL), "ret_parts");
    INVALID(qf_sparse_unstack(sp, parts), "Rank of input SparseTensor"); /* rank 1 */
    cr_expect_eq(parts[0], UNTOUCHED);
    qf_sparse_unref(sp);
}

CASE(qf_tensor_new_sparse)
{
    NEUTRAL(qf_tensor_new_sparse(NULL), NULL, "Sparse tensor");
}

CASE(qf_tensor_sparse)
{
    NEUTRAL(qf_tensor_sparse(NULL, 0), NULL, "Tensor");
    qf_tensor *i = qf_tensor_new_i64(1);
    NEUTRAL(qf_tensor_sparse(i, 0), NULL, "sparse");
    qf_tensor *t = qf_tensor_new_sparse(mksparse());
    NEUTRAL(qf_tensor_sparse(t, 1), NULL, "out of range");
    NEUTRAL(qf_tensor_sparse(t, -1), NULL, "out of range");
    qf_tensor_unref(t);
    qf_tensor_unref(i);
}

CASE(qf_tensor_set_sparse)
{
    /* the sparse tensor is taken also on failure: ASan would report a leak */
    INVALID(qf_tensor_set_sparse(NULL, 0, mksparse()), "Tensor");
    qf_tensor *i = qf_tensor_new_i64(1);
    INVALID(qf_tensor_set_sparse(i, 0, mksparse()), "sparse");
    qf_tensor *t = qf_tensor_new_sparse(mksparse());
    INVALID(qf_tensor_set_sparse(t, 3, mksparse()), "out of range");
    cr_expect_eq(qf_sparse_nnz(qf_tensor_sparse(t, 0)), 2, "element 0 unchanged");
    qf_tensor_unref(t);
    qf_tensor_unref(i);
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

CASE(qf_fifo_queue_new)
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

CASE(qf_random_shuffle_queue_new)
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

CASE(qf_padding_fifo_queue_new)
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

CASE(qf_priority_queue_new)
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

CASE(qf_queue_registry_new)
{
    INVALID(qf_queue_registry_new(NULL), "ret_reg");
}

CASE(qf_queue_registry_free)
{
    QUIET(qf_queue_registry_free(NULL));
    QUIET(qf_queue_registry_free(qf_queue_registry_default())); /* never freed */
}

CASE(qf_queue_registry_default)
{
    cr_expect_not_null(qf_queue_registry_default()); /* no argument */
}

CASE(qf_queue_registry_lookup)
{
    NEUTRAL(qf_queue_registry_lookup(NULL, NULL), NULL, "shared_name");
    QUIET(cr_expect_null(qf_queue_registry_lookup(NULL, "no such queue"))); /* NULL: default */
}

CASE(qf_queue_registry_remove)
{
    NEUTRAL(qf_queue_registry_remove(NULL, NULL), false, "shared_name");
    QUIET(cr_expect_not(qf_queue_registry_remove(NULL, "no such queue")));
}

CASE(qf_queue_shared_name)
{
    NEUTRAL(qf_queue_shared_name(NULL), NULL, "queue");
}

CASE(qf_queue_min_after_dequeue)
{
    NEUTRAL(qf_queue_min_after_dequeue(NULL), 0, "queue");
}

CASE(qf_ptr_queue_new)
{
    qf_queue *q = UNTOUCHED;
    INVALID(qf_ptr_queue_new(0, "p", 0, NULL, &q), "capacity");
    INVALID(qf_ptr_queue_new(4, "p", 0x40, NULL, &q), "flags");
    INVALID(qf_ptr_queue_new(4, "p", 0, NULL, NULL), "ret_q");
    cr_expect_eq(q, UNTOUCHED);
}

CASE(qf_queue_ref)
{
    QUIET(cr_expect_null(qf_queue_ref(NULL)));
}

CASE(qf_queue_unref)
{
    QUIET(qf_queue_unref(NULL));
}

/* The issue: name, capacity and num_components segfaulted on NULL while
 * size returned 0. */
CASE(qf_queue_name)
{
    NEUTRAL(qf_queue_name(NULL), NULL, "queue");
}

CASE(qf_queue_get_kind)
{
    NEUTRAL(qf_queue_get_kind(NULL), QF_QUEUE_FIFO, "queue");
}

CASE(qf_queue_kind_name)
{
    NEUTRAL(qf_queue_kind_name(NULL), NULL, "queue");
}

CASE(qf_queue_capacity)
{
    NEUTRAL(qf_queue_capacity(NULL), 0, "queue");
}

CASE(qf_queue_num_components)
{
    NEUTRAL(qf_queue_num_components(NULL), 0, "queue");
}

CASE(qf_queue_dtype)
{
    NEUTRAL(qf_queue_dtype(NULL, 0), QF_DT_INVALID, "queue");
    qf_queue *q = mkq(2);
    QUIET(cr_expect_eq(qf_queue_dtype(q, 1), QF_DT_INVALID)); /* out of range: documented */
    qf_queue_unref(q);
}

CASE(qf_queue_shape)
{
    NEUTRAL(qf_queue_shape(NULL, 0), NULL, "queue");
    qf_queue *q = mkq(2);
    QUIET(cr_expect_null(qf_queue_shape(q, 9)));
    qf_queue_unref(q);
}

CASE(qf_queue_component_name)
{
    NEUTRAL(qf_queue_component_name(NULL, 0), NULL, "queue");
}

CASE(qf_queue_is_inline)
{
    NEUTRAL(qf_queue_is_inline(NULL), false, "queue");
}

CASE(qf_queue_ptr_dtor)
{
    NEUTRAL(qf_queue_ptr_dtor(NULL), NULL, "queue");
}

CASE(qf_queue_size)
{
    NEUTRAL(qf_queue_size(NULL), 0, "queue");
}

CASE(qf_queue_is_closed)
{
    NEUTRAL(qf_queue_is_closed(NULL), false, "queue");
}

CASE(qf_queue_close)
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

CASE(qf_queue_enqueue)
{
    bad_enqueue(enq_plain, NULL);
}

CASE(qf_queue_enqueue_until)
{
    bad_enqueue(enq_until, NULL);
}

CASE(qf_queue_try_enqueue)
{
    bad_enqueue(enq_try, NULL);
}

CASE(qf_queue_poll_enqueue)
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

CASE(qf_queue_enqueue_many)
{
    bad_enqueue_many(0);
}

CASE(qf_queue_enqueue_many_until)
{
    bad_enqueue_many(1);
}

CASE(qf_queue_try_enqueue_many)
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

CASE(qf_queue_dequeue)
{
    bad_dequeue(0);
}

CASE(qf_queue_dequeue_until)
{
    bad_dequeue(1);
}

CASE(qf_queue_try_dequeue)
{
    bad_dequeue(2);
}

CASE(qf_queue_poll_dequeue)
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

CASE(qf_queue_dequeue_many)
{
    bad_dequeue_batch(false, 0);
}

CASE(qf_queue_dequeue_many_until)
{
    bad_dequeue_batch(false, 1);
}

CASE(qf_queue_try_dequeue_many)
{
    bad_dequeue_batch(false, 2);
}

CASE(qf_queue_dequeue_up_to)
{
    bad_dequeue_batch(true, 0);
}

CASE(qf_queue_dequeue_up_to_until)
{
    bad_dequeue_batch(true, 1);
}

CASE(qf_queue_try_dequeue_up_to)
{
    bad_dequeue_batch(true, 2);
}

/* A queue created single-producer (single-consumer) with a producer
 * (consumer) thread blocked inside it: another call on that side at the
 * same time is refused (issue 24 item 12). */
typedef struct {
    qf_queue *q;
    bool consumer;
    pthread_t th;
    qf_code rc;
    _Atomic bool done;
    char msg[160];
} side_thread;

static void *side_main(void *arg)
{
    side_thread *t = arg;
    void *p = NULL;
    static int token;
    do /* refused only while the main thread's probe is inside */
        t->rc = t->consumer ? qf_queue_dequeue_ptr(t->q, &p) : qf_queue_enqueue_ptr(t->q, &token);
    while (t->rc == QF_FAILED_PRECONDITION);
    snprintf(t->msg, sizeof(t->msg), "%s", qf_last_message());
    atomic_store(&t->done, true);
    return NULL;
}

/* Start the blocked thread; returns once a try call on the same side is
 * refused (so the thread is inside, and stays there until released). */
static void side_busy(side_thread *t, bool consumer)
{
    static int token;
    t->consumer = consumer;
    atomic_init(&t->done, false);
    cr_assert_eq(qf_ptr_queue_new(1, "sp",
                                  consumer ? QF_QUEUE_SINGLE_CONSUMER : QF_QUEUE_SINGLE_PRODUCER,
                                  NULL, &t->q),
                 QF_OK);
    if (!consumer)
        cr_assert_eq(qf_queue_enqueue_ptr(t->q, &token), QF_OK); /* full */
    cr_assert_eq(pthread_create(&t->th, NULL, side_main, t), 0);
    qf_deadline d = qf_deadline_in_s(20);
    void *p;
    qf_code rc;
    while ((rc = consumer ? qf_queue_try_dequeue_ptr(t->q, &p)
                          : qf_queue_try_enqueue_ptr(t->q, &token)) != QF_FAILED_PRECONDITION)
        cr_assert(!qf_deadline_passed(d) && !atomic_load(&t->done),
                  "the blocked thread never got inside: %s (%s); it returned %s (%s)",
                  qf_code_name(rc), qf_last_message(), qf_code_name(t->rc), t->msg);
}

static void side_release(side_thread *t)
{
    static int token;
    void *p;
    if (t->consumer)
        cr_assert_eq(qf_queue_enqueue_ptr(t->q, &token), QF_OK);
    else
        cr_assert_eq(qf_queue_dequeue_ptr(t->q, &p), QF_OK);
    pthread_join(t->th, NULL);
    cr_expect_eq(t->rc, QF_OK);
    qf_queue_unref(t->q);
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
    side_thread t;
    side_busy(&t, false);
    EXPECT_CODE(QF_FAILED_PRECONDITION, ENQP(t.q), "single-producer");
    side_release(&t);
#undef ENQP
    if (form == 3)
        INVALID(qf_queue_poll_enqueue_ptr(pq, &x, NULL), "waker");
    cr_expect_eq(qf_queue_size(q) + qf_queue_size(pq), 0);
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

CASE(qf_queue_enqueue_ptr)
{
    bad_enqueue_ptr(0);
}

CASE(qf_queue_enqueue_ptr_until)
{
    bad_enqueue_ptr(1);
}

CASE(qf_queue_try_enqueue_ptr)
{
    bad_enqueue_ptr(2);
}

CASE(qf_queue_poll_enqueue_ptr)
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
    side_thread t;
    side_busy(&t, true);
    EXPECT_CODE(QF_FAILED_PRECONDITION, DEQP(t.q, &p), "single-consumer");
    side_release(&t);
#undef DEQP
    cr_expect_eq(p, UNTOUCHED);
    cr_expect_eq(qf_queue_size(pq), 1, "nothing was taken");
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

CASE(qf_queue_dequeue_ptr)
{
    bad_dequeue_ptr(0);
}

CASE(qf_queue_dequeue_ptr_until)
{
    bad_dequeue_ptr(1);
}

CASE(qf_queue_try_dequeue_ptr)
{
    bad_dequeue_ptr(2);
}

CASE(qf_queue_poll_dequeue_ptr)
{
    bad_dequeue_ptr(3);
    qf_queue *pq = mkptrq();
    void *p = UNTOUCHED;
    INVALID(qf_queue_poll_dequeue_ptr(pq, NULL, &p), "waker");
    cr_expect_eq(p, UNTOUCHED);
    qf_queue_unref(pq);
}

/* The values calls refuse a queue that does not take values, and NULL
 * buffers, changing nothing. */
static qf_queue *mkvalq(void)
{
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options o = {
        .capacity = 4, .num_components = 2, .dtypes = dt, .shapes = sh, .name = "v"};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

static void bad_enqueue_values(int form)
{
    qf_queue *q = mkq(4), *vq = mkvalq();
    int64_t a = 1, b = 2;
    const void *vals[2] = {&a, &b}, *half[2] = {&a, NULL};
    qf_waker w;
    qf_waker_init_thread(&w);
#define ENQV(qq, vv)                                                                               \
    (form == 0   ? qf_queue_enqueue_values(qq, vv)                                                 \
     : form == 1 ? qf_queue_enqueue_values_until(qq, vv, soon())                                   \
     : form == 2 ? qf_queue_try_enqueue_values(qq, vv)                                             \
                 : qf_queue_poll_enqueue_values(qq, vv, &w))
    INVALID(ENQV(NULL, vals), "queue");
    INVALID(ENQV(q, vals), "does not take values");
    INVALID(ENQV(vq, NULL), "vals");
    INVALID(ENQV(vq, half), "vals[1]");
#undef ENQV
    if (form == 3)
        INVALID(qf_queue_poll_enqueue_values(vq, vals, NULL), "waker");
    cr_expect_eq(qf_queue_size(q) + qf_queue_size(vq), 0);
    qf_queue_unref(q);
    qf_queue_unref(vq);
}

CASE(qf_queue_enqueue_values)
{
    bad_enqueue_values(0);
}

CASE(qf_queue_enqueue_values_until)
{
    bad_enqueue_values(1);
}

CASE(qf_queue_try_enqueue_values)
{
    bad_enqueue_values(2);
}

CASE(qf_queue_poll_enqueue_values)
{
    bad_enqueue_values(3);
}

static void bad_dequeue_values(int form)
{
    qf_queue *q = mkq(4), *vq = mkvalq();
    int64_t a = 1, b = 2;
    const void *vals[2] = {&a, &b};
    cr_assert_eq(qf_queue_enqueue_values(vq, vals), QF_OK, "%s", qf_last_message());
    int64_t x = 77, y = 77;
    void *outs[2] = {&x, &y}, *half[2] = {&x, NULL};
    qf_waker w;
    qf_waker_init_thread(&w);
#define DEQV(qq, oo)                                                                               \
    (form == 0   ? qf_queue_dequeue_values(qq, oo)                                                 \
     : form == 1 ? qf_queue_dequeue_values_until(qq, soon(), oo)                                   \
     : form == 2 ? qf_queue_try_dequeue_values(qq, oo)                                             \
                 : qf_queue_poll_dequeue_values(qq, &w, oo))
    INVALID(DEQV(NULL, outs), "queue");
    INVALID(DEQV(q, outs), "does not take values");
    INVALID(DEQV(vq, NULL), "outs");
    INVALID(DEQV(vq, half), "outs[1]");
#undef DEQV
    if (form == 3)
        INVALID(qf_queue_poll_dequeue_values(vq, NULL, outs), "waker");
    cr_expect(x == 77 && y == 77, "a refused dequeue wrote a value");
    cr_expect_eq(qf_queue_size(vq), 1, "nothing was taken");
    qf_queue_unref(q);
    qf_queue_unref(vq);
}

CASE(qf_queue_dequeue_values)
{
    bad_dequeue_values(0);
}

CASE(qf_queue_dequeue_values_until)
{
    bad_dequeue_values(1);
}

CASE(qf_queue_try_dequeue_values)
{
    bad_dequeue_values(2);
}

CASE(qf_queue_poll_dequeue_values)
{
    bad_dequeue_values(3);
}

CASE(qf_queue_takes_values)
{
    qf_queue *q = mkq(4), *vq = mkvalq();
    NEUTRAL(qf_queue_takes_values(NULL), false, "queue");
    cr_expect(!qf_queue_takes_values(q));
    cr_expect(qf_queue_takes_values(vq));
    qf_queue_unref(q);
    qf_queue_unref(vq);
}

CASE(qf_queue_enqueue_many_ptr)
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

CASE(qf_queue_dequeue_many_ptr)
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

CASE(qf_queue_dequeue_up_to_ptr)
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

/* The pointer array calls in their three forms: a NULL or non-pointer
 * queue, NULL arrays and counts; nothing moves and the outputs stay. */
static void bad_enqueue_many_ptrs(int form)
{
    qf_queue *q = mkq(4), *pq = mkptrq();
    int x;
    void *ps[2] = {&x, &x};
    size_t done = 77;
#define ENQ(qq, arr)                                                                               \
    (form == 0   ? qf_queue_enqueue_many_ptrs(qq, arr, 2, &done)                                   \
     : form == 1 ? qf_queue_enqueue_many_ptrs_until(qq, arr, 2, soon(), &done)                     \
                 : qf_queue_try_enqueue_many_ptrs(qq, arr, 2))
    INVALID(ENQ(NULL, ps), "queue");
    INVALID(ENQ(q, ps), "pointer queue");
    INVALID(ENQ(pq, NULL), "NULL");
#undef ENQ
    cr_expect_eq(qf_queue_size(pq), 0, "nothing went in");
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

CASE(qf_queue_enqueue_many_ptrs)
{
    bad_enqueue_many_ptrs(0);
}

CASE(qf_queue_enqueue_many_ptrs_until)
{
    bad_enqueue_many_ptrs(1);
}

CASE(qf_queue_try_enqueue_many_ptrs)
{
    bad_enqueue_many_ptrs(2);
}

static void bad_take_ptrs(int form, bool up_to)
{
    qf_queue *q = mkq(4), *pq = mkptrq();
    int x;
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    void *ps[2] = {UNTOUCHED, UNTOUCHED};
    size_t n = 77;
#define TAKE(qq, arr, np)                                                                          \
    (up_to ? (form == 0   ? qf_queue_dequeue_up_to_ptrs(qq, 2, arr, np)                            \
              : form == 1 ? qf_queue_dequeue_up_to_ptrs_until(qq, 2, soon(), arr, np)              \
                          : qf_queue_try_dequeue_up_to_ptrs(qq, 2, arr, np))                       \
           : (form == 0   ? qf_queue_dequeue_many_ptrs(qq, 2, arr)                                 \
              : form == 1 ? qf_queue_dequeue_many_ptrs_until(qq, 2, soon(), arr)                   \
                          : qf_queue_try_dequeue_many_ptrs(qq, 2, arr)))
    INVALID(TAKE(NULL, ps, &n), "queue");
    INVALID(TAKE(q, ps, &n), "pointer queue");
    INVALID(TAKE(pq, NULL, &n), "ret_ps");
    if (up_to) /* the count is the only way to know what was taken */
        INVALID(TAKE(pq, ps, NULL), "ret_n");
#undef TAKE
    cr_expect_eq(qf_queue_size(pq), 2, "nothing was taken");
    cr_expect_eq(ps[0], UNTOUCHED);
    cr_expect_eq(n, 77);
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

CASE(qf_queue_dequeue_many_ptrs)
{
    bad_take_ptrs(0, false);
}

CASE(qf_queue_dequeue_many_ptrs_until)
{
    bad_take_ptrs(1, false);
}

CASE(qf_queue_try_dequeue_many_ptrs)
{
    bad_take_ptrs(2, false);
}

CASE(qf_queue_dequeue_up_to_ptrs)
{
    bad_take_ptrs(0, true);
}

CASE(qf_queue_dequeue_up_to_ptrs_until)
{
    bad_take_ptrs(1, true);
}

CASE(qf_queue_try_dequeue_up_to_ptrs)
{
    bad_take_ptrs(2, true);
}

/* Bulk dequeue: min 0, min > max, min above the capacity, NULL outputs, a
 * queue of the wrong kind; nothing is taken and the outputs stay. */
static void bad_bulk_ptr(int form)
{
    qf_queue *q = mkq(4), *pq = mkptrq();
    int x;
    cr_assert_eq(qf_queue_enqueue_ptr(pq, &x), QF_OK);
    qf_waker w;
    qf_waker_init_thread(&w);
    void *ps[4] = {UNTOUCHED};
    size_t n = 77;
#define BULKP(qq, mn, mx, arr, np)                                                                 \
    (form == 0   ? qf_queue_dequeue_bulk_ptr(qq, mn, mx, arr, np)                                  \
     : form == 1 ? qf_queue_dequeue_bulk_ptr_until(qq, mn, mx, soon(), arr, np)                    \
     : form == 2 ? qf_queue_try_dequeue_bulk_ptr(qq, mn, mx, arr, np)                              \
                 : qf_queue_poll_dequeue_bulk_ptr(qq, mn, mx, &w, arr, np))
    INVALID(BULKP(NULL, 1, 2, ps, &n), "queue");
    INVALID(BULKP(q, 1, 2, ps, &n), "pointer queue");
    INVALID(BULKP(pq, 1, 2, NULL, &n), "output array");
    INVALID(BULKP(pq, 1, 2, ps, NULL), "ret_n");
    INVALID(BULKP(pq, 0, 2, ps, &n), "min");
    INVALID(BULKP(pq, 3, 2, ps, &n), "min");
    INVALID(BULKP(pq, 9, 12, ps, &n), "capacity");
    INVALID(BULKP(pq, 1, SIZE_MAX, ps, &n), "max");
#undef BULKP
    if (form == 3)
        INVALID(qf_queue_poll_dequeue_bulk_ptr(pq, 1, 2, NULL, ps, &n), "waker");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE, "the waker was not registered");
    cr_expect_eq(qf_queue_size(pq), 1, "nothing was taken");
    cr_expect_eq(ps[0], UNTOUCHED);
    cr_expect_eq(n, 77);
    qf_queue_unref(q);
    qf_queue_unref(pq);
}

CASE(qf_queue_dequeue_bulk_ptr)
{
    bad_bulk_ptr(0);
}

CASE(qf_queue_dequeue_bulk_ptr_until)
{
    bad_bulk_ptr(1);
}

CASE(qf_queue_try_dequeue_bulk_ptr)
{
    bad_bulk_ptr(2);
}

CASE(qf_queue_poll_dequeue_bulk_ptr)
{
    bad_bulk_ptr(3);
}

static void bad_bulk(int form)
{
    qf_queue *q = mkq(4);
    cr_assert_eq(qf_queue_enqueue(q, mkelem(1)), QF_OK);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_element *b = UNTOUCHED;
#define BULK(qq, mn, mx, ret)                                                                      \
    (form == 0   ? qf_queue_dequeue_bulk(qq, mn, mx, ret)                                          \
     : form == 1 ? qf_queue_dequeue_bulk_until(qq, mn, mx, soon(), ret)                            \
     : form == 2 ? qf_queue_try_dequeue_bulk(qq, mn, mx, ret)                                      \
                 : qf_queue_poll_dequeue_bulk(qq, mn, mx, &w, ret))
    INVALID(BULK(NULL, 1, 2, &b), "queue");
    INVALID(BULK(q, 1, 2, NULL), "ret_batch");
    INVALID(BULK(q, 0, 2, &b), "min");
    INVALID(BULK(q, -5, 2, &b), "min");
    INVALID(BULK(q, 3, 2, &b), "min");
    INVALID(BULK(q, 5, 9, &b), "capacity");
#undef BULK
    if (form == 3)
        INVALID(qf_queue_poll_dequeue_bulk(q, 1, 2, NULL, &b), "waker");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE, "the waker was not registered");
    cr_expect_eq(qf_queue_size(q), 1, "nothing was taken");
    cr_expect_eq(b, UNTOUCHED);
    qf_queue_unref(q);
    /* no shapes (spec 20) */
    qf_queue_options o = i64_opts();
    o.shapes = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
    INVALID(form == 3 ? qf_queue_poll_dequeue_bulk(q, 1, 2, &w, &b)
                      : qf_queue_try_dequeue_bulk(q, 1, 2, &b),
            "shapes");
    qf_queue_unref(q);
}

CASE(qf_queue_dequeue_bulk)
{
    bad_bulk(0);
}

CASE(qf_queue_dequeue_bulk_until)
{
    bad_bulk(1);
}

CASE(qf_queue_try_dequeue_bulk)
{
    bad_bulk(2);
}

CASE(qf_queue_poll_dequeue_bulk)
{
    bad_bulk(3);
}

CASE(qf_queue_cancel_poll)
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

CASE(qf_queue_list_new)
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

CASE(qf_queue_list_pick)
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

CASE(qf_queue_list_size)
{
    NEUTRAL(qf_queue_list_size(NULL), 0, "list");
}

CASE(qf_queue_list_shape)
{
    NEUTRAL(qf_queue_list_shape(NULL, 0), NULL, "list");
}

CASE(qf_queue_list_free)
{
    QUIET(qf_queue_list_free(NULL));
}

/* ========================================================= qf_runtime.h
 */

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

CASE(qf_runtime_new)
{
    qf_runtime *rt = UNTOUCHED;
    INVALID(qf_runtime_new(NULL, NULL), "ret_rt");
    INVALID(qf_runtime_new(&(qf_runtime_options){.workers = 5000}, &rt), "1024");
    cr_expect_eq(rt, UNTOUCHED);
}

CASE(qf_runtime_default)
{
    cr_expect_not_null(qf_runtime_default()); /* no argument */
}

CASE(qf_runtime_shutdown)
{
    INVALID(qf_runtime_shutdown(NULL, QF_NO_WAIT), "runtime");
}

CASE(qf_runtime_free)
{
    QUIET(qf_runtime_free(NULL));
}

CASE(qf_runtime_num_workers)
{
    NEUTRAL(qf_runtime_num_workers(NULL), 0, "runtime");
}

CASE(qf_runtime_num_tasks)
{
    NEUTRAL(qf_runtime_num_tasks(NULL), 0, "runtime");
}

CASE(qf_runtime_run_once)
{
    qf_runtime *rt = mkrt(1);
    clear_last();
    cr_expect_eq(qf_runtime_run_once(rt, QF_NO_WAIT), -1, "a runtime with workers");
    EXPECT_RECORDED(QF_FAILED_PRECONDITION, "0 workers");
    qf_runtime_free(rt);
    NEUTRAL(qf_runtime_run_once(NULL, QF_NO_WAIT), -1, "runtime");
}

CASE(qf_runtime_fd)
{
    NEUTRAL(qf_runtime_fd(NULL), -1, "runtime");
}

CASE(qf_runtime_next_deadline)
{
    NEUTRAL(qf_runtime_next_deadline(NULL), QF_FOREVER, "runtime");
}

CASE(qf_task_spawn)
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
    cr_expect_eq(rc, QF_INVALID_ARGUMENT, "got %d", (int)rc);
    cr_expect(strstr(qf_last_message(), "12345") != NULL, "%s", qf_last_message());
}

CASE(qf_task_ref)
{
    QUIET(cr_expect_null(qf_task_ref(NULL)));
}

CASE(qf_task_unref)
{
    QUIET(qf_task_unref(NULL));
}

CASE(qf_task_wake)
{
    REFUSED(qf_task_wake(NULL), "task");
}

CASE(qf_task_waker)
{
    NEUTRAL(qf_task_waker(NULL), NULL, "task");
}

CASE(qf_task_waker_init)
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
    qf_waker w;
    REFUSED(qf_task_waker_init(NULL, &w), "task");
}

CASE(qf_task_sleep_until)
{
    REFUSED(qf_task_sleep_until(NULL, QF_FOREVER), "task");
}

CASE(qf_task_is_cancelled)
{
    NEUTRAL(qf_task_is_cancelled(NULL), false, "task");
}

CASE(qf_task_current)
{
    QUIET(cr_expect_null(qf_task_current())); /* no argument: not in a task */
}

CASE(qf_task_name)
{
    NEUTRAL(qf_task_name(NULL), NULL, "task");
}

CASE(qf_task_is_daemon)
{
    NEUTRAL(qf_task_is_daemon(NULL), false, "task");
}

CASE(qf_task_arg)
{
    NEUTRAL(qf_task_arg(NULL), NULL, "task");
}

CASE(qf_task_is_done)
{
    NEUTRAL(qf_task_is_done(NULL), false, "task");
}

CASE(qf_task_join)
{
    qf_status *st = UNTOUCHED;
    INVALID(qf_task_join(NULL, QF_NO_WAIT, &st), "task");
    cr_expect_eq(st, UNTOUCHED);
}

CASE(qf_runtime_run_once_until)
{
    int64_t polls = 77;
    INVALID(qf_runtime_run_once_until(NULL, QF_NO_WAIT, &polls), "runtime");
    qf_runtime *rt = mkrt(0);
    INVALID(qf_runtime_run_once_until(rt, (qf_deadline)-5, &polls), "deadline");
    qf_runtime_free(rt);
    rt = mkrt(1);
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_runtime_run_once_until(rt, QF_NO_WAIT, &polls),
                "0 workers");
    qf_runtime_free(rt);
    cr_expect_eq(polls, 77, "ret_polls untouched");
}

CASE(qf_runtime_try_run_once)
{
    int64_t polls = 77;
    INVALID(qf_runtime_try_run_once(NULL, &polls), "runtime");
    qf_runtime *rt = mkrt(1);
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_runtime_try_run_once(rt, &polls), "0 workers");
    qf_runtime_free(rt);
    cr_expect_eq(polls, 77, "ret_polls untouched");
}

CASE(qf_runtime_join_coord_until)
{
    qf_coord_join_report r = {.code = (qf_code)99};
    qf_runtime *rt = mkrt(0);
    qf_coord *c = mkcoord();
    INVALID(qf_runtime_join_coord_until(NULL, c, QF_NO_WAIT, false, &r), "runtime");
    INVALID(qf_runtime_join_coord_until(rt, NULL, QF_NO_WAIT, false, &r), "coordinator");
    INVALID(qf_runtime_join_coord_until(rt, c, (qf_deadline)-5, false, &r), "deadline");
    cr_expect_eq(r.code, (qf_code)99, "the report is untouched");
    cr_expect_not(qf_coord_joined(c), "nothing was joined");
    qf_coord_free(c);
    qf_runtime_free(rt);
}

CASE(qf_runtime_join_coord)
{
    qf_coord_join_report r = {.code = (qf_code)99};
    qf_runtime *rt = mkrt(0);
    qf_coord *c = mkcoord();
    INVALID(qf_runtime_join_coord(NULL, c, 1.0, false, &r), "runtime");
    INVALID(qf_runtime_join_coord(rt, NULL, 1.0, false, &r), "coordinator");
    INVALID(qf_runtime_join_coord(rt, c, -1.0, false, &r), "stop_grace_period_secs");
    INVALID(qf_runtime_join_coord(rt, c, NAN, false, &r), "stop_grace_period_secs");
    cr_expect_eq(r.code, (qf_code)99, "the report is untouched");
    cr_expect_not(qf_coord_joined(c), "nothing was joined");
    qf_coord_free(c);
    qf_runtime_free(rt);
}

CASE(qf_task_should_yield)
{
    NEUTRAL(qf_task_should_yield(NULL), false, "task");
}

/* ========================================================== qf_reader.h */

CASE(qf_record_init)
{
    REFUSED(qf_record_init(NULL), "record");
}

CASE(qf_record_clear)
{
    QUIET(qf_record_clear(NULL));
}

CASE(qf_records_clear)
{
    QUIET(qf_records_clear(NULL, 5));
}

CASE(qf_record_to_element)
{
    qf_element *e = UNTOUCHED;
    INVALID(qf_record_to_element(NULL, &e), "record");
    qf_record rec = QF_RECORD_INIT;
    INVALID(qf_record_to_element(&rec, NULL), "ret_elem");
    cr_expect_eq(e, UNTOUCHED);
}

CASE(qf_reader_new)
{
    qf_reader *r = UNTOUCHED;
    INVALID(qf_reader_new(NULL, &r), "options");
    qf_reader_options o = {.kind = QF_READER_TEXT_LINE};
    INVALID(qf_reader_new(&o, NULL), "ret_reader");
    o.kind = (qf_reader_kind)9;
    INVALID(qf_reader_new(&o, &r), "kind");
    o = (qf_reader_options){.kind = QF_READER_TEXT_LINE, .skip_header_lines = -1};
    INVALID(qf_reader_new(&o, &r), "skip_header_lines");
    /* the issue: buffer_bytes 1 was accepted though the header says >= 16 */
    o = (qf_reader_options){.kind = QF_READER_TEXT_LINE, .buffer_bytes = 1};
    INVALID(qf_reader_new(&o, &r), "buffer_bytes");
    o.buffer_bytes = 15;
    INVALID(qf_reader_new(&o, &r), "buffer_bytes");
    o = (qf_reader_options){.kind = QF_READER_FIXED_LENGTH_RECORD, .record_bytes = 0};
    INVALID(qf_reader_new(&o, &r), "record_bytes");
    o.record_bytes = 4;
    o.hop_bytes = -2;
    INVALID(qf_reader_new(&o, &r), "hop_bytes");
    cr_expect_eq(r, UNTOUCHED);
}

CASE(qf_text_line_reader_new)
{
    qf_reader *r = UNTOUCHED;
    INVALID(qf_text_line_reader_new(-1, &r), "skip_header_lines");
    INVALID(qf_text_line_reader_new(0, NULL), "ret_reader");
    cr_expect_eq(r, UNTOUCHED);
}

CASE(qf_fixed_length_record_reader_new)
{
    qf_reader *r = UNTOUCHED;
    INVALID(qf_fixed_length_record_reader_new(0, 0, 0, 0, &r), "record_bytes");
    INVALID(qf_fixed_length_record_reader_new(4, -1, 0, 0, &r), "header_bytes");
    INVALID(qf_fixed_length_record_reader_new(4, 0, -1, 0, &r), "footer_bytes");
    INVALID(qf_fixed_length_record_reader_new(4, 0, 0, 0, NULL), "ret_reader");
    cr_expect_eq(r, UNTOUCHED);
}

CASE(qf_identity_reader_new)
{
    INVALID(qf_identity_reader_new(NULL), "ret_reader");
}

CASE(qf_tfrecord_reader_new)
{
    INVALID(qf_tfrecord_reader_new(NULL), "ret_reader");
}

CASE(qf_reader_free)
{
    QUIET(qf_reader_free(NULL));
}

CASE(qf_reader_name)
{
    NEUTRAL(qf_reader_name(NULL), NULL, "reader");
}

CASE(qf_reader_get_kind)
{
    NEUTRAL(qf_reader_get_kind(NULL), QF_READER_TEXT_LINE, "reader");
}

CASE(qf_reader_kind_name)
{
    NEUTRAL(qf_reader_kind_name(NULL), NULL, "reader");
}

CASE(qf_reader_num_records_produced)
{
    NEUTRAL(qf_reader_num_records_produced(NULL), 0, "reader");
}

CASE(qf_reader_num_work_units_completed)
{
    NEUTRAL(qf_reader_num_work_units_completed(NULL), 0, "reader");
}

CASE(qf_reader_reset)
{
    QUIET(qf_reader_reset(NULL));
}

/* Every read form: NULL reader, work queue, output; a work queue that is not
 * one string component. The work queue keeps its item. */
static void bad_read(int form, bool up_to)
{
    qf_reader *r = NULL;
    cr_assert_eq(qf_identity_reader_new(&r), QF_OK);
    qf_queue *files = mkstrq(), *ints = mkq(2);
    cr_assert_eq(
        qf_queue_enqueue(files, qf_element_of(1, (qf_tensor *[]){qf_tensor_new_cstr("a")})), QF_OK);
    cr_assert_eq(qf_queue_enqueue(ints, mkelem(1)), QF_OK);
    qf_record rec = QF_RECORD_INIT;
    size_t n = 77;
    qf_waker w;
    qf_waker_init_thread(&w);
#define READ(rr, qq, recp, np, wk)                                                                 \
    (up_to ? (form == 0   ? qf_reader_read_up_to(rr, qq, 1, recp, np)                              \
              : form == 1 ? qf_reader_read_up_to_until(rr, qq, 1, soon(), recp, np)                \
              : form == 2 ? qf_reader_try_read_up_to(rr, qq, 1, recp, np)                          \
                          : qf_reader_poll_read_up_to(rr, qq, 1, wk, recp, np))                    \
           : (form == 0   ? qf_reader_read(rr, qq, recp)                                           \
              : form == 1 ? qf_reader_read_until(rr, qq, soon(), recp)                             \
              : form == 2 ? qf_reader_try_read(rr, qq, recp)                                       \
                          : qf_reader_poll_read(rr, qq, wk, recp)))
    INVALID(READ(NULL, files, &rec, &n, &w), "reader");
    INVALID(READ(r, NULL, &rec, &n, &w), "work queue");
    INVALID(READ(r, files, NULL, &n, &w), up_to ? "records" : "ret_rec");
    if (up_to)
        INVALID(READ(r, files, &rec, NULL, &w), "ret_n");
    if (form == 3)
        INVALID(READ(r, files, &rec, &n, NULL), "waker");
    INVALID(READ(r, ints, &rec, &n, &w), "string");
#undef READ
    cr_expect_eq(qf_queue_size(files), 1, "the work item is still there");
    cr_expect_eq(qf_queue_size(ints), 1);
    cr_expect_eq(n, 77, "ret_n untouched");
    cr_expect_eq(qf_reader_num_records_produced(r), 0);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(files);
    qf_queue_unref(ints);
}

CASE(qf_reader_read)
{
    bad_read(0, false);
}

CASE(qf_reader_read_until)
{
    bad_read(1, false);
}

CASE(qf_reader_try_read)
{
    bad_read(2, false);
}

CASE(qf_reader_poll_read)
{
    bad_read(3, false);
}

CASE(qf_reader_read_up_to)
{
    bad_read(0, true);
}

CASE(qf_reader_read_up_to_until)
{
    bad_read(1, true);
}

CASE(qf_reader_try_read_up_to)
{
    bad_read(2, true);
}

CASE(qf_reader_poll_read_up_to)
{
    bad_read(3, true);
}

CASE(qf_tfrecord_reader_new_compressed)
{
    qf_reader *r = UNTOUCHED;
    INVALID(qf_tfrecord_reader_new_compressed(QF_COMPRESSION_GZIP, NULL, NULL), "ret_reader");
    INVALID(qf_tfrecord_reader_new_compressed((qf_compression)7, NULL, &r), "compression");
    INVALID(qf_tfrecord_reader_new_compressed(QF_COMPRESSION_ZLIB,
                                              &(qf_zlib_options){.window_bits = 3}, &r),
            "window_bits");
    cr_expect_eq(r, UNTOUCHED);
}

CASE(qf_whole_file_reader_new)
{
    INVALID(qf_whole_file_reader_new(NULL), "ret_reader");
}

CASE(qf_lmdb_reader_new)
{
    qf_reader *r = UNTOUCHED;
    if (qf_reader_have_lmdb()) {
        INVALID(qf_lmdb_reader_new(NULL), "ret_reader");
    } else {
        clear_last();
        qf_code rc = qf_lmdb_reader_new(&r);
        cr_expect(rc == QF_UNIMPLEMENTED, "without liblmdb: %s", qf_code_name(rc));
    }
    cr_expect_eq(r, UNTOUCHED);
}

CASE(qf_reader_have_lmdb)
{
    QUIET((void)qf_reader_have_lmdb()); /* no argument */
}

CASE(qf_compression_parse)
{
    qf_compression c = (qf_compression)77;
    INVALID(qf_compression_parse("ZLIB", NULL), "ret");
    INVALID(qf_compression_parse("LZ4", &c), "LZ4");
    INVALID(qf_compression_parse("zlib", &c), "zlib"); /* TensorFlow's names are upper case */
    cr_expect_eq(c, (qf_compression)77, "*ret untouched");
}

CASE(qf_reader_num_warnings)
{
    NEUTRAL(qf_reader_num_warnings(NULL), 0, "reader");
}

CASE(qf_reader_last_warning)
{
    clear_last();
    const char *w = qf_reader_last_warning(NULL);
    cr_expect(w && strcmp(w, "") == 0, "\"\" for a NULL reader");
    EXPECT_RECORDED(QF_INVALID_ARGUMENT, "reader");
}

CASE(qf_reader_serialize_state)
{
    void *buf = UNTOUCHED;
    size_t len = 77;
    INVALID(qf_reader_serialize_state(NULL, &buf, &len), "reader");
    qf_reader *r = NULL;
    cr_assert_eq(qf_identity_reader_new(&r), QF_OK);
    INVALID(qf_reader_serialize_state(r, NULL, &len), "ret_buf");
    INVALID(qf_reader_serialize_state(r, &buf, NULL), "ret_len");
    cr_expect_eq(buf, UNTOUCHED);
    cr_expect_eq(len, 77);
    qf_reader_free(r);
}

CASE(qf_reader_restore_state)
{
    qf_reader *r = NULL;
    cr_assert_eq(qf_identity_reader_new(&r), QF_OK);
    INVALID(qf_reader_restore_state(NULL, "state", 5), "reader");
    INVALID(qf_reader_restore_state(r, NULL, 5), "state");
    static const char junk[64] = "not a state at all";
    INVALID(qf_reader_restore_state(r, junk, sizeof(junk)), "not a reader state");
    cr_expect_eq(qf_reader_num_records_produced(r), 0, "the reader is unchanged");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 0);
    qf_reader_free(r);
}

/* ======================================================== qf_tfrecord.h */

/* A TFRecord file of one record "abc" in a fresh directory; `path` gets
 * its name (the caller removes both). */
static void mktfrecord(char *path, size_t size)
{
    char dir[] = "/tmp/qf-bad-input-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, size, "%s/one.tfrecord", dir);
    qf_tfrecord_writer *w = NULL;
    cr_assert_eq(qf_tfrecord_writer_open(path, NULL, &w), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_tfrecord_writer_write(w, "abc", 3), QF_OK);
    cr_assert_eq(qf_tfrecord_writer_close(w), QF_OK);
}

static void rmtfrecord(const char *path)
{
    unlink(path);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        rmdir(dir);
    }
}

CASE(qf_tfrecord_writer_open)
{
    char dir[] = "/tmp/qf-bad-input-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/w.tfrecord", dir);
    qf_tfrecord_writer *w = UNTOUCHED;
    INVALID(qf_tfrecord_writer_open(NULL, NULL, &w), "path");
    INVALID(qf_tfrecord_writer_open(path, NULL, NULL), "ret_writer");
    INVALID(
        qf_tfrecord_writer_open(path, &(qf_tfrecord_options){.compression = (qf_compression)9}, &w),
        "compression");
    INVALID(qf_tfrecord_writer_open(path,
                                    &(qf_tfrecord_options){.compression = QF_COMPRESSION_GZIP,
                                                           .zlib = {.window_bits = 3}},
                                    &w),
            "window_bits");
    cr_expect_eq(w, UNTOUCHED);
    cr_expect_neq(access(path, F_OK), 0, "no file created for a bad option");
    rmdir(dir);
}

CASE(qf_tfrecord_writer_write)
{
    INVALID(qf_tfrecord_writer_write(NULL, "x", 1), "writer");
    char dir[] = "/tmp/qf-bad-input-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/w.tfrecord", dir);
    qf_tfrecord_writer *w = NULL;
    cr_assert_eq(qf_tfrecord_writer_open(path, NULL, &w), QF_OK);
    INVALID(qf_tfrecord_writer_write(w, NULL, 3), "data");
    cr_expect_eq(qf_tfrecord_writer_bytes(w), 0, "nothing written");
    cr_expect_eq(qf_tfrecord_writer_write(w, NULL, 0), QF_OK, "an empty record");
    cr_expect_eq(qf_tfrecord_writer_close(w), QF_OK);
    unlink(path);
    rmdir(dir);
}

CASE(qf_tfrecord_writer_flush)
{
    INVALID(qf_tfrecord_writer_flush(NULL), "writer");
}

CASE(qf_tfrecord_writer_close)
{
    QUIET(cr_expect_eq(qf_tfrecord_writer_close(NULL), QF_OK)); /* NULL-safe */
}

CASE(qf_tfrecord_writer_bytes)
{
    NEUTRAL(qf_tfrecord_writer_bytes(NULL), 0, "writer");
}

CASE(qf_crc32c_extend)
{
    NEUTRAL(qf_crc32c_extend(0x1234u, NULL, 5), 0x1234u, "data");
    /* NULL with nothing to read is the empty buffer: nothing recorded. */
    clear_last();
    cr_expect_eq(qf_crc32c_extend(0x1234u, NULL, 0), 0x1234u);
    cr_expect_eq(qf_last_code(), QF_OK);
}

CASE(qf_tfrecord_iterator_open)
{
    char path[256];
    mktfrecord(path, sizeof(path));
    qf_tfrecord_iterator *it = UNTOUCHED;
    INVALID(qf_tfrecord_iterator_open(NULL, NULL, &it), "path");
    INVALID(qf_tfrecord_iterator_open(path, NULL, NULL), "ret_it");
    INVALID(qf_tfrecord_iterator_open(
                path, &(qf_tfrecord_options){.compression = (qf_compression)9}, &it),
            "compression");
    cr_expect_eq(it, UNTOUCHED);
    rmtfrecord(path);
}

/* NULL iterator and outputs; the iterator keeps its place. */
static void bad_iterator_next(bool until)
{
    char path[256];
    mktfrecord(path, sizeof(path));
    qf_tfrecord_iterator *it = NULL;
    cr_assert_eq(qf_tfrecord_iterator_open(path, NULL, &it), QF_OK, "%s", qf_last_message());
    const char *data = UNTOUCHED;
    size_t len = 77;
#define NEXT(i, d, l)                                                                              \
    (until ? qf_tfrecord_iterator_next_until(i, soon(), d, l) : qf_tfrecord_iterator_next(i, d, l))
    INVALID(NEXT(NULL, &data, &len), "iterator");
    INVALID(NEXT(it, NULL, &len), "ret_data");
    INVALID(NEXT(it, &data, NULL), "ret_len");
    cr_expect_eq(data, UNTOUCHED);
    cr_expect_eq(len, 77);
    cr_expect_eq(NEXT(it, &data, &len), QF_OK, "the first record is still there");
#undef NEXT
    cr_expect_eq(len, 3);
    qf_tfrecord_iterator_free(it);
    rmtfrecord(path);
}

CASE(qf_tfrecord_iterator_next)
{
    bad_iterator_next(false);
}

CASE(qf_tfrecord_iterator_next_until)
{
    bad_iterator_next(true);
}

CASE(qf_tfrecord_iterator_offset)
{
    NEUTRAL(qf_tfrecord_iterator_offset(NULL), 0, "iterator");
}

CASE(qf_tfrecord_iterator_free)
{
    QUIET(qf_tfrecord_iterator_free(NULL));
}

/* finish: NULL refused; a finished writer refuses writes and flushes with
 * FAILED_PRECONDITION and keeps its byte count. */
CASE(qf_tfrecord_writer_finish)
{
    INVALID(qf_tfrecord_writer_finish(NULL), "writer");
    char path[256];
    mktfrecord(path, sizeof(path));
    qf_tfrecord_writer *w = NULL;
    cr_assert_eq(qf_tfrecord_writer_open(path, NULL, &w), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_tfrecord_writer_write(w, "abc", 3), QF_OK);
    cr_expect_eq(qf_tfrecord_writer_finish(w), QF_OK);
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_tfrecord_writer_write(w, "x", 1), "closed");
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_tfrecord_writer_flush(w), "closed");
    cr_expect_eq(qf_tfrecord_writer_finish(w), QF_OK, "finishing twice is harmless");
    cr_expect_eq(qf_tfrecord_writer_bytes(w), 19);
    qf_tfrecord_writer_free(w);
    rmtfrecord(path);
}

CASE(qf_tfrecord_writer_free)
{
    QUIET(qf_tfrecord_writer_free(NULL));
}

CASE(qf_tfrecord_random_reader_open)
{
    char path[256];
    mktfrecord(path, sizeof(path));
    qf_tfrecord_random_reader *rr = UNTOUCHED;
    INVALID(qf_tfrecord_random_reader_open(NULL, NULL, &rr), "path");
    INVALID(qf_tfrecord_random_reader_open(path, NULL, NULL), "ret_rr");
    INVALID(qf_tfrecord_random_reader_open(
                path, &(qf_tfrecord_options){.compression = (qf_compression)9}, &rr),
            "compression");
    INVALID(qf_tfrecord_random_reader_open(
                path, &(qf_tfrecord_options){.compression = QF_COMPRESSION_GZIP}, &rr),
            "uncompressed");
    EXPECT_CODE(QF_NOT_FOUND, qf_tfrecord_random_reader_open("/nonexistent/x", NULL, &rr),
                "/nonexistent/x");
    cr_expect_eq(rr, UNTOUCHED);
    rmtfrecord(path);
}

/* NULL reader and outputs, offsets that are not a record's: refused with
 * the outputs untouched, and the reader still reads record 0. */
CASE(qf_tfrecord_random_reader_read)
{
    char path[256];
    mktfrecord(path, sizeof(path));
    qf_tfrecord_random_reader *rr = NULL;
    cr_assert_eq(qf_tfrecord_random_reader_open(path, NULL, &rr), QF_OK, "%s", qf_last_message());
    const char *data = UNTOUCHED;
    size_t len = 77;
    uint64_t next = 88;
    INVALID(qf_tfrecord_random_reader_read(NULL, 0, &data, &len, &next), "reader");
    INVALID(qf_tfrecord_random_reader_read(rr, 0, NULL, &len, &next), "ret_data");
    INVALID(qf_tfrecord_random_reader_read(rr, 0, &data, NULL, &next), "ret_len");
    EXPECT_CODE(QF_OUT_OF_RANGE, qf_tfrecord_random_reader_read(rr, 19, &data, &len, &next),
                "no record at offset 19");
    EXPECT_CODE(QF_OUT_OF_RANGE, qf_tfrecord_random_reader_read(rr, UINT64_MAX, &data, &len, &next),
                "no record at offset");
    EXPECT_CODE(QF_DATA_LOSS, qf_tfrecord_random_reader_read(rr, 2, &data, &len, &next),
                "record at 2");
    cr_expect_eq(data, UNTOUCHED);
    cr_expect_eq(len, 77);
    cr_expect_eq(next, 88);
    cr_expect_eq(qf_tfrecord_random_reader_read(rr, 0, &data, &len, NULL), QF_OK);
    cr_expect_eq(len, 3);
    qf_tfrecord_random_reader_free(rr);
    rmtfrecord(path);
}

CASE(qf_tfrecord_random_reader_free)
{
    QUIET(qf_tfrecord_random_reader_free(NULL));
}

/* ==================================================== qf_queue_runner.h */

static qf_code produce_one(void *arg, qf_element **ret)
{
    (void)arg;
    *ret = mkelem(1);
    return QF_OK;
}

static qf_code produce_bogus(void *arg, qf_element **ret)
{
    (void)arg;
    (void)ret;
    return (qf_code)12345;
}

static qf_code noop_runner_action(void *arg)
{
    (void)arg;
    return QF_OK;
}

static qf_queue_runner *mkrunner(qf_queue *q, qf_produce_fn fn)
{
    qf_enqueue_op op = {.name = "op", .kind = QF_OP_PRODUCE, .produce = fn};
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_queue_runner_new(q, &op, 1, NULL, &r), QF_OK, "%s", qf_last_message());
    return r;
}

CASE(qf_queue_runner_new)
{
    qf_queue *q = mkq(2);
    qf_queue_runner *r = UNTOUCHED;
    qf_enqueue_op op = {.name = "op", .kind = QF_OP_PRODUCE, .produce = produce_one};
    INVALID(qf_queue_runner_new(NULL, &op, 1, NULL, &r), "Must provide queue");
    INVALID(qf_queue_runner_new(q, NULL, 1, NULL, &r), "Must provide queue");
    INVALID(qf_queue_runner_new(q, &op, 0, NULL, &r), "Must provide queue");
    INVALID(qf_queue_runner_new(q, &op, 1, NULL, NULL), "Must provide queue");
    qf_enqueue_op no_fn = {.name = "x", .kind = QF_OP_PRODUCE};
    INVALID(qf_queue_runner_new(q, &no_fn, 1, NULL, &r), "lacks its function");
    qf_enqueue_op bad_kind = {.name = "x", .kind = (qf_enqueue_op_kind)42, .produce = produce_one};
    INVALID(qf_queue_runner_new(q, &bad_kind, 1, NULL, &r), "lacks its function");
    qf_queue_runner_options o = {.closed_codes = (qf_code[]){(qf_code)777}, .n_closed_codes = 1};
    INVALID(qf_queue_runner_new(q, &op, 1, &o, &r), "777");
    o.closed_codes = (qf_code[]){QF_OK};
    INVALID(qf_queue_runner_new(q, &op, 1, &o, &r), "canonical");
    o.closed_codes = NULL;
    INVALID(qf_queue_runner_new(q, &op, 1, &o, &r), "canonical");
    cr_expect_eq(r, UNTOUCHED);
    qf_queue_unref(q);
}

CASE(qf_queue_runner_free)
{
    QUIET(cr_expect_eq(qf_queue_runner_free(NULL), QF_OK)); /* NULL-safe */
}

CASE(qf_queue_runner_name)
{
    NEUTRAL(qf_queue_runner_name(NULL), NULL, "runner");
}

CASE(qf_queue_runner_queue)
{
    NEUTRAL(qf_queue_runner_queue(NULL), NULL, "runner");
}

CASE(qf_queue_runner_num_ops)
{
    NEUTRAL(qf_queue_runner_num_ops(NULL), 0, "runner");
}

CASE(qf_queue_runner_closed_codes)
{
    qf_code out[2];
    NEUTRAL(qf_queue_runner_closed_codes(NULL, out, 2), 0, "runner");
    qf_queue *q = mkq(2);
    qf_queue_runner *r = mkrunner(q, produce_one);
    QUIET(cr_expect_eq(qf_queue_runner_closed_codes(r, NULL, 5), 1, "NULL out: only counts"));
    qf_queue_runner_free(r);
    qf_queue_unref(q);
}

CASE(qf_queue_runner_start)
{
    qf_queue *q = mkq(2);
    qf_queue_runner *r = mkrunner(q, produce_one);
    qf_runtime *rt = mkrt(1);
    qf_task **ts = UNTOUCHED;
    size_t n = 77;
    INVALID(qf_queue_runner_start(NULL, rt, NULL, QF_RUNNER_START, &ts, &n), "runner");
    INVALID(qf_queue_runner_start(r, NULL, NULL, QF_RUNNER_START, &ts, &n), "runtime");
    INVALID(qf_queue_runner_start(r, rt, NULL, 1u << 5, &ts, &n), "flags");
    cr_expect_eq(ts, UNTOUCHED);
    cr_expect_eq(n, 77);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0, "nothing started");
    qf_runtime_free(rt);
    qf_queue_runner_free(r);
    qf_queue_unref(q);
    /* an op returning something that is not a qf_code fails the op with
     * INVALID_ARGUMENT (it used to become the task's result) */
    q = mkq(2);
    r = mkrunner(q, produce_bogus);
    rt = mkrt(1);
    qf_coord *c = mkcoord();
    cr_assert_eq(qf_queue_runner_start(r, rt, c, QF_RUNNER_START, &ts, &n), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "12345") != NULL, "%s", qf_last_message());
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(qf_task_join(ts[i], soon(), NULL), QF_INVALID_ARGUMENT);
    qf_tasks_free(ts, n);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_queue_runner_free(r);
    qf_queue_unref(q);
}

CASE(qf_queue_runners_start)
{
    qf_queue *q = mkq(2);
    qf_queue_runner *r = mkrunner(q, produce_one);
    qf_runtime *rt = mkrt(1);
    qf_task **ts = UNTOUCHED;
    size_t n = 77;
    qf_queue_runner *with_null[2] = {r, NULL};
    INVALID(qf_queue_runners_start(NULL, 1, rt, NULL, QF_RUNNER_START, &ts, &n), "runners");
    INVALID(qf_queue_runners_start(with_null, 2, rt, NULL, QF_RUNNER_START, &ts, &n), "runners[1]");
    INVALID(qf_queue_runners_start(&r, 1, NULL, NULL, QF_RUNNER_START, &ts, &n), "runtime");
    INVALID(qf_queue_runners_start(&r, 1, rt, NULL, 1u << 5, &ts, &n), "flags");
    cr_expect_eq(ts, UNTOUCHED);
    cr_expect_eq(n, 77);
    cr_expect_eq(qf_queue_runner_running(r, rt), 0, "nothing started");
    qf_runtime_free(rt);
    qf_queue_runner_free(r);
    qf_queue_unref(q);
}

CASE(qf_tasks_free)
{
    QUIET(qf_tasks_free(NULL, 3));
}

CASE(qf_queue_runner_running)
{
    NEUTRAL(qf_queue_runner_running(NULL, NULL), 0, "runner");
}

CASE(qf_queue_runner_num_exceptions)
{
    NEUTRAL(qf_queue_runner_num_exceptions(NULL), 0, "runner");
}

CASE(qf_queue_runner_exception)
{
    NEUTRAL(qf_queue_runner_exception(NULL, 0), NULL, "runner");
    qf_queue *q = mkq(2);
    qf_queue_runner *r = mkrunner(q, produce_one);
    QUIET(cr_expect_null(qf_queue_runner_exception(r, 3))); /* none raised */
    qf_queue_runner_free(r);
    qf_queue_unref(q);
}

CASE(qf_scope_new)
{
    INVALID(qf_scope_new(NULL), "ret_scope");
}

CASE(qf_scope_free)
{
    QUIET(qf_scope_free(NULL));
}

CASE(qf_scope_default)
{
    cr_expect_not_null(qf_scope_default()); /* no argument */
}

CASE(qf_scope_registry)
{
    QUIET(cr_expect_eq(qf_scope_registry(NULL), qf_queue_registry_default()));
}

CASE(qf_scope_add_queue_runner)
{
    qf_scope *s = mkscope();
    INVALID(qf_scope_add_queue_runner(s, NULL, NULL), "runner");
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, NULL, 0), 0);
    qf_scope_free(s);
}

CASE(qf_scope_get_collection)
{
    qf_scope *s = mkscope();
    QUIET(cr_expect_eq(qf_scope_get_collection(s, "nothing here", NULL, NULL, 9), 0));
    qf_scope_free(s);
}

CASE(qf_start_queue_runners)
{
    qf_scope *s = mkscope();
    qf_task **ts = UNTOUCHED;
    size_t n = 77;
    INVALID(qf_start_queue_runners(NULL, NULL, s, NULL, 1u << 6, &ts, &n), "flags");
    cr_expect_eq(ts, UNTOUCHED);
    cr_expect_eq(n, 77);
    qf_scope_free(s);
}

CASE(qf_scope_register_queue)
{
    qf_scope *s = mkscope();
    qf_queue *q = mkq(2);
    INVALID(qf_scope_register_queue(NULL, q), "scope");
    INVALID(qf_scope_register_queue(s, NULL), "queue");
    qf_queue_unref(q);
    qf_scope_free(s);
}

CASE(qf_scope_register_op)
{
    qf_scope *s = mkscope();
    qf_enqueue_op op = {.kind = QF_OP_PRODUCE, .produce = produce_one};
    INVALID(qf_scope_register_op(s, NULL), "scope and a name");
    INVALID(qf_scope_register_op(s, &op), "scope and a name");
    op.name = "op";
    INVALID(qf_scope_register_op(NULL, &op), "scope and a name");
    qf_scope_free(s);
}

CASE(qf_scope_register_action)
{
    qf_scope *s = mkscope();
    INVALID(qf_scope_register_action(s, "a", NULL, NULL), "function");
    INVALID(qf_scope_register_action(s, NULL, noop_runner_action, NULL), "name");
    INVALID(qf_scope_register_action(NULL, "a", noop_runner_action, NULL), "name");
    qf_scope_free(s);
}

CASE(qf_queue_runner_to_def)
{
    char *text = UNTOUCHED;
    INVALID(qf_queue_runner_to_def(NULL, NULL, &text), "runner");
    qf_queue *q = mkq(2);
    qf_queue_runner *r = mkrunner(q, produce_one);
    INVALID(qf_queue_runner_to_def(r, NULL, NULL), "ret_text");
    cr_expect_eq(text, UNTOUCHED);
    qf_queue_runner_free(r);
    qf_queue_unref(q);
}

CASE(qf_queue_runner_from_def)
{
    qf_scope *s = mkscope();
    qf_queue_runner *r = UNTOUCHED;
    INVALID(qf_queue_runner_from_def(NULL, "queue_name: \"q\"\n", NULL, &r), "NULL");
    INVALID(qf_queue_runner_from_def(s, NULL, NULL, &r), "NULL");
    INVALID(qf_queue_runner_from_def(s, "queue_name: \"q\"\n", NULL, NULL), "NULL");
    INVALID(qf_queue_runner_from_def(s, "no colon here\n", NULL, &r), "Malformed");
    INVALID(qf_queue_runner_from_def(s, "colour: \"red\"\n", NULL, &r), "Unknown");
    INVALID(qf_queue_runner_from_def(s, "queue_closed_exception_types: 777\n", NULL, &r), "777");
    INVALID(qf_queue_runner_from_def(s, "enqueue_op_name: \"x\"\n", NULL, &r), "queue_name");
    EXPECT_CODE(QF_NOT_FOUND, qf_queue_runner_from_def(s, "queue_name: \"nowhere\"\n", NULL, &r),
                "nowhere");
    cr_expect_eq(r, UNTOUCHED);
    qf_scope_free(s);
}

static qf_code tick_fn(void *arg)
{
    (void)arg;
    return QF_OK;
}

static qf_code bogus_tick(void *arg)
{
    (void)arg;
    return QF_PENDING; /* not a qf_code: the task would park after leaving */
}

CASE(qf_looper_start)
{
    qf_runtime *rt = mkrt(1);
    qf_coord *c = mkcoord();
    qf_task *t = UNTOUCHED;
    INVALID(qf_looper_start(rt, NULL, 1.0, tick_fn, NULL, NULL, &t), "Coordinator");
    INVALID(qf_looper_start(rt, c, 1.0, NULL, NULL, NULL, &t), "function");
    /* the issue: an interval of NaN ticked 953,000 times in 200 ms */
    INVALID(qf_looper_start(rt, c, NAN, tick_fn, NULL, NULL, &t), "interval_secs");
    INVALID(qf_looper_start(rt, c, INFINITY, tick_fn, NULL, NULL, &t), "interval_secs");
    INVALID(qf_looper_start(rt, c, -1.0, tick_fn, NULL, NULL, &t), "interval_secs");
    INVALID(qf_looper_start(rt, c, 1e300, tick_fn, NULL, NULL, &t), "interval_secs");
    cr_expect_eq(t, UNTOUCHED);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 1.0, false, NULL), QF_OK, "nothing was started");
    /* a function returning something that is not a qf_code ends the looper
     * with INVALID_ARGUMENT */
    qf_coord_clear_stop(c);
    cr_assert_eq(qf_looper_start(rt, c, 0.0, bogus_tick, NULL, NULL, &t), QF_OK);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "-1") != NULL, "%s", qf_last_message());
    cr_expect_eq(qf_task_join(t, soon(), NULL), QF_INVALID_ARGUMENT);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_coord_free(c);
}

/* =========================================================== qf_input.h */

CASE(qf_fill_gauge_value)
{
    QUIET(cr_expect_eq(qf_fill_gauge_value(NULL), 0.0)); /* documented */
    qf_fill_gauge g = {.queue = NULL, .capacity = 4};
    QUIET(cr_expect_eq(qf_fill_gauge_value(&g), 0.0));
}

CASE(qf_input_producer_gauge)
{
    qf_fill_gauge g = {.capacity = 77};
    INVALID(qf_input_producer_gauge(NULL, NULL, &g), "queue");
    qf_queue *q = mkq(2);
    INVALID(qf_input_producer_gauge(q, NULL, NULL), "ret_gauge");
    cr_expect_eq(g.capacity, 77, "untouched");
    qf_queue_unref(q);
}

CASE(qf_input_producer_fraction_full)
{
    QUIET(cr_expect_eq(qf_input_producer_fraction_full(NULL), 0.0)); /* documented */
}

CASE(qf_limit_epochs_new)
{
    qf_limit_epochs *l = UNTOUCHED;
    INVALID(qf_limit_epochs_new(NULL, 1, &l), "tensor");
    qf_tensor *t = qf_tensor_new_i64(1);
    INVALID(qf_limit_epochs_new(t, -1, &l), "num_epochs");
    INVALID(qf_limit_epochs_new(t, 1, NULL), "ret");
    cr_expect_eq(qf_tensor_refcount(t), 1, "no reference taken");
    cr_expect_eq(l, UNTOUCHED);
    qf_tensor_unref(t);
}

CASE(qf_limit_epochs_free)
{
    QUIET(qf_limit_epochs_free(NULL));
}

CASE(qf_limit_epochs_next)
{
    qf_tensor *got = UNTOUCHED;
    INVALID(qf_limit_epochs_next(NULL, &got), "limit_epochs");
    qf_tensor *t = qf_tensor_new_i64(1);
    qf_limit_epochs *l = NULL;
    cr_assert_eq(qf_limit_epochs_new(t, 1, &l), QF_OK);
    INVALID(qf_limit_epochs_next(l, NULL), "ret_t");
    cr_expect_eq(qf_limit_epochs_count(l), 0, "no epoch counted");
    cr_expect_eq(got, UNTOUCHED);
    qf_limit_epochs_free(l);
    qf_tensor_unref(t);
}

CASE(qf_limit_epochs_count)
{
    NEUTRAL(qf_limit_epochs_count(NULL), 0, "limit_epochs");
}

CASE(qf_limit_epochs_reset)
{
    REFUSED(qf_limit_epochs_reset(NULL), "limit_epochs");
}

CASE(qf_limit_epochs_produce)
{
    qf_element *e = UNTOUCHED;
    INVALID(qf_limit_epochs_produce(NULL, &e), "limit_epochs");
    qf_tensor *t = qf_tensor_new_i64(1);
    qf_limit_epochs *l = NULL;
    cr_assert_eq(qf_limit_epochs_new(t, 1, &l), QF_OK);
    INVALID(qf_limit_epochs_produce(l, NULL), "ret_elem");
    cr_expect_eq(qf_limit_epochs_count(l), 0);
    cr_expect_eq(e, UNTOUCHED);
    qf_limit_epochs_free(l);
    qf_tensor_unref(t);
}

/* A producer refused leaves nothing in the scope and *ret_queue untouched. */
#define NOTHING_ADDED(s, q)                                                                        \
    do {                                                                                           \
        cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, NULL, 0), 0, "no runner added");       \
        cr_expect_eq(q, UNTOUCHED, "ret_queue untouched");                                         \
    } while (0)

CASE(qf_input_producer)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_input_producer(s, NULL, NULL, &q), "input tensor");
    qf_tensor *sc = qf_tensor_new_i64(1);
    INVALID(qf_input_producer(s, sc, NULL, &q), "rank 1");
    qf_shape sh = QF_SHAPE(3);
    qf_tensor *v = qf_tensor_new(QF_INT64, &sh);
    INVALID(qf_input_producer(s, v, &(qf_input_producer_options){.num_epochs = -1}, &q),
            "num_epochs");
    INVALID(qf_input_producer(s, v, &(qf_input_producer_options){.shuffle = (qf_shuffle)7}, &q),
            "shuffle");
    qf_shape two = QF_SHAPE(2);
    INVALID(qf_input_producer(s, v, &(qf_input_producer_options){.element_shape = &two}, &q),
            "element_shape");
    qf_shape none = QF_SHAPE(0);
    qf_tensor *empty = qf_tensor_new(QF_INT64, &none);
    INVALID(qf_input_producer(s, empty, NULL, &q), "non-empty");
    NOTHING_ADDED(s, q);
    qf_tensor_unref(sc);
    qf_tensor_unref(v);
    qf_tensor_unref(empty);
    qf_scope_free(s);
}

CASE(qf_string_input_producer)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_string_input_producer(s, NULL, 2, NULL, &q), "non-null input tensor");
    INVALID(qf_string_input_producer(s, (const char *[]){"a"}, 0, NULL, &q),
            "non-null input tensor");
    INVALID(qf_string_input_producer(s, (const char *[]){"a", NULL}, 2, NULL, &q), "string 1");
    INVALID(qf_string_input_producer(s, (const char *[]){"a"}, 1,
                                     &(qf_input_producer_options){.num_epochs = -3}, &q),
            "num_epochs");
    NOTHING_ADDED(s, q);
    qf_scope_free(s);
}

CASE(qf_string_input_producer_tensor)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_string_input_producer_tensor(s, NULL, NULL, &q), "tensor");
    qf_shape sh = QF_SHAPE(2);
    qf_tensor *ints = qf_tensor_new(QF_INT64, &sh);
    INVALID(qf_string_input_producer_tensor(s, ints, NULL, &q), "string tensor");
    qf_tensor *sc = qf_tensor_new_cstr("a");
    INVALID(qf_string_input_producer_tensor(s, sc, NULL, &q), "1-D");
    NOTHING_ADDED(s, q);
    qf_tensor_unref(ints);
    qf_tensor_unref(sc);
    qf_scope_free(s);
}

CASE(qf_range_input_producer)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_range_input_producer(s, 0, NULL, &q), "limit > 0");
    INVALID(qf_range_input_producer(s, -3, NULL, &q), "limit > 0");
    NOTHING_ADDED(s, q);
    qf_scope_free(s);
}

CASE(qf_slice_input_producer)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_slice_input_producer(s, NULL, 0, NULL, &q), "at least one tensor");
    INVALID(qf_slice_input_producer(s, NULL, 2, NULL, &q), "");
    qf_shape a = QF_SHAPE(2), b = QF_SHAPE(3);
    qf_tensor *ta = qf_tensor_new(QF_INT64, &a), *tb = qf_tensor_new(QF_INT64, &b);
    INVALID(qf_slice_input_producer(s, (const qf_tensor *[]){ta, tb}, 2, NULL, &q), "");
    INVALID(qf_slice_input_producer(s, (const qf_tensor *[]){ta, NULL}, 2, NULL, &q), "NULL");
    NOTHING_ADDED(s, q);
    qf_tensor_unref(ta);
    qf_tensor_unref(tb);
    qf_scope_free(s);
}

/* ======================================================== qf_deferred.h */

static qf_code never_called(void *arg, qf_tensor **ret_t)
{
    (void)arg;
    (void)ret_t;
    cr_expect_fail("a deferred function ran during a bad-input case");
    return QF_INTERNAL;
}

static void count_free(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

/* A deferred tensor of `dt` with static shape `sh` whose function never
 * runs in these cases. */
static qf_deferred *mkdeferred(qf_dtype dt, const qf_shape *sh)
{
    qf_deferred *d = NULL;
    cr_assert_eq(qf_deferred_new(dt, sh, never_called, NULL, NULL, "d", &d), QF_OK, "%s",
                 qf_last_message());
    return d;
}

CASE(qf_deferred_new)
{
    qf_deferred *d = UNTOUCHED;
    qf_shape sh = QF_SHAPE(QF_UNKNOWN_DIM);
    atomic_int freed = 0;
    INVALID(qf_deferred_new(QF_INT64, &sh, NULL, &freed, count_free, "d", &d), "function");
    INVALID(qf_deferred_new(QF_INT64, &sh, never_called, &freed, count_free, "d", NULL), "ret");
    INVALID(qf_deferred_new((qf_dtype)999, &sh, never_called, &freed, count_free, "d", &d),
            "dtype");
    qf_shape bad = qf_shape_make(-1, NULL);
    INVALID(qf_deferred_new(QF_INT64, &bad, never_called, &freed, count_free, "d", &d),
            "static shape");
    cr_expect_eq(d, UNTOUCHED);
    cr_expect_eq(atomic_load(&freed), 4, "free_arg is called when the call fails");
}

CASE(qf_deferred_value)
{
    qf_tensor *t = UNTOUCHED;
    INVALID(qf_deferred_value(NULL, &t), "deferred tensor");
    qf_shape sh = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_deferred *d = mkdeferred(QF_INT64, &sh);
    INVALID(qf_deferred_value(d, NULL), "ret_t"); /* and fn did not run */
    cr_expect_eq(t, UNTOUCHED);
    qf_deferred_unref(d);
}

CASE(qf_deferred_ref)
{
    QUIET(cr_expect_null(qf_deferred_ref(NULL)));
}

CASE(qf_deferred_unref)
{
    QUIET(qf_deferred_unref(NULL));
}

CASE(qf_deferred_dtype)
{
    NEUTRAL(qf_deferred_dtype(NULL), QF_DT_INVALID, "deferred tensor");
}

CASE(qf_deferred_static_shape)
{
    NEUTRAL(qf_deferred_static_shape(NULL), NULL, "deferred tensor");
}

CASE(qf_deferred_name)
{
    NEUTRAL(qf_deferred_name(NULL), NULL, "deferred tensor");
}

CASE(qf_match_filenames_once)
{
    qf_deferred *d = UNTOUCHED;
    INVALID(qf_match_filenames_once(NULL, 1, NULL, &d), "pattern");
    INVALID(qf_match_filenames_once((const char *[]){"*.txt"}, 0, NULL, &d), "pattern");
    INVALID(qf_match_filenames_once((const char *[]){"*.txt"}, 1, NULL, NULL), "ret");
    INVALID(qf_match_filenames_once((const char *[]){"*.txt", NULL}, 2, NULL, &d), "pattern 1");
    cr_expect_eq(d, UNTOUCHED);
}

CASE(qf_input_producer_deferred)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_input_producer_deferred(s, NULL, NULL, &q), "input");
    qf_shape scalar = qf_shape_scalar(), open = QF_SHAPE(QF_UNKNOWN_DIM, QF_UNKNOWN_DIM),
             rows = QF_SHAPE(3, 4), three = QF_SHAPE(3);
    qf_deferred *sc = mkdeferred(QF_INT64, &scalar), *m = mkdeferred(QF_INT64, &open),
                *fixed = mkdeferred(QF_INT64, &rows), *sp = mkdeferred(QF_SPARSE, &rows);
    INVALID(qf_input_producer_deferred(s, sc, NULL, &q), "rank 1");
    INVALID(qf_input_producer_deferred(s, m, NULL, &q), "element_shape"); /* spec 151 */
    INVALID(qf_input_producer_deferred(s, fixed,
                                       &(qf_input_producer_options){.element_shape = &three}, &q),
            "element_shape");
    INVALID(
        qf_input_producer_deferred(s, fixed, &(qf_input_producer_options){.num_epochs = -1}, &q),
        "num_epochs");
    INVALID(qf_input_producer_deferred(s, sp, NULL, &q), "sparse");
    NOTHING_ADDED(s, q);
    qf_deferred_unref(sc);
    qf_deferred_unref(m);
    qf_deferred_unref(fixed);
    qf_deferred_unref(sp);
    qf_scope_free(s);
}

CASE(qf_string_input_producer_deferred)
{
    qf_scope *s = mkscope();
    qf_queue *q = UNTOUCHED;
    INVALID(qf_string_input_producer_deferred(s, NULL, NULL, &q), "string tensor");
    qf_shape vec = QF_SHAPE(QF_UNKNOWN_DIM), mat = QF_SHAPE(2, 2);
    qf_deferred *ints = mkdeferred(QF_INT64, &vec), *m = mkdeferred(QF_STRING, &mat),
                *ok = mkdeferred(QF_STRING, &vec);
    INVALID(qf_string_input_producer_deferred(s, ints, NULL, &q), "1-D string");
    INVALID(qf_string_input_producer_deferred(s, m, NULL, &q), "1-D string");
    INVALID(qf_string_input_producer_deferred(s, ok, &(qf_input_producer_options){.num_epochs = -3},
                                              &q),
            "num_epochs");
    NOTHING_ADDED(s, q);
    qf_deferred_unref(ints);
    qf_deferred_unref(m);
    qf_deferred_unref(ok);
    qf_scope_free(s);
}

/* =========================================================== qf_batch.h */

static const qf_dtype BOOL_I64[2] = {QF_INT64, QF_BOOL};

static qf_components i64_comps(void)
{
    static const qf_shape sh[2] = {{0, {0}}, {0, {0}}};
    return (qf_components){.n = 1, .dtypes = BOOL_I64, .shapes = sh};
}

static qf_batch_source *mksrc(void)
{
    qf_components c = i64_comps();
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_produce(&c, produce_one, NULL, &src), QF_OK);
    return src;
}

static qf_code poll_src(qf_task *t, void *arg, qf_element **ret)
{
    (void)t;
    (void)arg;
    *ret = mkelem(1);
    return QF_OK;
}

static qf_code keep_all(void *arg, qf_element *in, qf_element **ret_out)
{
    (void)arg;
    *ret_out = in;
    return QF_OK;
}

/* The component errors every source constructor shares. */
static void bad_comps(qf_code (*make)(const qf_components *, qf_batch_source **))
{
    qf_batch_source *src = UNTOUCHED;
    INVALID(make(NULL, &src), "component");
    qf_components c = i64_comps();
    c.n = 0;
    INVALID(make(&c, &src), "component");
    c = i64_comps();
    c.dtypes = (const qf_dtype[]){(qf_dtype)77};
    INVALID(make(&c, &src), "dtype");
    c = i64_comps();
    c.n = 5000;
    INVALID(make(&c, &src), "too many components");
    c = (qf_components){.n = 2, .dtypes = BOOL_I64, .names = (const char *const[]){"a", "a"}};
    INVALID(make(&c, &src), "duplicate");
    c.names = (const char *const[]){"a", ""};
    INVALID(make(&c, &src), "empty name");
    c = i64_comps();
    c.shapes = (const qf_shape[]){{.rank = 42}};
    INVALID(make(&c, &src), "shape");
    cr_expect_eq(src, UNTOUCHED);
}

static qf_code make_produce(const qf_components *c, qf_batch_source **ret)
{
    return qf_batch_source_produce(c, produce_one, NULL, ret);
}

static qf_code make_poll(const qf_components *c, qf_batch_source **ret)
{
    return qf_batch_source_poll(c, poll_src, NULL, ret);
}

CASE(qf_batch_source_produce)
{
    bad_comps(make_produce);
    qf_components c = i64_comps();
    qf_batch_source *src = UNTOUCHED;
    INVALID(qf_batch_source_produce(&c, NULL, NULL, &src), "produce function");
    INVALID(qf_batch_source_produce(&c, produce_one, NULL, NULL), "ret");
    cr_expect_eq(src, UNTOUCHED);
}

CASE(qf_batch_source_poll)
{
    bad_comps(make_poll);
    qf_components c = i64_comps();
    qf_batch_source *src = UNTOUCHED;
    INVALID(qf_batch_source_poll(&c, NULL, NULL, &src), "poll function");
    INVALID(qf_batch_source_poll(&c, poll_src, NULL, NULL), "ret");
    cr_expect_eq(src, UNTOUCHED);
}

CASE(qf_batch_source_from_op)
{
    qf_components c = i64_comps();
    qf_batch_source *src = UNTOUCHED;
    qf_enqueue_op op = {.kind = QF_OP_PRODUCE, .produce = produce_one};
    INVALID(qf_batch_source_from_op(&c, NULL, &src), "op");
    INVALID(qf_batch_source_from_op(&c, &op, NULL), "ret");
    qf_enqueue_op poll = {.kind = QF_OP_POLL};
    INVALID(qf_batch_source_from_op(&c, &poll, &src), "QF_OP_POLL");
    qf_enqueue_op tr = {.kind = QF_OP_TRANSFORM};
    INVALID(qf_batch_source_from_op(&c, &tr, &src), "input queue");
    qf_enqueue_op nofn = {.kind = QF_OP_PRODUCE};
    INVALID(qf_batch_source_from_op(&c, &nofn, &src), "produce function");
    cr_expect_eq(src, UNTOUCHED);
}

CASE(qf_batch_source_queue)
{
    qf_batch_source *src = UNTOUCHED;
    INVALID(qf_batch_source_queue(NULL, &src), "input queue");
    qf_queue *q = mkq(2);
    INVALID(qf_batch_source_queue(q, NULL), "ret");
    cr_expect_eq(src, UNTOUCHED);
    qf_queue_unref(q);
}

CASE(qf_batch_source_reader)
{
    qf_batch_source *src = UNTOUCHED;
    qf_queue *files = mkstrq();
    qf_reader *r = NULL;
    cr_assert_eq(qf_text_line_reader_new(0, &r), QF_OK);
    INVALID(qf_batch_source_reader(r, NULL, &src), "file-name queue"); /* takes r anyway */
    cr_assert_eq(qf_text_line_reader_new(0, &r), QF_OK);
    INVALID(qf_batch_source_reader(r, files, NULL), "ret");
    INVALID(qf_batch_source_reader(NULL, files, &src), "reader");
    cr_expect_eq(src, UNTOUCHED);
    qf_queue_unref(files);
}

CASE(qf_batch_source_reader_options)
{
    qf_batch_source *src = UNTOUCHED;
    qf_queue *files = mkstrq();
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
    INVALID(qf_batch_source_reader_options(NULL, files, &src), "reader options");
    INVALID(qf_batch_source_reader_options(&ro, NULL, &src), "file-name queue");
    INVALID(qf_batch_source_reader_options(&ro, files, NULL), "ret");
    ro.buffer_bytes = 3;
    INVALID(qf_batch_source_reader_options(&ro, files, &src), "buffer_bytes");
    cr_expect_eq(src, UNTOUCHED);
    qf_queue_unref(files);
}

CASE(qf_batch_source_map)
{
    qf_batch_source *src = UNTOUCHED;
    INVALID(qf_batch_source_map(NULL, NULL, keep_all, NULL, &src), "source");
    INVALID(qf_batch_source_map(mksrc(), NULL, NULL, NULL, &src), "transform function");
    INVALID(qf_batch_source_map(mksrc(), NULL, keep_all, NULL, NULL), "ret");
    qf_components bad = {.n = 0};
    INVALID(qf_batch_source_map(mksrc(), &bad, keep_all, NULL, &src), "component");
    cr_expect_eq(src, UNTOUCHED); /* and every source was taken (ASan: no leak) */
}

CASE(qf_batch_source_on_free)
{
    QUIET(qf_batch_source_on_free(NULL, free, NULL)); /* NULL-safe */
}

CASE(qf_batch_source_free)
{
    QUIET(qf_batch_source_free(NULL));
}

CASE(qf_batch_source_components)
{
    NEUTRAL(qf_batch_source_components(NULL), NULL, "source");
}

/* The errors every batch call shares; a refused call takes its sources,
 * adds nothing to the scope and leaves *ret untouched. */
typedef qf_code (*batch_call)(qf_scope *, qf_batch_source *, int64_t, const qf_batch_options *,
                              qf_batcher **);

static void bad_batch(batch_call call)
{
    qf_scope *s = mkscope();
    qf_batcher *b = UNTOUCHED;
    INVALID(call(s, NULL, 4, NULL, &b), "source");
    INVALID(call(s, mksrc(), 0, NULL, &b), "batch_size");
    INVALID(call(s, mksrc(), -2, NULL, &b), "batch_size");
    INVALID(call(s, mksrc(), (int64_t)INT32_MAX + 1, NULL, &b), "batch_size");
    INVALID(call(s, mksrc(), 4, &(qf_batch_options){.num_threads = -1}, &b), "num_threads");
    /* the issue: a capacity of -5 made an unbounded queue */
    INVALID(call(s, mksrc(), 4, &(qf_batch_options){.capacity = -5}, &b), "capacity");
    qf_shape unk = QF_SHAPE(QF_UNKNOWN_DIM);
    INVALID(call(s, mksrc(), 4, &(qf_batch_options){.shapes = &unk}, &b), "");
    INVALID(call(s, mksrc(), 4, NULL, NULL), "ret");
    cr_expect_eq(b, UNTOUCHED);
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, NULL, 0), 0, "nothing added");
    qf_scope_free(s);
}

static qf_code call_batch(qf_scope *s, qf_batch_source *src, int64_t n, const qf_batch_options *o,
                          qf_batcher **ret)
{
    return qf_batch(s, src, n, o, ret);
}

static qf_code call_shuffle(qf_scope *s, qf_batch_source *src, int64_t n, const qf_batch_options *o,
                            qf_batcher **ret)
{
    qf_batch_options oo = o ? *o : (qf_batch_options){0};
    return qf_shuffle_batch(s, src, n, &oo, ret);
}

static qf_code call_join(qf_scope *s, qf_batch_source *src, int64_t n, const qf_batch_options *o,
                         qf_batcher **ret)
{
    return qf_batch_join(s, &src, 1, n, o, ret);
}

static qf_code call_shuffle_join(qf_scope *s, qf_batch_source *src, int64_t n,
                                 const qf_batch_options *o, qf_batcher **ret)
{
    return qf_shuffle_batch_join(s, &src, 1, n, o, ret);
}

static const qf_keep_input KEEP_FN = {.kind = QF_KEEP_FN, .fn = NULL};

static bool keep_yes(void *arg, const qf_element *e, int64_t row, size_t source)
{
    (void)arg;
    (void)e;
    (void)row;
    (void)source;
    return true;
}

static qf_code call_maybe(qf_scope *s, qf_batch_source *src, int64_t n, const qf_batch_options *o,
                          qf_batcher **ret)
{
    qf_keep_input k = {.kind = QF_KEEP_FN, .fn = keep_yes};
    return qf_maybe_batch(s, src, &k, n, o, ret);
}

static qf_code call_maybe_join(qf_scope *s, qf_batch_source *src, int64_t n,
                               const qf_batch_options *o, qf_batcher **ret)
{
    qf_keep_input k = {.kind = QF_KEEP_FN, .fn = keep_yes};
    return qf_maybe_batch_join(s, &src, 1, &k, n, o, ret);
}

static qf_code call_maybe_shuffle(qf_scope *s, qf_batch_source *src, int64_t n,
                                  const qf_batch_options *o, qf_batcher **ret)
{
    qf_keep_input k = {.kind = QF_KEEP_FN, .fn = keep_yes};
    return qf_maybe_shuffle_batch(s, src, &k, n, o, ret);
}

static qf_code call_maybe_shuffle_join(qf_scope *s, qf_batch_source *src, int64_t n,
                                       const qf_batch_options *o, qf_batcher **ret)
{
    qf_keep_input k = {.kind = QF_KEEP_FN, .fn = keep_yes};
    return qf_maybe_shuffle_batch_join(s, &src, 1, &k, n, o, ret);
}

/* Keep-input errors: NULL keep, no function, unknown kind, a component out
 * of range. */
static void bad_keep(qf_code (*call)(qf_scope *, qf_batch_source *, const qf_keep_input *,
                                     qf_batcher **))
{
    qf_scope *s = mkscope();
    qf_batcher *b = UNTOUCHED;
    INVALID(call(s, mksrc(), NULL, &b), "keep");
    INVALID(call(s, mksrc(), &KEEP_FN, &b), "keep_input needs a function");
    INVALID(call(s, mksrc(), &(qf_keep_input){.kind = (qf_keep_kind)9}, &b), "kind");
    INVALID(call(s, mksrc(), &(qf_keep_input){.kind = QF_KEEP_COMPONENT, .component = 5}, &b),
            "out of range");
    cr_expect_eq(b, UNTOUCHED);
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, NULL, 0), 0);
    qf_scope_free(s);
}

static qf_code keep_batch(qf_scope *s, qf_batch_source *src, const qf_keep_input *k,
                          qf_batcher **ret)
{
    return qf_maybe_batch(s, src, k, 4, NULL, ret);
}

static qf_code keep_batch_join(qf_scope *s, qf_batch_source *src, const qf_keep_input *k,
                               qf_batcher **ret)
{
    return qf_maybe_batch_join(s, &src, 1, k, 4, NULL, ret);
}

static qf_code keep_shuffle(qf_scope *s, qf_batch_source *src, const qf_keep_input *k,
                            qf_batcher **ret)
{
    return qf_maybe_shuffle_batch(s, src, k, 4, &(qf_batch_options){0}, ret);
}

static qf_code keep_shuffle_join(qf_scope *s, qf_batch_source *src, const qf_keep_input *k,
                                 qf_batcher **ret)
{
    return qf_maybe_shuffle_batch_join(s, &src, 1, k, 4, &(qf_batch_options){0}, ret);
}

/* A join's own errors: no sources, a NULL array, a NULL source. */
static void bad_join(bool shuffle)
{
    qf_scope *s = mkscope();
    qf_batcher *b = UNTOUCHED;
    qf_batch_options o = {0};
    qf_code (*j)(qf_scope *, qf_batch_source *const *, size_t, int64_t, const qf_batch_options *,
                 qf_batcher **) = shuffle ? qf_shuffle_batch_join : qf_batch_join;
    INVALID(j(s, NULL, 0, 4, &o, &b), "source");
    INVALID(j(s, NULL, 2, 4, &o, &b), "source");
    qf_batch_source *two[2] = {mksrc(), NULL};
    INVALID(j(s, two, 2, 4, &o, &b), "source 1 is NULL"); /* takes source 0 */
    cr_expect_eq(b, UNTOUCHED);
    qf_scope_free(s);
}

/* Shuffle-only errors (spec 177). */
static void bad_shuffle(batch_call call)
{
    qf_scope *s = mkscope();
    qf_batcher *b = UNTOUCHED;
    INVALID(call(s, mksrc(), 4, &(qf_batch_options){.capacity = 8, .min_after_dequeue = 8}, &b),
            "min_after_dequeue");
    INVALID(call(s, mksrc(), 4, &(qf_batch_options){.min_after_dequeue = -1}, &b),
            "min_after_dequeue");
    INVALID(call(s, mksrc(), 4, &(qf_batch_options){.dynamic_pad = true}, &b), "dynamic_pad");
    cr_expect_eq(b, UNTOUCHED);
    qf_scope_free(s);
}

CASE(qf_batch)
{
    bad_batch(call_batch);
}

CASE(qf_batch_join)
{
    bad_batch(call_join);
    bad_join(false);
}

CASE(qf_shuffle_batch)
{
    bad_batch(call_shuffle);
    bad_shuffle(call_shuffle);
}

CASE(qf_shuffle_batch_join)
{
    bad_batch(call_shuffle_join);
    bad_join(true);
    bad_shuffle(call_shuffle_join);
}

CASE(qf_maybe_batch)
{
    bad_batch(call_maybe);
    bad_keep(keep_batch);
}

CASE(qf_maybe_batch_join)
{
    bad_batch(call_maybe_join);
    bad_keep(keep_batch_join);
}

CASE(qf_maybe_shuffle_batch)
{
    bad_batch(call_maybe_shuffle);
    bad_keep(keep_shuffle);
}

CASE(qf_maybe_shuffle_batch_join)
{
    bad_batch(call_maybe_shuffle_join);
    bad_keep(keep_shuffle_join);
}

CASE(qf_batcher_free)
{
    QUIET(qf_batcher_free(NULL));
}

/* A batcher over a produce source in its own scope (not started). */
typedef struct fixture_batcher {
    qf_scope *s;
    qf_batcher *b;
} fixture_batcher;

static fixture_batcher mkbatcher(void)
{
    fixture_batcher f = {mkscope(), NULL};
    cr_assert_eq(qf_batch(f.s, mksrc(), 4, NULL, &f.b), QF_OK, "%s", qf_last_message());
    return f;
}

static void fixture_free(fixture_batcher *f)
{
    qf_batcher_free(f->b);
    qf_scope_free(f->s);
}

CASE(qf_batcher_next)
{
    fixture_batcher f = mkbatcher();
    qf_element *e = UNTOUCHED;
    INVALID(qf_batcher_next(NULL, &e), "batcher");
    INVALID(qf_batcher_next(f.b, NULL), "ret_batch");
    cr_expect_eq(e, UNTOUCHED);
    fixture_free(&f);
}

CASE(qf_batcher_next_until)
{
    fixture_batcher f = mkbatcher();
    qf_element *e = UNTOUCHED;
    INVALID(qf_batcher_next_until(NULL, QF_NO_WAIT, &e), "batcher");
    INVALID(qf_batcher_next_until(f.b, QF_NO_WAIT, NULL), "ret_batch");
    cr_expect_eq(e, UNTOUCHED);
    fixture_free(&f);
}

CASE(qf_batcher_try_next)
{
    fixture_batcher f = mkbatcher();
    qf_element *e = UNTOUCHED;
    INVALID(qf_batcher_try_next(NULL, &e), "batcher");
    INVALID(qf_batcher_try_next(f.b, NULL), "ret_batch");
    cr_expect_eq(e, UNTOUCHED);
    fixture_free(&f);
}

CASE(qf_batcher_poller_new)
{
    fixture_batcher f = mkbatcher();
    qf_batcher_poller *p = UNTOUCHED;
    INVALID(qf_batcher_poller_new(NULL, &p), "batcher");
    INVALID(qf_batcher_poller_new(f.b, NULL), "ret");
    cr_expect_eq(p, UNTOUCHED);
    fixture_free(&f);
}

CASE(qf_batcher_poll_next)
{
    fixture_batcher f = mkbatcher();
    qf_batcher_poller *p = NULL;
    cr_assert_eq(qf_batcher_poller_new(f.b, &p), QF_OK);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_element *e = UNTOUCHED;
    INVALID(qf_batcher_poll_next(NULL, &w, &e), "poller");
    INVALID(qf_batcher_poll_next(p, NULL, &e), "waker");
    INVALID(qf_batcher_poll_next(p, &w, NULL), "ret_batch");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE, "the waker was not registered");
    cr_expect_eq(e, UNTOUCHED);
    qf_batcher_poller_free(p);
    fixture_free(&f);
}

CASE(qf_batcher_poller_free)
{
    QUIET(qf_batcher_poller_free(NULL));
}

CASE(qf_batcher_queue)
{
    NEUTRAL(qf_batcher_queue(NULL), NULL, "batcher");
}

CASE(qf_batcher_runner)
{
    NEUTRAL(qf_batcher_runner(NULL), NULL, "batcher");
}

CASE(qf_batcher_size)
{
    NEUTRAL(qf_batcher_size(NULL), 0, "batcher");
}

CASE(qf_batcher_num_components)
{
    NEUTRAL(qf_batcher_num_components(NULL), 0, "batcher");
}

CASE(qf_batcher_component_name)
{
    NEUTRAL(qf_batcher_component_name(NULL, 0), NULL, "batcher");
}

CASE(qf_batcher_dtype)
{
    NEUTRAL(qf_batcher_dtype(NULL, 0), QF_DT_INVALID, "batcher");
    fixture_batcher f = mkbatcher();
    QUIET(cr_expect_eq(qf_batcher_dtype(f.b, 9), QF_DT_INVALID));
    fixture_free(&f);
}

CASE(qf_batcher_output_shape)
{
    clear_last();
    qf_shape s = qf_batcher_output_shape(NULL, 0);
    cr_expect_not(qf_shape_is_valid(&s));
    EXPECT_RECORDED(QF_INVALID_ARGUMENT, "batcher");
    fixture_batcher f = mkbatcher();
    s = qf_batcher_output_shape(f.b, 3);
    cr_expect_not(qf_shape_is_valid(&s), "out of range: an invalid shape (documented)");
    fixture_free(&f);
}

CASE(qf_batcher_gauge)
{
    NEUTRAL(qf_batcher_gauge(NULL), NULL, "batcher");
}

CASE(qf_batcher_fraction_full)
{
    NEUTRAL(qf_batcher_fraction_full(NULL), 0.0, "batcher");
}

/* ===================================================== qf_queue_metrics.h */

CASE(qf_queue_foreach_live)
{
    NEUTRAL(qf_queue_foreach_live(NULL, NULL), 0, "fn");
}

CASE(qf_queue_live_count)
{
    QUIET((void)qf_queue_live_count()); /* no argument */
}

/* ============================================================ qf_serve.h */

static qf_serve *mkserve(void)
{
    qf_serve *s = NULL;
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "b", .max_batch_size = 4}, &s), QF_OK,
                 "%s", qf_last_message());
    return s;
}

static qf_code serve_noop(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)arg;
    (void)reqs;
    (void)n;
    return QF_OK;
}

/* A waitable request queued in `s` (not yet handed out). */
static void submitted(qf_serve *s, qf_serve_request *r)
{
    qf_serve_request_init(r, NULL, QF_FOREVER, 0, NULL, NULL);
    cr_assert_eq(qf_serve_submit(s, r), QF_OK, "%s", qf_last_message());
}

CASE(qf_serve_request_init)
{
    REFUSED(qf_serve_request_init(NULL, NULL, QF_FOREVER, 0, NULL, NULL), "request");
}

/* NULL request or output, a request never submitted, one with a callback;
 * the answer stays untouched. */
static void bad_request_wait(int form)
{
    qf_code st = (qf_code)99;
    qf_serve_request r;
    qf_serve_request_init(&r, NULL, QF_FOREVER, 0, NULL, NULL);
    qf_waker w;
    qf_waker_init_thread(&w);
#define WAIT(rq, stp)                                                                              \
    (form == 0   ? qf_serve_request_wait(rq, stp)                                                  \
     : form == 1 ? qf_serve_request_wait_until(rq, soon(), stp)                                    \
     : form == 2 ? qf_serve_request_try_wait(rq, stp)                                              \
                 : qf_serve_request_poll(rq, &w, stp))
    INVALID(WAIT(NULL, &st), "req");
    INVALID(WAIT(&r, NULL), "ret_status");
    INVALID(WAIT(&r, &st), "submitted"); /* never submitted: would wait for ever */
#undef WAIT
    if (form == 3)
        INVALID(qf_serve_request_poll(&r, NULL, &st), "waker");
    cr_expect_eq(st, (qf_code)99, "*ret_status untouched");
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_IDLE, "the waker was not registered");
}

CASE(qf_serve_request_wait)
{
    bad_request_wait(0);
}

CASE(qf_serve_request_wait_until)
{
    bad_request_wait(1);
}

CASE(qf_serve_request_try_wait)
{
    bad_request_wait(2);
}

CASE(qf_serve_request_poll)
{
    bad_request_wait(3);
}

CASE(qf_serve_request_cancel_poll)
{
    qf_serve_request r;
    qf_serve_request_init(&r, NULL, QF_FOREVER, 0, NULL, NULL);
    qf_waker w;
    qf_waker_init_thread(&w);
    NEUTRAL(qf_serve_request_cancel_poll(NULL, &w), false, "request");
    NEUTRAL(qf_serve_request_cancel_poll(&r, NULL), false, "waker");
    /* A waker that is not on the request's list: false at once (it waited
     * for ever for a wake), the waker left as it is. */
    QUIET(cr_expect_not(qf_serve_request_cancel_poll(&r, &w)));
    qf_serve_request other;
    qf_serve_request_init(&other, NULL, QF_FOREVER, 0, NULL, NULL);
    qf_waitlist_register(&other.qf__waiters, &w);
    QUIET(cr_expect_not(qf_serve_request_cancel_poll(&r, &w)));
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED, "another list's registration stays");
    cr_expect(qf_waitlist_cancel(&other.qf__waiters, &w));
}

CASE(qf_serve_new)
{
    qf_serve *s = UNTOUCHED;
    INVALID(qf_serve_new(NULL, &s), "options");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4}, NULL), "ret_s");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 0}, &s), "max_batch_size");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = QF_SERVE_MAX_BATCH + 1}, &s),
            "max_batch_size");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4, .max_queue_delay_ns = -1}, &s),
            "max_queue_delay_ns");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4,
                                             .preferred_batch_sizes = (size_t[]){5},
                                             .num_preferred = 1},
                         &s),
            "preferred");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4, .num_preferred = 2}, &s),
            "preferred");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4,
                                             .priority_levels = QF_SERVE_MAX_LEVELS + 1},
                         &s),
            "priority_levels");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4, .max_queued = -1}, &s),
            "max_queued");
    INVALID(qf_serve_new(
                &(qf_serve_options){.max_batch_size = 4, .admission = (qf_serve_admission)7}, &s),
            "admission");
    INVALID(qf_serve_new(&(qf_serve_options){.max_batch_size = 4, .drain_grace_ns = -1}, &s),
            "drain_grace_ns");
    cr_expect_eq(s, UNTOUCHED);
    /* The largest delay and grace are valid and mean "no close time": a
     * batch then waits to be full or drained, it does not close at once. */
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.max_batch_size = 2,
                                                  .max_queue_delay_ns = INT64_MAX,
                                                  .drain_grace_ns = INT64_MAX},
                              &s),
                 QF_OK);
    qf_serve_request r;
    submitted(s, &r);
    qf_serve_request *reqs[2];
    size_t n = 77;
    cr_expect_eq(qf_serve_try_next_batch(s, reqs, &n), QF_UNAVAILABLE, "closed at once");
    qf_serve_begin_drain(s, QF_FOREVER);
    cr_expect_eq(qf_serve_try_next_batch(s, reqs, &n), QF_OK);
    cr_expect_eq(qf_serve_complete(s, reqs, n, QF_OK), QF_OK);
    qf_serve_free(s);
}

CASE(qf_serve_free)
{
    QUIET(qf_serve_free(NULL));
}

CASE(qf_serve_name)
{
    NEUTRAL(qf_serve_name(NULL), NULL, "batcher");
}

CASE(qf_serve_max_batch_size)
{
    NEUTRAL(qf_serve_max_batch_size(NULL), 0, "batcher");
}

CASE(qf_serve_depth)
{
    NEUTRAL(qf_serve_depth(NULL), 0, "batcher");
}

CASE(qf_serve_is_draining)
{
    NEUTRAL(qf_serve_is_draining(NULL), false, "batcher");
}

/* NULL batcher or request, a priority out of range, a request submitted
 * twice: nothing admitted, the request stays the caller's. */
static void bad_submit(int form)
{
    qf_serve *s = mkserve();
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_serve_request r, q;
    qf_serve_request_init(&r, NULL, QF_FOREVER, 0, NULL, NULL);
#define SUBMIT(ss, rq)                                                                             \
    (form == 0   ? qf_serve_submit(ss, rq)                                                         \
     : form == 1 ? qf_serve_try_submit(ss, rq)                                                     \
                 : qf_serve_poll_submit(ss, rq, &w))
    INVALID(SUBMIT(NULL, &r), "batcher");
    INVALID(SUBMIT(s, NULL), "request");
    r.priority = 1; /* one level */
    INVALID(SUBMIT(s, &r), "priority");
    submitted(s, &q);
    INVALID(SUBMIT(s, &q), "submitted"); /* already in the batcher */
#undef SUBMIT
    if (form == 2) {
        r.priority = 0;
        INVALID(qf_serve_poll_submit(s, &r, NULL), "waker");
    }
    cr_expect_eq(qf_serve_depth(s), 1, "only the first submit of q was admitted");
    qf_serve_free(s); /* answers q QF_CANCELLED */
}

CASE(qf_serve_submit)
{
    bad_submit(0);
}

CASE(qf_serve_try_submit)
{
    bad_submit(1);
}

CASE(qf_serve_poll_submit)
{
    bad_submit(2);
}

CASE(qf_serve_cancel_poll)
{
    qf_serve *s = mkserve();
    qf_waker w;
    qf_waker_init_thread(&w);
    NEUTRAL(qf_serve_cancel_poll(NULL, &w), false, "batcher");
    NEUTRAL(qf_serve_cancel_poll(s, NULL), false, "waker");
    qf_serve_free(s);
}

/* NULL batcher and outputs: nothing handed out, the outputs stay. */
static void bad_next_batch(int form)
{
    qf_serve *s = mkserve();
    qf_serve_request r;
    submitted(s, &r);
    qf_serve_request *reqs[4] = {UNTOUCHED};
    size_t n = 77;
    qf_deadline wake = 77;
    qf_waker w;
    qf_waker_init_thread(&w);
#define NEXT(ss, arr, np)                                                                          \
    (form == 0   ? qf_serve_next_batch(ss, arr, np)                                                \
     : form == 1 ? qf_serve_next_batch_until(ss, soon(), arr, np)                                  \
     : form == 2 ? qf_serve_try_next_batch(ss, arr, np)                                            \
                 : qf_serve_poll_next_batch(ss, &w, arr, np, &wake))
    INVALID(NEXT(NULL, reqs, &n), "batcher");
    INVALID(NEXT(s, NULL, &n), "ret_reqs");
    INVALID(NEXT(s, reqs, NULL), "ret_n");
#undef NEXT
    if (form == 3) {
        INVALID(qf_serve_poll_next_batch(s, NULL, reqs, &n, &wake), "waker");
        INVALID(qf_serve_poll_next_batch(s, &w, reqs, &n, NULL), "ret_wake_at");
    }
    cr_expect_eq(reqs[0], UNTOUCHED);
    cr_expect_eq(n, 77);
    cr_expect_eq(wake, 77);
    cr_expect_eq(qf_serve_depth(s), 1, "nothing was handed out");
    qf_serve_free(s);
}

CASE(qf_serve_next_batch)
{
    bad_next_batch(0);
}

CASE(qf_serve_next_batch_until)
{
    bad_next_batch(1);
}

CASE(qf_serve_try_next_batch)
{
    bad_next_batch(2);
}

CASE(qf_serve_poll_next_batch)
{
    bad_next_batch(3);
}

CASE(qf_serve_complete)
{
    qf_serve *s = mkserve();
    qf_serve_request r;
    submitted(s, &r);
    qf_serve_request *reqs[4];
    size_t n = 0;
    cr_assert_eq(qf_serve_next_batch_until(s, soon(), reqs, &n), QF_OK, "%s", qf_last_message());
    cr_assert_eq(n, 1);
    INVALID(qf_serve_complete(NULL, reqs, n, QF_OK), "batcher");
    INVALID(qf_serve_complete(s, NULL, n, QF_OK), "requests");
    INVALID(qf_serve_complete(s, reqs, n, (qf_code)12345), "canonical");
    /* more than handed out */
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_complete(s, reqs, 3, QF_OK), "in flight");
    /* A request still queued is not handed out, whatever the count says. */
    qf_serve_request q;
    submitted(s, &q);
    qf_serve_request *queued[1] = {&q};
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_complete(s, queued, 1, QF_OK), "still queued");
    qf_serve_request *more[4];
    cr_assert_eq(qf_serve_next_batch_until(s, soon(), more, &n), QF_OK); /* q, now out */
    cr_assert_eq(n, 1);
    reqs[1] = more[0];
    qf_serve_request *twice[2] = {reqs[0], reqs[0]};
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_complete(s, twice, 2, QF_OK), "listed twice");
    qf_serve_request *with_null[2] = {reqs[0], NULL};
    INVALID(qf_serve_complete(s, with_null, 2, QF_OK), "NULL");
    qf_code st = (qf_code)99;
    cr_expect_eq(qf_serve_request_try_wait(&r, &st), QF_UNAVAILABLE, "not answered yet");
    cr_expect_eq(qf_serve_request_try_wait(&q, &st), QF_UNAVAILABLE, "not answered yet");
    cr_expect_eq(qf_serve_complete(s, reqs, 2, QF_OK), QF_OK);
    cr_expect_eq(qf_serve_request_try_wait(&r, &st), QF_OK);
    cr_expect_eq(st, QF_OK);
    /* Once answered, a second complete is refused and answers nothing. */
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_complete(s, reqs, 1, QF_OK), "in flight");
    qf_serve_free(s);
}

static qf_code serve_returns_99(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)arg;
    (void)reqs;
    (void)n;
    return (qf_code)99;
}

CASE(qf_serve_run)
{
    qf_serve *s = mkserve();
    INVALID(qf_serve_run(NULL, serve_noop, NULL), "batcher");
    INVALID(qf_serve_run(s, NULL, NULL), "fn");
    /* A model returning a non-code: its batch is answered, the drain ends,
     * and the run reports the value. */
    qf_serve_request r;
    submitted(s, &r);
    qf_serve_begin_drain(s, QF_FOREVER);
    INVALID(qf_serve_run(s, serve_returns_99, NULL), "returned 99");
    qf_code st = QF_OK;
    cr_expect_eq(qf_serve_request_try_wait(&r, &st), QF_OK, "answered");
    cr_expect_eq(st, QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_serve_drain(s, QF_NO_WAIT, NULL), QF_OK);
    qf_serve_free(s);
}

CASE(qf_serve_spawn)
{
    qf_serve *s = mkserve();
    qf_runtime *rt = mkrt(1);
    qf_task *t = UNTOUCHED;
    INVALID(qf_serve_spawn(NULL, rt, serve_noop, NULL, NULL, &t), "batcher");
    INVALID(qf_serve_spawn(s, NULL, serve_noop, NULL, NULL, &t), "runtime");
    INVALID(qf_serve_spawn(s, rt, NULL, NULL, NULL, &t), "fn");
    cr_expect_eq(t, UNTOUCHED);
    cr_expect_eq(qf_runtime_num_tasks(rt), 0, "nothing started");
    qf_runtime_free(rt);
    qf_serve_free(s);
}

CASE(qf_serve_begin_drain)
{
    REFUSED(qf_serve_begin_drain(NULL, QF_NO_WAIT), "batcher");
}

CASE(qf_serve_drain)
{
    qf_serve_report rep = {.admitted = 77};
    INVALID(qf_serve_drain(NULL, QF_NO_WAIT, &rep), "batcher");
    cr_expect_eq(rep.admitted, 77);
}

CASE(qf_serve_delay_bucket_bound_ns)
{
    QUIET(cr_expect_eq(qf_serve_delay_bucket_bound_ns(QF_SERVE_DELAY_BUCKETS + 5), INT64_MAX));
}

CASE(qf_serve_size_bucket_bound)
{
    QUIET(cr_expect_eq(qf_serve_size_bucket_bound(SIZE_MAX), UINT64_MAX));
}

CASE(qf_serve_get_stats)
{
    qf_serve_stats st = {.depth = 77};
    INVALID(qf_serve_get_stats(NULL, &st), "batcher");
    qf_serve *s = mkserve();
    INVALID(qf_serve_get_stats(s, NULL), "ret_stats");
    cr_expect_eq(st.depth, 77);
    qf_serve_free(s);
}

/* per-priority policy, cost batching, adaptive delay (issue 30) */
CASE(qf_serve_get_policy_stats)
{
    qf_serve_policy_stats st = {.demoted = 77};
    INVALID(qf_serve_get_policy_stats(NULL, &st), "batcher");
    qf_serve *s = mkserve();
    INVALID(qf_serve_get_policy_stats(s, NULL), "ret_stats");
    cr_expect_eq(st.demoted, 77);
    qf_serve_free(s);
}

CASE(qf_serve_metrics_write)
{
    INVALID(qf_serve_metrics_write(NULL), "file");
}

CASE(qf_serve_metrics_text)
{
    size_t len = 77;
    INVALID(qf_serve_metrics_text(NULL, &len), "ret_text");
    cr_expect_eq(len, 77);
}

/* a latency-critical thread's slice (issue 30) */
CASE(qf_serve_set_exec_slice)
{
    INVALID(qf_serve_set_exec_slice(NULL, QF_SERVE_DEFAULT_EXEC_SLICE_NS), "batcher");
    qf_serve *s = mkserve();
    INVALID(qf_serve_set_exec_slice(s, -1), "neither 0");
    INVALID(qf_serve_set_exec_slice(s, QF_THREAD_SLICE_MIN_NS - 1), "neither 0");
    INVALID(qf_serve_set_exec_slice(s, QF_THREAD_SLICE_MAX_NS + 1), "neither 0");
    INVALID(qf_serve_set_exec_slice(s, INT64_MIN), "neither 0");
    cr_expect_eq(qf_serve_set_exec_slice(s, 0), QF_OK);
    qf_serve_free(s);
}
CASE(qf_runtime_set_worker_slice)
{
    INVALID(qf_runtime_set_worker_slice(NULL, QF_THREAD_SLICE_MIN_NS), "runtime");
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1}, &rt), QF_OK);
    INVALID(qf_runtime_set_worker_slice(rt, -1), "neither 0");
    INVALID(qf_runtime_set_worker_slice(rt, QF_THREAD_SLICE_MIN_NS - 1), "neither 0");
    INVALID(qf_runtime_set_worker_slice(rt, QF_THREAD_SLICE_MAX_NS + 1), "neither 0");
    cr_expect_eq(qf_runtime_set_worker_slice(rt, 0), QF_OK);
    qf_runtime_free(rt);
}
CASE(qf_thread_prefer_latency)
{
    qf_thread_sched saved;
    memset(&saved, 0x5a, sizeof(saved));
    INVALID(qf_thread_prefer_latency(0, &saved), "outside");
    INVALID(qf_thread_prefer_latency(-1, &saved), "outside");
    INVALID(qf_thread_prefer_latency(QF_THREAD_SLICE_MIN_NS - 1, &saved), "outside");
    INVALID(qf_thread_prefer_latency(QF_THREAD_SLICE_MAX_NS + 1, NULL), "outside");
    INVALID(qf_thread_prefer_latency(INT64_MAX, NULL), "outside");
    const unsigned char *b = (const unsigned char *)&saved;
    for (size_t i = 0; i < sizeof(saved); i++)
        cr_expect_eq(b[i], 0x5a, "ret_saved written on failure (byte %zu)", i);
}
CASE(qf_thread_restore_sched)
{
    INVALID(qf_thread_restore_sched(NULL), "saved");
    qf_thread_sched other = {.tid = 0}; /* no thread has id 0 */
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_thread_restore_sched(&other), "another");
}

/* completion fd, end of input, metrics (issue 30) */
CASE(qf_serve_end_input)
{
    INVALID(qf_serve_end_input(NULL), "batcher");
    qf_serve *s = mkserve();
    cr_expect_eq(qf_serve_end_input(s), QF_OK);
    qf_serve_request r;
    qf_serve_request_init(&r, NULL, QF_FOREVER, 0, NULL, NULL);
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_submit(s, &r), "input ended");
    qf_code st;
    INVALID(qf_serve_request_try_wait(&r, &st), "never submitted");
    qf_serve_free(s);
}
CASE(qf_serve_completion_fd)
{
    int fd = 77;
    INVALID(qf_serve_completion_fd(NULL, &fd), "batcher");
    qf_serve *s = mkserve();
    INVALID(qf_serve_completion_fd(s, NULL), "ret_fd");
    cr_expect_eq(fd, 77);
    qf_serve_free(s);
}
CASE(qf_serve_post_complete)
{
    qf_serve *s = mkserve();
    qf_serve_request r;
    submitted(s, &r);
    qf_serve_request *reqs[4];
    size_t n = 0;
    INVALID(qf_serve_post_complete(NULL, reqs, 1, QF_OK), "batcher");
    INVALID(qf_serve_post_complete(s, NULL, 1, QF_OK), "requests");
    qf_serve_request *queued[1] = {&r};
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_post_complete(s, queued, 1, QF_OK), "in flight");
    cr_assert_eq(qf_serve_next_batch_until(s, soon(), reqs, &n), QF_OK, "%s", qf_last_message());
    INVALID(qf_serve_post_complete(s, reqs, n, (qf_code)12345), "canonical");
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_post_complete(s, reqs, 3, QF_OK), "in flight");
    cr_expect_eq(qf_serve_post_complete(s, reqs, n, QF_OK), QF_OK);
    EXPECT_CODE(QF_FAILED_PRECONDITION, qf_serve_post_complete(s, reqs, n, QF_OK),
                "being completed");
    qf_serve_free(s); /* answers the uncollected post */
    qf_code st = (qf_code)99;
    cr_expect_eq(qf_serve_request_try_wait(&r, &st), QF_OK);
    cr_expect_eq(st, QF_OK);
}
CASE(qf_serve_collect)
{
    size_t n = 77;
    INVALID(qf_serve_collect(NULL, 0, &n), "batcher");
    cr_expect_eq(n, 77);
    qf_serve *s = mkserve();
    cr_expect_eq(qf_serve_collect(s, 0, NULL), QF_OK, "ret_n is optional");
    qf_serve_free(s);
}
CASE(qf_serve_get_histogram)
{
    qf_serve_histogram h = {.count = 77};
    INVALID(qf_serve_get_histogram(NULL, QF_SERVE_HIST_LATENCY, 0, &h), "batcher");
    qf_serve *s = mkserve();
    INVALID(qf_serve_get_histogram(s, QF_SERVE_HIST_LATENCY, 0, NULL), "ret_hist");
    INVALID(qf_serve_get_histogram(s, (qf_serve_hist_kind)-1, 0, &h), "kind");
    INVALID(qf_serve_get_histogram(s, (qf_serve_hist_kind)QF_SERVE_HIST_KINDS, 0, &h), "kind");
    INVALID(qf_serve_get_histogram(s, QF_SERVE_HIST_MODEL_TIME, 1, &h), "level");
    cr_expect_eq(h.count, 77);
    qf_serve_free(s);
}
CASE(qf_serve_metrics_write_openmetrics)
{
    INVALID(qf_serve_metrics_write_openmetrics(NULL), "file");
}

/* ============================================================ qf_nats.h
 *
 * Only with libnats (the bridge is optional). Without a server: what a
 * NULL connection, consumer or sink and bad options give before anything
 * reaches the network (tests/test_nats*.c cover the rest against a real
 * nats-server). */
#ifdef QF_HAVE_NATS

CASE(qf_nats_connect)
{
    qf_nats *n = UNTOUCHED;
    INVALID(qf_nats_connect(NULL, NULL), "ret_n");
    INVALID(qf_nats_connect(&(qf_nats_options){.connect_timeout_s = -1}, &n), "connect_timeout_s");
    INVALID(qf_nats_connect(&(qf_nats_options){.max_reconnect = -2}, &n), "max_reconnect");
    INVALID(qf_nats_connect(&(qf_nats_options){.servers = " , ,"}, &n), "no server URL");
    cr_expect_eq(n, UNTOUCHED);
}

CASE(qf_nats_free)
{
    QUIET(qf_nats_free(NULL));
}

CASE(qf_nats_is_connected)
{
    NEUTRAL(qf_nats_is_connected(NULL), false, "n is NULL");
}

CASE(qf_nats_max_payload)
{
    NEUTRAL(qf_nats_max_payload(NULL), 0, "n is NULL");
}

CASE(qf_nats_stream_create)
{
    INVALID(qf_nats_stream_create(NULL, &(qf_nats_stream_options){.name = "s"}), "n is NULL");
}

CASE(qf_nats_stream_delete)
{
    INVALID(qf_nats_stream_delete(NULL, "s"), "n is NULL");
}

CASE(qf_nats_stream_get_info)
{
    qf_nats_stream_info info = {.messages = 77};
    INVALID(qf_nats_stream_get_info(NULL, "s", &info), "n is NULL");
    cr_expect_eq(info.messages, 77);
}

CASE(qf_nats_consumer_new)
{
    qf_nats_consumer *c = UNTOUCHED;
    INVALID(
        qf_nats_consumer_new(NULL, &(qf_nats_consumer_options){.stream = "s", .durable = "d"}, &c),
        "n is NULL");
    cr_expect_eq(c, UNTOUCHED);
}

CASE(qf_nats_consumer_source)
{
    qf_batch_source *src = UNTOUCHED;
    INVALID(qf_nats_consumer_source(NULL, &src), "c is NULL");
    cr_expect_eq(src, UNTOUCHED);
}

CASE(qf_nats_consumer_drain)
{
    INVALID(qf_nats_consumer_drain(NULL, QF_NO_WAIT), "c is NULL");
}

CASE(qf_nats_consumer_resume)
{
    INVALID(qf_nats_consumer_resume(NULL), "c is NULL");
}

CASE(qf_nats_consumer_free)
{
    QUIET(qf_nats_consumer_free(NULL));
}

CASE(qf_nats_consumer_get_stats)
{
    qf_nats_consumer_stats st = {.delivered = 77};
    REFUSED(qf_nats_consumer_get_stats(NULL, &st), "c is NULL");
    cr_expect_eq(st.delivered, 77);
}

CASE(qf_nats_consumer_last_error)
{
    NEUTRAL(qf_nats_consumer_last_error(NULL), NULL, "c is NULL");
}

CASE(qf_nats_reject)
{
    INVALID(qf_nats_reject(NULL, true), "e is NULL");
    qf_element *e = mkelem(1);
    EXPECT_CODE(QF_NOT_FOUND, qf_nats_reject(e, false), "ack token");
    qf_element_free(e);
}

CASE(qf_nats_consumer_get_info)
{
    qf_nats_consumer_info info = {.num_pending = 77};
    INVALID(qf_nats_consumer_get_info(NULL, "s", "d", &info), "n is NULL");
    cr_expect_eq(info.num_pending, 77);
}

CASE(qf_nats_consumer_delete)
{
    INVALID(qf_nats_consumer_delete(NULL, "s", "d"), "n is NULL");
}

CASE(qf_nats_sink_new)
{
    qf_nats_sink *s = UNTOUCHED;
    INVALID(qf_nats_sink_new(NULL, &(qf_nats_sink_options){.subject = "x"}, &s), "n is NULL");
    cr_expect_eq(s, UNTOUCHED);
}

CASE(qf_nats_sink_op)
{
    qf_enqueue_op op = {.input = UNTOUCHED};
    qf_queue *q = mkq(2);
    INVALID(qf_nats_sink_op(NULL, q, &op), "s is NULL");
    cr_expect_eq(op.input, UNTOUCHED);
    qf_queue_unref(q);
}

CASE(qf_nats_sink_runner)
{
    qf_queue_runner *r = UNTOUCHED;
    qf_queue *q = mkq(2);
    INVALID(qf_nats_sink_runner(NULL, q, 1, NULL), "ret is NULL");
    INVALID(qf_nats_sink_runner(NULL, q, 1, &r), "s is NULL");
    INVALID(qf_nats_sink_runner(NULL, q, 5000, &r), "n_ops");
    cr_expect_eq(r, UNTOUCHED);
    qf_queue_unref(q);
}

CASE(qf_nats_sink_flush)
{
    INVALID(qf_nats_sink_flush(NULL, QF_NO_WAIT), "s is NULL");
}

CASE(qf_nats_sink_free)
{
    QUIET(qf_nats_sink_free(NULL));
}

CASE(qf_nats_sink_get_stats)
{
    qf_nats_sink_stats st = {.published = 77};
    REFUSED(qf_nats_sink_get_stats(NULL, &st), "s is NULL");
    cr_expect_eq(st.published, 77);
}

CASE(qf_nats_encoded_size)
{
    size_t len = 77;
    INVALID(qf_nats_encoded_size(NULL, &len), "e is NULL");
    qf_element *e = mkelem(1);
    INVALID(qf_nats_encoded_size(e, NULL), "ret_len");
    qf_shape sc = qf_shape_scalar();
    qf_tensor *p = qf_tensor_new_ptr(&sc, NULL);
    qf_element *pe = qf_element_of(1, &p);
    INVALID(qf_nats_encoded_size(pe, &len), "cannot be sent");
    qf_tensor *sp = qf_tensor_new_sparse(mksparse());
    qf_element *se = qf_element_of(1, &sp);
    INVALID(qf_nats_encoded_size(se, &len), "cannot be sent");
    cr_expect_eq(len, 77);
    qf_element_free(se);
    qf_element_free(pe);
    qf_element_free(e);
}

CASE(qf_nats_encode)
{
    char buf[8] = "unused";
    size_t len = 77;
    INVALID(qf_nats_encode(NULL, buf, sizeof(buf), &len), "e is NULL");
    qf_element *e = mkelem(1);
    INVALID(qf_nats_encode(e, NULL, sizeof(buf), &len), "buf");
    INVALID(qf_nats_encode(e, buf, sizeof(buf), NULL), "ret_len");
    INVALID(qf_nats_encode(e, buf, 2, &len), "needs");
    cr_expect_eq(len, 77);
    cr_expect(strcmp(buf, "unused") == 0, "buf untouched");
    qf_element_free(e);
}

CASE(qf_nats_decode)
{
    qf_element *e = UNTOUCHED;
    INVALID(qf_nats_decode(NULL, 4, &e), "buf");
    INVALID(qf_nats_decode("QFE", 3, NULL), "ret_elem");
    EXPECT_CODE(QF_DATA_LOSS, qf_nats_decode("garbage!", 8, &e), "QFE");
    cr_expect_eq(e, UNTOUCHED);
}

#endif /* QF_HAVE_NATS */

/* ============================================================ qflow.h */

CASE(qf_version)
{
    cr_expect_str_eq(qf_version(), QF_VERSION_STRING); /* no argument */
}

/* ================================================================= run */

Test(bad_input, every_exported_function)
{
    const char *only = getenv("QF_BAD_INPUT_CASE");
    int ran = 0;
    for (bad_case *c = cases_head; c; c = c->next) {
        if (only && *only && !strstr(c->name, only))
            continue;
        fprintf(stderr, "[case] %s\n", c->name);
        current_case = c->name;
        c->fn();
        ran++;
    }
    cr_log_info("%d bad-input cases", ran);
    cr_expect_gt(ran, 0, "no case ran");
}
