/* API FROZEN */
/* qf_input.h - input producers: limit_epochs, input_producer,
 * string_input_producer, range_input_producer, slice_input_producer.
 *
 * A producer is TensorFlow's three pieces (spec 149): an optional shuffle
 * of the whole input, redone for every epoch, so each epoch is a fresh
 * permutation; a FIFOQueue; and one enqueue op registered as a QueueRunner
 * in a scope's collection (default qf_scope_default(), collection
 * QF_QUEUE_RUNNERS), which qf_start_queue_runners() starts. The op pushes
 * one epoch after another; after num_epochs epochs it ends with
 * QF_OUT_OF_RANGE, the runner closes the queue, consumers drain what is
 * left and then get QF_OUT_OF_RANGE from the queue (spec 149-160).
 *
 *     qf_queue *files;
 *     qf_input_producer_options o = {.num_epochs = 2, .shuffle = QF_SHUFFLE_OFF};
 *     qf_string_input_producer(scope, names, n, &o, &files);   // + a runner
 *     qf_start_queue_runners(rt, coord, scope, NULL, QF_RUNNER_START, &tasks, &nt);
 *     ... qf_queue_dequeue(files, &e) until QF_OUT_OF_RANGE ...
 *     qf_queue_unref(files);
 *
 * The op is a poll op (qf_queue_runner.h): it enqueues one row per run,
 * holding the row while the queue is full (a parked task, no worker), so a
 * Coordinator stop is seen between rows rather than between epochs. The
 * rows are made once, at construction, and shared by reference: a run
 * allocates only the queue element that carries a row.
 *
 * Shuffling makes each epoch's order as TensorFlow's random_shuffle does,
 * word for word from the same Philox4x32-10 stream with the seeds
 * TensorFlow derives from an op seed when no graph-level seed is set
 * ((87654321, seed mod (2^31 - 1))): a non-zero seed gives the orders that
 * seed gives TensorFlow's producers, the same every time (spec 153, 158,
 * 160); seed 0 seeds from the clock and the address space, so every
 * producer differs (TensorFlow's seed=None; TensorFlow's seed=0, a fixed
 * stream there, is seed 2147483647 here, the same op seed mod 2^31 - 1).
 *
 * Ownership and lifetime. The producer state (rows, permutation, epoch
 * counter) belongs to the runner, and so to the scope once the runner is in
 * a collection: it is freed with the runner (qf_scope_free()). The queue is
 * reference counted; the runner holds one reference and *ret_queue is the
 * caller's.
 *
 * Errors. Empty input known at construction is QF_INVALID_ARGUMENT there
 * (spec 154, 160). The _tensor form of string_input_producer checks at run
 * time, as TensorFlow's Assert does (spec 155): the runner's op fails with
 * QF_INVALID_ARGUMENT "string_input_producer requires a non-null input
 * tensor", which goes to the Coordinator (whose stop closes the queue with
 * the cancel op, so consumers get QF_OUT_OF_RANGE) or, without one, into
 * the runner's exceptions.
 *
 * Differences from TensorFlow:
 *   - num_epochs 0 means "no limit" (TensorFlow's None); negative values are
 *     refused ("num_epochs must be > 0 not -1", spec 148);
 *   - slice_input_producer returns a queue whose elements are the aligned
 *     slices, instead of TensorFlow's dequeue-then-gather tensors (spec 159);
 *   - a qflow tensor always has a fully defined shape, so here
 *     element_shape is only checked for compatibility; inputs whose shape
 *     is not fully known until they run (spec 150-151, match_filenames_once)
 *     are deferred tensors, with their producers in qf_deferred.h;
 *   - the summary is a gauge read on demand (qf_fill_gauge), not an op.
 *
 * Synchronization table
 *   producer constructors            any thread; the scope's short lock
 *   qf_limit_epochs_next / produce   any number of threads (one atomic RMW)
 *   gauges                           any thread, any time (wait-free)
 *
 * Bad input: NULL arguments, negative num_epochs and an unknown shuffle
 * setting are QF_INVALID_ARGUMENT naming them, and nothing is created;
 * qf_limit_epochs_count/reset given NULL record that error (0 / nothing);
 * the gauge values of NULL are 0, quietly (documented below).
 */
