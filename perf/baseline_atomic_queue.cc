// baseline_atomic_queue.cc - Maxim Egorushkin's atomic_queue behind
// baseline.h (Debian libatomic-queue-dev, header-only): a bounded ring of
// atomic pointer slots where each producer and consumer takes a ticket with
// one fetch_add and then waits on its own slot. The fastest bounded queue a
// user is likely to pick, and the one qflow's hand-off is held to.
//
// Its threads never sleep: a push into a full slot and a pop from an empty
// one spin with a pause instruction until the other side comes. So it is
// at its best when every thread has a core of its own and pays for every
// spin once threads outnumber cores (the scheduler's time slice, not the
// other side, then decides when a waiting thread learns it may go on).
//
// Its slots are not FIFO across laps: a push is a compare-and-swap from
// the empty value, so when the producer holding ticket t is preempted
// before its store, the producer of ticket t + 1024 (same slot, next lap)
// may store first, and the consumer of ticket t takes that element. With
// more threads than cores (p8c8, p16c16 on 2 cores) the harness's order
// check then counts some elements out of their producer's order and
// prints a warning; every element still arrives exactly once.
//
// The slot count is a template argument: only the harness's capacity
// (QB_CAPACITY, 1024) can be made; create() refuses any other. There is
// no close: close() pushes one end marker per possible consumer, so that
// each finds its own at once (one marker handed from consumer to consumer
// took a time slice per hand-off with 32 spinning threads on 2 cores: a
// second per repetition). A consumer that pops one pushes it back, so a
// later call also ends (there is room: it has just freed a slot, and after
// close no producer pushes), and reports the end.
#include <atomic_queue/atomic_queue.h>
#include <new>

extern "C" {
#include "baseline.h"
}

// QB_CAPACITY of bench_queue.h (which C++ cannot include: _Noreturn).
static const unsigned slots = 1024;

// Not a value the harness sends (those are (producer << 48) | seq, never an
// address) and not the queue's empty-slot value, nullptr.
static char end_marker_storage;
static void *const end_marker = &end_marker_storage;

// At least one per consumer thread the harness may start (QB_MAX_THREADS
// in bench_queue.h).
static const int end_markers = 16;

struct bq {
    atomic_queue::AtomicQueue<void *, slots, nullptr> q;
};

static bq *aq_create(size_t capacity, unsigned flags)
{
    (void)flags; // the MPMC queue serves single-sided use as well
    if (capacity != slots)
        return nullptr;
    return new (std::nothrow) bq;
}

static void aq_destroy(bq *q)
{
    delete q;
}

static int aq_enqueue(bq *q, void *p)
{
    q->q.push(p);
    return 0;
}

static int aq_dequeue(bq *q, void **ret_p)
{
    void *p = q->q.pop();
    if (p == end_marker) {
        q->q.push(end_marker);
        return -1;
    }
    *ret_p = p;
    return 0;
}

static void aq_close(bq *q)
{
    for (int i = 0; i < end_markers; i++)
        q->q.push(end_marker);
}

extern "C" const bq_impl bq_atomic_queue = {
    "atomic_queue",
    "AtomicQueue<void *, 1024>: bounded; its threads SPIN (pause, never sleep) on a full or "
    "empty slot, so it wins while threads have cores and pays once they outnumber them; no "
    "close: end markers; a slot goes to whichever lap's producer stores first, so with threads "
    "preempted some elements arrive out of their producer's order (the harness warns)",
    aq_create,
    aq_destroy,
    aq_enqueue,
    aq_dequeue,
    nullptr,
    nullptr,
    aq_close,
};
