/* test_soak.c - a bounded soak (reliability suite): resident memory, file
 * descriptors and threads stay flat while pipelines run and churn.
 *
 * For QF_SOAK_SECONDS (default 30; .ci/run uses less under the sanitizers)
 * one process keeps:
 *   - a long-lived text pipeline: string_input_producer over a few files,
 *     forever (num_epochs 0) -> two TextLineReaders -> shuffle_batch -> a
 *     consumer thread that takes batches and keeps a fraction of them for a
 *     while (rows borrowed from the readers' buffers must come back);
 * and, round after round, builds and frees:
 *   - a chained pipeline (batch -> batch through pollers, blocking and task
 *     consumers) run to its end of data, every row counted;
 *   - a one-epoch reader pipeline over the same files (files opened and
 *     closed, every line counted);
 *   - shared queues in a private registry, a Coordinator with a looper and
 *     stop actions, a from_list.
 * After a warm-up (a quarter of the time) the process's resident set, open
 * descriptors and threads are sampled at the end of each round (when every
 * churned object is gone): descriptors and threads must equal the warm-up
 * values exactly, and the resident set may not grow beyond the warm-up
 * maximum by more than 10% + 16 MiB (not checked under AddressSanitizer or
 * ThreadSanitizer, whose quarantine and shadow memory grow by design). The
 * verdict and the samples' range are printed.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qflow.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(soak, .timeout = 900);
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ------------------------------------------------------------ the process */

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory itself */
}

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static long soak_seconds(void)
{
    const char *s = getenv("QF_SOAK_SECONDS");
    long v = s ? atol(s) : 0;
    return v > 0 ? v : 30;
}

/* ------------------------------------------------------------------ files */

#define N_FILES 4
#define LINES 3000

typedef struct files {
    char dir[64];
    char path[N_FILES][128];
    const char *names[N_FILES];
} files;

static void files_make(files *f)
{
    snprintf(f->dir, sizeof(f->dir), "/tmp/qf_soak_XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    for (int i = 0; i < N_FILES; i++) {
        snprintf(f->path[i], sizeof(f->path[i]), "%s/f%d.txt", f->dir, i);
        FILE *out = fopen(f->path[i], "w");
        cr_assert_not_null(out);
        for (int l = 0; l < LINES; l++)
            fprintf(out, "file %d line %d %.*s\n", i, l, l % 90,
                    "..........................."
                    "..........................."
                    "....................................");
        fclose(out);
        f->names[i] = f->path[i];
    }
}

static void files_remove(files *f)
{
    for (int i = 0; i < N_FILES; i++)
        unlink(f->path[i]);
    rmdir(f->dir);
}

/* ------------------------------------------------ the long-lived pipeline */

typedef struct forever {
    qf_scope *s;
    qf_coord *c;
    qf_batcher *b;
    qf_task **tasks;
    size_t nt;
    pthread_t consumer;
    atomic_long rows;
    atomic_bool stop;
    qf_code end;
} forever;

static void *forever_consume(void *arg)
{
    forever *fv = arg;
    qf_element *kept[8] = {0};
    unsigned k = 0;
    while (!atomic_load(&fv->stop)) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(fv->b, qf_deadline_in_s(30), &e);
        if (rc != QF_OK) {
            fv->end = rc;
            break;
        }
        atomic_fetch_add(&fv->rows, qf_tensor_shape(qf_element_get(e, 0))->dims[0]);
        /* Keep one batch in eight for a while: its rows pin reader buffers
         * that must go back to their pools when it is freed. */
        if (k % 8 == 0) {
            qf_element_free(kept[(k / 8) % 8]);
            kept[(k / 8) % 8] = e;
        } else {
            qf_element_free(e);
        }
        k++;
    }
    for (int i = 0; i < 8; i++)
        qf_element_free(kept[i]);
    return NULL;
}

