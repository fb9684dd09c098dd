/* machine.c - describe the machine and the build a run was made on and
 * with (the "machine" and "build" objects of the results file), so numbers
 * are never read without them and --compare can warn when two runs differ
 * in what makes their ratios incomparable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench_build.h" /* generated: BENCH_COMMIT (perf/meson.build) */
#include "bench_run.h"
#include "json.h"
#include "qflow.h"

/* Build options, from perf/meson.build. */
#ifndef BENCH_BUILDTYPE
#define BENCH_BUILDTYPE "unknown"
#endif
#ifndef BENCH_OPTIMIZATION
#define BENCH_OPTIMIZATION "unknown"
#endif
#ifndef BENCH_SANITIZE
#define BENCH_SANITIZE "unknown"
#endif

/* The value of the first "key : value" line of a /proc file, or "". */
static void proc_field(const char *path, const char *key, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, klen) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(buf, len, "%s", v);
        break;
    }
    fclose(f);
}

static char *dup_or_empty(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        perror("qflow-bench");
        exit(2);
    }
    return d;
}

void bench_meta_of_run(const bench_options *o, bench_meta *m)
{
    char buf[512];
    struct utsname u;
    memset(m, 0, sizeof(*m));
    if (gethostname(buf, sizeof(buf)) != 0)
        buf[0] = '\0';
    buf[sizeof(buf) - 1] = '\0';
    m->host = dup_or_empty(buf);
    proc_field("/proc/cpuinfo", "model name", buf, sizeof(buf));
    m->cpu = dup_or_empty(buf[0] ? buf : "unknown");
    m->nproc = (double)sysconf(_SC_NPROCESSORS_ONLN);
    if (uname(&u) == 0) {
        snprintf(buf, sizeof(buf), "%s %s", u.sysname, u.release);
        m->kernel = dup_or_empty(buf);
        m->arch = dup_or_empty(u.machine);
    } else {
        m->kernel = dup_or_empty("");
        m->arch = dup_or_empty("");
    }
    proc_field("/proc/meminfo", "MemTotal", buf, sizeof(buf));
    long long kb = 0;
    if (sscanf(buf, "%lld", &kb) == 1)
        m->memory_bytes = (double)kb * 1024;
#if defined(__clang__)
    m->compiler = dup_or_empty("clang " __clang_version__);
#elif defined(__GNUC__)
    m->compiler = dup_or_empty("gcc " __VERSION__);
#else
    m->compiler = dup_or_empty("");
#endif
    m->mode = dup_or_empty(o->quick ? "quick" : "default");
    m->commit = dup_or_empty(BENCH_COMMIT);
    m->buildtype = dup_or_empty(BENCH_BUILDTYPE);
    m->optimization = dup_or_empty(BENCH_OPTIMIZATION);
    m->sanitize = dup_or_empty(BENCH_SANITIZE);
    /* The run's knobs, "none" without any: a slowed qflow (the gate's
     * test) and a pool size other than one worker per CPU (--workers). */
    size_t kn = 0;
    buf[0] = '\0';
    if (bench_slowdown() != 1)
        kn += (size_t)snprintf(buf, sizeof(buf), "slowdown=%g", bench_slowdown());
    if (bench_workers() > 0 && kn < sizeof(buf))
        snprintf(buf + kn, sizeof(buf) - kn, "%sworkers=%d", kn ? " " : "", bench_workers());
    m->knobs = dup_or_empty(buf[0] ? buf : "none");
    m->skipped = dup_or_empty(bench_skipped_peers(buf, sizeof(buf)) ? buf : "none");
    m->has_values = true;
}

void bench_write_machine(json_writer *w, const bench_options *o, const bench_meta *m)
{
    char buf[64];
    jw_begin_object(w);
    jw_key(w, "host");
    jw_string(w, m->host);
    jw_key(w, "cpu");
    jw_string(w, m->cpu);
    jw_key(w, "nproc");
    jw_number(w, m->nproc);
    jw_key(w, "kernel");
    jw_string(w, m->kernel);
    jw_key(w, "arch");
    jw_string(w, m->arch);
    if (m->memory_bytes > 0) {
        jw_key(w, "memory_bytes");
        jw_number(w, m->memory_bytes);
    }
    jw_key(w, "compiler");
    jw_string(w, m->compiler);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    jw_key(w, "date");
    jw_string(w, buf);
    jw_key(w, "qflow_version");
    jw_string(w, qf_version());
    jw_key(w, "mode");
    jw_string(w, m->mode);
    jw_key(w, "reps");
    jw_number(w, o->reps);
    jw_key(w, "budget_scale");
    jw_number(w, o->budget_scale);
    jw_end_object(w);
}

void bench_write_build(json_writer *w, const bench_meta *m)
{
    jw_begin_object(w);
    jw_key(w, "commit");
    jw_string(w, m->commit);
    jw_key(w, "buildtype");
    jw_string(w, m->buildtype);
    jw_key(w, "optimization");
    jw_string(w, m->optimization);
    jw_key(w, "sanitize");
    jw_string(w, m->sanitize);
    jw_key(w, "test_knobs");
    jw_string(w, m->knobs);
    jw_key(w, "skipped_peers");
    jw_string(w, m->skipped);
    jw_end_object(w);
}
