/* qflow-nats-produce - the producer half of the two-process example: a
 * qflow pipeline that makes records and publishes them to JetStream.
 *
 *   QueueRunner "records" (one produce op)  ->  FIFOQueue (id, features, text)
 *   QueueRunner "publish" (qf_nats_sink_runner)  ->  subject  ->  stream
 *
 * Record i has id i (int64), features [i, i/2, -i, 1] (float32[4]) and text
 * "record <i>", with component names; each is published as a qflow element
 * payload (qf_nats_encode) with Nats-Msg-Id "<i>", so running the producer
 * again over the same ids stores nothing twice (within the stream's
 * duplicate window). The program ends when every record is acknowledged by
 * JetStream, or at SIGINT/SIGTERM (a Coordinator stop: publishes in flight
 * are still acknowledged before it exits).
 *
 * Exit status: 0 done; 1 the pipeline failed (the message says why); 2 usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_nats.h"
#include "qflow.h"

typedef struct gen {
    int64_t next, end;
} gen;

static qf_coord *coord;

static void on_signal(int sig)
{
    (void)sig;
    qf_coord_request_stop_from_signal(coord);
}

static qf_code make_record(void *arg, qf_element **ret)
{
    gen *g = arg;
    if (g->next >= g->end)
        return qf_set_error(QF_OUT_OF_RANGE, "all records made");
    int64_t i = g->next++;
    char text[48];
    int tl = snprintf(text, sizeof(text), "record %" PRId64, i);
    float f[4] = {(float)i, (float)i * 0.5f, -(float)i, 1.0f};
    qf_shape s4 = QF_SHAPE(4);
    qf_tensor *parts[3] = {qf_tensor_new_i64(i), qf_tensor_new_from(QF_FLOAT32, &s4, f, sizeof(f)),
                           qf_tensor_new_string(text, (size_t)tl)};
    qf_element *e = qf_element_of(3, parts);
    static const char *const names[3] = {"id", "features", "text"};
    if (!e || qf_element_set_names(e, names) != QF_OK) {
        qf_element_free(e);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory making a record");
    }
    *ret = e;
    return QF_OK;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qflow-nats-produce [options]\n"
            "  --servers URLS     NATS servers, comma-separated (default nats://127.0.0.1:4222)\n"
            "  --stream NAME      stream to publish into (default QFLOW)\n"
            "  --subject SUBJ     subject (default qflow.records)\n"
            "  --create           create the stream if missing (subject as above)\n"
            "  --replicas N       replicas of a created stream (default 1)\n"
            "  --count N          records to publish (default 1000)\n"
            "  --start I          first record id (default 0)\n"
            "  --max-pending N    publishes awaiting their acks at most (default 256)\n"
            "  --retry-for S      seconds to keep retrying an unavailable stream (default 60)\n"
            "  --quiet            no summary line\n");
}

int main(int argc, char **argv)
{
    const char *servers = NULL, *stream = "QFLOW", *subject = "qflow.records";
    long long count = 1000, start = 0, max_pending = 256;
    int replicas = 1;
    double retry_for = 60;
    bool create = false, quiet = false;
    static const struct option lo[] = {{"servers", required_argument, NULL, 's'},
                                       {"stream", required_argument, NULL, 'S'},
                                       {"subject", required_argument, NULL, 'j'},
                                       {"create", no_argument, NULL, 'c'},
                                       {"replicas", required_argument, NULL, 'r'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"start", required_argument, NULL, 'b'},
                                       {"max-pending", required_argument, NULL, 'p'},
                                       {"retry-for", required_argument, NULL, 'R'},
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
        case 'j':
            subject = optarg;
            break;
        case 'c':
            create = true;
            break;
        case 'r':
            replicas = atoi(optarg);
            break;
        case 'n':
            count = atoll(optarg);
            break;
        case 'b':
            start = atoll(optarg);
            break;
        case 'p':
            max_pending = atoll(optarg);
            break;
        case 'R':
            retry_for = atof(optarg);
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
    if (optind < argc || count < 0 || start < 0 || max_pending < 1 || replicas < 1) {
        usage(stderr);
        return 2;
    }

    qf_nats *n = NULL;
    qf_code rc =
        qf_nats_connect(&(qf_nats_options){.servers = servers, .name = "qflow-produce"}, &n);
    if (rc != QF_OK) {
        fprintf(stderr, "qflow-nats-produce: %s\n", qf_last_message());
        return 1;
    }
    if (create) {
        const char *subjects[1] = {subject};
        rc = qf_nats_stream_create(
            n, &(qf_nats_stream_options){
                   .name = stream, .subjects = subjects, .n_subjects = 1, .replicas = replicas});
        if (rc != QF_OK) {
            fprintf(stderr, "qflow-nats-produce: %s\n", qf_last_message());
            qf_nats_free(n);
            return 1;
        }
    }
    qf_coord_new(NULL, 0, &coord);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    qf_dtype dt[3] = {QF_INT64, QF_FLOAT32, QF_STRING};
    qf_shape sh[3] = {qf_shape_scalar(), QF_SHAPE(4), qf_shape_scalar()};
    qf_queue *records = NULL;
    static const char *const names[3] = {"id", "features", "text"};
    qf_fifo_queue_new(&(qf_queue_options){.capacity = 1024,
                                          .num_components = 3,
                                          .dtypes = dt,
                                          .shapes = sh,
                                          .names = names,
                                          .name = "records"},
                      &records);
    gen g = {.next = start, .end = start + count};
    qf_scope *scope = NULL;
    qf_scope_new(&scope);
    qf_queue_runner *maker = NULL;
    qf_enqueue_op op = {.name = "make", .kind = QF_OP_PRODUCE, .produce = make_record, .arg = &g};
    qf_queue_runner_new(records, &op, 1, NULL, &maker);
    qf_scope_add_queue_runner(scope, maker, NULL);

    qf_nats_sink *sink = NULL;
    rc = qf_nats_sink_new(n,
                          &(qf_nats_sink_options){.subject = subject,
                                                  .stream = stream,
                                                  .id_from_component = true,
                                                  .id_component = 0,
                                                  .max_pending = max_pending,
                                                  .retry_for_s = retry_for,
                                                  .coord = coord},
                          &sink);
    qf_queue_runner *pub = NULL;
    if (rc == QF_OK)
        rc = qf_nats_sink_runner(sink, records, 1, &pub);
    if (rc == QF_OK)
        rc = qf_scope_add_queue_runner(scope, pub, NULL);
    qf_runtime *rt = NULL;
    qf_task **tasks = NULL;
    size_t nt = 0;
    if (rc == QF_OK)
        rc = qf_runtime_new(&(qf_runtime_options){.workers = 2}, &rt);
    if (rc == QF_OK)
        rc = qf_start_queue_runners(rt, coord, scope, NULL, QF_RUNNER_START, &tasks, &nt);
    if (rc == QF_OK)
        rc = qf_coord_join(coord, NULL, 0, retry_for + 10, false, NULL);
    int status = 0;
    if (rc != QF_OK) {
        fprintf(stderr, "qflow-nats-produce: %s\n", qf_last_message());
        status = 1;
    }
    qf_nats_sink_stats st = {0};
    qf_nats_sink_get_stats(sink, &st);
    if (!quiet)
        printf("published %" PRIu64 " acked %" PRIu64 " duplicates %" PRIu64 " retries %" PRIu64
               " failed %" PRIu64 "\n",
               st.published, st.acked, st.duplicates, st.retries, st.failed);
    qf_tasks_free(tasks, nt);
    qf_runtime_free(rt);
    qf_scope_free(scope);
    qf_queue_unref(records);
    qf_nats_sink_free(sink);
    qf_coord_free(coord);
    qf_nats_free(n);
    return status;
}
