/* test_reader.c - readers (qf_reader.h), item by item against
 * docs/semantics.md items 183-201, plus the TFRecord format, the
 * CRC-32C it uses, file errors, buffer boundaries and use from tasks.
 *
 * Every test writes the files it needs into its own mkdtemp() directory
 * and removes them at the end. TFRecord files are built here from the
 * format's definition with an independent bitwise CRC-32C (checked against
 * the standard vector crc32c("123456789") = 0xE3069283).
 *
 * Items mapped onto their nearest C behaviour:
 *   183    "read blocks" on an open empty queue: a thread form waits until a
 *          producer thread enqueues; the _until form times out; the poll
 *          form returns QF_PENDING with the waker registered.
 *   201    (second half) a file shorter than header_bytes: qflow yields no
 *          records and moves on (documented in qf_reader.h) instead of the
 *          1.x OutOfRange.
 *
 * Deliberate differences documented in qf_reader.h, tested as qflow
 * behaves: after an error inside a file the reader moves on to the next
 * file; read_up_to returns the records it made before such an error and
 * reports the error on the next call.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qf_reader-impl.h" /* white-box: qf__crc32c_* */
#include "qf_test_io.h"
#include "qf_test_park.h"
#include "qflow.h"

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(reader, .timeout = 240);
#endif

/* ----------------------------------------------------------------- reads */

/* Read one record and compare it. */
#define EXPECT_READ(r, q, rec, k, v)                                                               \
    do {                                                                                           \
        OK(qf_reader_read((r), (q), (rec)));                                                       \
        cr_expect_str_eq((rec)->key, (k));                                                         \
        cr_expect_eq((rec)->key_len, strlen(k));                                                   \
        cr_expect_str_eq((rec)->value, (v));                                                       \
        cr_expect_eq((rec)->value_len, strlen(v));                                                 \
    } while (0)

#define EXPECT_END(r, q, rec)                                                                      \
    REFUSED(qf_reader_read((r), (q), (rec)), QF_OUT_OF_RANGE,                                      \
            "is closed and has insufficient elements (requested 1, current size 0)")

static qf_reader *text_reader(int64_t skip)
{
    qf_reader *r = NULL;
    OK(qf_text_line_reader_new(skip, &r));
    return r;
}

static qf_reader *identity_reader(void)
{
    qf_reader *r = NULL;
    OK(qf_identity_reader_new(&r));
    return r;
}

/* =================================================== ReaderBase (183-189) */

/* spec 183 */
Test(reader, read_dequeues_a_work_item_only_when_it_has_none)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a.txt", "l1\nl2\n");
    const char *b = write_str(&d, "b.txt", "m1\n");
    qf_queue *q = work_queue();
    put_all(q, a, b, NULL);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 1), "l1");
    cr_expect_eq(qf_queue_size(q), 1, "one file name taken");
    EXPECT_READ(r, q, &rec, keyf(a, 2), "l2");
    cr_expect_eq(qf_queue_size(q), 1, "still inside the first file");
    EXPECT_READ(r, q, &rec, keyf(b, 1), "m1");
    cr_expect_eq(qf_queue_size(q), 0);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 183 */
Test(reader, closed_empty_work_queue_is_the_queues_out_of_range)
{
    qf_queue *q = work_queue();
    close_q(q);
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    EXPECT_END(r, q, &rec);
    EXPECT_MSG("FIFOQueue 'work' is closed");
    size_t n = 7;
    qf_record recs[4] = {QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT};
    REFUSED(qf_reader_read_up_to(r, q, 4, recs, &n), QF_OUT_OF_RANGE,
            "is closed and has insufficient elements (requested 1, current size 0)");
    cr_expect_eq(n, 7, "*ret_n untouched on failure");
    qf_record poll_rec = QF_RECORD_INIT;
    qf_waker w;
    qf_waker_init_thread(&w);
    REFUSED(qf_reader_poll_read(r, q, &w, &poll_rec), QF_OUT_OF_RANGE, "is closed");
    REFUSED(qf_reader_try_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_records_produced(r), 0);
    qf_record_clear(&rec);
    qf_record_clear(&poll_rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 183 */
Test(reader, read_on_an_open_empty_queue_waits_bounded_by_the_deadline)
{
    qf_queue *q = work_queue();
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_read_until(r, q, qf_deadline_in_s(0.02), &rec), QF_DEADLINE_EXCEEDED, "");
    REFUSED(qf_reader_read_until(r, q, QF_NO_WAIT, &rec), QF_DEADLINE_EXCEEDED, "");
    REFUSED(qf_reader_try_read(r, q, &rec), QF_UNAVAILABLE, "");
    /* Nothing was lost: the reader still works. */
    put(q, "A");
    OK(qf_reader_read_until(r, q, qf_deadline_in_s(60), &rec));
    cr_expect_str_eq(rec.value, "A");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

struct late_put {
    qf_queue *q;
    const char *s;
    int reader_tid; /* put once it waits for a file name */
};

static void *late_put_thread(void *arg)
{
    struct late_put *lp = arg;
    qft_wait_parked(lp->reader_tid, lp->q, 4096, NULL, 10 * 1000000000LL);
    put(lp->q, lp->s);
    return NULL;
}

/* spec 183 */
Test(reader, read_on_an_open_empty_queue_blocks_until_a_file_name_arrives)
{
    qf_queue *q = work_queue();
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    struct late_put lp = {q, "late", qft_tid()};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, late_put_thread, &lp), 0);
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.key, "late");
    cr_expect_str_eq(rec.value, "late");
    pthread_join(th, NULL);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

static void count_wake(qf_waker *w)
{
    atomic_fetch_add((atomic_int *)w->ctx, 1);
}

/* spec 183: the poll form for tasks */
Test(reader, poll_read_is_pending_on_an_empty_open_queue_and_finishes_after_an_enqueue)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a.txt", "hello\nworld\n");
    qf_queue *q = work_queue();
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    atomic_int woken = 0;
    qf_waker w;
    qf_waker_init(&w, count_wake, &woken);
    cr_assert_eq(qf_reader_poll_read(r, q, &w, &rec), QF_PENDING);
    cr_expect_eq(qf_waker_state(&w), QF_WAKER_REGISTERED);
    cr_expect_eq(atomic_load(&woken), 0);
    put(q, a);
    cr_expect_eq(atomic_load(&woken), 1, "the enqueue woke the waker");
    OK(qf_reader_poll_read(r, q, &w, &rec));
    cr_expect_str_eq(rec.key, keyf(a, 1));
    cr_expect_str_eq(rec.value, "hello");
    /* Inside the file: no queue involved, no registration. */
    OK(qf_reader_poll_read(r, q, &w, &rec));
    cr_expect_str_eq(rec.value, "world");
    cr_expect_neq(qf_waker_state(&w), QF_WAKER_REGISTERED);
    /* End of the file, queue empty: pending again, having completed it. */
    cr_assert_eq(qf_reader_poll_read(r, q, &w, &rec), QF_PENDING);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    close_q(q);
    cr_expect_eq(atomic_load(&woken), 2, "the close woke the waker");
    REFUSED(qf_reader_poll_read(r, q, &w, &rec), QF_OUT_OF_RANGE, "is closed");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 183: a pending poll abandoned with the queue's cancel */
