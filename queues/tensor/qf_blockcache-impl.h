/* qf_blockcache-impl.h - internal: caches of blocks for tensors and
 * elements, so a steady stream of small typed elements through a queue
 * makes no allocation (issue 18), and a steady stream of large batches
 * reuses memory whose pages are already there (issue 29).
 *
 * Small blocks come in QF__BLOCK_CLASSES classes of QF__BLOCK_GRAIN bytes
 * each (64, 128, ... 512). A freed block goes onto the freeing thread's
 * list of its class, an allocation takes from the allocating thread's
 * list: no lock and no atomic instruction. Lists that grow past
 * QF__BLOCK_KEEP pass chains of blocks to a lock-free shared level that
 * lists which run dry take them from, so blocks made on one thread and
 * freed on another (a producer's elements freed by a consumer) come back
 * to the producer without malloc().
 *
 * Large blocks, above 512 bytes and up to QF__LARGE_MAX, come in
 * QF__LARGE_CLASSES power-of-two classes (1 KiB ... 64 MiB). Each thread
 * keeps up to QF__LARGE_KEEP freed blocks per class, at most
 * QF__LARGE_RETAIN bytes in all, for its next allocations of that class;
 * the rest go back to free(). Why: a batch of 4096 lines (96 KiB of
 * strings' table) made and freed once a batch went through malloc() and
 * free(), and glibc gave the top of its heap back to the kernel after
 * each free and faulted it in again on the next malloc (7,096 page faults
 * in one run of qflow-lines --batch-size 4096 over 200 MB, twice the time
 * of --batch-size 1024). There is no shared level for them: the thread
 * that frees a batch is usually the one that made it (a consumer).
 * See qf_blockcache.c. AddressSanitizer builds bypass the caches, so
 * use-after-free stays visible. */
#ifndef QF_BLOCKCACHE_IMPL_H
#define QF_BLOCKCACHE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QF__BLOCK_GRAIN 64
#define QF__BLOCK_CLASSES 8
#define QF__BLOCK_KEEP 64
/* Large classes: 1 KiB << j for j < QF__LARGE_CLASSES, class numbers
 * QF__BLOCK_CLASSES + 1 + j. */
#define QF__LARGE_MIN_SHIFT 10
#define QF__LARGE_CLASSES 17
#define QF__LARGE_MAX ((size_t)1 << (QF__LARGE_MIN_SHIFT + QF__LARGE_CLASSES - 1))
#define QF__LARGE_KEEP 2
#define QF__LARGE_RETAIN ((size_t)64 << 20)

/* At least `bytes` bytes, uninitialised (max_align_t-aligned), or NULL when
 * out of memory. *ret_class is what qf__block_free() needs back: 0 for a
 * block from malloc() (above QF__LARGE_MAX, or caching is off). Any
 * thread; wait-free but for malloc(). */
void *qf__block_alloc(size_t bytes, uint8_t *ret_class);

/* The class qf__block_alloc(bytes) reports (0: such blocks come from
 * malloc()), so that an owner of many blocks of one size keeps it once. */
uint8_t qf__block_class(size_t bytes);

/* Give back a block from qf__block_alloc() with its class (NULL: nothing).
 * Any thread, not only the one that allocated it. */
void qf__block_free(void *p, uint8_t cls);

/* The stash: per thread, up to QF__STASH_KEEP small blocks kept with their
 * contents as their last owner left them, for an owner that would write
 * the same contents into its next block (a scalar tensor's header,
 * qf_tensor.c: a slab allocator's constructed objects). One kind of
 * object per program; blocks of any small class.
 *
 * qf__block_stash_push(): keep p (of small class cls) on this thread; false
 * when the stash is full or this thread's cache is not live (its first
 * free has not registered it, it is exiting, or caching is off), and the
 * caller then frees p as usual. qf__block_stash_pop(): the block pushed
 * last on this thread if it is of class cls, else NULL (a block of
 * another class stays). The stash goes back to the block lists at
 * thread exit. This thread only; wait-free, no atomic instruction. */
#define QF__STASH_KEEP 8
bool qf__block_stash_push(void *p, uint8_t cls);
void *qf__block_stash_pop(uint8_t cls);

#endif
