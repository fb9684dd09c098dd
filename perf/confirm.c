/* confirm.c - the second look of --compare at the rows it judged WORSE.
 *
 * A first look compares this run with a saved one, measured minutes, days
 * or another machine's placement earlier. On a shared machine what changed
 * in between (someone else's job, the hypervisor moving the guest) can move
 * one row's ratio beyond the threshold for a whole run; a slower qflow is
 * slower every time. So a WORSE row is looked at again before it fails the
 * run, in one of two ways:
 *
 *   - against the saved run: the rows' benches run again here and both
 *     looks together (twice the repetitions) are compared with the saved
 *     run. A burst that sat on the first look only is diluted; a regime
 *     that lasts the whole run is not.
 *   - against the old build, live (--base-bin OLD): the old build runs the
 *     same benches beside this one, turn about (old, new, new, old), each
 *     turn a process of its own (this build started again), and
 *     the row fails only when this build is WORSE than the old one measured
 *     now as well. Whatever moved between the saved run and now moves both
 *     builds alike. The old build runs without the test knob
 *     (QFLOW_BENCH_SLOWDOWN): it stands for the build before the change.
 *     Only this look lets qflow's CPU time per unit of work fail a row
 *     (compare.c): both builds then spin or sleep in the same regime.
 *
 * The looks go one WORSE row's bench at a time, then (when no row was
 * confirmed) one WORSE family at a time, and stop at the first confirmed:
 * that alone fails the run, and a slower qflow, WORSE in a dozen rows,
 * would otherwise spend minutes confirming all of them.
 *
 * A family's live look takes a run's repetitions per bench (a row's takes
 * twice that: one bench is seconds, a family a dozen benches). When it is
 * WORSE, one more live look follows and the two together decide: under
 * two `yes`es the CPU per item of a queue.tput row moves by up to +-100%
 * between two looks of one binary (its threads spin or sleep), and the
 * median of the family's eleven rows once came out 16.6% worse, past the
 * 15% bar, on the same binary, while three more such looks gave -4.0,
 * -2.5 and -10.4%. A slower qflow stays past the bar with twice the
 * repetitions; a look that passed it by chance seldom does.
 */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confirm.h"

extern char **environ;

