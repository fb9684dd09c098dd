/* json_write.c - streaming, pretty-printed JSON output. */
#include <math.h>

#include "json.h"

void jw_init(json_writer *w, FILE *f)
{
    w->f = f;
    w->depth = 0;
    w->first[0] = true;
    w->after_key = false;
}

static void indent(json_writer *w)
{
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->f);
}

/* Separator and indentation before a value or a key. */
static void before_item(json_writer *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        if (!w->first[w->depth])
            fputc(',', w->f);
        indent(w);
    }
    w->first[w->depth] = false;
}

static void begin(json_writer *w, char c)
{
    before_item(w);
    fputc(c, w->f);
    if (w->depth + 1 < JSON_MAX_DEPTH)
        w->depth++;
    w->first[w->depth] = true;
}

static void end(json_writer *w, char c)
{
    bool empty = w->first[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (!empty)
        indent(w);
    fputc(c, w->f);
    if (w->depth == 0)
        fputc('\n', w->f);
}

void jw_begin_object(json_writer *w)
{
    begin(w, '{');
}

void jw_end_object(json_writer *w)
{
    end(w, '}');
}

void jw_begin_array(json_writer *w)
{
    begin(w, '[');
}

void jw_end_array(json_writer *w)
{
    end(w, ']');
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void jw_key(json_writer *w, const char *key)
{
    before_item(w);
    put_string(w->f, key);
    fputs(": ", w->f);
    w->after_key = true;
}

void jw_string(json_writer *w, const char *s)
{
    before_item(w);
    put_string(w->f, s);
}

void jw_number(json_writer *w, double v)
{
    before_item(w);
    if (isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0)
        fprintf(w->f, "%.0f", v); /* integers exactly (byte counts, reps) */
    else if (isfinite(v))
        fprintf(w->f, "%.10g", v);
    else
        fputs("null", w->f);
}

void jw_bool(json_writer *w, bool v)
{
    before_item(w);
    fputs(v ? "true" : "false", w->f);
}

void jw_null(json_writer *w)
{
    before_item(w);
    fputs("null", w->f);
}
