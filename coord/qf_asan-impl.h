/* qf_asan-impl.h - internal: QF_ASAN is defined in AddressSanitizer builds,
 * by GCC (__SANITIZE_ADDRESS__) or clang (__has_feature). The memory caches
 * step aside under it, so that a use after free still reports, and the
 * row writer keeps plain stores, which GCC's instrumentation sees. */
#ifndef QF_ASAN_IMPL_H
#define QF_ASAN_IMPL_H

#if defined(__SANITIZE_ADDRESS__)
#define QF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QF_ASAN 1
#endif
#endif

#endif
