/* deprecated.c - calls replaced by new spellings: a user compiling this
 * sees each one flagged with its replacement (check-installed.sh). */
#include <qflow/qflow.h>

int main(void)
{
    qf_queue *q = NULL;
    void *ps[1];
    qf_waker w;
    qf_waker_init_thread(&w);
    int r = qf_queue_dequeue_many_ptr(q, 1, QF_NO_WAIT, ps);
    r += qf_waker_wait(&w, QF_NO_WAIT);
    r += (int)qf_runtime_run_once(NULL, QF_NO_WAIT);
    return r;
}