Test(reader, pending_poll_can_be_cancelled_on_the_work_queue)
{
    qf_queue *q = work_queue();
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    atomic_int woken = 0;
    qf_waker w;
    qf_waker_init(&w, count_wake, &woken);
    cr_assert_eq(qf_reader_poll_read(r, q, &w, &rec), QF_PENDING);
    cr_expect(qf_queue_cancel_poll(q, &w));
    put(q, "x");
    cr_expect_eq(atomic_load(&woken), 0);
    OK(qf_reader_try_read(r, q, &rec));
    cr_expect_str_eq(rec.value, "x");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 184 */
Test(reader, work_queue_must_have_one_string_component)
{
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;

    qf_dtype two[2] = {QF_STRING, QF_STRING};
    qf_queue_options o = {0};
    o.capacity = 10;
    o.num_components = 2;
    o.dtypes = two;
    qf_queue *q2 = NULL;
    OK(qf_fifo_queue_new(&o, &q2));
    qf_tensor *ts[2] = {qf_tensor_new_cstr("a"), qf_tensor_new_cstr("b")};
    OK(qf_queue_enqueue(q2, qf_element_of(2, ts)));
    REFUSED(qf_reader_read(r, q2, &rec), QF_INVALID_ARGUMENT, "Expected single component queue");
    cr_expect_eq(qf_queue_size(q2), 1, "nothing taken from a wrong queue");

    qf_dtype i32 = QF_INT32;
    o.num_components = 1;
    o.dtypes = &i32;
    qf_queue *qi = NULL;
    OK(qf_fifo_queue_new(&o, &qi));
    qf_tensor *ti = qf_tensor_new_i32(3);
    OK(qf_queue_enqueue(qi, qf_element_of(1, &ti)));
    REFUSED(qf_reader_read(r, qi, &rec), QF_INVALID_ARGUMENT,
            "Expected queue with single string component");
    cr_expect_eq(qf_queue_size(qi), 1);

    /* A string queue without shapes accepts a vector: the dequeued item
     * is refused (and consumed, as in TensorFlow). */
    qf_queue *qv = work_queue_opts(10, false);
    qf_shape sh = QF_SHAPE(2);
    qf_tensor *tv = qf_tensor_new(QF_STRING, &sh);
    OK(qf_tensor_set_string(tv, 0, "a", 1));
    OK(qf_tensor_set_string(tv, 1, "b", 1));
    OK(qf_queue_enqueue(qv, qf_element_of(1, &tv)));
    put(qv, "good");
    REFUSED(qf_reader_read(r, qv, &rec), QF_INVALID_ARGUMENT,
            "Expected to dequeue a one-element string tensor");
    OK(qf_reader_read(r, qv, &rec));
    cr_expect_str_eq(rec.value, "good");

    /* A one-element vector is one element: accepted, as in TensorFlow. */
    qf_shape one = QF_SHAPE(1);
    qf_tensor *t1 = qf_tensor_new(QF_STRING, &one);
    OK(qf_tensor_set_string(t1, 0, "solo", 4));
    OK(qf_queue_enqueue(qv, qf_element_of(1, &t1)));
    OK(qf_reader_read(r, qv, &rec));
    cr_expect_str_eq(rec.value, "solo");

    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q2);
    qf_queue_unref(qi);
    qf_queue_unref(qv);
}

/* spec 184: NULL arguments */
Test(reader, null_arguments_are_invalid)
{
    qf_queue *q = work_queue();
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    size_t n;
    REFUSED(qf_reader_read(NULL, q, &rec), QF_INVALID_ARGUMENT, "NULL");
    REFUSED(qf_reader_read(r, NULL, &rec), QF_INVALID_ARGUMENT, "NULL");
    REFUSED(qf_reader_read(r, q, NULL), QF_INVALID_ARGUMENT, "NULL");
    REFUSED(qf_reader_poll_read(r, q, NULL, &rec), QF_INVALID_ARGUMENT, "NULL");
    REFUSED(qf_reader_read_up_to(r, q, 2, NULL, &n), QF_INVALID_ARGUMENT, "NULL");
    REFUSED(qf_reader_read_up_to(r, q, 2, &rec, NULL), QF_INVALID_ARGUMENT, "NULL");
    REFUSED(qf_reader_new(NULL, &r), QF_INVALID_ARGUMENT, "NULL");
    qf_reader_options o = {0};
    o.kind = (qf_reader_kind)42;
    qf_reader *bad = NULL;
    REFUSED(qf_reader_new(&o, &bad), QF_INVALID_ARGUMENT, "unknown reader kind");
    cr_expect_null(bad);
    qf_reader_free(NULL);
    qf_reader_reset(NULL);
    qf_record_clear(NULL);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 185, 194 */
Test(reader, one_read_moves_past_files_that_yield_nothing)
{
    tdir d;
    tdir_make(&d);
    const char *e1 = write_str(&d, "e1.txt", "");
    const char *e2 = write_str(&d, "e2.txt", "");
    const char *h = write_str(&d, "h.txt", "header only\n");
    const char *f = write_str(&d, "f.txt", "header\nx\n");
    qf_queue *q = work_queue();
    put_all(q, e1, e2, h, f, NULL);
    close_q(q);
    qf_reader *r = text_reader(1);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(f, 2), "x");
    cr_expect_eq(qf_queue_size(q), 0, "four file names taken by one read");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 3);
    cr_expect_eq(qf_reader_num_records_produced(r), 1);
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 4);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 186 */
Test(reader, counters_count_records_and_finished_work_units)
{
    qf_queue *q = work_queue();
    put_all(q, "A", "B", "C", NULL);
    close_q(q);
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, "A", "A");
    EXPECT_READ(r, q, &rec, "B", "B");
    EXPECT_READ(r, q, &rec, "C", "C");
    cr_expect_eq(qf_reader_num_records_produced(r), 3);
    cr_expect_eq(qf_queue_size(q), 0);
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 3);
    cr_expect_eq(qf_reader_num_records_produced(r), 3);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 186: files are work units; a file is completed when its end is
 * reached, not when its last record is returned */
Test(reader, text_counters_complete_a_file_at_its_end)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "1\n2\n");
    const char *b = write_str(&d, "b", "3\n");
    qf_queue *q = work_queue();
    put_all(q, a, b, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 1), "1");
    EXPECT_READ(r, q, &rec, keyf(a, 2), "2");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 0);
    EXPECT_READ(r, q, &rec, keyf(b, 1), "3");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    cr_expect_eq(qf_reader_num_records_produced(r), 3);
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 2);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 187 */
Test(reader, reset_zeroes_counters_and_drops_the_current_item)
{
    qf_queue *q = work_queue();
    put_all(q, "X", "Y", "Z", NULL);
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, "X", "X");
    EXPECT_READ(r, q, &rec, "Y", "Y");
    qf_reader_reset(r);
    cr_expect_eq(qf_reader_num_records_produced(r), 0);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 0);
    cr_expect_eq(qf_queue_size(q), 1);
    EXPECT_READ(r, q, &rec, "Z", "Z");
    put_all(q, "K", "L", NULL);
    EXPECT_READ(r, q, &rec, "K", "K");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 187: a file in progress is dropped, not put back */
Test(reader, reset_in_the_middle_of_a_file_drops_the_rest_of_it)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "a1\na2\na3\n");
    const char *b = write_str(&d, "b", "b1\n");
    qf_queue *q = work_queue();
    put_all(q, a, b, NULL);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 1), "a1");
    qf_reader_reset(r);
    cr_expect_eq(qf_queue_size(q), 1);
    EXPECT_READ(r, q, &rec, keyf(b, 1), "b1");
    cr_expect_eq(qf_reader_num_records_produced(r), 1);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 188 */
