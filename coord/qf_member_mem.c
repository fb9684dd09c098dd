/* qf_member_mem.c - the memory of member records: slabs that hand blocks
 * out in address order and keep the memory of ended members for the next
 * ones (qf_member_mem-impl.h).
 *
 * Why keep it. Every task with a Coordinator is one member allocation (the
 * record, the task and its name: about 570 bytes for a QueueRunner's
 * task), made when it is spawned and freed when its last reference goes.
 * Handed back to malloc, a batch of them (10,000 runners stopped) went
 * back to the system with the top of the heap, and the next batch faulted
 * every page in again: 1181 page faults for 10,000 runners, which made the
 * start call 270-330 ns a runner where warm memory takes 85-100 ns.
 *
 * Why in address order. A list of freed blocks hands them back in the
 * order they were freed, which after a busy run is no order at all: the
 * next batch's tasks then lay scattered over megabytes, and the workers,
 * which run a batch in order, missed the cache on every record where
 * fresh memory (consecutive, so prefetched) did not. Measured in
 * qflow-bench runners.fair.10000.first (reps 2-7, one process): the start
 * 3.3-3.7 -> 0.9-1.0 ms with a free list, but the drain after it 0.9-1.2
 * -> 5.2-5.8 ms. So a class's blocks live in slabs of SLAB_BYTES, each
 * with a bitmap of its free blocks, and an allocation takes the lowest
 * free block of the class's current slab: once a batch has ended and its
 * slabs are empty, the next batch is laid out as consecutively as fresh
 * memory, in memory that is already mapped.
 *
 * Rules. Each class has a lock (its critical sections are a few word
 * operations) over its current slab and its list of other slabs with free
 * blocks. A slab that becomes empty, other than the current one, leaves
 * the list: it is kept for any class while the empty slabs kept add up to
 * no more than QF__MEMBER_CACHE_BYTES, else freed. Blocks of more than
 * MAX_BYTES go to calloc() and free(). Slabs are huge-page memory
 * (qf_pagemem-impl.h): a first start of 10,000 runners faulted in about
 * 1,400 fresh 4 KiB pages, at about 19 us each on this project's VMs.
 * Memory kept stays with the
 * process; qf__member_mem_release() frees the empty slabs. The locks are
 * held across fork() (pthread_atfork), as malloc's are. AddressSanitizer
 * builds keep nothing, so a member used after it ended is still reported.
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qf_asan-impl.h"
#include "qf_lock-impl.h"
#include "qf_member_mem-impl.h"
#include "qf_pagemem-impl.h"

#ifdef QF_ASAN
#define MEMBER_MEM_OFF 1
#endif

#define CLASS_GRAIN 64
#define MAX_BYTES 2048
#define N_CLASSES (MAX_BYTES / CLASS_GRAIN)
#define SLAB_BYTES ((size_t)256 * 1024)
#define MAX_BLOCKS (SLAB_BYTES / CLASS_GRAIN)
#define MAP_WORDS (MAX_BLOCKS / 64)

typedef struct slab {
    struct slab *prev, *next; /* the class's list, or the empty list */
    uint32_t cls;             /* 0 while empty and unassigned */
    uint32_t n_blocks, n_free;
    uint32_t cursor;              /* no free bit below this word */
    bool listed;                  /* on its class's list */
    uint64_t free_map[MAP_WORDS]; /* bit i: block i is free */
} slab;

/* Blocks start on the first grain after the header. */
#define HEAD_BYTES ((sizeof(slab) + CLASS_GRAIN - 1) / CLASS_GRAIN * CLASS_GRAIN)

typedef struct mem_class {
    _Alignas(64) _Atomic uint32_t lock;
    slab *cur;  /* where allocations go first (under lock) */
    slab *list; /* other slabs with a free block (under lock) */
} mem_class;

static mem_class classes[N_CLASSES];
static _Atomic uint32_t empty_lock;
static slab *empty_slabs; /* under empty_lock */
static _Atomic size_t empty_bytes;

/* fork(): every lock is taken around it, in the order the code nests them
 * (a class's, then the empty list's), so the child never starts with one
 * held by a thread that does not exist there (measured without: 62 of 200
 * children of a process whose threads were allocating hung). The words are
 * taken and dropped without the debug builds' per-thread record of locks
 * held, which holds 16 and would stop checking this thread after 33. */
static void fork_prepare(void)
{
    for (size_t i = 0; i < N_CLASSES; i++)
        qf__lock_word(&classes[i].lock);
    qf__lock_word(&empty_lock);
}

static void fork_release(void)
{
    qf__unlock_word(&empty_lock);
    for (size_t i = N_CLASSES; i-- > 0;)
        qf__unlock_word(&classes[i].lock);
}

/* At load, not at the first allocation: no call after that pays for it, and
 * a release racing the first fork is covered too. Priority 103: after
 * qf_pagemem.c's (102), whose lock nests inside ours (see there). */
__attribute__((constructor(103))) static void fork_register(void)
{
    (void)pthread_atfork(fork_prepare, fork_release, fork_release);
}

static uint8_t class_of(size_t bytes)
{
#ifdef MEMBER_MEM_OFF
    (void)bytes;
    return 0;
#else
    if (bytes == 0 || bytes > MAX_BYTES)
        return 0;
    return (uint8_t)((bytes + CLASS_GRAIN - 1) / CLASS_GRAIN);
#endif
}

