/* trace_out.c - queue, compress and write the trace's batches (see
 * trace_out.h for who calls what, trace.c for the file's layout).
 *
 * Ending the file: exactly one path writes the end. A state word goes
 * OPEN -> WRITING -> OPEN around each batch and OPEN -> ENDED when the
 * close path or the signal path (a second SIGINT/SIGTERM, in a handler)
 * claims it with compare-and-swap; whoever loses writes nothing. The
 * signal path writes prepared bytes with one write(2): "\n]\n", or for gz
 * a final stored block holding "\n]\n" plus the gzip trailer, computed
 * after every batch (no zlib call in the handler). A signal that arrives
 * while another thread writes a batch (WRITING) or the end (ENDED by the
 * close path) waits for it, half a second at most, and then ends
 * the file or finds it closed: the trace is closed whichever of the two
 * signals of a supervisor lands first (before, a second signal during the
 * final drain left a plain file without its "]" one time in three, a gzip
 * stream without its end three times in four). A signal on the writing
 * thread itself cannot wait, and leaves the file as a killed process does. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include "runtime.h"
#include "trace_out.h"
#include "writer.h"

/* zlib's fastest level: on the collector, level 6 compressed 2.0 M trace
 * events a second and level 1 4.7 M, for files 25% larger (the demo: 9.0x
 * and 7.1x smaller than plain JSON; docs/TRACE.md). */
#define GZ_LEVEL 1
#define END_TEXT "\n]\n"
/* Queued JSON past which the collector's batches are dropped: 256
 * batches, a quarter of a second of the collector's formatting at full
 * speed. A 4 MB bound dropped events on a loaded 2-core machine with a
 * disk that was only late (trace_valid's final drain), not stuck. */
#define QUEUE_MAX (64u << 20)
#define PAGE 4096u
/* Written batches kept for their memory: as many as the queue holds, so a
 * steady run allocates none (a fresh 256 KB buffer is a fresh mapping,
 * page faults and all). */
#define SPARES_MAX 16

enum { W_CLOSED, W_OPEN, W_WRITING, W_ENDED };   /* wstate: who may write */

struct batch {
    struct batch *next;
    struct prof_buf text;
    uint64_t text_at;            /* JSON offset of the batch's first byte, as
                                    the formatter counted (dropped text in) */
    uint64_t dropped_events;     /* events dropped just before this batch */
};

/* Owned by the writer (write_lock held). */
/* The threads that must never wait on the trace's descriptor: the
 * collector, and a summary handler on any thread (as collector.c's
 * prof_collector_is_self, which this floor does not call). */
static int on_collector(void)
{
    return prof_rt_on_collector() || prof_writer_in_handler();
}

static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static int fd = -1;
static struct prof_gz *gz;       /* non-NULL: the file is a gzip stream */
static struct prof_buf zbuf;     /* compressed output of one batch */
static char path[4096];
static int in_write;             /* a batch is being written (seen by a
                                    forked child: the stream may be torn) */
static struct batch *writing;    /* that batch, out of the queue meanwhile */
/* A forked child's copy of a stream its parent was writing: kept where
 * leak checkers see it, never used. */
static struct prof_gz *torn_gz __attribute__((used));
static struct prof_buf torn_zbuf __attribute__((used));

/* Shared with the signal path. */
static int wstate = W_CLOSED;
static int writer_tid;           /* who holds WRITING, or ENDED for the close */
static int ended_by_signal;
static int signal_fd = -1;       /* fd as the signal path may see it */
static pid_t fd_pid;             /* the process that opened fd: no other writes to it */
static unsigned char end_bytes[64];   /* what the signal path writes */
static size_t end_len;