Test(reader, identity_reader_returns_the_work_string_over_several_epochs)
{
    qf_queue *q = work_queue();
    for (int epoch = 0; epoch < 3; epoch++)
        put_all(q, "DD", "EE", NULL);
    close_q(q);
    qf_reader *r = identity_reader();
    cr_expect_str_eq(qf_reader_kind_name(r), "IdentityReader");
    cr_expect_str_eq(qf_reader_name(r), "IdentityReader");
    cr_expect_eq(qf_reader_get_kind(r), QF_READER_IDENTITY);
    qf_record rec = QF_RECORD_INIT;
    for (int epoch = 0; epoch < 3; epoch++) {
        EXPECT_READ(r, q, &rec, "DD", "DD");
        cr_expect_eq(qf_reader_num_work_units_completed(r), 2 * epoch + 1,
                     "every read completes a unit");
        EXPECT_READ(r, q, &rec, "EE", "EE");
    }
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 6);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 188: "" is a valid work string; NUL bytes survive */
Test(reader, identity_reader_keeps_empty_and_binary_strings)
{
    qf_queue *q = work_queue();
    put(q, "");
    qf_tensor *t = qf_tensor_new_string("a\0b", 3);
    OK(qf_queue_enqueue(q, qf_element_of(1, &t)));
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, "", "");
    OK(qf_reader_read(r, q, &rec));
    cr_expect_eq(rec.value_len, 3);
    cr_expect_arr_eq(rec.value, "a\0b", 3);
    cr_expect_eq(rec.key_len, 3);
    cr_expect_arr_eq(rec.key, "a\0b", 3);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* spec 188: a file that cannot be opened fails the read with NotFound
 * naming it; the reader goes on with the next file */
Test(reader, missing_file_is_not_found_naming_it_and_is_dropped)
{
    tdir d;
    tdir_make(&d);
    const char *missing = tpath(&d, "no-such-file.txt");
    const char *b = write_str(&d, "b.txt", "ok\n");
    qf_queue *q = work_queue();
    put_all(q, missing, b, NULL);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_read(r, q, &rec), QF_NOT_FOUND, "no-such-file.txt");
    EXPECT_MSG("; No such file or directory");
    EXPECT_MSG(missing);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 0);
    EXPECT_READ(r, q, &rec, keyf(b, 1), "ok");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 188 */
