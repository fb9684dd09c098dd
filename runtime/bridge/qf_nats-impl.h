/* qf_nats-impl.h - internals of the NATS JetStream bridge (never installed).
 *
 * Threads and who touches what:
 *
 *   user threads   create and free connections, consumers and sinks (they
 *                  may block on the network);
 *   workers        run the batch source (take messages from a consumer's
 *                  inbox, build elements) and the sink op (encode elements,
 *                  hand them over); never block, never call the network;
 *   any thread     frees a batch: its ack tokens are released (a push on
 *                  the connection's command stack and a kick);
 *   libnats        delivers pull-consumer messages and status messages to
 *                  the consumer's two subscriptions (on_msg), and publish
 *                  acks to the sink (on_pub_ack), on libnats's own threads;
 *   the bridge     one thread per connection (io_main): sends pull
 *   thread         requests, acks, negative acks, in-progress acks,
 *                  publishes and their retries, drains, and runs the
 *                  blocking confirmations. It is the only thread that
 *                  recycles a consumer's slots.
 *
 * Commands reach the bridge thread through an intrusive multi-producer
 * stack (push: one CAS; the bridge takes the whole stack with one exchange
 * and reverses it, so each producer's commands keep their order) and a kick
 * (an atomic flag plus an event count: a notifier makes a syscall only
 * when it turns the flag on and the bridge is asleep).
 *
 * Gates. A consumer or sink that is being freed must stop receiving
 * commands before its connection goes away. Every pusher passes a gate: an
 * atomic word whose low bits count pushers in progress and whose top bit
 * says closed. Closing sets the bit and waits for the count to drain (a
 * handful of instructions); after that every would-be pusher takes the
 * inert path (frees what it holds without the network).
 */
#ifndef QF_NATS_IMPL_H
#define QF_NATS_IMPL_H

#include <nats/nats.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qf_nats.h"
#include "qf_waker.h"

/* ------------------------------------------------------- command stack */

enum {
    QF__N_RELEASE = 1, /* an ack token was freed: qf__nslot */
    QF__N_PUBLISH = 2, /* a sink's element: qf__npub */
    QF__N_RETRY = 3,   /* a publish to repeat after a transient failure: qf__npub */
};

typedef struct qf__nnode {
    struct qf__nnode *next;
    int kind;
} qf__nnode;

typedef struct qf__nstack {
    _Atomic(qf__nnode *) head;
} qf__nstack;

static inline void qf__nstack_push(qf__nstack *s, qf__nnode *n)
{
    qf__nnode *old = atomic_load_explicit(&s->head, memory_order_relaxed);
    do
        n->next = old;
    /* release: the taker sees what was written into the node */
    while (!atomic_compare_exchange_weak_explicit(&s->head, &old, n, memory_order_release,
                                                  memory_order_relaxed));
}

/* The whole stack, oldest first. */
static inline qf__nnode *qf__nstack_take(qf__nstack *s)
{
    qf__nnode *n = atomic_exchange_explicit(&s->head, NULL, memory_order_acquire), *r = NULL;
    while (n) {
        qf__nnode *next = n->next;
        n->next = r;
        r = n;
        n = next;
    }
    return r;
}

/* ------------------------------------------------------------------ gates */

#define QF__GATE_CLOSED (1u << 31)

static inline bool qf__gate_enter(_Atomic uint32_t *g)
{
    /* seq_cst pairs with qf__gate_close(): either the closer sees our
     * count, or we see its bit */
    if (atomic_fetch_add(g, 1) & QF__GATE_CLOSED) {
        atomic_fetch_sub_explicit(g, 1, memory_order_release);
        return false;
    }
    return true;
}

static inline void qf__gate_leave(_Atomic uint32_t *g)
{
    atomic_fetch_sub_explicit(g, 1, memory_order_release);
}

static inline void qf__gate_close(_Atomic uint32_t *g)
{
    atomic_fetch_or(g, QF__GATE_CLOSED);
    /* a pusher inside is a few instructions from leaving */
    while ((atomic_load_explicit(g, memory_order_acquire) & ~QF__GATE_CLOSED) != 0)
        sched_yield();
}

/* ------------------------------------------------------------ connection */

struct qf_nats {
    natsConnection *nc;
    jsCtx *js; /* JetStream API requests */
    char *servers;
    int64_t connect_timeout_ms;
    int64_t request_timeout_ms;
    _Atomic int64_t max_payload;
    _Atomic bool connected;
    _Atomic uint32_t reconnects; /* bumped by every reconnect */
    _Atomic uint64_t async_errors;
    QF_ATOMIC(uint32_t) closed_cb; /* futex word: libnats ran on_closed */

    _Atomic int refs; /* the handle, each consumer and sink not yet freed */

