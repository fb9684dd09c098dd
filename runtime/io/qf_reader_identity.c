/* qf_reader_identity.c - IdentityReader (spec 186-188).
 *
 * Every read returns the work item itself as both key and value and
 * completes that work unit at once: no file is opened.
 */
#include "qf_reader-impl.h"

static qf_code identity_start(qf_reader *r)
{
    (void)r;
    return QF_OK;
}

static qf_code identity_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    qf_code rc = qf__record_set_value(rec, r->work, r->work_len);
    if (rc == QF_OK)
        rc = qf__record_set_key(rec, r->work, r->work_len);
    if (rc != QF_OK)
        return rc;
    *produced = true;
    *at_end = true;
    return QF_OK;
}

static void identity_finish(qf_reader *r)
{
    (void)r;
}

/* Nothing to position: the item is read whole by its one read. */
static qf_code identity_resume(qf_reader *r)
{
    (void)r;
    return QF_OK;
}

const qf__reader_ops qf__identity_reader_ops = {
    .kind = QF_READER_IDENTITY,
    .kind_name = "IdentityReader",
    .reads_files = false,
    .start = identity_start,
    .next = identity_next,
    .finish = identity_finish,
    .resume = identity_resume,
};
