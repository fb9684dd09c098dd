/* qflow-lines - stream the lines of files through a qflow input pipeline:
 *
 *     string_input_producer(FILES)  ->  N TextLineReaders  ->  batch or
 *     shuffle_batch  ->  this program, which writes every line to stdout
 *
 * A FILE of "-" is standard input: a thread of the tool's own reads it
 * (lines_stdin.h; a pipe that never delivers must not hold a worker) and
 * enqueues its lines into the batch queue; a queue that stays open until
 * the end of standard input is one more source of the batch (which then
 * becomes batch_join / shuffle_batch_join over the N readers and it), so
 * the batch queue closes only after the last line. Most of the time,
 * though, standard input is a pipe or a fresh regular file, and then the
 * readers read it as one more FILE (stdin_through_reader()). With --seed,
 * the thread copies standard input to its end into a memory file before
 * the pipeline starts, and the readers read that (stdin_spool()), so the
 * output depends on the input only, not on when it came. Either way its
 * keys still read "-:<line number>" (key_of()).
 *
 * It is both a tool (a parallel, epoch-aware, shuffling `cat`) and the
 * library's end-to-end example: everything TensorFlow 1.x's input pipeline
 * does (producer queue, reader ops, batching queue, QueueRunners, a
 * Coordinator, stop on a signal) runs here exactly as a program embedding
 * qflow would run it. See usage() for the options and exit statuses.
 *
 * Two ways to run the pipeline:
 *   - default: the QueueRunner tasks run on a worker pool (one worker per
 *     CPU) and the main thread takes batches with the blocking
 *     qf_batcher_next() and writes them;
 *   - --seed: reproducible output. Seeds fix the shuffles, but on a pool
 *     the order in which reader tasks reach the batch queue depends on
 *     timing. So the pipeline runs on a runtime of 0 workers that the main
 *     thread drives with qf_runtime_run_once_until(), with the consumer as one
 *     more task: one thread, one schedule, the same output every time.
 *
 * Stopping. SIGINT and SIGTERM call qf_coord_request_stop_from_signal()
 * (async-signal-safe) from the handler. A monitor thread sits in
 * qf_coord_wait_for_stop() (with the --stats period as deadline) and so is
 * woken by that stop and runs the stop work there: the runners' cancel ops
 * close the queues, which wakes everything parked, the main thread
 * included. Only the main thread has the signals unblocked, and the
 * handlers are installed without SA_RESTART, so a write(2) stuck on a full
 * pipe returns EINTR and lines_out ends the output at a line boundary.
 * After cleanup the program re-raises the signal, so its parent sees it
 * die of SIGINT (status 130 in a shell), as `cat` would. SA_RESETHAND: a
 * second Ctrl-C kills at once if the stop ever hangs.
 *
 * Broken pipe: SIGPIPE is ignored, write(2) fails with EPIPE, the pipeline
 * is stopped and the program exits 0 without a message (`qflow-lines f |
 * head -1` is an ordinary use, not an error; a pipeline under `set -o
 * pipefail` stays green).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lines_out.h"
#include "lines_stdin.h"
#include "qf_batch.h"
#include "qf_input.h"
#include "qf_queue_trusted-impl.h" /* a tool of the tree: it may (README, layers) */
#include "qf_tensor-impl.h"
#include "qflow.h"

#define PROG "qflow-lines"
/* Output buffer: big enough that a write(2) moves ~10^4 lines. */
#define OUT_BUFFER ((size_t)1 << 20)
/* --stats redraw period. */
#define STATS_PERIOD_S 0.25
/* How long the runners get to finish after a stop before we give up. */
#define STOP_GRACE_S 10.0
/* Batches the seeded consumer task takes per poll before yielding. */
#define CONSUMER_BUDGET 16

#define DEFAULT_READERS 4
/* Lines per batch: a batch costs a wake-up of this thread and a few
 * allocations, so large ones keep that well below the cost of the bytes. */
#define DEFAULT_BATCH 1024
#define DEFAULT_MIN_AFTER_DEQUEUE 10000

typedef struct options {
    char **files; /* the FILEs but "-" (malloc'd array of argv's strings) */
    size_t n_files;
    bool use_stdin;   /* "-" was one of the FILEs, or there was no FILE */
    size_t stdin_pos; /* where "-" was among the FILEs (files[stdin_pos..]) */
    int64_t epochs;   /* 0: forever */
    bool shuffle;
    bool have_seed;
    int64_t seed;
    int64_t readers;
    int64_t batch_size;
    int64_t capacity;          /* -1: default */
    int64_t min_after_dequeue; /* -1: default */
    int64_t skip_header_lines;
    bool keys;
    bool stats;
} options;

