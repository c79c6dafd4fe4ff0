/* summary_out.c - where summaries go: PROF_SUMMARY's stream or file, or
 * the program's handler (prof_set_summary_handler). Summaries are
 * formatted with the runtime lock held and queued here; they are written
 * in order, one at a time, with the runtime lock released, so a slow pipe
 * or a handler never stalls the threads that wait for a flush, and a
 * handler may call the API (it is told -EDEADLK only where waiting would
 * deadlock: prof_collector_is_self). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof.h"
#include "env.h"
#include "fdio.h"
#include "json.h"
#include "log.h"
#include "process.h"
#include "ranks.h"
#include "runtime.h"
#include "summary.h"
#include "summary_out.h"

/* Summaries are written with the runtime lock released; write_lock keeps
 * them whole and one at a time, and guards the summary file's state. */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static int summary_fd = -1;
static int summary_failed;       /* PROF_SUMMARY's file is not used: stderr instead */
static int summary_pid;          /* the process that opened summary_fd */
static char summary_name[4096];  /* the expanded path, for messages */
static int stdout_failed;        /* a write to stdout failed: stderr instead */

/* Set while this thread runs the user's summary handler: the handler may
 * run on any thread that writes queued summaries (the collector, or one in
 * prof_flush / prof_shutdown), and with write_lock held there. */
static __thread int in_summary_handler __attribute__((tls_model("initial-exec")));

/* Whether PROF_TRACE, expanded in this process, names the file at path:
 * the same string, or (where both exist) the same inode. */
static int summary_is_trace(const char *path)
{
    const char *pattern = prof_config_get()->trace_path;
    char trace[4096];
    struct stat a, b;

    if (pattern == NULL || prof_path_expand(pattern, trace, sizeof trace) != 0)
        return 0;
    if (strcmp(trace, path) == 0)
        return 1;
    return stat(trace, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static int summary_target(void)
{
    const struct prof_config *cfg = prof_config_get();
    char *path = summary_name;
    int to = cfg->summary_to;

    if (to == PROF_TO_FILE && prof_rt.forked_from && !prof_path_has_pid(cfg->summary_path))
        to = PROF_TO_STDERR;   /* a forked child must not write into the parent's file */
    switch (to) {
    case PROF_TO_OFF:
        return -1;
    case PROF_TO_HANDLER: {
        static int logged;
        prof_log_once(&logged, "PROF_SUMMARY=logging but no summary handler is installed "
                      "(Python's prof module installs one); summaries go to stderr");
        return STDERR_FILENO;
    }
    case PROF_TO_STDOUT:
        if (stdout_failed)
            return STDERR_FILENO;
        fflush(stdout);
        return STDOUT_FILENO;
    case PROF_TO_FILE:
        if (summary_pid != prof_process_get()->pid) {
            /* Forked since the parent opened (or failed to open) its file:
             * that descriptor is the parent's file, never ours. */
            if (summary_fd >= 0)
                close(summary_fd);
            summary_fd = -1;
            summary_failed = 0;
            summary_pid = prof_process_get()->pid;
        }
        if (summary_fd >= 0 || summary_failed)
            return summary_fd;
        if (prof_path_expand(cfg->summary_path, path, sizeof summary_name) != 0) {
            prof_log("PROF_SUMMARY: path too long; summaries go to stderr");
            summary_failed = 1;
            return -1;
        }
        /* Checked before the open, whose O_TRUNC would wipe the trace. The
         * trace keeps the file: it is the larger loss, and it was opened
         * first (when the runtime started). */
        if (summary_is_trace(path)) {
            prof_log("PROF_SUMMARY and PROF_TRACE name the same file (%s); it keeps the trace, "
                     "summaries go to stderr", path);
            summary_failed = 1;
            return -1;
        }
        /* O_NONBLOCK for the open only: a FIFO with no reader fails (ENXIO)
         * instead of hanging the exit. */
        summary_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
                          O_NONBLOCK, 0644);
        if (summary_fd < 0) {
            prof_log("summary %s: cannot open (%s); summaries go to stderr", path, strerror(errno));
            summary_failed = 1;
        } else {
            fcntl(summary_fd, F_SETFL, fcntl(summary_fd, F_GETFL) & ~O_NONBLOCK);
        }
        return summary_fd;
    default:
        return STDERR_FILENO;
    }
}

/* Where summaries go instead of PROF_SUMMARY (prof_set_summary_handler). */
static prof_summary_fn summary_handler;
static void *summary_handler_user;

void prof_summary_set_handler_locked(prof_summary_fn fn, void *user)
{
    summary_handler = fn;
    summary_handler_user = user;
}

/* Summaries wait here between being formatted (lock held, possibly in
 * the middle of a drain) and being written (lock released). */
struct pending_summary {
    struct prof_buf text;
    int kind;
    int cross_rank;              /* prof_summary_deliver_locked: never muted */
    struct pending_summary *next;
};

static struct pending_summary *pending, **pending_end = &pending;
static struct pending_summary *in_flight;   /* being written, lock released */
/* Broadcast (runtime lock held) each time a summary was written. */
static pthread_cond_t written_cond = PTHREAD_COND_INITIALIZER;

/* Format a summary as of step `step`, its wall time running to now, and
 * queue it. */
int prof_summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t now)
{
    struct pending_summary *p = calloc(1, sizeof *p);
    static int oom_logged;

    if (p != NULL)
        prof_summary_format(&p->text, prof_config_get()->format, kind, step, now);
    if (p == NULL || p->text.failed) {
        prof_log_once(&oom_logged, "out of memory formatting a summary; summaries are skipped "
                      "while memory is short");
        if (p != NULL)
            prof_buf_free(&p->text);
        free(p);
        return -ENOMEM;
    }
    p->kind = kind == PROF_KIND_PERIODIC ? PROF_SUMMARY_PERIODIC : PROF_SUMMARY_FINAL;
    *pending_end = p;
    pending_end = &p->next;
    return 0;
}

