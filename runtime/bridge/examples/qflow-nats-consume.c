/* qflow-nats-consume - the consumer half of the two-process example: a qflow
 * input pipeline fed by a JetStream durable pull consumer.
 *
 *   stream -> durable pull consumer -> qf_nats_consumer_source (decodes the
 *   producer's records) -> qf_batch (batches of --batch) -> this loop
 *
 * The loop takes a batch (a full one, or after --linger-ms whatever is
 * there: a latency bound), checks every record, appends the ids it had not
 * seen to --out and fsyncs it, and only then frees the batch: freeing is
 * what acks its messages. So a consumer killed at any moment loses nothing
 * (what it had not acked is redelivered) and, reading --out back when it
 * starts, processes every id exactly once; what JetStream redelivered of
 * what it had already processed is counted as "duplicates".
 *
 * It stops after --count distinct ids (counting those already in --out),
 * or at SIGINT/SIGTERM: a Coordinator stop, which drains the consumer (the
 * acks of freed batches are confirmed by the server, the rest is given
 * back) before it exits.
 *
 * Exit status: 0 done; 1 failure (a record that does not check, an error);
 * 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_nats.h"
#include "qflow.h"

static qf_coord *coord;

static void on_signal(int sig)
{
    (void)sig;
    qf_coord_request_stop_from_signal(coord);
}

typedef struct seen_set {
    uint8_t *bits;
    int64_t cap; /* ids below cap */
    int64_t distinct;
} seen_set;

static bool seen_add(seen_set *s, int64_t id)
{
    if (id < 0)
        return false;
    if (id >= s->cap) {
        int64_t cap = s->cap ? s->cap : 1 << 16;
        while (cap <= id)
            cap *= 2;
        uint8_t *b = realloc(s->bits, (size_t)(cap / 8));
        if (!b) {
            fprintf(stderr, "qflow-nats-consume: out of memory\n");
            exit(1);
        }
        memset(b + s->cap / 8, 0, (size_t)((cap - s->cap) / 8));
        s->bits = b;
        s->cap = cap;
    }
    uint8_t m = (uint8_t)(1u << (id % 8));
    if (s->bits[id / 8] & m)
        return false;
    s->bits[id / 8] |= m;
    s->distinct++;
    return true;
}

/* Ids already processed by an earlier run (whole lines only). */
static void load_seen(const char *path, seen_set *s)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[64];
    while (fgets(line, sizeof(line), f))
        if (strchr(line, '\n'))
            seen_add(s, strtoll(line, NULL, 10));
    fclose(f);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qflow-nats-consume [options]\n"
            "  --servers URLS     NATS servers, comma-separated (default nats://127.0.0.1:4222)\n"
            "  --stream NAME      stream (default QFLOW)\n"
            "  --durable NAME     durable pull consumer, created if missing (default qflow)\n"
            "  --count N          stop after N distinct ids (default: run until a signal)\n"
            "  --batch N          batch size (default 32)\n"
            "  --linger-ms MS     take a partial batch after waiting this long (default 50)\n"
            "  --max-in-flight N  messages fetched and not yet acked at most (default 256)\n"
            "  --ack-wait S       AckWait of a created consumer, seconds (default 30)\n"
            "  --out FILE         append processed ids to FILE (read back at start)\n"
            "  --quiet            no summary line\n");
}