typedef struct app {
    options o;
    qf_coord *coord;
    qf_runtime *rt;
    qf_scope *scope;
    qf_queue *files; /* the producer's queue (our reference); NULL: no FILE */
    lines_stdin in;  /* "-": the standard-input thread and its queue */
    qf_batcher *batcher;
    qf_batcher_poller *poller; /* --seed: the consumer task's */
    qf_task **runner_tasks;
    size_t n_runner_tasks;
    qf_task *consumer; /* --seed only */
    lines_out out;
    /* Standard input as a FILE (stdin_as_file()): the path the readers
     * open, which its keys name and key_of() turns back into "-"; NULL
     * otherwise. spool_fd: with --seed, the memory file it is copied to
     * (stdin_spool()), else -1. */
    const char *stdin_file;
    char spool_path[32];
    int spool_fd;
    bool flush_per_batch; /* stdout is a terminal: show lines as they come */
    qf_code consume_rc;   /* an error taking batches (not the end of data) */
    qf_status *consume_st;
    _Atomic uint64_t lines; /* lines handed to the output */
    int64_t t0_ns;
    pthread_t monitor;
    bool monitor_started;
    size_t stats_width; /* characters of the last --stats line */
    uint64_t stats_lines;
    int64_t stats_ns;
} app;

/* The signal handler's view: set before any handler is installed. */
static qf_coord *volatile g_coord;
static volatile sig_atomic_t g_signal;

/* ------------------------------------------------------------------ usage */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options] [FILE]...\n"
            "Stream the lines of the FILEs through a qflow input pipeline\n"
            "(string_input_producer -> TextLineReaders -> batch or shuffle_batch)\n"
            "and write them to stdout, one per line. With no FILE, or a FILE of '-',\n"
            "read standard input (once; its lines keyed \"-:<line number>\").\n"
            "\n"
            "  --epochs N             read every file N times (default 1; 0: forever);\n"
            "                         must be 1 when '-' is given\n"
            "  --shuffle              shuffle the order of the files in every epoch, and the\n"
            "                         lines within a window: a windowed shuffle, not a full\n"
            "                         one. Lines wait in a shuffle queue that keeps\n"
            "                         --min-after-dequeue lines back (the window) while\n"
            "                         input lasts, and each line written is picked at\n"
            "                         random from those waiting, so no line comes out more\n"
            "                         than about a window ahead of its place in the input.\n"
            "                         A window at least as large as the input gives a\n"
            "                         uniform shuffle\n"
            "  --seed S               reproducible output: the same files, options and seed\n"
            "                         give the same output, byte for byte (the pipeline then\n"
            "                         runs on one thread, and '-' is read to its end before\n"
            "                         anything is written); also seeds --shuffle\n"
            "  --readers N            TextLineReaders reading in parallel (default %d); the\n"
            "                         lines of different files interleave unless N is 1\n"
            "  --batch-size N         lines per batch (default %d)\n"
            "  --capacity N           lines the batch queue holds (default 8 x batch size;\n"
            "                         with --shuffle, min-after-dequeue + 3 x batch size)\n"
            "  --min-after-dequeue N  with --shuffle: the shuffle's window, the lines the\n"
            "                         shuffle queue keeps back while input lasts (default\n"
            "                         %d, or capacity / 2 when --capacity is given); must\n"
            "                         be below the capacity\n"
            "  --skip-header-lines N  drop the first N lines of every file (default 0)\n"
            "  --keys                 write \"<file>:<line number><TAB><line>\"; line numbers\n"
            "                         start at 1 and count skipped header lines\n"
            "  --no-keys              write the lines only (the default)\n"
            "  --stats                a progress line on stderr, redrawn in place: lines,\n"
            "                         lines/s, fill of the file-name and line queues\n"
            "  --help                 this text\n"
            "\n"
            "Every output line ends with '\\n'. A \"\\r\\n\" ending loses its '\\r'; a last\n"
            "line without a newline is still a line; empty files give nothing. A FILE\n"
            "may be a named pipe: its lines come as its writer writes them, and it ends\n"
            "when the writer closes it. A file that shrinks while it is read is read to\n"
            "its new end with a warning on stderr (its last line may be torn).\n"
            "\n"
            "Exit status: 0 when every line was written, and also when the reader of\n"
            "stdout goes away (broken pipe: the tool stops quietly); 1 on a read or write\n"
            "error; 2 on a bad option or a FILE that cannot be opened. SIGINT and SIGTERM\n"
            "stop the pipeline; the output ends with a whole line and the tool then dies\n"
            "of the signal (status 130 or 143 in a shell). A second signal kills at once.\n",
            DEFAULT_READERS, DEFAULT_BATCH, DEFAULT_MIN_AFTER_DEQUEUE);
}

static _Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry '" PROG " --help' for more information.\n", stderr);
    exit(2);
}