Test(reader, unreadable_file_is_permission_denied_naming_it)
{
    tdir d;
    tdir_make(&d);
    const char *p = write_str(&d, "secret.txt", "s\n");
    cr_assert_eq(chmod(p, 0), 0);
    qf_queue *q = work_queue();
    put(q, p);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    qf_code rc = qf_reader_read(r, q, &rec);
    if (geteuid() == 0) {
        /* Root reads a mode-000 file: nothing to check but success. */
        cr_expect_eq(rc, QF_OK, "%s", qf_last_message());
    } else {
        cr_expect_eq(rc, QF_PERMISSION_DENIED, "%s: %s", qf_code_name(rc), qf_last_message());
        EXPECT_MSG("secret.txt");
        EXPECT_MSG("Permission denied");
    }
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 188: a directory is not a file */
Test(reader, directory_is_failed_precondition)
{
    tdir d;
    tdir_make(&d);
    qf_queue *q = work_queue();
    put(q, d.path);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_read(r, q, &rec), QF_FAILED_PRECONDITION, "Is a directory");
    EXPECT_MSG(d.path);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 189 */
Test(reader, read_up_to_returns_early_at_the_end_of_a_file)
{
    tdir d;
    tdir_make(&d);
    const char *f0 = write_str(&d, "f0", "0: 0\n0: 1\n0: 2\n0: 3\n0: 4\n");
    const char *f1 = write_str(&d, "f1", "1: 0\n1: 1\n1: 2\n1: 3\n1: 4\n");
    qf_queue *q = work_queue();
    put_all(q, f0, f1, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    qf_record recs[3] = {QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT};
    size_t n = 0;
    OK(qf_reader_read_up_to(r, q, 3, recs, &n));
    cr_expect_eq(n, 3);
    cr_expect_str_eq(recs[2].key, keyf(f0, 3));
    OK(qf_reader_read_up_to(r, q, 3, recs, &n));
    cr_expect_eq(n, 2, "stops at the end of file 0 instead of moving on");
    cr_expect_str_eq(recs[0].value, "0: 3");
    cr_expect_str_eq(recs[1].value, "0: 4");
    cr_expect_eq(qf_queue_size(q), 1, "file 1 not taken yet");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    OK(qf_reader_read_up_to(r, q, 3, recs, &n));
    cr_expect_eq(n, 3);
    cr_expect_str_eq(recs[0].key, keyf(f1, 1));
    OK(qf_reader_read_up_to(r, q, 3, recs, &n));
    cr_expect_eq(n, 2);
    cr_expect_eq(qf_reader_num_records_produced(r), 10);
    REFUSED(qf_reader_read_up_to(r, q, 3, recs, &n), QF_OUT_OF_RANGE, "is closed");
    qf_records_clear(recs, 3);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 189: with nothing produced yet, read_up_to moves past ends */
Test(reader, read_up_to_moves_on_while_it_has_produced_nothing)
{
    tdir d;
    tdir_make(&d);
    const char *e = write_str(&d, "e", "");
    const char *f = write_str(&d, "f", "a\nb\n");
    const char *g = write_str(&d, "g", "c\n");
    qf_queue *q = work_queue();
    put_all(q, e, f, g, NULL);
    qf_reader *r = text_reader(0);
    qf_record recs[8];
    for (int i = 0; i < 8; i++)
        qf_record_init(&recs[i]);
    size_t n = 0;
    OK(qf_reader_read_up_to(r, q, 8, recs, &n));
    cr_expect_eq(n, 2);
    cr_expect_str_eq(recs[0].value, "a");
    cr_expect_str_eq(recs[1].value, "b");
    OK(qf_reader_read_up_to(r, q, 0, recs, &n));
    cr_expect_eq(n, 0, "n = 0 returns at once");
    cr_expect_eq(qf_queue_size(q), 1);
    /* The poll form: the same rules, pending only with nothing made. */
    atomic_int woken = 0;
    qf_waker w;
    qf_waker_init(&w, count_wake, &woken);
    OK(qf_reader_poll_read_up_to(r, q, 8, &w, recs, &n));
    cr_expect_eq(n, 1);
    cr_expect_str_eq(recs[0].key, keyf(g, 1));
    n = 99;
    cr_assert_eq(qf_reader_poll_read_up_to(r, q, 8, &w, recs, &n), QF_PENDING);
    cr_expect_eq(n, 99, "*ret_n untouched when pending");
    close_q(q);
    cr_expect_eq(atomic_load(&woken), 1);
    REFUSED(qf_reader_try_read_up_to(r, q, 8, recs, &n), QF_OUT_OF_RANGE, "is closed");
    REFUSED(qf_reader_read_up_to_until(r, q, 8, QF_FOREVER, recs, &n), QF_OUT_OF_RANGE,
            "is closed");
    qf_records_clear(recs, 8);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 189: the IdentityReader makes one record per work unit */
Test(reader, identity_read_up_to_returns_one_record_per_call)
{
    qf_queue *q = work_queue();
    put_all(q, "a", "b", NULL);
    qf_reader *r = identity_reader();
    qf_record recs[4] = {QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT};
    size_t n = 0;
    OK(qf_reader_read_up_to(r, q, 4, recs, &n));
    cr_expect_eq(n, 1);
    cr_expect_str_eq(recs[0].value, "a");
    qf_records_clear(recs, 4);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* ====================================================== TextLine (190-196) */

/* Two files of five lines "f: l", with the given line ending. */
static void two_text_files(const tdir *d, const char *eol, bool last_newline, const char **f0,
                           const char **f1)
{
    char buf[2][256];
    for (int f = 0; f < 2; f++) {
        buf[f][0] = '\0';
        for (int l = 0; l < 5; l++) {
            char line[32];
            bool last = l == 4;
            snprintf(line, sizeof(line), "%d: %d%s", f, l, last && !last_newline ? "" : eol);
            strcat(buf[f], line);
        }
    }
    *f0 = write_str(d, "text0.txt", buf[0]);
    *f1 = write_str(d, "text1.txt", buf[1]);
}

static void expect_two_text_files(qf_reader *r, qf_queue *q, const char *f0, const char *f1,
                                  int first)
{
    qf_record rec = QF_RECORD_INIT;
    const char *files[2] = {f0, f1};
    for (int f = 0; f < 2; f++) {
        for (int l = first; l < 5; l++) {
            char v[32];
            snprintf(v, sizeof(v), "%d: %d", f, l);
            EXPECT_READ(r, q, &rec, keyf(files[f], (uint64_t)l + 1), v);
        }
    }
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
}

/* spec 190 */
Test(reader, text_lines_have_keys_from_one_and_no_terminator)
{
    tdir d;
    tdir_make(&d);
    const char *f0, *f1;
    two_text_files(&d, "\n", true, &f0, &f1);
    qf_queue *q = work_queue();
    put_all(q, f0, f1, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    cr_expect_str_eq(qf_reader_kind_name(r), "TextLineReader");
    expect_two_text_files(r, q, f0, f1, 0);
    cr_expect_eq(qf_reader_num_records_produced(r), 10);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 2);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 191 */
Test(reader, text_windows_line_endings_read_like_unix_ones)
{
    tdir d;
    tdir_make(&d);
    const char *f0, *f1;
    two_text_files(&d, "\r\n", true, &f0, &f1);
    qf_queue *q = work_queue();
    put_all(q, f0, f1, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    expect_two_text_files(r, q, f0, f1, 0);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 191: exactly one '\r' before '\n' or at the end goes */
Test(reader, text_only_one_carriage_return_before_the_newline_is_removed)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "a\r\r\nin\rside\n\rlead\nend\r");
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 1), "a\r");
    EXPECT_READ(r, q, &rec, keyf(a, 2), "in\rside");
    EXPECT_READ(r, q, &rec, keyf(a, 3), "\rlead");
    EXPECT_READ(r, q, &rec, keyf(a, 4), "end");
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 192 */
Test(reader, text_last_line_without_newline_is_returned)
{
    tdir d;
    tdir_make(&d);
    const char *f0, *f1;
    /* File 1 has no final newline, file 0 does (written below). */
    two_text_files(&d, "\n", false, &f0, &f1);
    f0 = write_str(&d, "text0.txt", "0: 0\n0: 1\n0: 2\n0: 3\n0: 4\n");
    qf_queue *q = work_queue();
    put_all(q, f0, f1, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    expect_two_text_files(r, q, f0, f1, 0);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 192: CRLF file without a final line ending */
Test(reader, text_crlf_file_without_final_newline)
{
    tdir d;
    tdir_make(&d);
    const char *f0, *f1;
    two_text_files(&d, "\r\n", false, &f0, &f1);
    qf_queue *q = work_queue();
    put_all(q, f0, f1, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    expect_two_text_files(r, q, f0, f1, 0);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 193 */
Test(reader, text_empty_lines_are_empty_records_and_count)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "a\n\nb");
    const char *nl = write_str(&d, "nl", "\n");
    const char *cr = write_str(&d, "cr", "\r");
    const char *crlf2 = write_str(&d, "crlf2", "\r\n\r\n");
    const char *tail = write_str(&d, "tail", "x\n\r");
    qf_queue *q = work_queue();
    put_all(q, a, nl, cr, crlf2, tail, NULL);
    close_q(q);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 1), "a");
    EXPECT_READ(r, q, &rec, keyf(a, 2), "");
    cr_expect_not_null(rec.value, "an empty value is still a valid string");
    EXPECT_READ(r, q, &rec, keyf(a, 3), "b");
    EXPECT_READ(r, q, &rec, keyf(nl, 1), "");
    /* "cr" (a lone '\r', no newline) gives nothing. */
    EXPECT_READ(r, q, &rec, keyf(crlf2, 1), "");
    EXPECT_READ(r, q, &rec, keyf(crlf2, 2), "");
    EXPECT_READ(r, q, &rec, keyf(tail, 1), "x");
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 5);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 194 */
Test(reader, text_empty_file_gives_no_records)
{
    tdir d;
    tdir_make(&d);
    const char *e = write_str(&d, "empty", "");
    qf_queue *q = work_queue();
    put(q, e);
    close_q(q);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    cr_expect_eq(qf_reader_num_records_produced(r), 0);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 195 */
Test(reader, text_skip_header_lines_drops_first_lines_but_counts_them)
{
    tdir d;
    tdir_make(&d);
    const char *f0, *f1;
    two_text_files(&d, "\n", true, &f0, &f1);
    qf_queue *q = work_queue();
    put_all(q, f0, f1, NULL);
    close_q(q);
    qf_reader *r = text_reader(1);
    expect_two_text_files(r, q, f0, f1, 1);
    cr_expect_eq(qf_reader_num_records_produced(r), 8);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 195: several header lines, CRLF and empty header lines */
Test(reader, text_skip_several_header_lines)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "h1\r\n\r\nh3\r\nbody\r\n");
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = text_reader(3);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 4), "body");
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 196 */
Test(reader, text_file_shorter_than_the_header_gives_nothing)
{
    tdir d;
    tdir_make(&d);
    const char *s1 = write_str(&d, "s1", "one\ntwo\n");
    const char *s2 = write_str(&d, "s2", "one\ntwo");
    const char *s3 = write_str(&d, "s3", "1\n2\n3\nfour\n");
    qf_queue *q = work_queue();
    put_all(q, s1, s2, s3, NULL);
    close_q(q);
    qf_reader *r = text_reader(3);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(s3, 4), "four");
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 3);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 196 */
Test(reader, text_negative_skip_header_lines_is_invalid)
{
    qf_reader *r = NULL;
    REFUSED(qf_text_line_reader_new(-1, &r), QF_INVALID_ARGUMENT,
            "skip_header_lines must be >= 0 not -1");
    cr_expect_null(r);
    REFUSED(qf_text_line_reader_new(-42, &r), QF_INVALID_ARGUMENT,
            "skip_header_lines must be >= 0 not -42");
}

/* spec 190-193 at buffer boundaries: a 16-byte buffer makes lines cross
 * refills everywhere; the result must match a default-buffer reader and an
 * independent split of the same bytes. */
Test(reader, text_lines_crossing_buffer_refills_read_the_same)
{
    tdir d;
    tdir_make(&d);
    /* Deterministic pseudo-random content: lines of 0..80 bytes, some
     * empty, some with '\r' inside or before '\n', a 5000-byte line. */
    size_t cap = 1 << 16, n = 0;
    char *data = malloc(cap);
    cr_assert_not_null(data);
    uint32_t seed = 12345;
    for (int line = 0; line < 400; line++) {
        seed = seed * 1103515245u + 12345u;
        size_t len = line == 200 ? 5000 : (seed >> 16) % 81;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            char c = (char)('a' + (seed >> 16) % 26);
            if ((seed >> 8) % 37 == 0)
                c = '\r';
            data[n++] = c;
        }
        if (line % 7 == 0)
            data[n++] = '\r';
        data[n++] = '\n';
    }
    memcpy(data + n, "tail\r", 5); /* last line without newline, one '\r' */
    n += 5;
    const char *p = write_bytes(&d, "big.txt", data, n);

    /* The expected lines, split here independently. */
    size_t nexp = 0, start = 0;
    size_t *starts = malloc(sizeof(size_t) * 512), *lens = malloc(sizeof(size_t) * 512);
    cr_assert(starts && lens);
    for (size_t i = 0; i <= n; i++) {
        if (i == n || data[i] == '\n') {
            size_t len = i - start;
            if (len && data[start + len - 1] == '\r')
                len--;
            if (i < n || len > 0) {
                starts[nexp] = start;
                lens[nexp++] = len;
            }
            start = i + 1;
        }
    }
    cr_assert_eq(nexp, 401);

    size_t sizes[3] = {16, 17, 0};
    for (int s = 0; s < 3; s++) {
        qf_reader_options o = {0};
        o.kind = QF_READER_TEXT_LINE;
        o.buffer_bytes = sizes[s];
        o.name = "small";
        qf_reader *r = NULL;
        OK(qf_reader_new(&o, &r));
        cr_expect_str_eq(qf_reader_name(r), "small");
        qf_queue *q = work_queue();
        put(q, p);
        close_q(q);
        qf_record recs[7];
        for (int i = 0; i < 7; i++)
            qf_record_init(&recs[i]);
        size_t got = 0, m;
        qf_code rc;
        while ((rc = qf_reader_read_up_to(r, q, 7, recs, &m)) == QF_OK) {
            for (size_t i = 0; i < m; i++, got++) {
                cr_assert_lt(got, nexp);
                cr_expect_eq(recs[i].value_len, lens[got], "line %zu (buffer %zu)", got + 1,
                             sizes[s]);
                cr_expect(memcmp(recs[i].value, data + starts[got], lens[got]) == 0,
                          "line %zu (buffer %zu)", got + 1, sizes[s]);
                cr_expect_str_eq(recs[i].key, keyf(p, got + 1));
            }
        }
        cr_expect_eq(rc, QF_OUT_OF_RANGE, "%s", qf_last_message());
        cr_expect_eq(got, nexp);
        qf_records_clear(recs, 7);
        qf_reader_free(r);
        qf_queue_unref(q);
    }
    free(starts);
    free(lens);
    free(data);
    tdir_remove(&d);
}

/* ================================================ FixedLength (197-201) */

static qf_reader *fixed_reader(int64_t rec, int64_t hdr, int64_t ftr, int64_t hop)
{
    qf_reader *r = NULL;
    OK(qf_fixed_length_record_reader_new(rec, hdr, ftr, hop, &r));
    return r;
}

/* spec 197, 198 */
Test(reader, fixed_length_skips_header_and_footer_with_keys_from_zero)
{
    tdir d;
    tdir_make(&d);
    const char *files[2];
    for (int f = 0; f < 2; f++) {
        char buf[64] = "HHHHH";
        for (int r = 0; r < 7; r++) {
            char c = (char)('0' + 2 * f + r);
            char three[4] = {c, c, c, 0};
            strcat(buf, three);
        }
        strcat(buf, "FF");
        char name[16];
        snprintf(name, sizeof(name), "fixed%d", f);
        files[f] = write_str(&d, name, buf);
    }
    qf_queue *q = work_queue();
    put_all(q, files[0], files[1], NULL);
    close_q(q);
    qf_reader *r = fixed_reader(3, 5, 2, 0);
    cr_expect_str_eq(qf_reader_kind_name(r), "FixedLengthRecordReader");
    qf_record rec = QF_RECORD_INIT;
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < 7; i++) {
            char c = (char)('0' + 2 * f + i);
            char v[4] = {c, c, c, 0};
            EXPECT_READ(r, q, &rec, keyf(files[f], (uint64_t)i), v);
        }
    }
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_records_produced(r), 14);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 2);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 199 */
Test(reader, fixed_length_drops_a_tail_too_short_for_record_and_footer)
{
    tdir d;
    tdir_make(&d);
    /* 0+3+2 <= 10, 3+5 <= 10, 6+5 > 10: two records, "cc"+"FF" dropped. */
    const char *a = write_str(&d, "a", "aaabbbccFF");
    /* Without a footer the leftover "cc" is dropped too. */
    const char *b = write_str(&d, "b", "xxxyyycc");
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = fixed_reader(3, 0, 2, 0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 0), "aaa");
    EXPECT_READ(r, q, &rec, keyf(a, 1), "bbb");
    EXPECT_END(r, q, &rec);
    qf_reader_free(r);
    qf_queue_unref(q);

    q = work_queue();
    put(q, b);
    close_q(q);
    r = fixed_reader(3, 0, 0, 0);
    EXPECT_READ(r, q, &rec, keyf(b, 0), "xxx");
    EXPECT_READ(r, q, &rec, keyf(b, 1), "yyy");
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 200 */
Test(reader, fixed_length_hop_lets_records_overlap)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "HHHHH0123456FF");
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = fixed_reader(3, 5, 2, 2);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 0), "012");
    EXPECT_READ(r, q, &rec, keyf(a, 1), "234");
    EXPECT_READ(r, q, &rec, keyf(a, 2), "456");
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 200: a hop longer than the record leaves gaps */
Test(reader, fixed_length_hop_longer_than_the_record_skips_bytes)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "H01x23x45x6");
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = fixed_reader(2, 1, 0, 3);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 0), "01");
    EXPECT_READ(r, q, &rec, keyf(a, 1), "23");
    EXPECT_READ(r, q, &rec, keyf(a, 2), "45");
    EXPECT_END(r, q, &rec); /* "6" is too short */
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* spec 197-200 with records larger than the default buffer, binary bytes,
 * and read_up_to */