/* Appends `s` to buf as a regex matching it literally. */
static void append_escaped(char *buf, size_t len, const char *s)
{
    size_t n = strlen(buf);
    for (; *s && n + 3 < len; s++) {
        if (strchr(".[]()*+?{}|^$\\", *s))
            buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = '\0';
}

/* Compiles a confirmation's filter `re` into *out; exits 2 when it is
 * not a valid extended regex (it is built from bench names here). */
static void compile_filter(const char *re, regex_t *out)
{
    if (regcomp(out, re, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "qflow-bench: bad confirmation filter '%s'\n", re);
        exit(2);
    }
}

/* re = "^(bench)/": the benches of one WORSE row. */
static void row_re(const char *bench, char *re, size_t len)
{
    snprintf(re, len, "^(");
    append_escaped(re, len - 8, bench);
    strncat(re, ")/", len - strlen(re) - 1);
}

/* The distinct benches of sum's pairs in `family`, in order, into out
 * (room for sum->npairs); returns how many. */
static size_t family_benches(const bench_cmp_summary *sum, const char *family, const char **out)
{
    size_t n = 0;
    for (size_t i = 0; i < sum->npairs; i++) {
        const char *b = sum->pairs[i].bench;
        char fam[48];
        bench_family_of(b, fam, sizeof(fam));
        if ((i > 0 && strcmp(sum->pairs[i - 1].bench, b) == 0) || strcmp(fam, family) != 0)
            continue;
        out[n++] = b;
    }
    return n;
}

/* re = "^(b1|b2|...)/" over benches[0..n). */
static void family_re(const char *const *benches, size_t n, char *re, size_t len)
{
    snprintf(re, len, "^(");
    for (size_t i = 0; i < n; i++) {
        if (i)
            strncat(re, "|", len - strlen(re) - 1);
        append_escaped(re, len - 8, benches[i]);
    }
    strncat(re, ")/", len - strlen(re) - 1);
}

/* a[0..na) then b[0..nb) in a new array; NULL unless both are there (a may
 * be missing when na is 0: the first look). */
static double *appended(const double *a, unsigned na, const double *b, unsigned nb)
{
    if ((na && !a) || !b)
        return NULL;
    double *v = bench_xcalloc(na + nb, sizeof(double));
    if (na)
        memcpy(v, a, na * sizeof(double));
    memcpy(v + na, b, nb * sizeof(double));
    return v;
}

/* Appends the repetitions of every result of `src` that passes `filter` to
 * the result of the same bench/impl in `dst` (added when absent), and sets
 * its median, min and max over all of them. Repetition i of every impl of
 * a bench stays in one round as long as each run gave every impl the same
 * number of repetitions (bench_run_all does). */
static void append_reps(bench_results *dst, const bench_results *src, const regex_t *filter)
{
    for (size_t i = 0; i < src->n; i++) {
        const bench_result *s = &src->v[i];
        if (!s->values || s->nvalues == 0 || !bench_filter_matches(filter, s->bench, s->impl))
            continue;
        bench_result *d = (bench_result *)bench_results_find(dst, s->bench, s->impl);
        if (!d) {
            d = bench_results_add(dst, s->bench, s->impl, s->unit);
            d->bc = s->bc;
        }
        unsigned n = d->nvalues + s->nvalues;
        double *v = bench_xcalloc(n, sizeof(double));
        bool *t = bench_xcalloc(n, sizeof(bool));
        if (d->nvalues) {
            memcpy(v, d->values, d->nvalues * sizeof(double));
            memcpy(t, d->truncated, d->nvalues * sizeof(bool));
        }
        memcpy(v + d->nvalues, s->values, s->nvalues * sizeof(double));
        if (s->truncated)
            memcpy(t + d->nvalues, s->truncated, s->nvalues * sizeof(bool));
        /* CPU and core-to-core figures only when both looks have them. */
        double *u = appended(d->cpu_util, d->nvalues, s->cpu_util, s->nvalues);
        double *c2c = appended(d->c2c_ns, d->nvalues, s->c2c_ns, s->nvalues);
        free(d->cpu_util);
        d->cpu_util = u;
        free(d->c2c_ns);
        d->c2c_ns = c2c;
        free(d->values);
        free(d->truncated);
        d->values = v;
        d->truncated = t;
        d->nvalues = d->reps = n;
        d->truncated_reps += s->truncated_reps;
        d->median = bench_median(v, n);
        d->min = d->max = v[0];
        for (unsigned k = 1; k < n; k++) {
            d->min = v[k] < d->min ? v[k] : d->min;
            d->max = v[k] > d->max ? v[k] : d->max;
        }
    }
}

/* Whether the second look found row `bench` WORSE again. */
static bool row_worse_again(const bench_cmp_summary *again, const char *bench)
{
    for (size_t k = 0; k < again->npairs; k++)
        if (strcmp(again->pairs[k].bench, bench) == 0 &&
            strncmp(again->pairs[k].row_verdict, "WORSE", 5) == 0)
            return true;
    return false;
}

/* The environment without the test knob, for the old build. */
static char **env_without_knob(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = bench_xcalloc(n + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "QFLOW_BENCH_SLOWDOWN=", 21) != 0)
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

/* Runs the qflow-bench `bin` on the benches of `re` with `o`'s mode,
 * repetitions and budget, its results into `json` and its output into
 * `log`, in environment `env`; returns its exit status (128 + the signal
 * that ended it), or -1 when it could not be started (errno). */
static int run_build(const char *bin, char **env, const bench_options *o, const char *re,
                     const char *json, const char *log)
{
    char reps[16], scale[32], workers[16];
    snprintf(reps, sizeof(reps), "%u", o->reps);
    snprintf(workers, sizeof(workers), "%d", bench_workers());
    snprintf(scale, sizeof(scale), "%g", o->budget_scale);
    const char *argv[16];
    int n = 0;
    argv[n++] = bin;
    if (o->quick)
        argv[n++] = "--quick";
    argv[n++] = "--filter";
    argv[n++] = re;
    argv[n++] = "--reps";
    argv[n++] = reps;
    argv[n++] = "--json";
    argv[n++] = json;
    if (o->budget_scale != 1) {
        argv[n++] = "--budget-scale";
        argv[n++] = scale;
    }
    if (!o->grow_budget)
        argv[n++] = "--fixed-budget";
    if (bench_workers() > 0) { /* both builds on pools of one size */
        argv[n++] = "--workers";
        argv[n++] = workers;
    }
    argv[n] = NULL;

    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    fflush(NULL);
    pid_t pid;
    int err = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, env);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) {
        errno = err;
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* This build, run again as a process of its own for a live look's "new"
 * turn: /proc/self/exe names it even when its file was replaced. */
#define THIS_BUILD "/proc/self/exe"

/* One run of a build (`old`: the old one, bin; else this one,
 * THIS_BUILD), `reps` repetitions, its results that pass `keep` (all when
 * NULL) appended to `into`; false (with the reason printed) when it
 * failed. The old build runs without the test knob; this one keeps it.
 * Its files are dir/{old,new}<k>.{json,log}. */
static bool build_look(bool old, const char *bin, const bench_options *o, unsigned reps,
                       const char *re, const regex_t *keep, const char *dir, int k,
                       bench_results *into)
{
    char json[4096], log[4096];
    snprintf(json, sizeof(json), "%s/%s%d.json", dir, old ? "old" : "new", k);
    snprintf(log, sizeof(log), "%s/%s%d.log", dir, old ? "old" : "new", k);
    printf("  %s (%s), turn %d: output in %s\n", old ? "the old build" : "this build", bin, k, log);
    bench_options bo = *o;
    bo.reps = reps;
    unlink(json); /* an earlier bench's file must not pass for this one's */
    char **env = old ? env_without_knob() : environ;
    int rc = run_build(bin, env, &bo, re, json, log);
    if (old)
        free(env);
    if (rc != 0) {
        const char *what = old ? "--base-bin " : "this build, ";
        if (rc < 0)
            printf("  %s%s could not be started: %s\n", what, bin, strerror(errno));
        else
            printf("  %s%s ended with status %d (its output: %s)\n", what, bin, rc, log);
        return false;
    }
    bench_results rs = {0};
    if (bench_read_json(json, &rs) != 0)
        return false;
    append_reps(into, &rs, keep);
    if (!into->meta.host) {
        into->meta = rs.meta;
        memset(&rs.meta, 0, sizeof(rs.meta));
    }
    bench_results_free(&rs);
    return true;
}

/* The files of a live look's turns in dir (both builds'), and dir. */
static void remove_base_files(const char *dir)
{
    static const char *const names[] = {"old1.json", "old1.log",  "old2.json",
                                        "old2.log",  "new1.json", "new1.log"};
    char path[4200];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* The live look, bench by bench: for each of benches[0..nb), the old
 * build (`side` + 1) / 2 repetitions, this one `side`, the old build
 * `side` / 2, each run filtered to that bench alone, so the two builds'
 * figures of a bench are always taken within the same few seconds. Both
 * builds' turns are processes of their own, measured alike. (This build's
 * turns once ran inside the process that had just run the whole suite; a
 * CI run then found one binary's queue.tput family 28.4% worse than
 * itself started afresh, over two live looks. A look made that way here
 * gave +6.5%, so the process is not shown to be the cause; the sign test
 * of compare_family.c is the guard against such a look.) (A
 * family's look once ran each side over all of its benches in turn: a
 * minute or more apart, and the machine changed regime in between often
 * enough that one binary was once "WORSE again" than itself by 27%.) A
 * bench the old build cannot run (one it does not have) is left out of
 * the look, and its second turn failing leaves its first turn's figures.
 * A case with several outputs runs once per output bench of the family
 * (each turn keeps only its own output). Appends to live_old and again;
 * false when the old build ran none of the benches. */
static bool live_turns(const bench_options *o, const char *base_bin, unsigned side,
                       const char *const *benches, size_t nb, const char *dir,
                       bench_results *live_old, bench_results *again)
{
    size_t ran = 0;
    for (size_t b = 0; b < nb; b++) {
        char bre[1024];
        row_re(benches[b], bre, sizeof(bre));
        regex_t cb;
        compile_filter(bre, &cb);
        if (build_look(true, base_bin, o, (side + 1) / 2, bre, &cb, dir, 1, live_old)) {
            /* the "new, new" of old, new, new, old */
            if (!build_look(false, THIS_BUILD, o, side, bre, &cb, dir, 1, again)) {
                printf("  this build could not run its turn: exit 2\n");
                exit(2);
            }
            (void)build_look(true, base_bin, o, side / 2, bre, &cb, dir, 2, live_old);
            ran++;
        } else if (nb > 1) {
            printf("  %s left out of the look: the old build did not run it\n", benches[b]);
        }
        regfree(&cb);
    }
    return ran > 0;
}

/* The figures of the live looks at one row or family: the old build's and
 * this one's, each look's turns appended (pooled) to the last's. */
typedef struct live_figures {
    bench_results old, now;
} live_figures;

static void live_figures_free(live_figures *f)
{
    bench_results_free(&f->old);
    bench_results_free(&f->now);
    *f = (live_figures){0};
}

/* One live look at benches[0..nb) beside the old build base_bin (`side`
 * repetitions of each build per bench, live_turns()), appended to `f`;
 * false (f unchanged) when the old build ran none of them. */
static bool live_look(const bench_options *o, const char *base_bin, unsigned side,
                      const char *const *benches, size_t nb, const char *re, live_figures *f)
{
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/qflow-bench-base.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("  --base-bin: no temporary directory under %s: %s\n", dir, strerror(errno));
        return false;
    }
    printf("\n== confirming: run again '%s', turn about with the old build: old %u, new %u, old %u "
           "repetitions%s\n",
           re, (side + 1) / 2, side, side / 2, nb > 1 ? ", bench by bench" : "");
    fflush(stdout);
    live_figures look = {0};
    bool ran = live_turns(o, base_bin, side, benches, nb, dir, &look.old, &look.now);
    if (ran) {
        if (!f->now.meta.host) {
            bench_options lo = *o;
            lo.reps = side;
            bench_meta_of_run(&lo, &f->now.meta);
        }
        append_reps(&f->old, &look.old, NULL);
        append_reps(&f->now, &look.now, NULL);
        if (!f->old.meta.host) {
            f->old.meta = look.old.meta;
            memset(&look.old.meta, 0, sizeof(look.old.meta));
        }
        remove_base_files(dir); /* a failed old build's output stays for the reader */
    }
    live_figures_free(&look);
    return ran;
}

