/* qf_strblock.c - blocks of (key, value) rows (see qf_strblock-impl.h).
 *
 * Layout, one allocation aligned to QF__STRBLOCK_ALIGN:
 *   [header][row table: rows_cap rows][buffer: cap bytes + 1]
 * and the key prefix in an allocation of its own (it changes with the source).
 *
 * Counting. `live` starts at 1 + rows_cap: the filler's hold plus one
 * credit for every row the table can still take. Adding a row spends a
 * credit without touching the counter (the filler is alone in writing
 * rows), a consumer consuming k rows subtracts k, and the filler letting go
 * subtracts its hold and the credits never spent. So the count reaches 0
 * exactly when the filler has let go and every row handed out is consumed,
 * with no atomic per row on the filler's side. Rows out and not consumed:
 * n - ((1 + rows_cap) - live).
 */
#include "qf_strblock-impl.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "qf_asan-impl.h"
#include "qf_lock-impl.h"
#include "qf_pagemem-impl.h"
#include "qf_tensor-impl.h"
#include "qf_tsan-impl.h"

typedef qf__block_row block_row;

/* Blocks retired by consumers go back to their filler's pool instead of to
 * malloc: a block is a few hundred KiB, which malloc maps and unmaps each
 * time, and the page faults of a fresh one cost more than the copying it
 * saves. The pool is a stack pushed by any thread and emptied whole by the
 * owner (an exchange, so no ABA), kept alive by a count of its blocks. */
struct qf__strblock_pool {
    _Atomic(qf__strblock *) returned; /* pushed by any thread */
    _Atomic uint32_t refs;            /* the owner's, and one per block not freed */
    atomic_bool closed;               /* the owner is gone: free, don't keep */
    qf__strblock *spare;              /* owner only: blocks ready for reuse */
    uint32_t nspare;
    size_t cap; /* buffer size of its blocks */
};

/* Blocks a filler keeps beyond the one it is filling: enough for the blocks
 * whose last rows are still in a queue to come back while it reads.
 * Measured when qflow-lines' batch queue held 16 batches of 1024 lines
 * (about four blocks of 256 KiB of text; it holds 8 batches now): with 2
 * kept, the rest went back to malloc, which unmapped blocks that large, and
 * every fresh one cost ~100 page faults (issue 29: 6-11k faults reading
 * 200 MiB, 1k with 8). */
#define POOL_SPARE 8

_Static_assert(QF__ROWS_MAX < QF__STRBLOCK_ALIGN / 2, "a call's rows fit in one block");

/* A block of data_cap buffer bytes: the rows its table holds and its
 * whole allocation (header, row table, buffer and its NUL, rounded to
 * the alignment). One row per 32 bytes of buffer covers lines of 31 bytes
 * and more; a file of shorter lines fills the table first and moves on to
 * a fresh block sooner (qf__strblock_rows_left()). */
static size_t block_rows(size_t data_cap)
{
    size_t rows = data_cap / 32;
    if (rows < QF__ROWS_MAX)
        rows = QF__ROWS_MAX;
    if (rows > QF__STRBLOCK_ALIGN / 2 - 1)
        rows = QF__STRBLOCK_ALIGN / 2 - 1;
    return rows;
}

static size_t block_head(size_t data_cap)
{
    return sizeof(qf__strblock) + block_rows(data_cap) * sizeof(block_row);
}

static size_t block_bytes(size_t data_cap)
{
    size_t total = block_head(data_cap) + data_cap + 1;
    return (total + QF__STRBLOCK_ALIGN - 1) / QF__STRBLOCK_ALIGN * QF__STRBLOCK_ALIGN;
}

/* A block's memory: on huge pages and kept warm for reuse
 * (qf_pagemem-impl.h): a reader's first blocks are otherwise fresh pages,
 * a fault each, and a program that reads its files once pays them all. */
static void block_destroy(qf__strblock *r)
{
    free(r->prefix);
    qf__pagemem_free(r, block_bytes(r->cap), QF__STRBLOCK_ALIGN);
}

