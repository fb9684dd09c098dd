/* qf_nats.h - qflow pipelines across machines through NATS JetStream.
 *
 * When one machine no longer suffices (many preprocessing hosts feeding a
 * training job, a fleet of inference servers sharing a request stream), the
 * queue between machines is a JetStream stream: durable, replicated, with
 * pull consumers and explicit acks. This header connects qflow to it:
 *
 *   qf_nats_connect()          a connection (libnats) and its bridge thread
 *   qf_nats_consumer_new()     a durable pull consumer of a stream, and
 *   qf_nats_consumer_source()  a batch source (qf_batch.h) pulling from it
 *   qf_nats_sink_new()         a publisher to a subject, and
 *   qf_nats_sink_op()/_runner() a QueueRunner op publishing a queue's elements
 *   qf_nats_encode()/_decode() elements to and from message payloads
 *
 *     producer process                        consumer process
 *     ----------------                        ----------------
 *     queue -> sink runner --publish-->  JetStream  --pull--> source -> qf_batch
 *              (waits for pub acks,       stream            -> batches; freeing a
 *               Nats-Msg-Id de-dup)                            batch acks its messages
 *
 * Delivery is at-least-once end to end, and exactly-once where JetStream
 * can make it so:
 *   - A message is acked only when the batch that carries it has been
 *     handed out and freed (its ack component, see QF_NATS_ACK, is freed).
 *     A message still in a queue, in a partial batch, or in the hands of a
 *     process that dies is never acked: JetStream delivers it again.
 *   - Every publish carries a Nats-Msg-Id (from a component of the element
 *     or a counter), so a restarted producer that publishes the same
 *     elements again within the stream's duplicate window stores each once.
 *   - A Coordinator stop (consumer and sink options .coord) drains: acks of
 *     batches freed before the stop reach the server, publishes in flight
 *     are acknowledged, and only then does qf_coord_join() return. Messages
 *     not handed out by then are given back to JetStream (negative acks) and
 *     are redelivered.
 *
 * The runtime stays non-blocking. Nothing here blocks a worker on the
 * network: the libnats calls that may block (publishing, pull requests,
 * acks, flushes) run on the connection's bridge thread or on libnats's own
 * threads, and reach tasks through wakers (qf_waker.h) and qflow queues.
 * A source task parks on its inbox when no message is there; a sink task
 * parks when max_pending publishes await their acks (back-pressure from the
 * server holds the runner, not a thread).
 *
 * Failure handling (each case has a test in tests/test_nats*.c):
 *   server restart, leader change  libnats reconnects; pull requests are
 *                                  re-issued; publishes are retried with
 *                                  the same Nats-Msg-Id (no duplicates in
 *                                  the stream); nothing is lost.
 *   server crash                   nothing is lost; recent acks may be, so
 *                                  messages come again: see below.
 *   consumer process crash         what it held (at most max_in_flight)
 *                                  comes again.
 *   slow consumer                  at most max_in_flight messages are
 *                                  fetched and not yet acked; the bridge
 *                                  sends in-progress acks for messages
 *                                  held longer than a third of AckWait, so
 *                                  JetStream does not redeliver them.
 *   message larger than the limit  QF_RESOURCE_EXHAUSTED naming the sizes.
 *   stream or consumer missing     QF_NOT_FOUND naming it.
 *   bad payload                    QF_DATA_LOSS from qf_nats_decode(); a
 *                                  decoding source counts it, terminates
 *                                  the message (no redelivery) and goes on.
 *
 * What a server crash costs (SIGKILL, out of memory, a panic: the process
 * ends without shutting down; measured on nats-server 2.9.10, read in its
 * sources and in 2.14's, test server_crash_redelivers_only_unpersisted_acks).
 * A single server (stream and consumer with one replica):
 *   - No message is lost. The file store writes a message to its file
 *     before it acknowledges the publish, and a process crash keeps what
 *     was written; the restarted server delivers every message not acked.
 *   - Recent acks are lost, and the bound is time, not max_in_flight. The
 *     server keeps a consumer's acks in memory and writes the consumer's
 *     state to its store at most ten times a second (100 ms after the last
 *     write, later when it is short of CPU). The acks it applied since its
 *     last write are gone, and so is its record of having delivered those
 *     messages: it delivers them again as first deliveries. Duplicates
 *     after a crash: what was in flight (at most max_in_flight) plus what
 *     the consumer acked in the server's last write interval, about the
 *     consume rate x 100 ms (3,000 at 30,000 messages/s; in the test
 *     237-2,544 of 5,008 handed out came again, each acked in the last
 *     ~100 ms before the kill). Nothing the server had written as acked
 *     comes again.
 *   - Synchronous acks would not shrink it. nats-server answers an ack
 *     sent as a request (AckSync, "double ack") once it has applied the ack
 *     in memory, before writing it, so a crash loses confirmed acks just
 *     the same. qflow sends plain acks and confirms them with one request
 *     when it drains (that confirmation has the same limit).
 *   - The server's sync_interval matters only when the machine fails (power,
 *     kernel): a process crash keeps everything written, synced or not.
 *     When the machine fails, what was written since the last sync may be
 *     gone: by default (a sync every 2 minutes, which nats-server 2.9 does
 *     not let one change) acknowledged publishes can be lost (at-least-once
 *     does not hold) and the consumer's state can roll back by the whole
 *     interval.
 *     With jetstream { sync_interval: always } (nats-server 2.10 and later)
 *     every write is synced before it is acknowledged, and a machine
 *     failure costs what a process crash costs.
 * A cluster (three replicas): the other servers hold the acks they were
 * sent (replicated before the leader writes them), so a crashed server
 * costs what was in flight and the acks not yet replicated (test_nats_
 * failover.c: 0-32 of 3,000 delivered twice).
 * To process each message once across any of these, keep what was done by
 * the record's key ("<stream>:<sequence>") or the payload's own id, as the
 * example consumer (runtime/bridge/examples/) does with its fsynced file.
 *
 * This header is not part of the umbrella qflow.h: it exists only when
 * libqflow was built with libnats (an optional dependency), and programs
 * that include it also link libnats. It does not include libnats's headers.
 *
 * Synchronization table
 *   qf_nats_connect / _free, *_new, *_free,
 *   stream and consumer admin, *_drain, *_flush    user threads; blocking
 *                                                  (network); never from a task
 *   qf_nats_*_stats, qf_nats_is_connected          any thread; wait-free
 *   the batch source, the sink op                  tasks of a runtime; never block
 *   freeing an ack component, qf_nats_reject       any thread; lock-free
 *   qf_nats_encode / _decode / _encoded_size       any thread; pure
 */
