/* json_read.c - a small recursive-descent JSON reader (RFC 8259 subset:
 * numbers as doubles, nesting up to JSON_MAX_DEPTH). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct parser {
    const char *start, *p;
    char *err;
    size_t errlen;
    bool failed;
} parser;

__attribute__((format(printf, 2, 3))) static void fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = true;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errlen, "%s at byte %td", msg, ps->p - ps->start);
}

static void skip_ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return v;
    *cap = *cap ? 2 * *cap : 8;
    void *nv = realloc(v, *cap * size);
    if (!nv) {
        perror("qflow-bench");
        exit(2);
    }
    return nv;
}

static void put_utf8(char *out, size_t *n, uint32_t cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xc0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xe0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*n)++] = (char)(0xf0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

static bool hex4(parser *ps, uint32_t *ret)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else {
            fail(ps, "bad \\u escape");
            return false;
        }
    }
    *ret = v;
    return true;
}

/* At the opening quote; returns a malloc'd string or NULL on error. The
 * output is never longer than the input span, so one allocation fits. */
static char *parse_string(parser *ps)
{
    ps->p++;
    const char *end = ps->p;
    while (*end && *end != '"')
        end += (*end == '\\' && end[1]) ? 2 : 1;
    if (*end != '"') {
        fail(ps, "unterminated string");
        return NULL;
    }
    char *out = malloc((size_t)(end - ps->p) + 1);
    if (!out) {
        perror("qflow-bench");
        exit(2);
    }
    size_t n = 0;
    while (ps->p < end) {
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20) {
            fail(ps, "control character in string");
            break;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        char e = *ps->p++;
        uint32_t cp;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            out[n++] = e;
            break;
        case 'b':
            out[n++] = '\b';
            break;
        case 'f':
            out[n++] = '\f';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 'r':
            out[n++] = '\r';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case 'u':
            /* 6 input bytes always cover the (at most 4) output bytes. */
            if (end - ps->p < 4 || !hex4(ps, &cp))
                break;
            if (cp >= 0xd800 && cp < 0xdc00 && end - ps->p >= 6 && ps->p[0] == '\\' &&
                ps->p[1] == 'u') {
                uint32_t lo;
                ps->p += 2;
                if (!hex4(ps, &lo))
                    break;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            put_utf8(out, &n, cp);
            break;
        default:
            fail(ps, "bad escape \\%c", e);
        }
        if (ps->failed)
            break;
    }
    if (ps->failed) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    ps->p = end + 1;
    return out;
}

static void parse_value(parser *ps, json_value *v, int depth);

static void parse_array(parser *ps, json_value *v, int depth)
{
    size_t cap = 0;
    v->type = JSON_ARRAY;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == ']') {
        ps->p++;
        return;
    }
    for (;;) {
        v->items = grow(v->items, &cap, v->n, sizeof(*v->items));
        memset(&v->items[v->n], 0, sizeof(*v->items));
        parse_value(ps, &v->items[v->n++], depth + 1);
        if (ps->failed)
            return;
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == ']') {
            ps->p++;
            return;
        }
        fail(ps, "expected ',' or ']'");
        return;
    }
}

static void parse_object(parser *ps, json_value *v, int depth)
{
    size_t cap = 0, kcap = 0;
    v->type = JSON_OBJECT;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == '}') {
        ps->p++;
        return;
    }
    for (;;) {
        skip_ws(ps);
        if (*ps->p != '"') {
            fail(ps, "expected a member name");
            return;
        }
        char *key = parse_string(ps);
        if (!key)
            return;
        skip_ws(ps);
        if (*ps->p != ':') {
            free(key);
            fail(ps, "expected ':'");
            return;
        }
        ps->p++;
        v->items = grow(v->items, &cap, v->n, sizeof(*v->items));
        v->keys = grow(v->keys, &kcap, v->n, sizeof(*v->keys));
        memset(&v->items[v->n], 0, sizeof(*v->items));
        v->keys[v->n] = key;
        parse_value(ps, &v->items[v->n++], depth + 1);
        if (ps->failed)
            return;
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == '}') {
            ps->p++;
            return;
        }
        fail(ps, "expected ',' or '}'");
        return;
    }
}

static bool literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(ps->p, word, n) != 0)
        return false;
    ps->p += n;
    return true;
}

static void parse_value(parser *ps, json_value *v, int depth)
{
    if (depth >= JSON_MAX_DEPTH) {
        fail(ps, "nested too deeply");
        return;
    }
    skip_ws(ps);
    char c = *ps->p;
    if (c == '{') {
        parse_object(ps, v, depth);
    } else if (c == '[') {
        parse_array(ps, v, depth);
    } else if (c == '"') {
        v->type = JSON_STRING;
        v->string = parse_string(ps);
    } else if (literal(ps, "true")) {
        v->type = JSON_BOOL;
        v->boolean = true;
    } else if (literal(ps, "false")) {
        v->type = JSON_BOOL;
    } else if (literal(ps, "null")) {
        v->type = JSON_NULL;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char *end;
        errno = 0;
        v->type = JSON_NUMBER;
        v->number = strtod(ps->p, &end);
        if (end == ps->p)
            fail(ps, "bad number");
        ps->p = end;
    } else {
        fail(ps, "unexpected character '%c'", c ? c : '?');
    }
}

json_value *json_parse(const char *text, char *err, size_t errlen)
{
    parser ps = {.start = text, .p = text, .err = err, .errlen = errlen};
    json_value *v = calloc(1, sizeof(*v));
    if (!v) {
        perror("qflow-bench");
        exit(2);
    }
    parse_value(&ps, v, 0);
    skip_ws(&ps);
    if (!ps.failed && *ps.p)
        fail(&ps, "trailing characters");
    if (ps.failed) {
        json_free(v);
        return NULL;
    }
    return v;
}

static void free_members(json_value *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free_members(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
}

void json_free(json_value *v)
{
    if (!v)
        return;
    free_members(v);
    free(v);
}

const json_value *json_get(const json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}
