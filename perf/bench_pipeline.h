/* bench_pipeline.h - the text input pipeline benchmark (pipeline.text):
 * shared test data, the check every implementation passes, and the run
 * functions of its three implementations.
 *
 * What is measured: lines per second through "file names -> 4 line
 * readers -> batches of 64 -> a consumer that touches every line", over
 * BP_FILES generated text files read from the page cache. The three
 * implementations:
 *   qflow              the library: string_input_producer -> 4
 *                      TextLineReader ops -> batch(64) (bench_pipeline_qflow.c)
 *   cat                read(2) into a buffer and count newlines, one
 *                      thread: the ceiling (bench_pipeline.c)
 *   thread_per_runner  TensorFlow's shape: a thread per op, mutex+condvar
 *                      queues, getline(), a batching thread
 *                      (bench_pipeline_tpr.c)
 *
 * Warm-up: every pipeline case (pipeline.text and pipeline.tfrecord*, every
 * implementation) runs once untimed before its first repetition
 * (bench_case.warm_up; "warmup=1" in the table). A process's first pass
 * faults in the buffers its queues hold: for pipeline.tfrecord 16 K
 * records in 256 KiB blocks, 32-35 blocks of 400 KiB, on huge pages that
 * the kernel zeroes on first touch. In this project's VM, fresh memory can
 * cost as much again at the host, and those first passes ran 1.0-2.0 GB/s
 * against 4-6 GB/s after, in --quick mode's 16 MiB of data: the median of
 * five repetitions then told which passes had been first, not how fast the
 * pipeline runs. The first pass is measured on its own in the README
 * (Measured).
 *
 * The check: every implementation counts the lines and the bytes of the
 * lines (without their '\n') it delivered; they must equal what the
 * generator wrote, or the run fails (bench_fail).
 */
#ifndef BENCH_PIPELINE_H
#define BENCH_PIPELINE_H

#include <stdint.h>

#include "bench.h"

#define BP_FILES 4
#define BP_READERS 4
#define BP_BATCH 64
/* Capacity of the example queue (lines waiting to be batched) in the
 * pipelines that have one: TensorFlow's batch() default is 32, which
 * starves 4 readers; 16 batches' worth is what a tuned input pipeline
 * uses. */
#define BP_CAPACITY (16 * BP_BATCH)
#define BP_LINES_QUICK 50000
#define BP_LINES_FULL 250000

/* The generated data set; created on first use, removed at exit. */
typedef struct bp_data {
    const char *paths[BP_FILES]; /* absolute file names */
    uint64_t lines;              /* total over the files */
    uint64_t bytes;              /* total line bytes, newlines excluded */
} bp_data;

/** bp_data_get() - the data set for this mode (--quick: BP_LINES_QUICK
 *  lines per file, else BP_LINES_FULL). The files are written once per
 *  process and read once before the first timed run, so every
 *  implementation reads from the page cache. */
const bp_data *bp_data_get(const bench_rep *r);

/** bp_check() - fail the run unless (lines, bytes) matches the data set. */
void bp_check(const bench_rep *r, const bp_data *d, uint64_t lines, uint64_t bytes);

/* Run functions (arg unused). */
void bp_run_qflow(bench_rep *r);
void bp_run_cat(bench_rep *r);
void bp_run_thread_per_runner(bench_rep *r);

#endif