#ifndef QF_NATS_H
#define QF_NATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_batch.h"
#include "qf_coordinator.h"
#include "qf_export.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_status.h"
#include "qf_tensor.h"
#include "qf_time.h"

QF_BEGIN_DECLS

/* ------------------------------------------------------------ connection */

typedef struct qf_nats qf_nats;

/* Zero-initialise; zero fields take the defaults given. */
typedef struct qf_nats_options {
    /* Server URLs, comma-separated ("nats://10.0.0.1:4222,nats://10.0.0.2:4222").
     * NULL: "nats://127.0.0.1:4222". Copied. */
    const char *servers;
    /* Connection name the server shows (monitoring). NULL: "qflow". */
    const char *name;
    /* Initial connect, per server; 0: 2 s. */
    double connect_timeout_s;
    /* Pause between reconnect attempts; 0: 0.1 s. */
    double reconnect_wait_s;
    /* Reconnect attempts per server after a disconnect; 0: forever. */
    int max_reconnect;
    /* JetStream API requests (stream and consumer admin); 0: 5 s. */
    double request_timeout_s;
    /* false (default): every publish, ack and pull request is written to
     * the socket at once (libnats's SendAsap; the bridge thread makes the
     * write). true: libnats's flusher thread gathers writes for up to 1 ms
     * first: fewer system calls, a millisecond more per hop. */
    bool coalesce_writes;
} qf_nats_options;

