/* test_reader_runs.c - text pipelines since readers hand runs of lines to
 * batch queues (commits 83d8f56 and 09dfff0).
 *
 * A TextLineReader feeding qf_batch() / qf_shuffle_batch() no longer makes
 * one element per line: it hands runs of up to 256 whole lines of its read
 * buffer to the batch queue as row slots (queues/tensor/qf_strblock-impl.h), which
 * leave the queue as batches built straight from the rows, or as
 * materialized (key, value) elements wherever a single element leaves
 * (dequeue, try_dequeue, poll_dequeue, padded batches). Lines crossing the
 * end of the read buffer, and lines beyond a run's 64 KiB, take the
 * single-record path; other reader kinds but TFRecordReader
 * (test_tfrecord_runs.c) always do. These tests drive all
 * of it from the public API and compare every record with what the test
 * wrote (spec 183-198 for records and keys, 161-182 for batching):
 *
 *   - keys "<file>:<line>" (from 1, skipped header lines counted, spec
 *     190, 195), with line numbers growing a digit (9->10, 99->100,
 *     999->1000) inside and across runs, and file names of 300+ and 512+
 *     bytes (the materialized key is assembled on the stack up to 512);
 *   - values without '\n' and one '\r' before it (spec 191), empty lines
 *     (193), a last line without '\n' (192), a lone final '\r' (193),
 *     empty files (194), skip_header_lines (195-196);
 *   - lines longer than a run's byte bound, longer than the read buffer,
 *     and lines straddling buffer refills (default and tiny buffers);
 *   - rows mixed with user elements, padded and shuffled queues, single
 *     dequeues, pollers (task and thread waker), tear-down with rows in
 *     flight, and a FixedLengthRecordReader / IdentityReader source.
 *
 * Ordering comes from observable state (batches taken, queue sizes, joins,
 * closes); nothing sleeps, and every wait has a deadline only a broken run
 * reaches.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qf_queue_trusted-impl.h"
#include "qf_tensor-impl.h"
#include "qflow.h"
#define QFT_RT_NAME "runs"
#define QFT_SOON_S 60
#include "qf_test.h"

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(reader_runs, .timeout = 240);
#endif

#define OK(call)                                                                                   \
    do {                                                                                           \
        qf_code rc_ = (call);                                                                      \
        cr_assert_eq(rc_, QF_OK, "%s: %s (%s)", #call, qf_code_name(rc_), qf_last_message());      \
    } while (0)

/* ---------------------------------------------------------------- helpers */

/* Yield until the queue holds `want` elements (state, not time, orders the
 * test; the deadline only bounds a broken run). */
static void wait_size(qf_queue *q, int64_t want)
{
    qf_deadline d = soon();
    while (qf_queue_size(q) != want) {
        cr_assert_not(qf_deadline_passed(d), "queue size stuck at %lld, want %lld",
                      (long long)qf_queue_size(q), (long long)want);
        sched_yield();
    }
}

/* xorshift64*: reproducible contents. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* ------------------------------------------------------------- temp files
 *
 * A directory of its own per test; everything made in it is remembered in
 * order and removed in reverse (nested directories for long names).
 */
#define TDIR_MAX 64

typedef struct tdir {
    char root[128];
    char *made[TDIR_MAX];
    int n;
} tdir;

static void tdir_make(tdir *d)
{
    memset(d, 0, sizeof(*d));
    const char *base = getenv("TMPDIR");
    snprintf(d->root, sizeof(d->root), "%s/qf_runs_XXXXXX",
             base && strlen(base) < 64 ? base : "/tmp");
    cr_assert_not_null(mkdtemp(d->root), "mkdtemp: %s", strerror(errno));
}

static char *tdir_path(tdir *d, const char *rel)
{
    cr_assert_lt(d->n, TDIR_MAX);
    char *p = NULL;
    cr_assert_gt(asprintf(&p, "%s/%s", d->root, rel), 0);
    cr_assert_lt(strlen(p), (size_t)PATH_MAX);
    d->made[d->n++] = p;
    return p;
}

static const char *tdir_subdir(tdir *d, const char *rel)
{
    char *p = tdir_path(d, rel);
    cr_assert_eq(mkdir(p, 0700), 0, "mkdir %s: %s", p, strerror(errno));
    return p;
}

static void tdir_remove(tdir *d)
{
    for (int i = d->n; i-- > 0;) {
        if (unlink(d->made[i]) != 0)
            rmdir(d->made[i]);
        free(d->made[i]);
    }
    d->n = 0;
    rmdir(d->root);
}

/* A name component of n bytes (NAME_MAX is 255). */
static char *long_component(char c, size_t n)
{
    char *s = malloc(n + 1);
    cr_assert_not_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ------------------------------------------------------------- text files
 *
 * A tfile collects the bytes of a file and, line by line, the record the
 * TextLineReader must make of each line, following spec 191-193: a line
 * ended by "\n" loses one '\r' before it; a last segment without '\n'
 * loses one final '\r' and is a record only when something is left.
 */
typedef struct line {
    char *v;
    size_t len;
} line;

typedef struct tfile {
    char *path; /* owned by the tdir */
    size_t plen;
    char *bytes;
    size_t nbytes, bcap;
    line *lines; /* lines[l] is line number l + 1 */
    size_t nlines, lcap;
    int *seen;
    bool ended; /* a last segment without '\n' was added */
} tfile;

static tfile *tf_new(tdir *d, const char *rel)
{
    tfile *f = calloc(1, sizeof(*f));
    cr_assert_not_null(f);
    f->path = tdir_path(d, rel);
    f->plen = strlen(f->path);
    return f;
}

static void tf_bytes(tfile *f, const char *p, size_t n)
{
    if (f->nbytes + n > f->bcap) {
        size_t cap = f->bcap ? f->bcap : 4096;
        while (cap < f->nbytes + n)
            cap *= 2;
        f->bytes = realloc(f->bytes, cap);
        cr_assert_not_null(f->bytes);
        f->bcap = cap;
    }
    if (n)
        memcpy(f->bytes + f->nbytes, p, n);
    f->nbytes += n;
}

/* Add a line: `v` (no '\n') followed by `term`: "\n", "\r\n", or, for the
 * last segment of the file, "" or "\r". */
static void tf_add(tfile *f, const char *v, size_t len, const char *term)
{
    cr_assert_not(f->ended, "%s: nothing may follow the last segment", f->path);
    cr_assert_null(memchr(v, '\n', len));
    tf_bytes(f, v, len);
    tf_bytes(f, term, strlen(term));
    size_t want = len;
    bool eol = strcmp(term, "\n") == 0 || strcmp(term, "\r\n") == 0;
    if (strcmp(term, "\n") == 0 && want && v[want - 1] == '\r')
        want--; /* spec 191: one '\r' right before the '\n' goes */
    if (!eol) {
        f->ended = true;
        cr_assert(strcmp(term, "") == 0 || strcmp(term, "\r") == 0);
        if (strcmp(term, "") == 0 && want && v[want - 1] == '\r')
            want--;
        if (want == 0)
            return; /* spec 193: nothing left, no record */
    }
    if (f->nlines == f->lcap) {
        f->lcap = f->lcap ? 2 * f->lcap : 64;
        f->lines = realloc(f->lines, f->lcap * sizeof(*f->lines));
        cr_assert_not_null(f->lines);
    }
    char *c = malloc(want + 1);
    cr_assert_not_null(c);
    if (want)
        memcpy(c, v, want);
    c[want] = '\0';
    f->lines[f->nlines++] = (line){c, want};
}

static void tf_adds(tfile *f, const char *v, const char *term)
{
    tf_add(f, v, strlen(v), term);
}

/* Write the file; from here on the tfile only holds what it must yield. */
static void tf_write(tfile *f)
{
    FILE *fp = fopen(f->path, "wb");
    cr_assert_not_null(fp, "fopen %s: %s", f->path, strerror(errno));
    if (f->nbytes)
        cr_assert_eq(fwrite(f->bytes, 1, f->nbytes, fp), f->nbytes);
    cr_assert_eq(fclose(fp), 0);
    free(f->bytes);
    f->bytes = NULL;
    f->nbytes = f->bcap = 0;
    f->seen = calloc(f->nlines ? f->nlines : 1, sizeof(*f->seen));
    cr_assert_not_null(f->seen);
}

static void tf_free(tfile *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nlines; i++)
        free(f->lines[i].v);
    free(f->lines);
    free(f->bytes);
    free(f->seen);
    free(f);
}

/* A value of `len` bytes from a seed: letters and digits, and now and then
 * a '\r' or a NUL inside (both are kept, spec 191). */
static char *fill(uint64_t *seed, size_t len, bool odd_bytes)
{
    char *v = malloc(len + 1);
    cr_assert_not_null(v);
    static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789 -_.,;ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    for (size_t i = 0; i < len; i++) {
        uint64_t r = rnd(seed);
        v[i] = al[r % (sizeof(al) - 1)];
        if (odd_bytes && i + 1 < len && r % 997 == 0)
            v[i] = (r >> 20) & 1 ? '\r' : '\0';
    }
    v[len] = '\0';
    return v;
}

/* ------------------------------------------------------------------ model
 *
 * What the files must yield: each record seen `epochs` times exactly, none
 * made up. Records arrive as (key, value) bytes; the key must be exactly
 * "<path of a file of the test>:<decimal line number without leading
 * zeros>", and the value exactly what that line must give.
 */
#define MODEL_FILES 16

typedef struct user_el {
    char *k, *v;
    size_t klen, vlen;
    int seen;
} user_el;

typedef struct model {
    tfile *f[MODEL_FILES];
    int n;
    int64_t skip;
    int epochs;
    long records;
    long errors;
    /* user elements enqueued straight into the batch queue (test 6) */
    user_el *user;
    size_t nuser;
    /* order checks: the last line number seen per file (one reader, FIFO) */
    bool ordered;
    size_t last[MODEL_FILES];
    long last_user;
    /* rows by length (qf__queue_rows_by_length()): batches whose values
     * keep their ends in place, and whether the batch in hand does */
    bool bare;
    long kept_ends_batches;
    bool cur_kept;
} model;

static void model_add(model *m, tfile *f)
{
    cr_assert_lt(m->n, MODEL_FILES);
    tf_write(f);
    m->f[m->n++] = f;
}

static void model_reset(model *m, int64_t skip, int epochs)
{
    m->skip = skip;
    m->epochs = epochs ? epochs : 1;
    m->records = m->errors = 0;
    for (int i = 0; i < m->n; i++) {
        memset(m->f[i]->seen, 0, (m->f[i]->nlines ? m->f[i]->nlines : 1) * sizeof(int));
        m->last[i] = 0;
    }
    for (size_t u = 0; u < m->nuser; u++)
        m->user[u].seen = 0;
    m->last_user = -1;
}

static void model_free(model *m)
{
    for (int i = 0; i < m->n; i++)
        tf_free(m->f[i]);
    for (size_t u = 0; u < m->nuser; u++) {
        free(m->user[u].k);
        free(m->user[u].v);
    }
    free(m->user);
    memset(m, 0, sizeof(*m));
}

static long model_expected(const model *m)
{
    long n = 0;
    for (int i = 0; i < m->n; i++)
        for (size_t l = 0; l < m->f[i]->nlines; l++)
            n += (int64_t)l + 1 > m->skip;
    return n * m->epochs + (long)m->nuser;
}

static void names_of(const model *m, const char **out)
{
    for (int i = 0; i < m->n; i++)
        out[i] = m->f[i]->path;
}

/* printf arguments for the first 60 bytes of p[0..n) */
#define SHOW(p, n) (int)((n) < 60 ? (n) : 60), (p)

static void model_error(model *m, const char *why, const char *k, size_t kl, const char *v,
                        size_t vl)
{
    /* keys end with what matters: show their last 60 bytes */
    const char *kt = kl > 60 ? k + kl - 60 : k;
    if (m->errors++ < 8)
        cr_expect(0, "%s: key \"%s%.*s\" (%zu bytes), value \"%.*s\"%s (%zu bytes)", why,
                  kl > 60 ? "..." : "", SHOW(kt, kl), kl, SHOW(v, vl), vl > 60 ? "..." : "", vl);
}

