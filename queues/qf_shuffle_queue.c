/* in progress */
typedef int qf__placeholder_qf_shuffle_queue;
