/* API FROZEN */
/* qf_batch.h - batching: batch, shuffle_batch, batch_join,
 * shuffle_batch_join and the keep-input maybe_* variants (spec 161-182).
 *
 * TensorFlow batches "the tensors": graph values evaluated once per run of
 * the enqueue op. In C the thing evaluated is a *source*
 * (qf_batch_source): something that yields one example per run (or, with
 * enqueue_many, a batch whose first dimension indexes examples), and
 * declares its components up front (dtypes, per-example shapes, optional
 * names), because the queue has to be built before anything runs. Sources:
 *
 *   qf_batch_source_produce()         a qf_produce_fn, called on a worker
 *   qf_batch_source_poll()            a poll function that may park
 *   qf_batch_source_from_op()         a qf_enqueue_op template (PRODUCE or
 *                                     TRANSFORM)
 *   qf_batch_source_queue()           dequeue from another queue
 *   qf_batch_source_reader()          (key, value) records of a reader over
 *   qf_batch_source_reader_options()  a file-name queue, read with the
 *                                     reader's poll form: never blocks a worker
 *   qf_batch_source_map()             any source, each element transformed
 *
 * A batch call builds the queue (FIFOQueue; PaddingFIFOQueue with
 * dynamic_pad; RandomShuffleQueue for the shuffle variants), a QueueRunner
 * with num_threads copies of the enqueue op (batch_join: one op per source)
 * added to the scope's collection, and returns a qf_batcher handle from which
 * batches are taken: qf_batcher_next() is dequeue_many(batch_size), or
 * dequeue_up_to(batch_size) with allow_smaller_final_batch. The end of every
 * source (QF_OUT_OF_RANGE) retires its op; the last op to retire closes the
 * queue (spec 174), and then batches drain and QF_OUT_OF_RANGE follows.
 *
 *     qf_batch_source *src;
 *     qf_batch_source_reader_options(&(qf_reader_options){0}, files, &src);
 *     qf_batcher *b;
 *     qf_batch_options bo = {.capacity = 64, .min_after_dequeue = 16, .seed = 7};
 *     qf_shuffle_batch(scope, src, 10, &bo, &b);           // takes src
 *     qf_start_queue_runners(rt, coord, scope, NULL, QF_RUNNER_START, &t, &nt);
 *     while (qf_batcher_next(b, &e) == QF_OK) { ...; qf_element_free(e); }
 *     qf_batcher_free(b);
 *
 * Components. Without names they are positional. With names (TensorFlow's
 * dict inputs, spec 169) the queue's components are ordered by name
 * (strcmp) and every batch taken through the batcher carries the names
 * (qf_element_get_by_name()); the queue itself stays positional, so the
 * names are copied once per batch, not once per example. Sources of one
 * join must then have the same names (spec 176, 181).
 *
 * Sparse components (spec 171-172). A component declared QF_SPARSE takes
 * one sparse tensor (qf_sparse.h) per example, as a QF_SPARSE scalar; its
 * declared shape is the dense shape of those sparse tensors, which may
 * leave dimensions or the rank unknown (the queue holds one handle per
 * example, whatever the queue kind). Each batch has, in its place, one
 * QF_SPARSE scalar: the examples' sparse tensors stacked (qf_sparse_stack()):
 * indices gain the example's position in the batch as a first column,
 * values follow one example after the other, and dense_shape is [k] and
 * the largest size of each dimension among the k examples (a declared
 * dense shape [] makes sparse scalars: a batch of them has rank 1, indices
 * [[i]] for each example i that holds its entry, dense_shape [k]). With
 * enqueue_many a sparse component is one sparse tensor whose first dense
 * dimension indexes the examples (or a QF_SPARSE vector of them), split
 * with qf_sparse_unstack(); keep_input filters its rows like every other
 * component's. Every example must fit the declared dense shape and have
 * the value dtype and rank of the first example the component saw
 * (QF_INVALID_ARGUMENT from the op otherwise), so every batch stacks.
 * qf_batcher_output_shape() gives the stacked dense shape.
 *
 * Keep-input (maybe_*, spec 172, 182). A qf_keep_input decides per example
 * (per row with enqueue_many) whether it enters the queue: either a
 * function, or a QF_BOOL component of the source (scalar per example; with
 * enqueue_many a vector, one flag per row), which is removed before the
 * example is enqueued.
 *
 * Ownership and lifetime. A batch call takes its sources (also on failure).
 * Op state and sources belong to the runner, and so to the scope once the
 * runner is in a collection: they are freed with it (qf_scope_free()). The
 * qf_batcher handle is the caller's and holds a reference to the queue; free
 * it with qf_batcher_free() before or after the scope, as long as no call on
 * the handle is in progress.
 *
 * Threads. A source's functions run on workers, from num_threads tasks at
 * once: with num_threads > 1 they must be thread-safe (as TensorFlow ops
 * are). A source made from one qf_reader can feed one task only (a reader
 * serves one call at a time); qf_batch_source_reader_options() makes one
 * reader per task. The runner must be started on one runtime at a time.
 *
 * Differences from TensorFlow: the checks TensorFlow does at graph
 * construction on
 * static shapes are done here on the declared components; the poll form of
 * taking a batch (qf_batcher_poller), when its queue holds less than a
 * whole batch, gathers elements one by one into one
 * batch in progress that all pollers of a batcher share (TensorFlow's
 * dequeue_many gathers in one attempt while later attempts wait), so at the
 * end of the data fewer than batch_size examples are left over for the
 * whole batcher, as in TensorFlow; they stay in the batcher rather than in
 * the queue (qf_queue_size() does not count them) and are freed with it.
 *
 * Synchronization table
 *   constructors, qf_batcher_free      any thread; qf_batcher_free needs
 *                                    quiescence on the handle
 *   qf_batcher_next* / accessors       any number of threads
 *   qf_batcher_poller_*                one task (or thread) per poller
 *   sources before a batch call      one thread (the caller owns them)
 *
 * Bad input: NULL arguments and out-of-range options are QF_INVALID_ARGUMENT
 * naming them; a refused batch call still takes its sources and adds
 * nothing to the scope; the accessors return NULL / 0 / QF_DT_INVALID / an
 * invalid shape for a NULL batcher and record that error.
 */
