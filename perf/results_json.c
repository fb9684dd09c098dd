/* results_json.c - the results file:
 *   {"machine": {host, cpu, nproc, kernel, arch, memory_bytes, compiler,
 *                date, qflow_version, mode, reps},
 *    "build": {commit, buildtype, optimization, sanitize, test_knobs,
 *              skipped_peers: "impl (why); ..." or "none"},
 *    "results": [{"bench", "impl", "unit", "median", "min", "max", "reps",
 *                 "values": [each repetition's raw figure, in run order],
 *                 "truncated": [whether it hit its time budget],
 *                 "cpu_util": [CPU seconds (the process's and its waited-for
 *                              children's) per wall second of each
 *                              repetition (bench_run.h)],
 *                 "c2c_ns": [the one-way core-to-core latency measured just
 *                            before each repetition's round, null where it
 *                            could not be (machine_c2c.c)],
 *                 "params": {...}}, ...]}
 * A result whose repetitions hit a time budget also carries
 * "truncated_reps": n in its params. Files of earlier versions (no
 * "build", "values" or "truncated") still read: --compare then says it
 * cannot judge. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"
#include "json.h"

static void write_params(json_writer *w, const bench_result *r)
{
    jw_begin_object(w);
    for (int i = 0; r->bc && i < BENCH_MAX_PARAMS && r->bc->params[i].key; i++) {
        const bench_param *p = &r->bc->params[i];
        jw_key(w, p->key);
        if (p->str)
            jw_string(w, p->str);
        else
            jw_number(w, p->num);
    }
    if (r->truncated_reps) {
        jw_key(w, "truncated_reps");
        jw_number(w, r->truncated_reps);
    }
    if (r->regrown_reps) {
        jw_key(w, "regrown_reps");
        jw_number(w, r->regrown_reps);
    }
    jw_end_object(w);
}

/* "key": [v[0], ..., v[n-1]] */
static void write_numbers(json_writer *w, const char *key, const double *v, unsigned n)
{
    jw_key(w, key);
    jw_begin_array(w);
    for (unsigned k = 0; k < n; k++)
        jw_number(w, v[k]);
    jw_end_array(w);
}

