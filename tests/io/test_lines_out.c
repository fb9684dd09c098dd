/* test_lines_out.c - qflow-lines' output of runs (runtime/tools/lines_out.h):
 * values that lie back to back in a reader's block are written where they
 * lie, empty lines between them included, and never over a row the batch
 * does not have. The values are laid out by hand here as a TextLineReader
 * lays out its rows: each row's bytes, then a terminator (NUL); an empty
 * row is just its terminator. */
#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lines_out.h"

/* Everything o wrote to its file, flushed and read back (malloc'd). */
static char *written(lines_out *o, FILE *f, size_t *ret_len)
{
    cr_assert_eq(lines_out_flush(o), LINES_OUT_OK);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0); /* o wrote with write(2): ask the fd */
    long end = ftell(f);
    cr_assert_geq(end, 0);
    char *s = malloc((size_t)end + 1);
    cr_assert_not_null(s);
    rewind(f);
    cr_assert_eq(fread(s, 1, (size_t)end, f), (size_t)end);
    s[end] = '\0';
    *ret_len = (size_t)end;
    return s;
}

static void out_open(lines_out *o, FILE **ret_f, bool in_order)
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    cr_assert(lines_out_init(o, fileno(f), 1 << 16, NULL));
    o->values_in_order = in_order;
    *ret_f = f;
}

/* lines_out_values() of v[0..n) with values_in_order as given: expects
 * `want` (want_len bytes) written, and nothing else. */
static void expect_written(const qf_string *v, size_t n, bool in_order, const char *want,
                           size_t want_len)
{
    lines_out o;
    FILE *f;
    out_open(&o, &f, in_order);
    cr_assert_eq(lines_out_values(&o, v, n), LINES_OUT_OK);
    size_t len;
    char *s = written(&o, f, &len);
    cr_expect_eq(len, want_len);
    cr_expect(len == want_len && memcmp(s, want, len) == 0, "wrote \"%.*s\"", (int)len, s);
    free(s);
    lines_out_free(&o);
    fclose(f);
}

/* lines_out_values() of v[0..n) in batches of 1000, with values_in_order
 * and ends_in_place as given: expects `want` (want_len bytes) written. */
static void expect_batches_written(const qf_string *v, size_t n, bool in_order, bool ends_in_place,
                                   const char *want, size_t want_len)
{
    lines_out o;
    FILE *f;
    out_open(&o, &f, in_order);
    o.ends_in_place = ends_in_place;
    for (size_t i = 0; i < n; i += 1000)
        cr_assert_eq(lines_out_values(&o, v + i, n - i < 1000 ? n - i : 1000), LINES_OUT_OK);
    size_t got_len;
    char *got = written(&o, f, &got_len);
    cr_expect_eq(got_len, want_len, "in order %d", in_order);
    cr_expect(got_len == want_len && memcmp(got, want, want_len) == 0,
              "output differs (in order %d)", in_order);
    free(got);
    lines_out_free(&o);
    fclose(f);
}

/* The block "a\0\0\0b\0": rows "a", "", "", "b" in the reader's order.
 * Both empty lines join the run: its bytes become the output in place. */
Test(lines_out, empty_lines_in_a_row_join_a_run_in_reader_order)
{
    char block[] = {'a', 0, 0, 0, 'b', 0};
    qf_string v[] = {{1, block}, {0, NULL}, {0, NULL}, {1, block + 4}};
    expect_written(v, 4, true, "a\n\n\nb\n", 6);
    cr_expect_arr_eq(block, "a\n\n\nb\n", 6, "one run: its terminators and empty lines in place");
}

/* The block "a\0x\0b\0" and a batch of "a", "", "", "b" out of order (a
 * shuffle queue: row "x" is still in the queue). The two bytes between
 * "a" and "b" are "x"'s, not the empty lines': they must not be written. */