/* One record. */
static void model_record(model *m, const char *k, size_t kl, const char *v, size_t vl)
{
    m->records++;
    /* A value that keeps its end in place is followed by its line's '\n'
     * or "\r\n"; every other string is NUL-terminated. */
    bool v_ok = m->cur_kept ? vl == 0 || v[vl] == '\n' || (v[vl] == '\r' && v[vl + 1] == '\n')
                            : v[vl] == '\0';
    if (k[kl] != '\0' || !v_ok)
        model_error(m,
                    m->cur_kept ? "a kept end that is not the line's"
                                : "a string that is not NUL-terminated",
                    k, kl, v, vl);
    for (size_t u = 0; u < m->nuser; u++) {
        user_el *ue = &m->user[u];
        if (ue->klen == kl && ue->vlen == vl && memcmp(ue->k, k, kl) == 0 &&
            memcmp(ue->v, v, vl) == 0) {
            ue->seen++;
            if (m->ordered && (long)u <= m->last_user)
                model_error(m, "user element out of order", k, kl, v, vl);
            m->last_user = (long)u;
            return;
        }
    }
    const char *colon = memrchr(k, ':', kl);
    if (!colon || colon + 1 == k + kl || (colon[1] == '0')) {
        model_error(m, "no \":<line>\" at the end of the key", k, kl, v, vl);
        return;
    }
    size_t ln = 0;
    for (const char *p = colon + 1; p < k + kl; p++) {
        if (*p < '0' || *p > '9' || ln > SIZE_MAX / 20) {
            model_error(m, "a line number that is not a decimal number", k, kl, v, vl);
            return;
        }
        ln = ln * 10 + (size_t)(*p - '0');
    }
    size_t plen = (size_t)(colon - k);
    int fi = -1;
    for (int i = 0; i < m->n; i++)
        if (m->f[i]->plen == plen && memcmp(m->f[i]->path, k, plen) == 0)
            fi = i;
    if (fi < 0) {
        model_error(m, "the key names no file of the test", k, kl, v, vl);
        return;
    }
    tfile *f = m->f[fi];
    if ((int64_t)ln <= m->skip) {
        model_error(m, "a skipped header line came through", k, kl, v, vl);
        return;
    }
    if (ln > f->nlines) {
        model_error(m, "a line number past the end of the file", k, kl, v, vl);
        return;
    }
    const line *want = &f->lines[ln - 1];
    if (want->len != vl || memcmp(want->v, v, vl) != 0) {
        if (m->errors < 8)
            cr_expect(0, "%s:%zu: expected \"%.*s\" (%zu bytes)", f->path, ln,
                      SHOW(want->v, want->len), want->len);
        model_error(m, "wrong value", k, kl, v, vl);
        return;
    }
    if (m->ordered && ln <= m->last[fi])
        model_error(m, "line out of order for one reader and a FIFO queue", k, kl, v, vl);
    m->last[fi] = ln;
    f->seen[ln - 1]++;
}

/* Every record seen `epochs` times (user elements once), nothing else. */
static void model_verify(model *m)
{
    long bad = 0;
    for (int i = 0; i < m->n; i++) {
        tfile *f = m->f[i];
        for (size_t l = 0; l < f->nlines; l++) {
            int want = (int64_t)l + 1 > m->skip ? m->epochs : 0;
            if (f->seen[l] != want && bad++ < 8)
                cr_expect(0, "%s:%zu seen %d times, expected %d", f->path, l + 1, f->seen[l], want);
        }
    }
    for (size_t u = 0; u < m->nuser; u++)
        if (m->user[u].seen != 1 && bad++ < 8)
            cr_expect(0, "user element %zu seen %d times", u, m->user[u].seen);
    cr_expect_eq(bad, 0, "%ld records seen a wrong number of times", bad);
    cr_expect_eq(m->errors, 0, "%ld records were wrong", m->errors);
    cr_expect_eq(m->records, model_expected(m));
}

static const char *str_of(const qf_tensor *t, int64_t i, size_t *len)
{
    const char *s = qf_tensor_string(t, i, len);
    cr_assert_not_null(s, "%s", qf_last_message());
    return s;
}

/* A batch: two [k] string tensors. Returns k. */
static int64_t model_batch(model *m, const qf_element *e)
{
    cr_assert_eq(qf_element_size(e), 2);
    const qf_tensor *k = qf_element_get(e, 0), *v = qf_element_get(e, 1);
    cr_assert_not_null(k);
    cr_assert_not_null(v);
    cr_assert_eq(qf_tensor_dtype(k), QF_STRING);
    cr_assert_eq(qf_tensor_dtype(v), QF_STRING);
    cr_assert_eq(qf_tensor_shape(k)->rank, 1);
    cr_assert_eq(qf_tensor_shape(v)->rank, 1);
    int64_t n = qf_tensor_shape(k)->dims[0];
    cr_assert_eq(qf_tensor_shape(v)->dims[0], n);
    m->cur_kept = qf__strings_keep_ends(v);
    cr_expect(m->bare || !m->cur_kept, "ends kept in place without qf__queue_rows_by_length()");
    m->kept_ends_batches += m->cur_kept;
    for (int64_t i = 0; i < n; i++) {
        size_t kl, vl;
        const char *ks = str_of(k, i, &kl);
        const char *vs = str_of(v, i, &vl);
        model_record(m, ks, kl, vs, vl);
    }
    m->cur_kept = false;
    return n;
}

/* A single (key, value) element: two scalar strings. */
static void model_single(model *m, const qf_element *e)
{
    cr_assert_eq(qf_element_size(e), 2);
    const qf_tensor *k = qf_element_get(e, 0), *v = qf_element_get(e, 1);
    cr_assert_not_null(k);
    cr_assert_not_null(v);
    cr_assert_eq(qf_tensor_dtype(k), QF_STRING);
    cr_assert_eq(qf_tensor_dtype(v), QF_STRING);
    cr_assert_eq(qf_tensor_shape(k)->rank, 0, "a single element has scalar components");
    cr_assert_eq(qf_tensor_shape(v)->rank, 0);
    size_t kl, vl;
    const char *ks = str_of(k, 0, &kl);
    const char *vs = str_of(v, 0, &vl);
    model_record(m, ks, kl, vs, vl);
}

/* --------------------------------------------------------------- the files */

/* Spec 190-195 in one set of files. */
static void make_text_files(tdir *d, model *m)
{
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    /* 1200 lines: line numbers grow 9->10, 99->100, 999->1000 inside runs;
     * CRLF, empty lines, '\r' inside lines, a last line without '\n'. */
    tfile *f = tf_new(d, "basic.txt");
    for (int l = 1; l <= 1200; l++) {
        char v[128];
        int n = snprintf(v, sizeof(v), "b%d-", l);
        size_t extra = (size_t)(l * 7 % 50);
        char *x = fill(&seed, extra, false);
        memcpy(v + n, x, extra);
        free(x);
        size_t len = (size_t)n + extra;
        if (l % 17 == 0)
            v[1] = '\r'; /* inside: kept */
        if (l % 13 == 0)
            len = 0; /* empty line */
        const char *term = l % 5 == 0 ? "\r\n" : "\n";
        if (l == 600) { /* "v\r" + "\r\n": only one '\r' goes */
            memcpy(v, "v\r", 2);
            len = 2;
            term = "\r\n";
        }
        if (l == 1200)
            term = ""; /* spec 192 */
        tf_add(f, v, len, term);
    }
    model_add(m, f);

    model_add(m, tf_new(d, "empty.txt")); /* spec 194 */

    f = tf_new(d, "only_newline.txt"); /* spec 193: one "" record, key :1 */
    tf_adds(f, "", "\n");
    model_add(m, f);

    f = tf_new(d, "crlf.txt"); /* spec 191 */
    for (int l = 0; l < 30; l++) {
        char v[32];
        snprintf(v, sizeof(v), "%d: %d", 3, l);
        tf_adds(f, v, "\r\n");
    }
    model_add(m, f);

    /* A file name of 300+ bytes: nested directories (NAME_MAX is 255). */
    char *c1 = long_component('a', 200), *c2 = long_component('b', 120);
    char rel[1024];
    snprintf(rel, sizeof(rel), "%s", c1);
    tdir_subdir(d, rel);
    snprintf(rel, sizeof(rel), "%s/%s.txt", c1, c2);
    f = tf_new(d, rel);
    cr_assert_gt(f->plen, 300);
    cr_assert_lt(f->plen, 512);
    for (int l = 0; l < 70; l++) {
        char v[32];
        snprintf(v, sizeof(v), "long-name %d", l);
        tf_adds(f, v, "\n");
    }
    tf_adds(f, "last", "\r"); /* "last\r" at the end: spec 191 */
    model_add(m, f);

    /* 512+ bytes: the key of a materialized row no longer fits the stack
     * buffer qf__slot_element() assembles it in. */
    char *c3 = long_component('c', 250), *c4 = long_component('d', 250);
    snprintf(rel, sizeof(rel), "%s/%s", c1, c3);
    tdir_subdir(d, rel);
    snprintf(rel, sizeof(rel), "%s/%s/%s.txt", c1, c3, c4);
    f = tf_new(d, rel);
    cr_assert_gt(f->plen, 700);
    for (int l = 0; l < 150; l++) {
        char v[32];
        snprintf(v, sizeof(v), "longer-name %d", l);
        tf_adds(f, v, l % 3 ? "\n" : "\r\n");
    }
    model_add(m, f);
    free(c1);
    free(c2);
    free(c3);
    free(c4);

    f = tf_new(d, "colon:name.txt"); /* spec 193: "a\n\nb" */
    tf_adds(f, "a", "\n");
    tf_adds(f, "", "\n");
    tf_adds(f, "b", "");
    model_add(m, f);

    f = tf_new(d, "cr_tail.txt"); /* spec 193: a last lone '\r' is no record */
    tf_adds(f, "x", "\n");
    tf_adds(f, "", "\r");
    model_add(m, f);

    f = tf_new(d, "blank.txt"); /* 150 empty lines: an arena with no bytes */
    for (int l = 0; l < 150; l++)
        tf_adds(f, "", l % 2 ? "\n" : "\r\n");
    model_add(m, f);
}

/* Lines longer than a run's 64 KiB and than the read buffer, and runs cut
 * by the byte bound. */
static tfile *make_long_lines(tdir *d, const char *name)
{
    uint64_t seed = 12345;
    tfile *f = tf_new(d, name);
    static const size_t lens[] = {70000, 5,    65536, 65535, 65537, 0,      66000, 4097,
                                  4096,  4095, 1,     64000, 1500,  300000, 7,     1 << 20};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char *v = fill(&seed, lens[i], true);
        if (lens[i] && v[lens[i] - 1] == '\r')
            v[lens[i] - 1] = 'r';
        tf_add(f, v, lens[i], i % 3 == 1 ? "\r\n" : "\n");
        free(v);
        /* between them, lines of ~3 KiB: 21 of them fill a run's 64 KiB */
        for (int k = 0; k < 40; k++) {
            size_t len = 2500 + (size_t)(rnd(&seed) % 1500);
            v = fill(&seed, len, false);
            tf_add(f, v, len, k % 4 == 0 ? "\r\n" : "\n");
            free(v);
        }
    }
    char *v = fill(&seed, 100000, false); /* a long last line without '\n' */
    tf_add(f, v, 100000, "");
    free(v);
    return f;
}

/* About `bytes` of lines of varied lengths: mostly short, some of a few
 * KiB, now and then tens of KiB; CRLF and empty lines mixed in. */
static tfile *make_varied(tdir *d, const char *name, size_t bytes, uint64_t seed)
{
    tfile *f = tf_new(d, name);
    size_t total = 0;
    while (total < bytes) {
        uint64_t r = rnd(&seed) % 1000;
        size_t len = r < 700   ? (size_t)(rnd(&seed) % 120)
                     : r < 950 ? 120 + (size_t)(rnd(&seed) % 3000)
                     : r < 995 ? 3000 + (size_t)(rnd(&seed) % 20000)
                               : 40000 + (size_t)(rnd(&seed) % 60000);
        if (r % 31 == 0)
            len = 0;
        char *v = fill(&seed, len, true);
        if (len && v[len - 1] == '\r')
            v[len - 1] = 'r';
        tf_add(f, v, len, r % 10 == 0 ? "\r\n" : "\n");
        free(v);
        total += len + 1;
    }
    return f;
}

/* --------------------------------------------------------------- pipelines */

typedef struct popts {
    int threads;   /* reader tasks (options source); 0: one qf_reader made here */
    int64_t skip;  /* skip_header_lines */
    size_t buffer; /* reader buffer; 0: QF_READER_DEFAULT_BUFFER */
    int64_t batch;
    int64_t capacity;
    bool pad;     /* dynamic_pad: a PaddingFIFOQueue */
    bool shuffle; /* shuffle_batch */
    bool exact;   /* no allow_smaller_final_batch */
    int64_t min_after, seed;
    int workers;
    int epochs;
    const char *shared_name;
    bool bare; /* qf__queue_rows_by_length() on the batch queue */
} popts;

typedef struct pline {
    qf_reader *reader; /* the one reader (threads == 0), owned by the source */
    qf_runtime *rt;
    qf_scope *s;
    qf_coord *c;
    qf_queue *files;
    qf_batcher *b;
    started st;
} pline;