    pthread_t io;
    qf__nstack cmds;
    qf_eventcount io_ec;
    _Atomic uint32_t kick;
    _Atomic uint32_t io_stop;
    QF_ATOMIC(uint32_t) io_iter; /* futex word: iterations completed */
    _Atomic uint32_t io_iter_waiters;

    pthread_mutex_t mu; /* the lists below */
    struct qf_nats_consumer *consumers;
    struct qf_nats_sink *sinks;
    _Atomic uint32_t list_gen;
};

/* Wake the bridge thread: it runs a whole iteration after this. Any
 * thread; lock-free; a syscall only when the bridge sleeps and no kick is
 * pending already. */
void qf__nats_kick(qf_nats *n);
/* Wait until the bridge has finished two iterations, so every command
 * pushed and every list change made before the call has been seen. User
 * threads only (blocking). */
void qf__nats_io_sync(qf_nats *n);
void qf__nats_ref(qf_nats *n);
void qf__nats_unref(qf_nats *n);

/* A qf_code for a libnats failure, with the message "<what>: <text>"
 * (the text from libnats, or the JetStream error). Records it as the
 * thread's last error. */
qf_code qf__nats_error(natsStatus s, jsErrCode jerr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether a failure may go away by itself (timeouts, no responders,
 * disconnects, no leader yet). */
bool qf__nats_transient(natsStatus s, jsErrCode jerr);

/* Refuse blocking calls inside a task, like the rest of qflow. */
qf_code qf__nats_not_in_task(const char *what);

/* ---------------------------------------------------------- coordinator */

/* The part of a consumer or sink a Coordinator stop drains. */
typedef struct qf__nstop {
    qf_coord *coord;
    qf_coord_action *action;
    qf_coord_member *member; /* this epoch's; NULL when drained */
    char *member_name;
} qf__nstop;

qf_code qf__nstop_init(qf__nstop *st, qf_coord *coord, const char *name, void (*fn)(void *),
                       void *arg);
/* The object is drained: the member (if any) is done. Bridge thread or
 * the freeing thread. */
void qf__nstop_drained(qf__nstop *st);
/* The object runs again in a new epoch: a fresh member. */
void qf__nstop_resumed(qf__nstop *st);
void qf__nstop_destroy(qf__nstop *st);

/* -------------------------------------------------------------- consumer */

/* A slot holds one fetched message from delivery until its ack is sent. */
enum {
    QF__S_FREE = 0,
    QF__S_READY = 1,     /* in the inbox */
    QF__S_OUT = 2,       /* an element's ack token */
    QF__S_RELEASED = 3,  /* token freed; the bridge will ack and recycle */
    QF__S_ABANDONED = 4, /* given back (negative ack) by a drain */
};

enum { QF__V_ACK = 0, QF__V_NAK = 1, QF__V_TERM = 2 };

typedef struct qf__nslot {
    qf__nnode node; /* QF__N_RELEASE */
    struct qf_nats_consumer *c;
    natsMsg *msg;
    uint64_t seq;
    uint64_t delivered;
    int64_t fetched_at; /* written before the state becomes READY */
    int64_t wpi_at;     /* bridge only */
    _Atomic uint32_t state;
    _Atomic uint32_t verdict;
    uint32_t prev; /* the state a release found, written before the push */
} qf__nslot;

/* One of the consumer's two pull-request lanes: a subscription on
 * "<inbox>.<lane>.*" with at most one request outstanding, replies to
 * "<inbox>.<lane>.<gen>" (status messages name the request they end). */
typedef struct qf__nlane {
    struct qf_nats_consumer *c;
    int idx;
    natsSubscription *sub;
    _Atomic uint32_t gen;
    _Atomic int64_t outstanding;
    _Atomic bool active;
    int64_t expires_at; /* bridge only */
} qf__nlane;

enum {
    QF__C_RUNNING = 0,
    QF__C_DRAINING = 1,
    QF__C_STOPPED = 2,
    QF__C_CLOSED = 3,
};

enum { QF__F_DRAIN = 1, QF__F_RESUME = 2 };

typedef struct qf__nstats {
    _Atomic uint64_t delivered, redelivered, acked, nacked, terminated, in_progress, bad_payloads,
        pull_requests, pull_errors, last_bad_seq;
} qf__nstats;

struct qf_nats_consumer {
    qf_nats *n;
    char *stream, *durable, *name, *inbox, *next_subj;
    int64_t max_in_flight, fetch_batch, expires_ns, ack_wait_ns;
    qf_nats_key_kind key;
    /* decode: components (copies) */
    bool decode;
    size_t ncomp;
    qf_dtype *dtypes;
    qf_shape *shapes;
    char **names;
    const char **out_names; /* names, then "nats_ack" */

    qf__nslot *slots;
    qf_queue *free_slots; /* pointer queue of free slots */
    qf_queue *ready;      /* pointer queue: the inbox of the sources */
    qf__nlane lanes[2];
    _Atomic int64_t batch_cap; /* lowered by "Exceeded MaxRequestBatch" */

    _Atomic uint32_t state;
    _Atomic uint32_t flags;      /* QF__F_* requests for the bridge */
    QF_ATOMIC(uint32_t) drained; /* futex word: drains completed */
    _Atomic(qf_status *) error;  /* the error that ended it */
    _Atomic uint32_t backoff;    /* set by callbacks: pause pulling */
    _Atomic uint32_t gate;
    QF_ATOMIC(uint32_t) subs_live; /* futex word: subscriptions not completed */
    _Atomic int refs;              /* handle, sources, slots out */

    qf__nstats st;
    qf__nstop stop;

    /* bridge only */
    uint32_t seen_reconnects;
    int64_t backoff_until, backoff_ns, next_wpi;
    char *last_ack; /* reply subject of the latest ack, for confirmation */
    size_t last_ack_cap;
    bool ack_unconfirmed;
    /* qf_code of the last drain: written by the I/O thread before it bumps
     * `drained`; atomic because a waiter that saw its drain end may read
     * it while a later drain (a second request) writes it. */
    _Atomic int drain_status;

    struct qf_nats_consumer *next; /* in n->consumers */
};

void qf__nconsumer_ref(qf_nats_consumer *c);
void qf__nconsumer_unref(qf_nats_consumer *c);
/* Bridge thread: a slot's token was released (QF__N_RELEASE). */
void qf__nconsumer_on_release(qf__nslot *slot);
/* Bridge thread: one iteration for this consumer; lowers *next to the
 * time it next needs the bridge. */
void qf__nconsumer_io(qf_nats_consumer *c, int64_t now, int64_t *next);
/* Release a slot from a source or token (any thread). */
void qf__nslot_release(qf__nslot *slot);
/* The destructor of ack tokens (QF_PTR objects). */
void qf__nats_token_release(void *obj);
/* Build the element for a slot taken from the inbox (source poll). */
qf_code qf__nconsumer_element(qf_nats_consumer *c, qf__nslot *slot, qf_element **ret);
void qf__nconsumer_request(qf_nats_consumer *c, uint32_t flag);

/* ------------------------------------------------------------------- sink */

typedef struct qf__npub {
    qf__nnode node; /* QF__N_PUBLISH or QF__N_RETRY */
    struct qf_nats_sink *s;
    natsMsg *msg;
    int64_t due; /* retries: when to publish again */
    struct qf__npub *next_retry;
} qf__npub;

typedef struct qf__nsink_op {
    struct qf_nats_sink *s;
    qf_queue *input;
    struct qf__nsink_op *next;
} qf__nsink_op;

struct qf_nats_sink {
    qf_nats *n;
    jsCtx *js; /* its own: the publish-ack handler's closure is the sink */
    char *subject, *stream, *name, *id_prefix;
    qf_nats_payload payload;
    size_t payload_component;
    bool id_from_component;
    size_t id_component;
    int64_t max_pending, ack_timeout_ms, retry_for_ns;

    _Atomic int64_t credits;   /* max_pending - in_flight, minus reservations */
    _Atomic int64_t in_flight; /* handed to the bridge, no final ack yet */
    _Atomic int64_t next_id;
    qf_waitlist wl;           /* tasks waiting for credits or for in_flight 0 */
    QF_ATOMIC(uint32_t) idle; /* futex word: bumped when in_flight reaches 0 */
    _Atomic(qf_status *) error;
    _Atomic int64_t failing_since; /* 0: the last publish succeeded */
    _Atomic uint32_t consecutive_failures;
    _Atomic uint32_t gate;
    _Atomic uint32_t flags;      /* QF__F_DRAIN, QF__F_RESUME */
    _Atomic bool member_live;    /* the bridge holds a Coordinator member */
    QF_ATOMIC(uint32_t) drained; /* futex word: drains completed */
    pthread_mutex_t err_mu;      /* last_transient */
    char last_transient[160];    /* the last transient failure, for messages */
    _Atomic int refs;            /* handle, runners, publishes in flight */

    _Atomic uint64_t published, acked, duplicates, retries, failed;
    qf__nstop stop;

    pthread_mutex_t ops_mu;
    qf__nsink_op *ops;

    /* bridge only */
    qf__npub *retry_head;
    bool draining;

    struct qf_nats_sink *next; /* in n->sinks */
};

void qf__nsink_ref(qf_nats_sink *s);
void qf__nsink_unref(qf_nats_sink *s);
/* Bridge thread: publish a node (QF__N_PUBLISH or QF__N_RETRY). */
void qf__nsink_on_publish(qf__npub *p, int64_t now);
void qf__nsink_io(qf_nats_sink *s, int64_t now, int64_t *next);

#endif
