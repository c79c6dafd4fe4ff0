/* metrics.c - Prometheus metrics from the live snapshot.
 *
 * The collector formats the text once a second (lock released) and either
 * swaps it in as what the server answers or writes it to PATH.prom through
 * a temporary file and rename(2), so node_exporter never reads half a file.
 *
 * The server is one thread with a poll(2) loop over non-blocking sockets:
 * GET /metrics gets the text as of the last publish; any other path 404,
 * any other method 405. It never takes the runtime lock and the collector
 * never waits for it: they share only a reference-counted buffer, swapped
 * under a mutex held for a pointer's copy. At most PROF_METRICS_MAX_CONN
 * connections are open (a new one closes the oldest that has said nothing)
 * and each lives PROF_METRICS_CONN_NS at most, so clients that connect and
 * say nothing cost a bounded set of descriptors and nothing else. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "prof.h"
#include "env.h"
#include "fdio.h"
#include "gpu_busy.h"
#include "kstats.h"
#include "json.h"
#include "live.h"
#include "log.h"
#include "metrics.h"
#include "process.h"
#include "runtime.h"

/* ---- The text. ---- */

static void put_seconds(struct prof_buf *b, double ns)
{
    prof_buf_double(b, ns == ns ? ns / 1e9 : 0);
}

struct path {
    size_t off, len;             /* in the paths buffer */
};

/* Each row's stage label, escaped: its names from the top joined by '/',
 * so that a stage shown under two parents in two processes stays distinct
 * and the label says where it runs. Escaping is byte by byte, so a row's
 * is its parent's escaped path, '/', and its own escaped name. */
#define PROF_METRICS_PATH_MAX 256

static int paths_make(const struct prof_live_snap *s, struct prof_buf *names, struct path *out)
{
    for (size_t i = 0; i < s->table.len; i++) {
        const struct prof_stats_snap_row *r = &s->table.rows[i];
        int nested = r->parent != UINT32_MAX && r->parent < i;

        out[i].off = names->len;
        if (nested && out[r->parent].len > PROF_METRICS_PATH_MAX) {
            /* A chain thousands deep would make labels of megabytes: past
             * that, the path is cut at the front. A stage is one row, so
             * its name alone keeps the label distinct. */
            prof_buf_put(names, ".../", 4);
        } else if (nested) {
            /* Copied out first: the buffer may move as it grows. */
            struct path p = out[r->parent];

            if (prof_buf_room(names, p.len) == NULL)
                return -ENOMEM;
            memmove(names->data + names->len, names->data + p.off, p.len);
            prof_buf_commit(names, p.len);
            prof_buf_put(names, "/", 1);
        }
        prof_buf_prom_label(names, r->name, strlen(r->name));
        out[i].len = names->len - out[i].off;
    }
    return names->failed ? -ENOMEM : 0;
}

/* One per-stage sample up to its value: the metric's name, the stage's
 * label set (path, then rank) and close, which ends the set ("} ", or a
 * quantile label and "} "). */
static void stage_sample(struct prof_buf *b, const char *metric, const struct prof_buf *names,
                         const struct path *p, const char *rank, const char *close)
{
    prof_buf_puts(b, metric);
    prof_buf_put(b, "{stage=\"", 8);
    prof_buf_put(b, names->data + p->off, p->len);
    prof_buf_puts(b, rank);
    prof_buf_puts(b, close);
}

/* A metric of the whole process: head is its HELP and TYPE lines and its
 * name; the only label is the rank. */
static void process_metric(struct prof_buf *b, const char *head, const char *r_only, uint64_t v)
{
    prof_buf_puts(b, head);
    prof_buf_puts(b, r_only);
    prof_buf_u64(b, v);
    prof_buf_put(b, "\n", 1);
}

/* One kernels sample of GPU stage k up to its value: labelled by the
 * stage's path where the snapshot has its row, as every per-stage metric
 * is; by its name alone where it has none (a stage folded out of the
 * rows). */
