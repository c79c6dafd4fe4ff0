/* trace_file.c - the trace's file (trace_out.h): made with its opening
 * in it, written batch by batch (compressed for a .gz path), ended by the
 * close path or the signal path. trace_queue.c calls what trace_file.h
 * declares with write_lock held; the signal path takes no lock.
 *
 * A path ending in ".gz" gets a gzip stream (gz.c; zlib loaded at run
 * time, plain JSON to the name without ".gz" when it is missing). Each
 * batch is compressed on the writing side and ends at a sync point, so the
 * file always decompresses to whole events up to the last batch written;
 * a kill inside a batch's write(2) (microseconds per batch) can cut that
 * batch's last event.
 *
 * Ending the file: exactly one path writes the end. A state word goes
 * OPEN -> WRITING -> OPEN around each batch and OPEN -> ENDED when the
 * close path or the signal path (a second SIGINT/SIGTERM, in a handler)
 * claims it with compare-and-swap; whoever loses writes nothing. The
 * signal path writes prepared bytes with one write(2): "\n]\n", or for gz
 * a final stored block holding "\n]\n" plus the gzip trailer, computed
 * after every batch (no zlib call in the handler). A signal that arrives
 * while another thread writes a batch (WRITING) or the end (ENDED by the
 * close path) waits for it, half a second at most, and then ends the file
 * or finds it closed: the trace is closed whichever of the two signals of
 * a supervisor lands first (without the wait, a second signal during the
 * final drain left a plain file without its "]" one time in three, a gzip
 * stream without its end three times in four). A signal on the writing
 * thread itself cannot wait, and leaves the file as a killed process
 * does. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fdio.h"
#include "gz.h"
#include "log.h"
#include "process.h"
#include "trace_file.h"
#include "trace_out.h"
#include "writer.h"

/* zlib's fastest level: on the collector, level 6 compressed 2.0 M trace
 * events a second and level 1 4.7 M, for files 25% larger (the demo: 9.0x
 * and 7.1x smaller than plain JSON; docs/TRACE.md). */
#define GZ_LEVEL 1
#define END_TEXT "\n]\n"
#define PAGE 4096u

enum { W_CLOSED, W_OPEN, W_WRITING, W_ENDED };   /* wstate: who may write */

/* Owned by the writer (write_lock held). */
static int fd = -1;
static struct prof_gz *gz;       /* non-NULL: the file is a gzip stream */
static struct prof_buf zbuf;     /* compressed output of one batch */
static char path[4096];
static int in_write;             /* a batch is being written (seen by a
                                    forked child: the stream may be torn) */
/* A forked child's copy of a stream its parent was writing: kept where
 * leak checkers see it, never used. */
static struct prof_gz *torn_gz __attribute__((used));
static struct prof_buf torn_zbuf __attribute__((used));
static struct prof_buf carry;    /* the opening's bytes the pipe did not take
                                    at open: the writer writes them first */

/* Shared with the signal path. */
static int wstate = W_CLOSED;
static int writer_tid;           /* who holds WRITING, or ENDED for the close */
static int ended_by_signal;
static int signal_fd = -1;       /* fd as the signal path may see it */
static pid_t fd_pid;             /* the process that opened fd: no other writes to it */
static unsigned char end_bytes[64];   /* what the signal path writes */
static size_t end_len;

static uint64_t origin_ns;       /* the trace's ts 0 (prof_trace_out_origin) */

/* The trace's path as every message shows it: made from PROF_TRACE. */
static const char *path_said(char q[PROF_LOG_VALUE_SIZE], const char *p)
{
    return prof_log_value(q, PROF_LOG_VALUE_SIZE, "PROF_TRACE", p);
}

const char *prof_trace_file_path_said(char q[PROF_LOG_VALUE_SIZE])
{
    return path_said(q, path);
}

/* Read by the formatter (atomics). */
static uint64_t written;         /* bytes in the file (compressed, for gz) */
static uint64_t raw_written;     /* JSON bytes given to the file */
static int failed;

int prof_trace_out_is_open(void)
{
    return __atomic_load_n(&wstate, __ATOMIC_ACQUIRE) != W_CLOSED;
}

int prof_trace_out_is_gz(void)
{
    return gz != NULL;
}

