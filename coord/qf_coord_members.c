/* qf_coord_members.c - the Coordinator's members: tasks, registered
 * threads and the exit hooks that report a thread's end.
 *
 * Members are reference counted: the coordinator's registered set holds one
 * reference, and the owner (a task's handle, a thread's exit hook) another.
 * join drops the set's reference, so a laggard that finishes after join
 * gave up on it still has a valid record to mark. done_inflight keeps
 * qf_coord_free from freeing the coordinator while a member_done that join
 * has already seen is still notifying the event count.
 */
#include "qf_coordinator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_coord_join-impl.h"
#include "qf_coord_state-impl.h"
#include "qf_member_mem-impl.h"
#include "qf_status-impl.h"

/* The name (and any extra bytes) are inside the record. NULL: nothing. */
static void member_free(qf_coord_member *m)
{
    if (m)
        qf__member_mem_free(m, m->mem_class);
}

void qf__coord_member_unref(qf_coord_member *m)
{
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        member_free(m);
}

/* One allocation: the record, `extra` bytes at MEMBER_EXTRA_OFF (when
 * asked for), then the name, so a member costs a single heap chunk. */
static qf_coord_member *member_alloc(qf_coord *c, enum member_kind kind, const char *name,
                                     const char *prefix, uint32_t refs, size_t extra)
{
    char buf[48];
    uint64_t id = atomic_fetch_add_explicit(&c->next_id, 1, memory_order_relaxed);
    if (!name) {
        snprintf(buf, sizeof(buf), "%s-%llu", prefix, (unsigned long long)id);
        name = buf;
    }
    size_t name_off = extra ? MEMBER_EXTRA_OFF + extra : sizeof(qf_coord_member);
    size_t len = strlen(name) + 1;
    if (extra > SIZE_MAX / 2 || len > SIZE_MAX / 2)
        return NULL;
    uint8_t cls;
    qf_coord_member *m = qf__member_mem_alloc(name_off + len, &cls);
    if (!m)
        return NULL;
    m->mem_class = cls;
    char *copy = (char *)m + name_off;
    memcpy(copy, name, len);
    m->name = copy;
    m->c = c;
    m->kind = kind;
    atomic_init(&m->done, 0);
    atomic_init(&m->refs, refs);
    return m;
}

/* Register ms[0..n) in that order under one lock (a batch of tasks costs
 * one critical section, not one each). */
static void members_link(qf_coord *c, qf_coord_member *const *ms, size_t n)
{
    if (n == 0)
        return;
    for (size_t i = 0; i + 1 < n; i++)
        ms[i]->next = ms[i + 1];
    ms[n - 1]->next = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->members_tail)
        c->members_tail->next = ms[0];
    else
        c->members_head = ms[0];
    c->members_tail = ms[n - 1];
    pthread_mutex_unlock(&c->lock);
}

static void member_link(qf_coord *c, qf_coord_member *m)
{
    members_link(c, &m, 1);
}

void qf_coord_member_done(qf_coord_member *m)
{
    if (!m)
        return;
    qf_coord *c = m->c;
    /* Counted before the release store: a join that sees `done` also sees
     * this increment, so qf_coord_free waits for the notify below. */
    atomic_fetch_add_explicit(&c->done_inflight, 1, memory_order_relaxed);
    atomic_store_explicit(&m->done, 1, memory_order_release);
    qf_eventcount_notify(&c->ec, true); /* a full fence first */
    qf__coord_wake_driven_join(c);
    qf__coord_member_unref(m);
    atomic_fetch_sub_explicit(&c->done_inflight, 1, memory_order_release);
}

qf_code qf_coord_member_new(qf_coord *c, const char *name, qf_coord_member **ret_m)
{
    if (!c)
        return null_coord("qf_coord_member_new: coordinator (c) is NULL");
    if (!ret_m)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_member_new: ret_m is NULL");
    /* Two references: the caller's handle and the registered set. */
    qf_coord_member *m = member_alloc(c, MEMBER_TASK, name, "member", 2, 0);
    if (!m)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_member_new: out of memory");
    member_link(c, m);
    *ret_m = m;
    return QF_OK;
}

qf_code qf__coord_member_make(qf_coord *c, const char *name, size_t extra, qf_coord_member **ret_m,
                              void **ret_extra, const char **ret_name)
{
    /* Three references: the handle, the registered set, the extra's owner. */
    qf_coord_member *m = member_alloc(c, MEMBER_TASK, name, "member", 3, extra ? extra : 1);
    if (!m)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_member_new: out of memory");
    *ret_extra = (char *)m + MEMBER_EXTRA_OFF;
    *ret_name = m->name;
    *ret_m = m;
    return QF_OK;
}