static void kernel_sample(struct prof_buf *b, const char *metric, const struct prof_live_snap *s,
                          const struct prof_buf *names, const struct path *paths,
                          const struct prof_kstats_pub *k, const char *rank)
{
    for (size_t i = 0; i < s->table.len; i++)
        if (s->table.rows[i].name == k->stage || strcmp(s->table.rows[i].name, k->stage) == 0) {
            stage_sample(b, metric, names, &paths[i], rank, "} ");
            return;
        }
    prof_buf_puts(b, metric);
    prof_buf_put(b, "{stage=\"", 8);
    prof_buf_prom_label(b, k->stage, strlen(k->stage));
    prof_buf_puts(b, rank);
    prof_buf_puts(b, "} ");
}

static void kernel_metrics(struct prof_buf *b, const struct prof_live_snap *s,
                           const struct prof_buf *names, const struct path *paths,
                           const char *rank)
{
    struct prof_kstats_pub k[PROF_KSTATS_PUB];
    int n = prof_kstats_published(k, PROF_KSTATS_PUB);

    if (n == 0)
        return;
    prof_buf_puts(b, "# HELP prof_gpu_stage_kernel_busy_seconds_total Time the GPU stage's "
                     "kernels kept the GPU busy (union; PROF_CUDA=kernels).\n"
                     "# TYPE prof_gpu_stage_kernel_busy_seconds_total counter\n");
    for (int i = 0; i < n; i++) {
        kernel_sample(b, "prof_gpu_stage_kernel_busy_seconds_total", s, names, paths, &k[i], rank);
        prof_buf_fixed(b, (double)k[i].busy_ns / 1e9, 9);
        prof_buf_put(b, "\n", 1);
    }
    prof_buf_puts(b, "# HELP prof_gpu_stage_kernels_total Kernels, memcpys and memsets "
                     "the GPU stage ran (PROF_CUDA=kernels).\n"
                     "# TYPE prof_gpu_stage_kernels_total counter\n");
    for (int i = 0; i < n; i++) {
        kernel_sample(b, "prof_gpu_stage_kernels_total", s, names, paths, &k[i], rank);
        prof_buf_u64(b, k[i].count);
        prof_buf_put(b, "\n", 1);
    }
}