/* Blocks whose pools are gone, kept for the pools that come next. A
 * pipeline built per epoch, per request stream or per benchmark repetition
 * gets new readers and pools; without this each of them read its files
 * into fresh memory, since malloc gives blocks this large back to the
 * system: pipeline.tfrecord (qflow-bench --quick) spent 15-18% of its
 * samples in page faults, zeroing and unmapping. At most IDLE_MAX_BYTES of
 * whole blocks and IDLE_MAX_BLOCKS blocks wait here, for the life of the
 * process; a block that does not fit pushes out the oldest, so sizes no
 * longer read leave first. A lock: a block changes hands once per buffer
 * read (hundreds of KiB by default), and the list is short. In
 * AddressSanitizer builds an idle block's rows and buffer are poisoned
 * until a pool takes it again, so a use after free still reports. */
#define IDLE_MAX_BYTES ((size_t)32 << 20)
#define IDLE_MAX_BLOCKS 256

#ifdef QF_ASAN
#define IDLE_ASAN 1
#endif
#ifdef IDLE_ASAN
#include <sanitizer/asan_interface.h>
/* Everything after the header: the row table and the buffer. */
#define IDLE_TAIL(r) (block_bytes((r)->cap) - offsetof(qf__strblock, rows))
#define IDLE_POISON(r) ASAN_POISON_MEMORY_REGION((r)->rows, IDLE_TAIL(r))
#define IDLE_UNPOISON(r) ASAN_UNPOISON_MEMORY_REGION((r)->rows, IDLE_TAIL(r))
#else
#define IDLE_POISON(r) ((void)(r))
#define IDLE_UNPOISON(r) ((void)(r))
#endif

static struct {
    _Atomic uint32_t lock;
    qf__strblock *head; /* newest first, linked through next */
    size_t bytes;       /* their whole allocations */
    size_t n;
} idle;

/* Take *at out of the set (under the lock). */
static qf__strblock *idle_unlink(qf__strblock **at)
{
    qf__strblock *r = *at;
    *at = r->next;
    idle.bytes -= block_bytes(r->cap);
    idle.n--;
    return r;
}

/* Free a chain of blocks taken out of the set (after the lock). */
static void idle_destroy_chain(qf__strblock *r)
{
    while (r) {
        qf__strblock *next = r->next;
        IDLE_UNPOISON(r);
        block_destroy(r);
        r = next;
    }
}

/* Keep r for a later pool (it is the set's now), pushing out the oldest
 * blocks while the set is over its bounds (r too, if it alone is). */
static void idle_put(qf__strblock *r)
{
    r->pool = NULL;
    IDLE_POISON(r);
    qf__strblock *out = NULL; /* pushed out, freed after the lock */
    qf__lock(&idle.lock);
    r->next = idle.head;
    idle.head = r;
    idle.bytes += block_bytes(r->cap);
    idle.n++;
    while (idle.bytes > IDLE_MAX_BYTES || idle.n > IDLE_MAX_BLOCKS) {
        qf__strblock **at = &idle.head;
        while ((*at)->next)
            at = &(*at)->next;
        qf__strblock *old = idle_unlink(at);
        old->next = out;
        out = old;
    }
    qf__unlock(&idle.lock);
    idle_destroy_chain(out);
}

/* A kept block of buffer size data_cap (the newest), or NULL. */
static qf__strblock *idle_get(size_t data_cap)
{
    qf__strblock *r = NULL;
    qf__lock(&idle.lock);
    for (qf__strblock **at = &idle.head; *at; at = &(*at)->next) {
        if ((*at)->cap == data_cap) {
            r = idle_unlink(at);
            break;
        }
    }
    qf__unlock(&idle.lock);
    if (r)
        IDLE_UNPOISON(r);
    return r;
}

size_t qf__strblock_idle_bytes(size_t *ret_blocks)
{
    qf__lock(&idle.lock);
    size_t bytes = idle.bytes, n = idle.n;
    qf__unlock(&idle.lock);
    if (ret_blocks)
        *ret_blocks = n;
    return bytes;
}

size_t qf__strblock_bytes(size_t data_cap)
{
    return block_bytes(data_cap);
}

void qf__strblock_idle_release(void)
{
    qf__lock(&idle.lock);
    qf__strblock *r = idle.head;
    idle.head = NULL;
    idle.bytes = 0;
    idle.n = 0;
    qf__unlock(&idle.lock);
    idle_destroy_chain(r);
}

