/* qf_crc32c.c - CRC-32C (Castagnoli), the checksum of TFRecord files.
 *
 * Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF:
 * crc32c("123456789") = 0xE3069283. Two implementations with one result:
 *
 *   - SSE4.2's crc32 instruction (x86-64, chosen at run time with cpuid via
 *     __builtin_cpu_supports, compiled with a target attribute so the rest
 *     of the library needs no -msse4.2): 8 bytes per instruction;
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
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "qf_reader-impl.h"

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

__attribute__((target("sse4.2"))) static uint32_t extend_sse42(uint32_t c, const unsigned char *p,
                                                               size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi(c, *p++);
        n--;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* x86 is little-endian: the byte order the CRC wants */
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

static bool use_hw;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
#ifdef HAVE_SSE42_PATH
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
    if (!use_hw)
        pthread_once(&table_once, build_table);
}

bool qf__crc32c_hw(void)
{
    pthread_once(&hw_once, detect);
    return use_hw;
}

uint32_t qf__crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&hw_once, detect);
#ifdef HAVE_SSE42_PATH
    if (use_hw)
        return ~extend_sse42(~crc, data, n);
#endif
    return ~extend_sliced(~crc, data, n);
}
