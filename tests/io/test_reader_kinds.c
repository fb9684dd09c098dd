/* test_reader_kinds.c - WholeFileReader, LMDBReader, and the warning a
 * reader gives for a file that shrinks under it (qf_reader.h).
 *
 * LMDB environments are made by the tests with liblmdb itself; without
 * liblmdb at build time the LMDB tests check that the reader refuses with
 * QF_UNIMPLEMENTED and say why they skipped the rest.
 */
#include "qf_test_io.h"

#ifdef QF_HAVE_LMDB
#include <lmdb.h>
#endif

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(reader_kinds, .timeout = 240);
#endif

/* ============================================================ WholeFile */

Test(reader_kinds, whole_file_reader_returns_name_and_contents_one_file_per_read)
{
    tdir d;
    tdir_make(&d);
    const char bin[] = {'a', 0, 'b', '\n', (char)0xff};
    const char *a = write_bytes(&d, "a.bin", bin, sizeof(bin));
    const char *e = write_bytes(&d, "empty", "", 0);
    size_t big_len = 700000;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)(i * 13);
    const char *b = write_bytes(&d, "big", big, big_len);
    qf_reader *r = NULL;
    OK(qf_whole_file_reader_new(&r));
    cr_expect_str_eq(qf_reader_kind_name(r), "WholeFileReader");
    cr_expect_eq(qf_reader_get_kind(r), QF_READER_WHOLE_FILE);
    qf_queue *q = work_queue();
    put_all(q, a, e, b, "/nonexistent/file", NULL);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.key, a);
    cr_expect_eq(rec.value_len, sizeof(bin));
    cr_expect(memcmp(rec.value, bin, sizeof(bin)) == 0);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.key, e);
    cr_expect_eq(rec.value_len, 0, "an empty file is one empty record");
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.key, b);
    cr_expect_eq(rec.value_len, big_len);
    cr_expect(memcmp(rec.value, big, big_len) == 0);
    REFUSED(qf_reader_read(r, q, &rec), QF_NOT_FOUND,
            "/nonexistent/file; No such file or directory"); /* spec 188 */
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_records_produced(r), 3);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 3);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(big);
    tdir_remove(&d);
}

Test(reader_kinds, whole_file_reader_bounds_files_with_max_record_bytes)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "0123456789");
    const char *b = write_str(&d, "b", "0123");
    qf_reader_options ro = {.kind = QF_READER_WHOLE_FILE, .max_record_bytes = 5};
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    qf_queue *q = work_queue();
    put_all(q, a, b, NULL);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_read(r, q, &rec), QF_RESOURCE_EXHAUSTED, "is larger than max_record_bytes 5");
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.value, "0123");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

Test(reader_kinds, whole_file_reader_works_in_read_up_to_and_from_a_directory_error)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "A");
    const char *b = write_str(&d, "b", "B");
    qf_reader *r = NULL;
    OK(qf_whole_file_reader_new(&r));
    qf_queue *q = work_queue();
    put_all(q, d.path, a, b, NULL);
    close_q(q);
    qf_record recs[4] = {QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT};
    size_t n = 0;
    REFUSED(qf_reader_read_up_to(r, q, 4, recs, &n), QF_FAILED_PRECONDITION, "Is a directory");
    OK(qf_reader_read_up_to(r, q, 4, recs, &n));
    cr_expect_eq(n, 1, "spec 189: read_up_to returns at the end of a file");
    cr_expect_str_eq(recs[0].value, "A");
    OK(qf_reader_read_up_to(r, q, 4, recs, &n));
    cr_expect_str_eq(recs[0].value, "B");
    qf_records_clear(recs, 4);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* ================================================================= LMDB */

#ifdef QF_HAVE_LMDB

/* An environment (directory, or one data file with MDB_NOSUBDIR) holding
 * the pairs, put in the order given. */
static void make_lmdb(const char *path, bool subdir, const char *const *kv, size_t n)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    cr_assert_eq(mdb_env_create(&env), 0);
    cr_assert_eq(mdb_env_set_mapsize(env, (size_t)1 << 20), 0);
    if (subdir)
        cr_assert_eq(mkdir(path, 0700), 0);
    cr_assert_eq(mdb_env_open(env, path, subdir ? 0 : MDB_NOSUBDIR, 0600), 0);
    cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    for (size_t i = 0; i < n; i++) {
        MDB_val k = {strlen(kv[2 * i]), (void *)kv[2 * i]};
        MDB_val v = {strlen(kv[2 * i + 1]), (void *)kv[2 * i + 1]};
        cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
    }
    cr_assert_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void rm_lmdb(const char *dir)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/data.mdb", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/lock.mdb", dir);
    unlink(p);
    rmdir(dir);
}