int bench_write_json(const char *path, const bench_results *rs, const bench_options *o)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "qflow-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    json_writer w;
    jw_init(&w, f);
    jw_begin_object(&w);
    jw_key(&w, "machine");
    bench_write_machine(&w, o, &rs->meta);
    jw_key(&w, "build");
    bench_write_build(&w, &rs->meta);
    jw_key(&w, "results");
    jw_begin_array(&w);
    for (size_t i = 0; i < rs->n; i++) {
        const bench_result *r = &rs->v[i];
        jw_begin_object(&w);
        jw_key(&w, "bench");
        jw_string(&w, r->bench);
        jw_key(&w, "impl");
        jw_string(&w, r->impl);
        jw_key(&w, "unit");
        jw_string(&w, r->unit);
        jw_key(&w, "median");
        jw_number(&w, r->median);
        jw_key(&w, "min");
        jw_number(&w, r->min);
        jw_key(&w, "max");
        jw_number(&w, r->max);
        jw_key(&w, "reps");
        jw_number(&w, r->reps);
        if (r->values) {
            write_numbers(&w, "values", r->values, r->nvalues);
            jw_key(&w, "truncated");
            jw_begin_array(&w);
            for (unsigned k = 0; k < r->nvalues; k++)
                jw_bool(&w, r->truncated[k]);
            jw_end_array(&w);
            if (r->cpu_util)
                write_numbers(&w, "cpu_util", r->cpu_util, r->nvalues);
            if (r->c2c_ns)
                write_numbers(&w, "c2c_ns", r->c2c_ns, r->nvalues);
        }
        jw_key(&w, "params");
        write_params(&w, r);
        jw_end_object(&w);
    }
    jw_end_array(&w);
    jw_end_object(&w);
    if (fclose(f) != 0) {
        fprintf(stderr, "qflow-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb)
            free(buf);
        buf = nb;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A number; null (a value that could not be measured) reads as NaN. */
static double number_or(const json_value *v, double dflt)
{
    if (v && v->type == JSON_NULL)
        return NAN;
    return v && v->type == JSON_NUMBER ? v->number : dflt;
}

static const char *string_of(const json_value *v)
{
    return v && v->type == JSON_STRING ? v->string : NULL;
}

static char *dup_member(const json_value *obj, const char *key)
{
    const char *v = string_of(json_get(obj, key));
    char *d = strdup(v ? v : "");
    if (!d) {
        perror("qflow-bench");
        exit(2);
    }
    return d;
}

static void read_meta(const json_value *doc, bench_meta *m)
{
    const json_value *mach = json_get(doc, "machine"), *build = json_get(doc, "build");
    m->host = dup_member(mach, "host");
    m->cpu = dup_member(mach, "cpu");
    m->arch = dup_member(mach, "arch");
    m->kernel = dup_member(mach, "kernel");
    m->compiler = dup_member(mach, "compiler");
    m->mode = dup_member(mach, "mode");
    m->nproc = number_or(json_get(mach, "nproc"), 0);
    m->memory_bytes = number_or(json_get(mach, "memory_bytes"), 0);
    m->commit = dup_member(build, "commit");
    m->buildtype = dup_member(build, "buildtype");
    m->optimization = dup_member(build, "optimization");
    m->sanitize = dup_member(build, "sanitize");
    m->knobs = dup_member(build, "test_knobs");
    m->skipped = dup_member(build, "skipped_peers");
}

/* An array of n numbers (null: NAN) as a calloc'd array; NULL when the key
 * is absent or of another length (a file of an earlier version: nothing is
 * judged or shown by it). */
static double *numbers_of(const json_value *a, size_t n)
{
    if (!a || a->type != JSON_ARRAY || a->n != n)
        return NULL;
    double *v = calloc(n, sizeof(double));
    if (!v) {
        perror("qflow-bench");
        exit(2);
    }
    for (size_t k = 0; k < n; k++)
        v[k] = number_or(&a->items[k], NAN);
    return v;
}

/* "values" and "truncated" of a result, when both are there and agree. */
static void read_values(const json_value *e, bench_result *r)
{
    const json_value *vs = json_get(e, "values"), *ts = json_get(e, "truncated");
    if (!vs || vs->type != JSON_ARRAY || !ts || ts->type != JSON_ARRAY || vs->n != ts->n ||
        vs->n == 0)
        return;
    r->values = calloc(vs->n, sizeof(double));
    r->truncated = calloc(vs->n, sizeof(bool));
    if (!r->values || !r->truncated) {
        perror("qflow-bench");
        exit(2);
    }
    for (size_t k = 0; k < vs->n; k++) {
        r->values[k] = number_or(&vs->items[k], NAN);
        r->truncated[k] = ts->items[k].type == JSON_BOOL && ts->items[k].boolean;
    }
    r->nvalues = (unsigned)vs->n;
    r->cpu_util = numbers_of(json_get(e, "cpu_util"), vs->n);
    r->c2c_ns = numbers_of(json_get(e, "c2c_ns"), vs->n);
}

int bench_read_json(const char *path, bench_results *ret)
{
    char *text = slurp(path);
    if (!text) {
        fprintf(stderr, "qflow-bench: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char err[200];
    json_value *doc = json_parse(text, err, sizeof(err));
    free(text);
    if (!doc) {
        fprintf(stderr, "qflow-bench: %s: %s\n", path, err);
        return -1;
    }
    const json_value *results = json_get(doc, "results");
    if (!results || results->type != JSON_ARRAY) {
        fprintf(stderr, "qflow-bench: %s: no \"results\" array\n", path);
        json_free(doc);
        return -1;
    }
    for (size_t i = 0; i < results->n; i++) {
        const json_value *e = &results->items[i];
        const char *bench = string_of(json_get(e, "bench"));
        const char *impl = string_of(json_get(e, "impl"));
        const char *unit = string_of(json_get(e, "unit"));
        if (!bench || !impl || !unit) {
            fprintf(stderr, "qflow-bench: %s: result %zu lacks bench, impl or unit\n", path, i);
            continue;
        }
        bench_result *r = bench_results_add(ret, bench, impl, unit);
        r->median = number_or(json_get(e, "median"), 0);
        r->min = number_or(json_get(e, "min"), r->median);
        r->max = number_or(json_get(e, "max"), r->median);
        r->reps = (unsigned)number_or(json_get(e, "reps"), 0);
        r->truncated_reps =
            (unsigned)number_or(json_get(json_get(e, "params"), "truncated_reps"), 0);
        read_values(e, r);
    }
    read_meta(doc, &ret->meta);
    ret->meta.has_values = ret->n > 0;
    for (size_t i = 0; i < ret->n; i++)
        ret->meta.has_values &= ret->v[i].values != NULL;
    json_free(doc);
    return 0;
}
