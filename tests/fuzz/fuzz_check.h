/* fuzz_check.h - what every libFuzzer target shares: check() (a failed one
 * is a finding: it prints the condition and the library's last message,
 * then aborts) and a reader of the input's bytes for the targets that
 * decode calls from them. */
#ifndef QF_FUZZ_CHECK_H
#define QF_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "qf_status.h"

#define check(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s (last: %s)\n", __FILE__, __LINE__, #cond,     \
                    qf_last_message());                                                            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The entry point libFuzzer calls, declared for -Wmissing-prototypes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input, read a byte at a time; 0 once it runs out. */
typedef struct fuzz_input {
    const uint8_t *p;
    size_t n;
} fuzz_input;

static inline unsigned fuzz_next(fuzz_input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

#endif
