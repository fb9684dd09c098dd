/* baseline_go.c - run the Go baselines (see baseline_go.h). */
#include "baseline_go.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Where the Go program is: QFLOW_BENCH_GO when set; else the installed
 * copy, found relative to this executable (bindir/../libexec/qflow: a
 * prefix moved as a whole keeps working); else the build tree's. NULL when
 * none is there; `looked` then lists the places tried. */
static const char *go_bin(char *looked, size_t len)
{
    static char found[8192];
    looked[0] = '\0';
    const char *env = getenv("QFLOW_BENCH_GO");
    if (env && *env) {
        snprintf(looked, len, "%s (QFLOW_BENCH_GO)", env);
        if (access(env, X_OK) != 0)
            return NULL;
        snprintf(found, sizeof(found), "%s", env);
        return found;
    }
#ifdef QFB_GO_INSTALLED
    char self[4096 - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        if (QFB_GO_INSTALLED[0] == '/')
            snprintf(found, sizeof(found), "%s", QFB_GO_INSTALLED);
        else
            snprintf(found, sizeof(found), "%s/%s", self, QFB_GO_INSTALLED);
        /* Named without "bin/..", as a user would look for it. */
        char *base = strrchr(found, '/'), dir[4096 - 64];
        *base = '\0';
        if (realpath(found, dir)) {
            char name[256];
            snprintf(name, sizeof(name), "%s", base + 1);
            snprintf(found, sizeof(found), "%s/%s", dir, name);
        } else {
            *base = '/';
        }
        snprintf(looked, len, "%s", found);
        if (access(found, X_OK) == 0)
            return found;
    }
#endif
#ifdef QFB_GO_BIN
    size_t l = strlen(looked);
    snprintf(looked + l, len - l, "%s%s", l ? ", " : "", QFB_GO_BIN);
    if (access(QFB_GO_BIN, X_OK) == 0) {
        snprintf(found, sizeof(found), "%s", QFB_GO_BIN);
        return found;
    }
#endif
    return NULL;
}

bool bench_go_available(void)
{
    char looked[8192];
    return go_bin(looked, sizeof(looked)) != NULL;
}

const char *bench_go_missing(void)
{
    static char why[8400];
    char looked[8192];
    if (go_bin(looked, sizeof(looked)))
        return NULL;
    if (!looked[0])
        return "not built: needs golang-go (perf/go/qfbench.go)";
    snprintf(why, sizeof(why), "its program qfbench-go is missing: not at %s", looked);
    return why;
}

void bench_go_run(const bench_rep *r, const go_cfg *cfg, const char *const *keys, double *out,
                  int n)
{
    char looked[8192];
    const char *bin = go_bin(looked, sizeof(looked));
    if (!bin) {
        (void)r, (void)cfg, (void)keys, (void)out, (void)n;
        bench_fail("the Go baseline is missing: %s", bench_go_missing());
    }
    {
        char a_prod[32], a_cons[32], a_cap[32], a_items[32], a_window[32];
        snprintf(a_prod, sizeof(a_prod), "-producers=%d", cfg->producers);
        snprintf(a_cons, sizeof(a_cons), "-consumers=%d", cfg->consumers);
        snprintf(a_cap, sizeof(a_cap), "-capacity=%u", cfg->capacity);
        snprintf(a_items, sizeof(a_items), "-items=%lu",
                 (unsigned long)bench_scale(r, cfg->items_quick, cfg->items_full));
        snprintf(a_window, sizeof(a_window), "-window=%.3fs",
                 r->quick ? cfg->window_quick_s : cfg->window_full_s);
        char mode[32];
        snprintf(mode, sizeof(mode), "-mode=%s", cfg->mode);
        char *argv[] = {(char *)bin, mode, a_prod, a_cons, a_cap, a_items, a_window, NULL};

        int fds[2];
        if (pipe(fds) != 0)
            bench_fail("go baseline: pipe failed");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
        posix_spawn_file_actions_addclose(&fa, fds[1]);
        pid_t pid;
        int err = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(fds[1]);
        if (err != 0)
            bench_fail("go baseline: cannot start %s: %s", bin, strerror(err));
        FILE *f = fdopen(fds[0], "r");
        char line[256];
        bool found[8] = {false};
        double procs = -1;
        while (f && fgets(line, sizeof(line), f)) {
            char key[64];
            double v;
            if (sscanf(line, "%63s %lf", key, &v) != 2)
                continue;
            if (strcmp(key, "gomaxprocs") == 0)
                procs = v;
            for (int i = 0; i < n && i < 8; i++)
                if (strcmp(key, keys[i]) == 0) {
                    out[i] = v;
                    found[i] = true;
                }
        }
        if (f)
            fclose(f);
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bench_fail("go baseline (%s) failed with status %d", cfg->mode, status);
        for (int i = 0; i < n && i < 8; i++)
            if (!found[i])
                bench_fail("go baseline (%s) printed no %s", cfg->mode, keys[i]);
        /* Same-size schedulers or no comparison (bench_workers()). */
        if (bench_workers() > 0 && procs != bench_workers())
            bench_fail("go baseline (%s) ran with GOMAXPROCS %g, not --workers %d", cfg->mode,
                       procs, bench_workers());
    }
}

void bench_go_tput(bench_rep *r)
{
    static const char *const keys[] = {"items_per_s"};
    bench_go_run(r, r->arg, keys, r->values, 1);
}

void bench_go_pingpong(bench_rep *r)
{
    static const char *const keys[] = {"p50_ns", "p99_ns"};
    bench_go_run(r, r->arg, keys, r->values, 2);
}