static int ends_with_gz(const char *s)
{
    size_t n = strlen(s);

    return n > 3 && strcmp(s + n - 3, ".gz") == 0;
}

/* The opening's bytes as they go to the file (compressed for gz), in
 * *data, *len (write_lock held). 0, or -ENOMEM (said). */
static int opening_bytes(struct prof_buf *o, const char **data, size_t *len)
{
    char q[PROF_LOG_VALUE_SIZE];

    *data = o->data;
    *len = o->len;
    if (gz == NULL || o->len == 0)
        return 0;
    zbuf.len = 0;
    if (prof_gz_write(gz, o->data, o->len, 0, &zbuf) != 0) {
        prof_log("trace %s: out of memory compressing its opening; tracing is off",
                 path_said(q, path));
        zbuf.failed = 0;
        return -ENOMEM;
    }
    end_len = prof_gz_end_bytes(gz, END_TEXT, 3, end_bytes);
    *data = zbuf.data;
    *len = zbuf.len;
    return 0;
}

/* A path that does not exist yet appears with the opening already in it:
 * the file is made unnamed in its directory (O_TMPFILE), written, and then
 * linked at the path, so that no process killed at any moment leaves it
 * empty. The descriptor, or -1 where that cannot be done (the path exists:
 * a file to truncate, a FIFO, a symbolic link to refuse; no O_TMPFILE on
 * the file system; no /proc; a write that failed): the caller then opens
 * the path as before. */
static int open_linked(const char *p, const char *data, size_t len)
{
    char dir[sizeof path], proc[64];
    const char *slash = strrchr(p, '/');
    struct stat st;
    size_t done;
    int f;

    if (len == 0 || lstat(p, &st) == 0 || errno != ENOENT)
        return -1;
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == p)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p);
    f = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (f < 0)
        return -1;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f);
    if (prof_write_full(f, data, len, &done) != 0 ||
        linkat(AT_FDCWD, proc, AT_FDCWD, p, AT_SYMLINK_FOLLOW) != 0) {
        close(f);
        return -1;
    }
    return f;
}

/* The opening on a path opened as before (write_lock held, fd still
 * O_NONBLOCK): written on the opening thread at once, so that a process
 * killed a moment later leaves "[" and the metadata (handing it to a
 * writer thread that was just created left the file empty for tens of ms
 * on a loaded machine). Without blocking: a FIFO whose pipe is full takes
 * the rest later, from the writer (carry). 0, or a negative errno
 * (said). */
static int write_opening(const char *data, size_t len)
{
    char q[PROF_LOG_VALUE_SIZE];
    size_t done = 0;
    int err;

    carry.len = 0;
    if (len == 0)
        return 0;
    err = prof_write_full(fd, data, len, &done);
    if (err == -EAGAIN) {
        prof_buf_put(&carry, data + done, len - done);
        err = carry.failed ? -ENOMEM : 0;
    }
    if (err != 0) {
        prof_log("trace %s: cannot write its opening (%s); tracing is off, the summary goes on",
                 path_said(q, path), strerror(-err));
        carry.len = 0;
        carry.failed = 0;
        return err;
    }
    __atomic_store_n(&written, (uint64_t)done, __ATOMIC_RELAXED);
    return 0;
}

