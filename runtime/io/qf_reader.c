/* qf_reader.c - ReaderBase: work items, counters, reset, records, and the
 * buffered sequential file every file reader reads through.
 *
 * The read loop is TensorFlow's ReaderBase::ReadUpTo (read is read_up_to(1),
 * which behaves identically): take a work item when there is none, start
 * it, pull records until n are produced or the item ends; at the end of an
 * item return if anything was produced, else go round for the next item.
 * So a work item is only ever dequeued while the call has produced nothing,
 * which is what lets the poll form return QF_PENDING without having to hold
 * records across polls.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qf_reader-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_tensor-impl.h"

/* ---------------------------------------------------------------- records */

void qf_record_init(qf_record *rec)
{
    if (!rec) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_record_init: record (rec) is NULL");
        return;
    }
    memset(rec, 0, sizeof(*rec));
}

void qf_record_clear(qf_record *rec)
{
    if (!rec)
        return;
    free(rec->key);
    free(rec->value);
    memset(rec, 0, sizeof(*rec));
}

void qf_records_clear(qf_record *recs, size_t n)
{
    if (!recs)
        return;
    for (size_t i = 0; i < n; i++)
        qf_record_clear(&recs[i]);
}

qf_code qf_record_to_element(const qf_record *rec, qf_element **ret_elem)
{
    if (!rec || !ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", rec ? "ret_elem" : "record");
    /* One allocation for the element and both tensors where they are
     * small: records are made on a reader's thread and freed on the
     * consumer's, where every allocation costs a cross-thread free. */
    qf_element *e =
        qf__element_of_two_strings(rec->key ? rec->key : "", rec->key ? rec->key_len : 0,
                                   rec->value ? rec->value : "", rec->value ? rec->value_len : 0);
    if (!e)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory making a record element");
    *ret_elem = e;
    return QF_OK;
}

/* Grow *buf to hold n bytes plus a NUL. Doubling keeps a stream of slowly
 * growing lines from reallocating on every record. */
qf_code qf__reserve(char **buf, size_t *cap, size_t n)
{
    if (n < *cap)
        return QF_OK;
    if (n >= SIZE_MAX / 2)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "record of %zu bytes is too large", n);
    size_t c = *cap ? *cap : 64;
    while (c <= n)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a record of %zu bytes", n);
    *buf = p;
    *cap = c;
    return QF_OK;
}

qf_code qf__record_reserve_value(qf_record *rec, size_t n)
{
    return qf__reserve(&rec->value, &rec->value_cap, n);
}

static qf_code set_bytes(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    qf_code rc = qf__reserve(buf, cap, n);
    if (rc != QF_OK)
        return rc;
    if (n)
        memcpy(*buf, s, n);
    (*buf)[n] = '\0';
    *len = n;
    return QF_OK;
}

qf_code qf__record_set_value(qf_record *rec, const char *s, size_t n)
{
    return set_bytes(&rec->value, &rec->value_len, &rec->value_cap, s, n);
}

qf_code qf__record_set_key(qf_record *rec, const char *s, size_t n)
{
    return set_bytes(&rec->key, &rec->key_len, &rec->key_cap, s, n);
}

qf_code qf__record_set_key_num(qf_reader *r, qf_record *rec, uint64_t n)
{
    /* 20 digits hold any uint64_t. */
    qf_code rc = qf__reserve(&rec->key, &rec->key_cap, r->work_len + 1 + 20);
    if (rc != QF_OK)
        return rc;
    char *k = rec->key;
    memcpy(k, r->work, r->work_len);
    k += r->work_len;
    *k++ = ':';
    k += qf__format_u64(k, n);
    *k = '\0';
    rec->key_len = (size_t)(k - rec->key);
    return QF_OK;
}

/* The reader's buffer goes: a run is let go (its rows stay valid), the
 * pool closed. */
static void free_buffer(qf__rbuf *rb)
{
    if (rb->blk)
        qf__strblock_drop(rb->blk);
    else
        free(rb->buf);
    qf__strblock_pool_close(rb->pool);
}

