/* qf_tsan-impl.h - internal: happens-before annotations for ThreadSanitizer.
 *
 * Concurrency Kit's atomics are inline assembly, which TSan does not see, so
 * a hand-off through ck_ring looks like a data race to it. The producer
 * announces a release on the slot's address before publishing it and the
 * consumer an acquire on the same address after taking it; that is exactly
 * the ordering ck_ring provides, stated in a way TSan understands. Compiled
 * to nothing outside TSan builds.
 */
#ifndef QF_TSAN_IMPL_H
#define QF_TSAN_IMPL_H

#if defined(__SANITIZE_THREAD__)
#define QF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QF_TSAN 1
#endif
#endif

#ifdef QF_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define QF_HB_RELEASE(addr) __tsan_release((void *)(addr))
#define QF_HB_ACQUIRE(addr) __tsan_acquire((void *)(addr))
#else
#define QF_HB_RELEASE(addr) ((void)0)
#define QF_HB_ACQUIRE(addr) ((void)0)
#endif

#endif
