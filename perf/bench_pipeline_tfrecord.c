/* bench_pipeline_tfrecord.c - pipeline.tfrecord and pipeline.tfrecord_gzip
 * (issue 29): TFRecord files of 256-byte records, CRC-checked, into
 * batches, in MB/s of record payload (the 256 bytes; not the 16 bytes of
 * framing around each).
 *
 *   qflow  the library, as an application builds it:
 *          string_input_producer(files) -> BPT_READERS TFRecordReaders
 *          (GZIP for the _gzip row) -> batch(BPT_BATCH) -> the calling
 *          thread, which touches every record of every batch
 *   plain  the limit of this machine for the same work, one thread:
 *          read(2) into a 256 KiB buffer (zlib's inflate() into it for the
 *          _gzip row), cut the records out of it and check both checksums
 *          of each with the same CRC-32C routine as the readers (public as
 *          qf_crc32c_extend(); since 6a3bef3, before which it had a
 *          single-chain loop of its own: figures from before are not
 *          comparable one for one); nothing is handed to anyone
 *   zcat   (_gzip only) the zcat program decompressing the same files to
 *          /dev/null, one after the other: what a user would compare
 *          against. It writes the framing too, so it moves 6% more bytes
 *          than the payload the figure counts. Absent when zcat is not on
 *          the PATH (said on the run's first lines).
 *
 * Data: BP_FILES files of BPT_RECORDS_FULL (--quick: BPT_RECORDS_QUICK)
 * records each, written once per process with the library's TFRecord
 * writer (plain and gzip, the same records) into a mkdtemp() directory
 * under $TMPDIR (or /tmp), read once before the first run so they come
 * from the page cache, removed at exit. Records are words from a fixed
 * generator (text compresses about as much as a real corpus does).
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "bench_pipeline.h"
#include "qf_batch.h"
#include "qf_input.h"
#include "qf_tfrecord.h"
#include "qflow.h"

#define BPT_RECORD 256
#define BPT_READERS 4
#define BPT_BATCH 1024
#define BPT_CAPACITY (16 * BPT_BATCH)
#define BPT_RECORDS_QUICK 16384 /* 4 MiB of payload per file */
#define BPT_RECORDS_FULL 65536  /* 16 MiB */
#define BPT_BUF (256 * 1024)

extern char **environ;

typedef struct bpt_data {
    const char *paths[2][BP_FILES]; /* [gzip] */
    uint64_t records;               /* over the files */
    uint64_t bytes;                 /* payload */
} bpt_data;

static struct {
    bool made[2]; /* [quick] */
    char dir[2][256];
    char path[2][2][BP_FILES][300]; /* [quick][gzip][file] */
    bpt_data data[2];
    bool atexit_set;
    pid_t owner; /* the process that wrote the files: only it removes them */
} g;

static void remove_data(void)
{
    /* A forked child that exits through exit() (a baseline's failed check
     * in runners.tput's measuring child) runs this too: the files are the
     * parent's, which goes on using them. */
    if (getpid() != g.owner)
        return;
    for (int m = 0; m < 2; m++) {
        if (!g.made[m])
            continue;
        for (int z = 0; z < 2; z++)
            for (int f = 0; f < BP_FILES; f++)
                unlink(g.path[m][z][f]);
        rmdir(g.dir[m]);
        g.made[m] = false;
    }
}