/* -------------------------------------------------------------- warnings */

void qf__reader_warn(qf_reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->last_warning, sizeof(r->last_warning), fmt, ap);
    va_end(ap);
    atomic_fetch_add_explicit(&r->warnings, 1, memory_order_relaxed);
    if (r->on_warning)
        r->on_warning(r->warning_arg, r, r->last_warning);
}

/* ---------------------------------------------------------------- readers */

static const qf__reader_ops *ops_of(qf_reader_kind kind)
{
    switch (kind) {
    case QF_READER_TEXT_LINE:
        return &qf__text_line_reader_ops;
    case QF_READER_FIXED_LENGTH_RECORD:
        return &qf__fixed_length_reader_ops;
    case QF_READER_IDENTITY:
        return &qf__identity_reader_ops;
    case QF_READER_TFRECORD:
        return &qf__tfrecord_reader_ops;
    case QF_READER_WHOLE_FILE:
        return &qf__whole_file_reader_ops;
    case QF_READER_LMDB:
        return &qf__lmdb_reader_ops;
    }
    return NULL;
}

static qf_code check_size(const char *attr, int64_t v)
{
    if (v < 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s must be >= 0 not %lld", attr, (long long)v);
    return QF_OK;
}

/* A fixed-length reader's sizes; the buffer grows to hold a whole record
 * and its footer, so ensure() can always satisfy a record from one
 * window. */
static qf_code check_fixed(const qf_reader_options *o, size_t *cap)
{
    /* TensorFlow checks in this order (spec 201). */
    if (check_size("header_bytes", o->header_bytes) != QF_OK ||
        check_size("record_bytes", o->record_bytes) != QF_OK ||
        check_size("footer_bytes", o->footer_bytes) != QF_OK ||
        check_size("hop_bytes", o->hop_bytes) != QF_OK)
        return QF_INVALID_ARGUMENT;
    if (o->record_bytes == 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "record_bytes must be > 0 not 0");
    uint64_t window = (uint64_t)o->record_bytes + (uint64_t)o->footer_bytes;
    if (window >= SIZE_MAX / 2)
        return qf_set_error(QF_RESOURCE_EXHAUSTED,
                            "record_bytes + footer_bytes = %llu is too large",
                            (unsigned long long)window);
    if (*cap < window)
        *cap = (size_t)window;
    return QF_OK;
}

/* The buffer size and the options of the reader's kind; *cap is the
 * buffer's size. */
static qf_code check_kind_options(const qf_reader_options *o, const qf__reader_ops *ops,
                                  size_t *cap)
{
    if (o->buffer_bytes && o->buffer_bytes < QF__RBUF_MIN)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "buffer_bytes must be 0 (the default) or at least %d, not %zu",
                            (int)QF__RBUF_MIN, o->buffer_bytes);
    *cap = o->buffer_bytes ? o->buffer_bytes : QF_READER_DEFAULT_BUFFER;
    if (ops->kind == QF_READER_TEXT_LINE &&
        check_size("skip_header_lines", o->skip_header_lines) != QF_OK)
        return QF_INVALID_ARGUMENT;
    if (ops->kind == QF_READER_FIXED_LENGTH_RECORD)
        return check_fixed(o, cap);
    return QF_OK;
}

/* What the reader reads through: LMDB built in, compression (for the
 * kinds that have it) and the record size limit. */
static qf_code check_stream_options(const qf_reader_options *o, const qf__reader_ops *ops)
{
    if (ops->kind == QF_READER_LMDB && !qf__have_lmdb)
        return qf_set_error(QF_UNIMPLEMENTED, "qflow was built without LMDB (liblmdb-dev)");
    if (o->compression != QF_COMPRESSION_NONE && ops->kind != QF_READER_TFRECORD &&
        ops->kind != QF_READER_FIXED_LENGTH_RECORD)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "compression is only for TFRecordReader and FixedLengthRecordReader, "
                            "not %s",
                            ops->kind_name);
    if (qf__zlib_options_check(o->compression, &o->zlib, false) != QF_OK)
        return QF_INVALID_ARGUMENT;
    if (o->max_record_bytes >= SIZE_MAX / 2)
        return qf_set_error(QF_INVALID_ARGUMENT, "max_record_bytes %llu is too large",
                            (unsigned long long)o->max_record_bytes);
    return QF_OK;
}

