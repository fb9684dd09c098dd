/* test_qflow_lines.c - the qflow-lines program, tested as a program: each
 * test writes its input files into its own mkdtemp() directory, runs the
 * built tool (fork + exec, stdout and stderr on pipes) and checks what
 * comes out, the exit status and the messages.
 *
 * The tool is found through $QFLOW_LINES, else the path meson compiled in
 * (QFLOW_LINES). The child gets default SIGINT, SIGTERM and SIGPIPE
 * dispositions and an empty signal mask, whatever the test runner uses, so
 * the signal tests exercise the tool's own handling.
 *
 * Spec items: 152-153 (string_input_producer epochs and per-epoch
 * shuffle), 164 (allow_smaller_final_batch: no line lost in a final short
 * batch), 179 (shuffle_batch drains everything once the input ends),
 * 190-195 (TextLineReader keys, CRLF, last line without newline, empty
 * lines, empty files, skip_header_lines). No test synchronises with
 * sleeps: the signal tests read output first, then signal.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(qflow_lines, .timeout = 120);
#endif

#ifndef QFLOW_LINES
#define QFLOW_LINES "qflow-lines"
#endif

static const char *tool(void)
{
    const char *p = getenv("QFLOW_LINES");
    return p && *p ? p : QFLOW_LINES;
}

/* ------------------------------------------------------------ temp files */

typedef struct tdir {
    char path[64];
} tdir;

static void tdir_make(tdir *d)
{
    const char *base = getenv("TMPDIR");
    snprintf(d->path, sizeof(d->path), "%s/qf_lines_XXXXXX",
             base && strlen(base) < 40 ? base : "/tmp");
    cr_assert_not_null(mkdtemp(d->path), "mkdtemp: %s", strerror(errno));
}

static void tdir_remove(tdir *d)
{
    DIR *dir = opendir(d->path);
    if (dir) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof(p), "%s/%s", d->path, e->d_name);
            if (unlink(p) != 0)
                rmdir(p);
        }
        closedir(dir);
    }
    rmdir(d->path);
}

/* Path of `name` in d: a ring of buffers so a test can hold several. */
static const char *tpath(const tdir *d, const char *name)
{
    static char bufs[32][256];
    static int next;
    char *b = bufs[next++ % 32];
    snprintf(b, 256, "%s/%s", d->path, name);
    return b;
}

static const char *write_bytes(const tdir *d, const char *name, const void *data, size_t n)
{
    const char *p = tpath(d, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "fopen %s: %s", p, strerror(errno));
    if (n)
        cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    return p;
}

static const char *write_str(const tdir *d, const char *name, const char *s)
{
    return write_bytes(d, name, s, strlen(s));
}

/* A file of n lines "<tag> line <i> <filler>" (i from 1), '\n' endings,
 * with `eol` ("\n" or "\r\n") after every line. */
static const char *write_lines(const tdir *d, const char *name, const char *tag, int n,
                               const char *eol)
{
    size_t cap = (size_t)n * 64 + 1, len = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (int i = 1; i <= n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s line %d %.*s%s", tag, i, i % 17,
                                "abcdefghijklmnopq", eol);
    const char *p = write_bytes(d, name, buf, len);
    free(buf);
    return p;
}

/* ---------------------------------------------------------------- running */

typedef struct proc {
    pid_t pid;
    int out; /* read end of the child's stdout */
    int err; /* read end of the child's stderr */
} proc;

/* Start the tool with args (NULL-terminated, without argv[0]) and
 * `in_fd` as its standard input (-1: /dev/null; the child gets a copy, the
 * caller keeps in_fd). */