#ifndef QF_BATCH_H
#define QF_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_input.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_reader.h"
#include "qf_runtime.h"
#include "qf_status.h"
#include "qf_tensor.h"
#include "qf_time.h"
#include "qf_waker.h"

QF_BEGIN_DECLS

/* ---------------------------------------------------------------- sources */

/* The components of a source's examples. shapes are per example (without
 * the batch dimension even for enqueue_many sources); NULL: unknown (then
 * qf_batch_options.shapes must give them). With dynamic_pad, dimensions may
 * be QF_UNKNOWN_DIM. names: NULL (positional) or n distinct non-empty
 * names. Everything is copied by the source constructors. An element a
 * source yields is matched to these components by name when both have
 * names, otherwise by position (so unnamed elements must come in the
 * declared order). */
typedef struct qf_components {
    size_t n;
    const qf_dtype *dtypes;
    const qf_shape *shapes;
    const char *const *names;
} qf_components;

typedef struct qf_batch_source qf_batch_source;

/* A source's general form: produce the next example (or batch, with
 * enqueue_many) into *ret_elem, or register qf_task_waker(task) with what
 * it waits for and return QF_PENDING. Any other code ends the op: the
 * runner's closed code (QF_OUT_OF_RANGE) cleanly, others as errors.
 * QF_OK with *ret_elem NULL: nothing this run (the op runs again). Must
 * not block. */
typedef qf_code (*qf_source_poll_fn)(qf_task *task, void *arg, qf_element **ret_elem);

/**
 * qf_batch_source_produce() - a source calling fn(arg, &elem) once per run.
 * qf_batch_source_poll() - a source calling fn(task, arg, &elem) once per
 * run (see qf_source_poll_fn).
 *
 * Ownership:   `comps` is copied; `arg` stays the caller's unless handed
 *              over with qf_batch_source_on_free(). The caller owns *ret
 *              until it passes it to a batch call (or frees it).
 * Blocking:    never. Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL function, no
 *              components, an invalid dtype, invalid shapes or bad names;
 *              QF_RESOURCE_EXHAUSTED. *ret untouched on failure.
 */
QF_API qf_code qf_batch_source_produce(const qf_components *comps, qf_produce_fn fn, void *arg,
                                       qf_batch_source **ret);
QF_API qf_code qf_batch_source_poll(const qf_components *comps, qf_source_poll_fn fn, void *arg,
                                    qf_batch_source **ret);

