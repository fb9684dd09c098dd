/* tests/tsan-runner/criterion/criterion.h - the subset of Criterion's API
 * the qflow suites use, with a plain in-process runner.
 *
 * Why: Criterion's runner (BoxFort) maps its shared arena at addresses that
 * ThreadSanitizer reserves for its shadow memory, so any Criterion binary
 * aborts at start under TSan ("Could not initialize inheritable arena",
 * Criterion issue #274, open upstream). The TSan build compiles the very
 * same test sources against this header instead: tests run one after
 * another in one process, cr_assert* ends the current test, cr_expect*
 * records a failure and continues, and the run ends with Criterion's
 * synthesis line so CI counts it the same way. Only the TSan build uses it.
 */
#ifndef QF_TSAN_CRITERION_SHIM_H
#define QF_TSAN_CRITERION_SHIM_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct criterion_test_extra_data {
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    bool disabled;
    const char *description;
    int exit_code;
    int signal;
};

struct shim_test {
    const char *suite, *name;
    void (*fn)(void);
    struct criterion_test_extra_data data;
    struct shim_test *next;
};

struct shim_suite {
    const char *name;
    struct criterion_test_extra_data data;
    struct shim_suite *next;
};

void shim_register(struct shim_test *t);
void shim_register_suite(struct shim_suite *s);
void shim_fail(bool fatal, const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void shim_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shim_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define SHIM_CAT_(a, b) a##b
#define SHIM_CAT(a, b) SHIM_CAT_(a, b)

#define Test(suite_, name_, ...)                                                                \
    static void SHIM_CAT(suite_##_, name_##_impl)(void);                                      \
    static struct shim_test SHIM_CAT(suite_##_, name_##_desc) = {                             \
        #suite_, #name_, SHIM_CAT(suite_##_, name_##_impl), {__VA_ARGS__}, NULL};             \
    __attribute__((constructor)) static void SHIM_CAT(suite_##_, name_##_reg)(void)           \
    {                                                                                           \
        shim_register(&SHIM_CAT(suite_##_, name_##_desc));                                    \
    }                                                                                           \
    static void SHIM_CAT(suite_##_, name_##_impl)(void)

#define TestSuite(suite_, ...)                                                                  \
    static struct shim_suite SHIM_CAT(suite_##_, suite_desc) = {#suite_, {__VA_ARGS__}, NULL}; \
    __attribute__((constructor)) static void SHIM_CAT(suite_##_, suite_reg)(void)             \
    {                                                                                           \
        shim_register_suite(&SHIM_CAT(suite_##_, suite_desc));                                \
    }

#define SHIM_CHECK(fatal, cond, text, ...)                                                      \
    do {                                                                                        \
        if (!(cond))                                                                            \
            shim_fail(fatal, __FILE__, __LINE__, text, "" __VA_ARGS__);                       \
    } while (0)

#define cr_assert(c, ...) SHIM_CHECK(true, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) SHIM_CHECK(false, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) SHIM_CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) SHIM_CHECK(false, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_fail(...) shim_fail(false, __FILE__, __LINE__, "cr_fail", "" __VA_ARGS__)
#define cr_assert_fail(...) shim_fail(true, __FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_expect_fail(...) cr_fail(__VA_ARGS__)
#define cr_skip_test(...) shim_skip("" __VA_ARGS__)

#define SHIM_CMP(fatal, a, op, b, ...) SHIM_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) SHIM_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) SHIM_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) SHIM_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) SHIM_CMP(false, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) SHIM_CMP(true, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) SHIM_CMP(false, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) SHIM_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) SHIM_CMP(false, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) SHIM_CMP(true, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) SHIM_CMP(false, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) SHIM_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) SHIM_CMP(false, a, >=, b, __VA_ARGS__)
#define cr_assert_null(a, ...) SHIM_CHECK(true, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_expect_null(a, ...) SHIM_CHECK(false, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_assert_not_null(a, ...) SHIM_CHECK(true, (a) != NULL, #a " != NULL", __VA_ARGS__)
#define cr_expect_not_null(a, ...) SHIM_CHECK(false, (a) != NULL, #a " != NULL", __VA_ARGS__)
#define SHIM_STR(fatal, a, op, b, ...)                                                          \
    SHIM_CHECK(fatal, strcmp((a), (b)) op 0, "strcmp(" #a ", " #b ") " #op " 0", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) SHIM_STR(true, a, ==, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) SHIM_STR(false, a, ==, b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) SHIM_STR(true, a, !=, b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) SHIM_STR(false, a, !=, b, __VA_ARGS__)
#define cr_assert_str_empty(a, ...) SHIM_CHECK(true, (a)[0] == 0, #a " is empty", __VA_ARGS__)
#define cr_expect_str_empty(a, ...) SHIM_CHECK(false, (a)[0] == 0, #a " is empty", __VA_ARGS__)
#define cr_assert_str_not_empty(a, ...) SHIM_CHECK(true, (a)[0] != 0, #a " not empty", __VA_ARGS__)
#define cr_expect_str_not_empty(a, ...)                                                         \
    SHIM_CHECK(false, (a)[0] != 0, #a " not empty", __VA_ARGS__)
#define SHIM_ARR(fatal, a, b, n, op, ...)                                                       \
    SHIM_CHECK(fatal, memcmp((a), (b), (n)) op 0, "memcmp(" #a ", " #b ") " #op " 0", __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...) SHIM_ARR(true, a, b, n, ==, __VA_ARGS__)
#define cr_expect_arr_eq(a, b, n, ...) SHIM_ARR(false, a, b, n, ==, __VA_ARGS__)
#define cr_assert_arr_neq(a, b, n, ...) SHIM_ARR(true, a, b, n, !=, __VA_ARGS__)
#define cr_expect_arr_neq(a, b, n, ...) SHIM_ARR(false, a, b, n, !=, __VA_ARGS__)
#define SHIM_FLT(fatal, a, b, eps, op, ...)                                                     \
    SHIM_CHECK(fatal, (((a) - (b)) <= (eps) && ((b) - (a)) <= (eps))op 1,                      \
               #a " ~= " #b, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...) SHIM_FLT(true, a, b, eps, ==, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...) SHIM_FLT(false, a, b, eps, ==, __VA_ARGS__)
#define cr_assert_float_neq(a, b, eps, ...) SHIM_FLT(true, a, b, eps, !=, __VA_ARGS__)
#define cr_expect_float_neq(a, b, eps, ...) SHIM_FLT(false, a, b, eps, !=, __VA_ARGS__)

#define cr_log_info(...) shim_log("INFO", __VA_ARGS__)
#define cr_log_warn(...) shim_log("WARN", __VA_ARGS__)
#define cr_log_error(...) shim_log("ERROR", __VA_ARGS__)
#define cr_log(level, ...) shim_log("LOG", __VA_ARGS__)

#endif
