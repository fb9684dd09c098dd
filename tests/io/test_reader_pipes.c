/* test_reader_pipes.c - readers on named pipes and other non-regular files
 * (issue 16): never a blocked worker, no data lost, a Coordinator stop ends
 * them, and qflow-lines on a FIFO delivers its writer's data and exits
 * promptly on SIGTERM; a file that shrinks under qflow-lines is reported.
 *
 * Ordering comes from observable state only: a blocking open of a FIFO's
 * write end returns once the reader has it open; records arrive because
 * their bytes were written first; a thread waker is woken by the fd watch.
 * Deadlines only bound a broken run.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "qf_reader-impl.h" /* white-box: qf__crc32c */
#include "qf_test_io.h"
#define QFT_RT_NAME "pipes"
#define QFT_SOON_S 60
#include "qf_test.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(reader_pipes, .timeout = 240);
#endif

static const char *make_fifo(const tdir *d, const char *name)
{
    const char *p = tpath(d, name);
    cr_assert_eq(mkfifo(p, 0600), 0, "mkfifo: %s", strerror(errno));
    return p;
}

/* The write end, once the reader has the FIFO open (O_NONBLOCK write opens
 * fail with ENXIO until then; the reader's open happened in a call that
 * already returned, so it succeeds at once). */
static int writer_end(const char *fifo)
{
    int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open write end: %s", strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

static void wr(int fd, const void *b, size_t n)
{
    cr_assert_eq(write(fd, b, n), (ssize_t)n);
}

static void wrs(int fd, const char *s)
{
    wr(fd, s, strlen(s));
}

Test(reader_pipes, thread_forms_wait_for_a_fifo_and_keep_half_lines)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "fifo");
    qf_reader *r = NULL;
    OK(qf_text_line_reader_new(0, &r));
    qf_queue *q = work_queue();
    put(q, f);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    /* No writer yet: the open does not block; the reads do not end. */
    REFUSED(qf_reader_read_until(r, q, qf_deadline_in_ns(20 * 1000000), &rec), QF_DEADLINE_EXCEEDED,
            "deadline");
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing to read from");
    int w = writer_end(f);
    wrs(w, "ab");
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing to read from");
    wrs(w, "c");
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing to read from");
    wrs(w, "def\nxy");
    OK(qf_reader_try_read(r, q, &rec));
    cr_expect_str_eq(rec.value, "abcdef");
    cr_expect_str_eq(rec.key, keyf(f, 1));
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing to read from");
    close(w);
    OK(qf_reader_read_until(r, q, soon(), &rec));
    cr_expect_str_eq(rec.value, "xy", "the last line, at the writer's close");
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

Test(reader_pipes, a_line_longer_than_the_buffer_survives_pauses)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "fifo");
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .buffer_bytes = 16};
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    qf_queue *q = work_queue();
    put(q, f);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing");
    int w = writer_end(f);
    char line[101];
    for (int i = 0; i < 100; i++)
        line[i] = (char)('a' + i % 26);
    line[100] = 0;
    for (int i = 0; i < 100; i += 7) {
        wr(w, line + i, (size_t)(i + 7 <= 100 ? 7 : 100 - i));
        REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing");
    }
    wrs(w, "\r\n");
    OK(qf_reader_try_read(r, q, &rec));
    cr_expect_str_eq(rec.value, line);
    close(w);
    REFUSED(qf_reader_read_until(r, q, soon(), &rec), QF_OUT_OF_RANGE, "is closed");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

static void tf_record_bytes(const char *data, size_t n, unsigned char *out)
{
    uint64_t len = n;
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(len >> (8 * i));
    uint32_t c = qf__crc32c_mask(qf__crc32c(out, 8));
    memcpy(out + 8, &c, 4);
    memcpy(out + 12, data, n);
    c = qf__crc32c_mask(qf__crc32c(data, n));
    memcpy(out + 12 + n, &c, 4);
}

Test(reader_pipes, tfrecords_and_whole_files_read_from_fifos_byte_by_byte)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "tf");
    qf_reader *r = NULL;
    OK(qf_tfrecord_reader_new(&r));
    qf_queue *q = work_queue();
    put(q, f);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing");
    int w = writer_end(f);
    unsigned char b[16 + 40];
    tf_record_bytes("a record that comes one byte at a time", 38, b);
    for (size_t i = 0; i < 16 + 38; i++) {
        REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing");
        wr(w, b + i, 1);
    }
    OK(qf_reader_try_read(r, q, &rec));
    cr_expect_str_eq(rec.value, "a record that comes one byte at a time");
    cr_expect_str_eq(rec.key, keyf(f, 0));
    /* half a record, then the writer leaves: truncated */
    wr(w, b, 20);
    close(w);
    REFUSED(qf_reader_read_until(r, q, soon(), &rec), QF_DATA_LOSS, "truncated record at 54 in '");
    qf_reader_free(r);
    qf_queue_unref(q);

    const char *g = make_fifo(&d, "whole");
    OK(qf_whole_file_reader_new(&r));
    q = work_queue();
    put(q, g);
    close_q(q);
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing");
    w = writer_end(g);
    wrs(w, "all ");
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "nothing");
    wrs(w, "of it");
    close(w);
    OK(qf_reader_read_until(r, q, soon(), &rec));
    cr_expect_str_eq(rec.value, "all of it");
    cr_expect_str_eq(rec.key, g);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

