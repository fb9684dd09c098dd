/* test_status.c - status codes, status objects, the per-thread last error. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "qflow.h"

Test(status, codes_have_tensorflow_values_and_names)
{
    cr_expect_eq(QF_OK, 0);
    cr_expect_eq(QF_CANCELLED, 1);
    cr_expect_eq(QF_INVALID_ARGUMENT, 3);
    cr_expect_eq(QF_DEADLINE_EXCEEDED, 4);
    cr_expect_eq(QF_NOT_FOUND, 5);
    cr_expect_eq(QF_ABORTED, 10);
    cr_expect_eq(QF_OUT_OF_RANGE, 11);
    cr_expect_eq(QF_UNIMPLEMENTED, 12);
    cr_expect_eq(QF_INTERNAL, 13);
    cr_expect_eq(QF_DATA_LOSS, 15);
    cr_expect_eq(QF_UNAUTHENTICATED, 16);
    cr_expect_str_eq(qf_code_name(QF_OUT_OF_RANGE), "OUT_OF_RANGE");
    cr_expect_str_eq(qf_code_name(QF_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
    cr_expect_str_eq(qf_code_name(99), "UNKNOWN_CODE");
    cr_expect(qf_code_is_valid(16));
    cr_expect(!qf_code_is_valid(17));
    cr_expect(!qf_code_is_valid(-1));
}

Test(status, object_carries_code_and_formatted_message)
{
    qf_status *s = qf_status_new(QF_NOT_FOUND, "file '%s' (%d)", "a.txt", 3);
    cr_expect_eq(qf_status_code(s), QF_NOT_FOUND);
    cr_expect_str_eq(qf_status_message(s), "file 'a.txt' (3)");
    qf_status *c = qf_status_copy(s);
    qf_status_free(s);
    cr_expect_str_eq(qf_status_message(c), "file 'a.txt' (3)");
    qf_status_free(c);
    cr_expect_eq(qf_status_code(NULL), QF_OK);
    cr_expect_str_eq(qf_status_message(NULL), "");
    qf_status_free(NULL);
}

static void *make_status(void *arg)
{
    (void)arg;
    return qf_status_new(QF_DATA_LOSS, "made on another thread");
}

Test(status, crosses_threads_and_is_freed_by_holder)
{
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, make_status, NULL);
    pthread_join(t, &r);
    cr_expect_eq(qf_status_code(r), QF_DATA_LOSS);
    qf_status_free(r);
}

Test(status, last_error_is_per_thread)
{
    cr_expect_eq(qf_set_error(QF_ABORTED, "main %d", 1), QF_ABORTED);
    pthread_t t;
    pthread_create(&t, NULL, make_status, NULL);
    void *r;
    pthread_join(t, &r);
    qf_status_free(r);
    cr_expect_eq(qf_last_code(), QF_ABORTED);
    cr_expect_str_eq(qf_last_message(), "main 1");
    qf_status *s = qf_last_status();
    cr_expect_eq(qf_status_code(s), QF_ABORTED);
    cr_expect_str_eq(qf_status_message(s), "main 1");
    qf_status_free(s);
}

Test(status, failing_library_call_names_the_object)
{
    qf_queue *q;
    cr_assert_eq(qf_ptr_queue_new(1, "named", 0, NULL, &q), QF_OK);
    qf_queue_close(q, false);
    cr_expect_eq(qf_queue_enqueue_ptr(q, NULL), QF_CANCELLED);
    cr_expect(strstr(qf_last_message(), "'named'") != NULL);
    qf_queue_unref(q);
}
