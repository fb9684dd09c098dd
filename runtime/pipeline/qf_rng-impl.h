/* qf_rng-impl.h - internal: a small seeded generator for producer shuffles.
 *
 * xoshiro256** (Blackman and Vigna), seeded through splitmix64 so that any
 * 64-bit seed, including small ones, gives a well-mixed state. Bounded draws
 * use Lemire's multiply-and-reject method, so permutations are unbiased.
 * Not thread-safe: one generator per user (a producer's op runs on one task).
 */
#ifndef QF_RNG_IMPL_H
#define QF_RNG_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* -pedantic: __int128 is a GNU extension; __extension__ says we know. */
__extension__ typedef unsigned __int128 qf__u128;

typedef struct qf__rng {
    uint64_t s[4];
} qf__rng;

static inline uint64_t qf__splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* seed 0: a different stream per call (clock, an address, a counter). */
static inline void qf__rng_seed(qf__rng *r, int64_t seed)
{
    uint64_t x = (uint64_t)seed;
    if (seed == 0) {
        static _Atomic uint64_t counter;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
            ((uint64_t)(uintptr_t)r << 16) ^ (counter++ * 0x2545f4914f6cdd1dull);
    }
    for (int i = 0; i < 4; i++)
        r->s[i] = qf__splitmix64(&x);
}

static inline uint64_t qf__rotl64(uint64_t v, int k)
{
    return (v << k) | (v >> (64 - k));
}

static inline uint64_t qf__rng_next(qf__rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = qf__rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = qf__rotl64(s[3], 45);
    return out;
}

/* Uniform in [0, n), n >= 1. */
static inline uint64_t qf__rng_below(qf__rng *r, uint64_t n)
{
    qf__u128 m = (qf__u128)qf__rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t floor = (0 - n) % n;
        while (lo < floor) {
            m = (qf__u128)qf__rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Fisher-Yates over perm[0..n): every permutation equally likely. */
static inline void qf__rng_shuffle(qf__rng *r, size_t *perm, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)qf__rng_below(r, i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

#endif