/* The read buffer of cap bytes: a run's block when the reader yields rows
 * (they point into it, qf_strblock-impl.h), plain memory for the other
 * file readers, none otherwise. False when out of memory. */
static bool alloc_buffer(qf_reader *r, size_t cap)
{
    if (r->ops->next_rows && cap <= UINT32_MAX / 2) {
        r->rb.pool = qf__strblock_pool_new(cap);
        r->rb.blk = r->rb.pool ? qf__strblock_pool_get(r->rb.pool) : NULL;
        r->rb.buf = r->rb.blk ? qf__strblock_data(r->rb.blk) : NULL;
        r->rb.cap = cap;
    } else if (r->ops->reads_files) {
        r->rb.buf = malloc(cap);
        r->rb.cap = cap;
    }
    return !r->ops->reads_files || r->rb.buf;
}

/* The options the reader keeps, with their defaults. */
static void set_options(qf_reader *r, const qf_reader_options *o)
{
    r->skip_header_lines = o->skip_header_lines;
    if (r->ops->kind == QF_READER_FIXED_LENGTH_RECORD) {
        r->record_bytes = (uint64_t)o->record_bytes;
        r->header_bytes = (uint64_t)o->header_bytes;
        r->footer_bytes = (uint64_t)o->footer_bytes;
        r->hop_bytes = o->hop_bytes ? (uint64_t)o->hop_bytes : (uint64_t)o->record_bytes;
    }
    r->compression = o->compression;
    r->zlib = o->zlib;
    r->max_record_bytes = o->max_record_bytes;
    if (!r->max_record_bytes && r->ops->kind == QF_READER_TFRECORD)
        r->max_record_bytes = QF_READER_DEFAULT_MAX_RECORD;
    r->on_warning = o->on_warning;
    r->warning_arg = o->warning_arg;
}

qf_code qf_reader_new(const qf_reader_options *o, qf_reader **ret_reader)
{
    if (!o || !ret_reader)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", o ? "ret_reader" : "options");
    const qf__reader_ops *ops = ops_of(o->kind);
    if (!ops)
        return qf_set_error(QF_INVALID_ARGUMENT, "unknown reader kind %d", (int)o->kind);
    size_t cap = 0;
    qf_code rc = check_kind_options(o, ops, &cap);
    if (rc == QF_OK)
        rc = check_stream_options(o, ops);
    if (rc != QF_OK)
        return rc;
    qf__zin *z = NULL;
    if (o->compression != QF_COMPRESSION_NONE &&
        (rc = qf__zin_new(o->compression, &o->zlib, &z)) != QF_OK)
        return rc;
    qf_reader *r = calloc(1, sizeof(*r));
    if (!r) {
        qf__zin_free(z);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a reader");
    }
    r->ops = ops;
    r->rb.z = z;
    r->rb.owner = r;
    qf__fdwatch_init(&r->rb.watch);
    r->name = strdup(o->name ? o->name : ops->kind_name);
    r->rb.fd = -1;
    r->rb.eof = true;
    if (!alloc_buffer(r, cap) || !r->name) {
        free_buffer(&r->rb);
        qf__zin_free(z);
        free(r->name);
        free(r);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a %s (%zu bytes)",
                            ops->kind_name, cap);
    }
    set_options(r, o);
    atomic_init(&r->produced, 0);
    atomic_init(&r->completed, 0);
    atomic_init(&r->warnings, 0);
    *ret_reader = r;
    return QF_OK;
}

qf_code qf_text_line_reader_new(int64_t skip_header_lines, qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_TEXT_LINE;
    o.skip_header_lines = skip_header_lines;
    return qf_reader_new(&o, ret_reader);
}

