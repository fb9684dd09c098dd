/* test_reader_state.c - qf_reader_serialize_state / restore_state for every
 * reader kind (spec 186-187 for the counters they carry), so that a
 * pipeline can resume a file where it stopped; and the refusals: another
 * kind's state, other parameters, a corrupt, truncated or future-version
 * state, each a clear INVALID_ARGUMENT that changes nothing.
 *
 * The check for each kind: read everything with one reader (the reference);
 * then for several split points k, read k records with reader B, save its
 * state, restore it on a fresh reader C sharing the same work queue, and
 * read on: B's k records followed by C's must be the reference, keys
 * included, and C's counters must continue B's.
 */
#include <zlib.h>

#include "qf_test_io.h"

#ifdef QF_HAVE_LMDB
#include <lmdb.h>
#endif

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(reader_state, .timeout = 240);
#endif

#define MAXR 400

typedef struct rlist {
    char *k[MAXR];
    char *v[MAXR];
    size_t vlen[MAXR];
    int n;
} rlist;

static void rl_add(rlist *l, const qf_record *rec)
{
    cr_assert_lt(l->n, MAXR);
    l->k[l->n] = strdup(rec->key);
    l->v[l->n] = malloc(rec->value_len + 1);
    memcpy(l->v[l->n], rec->value, rec->value_len + 1);
    l->vlen[l->n] = rec->value_len;
    l->n++;
}

static void rl_free(rlist *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->k[i]);
        free(l->v[i]);
    }
    l->n = 0;
}

static qf_queue *files_queue(const char *const *files, int nfiles)
{
    qf_queue *q = work_queue_opts(100, true);
    for (int i = 0; i < nfiles; i++)
        put(q, files[i]);
    close_q(q);
    return q;
}

static void read_rest(qf_reader *r, qf_queue *q, rlist *l, int max)
{
    qf_record rec = QF_RECORD_INIT;
    qf_code rc;
    while (l->n < max && (rc = qf_reader_read(r, q, &rec)) != QF_OUT_OF_RANGE) {
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        rl_add(l, &rec);
    }
    qf_record_clear(&rec);
}

static void check_resume(const qf_reader_options *ro, const char *const *files, int nfiles)
{
    qf_reader *a = NULL;
    OK(qf_reader_new(ro, &a));
    qf_queue *qa = files_queue(files, nfiles);
    rlist ref = {0};
    read_rest(a, qa, &ref, MAXR);
    cr_assert_gt(ref.n, 0);
    int64_t ref_completed = qf_reader_num_work_units_completed(a);
    qf_reader_free(a);
    qf_queue_unref(qa);
    int splits[] = {0, 1, 2, ref.n / 2, ref.n - 1, ref.n};
    for (size_t s = 0; s < sizeof(splits) / sizeof(splits[0]); s++) {
        int k = splits[s];
        qf_reader *b = NULL, *c = NULL;
        OK(qf_reader_new(ro, &b));
        OK(qf_reader_new(ro, &c));
        qf_queue *q = files_queue(files, nfiles);
        rlist got = {0};
        read_rest(b, q, &got, k);
        void *st = NULL;
        size_t st_len = 0;
        OK(qf_reader_serialize_state(b, &st, &st_len));
        OK(qf_reader_restore_state(c, st, st_len));
        cr_expect_eq(qf_reader_num_records_produced(c), k);
        cr_expect_eq(qf_reader_num_work_units_completed(c), qf_reader_num_work_units_completed(b));
        /* A restored, unread reader saves the same state again. */
        void *st2 = NULL;
        size_t st2_len = 0;
        OK(qf_reader_serialize_state(c, &st2, &st2_len));
        cr_expect(st2_len == st_len && memcmp(st, st2, st_len) == 0, "state not stable");
        free(st2);
        free(st);
        read_rest(c, q, &got, MAXR);
        cr_assert_eq(got.n, ref.n, "%s split %d: %d records, want %d", qf_reader_kind_name(c), k,
                     got.n, ref.n);
        for (int i = 0; i < ref.n; i++) {
            cr_assert_str_eq(got.k[i], ref.k[i], "split %d record %d key", k, i);
            cr_assert(got.vlen[i] == ref.vlen[i] && !memcmp(got.v[i], ref.v[i], ref.vlen[i]),
                      "split %d record %d value", k, i);
        }
        cr_expect_eq(qf_reader_num_records_produced(c), ref.n);
        cr_expect_eq(qf_reader_num_work_units_completed(c), ref_completed);
        rl_free(&got);
        qf_reader_free(b);
        qf_reader_free(c);
        qf_queue_unref(q);
    }
    rl_free(&ref);
}

