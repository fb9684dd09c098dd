/* machine_c2c.c - how long a cache line takes to go from one CPU to the
 * other right now, measured before every round of a bench (bench_run.c).
 *
 * Why. On the shared 2-vCPU VMs this project is measured on, the one-way
 * core-to-core latency is not a constant of the machine: in one hour it
 * read 30-42 ns for some seconds and 166-187 ns for the next, and back
 * (the hypervisor placing the two vCPUs on cores that share a cache, or
 * not). Every hand-off between threads moves lines between the CPUs, so a
 * queue's items/s moves with it (queue.tput.tasks.p4c4 ran 19-21 M items/s
 * in some repetitions and 5-8 M in others of the same process), and a
 * ratio between two implementations that move different numbers of lines
 * per item moves too. Recorded beside every repetition, the figure says
 * which machine a number was measured on.
 *
 * How. Two threads, pinned to the first two CPUs this process may use,
 * pass a counter back and forth on one line (no pause in the spin: a
 * pause would be timed too); the result is the round trip time over two.
 * Bounded: at most PROBE_ROUNDS round trips or PROBE_MAX_NS of wall time,
 * whichever comes first, so a probe on a loaded machine, where a pinned
 * thread may wait for its CPU, costs milliseconds and reads high (a loaded
 * machine is also what it should say). NAN when the process may use fewer
 * than two CPUs, the threads cannot be pinned or started, or a round trip
 * takes over a second. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bench_run.h"

#define PROBE_ROUNDS 20000
#define PROBE_MAX_NS 20000000 /* 20 ms */
#define PROBE_GIVE_UP_NS 1000000000u
#define PROBE_STOP INT64_MIN

typedef struct probe {
    alignas(128) _Atomic int64_t turn; /* odd: the answerer's; even: the asker's */
    int cpu;
    alignas(128) _Atomic int ready;
} probe;

static bool pin_to(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof(s), &s) == 0;
}

/* The answerer: turns an odd value v into v + 1 until told to stop. */
static void *answer(void *arg)
{
    probe *p = arg;
    atomic_store(&p->ready, pin_to(p->cpu) ? 1 : -1);
    for (;;) {
        int64_t v = atomic_load_explicit(&p->turn, memory_order_acquire);
        if (v == PROBE_STOP)
            return NULL;
        if (v & 1)
            atomic_store_explicit(&p->turn, v + 1, memory_order_release);
    }
}

/* The first two CPUs in the affinity mask, or false. */
static bool two_cpus(int *a, int *b)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof(s), &s) != 0)
        return false;
    int found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++) {
        if (CPU_ISSET(c, &s))
            *(found++ ? b : a) = c;
    }
    return found == 2;
}

double bench_core_to_core_ns(void)
{
    int ca, cb;
    if (!two_cpus(&ca, &cb))
        return NAN;
    cpu_set_t saved;
    if (pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) != 0)
        return NAN;
    static probe p; /* one probe at a time: the harness runs them in turn */
    atomic_store(&p.turn, 0);
    atomic_store(&p.ready, 0);
    p.cpu = cb;
    pthread_t t;
    if (pthread_create(&t, NULL, answer, &p) != 0)
        return NAN;
    bool pinned = pin_to(ca);
    while (atomic_load(&p.ready) == 0)
        sched_yield();
    double ns = NAN;
    if (pinned && atomic_load(&p.ready) == 1) {
        uint64_t t0 = bench_now_ns(), t1 = t0;
        int64_t rounds = 0;
        while (rounds < PROBE_ROUNDS) {
            atomic_store_explicit(&p.turn, 2 * rounds + 1, memory_order_release);
            unsigned spins = 0;
            while (atomic_load_explicit(&p.turn, memory_order_acquire) != 2 * rounds + 2) {
                /* An answerer that never runs (its CPU taken away) must
                 * not hang the run: give up after a second. */
                if (++spins % 4096 == 0 && bench_now_ns() - t0 > PROBE_GIVE_UP_NS)
                    break;
            }
            if (atomic_load_explicit(&p.turn, memory_order_acquire) != 2 * rounds + 2) {
                rounds = 0;
                break;
            }
            rounds++;
            /* The clock every 256 rounds: cheap next to the round trips. */
            if ((rounds & 255) == 0 && (t1 = bench_now_ns()) - t0 >= PROBE_MAX_NS)
                break;
        }
        t1 = bench_now_ns();
        if (rounds > 0)
            ns = (double)(t1 - t0) / (double)rounds / 2;
    }
    atomic_store_explicit(&p.turn, PROBE_STOP, memory_order_release);
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    return ns;
}
