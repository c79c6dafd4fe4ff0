/* summary_out.c - where summaries go: PROF_SUMMARY's stream or file, or
 * the program's handler (prof_set_summary_handler). Summaries are
 * formatted with the runtime lock held and queued here (a queue bounded
 * in bytes and in count: QUEUE_BYTES, QUEUE_MAX); the output writer thread (writer.h) writes them in order,
 * one at a time, so a stalled pipe or a slow handler costs periodic
 * summaries, never the collector's time: it goes on draining the rings.
 * While the queue is full the collector makes no periodic summary and
 * does not cut its window (prof_summary_queue_full): the next summary
 * covers every window since the last one (merged_windows), as when steps
 * come faster than summaries; a step summary so refused with no due step
 * after it is made at the run's end (collector.c).
 * The handler runs on the writer thread and may call the API (it is told
 * -EDEADLK only where waiting would deadlock: prof_collector_is_self). */
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
#include "writer.h"

/* Held by the writer around each summary: it guards the summary file's
 * state (the run's end closes the file under it). */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static int summary_fd = -1;
static int summary_failed;       /* PROF_SUMMARY's file is not used: stderr instead */
static int summary_pid;          /* the process that opened summary_fd */
static char summary_name[4096];  /* the expanded path, for messages */
static int stdout_failed;        /* a write to stdout failed: stderr instead */

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

static int summary_target(int cross_rank)
{
    const struct prof_config *cfg = prof_config_get();
    char *path = summary_name;
    int to = cfg->summary_to;

    if (to == PROF_TO_FILE && prof_rt_path_is_parents(cfg->summary_path))
        /* A file without %p is the parent's: never written here. A worker's
         * table is the parent's to count; another program's goes to stderr. */
        to = prof_rt_is_worker() ? PROF_TO_OFF : PROF_TO_STDERR;
    else if (!cross_rank && prof_rt_is_worker() && !cfg->summary_set)
        /* One table a run: a worker's only where PROF_SUMMARY sends it.
         * The cross-rank table is the job's, whichever process makes it. */
        to = PROF_TO_OFF;
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
            char q[PROF_LOG_VALUE_SIZE];

            prof_log("PROF_SUMMARY and PROF_TRACE name the same file (%s); it keeps the trace, "
                     "summaries go to stderr", prof_log_value(q, sizeof q, "PROF_SUMMARY", path));
            summary_failed = 1;
            return -1;
        }
        /* O_NONBLOCK for the open only: a FIFO with no reader fails (ENXIO)
         * instead of hanging the exit. */
        summary_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
                          O_NONBLOCK, 0644);
        if (summary_fd < 0) {
            char q[PROF_LOG_VALUE_SIZE];

            prof_log("summary %s: cannot open (%s); summaries go to stderr",
                     prof_log_value(q, sizeof q, "PROF_SUMMARY", path), strerror(errno));
            summary_failed = 1;
        } else {
            fcntl(summary_fd, F_SETFL, fcntl(summary_fd, F_GETFL) & ~O_NONBLOCK);
        }
        return summary_fd;
    default:
        return STDERR_FILENO;
    }
}

/* Summaries wait here between being formatted (runtime lock held,
 * possibly in the middle of a drain) and being written by the writer
 * thread (writer.h). The queue is bounded: when a reader stops reading,
 * periodic summaries are merged instead of queued (prof_summary_queue_full).
 * The handler is taken with the summary when it is queued: a summary goes
 * where the program said when it was made. */
struct pending_summary {
    struct prof_buf text;
    int kind;
    int cross_rank;              /* prof_summary_deliver_locked: never muted */
    uint64_t seq;                /* queued as the seq-th */
    prof_summary_fn fn;
    void *user;
    struct pending_summary *next;
};

/* Summaries waiting (in flight not counted) past which no periodic one is
 * made. Bounded in bytes, not only in count: a writer thread that the
 * scheduler leaves off the CPU for a few milliseconds on a busy machine
 * must not cost summaries (with 8 slots, 10steps of 0.1 ms each filled
 * the queue in 8 ms, and the run said its reader was stopped); a reader
 * that is really stopped fills it in seconds, holding 4 MB at most. */
#define QUEUE_BYTES (4u << 20)
#define QUEUE_MAX 256

/* The queue, the handler and the counts (queue_lock held). */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending_summary *pending, **pending_end = &pending;
static unsigned npending;
static size_t pending_bytes;                /* the queue's texts, in bytes */
static struct pending_summary *in_flight;   /* being written by the writer */
static uint64_t queued_seq;                 /* summaries queued so far */
static uint64_t merged;                     /* periodic summaries not made:
                                               prof_summary_queue_full */
