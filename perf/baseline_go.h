/* baseline_go.h - Go's channels and goroutines as baselines (perf/go/).
 *
 * The Go program runs a whole repetition itself; these functions start it
 * as a child process with the case's parameters, read its "key value"
 * lines and store the figures. Built only when meson found `go`
 * (QFB_GO_BIN is then the build tree's program, QFB_GO_INSTALLED the
 * installed one's path from bindir); bench_go_available() says whether it
 * is there, bench_go_missing() why not. */
#ifndef BENCH_BASELINE_GO_H
#define BENCH_BASELINE_GO_H

#include <stdbool.h>

#include "bench.h"

/* A case's parameters. mode: "tput", "pingpong" or "runners". */
typedef struct go_cfg {
    const char *mode;
    int producers, consumers;
    unsigned capacity;
    unsigned long items_quick, items_full; /* tput: values; pingpong: rounds */
    double window_quick_s, window_full_s;  /* runners */
} go_cfg;

bool bench_go_available(void);
/* NULL when the program is there; else why not, naming the paths tried
 * (static storage). */
const char *bench_go_missing(void);

/* Run the Go program once with `cfg`; for each name in keys[0..n), store
 * its value in out[i] (bench_fail() if the program fails or a key is
 * missing). */
void bench_go_run(const bench_rep *r, const go_cfg *cfg, const char *const *keys, double *out,
                  int n);

/* Run functions for the cases (arg: a go_cfg). tput: items/s in
 * values[0]; pingpong: p50 and p99 ns in values[0], values[1]. */
void bench_go_tput(bench_rep *r);
void bench_go_pingpong(bench_rep *r);

#endif