/* A whole-string integer in [lo, hi], or a usage error naming the option. */
static int64_t parse_int(const char *opt, const char *s, int64_t lo, int64_t hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < lo || v > hi)
        usage_error("%s: expected an integer from %" PRId64 " to %" PRId64 ", got '%s'", opt, lo,
                    hi, s);
    return (int64_t)v;
}

static void parse_options(int argc, char **argv, options *o)
{
    enum {
        OPT_EPOCHS = 256,
        OPT_SHUFFLE,
        OPT_SEED,
        OPT_READERS,
        OPT_BATCH,
        OPT_CAPACITY,
        OPT_MIN,
        OPT_SKIP,
        OPT_KEYS,
        OPT_NO_KEYS,
        OPT_STATS,
        OPT_HELP,
    };
    static const struct option longopts[] = {
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"shuffle", no_argument, NULL, OPT_SHUFFLE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"readers", required_argument, NULL, OPT_READERS},
        {"batch-size", required_argument, NULL, OPT_BATCH},
        {"capacity", required_argument, NULL, OPT_CAPACITY},
        {"min-after-dequeue", required_argument, NULL, OPT_MIN},
        {"skip-header-lines", required_argument, NULL, OPT_SKIP},
        {"keys", no_argument, NULL, OPT_KEYS},
        {"no-keys", no_argument, NULL, OPT_NO_KEYS},
        {"stats", no_argument, NULL, OPT_STATS},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.epochs = 1,
                   .readers = DEFAULT_READERS,
                   .batch_size = DEFAULT_BATCH,
                   .capacity = -1,
                   .min_after_dequeue = -1};
    opterr = 0; /* our own messages, without the full argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        const char *name = argv[optind - 1];
        switch (c) {
        case OPT_EPOCHS:
            o->epochs = parse_int("--epochs", optarg, 0, INT64_MAX);
            break;
        case OPT_SHUFFLE:
            o->shuffle = true;
            break;
        case OPT_SEED:
            o->seed = parse_int("--seed", optarg, INT64_MIN, INT64_MAX);
            o->have_seed = true;
            break;
        case OPT_READERS:
            o->readers = parse_int("--readers", optarg, 1, 1024);
            break;
        case OPT_BATCH:
            o->batch_size = parse_int("--batch-size", optarg, 1, 1 << 20);
            break;
        case OPT_CAPACITY:
            o->capacity = parse_int("--capacity", optarg, 1, INT32_MAX);
            break;
        case OPT_MIN:
            o->min_after_dequeue = parse_int("--min-after-dequeue", optarg, 0, INT32_MAX - 1);
            break;
        case OPT_SKIP:
            o->skip_header_lines = parse_int("--skip-header-lines", optarg, 0, INT64_MAX);
            break;
        case OPT_KEYS:
            o->keys = true;
            break;
        case OPT_NO_KEYS:
            o->keys = false;
            break;
        case OPT_STATS:
            o->stats = true;
            break;
        case 'h':
        case OPT_HELP:
            usage(stdout);
            exit(0);
        case ':':
            usage_error("option '%s' needs an argument", name);
        default:
            usage_error("unknown option '%s'", name);
        }
    }
    /* "-" is standard input, once; the rest are files. */
    o->files = calloc((size_t)(argc - optind) + 1, sizeof(*o->files));
    if (!o->files)
        usage_error("out of memory");
    for (int i = optind; i < argc; i++) {
        if (strcmp(argv[i], "-") != 0) {
            o->files[o->n_files++] = argv[i];
        } else if (o->use_stdin) {
            usage_error("'-' (standard input) is given twice; it can be read only once");
        } else {
            o->use_stdin = true;
            o->stdin_pos = o->n_files;
        }
    }
    if (o->n_files == 0) /* as cat does: no FILE is standard input */
        o->use_stdin = true;
    if (o->use_stdin && o->epochs != 1)
        usage_error("standard input ('-') can be read only once: use --epochs 1 with '-'");

    if (o->shuffle) {
        if (o->min_after_dequeue < 0)
            o->min_after_dequeue = o->capacity >= 0 ? o->capacity / 2 : DEFAULT_MIN_AFTER_DEQUEUE;
        if (o->capacity < 0)
            o->capacity = o->min_after_dequeue + 3 * o->batch_size;
        if (o->capacity <= o->min_after_dequeue) /* TensorFlow's words, spec 177 */
            usage_error("capacity %" PRId64 " must be bigger than min_after_dequeue %" PRId64 ".",
                        o->capacity, o->min_after_dequeue);
    } else {
        o->min_after_dequeue = 0;
        /* Eight batches: with four, the reader found the queue full and
         * parked (and the writer slept for each batch) often enough to
         * cost 7% of the time on a 200 MB file; sixteen were no faster
         * than eight. Four were chosen when a fresh ring cost a page
         * fault per 4 KiB page at start (2.7 ms of a 15 ms run on an
         * empty file for sixteen batches); rings that large now come
         * warm from huge pages (coord/qf_pagemem-impl.h), and an empty
         * file takes the same 2.4 ms with four, eight or sixteen. */
        if (o->capacity < 0)
            o->capacity = 8 * o->batch_size;
    }
}