static void spawn_in(proc *p, const char *const *args, int in_fd)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = tool();
    for (; args[n - 1]; n++) {
        cr_assert_lt(n, 63);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    int po[2], pe[2];
    cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(pe, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only async-signal-safe calls until exec. */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGPIPE, &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* in_fd: -1 reads /dev/null, -2 runs with fd 0 closed */
        int in = in_fd >= 0 ? in_fd : in_fd == -1 ? open("/dev/null", O_RDONLY) : -1;
        if ((in_fd == -2 ? close(0) < 0 && errno != EBADF : in < 0 || dup2(in, 0) < 0) ||
            dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    p->pid = pid;
    p->out = po[0];
    p->err = pe[0];
}

static void spawn(proc *p, const char *const *args)
{
    spawn_in(p, args, -1);
}

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void buf_add(buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Read both pipes to their end (poll, so neither can fill up and stall the
 * child), then reap the child. *out and *err are NUL-terminated. */
static int finish(proc *p, buf *out, buf *err)
{
    buf_add(out, "", 0);
    buf_add(err, "", 0);
    struct pollfd fds[2] = {{.fd = p->out, .events = POLLIN}, {.fd = p->err, .events = POLLIN}};
    buf *dst[2] = {out, err};
    int open_fds = 2;
    char chunk[65536];
    while (open_fds) {
        int r = poll(fds, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        cr_assert_geq(r, 0, "poll: %s", strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !fds[i].revents)
                continue;
            ssize_t n = read(fds[i].fd, chunk, sizeof(chunk));
            if (n > 0) {
                buf_add(dst[i], chunk, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status;
    pid_t w;
    while ((w = waitpid(p->pid, &status, 0)) < 0 && errno == EINTR)
        ;
    cr_assert_eq(w, p->pid, "waitpid: %s", strerror(errno));
    return status;
}

typedef struct result {
    buf out, err;
    int status;
} result;

static void result_free(result *r)
{
    free(r->out.p);
    free(r->err.p);
    memset(r, 0, sizeof(*r));
}

static void run_v(result *res, int in_fd, va_list ap)
{
    const char *args[64];
    int n = 0;
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) {
        cr_assert_lt(n, 63);
        args[n++] = a;
    }
    args[n] = NULL;
    memset(res, 0, sizeof(*res));
    proc p;
    spawn_in(&p, args, in_fd);
    res->status = finish(&p, &res->out, &res->err);
}

/* Run the tool to completion: run(&res, "--keys", path, NULL). */
__attribute__((sentinel)) static void run(result *res, ...)
{
    va_list ap;
    va_start(ap, res);
    run_v(res, -1, ap);
    va_end(ap);
}

/* The same with the file `in_path` as standard input. */
__attribute__((sentinel)) static void run_in(result *res, const char *in_path, ...)
{
    int fd = open(in_path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "%s: %s", in_path, strerror(errno));
    va_list ap;
    va_start(ap, in_path);
    run_v(res, fd, ap);
    va_end(ap);
    close(fd);
}

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

#define EXPECT_EXIT(res, code)                                                                     \
    cr_expect_eq(exit_code((res)->status), (code), "exit %d, expected %d; stderr: %s",             \
                 exit_code((res)->status), (code), (res)->err.p)

/* ------------------------------------------------------------- line sets */

typedef struct lines {
    char **v;
    size_t n, cap;
} lines;

static void lines_add(lines *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        cr_assert_not_null(l->v);
    }
    l->v[l->n] = strndup(s, n);
    cr_assert_not_null(l->v[l->n]);
    l->n++;
}

static void lines_free(lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* Split text into lines; the text must end with '\n' (whole lines only). */
static void split(const buf *b, lines *l)
{
    memset(l, 0, sizeof(*l));
    if (b->len)
        cr_assert_eq(b->p[b->len - 1], '\n', "output does not end with a whole line");
    const char *p = b->p, *end = b->p + b->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        lines_add(l, p, (size_t)(nl - p));
        p = nl + 1;
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lines_sort(lines *l)
{
    qsort(l->v, l->n, sizeof(*l->v), cmp_str);
}

/* The multiset of `got` equals that of `want` (both get sorted). */
static void expect_same_lines(lines *got, lines *want)
{
    lines_sort(got);
    lines_sort(want);
    cr_expect_eq(got->n, want->n, "got %zu lines, expected %zu", got->n, want->n);
    for (size_t i = 0; i < got->n && i < want->n; i++)
        if (strcmp(got->v[i], want->v[i]) != 0) {
            cr_expect_fail("line multisets differ at sorted index %zu: got \"%s\", want \"%s\"", i,
                           got->v[i], want->v[i]);
            return;
        }
}

/* Expected lines of a file written by write_lines, `times` times over, as
 * "<line>" or "<path>:<n>\t<line>"; lines numbered from first_line. */
static void want_lines(lines *l, const char *path, const char *tag, int n, int first_line,
                       bool keys, int times)
{
    char s[512];
    for (int t = 0; t < times; t++)
        for (int i = first_line; i <= n; i++) {
            int len;
            if (keys)
                len = snprintf(s, sizeof(s), "%s:%d\t%s line %d %.*s", path, i, tag, i, i % 17,
                               "abcdefghijklmnopq");
            else
                len =
                    snprintf(s, sizeof(s), "%s line %d %.*s", tag, i, i % 17, "abcdefghijklmnopq");
            lines_add(l, s, (size_t)len);
        }
}

/* ------------------------------------------------------------------ usage */

Test(qflow_lines, help_prints_usage_and_exits_0)
{
    result r;
    run(&r, "--help", NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect(strstr(r.out.p, "usage: qflow-lines") != NULL, "stdout: %s", r.out.p);
    cr_expect(strstr(r.out.p, "--epochs") && strstr(r.out.p, "--min-after-dequeue") &&
              strstr(r.out.p, "--skip-header-lines") && strstr(r.out.p, "--stats"));
    /* --shuffle is said plainly to be a windowed shuffle, its window
     * --min-after-dequeue; '-' is standard input */
    cr_expect(strstr(r.out.p, "a windowed shuffle, not a full") != NULL, "stdout: %s", r.out.p);
    cr_expect(strstr(r.out.p, "--min-after-dequeue lines back (the window)") != NULL);
    cr_expect(strstr(r.out.p, "a FILE of '-',\nread standard input") != NULL);
    cr_expect_eq(r.err.len, 0, "stderr: %s", r.err.p);
    result_free(&r);
}

Test(qflow_lines, unknown_option_exits_2_naming_it)
{
    result r;
    run(&r, "--frobnicate", "x", NULL);
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, "--frobnicate") != NULL, "stderr: %s", r.err.p);
    cr_expect_eq(r.out.len, 0);
    result_free(&r);
}

Test(qflow_lines, bad_numbers_exit_2_naming_the_option)
{
    tdir d;
    tdir_make(&d);
    const char *f = write_str(&d, "a.txt", "x\n");
    static const char *const cases[][2] = {
        {"--readers", "0"},
        {"--readers", "two"},
        {"--batch-size", "0"},
        {"--batch-size", "12x"},
        {"--capacity", "-5"},
        {"--epochs", "-1"},
        {"--seed", "nope"},
        {"--skip-header-lines", "-1"},
        {"--min-after-dequeue", "-3"},
        {"--epochs", "99999999999999999999999"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        result r;
        run(&r, cases[i][0], cases[i][1], f, NULL);
        EXPECT_EXIT(&r, 2);
        cr_expect(strstr(r.err.p, cases[i][0]) != NULL, "%s %s: stderr: %s", cases[i][0],
                  cases[i][1], r.err.p);
        cr_expect_eq(r.out.len, 0);
        result_free(&r);
    }
    result r;
    run(&r, f, "--readers", NULL); /* missing argument */
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, "--readers") != NULL, "stderr: %s", r.err.p);
    result_free(&r);
    tdir_remove(&d);
}

/* Run the tool with `data` written into a pipe as its standard input (by
 * a child of its own, so neither side can fill a pipe and stall). */
__attribute__((sentinel)) static void run_piped(result *res, const char *data, size_t len, ...)
{
    int in[2];
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    pid_t w = fork();
    cr_assert_neq(w, -1, "fork: %s", strerror(errno));
    if (w == 0) {
        close(in[0]);
        size_t off = 0;
        while (off < len) {
            /* odd-sized writes: the tool's reads end anywhere in a line */
            size_t c = len - off < 4093 ? len - off : 4093;
            ssize_t n = write(in[1], data + off, c);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                _exit(1);
            off += (size_t)n;
        }
        _exit(0);
    }
    close(in[1]); /* the writer's end is the child's alone: its exit is the end */
    va_list ap;
    va_start(ap, len);
    run_v(res, in[0], ap);
    va_end(ap);
    close(in[0]);
    int st;
    while (waitpid(w, &st, 0) < 0 && errno == EINTR)
        ;
}

/* What a TextLineReader makes of `text` (spec 190-193), written one line
 * per '\n': the reference the tool's output must equal byte for byte. */
static void reference_lines(const char *text, size_t len, buf *out)
{
    buf_add(out, "", 0);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        bool end = i == len;
        if (!end && text[i] != '\n')
            continue;
        size_t l = i - start;
        if (l > 0 && text[start + l - 1] == '\r')
            l--;
        if (!end || l > 0) {
            buf_add(out, text + start, l);
            buf_add(out, "\n", 1);
        }
        start = i + 1;
    }
}

/* As cat does: no FILE reads standard input, a regular file or a pipe. */
Test(qflow_lines, no_files_reads_standard_input)
{
    tdir d;
    tdir_make(&d);
    static const char text[] = "one\r\ntwo\n\nmid\rdle\n\r\nlast";
    const char *f = write_str(&d, "in.txt", text);
    buf want = {0};
    reference_lines(text, sizeof(text) - 1, &want);
    result r;
    run_in(&r, f, NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_eq(r.err.len, 0, "stderr: %s", r.err.p);
    cr_expect_str_eq(r.out.p, want.p);
    result_free(&r);
    run_piped(&r, text, sizeof(text) - 1, NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_str_eq(r.out.p, want.p);
    result_free(&r);
    /* with keys, standard input is still "-" */
    run_piped(&r, text, sizeof(text) - 1, "--keys", NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_str_eq(r.out.p, "-:1\tone\n-:2\ttwo\n-:3\t\n-:4\tmid\rdle\n-:5\t\n-:6\tlast\n");
    result_free(&r);
    /* a regular file already read from: the tool goes on from there */
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_assert_eq(lseek(fd, 5, SEEK_SET), 5);
    const char *args[] = {NULL};
    proc p;
    spawn_in(&p, args, fd);
    close(fd);
    memset(&r, 0, sizeof(r));
    r.status = finish(&p, &r.out, &r.err);
    EXPECT_EXIT(&r, 0);
    cr_expect_str_eq(r.out.p, want.p + 4, "from offset 5");
    result_free(&r);
    free(want.p);
    tdir_remove(&d);
}

/* The next of a xorshift64 sequence: test text that is the same on every
 * run. */
static uint64_t xorshift64(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* r's exit 0 and output byte for byte want; `what` names the run. */
static void expect_output(const result *r, const buf *want, const char *what)
{
    EXPECT_EXIT(r, 0);
    cr_assert_eq(r->out.len, want->len, "%s: %zu bytes, want %zu", what, r->out.len, want->len);
    cr_expect(memcmp(r->out.p, want->p, want->len) == 0, "%s: output differs", what);
}

/* Megabytes through a pipe and from a file, with every line length from 0
 * to past the 256 KiB read buffer, CRLF and bare CR, and no newline at the
 * end: the output equals the reference byte for byte, and stdin's equals
 * the file's. */
Test(qflow_lines, standard_input_and_file_byte_identical_across_read_blocks)
{
    tdir d;
    tdir_make(&d);
    size_t cap = (size_t)6 << 20, len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    uint64_t x = 88172645463325252ull;
    while (len < cap - 300000) {
        xorshift64(&x);
        size_t l = x % 97 == 0 ? 200000 + x % 100000 : x % 300; /* some longer than a block */
        for (size_t i = 0; i < l; i++)
            text[len++] = (char)('a' + (i + l) % 26);
        if (x % 5 == 0)
            text[len++] = '\r';
        if (x % 11 == 0)
            text[len++] = '\r';
        if (x % 3 != 0 || l > 0)
            text[len++] = '\n';
        else
            text[len++] = '\n', text[len++] = '\n'; /* empty lines */
    }
    memcpy(text + len, "tail\r", 5); /* no newline at the end */
    len += 5;
    const char *f = write_bytes(&d, "big.txt", text, len);
    buf want = {0};
    reference_lines(text, len, &want);
    result r;
    run(&r, f, NULL);
    expect_output(&r, &want, "file");
    result_free(&r);
    run_piped(&r, text, len, "-", NULL);
    expect_output(&r, &want, "pipe");
    result_free(&r);
    run_in(&r, f, "--batch-size", "1000", NULL);
    expect_output(&r, &want, "stdin file");
    result_free(&r);
    free(want.p);
    free(text);
    tdir_remove(&d);
}

/* Short lines with empty ones among them, single and in pairs, and now
 * and then a "\r\n" or a '\r' inside: the lines a reader hands out lie
 * back to back in its block, so qflow-lines writes long runs of them where
 * they lie (lines_out.h); empty lines inside a run (one, or up to six in a
 * row) join it, and a CRLF ends it. Output byte-identical, from a file and a
 * pipe, with batches of several sizes. */
Test(qflow_lines, short_lines_written_in_runs_byte_identical)
{
    tdir d;
    tdir_make(&d);
    size_t cap = (size_t)8 << 20, len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    while (len < cap - 200) {
        xorshift64(&x);
        size_t l = x % 8 == 0 ? 0 : x % 120;
        for (size_t i = 0; i < l; i++)
            text[len++] = (char)('0' + (i * 7 + l) % 64);
        if (x % 1999 == 0)
            text[len++] = '\r';
        if (x % 37 == 0 && l > 2)
            text[len - 2] = '\r'; /* a '\r' that stays */
        text[len++] = '\n';
        if (x % 2999 == 0)
            text[len++] = '\n'; /* a second empty line */
        for (uint64_t e = 0; x % 211 == 0 && e < 2 + (x >> 40) % 4; e++)
            text[len++] = '\n'; /* two to five empty lines in a row */
    }
    const char *f = write_bytes(&d, "runs.txt", text, len);
    buf want = {0};
    reference_lines(text, len, &want);
    const char *sizes[] = {"1024", "7", "5000"};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        result r;
        char what[64];
        run(&r, "--readers", "1", "--batch-size", sizes[k], f, NULL);
        snprintf(what, sizeof(what), "file, batch %s", sizes[k]);
        expect_output(&r, &want, what);
        result_free(&r);
        run_piped(&r, text, len, "--batch-size", sizes[k], NULL);
        snprintf(what, sizeof(what), "pipe, batch %s", sizes[k]);
        expect_output(&r, &want, what);
        result_free(&r);
    }
    free(want.p);
    free(text);
    tdir_remove(&d);
}

/* spec 177: capacity must be bigger than min_after_dequeue. */
Test(qflow_lines, capacity_not_above_min_after_dequeue_exits_2)
{
    tdir d;
    tdir_make(&d);
    const char *f = write_str(&d, "a.txt", "x\n");
    result r;
    run(&r, "--shuffle", "--capacity", "10", "--min-after-dequeue", "10", f, NULL);
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, "capacity 10 must be bigger than min_after_dequeue 10") != NULL,
              "stderr: %s", r.err.p);
    result_free(&r);
    tdir_remove(&d);
}

Test(qflow_lines, missing_file_exits_2_naming_it)
{
    tdir d;
    tdir_make(&d);
    const char *good = write_str(&d, "good.txt", "x\ny\n");
    const char *missing = tpath(&d, "no-such-file.txt");
    result r;
    run(&r, good, missing, NULL);
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, missing) != NULL, "stderr: %s", r.err.p);
    cr_expect(strstr(r.err.p, "No such file or directory") != NULL, "stderr: %s", r.err.p);
    cr_expect_eq(r.out.len, 0, "nothing is read when an input is missing");
    result_free(&r);

    run(&r, d.path, NULL); /* a directory is not a file of lines */
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, d.path) != NULL, "stderr: %s", r.err.p);
    result_free(&r);
    tdir_remove(&d);
}

/* ------------------------------------------------------------------ lines */

/* Every line of every file exactly once (spec 152, 164, 190). */
Test(qflow_lines, every_line_once)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 1000, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 777, "\n");
    const char *c = write_lines(&d, "c.txt", "C", 3, "\n");
    result r;
    run(&r, a, b, c, NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_eq(r.err.len, 0, "stderr: %s", r.err.p);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 1000, 1, false, 1);
    want_lines(&want, b, "B", 777, 1, false, 1);
    want_lines(&want, c, "C", 3, 1, false, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* Batch sizes that do not divide the line count, several readers: the
 * final short batch is delivered (spec 164), nothing is duplicated. */
Test(qflow_lines, odd_batch_sizes_lose_nothing)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 101, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 50, "\n");
    static const char *const sizes[][3] = {
        {"1", "1", "1"}, {"7", "3", "8"}, {"64", "4", "64"}, {"1000", "2", "5"}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        result r;
        run(&r, "--batch-size", sizes[i][0], "--readers", sizes[i][1], "--capacity", sizes[i][2], a,
            b, NULL);
        EXPECT_EXIT(&r, 0);
        lines got, want = {0};
        split(&r.out, &got);
        want_lines(&want, a, "A", 101, 1, false, 1);
        want_lines(&want, b, "B", 50, 1, false, 1);
        expect_same_lines(&got, &want);
        lines_free(&got);
        lines_free(&want);
        result_free(&r);
    }
    tdir_remove(&d);
}