/* string_input_producer (no shuffle) -> TextLineReader source -> batch. */
static void pipe_build(pline *p, const model *m, const popts *o, bool with_coord)
{
    memset(p, 0, sizeof(*p));
    p->rt = mkrt(o->workers ? o->workers : 2);
    p->s = mkscope();
    p->c = with_coord ? mkcoord() : NULL;
    const char *names[MODEL_FILES];
    names_of(m, names);
    qf_input_producer_options po = {.num_epochs = o->epochs ? o->epochs : 1,
                                    .shuffle = QF_SHUFFLE_OFF};
    OK(qf_string_input_producer(p->s, names, (size_t)m->n, &po, &p->files));
    qf_reader_options ro = {
        .kind = QF_READER_TEXT_LINE, .skip_header_lines = o->skip, .buffer_bytes = o->buffer};
    qf_batch_source *src = NULL;
    if (o->threads == 0) {
        qf_reader *r = NULL;
        OK(qf_reader_new(&ro, &r));
        OK(qf_batch_source_reader(r, p->files, &src));
        p->reader = r;
    } else {
        OK(qf_batch_source_reader_options(&ro, p->files, &src));
    }
    qf_batch_options bo = {.num_threads = o->threads ? o->threads : 1,
                           .capacity = o->capacity,
                           .dynamic_pad = o->pad,
                           .allow_smaller_final_batch = !o->exact,
                           .min_after_dequeue = o->min_after,
                           .seed = o->seed,
                           .shared_name = o->shared_name};
    if (o->shuffle)
        OK(qf_shuffle_batch(p->s, src, o->batch, &bo, &p->b));
    else
        OK(qf_batch(p->s, src, o->batch, &bo, &p->b));
    if (o->bare)
        qf__queue_rows_by_length(qf_batcher_queue(p->b));
    qf_queue_kind want = o->shuffle ? QF_QUEUE_RANDOM_SHUFFLE
                         : o->pad   ? QF_QUEUE_PADDING_FIFO
                                    : QF_QUEUE_FIFO;
    cr_assert_eq(qf_queue_get_kind(qf_batcher_queue(p->b)), want);
}

static void pipe_start(pline *p)
{
    p->st = start(p->rt, p->c, p->s);
}

/* After the end: everything retired cleanly; free it all. */
static void pipe_finish(pline *p)
{
    if (p->c) {
        qf_coord_request_stop(p->c, NULL);
        cr_expect_eq(qf_coord_join(p->c, NULL, 0, 10.0, false, NULL), QF_OK, "%s",
                     qf_last_message());
    }
    join_all(&p->st);
    qf_batcher_free(p->b);
    qf_runtime_free(p->rt);
    qf_coord_free(p->c);
    qf_scope_free(p->s);
    qf_queue_unref(p->files);
    memset(p, 0, sizeof(*p));
}

/* Take batches until OUT_OF_RANGE; only the last may be short. Returns the
 * number of batches. */
static long drain_batches(model *m, qf_batcher *b, int64_t batch)
{
    long batches = 0;
    bool short_seen = false;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        int64_t n = model_batch(m, e);
        qf_element_free(e);
        cr_expect_not(short_seen, "only the final batch may be short");
        cr_expect(n >= 1 && n <= batch, "a batch of %" PRId64, n);
        short_seen = n < batch;
        batches++;
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_batcher_try_next(b, &e), QF_OUT_OF_RANGE, "the end stays the end");
    return batches;
}

static void run_text_pipeline(model *m, const popts *o)
{
    model_reset(m, o->skip, o->epochs);
    m->ordered = o->threads <= 1 && !o->shuffle && m->epochs == 1;
    m->bare = o->bare;
    m->kept_ends_batches = 0;
    pline p;
    pipe_build(&p, m, o, true);
    pipe_start(&p);
    long batches = drain_batches(m, p.b, o->batch);
    long want = model_expected(m);
    cr_expect_eq(batches, (want + o->batch - 1) / o->batch);
    if (p.reader) {
        /* spec 186: the counters see every record of the run path, and
         * every file (empty ones too) as a finished work unit */
        join_all(&p.st);
        cr_expect_eq(qf_reader_num_records_produced(p.reader), want);
        cr_expect_eq(qf_reader_num_work_units_completed(p.reader), (int64_t)m->n * m->epochs);
    }
    pipe_finish(&p);
    model_verify(m);
    m->ordered = false;
}

/* ======================================================== 1. text files */

Test(reader_runs, spec_190_195_text_files_one_reader_every_line_once)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    /* one qf_reader (qf_batch_source_reader), then one reader made from
     * options: each line exactly once, in file order */
    run_text_pipeline(&m, &(popts){.threads = 0, .batch = 64});
    run_text_pipeline(&m, &(popts){.threads = 1, .batch = 64});
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_190_195_text_files_four_readers_every_line_once)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    run_text_pipeline(&m, &(popts){.threads = 4, .batch = 64});
    run_text_pipeline(&m, &(popts){.threads = 4, .batch = 64, .workers = 4, .capacity = 16});
    /* two epochs: every line twice */
    run_text_pipeline(&m, &(popts){.threads = 4, .batch = 64, .epochs = 2});
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_195_196_skip_header_lines_two_counts_the_skipped_lines)
{
    /* keys start at ":3"; files shorter than two lines give nothing */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    run_text_pipeline(&m, &(popts){.threads = 0, .skip = 2, .batch = 64});
    run_text_pipeline(&m, &(popts){.threads = 4, .skip = 2, .batch = 64});
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_190_193_small_read_buffers_cut_runs_everywhere)
{
    /* With buffers of 16, 61 and 200 bytes most lines cross a refill (the
     * single-record path) and runs start at every kind of line number:
     * the digit growth of the keys is checked wherever a run begins. */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    static const size_t bufs[] = {16, 61, 200};
    for (size_t i = 0; i < 3; i++) {
        run_text_pipeline(&m, &(popts){.threads = 0, .buffer = bufs[i], .batch = 64});
        run_text_pipeline(&m, &(popts){.threads = 4, .buffer = bufs[i], .batch = 64, .skip = 2});
    }
    model_free(&m);
    tdir_remove(&d);
}

/* A line ending at every offset of a read block (issue 29): line lengths
 * 0, 1, 2, ... up past twice the block, so the '\n's (and the '\r's of
 * CRLF endings) fall on every byte of a block, on both sides of a refill,
 * with empty lines, lines longer than the block and a last line without
 * '\n'. Values and keys must equal the file's, line by line, in order. */
Test(reader_runs, spec_190_193_a_line_ends_at_every_offset_of_a_read_block)
{
    static const size_t bufs[] = {16, 17, 64, 4096};
    for (size_t b = 0; b < sizeof(bufs) / sizeof(bufs[0]); b++) {
        tdir d;
        tdir_make(&d);
        model m = {0};
        tfile *f = tf_new(&d, "offsets.txt");
        size_t top = 2 * bufs[b] + 3 > 300 ? 300 : 2 * bufs[b] + 3;
        char v[300];
        for (int round = 0; round < 3; round++)
            for (size_t len = 0; len <= top; len++) {
                for (size_t i = 0; i < len; i++)
                    v[i] = (char)('a' + (i * 7 + len + (size_t)round) % 26);
                tf_add(f, v, len, (len + (size_t)round) % 3 == 0 ? "\r\n" : "\n");
                if (len % 5 == 0)
                    tf_add(f, "", 0, "\n"); /* an empty line */
            }
        tf_add(f, "end", 3, ""); /* no '\n' at the end */
        model_add(&m, f);
        run_text_pipeline(&m, &(popts){.threads = 0, .buffer = bufs[b], .batch = 64});
        run_text_pipeline(&m, &(popts){.threads = 1, .buffer = bufs[b], .batch = 1000});
        /* The readers leave each line's end in place (qflow-lines): the
         * same values, now followed by their "\n" or "\r\n"; batches of
         * reader rows alone keep them (with a 4096-byte buffer most do). */
        run_text_pipeline(&m, &(popts){.threads = 1, .buffer = bufs[b], .batch = 64, .bare = true});
        if (bufs[b] == 4096)
            cr_expect_gt(m.kept_ends_batches, 0, "no batch kept its values' ends");
        run_text_pipeline(&m,
                          &(popts){.threads = 0, .buffer = bufs[b], .batch = 1000, .bare = true});
        model_free(&m);
        tdir_remove(&d);
    }
}

/* Dense line ends: runs of empty, one-byte and two-byte lines put 17 to 64
 * '\n's in one 64-byte block (the splitter's wide forms write 16 positions
 * a block unconditionally and go on past that only for denser blocks),
 * each run shifted by a lead line of 0..63 bytes so the dense stretches
 * start at every alignment; CRLF ends among them. */
Test(reader_runs, spec_190_191_up_to_64_line_ends_in_one_block)
{
    static const size_t bufs[] = {4096, 0};
    for (size_t b = 0; b < sizeof(bufs) / sizeof(bufs[0]); b++) {
        tdir d;
        tdir_make(&d);
        model m = {0};
        tfile *f = tf_new(&d, "dense.txt");
        char v[64];
        memset(v, 'x', sizeof(v));
        for (size_t lead = 0; lead < 64; lead++) {
            tf_add(f, v, lead, "\n");
            size_t width = lead % 3; /* 0, 1 or 2 bytes a line */
            for (size_t i = 0; i < 700; i++)
                tf_add(f, v, width, (i + lead) % 23 == 0 ? "\r\n" : "\n");
        }
        model_add(&m, f);
        run_text_pipeline(&m, &(popts){.threads = 0, .buffer = bufs[b], .batch = 64});
        /* A queue with room for whole rounds of rows (QF__ROWS_MAX a
         * call), so the positions past the 32nd of a block are used. */
        run_text_pipeline(
            &m, &(popts){.threads = 1, .buffer = bufs[b], .batch = 1000, .capacity = 20000});
        run_text_pipeline(
            &m, &(popts){
                    .threads = 1, .buffer = bufs[b], .batch = 64, .capacity = 20000, .bare = true});
        model_free(&m);
        tdir_remove(&d);
    }
}

/* =========================================== 2. long lines, buffer refills */

Test(reader_runs, spec_190_lines_over_64k_and_over_the_read_buffer_exactly)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    model_add(&m, make_long_lines(&d, "long.txt"));
    run_text_pipeline(&m, &(popts){.threads = 0, .batch = 64});
    run_text_pipeline(&m, &(popts){.threads = 1, .batch = 7, .capacity = 10});
    /* a buffer smaller than most lines: nearly everything is assembled */
    run_text_pipeline(&m, &(popts){.threads = 1, .buffer = 4096, .batch = 64});
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_190_191_megabytes_of_varied_lines_straddle_refills)
{
    /* ~5 MiB in three files: the default 256 KiB buffer is refilled about
     * twenty times, each time with a line straddling the boundary */
    tdir d;
    tdir_make(&d);
    model m = {0};
    model_add(&m, make_varied(&d, "varied0.txt", 3u << 20, 1));
    model_add(&m, make_varied(&d, "varied1.txt", 1u << 20, 2));
    model_add(&m, make_long_lines(&d, "long.txt"));
    model_add(&m, make_varied(&d, "varied2.txt", 1u << 20, 3));
    run_text_pipeline(&m, &(popts){.threads = 0, .batch = 64});
    run_text_pipeline(&m, &(popts){.threads = 4, .batch = 64, .capacity = 100});
    run_text_pipeline(&m, &(popts){.threads = 2, .buffer = 1000, .batch = 33});
    run_text_pipeline(&m, &(popts){.threads = 3, .batch = 1000, .capacity = 300});
    model_free(&m);
    tdir_remove(&d);
}

/* ======================================= 3. single dequeues from the queue */

/* Files for the single-element tests: short lines, a name over 512 bytes,
 * and lines over 4 KiB (elements whose strings do not fit one block). */
static void make_mixed_files(tdir *d, model *m)
{
    uint64_t seed = 99;
    tfile *f = tf_new(d, "short.txt");
    for (int l = 1; l <= 300; l++) {
        char v[64];
        snprintf(v, sizeof(v), "s%d", l);
        tf_add(f, v, l % 11 == 0 ? 0 : strlen(v), l % 4 == 0 ? "\r\n" : "\n");
    }
    model_add(m, f);
    char *c1 = long_component('e', 250), *c2 = long_component('f', 250),
         *c3 = long_component('g', 60);
    char rel[1024];
    snprintf(rel, sizeof(rel), "%s", c1);
    tdir_subdir(d, rel);
    snprintf(rel, sizeof(rel), "%s/%s", c1, c2);
    tdir_subdir(d, rel);
    snprintf(rel, sizeof(rel), "%s/%s/%s:%s.txt", c1, c2, c3, "x");
    f = tf_new(d, rel);
    cr_assert_gt(f->plen, 512);
    for (int l = 1; l <= 120; l++) {
        char v[64];
        snprintf(v, sizeof(v), "deep %d", l);
        tf_adds(f, v, "\n");
    }
    model_add(m, f);
    free(c1);
    free(c2);
    free(c3);
    f = tf_new(d, "big.txt");
    static const size_t lens[] = {10, 4096, 4097, 5000, 70000, 3, 0, 8000, 12};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char *v = fill(&seed, lens[i], true);
        if (lens[i] && v[lens[i] - 1] == '\r')
            v[lens[i] - 1] = 'r';
        tf_add(f, v, lens[i], "\n");
        free(v);
    }
    model_add(m, f);
}

