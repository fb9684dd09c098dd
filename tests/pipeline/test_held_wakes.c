/* test_held_wakes.c - a consumer thread that finishes the put requests of
 * producer tasks far back in a long line: on a queue of capacity below 8
 * it holds their wakes and sends them in batches (queues/engine/
 * qf_fifo_wait.c, "Held wakes"); on a larger one its takes leave the room
 * they free to the tasks it told, and the last of those to come back
 * fills it ("Room left for a returning task"). What must not change:
 * every element arrives once and in each producer's order, a close (plain
 * or cancelling) still reaches end-of-data, and a shutdown or a stop still
 * ends every runner, at whatever moment they come.
 *
 * Many QueueRunners (RUNNERS, far more than HOLD_LINE = 256) feed a small
 * queue (CAPACITY, or SMALL_CAPACITY for the holds), so hundreds wait in
 * line.
 * Each element is its runner's id and sequence number; the consumer checks
 * that a runner's numbers arrive one after another, with no gap and none
 * twice, through to end-of-data. Each round takes a random number of
 * elements, then ends the run one of three ways at that moment: a plain
 * close (every pending enqueue then finishes: the drain sees them all), a
 * cancelling close with no take after it until every runner has ended
 * (pending enqueues fail; the held must be told at the close), or a
 * shutdown of the runtime with the queue left open (each cancelled runner
 * takes its request back, or finds it held and has it released). A held wake that
 * nobody released shows as a hang: every wait here has a deadline
 * (WATCHDOG_S) that fails the test. Oversubscribed: 2 workers and the
 * consumer thread on a 2-CPU machine, more under the suite's parallel
 * run. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"

#define RUNNERS 1500
#define CAPACITY 64      /* a consumer thread leaves room to returning tasks */
#define SMALL_CAPACITY 4 /* below 8: a consumer thread's passes hold wakes */
#define ROUNDS 12
#define TAKES_MAX 40000
#define WATCHDOG_S 60.0
#define HANDOVER_TAKES 200
#define TASK_TAKES 10000
#define WORK_STEPS 20000
#define WORKERS 2 /* the line's runtime */

typedef struct producer {
    uint64_t id;
    uint32_t seq;
    uint32_t limit; /* elements it makes before its input ends; 0: no end */
} producer;

static atomic_uint started;   /* runners that made their first element */
static atomic_ulong made_all; /* elements made by all runners */

static qf_code produce(void *arg, void **ret_p)
{
    producer *p = arg;
    if (p->limit && p->seq == p->limit)
        return QF_OUT_OF_RANGE; /* its input ended: the runner leaves */
    atomic_fetch_add(&made_all, 1);
    if (++p->seq == 1)
        atomic_fetch_add(&started, 1);
    *ret_p = (void *)(uintptr_t)((p->id + 1) << 32 | p->seq);
    return QF_OK;
}

typedef enum { END_CLOSE, END_CANCEL, END_SHUTDOWN } ending;

/* The element v in its runner's order: the next number, or a failure. */
static void check_order(uint32_t *last, void *v)
{
    uint64_t x = (uint64_t)(uintptr_t)v;
    uint64_t id = (x >> 32) - 1;
    uint32_t seq = (uint32_t)x;
    cr_assert_lt(id, RUNNERS, "an element of no runner: %#llx", (unsigned long long)x);
    cr_assert_eq(seq, last[id] + 1, "runner %llu: element %u after %u (lost or twice)",
                 (unsigned long long)id, seq, last[id]);
    last[id] = seq;
}

/* Every runner ends (a watchdog on the join). An enqueue refused by the
 * close is not a closed-exception type (spec 127: OutOfRange only), so a
 * runner reports it to the Coordinator (spec 133) and the join may return
 * it: what matters here is that the join returns. Returns whether a runner
 * reported an error (the join's code). */
static bool join_runners(qf_coord *coord)
{
    qf_coord_request_stop(coord, NULL);
    qf_code rc = qf_coord_join(coord, NULL, 0, WATCHDOG_S, false, NULL);
    cr_assert(rc == QF_OK || rc == QF_CANCELLED, "join: %s: %s", qf_code_name(rc),
              qf_last_message());
    return rc != QF_OK;
}

