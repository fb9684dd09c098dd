/* test_member_mem.c - the cache of member records' memory
 * (coord/qf_member_mem-impl.h): what waits is reused zeroed, the cap
 * holds, large blocks bypass it, and threads share it without losing or
 * mixing up a block. The cache is one per process, so every test starts
 * by emptying it. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qf_member_mem-impl.h"
#include "qf_test_fork.h"

#include "qf_test_asan.h"

#if QFT_ASAN
#define CACHE_OFF 1
#endif

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

Test(member_mem, a_block_comes_back_zeroed)
{
    qf__member_mem_release();
    uint8_t c1, c2;
    unsigned char *p = qf__member_mem_alloc(500, &c1);
    cr_assert_not_null(p);
    cr_expect(all_zero(p, 500));
    memset(p, 0xab, 500);
    qf__member_mem_free(p, c1);
    unsigned char *q = qf__member_mem_alloc(470, &c2); /* the same class */
    cr_assert_not_null(q);
    cr_expect_eq(c1, c2);
    cr_expect(all_zero(q, 470), "a reused block is zeroed like calloc's");
#ifndef CACHE_OFF
    cr_expect_eq(q, p, "the freed block is the lowest free one of its class");
#endif
    qf__member_mem_free(q, c2);
    qf__member_mem_release();
    cr_expect_eq(qf__member_mem_idle_bytes(), 0);
}

/* Blocks of a class come back lowest first: a batch made after the last
 * one ended lies in address order, as fresh memory would (the workers run
 * a batch in order; scattered, each record missed the cache). */
Test(member_mem, a_batch_after_an_ended_one_lies_in_address_order)
{
    enum { N = 2000 };
    qf__member_mem_release();
    void *ps[N];
    uint8_t cs[N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            ps[i] = qf__member_mem_alloc(570, &cs[i]);
            cr_assert_not_null(ps[i]);
        }
#ifndef CACHE_OFF
        size_t ascending = 0;
        for (int i = 1; i < N; i++)
            ascending += (uintptr_t)ps[i] > (uintptr_t)ps[i - 1];
        /* Within a slab every step goes up; a step to another slab may not. */
        cr_expect_geq(ascending, N - 1 - N / 100, "round %d: %zu of %d steps up", round, ascending,
                      N - 1);
#endif
        /* Freed in a scrambled order, as the tasks of a busy run end. */
        for (int i = 0; i < N; i++) {
            int j = (int)(((unsigned)i * 7919u) % N);
            qf__member_mem_free(ps[j], cs[j]);
        }
    }
    qf__member_mem_release();
}

Test(member_mem, large_blocks_are_not_kept)
{
    qf__member_mem_release();
    uint8_t c;
    unsigned char *p = qf__member_mem_alloc(4096, &c);
    cr_assert_not_null(p);
    cr_expect_eq(c, 0, "over 2 KiB: calloc and free");
    cr_expect(all_zero(p, 4096));
    qf__member_mem_free(p, c);
    cr_expect_eq(qf__member_mem_idle_bytes(), 0);
    qf__member_mem_free(NULL, 3); /* nothing */
}

Test(member_mem, the_cap_holds)
{
    qf__member_mem_release();
    /* A quarter more than the cap in 1 KiB blocks, all out at once, then
     * all freed: the empty slabs kept stay within the cap, the rest went
     * to free(). */
    size_t n = QF__MEMBER_CACHE_BYTES / 1024 + QF__MEMBER_CACHE_BYTES / 4096;
    void **ps = malloc(n * sizeof(*ps));
    uint8_t *cs = malloc(n);
    cr_assert(ps && cs);
    for (size_t i = 0; i < n; i++) {
        ps[i] = qf__member_mem_alloc(1000, &cs[i]);
        cr_assert_not_null(ps[i]);
    }
    for (size_t i = 0; i < n; i++)
        qf__member_mem_free(ps[i], cs[i]);
    size_t idle = qf__member_mem_idle_bytes();
    cr_expect_leq(idle, QF__MEMBER_CACHE_BYTES);
#ifndef CACHE_OFF
    cr_expect_geq(idle, QF__MEMBER_CACHE_BYTES / 2, "idle %zu", idle);
#else
    cr_expect_eq(idle, 0);
#endif
    qf__member_mem_release();
    cr_expect_eq(qf__member_mem_idle_bytes(), 0);
    free(ps);
    free(cs);
}