/* This build against the old one over every live look in `f`. */
static void judge_live(const char *base_bin, const live_figures *f, const char *re,
                       double threshold, bench_cmp_summary *ret)
{
    regex_t cre;
    compile_filter(re, &cre);
    char what[4200];
    snprintf(what, sizeof(what), "the old build %s, run now beside this one", base_bin);
    bench_compare(what, &f->old, &f->now, threshold, &cre, true, ret);
    regfree(&cre);
}

/* The second look without a live old build: the benches of `re` run again
 * here and both looks together are compared with the saved run. `header`:
 * print the look's heading (a live look that could not run printed it). */
static void saved_look(const bench_options *o, const char *compare_path,
                       const bench_results *old_rs, const bench_results *new_rs, double threshold,
                       const char *re, bool header, bench_cmp_summary *ret)
{
    regex_t cre;
    compile_filter(re, &cre);
    bench_options co = *o;
    co.filter = &cre;
    if (header)
        printf("\n== confirming: run again '%s'\n", re);
    fflush(stdout);
    bench_results again = {0};
    bench_meta_of_run(&co, &again.meta);
    bench_run_all(&co, &again);
    bench_results both = {0};
    append_reps(&both, new_rs, &cre);
    append_reps(&both, &again, NULL);
    both.meta = again.meta;
    memset(&again.meta, 0, sizeof(again.meta));
    printf("\n== both looks together (first run and second)\n");
    bench_compare(compare_path, old_rs, &both, threshold, &cre, false, ret);
    bench_results_free(&both);
    bench_results_free(&again);
    regfree(&cre);
}

