/* qf_blockcache.c - small-block caches (qf_blockcache-impl.h).
 *
 * Two levels, as in tcmalloc's thread caches and transfer batches.
 *
 * Per thread, per class: a singly linked list in static TLS, touched by its
 * thread only (no atomic instruction). A free pushes; once the list holds
 * QF__BLOCK_KEEP blocks, BATCH of them move to the shared level as one
 * chain. An allocation pops; from an empty list it first takes one chain
 * from the shared level, and only if that is empty calls malloc().
 *
 * Shared, per class: a Concurrency Kit stack of chains (ck_stack push and
 * pop_mpmc: lock-free, the pop ABA-safe through the stack's generation
 * counter and a double-width CAS). At most SHARED_MAX chains per class are
 * kept; beyond that a chain goes back to free(). So a one-way flow (blocks
 * made on a producer thread, freed on a consumer thread: elements passed
 * by pointer) costs one lock-free push and one pop per BATCH blocks, and
 * no malloc() in the steady state.
 *
 * A chain's first block carries the chain (next), its stack entry and its
 * length. ThreadSanitizer does not see ck_pr's inline assembly: a push is
 * a release and a pop an acquire on the chain's address, which orders the
 * freeing thread's writes to every block of the chain before the taking
 * thread's.
 *
 * Large blocks (qf_blockcache-impl.h) have one level: per thread and
 * class, a stack of up to QF__LARGE_KEEP blocks of the class's full size,
 * within the thread's QF__LARGE_RETAIN bytes. A block's class is its size
 * rounded up to a power of two, so any block of a class serves any
 * request of that class.
 *
 * Thread exit. The first free on a thread registers its lists with a
 * pthread key whose destructor hands them to the shared level (or to
 * free(); large blocks always to free()) and marks the thread's cache
 * dead, so that blocks freed later on that thread (by other keys'
 * destructors) go straight to free(). Key destructors run before a
 * thread's TLS is torn down. The main thread's lists are not flushed at
 * exit(): they stay reachable through its TLS. The stash (blocks kept
 * with their contents, qf__block_stash_push()) joins the class lists
 * first, so it is handed on with them; a dead cache stashes nothing. */
#include "qf_blockcache-impl.h"

#include <ck_stack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "qf_asan-impl.h"
#include "qf_lock-impl.h"
#include "qf_prefetch-impl.h"
#include "qf_tsan-impl.h"

#ifdef QF_ASAN
#define QF_BLOCKCACHE_OFF 1
#endif

#define BATCH 32
#define SHARED_MAX 64
/* Lines of the next block asked for in an allocation (see qf__block_alloc()). */
#define PREFETCH_LINES 4

enum { CACHE_FRESH, CACHE_LIVE, CACHE_DEAD };

typedef struct free_block {
    struct free_block *next; /* within the thread's list or the chain */
    ck_stack_entry_t entry;  /* a chain's first block: on the shared stack */
    uint32_t n;              /* a chain's first block: its length */
} free_block;

_Static_assert(sizeof(free_block) <= QF__BLOCK_GRAIN, "a free block fits the smallest class");

typedef struct block_list {
    free_block *head;
    uint32_t n;
} block_list;

typedef struct large_stack {
    void *blocks[QF__LARGE_KEEP];
    uint32_t n;
} large_stack;

typedef struct thread_cache {
    block_list lists[QF__BLOCK_CLASSES];
    int state;
    uint32_t stash_n;
    void *stash[QF__STASH_KEEP];
    uint8_t stash_cls[QF__STASH_KEEP];
    size_t large_bytes; /* in large[] */
    large_stack large[QF__LARGE_CLASSES];
} thread_cache;

typedef struct shared_class {
    _Alignas(16) ck_stack_t chains;
    _Atomic int n_chains;
#ifdef QF_TSAN
    _Atomic uint32_t lock; /* see chains_push() */
#endif
} shared_class;

/* initial-exec: no __tls_get_addr() call per access from the shared
 * library (measured: 4 % of a one-int64 enqueue/dequeue round trip). */