static qf__strblock *block_alloc(size_t data_cap)
{
    if (data_cap == 0 || data_cap > UINT32_MAX / 2) {
        qf_set_error(QF_INVALID_ARGUMENT, "a block holds 1 byte to 2 GiB");
        return NULL;
    }
    qf__strblock *r = idle_get(data_cap);
    if (r) {
        /* As made below: the layout depends on data_cap only. Its prefix
         * allocation stays; the prefix itself is another source's. */
        atomic_store_explicit(&r->live, 1 + r->rows_cap, memory_order_relaxed);
        r->n = 0;
        r->prefix_len = 0;
        r->next = NULL;
        return r;
    }
    size_t rows = block_rows(data_cap);
    r = qf__pagemem_alloc(block_bytes(data_cap), QF__STRBLOCK_ALIGN);
    if (!r) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a read buffer of %zu bytes",
                     data_cap);
        return NULL;
    }
    atomic_init(&r->live, (uint32_t)(1 + rows));
    r->rows_cap = (uint32_t)rows;
    r->n = 0;
    r->prefix_len = 0;
    r->prefix_cap = 0;
    r->prefix = NULL;
    r->buf = (char *)r + block_head(data_cap);
    r->cap = data_cap;
    r->pool = NULL;
    atomic_init(&r->bare_ends, false);
    r->next = NULL;
    return r;
}

/* A block nobody holds any more: kept for a later pool (see above). */
static void block_free(qf__strblock *r)
{
    idle_put(r);
}

static void pool_unref(qf__strblock_pool *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        free(p);
}

/* Free every block pushed so far (the owner is gone). Any thread. */
static void pool_drain(qf__strblock_pool *p)
{
    qf__strblock *r = atomic_exchange_explicit(&p->returned, NULL, memory_order_acq_rel);
    while (r) {
        qf__strblock *next = r->next;
        block_free(r);
        pool_unref(p);
        r = next;
    }
}

/* The last row of r is consumed and its filler let go. */
static void block_retire(qf__strblock *r)
{
    qf__strblock_pool *p = r->pool;
    if (!p) {
        block_free(r);
        return;
    }
    /* Hold the pool: once r is pushed, the owner may free r and its count. */
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    qf__strblock *head = atomic_load_explicit(&p->returned, memory_order_relaxed);
    do
        r->next = head;
    while (!atomic_compare_exchange_weak_explicit(&p->returned, &head, r, memory_order_seq_cst,
                                                  memory_order_relaxed));
    /* Pairs with qf__strblock_pool_close(): it sets `closed`, then empties the
     * stack; either it sees r, or we see `closed` (both sequentially
     * consistent), or both, and the exchange frees each block once. */
    if (atomic_load_explicit(&p->closed, memory_order_seq_cst))
        pool_drain(p);
    pool_unref(p);
}

qf__strblock_pool *qf__strblock_pool_new(size_t data_cap)
{
    qf__strblock_pool *p = calloc(1, sizeof(*p));
    if (!p) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a block pool");
        return NULL;
    }
    atomic_init(&p->returned, NULL);
    atomic_init(&p->refs, 1);
    atomic_init(&p->closed, false);
    p->cap = data_cap;
    return p;
}

qf__strblock *qf__strblock_pool_get(qf__strblock_pool *p)
{
    if (!p->spare) {
        p->spare = atomic_exchange_explicit(&p->returned, NULL, memory_order_acquire);
        p->nspare = 0;
        for (qf__strblock *r = p->spare; r; r = r->next)
            p->nspare++;
    }
    qf__strblock *r = p->spare;
    if (r) {
        p->spare = r->next;
        p->nspare--;
        /* Beyond what a filler needs: to the idle set, for other pools. */
        while (p->nspare > POOL_SPARE) {
            qf__strblock *x = p->spare;
            p->spare = x->next;
            p->nspare--;
            block_free(x);
            /* Never the last count: the caller, the owner, holds one. */
            atomic_fetch_sub_explicit(&p->refs, 1, memory_order_relaxed);
        }
        atomic_store_explicit(&r->live, 1 + r->rows_cap, memory_order_relaxed);
        r->n = 0;
        r->next = NULL;
        return r;
    }
    if (!(r = block_alloc(p->cap)))
        return NULL;
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    r->pool = p;
    return r;
}

