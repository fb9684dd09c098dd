/* test_thread.c - a latency-critical thread's slice and timer slack
 * (qf_thread.h). Each test changes threads it creates, so the runner's
 * thread keeps its settings. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "qf_test_sched.h"
#include "qflow.h"

#define POLICY_NORMAL 0u
#define POLICY_BATCH 3u
#define POLICY_FIFO 1u

static void need_slices(void)
{
    if (!qft_kernel_has_slices())
        cr_skip_test("this kernel has no per-thread slices (Linux 6.12 or later)");
}

/* Run fn on a thread of its own and wait for it. */
static void on_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0)
        abort();
    pthread_join(t, NULL);
}

typedef struct seen {
    qf_code rc, restore_rc;
    uint64_t slice_before, slack_before;
    uint64_t slice_during, slack_during;
    uint64_t slice_after, slack_after;
    qft_attr attr_during, attr_after;
    qf_thread_sched saved;
} seen;

/* Prefer latency with `slice`, look, restore, look. */
static void prefer_and_restore(seen *s, int64_t slice)
{
    s->slice_before = qft_slice_ns();
    s->slack_before = qft_timer_slack_ns();
    s->rc = qf_thread_prefer_latency(slice, &s->saved);
    s->slice_during = qft_slice_ns();
    s->slack_during = qft_timer_slack_ns();
    s->attr_during = qft_sched_get();
    s->restore_rc = qf_thread_restore_sched(&s->saved);
    s->slice_after = qft_slice_ns();
    s->slack_after = qft_timer_slack_ns();
    s->attr_after = qft_sched_get();
}

static void *default_thread(void *a)
{
    prefer_and_restore(a, 200000);
    return NULL;
}