Test(reader_runs, spec_183_single_dequeues_from_the_batch_queue_materialize_rows)
{
    /* qf_queue_dequeue / try / until on qf_batcher_queue(b), interleaved
     * with qf_batcher_next and dequeue_up_to: every record once */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_mixed_files(&d, &m);
    for (int round = 0; round < 2; round++) {
        popts o = {.threads = round ? 3 : 0, .batch = 7, .capacity = 64};
        model_reset(&m, 0, 1);
        m.ordered = round == 0;
        pline p;
        pipe_build(&p, &m, &o, true);
        qf_queue *q = qf_batcher_queue(p.b);
        pipe_start(&p);
        long singles = 0, batches = 0;
        for (long i = 0;; i++) {
            qf_element *e = NULL;
            qf_code rc;
            bool single = true;
            switch (i % 6) {
            case 0:
                rc = qf_batcher_next_until(p.b, soon(), &e);
                single = false;
                break;
            case 1:
                rc = qf_queue_dequeue_until(q, soon(), &e);
                break;
            case 2:
                /* the only consumer: what size counts can be taken now */
                if (qf_queue_size(q) > 0) {
                    rc = qf_queue_try_dequeue(q, &e);
                    cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
                } else {
                    rc = qf_queue_dequeue_until(q, soon(), &e);
                }
                break;
            case 3:
                rc = qf_queue_dequeue(q, &e);
                break;
            case 4:
                rc = qf_queue_dequeue_up_to_until(q, 3, soon(), &e);
                single = false;
                break;
            default:
                rc = qf_queue_try_dequeue(q, &e);
                if (rc == QF_UNAVAILABLE)
                    continue;
                break;
            }
            if (rc == QF_OUT_OF_RANGE)
                break;
            cr_assert_eq(rc, QF_OK, "step %ld: %s: %s", i, qf_code_name(rc), qf_last_message());
            if (single) {
                model_single(&m, e);
                singles++;
            } else {
                model_batch(&m, e);
                batches++;
            }
            qf_element_free(e);
        }
        qf_element *e = NULL;
        cr_expect_eq(qf_queue_try_dequeue(q, &e), QF_OUT_OF_RANGE);
        cr_expect_eq(qf_batcher_try_next(p.b, &e), QF_OUT_OF_RANGE);
        cr_expect_gt(singles, 0);
        cr_expect_gt(batches, 0);
        pipe_finish(&p);
        model_verify(&m);
        m.ordered = false;
    }
    model_free(&m);
    tdir_remove(&d);
}

/* ==================================================== 4. dynamic_pad = true */

Test(reader_runs, spec_167_dynamic_pad_batches_reader_rows)
{
    /* a PaddingFIFOQueue takes reader rows on the general stacking path */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_mixed_files(&d, &m);
    run_text_pipeline(&m, &(popts){.threads = 0, .pad = true, .batch = 64});
    run_text_pipeline(&m, &(popts){.threads = 4, .pad = true, .batch = 10, .capacity = 16});
    run_text_pipeline(&m, &(popts){.threads = 2, .pad = true, .batch = 5, .buffer = 61, .skip = 2});
    model_free(&m);
    tdir_remove(&d);
}

/* ========================================================= 5. shuffle_batch */

Test(reader_runs, spec_179_180_shuffle_batch_of_reader_rows_every_line_once)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_mixed_files(&d, &m);
    run_text_pipeline(&m, &(popts){.threads = 0,
                                   .shuffle = true,
                                   .batch = 32,
                                   .capacity = 200,
                                   .min_after = 50,
                                   .seed = 7});
    run_text_pipeline(&m, &(popts){.threads = 3,
                                   .shuffle = true,
                                   .batch = 10,
                                   .capacity = 32,
                                   .min_after = 16,
                                   .seed = 141421,
                                   .buffer = 200});
    model_free(&m);
    tdir_remove(&d);
}

/* ================================= 6. user elements mixed with reader rows */

static void add_user(model *m, const char *k, size_t kl, const char *v, size_t vl)
{
    m->user = realloc(m->user, (m->nuser + 1) * sizeof(*m->user));
    cr_assert_not_null(m->user);
    user_el *u = &m->user[m->nuser++];
    u->k = malloc(kl + 1);
    u->v = malloc(vl + 1);
    cr_assert(u->k && u->v);
    memcpy(u->k, k, kl);
    memcpy(u->v, v, vl);
    u->k[kl] = u->v[vl] = '\0';
    u->klen = kl;
    u->vlen = vl;
    u->seen = 0;
}

static qf_element *user_element(const user_el *u)
{
    qf_tensor *t[2] = {qf_tensor_new_string(u->k, u->klen), qf_tensor_new_string(u->v, u->vlen)};
    cr_assert(t[0] && t[1]);
    qf_element *e = qf_element_of(2, t);
    cr_assert_not_null(e);
    return e;
}

typedef struct user_feeder {
    qf_queue *q;     /* the batch queue */
    qf_queue *files; /* closed when every user element is in */
    const model *m;
    size_t from;
    _Atomic int rc;
} user_feeder;

static void *feed_users(void *arg)
{
    user_feeder *uf = arg;
    int rc = QF_OK;
    for (size_t u = uf->from; u < uf->m->nuser && rc == QF_OK; u++) {
        qf_element *e = user_element(&uf->m->user[u]);
        rc = qf_queue_enqueue_until(uf->q, e, soon());
        if (rc != QF_OK)
            qf_element_free(e);
    }
    /* the reader's input ends only now, so the batch queue is still open
     * for every user element above */
    qf_queue_close(uf->files, false);
    atomic_store(&uf->rc, rc);
    return NULL;
}

static void mixed_user_elements(qf_queue_kind kind)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    uint64_t seed = 5;
    tfile *f = tf_new(&d, "mix.txt");
    for (int l = 1; l <= 400; l++) {
        char v[64];
        snprintf(v, sizeof(v), "mix %d", l);
        tf_add(f, v, l % 9 == 0 ? 0 : strlen(v), "\n");
    }
    model_add(&m, f);
    /* user elements: ordinary, empty strings, and strings of 5 KB and
     * 70 KB (outside a single allocation block) */
    for (int u = 0; u < 41; u++) {
        char k[32];
        int kl = snprintf(k, sizeof(k), "user:%d", u);
        size_t vl = u % 10 == 3 ? 5000 : u % 10 == 7 ? 70000 : (size_t)(u % 5) * 3;
        char *v = fill(&seed, vl, true);
        add_user(&m, k, u == 4 ? 0 : (size_t)kl, v, vl);
        free(v);
    }
    model_reset(&m, 0, 1);
    m.ordered = kind != QF_QUEUE_RANDOM_SHUFFLE; /* one reader, one user thread */

    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    /* the file-name queue is the test's, so the reader's input (and with it
     * the batch queue) ends only when the user thread closes it */
    qf_dtype dt = QF_STRING;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options fo = {.capacity = 4, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *files = NULL;
    OK(qf_fifo_queue_new(&fo, &files));
    qf_tensor *fname = qf_tensor_new_cstr(f->path);
    OK(qf_queue_enqueue(files, qf_element_of(1, &fname)));
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader_options(&ro, files, &src));
    enum { BATCH = 5 };
    qf_batch_options bo = {.capacity = 16,
                           .dynamic_pad = kind == QF_QUEUE_PADDING_FIFO,
                           .allow_smaller_final_batch = true,
                           .min_after_dequeue = 4,
                           .seed = 11};
    qf_batcher *b = NULL;
    if (kind == QF_QUEUE_RANDOM_SHUFFLE)
        OK(qf_shuffle_batch(s, src, BATCH, &bo, &b));
    else
        OK(qf_batch(s, src, BATCH, &bo, &b));
    qf_queue *q = qf_batcher_queue(b);
    cr_assert_eq(qf_queue_get_kind(q), kind);
    /* user element 0 goes in before anything runs */
    OK(qf_queue_enqueue(q, user_element(&m.user[0])));
    /* a 1-component or wrongly typed element is refused, nothing changes */
    qf_tensor *one = qf_tensor_new_cstr("lonely");
    qf_element *bad = qf_element_of(1, &one);
    cr_expect_eq(qf_queue_try_enqueue(q, bad), QF_INVALID_ARGUMENT);
    qf_element_free(bad);
    qf_tensor *wrong[2] = {qf_tensor_new_cstr("k"), qf_tensor_new_i64(3)};
    bad = qf_element_of(2, wrong);
    cr_expect_eq(qf_queue_try_enqueue(q, bad), QF_INVALID_ARGUMENT);
    qf_element_free(bad);
    cr_expect_eq(qf_queue_size(q), 1);

    started st = start(rt, NULL, s);
    long mixed = 0, batches = 0;
    qf_element *e = NULL;
    if (kind != QF_QUEUE_RANDOM_SHUFFLE) {
        /* the first batch: user element 0, then lines 1..4 in order */
        OK(qf_batcher_next_until(b, soon(), &e));
        cr_assert_eq(qf_tensor_shape(qf_element_get(e, 0))->dims[0], BATCH);
        size_t kl, vl;
        const char *k0 = str_of(qf_element_get(e, 0), 0, &kl);
        const char *v0 = str_of(qf_element_get(e, 1), 0, &vl);
        cr_expect(kl == m.user[0].klen && memcmp(k0, m.user[0].k, kl) == 0, "first key %.*s",
                  SHOW(k0, kl));
        cr_expect(vl == m.user[0].vlen && memcmp(v0, m.user[0].v, vl) == 0);
        for (int i = 1; i < BATCH; i++) {
            char want[1100];
            snprintf(want, sizeof(want), "%s:%d", f->path, i);
            cr_expect_str_eq(str_of(qf_element_get(e, 0), i, NULL), want);
        }
        model_batch(&m, e);
        qf_element_free(e);
        mixed++;
        batches++;
    }
    user_feeder uf = {.q = q, .files = files, .m = &m, .from = 1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, feed_users, &uf), 0);
    bool short_seen = false;
    for (;;) {
        e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        long users_before = 0, users_after = 0;
        for (size_t u = 0; u < m.nuser; u++)
            users_before += m.user[u].seen;
        int64_t n = model_batch(&m, e);
        for (size_t u = 0; u < m.nuser; u++)
            users_after += m.user[u].seen;
        if (users_after > users_before && users_after - users_before < n)
            mixed++;
        cr_expect_not(short_seen, "only the final batch may be short");
        short_seen = n < BATCH;
        batches++;
        qf_element_free(e);
    }
    pthread_join(th, NULL);
    cr_expect_eq(atomic_load(&uf.rc), QF_OK, "user enqueue: %s", qf_code_name(atomic_load(&uf.rc)));
    cr_expect_eq(batches, (model_expected(&m) + BATCH - 1) / BATCH);
    if (kind != QF_QUEUE_RANDOM_SHUFFLE)
        cr_expect_geq(mixed, 1, "a batch holds reader rows and user elements");
    join_all(&st);
    model_verify(&m);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(files);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_162_user_elements_mixed_with_reader_rows_fifo)
{
    mixed_user_elements(QF_QUEUE_FIFO);
}

Test(reader_runs, spec_167_user_elements_mixed_with_reader_rows_padded)
{
    mixed_user_elements(QF_QUEUE_PADDING_FIFO);
}

Test(reader_runs, spec_179_user_elements_mixed_with_reader_rows_shuffled)
{
    mixed_user_elements(QF_QUEUE_RANDOM_SHUFFLE);
}

/* ============================================ 7. tear-down with rows in flight */

typedef enum teardown_how {
    TD_STOP,          /* Coordinator stop, join, free */
    TD_SHUTDOWN,      /* no Coordinator: the runtime's shutdown cancels the tasks */
    TD_BATCHER_FIRST, /* stop; free the batcher before the runtime and scope */
    TD_SCOPE_FIRST,   /* stop; free runtime and scope, the batcher last */
} teardown_how;