/**
 * qf_nats_connect() - connect to a NATS server (or cluster) with JetStream
 * and start the connection's bridge thread.
 *
 * Ownership:   the caller owns *ret_n; free it with qf_nats_free() after
 *              the consumers and sinks made from it. Options are copied.
 * Blocking:    until connected or every server was tried (connect_timeout_s
 *              each). Not from inside a task (QF_FAILED_PRECONDITION).
 * Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT (NULL ret_n, negative times, a
 *              bad URL list); QF_UNAVAILABLE "NATS: no server available at
 *              <servers>" when nothing answered; QF_RESOURCE_EXHAUSTED.
 *              *ret_n untouched on failure.
 */
QF_API qf_code qf_nats_connect(const qf_nats_options *o, qf_nats **ret_n);

/**
 * qf_nats_free() - give up the handle. The connection closes and the bridge
 * thread ends once every consumer and sink made from it has been freed too
 * (they hold the connection). NULL-safe.
 *
 * Blocking:    when it is the last user: until the bridge thread has sent
 *              what it holds and joined (bounded by connect_timeout_s for
 *              the final flush). Not from inside a task.
 */
QF_API void qf_nats_free(qf_nats *n);

/** qf_nats_is_connected() - connected right now (false while libnats
 *  reconnects). Wait-free; any thread; a snapshot. False and
 *  QF_INVALID_ARGUMENT recorded for a NULL connection. */
QF_API bool qf_nats_is_connected(const qf_nats *n);

/** qf_nats_max_payload() - the largest message the connected server
 *  accepts (its max_payload), in bytes. Wait-free; any thread. 0 and
 *  QF_INVALID_ARGUMENT recorded for a NULL connection. */
QF_API int64_t qf_nats_max_payload(const qf_nats *n);

/* ---------------------------------------------------------------- streams */

typedef struct qf_nats_stream_options {
    const char *name; /* required */
    /* Subjects the stream captures; NULL: one subject, the name. */
    const char *const *subjects;
    size_t n_subjects;
    /* Replicas in a cluster; 0: 1. */
    int replicas;
    /* Nats-Msg-Id de-duplication window; 0: the server's (2 minutes). */
    double duplicate_window_s;
    /* Largest message the stream stores; 0: no limit of its own. */
    int32_t max_msg_size;
    /* Work-queue retention: a message is removed once acked. */
    bool work_queue;
    /* Memory storage instead of files. */
    bool memory;
} qf_nats_stream_options;

/**
 * qf_nats_stream_create() - create a stream, or accept one that exists
 * with the same subjects.
 *
 * Blocking:    one JetStream API request (request_timeout_s). Not from a
 *              task. Concurrency: any thread.
 * Returns:     QF_OK (created or already there); QF_ALREADY_EXISTS when a
 *              stream of that name exists with other subjects or settings;
 *              QF_INVALID_ARGUMENT (no name, negative values);
 *              QF_UNAVAILABLE (no JetStream, not enough cluster peers, no
 *              server); QF_DEADLINE_EXCEEDED.
 */
QF_API qf_code qf_nats_stream_create(qf_nats *n, const qf_nats_stream_options *o);

/** qf_nats_stream_delete() - delete a stream and its messages. Blocking
 *  (one API request). Returns QF_OK, QF_NOT_FOUND, QF_UNAVAILABLE,
 *  QF_DEADLINE_EXCEEDED, QF_INVALID_ARGUMENT. */
QF_API qf_code qf_nats_stream_delete(qf_nats *n, const char *name);

