/* machine.c - describe the machine a run was made on (the "machine"
 * object of the results file), so numbers are never read without it. */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench_run.h"
#include "json.h"
#include "qflow.h"

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

void bench_write_machine(json_writer *w, const bench_options *o)
{
    char buf[512];
    struct utsname u;

    jw_begin_object(w);
    proc_field("/proc/cpuinfo", "model name", buf, sizeof(buf));
    jw_key(w, "cpu");
    jw_string(w, buf[0] ? buf : "unknown");
    jw_key(w, "nproc");
    jw_number(w, (double)sysconf(_SC_NPROCESSORS_ONLN));
    if (uname(&u) == 0) {
        snprintf(buf, sizeof(buf), "%s %s", u.sysname, u.release);
        jw_key(w, "kernel");
        jw_string(w, buf);
        jw_key(w, "arch");
        jw_string(w, u.machine);
    }
    proc_field("/proc/meminfo", "MemTotal", buf, sizeof(buf));
    long long kb = 0;
    if (sscanf(buf, "%lld", &kb) == 1) {
        jw_key(w, "memory_bytes");
        jw_number(w, (double)kb * 1024);
    }
#if defined(__clang__)
    jw_key(w, "compiler");
    jw_string(w, "clang " __clang_version__);
#elif defined(__GNUC__)
    jw_key(w, "compiler");
    jw_string(w, "gcc " __VERSION__);
#endif
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    jw_key(w, "date");
    jw_string(w, buf);
    jw_key(w, "qflow_version");
    jw_string(w, qf_version());
    jw_key(w, "mode");
    jw_string(w, o->quick ? "quick" : "default");
    jw_key(w, "reps");
    jw_number(w, o->reps);
    jw_end_object(w);
}