/* One second look at benches[0..nb) (`re` matches them all): live against
 * the old build when base_bin can be run (live_look(), `side` repetitions
 * of each build per bench; its figures stay in *live for a further look),
 * else against the saved run (o->reps more); fills `ret`. Returns whether
 * the look was live. */
static bool look_again(const bench_options *o, const char *compare_path,
                       const bench_results *old_rs, const bench_results *new_rs, double threshold,
                       const char *base_bin, unsigned side, const char *const *benches, size_t nb,
                       const char *re, live_figures *live, bench_cmp_summary *ret)
{
    if (base_bin && live_look(o, base_bin, side, benches, nb, re, live)) {
        judge_live(base_bin, live, re, threshold, ret);
        return true;
    }
    if (base_bin)
        printf("  the old build could not be run: confirming against %s instead\n", compare_path);
    saved_look(o, compare_path, old_rs, new_rs, threshold, re, !base_bin, ret);
    return false;
}

/* Looks again at the WORSE rows one bench at a time, then, when none was
 * confirmed, at each WORSE family: the first confirmed one fails the run,
 * so the looks stop there (a real slowdown costs one bench's second look,
 * not the whole suite's). A row's live look takes twice the repetitions
 * of a run on each side (one bench: seconds); a family's, which runs a
 * dozen benches and is judged over all of their rows at once, the
 * repetitions of a run, and when it is WORSE one more such look follows
 * and both together decide. */