static void teardown_full(qf_queue_kind kind, teardown_how how, bool consume_some)
{
    /* Three files of 3000 lines, four readers, a batch queue of 8 that
     * nobody drains: the queue fills, every reader task parks holding the
     * rest of its run, and the file queue still has names. Then everything
     * is torn down without consuming (ASan checks that no run leaks). */
    tdir d;
    tdir_make(&d);
    model m = {0};
    for (int fi = 0; fi < 3; fi++) {
        char name[32];
        snprintf(name, sizeof(name), "td%d.txt", fi);
        tfile *f = tf_new(&d, name);
        for (int l = 0; l < 3000; l++) {
            char v[48];
            snprintf(v, sizeof(v), "file %d line %d", fi, l);
            tf_adds(f, v, "\n");
        }
        model_add(&m, f);
    }
    model_reset(&m, 0, 1);
    popts o = {.threads = 4,
               .batch = 4,
               .capacity = 8,
               .pad = kind == QF_QUEUE_PADDING_FIFO,
               .shuffle = kind == QF_QUEUE_RANDOM_SHUFFLE,
               .min_after = 2,
               .seed = 3};
    pline p;
    pipe_build(&p, &m, &o, how != TD_SHUTDOWN);
    qf_queue *q = qf_batcher_queue(p.b);
    pipe_start(&p);
    wait_size(q, 8);
    if (consume_some) {
        /* a row materialized out of a run, a batch, and the queue full
         * again: rows of one run now live in three places */
        qf_element *e = NULL;
        OK(qf_queue_dequeue_until(q, soon(), &e));
        model_single(&m, e);
        qf_element_free(e);
        OK(qf_batcher_next_until(p.b, soon(), &e));
        model_batch(&m, e);
        qf_element_free(e);
        wait_size(q, 8);
        cr_expect_eq(m.errors, 0);
    }
    cr_expect_not(qf_queue_is_closed(q));
    switch (how) {
    case TD_STOP:
    case TD_BATCHER_FIRST:
    case TD_SCOPE_FIRST:
        /* the stop runs the cancel ops: both queues close with
         * cancel_pending_enqueues and the parked tasks end */
        OK(qf_coord_request_stop(p.c, NULL));
        cr_expect_eq(qf_coord_join(p.c, NULL, 0, 10.0, false, NULL), QF_OK, "%s",
                     qf_last_message());
        cr_expect(qf_queue_is_closed(q));
        join_all(&p.st);
        if (how == TD_BATCHER_FIRST) {
            qf_batcher_free(p.b);
            p.b = NULL;
        }
        qf_runtime_free(p.rt);
        qf_coord_free(p.c);
        if (how == TD_SCOPE_FIRST) {
            qf_scope_free(p.s);
            qf_queue_unref(p.files);
            /* the queue, its rows and the batcher outlive the scope */
            cr_expect_eq(qf_queue_size(q), 8);
            qf_batcher_free(p.b);
        } else {
            qf_batcher_free(p.b);
            qf_scope_free(p.s);
            qf_queue_unref(p.files);
        }
        break;
    case TD_SHUTDOWN:
        cr_expect_eq(qf_runtime_shutdown(p.rt, soon()), QF_OK);
        qf_tasks_free(p.st.t, p.st.n);
        qf_runtime_free(p.rt);
        qf_batcher_free(p.b);
        qf_scope_free(p.s);
        qf_queue_unref(p.files);
        break;
    }
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_134_stop_with_a_full_fifo_batch_queue_frees_every_run)
{
    teardown_full(QF_QUEUE_FIFO, TD_STOP, false);
    teardown_full(QF_QUEUE_FIFO, TD_STOP, true);
}

Test(reader_runs, spec_134_stop_with_full_padded_and_shuffle_queues)
{
    teardown_full(QF_QUEUE_PADDING_FIFO, TD_STOP, true);
    teardown_full(QF_QUEUE_RANDOM_SHUFFLE, TD_STOP, false);
}

Test(reader_runs, runtime_shutdown_with_rows_in_flight_frees_every_run)
{
    teardown_full(QF_QUEUE_FIFO, TD_SHUTDOWN, false);
    teardown_full(QF_QUEUE_FIFO, TD_SHUTDOWN, true);
    teardown_full(QF_QUEUE_RANDOM_SHUFFLE, TD_SHUTDOWN, true);
}

Test(reader_runs, batcher_or_scope_freed_first_with_rows_in_flight)
{
    teardown_full(QF_QUEUE_FIFO, TD_BATCHER_FIRST, true);
    teardown_full(QF_QUEUE_FIFO, TD_SCOPE_FIRST, true);
    teardown_full(QF_QUEUE_PADDING_FIFO, TD_SCOPE_FIRST, false);
}

Test(reader_runs, spec_163_a_closed_queue_of_rows_freed_undrained)
{
    /* every file read, the batch queue closed with rows left in it (the
     * remainder under batch_size, and whole batches nobody took) */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    popts o = {.threads = 2, .batch = 64, .capacity = 5000, .exact = true};
    pline p;
    pipe_build(&p, &m, &o, true);
    qf_queue *q = qf_batcher_queue(p.b);
    pipe_start(&p);
    join_all(&p.st); /* every runner retired: the queue is closed */
    cr_assert(qf_queue_is_closed(q));
    model_reset(&m, 0, 1);
    int64_t total = model_expected(&m);
    cr_expect_eq(qf_queue_size(q), total);
    qf_element *e = NULL;
    OK(qf_batcher_try_next(p.b, &e)); /* one batch of rows */
    cr_expect_eq(model_batch(&m, e), 64);
    qf_element_free(e);
    OK(qf_queue_try_dequeue(q, &e)); /* one materialized row */
    model_single(&m, e);
    qf_element_free(e);
    cr_expect_eq(m.errors, 0);
    cr_expect_eq(qf_queue_size(q), total - 65);
    pipe_finish(&p);
    model_free(&m);
    tdir_remove(&d);
}

/* ================================================================ 8. pollers */

typedef struct collector {
    qf_batcher_poller *p;
    qf_element **got;
    size_t n, cap;
    qf_code end;
} collector;

static void collect(collector *c, qf_element *e)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->got = realloc(c->got, c->cap * sizeof(*c->got));
    }
    if (c->got)
        c->got[c->n++] = e;
    else
        qf_element_free(e);
}

/* A consumer task: takes batches with the poll form until the end. The
 * checks run on the test thread after the join. */
static qf_code collect_task(qf_task *t, void *arg)
{
    collector *c = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_poll_next(c->p, qf_task_waker(t), &e);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc != QF_OK) {
            c->end = rc;
            return QF_OK;
        }
        collect(c, e);
    }
}

/* Check collected batches: only the last may be short (allow_smaller), or
 * all full. Returns the examples. */
static long check_collected(model *m, collector *c, int64_t batch, bool exact)
{
    long total = 0;
    cr_expect_eq(c->end, QF_OUT_OF_RANGE);
    for (size_t i = 0; i < c->n; i++) {
        int64_t n = model_batch(m, c->got[i]);
        if (exact || i + 1 < c->n)
            cr_expect_eq(n, batch, "batch %zu of %zu has %" PRId64, i, c->n, n);
        total += n;
        qf_element_free(c->got[i]);
    }
    free(c->got);
    c->got = NULL;
    c->n = c->cap = 0;
    return total;
}

static void poller_task_run(model *m, const popts *o)
{
    model_reset(m, o->skip, 1);
    m->ordered = o->threads <= 1;
    pline p;
    pipe_build(&p, m, o, true);
    collector c = {0};
    OK(qf_batcher_poller_new(p.b, &c.p));
    qf_task *ct = NULL;
    qf_task_options to = {.name = "collector"};
    OK(qf_task_spawn(p.rt, collect_task, &c, &to, &ct));
    pipe_start(&p);
    cr_assert_eq(qf_task_join(ct, soon(), NULL), QF_OK);
    qf_task_unref(ct);
    long total = check_collected(m, &c, o->batch, o->exact);
    qf_batcher_poller_free(c.p);
    pipe_finish(&p);
    long want = model_expected(m);
    if (!o->exact) {
        cr_expect_eq(total, want);
        model_verify(m);
    } else {
        /* spec 163: the held remainder is dropped; with one reader it is
         * the tail of the last file */
        cr_expect_eq(total, want / o->batch * o->batch);
        cr_expect_eq(m->errors, 0);
        long dropped = 0;
        for (int i = m->n; i-- > 0;) {
            tfile *f = m->f[i];
            for (size_t l = f->nlines; l-- > 0;) {
                bool tail = dropped < want % o->batch;
                cr_expect_eq(f->seen[l], tail ? 0 : 1, "%s:%zu", f->path, l + 1);
                dropped += tail;
            }
        }
    }
    m->ordered = false;
}

Test(reader_runs, spec_164_poller_task_takes_reader_batches)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_mixed_files(&d, &m);
    poller_task_run(&m, &(popts){.threads = 0, .batch = 10, .capacity = 12});
    poller_task_run(&m, &(popts){.threads = 3, .batch = 64, .buffer = 200});
    poller_task_run(&m, &(popts){.threads = 2, .batch = 9, .pad = true});
    poller_task_run(&m, &(popts){.threads = 0, .batch = 10, .exact = true});
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_164_poller_with_a_thread_waker)
{
    /* qf_batcher_poll_next from the test thread: QF_PENDING parks on a
     * thread waker, which the queue wakes */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_mixed_files(&d, &m);
    for (int round = 0; round < 2; round++) {
        popts o = {.threads = round ? 4 : 0, .batch = 16, .capacity = 20, .pad = round == 1};
        model_reset(&m, 0, 1);
        m.ordered = round == 0;
        pline p;
        pipe_build(&p, &m, &o, true);
        qf_batcher_poller *poller = NULL;
        OK(qf_batcher_poller_new(p.b, &poller));
        qf_waker w;
        qf_waker_init_thread(&w);
        qf_element *e = NULL;
        cr_expect_eq(qf_batcher_poll_next(poller, &w, &e), QF_PENDING, "nothing runs yet");
        pipe_start(&p);
        long total = 0, batches = 0;
        bool short_seen = false;
        for (;;) {
            if (qf_waker_state(&w) != QF_WAKER_IDLE) {
                /* the last poll left it registered: wait for the wake */
                cr_assert_eq(qf_waker_wait(&w, soon()), QF_OK, "the poller was never woken");
                qf_waker_init_thread(&w);
            }
            e = NULL;
            qf_code rc = qf_batcher_poll_next(poller, &w, &e);
            if (rc == QF_PENDING)
                continue;
            if (rc == QF_OUT_OF_RANGE)
                break;
            cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
            int64_t n = model_batch(&m, e);
            cr_expect_not(short_seen);
            short_seen = n < o.batch;
            total += n;
            batches++;
            qf_element_free(e);
        }
        cr_expect_eq(total, model_expected(&m));
        cr_expect_gt(batches, 1);
        /* The park and the wake are checked by the first poll (QF_PENDING
         * before the pipeline runs) and the first turn of the loop, which
         * waits for that wake. How often a later poll finds nothing
         * depends on the speeds of reader and consumer (under TSan the
         * readers can stay ahead all along), so it is not counted. */
        qf_batcher_poller_free(poller);
        pipe_finish(&p);
        model_verify(&m);
        m.ordered = false;
    }
    model_free(&m);
    tdir_remove(&d);
}

/* ===================================== 9. other readers: single records */

Test(reader_runs, spec_197_198_fixed_length_records_through_batch)
{
    /* header "HHHHH", 7 records of 3 bytes, footer "FF": record r of file
     * f is the digit (2f + r) three times, keys from 0 */
    tdir d;
    tdir_make(&d);
    const char *names[2];
    char *paths[2];
    for (int fi = 0; fi < 2; fi++) {
        char body[5 + 21 + 2 + 1];
        int n = snprintf(body, sizeof(body), "HHHHH");
        for (int r = 0; r < 7; r++)
            for (int k = 0; k < 3; k++)
                body[n++] = (char)('0' + 2 * fi + r);
        memcpy(body + n, "FF", 2);
        n += 2;
        char name[16];
        snprintf(name, sizeof(name), "fixed%d.bin", fi);
        paths[fi] = tdir_path(&d, name);
        names[fi] = paths[fi];
        FILE *fp = fopen(paths[fi], "wb");
        cr_assert_not_null(fp);
        cr_assert_eq(fwrite(body, 1, (size_t)n, fp), (size_t)n);
        fclose(fp);
    }
    for (int threads = 1; threads <= 2; threads++) {
        qf_runtime *rt = mkrt(2);
        qf_scope *s = mkscope();
        qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
        qf_queue *files = NULL;
        OK(qf_string_input_producer(s, names, 2, &po, &files));
        qf_reader_options ro = {.kind = QF_READER_FIXED_LENGTH_RECORD,
                                .record_bytes = 3,
                                .header_bytes = 5,
                                .footer_bytes = 2};
        qf_batch_source *src = NULL;
        OK(qf_batch_source_reader_options(&ro, files, &src));
        qf_batch_options bo = {.num_threads = threads, .allow_smaller_final_batch = true};
        qf_batcher *b = NULL;
        OK(qf_batch(s, src, 4, &bo, &b));
        started st = start(rt, NULL, s);
        int seen[2][7] = {{0}};
        int total = 0, batches = 0;
        for (;;) {
            qf_element *e = NULL;
            qf_code rc = qf_batcher_next_until(b, soon(), &e);
            if (rc == QF_OUT_OF_RANGE)
                break;
            cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
            const qf_tensor *k = qf_element_get(e, 0), *v = qf_element_get(e, 1);
            for (int64_t i = 0; i < qf_tensor_shape(k)->dims[0]; i++) {
                const char *ks = str_of(k, i, NULL);
                size_t vl;
                const char *vs = str_of(v, i, &vl);
                const char *colon = strrchr(ks, ':');
                cr_assert_not_null(colon);
                int fi = -1;
                for (int j = 0; j < 2; j++)
                    if ((size_t)(colon - ks) == strlen(paths[j]) &&
                        strncmp(ks, paths[j], strlen(paths[j])) == 0)
                        fi = j;
                cr_assert_geq(fi, 0, "key %s", ks);
                int r = atoi(colon + 1);
                cr_assert(r >= 0 && r < 7, "key %s", ks);
                char want[4];
                memset(want, '0' + 2 * fi + r, 3);
                want[3] = '\0';
                cr_expect_eq(vl, 3);
                cr_expect_str_eq(vs, want, "key %s", ks);
                seen[fi][r]++;
                total++;
            }
            batches++;
            qf_element_free(e);
        }
        cr_expect_eq(total, 14);
        cr_expect_eq(batches, 4);
        for (int fi = 0; fi < 2; fi++)
            for (int r = 0; r < 7; r++)
                cr_expect_eq(seen[fi][r], 1, "file %d record %d", fi, r);
        join_all(&st);
        qf_batcher_free(b);
        qf_runtime_free(rt);
        qf_scope_free(s);
        qf_queue_unref(files);
    }
    tdir_remove(&d);
}