/**
 * qf_batch_source_from_op() - a source from an enqueue op template: a
 * QF_OP_PRODUCE op becomes qf_batch_source_produce(op->produce, op->arg);
 * a QF_OP_TRANSFORM op dequeues from op->input (referenced) and applies
 * op->transform (NULL: as is), like qf_batch_source_queue() +
 * qf_batch_source_map(). op->many must agree with the batch's
 * enqueue_many (checked by the batch call). `comps` NULL takes the
 * components from op->input (TRANSFORM without transform only).
 *
 * Returns:     as qf_batch_source_produce(); QF_INVALID_ARGUMENT for a
 *              QF_OP_POLL op (it enqueues by itself: use
 *              qf_batch_source_poll()).
 */
QF_API qf_code qf_batch_source_from_op(const qf_components *comps, const qf_enqueue_op *op,
                                       qf_batch_source **ret);

/**
 * qf_batch_source_queue() - a source that dequeues each example from
 * `input` (poll form: parks while it is empty); its end of data
 * (QF_OUT_OF_RANGE once closed and drained) ends the op. Components are
 * the queue's dtypes, shapes and names.
 *
 * Ownership:   takes its own reference to `input`.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_batch_source_queue(qf_queue *input, qf_batch_source **ret);

/**
 * qf_batch_source_reader() - a source of (key, value) records: two
 * QF_STRING scalar components, positional, in that order (spec 183). Each
 * run reads one record with qf_reader_poll_read() from `filenames`: the op
 * parks while the file-name queue is empty, and the file-name queue's end
 * (QF_OUT_OF_RANGE) ends the op. Read errors (a missing file, corrupt data)
 * are op errors, reported by the runner like any other; the reader has
 * already moved on, so a restart continues with the next file.
 *
 * Ownership:   takes `reader` (also on failure); takes its own reference to
 *              `filenames`.
 * Threads:     one task only (a batch with num_threads > 1 over this source
 *              fails with QF_INVALID_ARGUMENT).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments;
 *              QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_batch_source_reader(qf_reader *reader, qf_queue *filenames,
                                      qf_batch_source **ret);

/**
 * qf_batch_source_reader_options() - like qf_batch_source_reader(), with
 * one reader made from `ro` for every task that runs the source, so
 * num_threads readers share the file-name queue (each file goes to one of
 * them). The readers are created by the batch call, which reports
 * qf_reader_new()'s errors.
 *
 * Ownership:   `ro` (and its name) is copied; takes its own reference to
 *              `filenames`.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments or options
 *              qf_reader_new() refuses; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_batch_source_reader_options(const qf_reader_options *ro, qf_queue *filenames,
                                              qf_batch_source **ret);

/**
 * qf_batch_source_map() - a source yielding fn(arg, e) for every element e
 * of `src` (fn takes e; *ret_out NULL drops it; an error ends the op as an
 * error). `comps` describes the output; NULL: same as src's.
 *
 * Ownership:   takes `src` (also on failure); arg as for produce sources.
 * Returns:     as qf_batch_source_produce().
 */
QF_API qf_code qf_batch_source_map(qf_batch_source *src, const qf_components *comps,
                                   qf_transform_fn fn, void *arg, qf_batch_source **ret);

/**
 * qf_batch_source_on_free() - call free_fn(arg) once when the source is
 * freed: by qf_batch_source_free(), by a failing batch call, or with the
 * runner that owns it (qf_scope_free()). Hands a produce/poll/map argument
 * over to the source. A second call replaces the first. NULL-safe.
 */
QF_API void qf_batch_source_on_free(qf_batch_source *src, void (*free_fn)(void *), void *arg);

/** qf_batch_source_free() - free a source not handed to a batch call.
 *  NULL-safe. */
QF_API void qf_batch_source_free(qf_batch_source *src);

/** qf_batch_source_components() - the source's components (owned by the
 *  source, valid while it lives). */
QF_API const qf_components *qf_batch_source_components(const qf_batch_source *src);

/* ------------------------------------------------------------- keep_input */

/* Decide whether an example enters the queue. `example` is the element as
 * the source yielded it (with enqueue_many the whole batch, and `row` the
 * row asked about; otherwise row is 0); `source` the index of its source in
 * a join (0 otherwise). Runs on workers; thread-safe as sources are. */
typedef bool (*qf_keep_fn)(void *arg, const qf_element *example, int64_t row, size_t source);

typedef enum qf_keep_kind {
    QF_KEEP_FN = 0,        /* call fn(arg, ...) */
    QF_KEEP_COMPONENT = 1, /* a QF_BOOL component of the source */
} qf_keep_kind;