/* Every FILE must be readable and must not be a directory; all problems
 * are reported before exiting 2, and nothing is read. A named pipe (or any
 * non-regular file) is checked without opening it: opening and closing a
 * FIFO would let its writer go on into a closed pipe and lose its data
 * (issue 16). The readers open such files non-blocking and wait for them
 * through the runtime, never on a worker. */
static void check_files(const options *o)
{
    bool bad = false;
    for (size_t i = 0; i < o->n_files; i++) {
        const char *f = o->files[i];
        struct stat st;
        if (stat(f, &st) != 0) {
            fprintf(stderr, PROG ": cannot open '%s': %s\n", f, strerror(errno));
            bad = true;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, PROG ": '%s' is a directory\n", f);
            bad = true;
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            if (access(f, R_OK) != 0) {
                fprintf(stderr, PROG ": cannot open '%s': %s\n", f, strerror(errno));
                bad = true;
            }
            continue;
        }
        int fd = open(f, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, PROG ": cannot open '%s': %s\n", f, strerror(errno));
            bad = true;
            continue;
        }
        close(fd);
    }
    if (bad)
        exit(2);
}

/* Standard input read by a TextLineReader like any FILE: what it reopens.
 * Only this process's own fd 0 (a pipe or a regular file), never a path a
 * user would give. */
#define STDIN_PATH "/proc/self/fd/0"

/* Whether a FILE the user gave is `path`. */
static bool given(const options *o, const char *path)
{
    for (size_t i = 0; i < o->n_files; i++)
        if (strcmp(o->files[i], path) == 0)
            return true;
    return false;
}

/* Whether standard input can go through the readers as one more FILE (the
 * fast path: large reads straight into the string blocks the lines are
 * handed out from, no copy per line), rather than through the stdin thread
 * (lines_stdin.h), which copies every line into a tensor of its own:
 *   - a pipe (a FIFO), which the readers open non-blocking and wait for
 *     through the runtime, so a silent one holds no worker; or a regular
 *     file not read from yet (reopening starts at offset 0: after
 *     `(head -1; qflow-lines) < f` the thread must read on from where the
 *     shell left it). Terminals, sockets and devices keep the thread;
 *   - without --seed (stdin_spool() takes that case);
 *   - with --keys only if no FILE the user gave is STDIN_PATH itself (its
 *     keys would then be told from standard input's by nothing);
 *   - and when STDIN_PATH opens at all (/proc may be missing). Opening it
 *     and closing it again loses nothing: fd 0 stays open, so a pipe keeps
 *     its reader and its writer goes on. */
