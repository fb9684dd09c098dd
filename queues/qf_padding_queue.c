/* in progress */
typedef int qf__placeholder_qf_padding_queue;