void qf__strblock_pool_close(qf__strblock_pool *p)
{
    if (!p)
        return;
    atomic_store_explicit(&p->closed, true, memory_order_seq_cst);
    pool_drain(p);
    while (p->spare) {
        qf__strblock *x = p->spare;
        p->spare = x->next;
        block_free(x);
        atomic_fetch_sub_explicit(&p->refs, 1, memory_order_relaxed); /* ours is still held */
    }
    pool_unref(p);
}

char *qf__strblock_data(qf__strblock *r)
{
    return r->buf;
}

static void block_release(qf__strblock *r, uint32_t k)
{
    if (atomic_fetch_sub_explicit(&r->live, k, memory_order_release) != k)
        return;
#ifdef QF_TSAN
    /* TSan understands the load, not the fence. */
    (void)atomic_load_explicit(&r->live, memory_order_acquire);
#else
    atomic_thread_fence(memory_order_acquire);
#endif
    block_retire(r);
}

bool qf__strblock_in_use(const qf__strblock *r)
{
    uint32_t live = atomic_load_explicit(&((qf__strblock *)r)->live, memory_order_acquire);
    return live > 1 + r->rows_cap - r->n;
}

size_t qf__strblock_rows_left(const qf__strblock *r)
{
    return r->rows_cap - r->n;
}

void qf__strblock_reuse(qf__strblock *r)
{
    /* Nobody else touches the count now: every row out was consumed. */
    atomic_fetch_add_explicit(&r->live, r->n, memory_order_relaxed);
    r->n = 0;
}

qf_code qf__strblock_set_prefix(qf__strblock *r, const char *prefix, size_t len, int sep)
{
    size_t plen = len + (sep >= 0);
    if (plen > UINT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "a key prefix is under 4 GiB");
    if (plen > r->prefix_cap) {
        char *p = malloc(plen);
        if (!p)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when keeping a file name");
        free(r->prefix);
        r->prefix = p;
        r->prefix_cap = plen;
    }
    if (len)
        memcpy(r->prefix, prefix, len);
    if (sep >= 0)
        r->prefix[len] = (char)sep;
    r->prefix_len = (uint32_t)plen;
    return QF_OK;
}

bool qf__strblock_has_prefix(const qf__strblock *r, const char *prefix, size_t len, int sep)
{
    size_t plen = len + (sep >= 0);
    return r->prefix_len == plen && (len == 0 || memcmp(r->prefix, prefix, len) == 0) &&
           (sep < 0 || r->prefix[len] == (char)sep);
}

void qf__strblock_drop(qf__strblock *r)
{
    if (r)
        block_release(r, 1 + r->rows_cap - r->n);
}

static qf__strblock *block_of(const void *slot, const block_row **ret_row)
{
    uintptr_t v = (uintptr_t)slot;
    uintptr_t base = v & ~(uintptr_t)(QF__STRBLOCK_ALIGN - 1);
    qf__strblock *r = (qf__strblock *)base;
    *ret_row = &r->rows[(v - base) >> 1];
    return r;
}

void qf__row_string(const void *slot, size_t c, char digits[QF__ROW_DIGITS], const char **s0,
                    size_t *len0, const char **s1, size_t *len1)
{
    const block_row *row;
    const qf__strblock *r = block_of(slot, &row);
    if (c == 0) {
        *s0 = r->prefix;
        *len0 = r->prefix_len;
        *s1 = digits;
        *len1 = qf__format_u64(digits, row->line);
    } else {
        *s0 = r->buf + row->off;
        *len0 = row->len;
        *s1 = NULL;
        *len1 = 0;
    }
}

const char *qf__row_value(const void *slot)
{
    if (!qf__slot_is_row(slot))
        return NULL;
    const block_row *row;
    const qf__strblock *r = block_of(slot, &row);
    return r->buf + row->off;
}

bool qf__rows_all(void *const *slots, size_t n)
{
    /* Without an early exit: the compiler vectorises the AND of the tag
     * bits, and a batch of rows (the case that matters) reads every slot
     * anyway. With a branch per slot this was 4% of qflow-lines' samples. */
    uintptr_t all = 1;
    for (size_t i = 0; i < n; i++)
        all &= (uintptr_t)slots[i];
    return (all & 1) != 0;
}

