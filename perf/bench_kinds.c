/* bench_kinds.c - the queue-kind benchmarks of issue 6 (see bench_kinds.h):
 * which cases exist, their work sizes, and the element helpers both sides
 * of each pair share. qb_run_tput() (bench_queue_tput.c) runs them. */
#include <string.h>

#include "bench_kinds.h"
#include "bench_queue.h"

/* splitmix64's finalizer: a bijection, so distinct values get distinct
 * priorities, and cheap enough to vanish next to a queue operation. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------ priority */

int64_t kb_priority(const void *v)
{
    return (int64_t)mix((uint64_t)(uintptr_t)v);
}

qf_element *kb_prio_element(void *v)
{
    qf_tensor *t[2] = {qf_tensor_new_i64(kb_priority(v)), qf_tensor_new_i64((int64_t)(uintptr_t)v)};
    if (!t[0] || !t[1])
        bench_fail("out of memory");
    qf_element *e = qf_element_of(2, t);
    if (!e)
        bench_fail("out of memory");
    return e;
}

int64_t kb_prio_key(const qf_element *e)
{
    int64_t k;
    memcpy(&k, qf_tensor_cdata(qf_element_get(e, 0)), sizeof(k));
    return k;
}

void *kb_prio_open(qf_element *e)
{
    int64_t v;
    memcpy(&v, qf_tensor_cdata(qf_element_get(e, 1)), sizeof(v));
    if (kb_prio_key(e) != kb_priority((void *)(uintptr_t)v))
        bench_fail("priority: element %#llx arrived with another element's priority",
                   (unsigned long long)v);
    qf_element_free(e);
    return (void *)(uintptr_t)v;
}

/* ------------------------------------------------------------- padding */

size_t kb_pad_len(const void *v)
{
    return 1 + (size_t)((mix((uint64_t)(uintptr_t)v) >> 8) % KB_PAD_MAX_LEN);
}

qf_element *kb_pad_element(void *v)
{
    size_t len = kb_pad_len(v);
    qf_shape sh = QF_SHAPE((int64_t)len);
    qf_tensor *t = qf_tensor_new(QF_INT64, &sh);
    if (!t)
        bench_fail("out of memory");
    int64_t *d = qf_tensor_data(t);
    for (size_t j = 0; j < len; j++)
        d[j] = (int64_t)(uintptr_t)v + (int64_t)j;
    qf_element *e = qf_element_of(1, &t);
    if (!e)
        bench_fail("out of memory");
    return e;
}

void kb_pad_check(const qf_tensor *batch, size_t n, void **ret_vs, const char *what)
{
    const qf_shape *sh = qf_tensor_shape(batch);
    if (qf_tensor_dtype(batch) != QF_INT64 || sh->rank != 2 || sh->dims[0] != (int64_t)n)
        bench_fail("%s: a batch of %zu rows has the wrong dtype or shape", what, n);
    size_t w = (size_t)sh->dims[1], longest = 0;
    const int64_t *d = qf_tensor_cdata(batch);
    for (size_t i = 0; i < n; i++) {
        const int64_t *row = d + i * w;
        size_t len = row[0] > 0 ? kb_pad_len((void *)(uintptr_t)row[0]) : 0;
        if (len == 0 || len > w)
            bench_fail("%s: row %zu starts with %#llx, which no producer sent in a row of %zu",
                       what, i, (unsigned long long)row[0], w);
        for (size_t j = 0; j < w; j++)
            if (row[j] != (j < len ? row[0] + (int64_t)j : 0))
                bench_fail("%s: row %zu cell %zu is %lld (row length %zu, width %zu)", what, i, j,
                           (long long)row[j], len, w);
        longest = len > longest ? len : longest;
        ret_vs[i] = (void *)(uintptr_t)row[0];
    }
    if (longest != w)
        bench_fail("%s: a batch padded to %zu, but its longest row has %zu", what, w, longest);
}

/* ------------------------------------------------------------ the cases */

#define K 1000

enum { SHUFFLE, PRIORITY, PADDING, N_KINDS };

typedef struct kind_bench {
    const char *name;
    int threads;
    int kind;
} kind_bench;

static const kind_bench benches[] = {
    {"shuffle.tput.p1c1", 1, SHUFFLE},   {"shuffle.tput.p4c4", 4, SHUFFLE},
    {"priority.tput.p1c1", 1, PRIORITY}, {"priority.tput.p4c4", 4, PRIORITY},
    {"padding.tput.p1c1", 1, PADDING},
};
#define N_BENCHES (sizeof(benches) / sizeof(benches[0]))

static const bq_impl *const impls[N_KINDS][2] = {
    [SHUFFLE] = {&bq_qflow_shuffle, &bq_mutex_cond_shuffle},
    [PRIORITY] = {&bq_qflow_priority, &bq_mutex_cond_priority},
    [PADDING] = {&bq_qflow_padding, &bq_mutex_cond_padding},
};

/* Elements per repetition (quick, full). The slowest quick repetitions
 * (mutex_cond shuffle at 4P4C, priority, padding) take 0.1 to 0.2 s on 2
 * quiet cores, which keeps the group near 5 s with --quick. */
static const uint64_t items[N_KINDS][2] = {
    [SHUFFLE] = {150 * K, 750 * K},
    [PRIORITY] = {80 * K, 400 * K},
    [PADDING] = {120 * K, 600 * K},
};

static tput_cfg cfgs[N_BENCHES][2];

void bench_register_kinds(void)
{
    for (size_t b = 0; b < N_BENCHES; b++) {
        const kind_bench *kb = &benches[b];
        for (int i = 0; i < 2; i++) {
            tput_cfg *cfg = &cfgs[b][i];
            *cfg = (tput_cfg){.impl = impls[kb->kind][i],
                              .producers = kb->threads,
                              .consumers = kb->threads,
                              .batch = 1,
                              .items_quick = items[kb->kind][0],
                              .items_full = items[kb->kind][1],
                              .deq_batch = kb->kind == PADDING ? KB_PAD_BATCH : 0,
                              .any_order = kb->kind != PADDING};
            bench_param p[BENCH_MAX_PARAMS] = {{.key = "producers", .num = kb->threads},
                                               {.key = "consumers", .num = kb->threads},
                                               {.key = "capacity", .num = QB_CAPACITY}};
            switch (kb->kind) {
            case SHUFFLE:
                p[3] = (bench_param){.key = "min_after_dequeue", .num = KB_MIN_AFTER_DEQUEUE};
                p[4] = (bench_param){.key = "element", .str = "pointer"};
                break;
            case PRIORITY:
                p[3] = (bench_param){.key = "element", .str = "(int64 priority, int64 payload)"};
                p[4] = (bench_param){.key = "priorities", .str = "random"};
                break;
            default:
                p[3] = (bench_param){.key = "batch", .num = KB_PAD_BATCH};
                p[4] = (bench_param){.key = "element", .str = "int64[1..16]"};
                break;
            }
            bench_case c = {
                .name = kb->name,
                .impl = cfg->impl->name,
                .unit = BENCH_ITEMS_PER_S,
                .note = cfg->impl->note,
                .run = qb_run_tput,
                .arg = cfg,
            };
            memcpy(c.params, p, sizeof(p));
            bench_register(&c);
        }
    }
}