int main(int argc, char **argv)
{
    const char *servers = NULL, *stream = "QFLOW", *durable = "qflow", *out = NULL;
    long long count = -1, batch = 32, linger_ms = 50, max_in_flight = 256;
    double ack_wait = 30;
    bool quiet = false;
    static const struct option lo[] = {{"servers", required_argument, NULL, 's'},
                                       {"stream", required_argument, NULL, 'S'},
                                       {"durable", required_argument, NULL, 'd'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"batch", required_argument, NULL, 'b'},
                                       {"linger-ms", required_argument, NULL, 'l'},
                                       {"max-in-flight", required_argument, NULL, 'm'},
                                       {"ack-wait", required_argument, NULL, 'a'},
                                       {"out", required_argument, NULL, 'o'},
                                       {"quiet", no_argument, NULL, 'q'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (opt) {
        case 's':
            servers = optarg;
            break;
        case 'S':
            stream = optarg;
            break;
        case 'd':
            durable = optarg;
            break;
        case 'n':
            count = atoll(optarg);
            break;
        case 'b':
            batch = atoll(optarg);
            break;
        case 'l':
            linger_ms = atoll(optarg);
            break;
        case 'm':
            max_in_flight = atoll(optarg);
            break;
        case 'a':
            ack_wait = atof(optarg);
            break;
        case 'o':
            out = optarg;
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || batch < 1 || linger_ms < 0 || max_in_flight < 1 || ack_wait <= 0) {
        usage(stderr);
        return 2;
    }
    seen_set seen = {0};
    int out_fd = -1;
    if (out) {
        load_seen(out, &seen);
        out_fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (out_fd < 0) {
            fprintf(stderr, "qflow-nats-consume: %s: %s\n", out, strerror(errno));
            return 1;
        }
    }
    int64_t had = seen.distinct;

    qf_coord_new(NULL, 0, &coord);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    qf_nats *n = NULL;
    qf_code rc =
        qf_nats_connect(&(qf_nats_options){.servers = servers, .name = "qflow-consume"}, &n);
    if (rc != QF_OK) {
        fprintf(stderr, "qflow-nats-consume: %s\n", qf_last_message());
        qf_coord_free(coord);
        if (out_fd >= 0)
            close(out_fd);
        free(seen.bits);
        return 1;
    }
    /* The producer's records, positional: id, features, text (+ the ack). */
    qf_dtype dt[3] = {QF_INT64, QF_FLOAT32, QF_STRING};
    qf_shape sh[4] = {qf_shape_scalar(), QF_SHAPE(4), qf_shape_scalar(), qf_shape_scalar()};
    qf_nats_consumer *c = NULL;
    rc = qf_nats_consumer_new(
        n,
        &(qf_nats_consumer_options){.stream = stream,
                                    .durable = durable,
                                    .max_in_flight = max_in_flight,
                                    .ack_wait_s = ack_wait,
                                    .decode = &(qf_components){.n = 3, .dtypes = dt, .shapes = sh},
                                    .coord = coord},
        &c);
    qf_scope *scope = NULL;
    qf_scope_new(&scope);
    qf_batch_source *src = NULL;
    qf_batcher *b = NULL;
    if (rc == QF_OK)
        rc = qf_nats_consumer_source(c, &src);
    if (rc == QF_OK)
        rc = qf_batch(scope, src, batch,
                      &(qf_batch_options){.capacity = 4 * batch > 64 ? 4 * batch : 64}, &b);
    qf_runtime *rt = NULL;
    qf_task **tasks = NULL;
    size_t nt = 0;
    if (rc == QF_OK)
        rc = qf_runtime_new(&(qf_runtime_options){.workers = 2}, &rt);
    if (rc == QF_OK)
        rc = qf_start_queue_runners(rt, coord, scope, NULL, QF_RUNNER_START, &tasks, &nt);
    int status = 0;
    if (rc != QF_OK) {
        fprintf(stderr, "qflow-nats-consume: %s\n", qf_last_message());
        status = 1;
    }

    int64_t received = 0, duplicates = 0, bad = 0;
    char *buf = malloc((size_t)batch * 24 + 1);
    while (status == 0 && !qf_coord_should_stop(coord) && (count < 0 || seen.distinct < count)) {
        qf_element *e = NULL;
        rc = qf_batcher_next_until(b, qf_deadline_in_ns(linger_ms * 1000000), &e);
        if (rc == QF_DEADLINE_EXCEEDED) /* a partial batch, if anything is there */
            rc = qf_queue_try_dequeue_up_to(qf_batcher_queue(b), batch, &e);
        if (rc == QF_UNAVAILABLE)
            continue;
        if (rc != QF_OK) {
            qf_coord_report(coord, rc);
            break;
        }
        const qf_tensor *ids = qf_element_get(e, 0), *fs = qf_element_get(e, 1),
                        *texts = qf_element_get(e, 2);
        int64_t k = qf_tensor_shape(ids)->dims[0];
        const int64_t *id = qf_tensor_cdata(ids);
        const float *f = qf_tensor_cdata(fs);
        size_t len = 0;
        for (int64_t r = 0; r < k; r++) {
            char want[48];
            snprintf(want, sizeof(want), "record %" PRId64, id[r]);
            size_t tl = 0;
            const char *t = qf_tensor_string(texts, r, &tl);
            if (f[4 * r] != (float)id[r] || f[4 * r + 2] != -(float)id[r] || tl != strlen(want) ||
                memcmp(t, want, tl) != 0)
                bad++;
            received++;
            if (seen_add(&seen, id[r]))
                len += (size_t)sprintf(buf + len, "%" PRId64 "\n", id[r]);
            else
                duplicates++;
        }
        /* durable before the ack: a crash after this line redelivers, never loses */
        if (out_fd >= 0 && len && (write(out_fd, buf, len) != (ssize_t)len || fsync(out_fd))) {
            fprintf(stderr, "qflow-nats-consume: %s: %s\n", out, strerror(errno));
            bad++;
        }
        qf_element_free(e); /* acks the batch's messages */
        if (bad) {
            qf_coord_request_stop(coord,
                                  qf_status_new(QF_DATA_LOSS, "%" PRId64 " bad records", bad));
            break;
        }
    }
    qf_coord_request_stop(coord, NULL);
    rc = qf_coord_join(coord, NULL, 0, 30.0, false, NULL); /* drains the consumer */
    if (rc != QF_OK && status == 0) {
        fprintf(stderr, "qflow-nats-consume: %s\n", qf_last_message());
        status = 1;
    }
    qf_nats_consumer_stats cs = {0};
    qf_nats_consumer_get_stats(c, &cs);
    if (!quiet)
        printf("received %" PRId64 " new %" PRId64 " duplicates %" PRId64 " redelivered %" PRIu64
               " acked %" PRIu64 " nacked %" PRIu64 " bad %" PRId64 "\n",
               received, seen.distinct - had, duplicates, cs.redelivered, cs.acked, cs.nacked, bad);
    free(buf);
    qf_tasks_free(tasks, nt);
    qf_runtime_free(rt);
    qf_batcher_free(b);
    qf_scope_free(scope);
    qf_nats_consumer_free(c);
    qf_coord_free(coord);
    qf_nats_free(n);
    if (out_fd >= 0)
        close(out_fd);
    free(seen.bits);
    return status;
}