Test(reader_runs, spec_188_identity_reader_through_batch_and_single_dequeue)
{
    /* key = value = the work string; single-record elements leave the
     * batch queue as they are */
    const char *work[] = {"A", "", "ccc", "DD:7", "eeeee"};
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options po = {.num_epochs = 2, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *files = NULL;
    OK(qf_string_input_producer(s, work, 5, &po, &files));
    qf_reader *r = NULL;
    OK(qf_identity_reader_new(&r));
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader(r, files, &src));
    qf_batch_options bo = {.allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 3, &bo, &b));
    started st = start(rt, NULL, s);
    qf_element *e = NULL;
    OK(qf_queue_dequeue_until(qf_batcher_queue(b), soon(), &e));
    cr_expect_str_eq(str_of(qf_element_get(e, 0), 0, NULL), "A");
    cr_expect_str_eq(str_of(qf_element_get(e, 1), 0, NULL), "A");
    qf_element_free(e);
    int i = 1;
    for (;;) {
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        const qf_tensor *k = qf_element_get(e, 0), *v = qf_element_get(e, 1);
        for (int64_t j = 0; j < qf_tensor_shape(k)->dims[0]; j++, i++) {
            cr_expect_str_eq(str_of(k, j, NULL), work[i % 5]);
            cr_expect_str_eq(str_of(v, j, NULL), work[i % 5]);
        }
        qf_element_free(e);
    }
    cr_expect_eq(i, 10);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(files);
}

/* ============================================================ more: fences */

typedef struct taker {
    qf_batcher *b;
    collector c;
} taker;

static void *take_all(void *arg)
{
    taker *t = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(t->b, soon(), &e);
        if (rc != QF_OK) {
            t->c.end = rc;
            return NULL;
        }
        collect(&t->c, e);
    }
}

static void park_heavy(const char *shared_name)
{
    /* A batch queue of 3 between four readers and three consumer threads:
     * both sides park all the time, so a lost wake (the batch queue pairs
     * full fences on both sides unless it is shared) ends in a deadline */
    tdir d;
    tdir_make(&d);
    model m = {0};
    model_add(&m, make_varied(&d, "p0.txt", 200000, 7));
    model_add(&m, make_varied(&d, "p1.txt", 200000, 8));
    tfile *f = tf_new(&d, "p2.txt");
    for (int l = 0; l < 20000; l++) {
        char v[32];
        snprintf(v, sizeof(v), "%d", l);
        tf_adds(f, v, "\n");
    }
    model_add(&m, f);
    model_reset(&m, 0, 1);
    popts o = {.threads = 4, .batch = 2, .capacity = 3, .buffer = 512, .shared_name = shared_name};
    pline p;
    pipe_build(&p, &m, &o, true);
    pipe_start(&p);
    taker t[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        t[i] = (taker){.b = p.b};
        cr_assert_eq(pthread_create(&th[i], NULL, take_all, &t[i]), 0);
    }
    long total = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(t[i].c.end, QF_OUT_OF_RANGE, "consumer %d: %s", i, qf_code_name(t[i].c.end));
        for (size_t j = 0; j < t[i].c.n; j++) {
            total += model_batch(&m, t[i].c.got[j]);
            qf_element_free(t[i].c.got[j]);
        }
        free(t[i].c.got);
    }
    pipe_finish(&p);
    cr_expect_eq(total, model_expected(&m));
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, both_sides_park_constantly_nothing_lost_or_duplicated)
{
    park_heavy(NULL);
}

Test(reader_runs, spec_170_shared_batch_queue_keeps_asymmetric_fences)
{
    park_heavy("runs_shared_batch");
}

/* ================================== more: rows given back, spilling queues */

static void remainder_goes_back(qf_queue_kind kind, int threads)
{
    /* spec 163 with dequeue_many: when the queue closes under a waiting
     * dequeue_many, the rows it gathered go back to the front (spec 36,
     * 55-56); single dequeues then take exactly the remainder */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    popts o = {.threads = threads,
               .batch = 64,
               .capacity = 100,
               .exact = true,
               .pad = kind == QF_QUEUE_PADDING_FIFO,
               .shuffle = kind == QF_QUEUE_RANDOM_SHUFFLE,
               .min_after = 10,
               .seed = 5};
    model_reset(&m, 0, 1);
    m.ordered = threads <= 1 && kind != QF_QUEUE_RANDOM_SHUFFLE;
    pline p;
    pipe_build(&p, &m, &o, true);
    qf_queue *q = qf_batcher_queue(p.b);
    pipe_start(&p);
    long want = model_expected(&m), batches = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(p.b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        cr_expect_eq(model_batch(&m, e), 64);
        qf_element_free(e);
        batches++;
    }
    cr_expect_eq(batches, want / 64);
    cr_expect(qf_queue_is_closed(q));
    cr_expect_eq(qf_queue_size(q), want % 64, "the remainder is back in the queue");
    for (long i = 0; i < want % 64; i++) {
        qf_element *e = NULL;
        OK(qf_queue_try_dequeue(q, &e));
        model_single(&m, e);
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_try_dequeue(q, &e), QF_OUT_OF_RANGE);
    pipe_finish(&p);
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_163_55_rows_gathered_by_dequeue_many_go_back_in_order)
{
    remainder_goes_back(QF_QUEUE_FIFO, 0);
    remainder_goes_back(QF_QUEUE_FIFO, 4);
    remainder_goes_back(QF_QUEUE_PADDING_FIFO, 0);
    remainder_goes_back(QF_QUEUE_RANDOM_SHUFFLE, 2);
}

Test(reader_runs, spec_38_48_a_timed_out_dequeue_gives_rows_back)
{
    /* the file-name queue is the test's: the batch queue stays open with
     * 100 rows; dequeue_many(150) and dequeue_up_to(50) time out and give
     * back what they gathered, in order */
    tdir d;
    tdir_make(&d);
    model m = {0};
    tfile *f = tf_new(&d, "back.txt");
    for (int l = 1; l <= 100; l++) {
        char v[32];
        snprintf(v, sizeof(v), "back %d", l);
        tf_adds(f, v, l % 7 ? "\n" : "\r\n");
    }
    model_add(&m, f);
    model_reset(&m, 0, 1);
    m.ordered = true;
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_dtype dt = QF_STRING;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options fo = {.capacity = 4, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *files = NULL;
    OK(qf_fifo_queue_new(&fo, &files));
    qf_tensor *fname = qf_tensor_new_cstr(f->path);
    OK(qf_queue_enqueue(files, qf_element_of(1, &fname)));
    qf_reader *r = NULL;
    OK(qf_text_line_reader_new(0, &r));
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader(r, files, &src));
    qf_batch_options bo = {.capacity = 200, .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 30, &bo, &b));
    qf_queue *q = qf_batcher_queue(b);
    started st = start(rt, NULL, s);
    wait_size(q, 100);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_many_until(q, 150, qf_deadline_in_s(0.02), &e),
                 QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_queue_size(q), 100);
    OK(qf_queue_dequeue_until(q, soon(), &e)); /* line 1, materialized */
    model_single(&m, e);
    qf_element_free(e);
    for (int i = 0; i < 3; i++) { /* lines 2..91 */
        OK(qf_batcher_next_until(b, soon(), &e));
        cr_expect_eq(model_batch(&m, e), 30);
        qf_element_free(e);
    }
    cr_expect_eq(qf_queue_dequeue_up_to_until(q, 50, qf_deadline_in_s(0.02), &e),
                 QF_DEADLINE_EXCEEDED, "open: up_to waits for 50");
    cr_expect_eq(qf_queue_size(q), 9);
    OK(qf_queue_close(files, false)); /* the reader ends, the batch queue closes */
    OK(qf_batcher_next_until(b, soon(), &e));
    cr_expect_eq(model_batch(&m, e), 9);
    qf_element_free(e);
    cr_expect_eq(qf_batcher_next_until(b, soon(), &e), QF_OUT_OF_RANGE);
    join_all(&st);
    model_verify(&m);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(files);
    model_free(&m);
    tdir_remove(&d);
}

static void make_numbered(tdir *d, model *m, int files, int lines)
{
    for (int fi = 0; fi < files; fi++) {
        char name[32];
        snprintf(name, sizeof(name), "n%d.txt", fi);
        tfile *f = tf_new(d, name);
        for (int l = 0; l < lines; l++) {
            char v[48];
            snprintf(v, sizeof(v), "file %d line %d", fi, l);
            tf_adds(f, v, "\n");
        }
        model_add(m, f);
    }
}

Test(reader_runs, unbounded_batch_queue_spills_rows_past_its_ring)
{
    /* capacity < 0: an unbounded queue, whose ring (4096 slots) spills
     * into an overflow list; 9000 rows from one reader keep their order */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_numbered(&d, &m, 3, 3000);
    for (int round = 0; round < 3; round++) {
        popts o = {.threads = round == 2 ? 4 : 0, .batch = 64, .capacity = -1};
        model_reset(&m, 0, 1);
        m.ordered = round < 2;
        pline p;
        pipe_build(&p, &m, &o, true);
        qf_queue *q = qf_batcher_queue(p.b);
        pipe_start(&p);
        if (round < 2) {
            join_all(&p.st); /* all 9000 rows are in the queue */
            cr_expect_eq(qf_queue_size(q), 9000);
        }
        if (round == 1) { /* freed undrained, after taking a few */
            qf_element *e = NULL;
            OK(qf_batcher_next_until(p.b, soon(), &e));
            model_batch(&m, e);
            qf_element_free(e);
            OK(qf_queue_dequeue_until(q, soon(), &e));
            model_single(&m, e);
            qf_element_free(e);
            cr_expect_eq(m.errors, 0);
            pipe_finish(&p);
            continue;
        }
        long batches = drain_batches(&m, p.b, 64);
        cr_expect_eq(batches, (9000 + 63) / 64);
        pipe_finish(&p);
        model_verify(&m);
    }
    model_free(&m);
    tdir_remove(&d);
}

/* ============================================ one batch over given files */

/* names -> string_input_producer (1 epoch, in order) -> a TextLineReader
 * source (`r`, or one reader per thread when r is NULL) -> batch, running
 * on 2 workers under a Coordinator. */
typedef struct simple {
    qf_runtime *rt;
    qf_scope *s;
    qf_coord *c;
    qf_queue *files;
    qf_batcher *b;
    started st;
} simple;

static void simple_start(simple *p, const char *const *names, size_t n, qf_reader *r,
                         const qf_batch_options *bo, int64_t batch)
{
    p->rt = mkrt(2);
    p->s = mkscope();
    p->c = mkcoord();
    qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
    OK(qf_string_input_producer(p->s, names, n, &po, &p->files));
    qf_batch_source *src = NULL;
    if (r) {
        OK(qf_batch_source_reader(r, p->files, &src));
    } else {
        qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
        OK(qf_batch_source_reader_options(&ro, p->files, &src));
    }
    OK(qf_batch(p->s, src, batch, bo, &p->b));
    p->st = start(p->rt, p->c, p->s);
}

/* Stop (when stop), join the Coordinator expecting `code`, free it all. */
static void simple_finish(simple *p, bool stop, qf_code code)
{
    if (stop)
        qf_coord_request_stop(p->c, NULL);
    cr_expect_eq(qf_coord_join(p->c, NULL, 0, 10.0, false, NULL), code, "%s", qf_last_message());
    join_all(&p->st);
    qf_batcher_free(p->b);
    qf_runtime_free(p->rt);
    qf_coord_free(p->c);
    qf_scope_free(p->s);
    qf_queue_unref(p->files);
}

/* ====================================== more: errors and a closed queue */