typedef struct qf_nats_stream_info {
    uint64_t messages;
    uint64_t bytes;
    uint64_t first_seq;
    uint64_t last_seq;
    int replicas;
    char leader[64]; /* server name of the stream leader; "" single server */
} qf_nats_stream_info;

/** qf_nats_stream_get_info() - the stream's state now. Blocking (one API
 *  request). Returns as qf_nats_stream_delete(); *ret untouched on
 *  failure. */
QF_API qf_code qf_nats_stream_get_info(qf_nats *n, const char *name, qf_nats_stream_info *ret);

/* -------------------------------------------------------------- consumers */

typedef struct qf_nats_consumer qf_nats_consumer;

/* The components of a record source, positional: the key, the payload,
 * and the ack token. Freeing the tensor that holds a token acks its
 * message (see qf_nats_consumer_source()). */
enum { QF_NATS_KEY = 0, QF_NATS_VALUE = 1, QF_NATS_ACK = 2 };

/* What a record's key is. */
typedef enum qf_nats_key_kind {
    QF_NATS_KEY_SEQUENCE = 0, /* "<stream>:<stream sequence>", like a reader's "<file>:<n>" */
    QF_NATS_KEY_SUBJECT = 1,  /* the message's subject */
} qf_nats_key_kind;

/* Zero-initialise; zero fields take the defaults given. */
typedef struct qf_nats_consumer_options {
    const char *stream;  /* required */
    const char *durable; /* required: the durable pull consumer's name */
    /* A consumer that does not exist yet is created (AckExplicit, deliver
     * all) with these; an existing one is used as it is and must be a pull
     * consumer. filter_subject NULL: the whole stream. */
    const char *filter_subject;
    double ack_wait_s; /* 0: 30 s */
    /* Messages fetched and not yet acked, at most (in queues, in batches,
     * in the user's hands); 0: 1024. Also the created consumer's
     * MaxAckPending. */
    int64_t max_in_flight;
    /* Messages asked for per pull request; 0: min(256, max_in_flight). */
    int64_t fetch_batch;
    /* How long a pull request waits at the server; 0: 1 s. Bounds how long
     * a lost request (leader change, server restart) goes unnoticed. */
    double pull_expires_s;
    /* Records: the key's kind. */
    qf_nats_key_kind key;
    /* NULL: records (key, value, ack): QF_STRING, QF_STRING, QF_PTR scalars.
     * Otherwise payloads are qf_nats_encode()d elements decoded into these
     * components (matched by name when both sides have names, else by
     * position; dtypes and shapes must agree), followed by the ack token
     * (named "nats_ack" when the components have names). A payload that
     * does not decode or match is counted (stats.bad_payloads), terminated
     * at the server (never redelivered) and skipped. Copied. */
    const qf_components *decode;
    /* A stop of this coordinator drains the consumer before join returns
     * (see qf_nats_consumer_drain()); a later run of the source in a new
     * epoch resumes it. NULL: drain and resume by hand. Borrowed: free the
     * consumer before the coordinator. */
    qf_coord *coord;
    /* Shown in messages; NULL: "<stream>/<durable>". Copied. */
    const char *name;
} qf_nats_consumer_options;

/**
 * qf_nats_consumer_new() - bind to (or create) a durable pull consumer and
 * start pulling into a bounded inbox (max_in_flight messages).
 *
 * Ownership:   the caller owns *ret_c (qf_nats_consumer_free()); it holds
 *              `n` until freed. Options are copied.
 * Blocking:    a few JetStream API requests; while the server or cluster
 *              answers with timeouts or "no responders" (a leader being
 *              elected, a restart) they are retried, with back-off, for up
 *              to three request timeouts. Not from inside a task.
 * Returns:     QF_OK;
 *              QF_INVALID_ARGUMENT naming the option (no stream or
 *                durable, negative sizes or times, fetch_batch >
 *                max_in_flight, decode components that are not valid
 *                components or include QF_PTR or QF_SPARSE);
 *              QF_NOT_FOUND "NATS stream 'x' not found";
 *              QF_FAILED_PRECONDITION when the durable is a push consumer;
 *              QF_UNAVAILABLE, QF_DEADLINE_EXCEEDED (server, cluster);
 *              QF_RESOURCE_EXHAUSTED. *ret_c untouched on failure.
 */
