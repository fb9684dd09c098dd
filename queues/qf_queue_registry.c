/* qf_queue_registry.c - queues shared by name (spec 9-11, 83, 96).
 *
 * A registry is TensorFlow's resource container for queues: a map from
 * shared name to queue. It is liburcu's RCU lock-free resizable hash table
 * (cds_lfht), so a lookup takes no lock: it walks the table inside an RCU
 * read-side critical section and takes a queue reference before leaving it.
 *
 * Synchronization table
 *   lookup, qf__queue_find_shared   any thread, any time; lock-free (no
 *                                   lock, no RMW on shared table state; a
 *                                   thread's very first registry call also
 *                                   registers it with RCU, which takes
 *                                   liburcu's registry mutex once)
 *   insert (qf__queue_publish)      any thread; lock-free; races for one
 *                                   name are settled by cds_lfht_add_unique:
 *                                   exactly one queue is registered and the
 *                                   losers attach to it. When the table has
 *                                   grown past 2 names per bucket, the
 *                                   inserting thread resizes it (blocking:
 *                                   the table's resize mutex, grace periods)
 *   remove                          any thread; lock-free unlink, then
 *                                   blocks for one RCU grace period
 *   registry_free                   quiescence: nothing else may use the
 *                                   registry (the default one is never freed)
 * None of these may be called from inside an urcu-memb read-side critical
 * section of the application's own (remove, insert and free wait for grace
 * periods).
 *
 * Lifetime. The registry holds one queue reference per entry. Removal
 * unlinks the entry, waits for a grace period (synchronize_rcu: every
 * lookup that could still see the entry has left its critical section, and
 * each such lookup took its own reference inside it), and only then drops
 * the registry's reference and frees the entry. So a lookup never touches
 * freed memory and never revives a dead queue (a plain increment suffices:
 * the count cannot be zero while the entry is reachable).
 *
 * RCU flavour: liburcu's default, urcu-memb, registered lazily. Every
 * flavour except urcu-bp needs each thread that enters a read-side critical
 * section (or calls the cds_lfht update functions) to be registered first,
 * and urcu-mb is no exception: it only differs in its barriers. Users of a
 * library cannot be asked to register their threads, so qflow registers a
 * thread with urcu-memb the first time it touches a registry (a
 * thread-local flag makes that one branch afterwards) and unregisters it
 * from a pthread key destructor when the thread exits. That gives the
 * "works from any thread" property of urcu-bp with the library the build
 * already links (liburcu = urcu-memb), and memb's read side: with
 * sys_membarrier the read lock is a thread-local counter update and a
 * compiler barrier. Not chosen: urcu-qsbr (threads must announce quiescent
 * states - impossible for user threads), urcu-signal (takes a signal),
 * urcu-mb (registration still needed, and a full fence per read lock).
 * Caveat: a thread that the application itself registers with urcu-memb
 * must not also be registered by qflow; an application that uses
 * urcu-memb directly should register its threads before they first call
 * qflow, or qflow could switch to urcu-bp (link liburcu-bp), whose
 * registration is idempotent.
 *
 * ThreadSanitizer. liburcu is not instrumented, so TSan sees neither the
 * publication of an entry (cds_lfht_add_unique) nor the grace period. Both
 * are stated with happens-before annotations (qf_tsan-impl.h): a release on
 * the entry before it is added and an acquire in the match function; a
 * release on the registry by every reader before it leaves its critical
 * section and an acquire after synchronize_rcu() before freeing. The table
 * is created without CDS_LFHT_AUTO_RESIZE, whose worker thread hands memory
 * over in ways TSan reports as races (see registry_init()).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-memb.h>

#include <urcu/rculfhash.h>

#include "qf_queue-impl.h"
#include "qf_queue_metrics-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"
#include "qf_tsan-impl.h"

/* Start small; grow 4x once the table holds twice as many names as
 * buckets. */
#define INITIAL_BUCKETS 16u

struct qf_queue_registry {
    struct cds_lfht *ht;
    _Atomic long count;            /* registered names */
    _Atomic unsigned long buckets; /* the size last asked for */
    _Atomic bool resizing;         /* one grower at a time */
    /* TSan only: the address the grace-period hand-off is announced on. */
    char gp_sync;
};

typedef struct entry {
    struct cds_lfht_node node;
    qf_queue *q;        /* the registry's reference */
    struct entry *next; /* registry_free's list */
    char name[];
} entry;

/* --------------------------------------------------------------- RCU glue */