qf_code qf_fixed_length_record_reader_new(int64_t record_bytes, int64_t header_bytes,
                                          int64_t footer_bytes, int64_t hop_bytes,
                                          qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_FIXED_LENGTH_RECORD;
    o.record_bytes = record_bytes;
    o.header_bytes = header_bytes;
    o.footer_bytes = footer_bytes;
    o.hop_bytes = hop_bytes;
    return qf_reader_new(&o, ret_reader);
}

qf_code qf_identity_reader_new(qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_IDENTITY;
    return qf_reader_new(&o, ret_reader);
}

qf_code qf_tfrecord_reader_new(qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_TFRECORD;
    return qf_reader_new(&o, ret_reader);
}

qf_code qf_tfrecord_reader_new_compressed(qf_compression compression, const qf_zlib_options *zlib,
                                          qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_TFRECORD;
    o.compression = compression;
    if (zlib)
        o.zlib = *zlib;
    return qf_reader_new(&o, ret_reader);
}

qf_code qf_whole_file_reader_new(qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_WHOLE_FILE;
    return qf_reader_new(&o, ret_reader);
}

qf_code qf_lmdb_reader_new(qf_reader **ret_reader)
{
    qf_reader_options o = {0};
    o.kind = QF_READER_LMDB;
    return qf_reader_new(&o, ret_reader);
}

bool qf_reader_have_lmdb(void)
{
    return qf__have_lmdb;
}

qf_code qf_compression_parse(const char *s, qf_compression *ret)
{
    if (!ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret");
    qf_compression c;
    if (!s || !*s)
        c = QF_COMPRESSION_NONE;
    else if (!strcmp(s, "ZLIB"))
        c = QF_COMPRESSION_ZLIB;
    else if (!strcmp(s, "GZIP"))
        c = QF_COMPRESSION_GZIP;
    else if (!strcmp(s, "ZSTD"))
        c = QF_COMPRESSION_ZSTD;
    else
        /* TensorFlow's TFRecordOptions raises ValueError for anything else
         * ("SNAPPY", lower case): no record reader of its takes another
         * compression_type from Python. */
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "unknown compression type '%s' (TFRecord compression types are "
                            "\"\" for none, \"ZLIB\", \"GZIP\" and \"ZSTD\")",
                            s);
    *ret = c;
    return QF_OK;
}

static void finish_work(qf_reader *r)
{
    if (r->in_progress)
        r->ops->finish(r);
    r->in_progress = false;
}

void qf_reader_free(qf_reader *r)
{
    if (!r)
        return;
    finish_work(r);
    qf__rbuf_close(&r->rb);
    qf_status_free(r->deferred);
    free_buffer(&r->rb);
    qf__zin_free(r->rb.z);
    qf_waitlist_destroy(&r->rb.watch.wl);
    free(r->carry);
    free(r->resume_key);
    free(r->work);
    free(r->name);
    free(r);
}

/* The accessors' answer to a NULL reader: a neutral value, the error
 * recorded (static message). */