QF_API qf_code qf_nats_consumer_new(qf_nats *n, const qf_nats_consumer_options *o,
                                    qf_nats_consumer **ret_c);

/**
 * qf_nats_consumer_source() - a batch source yielding one example per
 * message: a record (key, value, ack) or the decoded components plus the
 * ack token. Use it with any batch call (qf_batch(), qf_shuffle_batch(),
 * ..., num_threads tasks may share it).
 *
 * Acks. The ack token is a QF_PTR scalar whose destructor acks: batching
 * stacks the tokens into the batch's ack component, and freeing the batch
 * (qf_element_free()) acks its messages, on whatever thread frees it, with
 * no blocking (the ack goes to the bridge thread). A token freed without
 * having been batched, or after a drain gave its message back, acks
 * nothing: the message is redelivered. qf_nats_reject() turns the acks of
 * a batch into negative acks or terminations.
 *
 * A source poll never blocks: with no message in the inbox the task parks
 * on it; the libnats delivery thread that puts a message there wakes it.
 * Errors that end the op: QF_NOT_FOUND (the consumer or stream was
 * deleted), QF_FAILED_PRECONDITION (it became a push consumer),
 * QF_UNAVAILABLE (the connection closed for good: a finite max_reconnect
 * ran out), QF_CANCELLED (the consumer was freed), QF_RESOURCE_EXHAUSTED.
 * With .coord these also request a stop of the Coordinator at once, from
 * the thread that learns of them.
 *
 * Ownership:   the caller owns *ret (hand it to a batch call); the source
 *              holds a reference to `c`'s state, so freeing `c` first is
 *              allowed (the source then reports QF_CANCELLED).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_nats_consumer_source(qf_nats_consumer *c, qf_batch_source **ret);

/**
 * qf_nats_consumer_drain() - stop pulling, send the acks of every batch
 * already freed, confirm them with the server (the consumer answers once
 * it has processed them), and give every message not yet acked back to
 * JetStream (a negative ack; it will be redelivered). This is what a
 * Coordinator stop does when the consumer has .coord.
 *
 * After it the consumer pulls nothing until qf_nats_consumer_resume() (or,
 * with .coord, until its source runs again in a new epoch). Batches freed
 * after the drain ack nothing (their messages were given back).
 * Blocking:    until drained or the deadline. Not from inside a task.
 * Returns:     QF_OK; QF_DEADLINE_EXCEEDED (the drain goes on in the
 *              background); QF_UNAVAILABLE when the server did not confirm
 *              the acks (disconnected: they are sent on reconnect);
 *              QF_INVALID_ARGUMENT.
 */
QF_API qf_code qf_nats_consumer_drain(qf_nats_consumer *c, qf_deadline deadline);

/** qf_nats_consumer_resume() - start pulling again after a drain. Never
 *  blocks. Returns QF_OK, QF_INVALID_ARGUMENT, QF_CANCELLED (freed). */
QF_API qf_code qf_nats_consumer_resume(qf_nats_consumer *c);

/**
 * qf_nats_consumer_free() - drain (as above, with a bound of
 * pull_expires_s + request_timeout_s), stop, and give up the handle.
 * Sources and ack tokens still alive keep the memory they need and become
 * inert (a source reports QF_CANCELLED; a token acks nothing). NULL-safe.
 * Blocking:    yes. Not from inside a task.
 */
QF_API void qf_nats_consumer_free(qf_nats_consumer *c);

