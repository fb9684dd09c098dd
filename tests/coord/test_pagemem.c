/* test_pagemem.c - large buffers on huge pages (coord/qf_pagemem-impl.h):
 * alignment, no two live buffers overlap, a freed buffer is the next one of
 * its size (warm, no fault), the warm bound gives pages back and the cold
 * buffers still work, the chunks carry the huge-page advice, bad arguments
 * get NULL, threads share it without losing or mixing up a buffer, and a
 * fork while a thread is inside leaves the child a free lock.
 * The allocator is one per process and the ThreadSanitizer build runs the
 * tests in one process, so a test may find buffers left by another: the
 * counts are checked as differences. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qf_pagemem-impl.h"
#include "qf_test_fork.h"

#if defined(__SANITIZE_ADDRESS__)
#define PLAIN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PLAIN 1
#endif
#endif
/* Sanitizers make every mapping and every access slower: fewer rounds. */
#if defined(PLAIN) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static void fill(unsigned char *p, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i += 512)
        p[i] = (unsigned char)(tag + i / 512);
    p[n - 1] = (unsigned char)tag;
}

static bool intact(const unsigned char *p, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i += 512)
        if (p[i] != (unsigned char)(tag + i / 512))
            return false;
    return p[n - 1] == (unsigned char)tag;
}

Test(pagemem, buffers_are_aligned_and_do_not_overlap)
{
    static const size_t sizes[] = {65536, 400 << 10, 4096, 1 << 20, 3 << 20, 100000, 70000};
    static const size_t aligns[] = {128, 16384, 8, 4096, 1 << 21, 64, 2048};
    enum { N = 7, ROUNDS = 6 };
    unsigned char *p[ROUNDS][N];
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < N; i++) {
            p[r][i] = qf__pagemem_alloc(sizes[i], aligns[i]);
            cr_assert_not_null(p[r][i], "size %zu align %zu", sizes[i], aligns[i]);
            cr_assert_eq((uintptr_t)p[r][i] % aligns[i], 0, "size %zu: %p is not aligned to %zu",
                         sizes[i], (void *)p[r][i], aligns[i]);
            fill(p[r][i], sizes[i], (unsigned)(r * N + i));
        }
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < N; i++) {
            cr_assert(intact(p[r][i], sizes[i], (unsigned)(r * N + i)),
                      "buffer %d of round %d was written by another", i, r);
            qf__pagemem_free(p[r][i], sizes[i], aligns[i]);
        }
}

Test(pagemem, a_freed_buffer_is_the_next_of_its_size_and_alignment)
{
#ifdef PLAIN
    cr_skip_test("AddressSanitizer build: buffers come from aligned_alloc()");
#endif
    unsigned char *a = qf__pagemem_alloc(400 << 10, 16384);
    unsigned char *own = qf__pagemem_alloc(3 << 20, 128);
    cr_assert(a && own);
    fill(a, 400 << 10, 1);
    qf__pagemem_stats st0, st;
    qf__pagemem_get_stats(&st0);
    if (st0.warm_bytes + (400 << 10) + (3 << 20) > QF__PAGEMEM_WARM_MAX) {
        /* Another test of this process filled the warm bound: these would
         * go cold (behind any warm one of their size) or be unmapped. */
        qf__pagemem_free(a, 400 << 10, 16384);
        qf__pagemem_free(own, 3 << 20, 128);
        cr_skip_test("the warm bound is full");
    }
    qf__pagemem_free(a, 400 << 10, 16384);
    qf__pagemem_free(own, 3 << 20, 128);
    qf__pagemem_get_stats(&st);
    cr_expect_eq(st.warm_bytes - st0.warm_bytes, (size_t)(400 << 10) + (3 << 20));
    /* Another size or alignment does not take it. */
    unsigned char *b = qf__pagemem_alloc(400 << 10, 128);
    cr_assert_neq(b, a);
    cr_expect_eq(qf__pagemem_alloc(400 << 10, 16384), a);
    cr_expect_eq(qf__pagemem_alloc(3 << 20, 128), own);
    /* Warm: its pages were kept (the link took its first 8 bytes only). */
    for (size_t i = 512; i < (400 << 10); i += 512)
        cr_assert_eq(a[i], (unsigned char)(1 + i / 512), "the reused buffer lost byte %zu", i);
    qf__pagemem_get_stats(&st);
    cr_expect_eq(st.warm_bytes + st.cold_bytes, st0.warm_bytes + st0.cold_bytes);
    qf__pagemem_free(a, 400 << 10, 16384);
    qf__pagemem_free(b, 400 << 10, 128);
    qf__pagemem_free(own, 3 << 20, 128);
}