int prof_trace_file_open(char *p, struct prof_buf *opening)
{
    static int zlib_note;
    char q[PROF_LOG_VALUE_SIZE];
    const char *why, *data;
    size_t len;
    int err;

    if (ends_with_gz(p)) {
        if (prof_gz_load(&why) == 0)
            gz = prof_gz_new(GZ_LEVEL);
        else
            why = why != NULL ? why : "zlib not found";
        if (gz == NULL) {
            prof_log_once(&zlib_note, "trace %s: no zlib (%s); writing plain JSON to that path "
                          "without its .gz", path_said(q, p), why);
            p[strlen(p) - 3] = '\0';
        }
    }
    snprintf(path, sizeof path, "%s", p);
    __atomic_store_n(&written, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&raw_written, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&failed, 0, __ATOMIC_RELAXED);
    memcpy(end_bytes, END_TEXT, 3);
    end_len = 3;
    carry.len = 0;
    if ((err = opening_bytes(opening, &data, &len)) != 0)
        goto fail;
    if ((fd = open_linked(p, data, len)) >= 0) {
        __atomic_store_n(&written, (uint64_t)len, __ATOMIC_RELAXED);
    } else {
        /* O_NONBLOCK for the open and the opening only: a FIFO with no
         * reader fails (ENXIO) instead of hanging the thread that recorded
         * the first zone, and one whose pipe is full does not hang it
         * either. */
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (fd < 0) {
            err = -errno;
            prof_log("trace %s: cannot open (%s)%s; tracing is off, the summary goes on",
                     path_said(q, p), strerror(-err), err == -ELOOP ? ": the path is a symbolic link, which "
                     "prof does not follow" : "");
            goto fail;
        }
        if ((err = write_opening(data, len)) != 0) {
            close(fd);
            fd = -1;
            goto fail;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
    fd_pid = getpid();
    __atomic_store_n(&raw_written, (uint64_t)opening->len, __ATOMIC_RELAXED);
    __atomic_store_n(&ended_by_signal, 0, __ATOMIC_RELAXED);
    return 0;
fail:
    prof_buf_free(&zbuf);
    prof_gz_free(gz);
    gz = NULL;
    return err;
}

int prof_trace_file_publish(void)
{
    int left = carry.len != 0;

    if (!left)
        __atomic_store_n(&signal_fd, fd, __ATOMIC_RELAXED);
    __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
    return left;
}

/* The thread that holds WRITING (or ENDED, closing): a signal handler on
 * any other thread may wait for it. */
static void set_writer(void)
{
    __atomic_store_n(&writer_tid, (int)syscall(SYS_gettid), __ATOMIC_RELAXED);
}

/* Called with WRITING or ENDED held, on the collector or an application
 * thread (prof_flush, a full queue, shutdown); prof_write_full keeps a
 * FIFO whose reader has gone from raising SIGPIPE. On failure the file is
 * closed and tracing stops. */
static void write_all(const char *p, size_t n)
{
    size_t done;
    char q[PROF_LOG_VALUE_SIZE];
    int err;

    if (getpid() != fd_pid) {
        /* Another process's descriptor (a fork's copy that its handlers
         * did not get to forget): its file is that process's alone. */
        static int logged;

        prof_log_once(&logged, "trace %s: opened by pid %d, not this process (%d); nothing "
                      "written to it here", path_said(q, path), (int)fd_pid, (int)getpid());
        __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
        __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELEASE);
        close(fd);
        fd = -1;
        __atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
        return;
    }
    err = prof_write_full(fd, p, n, &done);

    __atomic_add_fetch(&written, (uint64_t)done, __ATOMIC_RELAXED);
    prof_writer_progress();
    if (err != 0) {
        prof_log("trace %s: write failed (%s); tracing is off from here, "
                 "the summary goes on", path_said(q, path), strerror(-err));
        __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
        __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELEASE);
        close(fd);
        fd = -1;
        __atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
    }
}

/* Write one batch (compressed for gz), holding WRITING. The first batch
 * holds the header: only once it is out may the signal path end the file. */