typedef struct qf_keep_input {
    qf_keep_kind kind;
    qf_keep_fn fn;
    void *arg;
    /* QF_KEEP_COMPONENT: the component's index in the source's components
     * (by position; with names, the index in the source's own order). Its
     * per-example shape must be [] (spec 172: the whole value is a scalar,
     * or a vector with enqueue_many). With enqueue_many a source may also
     * yield it as a scalar, which keeps or drops the whole batch, as
     * TensorFlow's scalar keep_input with enqueue_many=True does. It is not
     * part of the queue. */
    size_t component;
} qf_keep_input;

/* ---------------------------------------------------------------- options */

/* Options of every batch call. Zero-initialise: zero fields mean
 * TensorFlow's defaults. */
typedef struct qf_batch_options {
    /* Enqueue tasks per source for batch / shuffle_batch; 0: 1. Ignored by
     * the join variants (one task per source). */
    int num_threads;
    /* Queue capacity; 0: QF_INPUT_DEFAULT_CAPACITY; -1: unbounded
     * (TensorFlow's kUnbounded); other negative values are refused. */
    int64_t capacity;
    /* Sources yield batches: the first dimension indexes examples. */
    bool enqueue_many;
    /* Per-example shapes of the queue's components (in the sources' order,
     * without a keep component), overriding the sources'; NULL: the
     * sources'. */
    const qf_shape *shapes;
    /* batch / batch_join: a PaddingFIFOQueue; unknown dimensions are padded
     * to the longest example of each batch (spec 167). */
    bool dynamic_pad;
    /* The last batch may be smaller (dequeue_up_to, spec 164, 175, 180). */
    bool allow_smaller_final_batch;
    /* Shuffle variants: 0 <= min_after_dequeue < capacity (spec 177). */
    int64_t min_after_dequeue;
    /* Shuffle variants: non-zero gives a reproducible order for a
     * reproducible sequence of operations; 0 random. */
    int64_t seed;
    /* Share the queue under this name in the scope's registry (spec 170). */
    const char *shared_name;
    /* Name scope: the queue is "<name>/fifo_queue" (padding_fifo_queue,
     * random_shuffle_queue), the gauge "<name>/fraction_of_...". NULL:
     * "batch", "shuffle_batch", "batch_join", "shuffle_batch_join". */
    const char *name;
    /* Collection the runner is added to. NULL: QF_QUEUE_RUNNERS. */
    const char *collection;
} qf_batch_options;

/* ------------------------------------------------------------ batch calls */

typedef struct qf_batcher qf_batcher;

/**
 * qf_batch() - batch the examples of `src` in order of arrival (spec
 * 161-170).
 *
 * Ownership:   takes `src` (also on failure). On QF_OK *ret is the caller's
 *              (qf_batcher_free()); the runner belongs to the scope's
 *              collection. `s` NULL: the default scope. opts NULL: all
 *              defaults.
 * Blocking:    never (allocates; a reader-options source opens no file
 *              yet). Concurrency: any thread.
 * Returns:     QF_OK;
 *              QF_INVALID_ARGUMENT for a NULL source, batch_size outside
 *                [1, INT32_MAX], num_threads < 0, a capacity below -1,
 *                shapes missing or not fully defined
 *                without dynamic_pad ("All shapes must be fully defined",
 *                spec 168), unknown rank with dynamic_pad ("Cannot infer
 *                Tensor's rank", spec 168), an op template whose many flag
 *                differs from enqueue_many, a single-reader source with
 *                num_threads > 1, or what queue creation refuses;
 *              QF_RESOURCE_EXHAUSTED.
 *              Nothing is added to the scope and *ret is untouched on
 *              failure.
 */
QF_API qf_code qf_batch(qf_scope *s, qf_batch_source *src, int64_t batch_size,
                        const qf_batch_options *opts, qf_batcher **ret);

/**
 * qf_batch_join() - batch the examples of n sources, one enqueue task per
 * source, into one queue (spec 173-176). The queue closes when the last
 * source ended (spec 174).
 *
 * Ownership:   takes every source (also on failure); srcs itself is
 *              borrowed.
 * Returns:     as qf_batch(), plus QF_INVALID_ARGUMENT for n == 0, sources
 *              whose names differ ("must have the same keys", spec 176) or
 *              whose dtypes or component counts differ ("Expected types to
 *              be consistent", spec 176).
 */
QF_API qf_code qf_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                             int64_t batch_size, const qf_batch_options *opts, qf_batcher **ret);