/* --keys: "<file>:<line number>\t<line>", numbered from 1 (spec 190). */
Test(qflow_lines, keys_are_file_colon_line)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 40, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 25, "\n");
    result r;
    run(&r, "--keys", "--readers", "2", a, b, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 40, 1, true, 1);
    want_lines(&want, b, "B", 25, 1, true, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);

    run(&r, "--keys", "--no-keys", a, NULL); /* the last one wins */
    EXPECT_EXIT(&r, 0);
    split(&r.out, &got);
    want_lines(&want, a, "A", 40, 1, false, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* One reader, no shuffle: a file comes out in order, files in the order
 * given (spec 152: the producer keeps the list's order). */
Test(qflow_lines, one_reader_keeps_file_order)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 300, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 200, "\n");
    result r;
    run(&r, "--readers", "1", "--batch-size", "32", a, b, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 300, 1, false, 1);
    want_lines(&want, b, "B", 200, 1, false, 1);
    cr_assert_eq(got.n, want.n);
    for (size_t i = 0; i < got.n; i++)
        cr_assert_str_eq(got.v[i], want.v[i], "line %zu", i);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* --epochs N: every line exactly N times (spec 152); with keys, every key
 * N times. */
Test(qflow_lines, epochs_repeat_every_line)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 123, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 45, "\n");
    result r;
    run(&r, "--epochs", "3", "--keys", a, b, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 123, 1, true, 3);
    want_lines(&want, b, "B", 45, 1, true, 3);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* --shuffle --seed S: a permutation of the input, the same for the same
 * seed, different for another seed, each epoch a whole pass (spec 153,
 * 179). */
