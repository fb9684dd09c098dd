/* qf_pagemem.c - large buffers on huge pages, kept for reuse (see
 * qf_pagemem-impl.h for why and for the contract).
 *
 * State, all under pm.lock: the chunk being carved and how much of it is
 * carved; one bin per (size, alignment) ever freed, each with a list of
 * warm buffers (backed) and one of cold ones (pages given back but the
 * first); the byte counts of both. A free buffer's first 8 bytes link it
 * into its list, so the first page of a cold buffer stays backed: 4 KiB
 * against a fault when the list is walked. A buffer is on a list or
 * handed out, never both: it is taken off under the lock before it is
 * returned, and a cold one's pages are given back before it is put on its
 * list, so no thread can be writing it while madvise(2) drops them.
 */
#include "qf_pagemem-impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "qf_asan-impl.h"
#include "qf_lock-impl.h"

#define PAGE ((size_t)4096)

#ifdef QF_ASAN
#define PAGEMEM_PLAIN 1
#endif

/* bytes rounded up to whole pages (0 for a size that cannot be). */
static size_t round_bytes(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (bytes > SIZE_MAX - PAGE)
        return 0;
    return (bytes + PAGE - 1) & ~(PAGE - 1);
}

/* align made usable (at least a pointer's); 0 when it is not a power of two
 * or exceeds a chunk. */
static size_t norm_align(size_t align)
{
    if (align < sizeof(void *))
        align = sizeof(void *);
    if ((align & (align - 1)) != 0 || align > QF__PAGEMEM_CHUNK)
        return 0;
    return align;
}

/* n bytes (whole pages) at align from aligned_alloc(), which wants a size
 * that is a multiple of the alignment. */
static void *plain_alloc(size_t n, size_t align)
{
    if (n > SIZE_MAX - align)
        return NULL;
    return aligned_alloc(align, (n + align - 1) & ~(align - 1));
}

#ifdef PAGEMEM_PLAIN

void *qf__pagemem_alloc(size_t bytes, size_t align)
{
    size_t n = round_bytes(bytes);
    align = norm_align(align);
    if (!n || !align)
        return NULL;
    return plain_alloc(n, align);
}

void qf__pagemem_free(void *p, size_t bytes, size_t align)
{
    (void)bytes;
    (void)align;
    free(p);
}

void qf__pagemem_get_stats(qf__pagemem_stats *ret)
{
    *ret = (qf__pagemem_stats){0};
}

#else

typedef struct free_buf {
    struct free_buf *next;
} free_buf;

typedef struct bin {
    struct bin *next;
    size_t bytes, align;
    free_buf *warm, *cold;
} bin;

static struct {
    _Atomic uint32_t lock;
    bin *bins;
    char *chunk; /* being carved; NULL before the first */
    size_t used; /* bytes of it carved */
    qf__pagemem_stats st;
} pm;

/* fork() while another thread holds the lock would leave the child's copy
 * held forever: the fork waits for it, as malloc()'s own locks do. */
static void fork_prepare(void)
{
    qf__lock(&pm.lock);
}

static void fork_after(void)
{
    qf__unlock(&pm.lock);
}

/* At load, before qf_member_mem.c's handlers (priority 102): prepare
 * handlers run in the reverse order of registration, so the member
 * memory's class locks are taken before this lock, the order its
 * allocations nest them in (a class lock held while a slab comes from
 * here). Registered at the first allocation instead, this one came
 * after the member memory's and took this lock first: a fork while
 * another thread held a class lock and waited for this one deadlocked. */
__attribute__((constructor(102))) static void register_fork_handlers(void)
{
    (void)pthread_atfork(fork_prepare, fork_after, fork_after);
}

/* A fresh mapping of `bytes`, aligned to a chunk and advised as huge
 * pages; NULL when the system refuses it. Over-map by a chunk, then unmap
 * the ends that the alignment leaves. */
static char *map_aligned(size_t bytes)
{
    size_t span = bytes + QF__PAGEMEM_CHUNK;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)raw + QF__PAGEMEM_CHUNK - 1) & ~(uintptr_t)(QF__PAGEMEM_CHUNK - 1);
    char *p = (char *)a;
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + span > p + bytes)
        munmap(p + bytes, (size_t)(raw + span - (p + bytes)));
    /* Advice only: a kernel without transparent huge pages says EINVAL,
     * and the memory is still good (4 KiB pages, as from malloc()). */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* The bin of (bytes, align), made when `make` (NULL if it cannot be). */
