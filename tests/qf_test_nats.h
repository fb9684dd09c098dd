/* qf_test_nats.h - tests: real nats-server processes with JetStream on
 * loopback ports, in a temporary directory, killed at the end.
 *
 * A server is started from a config file written here (listen address,
 * JetStream store directory, optional max_payload, optional cluster
 * routes) with its log in a file; the test waits until the log says
 * "Server is ready" (observable state of the other process, read with a
 * short pause between reads and a deadline). The child asks the kernel to
 * kill it when the test thread that started it dies (PR_SET_PDEATHSIG), so
 * a test that crashes or times out leaves no server behind.
 *
 * The server binary: $QF_NATS_SERVER, else nats-server on $PATH or in
 * /usr/sbin, /usr/local/sbin, /usr/local/bin, /usr/bin. When there is none
 * the tests skip with "nats-server is not installed".
 */
#ifndef QF_TEST_NATS_H
#define QF_TEST_NATS_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qf_time.h"

typedef struct qft_nats {
    pid_t pid;
    int port;         /* client port */
    int cluster_port; /* 0: not clustered */
    char name[16];
    char dir[160]; /* the server's own directory */
    char conf[200], log[200], url[64];
    long log_from; /* readiness is looked for after this offset */
} qft_nats;

static inline const char *qft_nats_server_path(void)
{
    static char found[512];
    const char *env = getenv("QF_NATS_SERVER");
    if (env && *env)
        return access(env, X_OK) == 0 ? env : NULL;
    const char *path = getenv("PATH");
    char dirs[2048];
    snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/usr/local/sbin:/usr/local/bin:/usr/bin",
             path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof(found), "%s/nats-server", d);
        if (access(found, X_OK) == 0)
            return found;
    }
    return NULL;
}

/* A port nothing listens on right now (the kernel's pick). */
static inline int qft_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static inline void qft_nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline void qft_rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (strlen(path) + strlen(e->d_name) + 2 > sizeof(p))
                continue;
            strcpy(p, path);
            strcat(p, "/");
            strcat(p, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                qft_rm_rf(p);
            else
                unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

/* A fresh directory for a test's servers. */
static inline bool qft_tmpdir(char *out, size_t cap)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, cap, "%s/qf_nats_XXXXXX", base && strlen(base) < 60 ? base : "/tmp");
    return mkdtemp(out) != NULL;
}

/* Describe server `s` (not started): name, ports, directory under root. */
static inline void qft_nats_init(qft_nats *s, const char *root, const char *name, bool cluster)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    snprintf(s->dir, sizeof(s->dir), "%s/%s", root, name);
    snprintf(s->conf, sizeof(s->conf), "%s/server.conf", s->dir);
    snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
    mkdir(s->dir, 0755);
    s->port = qft_free_port();
    s->cluster_port = cluster ? qft_free_port() : 0;
    snprintf(s->url, sizeof(s->url), "nats://127.0.0.1:%d", s->port);
}

/* Write the config: JetStream, max_payload (0: default), and routes to
 * the other members of a cluster (peers[0..n), skipping s itself). */
static inline bool qft_nats_write_conf(const qft_nats *s, long max_payload, const qft_nats *peers,
                                       int n)
{
    FILE *f = fopen(s->conf, "w");
    if (!f)
        return false;
    fprintf(f, "server_name: %s\nlisten: 127.0.0.1:%d\nlog_file: \"%s\"\n", s->name, s->port,
            s->log);
    fprintf(f,
            "jetstream {\n  store_dir: \"%s/js\"\n  max_memory_store: 268435456\n"
            "  max_file_store: 1073741824\n}\n",
            s->dir);
    if (max_payload > 0)
        fprintf(f, "max_payload: %ld\n", max_payload);
    if (s->cluster_port) {
        fprintf(f, "cluster {\n  name: qfc\n  listen: 127.0.0.1:%d\n  routes: [\n",
                s->cluster_port);
        for (int i = 0; i < n; i++)
            if (peers[i].cluster_port != s->cluster_port)
                fprintf(f, "    nats-route://127.0.0.1:%d\n", peers[i].cluster_port);
        fprintf(f, "  ]\n}\n");
    }
    return fclose(f) == 0;
}

static inline long qft_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Whether the log, after offset `from`, contains `what`. */
static inline bool qft_log_has(const char *path, long from, const char *what)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    fseek(f, from, SEEK_SET);
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

/* Start (or restart) the server from its config; true once it is ready. */
static inline bool qft_nats_start(qft_nats *s, double timeout_s)
{
    const char *bin = qft_nats_server_path();
    if (!bin)
        return false;
    s->log_from = qft_file_size(s->log);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execl(bin, "nats-server", "-c", s->conf, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    qf_deadline d = qf_deadline_in_s(timeout_s);
    while (!qf_deadline_passed(d)) {
        if (qft_log_has(s->log, s->log_from, "Server is ready"))
            return true;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) { /* it died (a port taken?) */
            s->pid = 0;
            return false;
        }
        qft_nap_ms(5);
    }
    return false;
}

/* Kill with `sig` and reap. */
static inline void qft_nats_kill(qft_nats *s, int sig)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, sig);
    int st;
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
}

/* A single JetStream server in `root` (already made); retries with other
 * ports if one was taken in the meantime. */
static inline bool qft_nats_single(qft_nats *s, const char *root, long max_payload)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        qft_nats_init(s, root, "n0", false);
        if (qft_nats_write_conf(s, max_payload, NULL, 0) && qft_nats_start(s, 20.0))
            return true;
        qft_nats_kill(s, SIGKILL);
    }
    return false;
}

/* A 3-node JetStream cluster in `root`. */
static inline bool qft_nats_cluster(qft_nats s[3], const char *root)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        char name[8];
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof(name), "n%d", i);
            qft_nats_init(&s[i], root, name, true);
        }
        bool ok = true;
        for (int i = 0; i < 3 && ok; i++)
            ok = qft_nats_write_conf(&s[i], 0, s, 3);
        for (int i = 0; i < 3 && ok; i++)
            ok = qft_nats_start(&s[i], 20.0);
        if (ok)
            return true;
        for (int i = 0; i < 3; i++)
            qft_nats_kill(&s[i], SIGKILL);
    }
    return false;
}

#endif
