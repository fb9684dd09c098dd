/* test_blockcache.c - the block caches' large classes (white-box:
 * queues/tensor/qf_blockcache-impl.h).
 *
 * What must hold: a request above the small classes gets a block of its
 * power-of-two class, whole and writable; a thread's next allocation of
 * the same class gets back the block it freed last (the point: pages
 * already there), never a block of another class; each thread keeps at
 * most QF__LARGE_KEEP per class and QF__LARGE_RETAIN bytes in all, and
 * gives the rest to free(); requests above QF__LARGE_MAX go to malloc()
 * (class 0). AddressSanitizer builds bypass the caches (class 0 for
 * everything), and there the reuse checks are skipped. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qf_blockcache-impl.h"
#include "qf_test_asan.h"

#define CACHE_OFF QFT_ASAN

static size_t class_bytes(uint8_t cls)
{
    return (size_t)1 << (QF__LARGE_MIN_SHIFT + (cls - QF__BLOCK_CLASSES - 1));
}

Test(blockcache, classes_cover_every_size)
{
    if (CACHE_OFF) {
        cr_assert_eq(qf__block_class(100000), 0);
        return;
    }
    cr_assert_eq(qf__block_class(512), QF__BLOCK_CLASSES, "512 bytes is the last small class");
    cr_assert_eq(qf__block_class(513), QF__BLOCK_CLASSES + 1);
    cr_assert_eq(qf__block_class(1024), QF__BLOCK_CLASSES + 1);
    cr_assert_eq(qf__block_class(1025), QF__BLOCK_CLASSES + 2);
    cr_assert_eq(qf__block_class(QF__LARGE_MAX), QF__BLOCK_CLASSES + QF__LARGE_CLASSES);
    cr_assert_eq(qf__block_class(QF__LARGE_MAX + 1), 0, "above the largest class: malloc()");
    for (size_t b = 513; b <= QF__LARGE_MAX; b = b * 3 / 2) {
        uint8_t cls = qf__block_class(b);
        cr_assert_gt(cls, QF__BLOCK_CLASSES);
        cr_assert_geq(class_bytes(cls), b, "%zu bytes fit their class", b);
        cr_assert_lt(class_bytes(cls) / 2, b, "%zu bytes: the smallest class that fits", b);
    }
}

Test(blockcache, a_freed_large_block_comes_back_to_its_thread)
{
    uint8_t cls;
    char *a = qf__block_alloc(96 * 1024, &cls);
    cr_assert_not_null(a);
    memset(a, 0xab, 96 * 1024); /* the whole request is writable */
    if (CACHE_OFF) {
        cr_assert_eq(cls, 0);
        qf__block_free(a, cls);
        return;
    }
    cr_assert_eq(cls, qf__block_class(96 * 1024));
    memset(a, 0xcd, class_bytes(cls)); /* and the whole class */
    qf__block_free(a, cls);
    uint8_t cls2;
    char *b = qf__block_alloc(100 * 1024, &cls2); /* same class, other size */
    cr_assert_eq(cls2, cls);
    cr_assert_eq(b, a, "the block freed last is reused");
    /* Another class does not take it. */
    uint8_t cls3;
    qf__block_free(b, cls2);
    char *c = qf__block_alloc(300 * 1024, &cls3);
    cr_assert_neq(cls3, cls);
    cr_assert_neq(c, a);
    qf__block_free(c, cls3);
    char *d = qf__block_alloc(128 * 1024, &cls2);
    cr_assert_eq(d, a);
    qf__block_free(d, cls2);
}

Test(blockcache, a_thread_keeps_a_bounded_number_per_class)
{
    if (CACHE_OFF)
        return;
    size_t bytes = 8 * 1024;
    uint8_t cls = qf__block_class(bytes);
    /* Whatever an earlier test left in this thread's stack of the class
     * (the in-process runner of the ThreadSanitizer build runs them all
     * on one thread) is taken out first, and given back at the end. */
    char *before[QF__LARGE_KEEP];
    for (int i = 0; i < QF__LARGE_KEEP; i++)
        before[i] = qf__block_alloc(bytes, &cls);
    enum { N = QF__LARGE_KEEP + 3 };
    char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = qf__block_alloc(bytes, &cls);
        cr_assert_not_null(blocks[i]);
        memset(blocks[i], i, bytes);
    }
    for (int i = 0; i < N; i++)
        qf__block_free(blocks[i], cls);
    /* The first QF__LARGE_KEEP freed were kept, and come back last freed
     * first; the later ones went to free(). */
    char *again[QF__LARGE_KEEP];
    for (int i = 0; i < QF__LARGE_KEEP; i++) {
        uint8_t c;
        again[i] = qf__block_alloc(bytes, &c);
        cr_assert_eq(c, cls);
        cr_assert_eq(again[i], blocks[QF__LARGE_KEEP - 1 - i], "allocation %d after the frees", i);
    }
    for (int i = 0; i < QF__LARGE_KEEP; i++)
        qf__block_free(again[i], cls);
    for (int i = 0; i < QF__LARGE_KEEP; i++)
        qf__block_free(before[i], cls);
}

