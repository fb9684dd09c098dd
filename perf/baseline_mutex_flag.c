/* baseline_mutex_flag.c - a mutex-protected stop flag with a condition
 * variable (see baseline_mutex_flag.h).
 *
 * The epoch lets a waiter tell "the stop I waited for came and was cleared
 * again" from "no stop yet", as qf_coord_wait_for_stop() does, so a round
 * that clears the flag right after a stop cannot strand a slow waiter. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "baseline_mutex_flag.h"

struct mf_flag {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    uint64_t epoch;
};

mf_flag *mf_new(void)
{
    mf_flag *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    return f;
}

void mf_free(mf_flag *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

bool mf_should_stop(mf_flag *f)
{
    pthread_mutex_lock(&f->mu);
    bool stop = f->stop;
    pthread_mutex_unlock(&f->mu);
    return stop;
}

void mf_request_stop(mf_flag *f)
{
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_mutex_unlock(&f->mu);
    /* After the unlock: woken waiters do not run straight into a held lock. */
    pthread_cond_broadcast(&f->cv);
}

void mf_wait_for_stop(mf_flag *f)
{
    pthread_mutex_lock(&f->mu);
    uint64_t epoch = f->epoch;
    while (!f->stop && f->epoch == epoch)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void mf_clear_stop(mf_flag *f)
{
    pthread_mutex_lock(&f->mu);
    f->stop = false;
    f->epoch++;
    pthread_mutex_unlock(&f->mu);
}