static _Thread_local thread_cache tls_cache __attribute__((tls_model("initial-exec")));
static shared_class shared[QF__BLOCK_CLASSES];
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

#define CHAIN_OF(e) ((free_block *)((char *)(e)-offsetof(free_block, entry)))

/* ThreadSanitizer builds serialise the shared stack with a lock: ck_stack
 * writes an entry's link with a plain store before its (invisible) CAS, and
 * no annotation can sit between the two. */
static void chains_push(shared_class *s, ck_stack_entry_t *e)
{
#ifdef QF_TSAN
    qf__lock(&s->lock);
    ck_stack_push_spnc(&s->chains, e);
    qf__unlock(&s->lock);
#else
    ck_stack_push_mpmc(&s->chains, e);
#endif
}

static ck_stack_entry_t *chains_pop(shared_class *s)
{
#ifdef QF_TSAN
    qf__lock(&s->lock);
    ck_stack_entry_t *e = ck_stack_pop_npsc(&s->chains);
    qf__unlock(&s->lock);
    return e;
#else
    return ck_stack_pop_mpmc(&s->chains);
#endif
}

static void free_chain(free_block *b)
{
    while (b) {
        free_block *next = b->next;
        free(b);
        b = next;
    }
}

/* Hand a chain of n blocks to the shared level, or to free(). */
static void give_chain(int k, free_block *first, uint32_t n)
{
    shared_class *s = &shared[k];
    if (atomic_fetch_add_explicit(&s->n_chains, 1, memory_order_relaxed) >= SHARED_MAX) {
        atomic_fetch_sub_explicit(&s->n_chains, 1, memory_order_relaxed);
        free_chain(first);
        return;
    }
    first->n = n;
    QF_HB_RELEASE(first);
    chains_push(s, &first->entry);
}

/* A chain from the shared level into an empty list; false when none. */
static bool take_chain(int k, block_list *l)
{
    shared_class *s = &shared[k];
    ck_stack_entry_t *e = chains_pop(s);
    if (!e)
        return false;
    atomic_fetch_sub_explicit(&s->n_chains, 1, memory_order_relaxed);
    free_block *first = CHAIN_OF(e);
    QF_HB_ACQUIRE(first);
    l->head = first;
    l->n = first->n;
    return true;
}

static void cache_flush(void *arg)
{
    thread_cache *c = arg;
    /* The stash's blocks join their class lists, which go on below. */
    while (c->stash_n > 0) {
        c->stash_n--;
        free_block *b = c->stash[c->stash_n];
        block_list *l = &c->lists[c->stash_cls[c->stash_n] - 1];
        b->next = l->head;
        l->head = b;
        l->n++;
    }
    for (int j = 0; j < QF__LARGE_CLASSES; j++) {
        large_stack *st = &c->large[j];
        while (st->n > 0)
            free(st->blocks[--st->n]);
    }
    c->large_bytes = 0;
    for (int k = 0; k < QF__BLOCK_CLASSES; k++) {
        block_list *l = &c->lists[k];
        while (l->head) {
            free_block *first = l->head, *last = first;
            uint32_t n = 1;
            while (n < BATCH && last->next) {
                last = last->next;
                n++;
            }
            l->head = last->next;
            last->next = NULL;
            give_chain(k, first, n);
        }
        l->n = 0;
    }
    c->state = CACHE_DEAD;
}

static void cache_key_init(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_flush) == 0;
}

static bool cache_register(thread_cache *c);

/* A new block of class k, on lines of its own. From malloc() (16-byte
 * alignment, a header between chunks) a block straddled lines and shared
 * its first and last with its neighbours, which are as likely as not in
 * another thread's hands: a consumer reading the values a producer wrote
 * into block n waited for the line the producer was writing block n + 1
 * into. Measured (qflow-bench --quick --reps 5, queue.tput.p1c1, four
 * interleaved rounds of one binary with and without): the (int64,
 * float32 [16]) queue 5.3-7.3 -> 9.4-9.5 M items/s, the two-int64 queue
 * 10.1-10.4 -> 10.3-10.6 M. At most 64 bytes more per block made, and
 * blocks are made once and then cycle through the caches. */