typedef struct qf_nats_consumer_stats {
    uint64_t delivered;    /* messages received */
    uint64_t redelivered;  /* ... of which JetStream had delivered before */
    uint64_t acked;        /* acks sent */
    uint64_t nacked;       /* given back (drains, rejects, no room) */
    uint64_t terminated;   /* terminated (bad payloads, rejects) */
    uint64_t in_progress;  /* in-progress acks sent for held messages */
    uint64_t bad_payloads; /* payloads that did not decode or match */
    uint64_t pull_requests;
    uint64_t pull_errors;  /* pull requests refused (no leader, ...) */
    int64_t in_flight;     /* fetched and not yet acked, now */
    uint64_t last_bad_seq; /* stream sequence of the last bad payload */
} qf_nats_consumer_stats;

/** qf_nats_consumer_get_stats() - counters (relaxed snapshots). Any thread.
 *  NULL arguments: nothing written, QF_INVALID_ARGUMENT recorded. */
QF_API void qf_nats_consumer_get_stats(const qf_nats_consumer *c, qf_nats_consumer_stats *ret);

/** qf_nats_consumer_last_error() - a copy of the error that ended the
 *  consumer (consumer deleted, ...), or NULL. Caller frees. A NULL c gives
 *  NULL with QF_INVALID_ARGUMENT recorded. */
QF_API qf_status *qf_nats_consumer_last_error(const qf_nats_consumer *c);

/**
 * qf_nats_reject() - the ack tokens in `e` (a batch or a record: every
 * QF_PTR component made by a qf_nats source) will, when freed, give their
 * messages back for redelivery (`redeliver` true: a negative ack) or
 * terminate them (false: JetStream never delivers them again) instead of
 * acking them. Tokens already freed are not affected.
 * Concurrency: any thread; wait-free per token.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT (NULL); QF_NOT_FOUND when `e`
 *              holds no ack token.
 */
QF_API qf_code qf_nats_reject(const qf_element *e, bool redeliver);

/* Server-side view of a durable consumer, for monitoring and tests. */
typedef struct qf_nats_consumer_info {
    uint64_t num_pending;    /* messages not yet delivered */
    int64_t num_ack_pending; /* delivered and not acked */
    int64_t num_redelivered;
    uint64_t delivered_stream_seq;
    uint64_t ack_floor_stream_seq;
    int64_t num_waiting; /* pull requests waiting */
    char leader[64];     /* "" single server */
} qf_nats_consumer_info;

/** qf_nats_consumer_get_info() - the server's view of durable `durable` of
 *  `stream`. Blocking (one API request). Returns QF_OK, QF_NOT_FOUND,
 *  QF_UNAVAILABLE, QF_DEADLINE_EXCEEDED, QF_INVALID_ARGUMENT; *ret
 *  untouched on failure. */
QF_API qf_code qf_nats_consumer_get_info(qf_nats *n, const char *stream, const char *durable,
                                         qf_nats_consumer_info *ret);

/** qf_nats_consumer_delete() - delete a durable consumer at the server.
 *  Blocking (one API request). Returns as qf_nats_consumer_get_info(). */
QF_API qf_code qf_nats_consumer_delete(qf_nats *n, const char *stream, const char *durable);

/* ------------------------------------------------------------------ sinks */

typedef struct qf_nats_sink qf_nats_sink;

/* What a message's payload is. */
typedef enum qf_nats_payload {
    QF_NATS_PAYLOAD_ELEMENT = 0,   /* the whole element, qf_nats_encode()d */
    QF_NATS_PAYLOAD_COMPONENT = 1, /* the bytes of one scalar string component */
} qf_nats_payload;