#ifndef QF_INPUT_H
#define QF_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_status.h"
#include "qf_tensor.h"

QF_BEGIN_DECLS

/* Default capacity of producer and batch queues (spec 152, 161). */
#define QF_INPUT_DEFAULT_CAPACITY 32

/* ----------------------------------------------------------- fill gauges
 *
 * The scalar summary TensorFlow attaches to an input queue (spec 157, 161,
 * 178), as a value anyone can read at any time. A gauge names a queue
 * (borrowed: valid while the queue lives) and computes
 *     max(0, size - min_after_dequeue) / (capacity - min_after_dequeue)
 * which is size / capacity when min_after_dequeue is 0.
 */
#define QF_FILL_GAUGE_NAME_MAX 256

typedef struct qf_fill_gauge {
    /* "<scope name>/fraction_of_<capacity>_full", or for shuffle_batch
     * "<scope name>/fraction_over_<min>_of_<capacity-min>_full". */
    char name[QF_FILL_GAUGE_NAME_MAX];
    const qf_queue *queue;
    int64_t capacity;
    int64_t min_after_dequeue;
} qf_fill_gauge;

/**
 * qf_fill_gauge_value() - the gauge's current value, in [0, 1] (above 1
 * only if the queue is over capacity, which queues do not allow).
 *
 * Blocking:    never. Concurrency: any thread. Progress: wait-free (one
 *              qf_queue_size() snapshot).
 * Returns:     the value; 0 for a NULL gauge or queue.
 */
QF_API double qf_fill_gauge_value(const qf_fill_gauge *g);

/**
 * qf_input_producer_gauge() - the gauge of a producer queue: named
 * "<queue name>/<summary_name>", summary_name NULL giving
 * "fraction_of_<capacity>_full" (what string, range and slice producers
 * use, spec 157); value size / capacity.
 *
 * Ownership:   `q` is borrowed by the gauge (not referenced).
 * Blocking:    never. Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments. A name longer
 *              than QF_FILL_GAUGE_NAME_MAX - 1 is truncated.
 *              *ret_gauge untouched on failure.
 */
QF_API qf_code qf_input_producer_gauge(const qf_queue *q, const char *summary_name,
                                       qf_fill_gauge *ret_gauge);

/** qf_input_producer_fraction_full() - size / capacity of `q` right now
 *  (the value of its "fraction_of_<C>_full" gauge). 0 for NULL. Wait-free;
 *  any thread. */
QF_API double qf_input_producer_fraction_full(const qf_queue *q);

/* ---------------------------------------------------------- limit_epochs */

typedef struct qf_limit_epochs qf_limit_epochs;

/**
 * qf_limit_epochs_new() - TensorFlow's limit_epochs(t, num_epochs): every
 * evaluation (qf_limit_epochs_next()) returns `t`; with num_epochs > 0 the
 * evaluation after num_epochs of them fails with QF_OUT_OF_RANGE (spec
 * 147-148). num_epochs 0: no limit.
 *
 * Ownership:   takes its own reference to `t` (the caller keeps theirs).
 *              The caller owns *ret (qf_limit_epochs_free()).
 * Blocking:    never. Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL tensor or a negative
 *              num_epochs ("num_epochs must be > 0 not -1");
 *              QF_RESOURCE_EXHAUSTED. *ret untouched on failure.
 */
QF_API qf_code qf_limit_epochs_new(qf_tensor *t, int64_t num_epochs, qf_limit_epochs **ret);

/** qf_limit_epochs_free() - release the tensor and the counter. NULL-safe.
 *  Not concurrently with other calls on `l`. */
