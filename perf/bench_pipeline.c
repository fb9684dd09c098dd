/* bench_pipeline.c - pipeline.text: the generated data set, the check,
 * the `cat` ceiling and the case registrations (see bench_pipeline.h).
 *
 * Data. BP_FILES files of n lines each (n = 50k with --quick, else 250k),
 * written once per process into a mkdtemp() directory under $TMPDIR (or
 * /tmp) and removed at exit. Lines are 3 to 20 words drawn from a fixed
 * vocabulary with a fixed-seed xorshift generator: about 70 bytes, every
 * run and every machine the same bytes, like ordinary text.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_pipeline.h"

static const char *const words[] = {
    "the",     "queue",  "runner", "reads",   "lines",  "from",        "files",  "and",
    "batches", "them",   "for",    "a",       "model",  "that",        "trains", "on",
    "input",   "tensor", "epoch",  "shuffle", "seed",   "coordinator", "stops",  "every",
    "thread",  "when",   "data",   "ends",    "record", "key",         "value",  "string",
    "worker",  "pool",   "task",   "parks",   "wakes",  "ring",        "buffer", "futex",
};
#define N_WORDS (sizeof(words) / sizeof(words[0]))

static struct {
    bool made[2]; /* [quick] */
    char dir[2][256];
    char path[2][BP_FILES][300];
    bp_data data[2];
    bool atexit_set;
    pid_t owner; /* the process that wrote the files: only it removes them */
} g;

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

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
        for (int f = 0; f < BP_FILES; f++)
            unlink(g.path[m][f]);
        rmdir(g.dir[m]);
        g.made[m] = false;
    }
}

/* Read a file once, so the timed runs all start from the page cache. */
static void warm(const char *path)
{
    static char buf[1 << 16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bench_fail("pipeline.text: cannot open %s: %s", path, strerror(errno));
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    close(fd);
}

const bp_data *bp_data_get(const bench_rep *r)
{
    int m = r->quick ? 1 : 0;
    if (g.made[m])
        return &g.data[m];
    const char *tmp = getenv("TMPDIR");
    snprintf(g.dir[m], sizeof(g.dir[m]), "%s/qflow-bench-text-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g.dir[m]))
        bench_fail("pipeline.text: mkdtemp %s: %s", g.dir[m], strerror(errno));
    g.made[m] = true;
    if (!g.atexit_set) {
        g.owner = getpid();
        atexit(remove_data);
        g.atexit_set = true;
    }
    uint64_t per_file = bench_scale(r, BP_LINES_QUICK, BP_LINES_FULL);
    uint64_t seed = 0x2545f4914f6cdd1dull, bytes = 0;
    for (int f = 0; f < BP_FILES; f++) {
        snprintf(g.path[m][f], sizeof(g.path[m][f]), "%s/part-%d.txt", g.dir[m], f);
        FILE *fp = fopen(g.path[m][f], "w");
        if (!fp)
            bench_fail("pipeline.text: cannot write %s: %s", g.path[m][f], strerror(errno));
        for (uint64_t i = 0; i < per_file; i++) {
            unsigned nw = 3 + (unsigned)(xorshift(&seed) % 18);
            for (unsigned w = 0; w < nw; w++) {
                const char *word = words[xorshift(&seed) % N_WORDS];
                size_t len = strlen(word);
                if (w)
                    putc(' ', fp);
                fwrite(word, 1, len, fp);
                bytes += len + (w != 0);
            }
            putc('\n', fp);
        }
        if (fclose(fp) != 0)
            bench_fail("pipeline.text: writing %s failed: %s", g.path[m][f], strerror(errno));
        warm(g.path[m][f]);
        g.data[m].paths[f] = g.path[m][f];
    }
    g.data[m].lines = per_file * BP_FILES;
    g.data[m].bytes = bytes;
    return &g.data[m];
}

void bp_check(const bench_rep *r, const bp_data *d, uint64_t lines, uint64_t bytes)
{
    if (lines != d->lines || bytes != d->bytes)
        bench_fail("%s/%s: delivered %llu lines of %llu bytes, the files hold %llu lines of %llu "
                   "bytes",
                   r->bc->name, r->bc->impl, (unsigned long long)lines, (unsigned long long)bytes,
                   (unsigned long long)d->lines, (unsigned long long)d->bytes);
}

/* ------------------------------------------------------------------ cat */

/* The ceiling: one thread, read(2) into a buffer the size of a qflow
 * reader's, count newlines with memchr. Nothing is copied out, no line is
 * handed to anyone: any pipeline does at least this much work. */
void bp_run_cat(bench_rep *r)
{
    const bp_data *d = bp_data_get(r);
    static char buf[256 * 1024];
    uint64_t t0 = bench_now_ns(), lines = 0, total = 0;
    for (int f = 0; f < BP_FILES; f++) {
        int fd = open(d->paths[f], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            bench_fail("pipeline.text/cat: open %s: %s", d->paths[f], strerror(errno));
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
            total += (uint64_t)n;
            const char *p = buf, *end = buf + n;
            while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
                lines++;
                p++;
            }
        }
        if (n < 0)
            bench_fail("pipeline.text/cat: read %s: %s", d->paths[f], strerror(errno));
        close(fd);
    }
    uint64_t t1 = bench_now_ns();
    bp_check(r, d, lines, total - lines);
    r->values[0] = (double)lines / ((double)(t1 - t0) / 1e9);
}

/* --------------------------------------------------------------- cases */

void bench_register_pipeline(void)
{
    static const char *const impls[] = {"qflow", "cat", "thread_per_runner"};
    static const bench_run_fn runs[] = {bp_run_qflow, bp_run_cat, bp_run_thread_per_runner};
    static const char *const notes[] = {
        NULL,
        "ceiling: one thread, read(2) + memchr newline count, no line handed on",
        "TensorFlow's shape: a thread per op, mutex+condvar queues, getline, a batching thread",
    };
    for (size_t i = 0; i < sizeof(impls) / sizeof(impls[0]); i++)
        bench_register(&(bench_case){
            .name = "pipeline.text",
            .impl = impls[i],
            .unit = BENCH_ITEMS_PER_S,
            .params = {{.key = "files", .num = BP_FILES},
                       {.key = "readers", .num = BP_READERS},
                       {.key = "batch", .num = BP_BATCH},
                       {.key = "capacity", .num = BP_CAPACITY},
                       {.key = "warmup", .num = 1}},
            .note = notes[i],
            .run = runs[i],
            .warm_up = true, /* see bench_pipeline.h */
        });
}