Test(thread, prefer_latency_sets_slice_and_slack_and_restore_puts_them_back)
{
    need_slices();
    seen s = {0};
    on_thread(default_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(s.slice_during, 200000);
    cr_expect_eq(s.slack_during, (uint64_t)QF_THREAD_LATENCY_TIMER_SLACK_NS);
    cr_expect_eq(s.restore_rc, QF_OK);
    cr_expect_eq(s.slice_after, s.slice_before);
    cr_expect_eq(s.slack_after, s.slack_before);
    cr_expect_neq(s.slice_before, 200000, "a fresh thread already had the slice under test");
}

static void *custom_slice_thread(void *a)
{
    qft_attr cur = qft_sched_get();
    if (qft_sched_set(cur.policy, cur.nice, 3000000) != 0) {
        ((seen *)a)->rc = QF_INTERNAL;
        return NULL;
    }
    prefer_and_restore(a, QF_THREAD_SLICE_MIN_NS);
    return NULL;
}

Test(thread, a_custom_slice_comes_back_as_it_was)
{
    need_slices();
    seen s = {0};
    on_thread(custom_slice_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(s.slice_before, 3000000);
    cr_expect_eq(s.slice_during, (uint64_t)QF_THREAD_SLICE_MIN_NS);
    cr_expect_eq(s.slice_after, 3000000);
}

static void *batch_nice_thread(void *a)
{
    if (qft_sched_set(POLICY_BATCH, 5, 0) != 0) {
        ((seen *)a)->rc = QF_INTERNAL;
        return NULL;
    }
    prefer_and_restore(a, 500000);
    return NULL;
}

Test(thread, policy_and_nice_survive_both_calls)
{
    need_slices();
    seen s = {0};
    on_thread(batch_nice_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(s.attr_during.policy, POLICY_BATCH);
    cr_expect_eq(s.attr_during.nice, 5);
    cr_expect_eq(s.slice_during, 500000);
    cr_expect_eq(s.attr_after.policy, POLICY_BATCH);
    cr_expect_eq(s.attr_after.nice, 5);
    cr_expect_eq(s.slice_after, s.slice_before);
}

static void *no_saved_thread(void *a)
{
    uint64_t *slice = a;
    *slice = qf_thread_prefer_latency(QF_THREAD_SLICE_MAX_NS, NULL) == QF_OK ? qft_slice_ns() : 0;
    return NULL;
}

Test(thread, saved_state_is_optional)
{
    need_slices();
    uint64_t slice = 0;
    on_thread(no_saved_thread, &slice);
    cr_expect_eq(slice, (uint64_t)QF_THREAD_SLICE_MAX_NS);
}

typedef struct refused {
    uint64_t slice_before, slack_before, slice_after, slack_after;
    qf_code rc[4];
    qf_thread_sched saved;
} refused;

static void *bad_slice_thread(void *a)
{
    refused *r = a;
    r->slice_before = qft_slice_ns();
    r->slack_before = qft_timer_slack_ns();
    const int64_t bad[4] = {0, QF_THREAD_SLICE_MIN_NS - 1, QF_THREAD_SLICE_MAX_NS + 1, -1};
    for (int i = 0; i < 4; i++)
        r->rc[i] = qf_thread_prefer_latency(bad[i], &r->saved);
    r->slice_after = qft_slice_ns();
    r->slack_after = qft_timer_slack_ns();
    return NULL;
}

Test(thread, a_slice_outside_the_kernels_range_changes_nothing)
{
    refused r;
    memset(&r.saved, 0x5a, sizeof(r.saved));
    on_thread(bad_slice_thread, &r);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(r.rc[i], QF_INVALID_ARGUMENT, "case %d", i);
    cr_expect_eq(r.slice_after, r.slice_before);
    cr_expect_eq(r.slack_after, r.slack_before);
    unsigned char *b = (unsigned char *)&r.saved;
    for (size_t i = 0; i < sizeof(r.saved); i++)
        cr_expect_eq(b[i], 0x5a, "ret_saved written on failure");
}

static void *save_only(void *a)
{
    if (qf_thread_prefer_latency(QF_THREAD_SLICE_MIN_NS, a) != QF_OK)
        ((qf_thread_sched *)a)->tid = -1;
    return NULL;
}

Test(thread, a_thread_restores_only_itself)
{
    need_slices();
    qf_thread_sched saved;
    on_thread(save_only, &saved);
    cr_assert_neq(saved.tid, -1, "qf_thread_prefer_latency failed on the other thread");
    uint64_t slice = qft_slice_ns(), slack = qft_timer_slack_ns();
    cr_expect_eq(qf_thread_restore_sched(&saved), QF_FAILED_PRECONDITION);
    cr_expect(strstr(qf_last_message(), "another") != NULL, "%s", qf_last_message());
    cr_expect_eq(qft_slice_ns(), slice);
    cr_expect_eq(qft_timer_slack_ns(), slack);
    cr_expect_eq(qf_thread_restore_sched(NULL), QF_INVALID_ARGUMENT);
}

static void *fifo_thread(void *a)
{
    qft_attr rt = {.size = sizeof(rt), .policy = POLICY_FIFO, .priority = 1};
    if (syscall(SYS_sched_setattr, 0, &rt, 0u) != 0) {
        ((seen *)a)->rc = QF_PERMISSION_DENIED;
        return NULL;
    }
    prefer_and_restore(a, 200000);
    return NULL;
}

Test(thread, a_realtime_thread_keeps_its_policy_and_slice)
{
    seen s = {0};
    on_thread(fifo_thread, &s);
    if (s.rc == QF_PERMISSION_DENIED)
        cr_skip_test("no permission for SCHED_FIFO here");
    cr_assert_eq(s.rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(s.saved.slice_changed, 0);
    cr_expect_eq(s.attr_during.policy, POLICY_FIFO);
    cr_expect_eq(s.slice_during, s.slice_before);
    cr_expect_eq(s.restore_rc, QF_OK);
    cr_expect_eq(s.attr_after.policy, POLICY_FIFO);
}

static void *inherit_child(void *a)
{
    *(uint64_t *)a = qft_slice_ns();
    return NULL;
}

static void *inherit_parent(void *a)
{
    if (qf_thread_prefer_latency(250000, NULL) == QF_OK)
        on_thread(inherit_child, a);
    return NULL;
}

Test(thread, threads_created_afterwards_inherit_the_slice)
{
    need_slices();
    uint64_t child = 0;
    on_thread(inherit_parent, &child);
    cr_expect_eq(child, 250000);
}