static pthread_once_t rcu_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t rcu_key;
static _Thread_local bool rcu_registered;

static void rcu_thread_exit(void *arg)
{
    (void)arg;
    if (rcu_registered) {
        urcu_memb_unregister_thread();
        rcu_registered = false;
    }
}

static void rcu_key_make(void)
{
    if (pthread_key_create(&rcu_key, rcu_thread_exit) != 0)
        abort(); /* only EAGAIN/ENOMEM: nothing sensible to do */
}

/* Register the calling thread with urcu-memb once; see the header notes. */
static void rcu_thread_online(void)
{
    if (__builtin_expect(rcu_registered, 1))
        return;
    pthread_once(&rcu_key_once, rcu_key_make);
    urcu_memb_register_thread();
    rcu_registered = true;
    /* Any non-NULL value makes the destructor run at thread exit. */
    pthread_setspecific(rcu_key, &rcu_registered);
}

/* ------------------------------------------------------------------ table */

static unsigned long hash_name(const char *s)
{
    /* FNV-1a, then a 64-bit finaliser so every bit depends on every byte
     * (cds_lfht uses the low bits for buckets, bit-reversed for order). */
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3u;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53u;
    h ^= h >> 33;
    return (unsigned long)h;
}

static int match_name(struct cds_lfht_node *node, const void *key)
{
    entry *e = caa_container_of(node, entry, node);
    QF_HB_ACQUIRE(e); /* pairs with the release before cds_lfht_add_unique */
    return strcmp(e->name, (const char *)key) == 0;
}

static qf_code registry_init(qf_queue_registry *reg)
{
    /* No CDS_LFHT_AUTO_RESIZE: that starts liburcu's resize worker thread,
     * whose uninstrumented hand-offs ThreadSanitizer reports as races, and
     * makes cds_lfht_destroy() asynchronous. Registries are small and
     * insertions rare, so the inserting thread grows the table itself
     * (maybe_grow()). No thread registration is needed to create it. */
    atomic_init(&reg->count, 0);
    atomic_init(&reg->buckets, INITIAL_BUCKETS);
    atomic_init(&reg->resizing, false);
    reg->ht = cds_lfht_new_flavor(INITIAL_BUCKETS, INITIAL_BUCKETS, 0, 0, &urcu_memb_flavor, NULL);
    return reg->ht ? QF_OK
                   : qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue registry");
}

/* After an insertion, outside any read-side critical section: grow the
 * table when chains get long. cds_lfht_resize() runs in this thread; it is
 * safe against concurrent lookups, insertions and removals. Never shrinks. */
static void maybe_grow(qf_queue_registry *reg)
{
    long n = atomic_fetch_add_explicit(&reg->count, 1, memory_order_relaxed) + 1;
    unsigned long b = atomic_load_explicit(&reg->buckets, memory_order_relaxed);
    if ((unsigned long)n <= 2 * b || atomic_exchange(&reg->resizing, true))
        return;
    b = atomic_load_explicit(&reg->buckets, memory_order_relaxed);
    if ((unsigned long)n > 2 * b) {
        cds_lfht_resize(reg->ht, 4 * b);
        atomic_store_explicit(&reg->buckets, 4 * b, memory_order_relaxed);
    }
    atomic_store(&reg->resizing, false);
}

