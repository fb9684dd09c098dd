/* qf_test_park.h - tests: wait until another thread is asleep inside a
 * blocking call, by looking at what it is doing, not by sleeping.
 *
 * Linux shows the system call a thread is blocked in at
 * /proc/self/task/<tid>/syscall: its number and arguments. A thread parked
 * by qflow sleeps in FUTEX_WAIT on a word of its own waker (on its stack),
 * not on an internal lock of the object it waits on; callers pass that
 * object's address range to tell the two apart.
 */
#ifndef QF_TEST_PARK_H
#define QF_TEST_PARK_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "qf_time.h"

/* The caller's thread id, for another thread to watch. */
static inline int qft_tid(void)
{
    return (int)syscall(SYS_gettid);
}

/* 1: thread `tid` sleeps in a futex wait on a word outside
 * [skip, skip + skip_len); 0: not (yet); -1: /proc cannot tell. */
static inline int qft_parked_now(int tid, const void *skip, size_t skip_len)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    long nr;
    unsigned long addr, op;
    if (sscanf(buf, "%ld %lx %lx", &nr, &addr, &op) != 3 || nr != SYS_futex)
        return 0;
    unsigned cmd = (unsigned)op & 0x7f; /* without FUTEX_PRIVATE_FLAG etc. */
    if (cmd != 0 && cmd != 9)           /* FUTEX_WAIT, FUTEX_WAIT_BITSET */
        return 0;
    uintptr_t lo = (uintptr_t)skip;
    return addr >= lo && addr < lo + skip_len ? 0 : 1;
}

static inline void qft_nap(void)
{
    struct timespec ts = {0, 100000}; /* polling interval, not an ordering */
    nanosleep(&ts, NULL);
}

/* Wait until thread `tid` is seen parked twice in a row (see
 * qft_parked_now()), for at most timeout_ns or until *done (may be NULL)
 * becomes true. Returns 1 when seen parked, 0 on timeout or done, -1 when
 * /proc cannot tell: it then sleeps 200 ms instead, so the caller's
 * blocking path is probably, not certainly, exercised. */
static inline int qft_wait_parked(int tid, const void *skip, size_t skip_len,
                                  const _Atomic bool *done, int64_t timeout_ns)
{
    int64_t end = qf_now_ns() + timeout_ns;
    int streak = 0;
    while (qf_now_ns() < end && !(done && *done)) {
        int p = qft_parked_now(tid, skip, skip_len);
        if (p < 0) {
            struct timespec ts = {0, 200000000};
            nanosleep(&ts, NULL);
            return -1;
        }
        streak = p ? streak + 1 : 0;
        if (streak >= 2)
            return 1;
        qft_nap();
    }
    return 0;
}

/* The name (comm) of this process's thread whose /proc/self/task entry is
 * `entry`, without its newline, into comm[32]; false when it is gone. */
static inline bool qft_thread_comm(const char *entry, char comm[32])
{
    char path[300];
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", entry);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t k = fread(comm, 1, 31, f);
    fclose(f);
    comm[k] = 0;
    comm[strcspn(comm, "\n")] = 0;
    return true;
}

/* Wait until `n` threads whose names start with `prefix` (a runtime's
 * workers are "<name>-<index>") are all seen parked in a futex wait, twice
 * in a row: idle workers asleep. Returns 1 when seen, 0 on timeout, -1 when
 * /proc cannot tell. */
static inline int qft_wait_named_parked(const char *prefix, int n, int64_t timeout_ns)
{
    int64_t end = qf_now_ns() + timeout_ns;
    int streak = 0;
    while (qf_now_ns() < end) {
        DIR *d = opendir("/proc/self/task");
        if (!d)
            return -1;
        int named = 0, parked = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char comm[32];
            if (!qft_thread_comm(e->d_name, comm) || strncmp(comm, prefix, strlen(prefix)) != 0)
                continue;
            named++;
            int p = qft_parked_now(atoi(e->d_name), NULL, 0);
            if (p < 0) {
                closedir(d);
                return -1;
            }
            parked += p;
        }
        closedir(d);
        streak = named == n && parked == n ? streak + 1 : 0;
        if (streak >= 2)
            return 1;
        qft_nap();
    }
    return 0;
}

#endif
