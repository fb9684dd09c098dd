/* qf_reader_state.c - serialize_state / restore_state for every reader.
 *
 * A state is the reader's counters, its current work item and the position
 * of the next record in it, plus its kind and a fingerprint of its
 * parameters, so that a state can only be restored on a reader that reads
 * the file the same way. The layout is in qf_reader.h; a trailing masked
 * CRC-32C catches damage, and every length is checked against the bytes
 * there, so a corrupt state is refused before anything is changed.
 *
 * Restoring is lazy: it only records the item and position; the next read
 * opens the file and moves there (qf_reader.c, apply_resume), so a restore
 * never does I/O and never fails halfway.
 */
#include <stdlib.h>
#include <string.h>

#include "qf_reader-impl.h"

#define MAGIC "QFRS"
#define FIXED_BYTES (4 + 2 + 2 + 4 + 8 + 8 + 8 + 8 + 8 + 8)

static void put16(unsigned char **p, uint16_t v)
{
    for (int i = 0; i < 2; i++)
        *(*p)++ = (unsigned char)(v >> (8 * i));
}
static void put32(unsigned char **p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *(*p)++ = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char **p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *(*p)++ = (unsigned char)(v >> (8 * i));
}
static uint64_t get(const unsigned char **p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)(*p)[i] << (8 * i);
    *p += bytes;
    return v;
}

/* What must match between the saver and the restorer. */
static uint64_t fingerprint(const qf_reader *r)
{
    uint64_t f[8] = {(uint64_t)r->skip_header_lines,
                     r->record_bytes,
                     r->header_bytes,
                     r->footer_bytes,
                     r->hop_bytes,
                     (uint64_t)r->compression,
                     r->max_record_bytes,
                     (uint64_t)r->ops->kind};
    unsigned char b[sizeof(f)];
    unsigned char *p = b;
    for (size_t i = 0; i < 8; i++)
        put64(&p, f[i]);
    uint32_t lo = qf__crc32c(b, sizeof(b));
    uint32_t hi = qf__crc32c_extend(lo, b, sizeof(b));
    return (uint64_t)hi << 32 | lo;
}

uint64_t qf__reader_stream_pos(const qf_reader *r)
{
    uint64_t off = qf__rbuf_offset(&r->rb);
    if (r->ops->kind == QF_READER_TFRECORD && r->tf_stage == 1)
        return r->tf_off; /* a record half-read from a pipe: again from its start */
    if (r->ops->kind == QF_READER_TEXT_LINE)
        return off - r->carry_len; /* a long line's head is in the carry */
    if (r->ops->kind == QF_READER_WHOLE_FILE)
        return 0;
    return off;
}

qf_code qf_reader_serialize_state(const qf_reader *r, void **ret_buf, size_t *ret_len)
{
    if (!r || !ret_buf || !ret_len)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !r         ? "reader"
                            : !ret_buf ? "ret_buf"
                                       : "ret_len");
    bool active = r->in_progress || r->resume_pending;
    const void *key = NULL;
    size_t key_len = 0;
    uint64_t pos = 0, index = 0, skip = 0;
    if (r->resume_pending) {
        /* Restored and not read since: the state is the restored one. */
        pos = r->resume_off;
        index = r->resume_index;
        skip = r->resume_skip;
        key = r->resume_key;
        key_len = r->resume_key_len;
    } else if (r->in_progress && r->resume_seek) {
        pos = r->resume_off;
        index = r->index;
        skip = r->skip_left;
        key = r->resume_key;
        key_len = r->resume_key_len;
    } else if (r->in_progress) {
        pos = qf__reader_stream_pos(r);
        index = r->index;
        skip = r->skip_left;
        if (r->ops->kind == QF_READER_LMDB)
            qf__lmdb_current_key(r, &key, &key_len);
    }
    size_t work_len = active ? r->work_len : 0;
    if (work_len > UINT32_MAX || key_len > UINT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: work item too long for a state", r->name);
    size_t len = FIXED_BYTES + 4 + work_len + 4 + key_len + 4;
    unsigned char *buf = malloc(len);
    if (!buf)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a reader state");
    unsigned char *p = buf;
    memcpy(p, MAGIC, 4);
    p += 4;
    put16(&p, QF_READER_STATE_VERSION);
    put16(&p, (uint16_t)r->ops->kind);
    put32(&p, active ? 1u : 0u);
    put64(&p, (uint64_t)qf_reader_num_records_produced(r));
    put64(&p, (uint64_t)qf_reader_num_work_units_completed(r));
    put64(&p, fingerprint(r));
    put64(&p, pos);
    put64(&p, index);
    put64(&p, skip);
    put32(&p, (uint32_t)work_len);
    if (work_len)
        memcpy(p, r->work, work_len);
    p += work_len;
    put32(&p, (uint32_t)key_len);
    if (key_len)
        memcpy(p, key, key_len);
    p += key_len;
    put32(&p, qf__crc32c_mask(qf__crc32c(buf, (size_t)(p - buf))));
    *ret_buf = buf;
    *ret_len = len;
    return QF_OK;
}

static const char *kind_name_of(uint16_t kind)
{
    static const char *const names[] = {"TextLineReader",  "FixedLengthRecordReader",
                                        "IdentityReader",  "TFRecordReader",
                                        "WholeFileReader", "LMDBReader"};
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown reader";
}

/* A reader state's fields, checked; work and key point into the state. */
typedef struct parsed_state {
    uint32_t flags;
    int64_t produced, completed;
    uint64_t pos, index, skip;
    const unsigned char *work, *key;
    uint32_t work_len, key_len;
} parsed_state;

