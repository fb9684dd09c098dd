/* qf_blockcache-impl.h - internal: caches of small blocks for tensors and
 * elements, so a steady stream of small typed elements through a queue
 * makes no allocation (issue 18).
 *
 * Blocks come in QF__BLOCK_CLASSES classes of QF__BLOCK_GRAIN bytes each
 * (64, 128, ... 512). A freed block goes onto the freeing thread's list of
 * its class, an allocation takes from the allocating thread's list: no
 * lock and no atomic instruction. Lists that grow past QF__BLOCK_KEEP pass
 * chains of blocks to a lock-free shared level that lists which run dry
 * take them from, so blocks made on one thread and freed on another (a
 * producer's elements freed by a consumer) come back to the producer
 * without malloc(). See qf_blockcache.c. AddressSanitizer builds bypass the
 * caches, so use-after-free stays visible. */
#ifndef QF_BLOCKCACHE_IMPL_H
#define QF_BLOCKCACHE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define QF__BLOCK_GRAIN 64
#define QF__BLOCK_CLASSES 8
#define QF__BLOCK_KEEP 64

/* At least `bytes` bytes, uninitialised (max_align_t-aligned), or NULL when
 * out of memory. *ret_class is what qf__block_free() needs back: 0 for a
 * block from malloc() (too big to cache, or caching is off). Any thread;
 * wait-free but for malloc(). */
void *qf__block_alloc(size_t bytes, uint8_t *ret_class);

/* The class qf__block_alloc(bytes) reports (0: such blocks come from
 * malloc()), so that an owner of many blocks of one size keeps it once. */
uint8_t qf__block_class(size_t bytes);

/* Give back a block from qf__block_alloc() with its class (NULL: nothing).
 * Any thread, not only the one that allocated it. */
void qf__block_free(void *p, uint8_t cls);

#endif