qf_code qf_queue_registry_new(qf_queue_registry **ret_reg)
{
    if (!ret_reg)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_reg");
    qf_queue_registry *reg = calloc(1, sizeof(*reg));
    if (!reg)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a queue registry");
    qf_code rc = registry_init(reg);
    if (rc != QF_OK) {
        free(reg);
        return rc;
    }
    *ret_reg = reg;
    return QF_OK;
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static qf_queue_registry default_registry;
static qf_queue_registry *default_ptr;

static void default_make(void)
{
    if (registry_init(&default_registry) == QF_OK)
        default_ptr = &default_registry;
}

/* NULL only if the process ran out of memory the first time. */
qf_queue_registry *qf_queue_registry_default(void)
{
    pthread_once(&default_once, default_make);
    return default_ptr;
}

void qf_queue_registry_free(qf_queue_registry *reg)
{
    if (!reg || reg == &default_registry)
        return; /* the default registry lives as long as the process */
    rcu_thread_online();
    entry *gone = NULL;
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    urcu_memb_read_lock();
    cds_lfht_first(reg->ht, &it);
    while ((node = cds_lfht_iter_get_node(&it)) != NULL) {
        entry *e = caa_container_of(node, entry, node);
        cds_lfht_next(reg->ht, &it);
        if (cds_lfht_del(reg->ht, node) == 0) {
            e->next = gone;
            gone = e;
        }
    }
    QF_HB_RELEASE(&reg->gp_sync);
    urcu_memb_read_unlock();
    /* The caller promised quiescence; the grace period is cheap insurance
     * for a lookup that has only just left the table. */
    urcu_memb_synchronize_rcu();
    QF_HB_ACQUIRE(&reg->gp_sync);
    while (gone) {
        entry *e = gone;
        gone = e->next;
        qf_queue_unref(e->q);
        free(e);
    }
    cds_lfht_destroy(reg->ht, NULL);
    free(reg);
}

static qf_queue_registry *resolve(qf_queue_registry *reg)
{
    return reg ? reg : qf_queue_registry_default();
}

/* The queue under `name` with a new reference, or NULL. Lock-free. */
static qf_queue *lookup(qf_queue_registry *reg, const char *name)
{
    rcu_thread_online();
    struct cds_lfht_iter it;
    urcu_memb_read_lock();
    cds_lfht_lookup(reg->ht, hash_name(name), match_name, name, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    /* Safe to count up without a zero check: the registry's reference is
     * dropped only after a grace period that waits for us. */
    qf_queue *q = node ? qf_queue_ref(caa_container_of(node, entry, node)->q) : NULL;
    QF_HB_RELEASE(&reg->gp_sync); /* last access to the entry is above */
    urcu_memb_read_unlock();
    return q;
}

qf_queue *qf_queue_registry_lookup(qf_queue_registry *reg, const char *shared_name)
{
    if (!shared_name) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_registry_lookup: shared_name is NULL");
        return NULL;
    }
    reg = resolve(reg);
    if (!reg)
        return NULL;
    return lookup(reg, shared_name);
}

bool qf_queue_registry_remove(qf_queue_registry *reg, const char *shared_name)
{
    if (!shared_name) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_registry_remove: shared_name is NULL");
        return false;
    }
    reg = resolve(reg);
    if (!reg)
        return false;
    rcu_thread_online();
    struct cds_lfht_iter it;
    urcu_memb_read_lock();
    cds_lfht_lookup(reg->ht, hash_name(shared_name), match_name, shared_name, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    /* Of concurrent removers of one entry, exactly one unlinks it. */
    bool removed = node && cds_lfht_del(reg->ht, node) == 0;
    QF_HB_RELEASE(&reg->gp_sync);
    urcu_memb_read_unlock();
    if (!removed)
        return false;
    atomic_fetch_sub_explicit(&reg->count, 1, memory_order_relaxed);
    urcu_memb_synchronize_rcu();
    QF_HB_ACQUIRE(&reg->gp_sync); /* every reader that saw the entry is done */
    entry *e = caa_container_of(node, entry, node);
    qf_queue_unref(e->q);
    free(e);
    return true;
}

const char *qf_queue_shared_name(const qf_queue *q)
{
    if (!q) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_shared_name: queue (q) is NULL");
        return NULL;
    }
    return q->shared_name;
}

int64_t qf_queue_min_after_dequeue(const qf_queue *q)
{
    if (!q) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_queue_min_after_dequeue: queue (q) is NULL");
        return 0;
    }
    return q->min_after_dequeue;
}

/* ---------------------------------------------------- compatibility checks */

/* What a creation call asks for, normalised as the queue would store it. */
typedef struct request {
    qf_queue_kind kind;
    const char *kind_name;
    int64_t capacity; /* INT32_MAX for unbounded (spec 6) */
    size_t ncomp;
    const qf_dtype *dtypes;
    const qf_shape *shapes;
    const char *const *names; /* NULL: no names asked for */
    bool padded;              /* shapes need only be compatible (spec 96) */
    int64_t min_after_dequeue, seed, seed2;
    bool single_producer, single_consumer;
} request;

static request request_of_options(const qf_queue_options *o, qf_queue_kind kind,
                                  const char *kind_name, bool padded)
{
    bool shuffle = kind == QF_QUEUE_RANDOM_SHUFFLE;
    return (request){
        .kind = kind,
        .kind_name = kind_name,
        .capacity = o->capacity < 0 ? INT32_MAX : o->capacity,
        .ncomp = o->num_components,
        .dtypes = o->dtypes,
        .shapes = o->shapes,
        .names = o->names,
        .padded = padded,
        .min_after_dequeue = shuffle ? o->min_after_dequeue : 0,
        .seed = shuffle ? o->seed : 0,
        .seed2 = shuffle ? o->seed2 : 0,
        .single_producer = (o->flags & QF_QUEUE_SINGLE_PRODUCER) != 0,
        .single_consumer = (o->flags & QF_QUEUE_SINGLE_CONSUMER) != 0,
    };
}