Test(qflow_lines, shuffle_with_seed_is_reproducible)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 400, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 300, "\n");
    const char *c = write_lines(&d, "c.txt", "C", 200, "\n");
    result r1, r2, r3;
    run(&r1, "--shuffle", "--seed", "271828", "--readers", "3", "--batch-size", "16", a, b, c,
        NULL);
    run(&r2, "--shuffle", "--seed", "271828", "--readers", "3", "--batch-size", "16", a, b, c,
        NULL);
    run(&r3, "--shuffle", "--seed", "314159", "--readers", "3", "--batch-size", "16", a, b, c,
        NULL);
    EXPECT_EXIT(&r1, 0);
    EXPECT_EXIT(&r2, 0);
    EXPECT_EXIT(&r3, 0);
    cr_expect_eq(r1.out.len, r2.out.len);
    cr_expect(r1.out.len == r2.out.len && memcmp(r1.out.p, r2.out.p, r1.out.len) == 0,
              "the same seed gave different output");
    cr_expect(r1.out.len != r3.out.len || memcmp(r1.out.p, r3.out.p, r1.out.len) != 0,
              "different seeds gave the same output");

    lines got, want = {0};
    split(&r1.out, &got);
    want_lines(&want, a, "A", 400, 1, false, 1);
    want_lines(&want, b, "B", 300, 1, false, 1);
    want_lines(&want, c, "C", 200, 1, false, 1);
    /* Not in file order: count adjacent pairs that are consecutive lines
     * of one file; an unshuffled stream has almost only those. */
    size_t consecutive = 0;
    for (size_t i = 0; i + 1 < got.n && i + 1 < want.n; i++)
        consecutive += strcmp(got.v[i], want.v[i]) == 0;
    cr_expect_lt(consecutive, got.n / 4, "%zu of %zu lines in file order: not shuffled",
                 consecutive, got.n);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);

    /* Two epochs: each line twice, still reproducible. */
    result r4, r5;
    run(&r4, "--shuffle", "--seed", "5", "--epochs", "2", a, b, NULL);
    run(&r5, "--shuffle", "--seed", "5", "--epochs", "2", a, b, NULL);
    EXPECT_EXIT(&r4, 0);
    cr_expect(r4.out.len == r5.out.len && memcmp(r4.out.p, r5.out.p, r4.out.len) == 0,
              "the same seed gave different output over two epochs");
    split(&r4.out, &got);
    want_lines(&want, a, "A", 400, 1, false, 2);
    want_lines(&want, b, "B", 300, 1, false, 2);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r1);
    result_free(&r2);
    result_free(&r3);
    result_free(&r4);
    result_free(&r5);
    tdir_remove(&d);
}