/* Zero-initialise; zero fields take the defaults given. */
typedef struct qf_nats_sink_options {
    const char *subject; /* required */
    /* Non-NULL: the stream must exist at creation (QF_NOT_FOUND otherwise)
     * and every publish must land in it (Nats-Expected-Stream). */
    const char *stream;
    qf_nats_payload payload;
    size_t payload_component; /* QF_NATS_PAYLOAD_COMPONENT: its index */
    /* De-duplication ids (Nats-Msg-Id): from component id_component (a
     * scalar string or integer) when id_from_component; else, with
     * id_prefix, "<id_prefix>-<n>" with n counting from id_start in the
     * order elements are taken from the input (deterministic with one op);
     * else none (a restarted producer may then store an element twice). */
    bool id_from_component;
    size_t id_component;
    const char *id_prefix;
    int64_t id_start;
    /* Publishes awaiting their acks, at most; 0: 256. */
    int64_t max_pending;
    /* How long one attempt waits for its ack; 0: 5 s. */
    double ack_timeout_s;
    /* Transient failures (no responders during a leader election, a
     * disconnect, an ack timeout) are retried with the same id, with
     * back-off; when no publish has succeeded for this long the sink fails
     * with QF_UNAVAILABLE. 0: 60 s. */
    double retry_for_s;
    /* A stop of this coordinator waits, before join returns, until every
     * publish in flight is acknowledged (or failed). NULL: use
     * qf_nats_sink_flush(). Borrowed: free the sink before it. */
    qf_coord *coord;
    /* Shown in messages; NULL: the subject. Copied. */
    const char *name;
} qf_nats_sink_options;

/**
 * qf_nats_sink_new() - a publisher of elements to a subject.
 *
 * Ownership:   the caller owns *ret_s (qf_nats_sink_free()); it holds `n`.
 * Blocking:    one API request when .stream is set (retried as
 *              qf_nats_consumer_new() retries). Not from a task.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT naming the option (no subject,
 *              negative sizes or times, a negative id_start);
 *              QF_NOT_FOUND "NATS stream 'x' not found"; QF_UNAVAILABLE;
 *              QF_RESOURCE_EXHAUSTED. *ret_s untouched on failure.
 */
QF_API qf_code qf_nats_sink_new(qf_nats *n, const qf_nats_sink_options *o, qf_nats_sink **ret_s);

/**
 * qf_nats_sink_op() - a QF_OP_POLL enqueue op that takes elements from
 * `input` and publishes them, for a QueueRunner whose queue is `input`.
 * One run: wait for room (max_pending), dequeue one element (the task parks
 * while `input` is empty), encode it and hand it to the bridge thread. When
 * `input` is closed and drained the op waits for every publish in flight
 * to be acknowledged, then ends with QF_OUT_OF_RANGE (a clean end) or the
 * sink's error.
 *
 * Errors that end the op (reported by the runner to its Coordinator):
 * QF_INVALID_ARGUMENT (an element the payload option cannot encode: a
 * QF_PTR or QF_SPARSE component, a missing component, a non-string payload component,
 * an id component that is not a scalar string or integer);
 * QF_RESOURCE_EXHAUSTED (a message larger than the server's max_payload
 * or the stream's max_msg_size, with both sizes); QF_NOT_FOUND (no such
 * stream); QF_UNAVAILABLE (no publish succeeded for retry_for_s);
 * QF_CANCELLED (the sink was freed). The element that failed is dropped.
 *
 * Ownership:   *ret_op's arg is owned by the sink (valid until the sink's
 *              last reference goes); `input` is referenced by the op
 *              (op.input), and so by a runner made from it.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_nats_sink_op(qf_nats_sink *s, qf_queue *input, qf_enqueue_op *ret_op);

/**
 * qf_nats_sink_runner() - a QueueRunner over `input` with n_ops copies of
 * qf_nats_sink_op() (n_ops 0: 1). Its close op does nothing (the input is
 * already closed when the ops end); its cancel op is the default one
 * (close `input`, cancelling pending enqueues). The runner holds a
 * reference to the sink.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_nats_sink_runner(qf_nats_sink *s, qf_queue *input, size_t n_ops,
                                   qf_queue_runner **ret);

/**
 * qf_nats_sink_flush() - wait until no publish is in flight (every one
 * acknowledged or failed).
 * Blocking:    until then or the deadline. Not from inside a task.
 * Returns:     QF_OK; the sink's error if one happened; QF_DEADLINE_EXCEEDED.
 */