static request request_of_queue(const qf_queue *q)
{
    return (request){
        .kind = q->kind,
        .kind_name = q->kind_name,
        .capacity = q->capacity,
        .ncomp = q->ncomp,
        .dtypes = q->dtypes,
        .shapes = q->shapes,
        .names = (const char *const *)q->names,
        .padded = q->padded,
        .min_after_dequeue = q->min_after_dequeue,
        .seed = q->seed,
        .seed2 = q->seed2,
        .single_producer = q->single_producer,
        .single_consumer = q->single_consumer,
    };
}

/* TensorFlow's DataTypeSliceString: "float, int32". Caller frees. */
static char *dtypes_text(const qf_dtype *dts, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? ", " : "", qf_dtype_name(dts[i]));
    fclose(f);
    return buf;
}

/* TensorFlow's PartialShapeListString: "[[1,2], [?,3]]"; "[]" without
 * shapes. Caller frees. */
static char *shapes_text(const qf_shape *shapes, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputc('[', f);
    for (size_t i = 0; shapes && i < n; i++) {
        char one[QF_MAX_RANK * 21 + 16];
        fprintf(f, "%s%s", i ? ", " : "", qf_shape_format(&shapes[i], one, sizeof(one)));
    }
    fputc(']', f);
    fclose(f);
    return buf;
}

/* "[a, b]", or "none" without names. Caller frees. */
static char *names_text(const char *const *names, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (!names)
        fputs("none", f);
    else {
        fputc('[', f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s%s", i ? ", " : "", names[i]);
        fputc(']', f);
    }
    fclose(f);
    return buf;
}

static bool dtypes_match(const qf_queue *q, const request *r)
{
    if (q->ncomp != r->ncomp)
        return false;
    for (size_t i = 0; i < q->ncomp; i++)
        if (q->dtypes[i] != r->dtypes[i])
            return false;
    return true;
}

static bool shapes_match(const qf_queue *q, const request *r)
{
    if (!q->shapes || !r->shapes)
        return !q->shapes && !r->shapes;
    for (size_t i = 0; i < q->ncomp; i++) {
        bool ok = r->padded ? qf_shape_compatible(&q->shapes[i], &r->shapes[i])
                            : qf_shape_equal(&q->shapes[i], &r->shapes[i]);
        if (!ok)
            return false;
    }
    return true;
}

/* A request that names its components must name them as the queue does:
 * the handle it gets is the queue itself, and its elements carry the
 * queue's names (TensorFlow keeps names in each Python wrapper, so there
 * two wrappers may differ; here they cannot). A request without names
 * attaches to either. */
static bool names_match(const qf_queue *q, const request *r)
{
    if (!r->names)
        return true;
    if (!q->names)
        return false;
    for (size_t i = 0; i < q->ncomp; i++)
        if (strcmp(q->names[i], r->names[i]) != 0)
            return false;
    return true;
}

/* The settings that are plain values: kind, capacity, min_after_dequeue,
 * seeds. */
static qf_code check_attach_settings(const qf_queue *q, const request *r)
{
    const char *nm = q->shared_name;
    if (q->kind != r->kind)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Shared queue '%s' has type '%s' that does not match the requested "
                            "type '%s'",
                            nm, q->kind_name, r->kind_name);
    if (q->capacity != r->capacity)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Shared queue '%s' has capacity %lld but requested capacity was %lld",
                            nm, (long long)q->capacity, (long long)r->capacity);
    if (q->min_after_dequeue != r->min_after_dequeue)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Shared queue '%s' has min_after_dequeue %lld but requested "
                            "min_after_dequeue was %lld.",
                            nm, (long long)q->min_after_dequeue, (long long)r->min_after_dequeue);
    /* Seeds (0, 0) ask for "any seeds" and attach to whatever is there. */
    if ((r->seed != 0 || r->seed2 != 0) && (r->seed != q->seed || r->seed2 != q->seed2))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Shared queue '%s' has random seeds (%lld, %lld) but requested seeds "
                            "are (%lld, %lld).",
                            nm, (long long)q->seed, (long long)q->seed2, (long long)r->seed,
                            (long long)r->seed2);
    return QF_OK;
}

