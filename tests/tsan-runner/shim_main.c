/* shim_main.c - the in-process runner behind tests/tsan-runner's Criterion
 * subset (see criterion/criterion.h there for why it exists). */
#include <criterion/criterion.h>

#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>

static struct shim_test *tests, **tail = &tests;
static struct shim_suite *suites;
static jmp_buf abort_test;
static int failures_in_test;
static bool skipped;
/* Criterion fails the whole run (exit 1, every test passing) when a test
 * logs a warning or an error; the shim does the same, so a cr_log_warn()
 * on a path a test tolerates shows up here too. Tolerated paths log with
 * cr_log_info(). */
static int warnings_logged;

void shim_register(struct shim_test *t)
{
    *tail = t;
    tail = &t->next;
}

void shim_register_suite(struct shim_suite *s)
{
    s->next = suites;
    suites = s;
}

void shim_fail(bool fatal, const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[512] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[----] %s:%d: Assertion failed: %s%s%s\n", file, line, cond,
            msg[0] ? " -- " : "", msg);
    failures_in_test++;
    if (fatal)
        longjmp(abort_test, 1);
}

void shim_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (strcmp(level, "WARN") == 0 || strcmp(level, "ERROR") == 0)
        warnings_logged++;
    fprintf(stderr, "[%s] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void shim_skip(const char *fmt, ...)
{
    (void)fmt;
    skipped = true;
    longjmp(abort_test, 1);
}

static const struct criterion_test_extra_data *suite_data(const char *name)
{
    for (struct shim_suite *s = suites; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return &s->data;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
    regex_t re;
    if (filter && regcomp(&re, filter, REG_EXTENDED | REG_NOSUB) != 0)
        filter = NULL;
    int tested = 0, passing = 0, failing = 0;
    for (struct shim_test *t = tests; t; t = t->next) {
        char full[256];
        snprintf(full, sizeof(full), "%s/%s", t->suite, t->name);
        if (t->data.disabled || (filter && regexec(&re, full, 0, NULL, 0) != 0))
            continue;
        const struct criterion_test_extra_data *sd = suite_data(t->suite);
        void (*volatile init)(void) = t->data.init ? t->data.init : (sd ? sd->init : NULL);
        void (*volatile fini)(void) = t->data.fini ? t->data.fini : (sd ? sd->fini : NULL);
        failures_in_test = 0;
        skipped = false;
        volatile int ran_fini = 0;
        if (setjmp(abort_test) == 0) {
            if (init)
                init();
            t->fn();
        }
        if (fini && !ran_fini) {
            ran_fini = 1;
            if (setjmp(abort_test) == 0)
                fini();
        }
        if (skipped)
            continue;
        tested++;
        if (failures_in_test) {
            failing++;
            fprintf(stderr, "[FAIL] %s\n", full);
        } else {
            passing++;
        }
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0 \n",
            tested, passing, failing);
    if (warnings_logged)
        fprintf(stderr,
                "[====] %d warning(s) or error(s) logged: the run fails, as under Criterion\n",
                warnings_logged);
    return failing || warnings_logged ? 1 : 0;
}