void prof_metrics_format(struct prof_buf *b, const struct prof_live_snap *s)
{
    static const char *const q[3] = { ",quantile=\"0.5\"} ", ",quantile=\"0.95\"} ",
                                      ",quantile=\"0.99\"} " };
    struct prof_buf names = {0};
    struct path *paths = calloc(s->table.len ? s->table.len : 1, sizeof *paths);
    char rank[32], r_only[32];

    /* What follows the stage's value in every label set. */
    snprintf(rank, sizeof rank, "\",rank=\"%d\"", s->rank >= 0 ? s->rank : 0);
    snprintf(r_only, sizeof r_only, "{rank=\"%d\"} ", s->rank >= 0 ? s->rank : 0);
    if (paths == NULL || paths_make(s, &names, paths) != 0) {
        free(paths);
        prof_buf_free(&names);
        b->failed = 1;
        return;
    }

    prof_buf_puts(b, "# HELP prof_stage_count_total Zones ended, per stage, whole run.\n"
                     "# TYPE prof_stage_count_total counter\n");
    for (size_t i = 0; i < s->table.len; i++) {
        stage_sample(b, "prof_stage_count_total", &names, &paths[i], rank, "} ");
        prof_buf_u64(b, s->table.rows[i].count);
        prof_buf_put(b, "\n", 1);
    }
    prof_buf_puts(b, "# HELP prof_stage_seconds_total Time in zones, per stage, whole run.\n"
                     "# TYPE prof_stage_seconds_total counter\n");
    for (size_t i = 0; i < s->table.len; i++) {
        stage_sample(b, "prof_stage_seconds_total", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)s->table.rows[i].total_ns);
        prof_buf_put(b, "\n", 1);
    }
    prof_buf_puts(b, "# HELP prof_stage_self_seconds_total Time in zones less their child "
                     "zones, per stage, whole run.\n"
                     "# TYPE prof_stage_self_seconds_total counter\n");
    for (size_t i = 0; i < s->table.len; i++) {
        stage_sample(b, "prof_stage_self_seconds_total", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)s->table.rows[i].self_ns);
        prof_buf_put(b, "\n", 1);
    }
    /* Quantiles of the current summary window (the whole run without
     * PROF_SUMMARY_EVERY); _sum and _count of the whole run, as a
     * summary's are cumulative. */
    prof_buf_puts(b, "# HELP prof_stage_latency_seconds Zone durations, per stage: quantiles "
                     "of the current window.\n"
                     "# TYPE prof_stage_latency_seconds summary\n");
    for (size_t i = 0; i < s->table.len; i++) {
        const struct prof_stats_snap_row *r = &s->table.rows[i];
        double v[3] = { r->p50_ns, r->p95_ns, r->p99_ns };

        for (int k = 0; k < 3; k++) {
            stage_sample(b, "prof_stage_latency_seconds", &names, &paths[i], rank, q[k]);
            put_seconds(b, v[k]);
            prof_buf_put(b, "\n", 1);
        }
        stage_sample(b, "prof_stage_latency_seconds_sum", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)r->total_ns);
        prof_buf_put(b, "\n", 1);
        stage_sample(b, "prof_stage_latency_seconds_count", &names, &paths[i], rank, "} ");
        prof_buf_u64(b, r->count);
        prof_buf_put(b, "\n", 1);
    }
    process_metric(b, "# HELP prof_dropped_records_total Records lost (full rings, refused "
                      "zones, GPU sides not timed).\n"
                      "# TYPE prof_dropped_records_total counter\nprof_dropped_records_total",
                   r_only, s->dropped);
    process_metric(b, "# HELP prof_steps_total Steps counted by prof_step.\n"
                      "# TYPE prof_steps_total counter\nprof_steps_total", r_only, s->steps);
    process_metric(b, "# HELP prof_threads Threads recording zones.\n"
                      "# TYPE prof_threads gauge\nprof_threads", r_only, s->threads);
    process_metric(b, "# HELP prof_stages Stages seen; those beyond the heaviest are not "
                      "labelled (prof_stages_folded).\n"
                      "# TYPE prof_stages gauge\nprof_stages", r_only, s->table.stages);
    process_metric(b, "# HELP prof_stages_folded Stages left out of the per-stage metrics.\n"
                      "# TYPE prof_stages_folded gauge\nprof_stages_folded", r_only,
                   s->table.folded);
    if (s->mem_known) {
        /* The Prometheus client libraries' name for RSS; the peak is ours. */
        process_metric(b, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                          "# TYPE process_resident_memory_bytes gauge\n"
                          "process_resident_memory_bytes", r_only, s->rss);
        process_metric(b, "# HELP prof_process_resident_memory_peak_bytes The process's peak "
                          "resident memory since it started (the kernel's VmHWM).\n"
                          "# TYPE prof_process_resident_memory_peak_bytes gauge\n"
                          "prof_process_resident_memory_peak_bytes", r_only, s->rss_peak_run);
    }
    prof_gpu_metrics(b, s->rank >= 0 ? s->rank : 0);    /* GPU busy, NVML (gpu_busy.h) */
    kernel_metrics(b, s, &names, paths, rank);          /* PROF_CUDA=kernels (kstats.h) */
    free(paths);
    prof_buf_free(&names);
}

/* ---- What the server answers with. ---- */

struct text {
    int refs;                    /* atomic */
    size_t len;
    char data[];
};

static pthread_mutex_t text_lock = PTHREAD_MUTEX_INITIALIZER;
static struct text *current;     /* under text_lock */

static void text_put(struct text *t)
{
    if (t != NULL && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(t);
}

static struct text *text_get(void)
{
    struct text *t;

    pthread_mutex_lock(&text_lock);
    if ((t = current) != NULL)
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&text_lock);
    return t;
}

/* ---- The server. ---- */

struct conn {
    int fd;
    uint64_t opened, active;     /* ns */
    uint64_t seq;                /* order of acceptance */
    size_t got;                  /* request bytes read */
    char req[PROF_METRICS_MAX_REQUEST];
    /* The answer being sent: head then body (a held text, or static). */
    char head[256];
    size_t head_len, sent;
    struct text *body;
    const char *body_static;
    size_t body_len;
};

static int listen_fd = -1;
static int wake_pipe[2] = { -1, -1 };
static pthread_t server_thread;
static int server_running;
static int server_pid;           /* the process whose server it is */
static int server_failed;
static struct conn *conns[PROF_METRICS_MAX_CONN];

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void conn_close(int i)
{
    struct conn *c = conns[i];

    close(c->fd);
    text_put(c->body);
    free(c);
    conns[i] = NULL;
}

