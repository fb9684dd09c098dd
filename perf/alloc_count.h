/* alloc_count.h - count heap allocations made by the calling thread.
 *
 * qflow-bench defines malloc, calloc, realloc, reallocarray, memalign,
 * aligned_alloc, posix_memalign, valloc and pvalloc itself; each forwards
 * to glibc's __libc_* entry point and adds one to a thread-local counter.
 * Because the definitions live in the executable and are exported, they
 * interpose on every caller in the process: qflow (linked statically),
 * glibc's own internal calls (strdup, vasprintf, ...) and the shared
 * libraries (ck, liburcu, GLib). free() is not counted and not replaced.
 *
 * The counter is per thread, so a benchmark measures a steady-state window
 * by reading it twice in the thread doing the work; nothing is shared, and
 * the cost per allocation is one TLS increment.
 *
 * Sanitizer builds (ASan, TSan) supply their own malloc: there the
 * interposition is compiled out (BENCH_NO_ALLOC_COUNT) and
 * bench_alloc_count_available() is false.
 */
#ifndef BENCH_ALLOC_COUNT_H
#define BENCH_ALLOC_COUNT_H

#include <stdbool.h>
#include <stdint.h>

/** Allocations made so far by the calling thread. Wait-free. */
uint64_t bench_alloc_count(void);

/** False when this build does not count (sanitizers). */
bool bench_alloc_count_available(void);

#endif