void qf__coord_members_link(qf_coord *c, qf_coord_member *const *ms, size_t n)
{
    members_link(c, ms, n);
}

void qf__coord_member_discard(qf_coord_member *m)
{
    member_free(m);
}

qf_code qf__coord_member_new_ext(qf_coord *c, const char *name, size_t extra,
                                 qf_coord_member **ret_m, void **ret_extra, const char **ret_name)
{
    qf_code rc = qf__coord_member_make(c, name, extra, ret_m, ret_extra, ret_name);
    if (rc == QF_OK)
        member_link(c, *ret_m);
    return rc;
}

void qf__coord_member_release(qf_coord_member *m)
{
    if (m)
        qf__coord_member_unref(m);
}

void qf__coord_member_mark_hosted(qf_coord_member *m)
{
    if (m)
        atomic_store_explicit(&m->hosted, true, memory_order_relaxed);
}

/* Thread exit hooks: a thread-specific value listing the members the
 * thread reports at its end. glibc runs the destructor both on return
 * from the start routine and on pthread_exit. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_err;

static void exit_hook(void *p)
{
    for (qf_coord_member *m = p, *n; m; m = n) {
        n = m->tls_next;
        qf_coord_member_done(m);
    }
}

static void make_exit_key(void)
{
    exit_key_err = pthread_key_create(&exit_key, exit_hook);
}

/* Make the calling thread report `m` (holding one reference) at its end. */
static bool hook_current_thread(qf_coord_member *m)
{
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_err)
        return false;
    m->tls_next = pthread_getspecific(exit_key);
    return pthread_setspecific(exit_key, m) == 0;
}

qf_code qf_coord_register_thread(qf_coord *c, pthread_t t, const char *name)
{
    if (!c)
        return null_coord("qf_coord_register_thread: coordinator (c) is NULL");
    bool self = pthread_equal(t, pthread_self());
    qf_coord_member *m = member_alloc(c, self ? MEMBER_THREAD_HOOKED : MEMBER_THREAD_FOREIGN, name,
                                      "thread", self ? 2 : 1, 0);
    if (!m)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED,
                                    "qf_coord_register_thread: out of memory");
    m->thread = t;
    if (self && !hook_current_thread(m)) {
        /* No exit hook: join will join it like a foreign thread. */
        m->kind = MEMBER_THREAD_FOREIGN;
        atomic_store_explicit(&m->refs, 1, memory_order_relaxed);
    }
    member_link(c, m);
    return QF_OK;
}

struct trampoline {
    qf_coord_member *m;
    void *(*fn)(void *);
    void *arg;
};

static void *thread_main(void *p)
{
    struct trampoline t = *(struct trampoline *)p;
    free(p);
    if (hook_current_thread(t.m))
        return t.fn(t.arg); /* the exit hook reports the end */
    void *r = t.fn(t.arg);
    qf_coord_member_done(t.m);
    return r;
}

qf_code qf_coord_thread_create(qf_coord *c, const char *name, void *(*fn)(void *), void *arg,
                               pthread_t *ret_thread)
{
    if (!c)
        return null_coord("qf_coord_thread_create: coordinator (c) is NULL");
    if (!fn || !ret_thread)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_thread_create: fn or ret_thread is NULL");
    /* References: the registered set and the thread's exit hook. */
    qf_coord_member *m = member_alloc(c, MEMBER_THREAD_HOOKED, name, "thread", 2, 0);
    struct trampoline *tr = m ? malloc(sizeof(*tr)) : NULL;
    if (!tr) {
        member_free(m); /* the name is inside */
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_thread_create: out of memory");
    }
    tr->m = m;
    tr->fn = fn;
    tr->arg = arg;
    pthread_t t;
    int err = pthread_create(&t, NULL, thread_main, tr);
    if (err) {
        free(tr);
        member_free(m);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_coord_thread_create: pthread_create: %s",
                            strerror(err));
    }
    /* The thread may already have ended: its record stays valid (the
     * set's reference), and join will see it done. */
    m->thread = t;
    member_link(c, m);
    *ret_thread = t;
    return QF_OK;
}

/* Non-blocking members check, for schedulers that must not join from a
 * task (join has no poll form). */
bool qf_coord_members_done(const qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_members_done: coordinator (c) is NULL");
        return false;
    }
    qf_coord *cm = (qf_coord *)c;
    bool done = true;
    pthread_mutex_lock(&cm->lock);
    /* A foreign thread's end is known only by joining it, which would reap
     * it behind join's back: it counts as running until a join. */
    for (qf_coord_member *m = cm->members_head; m && done; m = m->next)
        done = m->kind != MEMBER_THREAD_FOREIGN &&
               atomic_load_explicit(&m->done, memory_order_acquire) != 0;
    pthread_mutex_unlock(&cm->lock);
    return done;
}