static uint64_t merged_window;              /* of them, since the last periodic
                                               one made: its window holds them */

/* Where summaries go instead of PROF_SUMMARY (prof_set_summary_handler). */
static prof_summary_fn summary_handler;
static void *summary_handler_user;

static int summary_service(void);

void prof_summary_set_handler_locked(prof_summary_fn fn, void *user)
{
    pthread_mutex_lock(&queue_lock);
    summary_handler = fn;
    summary_handler_user = user;
    pthread_mutex_unlock(&queue_lock);
}

static void pending_free(struct pending_summary *p)
{
    prof_buf_free(&p->text);
    free(p);
}

/* Queue p (its text made) and wake the writer. Never refused: periodic
 * summaries are not made while the queue is full (prof_summary_queue_full),
 * and what else comes is bounded by itself (one final summary a run; a
 * cross-rank table waits until it is written). */
static void summary_enqueue(struct pending_summary *p)
{
    pthread_mutex_lock(&queue_lock);
    p->fn = summary_handler;
    p->user = summary_handler_user;
    p->seq = ++queued_seq;
    *pending_end = p;
    pending_end = &p->next;
    npending++;
    pending_bytes += p->text.len;
    pthread_mutex_unlock(&queue_lock);
    prof_writer_kick(summary_service);
}

int prof_summary_queue_full(void)
{
    static int logged;
    int full;

    pthread_mutex_lock(&queue_lock);
    full = npending >= QUEUE_MAX || pending_bytes >= QUEUE_BYTES;
    merged += full;
    merged_window += full;
    pthread_mutex_unlock(&queue_lock);
    if (full)
        prof_log_once(&logged, "summaries are not being written as fast as they come (is the "
                      "reader of PROF_SUMMARY's output stopped?): periodic summaries are merged "
                      "into later ones while it lasts (merged_windows); no record is lost, and "
                      "the final summary is kept");
    return full;
}

void prof_summary_window_reset_locked(void)
{
    pthread_mutex_lock(&queue_lock);
    merged_window = 0;
    pthread_mutex_unlock(&queue_lock);
}

/* Format a summary as of step `step`, its wall time running to now, and
 * queue it. */
int prof_summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t now)
{
    struct pending_summary *p = calloc(1, sizeof *p);
    static int oom_logged;
    uint64_t windows = 1;

    if (kind == PROF_KIND_PERIODIC) {
        /* The periods whose summaries were not made (queue full) are in
         * this one's window: collector.c keeps it open meanwhile. */
        pthread_mutex_lock(&queue_lock);
        windows += merged_window;
        merged_window = 0;
        pthread_mutex_unlock(&queue_lock);
    }
    if (p != NULL)
        prof_summary_format(&p->text, prof_config_get()->format, kind, step, now, windows);
    if (p == NULL || p->text.failed) {
        prof_log_once(&oom_logged, "out of memory formatting a summary; summaries are skipped "
                      "while memory is short");
        if (p != NULL)
            prof_buf_free(&p->text);
        free(p);
        return -ENOMEM;
    }
    p->kind = kind == PROF_KIND_PERIODIC ? PROF_SUMMARY_PERIODIC : PROF_SUMMARY_FINAL;
    summary_enqueue(p);
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
        prof_writer_handler_enter();
        fn(user, p->text.data, p->kind);
        prof_writer_handler_leave();
        return;
    }
    fd = summary_target(p->cross_rank);
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
        char q[PROF_LOG_VALUE_SIZE];

        prof_log("writing the summary to %s failed (%s); this and later summaries go to stderr",
                 prof_log_value(q, sizeof q, "PROF_SUMMARY", summary_name), strerror(-err));
        close(summary_fd);
        summary_fd = -1;
        summary_failed = 1;
    }
    prof_write_full(STDERR_FILENO, p->text.data, p->text.len, NULL);
}

/* The writer thread's service: the queued summaries, in order, each with
 * write_lock held (it keeps the file's state; a forked child makes it
 * anew, so fork never waits on a write). */
static int summary_service(void)
{
    int any = 0;

    for (;;) {
        struct pending_summary *p;

        pthread_mutex_lock(&queue_lock);
        if ((p = pending) != NULL) {
            if ((pending = p->next) == NULL)
                pending_end = &pending;
            npending--;
            pending_bytes -= p->text.len;
        }
        in_flight = p;
        pthread_mutex_unlock(&queue_lock);
        if (p == NULL)
            return any;
        any = 1;
        pthread_mutex_lock(&write_lock);
        summary_write(p, p->fn, p->user);
        pthread_mutex_unlock(&write_lock);
        pthread_mutex_lock(&queue_lock);
        in_flight = NULL;
        pthread_mutex_unlock(&queue_lock);
        /* After in_flight is cleared: a waiter it wakes sees it written. */
        prof_writer_progress();
        pending_free(p);
    }
}

