/* qf_futex-impl.h - internal: futex sleeps and wakes on one word,
 * selected by bits.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive). */
#ifndef QF_FUTEX_IMPL_H
#define QF_FUTEX_IMPL_H

#include <stdint.h>

#include "qf_futex.h"

/* Internal: selective sleep and wake on one word (FUTEX_WAIT_BITSET /
 * FUTEX_WAKE_BITSET). A sleeper tagged `bits` is woken only by a wake whose
 * bits intersect its own, so many threads can wait on one word for
 * different values of it and a wake reaches only the one it concerns. Same
 * returns as qf_futex_wait() / qf_futex_wake(); bits must not be 0. */
int qf__futex_wait_bits(QF_ATOMIC(uint32_t) * word, uint32_t expected, uint32_t bits,
                        qf_deadline deadline);
int qf__futex_wake_bits(QF_ATOMIC(uint32_t) * word, int n, uint32_t bits);

#endif
