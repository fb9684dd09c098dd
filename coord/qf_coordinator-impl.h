/* qf_coordinator-impl.h - internal: what the runtime's task members and
 * the white-box tests use of the Coordinator.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive). */
#ifndef QF_COORDINATOR_IMPL_H
#define QF_COORDINATOR_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "qf_coordinator.h"

/* Layout of the stop word. */
#define QF__COORD_STOP 1u
#define QF__COORD_SLEEPERS 2u
#define QF__COORD_EPOCH_SHIFT 2

/* The stop word, acquire load. */
uint32_t qf__coord_word(const qf_coord *c);

/* qf_coord_member_new() for a task of a qflow runtime, with the task in the
 * member's allocation: one allocation and one copy of the name per task
 * (it matters with ten thousand parked tasks). *ret_extra receives `extra`
 * bytes (zeroed, aligned to 8: enough for pointers and 64-bit atomics) that live exactly as long as
 * the member record, and *ret_name the member's copy of `name`, valid as long. The record then has
 * three references: the registered set's, the handle's (given up by qf_coord_member_done()) and the
 * extra's owner's, given up by qf__coord_member_release() when the owner is done with the extra
 * bytes. */
qf_code qf__coord_member_new_ext(qf_coord *c, const char *name, size_t extra,
                                 qf_coord_member **ret_m, void **ret_extra, const char **ret_name);
void qf__coord_member_release(qf_coord_member *m);

/* qf__coord_member_new_ext() in two steps, for a batch of tasks: make
 * records (not registered yet: nothing else sees them), then register
 * them all in order under one lock with qf__coord_members_link(). A record
 * made and never linked (the batch failed) is freed with
 * qf__coord_member_discard(). */
qf_code qf__coord_member_make(qf_coord *c, const char *name, size_t extra, qf_coord_member **ret_m,
                              void **ret_extra, const char **ret_name);
void qf__coord_members_link(qf_coord *c, qf_coord_member *const *ms, size_t n);
void qf__coord_member_discard(qf_coord_member *m);

/* qf_coord_add_stop_action() for n actions, fn(args[i]) each, handles in
 * ret_actions[i] (may be NULL): made first (all or none: on out of memory
 * QF_RESOURCE_EXHAUSTED and none added), then linked under one lock. When
 * a stop is in effect each is added (and run) as
 * qf_coord_add_stop_action() would. */
qf_code qf__coord_add_stop_actions(qf_coord *c, size_t n, qf_coord_action_fn fn, void *const *args,
                                   qf_coord_action **ret_actions);

#endif
