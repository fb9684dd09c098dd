/* bench_pipeline_qflow.c - pipeline.text/qflow: the text pipeline built with
 * the library exactly as an application (or qflow-lines) builds it:
 *
 *     qf_string_input_producer(files, 1 epoch, no shuffle)
 *       -> qf_batch_source_reader_options(TextLineReader), BP_READERS tasks
 *       -> qf_batch(64, capacity BP_CAPACITY, allow_smaller_final_batch)
 *       -> the calling thread: qf_batcher_next() until the end, touching
 *          every key and line
 *
 * on a worker pool of one worker per CPU with a Coordinator. The clock
 * runs from starting the queue runners to the consumer seeing the end.
 */
#include <stdint.h>

#include "bench_pipeline.h"
#include "qf_batch.h"
#include "qf_input.h"
#include "qflow.h"

static void check(qf_code rc, const char *what)
{
    if (rc != QF_OK)
        bench_fail("pipeline.text/qflow: %s: %s: %s", what, qf_code_name(rc), qf_last_message());
}

void bp_run_qflow(bench_rep *r)
{
    const bp_data *d = bp_data_get(r);
    qf_runtime *rt = NULL;
    qf_coord *coord = NULL;
    qf_scope *scope = NULL;
    qf_queue *files = NULL;
    qf_batch_source *src = NULL;
    qf_batcher *b = NULL;
    check(qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "bench"}, &rt),
          "runtime");
    check(qf_coord_new(NULL, 0, &coord), "coordinator");
    check(qf_scope_new(&scope), "scope");
    qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
    check(qf_string_input_producer(scope, d->paths, BP_FILES, &po, &files),
          "string_input_producer");
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
    check(qf_batch_source_reader_options(&ro, files, &src), "reader source");
    qf_batch_options bo = {
        .num_threads = BP_READERS, .capacity = BP_CAPACITY, .allow_smaller_final_batch = true};
    check(qf_batch(scope, src, BP_BATCH, &bo, &b), "batch");

    uint64_t t0 = bench_now_ns();
    qf_task **tasks = NULL;
    size_t nt = 0;
    check(qf_start_queue_runners(rt, coord, scope, NULL, QF_RUNNER_START, &tasks, &nt),
          "start_queue_runners");
    uint64_t lines = 0, bytes = 0, touch = 0;
    qf_element *batch;
    qf_code rc;
    while ((rc = qf_batcher_next(b, &batch)) == QF_OK) {
        const qf_string *k = qf_tensor_cdata(qf_element_get(batch, 0));
        const qf_string *v = qf_tensor_cdata(qf_element_get(batch, 1));
        int64_t n = qf_tensor_num_elements(qf_element_get(batch, 1));
        for (int64_t i = 0; i < n; i++) {
            bytes += v[i].len;
            touch += (unsigned char)k[i].data[0] + (v[i].len ? (unsigned char)v[i].data[0] : 0);
        }
        lines += (uint64_t)n;
        qf_element_free(batch);
    }
    uint64_t t1 = bench_now_ns();
    if (rc != QF_OUT_OF_RANGE)
        check(rc, "batcher_next");
    check(qf_coord_join(coord, NULL, 0, 10.0, false, NULL), "join");
    if (touch == 0 && lines)
        bench_fail("pipeline.text/qflow: lines without bytes");
    bp_check(r, d, lines, bytes);
    r->values[0] = (double)lines / ((double)(t1 - t0) / 1e9);

    qf_tasks_free(tasks, nt);
    qf_batcher_free(b);
    qf_queue_unref(files);
    qf_runtime_free(rt);
    qf_scope_free(scope);
    qf_coord_free(coord);
}
