/* qf_deferred.h - inputs known only when the pipeline runs: deferred
 * tensors, match_filenames_once, and the input producers that read them
 * (spec 150-151, 155).
 *
 * A qflow tensor always has a fully defined shape, so the producers of
 * qf_input.h always know their rows' shape when they are built. A deferred
 * tensor is TensorFlow's other case: a value computed later (the list of
 * files matching a pattern, a table loaded at start), declared now by its
 * dtype and a *static* shape that may leave dimensions or the rank unknown,
 * and computed once, by the first qf_deferred_value() call, the way
 * TensorFlow's local variables are initialised once. Every later call
 * returns the same tensor (or the same error).
 *
 *     qf_deferred *files;
 *     qf_match_filenames_once((const char *[]){"data/train-*.csv"}, 1, NULL, &files);
 *     qf_queue *names;
 *     qf_string_input_producer_deferred(scope, files, &po, &names);
 *     qf_deferred_unref(files);                  // the producer holds its own
 *     ... start the runners: the first run of the producer's op matches the
 *     files (an empty match fails that op: the Coordinator reports it) ...
 *
 * When the files are matched. TensorFlow matches them when local variables
 * are initialised, before the runners start. Here the first reader does it:
 * the producer's op on its first run, on a worker, which then waits for the
 * directory listing (a one-off, like a reader opening a file). Calling
 * qf_deferred_value() on your own thread before starting the runners (the
 * counterpart of local_variables_initializer()) does it there instead, and
 * lets the caller report an empty match before anything starts.
 *
 * Shapes (spec 150-151). A producer of a deferred input needs the shape of
 * its rows before it runs, because its queue is made with it: the static
 * shape without its first dimension, merged with options.element_shape
 * (TensorFlow's input_tensor.shape[1:].merge_with(element_shape)), must be
 * fully defined, else the constructor fails with "Either `input_tensor` must
 * have a fully defined shape or `element_shape` must be specified". When the
 * value arrives, rows of another shape fail the producer's op ("Shape
 * mismatch in tuple component 0. Expected [3,4], got [3,5]"), as
 * TensorFlow's enqueue_many does.
 *
 * Synchronization table
 *   qf_deferred_value         any threads; the first call computes, calls
 *                             made meanwhile wait for it (a mutex)
 *   accessors, ref / unref    any thread, any time (unref: the last one
 *                             needs no call in progress)
 *   producer constructors     any thread; the scope's short lock
 */
#ifndef QF_DEFERRED_H
#define QF_DEFERRED_H

#include <stddef.h>

#include "qf_export.h"
#include "qf_input.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_status.h"
#include "qf_tensor.h"

QF_BEGIN_DECLS

typedef struct qf_deferred qf_deferred;

/* Compute the value: QF_OK with *ret_t (a reference for the deferred
 * tensor), or an error (recorded with qf_set_error()). May block (it runs
 * once). */
typedef qf_code (*qf_deferred_fn)(void *arg, qf_tensor **ret_t);

/**
 * qf_deferred_new() - a tensor of dtype `dt` and static shape
 * `static_shape` (NULL: unknown rank), computed by fn(arg) on first use.
 *
 * Ownership:   static_shape and name are copied; `arg` stays the caller's
 *              unless free_arg is given, which is then called once with it
 *              when the last reference goes (also when this call fails).
 *              The caller owns *ret (qf_deferred_unref()).
 * Blocking:    never (fn does not run here). Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL fn, an invalid dtype or
 *              an invalid static shape; QF_RESOURCE_EXHAUSTED. *ret untouched
 *              on failure.
 */
QF_API qf_code qf_deferred_new(qf_dtype dt, const qf_shape *static_shape, qf_deferred_fn fn,
                               void *arg, void (*free_arg)(void *), const char *name,
                               qf_deferred **ret);

/**
 * qf_deferred_value() - the value: the first call runs fn and checks its
 * tensor against the declared dtype and static shape; every call returns
 * that tensor, or that first call's error.
 *
 * Ownership:   on QF_OK *ret_t is a new reference for the caller. The
 *              tensor is shared: do not modify it.
 * Blocking:    the first call for as long as fn takes; calls made while it
 *              runs wait for it; later calls never. Do not call it from fn.
 * Concurrency: any number of threads.
 * Returns:     QF_OK; fn's error; QF_INVALID_ARGUMENT when fn gave NULL, a
 *              tensor of another dtype, or one whose shape does not fit the
 *              static shape ("deferred 'x' evaluated to int32 [3], declared
 *              float [?]"), or for NULL arguments. *ret_t untouched on
 *              failure.
 */
