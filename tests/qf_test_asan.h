/* qf_test_asan.h - QFT_ASAN: 1 in AddressSanitizer builds, 0 otherwise.
 * The library's caches are off there (so that a use after free stays
 * visible), and tests of what a cache keeps skip those checks. */
#ifndef QF_TEST_ASAN_H
#define QF_TEST_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define QFT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QFT_ASAN 1
#endif
#endif
#ifndef QFT_ASAN
#define QFT_ASAN 0
#endif

#endif
