/* results_json.c - the results file:
 *   {"machine": {...}, "results": [{"bench", "impl", "unit", "median",
 *    "min", "max", "reps", "params": {...}}, ...]}
 * A result whose repetitions hit a time budget carries
 * "truncated_reps": n in its params. */
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
    jw_end_object(w);
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
    bench_write_machine(&w, o);
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
    }
    json_free(doc);
    return 0;
}