/* The queue (queue_lock held). */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct batch *head, **tail = &head;
static struct batch *spare;      /* written batches kept for their memory */
static unsigned nspare;
static size_t queued;            /* JSON bytes in the queue */
static uint64_t text_total;      /* JSON bytes given to the queue, dropped too */
static uint64_t drop_unsaid;     /* events dropped since the last batch queued */
static uint64_t drop_total;      /* events dropped since the file was opened */
static int end_wanted;           /* prof_trace_out_close: write the end */
static int abandon_wanted;       /* prof_trace_out_abandon */
static uint64_t origin_ns;       /* the trace's ts 0 (prof_trace_out_origin) */
static uint64_t queued_end;      /* JSON offset of the end of the last batch
                                    queued: what a flush waits for */
static uint64_t text_done;       /* JSON offset the writer has gone past
                                    (batches written, or not, the file failed) */
static struct prof_buf carry;    /* the opening's bytes the pipe did not take
                                    at open: the writer writes them first */

/* The trace's path as every message shows it: made from PROF_TRACE. */
static const char *path_said(char q[PROF_LOG_VALUE_SIZE], const char *p)
{
    return prof_log_value(q, PROF_LOG_VALUE_SIZE, "PROF_TRACE", p);
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

static int trace_service(void);

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

int prof_trace_out_open(char *p, struct prof_buf *opening)
{
    static int zlib_note;
    char q[PROF_LOG_VALUE_SIZE];
    const char *why, *data;
    size_t len;
    int err, left;

    pthread_mutex_lock(&write_lock);
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
    pthread_mutex_lock(&queue_lock);
    text_total = queued_end = text_done = opening->len;
    drop_unsaid = drop_total = 0;
    end_wanted = abandon_wanted = 0;
    pthread_mutex_unlock(&queue_lock);
    opening->len = 0;
    /* Only once the opening is out may the signal path write the end. */
    left = carry.len != 0;
    if (!left)
        __atomic_store_n(&signal_fd, fd, __ATOMIC_RELAXED);
    __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&write_lock);
    if (left)
        prof_writer_kick(trace_service);
    return 0;
fail:
    prof_buf_free(&zbuf);
    prof_gz_free(gz);
    gz = NULL;
    pthread_mutex_unlock(&write_lock);
    return err;
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

static void trace_abandon(void);
static void trace_end(void);

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

void prof_trace_out_origin(uint64_t ns)
{
    __atomic_store_n(&origin_ns, ns, __ATOMIC_RELAXED);
}

/* Events in a batch of whole lines: each but the file's first begins on a
 * new line, and a newline inside an event is escaped. */
static uint64_t batch_events(const struct prof_buf *b)
{
    uint64_t n = 0;

    for (const char *p = b->data, *end = b->data + b->len;
         (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        n++;
    return n;
}

/* prof_writer_wait's test for a program's thread that found the queue
 * full: room for `need` more bytes (or the file is ending). */
static int queue_room(uint64_t need)
{
    int room;

    pthread_mutex_lock(&queue_lock);
    room = queued + need <= QUEUE_MAX || end_wanted;
    pthread_mutex_unlock(&queue_lock);
    return room;
}

void prof_trace_out_queue(struct prof_buf *b)
{
    struct batch *q;
    static int logged;
    uint64_t lost;
    int may_wait, waited = 0;

    if (b->len == 0)
        return;
    /* Only the collector (and the writer) must never wait: on another
     * thread (prof_flush, prof_shutdown's final drain) a full queue is
     * waited for, bounded (writer.h: a writer that is only late makes
     * room; a stuck one costs that thread the bound once), and then the
     * batch is dropped as the collector's would be. */
    may_wait = !on_collector() && !prof_writer_is_self();
    pthread_mutex_lock(&queue_lock);
    while (!end_wanted && queued + b->len > QUEUE_MAX && may_wait && !waited) {
        pthread_mutex_unlock(&queue_lock);
        prof_writer_kick(trace_service);
        prof_writer_wait(queue_room, b->len);
        waited = 1;
        pthread_mutex_lock(&queue_lock);
    }
    if (end_wanted || queued + b->len > QUEUE_MAX) {
        /* The writer is behind (a reader that does not read, a slow disk):
         * the batch is dropped, counted, and said in the file before the
         * next batch written (write_drop_note). Never the opening: it is
         * written at open. The text keeps its offset in the count, so
         * that the writer can put the file back on the formatter's page
         * placement. */
        lost = end_wanted ? 0 : batch_events(b);
        drop_unsaid += lost;
        drop_total += lost;
        text_total += b->len;
        pthread_mutex_unlock(&queue_lock);
        b->len = 0;
        b->failed = 0;
        if (lost != 0) {
            char shown[PROF_LOG_VALUE_SIZE];

            prof_log_once(&logged, "trace %s: its writer is behind (is the file's reader "
                          "stopped?); trace events are dropped while it is, and the trace says "
                          "how many", path_said(shown, path));
        }
        return;
    }
    if ((q = spare) != NULL) {
        spare = q->next;
        nspare--;
    }
    pthread_mutex_unlock(&queue_lock);
    if (q == NULL && (q = calloc(1, sizeof *q)) == NULL) {
        /* No memory for the queue: the batch is left out, as a full queue
         * leaves it. */
        pthread_mutex_lock(&queue_lock);
        drop_unsaid += batch_events(b);
        drop_total += batch_events(b);
        text_total += b->len;
        pthread_mutex_unlock(&queue_lock);
        b->len = 0;
        b->failed = 0;
        return;
    }
    {
        struct prof_buf empty = q->text;   /* the spare's room */
        q->text = *b;
        *b = empty;
        b->len = 0;
        b->failed = 0;
        if (b->data != NULL)
            b->data[0] = '\0';
    }
    q->next = NULL;
    pthread_mutex_lock(&queue_lock);
    q->text_at = text_total;
    text_total += q->text.len;
    queued_end = text_total;
    q->dropped_events = drop_unsaid;
    drop_unsaid = 0;
    *tail = q;
    tail = &q->next;
    queued += q->text.len;
    pthread_mutex_unlock(&queue_lock);
    prof_writer_kick(trace_service);
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

/* Write every queued batch, then the end or the abandon when asked: the
 * writer thread's service (writer.h), also run by prof_flush's thread
 * (prof_trace_out_write). */
static int trace_service(void)
{
    int any = 0, end, abandon;

    pthread_mutex_lock(&write_lock);
    if (carry.len != 0 && fd >= 0) {
        write_carry();
        any = 1;
    }
    for (;;) {
        struct batch *q;
        uint64_t past;

        /* The batch moves between the queue, `writing` and the spares
         * under the queue's lock, which fork takes: a forked child finds
         * it in one of them (and LeakSanitizer in none of the others). */
        pthread_mutex_lock(&queue_lock);
        if ((q = head) != NULL && (head = q->next) == NULL)
            tail = &head;
        if (q != NULL)
            queued -= q->text.len;
        writing = q;
        pthread_mutex_unlock(&queue_lock);
        if (q == NULL)
            break;
        any = 1;
        __atomic_store_n(&in_write, 1, __ATOMIC_RELAXED);
        if (fd >= 0 && q->dropped_events != 0)
            write_drop_note(q->dropped_events, q->text_at);
        if (fd >= 0)
            write_batch(q->text.data, q->text.len);
        __atomic_store_n(&in_write, 0, __ATOMIC_RELAXED);
        past = q->text_at + q->text.len;
        q->text.len = 0;
        pthread_mutex_lock(&queue_lock);
        if (past > text_done)
            text_done = past;
        if (nspare < SPARES_MAX) {
            q->next = spare;
            spare = q;
            nspare++;
        } else {
            prof_buf_free(&q->text);
            free(q);
        }
        writing = NULL;
        pthread_mutex_unlock(&queue_lock);
        /* Once text_done is moved: a prof_flush waiting for this batch
         * (prof_writer_wait) is woken only now, and sees it written. */
        prof_writer_progress();
    }
    pthread_mutex_lock(&queue_lock);
    end = end_wanted && head == NULL;
    abandon = abandon_wanted;
    abandon_wanted = 0;
    pthread_mutex_unlock(&queue_lock);
    if (abandon)
        trace_abandon();
    if (end) {
        trace_end();
        any = 1;
    }
    pthread_mutex_unlock(&write_lock);
    return any;
}

/* prof_writer_wait's test: the writer has gone past JSON offset target. */
static int trace_written(uint64_t target)
{
    int past;

    pthread_mutex_lock(&queue_lock);
    past = text_done >= target;
    pthread_mutex_unlock(&queue_lock);
    return past;
}

/* Wake the writer if anything is queued or asked for. */
static void trace_kick(void)
{
    int work;

    pthread_mutex_lock(&queue_lock);
    work = head != NULL || abandon_wanted || end_wanted;
    pthread_mutex_unlock(&queue_lock);
    if (work)
        prof_writer_kick(trace_service);
}

int prof_trace_out_write(void)
{
    uint64_t target;

    trace_kick();
    /* The collector hands the queue to the writer thread and goes on; a
     * program's thread (prof_flush: the trace holds its events when it
     * returns) waits for the writer to write what is queued now, bounded
     * (writer.h). */
    if (on_collector() || prof_writer_is_self())
        return 0;
    pthread_mutex_lock(&queue_lock);
    target = queued_end;
    pthread_mutex_unlock(&queue_lock);
    return prof_writer_wait(trace_written, target);
}

int prof_trace_out_pending(void)
{
    int any;

    pthread_mutex_lock(&queue_lock);
    any = head != NULL;
    pthread_mutex_unlock(&queue_lock);
    return any;
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
static void trace_abandon(void)
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

void prof_trace_out_abandon(void)
{
    pthread_mutex_lock(&queue_lock);
    abandon_wanted = 1;
    pthread_mutex_unlock(&queue_lock);
    /* Under the runtime lock, maybe on a program's thread: never waited
     * for. */
    trace_kick();
}

/* The file's end, after the last batch (write_lock held). */
static void trace_end(void)
{
    int expect = W_OPEN;
    uint64_t unsaid, total;
    struct batch *q;
    char shown[PROF_LOG_VALUE_SIZE];

    pthread_mutex_lock(&queue_lock);
    unsaid = drop_unsaid;
    total = drop_total;
    drop_unsaid = 0;
    pthread_mutex_unlock(&queue_lock);
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
    pthread_mutex_lock(&queue_lock);
    while ((q = spare) != NULL) {
        spare = q->next;
        prof_buf_free(&q->text);
        free(q);
    }
    nspare = 0;
    end_wanted = 0;
    drop_total = 0;
    /* Closed only now: until here, a new file must not be opened over
     * this one (prof_trace_out_is_open). */
    __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&queue_lock);
}

void prof_trace_out_close(void)
{
    pthread_mutex_lock(&queue_lock);
    end_wanted = 1;
    pthread_mutex_unlock(&queue_lock);
    /* Written by the writer thread; the run's end waits for it, bounded
     * (prof_summary_out_close). */
    prof_writer_kick(trace_service);
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

void prof_trace_out_atfork_prepare(void)
{
    pthread_mutex_lock(&queue_lock);
}

void prof_trace_out_atfork_parent(void)
{
    pthread_mutex_unlock(&queue_lock);
}

void prof_trace_out_atfork_child(void)
{
    /* The writer may have been in the middle of a batch in the parent:
     * its lock is made anew. */
    pthread_mutex_init(&write_lock, NULL);
    pthread_mutex_unlock(&queue_lock);
}

void prof_trace_out_forget(void)
{
    struct batch *q, *next;

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
    /* The parent's batches, the one its writer had in hand included, become
     * this process's spares, unwritten and untouched: freeing them would
     * copy every page (fork shares them). */
    if (writing != NULL) {
        writing->next = head;
        head = writing;
        writing = NULL;
    }
    for (q = head; q != NULL; q = next) {
        next = q->next;
        q->text.len = 0;
        q->next = spare;
        spare = q;
        nspare++;
    }
    head = NULL;
    tail = &head;
    queued = 0;
    text_total = queued_end = text_done = drop_unsaid = drop_total = 0;
    carry.len = 0;
    end_wanted = abandon_wanted = 0;
}
