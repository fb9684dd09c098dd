/* bench.c - the case registry and the helpers bench.h promises. */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_run.h"

static bench_case *cases;
static size_t ncases, cap_cases;

void bench_register(const bench_case *c)
{
    if (!c->name || !c->impl || !c->unit || !c->run) {
        fprintf(stderr, "qflow-bench: a case needs name, impl, unit and run\n");
        exit(2);
    }
    if (ncases == cap_cases) {
        cap_cases = cap_cases ? 2 * cap_cases : 32;
        cases = realloc(cases, cap_cases * sizeof(*cases));
        if (!cases) {
            perror("qflow-bench");
            exit(2);
        }
    }
    cases[ncases++] = *c;
}

#define MAX_SKIPPED 8
static struct {
    const char *impl, *why;
} skipped[MAX_SKIPPED];
static size_t nskipped;

void bench_skip_peer(const char *impl, const char *why)
{
    for (size_t i = 0; i < nskipped; i++)
        if (strcmp(skipped[i].impl, impl) == 0)
            return;
    if (nskipped == MAX_SKIPPED) {
        fprintf(stderr, "qflow-bench: more than %d skipped peers\n", MAX_SKIPPED);
        exit(2);
    }
    skipped[nskipped].impl = impl;
    skipped[nskipped].why = why;
    nskipped++;
}

size_t bench_skipped_peers(char *buf, size_t len)
{
    size_t n = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < nskipped && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s (%s)", i ? "; " : "", skipped[i].impl,
                              skipped[i].why);
    return nskipped;
}

size_t bench_case_count(void)
{
    return ncases;
}

const bench_case *bench_case_at(size_t i)
{
    return i < ncases ? &cases[i] : NULL;
}

unsigned bench_case_outputs(const bench_case *c, const char *ret_names[BENCH_MAX_OUTPUTS])
{
    unsigned n = 0;
    while (n < BENCH_MAX_OUTPUTS && c->outputs[n]) {
        ret_names[n] = c->outputs[n];
        n++;
    }
    if (n == 0)
        ret_names[n++] = c->name;
    return n;
}

bool bench_filter_matches(const regex_t *filter, const char *bench, const char *impl)
{
    if (!filter)
        return true;
    char key[256];
    snprintf(key, sizeof(key), "%s/%s", bench, impl);
    return regexec(filter, key, 0, NULL, 0) == 0;
}

bool bench_unit_higher_is_better(const char *unit)
{
    return strcmp(unit, BENCH_ITEMS_PER_S) == 0 || strcmp(unit, BENCH_MB_PER_S) == 0 ||
           strcmp(unit, BENCH_ITEMS) == 0;
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

_Noreturn void bench_fail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "qflow-bench: FAILED: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(2);
}