static void answer(struct conn *c, int status, const char *reason, const char *extra,
                   struct text *body, const char *body_static)
{
    c->body = body;
    c->body_static = body_static;
    c->body_len = body ? body->len : body_static ? strlen(body_static) : 0;
    c->head_len = (size_t)snprintf(c->head, sizeof c->head,
                                   "HTTP/1.1 %d %s\r\n"
                                   "Content-Type: %s\r\n"
                                   "Content-Length: %zu\r\n"
                                   "%s"
                                   "Connection: close\r\n\r\n",
                                   status, reason,
                                   body ? "text/plain; version=0.0.4; charset=utf-8"
                                        : "text/plain; charset=utf-8",
                                   c->body_len, extra);
    c->sent = 0;
}

/* The request line is complete (or the buffer full): decide the answer. */
static void request(struct conn *c)
{
    char *sp1 = memchr(c->req, ' ', c->got), *sp2, *path;
    size_t method_len;
    int head;

    if (sp1 == NULL) {
        answer(c, 400, "Bad Request", "", NULL, "bad request\n");
        return;
    }
    method_len = (size_t)(sp1 - c->req);
    path = sp1 + 1;
    sp2 = memchr(path, ' ', c->got - (size_t)(path - c->req));
    if (sp2 == NULL) {
        answer(c, 400, "Bad Request", "", NULL, "bad request\n");
        return;
    }
    head = method_len == 4 && memcmp(c->req, "HEAD", 4) == 0;
    if (!(method_len == 3 && memcmp(c->req, "GET", 3) == 0) && !head) {
        answer(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", NULL,
               "only GET /metrics\n");
    } else if (!((size_t)(sp2 - path) == 8 && memcmp(path, "/metrics", 8) == 0) &&
               !((size_t)(sp2 - path) > 9 && memcmp(path, "/metrics?", 9) == 0)) {
        answer(c, 404, "Not Found", "", NULL, "not found: only /metrics\n");
    } else {
        struct text *t = text_get();

        if (t == NULL)
            answer(c, 503, "Service Unavailable", "", NULL, "no snapshot yet\n");
        else
            answer(c, 200, "OK", "", t, NULL);
    }
    if (head)
        c->body_len = 0;
}

/* Read what the client sent; nonzero when the connection is done with. */
static int conn_read(struct conn *c)
{
    ssize_t n = recv(c->fd, c->req + c->got, sizeof c->req - c->got, 0);

    if (n == 0)
        return 1;
    if (n < 0)
        return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    c->got += (size_t)n;
    /* The request line and headers end in an empty line; only the line
     * matters, but answering before the headers are in would make the
     * client see a reset. */
    if (memmem(c->req, c->got, "\r\n\r\n", 4) != NULL || memmem(c->req, c->got, "\n\n", 2) != NULL)
        request(c);
    else if (c->got == sizeof c->req)
        answer(c, 431, "Request Header Fields Too Large", "", NULL, "request too large\n");
    return 0;
}