static void warm(const char *path)
{
    static char buf[1 << 16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bench_fail("pipeline.tfrecord: cannot open %s: %s", path, strerror(errno));
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    close(fd);
}

static void wcheck(qf_code rc, const char *path)
{
    if (rc != QF_OK)
        bench_fail("pipeline.tfrecord: writing %s: %s", path, qf_last_message());
}

static const bpt_data *data_get(const bench_rep *r)
{
    static const char *const words[] = {"input", "record", "tensor", "queue", "batch",
                                        "the",   "of",     "reader", "crc",   "shard",
                                        "epoch", "a",      "label",  "image", "example"};
    int m = r->quick ? 1 : 0;
    if (g.made[m])
        return &g.data[m];
    const char *tmp = getenv("TMPDIR");
    snprintf(g.dir[m], sizeof(g.dir[m]), "%s/qflow-bench-tfr-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g.dir[m]))
        bench_fail("pipeline.tfrecord: mkdtemp %s: %s", g.dir[m], strerror(errno));
    g.made[m] = true;
    if (!g.atexit_set) {
        g.owner = getpid();
        atexit(remove_data);
        g.atexit_set = true;
    }
    uint64_t per_file = bench_scale(r, BPT_RECORDS_QUICK, BPT_RECORDS_FULL);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int f = 0; f < BP_FILES; f++) {
        qf_tfrecord_writer *w[2];
        for (int z = 0; z < 2; z++) {
            snprintf(g.path[m][z][f], sizeof(g.path[m][z][f]), "%s/part-%d.tfrecord%s", g.dir[m], f,
                     z ? ".gz" : "");
            qf_tfrecord_options o = {.compression = z ? QF_COMPRESSION_GZIP : QF_COMPRESSION_NONE};
            wcheck(qf_tfrecord_writer_open(g.path[m][z][f], &o, &w[z]), g.path[m][z][f]);
        }
        char rec[BPT_RECORD];
        for (uint64_t i = 0; i < per_file; i++) {
            size_t len = 0;
            while (len < BPT_RECORD) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                const char *wd = words[s % (sizeof(words) / sizeof(words[0]))];
                for (size_t k = 0; wd[k] && len < BPT_RECORD; k++)
                    rec[len++] = wd[k];
                if (len < BPT_RECORD)
                    rec[len++] = ' ';
            }
            for (int z = 0; z < 2; z++)
                wcheck(qf_tfrecord_writer_write(w[z], rec, BPT_RECORD), g.path[m][z][f]);
        }
        for (int z = 0; z < 2; z++) {
            wcheck(qf_tfrecord_writer_close(w[z]), g.path[m][z][f]);
            warm(g.path[m][z][f]);
            g.data[m].paths[z][f] = g.path[m][z][f];
        }
    }
    g.data[m].records = per_file * BP_FILES;
    g.data[m].bytes = per_file * BP_FILES * BPT_RECORD;
    return &g.data[m];
}

static void check_counts(const bench_rep *r, const bpt_data *d, uint64_t records, uint64_t bytes)
{
    if (records != d->records || bytes != d->bytes)
        bench_fail("%s/%s: delivered %llu records of %llu bytes, the files hold %llu of %llu",
                   r->bc->name, r->bc->impl, (unsigned long long)records, (unsigned long long)bytes,
                   (unsigned long long)d->records, (unsigned long long)d->bytes);
}

static double mb_per_s(uint64_t bytes, uint64_t t0, uint64_t t1)
{
    return (double)bytes / 1e6 / ((double)(t1 - t0) / 1e9);
}

/* ------------------------------------------------------------------ qflow */

static void qcheck(const bench_rep *r, qf_code rc, const char *what)
{
    if (rc != QF_OK)
        bench_fail("%s/qflow: %s: %s: %s", r->bc->name, what, qf_code_name(rc), qf_last_message());
}

static void run_qflow(bench_rep *r, bool gzip)
{
    const bpt_data *d = data_get(r);
    qf_runtime *rt = NULL;
    qf_coord *coord = NULL;
    qf_scope *scope = NULL;
    qf_queue *files = NULL;
    qf_batch_source *src = NULL;
    qf_batcher *b = NULL;
    qcheck(r,
           qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "bench"}, &rt),
           "runtime");
    qcheck(r, qf_coord_new(NULL, 0, &coord), "coordinator");
    qcheck(r, qf_scope_new(&scope), "scope");
    qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
    qcheck(r, qf_string_input_producer(scope, d->paths[gzip], BP_FILES, &po, &files),
           "string_input_producer");
    qf_reader_options ro = {.kind = QF_READER_TFRECORD,
                            .compression = gzip ? QF_COMPRESSION_GZIP : QF_COMPRESSION_NONE};
    qcheck(r, qf_batch_source_reader_options(&ro, files, &src), "reader source");
    qf_batch_options bo = {
        .num_threads = BPT_READERS, .capacity = BPT_CAPACITY, .allow_smaller_final_batch = true};
    qcheck(r, qf_batch(scope, src, BPT_BATCH, &bo, &b), "batch");

    uint64_t t0 = bench_now_ns();
    qf_task **tasks = NULL;
    size_t nt = 0;
    qcheck(r, qf_start_queue_runners(rt, coord, scope, NULL, QF_RUNNER_START, &tasks, &nt),
           "start_queue_runners");
    uint64_t records = 0, bytes = 0, touch = 0;
    qf_element *batch;
    qf_code rc;
    while ((rc = qf_batcher_next(b, &batch)) == QF_OK) {
        const qf_string *v = qf_tensor_cdata(qf_element_get(batch, 1));
        int64_t n = qf_tensor_num_elements(qf_element_get(batch, 1));
        for (int64_t i = 0; i < n; i++) {
            bytes += v[i].len;
            touch += v[i].len ? (unsigned char)v[i].data[v[i].len - 1] : 0;
        }
        records += (uint64_t)n;
        qf_element_free(batch);
    }
    uint64_t t1 = bench_now_ns();
    if (rc != QF_OUT_OF_RANGE)
        qcheck(r, rc, "batcher_next");
    qcheck(r, qf_coord_join(coord, NULL, 0, 10.0, false, NULL), "join");
    if (touch == 0 && records)
        bench_fail("%s/qflow: records without bytes", r->bc->name);
    check_counts(r, d, records, bytes);
    r->values[0] = mb_per_s(bytes, t0, t1);

    qf_tasks_free(tasks, nt);
    qf_batcher_free(b);
    qf_queue_unref(files);
    qf_runtime_free(rt);
    qf_scope_free(scope);
    qf_coord_free(coord);
}

