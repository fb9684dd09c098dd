/* qf_reader_text.c - TextLineReader (spec 190-196).
 *
 * A line is what lies before a '\n'; one '\r' right before the '\n' (or at
 * the end of the file) is removed, a '\r' anywhere else stays (spec 191).
 * At the end of the file the bytes after the last '\n' form a last line
 * when, after removing that one '\r', anything is left (spec 192-193): so a
 * trailing "\n" adds no empty record, and a final lone "\r" gives none.
 * Keys are "<file>:<line number>", numbered from 1 and counting skipped
 * header lines (spec 195).
 *
 * The hot path is a search for '\n' over the read buffer and one memcpy of the line
 * into the caller's record. A line that crosses the end of the buffer stays
 * in it (the buffer is compacted and refilled, the search goes on); only a
 * line longer than the whole buffer has its head moved to the reader's
 * carry. Nothing is consumed before a line is whole, so a pipe that has no
 * more bytes yet (QF_PENDING) loses nothing and the next call resumes.
 *
 * Pipelines take a faster path (text_next_rows): the reader's buffer is a
 * run (queues/tensor/qf_strblock-impl.h), and each line lying whole in it becomes a
 * row pointing at it, its end overwritten with a NUL: no copy. Only a line
 * longer than the buffer, and a last line without '\n', go through
 * text_next.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NL_HAVE_WIDE 1 /* nl_gather_avx2() and _avx512(), chosen at run time */
#include <immintrin.h>
#endif

#include "qf_reader-impl.h"

/* The '\n's of buf[from..lim), in order, for text_next_rows(): their
 * offsets go to out[0..), up to max of them (out has room for max +
 * NL_SLACK). Returns how many were found.
 *
 * Why not a memchr per line: lines of a text file are short (tens of
 * bytes), so a call per line costs its set-up more than its search, and a
 * loop that stops at each '\n' mispredicts its exit once a line, since
 * line lengths are random. Here 64 bytes are compared at once (SSE2,
 * which every x86-64 has) into a bit mask, and the mask's bits are
 * written out a fixed 4 at a time whatever their number (the extra ones
 * are overwritten or ignored): the branches then depend on how many
 * '\n's a block of 64 bytes holds, which is nearly always 0 to 4. The
 * last < 64 bytes, and other machines, go through memchr. Reads stay
 * below lim. */
#define NL_SLACK 64

static inline unsigned nl_popcount(uint64_t m)
{
    /* Baseline x86-64 has no POPCNT instruction: the bit-slicing count,
     * no call and no branch. */
    m = m - ((m >> 1) & 0x5555555555555555u);
    m = (m & 0x3333333333333333u) + ((m >> 2) & 0x3333333333333333u);
    m = (m + (m >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return (unsigned)((m * 0x0101010101010101u) >> 56);
}

/* ctz with m == 0 defined (63): its result is then one of the ignored. */
static inline uint32_t nl_ctz(uint64_t m)
{
    return (uint32_t)__builtin_ctzll(m | (uint64_t)1 << 63);
}

/* The positions of the cnt set bits of m (one 64-byte block's '\n's),
 * plus base, to o[0..cnt). The first four are written whatever cnt is,
 * without a branch on it (lines of 16+ bytes have at most four per block;
 * the caller's array has room past max for them); shorter lines take the
 * second loop. Inlined into each loop, so that in nl_gather_avx2 the ctz
 * is BMI's TZCNT. */
static inline __attribute__((always_inline)) void nl_write_positions(uint32_t *o, uint32_t base,
                                                                     uint64_t m, unsigned cnt)
{
    for (unsigned k = 0; k < 4; k++) {
        o[k] = base + nl_ctz(m);
        m &= m - 1;
    }
    for (unsigned k = 4; k < cnt; k++) {
        o[k] = base + nl_ctz(m);
        m &= m - 1;
    }
}

/* The bytes the 64-byte loops leave (fewer than 64 at the end, or all of
 * them without SSE2), from `next`, with n '\n's already found. */
static size_t nl_gather_tail(const char *buf, size_t next, size_t lim, uint32_t *out, size_t n,
                             size_t max)
{
    while (n < max && next < lim) {
        const char *p = memchr(buf + next, '\n', lim - next);
        if (!p)
            break;
        out[n++] = (uint32_t)(p - buf);
        next = (size_t)(p - buf) + 1;
    }
    return n;
}

static size_t nl_gather(const char *buf, size_t from, size_t lim, uint32_t *out, size_t max)
{
    size_t n = 0, next = from;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n');
    while (n < max && lim - next >= 64) {
        const char *p = buf + next;
        uint64_t m0 = (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), nl));
        uint64_t m1 = (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)), nl));
        uint64_t m2 = (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 32)), nl));
        uint64_t m3 = (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 48)), nl));
        uint64_t m = m0 | m1 << 16 | m2 << 32 | m3 << 48;
        unsigned cnt = nl_popcount(m);
        nl_write_positions(out + n, (uint32_t)next, m, cnt);
        n += cnt;
        next += 64;
    }
    if (n >= max)
        return max; /* the ones past the max-th are searched again next time */
