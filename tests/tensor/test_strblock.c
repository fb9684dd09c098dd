/* test_strblock.c - string blocks outliving their pools (white-box:
 * queues/tensor/qf_strblock-impl.h).
 *
 * A block whose pool is closed goes to a process-wide set of idle blocks
 * once its last row is consumed, and the next pool of the same buffer size
 * takes it from there instead of from malloc (qf_strblock.c, "Blocks whose
 * pools are gone"). What must hold: a block is reused only when no row of
 * it is out, only by a pool of its own size, with no trace of its old key
 * prefix, and the set stays under its bound. AddressSanitizer builds keep
 * no idle blocks (a use after free must stay visible): the reuse checks
 * are skipped there, the safety ones run. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "qf_queue.h"
#include "qf_strblock-impl.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_IDLE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_IDLE 1
#endif
#endif

/* Every test starts from an empty idle set (the in-process runner of the
 * ThreadSanitizer build runs them all in one process). */
static void skip_without_idle(void)
{
#ifdef NO_IDLE
    cr_skip_test("AddressSanitizer build: blocks go back to malloc, none are kept");
#endif
    qf__strblock_idle_release();
}

/* n blocks of a fresh pool of data_cap bytes, let go and the pool closed:
 * they are idle now. Their addresses go to out. */
static void retire_blocks(size_t data_cap, size_t n, qf__strblock **out)
{
    qf__strblock_pool *p = qf__strblock_pool_new(data_cap);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        out[i] = qf__strblock_pool_get(p);
        cr_assert_not_null(out[i]);
    }
    for (size_t i = 0; i < n; i++)
        qf__strblock_drop(out[i]);
    qf__strblock_pool_close(p);
}

static bool among(const qf__strblock *r, qf__strblock *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == r)
            return true;
    return false;
}

Test(strblock, a_closed_pools_blocks_serve_the_next_pool_of_their_size)
{
    skip_without_idle();
    enum { N = 4 };
    const size_t cap = 40 * 1024 + 3;
    qf__strblock *old[N];
    retire_blocks(cap, N, old);

    qf__strblock_pool *p = qf__strblock_pool_new(cap);
    cr_assert_not_null(p);
    qf__strblock *got[N];
    for (size_t i = 0; i < N; i++) {
        got[i] = qf__strblock_pool_get(p);
        cr_assert_not_null(got[i]);
        cr_expect(among(got[i], old, N), "block %zu of the new pool was not an idle one", i);
        cr_expect_eq(got[i]->cap, cap);
        cr_expect_eq(got[i]->n, 0, "a reused block starts with no rows");
        cr_expect_eq(got[i]->pool, p, "a reused block belongs to its new pool");
        /* The whole buffer is its own: write it end to end. */
        memset(qf__strblock_data(got[i]), 'x', cap);
    }
    for (size_t i = 0; i < N; i++)
        qf__strblock_drop(got[i]);
    qf__strblock_pool_close(p);
}

Test(strblock, a_pool_of_another_size_gets_a_fresh_block)
{
    skip_without_idle();
    enum { N = 3 };
    qf__strblock *old[N];
    retire_blocks(24 * 1024 + 5, N, old);
    qf__strblock_pool *p = qf__strblock_pool_new(24 * 1024 + 7);
    cr_assert_not_null(p);
    qf__strblock *r = qf__strblock_pool_get(p);
    cr_assert_not_null(r);
    cr_expect_not(among(r, old, N), "a block of another buffer size was reused");
    cr_expect_eq(r->cap, 24 * 1024 + 7);
    qf__strblock_drop(r);
    qf__strblock_pool_close(p);
}

Test(strblock, a_reused_block_has_no_key_prefix_of_its_old_source)
{
    skip_without_idle();
    const size_t cap = 20 * 1024 + 9;
    qf__strblock_pool *a = qf__strblock_pool_new(cap);
    cr_assert_not_null(a);
    qf__strblock *r = qf__strblock_pool_get(a);
    cr_assert_not_null(r);
    cr_assert_eq(qf__strblock_set_prefix(r, "old-file.txt", 12, ':'), QF_OK);
    cr_assert(qf__strblock_has_prefix(r, "old-file.txt", 12, ':'));
    qf__strblock_drop(r);
    qf__strblock_pool_close(a);

    qf__strblock_pool *b = qf__strblock_pool_new(cap);
    cr_assert_not_null(b);
    qf__strblock *s = qf__strblock_pool_get(b);
    cr_assert_eq(s, r, "the idle block was not reused");
    cr_expect_not(qf__strblock_has_prefix(s, "old-file.txt", 12, ':'),
                  "a reused block still claims its old source's key prefix");
    cr_expect(qf__strblock_has_prefix(s, "", 0, -1), "a reused block starts with no prefix");
    /* Rows and keys of the new source come out right. */
    cr_assert_eq(qf__strblock_set_prefix(s, "new", 3, ':'), QF_OK);
    memcpy(qf__strblock_data(s), "hello", 5);
    void *row = qf__strblock_add_row(s, 0, 5, 7);
    cr_expect_str_eq(qf__row_value(row), "hello");
    const char *s0, *s1;
    size_t l0, l1;
    char digits[QF__ROW_DIGITS];
    qf__row_string(row, 0, digits, &s0, &l0, &s1, &l1);
    char key[64];
    cr_assert_lt(l0 + l1, sizeof(key));
    memcpy(key, s0, l0);
    memcpy(key + l0, s1, l1);
    key[l0 + l1] = '\0';
    cr_expect_str_eq(key, "new:7");
    qf__rows_release(&row, 1);
    qf__strblock_drop(s);
    qf__strblock_pool_close(b);
}