static void run_qflow_plain(bench_rep *r)
{
    run_qflow(r, false);
}

static void run_qflow_gzip(bench_rep *r)
{
    run_qflow(r, true);
}

/* ------------------------------------------------------------------ plain */

/* CRC-32C, TFRecord's checksum: the library's public routine
 * (qf_crc32c_extend(), the readers' own code), so that both sides pay the
 * same for the checksums and the figure compares everything else. */
static uint32_t crc32c(const unsigned char *p, size_t n)
{
    return qf_crc32c_extend(0, p, n);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t unmask(uint32_t m)
{
    uint32_t rot = m - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

typedef struct splitter {
    unsigned char buf[BPT_BUF];
    size_t lim;
    uint64_t records, bytes;
} splitter;

/* Cut and check the whole records of s->buf[0..lim); keep the tail. */
static void split(const bench_rep *r, splitter *s)
{
    size_t pos = 0;
    while (s->lim - pos >= 16) {
        const unsigned char *h = s->buf + pos;
        uint64_t len = (uint64_t)le32(h) | (uint64_t)le32(h + 4) << 32;
        if (len > sizeof(s->buf) - 16)
            bench_fail("%s/%s: record of %llu bytes", r->bc->name, r->bc->impl,
                       (unsigned long long)len);
        if (s->lim - pos < 16 + len)
            break;
        if (unmask(le32(h + 8)) != crc32c(h, 8) ||
            unmask(le32(h + 12 + len)) != crc32c(h + 12, len))
            bench_fail("%s/%s: checksum mismatch", r->bc->name, r->bc->impl);
        s->records++;
        s->bytes += len;
        pos += 16 + len;
    }
    memmove(s->buf, s->buf + pos, s->lim - pos);
    s->lim -= pos;
}

static void run_plain(bench_rep *r)
{
    const bpt_data *d = data_get(r);
    static splitter s;
    s.records = s.bytes = 0;
    uint64_t t0 = bench_now_ns();
    for (int f = 0; f < BP_FILES; f++) {
        int fd = open(d->paths[0][f], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            bench_fail("%s/plain: open %s: %s", r->bc->name, d->paths[0][f], strerror(errno));
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        s.lim = 0;
        ssize_t n;
        while ((n = read(fd, s.buf + s.lim, sizeof(s.buf) - s.lim)) > 0) {
            s.lim += (size_t)n;
            split(r, &s);
        }
        if (n < 0 || s.lim)
            bench_fail("%s/plain: read %s: %s", r->bc->name, d->paths[0][f],
                       n < 0 ? strerror(errno) : "torn record");
        close(fd);
    }
    uint64_t t1 = bench_now_ns();
    check_counts(r, d, s.records, s.bytes);
    r->values[0] = mb_per_s(s.bytes, t0, t1);
}

static void run_plain_gzip(bench_rep *r)
{
    const bpt_data *d = data_get(r);
    static splitter s;
    static unsigned char in[BPT_BUF];
    s.records = s.bytes = 0;
    uint64_t t0 = bench_now_ns();
    for (int f = 0; f < BP_FILES; f++) {
        int fd = open(d->paths[1][f], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            bench_fail("%s/plain: open %s: %s", r->bc->name, d->paths[1][f], strerror(errno));
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        z_stream z;
        memset(&z, 0, sizeof(z));
        if (inflateInit2(&z, 16 + 15) != Z_OK)
            bench_fail("%s/plain: inflateInit2", r->bc->name);
        s.lim = 0;
        int zr = Z_OK;
        while (zr != Z_STREAM_END) {
            if (z.avail_in == 0) {
                ssize_t n = read(fd, in, sizeof(in));
                if (n <= 0)
                    bench_fail("%s/plain: read %s: %s", r->bc->name, d->paths[1][f],
                               n < 0 ? strerror(errno) : "early end");
                z.next_in = in;
                z.avail_in = (uInt)n;
            }
            z.next_out = s.buf + s.lim;
            z.avail_out = (uInt)(sizeof(s.buf) - s.lim);
            zr = inflate(&z, Z_NO_FLUSH);
            if (zr != Z_OK && zr != Z_STREAM_END)
                bench_fail("%s/plain: inflate: %d", r->bc->name, zr);
            s.lim = sizeof(s.buf) - z.avail_out;
            split(r, &s);
        }
        inflateEnd(&z);
        if (s.lim)
            bench_fail("%s/plain: torn record in %s", r->bc->name, d->paths[1][f]);
        close(fd);
    }
    uint64_t t1 = bench_now_ns();
    check_counts(r, d, s.records, s.bytes);
    r->values[0] = mb_per_s(s.bytes, t0, t1);
}

/* ------------------------------------------------------------------- zcat */

static bool have_zcat(void)
{
    return system("command -v zcat > /dev/null 2>&1") == 0;
}

static void run_zcat(bench_rep *r)
{
    const bpt_data *d = data_get(r);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    uint64_t t0 = bench_now_ns();
    for (int f = 0; f < BP_FILES; f++) {
        char *argv[] = {"zcat", (char *)d->paths[1][f], NULL};
        pid_t pid;
        int err = posix_spawnp(&pid, "zcat", &fa, NULL, argv, environ);
        if (err)
            bench_fail("%s/zcat: spawn: %s", r->bc->name, strerror(err));
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bench_fail("%s/zcat: zcat %s failed", r->bc->name, d->paths[1][f]);
    }
    uint64_t t1 = bench_now_ns();
    posix_spawn_file_actions_destroy(&fa);
    r->values[0] = mb_per_s(d->bytes, t0, t1);
}

/* ------------------------------------------------------------------ cases */

void bench_register_pipeline_tfrecord(void)
{
    static const char *const plain_note =
        "ceiling: one thread, read(2) + cut records + both CRC-32C checks, nothing handed on";
    static const char *const plain_gz_note =
        "ceiling: one thread, read(2) + inflate() + cut records + both CRC-32C checks";
    const bench_param params[] = {{.key = "files", .num = BP_FILES},
                                  {.key = "record", .num = BPT_RECORD},
                                  {.key = "readers", .num = BPT_READERS},
                                  {.key = "batch", .num = BPT_BATCH},
                                  {.key = "warmup", .num = 1}};
    struct {
        const char *name, *impl, *note;
        bench_run_fn run;
    } cases[] = {
        {"pipeline.tfrecord", "qflow", NULL, run_qflow_plain},
        {"pipeline.tfrecord", "plain", plain_note, run_plain},
        {"pipeline.tfrecord_gzip", "qflow", NULL, run_qflow_gzip},
        {"pipeline.tfrecord_gzip", "plain", plain_gz_note, run_plain_gzip},
        {"pipeline.tfrecord_gzip", "zcat",
         "the zcat program to /dev/null (it also writes the 16 bytes of framing per record)",
         run_zcat},
    };
    bool zcat = have_zcat();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (strcmp(cases[i].impl, "zcat") == 0 && !zcat) {
            bench_skip_peer("zcat", "no zcat on the PATH");
            continue;
        }
        bench_case c = {.name = cases[i].name,
                        .impl = cases[i].impl,
                        .unit = BENCH_MB_PER_S,
                        .note = cases[i].note,
                        .run = cases[i].run,
                        .warm_up = true}; /* see bench_pipeline.h */
        memcpy(c.params, params, sizeof(params));
        bench_register(&c);
    }
}