Test(lines_out, a_row_between_is_never_written_over_out_of_order)
{
    char block[] = {'a', 0, 'x', 0, 'b', 0};
    qf_string v[] = {{1, block}, {0, NULL}, {0, NULL}, {1, block + 4}};
    expect_written(v, 4, false, "a\n\n\nb\n", 6);
    cr_expect_eq(block[2], 'x', "the row between was written over");
    cr_expect_eq(block[3], 0);
}

/* One empty line between two rows is a run in either order: one byte
 * between two values is never a non-empty row's. */
Test(lines_out, one_empty_line_joins_a_run_in_any_order)
{
    char block[] = {'a', 0, 0, 'b', 0};
    qf_string v[] = {{1, block}, {0, NULL}, {1, block + 3}};
    expect_written(v, 3, false, "a\n\nb\n", 5);
    cr_expect_arr_eq(block, "a\n\nb\n", 5);
}

/* A block of about 256 KiB of rows with runs of 0 to 6 empty lines, given
 * as batches of 1000 values in the reader's order and out of it: the
 * output is the lines, byte for byte, whichever path (in place, copied,
 * cut by the buffer's room) each run takes. */
Test(lines_out, long_blocks_with_empty_runs_byte_identical)
{
    for (int in_order = 0; in_order < 2; in_order++) {
        size_t cap = 256 * 1024, len = 0, n = 0;
        char *block = malloc(cap), *want = malloc(cap);
        qf_string *v = malloc(cap * sizeof(*v));
        cr_assert(block && want && v);
        unsigned x = 12345;
        while (len + 200 < cap) {
            x = x * 1103515245u + 12345u;
            size_t l = (x >> 8) % 7 == 0 ? 0 : (x >> 12) % 150;
            for (size_t i = 0; i < l; i++)
                block[len + i] = want[len + i] = (char)('a' + (i + x) % 26);
            v[n++] = l ? (qf_string){l, block + len} : (qf_string){0, NULL};
            len += l;
            block[len] = 0;
            want[len++] = '\n';
        }
        expect_batches_written(v, n, in_order, false, want, len);
        free(v);
        free(want);
        free(block);
    }
}

/* Rows of a reader that left every line's end in place
 * (qf__queue_rows_by_length()): "\n" or "\r\n" after each value, empty
 * lines of both kinds and lines over LINES_OUT_DIRECT_MIN among them. In
 * order, with ends_in_place, nothing is written into the block, which is
 * read-only then (a store would fault), whether a run is written where it
 * lies or copied; out of order ends_in_place is ignored (terminators are
 * written as before). The output is each value and '\n' either way. */
Test(lines_out, ends_in_place_are_written_without_a_store_into_the_block)
{
    for (int in_order = 0; in_order < 2; in_order++) {
        size_t cap = 512 * 1024, len = 0, n = 0, wlen = 0;
        char *block = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char *want = malloc(cap);
        qf_string *v = malloc(cap * sizeof(*v));
        cr_assert(block != MAP_FAILED && want && v);
        unsigned x = 777;
        while (len + 30000 < cap) {
            x = x * 1103515245u + 12345u;
            size_t l = (x >> 8) % 5 == 0 ? 0 : (x >> 12) % 120;
            if ((x >> 4) % 301 == 0)
                l = LINES_OUT_DIRECT_MIN + 3000;
            bool crlf = (x >> 20) % 9 == 0;
            for (size_t i = 0; i < l; i++)
                block[len + i] = want[wlen + i] = (char)('a' + (i + x) % 26);
            v[n++] = l ? (qf_string){l, block + len} : (qf_string){0, NULL};
            len += l;
            wlen += l;
            if (crlf)
                block[len++] = '\r';
            block[len++] = '\n';
            want[wlen++] = '\n';
        }
        if (in_order)
            cr_assert_eq(mprotect(block, cap, PROT_READ), 0);
        expect_batches_written(v, n, in_order, true, want, wlen);
        free(v);
        free(want);
        munmap(block, cap);
    }
}