Test(reader, fixed_length_large_binary_records)
{
    tdir d;
    tdir_make(&d);
    size_t rec_bytes = 300000, nrec = 4, hdr = 7, ftr = 9;
    size_t n = hdr + nrec * rec_bytes + ftr + 5;
    unsigned char *data = malloc(n);
    cr_assert_not_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 7 + (i >> 9));
    const char *a = write_bytes(&d, "bin", data, n);
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = fixed_reader((int64_t)rec_bytes, (int64_t)hdr, (int64_t)ftr, 0);
    qf_record recs[3] = {QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT};
    size_t got = 0, m;
    while (qf_reader_read_up_to(r, q, 3, recs, &m) == QF_OK) {
        for (size_t i = 0; i < m; i++, got++) {
            cr_assert_lt(got, nrec);
            cr_expect_eq(recs[i].value_len, rec_bytes);
            cr_expect(memcmp(recs[i].value, data + hdr + got * rec_bytes, rec_bytes) == 0,
                      "record %zu", got);
            cr_expect_str_eq(recs[i].key, keyf(a, got));
        }
    }
    cr_expect_eq(qf_last_code(), QF_OUT_OF_RANGE);
    cr_expect_eq(got, nrec);
    qf_records_clear(recs, 3);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(data);
    tdir_remove(&d);
}

/* spec 201 */
Test(reader, fixed_length_negative_sizes_are_invalid)
{
    qf_reader *r = NULL;
    REFUSED(qf_fixed_length_record_reader_new(3, -1, 0, 0, &r), QF_INVALID_ARGUMENT,
            "header_bytes must be >= 0 not -1");
    REFUSED(qf_fixed_length_record_reader_new(-2, 0, 0, 0, &r), QF_INVALID_ARGUMENT,
            "record_bytes must be >= 0 not -2");
    REFUSED(qf_fixed_length_record_reader_new(3, 0, -3, 0, &r), QF_INVALID_ARGUMENT,
            "footer_bytes must be >= 0 not -3");
    REFUSED(qf_fixed_length_record_reader_new(3, 0, 0, -4, &r), QF_INVALID_ARGUMENT,
            "hop_bytes must be >= 0 not -4");
    /* qflow's choice: an empty record would repeat forever. */
    REFUSED(qf_fixed_length_record_reader_new(0, 0, 0, 0, &r), QF_INVALID_ARGUMENT,
            "record_bytes must be > 0 not 0");
    REFUSED(qf_fixed_length_record_reader_new(INT64_MAX, 0, INT64_MAX, 0, &r),
            QF_RESOURCE_EXHAUSTED, "too large");
    cr_expect_null(r);
}