Test(reader_runs, spec_188_133_a_missing_file_stops_the_pipeline_without_leaks)
{
    /* the reader yields every line of the first file (its end returns them
     * early, spec 189), then fails on the missing one: an op error, so the
     * Coordinator stops and the batch queue closes (spec 133-134) */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_numbered(&d, &m, 2, 500);
    char *missing = tdir_path(&d, "missing.txt");
    const char *names[3] = {m.f[0]->path, missing, m.f[1]->path};
    qf_reader *r = NULL;
    OK(qf_text_line_reader_new(0, &r));
    qf_batch_options bo = {.capacity = 1000, .allow_smaller_final_batch = true};
    simple p;
    simple_start(&p, names, 3, r, &bo, 64);
    model_reset(&m, 0, 1);
    m.ordered = true;
    drain_batches(&m, p.b, 64);
    simple_finish(&p, false, QF_NOT_FOUND);
    cr_expect(strstr(qf_last_message(), "missing.txt") != NULL, "%s", qf_last_message());
    cr_expect_eq(m.errors, 0);
    for (int l = 0; l < 500; l++) {
        cr_expect_eq(m.f[0]->seen[l], 1, "first file, line %d", l + 1);
        cr_expect_eq(m.f[1]->seen[l], 0, "the file after the missing one is not read");
    }
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_31_closing_the_batch_queue_under_parked_readers)
{
    /* the test closes the batch queue while four readers are parked on it
     * holding runs: their enqueues fail ("is closed"), the Coordinator
     * stops, the rows already in drain, and the held ones are freed */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_numbered(&d, &m, 3, 3000);
    model_reset(&m, 0, 1);
    popts o = {.threads = 4, .batch = 4, .capacity = 8};
    pline p;
    pipe_build(&p, &m, &o, true);
    qf_queue *q = qf_batcher_queue(p.b);
    pipe_start(&p);
    wait_size(q, 8);
    OK(qf_queue_close(q, false));
    long batches = drain_batches(&m, p.b, 4);
    cr_expect_eq(batches, 2, "the 8 rows that were in");
    cr_expect_eq(m.errors, 0);
    qf_code jrc = qf_coord_join(p.c, NULL, 0, 10.0, false, NULL);
    cr_expect(jrc == QF_OK || jrc == QF_CANCELLED, "%s: %s", qf_code_name(jrc), qf_last_message());
    join_all(&p.st);
    qf_batcher_free(p.b);
    qf_runtime_free(p.rt);
    qf_coord_free(p.c);
    qf_scope_free(p.s);
    qf_queue_unref(p.files);
    model_free(&m);
    tdir_remove(&d);
}

/* ======================= more: sources around readers, batch tensors */

static atomic_long map_calls;

static qf_code map_identity(void *arg, qf_element *in, qf_element **ret_out)
{
    (void)arg;
    atomic_fetch_add(&map_calls, 1);
    *ret_out = in;
    return QF_OK;
}

/* Line number of a key "<file>:<n>". */
static long key_line(const qf_element *e, int64_t row)
{
    const qf_tensor *k = qf_element_get(e, 0);
    const char *s = qf_tensor_string(k, row, NULL);
    const char *colon = s ? strrchr(s, ':') : NULL;
    return colon ? atol(colon + 1) : -1;
}

static bool keep_even_lines(void *arg, const qf_element *example, int64_t row, size_t source)
{
    (void)arg;
    (void)source;
    return key_line(example, row) % 2 == 0;
}

Test(reader_runs, spec_172_map_and_keep_input_over_reader_sources)
{
    /* a map over a reader source, and maybe_batch with a keep function:
     * these pull single records (no runs) and must still see every line */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    for (int round = 0; round < 2; round++) {
        model_reset(&m, 0, 1);
        qf_runtime *rt = mkrt(2);
        qf_scope *s = mkscope();
        const char *names[MODEL_FILES];
        names_of(&m, names);
        qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
        qf_queue *files = NULL;
        OK(qf_string_input_producer(s, names, (size_t)m.n, &po, &files));
        qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .buffer_bytes = 100};
        qf_batch_source *src = NULL;
        OK(qf_batch_source_reader_options(&ro, files, &src));
        qf_batch_options bo = {.num_threads = 3, .allow_smaller_final_batch = true};
        qf_batcher *b = NULL;
        atomic_store(&map_calls, 0);
        if (round == 0) {
            qf_batch_source *mapped = NULL;
            OK(qf_batch_source_map(src, NULL, map_identity, NULL, &mapped));
            OK(qf_batch(s, mapped, 16, &bo, &b));
        } else {
            qf_keep_input keep = {.kind = QF_KEEP_FN, .fn = keep_even_lines};
            OK(qf_maybe_batch(s, src, &keep, 16, &bo, &b));
        }
        started st = start(rt, NULL, s);
        drain_batches(&m, b, 16);
        join_all(&st);
        cr_expect_eq(m.errors, 0);
        long bad = 0;
        for (int i = 0; i < m.n; i++)
            for (size_t l = 0; l < m.f[i]->nlines; l++) {
                int want = round == 0 || (l + 1) % 2 == 0;
                if (m.f[i]->seen[l] != want && bad++ < 8)
                    cr_expect(0, "%s:%zu seen %d times", m.f[i]->path, l + 1, m.f[i]->seen[l]);
            }
        cr_expect_eq(bad, 0);
        if (round == 0)
            cr_expect_eq(atomic_load(&map_calls), m.records, "one map call per record");
        qf_batcher_free(b);
        qf_runtime_free(rt);
        qf_scope_free(s);
        qf_queue_unref(files);
    }
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_173_181_batch_join_of_two_reader_sources)
{
    /* one op per source, each pulling runs, into one queue */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_numbered(&d, &m, 2, 2000);
    for (int round = 0; round < 2; round++) {
        model_reset(&m, 0, 1);
        qf_runtime *rt = mkrt(2);
        qf_scope *s = mkscope();
        const char *names[MODEL_FILES];
        names_of(&m, names);
        qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
        qf_queue *fa = NULL, *fb = NULL;
        size_t half = (size_t)m.n / 2;
        po.name = "files_a";
        OK(qf_string_input_producer(s, names, half, &po, &fa));
        po.name = "files_b";
        OK(qf_string_input_producer(s, names + half, (size_t)m.n - half, &po, &fb));
        qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
        qf_batch_source *srcs[2] = {NULL, NULL};
        OK(qf_batch_source_reader_options(&ro, fa, &srcs[0]));
        ro.buffer_bytes = 333;
        OK(qf_batch_source_reader_options(&ro, fb, &srcs[1]));
        qf_batch_options bo = {.capacity = 40,
                               .min_after_dequeue = 10,
                               .seed = 223607,
                               .allow_smaller_final_batch = true};
        qf_batcher *b = NULL;
        if (round == 0)
            OK(qf_batch_join(s, srcs, 2, 32, &bo, &b));
        else
            OK(qf_shuffle_batch_join(s, srcs, 2, 32, &bo, &b));
        started st = start(rt, NULL, s);
        long batches = drain_batches(&m, b, 32);
        cr_expect_eq(batches, (model_expected(&m) + 31) / 32);
        join_all(&st);
        model_verify(&m);
        qf_batcher_free(b);
        qf_runtime_free(rt);
        qf_scope_free(s);
        qf_queue_unref(fa);
        qf_queue_unref(fb);
    }
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, batches_built_from_rows_are_ordinary_string_tensors)
{
    /* copy, slice, unstack, restack and overwrite the tensors of a batch
     * built straight from rows (strings in the batch's arena) */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_mixed_files(&d, &m);
    model_reset(&m, 0, 1);
    popts o = {.threads = 0, .batch = 64, .capacity = 128};
    pline p;
    pipe_build(&p, &m, &o, true);
    pipe_start(&p);
    for (int n = 0; n < 40; n++) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(p.b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        model_batch(&m, e);
        for (size_t c = 0; c < 2; c++) {
            qf_tensor *t = qf_element_get(e, c);
            int64_t rows = qf_tensor_shape(t)->dims[0];
            qf_tensor *cp = qf_tensor_copy(t);
            cr_assert_not_null(cp);
            cr_expect(qf_tensor_equal(cp, t));
            qf_tensor **parts = calloc((size_t)rows, sizeof(*parts));
            cr_assert_not_null(parts);
            OK(qf_tensor_unstack(qf_tensor_ref(t), parts));
            for (int64_t i = 0; i < rows; i++) {
                qf_tensor *sl = qf_tensor_slice(t, i);
                cr_assert_not_null(sl);
                size_t a, b2;
                const char *x = str_of(parts[i], 0, &a), *y = str_of(t, i, &b2);
                cr_expect(a == b2 && memcmp(x, y, a) == 0, "row %" PRId64, i);
                cr_expect(qf_tensor_equal(sl, parts[i]));
                qf_tensor_unref(sl);
            }
            qf_tensor *re = NULL;
            OK(qf_tensor_stack(parts, (size_t)rows, QF_STRING, NULL, &re));
            cr_expect(qf_tensor_equal(re, cp));
            qf_tensor_unref(re);
            free(parts);
            /* the batch's own tensor: overwrite a row, then another */
            OK(qf_tensor_set_string(t, 0, "overwritten", 11));
            OK(qf_tensor_set_string(t, rows - 1, "", 0));
            cr_expect_str_eq(str_of(t, 0, NULL), "overwritten");
            cr_expect_str_eq(str_of(t, rows - 1, NULL), "");
            cr_expect_not(rows > 1 && qf_tensor_equal(cp, t));
            qf_tensor_unref(cp);
        }
        qf_element_free(e);
    }
    cr_expect_eq(m.errors, 0);
    /* the rest is freed with the queue */
    OK(qf_coord_request_stop(p.c, NULL));
    pipe_finish(&p);
    model_free(&m);
    tdir_remove(&d);
}

/* ================================================ more: boundaries, hosts */

Test(reader_runs, keys_of_511_512_513_bytes_materialize_exactly)
{
    /* qf__slot_element() assembles a key on the stack up to 512 bytes:
     * a path of 509 bytes gives keys of 511 (lines 1-9), 512 (10-99) and
     * 513 bytes (100-), materialized by single dequeues */
    tdir d;
    tdir_make(&d);
    model m = {0};
    char *c1 = long_component('h', 250);
    tdir_subdir(&d, c1);
    size_t used = strlen(d.root) + 1 + 250 + 1;
    cr_assert_lt(used, 509);
    size_t last = 509 - used;
    cr_assert(last >= 5 && last <= 255);
    char *c2 = long_component('i', last - 4);
    char rel[600];
    snprintf(rel, sizeof(rel), "%s/%s.txt", c1, c2);
    tfile *f = tf_new(&d, rel);
    cr_assert_eq(f->plen, 509);
    for (int l = 1; l <= 130; l++) {
        char v[32];
        snprintf(v, sizeof(v), "k%d", l);
        tf_adds(f, v, "\n");
    }
    model_add(&m, f);
    free(c1);
    free(c2);
    model_reset(&m, 0, 1);
    m.ordered = true;
    popts o = {.threads = 0, .batch = 10, .capacity = 200};
    pline p;
    pipe_build(&p, &m, &o, true);
    qf_queue *q = qf_batcher_queue(p.b);
    pipe_start(&p);
    for (int i = 0; i < 130; i++) {
        qf_element *e = NULL;
        if (i % 40 == 39) { /* now and then a batch of one: rows stacked */
            OK(qf_queue_dequeue_up_to_until(q, 1, soon(), &e));
            cr_expect_eq(model_batch(&m, e), 1);
        } else {
            OK(qf_queue_dequeue_until(q, soon(), &e));
            size_t kl;
            str_of(qf_element_get(e, 0), 0, &kl);
            cr_expect_eq(kl, i < 9 ? 511u : i < 99 ? 512u : 513u, "line %d", i + 1);
            model_single(&m, e);
        }
        qf_element_free(e);
    }
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, soon(), &e), QF_OUT_OF_RANGE);
    pipe_finish(&p);
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_164_three_pollers_share_a_batch_queue)
{
    /* several pollers each hold part of a batch; with
     * allow_smaller_final_batch each returns its part at the end, so
     * every record arrives exactly once */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    make_numbered(&d, &m, 2, 1500);
    model_reset(&m, 0, 1);
    popts o = {.threads = 3, .batch = 7, .capacity = 10, .buffer = 300};
    pline p;
    pipe_build(&p, &m, &o, true);
    collector c[3];
    qf_task *ct[3];
    for (int i = 0; i < 3; i++) {
        c[i] = (collector){0};
        OK(qf_batcher_poller_new(p.b, &c[i].p));
        qf_task_options to = {.name = "collector"};
        OK(qf_task_spawn(p.rt, collect_task, &c[i], &to, &ct[i]));
    }
    pipe_start(&p);
    long total = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(qf_task_join(ct[i], soon(), NULL), QF_OK);
        qf_task_unref(ct[i]);
        cr_expect_eq(c[i].end, QF_OUT_OF_RANGE);
        for (size_t j = 0; j < c[i].n; j++) {
            int64_t n = model_batch(&m, c[i].got[j]);
            cr_expect(n == 7 || j + 1 == c[i].n, "poller %d batch %zu has %" PRId64, i, j, n);
            total += n;
            qf_element_free(c[i].got[j]);
        }
        free(c[i].got);
        qf_batcher_poller_free(c[i].p);
    }
    cr_expect_eq(total, model_expected(&m));
    pipe_finish(&p);
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