static void forever_start(forever *fv, qf_runtime *rt, files *f)
{
    cr_assert_eq(qf_scope_new(&fv->s), QF_OK);
    cr_assert_eq(qf_coord_new(NULL, 0, &fv->c), QF_OK);
    qf_input_producer_options po = {.num_epochs = 0, .seed = 5, .name = "soak_files"};
    qf_queue *names = NULL;
    cr_assert_eq(qf_string_input_producer(fv->s, f->names, N_FILES, &po, &names), QF_OK);
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .buffer_bytes = 64 * 1024};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_reader_options(&ro, names, &src), QF_OK);
    qf_queue_unref(names);
    qf_batch_options bo = {.num_threads = 2,
                           .capacity = 2048,
                           .min_after_dequeue = 512,
                           .seed = 9,
                           .name = "soak_shuffle"};
    cr_assert_eq(qf_shuffle_batch(fv->s, src, 64, &bo, &fv->b), QF_OK, "%s", qf_last_message());
    cr_assert_eq(
        qf_start_queue_runners(rt, fv->c, fv->s, NULL, QF_RUNNER_START, &fv->tasks, &fv->nt),
        QF_OK);
    cr_assert_eq(pthread_create(&fv->consumer, NULL, forever_consume, fv), 0);
}

static void forever_stop(forever *fv)
{
    atomic_store(&fv->stop, true);
    qf_coord_request_stop(fv->c, NULL); /* the cancel ops close the queues */
    pthread_join(fv->consumer, NULL);
    cr_expect_eq(qf_coord_join(fv->c, NULL, 0, 30.0, false, NULL), QF_OK, "%s", qf_last_message());
    qf_tasks_free(fv->tasks, fv->nt);
    qf_batcher_free(fv->b);
    qf_coord_free(fv->c);
    qf_scope_free(fv->s);
}

/* ------------------------------------------------------------ churn rounds */

static const qf_dtype I64 = QF_INT64;

typedef struct counter {
    atomic_long next;
    long limit;
} counter;

static qf_code count_produce(void *arg, qf_element **ret)
{
    counter *c = arg;
    long v = atomic_fetch_add(&c->next, 1);
    if (v >= c->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "done");
    qf_tensor *t = qf_tensor_new_i64(v);
    *ret = qf_element_of(1, &t);
    return QF_OK;
}

typedef struct poll_src {
    pthread_mutex_t mu;
    qf_batcher *inner;
    qf_task *t[8];
    qf_batcher_poller *p[8];
    int n;
} poll_src;

static qf_code poll_inner(qf_task *t, void *arg, qf_element **ret)
{
    poll_src *ps = arg;
    qf_batcher_poller *p = NULL;
    pthread_mutex_lock(&ps->mu);
    for (int i = 0; i < ps->n && !p; i++)
        if (ps->t[i] == t)
            p = ps->p[i];
    if (!p && ps->n < 8 && qf_batcher_poller_new(ps->inner, &p) == QF_OK) {
        ps->t[ps->n] = t;
        ps->p[ps->n++] = p;
    }
    pthread_mutex_unlock(&ps->mu);
    if (!p)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "no poller");
    return qf_batcher_poll_next(p, qf_task_waker(t), ret);
}

typedef struct consumer {
    qf_batcher_poller *p;
    atomic_long *rows;
} consumer;

static qf_code consume_task(qf_task *t, void *arg)
{
    consumer *c = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_poll_next(c->p, qf_task_waker(t), &e);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc != QF_OK)
            return QF_OK;
        atomic_fetch_add(c->rows, qf_tensor_shape(qf_element_get(e, 0))->dims[0]);
        qf_element_free(e);
    }
}

/* batch(4) over 0..199 -> batch(enqueue_many, 3 tasks, 5, smaller) through
 * pollers -> a blocking consumer and a task: all 200 rows arrive. */