/* spec 201 (second half): qflow's documented choice */
Test(reader, fixed_length_file_shorter_than_the_header_gives_no_records)
{
    tdir d;
    tdir_make(&d);
    const char *s = write_str(&d, "short", "HHH");
    const char *e = write_str(&d, "exact", "HHHHH");
    const char *g = write_str(&d, "good", "HHHHHabcFF");
    qf_queue *q = work_queue();
    put_all(q, s, e, g, NULL);
    close_q(q);
    qf_reader *r = fixed_reader(3, 5, 2, 0);
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(g, 0), "abc");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 2);
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* ============================================================ TFRecord */

/* An independent bitwise CRC-32C: the definition, one bit at a time. */
static uint32_t crc_bitwise(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static uint32_t masked(const void *data, size_t n)
{
    uint32_t c = crc_bitwise(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void b_put(bytes *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void b_le(bytes *b, uint64_t v, int width)
{
    unsigned char x[8];
    for (int i = 0; i < width; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    b_put(b, x, (size_t)width);
}

/* Append one record; returns its offset. */
static size_t tfr_append(bytes *b, const void *data, size_t n)
{
    size_t off = b->n;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    b_put(b, len, 8);
    b_le(b, masked(len, 8), 4);
    b_put(b, data, n);
    b_le(b, masked(data, n), 4);
    return off;
}

static qf_reader *tfrecord_reader(void)
{
    qf_reader *r = NULL;
    OK(qf_tfrecord_reader_new(&r));
    return r;
}

/* TFRecord: the checksum itself */
Test(reader, crc32c_matches_the_standard_vector_on_every_path)
{
    cr_expect_eq(crc_bitwise("123456789", 9), 0xE3069283u);
    cr_expect_eq(qf__crc32c("123456789", 9), 0xE3069283u);
    cr_expect_eq(qf__crc32c_extend_portable(0, "123456789", 9), 0xE3069283u);
    /* Extending in pieces gives the same value. */
    cr_expect_eq(qf__crc32c_extend(qf__crc32c("1234", 4), "56789", 5), 0xE3069283u);
    cr_expect_eq(qf__crc32c(NULL, 0), 0);
    /* iSCSI test vectors (RFC 3720 B.4): 32 zero bytes, 32 0xFF bytes. */
    unsigned char z[32] = {0}, f[32];
    memset(f, 0xFF, sizeof(f));
    cr_expect_eq(qf__crc32c(z, 32), 0x8A9136AAu);
    cr_expect_eq(qf__crc32c(f, 32), 0x62A8AB43u);
    cr_expect_eq(qf__crc32c_unmask(qf__crc32c_mask(0x12345678u)), 0x12345678u);
    cr_log_info("crc32c uses the %s path", qf__crc32c_hw() ? "SSE4.2" : "table");
}

/* TFRecord: table and instruction paths agree with the bitwise definition
 * at every alignment and length around the 8-byte steps */
Test(reader, crc32c_fast_paths_match_the_bitwise_definition)
{
    unsigned char buf[1100];
    uint32_t s = 99;
    for (size_t i = 0; i < sizeof(buf); i++) {
        s = s * 1664525u + 1013904223u;
        buf[i] = (unsigned char)(s >> 24);
    }
    for (size_t off = 0; off < 9; off++) {
        for (size_t n = 0; n < 80; n++) {
            uint32_t want = crc_bitwise(buf + off, n);
            cr_expect_eq(qf__crc32c(buf + off, n), want, "off %zu len %zu", off, n);
            cr_expect_eq(qf__crc32c_extend_portable(0, buf + off, n), want, "off %zu len %zu", off,
                         n);
        }
        cr_expect_eq(qf__crc32c(buf + off, 1024), crc_bitwise(buf + off, 1024));
        cr_expect_eq(qf__crc32c_extend_portable(0, buf + off, 1024), crc_bitwise(buf + off, 1024));
    }
}

/* TFRecord: the instruction path runs buffers of 192 bytes and more in three
 * chains (lanes of 64 bytes; of 512 from 1,536 bytes on) and joins them
 * with tables: every length across both thresholds and their multiples, at
 * every alignment, from a running value, agrees with the table path (itself
 * checked against the definition above), and so does the value of a buffer
 * taken in two pieces cut anywhere */
Test(reader, crc32c_three_chains_match_one_at_every_length)
{
    enum { MAX = 3 * 3 * 512 + 200 };
    unsigned char *buf = malloc(MAX + 8);
    cr_assert_not_null(buf);
    uint32_t s = 7;
    for (size_t i = 0; i < MAX + 8; i++) {
        s = s * 1664525u + 1013904223u;
        buf[i] = (unsigned char)(s >> 24);
    }
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n <= MAX; n += (n < 1700 ? 1 : 7)) {
            uint32_t seed = (uint32_t)(n * 2654435761u);
            uint32_t want = qf__crc32c_extend_portable(seed, buf + off, n);
            uint32_t got = qf__crc32c_extend(seed, buf + off, n);
            if (got != want)
                cr_assert_fail("off %zu len %zu: %08x, want %08x", off, n, got, want);
        }
    for (size_t cut = 0; cut <= 2000; cut += 13)
        cr_expect_eq(qf__crc32c_extend(qf__crc32c(buf, cut), buf + cut, 2000 - cut),
                     qf__crc32c_extend_portable(0, buf, 2000), "cut at %zu", cut);
    free(buf);
}

/* TFRecord: records built from the format's definition */
Test(reader, tfrecord_reads_records_with_byte_offset_keys)
{
    tdir d;
    tdir_make(&d);
    bytes b = {0};
    size_t o0 = tfr_append(&b, "first", 5);
    size_t o1 = tfr_append(&b, "", 0);
    size_t o2 = tfr_append(&b, "bin\0ary\n", 8);
    size_t o3 = tfr_append(&b, "last", 4);
    const char *a = write_bytes(&d, "a.tfrecord", b.p, b.n);
    const char *e = write_bytes(&d, "empty.tfrecord", "", 0);
    bytes c = {0};
    size_t p0 = tfr_append(&c, "other", 5);
    const char *f = write_bytes(&d, "f.tfrecord", c.p, c.n);
    cr_expect_eq(o0, 0);
    cr_expect_eq(o1, 12 + 5 + 4);
    qf_queue *q = work_queue();
    put_all(q, a, e, f, NULL);
    close_q(q);
    qf_reader *r = tfrecord_reader();
    cr_expect_str_eq(qf_reader_kind_name(r), "TFRecordReader");
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, o0), "first");
    EXPECT_READ(r, q, &rec, keyf(a, o1), "");
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.key, keyf(a, o2));
    cr_expect_eq(rec.value_len, 8);
    cr_expect_arr_eq(rec.value, "bin\0ary\n", 8);
    EXPECT_READ(r, q, &rec, keyf(a, o3), "last");
    EXPECT_READ(r, q, &rec, keyf(f, p0), "other");
    EXPECT_END(r, q, &rec);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 3);
    cr_expect_eq(qf_reader_num_records_produced(r), 5);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(b.p);
    free(c.p);
    tdir_remove(&d);
}

