/* in progress */
typedef int qf__placeholder_qf_priority_queue;
