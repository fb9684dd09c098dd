/* html_report.c - --report DIR: the comparison as one HTML page.
 *
 * A reviewer looking at a red gate wants to see the repetitions, not only
 * a p-value: were the old and new runs apart, or did one outlier decide?
 * So every pair (a qflow row against one baseline, its own figures, or its
 * own CPU time per unit of work) gets
 * a small chart with the old repetitions on the left and the new ones on
 * the right, both medians, and the line the new median must cross to be
 * "worse" (old median moved by the threshold); beside it, new/old with its
 * 95% interval, p(worse), the repetitions the threshold needs and the
 * verdicts. The page is self-contained (inline CSS and SVG, no script,
 * nothing fetched) so that a CI can keep it as an artifact and anyone can
 * open it offline.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_run.h"

#define CHART_W 300
#define CHART_H 120
#define PAD 8

static void html_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* The class of a verdict, for its colour. */
static const char *verdict_class(const char *v)
{
    if (strncmp(v, "WORSE", 5) == 0 || strncmp(v, "worse", 5) == 0)
        return "worse";
    if (strncmp(v, "better", 6) == 0)
        return "better";
    if (strncmp(v, "same", 4) == 0)
        return "same";
    if (strncmp(v, "NOT JUDGED", 10) == 0)
        return "notjudged";
    return "unsure";
}

/* y of value v on a log scale (a linear one when a figure is not
 * positive) between lo and hi. */
static double ypos(double v, double lo, double hi, bool logscale)
{
    double a = logscale ? log(lo) : lo, b = logscale ? log(hi) : hi, x = logscale ? log(v) : v;
    double frac = b > a ? (x - a) / (b - a) : 0.5;
    return PAD + (1 - frac) * (CHART_H - 2 * PAD);
}

static void chart(FILE *f, const bench_cmp_pair *p, double t)
{
    double lo = INFINITY, hi = -INFINITY;
    bool logscale = true;
    for (unsigned i = 0; i < p->n_old; i++) {
        lo = fmin(lo, p->old_v[i]);
        hi = fmax(hi, p->old_v[i]);
        logscale = logscale && p->old_v[i] > 0;
    }
    for (unsigned i = 0; i < p->n_new; i++) {
        lo = fmin(lo, p->new_v[i]);
        hi = fmax(hi, p->new_v[i]);
        logscale = logscale && p->new_v[i] > 0;
    }
    double mo = bench_median(p->old_v, p->n_old), mn = bench_median(p->new_v, p->n_new);
    double line = p->higher_better ? mo * (1 - t) : mo * (1 + t);
    if (isfinite(line)) {
        lo = fmin(lo, line);
        hi = fmax(hi, line);
    }
    if (!isfinite(lo)) {
        lo = 0;
        hi = 1;
    }
    if (hi == lo) {
        lo = logscale ? lo / 1.1 : lo - 1;
        hi = logscale ? hi * 1.1 : hi + 1;
    }
    fprintf(f,
            "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "role=\"img\" aria-label=\"old and new repetitions\">\n",
            CHART_W, CHART_H + 16, CHART_W, CHART_H + 16);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" class=\"bg\"/>\n", CHART_W,
            CHART_H);
    const int half = CHART_W / 2;
    for (int side = 0; side < 2; side++) {
        const double *v = side ? p->new_v : p->old_v;
        unsigned n = side ? p->n_new : p->n_old;
        int x0 = side * half + 20, w = half - 40;
        for (unsigned i = 0; i < n; i++) {
            double x = x0 + (n > 1 ? (double)w * i / (n - 1) : w / 2.0);
            fprintf(f, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"/>\n",
                    side ? "new" : "old", x, ypos(v[i], lo, hi, logscale));
        }
        double m = side ? mn : mo;
        if (isfinite(m))
            fprintf(f, "<line class=\"med\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n",
                    x0 - 10, x0 + w + 10, ypos(m, lo, hi, logscale), ypos(m, lo, hi, logscale));
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"axis\">%s (%u)</text>\n", x0, CHART_H + 13,
                side ? "new" : "old", n);
    }
    if (isfinite(line))
        fprintf(f,
                "<line class=\"thr\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"><title>old "
                "median %s the threshold</title></line>\n",
                half, CHART_W, ypos(line, lo, hi, logscale), ypos(line, lo, hi, logscale),
                p->higher_better ? "minus" : "plus");
    fprintf(f, "<line class=\"sep\" x1=\"%d\" x2=\"%d\" y1=\"0\" y2=\"%d\"/>\n", half, half,
            CHART_H);
    /* The scale's ends, so the spread can be read off the chart. */
    fprintf(f, "<text x=\"2\" y=\"%d\" class=\"axis\">%.3g</text>\n", PAD + 4, hi);
    fprintf(f, "<text x=\"2\" y=\"%d\" class=\"axis\">%.3g</text>\n", CHART_H - 2, lo);
    fprintf(f, "</svg>\n");
}