static const char *text_file(const tdir *d, const char *name, int lines)
{
    char *buf = malloc((size_t)lines * 40 + 1);
    size_t n = 0;
    for (int i = 0; i < lines; i++)
        n += (size_t)sprintf(buf + n, "%s line %d%s\n", name, i, i % 7 == 3 ? " is long-ish" : "");
    const char *p = write_bytes(d, name, buf, n);
    free(buf);
    return p;
}

Test(reader_state, text_line_reader_resumes_mid_file_and_counts_header_lines) /* spec 186, 195 */
{
    tdir d;
    tdir_make(&d);
    const char *f[] = {text_file(&d, "t0", 20), text_file(&d, "t1", 1), text_file(&d, "t2", 9)};
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .skip_header_lines = 2};
    check_resume(&ro, f, 3);
    ro.buffer_bytes = 16; /* lines longer than the buffer go through the carry */
    check_resume(&ro, f, 3);
    tdir_remove(&d);
}

static const char *fixed_file(const tdir *d, const char *name, qf_compression c)
{
    char raw[5 + 26 * 3 + 2];
    memcpy(raw, "HHHHH", 5);
    for (int i = 0; i < 26 * 3; i++)
        raw[5 + i] = (char)('a' + i / 3);
    memcpy(raw + 5 + 78, "FF", 2);
    if (c == QF_COMPRESSION_NONE)
        return write_bytes(d, name, raw, sizeof(raw));
    unsigned char z[512];
    uLongf zn = sizeof(z);
    cr_assert_eq(compress2(z, &zn, (const Bytef *)raw, sizeof(raw), 9), Z_OK);
    return write_bytes(d, name, z, zn);
}

Test(reader_state, fixed_length_reader_resumes_plain_and_zlib_with_hops) /* spec 197-200 */
{
    tdir d;
    tdir_make(&d);
    const char *f[] = {fixed_file(&d, "f0", QF_COMPRESSION_NONE),
                       fixed_file(&d, "f1", QF_COMPRESSION_NONE)};
    qf_reader_options ro = {.kind = QF_READER_FIXED_LENGTH_RECORD,
                            .record_bytes = 3,
                            .header_bytes = 5,
                            .footer_bytes = 2};
    check_resume(&ro, f, 2);
    ro.hop_bytes = 2;
    check_resume(&ro, f, 2);
    const char *z[] = {fixed_file(&d, "z0", QF_COMPRESSION_ZLIB),
                       fixed_file(&d, "z1", QF_COMPRESSION_ZLIB)};
    ro.compression = QF_COMPRESSION_ZLIB;
    ro.hop_bytes = 4;
    check_resume(&ro, z, 2);
    tdir_remove(&d);
}

static const char *tfrecord_file(const tdir *d, const char *name, qf_compression c, int n)
{
    const char *p = tpath(d, name);
    qf_tfrecord_options o = {.compression = c};
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, &o, &w));
    for (int i = 0; i < n; i++) {
        char b[64];
        int len = snprintf(b, sizeof(b), "%s record %d", name, i);
        OK(qf_tfrecord_writer_write(w, b, (size_t)(i % 5 == 4 ? 0 : len)));
    }
    OK(qf_tfrecord_writer_close(w));
    return p;
}