static void *new_block(size_t k)
{
    return aligned_alloc(QF__BLOCK_GRAIN, k * QF__BLOCK_GRAIN);
}

/* An allocation from an empty list of class k: a chain from the shared
 * level, else malloc(). The rest of a chain stays in this thread's list,
 * so the list must be flushed at the thread's exit: a thread that only
 * allocates (one that spawns tasks the workers end) never frees, and its
 * first free is where a cache registers otherwise. A dead or unregistered
 * cache takes no chain. Out of line, as spill_list(). */
__attribute__((noinline, cold)) static void *refill_alloc(block_list *l, size_t k)
{
    thread_cache *c = &tls_cache;
    if (c->state != CACHE_LIVE && (c->state == CACHE_DEAD || !cache_register(c)))
        return new_block(k);
    if (!take_chain((int)k - 1, l))
        return new_block(k);
    free_block *b = l->head;
    l->head = b->next;
    l->n--;
    return b;
}

uint8_t qf__block_class(size_t bytes)
{
#ifdef QF_BLOCKCACHE_OFF
    (void)bytes;
    return 0;
#else
    size_t k = bytes == 0 ? 1 : (bytes + QF__BLOCK_GRAIN - 1) / QF__BLOCK_GRAIN;
    if (k <= QF__BLOCK_CLASSES)
        return (uint8_t)k;
    if (bytes > QF__LARGE_MAX)
        return 0;
    unsigned j = 0;
    while (((size_t)1 << (QF__LARGE_MIN_SHIFT + j)) < bytes)
        j++;
    return (uint8_t)(QF__BLOCK_CLASSES + 1 + j);
#endif
}

/* The bytes of every block of large class k. */
static size_t large_size(size_t k)
{
    return (size_t)1 << (QF__LARGE_MIN_SHIFT + (k - QF__BLOCK_CLASSES - 1));
}

/* A block of large class k: this thread's last freed one of the class,
 * else a new one of the class's full size. Out of line: the small path
 * stays a pop with no frame. */
__attribute__((noinline)) static void *large_alloc(size_t k)
{
    thread_cache *c = &tls_cache;
    large_stack *st = &c->large[k - QF__BLOCK_CLASSES - 1];
    if (st->n == 0)
        return malloc(large_size(k));
    c->large_bytes -= large_size(k);
    return st->blocks[--st->n];
}

/* Keep a freed block of large class k for this thread's next allocation
 * of the class, or free() it when the class's stack or the thread's
 * retained bytes are full. */
__attribute__((noinline)) static void large_free(thread_cache *c, void *p, size_t k)
{
    large_stack *st = &c->large[k - QF__BLOCK_CLASSES - 1];
    size_t size = large_size(k);
    if (st->n >= QF__LARGE_KEEP || c->large_bytes + size > QF__LARGE_RETAIN) {
        free(p);
        return;
    }
    st->blocks[st->n++] = p;
    c->large_bytes += size;
}

void *qf__block_alloc(size_t bytes, uint8_t *ret_class)
{
#ifdef QF_BLOCKCACHE_OFF
    size_t k = 0;
#else
    /* A small block (every element and tensor header): its class without
     * qf__block_class()'s other cases. */
    size_t k = bytes - 1 < (size_t)QF__BLOCK_CLASSES * QF__BLOCK_GRAIN
                   ? (bytes + QF__BLOCK_GRAIN - 1) / QF__BLOCK_GRAIN
                   : qf__block_class(bytes);
#endif
    if (k == 0) {
        *ret_class = 0;
        return malloc(bytes);
    }
    if (k > QF__BLOCK_CLASSES) {
        *ret_class = (uint8_t)k;
        return large_alloc(k);
    }
    block_list *l = &tls_cache.lists[k - 1];
    free_block *b = l->head;
    *ret_class = (uint8_t)k;
    if (!b)
        return refill_alloc(l, k);
    l->head = b->next;
    l->n--;
    /* The next block was most likely freed on another core (a consumer's
     * free, handed back as a chain): ask for its lines now, owned, so that
     * neither the next allocation's read of its link nor the caller's
     * writes into it wait for them (qf_prefetch-impl.h; measured: the
     * (int64, float32 [16]) queue's p1c1 3.7-4.0 -> 5.3-6.9 M items/s,
     * with the ring's prefetch). Up to
     * PREFETCH_LINES: a bigger block is seldom written whole. */
    if (l->head)
        qf__prefetch_lines_for_write(l->head, k < PREFETCH_LINES ? k : PREFETCH_LINES);
    return b;
}