/* n runners on a runtime of 2 workers, feeding one pointer queue. */
typedef struct line {
    qf_runtime *rt;
    qf_coord *coord;
    qf_queue *q;
    unsigned n;
    producer *prod;
    qf_queue_runner **runners;
    unsigned nrunners;
    uint32_t *last; /* per runner: the last number taken */
} line;

/* limit_max 0: n runners of one op each, with no end. Else one runner of
 * n ops, op i making 1 + i % limit_max elements: the last of its tasks to
 * end closes the queue. */
static void line_start_limited(line *l, unsigned n, int64_t capacity, unsigned limit_max)
{
    *l = (line){.n = n, .nrunners = limit_max ? 1 : n};
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = WORKERS, .name = "held"}, &l->rt),
                 QF_OK);
    cr_assert_eq(qf_coord_new(NULL, 0, &l->coord), QF_OK);
    cr_assert_eq(qf_ptr_queue_new(capacity, "held", 0, NULL, &l->q), QF_OK);
    l->prod = calloc(n, sizeof(*l->prod));
    l->runners = calloc(n, sizeof(*l->runners));
    l->last = calloc(RUNNERS, sizeof(*l->last)); /* check_order() bounds ids by RUNNERS */
    qf_enqueue_op *ops = calloc(n, sizeof(*ops));
    cr_assert(l->prod && l->runners && l->last && ops);
    for (unsigned i = 0; i < n; i++) {
        l->prod[i].id = i;
        l->prod[i].limit = limit_max ? 1 + i % limit_max : 0;
        ops[i] = (qf_enqueue_op){.name = "produce",
                                 .kind = QF_OP_PRODUCE_PTR,
                                 .produce_ptr = produce,
                                 .arg = &l->prod[i]};
    }
    for (unsigned i = 0; i < l->nrunners; i++)
        cr_assert_eq(
            qf_queue_runner_new(l->q, &ops[i], l->nrunners == 1 ? n : 1, NULL, &l->runners[i]),
            QF_OK);
    free(ops);
    atomic_store(&started, 0);
    atomic_store(&made_all, 0);
    cr_assert_eq(qf_queue_runners_start(l->runners, l->nrunners, l->rt, l->coord, QF_RUNNER_START,
                                        NULL, NULL),
                 QF_OK);
}

static void line_start(line *l, unsigned n, int64_t capacity)
{
    line_start_limited(l, n, capacity, 0);
}

/* After the runtime's shutdown. */
static void line_free(line *l)
{
    qf_runtime_free(l->rt);
    for (unsigned i = 0; i < l->nrunners; i++)
        qf_queue_runner_free(l->runners[i]);
    qf_coord_free(l->coord);
    qf_queue_unref(l->q);
    free(l->prod);
    free(l->runners);
    free(l->last);
}

/* Waits until every runner made its first element: each has been polled
 * and its first put is in line, accepted, or (for at most WORKERS of them,
 * the tasks on a worker at that moment) about to be made. */
static void wait_all_produced(const line *l)
{
    qf_deadline d = qf_deadline_in_s(WATCHDOG_S);
    while (atomic_load(&started) < l->n) {
        cr_assert(!qf_deadline_passed(d), "only %u of %u runners produced", atomic_load(&started),
                  l->n);
        sched_yield();
    }
}

/* After a plain close, the drain to end-of-data and the runners' join
 * (their counts are final and the join orders them before these reads):
 * each runner's elements were all delivered but perhaps its last, which a
 * close refuses when its put came after it. Before the close every runner
 * had produced (wait_all_produced()), and an element waiting in line at a
 * plain close is let in, so a runner delivers nothing only if its first
 * put was still to be made at the close: at most one per worker. Unless a
 * runner reported its refusal (`reported`): that stops the Coordinator,
 * whose stop actions are the runners' cancel ops (spec 134), a cancelling
 * close that fails every put still in line (seen in 17 of 1,255 runs with
 * three copies of this suite and four busy loops on 2 CPUs). */
static void expect_all_delivered_but_the_refused(const line *l, bool reported)
{
    unsigned none = 0;
    for (unsigned i = 0; i < l->n; i++) {
        uint32_t made = l->prod[i].seq;
        cr_assert(l->last[i] == made || l->last[i] + 1 == made,
                  "runner %u made %u element(s), %u delivered", i, made, l->last[i]);
        none += l->last[i] == 0;
    }
    if (!reported)
        cr_assert_leq(none, WORKERS,
                      "%u runners delivered nothing after a plain close, none reported a refusal",
                      none);
}