Test(reader_kinds, lmdb_reader_returns_pairs_in_key_order)
{
    tdir d;
    tdir_make(&d);
    const char *kv[] = {"key3", "three", "key1", "one", "key10", "ten", "key2", "two"};
    char env[300];
    snprintf(env, sizeof(env), "%s", tpath(&d, "env"));
    make_lmdb(env, true, kv, 4);
    char file[300];
    snprintf(file, sizeof(file), "%s", tpath(&d, "single.mdb"));
    const char *kv2[] = {"b", "B", "a", "A"};
    make_lmdb(file, false, kv2, 2);
    qf_reader *r = NULL;
    OK(qf_lmdb_reader_new(&r));
    cr_expect_str_eq(qf_reader_kind_name(r), "LMDBReader");
    cr_expect(qf_reader_have_lmdb());
    qf_queue *q = work_queue();
    put_all(q, env, file, "/nonexistent/env", NULL);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    const char *want[][2] = {{"key1", "one"},   {"key10", "ten"}, {"key2", "two"},
                             {"key3", "three"}, {"a", "A"},       {"b", "B"}};
    for (int i = 0; i < 6; i++) {
        OK(qf_reader_read(r, q, &rec));
        cr_expect_str_eq(rec.key, want[i][0]);
        cr_expect_str_eq(rec.value, want[i][1]);
    }
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1, "the second env is still current");
    REFUSED(qf_reader_read(r, q, &rec), QF_NOT_FOUND, "/nonexistent/env; ");
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_records_produced(r), 6);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 2);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    rm_lmdb(env);
    tdir_remove(&d);
}

Test(reader_kinds, lmdb_reader_on_a_damaged_file_fails_without_crashing)
{
    tdir d;
    tdir_make(&d);
    char junk[8192];
    memset(junk, 0x5a, sizeof(junk));
    const char *p = write_bytes(&d, "junk.mdb", junk, sizeof(junk));
    qf_reader *r = NULL;
    OK(qf_lmdb_reader_new(&r));
    qf_queue *q = work_queue();
    put(q, p);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    qf_code rc = qf_reader_read(r, q, &rec);
    cr_expect(rc != QF_OK, "junk read as an environment");
    cr_expect(has(qf_last_message(), p), "%s", qf_last_message());
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

#else

Test(reader_kinds, lmdb_reader_is_unimplemented_without_liblmdb)
{
    cr_log_info("liblmdb was not found at build time: LMDB tests skipped "
                "(apt-get install liblmdb-dev)");
    qf_reader *r = NULL;
    REFUSED(qf_lmdb_reader_new(&r), QF_UNIMPLEMENTED, "built without LMDB");
    cr_expect(!qf_reader_have_lmdb());
}

#endif

/* ========================================================= shrinking files */

static int g_warned;
static char g_warning[256];

static void on_warning(void *arg, const qf_reader *r, const char *message)
{
    (void)r;
    *(int *)arg += 1;
    snprintf(g_warning, sizeof(g_warning), "%s", message);
}

Test(reader_kinds, a_file_truncated_while_read_gives_a_counted_warning)
{
    tdir d;
    tdir_make(&d);
    /* 3 lines of 100 bytes; a 16-byte buffer reads them in small chunks. */
    char text[303];
    for (int l = 0; l < 3; l++) {
        memset(text + l * 101, 'a' + l, 100);
        text[l * 101 + 100] = '\n';
    }
    const char *p = write_bytes(&d, "t", text, 303);
    g_warned = 0;
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE,
                            .buffer_bytes = 16,
                            .on_warning = on_warning,
                            .warning_arg = &g_warned};
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    qf_queue *q = work_queue();
    put(q, p);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    OK(qf_reader_read(r, q, &rec));
    cr_expect_eq(rec.value_len, 100);
    cr_expect_eq(qf_reader_num_warnings(r), 0);
    cr_expect_str_eq(qf_reader_last_warning(r), "");
    cr_assert_eq(truncate(p, 150), 0); /* the second line is cut in half */
    OK(qf_reader_read(r, q, &rec));
    cr_expect_lt(rec.value_len, 100, "the torn line comes out as it is");
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_warnings(r), 1);
    cr_expect_eq(g_warned, 1);
    cr_expect(has(qf_reader_last_warning(r), "shrank while being read: 303 bytes at open"), "%s",
              qf_reader_last_warning(r));
    cr_expect(has(g_warning, "its last record may be torn"), "%s", g_warning);
    qf_reader_reset(r);
    cr_expect_eq(qf_reader_num_warnings(r), 1, "reset keeps warnings");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    cr_expect_eq(qf_reader_num_warnings(NULL), 0);
    cr_expect_str_eq(qf_reader_last_warning(NULL), "");
    tdir_remove(&d);
}