static bin *find_bin(size_t bytes, size_t align, bool make)
{
    for (bin *b = pm.bins; b; b = b->next)
        if (b->bytes == bytes && b->align == align)
            return b;
    if (!make)
        return NULL;
    bin *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->bytes = bytes;
    b->align = align;
    b->next = pm.bins;
    pm.bins = b;
    return b;
}

static void *pop(free_buf **list)
{
    free_buf *f = *list;
    if (f)
        *list = f->next;
    return f;
}

static void push(free_buf **list, void *p)
{
    free_buf *f = p;
    f->next = *list;
    *list = f;
}

/* The next n bytes of the chunk at `align`, a new chunk when they do not
 * fit (the old one's rest is left unused: at most a buffer's size). */
static void *carve(size_t n, size_t align)
{
    size_t off = (pm.used + align - 1) & ~(align - 1);
    if (!pm.chunk || off + n > QF__PAGEMEM_CHUNK) {
        char *c = map_aligned(QF__PAGEMEM_CHUNK);
        if (!c)
            return NULL;
        pm.chunk = c;
        pm.st.chunk_bytes += QF__PAGEMEM_CHUNK;
        off = 0;
    }
    pm.used = off + n;
    return pm.chunk + off;
}

/* The chunks assume 4 KiB pages (a cold buffer keeps its first page; an
 * own mapping's ends are unmapped at 4 KiB boundaries). On a kernel with
 * larger pages (arm64 or ppc64le with 64 KiB) buffers come from
 * aligned_alloc() and go back to free(), as in AddressSanitizer builds. */
static bool pages_of_4k(void)
{
    static _Atomic int known; /* 0: not yet, 1: 4 KiB, 2: other */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k == 0) {
        k = sysconf(_SC_PAGESIZE) == (long)PAGE ? 1 : 2;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k == 1;
}

void *qf__pagemem_alloc(size_t bytes, size_t align)
{
    size_t n = round_bytes(bytes);
    align = norm_align(align);
    if (!n || !align)
        return NULL;
    if (!pages_of_4k())
        return plain_alloc(n, align);
    bool own = n > QF__PAGEMEM_CHUNK / 2;
    if (own && n > SIZE_MAX - QF__PAGEMEM_CHUNK)
        return NULL;
    qf__lock(&pm.lock);
    void *p = NULL;
    bin *b = find_bin(n, align, false);
    if (b && (p = pop(&b->warm))) {
        pm.st.warm_bytes -= n;
    } else if (b && (p = pop(&b->cold))) {
        pm.st.cold_bytes -= n;
    } else if (!own) {
        p = carve(n, align);
    }
    qf__unlock(&pm.lock);
    if (!p && own)
        p = map_aligned(n);
    return p;
}

void qf__pagemem_free(void *p, size_t bytes, size_t align)
{
    if (!p)
        return;
    if (!pages_of_4k()) {
        free(p);
        return;
    }
    size_t n = round_bytes(bytes);
    align = norm_align(align);
    bool own = n > QF__PAGEMEM_CHUNK / 2;
    qf__lock(&pm.lock);
    bin *b = find_bin(n, align, true);
    if (b && pm.st.warm_bytes + n <= QF__PAGEMEM_WARM_MAX) {
        push(&b->warm, p);
        pm.st.warm_bytes += n;
        qf__unlock(&pm.lock);
        return;
    }
    qf__unlock(&pm.lock);
    if (own) {
        munmap(p, n);
        return;
    }
    /* Past the warm bound (or no bin: out of memory): the pages but the
     * first go back; the addresses stay this allocator's. */
    (void)madvise((char *)p + PAGE, n - PAGE, MADV_DONTNEED);
    if (!b)
        return;
    qf__lock(&pm.lock);
    push(&b->cold, p);
    pm.st.cold_bytes += n;
    qf__unlock(&pm.lock);
}

void qf__pagemem_get_stats(qf__pagemem_stats *ret)
{
    qf__lock(&pm.lock);
    *ret = pm.st;
    qf__unlock(&pm.lock);
}

#endif