/* --seed without --shuffle: several readers interleave, and still the same
 * way every time. */
Test(qflow_lines, seed_makes_reader_interleaving_reproducible)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 500, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 500, "\n");
    result r1, r2;
    run(&r1, "--seed", "1", "--readers", "2", "--batch-size", "8", a, b, NULL);
    run(&r2, "--seed", "1", "--readers", "2", "--batch-size", "8", a, b, NULL);
    EXPECT_EXIT(&r1, 0);
    EXPECT_EXIT(&r2, 0);
    cr_expect(r1.out.len == r2.out.len && memcmp(r1.out.p, r2.out.p, r1.out.len) == 0,
              "the same seed gave different output");
    result_free(&r1);
    result_free(&r2);
    tdir_remove(&d);
}

/* --shuffle without a seed still delivers every line once. */
Test(qflow_lines, shuffle_without_seed_loses_nothing)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 2000, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 10, "\n");
    result r;
    run(&r, "--shuffle", "--capacity", "100", "--min-after-dequeue", "50", a, b, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 2000, 1, false, 1);
    want_lines(&want, b, "B", 10, 1, false, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* spec 195-196: header lines are dropped per file and still counted in
 * the keys; a file shorter than the header gives nothing. */
Test(qflow_lines, skip_header_lines)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 10, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 5, "\n");
    const char *h = write_str(&d, "h.txt", "only a header\n");
    const char *s = write_str(&d, "s.txt", "one\n");
    result r;
    run(&r, "--skip-header-lines", "2", "--keys", a, b, h, s, NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_eq(r.err.len, 0, "stderr: %s", r.err.p);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 10, 3, true, 1);
    want_lines(&want, b, "B", 5, 3, true, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* spec 191-193: "\r\n" endings give the same lines and keys as "\n"; a
 * '\r' inside a line stays; a last line without newline is returned;
 * empty lines are records. */
Test(qflow_lines, crlf_and_line_edge_cases)
{
    tdir d;
    tdir_make(&d);
    const char *lf = write_lines(&d, "lf.txt", "X", 30, "\n");
    const char *crlf = write_lines(&d, "crlf.txt", "X", 30, "\r\n");
    result r1, r2;
    run(&r1, "--keys", "--readers", "1", lf, NULL);
    run(&r2, "--keys", "--readers", "1", crlf, NULL);
    EXPECT_EXIT(&r1, 0);
    EXPECT_EXIT(&r2, 0);
    cr_expect_null(memchr(r2.out.p, '\r', r2.out.len), "a '\\r' survived");
    lines g1, g2;
    split(&r1.out, &g1);
    split(&r2.out, &g2);
    cr_assert_eq(g1.n, 30);
    cr_assert_eq(g2.n, 30);
    for (size_t i = 0; i < g1.n; i++) {
        /* keys differ only by the file name */
        const char *t1 = strchr(g1.v[i], ':'), *t2 = strchr(g2.v[i], ':');
        cr_assert(t1 && t2);
        cr_expect_str_eq(t1, t2);
    }
    lines_free(&g1);
    lines_free(&g2);
    result_free(&r1);
    result_free(&r2);

    const char *odd = write_str(&d, "odd.txt", "a\r\n\nmid\rdle\r\n\r\nlast");
    result r;
    run(&r, "--keys", odd, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    char s[256];
    const char *exp[][2] = {{"1", "a"}, {"2", ""}, {"3", "mid\rdle"}, {"4", ""}, {"5", "last"}};
    for (size_t i = 0; i < 5; i++) {
        int n = snprintf(s, sizeof(s), "%s:%s\t%s", odd, exp[i][0], exp[i][1]);
        lines_add(&want, s, (size_t)n);
    }
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* spec 194: empty files give nothing and are no error; only empty files:
 * no output, exit 0. */
Test(qflow_lines, empty_files)
{
    tdir d;
    tdir_make(&d);
    const char *e1 = write_str(&d, "e1.txt", "");
    const char *e2 = write_str(&d, "e2.txt", "");
    const char *a = write_lines(&d, "a.txt", "A", 20, "\n");
    result r;
    run(&r, e1, a, e2, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 20, 1, false, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);

    run(&r, "--epochs", "5", e1, e2, NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_eq(r.out.len, 0);
    cr_expect_eq(r.err.len, 0, "stderr: %s", r.err.p);
    result_free(&r);
    tdir_remove(&d);
}

/* A line far longer than any buffer comes out whole. */
Test(qflow_lines, very_long_line)
{
    tdir d;
    tdir_make(&d);
    size_t n = 3u << 20;
    char *big = malloc(n + 16);
    cr_assert_not_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + i % 26);
    memcpy(big + n, "\nshort\n", 7);
    const char *f = write_bytes(&d, "big.txt", big, n + 7);
    result r;
    run(&r, f, NULL);
    EXPECT_EXIT(&r, 0);
    cr_assert_eq(r.out.len, n + 7);
    bool first_long = r.out.p[n] == '\n';
    if (first_long)
        cr_expect(memcmp(r.out.p, big, n + 7) == 0);
    else
        cr_expect(memcmp(r.out.p, "short\n", 6) == 0 && memcmp(r.out.p + 6, big, n) == 0);
    free(big);
    result_free(&r);
    tdir_remove(&d);
}

/* A file that opens but cannot be read (Linux: /proc/self/mem at offset
 * 0 fails with EIO) is an error of the pipeline: the reader reports it to
 * the Coordinator, everything stops, the message names the file, exit 1;
 * in both run modes. */
Test(qflow_lines, read_error_exits_1_naming_the_file)
{
    int fd = open("/proc/self/mem", O_RDONLY);
    if (fd < 0)
        cr_skip_test("no /proc/self/mem");
    close(fd);
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 10, "\n");
    static const char *const modes[] = {"--readers", "--seed"};
    for (size_t i = 0; i < 2; i++) {
        result r;
        run(&r, modes[i], "1", "/proc/self/mem", a, NULL);
        EXPECT_EXIT(&r, 1);
        cr_expect(strstr(r.err.p, "/proc/self/mem") != NULL, "stderr: %s", r.err.p);
        cr_expect(strstr(r.err.p, "Input/output error") != NULL, "stderr: %s", r.err.p);
        cr_expect(r.out.len == 0 || r.out.p[r.out.len - 1] == '\n');
        result_free(&r);
    }
    tdir_remove(&d);
}

Test(qflow_lines, stats_draws_a_progress_line_on_stderr)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 5000, "\n");
    result r;
    run(&r, "--stats", "--epochs", "2", a, NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect(strstr(r.err.p, "lines/s") != NULL, "stderr: %s", r.err.p);
    cr_expect(strchr(r.err.p, '\r') != NULL, "no \\r redraw: %s", r.err.p);
    cr_expect(strstr(r.err.p, "10000 lines") != NULL, "final count missing: %s", r.err.p);
    cr_expect(r.err.len && r.err.p[r.err.len - 1] == '\n', "the last display line is ended");
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, a, "A", 5000, 1, false, 2);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

/* The batch queue's capacity, as --help documents it: 8 x the batch size
 * by default, --capacity when given (the --stats line shows the queue's
 * fill as "lines queue N/CAPACITY"). */
Test(qflow_lines, batch_queue_capacity_defaults_to_eight_batches)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 100, "\n");
    result r[3];
    run(&r[0], "--stats", a, NULL);
    run(&r[1], "--stats", "--batch-size", "10", a, NULL);
    run(&r[2], "--stats", "--batch-size", "10", "--capacity", "35", a, NULL);
    static const char *const shown[3] = {"lines queue 0/8192", "lines queue 0/80",
                                         "lines queue 0/35"};
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EXIT(&r[i], 0);
        cr_expect(strstr(r[i].err.p, shown[i]) != NULL, "case %zu: want '%s' in: %s", i, shown[i],
                  r[i].err.p);
        result_free(&r[i]);
    }
    tdir_remove(&d);
}

