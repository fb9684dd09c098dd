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

/* QF_DEPRECATED(msg): a call kept working for existing users whose
 * spelling has been replaced; `msg` names the replacement, and the compiler
 * shows it wherever the old call is used. Define QF_NO_DEPRECATION_WARNINGS
 * before including a qflow header to silence these warnings (qflow's own
 * build does: it implements the old calls and tests them). */
#if defined(QF_NO_DEPRECATION_WARNINGS)
#define QF_DEPRECATED(msg)
#elif defined(__GNUC__) || defined(__clang__)
#define QF_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define QF_DEPRECATED(msg)
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
