/* qf_export.h - symbol visibility for the qflow public API.
 *
 * The library is built with -fvisibility=hidden; only declarations marked
 * QF_API are exported from libqflow.so. Names starting with qf__ are
 * internal and never exported, even when a header declares them.
 */
#ifndef QF_EXPORT_H
#define QF_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define QF_API __attribute__((visibility("default")))
#else
#define QF_API
#endif

#ifdef __cplusplus
#define QF_BEGIN_DECLS extern "C" {
#define QF_END_DECLS }
#else
#define QF_BEGIN_DECLS
#define QF_END_DECLS
#endif

/* Atomic members and parameters in public headers: C11 _Atomic in C,
 * std::atomic (same size and representation with GCC and Clang) in C++,
 * so every header also compiles as C++. */
#ifdef __cplusplus
#include <atomic>
#define QF_ATOMIC(T) std::atomic<T>
#else
#include <stdatomic.h>
#define QF_ATOMIC(T) _Atomic T
#endif

#endif