static void churn_chain(qf_runtime *rt)
{
    static const qf_shape sc = {0, {0}};
    qf_components comps = {.n = 1, .dtypes = &I64, .shapes = &sc};
    qf_scope *s = NULL;
    cr_assert_eq(qf_scope_new(&s), QF_OK);
    counter cnt = {.limit = 200};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_produce(&comps, count_produce, &cnt, &src), QF_OK);
    qf_batcher *inner = NULL, *outer = NULL;
    cr_assert_eq(qf_batch(s, src, 4, &(qf_batch_options){.num_threads = 2, .capacity = 16}, &inner),
                 QF_OK);
    poll_src ps = {.mu = PTHREAD_MUTEX_INITIALIZER, .inner = inner};
    cr_assert_eq(qf_batch_source_poll(&comps, poll_inner, &ps, &src), QF_OK);
    qf_batch_options o2 = {
        .num_threads = 3, .capacity = 16, .enqueue_many = true, .allow_smaller_final_batch = true};
    cr_assert_eq(qf_batch(s, src, 5, &o2, &outer), QF_OK);
    atomic_long rows = 0;
    consumer c = {.rows = &rows};
    cr_assert_eq(qf_batcher_poller_new(outer, &c.p), QF_OK);
    qf_task *ct = NULL;
    cr_assert_eq(qf_task_spawn(rt, consume_task, &c, NULL, &ct), QF_OK);
    qf_coord *co = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &co), QF_OK);
    qf_task **tasks = NULL;
    size_t nt = 0;
    cr_assert_eq(qf_start_queue_runners(rt, co, s, NULL, QF_RUNNER_START, &tasks, &nt), QF_OK);
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(outer, qf_deadline_in_s(30), &e);
        if (rc != QF_OK) {
            cr_assert_eq(rc, QF_OUT_OF_RANGE, "chain: %s", qf_last_message());
            break;
        }
        atomic_fetch_add(&rows, qf_tensor_shape(qf_element_get(e, 0))->dims[0]);
        qf_element_free(e);
    }
    cr_assert_eq(qf_task_join(ct, qf_deadline_in_s(30), NULL), QF_OK);
    cr_expect_eq(atomic_load(&rows), 200, "chain rows");
    cr_expect_eq(qf_coord_join(co, NULL, 0, 30.0, false, NULL), QF_OK);
    qf_batcher_poller_free(c.p);
    qf_task_unref(ct);
    for (int i = 0; i < ps.n; i++)
        qf_batcher_poller_free(ps.p[i]);
    qf_tasks_free(tasks, nt);
    qf_batcher_free(inner);
    qf_batcher_free(outer);
    qf_coord_free(co);
    qf_scope_free(s);
}

/* One epoch of the files through two readers: every line once. */
static void churn_readers(qf_runtime *rt, files *f)
{
    qf_scope *s = NULL;
    cr_assert_eq(qf_scope_new(&s), QF_OK);
    qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *names = NULL;
    cr_assert_eq(qf_string_input_producer(s, f->names, N_FILES, &po, &names), QF_OK);
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .buffer_bytes = 16 * 1024};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_reader_options(&ro, names, &src), QF_OK);
    qf_queue_unref(names);
    qf_batcher *b = NULL;
    qf_batch_options bo = {.num_threads = 2, .capacity = 256, .allow_smaller_final_batch = true};
    cr_assert_eq(qf_batch(s, src, 50, &bo, &b), QF_OK);
    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    qf_task **tasks = NULL;
    size_t nt = 0;
    cr_assert_eq(qf_start_queue_runners(rt, c, s, NULL, QF_RUNNER_START, &tasks, &nt), QF_OK);
    long rows = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, qf_deadline_in_s(30), &e);
        if (rc != QF_OK) {
            cr_assert_eq(rc, QF_OUT_OF_RANGE, "readers: %s", qf_last_message());
            break;
        }
        rows += qf_tensor_shape(qf_element_get(e, 0))->dims[0];
        qf_element_free(e);
    }
    cr_expect_eq(rows, (long)N_FILES * LINES, "reader rows");
    cr_expect_eq(qf_coord_join(c, NULL, 0, 30.0, false, NULL), QF_OK);
    qf_tasks_free(tasks, nt);
    qf_batcher_free(b);
    qf_coord_free(c);
    qf_scope_free(s);
}

static qf_code tick(void *arg)
{
    atomic_int *n = arg;
    atomic_fetch_add(n, 1);
    return QF_OK;
}

