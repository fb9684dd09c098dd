/* in progress */
typedef int qf__placeholder_qf_queue_registry;