static bool null_reader(const qf_reader *r, const char *msg)
{
    if (r)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

const char *qf_reader_name(const qf_reader *r)
{
    return null_reader(r, "qf_reader_name: reader (r) is NULL") ? NULL : r->name;
}

qf_reader_kind qf_reader_get_kind(const qf_reader *r)
{
    return null_reader(r, "qf_reader_get_kind: reader (r) is NULL") ? QF_READER_TEXT_LINE
                                                                    : r->ops->kind;
}

const char *qf_reader_kind_name(const qf_reader *r)
{
    return null_reader(r, "qf_reader_kind_name: reader (r) is NULL") ? NULL : r->ops->kind_name;
}

int64_t qf_reader_num_records_produced(const qf_reader *r)
{
    if (null_reader(r, "qf_reader_num_records_produced: reader (r) is NULL"))
        return 0;
    return atomic_load_explicit(&r->produced, memory_order_relaxed);
}

int64_t qf_reader_num_work_units_completed(const qf_reader *r)
{
    if (null_reader(r, "qf_reader_num_work_units_completed: reader (r) is NULL"))
        return 0;
    return atomic_load_explicit(&r->completed, memory_order_relaxed);
}

int64_t qf_reader_num_warnings(const qf_reader *r)
{
    if (null_reader(r, "qf_reader_num_warnings: reader (r) is NULL"))
        return 0;
    return atomic_load_explicit(&r->warnings, memory_order_relaxed);
}

const char *qf_reader_last_warning(const qf_reader *r)
{
    return null_reader(r, "qf_reader_last_warning: reader (r) is NULL") ? "" : r->last_warning;
}

void qf_reader_reset(qf_reader *r)
{
    if (!r)
        return; /* NULL-safe (documented) */
    finish_work(r);
    r->work_len = 0;
    r->resume_pending = false;
    r->resume_seek = false;
    qf_status_free(r->deferred);
    r->deferred = NULL;
    atomic_store_explicit(&r->produced, 0, memory_order_relaxed);
    atomic_store_explicit(&r->completed, 0, memory_order_relaxed);
}

/* One writer: a plain load and store, no read-modify-write needed. */
static void bump(QF_ATOMIC(int64_t) * c, int64_t by)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

/* How a call waits for a work item. */
typedef enum { WAIT_DEADLINE, WAIT_TRY, WAIT_POLL } wait_mode;

typedef struct {
    wait_mode mode;
    qf_deadline deadline;
    qf_waker *waker;
} waiter;

/* Dequeue the next work item into r->work (spec 183-184). */
static qf_code next_work(qf_reader *r, qf_queue *q, const waiter *w)
{
    /* Check the queue before taking anything from it, so a wrong queue
     * loses no element. */
    if (qf_queue_num_components(q) != 1)
        return qf_set_error(QF_INVALID_ARGUMENT, "Expected single component queue");
    if (qf_queue_dtype(q, 0) != QF_STRING)
        return qf_set_error(QF_INVALID_ARGUMENT, "Expected queue with single string component");
    qf_element *e = NULL;
    qf_code rc;
    switch (w->mode) {
    case WAIT_POLL:
        rc = qf_queue_poll_dequeue(q, w->waker, &e);
        break;
    case WAIT_TRY:
        rc = qf_queue_try_dequeue(q, &e);
        break;
    default:
        rc = qf_queue_dequeue_until(q, w->deadline, &e);
        break;
    }
    if (rc != QF_OK)
        return rc; /* the queue's code and message; QF_PENDING for poll */
    const qf_tensor *t = qf_element_size(e) == 1 ? qf_element_get(e, 0) : NULL;
    if (!t || qf_tensor_dtype(t) != QF_STRING || qf_tensor_num_elements(t) != 1) {
        qf_element_free(e);
        return qf_set_error(QF_INVALID_ARGUMENT, "Expected to dequeue a one-element string tensor");
    }
    size_t len = 0;
    const char *s = qf_tensor_string(t, 0, &len); /* may be NULL when len is 0 */
    rc = qf__reserve(&r->work, &r->work_cap, len);
    if (rc == QF_OK) {
        if (len)
            memcpy(r->work, s, len);
        r->work[len] = '\0';
        r->work_len = len;
    }
    qf_element_free(e);
    return rc;
}

/* Where records go: caller's qf_records, or (key, value) elements. */
typedef struct sink {
    qf_record *recs;    /* records, or NULL */
    void **slots;       /* queue slots, when recs is NULL (qf_strblock-impl.h) */
    qf_record *scratch; /* for kinds without next_rows */
} sink;

/* Produce records got.. (at most n - got) of the current item; *made says
 * how many. */
static qf_code produce(qf_reader *r, const sink *sk, size_t got, size_t n, size_t *made,
                       bool *at_end)
{
    bool produced = false;
    qf_code rc;
    *made = 0;
    if (sk->recs) {
        rc = r->ops->next(r, &sk->recs[got], &produced, at_end);
        *made = produced;
        return rc;
    }
    if (r->ops->next_rows) {
        r->rows_may_wait = got == 0;
        rc = r->ops->next_rows(r, sk->slots + got, n - got, made, at_end);
        if (rc != QF_OK || *made || *at_end)
            return rc;
        /* Nothing whole in the buffer: next() assembles the record. */
    }
    /* next() may wait for input (a pipe, a slow disk), and records in hand
     * must not wait with it: it runs only for the first record of a call.
     * (This also keeps a reader without next_rows at one record per call,
     * so a queue's capacity still bounds what its readers hold.) */
    if (got > 0)
        return QF_OK;
    rc = r->ops->next(r, sk->scratch, &produced, at_end);
    if (rc == QF_OK && produced) {
        qf_element *e = NULL;
        rc = qf_record_to_element(sk->scratch, &e);
        sk->slots[got] = e;
        *made = rc == QF_OK;
    }
    return rc;
}

/* The current file has nothing to read yet (a pipe, a terminal): wait as
 * the call's form says. QF_OK means "try again now". */
static qf_code wait_file(qf_reader *r, const waiter *w)
{
    qf_code rc;
    switch (w->mode) {
    case WAIT_POLL:
        rc = qf__fdwatch_arm(&r->rb.watch, r->rb.fd, w->waker);
        return rc == QF_OK ? QF_PENDING : rc;
    case WAIT_TRY:
        return qf_set_error(QF_UNAVAILABLE, "%s: nothing to read from '%s' yet", r->name, r->work);
    default:
        if (qf__in_task())
            return qf__blocking_in_task_error("qf_reader_read on a non-regular file");
        return qf__fd_wait_readable(r->rb.fd, w->deadline);
    }
}

/* Open the current work item (r->work) and, after a restore, move to the
 * saved position. An error drops the item. */
static qf_code start_item(qf_reader *r)
{
    if (r->ops->reads_files && memchr(r->work, '\0', r->work_len))
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: file name contains a NUL byte", r->name);
    r->file_done = false;
    r->index = 0;
    r->skip_left = 0;
    r->carry_len = 0;
    r->tf_stage = 0;
    qf_code rc = r->ops->start(r);
    if (rc != QF_OK) {
        r->ops->finish(r); /* the item is dropped, as TensorFlow does */
        r->resume_pending = false;
        return rc;
    }
    r->in_progress = true;
    if (r->resume_pending) {
        r->index = r->resume_index;
        r->skip_left = r->resume_skip;
        r->resume_seek = true;
        r->resume_pending = false;
    }
    return QF_OK;
}

/* After a restore: move the freshly opened item to the saved position. */
static qf_code apply_resume(qf_reader *r)
{
    if (r->ops->resume)
        return r->ops->resume(r);
    bool ok = true;
    qf_code rc = qf__rbuf_seek(&r->rb, r->resume_off, &ok);
    if (rc == QF_OK && !ok)
        r->file_done = true; /* shorter than it was: it simply ends */
    return rc;
}

static qf_code check_read_args(const qf_reader *r, const qf_queue *q, size_t n, const waiter *w,
                               const sink *sk, const size_t *ret_n)
{
    if (!r || !q || !ret_n || (n && !sk->recs && !sk->slots) || (w->mode == WAIT_POLL && !w->waker))
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !r                                  ? "reader"
                            : !q                                ? "work queue"
                            : !ret_n                            ? "ret_n"
                            : !w->waker && w->mode == WAIT_POLL ? "waker"
                                                                : "records");
    return QF_OK;
}