static void summary_write(const struct pending_summary *p, prof_summary_fn fn, void *user)
{
    int fd, err;

    /* A cross-rank table stands in for this rank's periodic summaries. */
    if (p->kind == PROF_SUMMARY_PERIODIC && !p->cross_rank &&
        __atomic_load_n(&prof_ranks_muted, __ATOMIC_RELAXED))
        return;
    if (fn != NULL) {
        in_summary_handler = 1;
        fn(user, p->text.data, p->kind);
        in_summary_handler = 0;
        return;
    }
    fd = summary_target();
    if (fd < 0 && summary_failed)
        fd = STDERR_FILENO;
    if (fd < 0 || (err = prof_write_full(fd, p->text.data, p->text.len, NULL)) == 0)
        return;
    if (fd == STDERR_FILENO) {
        static int logged;
        prof_log_once(&logged, "writing the summary to stderr failed (%s); later summaries may "
                      "be lost", strerror(-err));
        return;
    }
    /* A full disk, /dev/full, a pipe whose reader has gone: this summary
     * (it may be the final one, what the run was for) and every later one
     * go to stderr, said once. Part of it may have reached the target. */
    if (fd == STDOUT_FILENO) {
        stdout_failed = 1;
        prof_log("writing the summary to stdout failed (%s); this and later summaries go to "
                 "stderr", strerror(-err));
    } else {
        prof_log("writing the summary to %s failed (%s); this and later summaries go to stderr",
                 summary_name, strerror(-err));
        close(summary_fd);
        summary_fd = -1;
        summary_failed = 1;
    }
    prof_write_full(STDERR_FILENO, p->text.data, p->text.len, NULL);
}

/* Write the queued summaries in order. The lock is released while each
 * goes out: a slow pipe or a handler must not stall the threads that wait
 * for a flush. */
void prof_summary_write_pending_locked(void)
{
    while (pending != NULL) {
        struct pending_summary *p = pending;
        prof_summary_fn fn = summary_handler;
        void *user = summary_handler_user;

        /* One writer at a time, so that summaries go out in the order they
         * were queued: two threads that each took one and raced for
         * write_lock printed step 4 before step 2. A thread that finds
         * another writing waits for it, then writes what is left (or finds
         * it written). The writer's own handler leaves it to the writer. */
        if (in_flight != NULL) {
            if (in_summary_handler)
                return;
            pthread_cond_wait(&written_cond, &prof_rt.lock);
            continue;
        }
        pending = p->next;
        if (pending == NULL)
            pending_end = &pending;
        in_flight = p;
        prof_rt_unlock();
        pthread_mutex_lock(&write_lock);
        summary_write(p, fn, user);
        pthread_mutex_unlock(&write_lock);
        prof_rt_lock();
        in_flight = NULL;
        pthread_cond_broadcast(&written_cond);
        prof_buf_free(&p->text);
        free(p);
    }
}

void prof_summary_wait_written_locked(void)
{
    while (in_flight != NULL)
        pthread_cond_wait(&written_cond, &prof_rt.lock);
}

/* The cross-rank table (ranks.c), written where the summaries go and in
 * order with them, as a periodic summary. Takes text's buffer. */
int prof_summary_deliver_locked(struct prof_buf *text)
{
    struct pending_summary *p = calloc(1, sizeof *p);

    if (p == NULL) {
        prof_buf_free(text);
        return -ENOMEM;
    }
    p->text = *text;
    memset(text, 0, sizeof *text);
    p->kind = PROF_SUMMARY_PERIODIC;
    p->cross_rank = 1;
    *pending_end = p;
    pending_end = &p->next;
    prof_summary_write_pending_locked();
    return 0;
}

int prof_summary_in_handler(void)
{
    return in_summary_handler;
}

void prof_summary_out_atfork_prepare(void)
{
    pthread_mutex_lock(&write_lock);
}

void prof_summary_out_atfork_parent(void)
{
    pthread_mutex_unlock(&write_lock);
}

void prof_summary_out_atfork_child(void)
{
    pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;

    /* A thread of the parent may have been waiting on it. */
    written_cond = fresh;
    pthread_mutex_unlock(&write_lock);
    /* The parent's queued summaries are the parent's to print; the child's
     * copies are freed unprinted. */
    while (pending != NULL) {
        struct pending_summary *p = pending;
        pending = p->next;
        prof_buf_free(&p->text);
        free(p);
    }
    pending_end = &pending;
    if (in_flight != NULL) {
        /* Forked while another thread was writing it. */
        prof_buf_free(&in_flight->text);
        free(in_flight);
        in_flight = NULL;
    }
}

void prof_summary_out_close(void)
{
    pthread_mutex_lock(&write_lock);
    if (summary_fd >= 0) {
        close(summary_fd);
        summary_fd = -1;
    }
    pthread_mutex_unlock(&write_lock);
}