/* Whether a summary queued as the target-th or earlier is still waiting
 * or being written (queue_lock held). */
static int summary_waiting(uint64_t target)
{
    return (pending != NULL && pending->seq <= target) ||
           (in_flight != NULL && in_flight->seq <= target);
}

/* prof_writer_wait's test: the summaries queued up to the target-th are
 * written. */
static int summaries_written(uint64_t target)
{
    int waiting;

    pthread_mutex_lock(&queue_lock);
    waiting = summary_waiting(target);
    pthread_mutex_unlock(&queue_lock);
    return !waiting;
}

int prof_summary_wait_written_locked(void)
{
    uint64_t target;
    int err;

    pthread_mutex_lock(&queue_lock);
    target = queued_seq;
    pthread_mutex_unlock(&queue_lock);
    if (summaries_written(target))
        return 0;
    /* The runtime lock is released while waiting: the handler on the
     * writer thread may take it. Bounded: a reader that does not read
     * costs the caller PROF_WRITER_WAIT_NS once (writer.h). */
    prof_rt_unlock();
    err = prof_writer_wait(summaries_written, target);
    prof_rt_lock();
    return err == -EDEADLK ? 0 : err;
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
    summary_enqueue(p);
    /* On the training thread at its step: out when the call returns, as
     * the rank's own summaries are after prof_flush, unless the writer is
     * stuck (bounded: writer.h); the table stays queued then. */
    prof_summary_wait_written_locked();
    return 0;
}

int prof_summary_in_handler(void)
{
    return prof_writer_in_handler();
}

void prof_summary_out_atfork_prepare(void)
{
    pthread_mutex_lock(&queue_lock);
    prof_writer_atfork_prepare();
}

void prof_summary_out_atfork_parent(void)
{
    prof_writer_atfork_parent();
    pthread_mutex_unlock(&queue_lock);
}

void prof_summary_out_atfork_child(void)
{
    prof_writer_atfork_child();
    /* The parent's writer may have been in the middle of a summary: the
     * lock is made anew (the child's summary_target drops the parent's
     * file by its pid). */
    pthread_mutex_init(&write_lock, NULL);
    /* The parent's queued summaries are the parent's to print; the child's
     * copies are freed unprinted. */
    while (pending != NULL) {
        struct pending_summary *p = pending;
        pending = p->next;
        pending_free(p);
    }
    pending_end = &pending;
    npending = 0;
    pending_bytes = 0;
    merged = merged_window = 0;
    if (in_flight != NULL) {
        /* Forked while the writer was writing it. */
        pending_free(in_flight);
        in_flight = NULL;
    }
    pthread_mutex_unlock(&queue_lock);
}

/* The run's end (runtime lock held, released while waiting): the writer
 * writes what is queued (the final summary, the trace's end) while it
 * keeps completing writes (PROF_WRITER_DRAIN_MAX_NS at most); a writer
 * that completed none for PROF_WRITER_DRAIN_NS is stuck: said, and the
 * run ends without waiting longer. PROF_SUMMARY's file is closed
 * only when the writer is done with it. */
void prof_summary_out_close(void)
{
    uint64_t joined;
    int err, stopped = 1;

    prof_rt_unlock();
    err = prof_writer_drain(PROF_WRITER_DRAIN_NS, PROF_WRITER_DRAIN_MAX_NS);
    /* A writer that took a new summary meanwhile (another thread's
     * prof_flush) and is stuck in it holds write_lock: the file is left
     * open rather than waited for. */
    if (err == 0 && prof_writer_stop(PROF_WRITER_DRAIN_NS) != 0)
        stopped = 0;
    prof_rt_lock();
    pthread_mutex_lock(&queue_lock);
    joined = merged;
    merged = 0;
    pthread_mutex_unlock(&queue_lock);
    if (joined != 0)
        prof_log("the summaries' writer was behind (PROF_SUMMARY's reader) %llu times: the "
                 "periodic summaries due then were merged into later ones; no record was lost",
                 (unsigned long long)joined);
    if (err != 0) {
        prof_log("the output writer is stuck (no write done for %d s: a reader that does not "
                 "read?); the run ends without waiting more: the final summary or the trace's "
                 "end may be missing", (int)(PROF_WRITER_DRAIN_NS / 1000000000u));
        return;
    }
    if (!stopped)
        return;
    pthread_mutex_lock(&write_lock);
    if (summary_fd >= 0) {
        close(summary_fd);
        summary_fd = -1;
    }
    pthread_mutex_unlock(&write_lock);
}