QF_API qf_code qf_nats_sink_flush(qf_nats_sink *s, qf_deadline deadline);

/** qf_nats_sink_free() - flush (bounded by retry_for_s), stop and give up
 *  the handle; runners still holding the sink then fail with
 *  QF_CANCELLED. NULL-safe. Blocking; not from a task. */
QF_API void qf_nats_sink_free(qf_nats_sink *s);

typedef struct qf_nats_sink_stats {
    uint64_t published;  /* elements handed to the bridge */
    uint64_t acked;      /* stored (or de-duplicated) by JetStream */
    uint64_t duplicates; /* ... of which JetStream had already stored */
    uint64_t retries;    /* publish attempts repeated after a transient failure */
    uint64_t failed;     /* given up: permanent errors, retry_for_s exceeded */
    int64_t in_flight;   /* awaiting an ack now */
} qf_nats_sink_stats;

/** qf_nats_sink_get_stats() - counters (relaxed snapshots). Any thread.
 *  NULL arguments: nothing written, QF_INVALID_ARGUMENT recorded. */
QF_API void qf_nats_sink_get_stats(const qf_nats_sink *s, qf_nats_sink_stats *ret);

/* ------------------------------------------------------------------ codec
 *
 * Payload format, version 1, little-endian throughout:
 *   "QFE" 0x01 | flags u8 (bit 0: names) | 0 u8 | ncomp u16 (1..4096)
 *   per component: [name: len u16 (1..1024), bytes] dtype u8, rank u8 (0..8),
 *                  rank x dim i64 (>= 0), then the values: numbers raw
 *                  (n x dtype size), strings n x (len u32, bytes)
 * and nothing after the last component. QF_PTR and QF_SPARSE (pointers)
 * cannot be sent.
 */
#define QF_NATS_CODEC_VERSION 1

/**
 * qf_nats_encoded_size() - the payload size of `e` in bytes.
 * Returns QF_OK; QF_INVALID_ARGUMENT (NULL, a missing, QF_PTR or QF_SPARSE
 * component, a name longer than 1024 bytes, a string longer than 4 GiB).
 * Pure.
 */
QF_API qf_code qf_nats_encoded_size(const qf_element *e, size_t *ret_len);

/**
 * qf_nats_encode() - write `e` as a version-1 payload into buf[0..cap).
 * Returns QF_OK with *ret_len bytes written; QF_INVALID_ARGUMENT as
 * qf_nats_encoded_size(), or when cap is too small ("needs N bytes").
 * Any thread; pure; `buf` untouched on failure.
 */
QF_API qf_code qf_nats_encode(const qf_element *e, void *buf, size_t cap, size_t *ret_len);

/**
 * qf_nats_decode() - the element a payload holds.
 *
 * Every length is checked before it is used; a payload that is not
 * exactly one well-formed element gives QF_DATA_LOSS with what is wrong and
 * at which byte ("NATS payload of 37 bytes: component 1 needs 48 bytes of
 * values at byte 21"), never a crash or an over-read.
 * Ownership:   on QF_OK *ret_elem is the caller's (with names when the
 *              payload has them). Any thread; pure.
 * Returns:     QF_OK; QF_DATA_LOSS; QF_INVALID_ARGUMENT (NULL arguments);
 *              QF_RESOURCE_EXHAUSTED. *ret_elem untouched on failure.
 */
QF_API qf_code qf_nats_decode(const void *buf, size_t len, qf_element **ret_elem);

QF_END_DECLS

#endif
