/* qf_test_io.h - helpers shared by the record-format tests
 * (test_reader.c, test_tfrecord.c, test_reader_kinds.c,
 * test_reader_state.c, test_reader_pipes.c): temp directories, files, work queues, assertions
 * that name the call and the last message. Static functions: each test
 * file includes it once. */
#ifndef QF_TEST_IO_H
#define QF_TEST_IO_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qflow.h"

/* ------------------------------------------------------------ messages */

static __attribute__((unused)) bool has(const char *s, const char *sub)
{
    return s && strstr(s, sub) != NULL;
}

#define EXPECT_MSG(sub)                                                                            \
    cr_expect(has(qf_last_message(), (sub)), "last message \"%s\" lacks \"%s\"",                   \
              qf_last_message(), (sub))

#define OK(call)                                                                                   \
    do {                                                                                           \
        qf_code rc_ = (call);                                                                      \
        cr_assert_eq(rc_, QF_OK, "%s: %s (%s)", #call, qf_code_name(rc_), qf_last_message());      \
    } while (0)

#define REFUSED(call, code, sub)                                                                   \
    do {                                                                                           \
        qf_code rc_ = (call);                                                                      \
        cr_assert_neq(rc_, QF_OK, "%s succeeded", #call);                                          \
        cr_expect_eq(rc_, (code), "%s: %s, expected %s (%s)", #call, qf_code_name(rc_),            \
                     qf_code_name(code), qf_last_message());                                       \
        EXPECT_MSG(sub);                                                                           \
    } while (0)

/* ------------------------------------------------------------ temp files */

typedef struct tdir {
    char path[64];
} tdir;

static __attribute__((unused)) void tdir_make(tdir *d)
{
    const char *base = getenv("TMPDIR");
    snprintf(d->path, sizeof(d->path), "%s/qf_io_XXXXXX",
             base && strlen(base) < 40 ? base : "/tmp");
    cr_assert_not_null(mkdtemp(d->path), "mkdtemp: %s", strerror(errno));
}

/* Remove the files of the directory (flat) and the directory. */
static __attribute__((unused)) void tdir_remove(tdir *d)
{
    DIR *dir = opendir(d->path);
    if (dir) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof(p), "%s/%s", d->path, e->d_name);
            chmod(p, 0700);
            if (unlink(p) != 0)
                rmdir(p);
        }
        closedir(dir);
    }
    rmdir(d->path);
}

/* Path of `name` in d: a static ring of buffers so a test can hold several. */
static __attribute__((unused)) const char *tpath(const tdir *d, const char *name)
{
    static char bufs[16][256];
    static int next;
    char *b = bufs[next++ % 16];
    snprintf(b, 256, "%s/%s", d->path, name);
    return b;
}

static __attribute__((unused)) const char *write_bytes(const tdir *d, const char *name,
                                                       const void *data, size_t n)
{
    const char *p = tpath(d, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "fopen %s: %s", p, strerror(errno));
    if (n)
        cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    return p;
}

static __attribute__((unused)) const char *write_str(const tdir *d, const char *name, const char *s)
{
    return write_bytes(d, name, s, strlen(s));
}

/* ----------------------------------------------------------- work queues */

static __attribute__((unused)) qf_queue *work_queue_opts(int64_t cap, bool with_shapes)
{
    qf_dtype dt = QF_STRING;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {0};
    o.capacity = cap;
    o.num_components = 1;
    o.dtypes = &dt;
    o.shapes = with_shapes ? &sh : NULL;
    o.name = "work";
    qf_queue *q = NULL;
    OK(qf_fifo_queue_new(&o, &q));
    return q;
}

static __attribute__((unused)) qf_queue *work_queue(void)
{
    return work_queue_opts(100, true);
}

static __attribute__((unused)) void put(qf_queue *q, const char *s)
{
    qf_tensor *t = qf_tensor_new_cstr(s);
    cr_assert_not_null(t);
    qf_element *e = qf_element_of(1, &t);
    cr_assert_not_null(e);
    OK(qf_queue_enqueue(q, e));
}

/* Enqueue NULL-terminated names. */
__attribute__((sentinel, unused)) static void put_all(qf_queue *q, ...)
{
    va_list ap;
    va_start(ap, q);
    const char *s;
    while ((s = va_arg(ap, const char *)) != NULL)
        put(q, s);
    va_end(ap);
}

static __attribute__((unused)) void close_q(qf_queue *q)
{
    OK(qf_queue_close(q, false));
}

static __attribute__((unused)) char *keyf(const char *path, uint64_t n)
{
    static char bufs[8][300];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 300, "%s:%" PRIu64, path, n);
    return b;
}

/* Read a whole file into a malloc'd buffer. */
static __attribute__((unused)) char *slurp_file(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    size_t n;
    while ((n = fread(b + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    *ret_len = len;
    return b;
}

#endif