static void stopped(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* Shared queues, a from_list, a Coordinator with a looper and actions. */
static void churn_objects(qf_runtime *rt)
{
    qf_queue_registry *reg = NULL;
    cr_assert_eq(qf_queue_registry_new(&reg), QF_OK);
    static const qf_shape sc = {0, {0}};
    qf_queue_options o = {.capacity = 16,
                          .num_components = 1,
                          .dtypes = &I64,
                          .shapes = &sc,
                          .shared_name = "shared",
                          .registry = reg};
    qf_queue *a = NULL, *b = NULL, *p = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &a), QF_OK);
    cr_assert_eq(qf_fifo_queue_new(&o, &b), QF_OK);
    cr_expect_eq(a, b);
    o.shared_name = NULL;
    cr_assert_eq(qf_priority_queue_new(&o, &p), QF_OK);
    qf_queue_list *l = NULL;
    cr_assert_eq(qf_queue_list_new((qf_queue *[]){a, b}, 2, &l), QF_OK);
    for (int i = 0; i < 8; i++) {
        qf_tensor *t = qf_tensor_new_i64(i);
        cr_assert_eq(qf_queue_enqueue(a, qf_element_of(1, &t)), QF_OK);
    }
    qf_element *batch = NULL;
    cr_assert_eq(qf_queue_dequeue_many(b, 8, &batch), QF_OK);
    qf_element_free(batch);
    qf_queue_list_free(l);
    qf_queue_unref(a);
    qf_queue_unref(b);
    qf_queue_unref(p);
    cr_expect(qf_queue_registry_remove(reg, "shared"));
    qf_queue_registry_free(reg);

    qf_coord *c = NULL;
    cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
    atomic_int ticks = 0, actions = 0;
    qf_coord_action *act = NULL;
    cr_assert_eq(qf_coord_add_stop_action(c, stopped, &actions, &act), QF_OK);
    qf_task *lt = NULL;
    cr_assert_eq(qf_looper_start(rt, c, 0.001, tick, &ticks, NULL, &lt), QF_OK);
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 30.0, false, NULL), QF_OK);
    cr_expect_eq(atomic_load(&actions), 1);
    qf_coord_remove_stop_action(c, act);
    qf_task_join(lt, qf_deadline_in_s(30), NULL);
    qf_task_unref(lt);
    qf_coord_free(c);
}

/* --------------------------------------------------------------- the soak */

Test(soak, rss_fds_and_threads_stay_flat)
{
    files f;
    files_make(&f);
    qf_runtime *rt = NULL;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2, .name = "soak"}, &rt), QF_OK);
    forever fv = {0};
    forever_start(&fv, rt, &f);

    long secs = soak_seconds();
    int64_t t0 = qf_now_ns();
    int64_t warm_end = t0 + (int64_t)secs * 250000000;
    int64_t end = t0 + (int64_t)secs * 1000000000;
    long warm_rss = 0, min_rss = 0, max_rss = 0, rounds = 0, samples = 0;
    int warm_fds = -1, warm_threads = -1;
    bool warm = true;
    while (qf_now_ns() < end) {
        churn_chain(rt);
        churn_readers(rt, &f);
        churn_objects(rt);
        rounds++;
        long rss = rss_kib();
        int fds = open_fds(), th = threads_now();
        if (warm) {
            if (rss > warm_rss)
                warm_rss = rss;
            warm_fds = fds;
            warm_threads = th;
            if (qf_now_ns() >= warm_end) {
                warm = false;
                min_rss = max_rss = rss;
            }
            continue;
        }
        samples++;
        if (rss < min_rss)
            min_rss = rss;
        if (rss > max_rss)
            max_rss = rss;
        /* The long-lived pipeline's readers may have a file open when we
         * look: one descriptor either way is theirs. */
        cr_expect(fds <= warm_fds + 2 && fds >= warm_fds - 2,
                  "round %ld: %d descriptors open, %d after the warm-up", rounds, fds, warm_fds);
        cr_expect_eq(th, warm_threads, "round %ld: %d threads, %d after the warm-up", rounds, th,
                     warm_threads);
    }
    long lines = atomic_load(&fv.rows);
    forever_stop(&fv);
    cr_expect_eq(fv.end, QF_OK, "the long-lived consumer never saw an end: %s",
                 qf_code_name(fv.end));
    long limit = warm_rss + warm_rss / 10 + 16 * 1024;
    cr_log_info("soak: %ld s, %ld rounds, %ld samples, %ld lines through the long-lived pipeline; "
                "RSS warm-up max %ld KiB, then %ld..%ld KiB (limit %ld%s); fds %d, threads %d",
                secs, rounds, samples, lines, warm_rss, min_rss, max_rss, limit,
                SANITIZED ? ", not checked under a sanitizer" : "", warm_fds, warm_threads);
    printf("soak: %ld s, %ld rounds, %ld lines; RSS %ld KiB after warm-up, %ld..%ld KiB after; "
           "fds %d; threads %d\n",
           secs, rounds, lines, warm_rss, min_rss, max_rss, warm_fds, warm_threads);
    cr_expect_gt(samples, 0, "the soak ran past its warm-up");
    cr_expect_gt(lines, 0, "the long-lived pipeline moved lines");
    if (!SANITIZED)
        cr_expect_leq(max_rss, limit, "resident set grew from %ld KiB to %ld KiB", warm_rss,
                      max_rss);
    qf_runtime_free(rt);
    files_remove(&f);
}