Test(pagemem, past_the_warm_bound_pages_go_back_and_cold_buffers_still_work)
{
#ifdef PLAIN
    cr_skip_test("AddressSanitizer build: buffers come from aligned_alloc()");
#endif
    enum { SZ = 512 << 10 };
    size_t n = QF__PAGEMEM_WARM_MAX / SZ + 8;
    unsigned char **p = calloc(n, sizeof(*p));
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(p[i] = qf__pagemem_alloc(SZ, 4096));
        fill(p[i], SZ, (unsigned)i);
    }
    qf__pagemem_stats s1, st;
    qf__pagemem_get_stats(&s1);
    for (size_t i = 0; i < n; i++)
        qf__pagemem_free(p[i], SZ, 4096);
    qf__pagemem_get_stats(&st);
    cr_expect_leq(st.warm_bytes, QF__PAGEMEM_WARM_MAX);
    cr_expect_eq(st.warm_bytes + st.cold_bytes - s1.warm_bytes - s1.cold_bytes, n * SZ);
    cr_expect_geq(st.cold_bytes - s1.cold_bytes, 8 * (size_t)SZ);
    /* All of them again, warm first, then cold (zero-filled past their
     * first page, which holds the list's link): writable as before. */
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(p[i] = qf__pagemem_alloc(SZ, 4096));
        fill(p[i], SZ, (unsigned)(i + 7));
    }
    for (size_t i = 0; i < n; i++) {
        cr_assert(intact(p[i], SZ, (unsigned)(i + 7)), "buffer %zu", i);
        qf__pagemem_free(p[i], SZ, 4096);
    }
    qf__pagemem_get_stats(&st);
    cr_expect_eq(st.warm_bytes + st.cold_bytes - s1.warm_bytes - s1.cold_bytes, n * SZ);
    free(p);
}

/* The VmFlags line of the mapping holding p, from /proc/self/smaps. */
static bool mapping_flags(const void *p, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return false;
    char line[512];
    bool in = false, found = false;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(out, cap, "%s", line + 8);
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

Test(pagemem, chunks_are_advised_as_huge_pages)
{
#ifdef PLAIN
    cr_skip_test("AddressSanitizer build: buffers come from aligned_alloc()");
#endif
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!thp)
        cr_skip_test("no transparent huge pages in this kernel");
    char mode[128] = "";
    if (!fgets(mode, sizeof(mode), thp))
        mode[0] = '\0';
    fclose(thp);
    if (strstr(mode, "[never]"))
        cr_skip_test("transparent huge pages are off");
    void *small = qf__pagemem_alloc(64 << 10, 4096);
    void *own = qf__pagemem_alloc(5 << 20, 4096);
    cr_assert(small && own);
    cr_expect_eq((uintptr_t)own % QF__PAGEMEM_CHUNK, 0);
    char flags[512];
    cr_assert(mapping_flags(small, flags, sizeof(flags)), "no mapping for %p in smaps", small);
    cr_expect(strstr(flags, " hg") != NULL, "a chunk without MADV_HUGEPAGE: VmFlags%s", flags);
    cr_assert(mapping_flags(own, flags, sizeof(flags)));
    cr_expect(strstr(flags, " hg") != NULL, "an own mapping without MADV_HUGEPAGE: VmFlags%s",
              flags);
    qf__pagemem_free(small, 64 << 10, 4096);
    qf__pagemem_free(own, 5 << 20, 4096);
}

Test(pagemem, bad_arguments_get_null_and_null_frees_nothing)
{
    cr_expect_null(qf__pagemem_alloc(4096, 3000), "an alignment that is not a power of two");
    cr_expect_null(qf__pagemem_alloc(4096, QF__PAGEMEM_CHUNK * 2), "an alignment past a chunk");
    cr_expect_null(qf__pagemem_alloc(SIZE_MAX, 4096));
    cr_expect_null(qf__pagemem_alloc(SIZE_MAX - 4095, 4096));
    void *p = qf__pagemem_alloc(0, 1);
    cr_assert_not_null(p, "zero bytes is one page");
    ((char *)p)[4095] = 1;
    qf__pagemem_free(p, 0, 1);
    qf__pagemem_free(NULL, 4096, 4096);
}

#ifdef SANITIZED
enum { THREADS = 8, ROUNDS = 300, HELD = 4 };
#else
enum { THREADS = 8, ROUNDS = 3000, HELD = 4 };
#endif