QF_API void qf_limit_epochs_free(qf_limit_epochs *l);

/**
 * qf_limit_epochs_next() - one evaluation: counts an epoch and returns the
 * tensor.
 *
 * Ownership:   on QF_OK *ret_t is a new reference for the caller.
 * Blocking:    never. Concurrency: any number of threads; exactly
 *              num_epochs calls succeed in total.
 * Progress:    lock-free (one atomic fetch-add on the counter).
 * Returns:     QF_OK; QF_OUT_OF_RANGE "Reached limit of <num_epochs>" once
 *              the limit is used up (every later call too);
 *              QF_INVALID_ARGUMENT for NULL arguments. *ret_t untouched on
 *              failure.
 */
QF_API qf_code qf_limit_epochs_next(qf_limit_epochs *l, qf_tensor **ret_t);

/** qf_limit_epochs_count() - successful evaluations so far (TensorFlow's
 *  local variable "epochs"), at most num_epochs. Wait-free snapshot. */
QF_API int64_t qf_limit_epochs_count(const qf_limit_epochs *l);

/** qf_limit_epochs_reset() - set the counter back to 0 (TensorFlow's
 *  local_variables_initializer()). Any thread; calls racing with it may
 *  count before or after the reset. */
QF_API void qf_limit_epochs_reset(qf_limit_epochs *l);

/**
 * qf_limit_epochs_produce() - a qf_produce_fn (qf_queue_runner.h) over a
 * qf_limit_epochs passed as `arg`: each run yields a one-component element
 * holding the tensor (a new reference), so
 *     qf_enqueue_op op = {.kind = QF_OP_PRODUCE,
 *                         .produce = qf_limit_epochs_produce, .arg = l};
 * feeds a queue num_epochs times, then retires the op (QF_OUT_OF_RANGE is
 * the runner's default closed code). Set op.many to enqueue the tensor's
 * rows instead. Same concurrency and returns as qf_limit_epochs_next().
 */
QF_API qf_code qf_limit_epochs_produce(void *arg, qf_element **ret_elem);

/* ------------------------------------------------------------- producers */

/* Shuffle setting; zero (QF_SHUFFLE_DEFAULT) is TensorFlow's default, on. */
typedef enum qf_shuffle {
    QF_SHUFFLE_DEFAULT = 0,
    QF_SHUFFLE_ON = 1,
    QF_SHUFFLE_OFF = 2,
} qf_shuffle;

/* Options shared by every producer. Zero-initialise: every zero field
 * means TensorFlow's default. */
typedef struct qf_input_producer_options {
    /* Epochs to produce; 0: no limit; negative: QF_INVALID_ARGUMENT. */
    int64_t num_epochs;
    /* Shuffle the rows within each epoch (default on). */
    qf_shuffle shuffle;
    /* Shuffle seed: non-zero gives reproducible permutations; 0 random. */
    int64_t seed;
    /* Queue capacity; 0: QF_INPUT_DEFAULT_CAPACITY; negative: unbounded. */
    int64_t capacity;
    /* Share the queue under this name in the scope's registry (spec 156);
     * qf_queue_shared_name() then returns it. NULL: not shared. */
    const char *shared_name;
    /* Name of the queue and of the runner, and the prefix of the gauge
     * name. NULL: "input_producer". */
    const char *name;
    /* Collection the runner is added to. NULL: QF_QUEUE_RUNNERS. */
    const char *collection;
    /* The runner's cancel op (a Coordinator stop runs it). NULL: close the
     * queue with cancel_pending_enqueues (the runner's default). */
    qf_runner_action_fn cancel_op;
    void *cancel_arg;
    /* qf_input_producer() only: the shape of one row, checked against the
     * input (QF_INVALID_ARGUMENT when incompatible). NULL: the input's. */
    const qf_shape *element_shape;
} qf_input_producer_options;