Test(reader_state, tfrecord_reader_resumes_at_the_record_offset_compressed_or_not)
{
    tdir d;
    tdir_make(&d);
    const char *f[] = {tfrecord_file(&d, "r0", QF_COMPRESSION_NONE, 12),
                       tfrecord_file(&d, "r1", QF_COMPRESSION_NONE, 3)};
    qf_reader_options ro = {.kind = QF_READER_TFRECORD};
    check_resume(&ro, f, 2);
    const char *g[] = {tfrecord_file(&d, "g0", QF_COMPRESSION_GZIP, 12),
                       tfrecord_file(&d, "g1", QF_COMPRESSION_GZIP, 3)};
    ro.compression = QF_COMPRESSION_GZIP;
    ro.buffer_bytes = 16;
    check_resume(&ro, g, 2);
    tdir_remove(&d);
}

Test(reader_state, whole_file_and_identity_readers_resume_their_counters)
{
    tdir d;
    tdir_make(&d);
    const char *f[] = {write_str(&d, "w0", "zero"), write_str(&d, "w1", ""),
                       write_str(&d, "w2", "two")};
    qf_reader_options ro = {.kind = QF_READER_WHOLE_FILE};
    check_resume(&ro, f, 3);
    const char *ids[] = {"A", "B", "C", "D"};
    ro = (qf_reader_options){.kind = QF_READER_IDENTITY};
    check_resume(&ro, ids, 4);
    tdir_remove(&d);
}

/* TensorFlow's IdentityReader testSerializeRestore: a state cut at either
 * end, with junk after it, with a prefix, or with its first bytes
 * replaced is refused with "Could not parse state for IdentityReader
 * 'test_reader'"; the reader is left as it was, and the state itself
 * still restores. */
Test(reader_state, damaged_states_are_refused_in_tensorflows_words)
{
    qf_reader *r = NULL;
    qf_reader_options ro = {.kind = QF_READER_IDENTITY, .name = "test_reader"};
    cr_assert_eq(qf_reader_new(&ro, &r), QF_OK);
    qf_queue *q = work_queue();
    put(q, "X");
    put(q, "Y");
    put(q, "Z");
    qf_record rec = QF_RECORD_INIT;
    cr_assert_eq(qf_reader_read(r, q, &rec), QF_OK);
    cr_expect(rec.value_len == 1 && rec.value[0] == 'X');
    void *st = NULL;
    size_t n = 0;
    cr_assert_eq(qf_reader_serialize_state(r, &st, &n), QF_OK);
    cr_assert_gt(n, 5);
    unsigned char *b = malloc(n + 16);
    cr_assert_not_null(b);
    const char *const want = "Could not parse state for IdentityReader 'test_reader'";
    for (int k = 0; k < 5; k++) {
        size_t len = 0;
        switch (k) {
        case 0: /* state[1:] */
            memcpy(b, (char *)st + 1, len = n - 1);
            break;
        case 1: /* state[:-1] */
            memcpy(b, st, len = n - 1);
            break;
        case 2:
            memcpy(b, st, n);
            memcpy(b + n, "ExtraJunk", 9);
            len = n + 9;
            break;
        case 3:
            memcpy(b, "PREFIX", 6);
            memcpy(b + 6, st, n);
            len = n + 6;
            break;
        default:
            memcpy(b, "BOGUS", 5);
            memcpy(b + 5, (char *)st + 5, n - 5);
            len = n;
            break;
        }
        cr_expect_eq(qf_reader_restore_state(r, b, len), QF_INVALID_ARGUMENT, "case %d", k);
        cr_expect(strstr(qf_last_message(), want), "case %d: %s", k, qf_last_message());
    }
    cr_expect_eq(qf_reader_num_records_produced(r), 1, "a refused state changes nothing");
    cr_assert_eq(qf_reader_restore_state(r, st, n), QF_OK);
    cr_assert_eq(qf_reader_read(r, q, &rec), QF_OK);
    cr_expect(rec.value_len == 1 && rec.value[0] == 'Y');
    qf_record_clear(&rec);
    free(b);
    free(st);
    qf_reader_free(r);
    qf_queue_unref(q);
}

