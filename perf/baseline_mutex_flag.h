/* baseline_mutex_flag.h - the stop flag most C programs write by hand: a
 * bool behind a mutex, with a condition variable for threads that wait for
 * the stop. It is what qflow's Coordinator (one atomic word, futex) is
 * measured against in bench_coord.c.
 *
 * Functions are out of line on purpose, in their own translation unit, so
 * a call costs what a call into qflow's library costs (no inlining either
 * way).
 *
 * Synchronization: every call from any thread; mf_free needs quiescence. */
#ifndef BENCH_BASELINE_MUTEX_FLAG_H
#define BENCH_BASELINE_MUTEX_FLAG_H

#include <stdbool.h>

typedef struct mf_flag mf_flag;

mf_flag *mf_new(void);
void mf_free(mf_flag *f);
/** Whether a stop was requested: lock, read, unlock. */
bool mf_should_stop(mf_flag *f);
/** Set the flag and wake every waiter (broadcast after the unlock). */
void mf_request_stop(mf_flag *f);
/** Sleep until the stop of the epoch the call started in is requested. */
void mf_wait_for_stop(mf_flag *f);
/** Reset the flag for the next round (a new epoch). */
void mf_clear_stop(mf_flag *f);

#endif