/**
 * qf_input_producer() - a producer of the rows of `input` (rank >= 1):
 * a FIFOQueue with one component of input's dtype and shape dims[1..],
 * and a runner that enqueues the rows, epoch after epoch (spec 149-150).
 *
 * Ownership:   `input` is borrowed: the producer takes its own reference to
 *              the rows it makes from it (QF_PTR tensors that own their
 *              objects are refused). On QF_OK *ret_queue (when non-NULL)
 *              is a new reference to the queue for the caller; the runner
 *              belongs to the scope's collection. `s` NULL: the default
 *              scope. opts NULL: all defaults.
 * Blocking:    never (allocates). Concurrency: any thread.
 * Returns:     QF_OK;
 *              QF_INVALID_ARGUMENT for a NULL input, a scalar input ("Input
 *                tensor must be at least rank 1"), zero rows ("input_producer
 *                requires a non-empty input tensor"), num_epochs < 0,
 *                element_shape incompatible with the rows, or what queue
 *                creation refuses (shared name with other attributes);
 *              QF_FAILED_PRECONDITION for an owning QF_PTR input;
 *              QF_RESOURCE_EXHAUSTED.
 *              Nothing is created and *ret_queue is untouched on failure.
 */
QF_API qf_code qf_input_producer(qf_scope *s, const qf_tensor *input,
                                 const qf_input_producer_options *opts, qf_queue **ret_queue);

/**
 * qf_string_input_producer() - a producer of n strings (typically file
 * names): a FIFOQueue of QF_STRING scalars (spec 152-157).
 *
 * Ownership:   the strings are copied; otherwise as qf_input_producer().
 * Returns:     as qf_input_producer(); n == 0 is QF_INVALID_ARGUMENT
 *              "string_input_producer requires a non-null input tensor"
 *              (spec 154), as is a NULL entry.
 */
QF_API qf_code qf_string_input_producer(qf_scope *s, const char *const *strings, size_t n,
                                        const qf_input_producer_options *opts,
                                        qf_queue **ret_queue);

/**
 * qf_string_input_producer_tensor() - the same over a 1-D QF_STRING tensor.
 * An empty tensor is accepted here and fails at run time, in the runner
 * (spec 155): its op returns QF_INVALID_ARGUMENT "string_input_producer
 * requires a non-null input tensor".
 *
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL tensor or one that is
 *              not a 1-D QF_STRING tensor; as qf_input_producer() otherwise.
 */
QF_API qf_code qf_string_input_producer_tensor(qf_scope *s, const qf_tensor *strings,
                                               const qf_input_producer_options *opts,
                                               qf_queue **ret_queue);

/**
 * qf_range_input_producer() - a producer of the QF_INT32 scalars
 * 0 .. limit-1 (spec 158).
 *
 * Returns:     as qf_input_producer(); limit <= 0 is QF_INVALID_ARGUMENT
 *              "range_input_producer requires limit > 0 not N".
 */
QF_API qf_code qf_range_input_producer(qf_scope *s, int32_t limit,
                                       const qf_input_producer_options *opts, qf_queue **ret_queue);

/**
 * qf_slice_input_producer() - a producer of aligned slices of n tensors
 * that share their first dimension: element i is (tensors[0][i], ...,
 * tensors[n-1][i]); a shuffle permutes whole slices, so the components of a
 * slice never split (spec 159-160). The queue has n components.
 *
 * Ownership:   the tensors are borrowed (see qf_input_producer()).
 * Returns:     as qf_input_producer(); n == 0 is QF_INVALID_ARGUMENT
 *              "Expected at least one tensor in slice_input_producer()."
 *              (spec 160); differing first dimensions are
 *              QF_INVALID_ARGUMENT.
 */
QF_API qf_code qf_slice_input_producer(qf_scope *s, const qf_tensor *const *tensors, size_t n,
                                       const qf_input_producer_options *opts, qf_queue **ret_queue);

QF_END_DECLS

#endif
