/* qf_pagemem-impl.h - internal: large buffers on huge pages, kept for reuse.
 *
 * Why. On the virtual machines this project is measured on, the first
 * touch of a fresh 4 KiB page costs about 19 us: a fault the hypervisor
 * takes part in. Touching 8 MiB of fresh memory took 39 ms there, with
 * MAP_POPULATE 27 ms, and on 2 MiB transparent huge pages 0.7 ms. The
 * library's large buffers (a reader's string blocks, the ring of a queue
 * of thousands of elements) came from malloc(), which maps blocks that
 * large afresh and unmaps them when freed: a program that reads 16 MiB of
 * TFRecords once paid about 1,200 faults, most of its run
 * (pipeline.tfrecord, qflow-bench --quick), and a queue of capacity 16,384
 * cost 2-3 ms to start using.
 *
 * What. Buffers come from chunks of QF__PAGEMEM_CHUNK bytes, aligned to
 * that size and advised as huge pages (MADV_HUGEPAGE: the kernel's setting
 * "madvise", the default of most distributions, gives huge pages only to
 * memory so advised), carved one after the other. A freed buffer goes to a
 * free list of its size and alignment and is the next one handed out for
 * them: still mapped, still backed, no fault. Buffers larger than half a
 * chunk get a mapping of their own, chunk-aligned and advised alike.
 *
 * Retention. Free buffers keep their memory up to QF__PAGEMEM_WARM_MAX
 * bytes in all; past that a freed buffer's pages go back to the system
 * (MADV_DONTNEED; its own mapping is unmapped) and it stays on its list
 * "cold", faulting again when used. So what stays resident after a peak is
 * bounded, while a pipeline built again and again (per epoch, per request
 * stream, per benchmark repetition) finds its memory warm. Unlike
 * malloc(), nothing moves from warm to cold later: after a peak, the first
 * 32 MiB freed stay warm whatever their sizes, and later buffers of other
 * sizes go cold (or, over half a chunk, are mapped and unmapped each
 * time). Cold buffers keep their addresses and one page each. The price:
 * a process that uses it at all holds at least one chunk, which with huge
 * pages is 2 MiB resident once touched.
 *
 * Contract.
 *   - qf__pagemem_alloc(bytes, align): a buffer of at least `bytes`
 *     (rounded up to 4 KiB), aligned to `align` (a power of two; at most
 *     QF__PAGEMEM_CHUNK), its contents unspecified (not zeroed); NULL when
 *     the system refuses memory. bytes == 0 is treated as 1.
 *   - qf__pagemem_free(p, bytes, align): gives back a buffer of those same
 *     `bytes` and `align`; p NULL does nothing.
 *   - Any thread, any number at once: one lock, taken once per buffer of
 *     tens of KiB or more, never on a per-element path. Blocking only in
 *     the sense of that lock and of mmap(2)/madvise(2).
 *   - Pages of 4 KiB only: on a kernel with larger pages every buffer
 *     comes from aligned_alloc() and goes back to free().
 *   - fork(): the lock is taken around it (pthread_atfork), so a child
 *     made while another thread was inside finds it free.
 *   - AddressSanitizer builds take the buffers from aligned_alloc() and
 *     free(), so that an overflow or a use after free still reports.
 *   - Callers use it for buffers of QF__PAGEMEM_MIN bytes or more; below
 *     that malloc() keeps them warm itself.
 */
#ifndef QF_PAGEMEM_IMPL_H
#define QF_PAGEMEM_IMPL_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A chunk: one huge page of x86-64 (and of arm64 with 4 KiB pages). */
#define QF__PAGEMEM_CHUNK ((size_t)2 << 20)
/* Free buffers past this many bytes in all give their pages back. */
#define QF__PAGEMEM_WARM_MAX ((size_t)32 << 20)
/* Smaller buffers are malloc()'s (see above). */
#define QF__PAGEMEM_MIN ((size_t)64 << 10)

void *qf__pagemem_alloc(size_t bytes, size_t align);
void qf__pagemem_free(void *p, size_t bytes, size_t align);

/* An array a call needs only while it runs (a start's plan of 10,000
 * runners: a few arrays of 80-160 KiB), zeroed: from the buffers above when
 * it is QF__PAGEMEM_MIN bytes or more, so the same call made again finds
 * it backed (while the warm bound above allows); from calloc() below that.
 * NULL when n * size overflows or memory is refused. Why: glibc gives
 * blocks that large back to the system when they are freed (or trims the
 * heap under them), and the next start faulted them in again, dozens to
 * hundreds of faults of about 19 us each on the project's VMs (README,
 * Measured, "Which thread decides"). qf__scratch_free() takes the same n
 * and size. */
static inline void *qf__scratch_alloc(size_t n, size_t size)
{
    if (size && n > (size_t)-1 / size)
        return NULL;
    size_t bytes = n * size;
    if (bytes < QF__PAGEMEM_MIN)
        return calloc(n ? n : 1, size ? size : 1);
    void *p = qf__pagemem_alloc(bytes, 64);
    if (p)
        memset(p, 0, bytes);
    return p;
}

static inline void qf__scratch_free(void *p, size_t n, size_t size)
{
    size_t bytes = n * size;
    if (bytes < QF__PAGEMEM_MIN)
        free(p);
    else
        qf__pagemem_free(p, bytes, 64);
}

/* For tests: bytes of free buffers still backed (warm), of free buffers
 * whose pages went back (cold), and of chunks mapped so far. */
typedef struct qf__pagemem_stats {
    size_t warm_bytes;
    size_t cold_bytes;
    size_t chunk_bytes;
} qf__pagemem_stats;
void qf__pagemem_get_stats(qf__pagemem_stats *ret);

#endif