bool qf__rows_values(void *const *slots, size_t n, qf_string *dst)
{
    const qf__strblock *last = NULL;
    bool bare = true;
    for (size_t i = 0; i < n; i++) {
        const block_row *row;
        const qf__strblock *r = block_of(slots[i], &row);
        dst[i] = row->len ? (qf_string){row->len, r->buf + row->off} : (qf_string){0, NULL};
        if (r != last) {
            bare = bare && atomic_load_explicit(&r->bare_ends, memory_order_relaxed);
            last = r;
        }
    }
    return bare;
}

void qf__rows_release(void *const *slots, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const block_row *row;
        qf__strblock *r = block_of(slots[i], &row);
        uint32_t k = 1;
        while (i + k < n && block_of(slots[i + k], &row) == r)
            k++;
        i += k;
        block_release(r, k);
    }
}

qf_element *qf__slot_element(void *slot)
{
    if (!qf__slot_is_row(slot))
        return slot;
    char digits[QF__ROW_DIGITS];
    const char *k0, *k1, *v, *unused;
    size_t k0n, k1n, vn, unused_n;
    qf__row_string(slot, 0, digits, &k0, &k0n, &k1, &k1n);
    qf__row_string(slot, 1, digits, &v, &vn, &unused, &unused_n);
    /* The key is two parts; assemble it where it fits, else allocate. */
    char small[512];
    char *key = k0n + k1n <= sizeof(small) ? small : malloc(k0n + k1n);
    if (!key) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when making an element of a row");
        return NULL;
    }
    memcpy(key, k0, k0n);
    memcpy(key + k0n, k1, k1n);
    qf_element *e = qf__element_of_two_strings(key, k0n + k1n, v, vn);
    if (key != small)
        free(key);
    if (e)
        qf__rows_release(&slot, 1);
    return e;
}

void qf__slot_free(void *slot)
{
    qf__slots_free(&slot, 1);
}

void qf__slots_free(void *const *slots, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (!qf__slot_is_row(slots[i])) {
            qf_element_free(slots[i++]);
            continue;
        }
        size_t k = 1;
        while (i + k < n && qf__slot_is_row(slots[i + k]))
            k++;
        qf__rows_release(slots + i, k);
        i += k;
    }
}

/* Keys lying whole in kb are copied KEY_MOVE bytes at a time: a whole key
 * ends by byte 508 of kb (a prefix of at most 512 - QF__ROW_DIGITS bytes and
 * 20 digits), so the moves read no further than its 512; they write up to
 * KEY_MOVE - 1 bytes past the key in the arena, which
 * qf__rows_string_bytes() counts. A 40-byte key is three moves, not a
 * memcpy call. */
#define KEY_MOVE 16
_Static_assert(512 % KEY_MOVE == 0, "moves of a whole key stay inside kb");

bool qf__rows_string_bytes(void *const *slots, size_t n, size_t c, size_t *ret_bytes)
{
    size_t total = 0;
    if (c == 0) {
        /* Keys: room for 20 digits each, so that only the blocks' headers
         * are read here, not every row (the copy reads those). */
        for (size_t i = 0; i < n;) {
            if (!qf__slot_is_row(slots[i]))
                return false;
            const block_row *row;
            const qf__strblock *r = block_of(slots[i], &row);
            size_t k = 1;
            while (i + k < n && qf__slot_is_row(slots[i + k]) &&
                   ((uintptr_t)slots[i + k] & ~(uintptr_t)(QF__STRBLOCK_ALIGN - 1)) == (uintptr_t)r)
                k++;
            total += k * (r->prefix_len + 20 + 1); /* prefixes are < 4 GiB */
            i += k;
        }
        /* qf__rows_string_copy() copies keys KEY_MOVE bytes at a time:
         * the last one may write up to KEY_MOVE - 1 bytes past its NUL. */
        *ret_bytes = total + KEY_MOVE;
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        if (!qf__slot_is_row(slots[i]))
            return false;
        const block_row *row;
        block_of(slots[i], &row);
        total += row->len ? row->len + 1 : 0; /* rows are < 2 GiB each: no overflow */
    }
    *ret_bytes = total;
    return true;
}