Test(blockcache, a_thread_retains_a_bounded_number_of_bytes)
{
    if (CACHE_OFF)
        return;
    /* The largest class: at most QF__LARGE_RETAIN / QF__LARGE_MAX of them
     * fit the thread's retained bytes; the others are freed at once. A
     * block kept comes back with what was written into it; one from
     * malloc() of this size is a fresh mapping, all zeros. Only the first
     * byte of each is touched (the pages are mapped lazily). */
    size_t fit = QF__LARGE_RETAIN / QF__LARGE_MAX;
    if (fit > QF__LARGE_KEEP)
        fit = QF__LARGE_KEEP;
    size_t n = fit + 1;
    char *blocks[QF__LARGE_KEEP + 1];
    uint8_t cls = 0;
    for (size_t i = 0; i < n; i++) {
        blocks[i] = qf__block_alloc(QF__LARGE_MAX, &cls);
        cr_assert_not_null(blocks[i]);
        blocks[i][0] = 0x5a;
    }
    for (size_t i = 0; i < n; i++)
        qf__block_free(blocks[i], cls);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c;
        blocks[i] = qf__block_alloc(QF__LARGE_MAX, &c);
        cr_assert_not_null(blocks[i]);
        kept += blocks[i][0] == 0x5a;
        blocks[i][0] = 0;
    }
    cr_assert_leq(kept, fit, "at most %zu blocks of %zu bytes kept, %zu were", fit,
                  (size_t)QF__LARGE_MAX, kept);
    for (size_t i = 0; i < n; i++)
        qf__block_free(blocks[i], cls);
}

/* Blocks made on one thread and freed on another stay with the freeing
 * thread; a thread's cache is handed to free() when it exits (checked for
 * leaks by the LeakSanitizer build's run of the same test). */
static void *free_on_this_thread(void *arg)
{
    char **blocks = arg;
    for (int i = 0; i < QF__LARGE_KEEP; i++)
        qf__block_free(blocks[i], qf__block_class(64 * 1024));
    uint8_t c;
    char *p = qf__block_alloc(64 * 1024, &c);
    bool reused = false;
    for (int i = 0; i < QF__LARGE_KEEP; i++)
        reused |= p == blocks[i];
    qf__block_free(p, c);
    return (void *)(uintptr_t)reused;
}

Test(blockcache, blocks_freed_on_another_thread_serve_that_thread)
{
    char *blocks[QF__LARGE_KEEP];
    uint8_t cls = 0;
    for (int i = 0; i < QF__LARGE_KEEP; i++) {
        blocks[i] = qf__block_alloc(64 * 1024, &cls);
        cr_assert_not_null(blocks[i]);
        memset(blocks[i], i, 64 * 1024);
    }
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, free_on_this_thread, blocks), 0);
    void *ret;
    cr_assert_eq(pthread_join(th, &ret), 0);
    if (!CACHE_OFF) /* with the caches off, whatever malloc() does */
        cr_assert_eq((uintptr_t)ret, 1, "the freeing thread's next block is one it freed");
}

/* The stash, on a thread of its own (a new cache, registered by its first
 * allocation or free): up to QF__STASH_KEEP blocks, handed back last in
 * first out and only to a pop of their class; what is left goes back to the block lists when the
 * thread exits (the process's allocator sees every block again: a run under valgrind reports none
 * lost). */
static void *stash_on_this_thread(void *arg)
{
    (void)arg;
    uint8_t cls;
    void *first = qf__block_alloc(100, &cls);
    qf__block_free(first, cls);
    if (qf__block_stash_pop(cls))
        return (void *)(uintptr_t)1; /* a new thread's stash is empty */
    void *kept[QF__STASH_KEEP + 1];
    for (int i = 0; i <= QF__STASH_KEEP; i++)
        kept[i] = qf__block_alloc(100, &cls);
    for (int i = 0; i < QF__STASH_KEEP; i++)
        if (!qf__block_stash_push(kept[i], cls))
            return (void *)(uintptr_t)2;
    if (qf__block_stash_push(kept[QF__STASH_KEEP], cls))
        return (void *)(uintptr_t)3; /* full */
    qf__block_free(kept[QF__STASH_KEEP], cls);
    if (qf__block_stash_pop((uint8_t)(cls + 1)))
        return (void *)(uintptr_t)5; /* the top is of another class: it stays */
    for (int i = QF__STASH_KEEP - 1; i >= QF__STASH_KEEP / 2; i--)
        if (qf__block_stash_pop(cls) != kept[i])
            return (void *)(uintptr_t)4;
    for (int i = QF__STASH_KEEP / 2; i < QF__STASH_KEEP; i++)
        qf__block_free(kept[i], cls);
    return NULL; /* half the stash is left for the thread's exit */
}

Test(blockcache, the_stash_keeps_a_bounded_number_last_in_first_out)
{
    if (CACHE_OFF) {
        uint8_t cls;
        void *p = qf__block_alloc(100, &cls);
        cr_assert_not(qf__block_stash_push(p, cls), "no stash without the caches");
        cr_assert_null(qf__block_stash_pop(cls));
        qf__block_free(p, cls);
        return;
    }
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stash_on_this_thread, NULL), 0);
    void *ret;
    cr_assert_eq(pthread_join(th, &ret), 0);
    cr_assert_eq((uintptr_t)ret, 0, "step %u failed", (unsigned)(uintptr_t)ret);
}
