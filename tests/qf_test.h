/* qf_test.h - helpers the test programs share: runtimes, scopes and
 * Coordinators that fail the test when they cannot be made, starting and
 * joining a scope's queue runners, and taking batches. The stress suites'
 * shared parts are in qf_test_stress.h.
 *
 * Static functions: each test file includes it once. A file may set, before
 * the include:
 *   QFT_RT_NAME  the name mkrt() gives its runtimes (default "test"), so
 *                the worker threads of each suite are told apart in a
 *                debugger or a sanitizer report;
 *   QFT_SOON_S   the bound of soon() in seconds (default 20): only a
 *                broken run reaches it, so slow suites (sanitizer builds,
 *                pipes) raise it rather than sleep.
 */
#ifndef QF_TEST_H
#define QF_TEST_H

#include <criterion/criterion.h>

#include "qflow.h"

#ifndef QFT_RT_NAME
#define QFT_RT_NAME "test"
#endif
#ifndef QFT_SOON_S
#define QFT_SOON_S 20
#endif

/* ------------------------------------------------- runtime, scope, coord */

static inline qf_runtime *mkrt(int workers)
{
    qf_runtime_options o = {.workers = workers, .name = QFT_RT_NAME};
    qf_runtime *rt = NULL;
    qf_code rc = qf_runtime_new(&o, &rt);
    cr_assert_eq(rc, QF_OK, "qf_runtime_new: %s (%s)", qf_code_name(rc), qf_last_message());
    return rt;
}

static inline qf_scope *mkscope(void)
{
    qf_scope *s = NULL;
    qf_code rc = qf_scope_new(&s);
    cr_assert_eq(rc, QF_OK, "qf_scope_new: %s (%s)", qf_code_name(rc), qf_last_message());
    return s;
}

static inline qf_coord *mkcoord(void)
{
    qf_coord *c = NULL;
    qf_code rc = qf_coord_new(NULL, 0, &c);
    cr_assert_eq(rc, QF_OK, "qf_coord_new: %s (%s)", qf_code_name(rc), qf_last_message());
    return c;
}

/* A deadline only a broken run reaches. */
static inline qf_deadline soon(void)
{
    return qf_deadline_in_s(QFT_SOON_S);
}

/* ------------------------------------------------------ runners of a scope */

/* The tasks of every runner of a scope, started together, for join_all(). */
typedef struct started {
    qf_task **t;
    size_t n;
} started;

static inline started start(qf_runtime *rt, qf_coord *c, qf_scope *s)
{
    started st = {0};
    qf_code rc = qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &st.t, &st.n);
    cr_assert_eq(rc, QF_OK, "qf_start_queue_runners: %s (%s)", qf_code_name(rc), qf_last_message());
    return st;
}

/* Join and free the tasks; a task still running at soon() fails the test. */
static inline void join_all(started *st)
{
    for (size_t i = 0; i < st->n; i++) {
        qf_task_join(st->t[i], soon(), NULL);
        cr_assert(qf_task_is_done(st->t[i]), "task '%s' did not finish", qf_task_name(st->t[i]));
    }
    qf_tasks_free(st->t, st->n);
    st->t = NULL;
    st->n = 0;
}

/* ---------------------------------------------------- batches and elements */

/* The next batch; anything else by soon() fails the test. */
static inline qf_element *next_ok(qf_batcher *b)
{
    qf_element *e = NULL;
    qf_code rc = qf_batcher_next_until(b, soon(), &e);
    cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
    return e;
}

/* The batcher has reached its end (QF_OUT_OF_RANGE, no element). */
static inline void expect_end(qf_batcher *b)
{
    qf_element *e = NULL;
    qf_code rc = qf_batcher_next_until(b, soon(), &e);
    cr_expect_eq(rc, QF_OUT_OF_RANGE, "%s: %s", qf_code_name(rc), qf_last_message());
    cr_expect_null(e);
}

/* Entry i of component comp, an int64 tensor. */
static inline int64_t i64_at(const qf_element *e, size_t comp, int64_t i)
{
    return ((const int64_t *)qf_tensor_cdata(qf_element_get(e, comp)))[i];
}

#endif
