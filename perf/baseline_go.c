/* baseline_go.c - run the Go baselines (see baseline_go.h). */
#include "baseline_go.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

bool bench_go_available(void)
{
#ifdef QFB_GO_BIN
    return access(QFB_GO_BIN, X_OK) == 0;
#else
    return false;
#endif
}

void bench_go_run(const bench_rep *r, const go_cfg *cfg, const char *const *keys, double *out,
                  int n)
{
#ifndef QFB_GO_BIN
    (void)r, (void)cfg, (void)keys, (void)out, (void)n;
    bench_fail("the Go baseline was not built");
#else
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
    char *argv[] = {(char *)QFB_GO_BIN, mode, a_prod, a_cons, a_cap, a_items, a_window, NULL};

    int fds[2];
    if (pipe(fds) != 0)
        bench_fail("go baseline: pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    pid_t pid;
    int err = posix_spawn(&pid, QFB_GO_BIN, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err != 0)
        bench_fail("go baseline: cannot start %s: %s", QFB_GO_BIN, strerror(err));
    FILE *f = fdopen(fds[0], "r");
    char line[256];
    bool found[8] = {false};
    while (f && fgets(line, sizeof(line), f)) {
        char key[64];
        double v;
        if (sscanf(line, "%63s %lf", key, &v) != 2)
            continue;
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
#endif
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
