/* test_nats_failover.c - the bridge when things die: a consumer process
 * killed with SIGKILL and restarted, and the stream leader of a 3-node
 * JetStream cluster killed under a running producer and consumer.
 *
 * The processes are the two-process example (qflow-nats-produce and
 * qflow-nats-consume, found through $QF_NATS_PRODUCE / $QF_NATS_CONSUME or
 * the paths meson compiled in). The consumer appends every id it processes
 * to a file, fsynced before the batch is freed (freeing acks it), and reads
 * the file back when it starts. Exactly-once accounting: at the end the
 * file holds every id exactly once, the stream holds every message exactly
 * once (the producer's retries carry the same Nats-Msg-Id), and what
 * JetStream delivered again is bounded by what was in flight when the
 * consumer died (max_in_flight) plus what the restarts redelivered.
 *
 * Every wait is on observable state (the size of the consumer's file, the
 * cluster's answers, the processes' exits), bounded by a deadline.
 */
#include "qf_test_nats.h"
#include "qf_test_nats_pipe.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(nats_failover, .timeout = 240);
#endif

#ifndef QF_NATS_PRODUCE
#define QF_NATS_PRODUCE "qflow-nats-produce"
#endif
#ifndef QF_NATS_CONSUME
#define QF_NATS_CONSUME "qflow-nats-consume"
#endif

static struct fixture {
    char root[128];
    qft_nats srv[3];
    int nsrv;
    qf_nats *n;
} F;

static void down(void)
{
    qf_nats_free(F.n);
    F.n = NULL;
    for (int i = 0; i < F.nsrv; i++)
        qft_nats_kill(&F.srv[i], SIGKILL);
    if (F.root[0])
        qft_rm_rf(F.root);
    memset(&F, 0, sizeof(F));
}

static void need_server(void)
{
    if (!qft_nats_server_path())
        cr_skip_test("nats-server is not installed (Debian: apt-get install nats-server)");
    memset(&F, 0, sizeof(F));
    cr_assert(qft_tmpdir(F.root, sizeof(F.root)));
}

static const char *servers_of(int n)
{
    static char buf[256];
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "," : "", F.srv[i].url);
    return buf;
}

/* A cluster needs a few seconds to elect its metadata leader: retry the
 * stream creation on UNAVAILABLE / DEADLINE_EXCEEDED until it answers. */
static void cluster_stream(const char *name, const char *subject)
{
    const char *subjects[1] = {subject};
    qf_code rc = QF_UNAVAILABLE;
    qf_deadline d = qf_deadline_in_s(60);
    while (!qf_deadline_passed(d)) {
        rc = qf_nats_stream_create(
            F.n, &(qf_nats_stream_options){
                     .name = name, .subjects = subjects, .n_subjects = 1, .replicas = 3});
        if (rc != QF_UNAVAILABLE && rc != QF_DEADLINE_EXCEEDED && rc != QF_UNKNOWN)
            break;
        qft_nap_ms(200);
    }
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
}