#endif
    return nl_gather_tail(buf, next, lim, out, n, max);
}

#ifdef NL_HAVE_WIDE
/* nl_gather() with AVX2 (two 32-byte compares per 64 bytes) and the POPCNT
 * and BMI instructions, for the x86-64 machines that have them (looked up
 * once, nl_pick()). Why it pays: the SSE2 loop's cost is mostly its
 * loop-carried chain, the next block's output position waiting for this
 * block's count, which baseline x86-64 computes in a dozen dependent
 * steps and POPCNT in one. Split alone, in memory, 200 MB of lines of 0 to
 * 120 bytes: 7.6-8.5 ns a line against 10.0-10.4. */
__attribute__((target("avx2,popcnt,bmi"))) static size_t
nl_gather_avx2(const char *buf, size_t from, size_t lim, uint32_t *out, size_t max)
{
    size_t n = 0, next = from;
    const __m256i nl = _mm256_set1_epi8('\n');
    while (n < max && lim - next >= 64) {
        const char *p = buf + next;
        uint64_t m0 = (uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)p), nl));
        uint64_t m1 = (uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)), nl));
        uint64_t m = m0 | m1 << 32;
        unsigned cnt = (unsigned)__builtin_popcountll(m);
        nl_write_positions(out + n, (uint32_t)next, m, cnt);
        n += cnt;
        next += 64;
    }
    if (n >= max)
        return max;
    return nl_gather_tail(buf, next, lim, out, n, max);
}

#define NL_AVX512 __attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt")))

/* The positions past the 16th of a 64-byte block with cnt > 16 '\n's (a
 * run of short or empty lines): bytes 16.. of pos, widened, plus base. */
NL_AVX512 static void nl_write_more(uint32_t *o, __m512i pos, __m512i base, unsigned cnt)
{
    _mm512_storeu_si512(
        o + 16, _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(pos, 1)), base));
    if (cnt > 32)
        _mm512_storeu_si512(
            o + 32,
            _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(pos, 2)), base));
    if (cnt > 48)
        _mm512_storeu_si512(
            o + 48,
            _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(pos, 3)), base));
}

/* nl_gather() with AVX-512 (BW and VBMI2), where the CPU has them. A
 * 64-byte block's compare gives its mask in one instruction, and the
 * positions are not taken from the mask a bit at a time: VPCOMPRESSB packs
 * the byte offsets of the '\n's (0..63) to the front of a register, and
 * the first 16, widened to 32 bits and added to the block's offset, are
 * stored whatever their number (the caller's NL_SLACK has room). Per block
 * that is a fixed handful of instructions where the AVX2 loop took four
 * TZCNT/BLSR/store steps. Split alone, in memory, the 200 MB file of
 * perf/lines-vs-cat.sh (lines of 0 to ~150 bytes), read 256 KiB at a time:
 * 1.8-2.2 ns a line against 3.1-3.6 for the AVX2 loop. Only the register
 * form of VPCOMPRESSB is used: its memory form is slow on AMD's Zen 4. */
NL_AVX512 static size_t nl_gather_avx512(const char *buf, size_t from, size_t lim, uint32_t *out,
                                         size_t max)
{
    size_t n = 0, next = from;
    const __m512i nl = _mm512_set1_epi8('\n');
    const __m512i bytes = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
        40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
        17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i step = _mm512_set1_epi32(64);
    __m512i base = _mm512_set1_epi32((int)(uint32_t)next);
    while (n < max && lim - next >= 64) {
        __mmask64 m = _mm512_cmpeq_epi8_mask(_mm512_loadu_si512((const void *)(buf + next)), nl);
        unsigned cnt = (unsigned)__builtin_popcountll((uint64_t)m);
        __m512i pos = _mm512_maskz_compress_epi8(m, bytes);
        _mm512_storeu_si512(
            out + n, _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(pos)), base));
        if (__builtin_expect(cnt > 16, 0))
            nl_write_more(out + n, pos, base, cnt);
        n += cnt;
        next += 64;
        base = _mm512_add_epi32(base, step);
    }
    if (n >= max)
        return max;
    return nl_gather_tail(buf, next, lim, out, n, max);
}
#endif

