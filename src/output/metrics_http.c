/* metrics_http.c - PROF_METRICS=HOST:PORT: the HTTP server (metrics_http.h).
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
#include <time.h>
#include <unistd.h>

#include "prof.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "metrics_ancestry.h"
#include "metrics_http.h"
#include "process.h"

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

        if (e != EADDRINUSE || !prof_metrics_port_held_by_ancestor(cfg->metrics_port))
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

int prof_metrics_http_ready(void)
{
    int pid = prof_process_get()->pid;

    if (server_pid != pid) {
        /* Not a forked child (prof_metrics_wanted): the server is this
         * process's, unless an ancestor started alike serves the tree. */
        server_pid = pid;
        server_failed = prof_metrics_ancestor_serves();
    }
    if (!server_running && (server_failed || server_start() != 0))
        return -1;
    return 0;
}

void prof_metrics_http_serve(const struct prof_buf *b)
{
    struct text *t, *old;

    if ((t = malloc(sizeof *t + b->len)) == NULL)
        return;
    t->refs = 1;
    t->len = b->len;
    memcpy(t->data, b->data, b->len);
    pthread_mutex_lock(&text_lock);
    old = current;
    current = t;
    pthread_mutex_unlock(&text_lock);
    text_put(old);
}

void prof_metrics_http_stop(void)
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