Test(strblock, idle_blocks_stay_under_the_bound)
{
    skip_without_idle();
    /* 48 blocks of 1 MiB retired at once: 32 MiB of buffers are kept. */
    enum { N = 48, KEPT_MAX = 32 };
    const size_t cap = (size_t)1 << 20;
    static qf__strblock *old[N];
    retire_blocks(cap, N, old);
    cr_expect_eq(qf__strblock_idle_bytes(), KEPT_MAX * cap, "%zu bytes idle, the bound is %zu",
                 qf__strblock_idle_bytes(), KEPT_MAX * cap);
    /* A new pool takes them back, and they are no longer idle. */
    qf__strblock_pool *p = qf__strblock_pool_new(cap);
    cr_assert_not_null(p);
    static qf__strblock *got[KEPT_MAX];
    for (size_t i = 0; i < KEPT_MAX; i++) {
        got[i] = qf__strblock_pool_get(p);
        cr_assert_not_null(got[i]);
        cr_expect(among(got[i], old, N), "block %zu was not an idle one", i);
    }
    cr_expect_eq(qf__strblock_idle_bytes(), 0);
    for (size_t i = 0; i < KEPT_MAX; i++)
        qf__strblock_drop(got[i]);
    qf__strblock_pool_close(p);
    qf__strblock_idle_release();
    cr_expect_eq(qf__strblock_idle_bytes(), 0);
}

/* ------------------------------------------------ rows out across threads
 *
 * Fillers on many threads (more than the cores) each open a pool, write
 * rows into its blocks, hand the rows to consumer threads through a pointer
 * queue, let go of the blocks and close the pool, over and over; the last
 * row consumed retires each block (on a consumer's thread) into the idle
 * set, from which the next pools fill them again. A block reused while a
 * row of it was still out would show as a row whose bytes changed under
 * its consumer. */
enum { FILLERS = 6, CONSUMERS = 3, ROUNDS = 300, ROWS = 24, ROW_LEN = 40 };

static qf_queue *handoff;
static atomic_long rows_seen, rows_bad;

static void *filler_main(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    for (int round = 0; round < ROUNDS; round++) {
        qf__strblock_pool *p = qf__strblock_pool_new(8 * 1024 + 11);
        cr_assert_not_null(p);
        for (int b = 0; b < 2; b++) {
            qf__strblock *r = qf__strblock_pool_get(p);
            cr_assert_not_null(r);
            char *buf = qf__strblock_data(r);
            for (int k = 0; k < ROWS; k++) {
                /* Every byte of row k says who wrote it: filler, round, row. */
                size_t off = (size_t)k * (ROW_LEN + 1);
                char c = (char)('A' + (id * 7 + (uintptr_t)round * 3 + (uintptr_t)k) % 26);
                memset(buf + off, c, ROW_LEN);
                void *row = qf__strblock_add_row(r, off, ROW_LEN, (uint64_t)k);
                cr_assert_eq(qf_queue_enqueue_ptr(handoff, row), QF_OK);
            }
            qf__strblock_drop(r);
        }
        qf__strblock_pool_close(p);
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    (void)arg;
    void *row;
    while (qf_queue_dequeue_ptr(handoff, &row) == QF_OK) {
        const char *v = qf__row_value(row);
        /* Look twice, with a yield between: a block reused under us would
         * be rewritten by its next filler meanwhile. */
        char first[ROW_LEN];
        memcpy(first, v, ROW_LEN);
        sched_yield();
        bool same = memcmp(first, v, ROW_LEN) == 0 && v[ROW_LEN] == '\0';
        for (int i = 1; same && i < ROW_LEN; i++)
            same = first[i] == first[0];
        if (!same)
            atomic_fetch_add(&rows_bad, 1);
        atomic_fetch_add(&rows_seen, 1);
        qf__rows_release(&row, 1);
    }
    return NULL;
}

Test(strblock, rows_out_keep_their_block_until_consumed, .timeout = 120)
{
    cr_assert_eq(qf_ptr_queue_new(64, "rows", 0, NULL, &handoff), QF_OK);
    pthread_t f[FILLERS], c[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++)
        cr_assert_eq(pthread_create(&c[i], NULL, consumer_main, NULL), 0);
    for (uintptr_t i = 0; i < FILLERS; i++)
        cr_assert_eq(pthread_create(&f[i], NULL, filler_main, (void *)i), 0);
    for (int i = 0; i < FILLERS; i++)
        pthread_join(f[i], NULL);
    qf_queue_close(handoff, false);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_join(c[i], NULL);
    qf_queue_unref(handoff);
    cr_expect_eq(atomic_load(&rows_seen), (long)FILLERS * ROUNDS * 2 * ROWS);
    cr_expect_eq(atomic_load(&rows_bad), 0, "%ld rows changed while their consumer held them",
                 atomic_load(&rows_bad));
}