typedef size_t (*nl_gather_fn)(const char *buf, size_t from, size_t lim, uint32_t *out, size_t max);

/* The gather this machine runs: AVX-512 where the CPU has BW and VBMI2,
 * else AVX2 where it has that, unless the environment says
 * QF_TEXT_SPLIT=baseline (SSE2) or =avx2 (no wider than AVX2); the tests
 * run each form the machine has. */
static nl_gather_fn nl_pick(void)
{
#ifdef NL_HAVE_WIDE
    const char *force = getenv("QF_TEXT_SPLIT");
    if (force && strcmp(force, "baseline") == 0)
        return nl_gather;
    __builtin_cpu_init();
    if (!(force && strcmp(force, "avx2") == 0) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi2") &&
        __builtin_cpu_supports("popcnt"))
        return nl_gather_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") &&
        __builtin_cpu_supports("bmi"))
        return nl_gather_avx2;
#endif
    return nl_gather;
}

/* Picked at the first call; racing first calls pick the same function. */
static _Atomic(nl_gather_fn) nl_chosen;

static size_t nl_gather_best(const char *buf, size_t from, size_t lim, uint32_t *out, size_t max)
{
    nl_gather_fn f = atomic_load_explicit(&nl_chosen, memory_order_relaxed);
    if (!f) {
        f = nl_pick();
        atomic_store_explicit(&nl_chosen, f, memory_order_relaxed);
    }
    return f(buf, from, lim, out, max);
}

static qf_code text_start(qf_reader *r)
{
    qf_code rc = qf__rbuf_open(&r->rb, r->work);
    if (rc != QF_OK)
        return rc;
    r->index = 0;
    r->skip_left = (uint64_t)r->skip_header_lines;
    return QF_OK;
}

/* Drop the header lines still to skip (spec 195-196) without copying them:
 * a file that ends first simply has no records. Resumable: a QF_PENDING
 * leaves skip_left and the buffer where they were. */
static qf_code skip_headers(qf_reader *r)
{
    qf__rbuf *rb = &r->rb;
    while (r->skip_left > 0) {
        const char *p = rb->buf + rb->pos;
        const char *nl = memchr(p, '\n', rb->lim - rb->pos);
        if (nl) {
            rb->pos += (size_t)(nl - p) + 1;
            r->skip_left--;
            r->index++;
            continue;
        }
        rb->pos = rb->lim;
        if (rb->eof) {
            r->file_done = true;
            return QF_OK;
        }
        qf_code rc = qf__rbuf_fill(rb);
        if (rc != QF_OK)
            return rc;
    }
    return QF_OK;
}

/* Keep buf[pos..lim) (a part of a line that fills the whole buffer) in the
 * reader's carry, so the buffer can take the rest of the line. */
static qf_code carry_out(qf_reader *r)
{
    qf__rbuf *rb = &r->rb;
    size_t n = rb->lim - rb->pos;
    qf_code rc = qf__reserve(&r->carry, &r->carry_cap, r->carry_len + n);
    if (rc != QF_OK)
        return rc;
    memcpy(r->carry + r->carry_len, rb->buf + rb->pos, n);
    r->carry_len += n;
    rb->pos = rb->lim;
    return QF_OK;
}