/* The error for components that differ in `what` (types, shapes, names);
 * frees both texts (NULL: out of memory). */
static qf_code component_mismatch(const char *nm, const char *what, char *have, char *want)
{
    qf_code rc = qf_set_error(QF_INVALID_ARGUMENT,
                              "Shared queue '%s' has component %s %s but requested component %s "
                              "were %s",
                              nm, what, have ? have : "?", what, want ? want : "?");
    free(have);
    free(want);
    return rc;
}

/* TensorFlow's MatchesNodeDef checks, in its order and words. */
static qf_code check_attach(const qf_queue *q, const request *r)
{
    const char *nm = q->shared_name;
    qf_code rc = check_attach_settings(q, r);
    if (rc != QF_OK)
        return rc;
    if (!dtypes_match(q, r))
        return component_mismatch(nm, "types", dtypes_text(q->dtypes, q->ncomp),
                                  dtypes_text(r->dtypes, r->ncomp));
    if (!shapes_match(q, r))
        return component_mismatch(nm, "shapes", shapes_text(q->shapes, q->ncomp),
                                  shapes_text(r->shapes, r->ncomp));
    if (!names_match(q, r))
        return component_mismatch(
            nm, "names", names_text(q->names ? (const char *const *)q->names : NULL, q->ncomp),
            names_text(r->names, r->ncomp));
    /* qflow only: a single-producer (consumer) queue relies on its users'
     * promise; a handle that did not make it must not attach. The reverse
     * is harmless. Flags' other bits, ptr_dtor and spin_ns are the existing
     * queue's. */
    if ((q->single_producer && !r->single_producer) || (q->single_consumer && !r->single_consumer))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Shared queue '%s' was created single-%s but the request is for a "
                            "multi-%s queue",
                            nm, q->single_producer && !r->single_producer ? "producer" : "consumer",
                            q->single_producer && !r->single_producer ? "producer" : "consumer");
    return QF_OK;
}

qf_code qf__queue_find_shared(const qf_queue_options *o, qf_queue_kind kind, const char *kind_name,
                              bool padded, qf_queue **ret_q)
{
    qf_queue_registry *reg = resolve(o->registry);
    if (!reg)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating the default registry");
    qf_queue *q = lookup(reg, o->shared_name);
    if (q) {
        request r = request_of_options(o, kind, kind_name, padded);
        qf_code rc = check_attach(q, &r);
        if (rc != QF_OK) {
            qf_queue_unref(q);
            return rc;
        }
    }
    *ret_q = q;
    return QF_OK;
}

qf_code qf__queue_publish(qf_queue *q, qf_queue **ret_q)
{
    if (!q->shared_name || q->published) {
        if (!q->published)
            qf__queue_track(q); /* a kind's constructor is done with it */
        *ret_q = q;
        return QF_OK;
    }
    qf_queue_registry *reg = q->shared_reg;
    size_t len = strlen(q->shared_name) + 1;
    entry *e = malloc(sizeof(entry) + len);
    if (!e) {
        qf_queue_unref(q);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory registering shared queue");
    }
    cds_lfht_node_init(&e->node);
    memcpy(e->name, q->shared_name, len);
    q->published = true;
    e->q = qf_queue_ref(q); /* the registry's reference */
    e->next = NULL;

    rcu_thread_online();
    QF_HB_RELEASE(e); /* everything written to q and e; see match_name() */
    urcu_memb_read_lock();
    struct cds_lfht_node *got =
        cds_lfht_add_unique(reg->ht, hash_name(e->name), match_name, e->name, &e->node);
    qf_queue *winner = got == &e->node ? NULL : qf_queue_ref(caa_container_of(got, entry, node)->q);
    QF_HB_RELEASE(&reg->gp_sync);
    urcu_memb_read_unlock();
    if (!winner) {
        maybe_grow(reg);
        qf__queue_track(q);
        *ret_q = q;
        return QF_OK;
    }

    /* Another creator won the race. Our entry was never visible, so it can
     * go at once; our queue goes once the winner has been checked against
     * the same request. */
    free(e);
    qf_queue_unref(q); /* the registry reference taken above */
    request r = request_of_queue(q);
    qf_code rc = check_attach(winner, &r);
    qf_queue_unref(q);
    if (rc != QF_OK) {
        qf_queue_unref(winner);
        return rc;
    }
    *ret_q = winner;
    return QF_OK;
}