static bool stdin_through_reader(const options *o)
{
    if (!o->use_stdin || o->have_seed || (o->keys && given(o, STDIN_PATH)))
        return false;
    struct stat st;
    if (fstat(STDIN_FILENO, &st) != 0)
        return false;
    if (S_ISREG(st.st_mode)) {
        if (lseek(STDIN_FILENO, 0, SEEK_CUR) != 0)
            return false;
    } else if (!S_ISFIFO(st.st_mode)) {
        return false;
    }
    int fd = open(STDIN_PATH, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st2;
    bool same = fstat(fd, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino;
    close(fd);
    if (same && S_ISFIFO(st.st_mode)) {
        /* A bigger pipe: the writer blocks less often and every read(2)
         * moves up to a megabyte. Advice only: the size may be capped. */
        (void)fcntl(STDIN_FILENO, F_SETPIPE_SZ, 1 << 20);
    }
    return same;
}

/* Put `path` where "-" was among the FILEs (the files array has room for
 * it: "-" or, with no FILE, the extra slot), and remember it for the
 * keys. */
static void stdin_as_file(app *a, const char *path)
{
    options *o = &a->o;
    memmove(o->files + o->stdin_pos + 1, o->files + o->stdin_pos,
            (o->n_files - o->stdin_pos) * sizeof(*o->files));
    o->files[o->stdin_pos] = (char *)path;
    o->n_files++;
    o->use_stdin = false;
    a->stdin_file = path;
}

/* --seed with "-": standard input goes, whole, into a memory file that the
 * readers read as one more FILE once the stdin thread has copied it there
 * (lines_stdin_spool(); start_pipeline() waits for it). False when no such
 * file can be made (the thread then makes the lines elements, as before:
 * ten times the time). */
static bool stdin_spool(app *a)
{
    struct stat st;
    /* A closed fd 0 stays with the thread, which reports it; and the
     * memory file must not become fd 0 itself. */
    if (!a->o.use_stdin || !a->o.have_seed || fstat(STDIN_FILENO, &st) != 0)
        return false;
    int fd = memfd_create("qflow-lines-stdin", MFD_CLOEXEC);
    if (fd < 0)
        return false;
    snprintf(a->spool_path, sizeof(a->spool_path), "/proc/self/fd/%d", fd);
    if (access(a->spool_path, R_OK) != 0 || (a->o.keys && given(&a->o, a->spool_path))) {
        close(fd);
        return false;
    }
    a->spool_fd = fd;
    stdin_as_file(a, a->spool_path);
    return true;
}

/* A reader's warning (a file that shrank while it was read, so its last
 * line may be torn): never silent. Runs on a worker; stderr is unbuffered. */
static void on_reader_warning(void *arg, const qf_reader *r, const char *message)
{
    (void)arg;
    (void)r;
    fprintf(stderr, PROG ": warning: %s\n", message);
}

/* ---------------------------------------------------------------- signals */

static void on_stop_signal(int sig)
{
    if (!g_signal)
        g_signal = sig;
    qf_coord *c = g_coord;
    if (c)
        qf_coord_request_stop_from_signal(c);
}

/* Install the stop handlers, except for a signal ignored on entry (a
 * background job of a non-interactive shell keeps ignoring SIGINT, as
 * every well-behaved program does). */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL); /* EPIPE from write(2) instead */

    static const int stops[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < 2; i++) {
        struct sigaction old;
        if (sigaction(stops[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGINT);
        sigaddset(&sa.sa_mask, SIGTERM);
        /* No SA_RESTART: a blocked write(2) must return EINTR. */
        sa.sa_flags = SA_RESETHAND;
        sigaction(stops[i], &sa, NULL);
    }
}

static void set_stop_signals_blocked(bool blocked)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

/* ------------------------------------------------------------------ stats */

static void human(double v, char *buf, size_t cap)
{
    if (v >= 1e9)
        snprintf(buf, cap, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.2fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, cap, "%.1fk", v / 1e3);
    else
        snprintf(buf, cap, "%.0f", v);
}

/* One --stats line, redrawn over the previous one. `final` shows the
 * average rate and ends the line. Called by the monitor thread while the
 * pipeline runs, by the main thread at the end (after the monitor ended). */
static void draw_stats(app *a, bool final)
{
    int64_t now = qf_now_ns();
    uint64_t lines = atomic_load_explicit(&a->lines, memory_order_relaxed);
    double rate;
    if (final)
        rate = now > a->t0_ns ? (double)lines / ((double)(now - a->t0_ns) / 1e9) : 0;
    else
        rate = now > a->stats_ns
                   ? (double)(lines - a->stats_lines) / ((double)(now - a->stats_ns) / 1e9)
                   : 0;
    a->stats_lines = lines;
    a->stats_ns = now;
    char r[32], text[256];
    human(rate, r, sizeof(r));
    qf_queue *bq = qf_batcher_queue(a->batcher);
    /* The first queue: the file names', or without FILEs standard input's. */
    qf_queue *fq = a->files ? a->files : a->in.q;
    int n =
        snprintf(text, sizeof(text),
                 "%" PRIu64 " lines  %s lines/s%s  %s queue %" PRId64 "/%" PRId64
                 "  lines queue %" PRId64 "/%" PRId64,
                 lines, r, final ? " average" : "", a->files ? "files" : "stdin", qf_queue_size(fq),
                 qf_queue_capacity(fq), qf_queue_size(bq), qf_queue_capacity(bq));
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
    /* "\r", the text, blanks over what is left of a longer previous line. */
    char line[512];
    size_t pad = a->stats_width > len ? a->stats_width - len : 0;
    if (pad > sizeof(line) - len - 3)
        pad = sizeof(line) - len - 3;
    line[0] = '\r';
    memcpy(line + 1, text, len);
    memset(line + 1 + len, ' ', pad);
    size_t total = 1 + len + pad;
    if (final)
        line[total++] = '\n';
    a->stats_width = len;
    ssize_t w = write(STDERR_FILENO, line, total);
    (void)w; /* a progress display that cannot be shown is not an error */
}

/* The monitor: sleeps until a stop (running its stop work, see the top of
 * the file), redrawing --stats every period meanwhile. */
static void *monitor_main(void *arg)
{
    app *a = arg;
    for (;;) {
        qf_deadline next = a->o.stats ? qf_deadline_in_s(STATS_PERIOD_S) : QF_FOREVER;
        if (qf_coord_wait_for_stop(a->coord, next))
            break;
        draw_stats(a, false);
    }
    return NULL;
}

/* --------------------------------------------------------------- consumer */

/* Write one batch (keys [k], values [k]) and free it. */
/* The key to write for k: standard input's lines, read from a FILE of
 * its own (stdin_as_file()), are keyed "<that path>:<n>" by their reader,
 * and the user asked for "-:<n>". */
static qf_string key_of(const app *a, qf_string k, char *buf, size_t cap)
{
    const char *f = a->stdin_file;
    size_t fl = f ? strlen(f) : 0;
    if (!f || k.len <= fl || memcmp(k.data, f, fl) != 0 || k.data[fl] != ':' ||
        k.len - fl + 1 > cap)
        return k;
    buf[0] = '-';
    memcpy(buf + 1, k.data + fl, k.len - fl);
    return (qf_string){k.len - fl + 1, buf};
}

static lines_out_status emit(app *a, qf_element *batch)
{
    const qf_tensor *kt = qf_element_get(batch, 0), *vt = qf_element_get(batch, 1);
    const qf_string *k = qf_tensor_cdata(kt), *v = qf_tensor_cdata(vt);
    int64_t n = qf_tensor_num_elements(vt);
    lines_out_status st = LINES_OUT_OK;
    if (!a->o.keys) {
        a->out.ends_in_place = qf__strings_keep_ends(vt);
        st = lines_out_values(&a->out, v, (size_t)n);
    }
    for (int64_t i = 0; a->o.keys && i < n && st == LINES_OUT_OK; i++) {
        char buf[64];
        qf_string key = key_of(a, k[i], buf, sizeof(buf));
        st = lines_out_line(&a->out, key.data, key.len, v[i].data, v[i].len);
    }
    qf_element_free(batch);
    atomic_fetch_add_explicit(&a->lines, (uint64_t)n, memory_order_relaxed);
    if (st == LINES_OUT_OK && a->flush_per_batch)
        st = lines_out_flush(&a->out);
    return st;
}

/* A failure to take a batch that is not the end of data: keep it, and stop
 * the pipeline with it (the Coordinator then reports it from join). */
static void consume_failed(app *a, qf_code rc)
{
    a->consume_rc = rc;
    a->consume_st = qf_last_status();
}

/* Default mode: the main thread takes batches until the end, a stop or an
 * output problem. */
static void consume_blocking(app *a)
{
    while (!qf_coord_should_stop(a->coord)) {
        qf_element *batch;
        qf_code rc = qf_batcher_next(a->batcher, &batch);
        if (rc == QF_OUT_OF_RANGE) /* the end, or queues closed by a stop */
            break;
        if (rc != QF_OK) {
            consume_failed(a, rc);
            break;
        }
        if (emit(a, batch) != LINES_OUT_OK)
            break;
    }
}

/* --seed: the consumer as a task on the 0-worker runtime. */
static qf_code consumer_task(qf_task *t, void *arg)
{
    app *a = arg;
    for (int i = 0; i < CONSUMER_BUDGET; i++) {
        if (qf_coord_should_stop(a->coord) || qf_task_is_cancelled(t))
            break;
        qf_element *batch;
        qf_code rc = qf_batcher_poll_next(a->poller, qf_task_waker(t), &batch);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc != QF_OK) {
            consume_failed(a, rc);
            break;
        }
        if (emit(a, batch) != LINES_OUT_OK)
            break;
        if (i == CONSUMER_BUDGET - 1)
            return QF_YIELD; /* let the readers run: they feed us */
    }
    /* Finished: a wake may still be due to the waker (a cancel woke the
     * task while it was registered with the queue); take it back. */
    qf_waker_withdraw(qf_task_waker(t));
    return QF_OK;
}

/* Drive the 0-worker runtime until every task has finished. */
static void drive_until_idle(app *a)
{
    while (qf_runtime_num_tasks(a->rt) > 0)
        if (qf_runtime_run_once_until(a->rt, QF_FOREVER, NULL) != QF_OK)
            break;
}

/* --------------------------------------------------------------- pipeline */

/* Seeds for the producer and the shuffle queue from the user's seed:
 * distinct streams, never 0 (which would mean "seed randomly"). */
static int64_t derive_seed(int64_t seed, uint64_t stream)
{
    uint64_t z = (uint64_t)seed + stream * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (int64_t)(z ? z >> 1 : 1);
}

static int fail_qf(const char *what)
{
    fprintf(stderr, PROG ": %s: %s\n", what, qf_last_message());
    return 1;
}

/* The batch's sources: one reader-options source for the N readers, or,
 * with "-", N one-reader sources and the standard-input queue for a join
 * (each source of a join gets one task). Returns how many (0 after a
 * message). */
static size_t make_sources(app *a, qf_batch_source **srcs)
{
    const options *o = &a->o;
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE,
                            .skip_header_lines = o->skip_header_lines,
                            .on_warning = on_reader_warning};
    size_t n = 0;
    size_t readers = o->n_files == 0 ? 0 : o->use_stdin ? (size_t)o->readers : 1;
    for (; n < readers; n++)
        if (qf_batch_source_reader_options(&ro, a->files, &srcs[n]) != QF_OK) {
            fail_qf("TextLineReader");
            goto fail;
        }
    if (o->use_stdin && qf_batch_source_queue(a->in.q, &srcs[n++]) != QF_OK) {
        n--;
        fail_qf("standard input");
        goto fail;
    }
    return n;
fail:
    while (n > 0)
        qf_batch_source_free(srcs[--n]);
    return 0;
}

