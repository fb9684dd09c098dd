/* qf_member_mem-impl.h - internal: the memory of the Coordinator's member
 * records and stop-action records, kept for the next ones when theirs end
 * (qf_member_mem.c). Never installed; used by coord/qf_coord_members.c,
 * coord/qf_coord_state-impl.h (qf__action_alloc()) and the tests.
 *
 * qf__member_mem_alloc(): `bytes` zeroed bytes (64-byte aligned up to
 * 2 KiB, malloc's alignment above), NULL when out of memory; *ret_class is
 * what qf__member_mem_free() needs back. Blocks of one size class come
 * from slabs, lowest free block first, so consecutive allocations lie
 * consecutively once earlier members have ended; the slabs of ended
 * members wait, up to QF__MEMBER_CACHE_BYTES for the whole process, for
 * the next members, so a batch of tasks started after another ended
 * faults no page in (see the .c file). qf__member_mem_idle_bytes(): the
 * bytes of the empty slabs kept now (a snapshot); qf__member_mem_release():
 * free those now (each class's current slab stays). The locks are held
 * across fork(), so a child can allocate.
 *
 * Thread safety: any thread. Progress: blocking (a call takes its size
 * class's lock for a few word operations; making or freeing a slab, or a
 * block over 2 KiB, calls the allocator).
 * AddressSanitizer builds keep nothing: every call goes to calloc()/free().
 */
#ifndef QF_MEMBER_MEM_IMPL_H
#define QF_MEMBER_MEM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define QF__MEMBER_CACHE_BYTES ((size_t)16 << 20)

void *qf__member_mem_alloc(size_t bytes, uint8_t *ret_class);
void qf__member_mem_free(void *p, uint8_t cls);
size_t qf__member_mem_idle_bytes(void);
void qf__member_mem_release(void);

#endif