QF_API qf_code qf_deferred_value(qf_deferred *d, qf_tensor **ret_t);

/** qf_deferred_ref() - add a reference; returns d. NULL-safe. Lock-free. */
QF_API qf_deferred *qf_deferred_ref(qf_deferred *d);
/** qf_deferred_unref() - drop a reference; the last releases the value and
 *  calls free_arg. NULL-safe. */
QF_API void qf_deferred_unref(qf_deferred *d);

/* Fixed at creation; wait-free; any thread; pointers valid while d lives.
 * For a NULL d: QF_DT_INVALID or NULL, and QF_INVALID_ARGUMENT recorded. */
QF_API qf_dtype qf_deferred_dtype(const qf_deferred *d);
QF_API const qf_shape *qf_deferred_static_shape(const qf_deferred *d);
QF_API const char *qf_deferred_name(const qf_deferred *d);

/**
 * qf_match_filenames_once() - TensorFlow's match_filenames_once(pattern): a
 * deferred 1-D QF_STRING tensor (static shape [?]) of the files matching
 * any of the n glob patterns, computed once (see the top of the file). The
 * names of every pattern's matches are put together and sorted (byte
 * order, as TensorFlow's MatchingFiles sorts them); a file matched by two
 * patterns appears twice. No match is not an error here: the value is then
 * empty, and a string_input_producer reading it fails when it runs (spec
 * 155).
 *
 * Patterns are TensorFlow's (fnmatch's without FNM_PERIOD): '*', '?' and
 * [...] in any path component, '\' escapes; a leading '.' is matched by
 * '*' like any character, but "." and ".." themselves are never
 * results of a wildcard. A pattern without wildcards matches the file of
 * that name if it exists.
 *
 * Ownership:   the patterns are copied. The caller owns *ret.
 * name:        used in messages; NULL: "match_filenames_once('<pattern>'...)".
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for n == 0 or a NULL pattern;
 *              QF_RESOURCE_EXHAUSTED. *ret untouched on failure. Computing
 *              the value can fail with QF_RESOURCE_EXHAUSTED (glob ran out of
 *              memory).
 */
QF_API qf_code qf_match_filenames_once(const char *const *patterns, size_t n, const char *name,
                                       qf_deferred **ret);

/**
 * qf_input_producer_deferred() - qf_input_producer() over a deferred input:
 * the queue's element shape comes from the static shape and
 * opts->element_shape (see "Shapes" at the top); the producer's op takes
 * the value on its first run (computing it if nobody has) and produces its
 * rows, epoch after epoch, like qf_input_producer() (spec 149-150).
 *
 * Ownership:   takes its own reference to `input`; otherwise as
 *              qf_input_producer().
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL input, a static rank
 *              of 0, an element_shape incompatible with the static rows
 *              ("element_shape [3] is not compatible with the input's rows
 *              [4]"), rows whose shape stays not fully defined ("Either
 *              `input_tensor` must have a fully defined shape or
 *              `element_shape` must be specified", spec 151), an owning
 *              QF_PTR or a QF_SPARSE dtype, or as qf_input_producer().
 *              At run time the op fails with the value's error, a rank-0
 *              value, rows of another shape, or no rows ("input_producer
 *              requires a non-empty input tensor").
 */
QF_API qf_code qf_input_producer_deferred(qf_scope *s, qf_deferred *input,
                                          const qf_input_producer_options *opts,
                                          qf_queue **ret_queue);

/**
 * qf_string_input_producer_deferred() - qf_string_input_producer() over a
 * deferred 1-D QF_STRING tensor (TensorFlow's
 * string_input_producer(match_filenames_once(...)), whose rows have
 * element_shape [] whatever the input's static shape says). An empty value
 * fails the op when it runs with "string_input_producer requires a non-null
 * input tensor (... evaluated to no strings)" (spec 155): with a
 * Coordinator the stop closes the queue and consumers get QF_OUT_OF_RANGE.
 *
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL input or one whose
 *              dtype is not QF_STRING or whose static rank is neither
 *              unknown nor 1; as qf_input_producer() otherwise.
 */
QF_API qf_code qf_string_input_producer_deferred(qf_scope *s, qf_deferred *strings,
                                                 const qf_input_producer_options *opts,
                                                 qf_queue **ret_queue);

QF_END_DECLS

#endif