static qf_code text_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    qf__rbuf *rb = &r->rb;
    qf_code rc;
    if (!r->file_done && r->skip_left > 0 && (rc = skip_headers(r)) != QF_OK)
        return rc;
    if (r->file_done) {
        *at_end = true;
        return QF_OK;
    }
    /* The line is carry (a head longer than the buffer, from earlier
     * fills or an earlier call that had to wait) + buf[pos..pos+seg).
     * Nothing in the buffer is consumed before the line is whole, so a
     * QF_PENDING from fill loses nothing. */
    size_t scan = 0; /* bytes after pos already searched */
    size_t seg;
    bool last = false;
    for (;;) {
        const char *p = rb->buf + rb->pos;
        size_t avail = rb->lim - rb->pos;
        const char *nl = memchr(p + scan, '\n', avail - scan);
        if (nl) {
            seg = (size_t)(nl - p);
            break;
        }
        if (rb->eof) {
            seg = avail;
            last = true;
            break;
        }
        scan = avail;
        if (rb->pos == 0 && rb->lim == rb->cap) {
            /* The buffer is one piece of a longer line. */
            if ((rc = carry_out(r)) != QF_OK)
                return rc;
            scan = 0;
        }
        if ((rc = qf__rbuf_fill(rb)) != QF_OK)
            return rc; /* fill keeps buf[pos..lim), so scan stays valid */
    }
    size_t len = r->carry_len + seg;
    rc = qf__record_reserve_value(rec, len);
    if (rc != QF_OK)
        return rc;
    if (r->carry_len)
        memcpy(rec->value, r->carry, r->carry_len);
    memcpy(rec->value + r->carry_len, rb->buf + rb->pos, seg);
    rb->pos += seg + (last ? 0 : 1);
    r->carry_len = 0;
    /* One '\r' before the '\n' or at the end goes (spec 191). */
    if (len && rec->value[len - 1] == '\r')
        len--;
    if (last && len == 0) {
        /* A trailing "\n" or a lone final "\r" makes no record (spec 192-193). */
        r->file_done = true;
        *at_end = true;
        return QF_OK;
    }
    rec->value[len] = '\0';
    rec->value_len = len;
    r->index++;
    rc = qf__record_set_key_num(r, rec, r->index);
    if (rc != QF_OK)
        return rc;
    *produced = true;
    return QF_OK;
}

static qf_code text_next_rows(qf_reader *r, void **out, size_t max, size_t *made, bool *at_end)
{
    qf__rbuf *rb = &r->rb;
    *made = 0;
    if (r->file_done) {
        *at_end = true;
        return QF_OK;
    }
    if (!rb->blk || r->skip_left > 0 || r->carry_len > 0)
        return QF_OK; /* next() does it: no run, headers, or a long line under way */
    qf_code rc = qf__reader_rows_ready(r);
    if (rc != QF_OK)
        return rc;
    if (max > QF__ROWS_MAX)
        max = QF__ROWS_MAX;
    size_t left = qf__strblock_rows_left(rb->blk);
    if (max > left)
        max = left;
    size_t n = 0, pos = rb->pos;
    for (;;) {
        /* Locals only in the loop: see qf__row_writer. */
        const char *buf = rb->buf;
        uint64_t index = r->index;
        qf__row_writer w = qf__row_writer_begin(rb->blk, !r->rows_bare);
        uint32_t nls[QF__ROWS_MAX + NL_SLACK];
        size_t found = nl_gather_best(buf, pos, rb->lim, nls, max - n);
        for (size_t k = 0; k < found; k++) {
            size_t at = nls[k], l = at - pos;
            /* One '\r' before the '\n' goes (spec 191); for an empty
             * line buf[at] is the '\n' itself: no branch either way. */
            size_t l_out = l - (buf[at - (l != 0)] == '\r');
            out[n++] = qf__row_writer_add(&w, pos, l_out, ++index);
            pos = at + 1;
        }
        qf__row_writer_end(&w);
        r->index = index;
        rb->pos = pos;
        /* Nothing whole in the buffer: read on, into this run while no row
         * of it is out, else into a fresh one that takes the partial line
         * along, and cut the line there. Only for the first record of a
         * call (the read may wait: see produce()), and not at the end of
         * the file or for a line longer than the buffer: next() takes
         * those. */
        if (n > 0 || !r->rows_may_wait || rb->eof || (rb->pos == 0 && rb->lim == rb->cap))
            break;
        if ((rc = qf__rbuf_fill(rb)) != QF_OK)
            return rc;
        if ((rc = qf__reader_rows_ready(r)) != QF_OK)
            return rc;
        pos = rb->pos;
        left = qf__strblock_rows_left(rb->blk);
        if (max > left)
            max = left;
    }
    *made = n;
    return QF_OK;
}

static void text_finish(qf_reader *r)
{
    qf__rbuf_close(&r->rb);
}

const qf__reader_ops qf__text_line_reader_ops = {
    .kind = QF_READER_TEXT_LINE,
    .kind_name = "TextLineReader",
    .reads_files = true,
    .start = text_start,
    .next = text_next,
    .finish = text_finish,
    .next_rows = text_next_rows,
};
