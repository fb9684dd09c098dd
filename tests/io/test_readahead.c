/* test_readahead.c - the read-ahead of readers that yield rows
 * (runtime/io/qf_readahead.c, qf_rbuf.c): while a TextLineReader or a
 * TFRecordReader works on one chunk of a regular file, a helper thread
 * reads the next into a fresh run.
 *
 * Every other reader suite reads files of many sizes through buffers of
 * many sizes, with the read-ahead on, and again with it off
 * (QF_READAHEAD=0, the *_no_readahead tests in meson.build); their records
 * are checked byte for byte, so both the chunks taken from the helper and
 * the ones it had to drop (a left-over longer than the room kept for it)
 * are covered there. This suite covers what only the read-ahead adds: a
 * file cut while the helper reads it, a reader freed, reset or restored
 * with a read under way, many readers sharing the one helper, and a child
 * process that goes on reading after fork() (the helper does not exist in
 * the child).
 *
 * Nothing sleeps: the tests read, then act, then read; whether the helper's
 * read is queued, running or done at that moment is left to chance, and
 * every outcome must give the same records.
 */
#include <pthread.h>
#include <sys/wait.h>

#include "qf_test_io.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(readahead, .timeout = 240);
#endif

/* A text file of `lines` lines "<i>:<filler>", lengths varied by i. */
static const char *lines_file(const tdir *d, const char *name, int lines)
{
    size_t cap = (size_t)lines * 120 + 1, n = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    for (int i = 0; i < lines; i++) {
        int w = snprintf(text + n, cap - n, "%d:", i);
        n += (size_t)w;
        size_t fill = (size_t)(i * 37 % 97);
        memset(text + n, 'a' + i % 26, fill);
        n += fill;
        text[n++] = '\n';
    }
    const char *p = write_bytes(d, name, text, n);
    free(text);
    return p;
}

/* Whether rec is line i of lines_file(). */
static bool is_line(const qf_record *rec, int i)
{
    char want[128];
    int w = snprintf(want, sizeof(want), "%d:", i);
    size_t fill = (size_t)(i * 37 % 97);
    memset(want + w, 'a' + i % 26, fill);
    return rec->value_len == (size_t)w + fill && memcmp(rec->value, want, rec->value_len) == 0;
}

static qf_reader *text_reader(size_t buffer)
{
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .buffer_bytes = buffer};
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    return r;
}

static qf_queue *one_file(const char *path)
{
    qf_queue *q = work_queue();
    put(q, path);
    close_q(q);
    return q;
}

/* Read lines [from, until) (until -1: to the end) and check each. Returns
 * the index after the last line read. */
static int read_lines(qf_reader *r, qf_queue *q, qf_record *rec, int from, int until)
{
    int i = from;
    for (; until < 0 || i < until; i++) {
        qf_code rc = qf_reader_read(r, q, rec);
        if (rc == QF_OUT_OF_RANGE && until < 0)
            break;
        cr_assert_eq(rc, QF_OK, "line %d: %s (%s)", i, qf_code_name(rc), qf_last_message());
        cr_assert(is_line(rec, i), "line %d reads back as \"%.*s\"", i, (int)rec->value_len,
                  rec->value);
    }
    return i;
}

Test(readahead, a_file_cut_while_the_next_chunk_is_read_gives_whole_lines_and_a_warning)
{
    tdir d;
    tdir_make(&d);
    for (int round = 0; round < 20; round++) {
        const char *p = lines_file(&d, "cut", 20000); /* about 1.2 MB */
        qf_reader *r = text_reader(4096 + (size_t)round * 977);
        qf_queue *q = one_file(p);
        qf_record rec = QF_RECORD_INIT;
        int i = read_lines(r, q, &rec, 0, 10 + round * 13);
        /* The helper may be reading the next chunk right now, or be done,
         * or not have started: the lines that were whole before the cut
         * come out exactly, then maybe one torn line, then the end. */
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        off_t cut = st.st_size / 3 + round;
        cr_assert_eq(truncate(p, cut), 0);
        size_t bytes = 0;
        for (;; i++) {
            qf_code rc = qf_reader_read(r, q, &rec);
            if (rc == QF_OUT_OF_RANGE)
                break;
            cr_assert_eq(rc, QF_OK, "%s (%s)", qf_code_name(rc), qf_last_message());
            if (!is_line(&rec, i)) {
                /* The torn line: a head of line i, and the last record. */
                cr_expect_eq(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "line %d torn, then more",
                             i);
                break;
            }
            bytes += rec.value_len + 1;
        }
        cr_expect_leq(bytes, (size_t)cut);
        cr_expect_gt(i, 10 + round * 13);
        cr_expect(has(qf_reader_last_warning(r), "shrank while being read"),
                  "round %d, warning \"%s\"", round, qf_reader_last_warning(r));
        qf_record_clear(&rec);
        qf_reader_free(r);
        qf_queue_unref(q);
    }
    tdir_remove(&d);
}

