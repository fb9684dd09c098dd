/* qf_rng-impl.h - internal: a small generator for the keys of producers
 * seeded at random (seed 0): their shuffles then draw from a Philox stream
 * of that key, as seeded ones do from TensorFlow's (qf_input.c).
 *
 * xoshiro256** (Blackman and Vigna), seeded through splitmix64 so that any
 * 64-bit seed, including small ones, gives a well-mixed state. Not
 * thread-safe: one generator per user.
 */
#ifndef QF_RNG_IMPL_H
#define QF_RNG_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

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

#endif