Test(reader_pipes, poll_form_parks_its_waker_on_the_fd_and_is_woken_by_data)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "fifo");
    qf_reader *r = NULL;
    OK(qf_text_line_reader_new(0, &r));
    qf_queue *q = work_queue();
    put(q, f);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    qf_waker wk;
    qf_waker_init_thread(&wk);
    cr_assert_eq(qf_reader_poll_read(r, q, &wk, &rec), QF_PENDING);
    cr_expect_eq(qf_waker_state(&wk), QF_WAKER_REGISTERED);
    int w = writer_end(f);
    /* A writer arriving is not data: still parked, woken only by bytes. */
    wrs(w, "hello\n");
    cr_assert_eq(qf_waker_wait(&wk, soon()), QF_OK, "the fd watch did not wake the waker");
    qf_waker_init_thread(&wk);
    OK(qf_reader_poll_read(r, q, &wk, &rec));
    cr_expect_str_eq(rec.value, "hello");
    cr_assert_eq(qf_reader_poll_read(r, q, &wk, &rec), QF_PENDING);
    close(w); /* the writer leaving wakes it too: the end */
    cr_assert_eq(qf_waker_wait(&wk, soon()), QF_OK);
    qf_waker_init_thread(&wk);
    REFUSED(qf_reader_poll_read(r, q, &wk, &rec), QF_OUT_OF_RANGE, "is closed");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

Test(reader_pipes, freeing_a_reader_with_a_parked_poll_wakes_the_waker)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "fifo");
    qf_reader *r = NULL;
    OK(qf_text_line_reader_new(0, &r));
    qf_queue *q = work_queue();
    put(q, f);
    qf_record rec = QF_RECORD_INIT;
    qf_waker wk;
    qf_waker_init_thread(&wk);
    cr_assert_eq(qf_reader_poll_read(r, q, &wk, &rec), QF_PENDING);
    qf_reader_free(r); /* disarms the watch: the waker is woken, not left dangling */
    cr_expect_eq(qf_waker_state(&wk), QF_WAKER_DONE);
    qf_record_clear(&rec);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* ======================================================= in a pipeline */

typedef struct writer_arg {
    const char *fifo;
    int lines;
} writer_arg;

static void *fifo_writer(void *p)
{
    writer_arg *a = p;
    int fd = open(a->fifo, O_WRONLY | O_CLOEXEC); /* blocks until the reader opens it */
    if (fd < 0)
        return (void *)1;
    char b[32];
    for (int i = 0; i < a->lines; i++) {
        int n = snprintf(b, sizeof(b), "line %d\n", i);
        if (write(fd, b, (size_t)n) != n)
            return (void *)2;
    }
    close(fd);
    return NULL;
}