Test(readahead, a_reader_freed_or_reset_with_a_read_under_way_loses_nothing_and_leaks_nothing)
{
    tdir d;
    tdir_make(&d);
    const char *p = lines_file(&d, "f", 20000);
    for (int round = 0; round < 200; round++) {
        qf_reader *r = text_reader(4096);
        qf_queue *q = work_queue();
        put(q, p);
        put(q, p);
        close_q(q);
        qf_record rec = QF_RECORD_INIT;
        (void)read_lines(r, q, &rec, 0, 1 + round % 50);
        if (round % 2) {
            /* reset drops the item under way (spec 187): the next read
             * starts the next item from its first line. */
            qf_reader_reset(r);
            (void)read_lines(r, q, &rec, 0, 100);
        }
        qf_record_clear(&rec);
        qf_reader_free(r); /* the helper may still be reading into its run */
        qf_queue_unref(q);
    }
    tdir_remove(&d);
}

Test(readahead, a_state_restored_mid_file_reads_on_from_the_saved_line)
{
    tdir d;
    tdir_make(&d);
    const char *p = lines_file(&d, "f", 20000);
    qf_reader *r = text_reader(4096);
    qf_queue *q = one_file(p);
    qf_record rec = QF_RECORD_INIT;
    int at = read_lines(r, q, &rec, 0, 5000);
    void *state = NULL;
    size_t state_len = 0;
    OK(qf_reader_serialize_state(r, &state, &state_len));
    (void)read_lines(r, q, &rec, at, at + 3000); /* a read-ahead is under way past here */
    OK(qf_reader_restore_state(r, state, state_len));
    cr_expect_eq(read_lines(r, q, &rec, at, -1), 20000);
    free(state);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* --------------------------------------------------- readers in threads */

typedef struct {
    const char *path;
    size_t buffer;
    int got;
} worker_arg;

static void *read_whole_file(void *arg)
{
    worker_arg *a = arg;
    qf_reader *r = text_reader(a->buffer);
    qf_queue *q = one_file(a->path);
    qf_record rec = QF_RECORD_INIT;
    a->got = read_lines(r, q, &rec, 0, -1);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    return NULL;
}

Test(readahead, sixteen_readers_in_threads_share_the_one_helper_and_each_reads_every_line)
{
    tdir d;
    tdir_make(&d);
    const char *p = lines_file(&d, "f", 20000);
    enum { N = 16 };
    pthread_t t[N];
    worker_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (worker_arg){.path = p, .buffer = 1024 + (size_t)i * 4093};
        cr_assert_eq(pthread_create(&t[i], NULL, read_whole_file, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(pthread_join(t[i], NULL), 0);
        cr_expect_eq(a[i].got, 20000, "reader %d (buffer %zu)", i, a[i].buffer);
    }
    tdir_remove(&d);
}

/* ------------------------------------------------------------------ fork */

#if defined(__SANITIZE_THREAD__)
#define QFT_NO_FORK_THREADS 1 /* TSan stops a child of a threaded process that starts threads */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QFT_NO_FORK_THREADS 1
#endif
#endif

Test(readahead, a_child_forked_mid_file_reads_on_without_the_parents_helper)
{
#ifdef QFT_NO_FORK_THREADS
    cr_skip_test("ThreadSanitizer does not support threads started in a forked child");
#else
    tdir d;
    tdir_make(&d);
    const char *p = lines_file(&d, "f", 20000);
    for (int round = 0; round < 10; round++) {
        qf_reader *r = text_reader(4096 + (size_t)round * 1021);
        qf_queue *q = one_file(p);
        qf_record rec = QF_RECORD_INIT;
        int at = read_lines(r, q, &rec, 0, 100 + round * 211);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
        if (pid == 0) {
            /* The child reads on from line `at` with its copy of the
             * reader; the parent waits meanwhile (they share the fd and
             * its offset). The parent's helper does not exist here: a
             * chunk it had read is taken, one it was reading is read
             * again, one it had not started is read by the child. */
            int i = at;
            for (;; i++) {
                qf_code rc = qf_reader_read(r, q, &rec);
                if (rc == QF_OUT_OF_RANGE)
                    break;
                if (rc != QF_OK || !is_line(&rec, i))
                    _exit(10);
            }
            _exit(i == 20000 ? 0 : 11);
        }
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "round %d: the child's reading failed (status %d)", round, status);
        /* The child moved the file offset the two share: the parent's
         * reader is only freed (with its helper maybe still reading). */
        qf_record_clear(&rec);
        qf_reader_free(r);
        qf_queue_unref(q);
    }
    tdir_remove(&d);
#endif
}
