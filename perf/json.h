/* json.h - the little JSON qflow-bench needs: a streaming writer for the
 * results file and a small reader (whole document into a tree) for
 * --compare. Not a general-purpose library: numbers are doubles, strings
 * are UTF-8 passed through (\uXXXX escapes are decoded to UTF-8), nesting
 * is limited to JSON_MAX_DEPTH.
 */
#ifndef BENCH_JSON_H
#define BENCH_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

/* ----------------------------------------------------------------- writer
 * Pretty-printed, two spaces per level. Call jw_key() before each value
 * inside an object; commas are handled. Non-finite numbers become null. */
typedef struct json_writer {
    FILE *f;
    int depth;
    bool first[JSON_MAX_DEPTH]; /* nothing written yet at this level */
    bool after_key;
} json_writer;

void jw_init(json_writer *w, FILE *f);
void jw_begin_object(json_writer *w);
void jw_end_object(json_writer *w);
void jw_begin_array(json_writer *w);
void jw_end_array(json_writer *w);
void jw_key(json_writer *w, const char *key);
void jw_string(json_writer *w, const char *s);
void jw_number(json_writer *w, double v);
void jw_bool(json_writer *w, bool v);
void jw_null(json_writer *w);

/* ----------------------------------------------------------------- reader */
typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    bool boolean;
    double number;
    char *string;      /* JSON_STRING */
    size_t n;          /* items / members */
    json_value *items; /* JSON_ARRAY items, JSON_OBJECT member values */
    char **keys;       /* JSON_OBJECT member names */
};

/* Parse a whole document. Returns NULL on error with a message (and byte
 * offset) in err. Free with json_free(). */
json_value *json_parse(const char *text, char *err, size_t errlen);
void json_free(json_value *v);
/* Member `key` of an object, or NULL (also when v is not an object). */
const json_value *json_get(const json_value *v, const char *key);

#endif