/* Each thread takes blocks of several sizes, stamps them with its own
 * pattern, checks the stamp is intact, and frees them, so blocks pass
 * between threads through the cache all the time. */
#define THREADS 8
#define ROUNDS 4000
#define HELD 16

static void *churn(void *arg)
{
    unsigned char id = (unsigned char)(uintptr_t)arg;
    void *held[HELD] = {0};
    uint8_t cls[HELD] = {0};
    size_t sizes[HELD] = {0};
    unsigned seed = id * 2654435761u + 1;
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % HELD;
        if (held[k]) {
            const unsigned char *p = held[k];
            for (size_t i = 0; i < sizes[k]; i++)
                if (p[i] != id)
                    return (void *)1; /* someone else wrote into our block */
            qf__member_mem_free(held[k], cls[k]);
        }
        seed = seed * 1103515245u + 12345u;
        sizes[k] = 16 + (seed >> 16) % 2000;
        unsigned char *p = qf__member_mem_alloc(sizes[k], &cls[k]);
        if (!p || !all_zero(p, sizes[k]))
            return (void *)2;
        memset(p, id, sizes[k]);
        held[k] = p;
    }
    for (int k = 0; k < HELD; k++)
        qf__member_mem_free(held[k], cls[k]);
    return NULL;
}

Test(member_mem, threads_share_it_without_mixing_blocks)
{
    qf__member_mem_release();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        cr_expect_null(rc, "thread %d: %s", i,
                       rc == (void *)1 ? "a block held was written by another thread"
                                       : "a block came back not zeroed");
    }
    cr_expect_leq(qf__member_mem_idle_bytes(), QF__MEMBER_CACHE_BYTES);
    qf__member_mem_release();
    cr_expect_eq(qf__member_mem_idle_bytes(), 0);
}

/* fork() while other threads take and free blocks: the child, which has
 * only the forking thread, can still allocate (no lock is left held by a
 * thread that does not exist there; qf_test_fork.h). */
static void *churn_until_stopped(void *arg)
{
    (void)arg;
    while (atomic_load(&qft_churning)) {
        uint8_t c;
        void *p = qf__member_mem_alloc(600, &c);
        qf__member_mem_free(p, c);
    }
    return NULL;
}

static int child_allocates(void)
{
    for (int i = 0; i < 1000; i++) {
        uint8_t c;
        void *p = qf__member_mem_alloc(600, &c);
        if (!p)
            return 2;
        qf__member_mem_free(p, c);
    }
    return 0;
}

Test(member_mem, a_child_forked_meanwhile_can_allocate, .timeout = 60)
{
#ifdef CACHE_OFF
    /* Every call is AddressSanitizer's malloc then, which is not ours to
     * test (its child can hang the same way). */
    cr_skip_test("AddressSanitizer build: the slabs are off");
#endif
    qft_forks_while_churning(4, churn_until_stopped, 50, child_allocates);
}

/* The same while the churning threads make slabs come from the page memory
 * and go back to it (a class lock held while qf_pagemem.c's lock is taken):
 * the fork handlers must take the locks in that order too, or a fork
 * that took the page memory's lock first waits for a class lock whose
 * holder waits for it. */
static void *churn_slabs_until_stopped(void *arg)
{
    (void)arg;
    enum { N = 900 }; /* 640-byte blocks: three slabs */
    void *p[N];
    uint8_t c[N];
    while (atomic_load(&qft_churning)) {
        for (int i = 0; i < N; i++)
            p[i] = qf__member_mem_alloc(600, &c[i]);
        for (int i = 0; i < N; i++)
            qf__member_mem_free(p[i], c[i]);
        qf__member_mem_release();
    }
    return NULL;
}

Test(member_mem, a_child_forked_while_slabs_come_and_go_can_allocate, .timeout = 120)
{
#ifdef CACHE_OFF
    cr_skip_test("AddressSanitizer build: the slabs are off");
#endif
    qft_forks_while_churning(3, churn_slabs_until_stopped, 100, child_allocates);
}