static int leader_index(const char *stream)
{
    qf_nats_stream_info si;
    if (qf_nats_stream_get_info(F.n, stream, &si) != QF_OK)
        return -1;
    for (int i = 0; i < F.nsrv; i++)
        if (strcmp(si.leader, F.srv[i].name) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------ processes */

static const char *prog(const char *env, const char *dflt)
{
    const char *p = getenv(env);
    return p && *p ? p : dflt;
}

/* Start a program with argv, stdout to `out` (NULL: /dev/null). */
static pid_t spawn(char *const argv[], const char *out)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Wait for a process to exit (bounded); its exit status, or -1. */
static int reap(pid_t pid, double secs)
{
    qf_deadline d = qf_deadline_in_s(secs);
    int st;
    while (!qf_deadline_passed(d)) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        qft_nap_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static long lines_of(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* The consumer's file holds ids 0..n-1, each exactly once. */
static void assert_exactly_once(const char *path, long n)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char *seen = calloc((size_t)n, 1);
    long lines = 0, id;
    while (fscanf(f, "%ld", &id) == 1) {
        cr_assert(id >= 0 && id < n, "id %ld out of range", id);
        cr_assert_not(seen[id], "id %ld processed twice", id);
        seen[id] = 1;
        lines++;
    }
    fclose(f);
    cr_assert_eq(lines, n, "%ld of %ld ids processed", lines, n);
    free(seen);
}

/* "duplicates D" from the consumer's summary line. */
static long summary_field(const char *path, const char *field)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512] = "";
    char *got = fgets(line, sizeof(line), f);
    fclose(f);
    const char *p = got ? strstr(line, field) : NULL;
    return p ? strtol(p + strlen(field), NULL, 10) : -1;
}

static pid_t start_consumer(const char *servers, long count, const char *ids, const char *summary)
{
    char cnt[32];
    snprintf(cnt, sizeof(cnt), "%ld", count);
    char *argv[] = {(char *)prog("QF_NATS_CONSUME", QF_NATS_CONSUME),
                    "--servers",
                    (char *)servers,
                    "--stream",
                    "QFLOW",
                    "--durable",
                    "work",
                    "--count",
                    cnt,
                    "--batch",
                    "16",
                    "--max-in-flight",
                    "64",
                    "--ack-wait",
                    "2",
                    "--out",
                    (char *)ids,
                    NULL};
    return spawn(argv, summary);
}

static pid_t start_producer(const char *servers, long count, const char *summary)
{
    char cnt[32];
    snprintf(cnt, sizeof(cnt), "%ld", count);
    char *argv[] = {(char *)prog("QF_NATS_PRODUCE", QF_NATS_PRODUCE),
                    "--servers",
                    (char *)servers,
                    "--stream",
                    "QFLOW",
                    "--subject",
                    "qflow.records",
                    "--count",
                    cnt,
                    "--max-pending",
                    "128",
                    "--retry-for",
                    "60",
                    NULL};
    return spawn(argv, summary);
}

static void wait_lines(const char *path, long n, double secs)
{
    qf_deadline d = qf_deadline_in_s(secs);
    while (lines_of(path) < n && !qf_deadline_passed(d))
        qft_nap_ms(10);
    cr_assert_geq(lines_of(path), n, "the consumer did not get to %ld ids", n);
}

/* One server; the consumer process is killed (SIGKILL) a third of the way
 * and started again: every id processed exactly once. */
Test(nats_failover, killed_consumer_process_restarts_exactly_once, .fini = down)
{
    need_server();
    F.nsrv = 1;
    cr_assert(qft_nats_single(&F.srv[0], F.root, 0));
    cr_assert_eq(qf_nats_connect(&(qf_nats_options){.servers = F.srv[0].url}, &F.n), QF_OK);
    const char *subjects[1] = {"qflow.records"};
    cr_assert_eq(
        qf_nats_stream_create(
            F.n, &(qf_nats_stream_options){.name = "QFLOW", .subjects = subjects, .n_subjects = 1}),
        QF_OK, "%s", qf_last_message());
    const long N = 20000;
    char ids[256], csum[256], psum[256];
    snprintf(ids, sizeof(ids), "%s/ids.txt", F.root);
    snprintf(csum, sizeof(csum), "%s/consume.txt", F.root);
    snprintf(psum, sizeof(psum), "%s/produce.txt", F.root);
    pid_t prod = start_producer(F.srv[0].url, N, psum);
    pid_t cons = start_consumer(F.srv[0].url, N, ids, NULL);
    wait_lines(ids, N / 3, 60);
    kill(cons, SIGKILL);
    cr_assert_eq(reap(cons, 10), 128 + SIGKILL);
    long before = lines_of(ids);
    cons = start_consumer(F.srv[0].url, N, ids, csum);
    cr_assert_eq(reap(prod, 90), 0, "producer failed");
    cr_assert_eq(reap(cons, 90), 0, "consumer failed");
    assert_exactly_once(ids, N);
    long dups = summary_field(csum, "duplicates ");
    cr_assert_geq(dups, 0);
    cr_assert_leq(dups, 64, "redelivered beyond what was in flight: %ld", dups);
    qf_nats_stream_info si;
    cr_assert_eq(qf_nats_stream_get_info(F.n, "QFLOW", &si), QF_OK);
    cr_assert_eq(si.messages, (uint64_t)N);
    cr_log_info("consumer killed after %ld ids; %ld redelivered duplicates", before, dups);
}

/* In one process: the stream leader of a 3-node cluster is killed while a
 * sink publishes and a source consumes (both R3); the survivors elect a
 * new leader, publishes are retried with the same ids, pull requests are
 * re-issued. Nothing lost, nothing stored twice. The node comes back. */
typedef struct prod_run {
    int64_t count;
    qf_code rc;
    qf_nats_sink_stats st;
} prod_run;

static const qf_dtype str_dt[1] = {QF_STRING};
static const qf_shape scalar_sh[1] = {{0}};
static const qf_queue_options str_q = {.num_components = 1, .dtypes = str_dt, .shapes = scalar_sh};

static qf_element *make_str(int64_t i)
{
    char b[32];
    int l = snprintf(b, sizeof(b), "value-%" PRId64, i);
    qf_tensor *t = qf_tensor_new_string(b, (size_t)l);
    return qf_element_of(1, &t);
}

static void *prod_thread(void *arg)
{
    prod_run *r = arg;
    r->rc = qft_publish(F.n,
                        (qf_nats_sink_options){.subject = "fo.in",
                                               .payload = QF_NATS_PAYLOAD_COMPONENT,
                                               .id_prefix = "fo",
                                               .max_pending = 64,
                                               .ack_timeout_s = 1.0,
                                               .retry_for_s = 60},
                        &str_q, make_str, 0, r->count, &r->st);
    return NULL;
}

Test(nats_failover, cluster_leader_killed, .fini = down)
{
    need_server();
    F.nsrv = 3;
    cr_assert(qft_nats_cluster(F.srv, F.root), "cluster did not start");
    cr_assert_eq(qf_nats_connect(&(qf_nats_options){.servers = servers_of(3)}, &F.n), QF_OK, "%s",
                 qf_last_message());
    cluster_stream("FO", "fo.in");
    const int N = 3000;
    qft_pipe p;
    qf_deadline d = qf_deadline_in_s(60);
    qf_code rc;
    /* the R3 consumer may need a moment too */
    for (;;) {
        qf_nats_consumer *probe = NULL;
        rc = qf_nats_consumer_new(F.n, &(qf_nats_consumer_options){.stream = "FO", .durable = "d"},
                                  &probe);
        qf_nats_consumer_free(probe);
        if (rc == QF_OK || qf_deadline_passed(d))
            break;
        qft_nap_ms(200);
    }
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
    qft_pipe_start(&p, F.n,
                   (qf_nats_consumer_options){
                       .stream = "FO", .durable = "d", .ack_wait_s = 2.0, .max_in_flight = 64},
                   16);
    prod_run pr = {.count = N};
    pthread_t th;
    pthread_create(&th, NULL, prod_thread, &pr);
    char *seen = calloc(N, 1);
    int distinct = 0, dups = 0, killed = -1;
    d = qf_deadline_in_s(150);
    while (distinct < N && !qf_deadline_passed(d)) {
        if (killed < 0 && distinct >= N / 3) {
            QFT_EVENTUALLY((killed = leader_index("FO")) >= 0, 30);
            cr_assert_geq(killed, 0, "no stream leader");
            qft_nats_kill(&F.srv[killed], SIGKILL);
        }
        qf_element *b = NULL;
        if (qft_pipe_next(&p, 0.05, &b) != QF_OK)
            continue;
        qf_tensor *vals = qf_element_get(b, QF_NATS_VALUE);
        for (int64_t r = 0; r < qf_tensor_num_elements(vals); r++) {
            long i = strtol(qf_tensor_string(vals, r, NULL) + 6, NULL, 10);
            cr_assert(i >= 0 && i < N);
            dups += seen[i];
            distinct += !seen[i];
            seen[i] = 1;
        }
        qf_element_free(b);
    }
    pthread_join(th, NULL);
    cr_assert_geq(killed, 0);
    cr_assert_eq(distinct, N, "lost %d", N - distinct);
    cr_assert_eq(pr.rc, QF_OK, "%s", qf_last_message());
    cr_assert_eq(pr.st.acked, (uint64_t)N);
    /* the test's own connection may still be reconnecting from the dead node */
    int now_leader = -1;
    QFT_EVENTUALLY((now_leader = leader_index("FO")) >= 0, 30);
    cr_assert(now_leader >= 0 && now_leader != killed, "a new leader (%d, killed %d)", now_leader,
              killed);
    qf_nats_stream_info si = {0};
    QFT_EVENTUALLY(qf_nats_stream_get_info(F.n, "FO", &si) == QF_OK, 30);
    cr_assert_eq(si.messages, (uint64_t)N, "stored once each (%" PRIu64 " retries)", pr.st.retries);
    qf_nats_consumer_stats st;
    cr_assert_eq(qft_pipe_stop(&p, &st), QF_OK, "%s", qf_last_message());
    cr_assert_leq(dups, 64 + 16);
    /* the killed node comes back and catches up */
    cr_assert(qft_nats_start(&F.srv[killed], 20.0));
    cr_log_info("leader %s killed: %d duplicates delivered, %" PRIu64 " publish retries",
                F.srv[killed].name, dups, pr.st.retries);
    free(seen);
}

/* Both at once, across processes: producer and consumer processes on a
 * 3-node cluster; the consumer is killed and restarted, and the stream
 * leader is killed in between. Every id processed exactly once; the
 * stream holds each message once. */
Test(nats_failover, exactly_once_across_killed_consumer_and_killed_node, .fini = down)
{
    need_server();
    F.nsrv = 3;
    cr_assert(qft_nats_cluster(F.srv, F.root), "cluster did not start");
    const char *all = servers_of(3);
    cr_assert_eq(qf_nats_connect(&(qf_nats_options){.servers = all}, &F.n), QF_OK, "%s",
                 qf_last_message());
    cluster_stream("QFLOW", "qflow.records");
    const long N = 10000;
    char ids[256], csum[256], psum[256];
    snprintf(ids, sizeof(ids), "%s/ids.txt", F.root);
    snprintf(csum, sizeof(csum), "%s/consume.txt", F.root);
    snprintf(psum, sizeof(psum), "%s/produce.txt", F.root);
    pid_t prod = start_producer(all, N, psum);
    pid_t cons = start_consumer(all, N, ids, NULL);
    wait_lines(ids, N / 4, 90);
    kill(cons, SIGKILL);
    cr_assert_eq(reap(cons, 10), 128 + SIGKILL);
    int killed = -1;
    QFT_EVENTUALLY((killed = leader_index("QFLOW")) >= 0, 30);
    cr_assert_geq(killed, 0, "no stream leader");
    qft_nats_kill(&F.srv[killed], SIGKILL);
    cons = start_consumer(all, N, ids, csum);
    cr_assert_eq(reap(prod, 150), 0, "producer failed");
    cr_assert_eq(reap(cons, 150), 0, "consumer failed");
    assert_exactly_once(ids, N);
    long dups = summary_field(csum, "duplicates ");
    cr_assert_geq(dups, 0);
    cr_assert_leq(dups, 64 + 16, "redelivered beyond what was in flight: %ld", dups);
    /* the test's own connection may be reconnecting from the dead node */
    qf_nats_stream_info si = {0};
    QFT_EVENTUALLY(qf_nats_stream_get_info(F.n, "QFLOW", &si) == QF_OK, 30);
    cr_assert_eq(si.messages, (uint64_t)N);
    cr_log_info("leader %s and the consumer killed: %ld duplicates delivered, %ld publish retries",
                F.srv[killed].name, dups, summary_field(psum, "retries "));
}