static void fmt_num(char *buf, size_t len, double v)
{
    if (!isfinite(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.3g", v);
}

int bench_html_report(const char *dir, const char *old_path, const bench_results *old_rs,
                      const bench_results *new_rs, double threshold_pct, const bench_cmp_summary *s)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "qflow-bench: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/index.html", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "qflow-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    double t = threshold_pct / 100;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>qflow-bench: comparison</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1100px}\n"
          "table.sum td,table.sum th{padding:2px 10px;text-align:left}\n"
          "section.row{border-top:1px solid #ccc;padding:6px 0}\n"
          "div.pair{display:flex;align-items:center;gap:18px;margin:4px 0}\n"
          "div.facts{font-size:14px;line-height:1.5}\n"
          ".worse{color:#b00;font-weight:bold}.better{color:#070}.same{color:#555}\n"
          ".unsure{color:#a60}.notjudged{color:#b00;font-style:italic}\n"
          "svg .bg{fill:#f7f7f7}svg circle.old{fill:#3465a4}svg circle.new{fill:#f57900}\n"
          "svg .med{stroke:#222;stroke-width:1.5}svg .thr{stroke:#b00;stroke-dasharray:4 3}\n"
          "svg .sep{stroke:#ccc}svg .axis{font-size:11px;fill:#444}\n"
          "</style>\n</head>\n<body>\n<h1>qflow-bench comparison</h1>\n",
          f);
    fputs("<table class=\"sum\">\n<tr><th>old run</th><td>", f);
    html_text(f, old_path);
    fputs(" (commit ", f);
    html_text(f, old_rs->meta.commit);
    fputs(")</td></tr>\n<tr><th>new run</th><td>commit ", f);
    html_text(f, new_rs->meta.commit);
    fputs(", mode ", f);
    html_text(f, new_rs->meta.mode);
    fputs(", host ", f);
    html_text(f, new_rs->meta.host);
    fputs("</td></tr>\n", f);
    fprintf(f, "<tr><th>threshold</th><td>%g%% (one-sided Mann-Whitney U, alpha 0.01)</td></tr>\n",
            threshold_pct);
    fprintf(f,
            "<tr><th>qflow rows</th><td id=\"summary\">%d judged of %d: %d same, %d better, %d "
            "inconclusive or not judged, <span class=\"%s\">%d WORSE</span></td></tr>\n",
            s->judged, s->rows, s->same, s->better, s->unsure, s->worse ? "worse" : "same",
            s->worse);
    fprintf(f, "<tr><th>families WORSE as a whole</th><td id=\"families\"><span class=\"%s\">%d",
            s->worse_families ? "worse" : "same", s->worse_families);
    for (int k = 0; k < s->worse_families && k < BENCH_FAMILIES_MAX; k++) {
        fputs(k ? ", " : ": ", f);
        html_text(f, s->family[k]);
        fprintf(f, " (sign test p %.4f%s)", s->family_p[k],
                bench_family_is_confirmed(s, s->family[k])
                    ? ""
                    : ": fails only on a look that passes it");
    }
    fputs("</span> (rows of one family judged together: see perf/README.md)</td></tr>\n", f);
    fputs("<tr><th>skipped peers</th><td>", f);
    html_text(f, new_rs->meta.skipped);
    fputs("</td></tr>\n</table>\n", f);
    fputs("<p>Each chart: qflow's ratio to the baseline (or its own figure) in every usable "
          "repetition, the old run on the left (blue) and the new one on the right (orange); "
          "black lines are medians, the dashed red line is where the new median would be "
          "worse by the threshold. Estimate and interval: new / old (Hodges-Lehmann, 95%).</p>\n",
          f);

    const char *cur = NULL;
    for (size_t i = 0; i < s->npairs; i++) {
        const bench_cmp_pair *p = &s->pairs[i];
        if (!cur || strcmp(cur, p->bench) != 0) {
            if (cur)
                fputs("</section>\n", f);
            cur = p->bench;
            fprintf(f, "<section class=\"row\" data-verdict=\"%s\">\n<h2>",
                    verdict_class(p->row_verdict));
            html_text(f, p->bench);
            fprintf(f, " <span class=\"%s verdict\">", verdict_class(p->row_verdict));
            html_text(f, p->row_verdict);
            fputs("</span></h2>\n", f);
        }
        fputs("<div class=\"pair\">\n", f);
        chart(f, p, t);
        char est[24], lo[24], hi[24];
        fmt_num(est, sizeof(est), p->est);
        fmt_num(lo, sizeof(lo), p->lo);
        fmt_num(hi, sizeof(hi), p->hi);
        fputs("<div class=\"facts\">against <b>", f);
        html_text(f, p->against);
        fputs("</b> (", f);
        html_text(f, p->unit);
        fprintf(f, ", %s is better)<br>\nnew / old: <span class=\"ratio\">%s [%s, %s]</span><br>\n",
                p->higher_better ? "higher" : "lower", est, lo, hi);
        if (isfinite(p->p_worse))
            fprintf(f, "p(worse): %.3g<br>\n", p->p_worse);
        fprintf(f, "repetitions: %u old, %u new", p->n_old, p->n_new);
        if (p->cut_old || p->cut_new)
            fprintf(f,
                    " (<span class=\"notjudged\">%u old, %u new left out: cut by the time "
                    "budget</span>)",
                    p->cut_old, p->cut_new);
        if (p->need)
            fprintf(f, "; the threshold needs %u", p->need);
        fprintf(f, "<br>\nverdict: <span class=\"%s\">", verdict_class(p->verdict));
        html_text(f, p->verdict);
        fputs("</span></div>\n</div>\n", f);
    }
    if (cur)
        fputs("</section>\n", f);
    if (s->npairs == 0)
        fputs("<p>No qflow row of the new run is in the old one: nothing compared.</p>\n", f);
    fputs("</body>\n</html>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "qflow-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
