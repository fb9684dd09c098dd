/* qf_reader_whole.c - WholeFileReader: one record per file, key = the file
 * name, value = everything in it (an empty file gives one empty record).
 *
 * A regular file is read straight into the caller's record, sized from the
 * file's size at open and grown if the file grew meanwhile. Anything else
 * (a pipe) is collected in the reader's carry, which keeps what arrived
 * across a QF_PENDING, and copied out at its end.
 */
#include <inttypes.h>
#include <string.h>

#include "qf_reader-impl.h"

#define GROW ((size_t)64 * 1024)

static qf_code whole_start(qf_reader *r)
{
    return qf__rbuf_open(&r->rb, r->work);
}

/* Read to the end of the stream into *buf, *len counting up. */
static qf_code slurp(qf_reader *r, char **buf, size_t *cap, size_t *len)
{
    qf__rbuf *rb = &r->rb;
    size_t hint = rb->file_size > 0 ? (size_t)rb->file_size : 0;
    for (;;) {
        size_t target = hint > *len ? hint : *len + GROW;
        hint = 0;
        uint64_t max = r->max_record_bytes;
        if (max && target > max)
            target = (size_t)max + 1; /* one byte more tells "too large" */
        qf_code rc = qf__reserve(buf, cap, target);
        if (rc != QF_OK)
            return rc;
        rc = qf__rbuf_read(rb, *buf, target, len);
        if (rc != QF_OK)
            return rc;
        if (max && *len > max)
            return qf_set_error(QF_RESOURCE_EXHAUSTED,
                                "'%s' is larger than max_record_bytes %" PRIu64, r->work, max);
        if (*len < target)
            return QF_OK; /* the end */
    }
}

static qf_code whole_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    qf_code rc;
    if (!r->rb.nonblock) {
        size_t len = 0;
        rc = slurp(r, &rec->value, &rec->value_cap, &len);
        if (rc != QF_OK)
            return rc;
        rec->value_len = len;
    } else {
        rc = slurp(r, &r->carry, &r->carry_cap, &r->carry_len);
        if (rc != QF_OK)
            return rc;
        rc = qf__record_set_value(rec, r->carry, r->carry_len);
        r->carry_len = 0;
        if (rc != QF_OK)
            return rc;
    }
    rec->value[rec->value_len] = '\0';
    rc = qf__record_set_key(rec, r->work, r->work_len);
    if (rc != QF_OK)
        return rc;
    *produced = true;
    *at_end = true;
    return QF_OK;
}

static void whole_finish(qf_reader *r)
{
    qf__rbuf_close(&r->rb);
}

/* A restored item starts again from its first byte: its one record was not
 * produced yet. */
static qf_code whole_resume(qf_reader *r)
{
    (void)r;
    return QF_OK;
}

const qf__reader_ops qf__whole_file_reader_ops = {
    .kind = QF_READER_WHOLE_FILE,
    .kind_name = "WholeFileReader",
    .reads_files = true,
    .start = whole_start,
    .next = whole_next,
    .finish = whole_finish,
    .resume = whole_resume,
};