static void one_round(ending how, unsigned takes, int64_t capacity)
{
    line l;
    line_start(&l, RUNNERS, capacity);
    qf_runtime *rt = l.rt;
    qf_coord *coord = l.coord;
    qf_queue *q = l.q;
    uint32_t *last = l.last;

    for (unsigned k = 0; k < takes; k++) {
        void *v;
        cr_assert_eq(qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(WATCHDOG_S), &v), QF_OK,
                     "take %u of %u: %s", k, takes, qf_last_message());
        check_order(last, v);
    }
    if (how == END_SHUTDOWN) {
        /* Runners in line and held, nobody taking: the shutdown cancels
         * them all; each takes its request back or gets its held wake. */
        cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(WATCHDOG_S)), QF_OK, "shutdown: %s",
                     qf_last_message());
    } else {
        if (how == END_CLOSE)
            wait_all_produced(&l);
        cr_assert_eq(qf_queue_close(q, how == END_CANCEL), QF_OK);
        if (how == END_CANCEL) {
            /* No take after a cancelling close: the runners in line fail
             * and end, and the held ones must have been told too, or they
             * wait for ever and the join fails. */
            join_runners(coord);
        }
        /* End-of-data only once every pending enqueue is settled: a held
         * request's pending count must have dropped. */
        for (;;) {
            void *v;
            qf_code rc = qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(WATCHDOG_S), &v);
            if (rc == QF_OUT_OF_RANGE)
                break;
            cr_assert_eq(rc, QF_OK, "drain after the close: %s", qf_last_message());
            check_order(last, v);
        }
        if (how == END_CLOSE)
            expect_all_delivered_but_the_refused(&l, join_runners(coord));
        cr_assert_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(WATCHDOG_S)), QF_OK);
    }
    line_free(&l);
}

Test(held_wakes, every_element_once_in_order_through_closes_cancels_and_shutdowns, .timeout = 600)
{
    srand(7);
    /* Every ending at both capacities, twice. */
    for (int r = 0; r < ROUNDS; r++)
        one_round((ending)(r % 3), (unsigned)rand() % TAKES_MAX, r % 2 ? SMALL_CAPACITY : CAPACITY);
}

/* A consumer that never holds takes over from one that did: a thread takes
 * a few elements (holding the wakes of the runners it finishes: the queue
 * is below capacity 8), then a
 * task on another runtime takes the rest. Its passes finish requests
 * without holding them, which releases the held (found by review: before,
 * 56 of 1,000 runners in a program like this one stayed parked with their
 * element delivered while the task took 30,000 more; this test fails so
 * with that rule and the age limit left out). Every runner must deliver
 * again. */
typedef struct task_taker {
    qf_queue *q;
    uint32_t *last;
    unsigned left;
} task_taker;

static qf_code take_task(qf_task *t, void *arg)
{
    task_taker *k = arg;
    while (k->left > 0) {
        void *v;
        qf_code rc = qf_queue_poll_dequeue_ptr(k->q, qf_task_waker(t), &v);
        if (rc != QF_OK)
            return rc;
        check_order(k->last, v);
        k->left--;
        /* Slower than the runners refill (a count, not a clock: some
         * microseconds), so the line stays long and only the release
         * rules can end a hold. */
        volatile unsigned x = 0;
        for (unsigned i = 0; i < WORK_STEPS; i++)
            x = x * 31 + i;
    }
    return QF_OK;
}