int bench_confirm_worse(const bench_options *o, const char *compare_path,
                        const bench_results *old_rs, const bench_results *new_rs,
                        const bench_cmp_summary *sum, double threshold, const char *base_bin)
{
    char re[8192];
    int rows = 0, families = 0, looked = 0;
    for (size_t i = 0; i < sum->npairs && rows == 0; i++) {
        const bench_cmp_pair *p = &sum->pairs[i];
        if (strncmp(p->row_verdict, "WORSE", 5) != 0 ||
            (i > 0 && strcmp(sum->pairs[i - 1].bench, p->bench) == 0))
            continue;
        row_re(p->bench, re, sizeof(re));
        const char *bench = p->bench;
        bench_cmp_summary csum;
        live_figures live = {0};
        look_again(o, compare_path, old_rs, new_rs, threshold, base_bin, 2 * o->reps, &bench, 1, re,
                   &live, &csum);
        live_figures_free(&live);
        bool worse = row_worse_again(&csum, p->bench);
        printf("  %-22s WORSE, then %s\n", p->bench,
               worse ? "WORSE again: confirmed" : "not WORSE again: not a failure");
        bench_cmp_summary_free(&csum);
        rows += worse;
        looked++;
    }
    for (int f = 0; f < sum->worse_families && f < BENCH_FAMILIES_MAX && rows + families == 0;
         f++) {
        const char **benches = bench_xcalloc(sum->npairs + 1, sizeof(*benches));
        size_t nb = family_benches(sum, sum->family[f], benches);
        family_re(benches, nb, re, sizeof(re));
        bench_cmp_summary csum;
        live_figures live = {0};
        bool was_live = look_again(o, compare_path, old_rs, new_rs, threshold, base_bin, o->reps,
                                   benches, nb, re, &live, &csum);
        bool worse = bench_family_is_worse(&csum, sum->family[f]);
        /* A look that decides must also pass the sign test over the rows
         * (compare_family.c); the first live look only leads to the
         * second. */
        bool confirmed = bench_family_is_confirmed(&csum, sum->family[f]);
        printf("  family %-15s WORSE, then %s\n", sum->family[f],
               !worse      ? "not WORSE again: not a failure"
               : was_live  ? "WORSE again beside the old build: one more live look, pooled"
               : confirmed ? "WORSE again: confirmed"
                           : "WORSE again, but too few of its rows moved the worse way (sign "
                             "test p >= 0.01): not a failure");
        bench_cmp_summary_free(&csum);
        if (worse && !was_live)
            worse = confirmed;
        if (worse && was_live) {
            /* A family's live look has half a row's repetitions, and the
             * median of its rows, each moving by up to +-100% on its own
             * under load (CPU per item: whether threads spin or sleep),
             * once passed the bar on the same binary: one more live look,
             * and both together (a row's number of repetitions) decide.
             * When the old build cannot run again, the first look does,
             * as it did before there was a second. */
            if (live_look(o, base_bin, o->reps, benches, nb, re, &live)) {
                printf("\n== both live looks together\n");
                judge_live(base_bin, &live, re, threshold, &csum);
                worse = bench_family_is_worse(&csum, sum->family[f]);
                confirmed = bench_family_is_confirmed(&csum, sum->family[f]);
                bench_cmp_summary_free(&csum);
                printf("  family %-15s WORSE, then WORSE again, and in both live looks together: "
                       "%s\n",
                       sum->family[f],
                       confirmed ? "WORSE: confirmed"
                       : worse   ? "WORSE, but too few of its rows moved the worse way (sign "
                                   "test p >= 0.01): not a failure"
                                 : "not WORSE: not a failure");
                worse = confirmed;
            } else {
                printf("  family %-15s WORSE, then WORSE again; the old build did not run a "
                       "second time, so the first live look decides: %s\n",
                       sum->family[f],
                       confirmed ? "confirmed"
                                 : "too few of its rows moved the worse way (sign test p >= "
                                   "0.01): not a failure");
                worse = confirmed;
            }
        }
        live_figures_free(&live);
        free(benches);
        families += worse;
        looked++;
    }
    int total = sum->worse + sum->worse_families;
    printf("  confirmed: %d of %d WORSE rows, %d of %d WORSE families", rows, sum->worse, families,
           sum->worse_families);
    if (looked < total)
        printf(" (%d not looked at again: one confirmed fails the run)", total - looked);
    printf("\n");
    return rows + families;
}