#ifdef QF_HAVE_LMDB
Test(reader_state, lmdb_reader_resumes_after_the_saved_key)
{
    tdir d;
    tdir_make(&d);
    char env[300];
    snprintf(env, sizeof(env), "%s", tpath(&d, "db.mdb"));
    MDB_env *e;
    MDB_txn *t;
    MDB_dbi dbi;
    cr_assert_eq(mdb_env_create(&e), 0);
    cr_assert_eq(mdb_env_open(e, env, MDB_NOSUBDIR, 0600), 0);
    cr_assert_eq(mdb_txn_begin(e, NULL, 0, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, NULL, 0, &dbi), 0);
    for (int i = 0; i < 30; i++) {
        char k[16], v[16];
        snprintf(k, sizeof(k), "k%03d", (i * 7) % 30);
        snprintf(v, sizeof(v), "v%d", i);
        MDB_val mk = {strlen(k), k}, mv = {strlen(v), v};
        cr_assert_eq(mdb_put(t, dbi, &mk, &mv, 0), 0);
    }
    cr_assert_eq(mdb_txn_commit(t), 0);
    mdb_env_close(e);
    const char *f[] = {env, env};
    qf_reader_options ro = {.kind = QF_READER_LMDB};
    check_resume(&ro, f, 2);
    char lock[320];
    snprintf(lock, sizeof(lock), "%s-lock", env);
    unlink(lock);
    tdir_remove(&d);
}
#endif

/* ============================================================= refusals */

/* A text reader in the middle of a file, and its state. */
typedef struct mid {
    tdir d;
    qf_reader *r;
    qf_queue *q;
    qf_record rec;
    void *st;
    size_t st_len;
} mid;

static void mid_make(mid *m)
{
    tdir_make(&m->d);
    const char *f = write_str(&m->d, "m", "one\ntwo\nthree\n");
    m->r = NULL;
    OK(qf_text_line_reader_new(0, &m->r));
    m->q = work_queue();
    put(m->q, f);
    close_q(m->q);
    qf_record_init(&m->rec);
    OK(qf_reader_read(m->r, m->q, &m->rec));
    OK(qf_reader_serialize_state(m->r, &m->st, &m->st_len));
}

static void mid_expect_unchanged(mid *m)
{
    cr_expect_eq(qf_reader_num_records_produced(m->r), 1, "a refused restore changed counters");
    OK(qf_reader_read(m->r, m->q, &m->rec));
    cr_expect_str_eq(m->rec.value, "two", "a refused restore moved the reader");
}

static void mid_free(mid *m)
{
    free(m->st);
    qf_record_clear(&m->rec);
    qf_reader_free(m->r);
    qf_queue_unref(m->q);
    tdir_remove(&m->d);
}

Test(reader_state, another_kinds_state_is_refused_and_changes_nothing)
{
    mid m;
    mid_make(&m);
    qf_reader *tf = NULL;
    OK(qf_tfrecord_reader_new(&tf));
    void *st = NULL;
    size_t n = 0;
    OK(qf_reader_serialize_state(tf, &st, &n));
    REFUSED(qf_reader_restore_state(m.r, st, n), QF_INVALID_ARGUMENT,
            "reader state is from a TFRecordReader, not a TextLineReader");
    mid_expect_unchanged(&m);
    free(st);
    qf_reader_free(tf);
    mid_free(&m);
}

Test(reader_state, other_parameters_are_refused)
{
    mid m;
    mid_make(&m);
    qf_reader *r2 = NULL;
    OK(qf_text_line_reader_new(1, &r2));
    REFUSED(qf_reader_restore_state(r2, m.st, m.st_len), QF_INVALID_ARGUMENT,
            "reader state was made with other parameters");
    cr_expect_eq(qf_reader_num_records_produced(r2), 0);
    qf_reader_free(r2);
    mid_free(&m);
}