/* The keys of every batch, in order, as one string. */
static char *shuffled_order(model *m, int64_t seed)
{
    model_reset(m, 0, 1);
    popts o = {.threads = 0,
               .shuffle = true,
               .batch = 16,
               .capacity = 10000,
               .min_after = 100,
               .seed = seed,
               .buffer = 700};
    pline p;
    pipe_build(&p, m, &o, true);
    pipe_start(&p);
    join_all(&p.st); /* everything in: the sequence of operations is fixed */
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(p.b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        model_batch(m, e);
        const qf_tensor *k = qf_element_get(e, 0);
        for (int64_t i = 0; i < qf_tensor_shape(k)->dims[0]; i++) {
            size_t kl;
            const char *ks = str_of(k, i, &kl);
            while (len + kl + 2 > cap)
                cr_assert_not_null(out = realloc(out, cap *= 2));
            memcpy(out + len, ks, kl);
            len += kl;
            out[len++] = '\n';
        }
        qf_element_free(e);
    }
    out[len] = '\0';
    pipe_finish(&p);
    model_verify(m);
    return out;
}

Test(reader_runs, spec_179_a_seed_gives_the_same_shuffle_of_reader_rows)
{
    /* spec 72, 179: with one reader and every row in before the first
     * dequeue, the operations are the same each time, and so is the order */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    char *a = shuffled_order(&m, 141421);
    char *b = shuffled_order(&m, 141421);
    char *c = shuffled_order(&m, 173205);
    cr_expect_str_eq(a, b, "same seed, same order");
    cr_expect_str_neq(a, c, "another seed, another order");
    free(a);
    free(b);
    free(c);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, a_host_driven_runtime_feeds_a_batch_from_runs)
{
    /* a runtime of 0 workers: the test thread runs the reader tasks with
     * qf_runtime_run_once() and takes batches with try_next in between;
     * a take wakes the parked reader through the runtime's eventfd */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    model_add(&m, make_long_lines(&d, "long.txt"));
    model_reset(&m, 0, 1);
    m.ordered = true;
    popts o = {.threads = 0, .batch = 16, .capacity = 24};
    pline p;
    pipe_build(&p, &m, &o, true);
    qf_runtime_free(p.rt);
    p.rt = mkrt(0);
    pipe_start(&p);
    long batches = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_try_next(p.b, &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc == QF_UNAVAILABLE) {
            /* the readers are runnable (started, or woken by the last
             * take): a run that finds nothing to do for 10 s is a lost wake */
            int64_t polls = qf_runtime_run_once(p.rt, qf_deadline_in_s(10));
            cr_assert_gt(polls, 0, "nothing ran for 10 s and no batch is there (%s)",
                         polls < 0 ? qf_last_message() : "no wake");
            continue;
        }
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        model_batch(&m, e);
        qf_element_free(e);
        batches++;
    }
    cr_expect_eq(batches, (model_expected(&m) + 15) / 16);
    /* the runners' tasks are done; join them without blocking on workers */
    for (size_t i = 0; i < p.st.n; i++) {
        while (!qf_task_is_done(p.st.t[i]))
            cr_assert_geq(qf_runtime_run_once(p.rt, qf_deadline_in_s(10)), 1);
    }
    pipe_finish(&p);
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

static void restart_on_new_runtime(int threads)
{
    /* The first runtime shuts down while readers are parked with runs half
     * enqueued (the batch queue of 8 is full); the runners keep their op
     * state, so a start on a second runtime continues where they stopped:
     * the rows a cancelled task held go in first, nothing is lost, nothing
     * repeats (spec 139-141: a new start after the old tasks ended) */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_numbered(&d, &m, 3, 2000);
    model_reset(&m, 0, 1);
    m.ordered = threads == 0;
    popts o = {.threads = threads, .batch = 4, .capacity = 8};
    pline p;
    pipe_build(&p, &m, &o, false);
    qf_queue *q = qf_batcher_queue(p.b);
    pipe_start(&p);
    wait_size(q, 8);
    qf_element *e = NULL;
    OK(qf_batcher_next_until(p.b, soon(), &e));
    model_batch(&m, e);
    qf_element_free(e);
    OK(qf_queue_dequeue_until(q, soon(), &e));
    model_single(&m, e);
    qf_element_free(e);
    wait_size(q, 8);
    cr_expect_eq(qf_runtime_shutdown(p.rt, soon()), QF_OK);
    qf_tasks_free(p.st.t, p.st.n);
    p.st = (started){0};
    qf_runtime_free(p.rt);
    cr_expect_not(qf_queue_is_closed(q), "a cancelled runner does not close its queue");
    cr_expect_eq(qf_queue_size(q), 8);
    p.rt = mkrt(2);
    pipe_start(&p);
    cr_expect_gt(p.st.n, 0);
    drain_batches(&m, p.b, 4);
    pipe_finish(&p);
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, spec_139_141_runners_restarted_on_a_new_runtime_lose_no_rows)
{
    restart_on_new_runtime(0);
    restart_on_new_runtime(4);
}

/* ============================================ streaming input, held rows */

/* A writer that puts 10 lines into a FIFO and keeps it open until told. */
typedef struct fifo_writer {
    const char *path;
    _Atomic int release; /* 1: close the FIFO */
} fifo_writer;

static void *fifo_write_main(void *arg)
{
    fifo_writer *w = arg;
    int fd = open(w->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    for (int i = 1; i <= 10; i++) {
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "line %d\n", i);
        if (write(fd, buf, (size_t)n) != n)
            break;
    }
    while (!atomic_load(&w->release))
        sched_yield();
    close(fd);
    return NULL;
}

/* spec 189-190: records that arrived are batched without waiting for more
 * input: a reader does not hold lines back to fill a run while the file
 * (a pipe here) has nothing more yet. */
Test(reader_runs, spec_190_lines_from_a_pipe_are_not_held_back_for_a_run)
{
    tdir d;
    tdir_make(&d);
    char *path = tdir_path(&d, "pipe");
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
    fifo_writer w = {.path = path};
    atomic_init(&w.release, 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, fifo_write_main, &w), 0);

    const char *names[1] = {path};
    qf_batch_options bo = {.num_threads = 1, .capacity = 100, .allow_smaller_final_batch = true};
    simple p;
    simple_start(&p, names, 1, NULL, &bo, 5);
    for (int k = 0; k < 2; k++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_batcher_next_until(p.b, soon(), &e), QF_OK, "batch %d: %s", k,
                     qf_last_message());
        cr_assert_eq(qf_tensor_num_elements(qf_element_get(e, 1)), 5);
        size_t len = 0;
        const char *v = qf_tensor_string(qf_element_get(e, 1), 4, &len);
        char want[32];
        snprintf(want, sizeof(want), "line %d", 5 * k + 5);
        cr_expect_eq(len, strlen(want));
        cr_expect_eq(memcmp(v, want, len), 0);
        qf_element_free(e);
    }
    atomic_store(&w.release, 1); /* the end of the input ends the pipeline */
    qf_element *e = NULL;
    cr_expect_eq(qf_batcher_next_until(p.b, soon(), &e), QF_OUT_OF_RANGE);
    pthread_join(th, NULL);
    simple_finish(&p, true, QF_OK);
    tdir_remove(&d);
}

/* spec 161: the queue's capacity bounds what the readers hold: with a
 * full queue of capacity 4 nobody consumes, one reader has read at most the
 * queue's 4 plus the one its op holds, not a whole run. */
Test(reader_runs, spec_161_capacity_bounds_the_records_a_reader_holds)
{
    tdir d;
    tdir_make(&d);
    tfile *f = tf_new(&d, "many.txt");
    for (int i = 0; i < 500; i++)
        tf_adds(f, "x", "\n");
    tf_write(f);
    const char *names[1] = {f->path};
    qf_reader *r = NULL;
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
    OK(qf_reader_new(&ro, &r));
    qf_batch_options bo = {.num_threads = 1, .capacity = 4};
    simple p;
    simple_start(&p, names, 1, r, &bo, 2);
    wait_size(qf_batcher_queue(p.b), 4);
    /* The op parks once it holds a record it cannot enqueue. */
    qf_deadline dl = soon();
    while (qf_reader_num_records_produced(r) < 5 && !qf_deadline_passed(dl))
        sched_yield();
    cr_expect_leq(qf_reader_num_records_produced(r), 5, "held %lld records",
                  (long long)qf_reader_num_records_produced(r));
    simple_finish(&p, true, QF_OK);
    tf_free(f);
    tdir_remove(&d);
}

/* ============================ runs are read buffers; batches borrow values */

Test(reader_runs, batches_kept_after_the_pipeline_is_freed_stay_valid)
{
    /* batch values point into the readers' buffers: keeping every batch
     * while the readers, their pools and the queues are freed must leave
     * each value readable, and freeing the batches last frees the runs
     * (ASan checks both) */
    tdir d;
    tdir_make(&d);
    model m = {0};
    make_text_files(&d, &m);
    model_reset(&m, 0, 1);
    popts o = {.threads = 2, .batch = 32, .capacity = 256, .buffer = 4096};
    pline p;
    pipe_build(&p, &m, &o, true);
    pipe_start(&p);
    size_t cap = 64, n = 0;
    qf_element **kept = malloc(cap * sizeof(*kept));
    cr_assert_not_null(kept);
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(p.b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        if (n == cap) {
            cap *= 2;
            kept = realloc(kept, cap * sizeof(*kept));
            cr_assert_not_null(kept);
        }
        kept[n++] = e;
    }
    pipe_finish(&p);
    for (size_t i = 0; i < n; i++) {
        model_batch(&m, kept[i]);
        qf_element_free(kept[i]);
    }
    free(kept);
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, a_borrowed_value_batch_can_be_changed_copied_and_unstacked)
{
    tdir d;
    tdir_make(&d);
    model m = {0};
    tfile *f = tf_new(&d, "b.txt");
    for (int l = 1; l <= 100; l++) {
        char v[32];
        snprintf(v, sizeof(v), "line-%d", l);
        tf_adds(f, v, "\n");
    }
    model_add(&m, f);
    model_reset(&m, 0, 1);
    popts o = {.threads = 1, .batch = 8, .capacity = 64, .exact = true};
    pline p;
    pipe_build(&p, &m, &o, true);
    pipe_start(&p);
    qf_element *e = NULL;
    OK(qf_batcher_next_until(p.b, soon(), &e));
    qf_tensor *v = qf_element_take(e, 1);
    cr_assert_not_null(v);
    /* a copy owns its strings and outlives the original */
    qf_tensor *c = qf_tensor_copy(v);
    cr_assert_not_null(c);
    cr_expect(qf_tensor_equal(c, v));
    /* replacing strings of the borrowed batch: new ones are owned, the rest
     * stay borrowed; nothing is freed twice or leaked */
    OK(qf_tensor_set_string(v, 0, "first", 5));
    OK(qf_tensor_set_string(v, 0, "again", 5));
    OK(qf_tensor_set_string(v, 3, "", 0));
    size_t len = 0;
    cr_expect_str_eq(qf_tensor_string(v, 0, &len), "again");
    cr_expect_str_eq(qf_tensor_string(v, 1, &len), "line-2");
    cr_expect_eq(len, 6);
    cr_expect_str_eq(qf_tensor_string(v, 3, &len), "");
    /* unstacking the sole reference copies the borrowed strings out */
    qf_tensor *parts[8] = {0};
    OK(qf_tensor_unstack(v, parts));
    cr_expect_str_eq(qf_tensor_string(parts[0], 0, NULL), "again");
    cr_expect_str_eq(qf_tensor_string(parts[7], 0, NULL), "line-8");
    qf_element_free(e);
    pipe_finish(&p);
    for (int i = 0; i < 8; i++)
        qf_tensor_unref(parts[i]);
    cr_expect_str_eq(qf_tensor_string(c, 4, NULL), "line-5");
    qf_tensor_unref(c);
    model_free(&m);
    tdir_remove(&d);
}

Test(reader_runs, tiny_lines_fill_the_row_table_before_the_buffer)
{
    /* 2-byte lines: a 256 KiB buffer holds 131072 of them but a run's
     * table far fewer, so runs move on with most of their buffer unread
     * (carried into the next run, or reused when every row is back) */
    tdir d;
    tdir_make(&d);
    model m = {0};
    tfile *f = tf_new(&d, "tiny.txt");
    for (int l = 0; l < 150000; l++)
        tf_adds(f, l % 3 ? "a" : (l % 2 ? "" : "b"), "\n");
    model_add(&m, f);
    model_reset(&m, 0, 1);
    for (int round = 0; round < 2; round++) {
        popts o = {.threads = 2, .batch = 64, .capacity = round ? 20000 : 128};
        pline p;
        pipe_build(&p, &m, &o, true);
        pipe_start(&p);
        drain_batches(&m, p.b, 64);
        pipe_finish(&p);
    }
    m.epochs = 2; /* both rounds saw every line once */
    model_verify(&m);
    model_free(&m);
    tdir_remove(&d);
}
