/* qf_padding_queue.c - PaddingFIFOQueue (spec 85-96).
 *
 * A FIFOQueue whose shapes may leave dimensions unknown. Everything that
 * differs from the FIFOQueue is already keyed on q->padded, which this
 * constructor sets through qf__queue_new(allow_partial = true):
 *   - elements and enqueue_many rows are checked for *compatibility* with
 *     the shapes (fixed dimensions must match, unknown ones are free; spec
 *     88), in qf_queue_validate.c;
 *   - dequeue hands an element back exactly as it was enqueued (spec 89);
 *   - dequeue_many and dequeue_up_to stack with qf_tensor_stack_padded():
 *     each unknown dimension becomes the largest size in that batch, filled
 *     with 0 / false / NULL / "" (spec 90-91, 93), at any rank up to
 *     QF_MAX_RANK - 1 for the element (the batch adds one), where
 *     TensorFlow stops at rank 4 with Unimplemented (spec 94).
 * The storage and waiting rules are the FIFO engine's (qf__fifo_ops), so
 * with fully defined shapes it behaves exactly like a FIFOQueue (spec 92).
 *
 * Inline mode (values stored in the ring slots) is chosen by qf__queue_new()
 * only for one scalar component; a rank-0 shape has no dimension to pad,
 * so the padding queue keeps that fast path.
 *
 * Error texts (spec 95). TensorFlow's PaddingFIFOQueue reuses FIFOQueue's
 * single enqueue/dequeue code, so those errors say "FIFOQueue '<name>' is
 * closed.", while its own dequeue_many/up_to say "PaddingFIFOQueue '<name>'
 * is closed and has insufficient elements ...". qflow does not mirror that
 * accident: every message names the queue's real kind, "PaddingFIFOQueue",
 * so the texts are consistent and still contain the substrings callers
 * match on ("is closed", "insufficient elements").
 */
#include "qf_queue-impl.h"
#include "qf_status.h"

qf_code qf_padding_fifo_queue_new(const qf_queue_options *opts, qf_queue **ret_q)
{
    /* spec 85: shapes are what the padding is computed from. */
    if (opts && opts->num_components > 0 && opts->dtypes && !opts->shapes)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "When providing partial shapes, a list of shapes must be provided.");
    /* spec 86: qf__queue_new() refuses unknown ranks ("must have a defined
     * rank") and invalid shapes, and allows unknown dimensions. */
    return qf__queue_new(opts, QF_QUEUE_PADDING_FIFO, "PaddingFIFOQueue", "padding_fifo_queue",
                         &qf__fifo_ops, true, ret_q);
}