static void spill_list(block_list *l, uint8_t cls);

/* A thread's first free: its lists are handed on at its exit. False when
 * that cannot be arranged (the thread then caches nothing). */
__attribute__((noinline, cold)) static bool cache_register(thread_cache *c)
{
    pthread_once(&cache_key_once, cache_key_init);
    if (!cache_key_ok || pthread_setspecific(cache_key, c) != 0) {
        c->state = CACHE_DEAD;
        return false;
    }
    c->state = CACHE_LIVE;
    return true;
}

/* Push p onto this thread's list of small class cls. */
static inline void list_push(thread_cache *c, void *p, uint8_t cls)
{
    block_list *l = &c->lists[cls - 1];
    free_block *b = p;
    b->next = l->head;
    l->head = b;
    if (++l->n >= QF__BLOCK_KEEP)
        spill_list(l, cls);
}

/* qf__block_free() of anything but a small block on a thread whose cache
 * is registered: NULL, malloc()'s, large blocks, a thread's first free, a
 * dead cache. Out of line, so that the common free has no frame. */
__attribute__((noinline)) static void block_free_slow(void *p, uint8_t cls)
{
    thread_cache *c = &tls_cache;
    if (!p)
        return;
    if (cls == 0 || cls > QF__BLOCK_CLASSES + QF__LARGE_CLASSES || c->state == CACHE_DEAD) {
        free(p);
        return;
    }
    if (c->state == CACHE_FRESH && !cache_register(c)) {
        free(p);
        return;
    }
    if (cls > QF__BLOCK_CLASSES) {
        large_free(c, p, cls);
        return;
    }
    list_push(c, p, cls);
}

void qf__block_free(void *p, uint8_t cls)
{
    thread_cache *c = &tls_cache;
    if (p && (unsigned)cls - 1u < QF__BLOCK_CLASSES && c->state == CACHE_LIVE) {
        list_push(c, p, cls);
        return;
    }
    block_free_slow(p, cls);
}

bool qf__block_stash_push(void *p, uint8_t cls)
{
#ifdef QF_BLOCKCACHE_OFF
    (void)p;
    (void)cls;
    return false;
#else
    thread_cache *c = &tls_cache;
    if (c->stash_n >= QF__STASH_KEEP || c->state != CACHE_LIVE ||
        (unsigned)cls - 1u >= QF__BLOCK_CLASSES)
        return false;
    c->stash[c->stash_n] = p;
    c->stash_cls[c->stash_n] = cls;
    c->stash_n++;
    return true;
#endif
}

void *qf__block_stash_pop(uint8_t cls)
{
    thread_cache *c = &tls_cache;
    if (c->stash_n == 0 || c->stash_cls[c->stash_n - 1] != cls)
        return NULL;
    return c->stash[--c->stash_n];
}

/* A thread's list is full: the BATCH most recently freed go to the shared
 * level. Out of line, so that the common free stays a push with no frame. */
__attribute__((noinline, cold)) static void spill_list(block_list *l, uint8_t cls)
{
    free_block *b = l->head;
    free_block *last = b;
    for (int i = 1; i < BATCH; i++)
        last = last->next;
    l->head = last->next;
    l->n -= BATCH;
    last->next = NULL;
    give_chain(cls - 1, b, BATCH);
}
