/* qf_waitlist-impl.h - internal: a wait list registration for callers
 * that fence themselves. Never installed.
 */
#ifndef QF_WAITLIST_IMPL_H
#define QF_WAITLIST_IMPL_H

#include "qf_waker.h"

/**
 * qf__waitlist_register_unfenced() - qf_waitlist_register() without its
 * closing full fence, for a waiter whose very next step is a seq_cst
 * read-modify-write of the word its notifiers load (a queue setting its
 * wait bit): that RMW orders the registration before the waiter's
 * re-check as the fence would, and a full fence costs as much as the RMW
 * again (a parked task's round trip pays it once per wait). Same
 * arguments, blocking and errors as qf_waitlist_register().
 */
void qf__waitlist_register_unfenced(qf_waitlist *wl, qf_waker *w);

#endif