Test(held_wakes, a_consumer_that_holds_nothing_releases_the_held, .timeout = 600)
{
    line l;
    line_start(&l, 1000, SMALL_CAPACITY);
    qf_runtime *other;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 1, .name = "taker"}, &other),
                 QF_OK);
    qf_queue *q = l.q;
    uint32_t *last = l.last;
    unsigned n = l.n;
    /* The line formed: every runner made its first element (all but the
     * queue's SMALL_CAPACITY then wait in line). */
    qf_deadline d = qf_deadline_in_s(WATCHDOG_S);
    while (atomic_load(&started) < n) {
        cr_assert(!qf_deadline_passed(d), "the runners never all produced");
        sched_yield();
    }
    for (unsigned k = 0; k < HANDOVER_TAKES; k++) {
        void *v;
        cr_assert_eq(qf_queue_dequeue_ptr_until(q, qf_deadline_in_s(WATCHDOG_S), &v), QF_OK);
        check_order(last, v);
    }
    task_taker tk = {.q = q, .last = last, .left = TASK_TAKES};
    qf_task *t;
    cr_assert_eq(qf_task_spawn(other, take_task, &tk, NULL, &t), QF_OK);
    cr_assert_eq(qf_task_join(t, qf_deadline_in_s(WATCHDOG_S), NULL), QF_OK, "watchdog");
    qf_task_unref(t);
    for (unsigned i = 0; i < n; i++)
        cr_assert_geq(last[i], 2, "runner %u delivered %u element(s) in %u takes", i, last[i],
                      HANDOVER_TAKES + TASK_TAKES);
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    join_runners(l.coord);
    cr_assert_eq(qf_runtime_shutdown(l.rt, qf_deadline_in_s(WATCHDOG_S)), QF_OK);
    qf_runtime_free(other);
    line_free(&l);
}

/* Room a consumer thread leaves to a returning runner (qf_fifo_wait.c,
 * "Room left for a returning task"): with the line long, a thread's take
 * may leave the slot it freed to a runner woken before, to fill together
 * with others. Whatever the consumer then does, the room must be filled
 * without it. The runners here make one element each (every other round:
 * one or two) and then leave, their input ended, so a runner that returns
 * often does not put again: the room is filled only if its return serves
 * the line. After each burst of takes (1 to half the capacity, so some
 * bursts stay below the most a consumer may leave, 16 here, and some pass
 * it) the consumer stops until the queue holds every element made and not
 * taken, up to its capacity. A slot left with nobody bound to fill it
 * shows as the watchdog failing that wait (every round fails so with the
 * return's pass left out). Every element arrives once and in its runner's
 * order, through to the end-of-data that the last runner's close makes. */
#define REFILL_ROUNDS 6

static void refill_round(unsigned limit_max)
{
    line l;
    line_start_limited(&l, RUNNERS, CAPACITY, limit_max);
    unsigned long taken = 0;
    for (unsigned b = 0;; b++) {
        qf_deadline d = qf_deadline_in_s(WATCHDOG_S);
        for (;;) {
            size_t size = qf_queue_size(l.q);
            unsigned long waiting = atomic_load(&made_all) - taken;
            if (size >= CAPACITY || size >= waiting || qf_queue_is_closed(l.q))
                break;
            cr_assert(!qf_deadline_passed(d),
                      "burst %u: the queue stays at %zu of %d with %lu elements made and not "
                      "taken, and nobody taking",
                      b, size, CAPACITY, waiting);
            sched_yield();
        }
        unsigned takes = 1 + (unsigned)rand() % (CAPACITY / 2);
        qf_code rc = QF_OK;
        for (unsigned k = 0; k < takes && rc == QF_OK; k++) {
            void *v;
            rc = qf_queue_dequeue_ptr_until(l.q, qf_deadline_in_s(WATCHDOG_S), &v);
            if (rc == QF_OK) {
                check_order(l.last, v);
                taken++;
            }
        }
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "burst %u: %s", b, qf_last_message());
    }
    for (unsigned i = 0; i < RUNNERS; i++)
        cr_assert_eq(l.last[i], l.prod[i].limit, "runner %u delivered %u of its %u elements", i,
                     l.last[i], l.prod[i].limit);
    join_runners(l.coord);
    cr_assert_eq(qf_runtime_shutdown(l.rt, qf_deadline_in_s(WATCHDOG_S)), QF_OK);
    line_free(&l);
}

Test(held_wakes, room_left_by_a_consumer_thread_is_filled_without_it, .timeout = 600)
{
    srand(11);
    for (unsigned r = 0; r < REFILL_ROUNDS; r++)
        refill_round(1 + r % 2);
}

/* Many consumer threads at once (CONSUMERS, eight times the CPUs): each
 * take's pass may hold wakes while other threads' passes release them, and
 * the run ends while they take. Each thread keeps what it took; a runner's
 * numbers, gathered from all threads, must be 1..k with none twice (no
 * order across threads to check). The ending comes once TAKES_MANY takes
 * are done, while the threads still take: a plain close (they drain to
 * end-of-data), a cancelling close, or a shutdown with the queue open (then
 * a plain close lets the threads reach end-of-data). */
