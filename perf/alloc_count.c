/* alloc_count.c - malloc interposition for queue.alloc (see alloc_count.h).
 *
 * Why __libc_malloc and not dlsym(RTLD_NEXT, "malloc"): dlsym itself may
 * allocate (dlerror buffers), which would recurse into the wrapper before
 * it knows where the real malloc is. glibc exports its allocator under
 * __libc_* names precisely so that a replacement can forward to it. */
#include "alloc_count.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

static _Thread_local uint64_t thread_allocs;

#ifdef BENCH_NO_ALLOC_COUNT

uint64_t bench_alloc_count(void)
{
    return thread_allocs;
}

bool bench_alloc_count_available(void)
{
    return false;
}

#else

#define EXPORT __attribute__((visibility("default")))

/* The interposers below replace libc's allocator under its own names; this
 * file leaves out <stdlib.h> and <malloc.h> so that their declarations (and
 * glibc's attributes on them) cannot disagree with the definitions. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

uint64_t bench_alloc_count(void)
{
    return thread_allocs;
}

bool bench_alloc_count_available(void)
{
    return true;
}

EXPORT void *malloc(size_t size)
{
    thread_allocs++;
    return __libc_malloc(size);
}

EXPORT void *calloc(size_t n, size_t size)
{
    thread_allocs++;
    return __libc_calloc(n, size);
}

/* realloc(NULL, n) allocates; realloc(p, n) may move: count both, since a
 * steady state should do neither. realloc(p, 0) frees: not counted. */
EXPORT void *realloc(void *p, size_t size)
{
    if (size != 0 || p == NULL)
        thread_allocs++;
    return __libc_realloc(p, size);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

EXPORT void *memalign(size_t align, size_t size)
{
    thread_allocs++;
    return __libc_memalign(align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
    thread_allocs++;
    return __libc_memalign(align, size);
}

EXPORT int posix_memalign(void **ret_p, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    thread_allocs++;
    void *p = __libc_memalign(align, size);
    if (!p && size)
        return ENOMEM;
    *ret_p = p;
    return 0;
}

EXPORT void *valloc(size_t size)
{
    thread_allocs++;
    return __libc_valloc(size);
}

EXPORT void *pvalloc(size_t size)
{
    thread_allocs++;
    return __libc_pvalloc(size);
}

#endif
