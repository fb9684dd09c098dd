/* qf_sched_queue.c - the global run queue: a FIFO of tasks.
 *
 * Tasks made runnable from outside the pool (a consumer thread waking a
 * producer task, a timer, a spawn) and a worker's overflow come here, and
 * they must leave in the order they came: ten thousand runners that take
 * turns only get a turn each if nothing jumps the line (a stack that
 * flipped its order each round starved thousands of them).
 *
 * Implementation notes. An intrusive multi-producer queue after Dmitry
 * Vyukov's: a push exchanges the tail for its last node, then links the
 * old tail to its first node (one atomic exchange and one release store,
 * wait-free, for a whole chain). Between the two steps the chain is not
 * reachable from the head yet: a popper that meets the gap reports "empty
 * for now" and the pusher's notify (qf_scheduler.c) brings a worker back.
 * Pops run under a try-lock (the queue is single-consumer at heart): a
 * worker that finds it held has other places to look. A stub node lets the
 * last task be taken without the queue ever being truly empty of nodes.
 *
 * Ordering: the pusher's release store of the link pairs with the popper's
 * acquire load of it, so everything written to a task before its push is
 * visible to the worker that runs it. Every access is a C11 atomic, which
 * ThreadSanitizer sees.
 */
#include "qf_lock-impl.h"
#include "qf_runtime-impl.h"

static qf_task *task_of(qf__gnode *n)
{
    return (qf_task *)((char *)n - offsetof(qf_task, gnode));
}

void qf__gq_init(qf__gqueue *q)
{
    atomic_init(&q->stub.next, NULL);
    atomic_init(&q->tail, &q->stub);
    atomic_init(&q->len, 0);
    atomic_init(&q->lock, 0);
    q->head = &q->stub;
}

static void push_nodes(qf__gqueue *q, qf__gnode *first, qf__gnode *last)
{
    atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
    qf__gnode *prev = atomic_exchange_explicit(&q->tail, last, memory_order_acq_rel);
    atomic_store_explicit(&prev->next, first, memory_order_release);
}

void qf__gq_push_chain(qf__gqueue *q, qf_task *first, qf_task *last, int64_t n)
{
    /* Counted first: a worker that sees the count looks (and finds the
     * chain once linked); one that misses it is notified after. */
    atomic_fetch_add_explicit(&q->len, n, memory_order_seq_cst);
    push_nodes(q, &first->gnode, &last->gnode);
}

/* One node, or NULL (empty, or a push between its two steps). */
static qf__gnode *pop_one(qf__gqueue *q)
{
    qf__gnode *head = q->head;
    qf__gnode *next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (head == &q->stub) {
        if (!next)
            return NULL;
        q->head = head = next;
        next = atomic_load_explicit(&head->next, memory_order_acquire);
    }
    if (next) {
        q->head = next;
        return head;
    }
    if (head != atomic_load_explicit(&q->tail, memory_order_acquire))
        return NULL; /* a push is linking behind head */
    /* head is the last node: put the stub behind it to take it. */
    push_nodes(q, &q->stub, &q->stub);
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (next) {
        q->head = next;
        return head;
    }
    return NULL;
}

size_t qf__gq_pop(qf__gqueue *q, qf_task **out, size_t max)
{
    if (max == 0 || atomic_load_explicit(&q->len, memory_order_relaxed) <= 0)
        return 0;
    uint32_t free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&q->lock, &free_, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    size_t k = 0;
    qf__gnode *n;
    while (k < max && (n = pop_one(q)) != NULL)
        out[k++] = task_of(n);
    atomic_store_explicit(&q->lock, 0, memory_order_release);
    if (k)
        atomic_fetch_sub_explicit(&q->len, (int64_t)k, memory_order_relaxed);
    return k;
}