/* ---------------------------------------------------------------- signals */

/* Read from fd until at least `min` bytes arrived (or EOF). */
static void read_at_least(int fd, buf *b, size_t min)
{
    buf_add(b, "", 0);
    char chunk[65536];
    while (b->len < min) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert_gt(n, 0, "the tool ended before writing %zu bytes", min);
        buf_add(b, chunk, (size_t)n);
    }
}

/* `qflow-lines file | head -1`: the reader goes away; the tool notices the
 * broken pipe, stops its pipeline and exits 0 without a word. */
Test(qflow_lines, broken_pipe_exits_quietly)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 20000, "\n");
    const char *const args[] = {"--epochs", "0", a, NULL}; /* forever */
    proc p;
    spawn(&p, args);
    buf first = {0};
    read_at_least(p.out, &first, 1);
    close(p.out); /* like head -1 after its line */
    p.out = open("/dev/null", O_RDONLY);
    buf out = {0}, err = {0};
    int status = finish(&p, &out, &err);
    cr_expect_eq(exit_code(status), 0, "exit %d; stderr: %s", exit_code(status), err.p);
    cr_expect_eq(err.len, 0, "stderr: %s", err.p);
    free(first.p);
    free(out.p);
    free(err.p);
    tdir_remove(&d);
}

/* Ctrl-C (and SIGTERM) in the middle of an endless stream: the pipeline
 * stops, the output ends with a whole line, every line is an input line,
 * and the tool dies of the signal (shell status 128 + signal). With
 * `seeded`, the same through the deterministic, shuffled, keyed pipeline,
 * which the calling thread drives. */
static void signal_stops_with_whole_lines(int sig, bool seeded)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 3000, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 3000, "\n");
    const char *args[16];
    int n = 0;
    args[n++] = "--epochs";
    args[n++] = "0"; /* forever */
    if (seeded) {
        args[n++] = "--shuffle";
        args[n++] = "--seed";
        args[n++] = "9";
        args[n++] = "--keys";
    }
    args[n++] = a;
    args[n++] = b;
    args[n] = NULL;
    proc p;
    spawn(&p, args);
    buf out = {0}, err = {0};
    read_at_least(p.out, &out, 4u << 20); /* past several flushes */
    cr_assert_eq(kill(p.pid, sig), 0);
    int status = finish(&p, &out, &err);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == sig, "status %#x; stderr: %s", status,
              err.p);
    cr_expect_eq(err.len, 0, "stderr: %s", err.p);
    lines got, want = {0};
    split(&out, &got); /* asserts the output ends with '\n' */
    want_lines(&want, a, "A", 3000, 1, seeded, 1);
    want_lines(&want, b, "B", 3000, 1, seeded, 1);
    lines_sort(&want);
    for (size_t i = 0; i < got.n; i++)
        if (!bsearch(&got.v[i], want.v, want.n, sizeof(*want.v), cmp_str)) {
            cr_expect_fail("line %zu \"%.80s\" is not an input line (a cut line?)", i, got.v[i]);
            break;
        }
    lines_free(&got);
    lines_free(&want);
    free(out.p);
    free(err.p);
    tdir_remove(&d);
}

Test(qflow_lines, sigint_stops_with_whole_lines)
{
    signal_stops_with_whole_lines(SIGINT, false);
}

Test(qflow_lines, sigterm_stops_with_whole_lines)
{
    signal_stops_with_whole_lines(SIGTERM, false);
}

Test(qflow_lines, sigint_stops_a_seeded_shuffled_pipeline)
{
    signal_stops_with_whole_lines(SIGINT, true);
}

/* ------------------------------------------------------ standard input */

