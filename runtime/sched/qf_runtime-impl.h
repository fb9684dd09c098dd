/* qf_runtime-impl.h - internal: runtime, worker and task structures.
 *
 * Task states (qf_task.state):
 *
 *   SCHEDULED --pop--> RUNNING --poll returns PENDING--> PARKED
 *       ^                 |  \--wake while running--> NOTIFIED
 *       |                 |                              |
 *       +---- wake -------+------ poll returns ----------+   (re-queued)
 *                         \--poll returns OK/error--> DONE
 *
 * Exactly one thread moves a task out of PARKED (the CAS in qf_task_wake),
 * so a task is in at most one run queue at a time; a wake during RUNNING
 * turns into NOTIFIED and the worker re-queues the task after the poll.
 * A wake that finds SCHEDULED or NOTIFIED adds nothing: the poll to come
 * must see the waker's condition, so the RUNNING store and the wake's
 * load of the state are each followed / preceded by a full fence (a
 * Dekker pair: qf__task_run, qf_task_wake).
 */
#ifndef QF_RUNTIME_IMPL_H
#define QF_RUNTIME_IMPL_H

#include <ck_ring.h>
#include <pthread.h>
#include <stdatomic.h>

#include "qf_ring-impl.h"
#include "qf_runtime.h"
#include "qf_thread.h"

enum { T_PARKED, T_SCHEDULED, T_RUNNING, T_NOTIFIED, T_DONE };

/* A link in the global run queue (qf_sched_queue.c). */
typedef struct qf__gnode {
    _Atomic(struct qf__gnode *) next;
} qf__gnode;

/* The global run queue: FIFO, many pushers (one atomic exchange each, a
 * chain of tasks with one), one popper at a time (a try-lock: a worker
 * that finds it taken looks elsewhere). See qf_sched_queue.c. */
typedef struct qf__gqueue {
    _Alignas(64) _Atomic(qf__gnode *) tail; /* pushers */
    _Atomic int64_t len;                    /* tasks queued (a hint) */
    _Alignas(64) _Atomic uint32_t lock;     /* poppers */
    qf__gnode *head;                        /* under lock */
    qf__gnode stub;
} qf__gqueue;

struct qf_task {
    qf__gnode gnode; /* link in the global run queue */
    _Atomic uint32_t state;
    _Atomic uint32_t refs;
    _Atomic uint32_t done; /* futex word for join (qf_task.c, TASK_DONE) */
    _Atomic bool cancelled;
    bool daemon;
    uint8_t mem_class; /* qf__block_alloc()'s class of a task on its own */
    qf_runtime *rt;
    qf_task_fn fn;
    void *arg;
    /* Inside the task's allocation, or (with a Coordinator) inside its
     * member record, which then also holds the task itself. */
    const char *name;
    qf_waker waker;
    qf_code result;
    qf_status *status;
    /* Set for the task's whole life: done at finish, and (when the task
     * lives inside it) released by task_free. */
    qf_coord_member *member;
    /* timer: guarded by rt->timer_lock */
    qf_deadline timer_at;
    int64_t timer_idx; /* -1 when not armed */
    /* live list: guarded by rt->live_lock */
    qf_task *live_next, *live_prev;
};

#define QF__LOCAL_RING 256
/* Of what one poll's wakes push out of the next slot, how many go to the
 * local ring; the rest go to the global queue (qf_scheduler.c). */
#define QF__NEXT_SLOT_WAKES 4
/* A worker's search budget, in rounds (qf_scheduler.c). */
#define QF__SEARCH_MIN 2
#define QF__SEARCH_MAX 32