Test(reader_pipes, a_pipeline_reads_every_line_of_a_fifo_without_holding_a_worker)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "fifo");
    char reg_text[64] = "";
    for (int i = 0; i < 5; i++)
        snprintf(reg_text + strlen(reg_text), 64 - strlen(reg_text), "reg %d\n", i);
    const char *reg = write_str(&d, "regular", reg_text);
    qf_runtime *rt = mkrt(1); /* one worker: a blocked worker would stall everything */
    qf_scope *s = NULL;
    OK(qf_scope_new(&s));
    qf_coord *c = NULL;
    OK(qf_coord_new(NULL, 0, &c));
    qf_queue *files = work_queue();
    put_all(files, f, reg, NULL);
    close_q(files);
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader_options(&ro, files, &src));
    qf_batch_options bo = {.num_threads = 2, .capacity = 64, .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 1, &bo, &b)); /* batches of 1: the 5 regular lines need no more */
    qf_task **tasks = NULL;
    size_t nt = 0;
    OK(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &tasks, &nt));
    enum { LINES = 1000 };
    /* The regular file's 5 lines arrive while the FIFO has no writer: the
     * FIFO's reader is parked, not holding the only worker. */
    int reg_seen = 0, fifo_seen = 0;
    char *seen = calloc(LINES, 1);
    qf_element *e = NULL;
    while (reg_seen < 5) {
        OK(qf_batcher_next_until(b, soon(), &e));
        const qf_tensor *v = qf_element_get(e, 1);
        for (int64_t i = 0; i < qf_tensor_num_elements(v); i++) {
            size_t n;
            const char *sv = qf_tensor_string(v, i, &n);
            cr_assert(n > 4 && !memcmp(sv, "reg ", 4), "unexpected %.*s", (int)n, sv);
            reg_seen++;
        }
        qf_element_free(e);
    }
    writer_arg wa = {f, LINES};
    pthread_t wt;
    cr_assert_eq(pthread_create(&wt, NULL, fifo_writer, &wa), 0);
    qf_code rc;
    while ((rc = qf_batcher_next_until(b, soon(), &e)) == QF_OK) {
        const qf_tensor *v = qf_element_get(e, 1);
        for (int64_t i = 0; i < qf_tensor_num_elements(v); i++) {
            size_t n;
            const char *sv = qf_tensor_string(v, i, &n);
            int k = -1;
            cr_assert_eq(sscanf(sv, "line %d", &k), 1, "unexpected %.*s", (int)n, sv);
            cr_assert(k >= 0 && k < LINES && !seen[k], "line %d twice or out of range", k);
            seen[k] = 1;
            fifo_seen++;
        }
        qf_element_free(e);
    }
    cr_expect_eq(rc, QF_OUT_OF_RANGE, "%s", qf_last_message());
    cr_expect_eq(fifo_seen, LINES);
    void *wres = NULL;
    pthread_join(wt, &wres);
    cr_expect_null(wres);
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    for (size_t i = 0; i < nt; i++)
        qf_task_join(tasks[i], soon(), NULL);
    qf_tasks_free(tasks, nt);
    free(seen);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(files);
    tdir_remove(&d);
}

Test(reader_pipes, a_coordinator_stop_ends_readers_parked_on_silent_fifos)
{
    tdir d;
    tdir_make(&d);
    const char *f1 = make_fifo(&d, "silent1");
    const char *f2 = make_fifo(&d, "silent2");
    qf_runtime *rt = mkrt(2);
    qf_scope *s = NULL;
    OK(qf_scope_new(&s));
    qf_coord *c = NULL;
    OK(qf_coord_new(NULL, 0, &c));
    qf_queue *files = work_queue();
    put_all(files, f1, f2, NULL);
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader_options(&ro, files, &src));
    qf_batch_options bo = {.num_threads = 2, .capacity = 16};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 4, &bo, &b));
    qf_task **tasks = NULL;
    size_t nt = 0;
    OK(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &tasks, &nt));
    /* Both readers have opened their FIFO once the file-name queue is
     * empty and a writer's non-blocking open succeeds on each. */
    qf_deadline dl = soon();
    int w1 = -1, w2 = -1;
    while (w1 < 0 || w2 < 0) {
        cr_assert_not(qf_deadline_passed(dl), "the readers never opened their FIFOs");
        if (w1 < 0)
            w1 = open(f1, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (w2 < 0)
            w2 = open(f2, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        sched_yield();
    }
    /* Writers are connected and silent: the readers wait on the fds. */
    int64_t t0 = qf_now_ns();
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    for (size_t i = 0; i < nt; i++) {
        qf_task_join(tasks[i], soon(), NULL);
        cr_expect(qf_task_is_done(tasks[i]), "task %s still running", qf_task_name(tasks[i]));
    }
    cr_log_info("stop to joined: %.1f ms", (double)(qf_now_ns() - t0) / 1e6);
    qf_tasks_free(tasks, nt);
    close(w1);
    close(w2);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(files);
    tdir_remove(&d);
}

/* ========================================================== qflow-lines */

typedef struct child {
    pid_t pid;
    int out; /* its stdout */
    int err; /* its stderr */
} child;

static child spawn_lines(const char *const *argv)
{
    int o[2], e[2];
    cr_assert_eq(pipe2(o, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(e, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        execv(QFLOW_LINES, (char *const *)argv);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    return (child){pid, o[0], e[0]};
}

/* Read a whole fd (until EOF). */
static char *drain(int fd, size_t *ret_len)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    ssize_t n;
    while ((n = read(fd, b + len, cap - len)) > 0) {
        len += (size_t)n;
        if (len == cap)
            b = realloc(b, cap *= 2);
    }
    b[len < cap ? len : cap - 1] = 0;
    if (len == cap) {
        b = realloc(b, cap + 1);
        b[len] = 0;
    }
    *ret_len = len;
    return b;
}

/* waitpid bounded by a deadline: -1 when the child is still alive. */
static int wait_child(pid_t pid, qf_deadline dl)
{
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (qf_deadline_passed(dl))
            return -1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* polls the child's state; orders nothing */
    }
}

Test(reader_pipes, qflow_lines_delivers_every_line_of_a_fifo)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "fifo");
    const char *argv[] = {"qflow-lines", "--readers", "2", f, NULL};
    child ch = spawn_lines(argv);
    writer_arg wa = {f, 5000};
    cr_assert_null(fifo_writer(&wa)); /* its open waits for qflow-lines' open */
    size_t n, en;
    char *out = drain(ch.out, &n);
    char *err = drain(ch.err, &en);
    int st = wait_child(ch.pid, soon());
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d, stderr: %s", st, err);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += out[i] == '\n';
    cr_expect_eq(lines, 5000, "stderr: %s", err);
    free(out);
    free(err);
    close(ch.out);
    close(ch.err);
    tdir_remove(&d);
}

