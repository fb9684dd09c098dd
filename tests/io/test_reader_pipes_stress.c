/* test_reader_pipes_stress.c - many readers on many named pipes, on an
 * oversubscribed 2-worker runtime: writers trickle lines in random chunks
 * (a line split anywhere, pauses between chunks), and in some rounds a
 * Coordinator stop lands at a random moment.
 *
 * Without a stop every line of every FIFO arrives exactly once; with one,
 * join returns without laggards and every task is done. Writers never wait
 * forever: they open non-blocking and give up when the round is stopped,
 * and SIGPIPE is ignored so a stopped reader's pipe fails their write.
 * Bounded in count (QF_STRESS_SCALE divides the rounds and lines) and by a
 * watchdog deadline per wait.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>

#include "qf_test_io.h"
#include "qf_test_stress.h"

#define FIFOS 16
#define READERS 8

typedef struct round_ctx {
    const char *fifo[FIFOS];
    long lines;
    atomic_bool stopped;
    unsigned seed;
} round_ctx;

typedef struct writer {
    round_ctx *rc;
    int id;
    unsigned seed;
} writer;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static void *write_fifo(void *p)
{
    writer *w = p;
    round_ctx *rc = w->rc;
    int fd = -1;
    qf_deadline dl = qf_deadline_in_s(60);
    while (fd < 0) { /* ENXIO until a reader has it open */
        if (atomic_load(&rc->stopped) || qf_deadline_passed(dl))
            return NULL;
        fd = open(rc->fifo[w->id], O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            sched_yield();
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    char buf[64 * 1024];
    size_t n = 0;
    for (long i = 0; i < rc->lines; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%d:%ld\n", w->id, i);
    size_t off = 0;
    while (off < n && !atomic_load(&rc->stopped)) {
        size_t c = 1 + rnd(&w->seed) % 97;
        if (c > n - off)
            c = n - off;
        ssize_t r = write(fd, buf + off, c);
        if (r <= 0)
            break; /* EPIPE: the reader went away (a stop) */
        off += (size_t)r;
        if (rnd(&w->seed) % 4 == 0)
            sched_yield();
    }
    close(fd);
    return NULL;
}

static void run_round(const tdir *d, int round, bool stop, unsigned seed)
{
    round_ctx rc = {.lines = qft_stress_scale(400, 1), .seed = seed};
    atomic_init(&rc.stopped, false);
    for (int i = 0; i < FIFOS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "r%d_f%d", round, i);
        const char *p = tpath(d, name);
        cr_assert_eq(mkfifo(p, 0600), 0);
        rc.fifo[i] = strdup(p);
    }
    qf_runtime_options ro_rt = {.workers = 2, .name = "pstress"};
    qf_runtime *rt = NULL;
    OK(qf_runtime_new(&ro_rt, &rt));
    qf_scope *s = NULL;
    OK(qf_scope_new(&s));
    qf_coord *c = NULL;
    OK(qf_coord_new(NULL, 0, &c));
    qf_queue *files = work_queue_opts(FIFOS, true);
    for (int i = 0; i < FIFOS; i++)
        put(files, rc.fifo[i]);
    close_q(files);
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .buffer_bytes = 16 + seed % 200};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader_options(&ro, files, &src));
    qf_batch_options bo = {
        .num_threads = READERS, .capacity = 64, .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 16, &bo, &b));
    qf_task **tasks = NULL;
    size_t nt = 0;
    OK(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &tasks, &nt));
    pthread_t wt[FIFOS];
    writer w[FIFOS];
    for (int i = 0; i < FIFOS; i++) {
        w[i] = (writer){&rc, i, seed * 31u + (unsigned)i};
        cr_assert_eq(pthread_create(&wt[i], NULL, write_fifo, &w[i]), 0);
    }
    long total = FIFOS * rc.lines, got = 0;
    long stop_at = stop ? (long)(seed % (unsigned)total) : -1;
    char *seen = calloc((size_t)total, 1);
    qf_element *e = NULL;
    qf_code rc_next;
    while ((rc_next = qf_batcher_next_until(b, qf_deadline_in_s(60), &e)) == QF_OK) {
        const qf_tensor *v = qf_element_get(e, 1);
        for (int64_t i = 0; i < qf_tensor_num_elements(v); i++) {
            size_t n;
            const char *sv = qf_tensor_string(v, i, &n);
            int f = -1;
            long k = -1;
            cr_assert_eq(sscanf(sv, "%d:%ld", &f, &k), 2, "bad line %.*s", (int)n, sv);
            cr_assert(f >= 0 && f < FIFOS && k >= 0 && k < rc.lines);
            cr_assert_not(seen[f * rc.lines + k], "line %d:%ld twice", f, k);
            seen[f * rc.lines + k] = 1;
            got++;
        }
        qf_element_free(e);
        if (stop_at >= 0 && got >= stop_at)
            break;
    }
    if (stop_at < 0) {
        cr_expect_eq(rc_next, QF_OUT_OF_RANGE, "round %d: %s", round, qf_last_message());
        cr_expect_eq(got, total, "round %d: %ld of %ld lines", round, got, total);
    }
    atomic_store(&rc.stopped, true);
    qf_coord_request_stop(c, NULL);
    qf_queue_close(qf_batcher_queue(b), true); /* consumers gone: let enqueuers go */
    cr_expect_eq(qf_coord_join(c, NULL, 0, 30.0, false, NULL), QF_OK, "round %d: %s", round,
                 qf_last_message());
    for (size_t i = 0; i < nt; i++) {
        qf_task_join(tasks[i], qf_deadline_in_s(60), NULL);
        cr_expect(qf_task_is_done(tasks[i]), "round %d: task %s running", round,
                  qf_task_name(tasks[i]));
    }
    for (int i = 0; i < FIFOS; i++)
        pthread_join(wt[i], NULL);
    qf_tasks_free(tasks, nt);
    free(seen);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(files);
    for (int i = 0; i < FIFOS; i++) {
        unlink(rc.fifo[i]);
        free((void *)rc.fifo[i]);
    }
}

Test(reader_pipes_stress, many_readers_on_trickling_fifos_with_random_stops, .timeout = 600)
{
    signal(SIGPIPE, SIG_IGN);
    tdir d;
    tdir_make(&d);
    long rounds = qft_stress_scale(40, 1) < 4 ? 4 : qft_stress_scale(40, 1);
    for (long r = 0; r < rounds; r++)
        run_round(&d, (int)r, r % 2 == 1, 7919u * (unsigned)(r + 1));
    tdir_remove(&d);
}
