/* qf_philox-impl.h - internal: the Philox4x32-10 stream as TensorFlow's
 * random ops draw from it, shared by the RandomShuffleQueue (spec 71-72)
 * and the input producers' shuffles (spec 149, 153, 158, 160).
 *
 * The generator is a 128-bit counter and a 64-bit key; each call of the
 * block function gives four 32-bit words and advances the counter by one.
 * TensorFlow seeds it from an op's (seed, seed2) pair: the key is seed, the
 * counter's upper 64 bits are seed2 and its lower 64 bits start at 0. An op
 * that needs k words reserves ceil(k / 4) blocks of the op's generator (it
 * takes a copy and the op's generator skips past them) and reads the copy
 * word by word. Doing the same here, with the same seeds, gives the same
 * words, and so the same orders, as TensorFlow for the same operations.
 *
 * Pure functions and plain structs: a caller keeps its generator under its
 * own lock or on one thread.
 */
#ifndef QF_PHILOX_IMPL_H
#define QF_PHILOX_IMPL_H

#include <stdbool.h>
#include <stdint.h>

/* The block function (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC 2011): encrypts the 128-bit counter ctr under the 64-bit
 * key into out. */
void qf__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

typedef struct qf__philox {
    uint32_t key[2];
    uint32_t ctr[4]; /* ctr[0] is the lowest word */
} qf__philox;

static inline void qf__philox_init(qf__philox *g, uint64_t seed, uint64_t seed2)
{
    g->key[0] = (uint32_t)seed;
    g->key[1] = (uint32_t)(seed >> 32);
    g->ctr[0] = 0;
    g->ctr[1] = 0;
    g->ctr[2] = (uint32_t)seed2;
    g->ctr[3] = (uint32_t)(seed2 >> 32);
}

/* Advance the counter by `blocks` (a 128-bit add of a 64-bit number). */
static inline void qf__philox_skip(qf__philox *g, uint64_t blocks)
{
    uint64_t lo = ((uint64_t)g->ctr[1] << 32 | g->ctr[0]) + blocks;
    bool carry = lo < blocks;
    g->ctr[0] = (uint32_t)lo;
    g->ctr[1] = (uint32_t)(lo >> 32);
    if (carry && ++g->ctr[2] == 0)
        ++g->ctr[3];
}

/* Words one at a time from a generator (a reserved copy): a block is made
 * when the previous one is used up. Start with used = 4. */
typedef struct qf__philox_words {
    qf__philox g;
    uint32_t block[4];
    unsigned used;
} qf__philox_words;

static inline uint32_t qf__philox_word(qf__philox_words *w)
{
    if (w->used == 4) {
        qf__philox4x32_10(w->g.ctr, w->g.key, w->block);
        qf__philox_skip(&w->g, 1);
        w->used = 0;
    }
    return w->block[w->used++];
}

/* Reserve `words` 32-bit words of g, as TensorFlow's ReserveSamples32: the
 * returned reader starts where g is, and g moves past ceil(words / 4)
 * blocks. */
static inline qf__philox_words qf__philox_reserve32(qf__philox *g, uint64_t words)
{
    qf__philox_words w = {.g = *g, .used = 4};
    qf__philox_skip(g, (words + 3) / 4);
    return w;
}

#endif