/* The error an earlier call met after it had records to return, now
 * returned (once). */
static qf_code report_deferred(qf_reader *r)
{
    qf_status *d = r->deferred;
    r->deferred = NULL;
    qf_code code = qf_set_error(qf_status_code(d), "%s", qf_status_message(d));
    qf_status_free(d);
    return code;
}

/* An item in progress: the next one from the work queue, started. */
static qf_code begin_item(qf_reader *r, qf_queue *q, const waiter *w)
{
    if (r->in_progress)
        return QF_OK;
    /* Only here with nothing produced yet (see the top). A restored state
     * names its item itself. */
    if (!r->resume_pending) {
        qf_code rc = next_work(r, q, w);
        if (rc != QF_OK)
            return rc;
    }
    return start_item(r);
}

/* Records of the item in progress into the sink, from *got up to n: until
 * the item's end (*at_end), an error or QF_PENDING, or produce() stopping
 * short of waiting (*stopped). */
static qf_code produce_records(qf_reader *r, const sink *sk, size_t n, size_t *got, bool *at_end,
                               bool *stopped)
{
    qf_code rc = QF_OK;
    if (r->resume_seek) {
        rc = apply_resume(r);
        if (rc == QF_OK)
            r->resume_seek = false;
    }
    while (rc == QF_OK && *got < n && !*at_end && !*stopped) {
        size_t made = 0;
        rc = produce(r, sk, *got, n, &made, at_end);
        *got += made;
        if (rc != QF_OK)
            break;
        *stopped = made == 0 && !*at_end && sk->slots && *got > 0;
    }
    return rc;
}

