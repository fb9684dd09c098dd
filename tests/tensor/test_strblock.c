/* test_strblock.c - string blocks outliving their pools (white-box:
 * queues/tensor/qf_strblock-impl.h).
 *
 * A block whose pool is closed goes to a process-wide set of idle blocks
 * once its last row is consumed, and the next pool of the same buffer size
 * takes it from there instead of from malloc (qf_strblock.c, "Blocks whose
 * pools are gone"). What must hold: a block is reused only when no row of
 * it is out, only by a pool of its own size, with no trace of its old key
 * prefix, and the set stays under its bounds, oldest out first. (In
 * AddressSanitizer builds idle blocks are poisoned, so these tests also
 * check that nothing touches one.) */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_queue.h"
#include "qf_strblock-impl.h"

#define IDLE_MAX_BYTES ((size_t)32 << 20)
#define IDLE_MAX_BLOCKS 256

/* Every test starts from an empty idle set (the in-process runner of the
 * ThreadSanitizer build runs them all in one process). */
static void start_empty(void)
{
    qf__strblock_idle_release();
    cr_assert_eq(qf__strblock_idle_bytes(NULL), 0);
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
    start_empty();
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
    start_empty();
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
    start_empty();
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

Test(strblock, idle_blocks_stay_under_the_byte_bound)
{
    start_empty();
    /* 48 blocks of 1 MiB buffers retired at once: as many whole blocks as
     * fit in 32 MiB are kept, counting their row tables and rounding. */
    enum { N = 48 };
    const size_t cap = (size_t)1 << 20, each = qf__strblock_bytes(cap);
    const size_t fit = IDLE_MAX_BYTES / each;
    cr_assert_gt(each, cap, "a block's allocation counts more than its buffer");
    static qf__strblock *old[N];
    retire_blocks(cap, N, old);
    size_t kept = 0;
    cr_expect_eq(qf__strblock_idle_bytes(&kept), fit * each);
    cr_expect_eq(kept, fit, "%zu blocks idle, %zu fit in the bound", kept, fit);
    /* A new pool takes them back, and they are no longer idle. */
    qf__strblock_pool *p = qf__strblock_pool_new(cap);
    cr_assert_not_null(p);
    static qf__strblock *got[N];
    for (size_t i = 0; i < fit; i++) {
        got[i] = qf__strblock_pool_get(p);
        cr_assert_not_null(got[i]);
        cr_expect(among(got[i], old, N), "block %zu was not an idle one", i);
    }
    cr_expect_eq(qf__strblock_idle_bytes(NULL), 0);
    for (size_t i = 0; i < fit; i++)
        qf__strblock_drop(got[i]);
    qf__strblock_pool_close(p);
    qf__strblock_idle_release();
    cr_expect_eq(qf__strblock_idle_bytes(NULL), 0);
}

Test(strblock, idle_blocks_stay_under_the_count_bound)
{
    start_empty();
    /* 300 small blocks (16 KiB each, 4.7 MiB): 256 are kept. */
    enum { N = 300 };
    static qf__strblock *old[N];
    retire_blocks(512, N, old);
    size_t kept = 0;
    size_t bytes = qf__strblock_idle_bytes(&kept);
    cr_expect_eq(kept, IDLE_MAX_BLOCKS);
    cr_expect_eq(bytes, IDLE_MAX_BLOCKS * qf__strblock_bytes(512));
    qf__strblock_idle_release();
}

Test(strblock, a_new_size_pushes_out_the_oldest_blocks)
{
    start_empty();
    /* The set full of one size no one reads any more; a block of another
     * size retired after them is kept, and the oldest go. */
    const size_t stale = (size_t)1 << 20, fresh = 64 * 1024 + 1;
    enum { N = 40 };
    static qf__strblock *old[N];
    retire_blocks(stale, N, old);
    size_t before = 0;
    qf__strblock_idle_bytes(&before);
    qf__strblock *mine[1];
    retire_blocks(fresh, 1, mine);
    size_t after = 0;
    cr_expect_leq(qf__strblock_idle_bytes(&after), IDLE_MAX_BYTES);
    cr_expect_leq(after, before, "the set grew past its bound");
    qf__strblock_pool *p = qf__strblock_pool_new(fresh);
    cr_assert_not_null(p);
    qf__strblock *r = qf__strblock_pool_get(p);
    cr_expect_eq(r, mine[0], "the newest block was pushed out instead of the oldest");
    qf__strblock_drop(r);
    qf__strblock_pool_close(p);
    qf__strblock_idle_release();
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
static atomic_long rows_seen, rows_bad, calls_failed;

/* Row k of filler id's round: its line number says who wrote it, and
 * every byte of it is the letter that number gives. */
static uint64_t row_line(uint64_t id, uint64_t round, uint64_t k)
{
    return id * 1000000 + round * 100 + k;
}

static char row_letter(uint64_t line)
{
    return (char)('A' + line % 26);
}

static void *filler_main(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    for (uint64_t round = 0; round < ROUNDS; round++) {
        qf__strblock_pool *p = qf__strblock_pool_new(8 * 1024 + 11);
        if (!p) {
            atomic_fetch_add(&calls_failed, 1);
            return NULL;
        }
        for (int b = 0; b < 2; b++) {
            qf__strblock *r = qf__strblock_pool_get(p);
            if (!r) {
                atomic_fetch_add(&calls_failed, 1);
                break;
            }
            char *buf = qf__strblock_data(r);
            for (uint64_t k = 0; k < ROWS; k++) {
                size_t off = (size_t)k * (ROW_LEN + 1);
                uint64_t line = row_line(id, round * 2 + (uint64_t)b, k);
                memset(buf + off, row_letter(line), ROW_LEN);
                void *row = qf__strblock_add_row(r, off, ROW_LEN, line);
                if (qf_queue_enqueue_ptr(handoff, row) != QF_OK) {
                    atomic_fetch_add(&calls_failed, 1);
                    qf__rows_release(&row, 1);
                }
            }
            qf__strblock_drop(r);
        }
        qf__strblock_pool_close(p);
    }
    return NULL;
}

/* Whether the row still holds what its filler wrote: the letter its line
 * number gives, ROW_LEN times, then the NUL. */
static bool row_intact(void *row)
{
    const char *s0, *s1;
    size_t l0, l1;
    char digits[QF__ROW_DIGITS];
    qf__row_string(row, 0, digits, &s0, &l0, &s1, &l1); /* no prefix: the key is the number */
    char num[QF__ROW_DIGITS + 1];
    if (l0 + l1 > QF__ROW_DIGITS)
        return false;
    if (l0)
        memcpy(num, s0, l0);
    if (l1)
        memcpy(num + l0, s1, l1);
    num[l0 + l1] = '\0';
    char want = row_letter(strtoull(num, NULL, 10));
    const char *v = qf__row_value(row);
    for (int i = 0; i < ROW_LEN; i++)
        if (v[i] != want)
            return false;
    return v[ROW_LEN] == '\0';
}

static void *consumer_main(void *arg)
{
    (void)arg;
    void *row;
    while (qf_queue_dequeue_ptr(handoff, &row) == QF_OK) {
        /* Look twice, with a yield between: a block reused under us would
         * be rewritten by its next filler before or meanwhile. */
        bool ok = row_intact(row);
        sched_yield();
        ok = ok && row_intact(row);
        if (!ok)
            atomic_fetch_add(&rows_bad, 1);
        atomic_fetch_add(&rows_seen, 1);
        qf__rows_release(&row, 1);
    }
    return NULL;
}

Test(strblock, rows_out_keep_their_block_until_consumed, .timeout = 120)
{
    start_empty();
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
    cr_expect_eq(atomic_load(&calls_failed), 0);
    cr_expect_eq(atomic_load(&rows_seen), (long)FILLERS * ROUNDS * 2 * ROWS);
    cr_expect_eq(atomic_load(&rows_bad), 0, "%ld rows changed while their consumer held them",
                 atomic_load(&rows_bad));
    /* The blocks went through the idle set: some wait there now. */
    cr_expect_gt(qf__strblock_idle_bytes(NULL), 0);
    qf__strblock_idle_release();
}

/* The keys of a batch of rows (qf__rows_string_copy()) are each row's
 * prefix and number, however the numbers move from one row to the next:
 * by one (text lines), by a record's length (TFRecord offsets, carrying
 * into a new digit), not at all, backwards, by jumps near 2^64, from
 * UINT64_MAX to 0; across blocks with prefixes on both sides of what the
 * key buffer holds whole (a prefix of 488 bytes plus 24 digits fills it,
 * and its keys are copied up to the buffer's end). The arena is exactly
 * what qf__rows_string_bytes() asks for, so a copy that writes past it
 * fails under AddressSanitizer. */
static void check_keys(const char *const *prefixes, size_t nblocks, const uint64_t *lines,
                       size_t nlines)
{
    qf__strblock_pool *p = qf__strblock_pool_new(64 * 1024);
    cr_assert_not_null(p);
    size_t n = nblocks * nlines;
    void **slots = calloc(n, sizeof(void *));
    char **want = calloc(n, sizeof(char *));
    cr_assert(slots && want);
    for (size_t b = 0; b < nblocks; b++) {
        qf__strblock *r = qf__strblock_pool_get(p);
        cr_assert_not_null(r);
        cr_assert_eq(qf__strblock_set_prefix(r, prefixes[b], strlen(prefixes[b]), ':'), QF_OK);
        for (size_t i = 0; i < nlines; i++) {
            qf__strblock_data(r)[2 * i] = 'v';
            slots[b * nlines + i] = qf__strblock_add_row(r, 2 * i, 1, lines[i]);
            size_t len = strlen(prefixes[b]) + 1 + 20 + 1;
            want[b * nlines + i] = malloc(len);
            cr_assert_not_null(want[b * nlines + i]);
            snprintf(want[b * nlines + i], len, "%s:%llu", prefixes[b],
                     (unsigned long long)lines[i]);
        }
        qf__strblock_drop(r);
    }
    size_t bytes = 0;
    cr_assert(qf__rows_string_bytes(slots, n, 0, &bytes));
    char *arena = malloc(bytes);
    qf_string *keys = calloc(n, sizeof(qf_string));
    cr_assert(arena && keys);
    char *end = qf__rows_string_copy(slots, n, 0, keys, arena);
    cr_expect_leq(end, arena + bytes);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(keys[i].len, strlen(want[i]), "key %zu: length %zu, want %zu (%s)", i,
                     keys[i].len, strlen(want[i]), want[i]);
        cr_expect(keys[i].data && memcmp(keys[i].data, want[i], strlen(want[i]) + 1) == 0,
                  "key %zu: got %.*s, want %s", i, (int)keys[i].len,
                  keys[i].data ? keys[i].data : "", want[i]);
        free(want[i]);
    }
    qf__rows_release(slots, n);
    qf__strblock_pool_close(p);
    free(keys);
    free(arena);
    free(want);
    free(slots);
}

Test(strblock, a_batchs_keys_are_its_rows_prefixes_and_numbers)
{
    start_empty();
    static const uint64_t lines[] = {0,
                                     1,
                                     2,
                                     9,
                                     10,
                                     11,
                                     99,
                                     100,
                                     728,
                                     1000,
                                     1272,
                                     9999728,
                                     10000000,
                                     10000272,
                                     10000272,
                                     10000271,
                                     5,
                                     272,
                                     544,
                                     99999999999,
                                     100000000271,
                                     1000000000000000000ull,
                                     UINT64_MAX - 272,
                                     UINT64_MAX - 1,
                                     UINT64_MAX,
                                     0,
                                     1,
                                     3,
                                     4};
    /* The separator makes a prefix one byte longer: 487 characters give a
     * prefix of 488, the longest kept whole (488 + 24 = 512), 488 the
     * shortest that is not. */
    char whole[488], split[489], longer[600];
    memset(whole, 'w', sizeof(whole) - 1);
    whole[sizeof(whole) - 1] = '\0';
    memset(split, 's', sizeof(split) - 1);
    split[sizeof(split) - 1] = '\0';
    memset(longer, 'l', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    const char *prefixes[] = {"/data/part-00001.tfrecord", "x", whole, split, longer, "/data/b"};
    check_keys(prefixes, sizeof(prefixes) / sizeof(prefixes[0]), lines,
               sizeof(lines) / sizeof(lines[0]));
    /* Every number of 20 digits leaves no room in the arena but the copy's
     * slack; keys of 33 bytes are copied as 48. */
    static const uint64_t wide[] = {10000000000000000000ull, 10000000000000000272ull,
                                    UINT64_MAX - 1, UINT64_MAX};
    const char *twelve[] = {"/data/b.tfrc"};
    check_keys(twelve, 1, wide, sizeof(wide) / sizeof(wide[0]));
}
