/* qf_reader_lmdb.c - LMDBReader: the (key, value) pairs of an LMDB
 * environment's main database, in key order.
 *
 * Opened as TensorFlow opens it: read-only, without the lock file
 * (MDB_NOLOCK) or thread-local reader slots (MDB_NOTLS, the reader moves
 * between threads), and MDB_NOSUBDIR when the work item names the data
 * file itself rather than the environment's directory. One read-only
 * transaction and one cursor per work item. LMDB maps the file: a read
 * is a page-cache access, never a wait on a pipe.
 *
 * State: the cursor's current key. A restore positions the cursor with
 * MDB_SET_RANGE at that key and goes on after it (or at the next larger key
 * when it has been deleted meanwhile).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qf_reader-impl.h"

#ifdef QF_HAVE_LMDB
#include <lmdb.h>

const bool qf__have_lmdb = true;

typedef struct lmdb_item {
    MDB_env *env;
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_cursor_op op; /* how the next record is fetched */
} lmdb_item;

static qf_code mdb_error(qf_reader *r, int err)
{
    qf_code code;
    switch (err) {
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_TXN:
        code = QF_DATA_LOSS;
        break;
    case MDB_NOTFOUND:
        code = QF_NOT_FOUND;
        break;
    case MDB_MAP_FULL:
    case MDB_READERS_FULL:
    case MDB_TLS_FULL:
    case MDB_TXN_FULL:
        code = QF_RESOURCE_EXHAUSTED;
        break;
    default:
        code = err > 0 ? qf__errno_code(err) : QF_UNKNOWN;
        break;
    }
    return qf_set_error(code, "%s; %s", r->work, mdb_strerror(err));
}

static void lmdb_finish(qf_reader *r)
{
    lmdb_item *it = r->lmdb;
    if (!it)
        return;
    if (it->cur)
        mdb_cursor_close(it->cur);
    if (it->txn)
        mdb_txn_abort(it->txn);
    if (it->env)
        mdb_env_close(it->env);
    free(it);
    r->lmdb = NULL;
}

static qf_code lmdb_start(qf_reader *r)
{
    if (memchr(r->work, '\0', r->work_len))
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: file name contains a NUL byte", r->name);
    lmdb_item *it = calloc(1, sizeof(*it));
    if (!it)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory opening '%s'", r->work);
    r->lmdb = it;
    it->op = MDB_FIRST;
    unsigned flags = MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK;
    struct stat st;
    if (stat(r->work, &st) != 0)
        return qf__io_error(r->work, errno);
    if (S_ISREG(st.st_mode))
        flags |= MDB_NOSUBDIR;
    int err = mdb_env_create(&it->env);
    if (!err)
        err = mdb_env_open(it->env, r->work, flags, 0664);
    if (!err)
        err = mdb_txn_begin(it->env, NULL, MDB_RDONLY, &it->txn);
    MDB_dbi dbi = 0;
    if (!err)
        err = mdb_dbi_open(it->txn, NULL, 0, &dbi);
    if (!err)
        err = mdb_cursor_open(it->txn, dbi, &it->cur);
    return err ? mdb_error(r, err) : QF_OK;
}

static qf_code lmdb_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    lmdb_item *it = r->lmdb;
    MDB_val k, v;
    int err = mdb_cursor_get(it->cur, &k, &v, it->op);
    if (err == MDB_NOTFOUND) {
        *at_end = true;
        return QF_OK;
    }
    if (err)
        return mdb_error(r, err);
    it->op = MDB_NEXT;
    qf_code rc = qf__record_set_key(rec, k.mv_data, k.mv_size);
    if (rc == QF_OK)
        rc = qf__record_set_value(rec, v.mv_data, v.mv_size);
    if (rc != QF_OK)
        return rc;
    r->index++;
    *produced = true;
    return QF_OK;
}

static qf_code lmdb_resume(qf_reader *r)
{
    lmdb_item *it = r->lmdb;
    if (!r->resume_key) {
        it->op = MDB_FIRST; /* nothing of this item was produced */
        return QF_OK;
    }
    MDB_val k = {.mv_size = r->resume_key_len, .mv_data = r->resume_key}, v;
    int err = mdb_cursor_get(it->cur, &k, &v, MDB_SET_RANGE);
    if (err == MDB_NOTFOUND) {
        r->file_done = true;
        it->op = MDB_LAST; /* unused */
        return QF_OK;
    }
    if (err)
        return mdb_error(r, err);
    bool same = k.mv_size == r->resume_key_len && !memcmp(k.mv_data, r->resume_key, k.mv_size);
    it->op = same ? MDB_NEXT : MDB_GET_CURRENT;
    return QF_OK;
}

static qf_code lmdb_next_checked(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    if (r->file_done) {
        *at_end = true;
        return QF_OK;
    }
    return lmdb_next(r, rec, produced, at_end);
}

qf_code qf__lmdb_current_key(const qf_reader *r, const void **ret_key, size_t *ret_len)
{
    lmdb_item *it = r->lmdb;
    *ret_key = NULL;
    *ret_len = 0;
    if (!it || !it->cur || it->op == MDB_FIRST)
        return QF_OK; /* nothing produced from this item yet */
    if (it->op == MDB_GET_CURRENT) {
        /* Restored, and the cursor's record is not produced yet. */
        *ret_key = r->resume_key;
        *ret_len = r->resume_key_len;
        return QF_OK;
    }
    MDB_val k, v;
    int err = mdb_cursor_get(it->cur, &k, &v, MDB_GET_CURRENT);
    if (err)
        return QF_OK;
    *ret_key = k.mv_data;
    *ret_len = k.mv_size;
    return QF_OK;
}

#else

const bool qf__have_lmdb = false;

static qf_code lmdb_start(qf_reader *r)
{
    (void)r;
    return qf_set_error(QF_UNIMPLEMENTED, "qflow was built without LMDB (liblmdb-dev)");
}

static qf_code lmdb_next_checked(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    (void)r, (void)rec, (void)produced;
    *at_end = true;
    return QF_OK;
}

static void lmdb_finish(qf_reader *r)
{
    (void)r;
}

static qf_code lmdb_resume(qf_reader *r)
{
    (void)r;
    return QF_OK;
}

qf_code qf__lmdb_current_key(const qf_reader *r, const void **ret_key, size_t *ret_len)
{
    (void)r;
    *ret_key = NULL;
    *ret_len = 0;
    return QF_OK;
}

#endif

const qf__reader_ops qf__lmdb_reader_ops = {
    .kind = QF_READER_LMDB,
    .kind_name = "LMDBReader",
    .reads_files = false,
    .start = lmdb_start,
    .next = lmdb_next_checked,
    .finish = lmdb_finish,
    .resume = lmdb_resume,
};