/* Build the queues and runners (started by start_pipeline()). Returns 0,
 * or 1 after a message. */
static int build(app *a)
{
    const options *o = &a->o;
    if (qf_coord_new(NULL, 0, &a->coord) != QF_OK)
        return fail_qf("coordinator");
    if (qf_scope_new(&a->scope) != QF_OK)
        return fail_qf("scope");

    qf_input_producer_options po = {
        .num_epochs = o->epochs,
        .shuffle = o->shuffle ? QF_SHUFFLE_ON : QF_SHUFFLE_OFF,
        .seed = o->have_seed ? derive_seed(o->seed, 1) : 0,
        .name = "string_input_producer",
    };
    if (o->n_files > 0 && qf_string_input_producer(a->scope, (const char *const *)o->files,
                                                   o->n_files, &po, &a->files) != QF_OK)
        return fail_qf("string_input_producer");
    /* "-": its lines go straight into the batch queue, and a gate queue
     * keeps the batch open until they are all in; with --seed they all go
     * into a queue of their own first, the batch's source (lines_stdin.h). */
    if ((o->use_stdin || a->spool_fd >= 0) &&
        lines_stdin_start(&a->in, STDIN_FILENO, a->coord, o->use_stdin && o->have_seed ? -1 : 0,
                          o->skip_header_lines) != QF_OK)
        return fail_qf("standard input");

    qf_batch_source *srcs[1025]; /* --readers is at most 1024 */
    size_t n_srcs = make_sources(a, srcs);
    if (n_srcs == 0)
        return 1;
    qf_batch_options bo = {
        /* readers for the FILEs (a join ignores it); "-" alone: one task,
         * so its lines stay in order */
        .num_threads = o->n_files ? (int)o->readers : 1,
        .capacity = o->capacity,
        /* every line comes out: the last batch may be short (spec 164) */
        .allow_smaller_final_batch = true,
        .min_after_dequeue = o->min_after_dequeue,
        .seed = o->have_seed ? derive_seed(o->seed, 2) : 0,
    };
    qf_code rc;
    if (n_srcs == 1)
        rc = o->shuffle ? qf_shuffle_batch(a->scope, srcs[0], o->batch_size, &bo, &a->batcher)
                        : qf_batch(a->scope, srcs[0], o->batch_size, &bo, &a->batcher);
    else
        rc = o->shuffle
                 ? qf_shuffle_batch_join(a->scope, srcs, n_srcs, o->batch_size, &bo, &a->batcher)
                 : qf_batch_join(a->scope, srcs, n_srcs, o->batch_size, &bo, &a->batcher);
    if (rc != QF_OK)
        return fail_qf(o->shuffle ? "shuffle_batch" : "batch");
    /* Without --keys nothing reads a batch's keys: the readers' batches
     * need not make them (a copy of "<file>:<n>" per line). Before anything
     * runs: the stdin thread and the runners start below. */
    if (!o->keys)
        qf__queue_rows_without_keys(qf_batcher_queue(a->batcher));
    /* Nothing here reads a line as a C string (lines_out takes lengths):
     * the readers leave each line's '\n' where it is, and a run of lines
     * is written from their block without a store into it. */
    qf__queue_rows_by_length(qf_batcher_queue(a->batcher));
    if (o->use_stdin &&
        lines_stdin_run(&a->in, o->have_seed ? NULL : qf_batcher_queue(a->batcher)) != QF_OK)
        return fail_qf("standard input");
    if (a->spool_fd >= 0 && lines_stdin_spool(&a->in, a->spool_fd) != QF_OK)
        return fail_qf("standard input");

    qf_runtime_options rto = {.workers = o->have_seed ? 0 : -1, .name = "qflow-lines"};
    if (qf_runtime_new(&rto, &a->rt) != QF_OK)
        return fail_qf("runtime");
    if (o->have_seed) {
        if (qf_batcher_poller_new(a->batcher, &a->poller) != QF_OK)
            return fail_qf("batch poller");
    }
    /* Before the monitor starts: it reads both (pthread_create orders it). */
    a->t0_ns = a->stats_ns = qf_now_ns();
    if (pthread_create(&a->monitor, NULL, monitor_main, a) != 0) {
        fprintf(stderr, PROG ": cannot start the monitor thread\n");
        return 1;
    }
    a->monitor_started = true;
    return 0;
}