typedef struct qf__worker {
    qf_runtime *rt;
    int index;
    pthread_t thread;
    /* The owner puts and takes; a rescue (qf_scheduler.c) may take it
     * from a stalled owner. */
    _Atomic(qf_task *) next_slot;
    unsigned next_streak;
    /* The owner's last push into its own ring skipped the wake
     * (qf_scheduler.c, qf__push_again()); its next pick settles it. Owner
     * only. */
    bool quiet_push;
    unsigned tick;
    /* Rounds of the owner's next search, QF__SEARCH_MIN..QF__SEARCH_MAX
     * (qf_scheduler.c, "How long a search lasts"). Written by the owner
     * only; atomic (relaxed) so that tests may watch it. */
    _Atomic unsigned search_rounds;
    uint64_t rng;
    /* The owner's pick count, published (relaxed) at every pick; and the
     * value another worker last saw there (qf_scheduler.c, "Rescue"). */
    _Atomic unsigned beat, beat_seen;
    /* The deadline of the owner's latest idle wait (QF_FOREVER before the
     * first): written by the owner before its wait, read by whoever arms
     * the runtime's earliest timer (qf_scheduler.c, "timers"). On a line of
     * its own: the owner writes next_slot and beat at every pick, and an
     * arm reads every worker's deadline. */
    _Alignas(64) _Atomic int64_t sleep_dl;
    /* The worker slice the owner follows (qf_scheduler.c, follow_slice()):
     * the setting's generation it last took, and what it changed. Owner
     * only. */
    uint32_t slice_gen;
    bool slice_applied;
    qf_thread_sched slice_saved;
    /* SPMC: the owner pushes, anyone pops. The queue layer's ring
     * operations (ck_ring indices, slots through ck_pr) are used rather
     * than ck_ring_dequeue_spmc, whose plain slot copy races benignly
     * with the owner's next write and would be reported by TSan. */
    qf__ring ring;
    ck_ring_buffer_t buf[QF__LOCAL_RING];
} qf__worker;

#define QF__CPU_HINTS 64

struct qf_runtime {
    int nworkers;
    qf__worker *workers; /* nworkers entries, or one for the host */
    char *name;
    /* qf_runtime_set_worker_slice(): the slice (0: none; -1: never set,
     * which qf__runtime_offer_worker_slice() may change) and a generation
     * bumped (release) after each store, which each worker compares with
     * the one it took (acquire) at the top of its loop. On this line, which
     * is written almost never, rather than beside the counters workers
     * write all the time. */
    _Atomic int64_t worker_slice_ns;
    _Atomic uint32_t worker_slice_gen;
    _Alignas(64) qf__gqueue global;
    /* Workers awake and looking for work (not running a task, not asleep):
     * while one is, new work needs no wake-up (qf_scheduler.c). */
    _Alignas(64) _Atomic int searching;
    /* A sleeping worker has been woken and has not found a task yet:
     * further new work needs no second wake-up (it will look, and hand
     * over to another worker what it leaves). Cleared before that worker
     * runs what it found, never held while a task runs (qf_scheduler.c,
     * "Waking"). */
    _Atomic int waking;
    /* The index of the worker that went to sleep last and has not been
     * woken since, -1 when none; per CPU (mod QF__CPU_HINTS), the same for
     * the workers that went to sleep on that CPU. A near wake-up prefers the
     * one that slept on the waking thread's CPU, else the last one
     * (qf_scheduler.c, "Which worker"). Hints, read and written relaxed. */
    _Atomic int last_idle;
    /* A sleep shorter than this grows the sleeper's search budget
     * (qf_scheduler.c, "How long a search lasts"): SHORT_SLEEP_NS; tests
     * raise it to make a grow certain. Read relaxed. */
    _Atomic int64_t search_short_sleep_ns;
    _Alignas(64) _Atomic int idle_on_cpu[QF__CPU_HINTS];
    /* Tasks pushed from outside the pool whose wake-up has not run yet
     * (qf_scheduler.c, push_from_outside()): qf_runtime_free() waits for
     * them. */
    _Alignas(64) _Atomic int wakeups_in_flight;
    _Alignas(64) qf_eventcount idle;
    _Atomic bool accepting;
    _Atomic bool stopping;
    /* timers */
    _Atomic uint32_t timer_lock;
    qf_task **heap;
    size_t heap_n, heap_cap;
    _Atomic int64_t next_timer; /* QF_FOREVER when none */
    /* live tasks */
    _Atomic uint32_t live_lock;
    qf_task *live_head;
    _Atomic int64_t live_n;
    qf_eventcount live_ec;
    /* host mode */
    int efd;
    _Atomic uint32_t efd_armed;
    _Atomic uint32_t host_running;
};