/* TFRecord: records larger than the buffer, and a tiny buffer */
Test(reader, tfrecord_records_larger_than_the_buffer)
{
    tdir d;
    tdir_make(&d);
    size_t big = 1000003;
    char *payload = malloc(big);
    cr_assert_not_null(payload);
    for (size_t i = 0; i < big; i++)
        payload[i] = (char)(i * 31 + 7);
    bytes b = {0};
    size_t offs[5];
    offs[0] = tfr_append(&b, "s", 1);
    offs[1] = tfr_append(&b, payload, big);
    offs[2] = tfr_append(&b, payload + 5, 100);
    offs[3] = tfr_append(&b, payload, big - 1);
    offs[4] = tfr_append(&b, "e", 1);
    const char *a = write_bytes(&d, "big.tfrecord", b.p, b.n);
    size_t sizes[2] = {0, 16};
    for (int s = 0; s < 2; s++) {
        qf_reader_options o = {0};
        o.kind = QF_READER_TFRECORD;
        o.buffer_bytes = sizes[s];
        qf_reader *r = NULL;
        OK(qf_reader_new(&o, &r));
        qf_queue *q = work_queue();
        put(q, a);
        close_q(q);
        qf_record rec = QF_RECORD_INIT;
        EXPECT_READ(r, q, &rec, keyf(a, offs[0]), "s");
        OK(qf_reader_read(r, q, &rec));
        cr_expect_str_eq(rec.key, keyf(a, offs[1]));
        cr_expect_eq(rec.value_len, big);
        cr_expect(memcmp(rec.value, payload, big) == 0);
        OK(qf_reader_read(r, q, &rec));
        cr_expect_eq(rec.value_len, 100);
        cr_expect(memcmp(rec.value, payload + 5, 100) == 0);
        OK(qf_reader_read(r, q, &rec));
        cr_expect_str_eq(rec.key, keyf(a, offs[3]));
        cr_expect_eq(rec.value_len, big - 1);
        cr_expect(memcmp(rec.value, payload, big - 1) == 0);
        EXPECT_READ(r, q, &rec, keyf(a, offs[4]), "e");
        EXPECT_END(r, q, &rec);
        qf_record_clear(&rec);
        qf_reader_free(r);
        qf_queue_unref(q);
    }
    free(payload);
    free(b.p);
    tdir_remove(&d);
}

/* TFRecord: a bad data checksum is DATA_LOSS naming file and offset; the
 * records before it are returned; the reader then moves on */
Test(reader, tfrecord_bad_data_checksum_is_data_loss_with_offset)
{
    tdir d;
    tdir_make(&d);
    bytes b = {0};
    tfr_append(&b, "good", 4);
    size_t bad = tfr_append(&b, "flipped", 7);
    tfr_append(&b, "after", 5);
    b.p[bad + 12 + 2] ^= 0x20; /* one bit of the data */
    const char *a = write_bytes(&d, "corrupt.tfrecord", b.p, b.n);
    bytes c = {0};
    tfr_append(&c, "next file", 9);
    const char *f = write_bytes(&d, "next.tfrecord", c.p, c.n);
    qf_queue *q = work_queue();
    put_all(q, a, f, NULL);
    close_q(q);
    qf_reader *r = tfrecord_reader();
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 0), "good");
    char want[64];
    snprintf(want, sizeof(want), "corrupted record at %zu", bad);
    REFUSED(qf_reader_read(r, q, &rec), QF_DATA_LOSS, want);
    EXPECT_MSG("corrupt.tfrecord");
    EXPECT_MSG("data checksum");
    cr_expect_eq(qf_reader_num_work_units_completed(r), 0, "an abandoned file is not completed");
    cr_expect_eq(qf_reader_num_records_produced(r), 1);
    EXPECT_READ(r, q, &rec, keyf(f, 0), "next file");
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(b.p);
    free(c.p);
    tdir_remove(&d);
}

/* TFRecord: a bad length checksum */
Test(reader, tfrecord_bad_length_checksum_is_data_loss)
{
    tdir d;
    tdir_make(&d);
    bytes b = {0};
    tfr_append(&b, "abc", 3);
    size_t bad = tfr_append(&b, "def", 3);
    b.p[bad + 8] ^= 1; /* the length's CRC */
    const char *a = write_bytes(&d, "len.tfrecord", b.p, b.n);
    bytes c = {0};
    tfr_append(&c, "x", 1);
    c.p[0] = 200; /* a length that no longer matches its CRC */
    const char *z = write_bytes(&d, "len0.tfrecord", c.p, c.n);
    qf_queue *q = work_queue();
    put_all(q, a, z, NULL);
    close_q(q);
    qf_reader *r = tfrecord_reader();
    qf_record rec = QF_RECORD_INIT;
    EXPECT_READ(r, q, &rec, keyf(a, 0), "abc");
    char want[64];
    snprintf(want, sizeof(want), "corrupted record at %zu", bad);
    REFUSED(qf_reader_read(r, q, &rec), QF_DATA_LOSS, want);
    EXPECT_MSG("length checksum");
    REFUSED(qf_reader_read(r, q, &rec), QF_DATA_LOSS, "corrupted record at 0");
    EXPECT_MSG("len0.tfrecord");
    EXPECT_END(r, q, &rec);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(b.p);
    free(c.p);
    tdir_remove(&d);
}

/* TFRecord: a file cut anywhere inside a record is DATA_LOSS "truncated" */
Test(reader, tfrecord_truncated_file_is_data_loss)
{
    tdir d;
    tdir_make(&d);
    bytes b = {0};
    tfr_append(&b, "whole", 5);
    size_t second = tfr_append(&b, "cut short", 9);
    /* Cut inside the header, inside the data, inside the data CRC. */
    size_t cuts[3] = {second + 5, second + 12 + 4, b.n - 1};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof(name), "cut%d.tfrecord", i);
        const char *a = write_bytes(&d, name, b.p, cuts[i]);
        qf_queue *q = work_queue();
        put(q, a);
        close_q(q);
        qf_reader *r = tfrecord_reader();
        qf_record rec = QF_RECORD_INIT;
        EXPECT_READ(r, q, &rec, keyf(a, 0), "whole");
        char want[64];
        snprintf(want, sizeof(want), "truncated record at %zu", second);
        REFUSED(qf_reader_read(r, q, &rec), QF_DATA_LOSS, want);
        EXPECT_MSG(name);
        EXPECT_END(r, q, &rec);
        qf_record_clear(&rec);
        qf_reader_free(r);
        qf_queue_unref(q);
    }
    free(b.p);
    tdir_remove(&d);
}

/* TFRecord + spec 189: read_up_to returns the records before an error and
 * the next call reports it (qflow's documented difference) */
Test(reader, read_up_to_returns_records_before_an_error_and_reports_it_next)
{
    tdir d;
    tdir_make(&d);
    bytes b = {0};
    tfr_append(&b, "r0", 2);
    tfr_append(&b, "r1", 2);
    size_t bad = tfr_append(&b, "r2", 2);
    b.p[b.n - 1] ^= 0xFF; /* r2's data CRC */
    const char *a = write_bytes(&d, "a.tfrecord", b.p, b.n);
    bytes c = {0};
    tfr_append(&c, "n0", 2);
    const char *f = write_bytes(&d, "b.tfrecord", c.p, c.n);
    qf_queue *q = work_queue();
    put_all(q, a, f, NULL);
    close_q(q);
    qf_reader *r = tfrecord_reader();
    qf_record recs[8];
    for (int i = 0; i < 8; i++)
        qf_record_init(&recs[i]);
    size_t n = 0;
    OK(qf_reader_read_up_to(r, q, 8, recs, &n));
    cr_expect_eq(n, 2);
    cr_expect_str_eq(recs[0].value, "r0");
    cr_expect_str_eq(recs[1].value, "r1");
    char want[64];
    snprintf(want, sizeof(want), "corrupted record at %zu", bad);
    REFUSED(qf_reader_read_up_to(r, q, 8, recs, &n), QF_DATA_LOSS, want);
    EXPECT_MSG("a.tfrecord");
    OK(qf_reader_read_up_to(r, q, 8, recs, &n));
    cr_expect_eq(n, 1);
    cr_expect_str_eq(recs[0].value, "n0");
    /* reset forgets a held-back error too */
    qf_records_clear(recs, 8);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(b.p);
    free(c.p);
    tdir_remove(&d);
}

/* TFRecord: a record whose (checksummed) length runs past the end of the
 * file is truncation, not an allocation of that size */