static int conn_write(struct conn *c)
{
    while (c->sent < c->head_len + c->body_len) {
        const char *p;
        size_t left;
        ssize_t n;

        if (c->sent < c->head_len) {
            p = c->head + c->sent;
            left = c->head_len - c->sent;
        } else {
            p = (c->body ? c->body->data : c->body_static) + (c->sent - c->head_len);
            left = c->head_len + c->body_len - c->sent;
        }
        n = send(c->fd, p, left, MSG_NOSIGNAL);
        if (n < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
        c->sent += (size_t)n;
    }
    shutdown(c->fd, SHUT_WR);
    return 1;
}

/* Read the request if it is there, and answer as far as the socket
 * takes it; nonzero when the connection is done with. */
static int conn_service(struct conn *c)
{
    int done = 0;

    if (c->head_len == 0)
        done = conn_read(c);
    if (!done && c->head_len)
        done = conn_write(c);
    return done;
}

/* The connection to close for a new one: one that has not sent its request,
 * accepted first; else the one idle longest. */
static int conn_victim(void)
{
    int v = -1;

    for (int i = 0; i < PROF_METRICS_MAX_CONN; i++)
        if (conns[i]->head_len == 0 && (v < 0 || conns[i]->seq < conns[v]->seq))
            v = i;
    if (v >= 0)
        return v;
    v = 0;
    for (int i = 1; i < PROF_METRICS_MAX_CONN; i++)
        if (conns[i]->active < conns[v]->active)
            v = i;
    return v;
}

/* A few at a time, each served at once if its request is already in: a
 * flood of connections that say nothing then turns over the table of
 * idle ones, and a scraper's request, sent with its connection, is
 * answered as it is accepted. */
static void accept_some(uint64_t now)
{
    static uint64_t seq;

    for (int n = 0; n < PROF_METRICS_MAX_CONN / 4; n++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), slot = -1;
        struct conn *c;

        if (fd < 0)
            return;
        for (int i = 0; i < PROF_METRICS_MAX_CONN && slot < 0; i++)
            if (conns[i] == NULL)
                slot = i;
        if (slot < 0) {
            slot = conn_victim();
            conn_close(slot);
        }
        if ((c = calloc(1, sizeof *c)) == NULL) {
            close(fd);
            return;
        }
        c->fd = fd;
        c->opened = c->active = now;
        c->seq = ++seq;
        conns[slot] = c;
        if (conn_service(c))
            conn_close(slot);
    }
}

static void *server_main(void *arg)
{
    struct pollfd pfd[PROF_METRICS_MAX_CONN + 2];
    int map[PROF_METRICS_MAX_CONN + 2];

    (void)arg;
    pthread_setname_np(pthread_self(), "prof-metrics");
    for (;;) {
        uint64_t now = mono_ns();
        int n = 0;

        pfd[n].fd = wake_pipe[0], pfd[n].events = POLLIN, n++;
        pfd[n].fd = listen_fd, pfd[n].events = POLLIN, n++;
        for (int i = 0; i < PROF_METRICS_MAX_CONN; i++) {
            struct conn *c = conns[i];

            if (c == NULL)
                continue;
            if (now - c->opened > PROF_METRICS_CONN_NS) {
                conn_close(i);
                continue;
            }
            map[n] = i;
            pfd[n].fd = c->fd;
            pfd[n].events = c->head_len ? POLLOUT : POLLIN;
            n++;
        }
        if (poll(pfd, (nfds_t)n, 250) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents)
            break;
        now = mono_ns();
        for (int k = 2; k < n; k++) {
            struct conn *c = conns[map[k]];
            int done = 0;

            if (!pfd[k].revents)
                continue;
            c->active = now;
            if (pfd[k].revents & (POLLERR | POLLNVAL))
                done = 1;
            else
                done = conn_service(c);
            if (done)
                conn_close(map[k]);
        }
        if (pfd[1].revents & POLLIN)
            accept_some(now);
    }
    for (int i = 0; i < PROF_METRICS_MAX_CONN; i++)
        if (conns[i] != NULL)
            conn_close(i);
    return NULL;
}

/* The inodes of the listening TCP sockets on port, from table
 * (/proc/net/tcp or tcp6): up to max of them. */
static int listeners(const char *table, unsigned port, unsigned long *inode, int n, int max)
{
    FILE *f = fopen(table, "re");
    char line[512];

    if (f == NULL)
        return n;
    while (n < max && fgets(line, sizeof line, f) != NULL) {
        unsigned lport, st;
        unsigned long ino;

        if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*x:%*x %*x:%*x %*x %*u "
                   "%*u %lu", &lport, &st, &ino) == 3 && lport == port && st == 0x0A)
            inode[n++] = ino;
    }
    fclose(f);
    return n;
}

