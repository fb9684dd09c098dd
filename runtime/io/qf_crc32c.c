/* qf_crc32c.c - CRC-32C (Castagnoli), the checksum of TFRecord files.
 *
 * Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF:
 * crc32c("123456789") = 0xE3069283. Two implementations with one result:
 *
 *   - SSE4.2's crc32 instruction (x86-64, chosen at run time with cpuid via
 *     __builtin_cpu_supports, compiled with a target attribute so the rest
 *     of the library needs no -msse4.2): 8 bytes per instruction, in three
 *     chains at once over buffers of 192 bytes or more (extend_sse42());
 *   - slicing-by-8 (Intel's "slicing-by-N", Kounavis and Berry): eight
 *     256-entry tables, table[k][b] being the CRC of byte b followed by k
 *     zero bytes, so eight input bytes are folded with eight lookups and
 *     no dependency between them. Built once on first use.
 *
 * Both read input bytes little-endian by construction (the reflected CRC
 * consumes the lowest byte first), so the result does not depend on the
 * host's byte order.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "qf_reader-impl.h"
#include "qf_status-impl.h"
#include "qf_tfrecord.h"

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        table[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t b = 0; b < 256; b++)
            table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xff];
}

static inline uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* `c` is the running (inverted) register. */
static uint32_t extend_sliced(uint32_t c, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint32_t lo = load_le32(p) ^ c;
        uint32_t hi = load_le32(p + 4);
        c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
            table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
            table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return c;
}

uint32_t qf__crc32c_extend_portable(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&table_once, build_table);
    return ~extend_sliced(~crc, data, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_PATH 1

/* The instruction takes 3 cycles and can start one a cycle: one chain of
 * it runs at a third of what the core can do. So a buffer of three lanes
 * or more is cut into three lanes of LANE bytes, each run as its own chain
 * (the first from the running value, the others from 0), and the three
 * values joined. In the register the instruction updates (before the
 * final inversion), the value of A then B run from c is the value of B
 * run from 0 xor the value of |B| zero bytes run from the value of A: the
 * update is linear. Running zero bytes over a value is a linear map of
 * its 32 bits, so it is four table lookups, one per byte of the value:
 * shift_small and shift_large below, built once from the instruction
 * itself. Lanes of 64 bytes serve records of a few hundred bytes (a
 * 256-byte record 12 bytes into a buffer: 29.8 -> 17.2 ns a call when each
 * call waits for the last, 13.0 -> 8.0 ns when they overlap, on this
 * project's VM); lanes of 512 bytes, larger buffers, where the joins cost
 * less per byte. Loads are unaligned: x86 takes them at full speed, and
 * lining up on 8 bytes first cost a TFRecord's data, which starts 12 bytes
 * into its record, eight 3-cycle byte steps. */
#define LANE_SMALL 64
#define LANE_LARGE 512
_Static_assert(LANE_SMALL % 8 == 0 && LANE_LARGE % 8 == 0, "lanes of whole 8-byte steps");

typedef struct shift_table {
    uint32_t t[4][256];
} shift_table;
static shift_table shift_small, shift_large;

__attribute__((target("sse4.2"))) static uint32_t run_zeros(uint32_t c, size_t bytes)
{
    uint64_t c64 = c;
    for (size_t i = 0; i < bytes; i += 8)
        c64 = __builtin_ia32_crc32di(c64, 0);
    return (uint32_t)c64;
}

static void build_shift(shift_table *s, size_t lane)
{
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            s->t[k][b] = run_zeros(b << (8 * k), lane);
}

/* The value of `lane` zero bytes run over c. */
static inline uint32_t shift(const shift_table *s, uint32_t c)
{
    return s->t[0][c & 0xff] ^ s->t[1][(c >> 8) & 0xff] ^ s->t[2][(c >> 16) & 0xff] ^
           s->t[3][c >> 24];
}

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v); /* x86 is little-endian: the byte order the CRC wants */
    return v;
}

/* 3 * lane bytes at p run over c, in three chains. */
__attribute__((target("sse4.2"))) static inline uint32_t
three_lanes(uint32_t c, const unsigned char *p, size_t lane, const shift_table *t)
{
    uint64_t a = c, b = 0, d = 0;
    for (size_t o = 0; o < lane; o += 8) {
        a = __builtin_ia32_crc32di(a, load64(p + o));
        b = __builtin_ia32_crc32di(b, load64(p + lane + o));
        d = __builtin_ia32_crc32di(d, load64(p + 2 * lane + o));
    }
    return shift(t, shift(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
}

__attribute__((target("sse4.2"))) static uint32_t extend_sse42(uint32_t c, const unsigned char *p,
                                                               size_t n)
{
    for (; n >= 3 * LANE_LARGE; p += 3 * LANE_LARGE, n -= 3 * LANE_LARGE)
        c = three_lanes(c, p, LANE_LARGE, &shift_large);
    for (; n >= 3 * LANE_SMALL; p += 3 * LANE_SMALL, n -= 3 * LANE_SMALL)
        c = three_lanes(c, p, LANE_SMALL, &shift_small);
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8)
        c64 = __builtin_ia32_crc32di(c64, load64(p));
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

/* 0: not looked yet; 1: the table path; 2: the instruction's. Read on every
 * call (an acquire load, a plain load on x86, where pthread_once() was a
 * call: a TFRecord's 8-byte length checksum paid more for the call than
 * for its one instruction); stored once, by detect(), after the tables
 * its path reads are built (release). */
static _Atomic int path;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
    bool hw = false;
#ifdef HAVE_SSE42_PATH
    __builtin_cpu_init();
    hw = __builtin_cpu_supports("sse4.2");
    if (hw) {
        build_shift(&shift_small, LANE_SMALL);
        build_shift(&shift_large, LANE_LARGE);
    }
#endif
    if (!hw)
        pthread_once(&table_once, build_table);
    atomic_store_explicit(&path, hw ? 2 : 1, memory_order_release);
}

static int path_now(void)
{
    int p = atomic_load_explicit(&path, memory_order_acquire);
    if (p == 0) {
        pthread_once(&hw_once, detect);
        p = atomic_load_explicit(&path, memory_order_acquire);
    }
    return p;
}

bool qf__crc32c_hw(void)
{
    return path_now() == 2;
}

uint32_t qf__crc32c_extend(uint32_t crc, const void *data, size_t n)
{
#ifdef HAVE_SSE42_PATH
    if (path_now() == 2)
        return ~extend_sse42(~crc, data, n);
#else
    (void)path_now();
#endif
    return ~extend_sliced(~crc, data, n);
}

uint32_t qf_crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    if (!data && n > 0) {
        qf__set_error_static(QF_INVALID_ARGUMENT,
                             "qf_crc32c_extend: data is NULL with a length above 0");
        return crc;
    }
    return qf__crc32c_extend(crc, data, n);
}