Test(reader, tfrecord_length_beyond_the_file_is_truncation)
{
    tdir d;
    tdir_make(&d);
    bytes b = {0};
    unsigned char len[8];
    uint64_t huge = UINT64_C(1) << 50;
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(huge >> (8 * i));
    b_put(&b, len, 8);
    b_le(&b, masked(len, 8), 4);
    b_put(&b, "tiny", 4);
    const char *a = write_bytes(&d, "huge.tfrecord", b.p, b.n);
    qf_queue *q = work_queue();
    put(q, a);
    close_q(q);
    qf_reader *r = tfrecord_reader();
    qf_record rec = QF_RECORD_INIT;
    REFUSED(qf_reader_read(r, q, &rec), QF_DATA_LOSS, "truncated record at 0");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(b.p);
    tdir_remove(&d);
}

/* ============================================================== records */

/* the record as an element for a queue: (key, value) string scalars */
Test(reader, record_to_element_makes_key_and_value_tensors)
{
    qf_queue *q = work_queue();
    put(q, "w");
    qf_reader *r = identity_reader();
    qf_record rec = QF_RECORD_INIT;
    OK(qf_reader_read(r, q, &rec));
    qf_element *e = NULL;
    OK(qf_record_to_element(&rec, &e));
    cr_assert_eq(qf_element_size(e), 2);
    size_t len = 0;
    cr_expect_str_eq(qf_tensor_string(qf_element_get(e, 0), 0, &len), "w");
    cr_expect_str_eq(qf_tensor_string(qf_element_get(e, 1), 0, &len), "w");
    qf_element_free(e);
    qf_record empty = QF_RECORD_INIT;
    OK(qf_record_to_element(&empty, &e));
    cr_expect_eq(qf_tensor_num_elements(qf_element_get(e, 1)), 1);
    qf_element_free(e);
    REFUSED(qf_record_to_element(NULL, &e), QF_INVALID_ARGUMENT, "NULL");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* a reused record does not reallocate once it is large enough */
Test(reader, reused_record_keeps_its_buffers)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "a long first line to size the buffer\nshort\nx\n");
    qf_queue *q = work_queue();
    put(q, a);
    qf_reader *r = text_reader(0);
    qf_record rec = QF_RECORD_INIT;
    OK(qf_reader_read(r, q, &rec));
    char *k = rec.key, *v = rec.value;
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.value, "short");
    OK(qf_reader_read(r, q, &rec));
    cr_expect_eq(rec.key, k);
    cr_expect_eq(rec.value, v);
    qf_record_clear(&rec);
    cr_expect_null(rec.value);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

/* ===================================================== concurrency, tasks */

#define SHARED_FILES 12
#define SHARED_LINES 300
#define SHARED_READERS 4

struct shared_ctx {
    qf_queue *q;
    atomic_int *seen; /* [file][line] */
    const char **paths;
    atomic_long total;
};

static void *shared_reader_thread(void *arg)
{
    struct shared_ctx *c = arg;
    qf_reader *r = NULL;
    if (qf_text_line_reader_new(0, &r) != QF_OK)
        return NULL;
    qf_record recs[5];
    for (int i = 0; i < 5; i++)
        qf_record_init(&recs[i]);
    size_t n;
    while (qf_reader_read_up_to(r, c->q, 5, recs, &n) == QF_OK) {
        for (size_t i = 0; i < n; i++) {
            int f = -1, l = -1;
            sscanf(recs[i].value, "%d %d", &f, &l);
            if (f >= 0 && f < SHARED_FILES && l >= 0 && l < SHARED_LINES)
                atomic_fetch_add(&c->seen[f * SHARED_LINES + l], 1);
        }
        atomic_fetch_add(&c->total, (long)n);
    }
    qf_records_clear(recs, 5);
    qf_reader_free(r);
    return NULL;
}

/* several readers share one work queue: every line read exactly once */
Test(reader, several_readers_share_one_work_queue)
{
    tdir d;
    tdir_make(&d);
    const char *paths[SHARED_FILES];
    char name[32];
    char *buf = malloc(SHARED_LINES * 16);
    cr_assert_not_null(buf);
    for (int f = 0; f < SHARED_FILES; f++) {
        size_t n = 0;
        for (int l = 0; l < SHARED_LINES; l++)
            n += (size_t)sprintf(buf + n, "%d %d\n", f, l);
        snprintf(name, sizeof(name), "s%d", f);
        paths[f] = strdup(write_bytes(&d, name, buf, n));
    }
    free(buf);
    qf_queue *q = work_queue();
    struct shared_ctx c = {q, calloc(SHARED_FILES * SHARED_LINES, sizeof(atomic_int)), paths, 0};
    cr_assert_not_null(c.seen);
    pthread_t th[SHARED_READERS];
    for (int i = 0; i < SHARED_READERS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, shared_reader_thread, &c), 0);
    for (int f = 0; f < SHARED_FILES; f++)
        put(q, paths[f]);
    close_q(q);
    for (int i = 0; i < SHARED_READERS; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(atomic_load(&c.total), SHARED_FILES * SHARED_LINES);
    for (int i = 0; i < SHARED_FILES * SHARED_LINES; i++)
        cr_expect_eq(atomic_load(&c.seen[i]), 1, "line %d", i);
    free(c.seen);
    for (int f = 0; f < SHARED_FILES; f++)
        free((char *)paths[f]);
    qf_queue_unref(q);
    tdir_remove(&d);
}

struct task_ctx {
    qf_reader *r;
    qf_queue *q;
    qf_record rec;
    long lines;
    long bytes;
    int pendings;
};

/* A runner-style task: read until the work queue ends, parking on it. */
static qf_code reader_task(qf_task *t, void *arg)
{
    struct task_ctx *c = arg;
    for (int budget = 0; budget < 64; budget++) {
        qf_code rc = qf_reader_poll_read(c->r, c->q, qf_task_waker(t), &c->rec);
        if (rc == QF_PENDING) {
            c->pendings++;
            return QF_PENDING;
        }
        if (rc == QF_OUT_OF_RANGE)
            return QF_OK;
        if (rc != QF_OK)
            return rc;
        c->lines++;
        c->bytes += (long)c->rec.value_len;
    }
    return QF_YIELD;
}

/* spec 183-185 inside a task: the poll form parks the task on the work
 * queue instead of holding a worker */
Test(reader, poll_read_drives_a_task_on_a_worker_pool)
{
    tdir d;
    tdir_make(&d);
    const char *a = write_str(&d, "a", "1\n22\n333\n");
    const char *b = write_str(&d, "b", "");
    const char *c2 = write_str(&d, "c", "4444\n55555");
    qf_runtime_options ro = {.workers = 2, .name = "rdr"};
    qf_runtime *rt = NULL;
    OK(qf_runtime_new(&ro, &rt));
    struct task_ctx c = {0};
    c.r = text_reader(0);
    c.q = work_queue();
    qf_task *t = NULL;
    OK(qf_task_spawn(rt, reader_task, &c, NULL, &t));
    put(c.q, a);
    put(c.q, b);
    put(c.q, c2);
    close_q(c.q);
    qf_status *st = NULL;
    cr_expect_eq(qf_task_join(t, qf_deadline_in_s(60), &st), QF_OK, "%s", qf_status_message(st));
    qf_status_free(st);
    cr_expect_eq(c.lines, 5);
    cr_expect_eq(c.bytes, 1 + 2 + 3 + 4 + 5);
    cr_expect_eq(qf_reader_num_work_units_completed(c.r), 3);
    qf_task_unref(t);
    qf_runtime_free(rt);
    qf_record_clear(&c.rec);
    qf_reader_free(c.r);
    qf_queue_unref(c.q);
    tdir_remove(&d);
}