/* Add one to the decimal number of nd digits at digits, at its digit i - 1
 * (i = nd: count it up by one); digits from i on are left as they are.
 * Returns its digits now (one more when the carry runs off the front). */
static size_t carry_in(char *digits, size_t nd, size_t i)
{
    while (i-- > 0) {
        if (digits[i] != '9') {
            digits[i]++;
            return nd;
        }
        digits[i] = '0';
    }
    memmove(digits + 1, digits, nd);
    digits[0] = '1';
    return nd + 1;
}

/* The step from one key's number to the next, in decimal, least
 * significant digit first: a batch's steps are mostly one and the same (a
 * record's length for TFRecord offsets), so its digits are worked out
 * once, not divided out of it for every key. */
typedef struct key_step {
    uint64_t delta; /* 0: none yet */
    size_t n;
    unsigned char d[20];
} key_step;

/* Add delta (> 0) to the decimal number of nd digits at digits, which has
 * room for 20; returns its digits now. The next key of a batch is mostly
 * of the same block as the last and further on: a text line's number one
 * more, a TFRecord's offset one record more. Adding the step rewrites the
 * last few digits, where formatting the number afresh divides out every
 * one of them (a 7-digit offset: about 150 instructions a key). */
static size_t add_up(char *digits, size_t nd, uint64_t delta, key_step *st)
{
    if (delta != st->delta) {
        st->delta = delta;
        st->n = 0;
        for (uint64_t x = delta; x; x /= 10)
            st->d[st->n++] = (unsigned char)(x % 10);
    }
    if (nd < st->n) { /* leading zeros, so the step's digits all land */
        size_t pad = st->n - nd;
        memmove(digits + pad, digits, nd);
        memset(digits, '0', pad);
        nd = st->n;
    }
    size_t i = nd;
    unsigned carry = 0;
    for (size_t k = 0; k < st->n; k++) {
        i--;
        unsigned d = (unsigned)(digits[i] - '0') + st->d[k] + carry;
        carry = d >= 10;
        digits[i] = (char)('0' + (carry ? d - 10 : d));
    }
    return carry ? carry_in(digits, nd, i) : nd;
}

char *qf__rows_string_copy(void *const *slots, size_t n, size_t c, qf_string *dst, char *arena)
{
    /* Keys: a batch's rows are mostly of one block, in order, so the key
     * is kept whole in kb (the block's prefix, then the number) and its
     * number moved on from the last one's (add_up()) rather than formatted
     * each time: one copy per key. A prefix too long for kb takes two. */
    char kb[512] = {0};
    const qf__strblock *kr = NULL; /* whose prefix is in kb */
    char *digits = kb;
    size_t nd = 0;
    uint64_t last = 0;
    key_step step = {0};
    for (size_t i = 0; i < n; i++) {
        const block_row *row;
        const qf__strblock *r = block_of(slots[i], &row);
        size_t len;
        if (c == 0) {
            bool whole = (size_t)r->prefix_len + QF__ROW_DIGITS <= 512;
            if (r != kr) {
                kr = r;
                nd = 0; /* format afresh */
                if (whole) {
                    memcpy(kb, r->prefix, r->prefix_len);
                    digits = kb + r->prefix_len;
                } else {
                    digits = kb;
                }
            }
            if (nd && row->line > last) /* not last + 1: it wraps after UINT64_MAX */
                nd = row->line - last == 1 ? carry_in(digits, nd, nd)
                                           : add_up(digits, nd, row->line - last, &step);
            else if (!nd || row->line != last)
                nd = qf__format_u64(digits, row->line);
            last = row->line;
            len = r->prefix_len + nd;
            if (whole) {
                for (size_t o = 0; o < len; o += KEY_MOVE)
                    memcpy(arena + o, kb + o, KEY_MOVE);
            } else {
                memcpy(arena, r->prefix, r->prefix_len);
                memcpy(arena + r->prefix_len, digits, nd);
            }
        } else {
            len = row->len;
            memcpy(arena, r->buf + row->off, len);
        }
        if (len == 0) {
            dst[i] = (qf_string){0, NULL};
            continue;
        }
        dst[i] = (qf_string){len, arena};
        arena[len] = '\0';
        arena += len + 1;
    }
    return arena;
}