static void *churn(void *arg)
{
    unsigned tag = (unsigned)(uintptr_t)arg;
    uint64_t s = 0x9e3779b97f4a7c15ull * (tag + 1);
    unsigned char *held[HELD] = {0};
    size_t sz[HELD] = {0}, al[HELD] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % HELD;
        if (held[k]) {
            if (!intact(held[k], sz[k], tag * 31 + (unsigned)k))
                return "a buffer was written by another thread";
            qf__pagemem_free(held[k], sz[k], al[k]);
        }
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        /* A few sizes, so that free lists are shared; now and then one
         * with a mapping of its own. */
        static const size_t sizes[] = {64 << 10, 96 << 10, 400 << 10, 200 << 10, (1 << 20) + 4096};
        sz[k] = sizes[s % 5];
        al[k] = (size_t)1 << (7 + (s >> 8) % 8);
        held[k] = qf__pagemem_alloc(sz[k], al[k]);
        if (!held[k])
            return "out of memory";
        if ((uintptr_t)held[k] % al[k])
            return "misaligned";
        fill(held[k], sz[k], tag * 31 + (unsigned)k);
    }
    for (int k = 0; k < HELD; k++)
        qf__pagemem_free(held[k], sz[k], al[k]);
    return NULL;
}

Test(pagemem, threads_share_it_without_losing_or_mixing_up_a_buffer, .timeout = 120)
{
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        cr_expect_null(ret, "thread %d: %s", i, ret ? (char *)ret : "");
    }
}

static void *churn_until_told(void *arg)
{
    (void)arg;
    while (atomic_load(&qft_churning)) {
        void *p = qf__pagemem_alloc(96 << 10, 4096);
        if (p)
            ((char *)p)[0] = 1;
        qf__pagemem_free(p, 96 << 10, 4096);
    }
    return NULL;
}

static int child_allocates(void)
{
    void *p = qf__pagemem_alloc(96 << 10, 4096);
    qf__pagemem_free(p, 96 << 10, 4096);
    return p ? 0 : 3;
}

/* A fork while another thread is inside the allocator: the child's copy of
 * the lock must be free (qf_test_fork.h). */
Test(pagemem, a_fork_while_another_thread_allocates_leaves_the_child_a_free_lock, .timeout = 120)
{
#ifdef PLAIN
    /* There the buffers are the sanitizer's allocator's, whose own locks
     * a fork in the middle of an allocation leaves held in the child. */
    cr_skip_test("AddressSanitizer build: buffers come from aligned_alloc()");
#endif
    qft_forks_while_churning(1, churn_until_told, 50, child_allocates);
}

/* Scratch arrays: zeroed whatever they held before, from the buffers above
 * at QF__PAGEMEM_MIN bytes and more (so a second call of the same size
 * gets the same warm buffer back), from calloc() below; an n * size that
 * overflows is refused. */
Test(pagemem, scratch_arrays_are_zeroed_and_the_large_ones_come_back_warm)
{
    size_t big = QF__PAGEMEM_MIN / sizeof(void *) + 3, small = 100;
    void **a = qf__scratch_alloc(big, sizeof(void *));
    cr_assert_not_null(a);
    for (size_t i = 0; i < big; i++)
        cr_assert_null(a[i], "element %zu not zeroed", i);
    memset(a, 0xab, big * sizeof(void *));
    qf__scratch_free(a, big, sizeof(void *));
    void **b = qf__scratch_alloc(big, sizeof(void *));
    cr_assert_not_null(b);
    for (size_t i = 0; i < big; i++)
        cr_assert_null(b[i], "element %zu of a reused buffer not zeroed", i);
#ifndef PLAIN /* AddressSanitizer builds: aligned_alloc(), no reuse promised */
    if (sysconf(_SC_PAGESIZE) == 4096) /* else malloc()'s too */
        cr_expect_eq(b, a, "the same size came back as the same buffer");
#endif
    qf__scratch_free(b, big, sizeof(void *));

    char *s = qf__scratch_alloc(small, 3);
    cr_assert_not_null(s);
    for (size_t i = 0; i < small * 3; i++)
        cr_assert_eq(s[i], 0);
    qf__scratch_free(s, small, 3);

    cr_expect_null(qf__scratch_alloc(SIZE_MAX / 2, 4), "an overflowing size is refused");
    qf__scratch_free(NULL, big, sizeof(void *)); /* nothing */
    qf__scratch_free(NULL, 1, 1);
}