/* A whole file, malloc'd. */
static char *read_whole(const char *path, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    size_t len = (size_t)st.st_size, off = 0;
    char *b = malloc(len + 1);
    cr_assert_not_null(b);
    while (off < len) {
        ssize_t n = read(fd, b + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert_gt(n, 0, "read %s: %s", path, n < 0 ? strerror(errno) : "short");
        off += (size_t)n;
    }
    close(fd);
    *ret_len = len;
    return b;
}

/* Standard input's output rs against the file's rf (see same_as_file()). */
static void expect_same_keyed(result *rf, result *rs, const char *path, const char *name,
                              const char *how)
{
    EXPECT_EXIT(rs, 0);
    cr_expect_eq(rs->err.len, 0, "%s, %s: stderr: %s", name, how, rs->err.p);
    lines gf, gs;
    split(&rf->out, &gf);
    split(&rs->out, &gs);
    cr_assert_eq(gs.n, gf.n, "%s, %s: %zu lines from stdin, %zu from the file", name, how, gs.n,
                 gf.n);
    size_t plen = strlen(path);
    for (size_t i = 0; i < gf.n; i++) {
        cr_assert(strncmp(gf.v[i], path, plen) == 0 && gf.v[i][plen] == ':');
        cr_assert(strncmp(gs.v[i], "-:", 2) == 0, "%s: key of \"%s\"", how, gs.v[i]);
        cr_expect_str_eq(gs.v[i] + 1, gf.v[i] + plen, "%s, %s: line %zu", name, how, i);
    }
    lines_free(&gf);
    lines_free(&gs);
}

/* `text` read as FILE and as "-" gives the same lines in the same order,
 * keys and all, the file's keys "<path>:<n>" being "-:<n>" for standard
 * input (spec 190-195: one TextLine reading, whatever the source), however
 * standard input comes: the same file (a reader reopens it), a pipe (a
 * reader reads it), a pipe with --seed (copied whole to a memory file
 * first, which a reader reads). */
static void same_as_file(const tdir *d, const char *name, const char *text, const char *skip)
{
    const char *path = write_str(d, name, text);
    result rf, rs;
    run(&rf, "--keys", "--readers", "1", "--skip-header-lines", skip, path, NULL);
    EXPECT_EXIT(&rf, 0);
    run_in(&rs, path, "--keys", "--skip-header-lines", skip, "-", NULL);
    expect_same_keyed(&rf, &rs, path, name, "the file as stdin");
    result_free(&rs);
    run_piped(&rs, text, strlen(text), "--keys", "--skip-header-lines", skip, "-", NULL);
    expect_same_keyed(&rf, &rs, path, name, "a pipe");
    result_free(&rs);
    run_piped(&rs, text, strlen(text), "--keys", "--seed", "7", "--skip-header-lines", skip, "-",
              NULL);
    expect_same_keyed(&rf, &rs, path, name, "a pipe, --seed");
    result_free(&rs);
    result_free(&rf);
}

Test(qflow_lines, dash_reads_standard_input_as_a_text_line_reader_reads_a_file)
{
    tdir d;
    tdir_make(&d);
    same_as_file(&d, "plain", "one\ntwo\nthree\n", "0");
    same_as_file(&d, "crlf", "one\r\ntwo\r\nthree", "0");        /* spec 191-192 */
    same_as_file(&d, "odd", "a\r\n\nmid\rdle\r\n\r\nlast", "0"); /* spec 193 */
    same_as_file(&d, "cr_end", "x\n\r", "0");                    /* spec 193 */
    same_as_file(&d, "only_nl", "\n", "0");                      /* spec 193 */
    same_as_file(&d, "empty", "", "0");                          /* spec 194 */
    same_as_file(&d, "header", "h1\nh2\nbody 1\nbody 2", "2");   /* spec 195 */
    same_as_file(&d, "short_header", "h1\n", "3");               /* spec 196 */
    /* a file of many lines, longer than one read of standard input */
    const char *big = write_lines(&d, "big", "S", 40000, "\n");
    result r;
    run_in(&r, big, "-", NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    want_lines(&want, big, "S", 40000, 1, false, 1);
    cr_assert_eq(got.n, want.n);
    for (size_t i = 0; i < got.n; i++)
        if (strcmp(got.v[i], want.v[i]) != 0) {
            cr_expect_fail("line %zu: got \"%s\", want \"%s\" (order)", i, got.v[i], want.v[i]);
            break;
        }
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    /* the same through a pipe with --seed: all of it, in order, once */
    size_t blen;
    char *btext = read_whole(big, &blen);
    run_piped(&r, btext, blen, "--seed", "3", "-", NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_eq(r.out.len, blen, "--seed through a pipe: %zu bytes of %zu", r.out.len, blen);
    cr_expect(r.out.len == blen && memcmp(r.out.p, btext, blen) == 0,
              "--seed through a pipe: the input, in order");
    free(btext);
    result_free(&r);
    tdir_remove(&d);
}

Test(qflow_lines, dash_among_files_adds_standard_input_once)
{
    /* files and "-" together: every line once; standard input's lines
     * keep their order among themselves */
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 3000, "\n");
    const char *b = write_lines(&d, "b.txt", "B", 2000, "\n");
    const char *s = write_lines(&d, "s.txt", "S", 5000, "\n");
    result r;
    run_in(&r, s, "--keys", "--readers", "2", a, "-", b, NULL);
    EXPECT_EXIT(&r, 0);
    lines got, want = {0};
    split(&r.out, &got);
    long next = 1;
    for (size_t i = 0; i < got.n; i++)
        if (strncmp(got.v[i], "-:", 2) == 0) {
            long n = strtol(got.v[i] + 2, NULL, 10);
            cr_expect_eq(n, next, "standard input's lines in order");
            next = n + 1;
        }
    cr_expect_eq(next, 5001);
    /* the multiset: the files' lines with their keys, stdin's with "-" */
    want_lines(&want, a, "A", 3000, 1, true, 1);
    want_lines(&want, b, "B", 2000, 1, true, 1);
    lines sw = {0};
    want_lines(&sw, "-", "S", 5000, 1, true, 1);
    for (size_t i = 0; i < sw.n; i++)
        lines_add(&want, sw.v[i], strlen(sw.v[i]));
    expect_same_lines(&got, &want);
    lines_free(&sw);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);

    /* with --shuffle: still every line once */
    run_in(&r, s, "--shuffle", "--min-after-dequeue", "500", a, "-", b, NULL);
    EXPECT_EXIT(&r, 0);
    split(&r.out, &got);
    want_lines(&want, a, "A", 3000, 1, false, 1);
    want_lines(&want, b, "B", 2000, 1, false, 1);
    want_lines(&want, s, "S", 5000, 1, false, 1);
    expect_same_lines(&got, &want);
    lines_free(&got);
    lines_free(&want);
    result_free(&r);
    tdir_remove(&d);
}

Test(qflow_lines, seeded_shuffle_of_standard_input_is_reproducible)
{
    /* --seed: standard input is read to its end first, so the shuffled
     * output is byte-identical run to run, with files too */
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 2000, "\n");
    const char *s = write_lines(&d, "s.txt", "S", 3000, "\n");
    result r1, r2;
    run_in(&r1, s, "--shuffle", "--seed", "5", "--min-after-dequeue", "700", "--keys", a, "-",
           NULL);
    run_in(&r2, s, "--shuffle", "--seed", "5", "--min-after-dequeue", "700", "--keys", a, "-",
           NULL);
    EXPECT_EXIT(&r1, 0);
    EXPECT_EXIT(&r2, 0);
    cr_expect_eq(r1.out.len, r2.out.len);
    cr_expect(r1.out.len == r2.out.len && memcmp(r1.out.p, r2.out.p, r1.out.len) == 0,
              "two runs with the same seed differ");
    lines got, want = {0};
    split(&r1.out, &got);
    want_lines(&want, a, "A", 2000, 1, true, 1);
    lines sw = {0};
    want_lines(&sw, "-", "S", 3000, 1, true, 1);
    for (size_t i = 0; i < sw.n; i++)
        lines_add(&want, sw.v[i], strlen(sw.v[i]));
    expect_same_lines(&got, &want);
    lines_free(&sw);
    lines_free(&got);
    lines_free(&want);
    result_free(&r1);
    result_free(&r2);
    tdir_remove(&d);
}