/* True when every thread of `pid` is in state S (interruptible sleep). */
static bool all_threads_sleeping(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *dp = opendir(dir);
    if (!dp)
        return false;
    bool all = true;
    int n = 0;
    struct dirent *e;
    while (all && (e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[400], buf[512];
        snprintf(p, sizeof(p), "%s/%s/stat", dir, e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = 0;
        const char *rp = strrchr(buf, ')'); /* the state follows "(comm) " */
        all = rp && rp[1] == ' ' && rp[2] == 'S';
        n++;
    }
    closedir(dp);
    return all && n > 1;
}

Test(reader_pipes, qflow_lines_on_an_idle_fifo_exits_promptly_on_sigterm)
{
    tdir d;
    tdir_make(&d);
    const char *f = make_fifo(&d, "idle");
    const char *argv[] = {"qflow-lines", f, NULL};
    child ch = spawn_lines(argv);
    /* Blocking open: returns once qflow-lines' reader has opened the FIFO. */
    int w = open(f, O_WRONLY | O_CLOEXEC);
    cr_assert_geq(w, 0);
    wrs(w, "first\n");
    /* Every thread of qflow-lines asleep: the reader has taken "first" and
     * now waits on the idle FIFO (output is buffered, so nothing shows on
     * its stdout yet). */
    qf_deadline dl = soon();
    while (!all_threads_sleeping(ch.pid))
        cr_assert_not(qf_deadline_passed(dl), "qflow-lines never went idle");
    int64_t t0 = qf_now_ns();
    kill(ch.pid, SIGTERM);
    int st = wait_child(ch.pid, qf_deadline_in_s(20));
    if (st < 0)
        kill(ch.pid, SIGKILL);
    cr_assert_geq(st, 0, "qflow-lines still alive 20 s after SIGTERM");
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %d", st);
    cr_log_info("SIGTERM to exit: %.1f ms", (double)(qf_now_ns() - t0) / 1e6);
    close(w);
    close(ch.out);
    close(ch.err);
    tdir_remove(&d);
}

Test(reader_pipes, qflow_lines_warns_when_a_file_shrinks_while_read)
{
    tdir d;
    tdir_make(&d);
    /* 40 MB of lines; qflow-lines' output is not read until the file has
     * been cut to 20 MB, so back-pressure (the stdout pipe, the bounded
     * queues and read buffers: a few MB) keeps the reader far from 20 MB. */
    const char *p = tpath(&d, "big");
    FILE *fp = fopen(p, "w");
    cr_assert_not_null(fp);
    char line[101];
    memset(line, 'x', 99);
    line[99] = '\n';
    line[100] = 0;
    for (int i = 0; i < 400000; i++)
        fputs(line, fp);
    fclose(fp);
    const char *argv[] = {"qflow-lines", "--readers", "1", p, NULL};
    child ch = spawn_lines(argv);
    char buf[100];
    cr_assert_eq(read(ch.out, buf, sizeof(buf)), (ssize_t)sizeof(buf)); /* it has the file open */
    cr_assert_eq(truncate(p, 20000050), 0);                             /* mid-line */
    size_t n, en;
    char *out = drain(ch.out, &n);
    char *err = drain(ch.err, &en);
    int st = wait_child(ch.pid, soon());
    cr_expect(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    cr_expect(has(err, "warning: '"), "stderr: %s", err);
    cr_expect(has(err, "shrank while being read: 40000000 bytes at open"), "stderr: %s", err);
    cr_expect_eq(n + sizeof(buf), 20000050 + 1, "every byte up to the cut, plus the newline");
    free(out);
    free(err);
    close(ch.out);
    close(ch.err);
    tdir_remove(&d);
}
