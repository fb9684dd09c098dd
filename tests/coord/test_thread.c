/* test_thread.c - a latency-critical thread's slice and timer slack
 * (qf_thread.h). Each test changes only threads it creates, so the
 * runner's thread (shared by every test under the TSan runner) keeps its
 * settings; what a thread saw and the message of a failed call are carried
 * back to the runner's thread to be checked there. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_test_sched.h"
#include "qflow.h"

#define POLICY_NORMAL 0u
#define POLICY_FIFO 1u
#define POLICY_BATCH 3u
#define POLICY_IDLE 5u
#define RESET_ON_FORK 1u

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
    char msg[256]; /* the last error after a failed call */
    qft_attr before, during, after;
    uint64_t slack_before, slack_during, slack_after;
    qf_thread_sched saved;
} seen;

static void note_error(seen *s, qf_code rc)
{
    if (rc != QF_OK)
        snprintf(s->msg, sizeof(s->msg), "%s: %s", qf_code_name(rc), qf_last_message());
}

/* Prefer latency with `slice`, look, restore, look. */
static void prefer_and_restore(seen *s, int64_t slice)
{
    s->before = qft_sched_get();
    s->slack_before = qft_timer_slack_ns();
    note_error(s, s->rc = qf_thread_prefer_latency(slice, &s->saved));
    s->during = qft_sched_get();
    s->slack_during = qft_timer_slack_ns();
    note_error(s, s->restore_rc = qf_thread_restore_sched(&s->saved));
    s->after = qft_sched_get();
    s->slack_after = qft_timer_slack_ns();
}

/* Give the thread `attr` (raw sched_setattr), then prefer and restore; a
 * refusal is noted as QF_PERMISSION_DENIED (EPERM) or QF_INTERNAL. */
static void *set_then_prefer(seen *s, qft_attr attr, int64_t slice)
{
    attr.size = sizeof(attr);
    if (syscall(SYS_sched_setattr, 0, &attr, 0u) != 0) {
        s->rc = errno == EPERM ? QF_PERMISSION_DENIED : QF_INTERNAL;
        snprintf(s->msg, sizeof(s->msg), "sched_setattr(policy %u, nice %d, slice %llu): errno %d",
                 attr.policy, attr.nice, (unsigned long long)attr.runtime, errno);
        return NULL;
    }
    prefer_and_restore(s, slice);
    return NULL;
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
    cr_assert_eq(s.rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.saved.slice_changed, 1);
    cr_expect_eq(s.saved.slice_was_default, 1);
    cr_expect_eq(s.during.runtime, 200000);
    cr_expect_eq(s.slack_during, (uint64_t)QF_THREAD_LATENCY_TIMER_SLACK_NS);
    cr_expect_eq(s.restore_rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.after.runtime, s.before.runtime);
    cr_expect_eq(s.slack_after, s.slack_before);
    cr_expect_neq(s.before.runtime, 200000, "a fresh thread already had the slice under test");
}

/* 2.6 ms: no machine's default (0.75 ms x (1 + log2 CPUs), at most 3 ms). */
#define OWN_SLICE 2600000u

static void *custom_slice_thread(void *a)
{
    qft_attr cur = qft_sched_get();
    return set_then_prefer(a,
                           (qft_attr){.policy = cur.policy, .nice = cur.nice, .runtime = OWN_SLICE},
                           QF_THREAD_SLICE_MIN_NS);
}

Test(thread, a_slice_of_the_threads_own_comes_back_as_it_was)
{
    need_slices();
    seen s = {0};
    on_thread(custom_slice_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.before.runtime, OWN_SLICE);
    cr_expect_eq(s.saved.slice_was_default, 0);
    cr_expect_eq(s.during.runtime, (uint64_t)QF_THREAD_SLICE_MIN_NS);
    cr_expect_eq(s.after.runtime, OWN_SLICE, "restored to %llu",
                 (unsigned long long)s.after.runtime);
}

/* reset-on-fork may be set without privilege (only clearing needs it) */
static void *batch_nice_thread(void *a)
{
    return set_then_prefer(a, (qft_attr){.policy = POLICY_BATCH, .flags = RESET_ON_FORK, .nice = 5},
                           500000);
}

Test(thread, policy_nice_and_reset_on_fork_survive_both_calls)
{
    need_slices();
    seen s = {0};
    on_thread(batch_nice_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.during.runtime, 500000);
    const qft_attr *look[2] = {&s.during, &s.after};
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(look[i]->policy, POLICY_BATCH, "%s", i ? "after" : "during");
        cr_expect_eq(look[i]->nice, 5, "%s", i ? "after" : "during");
        cr_expect_eq(look[i]->flags & RESET_ON_FORK, RESET_ON_FORK, "%s", i ? "after" : "during");
    }
    cr_expect_eq(s.after.runtime, s.before.runtime);
}

static void *idle_thread(void *a)
{
    return set_then_prefer(a, (qft_attr){.policy = POLICY_IDLE}, 200000);
}

/* The kernel gives SCHED_IDLE no slice of its own: the slack alone is set,
 * and that is not an error. */
Test(thread, an_idle_thread_gets_the_slack_and_keeps_its_slice)
{
    seen s = {0};
    on_thread(idle_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.saved.slice_changed, 0);
    cr_expect_eq(s.during.policy, POLICY_IDLE);
    cr_expect_eq(s.during.runtime, s.before.runtime);
    cr_expect_eq(s.slack_during, (uint64_t)QF_THREAD_LATENCY_TIMER_SLACK_NS);
    cr_expect_eq(s.restore_rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.slack_after, s.slack_before);
}

static void *no_saved_thread(void *a)
{
    seen *s = a;
    note_error(s, s->rc = qf_thread_prefer_latency(QF_THREAD_SLICE_MAX_NS, NULL));
    s->during = qft_sched_get();
    return NULL;
}

Test(thread, saved_state_is_optional)
{
    need_slices();
    seen s = {0};
    on_thread(no_saved_thread, &s);
    cr_assert_eq(s.rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.during.runtime, (uint64_t)QF_THREAD_SLICE_MAX_NS);
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
    return set_then_prefer(a, (qft_attr){.policy = POLICY_FIFO, .priority = 1}, 200000);
}

Test(thread, a_realtime_thread_keeps_its_policy_and_slice)
{
    seen s = {0};
    on_thread(fifo_thread, &s);
    if (s.rc == QF_PERMISSION_DENIED)
        cr_skip_test("no permission for SCHED_FIFO here");
    cr_assert_eq(s.rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.saved.slice_changed, 0);
    cr_expect_eq(s.during.policy, POLICY_FIFO);
    cr_expect_eq(s.during.runtime, s.before.runtime);
    cr_expect_eq(s.restore_rc, QF_OK, "%s", s.msg);
    cr_expect_eq(s.after.policy, POLICY_FIFO);
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