Test(qflow_lines, dash_rules_exit_2)
{
    result r;
    run(&r, "--epochs", "2", "-", NULL);
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, "can be read only once: use --epochs 1 with '-'") != NULL, "%s",
              r.err.p);
    result_free(&r);
    run(&r, "--epochs", "0", "-", NULL);
    EXPECT_EXIT(&r, 2);
    result_free(&r);
    run(&r, "-", "-", NULL);
    EXPECT_EXIT(&r, 2);
    cr_expect(strstr(r.err.p, "'-' (standard input) is given twice") != NULL, "%s", r.err.p);
    result_free(&r);
    /* an empty standard input is no error */
    run(&r, "-", NULL);
    EXPECT_EXIT(&r, 0);
    cr_expect_eq(r.out.len, 0);
    result_free(&r);
}

/* Standard input closed (`qflow-lines <&-`): an error, at once, as cat
 * reports it, with or without --seed; it used to wait for good, on an fd
 * of its own that had taken the number 0. */
Test(qflow_lines, a_closed_standard_input_exits_1)
{
    static const char *const seeded[] = {"--seed", "3", "-", NULL};
    static const char *const plain[] = {"-", NULL};
    const char *const *argss[] = {plain, seeded};
    for (int k = 0; k < 2; k++) {
        proc p;
        spawn_in(&p, argss[k], -2);
        buf out = {0}, err = {0};
        int status = finish(&p, &out, &err);
        cr_expect_eq(exit_code(status), 1, "%s: exit %d", k ? "--seed" : "plain",
                     exit_code(status));
        cr_expect(err.p && strstr(err.p, "standard input") != NULL, "stderr: %s", err.p);
        cr_expect_eq(out.len, 0);
        free(out.p);
        free(err.p);
    }
}

Test(qflow_lines, a_read_error_on_standard_input_exits_1)
{
    tdir d;
    tdir_make(&d);
    result r;
    run_in(&r, d.path, "-", NULL); /* a directory: read(2) fails with EISDIR */
    EXPECT_EXIT(&r, 1);
    cr_expect(strstr(r.err.p, "read error on standard input") != NULL, "stderr: %s", r.err.p);
    result_free(&r);
    tdir_remove(&d);
}

/* A pipe that never delivers holds no worker and no stop: the file's lines
 * flow past it, and a broken output pipe ends the tool with status 0 while
 * standard input is still open and silent. */
Test(qflow_lines, a_silent_standard_input_does_not_hold_up_a_broken_pipe)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_lines(&d, "a.txt", "A", 200000, "\n"); /* ~5 MB of output */
    int in[2];
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    const char *const args[] = {a, "-", NULL};
    proc p;
    spawn_in(&p, args, in[0]);
    close(in[0]);
    buf first = {0};
    read_at_least(p.out, &first, 1);
    close(p.out); /* like head -1 after its line */
    p.out = open("/dev/null", O_RDONLY);
    buf out = {0}, err = {0};
    int status = finish(&p, &out, &err);
    cr_expect_eq(exit_code(status), 0, "exit %d; stderr: %s", exit_code(status), err.p);
    cr_expect_eq(err.len, 0, "stderr: %s", err.p);
    close(in[1]); /* only now: the tool never saw the end of its input */
    free(first.p);
    free(out.p);
    free(err.p);
    tdir_remove(&d);
}

/* Read fd (stderr) until `what` appears in what was read. */
static void read_until(int fd, buf *b, const char *what)
{
    buf_add(b, "", 0);
    char chunk[4096];
    while (!strstr(b->p, what)) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert_gt(n, 0, "the tool ended before writing \"%s\": %s", what, b->p);
        buf_add(b, chunk, (size_t)n);
    }
}

/* SIGTERM while standard input is open and silent: the tool stops at once
 * (its thread waits in poll(2) with the stop's eventfd), writes the lines
 * it had, whole, and dies of the signal. The test knows the lines went
 * through from the --stats line, not from a pause. */
static void signal_with_silent_stdin(bool seeded)
{
    int in[2];
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    const char *args[8];
    int n = 0;
    args[n++] = "--stats";
    args[n++] = "--batch-size";
    args[n++] = "5";
    if (seeded) {
        args[n++] = "--seed";
        args[n++] = "3";
    }
    args[n++] = "-";
    args[n] = NULL;
    proc p;
    spawn_in(&p, args, in[0]);
    close(in[0]);
    buf out = {0}, err = {0};
    if (!seeded) { /* --seed reads to the end first: nothing goes through */
        const char ten[] = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";
        cr_assert_eq(write(in[1], ten, sizeof(ten) - 1), (ssize_t)(sizeof(ten) - 1));
        read_until(p.err, &err, "10 lines");
    } else {
        read_until(p.err, &err, "0 lines"); /* the tool is up and waiting */
    }
    cr_assert_eq(kill(p.pid, SIGTERM), 0);
    int status = finish(&p, &out, &err);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %#x; stderr: %s", status,
              err.p);
    if (!seeded)
        cr_expect_str_eq(out.p, "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n");
    else
        cr_expect_eq(out.len, 0);
    close(in[1]);
    free(out.p);
    free(err.p);
}

Test(qflow_lines, sigterm_with_a_silent_standard_input)
{
    signal_with_silent_stdin(false);
    signal_with_silent_stdin(true);
}
