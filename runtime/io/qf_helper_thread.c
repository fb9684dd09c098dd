/* qf_helper_thread.c - the threads io/ starts for itself (the fd watcher,
 * qf_fdwait.c; the read-ahead helper, qf_readahead.c): see
 * qf__helper_thread_start() in qf_reader-impl.h. */
#include <pthread.h>
#include <signal.h>

#include "qf_reader-impl.h"

int qf__helper_thread_start(void *(*fn)(void *), void *arg, const char *name)
{
    /* A helper takes no signals: a program's handlers (SIGTERM's, say) must
     * run on its own threads, never on one of these. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_t t;
    int err = pthread_create(&t, &at, fn, arg);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!err)
        pthread_setname_np(t, name);
    return err;
}