/* Start the runners (and the --seed consumer task). With --seed and "-",
 * first wait for all of standard input (a stop ends that wait too).
 * Returns 0, or 1 after a message; 0 without starting anything when a stop
 * came first. */
static int start_pipeline(app *a)
{
    const options *o = &a->o;
    if (o->have_seed && (o->use_stdin || a->spool_fd >= 0))
        lines_stdin_join(&a->in);
    if (qf_coord_should_stop(a->coord))
        return 0;
    if (qf_start_queue_runners(a->rt, a->coord, a->scope, NULL, QF_RUNNER_START, &a->runner_tasks,
                               &a->n_runner_tasks) != QF_OK)
        return fail_qf("start_queue_runners");
    if (o->have_seed) {
        qf_task_options to = {.name = "consumer"};
        if (qf_task_spawn(a->rt, consumer_task, a, &to, &a->consumer) != QF_OK)
            return fail_qf("consumer task");
    }
    return 0;
}

/* Stop whatever still runs, wait for it, and return the pipeline's status
 * code (its message in qf_last_message()). */
static qf_code shut_down(app *a)
{
    if (a->consume_rc != QF_OK && a->coord) {
        qf_coord_request_stop(a->coord, a->consume_st);
        a->consume_st = NULL;
    }
    if (a->coord)
        qf_coord_request_stop(a->coord, NULL); /* ends the runners, the monitor, stdin */
    lines_stdin_join(&a->in);
    if (a->rt && a->o.have_seed)
        drive_until_idle(a); /* nobody else runs the tasks */
    if (a->monitor_started)
        pthread_join(a->monitor, NULL);
    if (!a->coord)
        return QF_OK;
    qf_code rc = qf_coord_join(a->coord, NULL, 0, STOP_GRACE_S, false, NULL);
    return rc;
}