/* A state that does not parse, in TensorFlow's words first ("Could not
 * parse state for IdentityReader 'test_reader'", which its reader tests
 * match), then what was wrong with it. */
#define STATE_ERR "Could not parse state for %s '%s': "
#define STATE_ERR_ARGS(r) (r)->ops->kind_name, (r)->name

/* Magic, version, checksum and kind; *p is left after the kind. */
static qf_code check_header(const qf_reader *r, const unsigned char *b, size_t len,
                            const unsigned char **p)
{
    if (len < FIXED_BYTES + 12 || memcmp(b, MAGIC, 4) != 0)
        return qf_set_error(QF_INVALID_ARGUMENT, STATE_ERR "not a reader state", STATE_ERR_ARGS(r));
    *p = b + 4;
    uint16_t version = (uint16_t)get(p, 2);
    if (version != QF_READER_STATE_VERSION)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            STATE_ERR
                            "reader state version %u is not supported (this qflow reads %d)",
                            STATE_ERR_ARGS(r), version, QF_READER_STATE_VERSION);
    uint32_t stored =
        (uint32_t)(b[len - 4] | b[len - 3] << 8 | b[len - 2] << 16 | (uint32_t)b[len - 1] << 24);
    if (qf__crc32c_unmask(stored) != qf__crc32c(b, len - 4))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            STATE_ERR "reader state is corrupt (checksum mismatch)",
                            STATE_ERR_ARGS(r));
    uint16_t kind = (uint16_t)get(p, 2);
    if (kind != (uint16_t)r->ops->kind)
        return qf_set_error(QF_INVALID_ARGUMENT, STATE_ERR "reader state is from a %s, not a %s",
                            STATE_ERR_ARGS(r), kind_name_of(kind), r->ops->kind_name);
    return QF_OK;
}

/* The work item and resume key, the rest of the state up to its
 * checksum. */
static qf_code parse_item(const qf_reader *r, const unsigned char *b, size_t len,
                          const unsigned char *p, parsed_state *st)
{
    size_t left = len - 4 - (size_t)(p - b);
    st->work_len = (uint32_t)get(&p, 4);
    left -= 4;
    if (st->work_len > left || left - st->work_len < 4)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            STATE_ERR "reader state is corrupt (work item length)",
                            STATE_ERR_ARGS(r));
    st->work = p;
    p += st->work_len;
    left -= st->work_len;
    st->key_len = (uint32_t)get(&p, 4);
    left -= 4;
    if (st->key_len != left)
        return qf_set_error(QF_INVALID_ARGUMENT, STATE_ERR "reader state is corrupt (key length)",
                            STATE_ERR_ARGS(r));
    st->key = p;
    return QF_OK;
}

/* The state's fields into st, checked against the reader and each
 * other. */
static qf_code parse_state(const qf_reader *r, const unsigned char *b, size_t len, parsed_state *st)
{
    const unsigned char *p = NULL;
    qf_code rc = check_header(r, b, len, &p);
    if (rc != QF_OK)
        return rc;
    st->flags = (uint32_t)get(&p, 4);
    st->produced = (int64_t)get(&p, 8);
    st->completed = (int64_t)get(&p, 8);
    uint64_t fp = get(&p, 8);
    st->pos = get(&p, 8);
    st->index = get(&p, 8);
    st->skip = get(&p, 8);
    if (fp != fingerprint(r))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            STATE_ERR "reader state was made with other parameters (record sizes, "
                                      "header lines, compression or max_record_bytes differ)",
                            STATE_ERR_ARGS(r));
    if ((rc = parse_item(r, b, len, p, st)) != QF_OK)
        return rc;
    /* One spelling per state: without an item in progress every position
     * field is 0 (what serialize writes). */
    bool busy = (st->flags & 1u) != 0;
    bool idle_junk = !busy && (st->work_len || st->key_len || st->pos || st->index || st->skip);
    if ((st->flags & ~1u) || st->produced < 0 || st->completed < 0 || (busy && st->work_len == 0) ||
        idle_junk)
        return qf_set_error(QF_INVALID_ARGUMENT, STATE_ERR "reader state is corrupt (fields)",
                            STATE_ERR_ARGS(r));
    return QF_OK;
}

qf_code qf_reader_restore_state(qf_reader *r, const void *state, size_t len)
{
    if (!r || !state)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", !r ? "reader" : "state");
    parsed_state st;
    memset(&st, 0, sizeof(st));
    qf_code rc = parse_state(r, state, len, &st);
    if (rc != QF_OK)
        return rc;
    /* Everything checked: allocate, then change the reader. */
    char *nwork = NULL, *nkey = NULL;
    size_t nwork_cap = 0;
    if (qf__reserve(&nwork, &nwork_cap, st.work_len) != QF_OK)
        return QF_RESOURCE_EXHAUSTED;
    if (st.key_len && !(nkey = malloc(st.key_len))) {
        free(nwork);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory restoring a reader state");
    }
    memcpy(nwork, st.work, st.work_len);
    nwork[st.work_len] = '\0';
    if (st.key_len)
        memcpy(nkey, st.key, st.key_len);
    qf_reader_reset(r); /* closes the current item, forgets a held-back error */
    free(r->work);
    r->work = nwork;
    r->work_cap = nwork_cap;
    r->work_len = st.work_len;
    free(r->resume_key);
    r->resume_key = nkey;
    r->resume_key_len = st.key_len;
    r->resume_pending = (st.flags & 1u) != 0;
    r->resume_off = st.pos;
    r->resume_index = st.index;
    r->resume_skip = st.skip;
    atomic_store_explicit(&r->produced, st.produced, memory_order_relaxed);
    atomic_store_explicit(&r->completed, st.completed, memory_order_relaxed);
    return QF_OK;
}
