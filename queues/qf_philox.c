/* qf_philox.c - the Philox4x32-10 block function (qf_philox-impl.h).
 *
 * Ten rounds; each multiplies two counter words by the Philox constants,
 * mixes the high halves with the other two words and the key, and the key
 * is bumped by the Weyl constants between rounds (the bump after the last
 * round is never used). Checked against Random123's known answers
 * (tests/queues/test_shuffle_queue.c); the producers' orders built on it
 * are pinned against a reference written from TensorFlow's kernel
 * (tests/pipeline/test_input.c).
 */
#include "qf_philox-impl.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void qf__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}