static qf_code read_into(qf_reader *r, qf_queue *q, size_t n, const waiter *w, const sink *sk,
                         size_t *ret_n)
{
    qf_code rc = check_read_args(r, q, n, w, sk, ret_n);
    if (rc != QF_OK)
        return rc;
    if (r->deferred)
        return report_deferred(r);
    size_t got = 0;
    while (got < n) {
        if ((rc = begin_item(r, q, w)) != QF_OK)
            return rc;
        bool at_end = false;
        size_t before = got;
        bool stopped = false; /* produce() stopped short of waiting (see there) */
        rc = produce_records(r, sk, n, &got, &at_end, &stopped);
        if (got > before)
            bump(&r->produced, (int64_t)(got - before));
        if (rc == QF_PENDING) {
            /* A non-regular file has nothing yet; what was read of the
             * record so far stays in the reader. Records in hand go out
             * now rather than wait. */
            if (got > 0)
                break;
            rc = wait_file(r, w);
            if (rc == QF_OK)
                continue;
            return rc; /* QF_PENDING, or the wait's error: the item stays */
        }
        if (rc != QF_OK) {
            /* An error inside the item: abandon it (not completed). */
            finish_work(r);
            if (got == 0)
                return rc;
            r->deferred = qf_last_status();
            break;
        }
        if (stopped)
            break;
        if (at_end) {
            finish_work(r);
            bump(&r->completed, 1);
            if (got > 0)
                break; /* spec 189: return at the end of a file */
        }
    }
    *ret_n = got;
    return QF_OK;
}

qf_code qf__reader_begin(qf_reader *r, const char *path)
{
    finish_work(r);
    r->resume_pending = false;
    r->resume_seek = false;
    size_t len = strlen(path);
    qf_code rc = qf__reserve(&r->work, &r->work_cap, len);
    if (rc != QF_OK)
        return rc;
    memcpy(r->work, path, len + 1);
    r->work_len = len;
    return start_item(r);
}

qf_code qf__reader_next_in_item(qf_reader *r, qf_deadline deadline, qf_record *rec,
                                bool *ret_at_end)
{
    waiter w = {WAIT_DEADLINE, deadline, NULL};
    *ret_at_end = false;
    if (!r->in_progress) {
        *ret_at_end = true;
        return QF_OK;
    }
    for (;;) {
        bool produced = false, at_end = false;
        qf_code rc = r->ops->next(r, rec, &produced, &at_end);
        if (rc == QF_PENDING) {
            rc = wait_file(r, &w);
            if (rc == QF_OK)
                continue;
            return rc;
        }
        /* The item stays open after an error or at its end: the
         * iterator may go back to its last good record
         * (qf__reader_rewind_item). */
        if (rc != QF_OK)
            return rc;
        if (produced)
            bump(&r->produced, 1);
        if (at_end)
            bump(&r->completed, 1);
        if (produced || at_end) {
            *ret_at_end = at_end && !produced;
            return QF_OK;
        }
    }
}