static void free_all(app *a)
{
    qf_task_unref(a->consumer);
    qf_tasks_free(a->runner_tasks, a->n_runner_tasks);
    qf_batcher_poller_free(a->poller);
    qf_batcher_free(a->batcher);
    qf_queue_unref(a->files);
    lines_stdin_free(&a->in);
    free(a->o.files);
    qf_runtime_free(a->rt);
    qf_scope_free(a->scope);
    g_coord = NULL;
    qf_coord_free(a->coord);
    qf_status_free(a->consume_st);
    lines_out_free(&a->out);
    if (a->spool_fd >= 0)
        close(a->spool_fd);
}

int main(int argc, char **argv)
{
    static app a; /* static: the signal handler's coordinator outlives main's frame */
    parse_options(argc, argv, &a.o);
    check_files(&a.o);
    if (a.o.use_stdin && fcntl(STDIN_FILENO, F_GETFD) < 0) {
        /* Closed: the first fd the tool made would become "standard input"
         * (the stdin thread's own eventfd: it waited on itself for good). */
        fprintf(stderr, PROG ": read error on standard input: %s\n", strerror(errno));
        return 1;
    }
    a.spool_fd = -1;
    if (!stdin_spool(&a) && stdin_through_reader(&a.o))
        stdin_as_file(&a, STDIN_PATH);
    if (!lines_out_init(&a.out, STDOUT_FILENO, OUT_BUFFER, &g_signal)) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    a.flush_per_batch = isatty(STDOUT_FILENO);
    /* One consumer (this thread, or the seeded consumer task) of a FIFO
     * batch queue: every reader's lines come in its order. */
    a.out.values_in_order = !a.o.shuffle;

    /* Every thread the pipeline creates (workers, the monitor, library
     * helpers) inherits a mask that blocks the stop signals, so their
     * handler runs on the main thread (see the top of the file). */
    set_stop_signals_blocked(true);
    int status = build(&a);
    g_coord = a.coord;
    install_signals();
    set_stop_signals_blocked(false);
    if (status == 0)
        status = start_pipeline(&a);
    if (status == 0 && a.runner_tasks) {
        if (a.o.have_seed) {
            while (!qf_task_is_done(a.consumer))
                if (qf_runtime_run_once_until(a.rt, QF_FOREVER, NULL) != QF_OK)
                    break;
        } else {
            consume_blocking(&a);
        }
        lines_out_flush(&a.out);
    }
    qf_code rc = shut_down(&a);
    if (status == 0 && rc != QF_OK) {
        fprintf(stderr, PROG ": %s\n", qf_last_message());
        status = 1;
    }
    if (status == 0 && a.out.status == LINES_OUT_ERROR) {
        fprintf(stderr, PROG ": write error: %s\n", strerror(a.out.err));
        status = 1;
    }
    if (a.o.stats && a.batcher && a.files)
        draw_stats(&a, true);
    free_all(&a);

    int sig = g_signal;
    if (sig) {
        /* Die of the signal, so the parent (a shell loop, make) sees an
         * interrupted program, not a successful one. The handler was reset
         * to the default by SA_RESETHAND. */
        signal(sig, SIG_DFL);
        set_stop_signals_blocked(false);
        raise(sig);
    }
    return status;
}
