/* fuzz_common.h - what every libFuzzer target of the readers shares: the
 * input goes into a memfd that the reader opens by its /proc path (a
 * regular file, as on disk), and a work queue names it. Any crash, leak,
 * sanitizer report or failed check() is a finding; every qf_code a reader
 * returns for damaged input is fine as long as it is one of the documented
 * ones. */
#ifndef QF_FUZZ_COMMON_H
#define QF_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "qflow.h"

/* A memfd holding `data`, and its path. One per process, rewritten per run. */
static inline const char *fuzz_file(const uint8_t *data, size_t n)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("qf_fuzz", MFD_CLOEXEC);
        check(fd >= 0);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    check(ftruncate(fd, 0) == 0);
    size_t off = 0;
    while (off < n) {
        ssize_t w = pwrite(fd, data + off, n - off, (off_t)off);
        check(w > 0);
        off += (size_t)w;
    }
    return path;
}

/* A closed work queue holding `path` `times` times. */
static inline qf_queue *fuzz_work(const char *path, int times)
{
    qf_dtype dt = QF_STRING;
    qf_queue_options o = {.capacity = 8, .num_components = 1, .dtypes = &dt};
    qf_queue *q = NULL;
    check(qf_fifo_queue_new(&o, &q) == QF_OK);
    for (int i = 0; i < times; i++) {
        qf_tensor *t = qf_tensor_new_cstr(path);
        qf_element *e = qf_element_of(1, &t);
        check(qf_queue_enqueue(q, e) == QF_OK);
    }
    check(qf_queue_close(q, false) == QF_OK);
    return q;
}

/* Codes a reader may return for bad bytes in a file. */
static inline int fuzz_code_ok(qf_code rc)
{
    return rc == QF_OK || rc == QF_OUT_OF_RANGE || rc == QF_DATA_LOSS ||
           rc == QF_RESOURCE_EXHAUSTED;
}

/* Read everything (the file twice, so the reader must move on after an
 * error), alternating read and read_up_to; return the records seen. */
static inline long fuzz_drain(qf_reader *r, qf_queue *q)
{
    qf_record recs[3] = {QF_RECORD_INIT, QF_RECORD_INIT, QF_RECORD_INIT};
    long seen = 0;
    for (int i = 0; i < 100000; i++) {
        size_t n = 0;
        qf_code rc =
            (i & 1) ? qf_reader_read_up_to(r, q, 3, recs, &n) : qf_reader_read(r, q, &recs[0]);
        if (rc == QF_OK && !(i & 1))
            n = 1;
        check(fuzz_code_ok(rc));
        if (rc == QF_OUT_OF_RANGE)
            break;
        for (size_t k = 0; k < n; k++)
            check(recs[k].key && recs[k].value && recs[k].value[recs[k].value_len] == '\0');
        seen += (long)n;
    }
    qf_records_clear(recs, 3);
    return seen;
}

#endif