qf_code qf__reader_rewind_item(qf_reader *r, uint64_t off, bool *ret_ok)
{
    if (!r->in_progress || r->rb.fd < 0 || r->rb.nonblock)
        return qf_set_error(QF_FAILED_PRECONDITION, "'%s' cannot be read again", r->work);
    r->tf_stage = 0;
    r->carry_len = 0;
    return qf__rbuf_rewind(&r->rb, off, ret_ok);
}

static qf_code read_records(qf_reader *r, qf_queue *q, size_t n, const waiter *w, qf_record *recs,
                            size_t *ret_n)
{
    sink sk = {.recs = recs};
    return read_into(r, q, n, w, &sk, ret_n);
}

qf_code qf__reader_poll_read_slots(qf_reader *r, qf_queue *work, qf_waker *waker, size_t n,
                                   qf_record *scratch, void **ret_slots, size_t *ret_n)
{
    waiter w = {WAIT_POLL, QF_NO_WAIT, waker};
    sink sk = {.slots = ret_slots, .scratch = scratch};
    if (!scratch || !ret_slots)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", scratch ? "ret_slots" : "scratch");
    return read_into(r, work, n, &w, &sk, ret_n);
}

static qf_code read_one(qf_reader *r, qf_queue *q, const waiter *w, qf_record *rec)
{
    if (!rec)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_rec");
    size_t got;
    return read_records(r, q, 1, w, rec, &got);
}

qf_code qf_reader_read(qf_reader *r, qf_queue *work, qf_record *ret_rec)
{
    waiter w = {WAIT_DEADLINE, QF_FOREVER, NULL};
    return read_one(r, work, &w, ret_rec);
}

qf_code qf_reader_read_until(qf_reader *r, qf_queue *work, qf_deadline deadline, qf_record *ret_rec)
{
    waiter w = {WAIT_DEADLINE, deadline, NULL};
    return read_one(r, work, &w, ret_rec);
}

qf_code qf_reader_try_read(qf_reader *r, qf_queue *work, qf_record *ret_rec)
{
    waiter w = {WAIT_TRY, QF_NO_WAIT, NULL};
    return read_one(r, work, &w, ret_rec);
}

qf_code qf_reader_poll_read(qf_reader *r, qf_queue *work, qf_waker *waker, qf_record *ret_rec)
{
    waiter w = {WAIT_POLL, QF_NO_WAIT, waker};
    return read_one(r, work, &w, ret_rec);
}

qf_code qf_reader_read_up_to(qf_reader *r, qf_queue *work, size_t n, qf_record *ret_recs,
                             size_t *ret_n)
{
    waiter w = {WAIT_DEADLINE, QF_FOREVER, NULL};
    return read_records(r, work, n, &w, ret_recs, ret_n);
}

qf_code qf_reader_read_up_to_until(qf_reader *r, qf_queue *work, size_t n, qf_deadline deadline,
                                   qf_record *ret_recs, size_t *ret_n)
{
    waiter w = {WAIT_DEADLINE, deadline, NULL};
    return read_records(r, work, n, &w, ret_recs, ret_n);
}

qf_code qf_reader_try_read_up_to(qf_reader *r, qf_queue *work, size_t n, qf_record *ret_recs,
                                 size_t *ret_n)
{
    waiter w = {WAIT_TRY, QF_NO_WAIT, NULL};
    return read_records(r, work, n, &w, ret_recs, ret_n);
}

qf_code qf_reader_poll_read_up_to(qf_reader *r, qf_queue *work, size_t n, qf_waker *waker,
                                  qf_record *ret_recs, size_t *ret_n)
{
    waiter w = {WAIT_POLL, QF_NO_WAIT, waker};
    return read_records(r, work, n, &w, ret_recs, ret_n);
}
