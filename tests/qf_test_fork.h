/* qf_test_fork.h - tests: fork() while other threads are inside an
 * allocator whose lock a fork could leave held in the child.
 *
 * The child has only the forking thread; a lock some other thread held at
 * the fork would stay held there forever. Each child runs a check under a
 * 10 s alarm, so such a hang ends the child with SIGALRM (signal 14), a
 * failure of the test rather than a hang of the suite.
 */
#ifndef QF_TEST_FORK_H
#define QF_TEST_FORK_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#define QFT_FORK_MAX_THREADS 8

/* Set while the churning threads must go on; their loop reads it. */
static atomic_bool qft_churning;

/* Start `threads` threads running `churn` (which loops while qft_churning
 * is set), fork `forks` times meanwhile, and assert that every child's
 * `child()` returned 0 within its alarm. The threads are stopped and joined
 * before it returns. */
static inline void qft_forks_while_churning(int threads, void *(*churn)(void *), int forks,
                                            int (*child)(void))
{
    cr_assert(threads > 0 && threads <= QFT_FORK_MAX_THREADS);
    pthread_t t[QFT_FORK_MAX_THREADS];
    atomic_store(&qft_churning, true);
    for (int i = 0; i < threads; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn, NULL), 0);
    for (int f = 0; f < forks; f++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            alarm(10);
            _exit(child());
        }
        int st = 0;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "fork %d: child %s %d (a signal 14 is its alarm: a lock was left held)", f,
                  WIFEXITED(st) ? "exit" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
    atomic_store(&qft_churning, false);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
}

#endif