#define CONSUMERS 16
#define TAKES_MANY 20000
#define TAKEN_FIRST 4096 /* a thread's record to start with; it grows */

typedef struct taker_thread {
    qf_queue *q;
    atomic_uint *takes; /* all threads' */
    uint64_t *got;      /* what this thread took */
    size_t n, cap;
    qf_code end; /* the code that ended its loop */
} taker_thread;

static void *take_until_the_end(void *arg)
{
    taker_thread *t = arg;
    for (;;) {
        void *v;
        qf_code rc = qf_queue_dequeue_ptr_until(t->q, qf_deadline_in_s(WATCHDOG_S), &v);
        if (rc != QF_OK) {
            t->end = rc;
            return NULL;
        }
        /* Grown, never capped: a loaded machine may keep the main thread
         * from its ending for long while these take (CI's debug build
         * filled a fixed record of 40,000). */
        if (t->n == t->cap) {
            uint64_t *more = realloc(t->got, 2 * t->cap * sizeof(*more));
            if (!more) {
                t->end = QF_RESOURCE_EXHAUSTED;
                return NULL;
            }
            t->got = more;
            t->cap *= 2;
        }
        t->got[t->n++] = (uint64_t)(uintptr_t)v;
        atomic_fetch_add(t->takes, 1);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void many_consumers_round(ending how)
{
    line l;
    line_start(&l, RUNNERS, CAPACITY);
    atomic_uint takes = 0;
    taker_thread tt[CONSUMERS];
    pthread_t th[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) {
        tt[i] = (taker_thread){.q = l.q,
                               .takes = &takes,
                               .got = malloc(TAKEN_FIRST * sizeof(uint64_t)),
                               .cap = TAKEN_FIRST};
        cr_assert_not_null(tt[i].got);
        cr_assert_eq(pthread_create(&th[i], NULL, take_until_the_end, &tt[i]), 0);
    }
    qf_deadline d = qf_deadline_in_s(WATCHDOG_S);
    while (atomic_load(&takes) < TAKES_MANY) {
        cr_assert(!qf_deadline_passed(d), "only %u takes", atomic_load(&takes));
        sched_yield();
    }
    if (how == END_CLOSE)
        wait_all_produced(&l);
    if (how == END_SHUTDOWN) {
        cr_assert_eq(qf_runtime_shutdown(l.rt, qf_deadline_in_s(WATCHDOG_S)), QF_OK, "shutdown: %s",
                     qf_last_message());
        cr_assert_eq(qf_queue_close(l.q, false), QF_OK);
    } else {
        cr_assert_eq(qf_queue_close(l.q, how == END_CANCEL), QF_OK);
        /* After a plain close the runners are joined once the takers are
         * at end-of-data: the stop's cancel ops (spec 134) would fail what
         * still waits in line. */
        if (how == END_CANCEL)
            join_runners(l.coord);
    }
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(tt[i].end, QF_OUT_OF_RANGE, "a taker ended with %s", qf_code_name(tt[i].end));
    }
    bool reported = how == END_CLOSE && join_runners(l.coord);
    if (how != END_SHUTDOWN)
        cr_assert_eq(qf_runtime_shutdown(l.rt, qf_deadline_in_s(WATCHDOG_S)), QF_OK);
    /* All threads' elements, sorted: per runner 1, 2, ... k, none twice. */
    size_t total = 0;
    for (int i = 0; i < CONSUMERS; i++)
        total += tt[i].n;
    uint64_t *all = malloc(total * 8);
    cr_assert_not_null(all);
    size_t at = 0;
    for (int i = 0; i < CONSUMERS; i++) {
        memcpy(all + at, tt[i].got, tt[i].n * 8);
        at += tt[i].n;
        free(tt[i].got);
    }
    qsort(all, total, 8, cmp_u64);
    for (size_t i = 0; i < total; i++)
        check_order(l.last, (void *)(uintptr_t)all[i]);
    if (how == END_CLOSE)
        expect_all_delivered_but_the_refused(&l, reported);
    free(all);
    line_free(&l);
}

Test(held_wakes, sixteen_consumer_threads_every_element_once, .timeout = 600)
{
    for (int r = 0; r < 6; r++)
        many_consumers_round((ending)(r % 3));
}