/* Nonzero when pid has one of the sockets open. */
static int holds_socket(int pid, const unsigned long *inode, int n)
{
    char dir[64], path[320], link[64], want[40];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        ssize_t len;

        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if ((len = readlink(path, link, sizeof link - 1)) <= 0)
            continue;
        link[len] = '\0';
        for (int i = 0; i < n && !found; i++) {
            snprintf(want, sizeof want, "socket:[%lu]", inode[i]);
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/* Nonzero when pid has a thread named name (its server's, "prof-metrics"). */
static int has_thread(int pid, const char *name)
{
    char dir[64], path[400], comm[32];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(dir, sizeof dir, "/proc/%d/task", pid);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        if ((f = fopen(path, "re")) == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) != NULL) {
            comm[strcspn(comm, "\n")] = '\0';
            found = strcmp(comm, name) == 0;
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

/* The parent of pid from /proc/PID/stat, 0 where it cannot be read. */
static int parent_of(int pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    int ppid = 0;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    p = fgets(buf, sizeof buf, f);
    fclose(f);
    /* pid (comm) state ppid: comm may hold spaces and parentheses. */
    if (p == NULL || (p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1)
        return 0;
    return ppid;
}

/* The nearest ancestor (up to 32 levels, init excluded) for which is()
 * holds, or 0. */
static int ancestor_where(int (*is)(int pid, const void *arg), const void *arg)
{
    int pid = getppid();

    for (int depth = 0; depth < 32 && pid > 1; depth++, pid = parent_of(pid))
        if (is(pid, arg))
            return pid;
    return 0;
}

/* pid is a prof process (its collector runs) that was started with the
 * same PROF_METRICS (arg: "PROF_METRICS=value"). */
static int started_alike(int pid, const void *arg)
{
    char path[64], *entry = NULL;
    size_t cap = 0;
    FILE *f;
    int same = 0;

    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    while (!same && getdelim(&entry, &cap, '\0', f) > 0)
        same = strcmp(entry, (const char *)arg) == 0;
    free(entry);
    fclose(f);
    return same && has_thread(pid, "prof-collector");
}

struct listening {
    const unsigned long *inode;
    int n;
};

/* pid serves prof metrics on the port: it has one of its listening
 * sockets open and a thread named prof-metrics. */
static int serves_port(int pid, const void *arg)
{
    const struct listening *l = arg;

    return holds_socket(pid, l->inode, l->n) && has_thread(pid, "prof-metrics");
}

/* A process started afresh (subprocess, multiprocessing's spawn and
 * forkserver workers) inherits PROF_METRICS but is not a forked child. It
 * does not serve where an ancestor is a prof process started with the same
 * PROF_METRICS (that one serves the tree, or said why not), nor, where the
 * port turns out taken, when an ancestor serves prof metrics on it (one
 * that set PROF_METRICS after it started); it stays silent then. Read
 * from /proc once, at the first publish, and on the failure path. */
static int ancestor_serves(void)
{
    const char *v = getenv("PROF_METRICS");
    char want[512];
    int n;

    if (v == NULL)
        return 0;
    n = snprintf(want, sizeof want, "PROF_METRICS=%s", v);
    return n > 0 && (size_t)n < sizeof want && ancestor_where(started_alike, want) != 0;
}

static int port_held_by_ancestor(unsigned port)
{
    unsigned long inode[16];
    struct listening l = { inode, 0 };

    l.n = listeners("/proc/net/tcp", port, inode, 0, 16);
    l.n = listeners("/proc/net/tcp6", port, inode, l.n, 16);
    return l.n > 0 && ancestor_where(serves_port, &l) != 0;
}

static int server_start(void)
{
    const struct prof_config *cfg = prof_config_get();
    struct sockaddr_in sa;
    sigset_t all, old;
    int one = 1, err;
    char addr[32];

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(cfg->metrics_port);
    sa.sin_addr.s_addr = htonl(cfg->metrics_addr);
    inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd < 0 || setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listen_fd, 128) != 0) {
        int e = errno;

        if (e != EADDRINUSE || !port_held_by_ancestor(cfg->metrics_port))
            prof_log("PROF_METRICS: cannot serve on %s:%u (%s); no metrics", addr,
                     (unsigned)cfg->metrics_port, strerror(e));
        goto fail;
    }
    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        goto fail;
    /* Like the collector, it takes no signals: they are the program's. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = pthread_create(&server_thread, NULL, server_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        prof_log("PROF_METRICS: cannot start the server thread (%s); no metrics", strerror(err));
        goto fail;
    }
    server_running = 1;
    return 0;
fail:
    if (listen_fd >= 0)
        close(listen_fd);
    for (int i = 0; i < 2; i++)
        if (wake_pipe[i] >= 0)
            close(wake_pipe[i]);
    listen_fd = wake_pipe[0] = wake_pipe[1] = -1;
    server_failed = 1;
    return -1;
}

/* ---- The file. ---- */

/* The .prom file's mode: node_exporter's textfile collector usually runs
 * as another user, so the file is readable by all, as a program's other
 * outputs are under the usual umask (docs/LIVE.md, "Who can read"). */
#define PROF_METRICS_FILE_MODE 0644

static void file_write(const struct prof_buf *b)
{
    static int logged;
    char path[4096], tmp[4200];
    const char *slash;
    int fd, n, err;

    if (prof_path_expand(prof_config_get()->metrics_path, path, sizeof path) != 0) {
        prof_log_once(&logged, "PROF_METRICS: path too long; no metrics");
        return;
    }
    /* The temporary is made by mkstemp beside the target (rename stays in
     * one file system): a name nobody can guess or take first, created
     * O_EXCL 0600, then given its mode once it holds the whole text. */
    slash = strrchr(path, '/');
    if (slash == NULL)
        n = snprintf(tmp, sizeof tmp, ".prof-metrics.XXXXXX");
    else
        n = snprintf(tmp, sizeof tmp, "%.*s/.prof-metrics.XXXXXX", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        err = -ENAMETOOLONG;
    } else if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
        err = -errno;
    } else {
        err = prof_write_full(fd, b->data, b->len, NULL);
        if (err == 0 && fchmod(fd, PROF_METRICS_FILE_MODE) != 0)
            err = -errno;
        if (close(fd) != 0 && err == 0)
            err = -errno;
        if (err == 0 && rename(tmp, path) != 0)
            err = -errno;
        if (err != 0)
            unlink(tmp);
    }
    if (err != 0) {
        char q[PROF_LOG_VALUE_SIZE];

        prof_log_once(&logged, "%s: cannot write it (%s); retried every second, said once",
                      prof_log_value(q, sizeof q, "PROF_METRICS", path), strerror(-err));
    }
}

int prof_metrics_wanted(void)
{
    const struct prof_config *cfg = prof_config_get();

    switch (cfg->metrics) {
    case PROF_METRICS_HTTP:
        /* One server per process tree, the first process's: a forked child
         * (a DataLoader worker) never binds the port, whenever its parent
         * first publishes, and says nothing about it. */
        return !prof_rt.forked_from;
    case PROF_METRICS_FILE:
        /* A forked child writes only to a file of its own (%p). */
        return !prof_rt.forked_from || prof_path_has_pid(cfg->metrics_path);
    default:
        return 0;
    }
}

void prof_metrics_publish(const struct prof_live_snap *snap)
{
    const struct prof_config *cfg = prof_config_get();
    int pid = prof_process_get()->pid;
    struct prof_buf b = {0};
    struct text *t, *old;

    if (!prof_metrics_wanted())
        return;
    if (cfg->metrics == PROF_METRICS_FILE) {
        prof_metrics_format(&b, snap);
        if (!b.failed)
            file_write(&b);
        prof_buf_free(&b);
        return;
    }
    if (server_pid != pid) {
        /* Not a forked child (above): the server is this process's,
         * unless an ancestor started alike serves the tree. */
        server_pid = pid;
        server_failed = ancestor_serves();
    }
    if (!server_running && (server_failed || server_start() != 0))
        return;
    prof_metrics_format(&b, snap);
    if (b.failed || (t = malloc(sizeof *t + b.len)) == NULL) {
        prof_buf_free(&b);
        return;
    }
    t->refs = 1;
    t->len = b.len;
    memcpy(t->data, b.data, b.len);
    prof_buf_free(&b);
    pthread_mutex_lock(&text_lock);
    old = current;
    current = t;
    pthread_mutex_unlock(&text_lock);
    text_put(old);
}

void prof_metrics_stop(void)
{
    if (!server_running || server_pid != prof_process_get()->pid)
        return;
    (void)!write(wake_pipe[1], "x", 1);
    pthread_join(server_thread, NULL);
    server_running = 0;
    close(listen_fd);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    listen_fd = wake_pipe[0] = wake_pipe[1] = -1;
    pthread_mutex_lock(&text_lock);
    text_put(current);
    current = NULL;
    pthread_mutex_unlock(&text_lock);
    /* A later prof_enable(1) may serve again. */
    server_pid = 0;
}