static void write_batch(const char *p, size_t n)
{
    int expect = W_OPEN;

    /* Acquire/release pair with the signal path's claim: it either ended
     * the file before this batch (nothing more is written) or sees OPEN
     * again only with end_bytes matching the file. */
    if (!__atomic_compare_exchange_n(&wstate, &expect, W_WRITING, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return;
    set_writer();
    __atomic_add_fetch(&raw_written, n, __ATOMIC_RELAXED);
    if (gz != NULL) {
        zbuf.len = 0;
        if (prof_gz_write(gz, p, n, 0, &zbuf) != 0) {
            char q[PROF_LOG_VALUE_SIZE];

            prof_log("trace %s: compression failed (out of memory?); tracing is off from "
                     "here", path_said(q, path));
            zbuf.failed = 0;
            __atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
        } else {
            write_all(zbuf.data, zbuf.len);
            end_len = prof_gz_end_bytes(gz, END_TEXT, 3, end_bytes);
        }
    } else {
        write_all(p, n);
    }
    if (fd >= 0) {
        __atomic_store_n(&signal_fd, fd, __ATOMIC_RELAXED);
        __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
    }
}

/* What the pipe did not take of the opening at open, first (write_lock
 * held): bytes as they go to the file (compressed for gz). */
static void write_carry(void)
{
    int expect = W_OPEN;

    if (!__atomic_compare_exchange_n(&wstate, &expect, W_WRITING, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return;
    set_writer();
    write_all(carry.data, carry.len);
    carry.len = 0;
    if (fd >= 0) {
        __atomic_store_n(&signal_fd, fd, __ATOMIC_RELAXED);
        __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
    }
}

int prof_trace_file_write_carry(void)
{
    if (carry.len == 0 || fd < 0)
        return 0;
    write_carry();
    return 1;
}

void prof_trace_out_origin(uint64_t ns)
{
    __atomic_store_n(&origin_ns, ns, __ATOMIC_RELAXED);
}

/* Before a batch that follows dropped ones (writer, write_lock held): one
 * instant event saying how many were dropped, placed (plain JSON) in whole
 * pages of its own so that the batch lands at the file offset the
 * formatter placed it at, modulo a page: its events still do not straddle
 * a page boundary (trace.c). at: the batch's offset as the formatter
 * counted, or UINT64_MAX before the end. */
static void write_drop_note(uint64_t events, uint64_t at)
{
    char note[512], text[3 * PAGE];
    uint64_t pos = __atomic_load_n(&raw_written, __ATOMIC_RELAXED);
    uint64_t ts = prof_clock_now_ns();
    uint64_t o = __atomic_load_n(&origin_ns, __ATOMIC_RELAXED);
    int pid = (int)prof_process_get()->pid;
    size_t n = 0, m;

    ts = ts > o ? ts - o : 1;
    m = (size_t)snprintf(note, sizeof note,
                         "\n,{\"name\":\"prof: %llu trace events dropped: the trace's writer "
                         "was behind (its reader stopped?)\",\"cat\":\"prof\",\"ph\":\"i\","
                         "\"pid\":%d,\"tid\":%d,\"s\":\"t\",\"ts\":%llu.%03llu,"
                         "\"args\":{\"dropped_events\":%llu}}",
                         (unsigned long long)events, pid, pid,
                         (unsigned long long)(ts / 1000), (unsigned long long)(ts % 1000),
                         (unsigned long long)events);
    if (m >= sizeof note)
        m = sizeof note - 1;
    if (gz == NULL && pos % PAGE != 0) {
        memset(text, ' ', PAGE - pos % PAGE);
        n = PAGE - pos % PAGE;
    }
    memcpy(text + n, note, m);
    n += m;
    if (gz == NULL && at != UINT64_MAX) {
        size_t pad = (size_t)((at % PAGE + PAGE - (pos + n) % PAGE) % PAGE);
        memset(text + n, ' ', pad);
        n += pad;
    }
    write_batch(text, n);
}

void prof_trace_file_write(const char *p, size_t n, uint64_t dropped_events, uint64_t at)
{
    __atomic_store_n(&in_write, 1, __ATOMIC_RELAXED);
    if (fd >= 0 && dropped_events != 0)
        write_drop_note(dropped_events, at);
    if (fd >= 0)
        write_batch(p, n);
    __atomic_store_n(&in_write, 0, __ATOMIC_RELAXED);
}

double prof_trace_out_ratio(void)
{
    uint64_t raw = __atomic_load_n(&raw_written, __ATOMIC_RELAXED);

    if (gz == NULL)
        return 1.0;
    /* Before the first batch: gzip shrinks trace JSON about 8 times. */
    return raw ? (double)__atomic_load_n(&written, __ATOMIC_RELAXED) / (double)raw : 0.125;
}

int prof_trace_out_failed(void)
{
    return __atomic_load_n(&failed, __ATOMIC_ACQUIRE);
}

/* write_lock held. */
void prof_trace_file_abandon(void)
{
    int expect = W_OPEN;

    if (fd >= 0 && __atomic_load_n(&written, __ATOMIC_RELAXED) == 0) {
        /* Not even the opening bracket is out: write it directly (no
         * memory needed), so the end makes "[]" and the file stays valid
         * JSON. A gz file with nothing in it is removed. */
        if (gz != NULL) {
            if (__atomic_compare_exchange_n(&wstate, &expect, W_CLOSED, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
                close(fd);
                fd = -1;
                unlink(path);
            }
        } else if (__atomic_compare_exchange_n(&wstate, &expect, W_WRITING, 0, __ATOMIC_ACQUIRE,
                                               __ATOMIC_RELAXED)) {
            set_writer();
            write_all("[", 1);
            if (fd >= 0) {
                __atomic_store_n(&signal_fd, fd, __ATOMIC_RELAXED);
                __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
            }
        }
    }
}

void prof_trace_file_end(uint64_t unsaid, uint64_t total)
{
    int expect = W_OPEN;
    char shown[PROF_LOG_VALUE_SIZE];

    if (fd >= 0 && unsaid != 0)
        write_drop_note(unsaid, UINT64_MAX);
    if (total != 0)
        prof_log("trace %s: %llu events were dropped because its writer was behind",
                 path_said(shown, path), (unsigned long long)total);
    /* The end is written by whichever of this path and the signal path
     * claims it first; directly, so that the file is closed even when
     * memory is short. */
    __atomic_store_n(&in_write, 1, __ATOMIC_RELAXED);
    if (fd >= 0 && __atomic_compare_exchange_n(&wstate, &expect, W_ENDED, 0, __ATOMIC_ACQUIRE,
                                               __ATOMIC_RELAXED)) {
        set_writer();
        if (gz != NULL) {
            zbuf.len = 0;
            if (prof_gz_write(gz, END_TEXT, 3, 1, &zbuf) == 0)
                write_all(zbuf.data, zbuf.len);
            else    /* no memory for zlib's output: the prepared end needs none */
                write_all((const char *)end_bytes, end_len);
        } else {
            write_all(END_TEXT, 3);
        }
    }
    __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
    if (fd >= 0 && close(fd) != 0)
        prof_log("trace %s: close failed (%s)", path_said(shown, path), strerror(errno));
    fd = -1;
    prof_buf_free(&zbuf);
    prof_gz_free(gz);
    gz = NULL;
    __atomic_store_n(&in_write, 0, __ATOMIC_RELAXED);
}

void prof_trace_file_closed(void)
{
    __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELEASE);
}

void prof_trace_out_close_from_signal(void)
{
    static const struct timespec ms = {0, 1000000};
    int me = (int)syscall(SYS_gettid);

    /* Async-signal-safe: atomics, gettid, nanosleep and one write. */
    for (int waited = 0; waited < 500; waited++) {
        int expect = W_OPEN;
        int s = __atomic_load_n(&wstate, __ATOMIC_ACQUIRE);

        if (s == W_OPEN && __atomic_compare_exchange_n(&wstate, &expect, W_ENDED, 0,
                                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            /* Only whole batches were ever written, so the file ends at an
             * event (and for gz at a sync point, where end_bytes continue
             * it). */
            int f = __atomic_load_n(&signal_fd, __ATOMIC_RELAXED);

            __atomic_store_n(&ended_by_signal, 1, __ATOMIC_RELEASE);
            if (f >= 0 && getpid() == fd_pid && write(f, end_bytes, end_len) < 0) {
                /* Nothing more a signal handler may do. */
            }
            return;
        }
        if (s == W_CLOSED || __atomic_load_n(&ended_by_signal, __ATOMIC_ACQUIRE) ||
            (s != W_OPEN && __atomic_load_n(&writer_tid, __ATOMIC_RELAXED) == me))
            return;
        if (s != W_OPEN)
            nanosleep(&ms, NULL);
    }
}

void prof_trace_file_forget(void)
{
    /* A stream the parent's writer was compressing at the fork is left
     * alone (zlib's state may be torn); everything else is the parent's
     * to write, so it is dropped here. */
    __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELAXED);
    __atomic_store_n(&ended_by_signal, 0, __ATOMIC_RELAXED);
    if (fd >= 0)
        close(fd);
    fd = -1;
    if (!__atomic_load_n(&in_write, __ATOMIC_RELAXED)) {
        prof_gz_free(gz);
        prof_buf_free(&zbuf);
    } else {
        torn_gz = gz;
        torn_zbuf = zbuf;
    }
    gz = NULL;
    memset(&zbuf, 0, sizeof zbuf);
    in_write = 0;
    carry.len = 0;
}