/**
 * qf_shuffle_batch() / qf_shuffle_batch_join() - like qf_batch() /
 * qf_batch_join() over a RandomShuffleQueue (spec 177-181): each batch is
 * drawn at random from the queue, which keeps min_after_dequeue examples
 * back while it is open. There is no dynamic_pad (set: INVALID_ARGUMENT).
 *
 * Returns:     as qf_batch() / qf_batch_join(), plus QF_INVALID_ARGUMENT
 *              "capacity X must be bigger than min_after_dequeue Y." when
 *              capacity <= min_after_dequeue, or min_after_dequeue < 0.
 */
QF_API qf_code qf_shuffle_batch(qf_scope *s, qf_batch_source *src, int64_t batch_size,
                                const qf_batch_options *opts, qf_batcher **ret);
QF_API qf_code qf_shuffle_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                                     int64_t batch_size, const qf_batch_options *opts,
                                     qf_batcher **ret);

/**
 * qf_maybe_batch(), qf_maybe_batch_join(), qf_maybe_shuffle_batch(),
 * qf_maybe_shuffle_batch_join() - the same, keeping only the examples (rows
 * with enqueue_many) for which `keep` says so (spec 172, 182).
 *
 * Ownership:   `keep` is copied (its arg stays the caller's).
 * Returns:     as the variant without keep, plus QF_INVALID_ARGUMENT for a
 *              NULL keep, a QF_KEEP_FN without fn, or a keep component that
 *              is out of range, not QF_BOOL, or of the wrong shape:
 *              "`keep_input` cannot be a vector when `enqueue_many=False`",
 *              "`keep_input` must be 0 or 1 dimensions",
 *              "`keep_input` must be known at graph construction" (unknown
 *              rank) (spec 172).
 */
QF_API qf_code qf_maybe_batch(qf_scope *s, qf_batch_source *src, const qf_keep_input *keep,
                              int64_t batch_size, const qf_batch_options *opts, qf_batcher **ret);
QF_API qf_code qf_maybe_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                                   const qf_keep_input *keep, int64_t batch_size,
                                   const qf_batch_options *opts, qf_batcher **ret);
QF_API qf_code qf_maybe_shuffle_batch(qf_scope *s, qf_batch_source *src, const qf_keep_input *keep,
                                      int64_t batch_size, const qf_batch_options *opts,
                                      qf_batcher **ret);
QF_API qf_code qf_maybe_shuffle_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                                           const qf_keep_input *keep, int64_t batch_size,
                                           const qf_batch_options *opts, qf_batcher **ret);

/** qf_batcher_free() - release the handle and its queue reference (the
 *  runner, its state and the queue's other references live on in the
 *  scope). No call on the handle may be in progress. NULL-safe. */
QF_API void qf_batcher_free(qf_batcher *b);

/* ---------------------------------------------------------- taking batches */

/**
 * qf_batcher_next() / _until() / qf_batcher_try_next() - the next batch: each
 * component has shape [k] + the per-example shape (padded with
 * dynamic_pad), where k = batch_size, or 1..batch_size for the final batch
 * with allow_smaller_final_batch.
 *
 * Ownership:   on QF_OK *ret_batch is the caller's (qf_element_free()); it
 *              carries the component names when the batch has names.
 * Blocking:    next waits as long as it takes (until a batch, the end, or a
 *              cancel); _until until the absolute deadline; try never (it
 *              returns a batch only if one is there now). The waiting forms
 *              refuse to block a worker: inside a task they fail with
 *              QF_FAILED_PRECONDITION (use a qf_batcher_poller).
 * Concurrency: any number of threads. Progress: as the queue's
 *              dequeue_many / dequeue_up_to.
 * Returns:     QF_OK; QF_OUT_OF_RANGE once the queue is closed and has fewer
 *              than batch_size examples left (spec 163), or none with
 *              allow_smaller_final_batch (at the end, a batch in progress
 *              that pollers of the same batcher began is finished with what
 *              the queue has left; see qf_batcher_poll_next());
 *              QF_DEADLINE_EXCEEDED (_until);
 *              QF_UNAVAILABLE (try); QF_INVALID_ARGUMENT for NULL
 *              arguments. *ret_batch untouched on failure.
 */
QF_API qf_code qf_batcher_next(qf_batcher *b, qf_element **ret_batch);
QF_API qf_code qf_batcher_next_until(qf_batcher *b, qf_deadline deadline, qf_element **ret_batch);
QF_API qf_code qf_batcher_try_next(qf_batcher *b, qf_element **ret_batch);