Test(reader_state, corrupt_truncated_and_future_states_are_refused_and_change_nothing)
{
    mid m;
    mid_make(&m);
    unsigned char *b = malloc(m.st_len);
    /* Every single flipped byte is caught. */
    for (size_t i = 0; i < m.st_len; i++) {
        memcpy(b, m.st, m.st_len);
        b[i] ^= 0x40;
        cr_expect_eq(qf_reader_restore_state(m.r, b, m.st_len), QF_INVALID_ARGUMENT,
                     "byte %zu flipped was accepted", i);
    }
    /* Every truncation too. */
    for (size_t n = 0; n < m.st_len; n++)
        cr_expect_eq(qf_reader_restore_state(m.r, m.st, n), QF_INVALID_ARGUMENT,
                     "%zu bytes accepted", n);
    memcpy(b, m.st, m.st_len);
    b[0] = 'X';
    REFUSED(qf_reader_restore_state(m.r, b, m.st_len), QF_INVALID_ARGUMENT, "not a reader state");
    memcpy(b, m.st, m.st_len);
    b[1] ^= 1;
    b[4] = 2; /* version 2, with a CRC that would not match either */
    REFUSED(qf_reader_restore_state(m.r, b, m.st_len), QF_INVALID_ARGUMENT, "not a reader state");
    memcpy(b, m.st, m.st_len);
    b[4] = 9;
    REFUSED(qf_reader_restore_state(m.r, b, m.st_len), QF_INVALID_ARGUMENT,
            "reader state version 9 is not supported");
    memcpy(b, m.st, m.st_len);
    b[20] ^= 1;
    REFUSED(qf_reader_restore_state(m.r, b, m.st_len), QF_INVALID_ARGUMENT,
            "reader state is corrupt (checksum mismatch)");
    REFUSED(qf_reader_restore_state(m.r, NULL, 4), QF_INVALID_ARGUMENT, "NULL state");
    REFUSED(qf_reader_restore_state(NULL, m.st, m.st_len), QF_INVALID_ARGUMENT, "NULL reader");
    void *out = NULL;
    size_t out_len = 0;
    REFUSED(qf_reader_serialize_state(m.r, NULL, &out_len), QF_INVALID_ARGUMENT, "NULL ret_buf");
    cr_expect_eq(out_len, 0);
    cr_expect_null(out);
    mid_expect_unchanged(&m);
    free(b);
    mid_free(&m);
}

Test(reader_state, restore_replaces_the_current_item_and_reset_forgets_it) /* spec 187 */
{
    mid m;
    mid_make(&m);
    /* Read on to "two", then go back to the state saved after "one". */
    OK(qf_reader_read(m.r, m.q, &m.rec));
    cr_expect_str_eq(m.rec.value, "two");
    OK(qf_reader_restore_state(m.r, m.st, m.st_len));
    OK(qf_reader_read(m.r, m.q, &m.rec));
    cr_expect_str_eq(m.rec.value, "two");
    OK(qf_reader_restore_state(m.r, m.st, m.st_len));
    qf_reader_reset(m.r);
    REFUSED(qf_reader_read(m.r, m.q, &m.rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_records_produced(m.r), 0);
    mid_free(&m);
}

Test(reader_state, a_restored_file_that_vanished_fails_the_read_with_the_open_error)
{
    mid m;
    mid_make(&m);
    qf_reader *c = NULL;
    OK(qf_text_line_reader_new(0, &c));
    OK(qf_reader_restore_state(c, m.st, m.st_len));
    char p[300];
    snprintf(p, sizeof(p), "%s", tpath(&m.d, "m"));
    cr_assert_eq(unlink(p), 0);
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_read(c, m.q, &rec), QF_NOT_FOUND, "No such file or directory");
    qf_record_clear(&rec);
    qf_reader_free(c);
    mid_free(&m);
}