static size_t block_bytes(uint32_t cls)
{
    return (size_t)cls * CLASS_GRAIN;
}

static slab *slab_of(const void *p)
{
    return (slab *)((uintptr_t)p & ~(uintptr_t)(SLAB_BYTES - 1));
}

/* Make s a slab of class cls with every block free. */
static void slab_format(slab *s, uint32_t cls)
{
    s->cls = cls;
    s->n_blocks = (uint32_t)((SLAB_BYTES - HEAD_BYTES) / block_bytes(cls));
    s->n_free = s->n_blocks;
    s->cursor = 0;
    s->listed = false;
    s->prev = s->next = NULL;
    memset(s->free_map, 0, sizeof(s->free_map));
    uint32_t full = s->n_blocks / 64, rest = s->n_blocks % 64;
    memset(s->free_map, 0xff, full * sizeof(s->free_map[0]));
    if (rest)
        s->free_map[full] = ((uint64_t)1 << rest) - 1;
}

/* An empty slab: a kept one, else a fresh one (NULL when out of memory). */
static slab *slab_get(uint32_t cls)
{
    qf__lock(&empty_lock);
    slab *s = empty_slabs;
    if (s)
        empty_slabs = s->next;
    qf__unlock(&empty_lock);
    if (s)
        atomic_fetch_sub_explicit(&empty_bytes, SLAB_BYTES, memory_order_relaxed);
    else if (!(s = qf__pagemem_alloc(SLAB_BYTES, SLAB_BYTES)))
        return NULL;
    slab_format(s, cls);
    return s;
}

/* An empty slab off every list: kept while the cap allows, else freed. */
static void slab_put(slab *s)
{
    if (atomic_fetch_add_explicit(&empty_bytes, SLAB_BYTES, memory_order_relaxed) + SLAB_BYTES >
        QF__MEMBER_CACHE_BYTES) {
        atomic_fetch_sub_explicit(&empty_bytes, SLAB_BYTES, memory_order_relaxed);
        qf__pagemem_free(s, SLAB_BYTES, SLAB_BYTES);
        return;
    }
    s->cls = 0;
    qf__lock(&empty_lock);
    s->next = empty_slabs;
    empty_slabs = s;
    qf__unlock(&empty_lock);
}

static void list_add(mem_class *k, slab *s)
{
    s->prev = NULL;
    s->next = k->list;
    if (k->list)
        k->list->prev = s;
    k->list = s;
    s->listed = true;
}

static void list_remove(mem_class *k, slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        k->list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    s->listed = false;
}

/* The lowest free block of s (which has one). */
static void *take_lowest(slab *s)
{
    uint32_t w = s->cursor;
    while (!s->free_map[w])
        w++;
    uint32_t b = (uint32_t)__builtin_ctzll(s->free_map[w]);
    s->free_map[w] &= s->free_map[w] - 1;
    s->cursor = w;
    s->n_free--;
    return (char *)s + HEAD_BYTES + (size_t)(w * 64 + b) * block_bytes(s->cls);
}

void *qf__member_mem_alloc(size_t bytes, uint8_t *ret_class)
{
    uint8_t c = class_of(bytes);
    *ret_class = c;
    if (c == 0)
        return calloc(1, bytes);
    mem_class *k = &classes[c - 1];
    void *p = NULL;
    qf__lock(&k->lock);
    if (!k->cur || k->cur->n_free == 0) {
        /* A full current slab is on no list: its frees list it again. */
        slab *s = k->list;
        if (s)
            list_remove(k, s);
        else
            s = slab_get(c);
        k->cur = s;
    }
    if (k->cur)
        p = take_lowest(k->cur);
    qf__unlock(&k->lock);
    if (p)
        memset(p, 0, block_bytes(c));
    return p;
}

void qf__member_mem_free(void *p, uint8_t cls)
{
    if (!p)
        return;
    if (cls == 0 || cls > N_CLASSES) {
        free(p);
        return;
    }
    slab *s = slab_of(p);
    assert(s->cls == cls && "a member block freed with another class, or twice");
    mem_class *k = &classes[cls - 1];
    uint32_t i = (uint32_t)(((char *)p - ((char *)s + HEAD_BYTES)) / block_bytes(cls));
    slab *emptied = NULL;
    qf__lock(&k->lock);
    s->free_map[i / 64] |= (uint64_t)1 << (i % 64);
    if (i / 64 < s->cursor)
        s->cursor = i / 64;
    s->n_free++;
    if (s != k->cur) {
        if (s->n_free == s->n_blocks) {
            if (s->listed)
                list_remove(k, s);
            emptied = s;
        } else if (!s->listed) {
            list_add(k, s);
        }
    }
    qf__unlock(&k->lock);
    if (emptied)
        slab_put(emptied);
}

size_t qf__member_mem_idle_bytes(void)
{
    return atomic_load_explicit(&empty_bytes, memory_order_relaxed);
}

void qf__member_mem_release(void)
{
    qf__lock(&empty_lock);
    slab *s = empty_slabs;
    empty_slabs = NULL;
    qf__unlock(&empty_lock);
    while (s) {
        slab *next = s->next;
        atomic_fetch_sub_explicit(&empty_bytes, SLAB_BYTES, memory_order_relaxed);
        qf__pagemem_free(s, SLAB_BYTES, SLAB_BYTES);
        s = next;
    }
}