/* The poll (task) form. A poller with no batch in progress whose queue
 * holds batch_size examples takes them in one take, stacked as the thread
 * forms stack theirs. Otherwise it gathers the examples there are one by
 * one with the queue's poll form into the batcher's batch in progress
 * (shared by all its pollers) and stacks them when it has batch_size (or,
 * with allow_smaller_final_batch, when the queue has ended). */
typedef struct qf_batcher_poller qf_batcher_poller;

/**
 * qf_batcher_poller_new() - a poller for `b` (allocates room for batch_size
 * examples once; polling allocates only the batch tensors it returns).
 *
 * Ownership:   the caller owns *ret (qf_batcher_poller_free()); the poller
 *              holds a reference to the batch's queue, not to `b`.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_batcher_poller_new(qf_batcher *b, qf_batcher_poller **ret);

/**
 * qf_batcher_poll_next() - take the next batch without blocking.
 *
 * Blocking:    never: when no batch can be completed now, `waker` (for
 *              instance qf_task_waker(task)) is registered with the queue
 *              and QF_PENDING is returned; poll again when woken.
 * Concurrency: one caller per poller; any number of pollers per batcher.
 *              The pollers of one batcher fill one shared batch in
 *              progress, in queue order, under a short lock held only
 *              while examples that are already there are taken: a batch
 *              one poller began is finished by whichever poller (or
 *              qf_batcher_next* call) runs next, so no example is stranded
 *              with a poller that stopped polling.
 * Returns:     QF_OK and *ret_batch (as qf_batcher_next()); QF_PENDING;
 *              QF_CANCELLED "Dequeue operation was cancelled" in a task
 *              its runtime has cancelled (qf_queue.h, poll forms);
 *              QF_OUT_OF_RANGE at the end: without allow_smaller_final_batch
 *              the batch in progress (fewer than batch_size examples for the
 *              whole batcher) is never returned (spec 163), with it the
 *              poller that meets the end returns it as the final batch
 *              (spec 164); QF_INVALID_ARGUMENT naming a NULL argument; an
 *              error the stacking reports. *ret_batch untouched unless QF_OK.
 */
QF_API qf_code qf_batcher_poll_next(qf_batcher_poller *p, qf_waker *waker, qf_element **ret_batch);

/** qf_batcher_poller_free() - free the poller (the batch in progress is the
 *  batcher's and stays). If its last poll returned QF_PENDING, that waker is withdrawn
 *  from the queue (qf_queue_cancel_poll()), so do not register the same
 *  waker elsewhere in between. NULL-safe. */
QF_API void qf_batcher_poller_free(qf_batcher_poller *p);

/* ---------------------------------------------------------------- accessors
 * Fixed at creation; wait-free; any thread; pointers valid while `b` lives.
 */

/** The batch queue (borrowed; qf_queue_ref() to keep it). */
QF_API qf_queue *qf_batcher_queue(const qf_batcher *b);
/** The runner feeding it (owned by the scope). */
QF_API qf_queue_runner *qf_batcher_runner(const qf_batcher *b);
QF_API int64_t qf_batcher_size(const qf_batcher *b);
QF_API size_t qf_batcher_num_components(const qf_batcher *b);
/** Component i's name, NULL when positional. */
QF_API const char *qf_batcher_component_name(const qf_batcher *b, size_t i);
QF_API qf_dtype qf_batcher_dtype(const qf_batcher *b, size_t i);
/**
 * qf_batcher_output_shape() - the static shape of component i of a batch
 * (TensorFlow's static shape of the outputs): [batch_size] + per-example
 * shape, with the first dimension QF_UNKNOWN_DIM under
 * allow_smaller_final_batch (spec 164, 175) and padded dimensions unknown.
 * An invalid shape for i out of range.
 */
QF_API qf_shape qf_batcher_output_shape(const qf_batcher *b, size_t i);
/** The fill gauge (spec 161, 178): "<name>/fraction_of_<capacity>_full",
 *  or "<name>/fraction_over_<min>_of_<capacity-min>_full" for shuffle
 *  batches. Owned by `b`. */
QF_API const qf_fill_gauge *qf_batcher_gauge(const qf_batcher *b);
/** The gauge's value now (qf_fill_gauge_value()). */
QF_API double qf_batcher_fraction_full(const qf_batcher *b);

QF_END_DECLS

#endif