/* qf_task.c */
void qf__task_run(qf__worker *w, qf_task *t);
/* qf_task_spawn(), but with arg_init non-NULL the task's argument is a copy
 * of the arg_size bytes there (an object aligned to at most 8), kept inside the task's own
 * allocation (freed with the task): a runner task's state costs no allocation of its own. */
qf_code qf__task_spawn_ext(qf_runtime *rt, qf_task_fn fn, void *arg, const void *arg_init,
                           size_t arg_size, const qf_task_options *o, qf_task **ret_task);
void qf__task_unref(qf_task *t);

/* Tasks of one function made together (qf__task_spawn_batch()): task i's
 * name (copied) and the arg_size bytes of its state (written by init into
 * zeroed memory inside the task, aligned to 8, as qf__task_spawn_ext()'s
 * arg_init), each asked for once per task, in order of i. */
typedef struct qf__task_batch {
    size_t n, arg_size;
    const char *(*name)(void *ctx, size_t i);
    void (*init)(void *ctx, size_t i, void *state);
    void *ctx;
} qf__task_batch;

/* b->n tasks of fn with o's Coordinator, suspended and daemon settings:
 * every allocation first (all or none: QF_RESOURCE_EXHAUSTED starts
 * nothing), then one critical section each for the Coordinator's members
 * and the runtime's live list, and one push of the whole chain with one
 * wake (10,000 runners started at once are not 10,000 pushes and wakes).
 * ret_tasks: b->n slots for a reference to each task, or NULL. QF_CANCELLED
 * (none started) when the runtime is shutting down. Any thread; never
 * blocks but for short locks. */
qf_code qf__task_spawn_batch(qf_runtime *rt, qf_task_fn fn, const qf__task_batch *b,
                             const qf_task_options *o, qf_task **ret_tasks);

/* qf_sched_queue.c */
void qf__gq_init(qf__gqueue *q);
/* Append the chain first..last (already linked through gnode.next, n
 * tasks). Wait-free: one exchange. Any thread. */
void qf__gq_push_chain(qf__gqueue *q, qf_task *first, qf_task *last, int64_t n);
/* Take up to `max` tasks, oldest first, into out[]; 0 when empty, when a
 * push is half-way, or when another thread is popping. Any thread. */
size_t qf__gq_pop(qf__gqueue *q, qf_task **out, size_t max);
static inline int64_t qf__gq_len(qf__gqueue *q)
{
    return atomic_load_explicit(&q->len, memory_order_seq_cst);
}

/* qf_scheduler.c */
void qf__schedule(qf_task *t);
/* Schedule ts[0..n) (each SCHEDULED, never queued yet) in that order: one
 * push to the global queue and one wake. Any thread. */
void qf__schedule_chain(qf_runtime *rt, qf_task *const *ts, size_t n);
void qf__push_local(qf__worker *w, qf_task *t);
void qf__push_again(qf__worker *w, qf_task *t);
void qf__push_yielded(qf__worker *w, qf_task *t);
void qf__timer_disarm(qf_task *t);
qf__worker *qf__current_worker(void);

#ifdef QF_RACE_WIDENING
/* Builds with -Drace_widening=true only: when set, a worker calls it right
 * after its hand-over wake, with the task it found waiting in its next
 * slot (qf_scheduler.c, found_work()); a test stalls the worker there as
 * the kernel may. */
extern void (*_Atomic qf__handover_pause)(qf_task *t);
#endif

void qf__set_current_task(qf_task *t);
/* One loop turn of a runtime with 0 workers on the calling thread: the
 * number of polls run, or -1 with the error recorded (NULL runtime, a
 * runtime with workers, another thread inside a turn). qf_embed.c builds
 * the qf_code spellings on it. */
int64_t qf__runtime_turn(qf_runtime *rt, qf_deadline deadline);

/* qf_serve_spawn(): give rt's workers slice_ns unless
 * qf_runtime_set_worker_slice() was ever called on rt. */
void qf__runtime_offer_worker_slice(qf_runtime *rt, int64_t slice_ns);

#endif
