/* trace.c - stream Chrome Trace Event JSON.
 *
 * One event per line: the first line is "[{...}", each later line
 * ",{...}", and the file ends with "\n]\n". Lines are formatted into a
 * buffer and written in large write(2) calls.
 *
 * A process killed in the middle of a write(2) (SIGKILL, the OOM killer)
 * leaves a short write, and Linux cuts a write to a file only between the
 * pages it copies: at a file offset that is a multiple of 4096. So no event
 * of up to 4096 bytes is placed across such an offset: the event before it
 * is padded with spaces (JSON whitespace) to the boundary. Whatever the
 * process dies of, the file then ends at an event, and appending "]" makes
 * it valid JSON (Perfetto and speedscope accept it as it is). Only an event
 * longer than a page (a name of kilobytes) can still be cut. The file is opened with
 * O_NOFOLLOW|O_CLOEXEC and mode 0644 (before umask): a symlink planted at
 * the path is refused, never followed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "clock.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "stats.h"
#include "trace.h"

#define FLUSH_AT (256 * 1024)
#define PAGE 4096u
#define GPU_TID_BASE 1000000000u
#define MAX_STREAMS 256

enum { OFF, ON, CAPPED };

static int state = OFF;
static int fd = -1;
static int signal_fd = -1;       /* fd as the signal path may see it (atomic) */
static char path[4096];
static struct prof_buf buf;
static uint64_t written;         /* bytes in the file */
static uint64_t nevents;
static uint64_t streams[MAX_STREAMS];
static int stream_device[MAX_STREAMS];
static unsigned nstreams;
static uint64_t last_dropped;
static size_t open_event = SIZE_MAX;   /* buffer offset of the event not yet placed */

int prof_trace_active(void)
{
    return state == ON;
}

/* Place the last event so that it does not straddle a page boundary of the
 * file (see the top of this file). */
static void event_place(void)
{
    static const char spaces[64] = "                                                               ";
    size_t at = open_event, len, pad;
    uint64_t pos;

    open_event = SIZE_MAX;
    if (at == SIZE_MAX || buf.failed || at > buf.len)
        return;
    len = buf.len - at;
    pos = written + at;
    if (pos % PAGE == 0 || pos / PAGE == (pos + len - 1) / PAGE || len > PAGE)
        return;
    pad = PAGE - pos % PAGE;
    for (size_t n = pad; n > 0;) {     /* grow by pad bytes */
        size_t k = n < sizeof spaces ? n : sizeof spaces;
        prof_buf_put(&buf, spaces, k);
        n -= k;
    }
    if (buf.failed)
        return;
    memmove(buf.data + at + pad, buf.data + at, len);
    memset(buf.data + at, ' ', pad);
}

static void event_start(void)
{
    event_place();
    open_event = buf.len;
    prof_buf_puts(&buf, nevents++ ? "\n,{" : "[{");
}

static void common(const char *ph, uint32_t tid)
{
    prof_buf_puts(&buf, "\"ph\":\"");
    prof_buf_puts(&buf, ph);
    prof_buf_puts(&buf, "\",\"pid\":");
    prof_buf_u64(&buf, (uint64_t)prof_process_get()->pid);
    prof_buf_puts(&buf, ",\"tid\":");
    prof_buf_u64(&buf, tid);
}

/* Application threads write here too (prof_flush drains on the caller's
 * thread): a FIFO whose reader has gone must give EPIPE, not SIGPIPE, so
 * SIGPIPE is blocked while writing and the one we caused is consumed. */
static void write_all(const char *p, size_t n)
{
    sigset_t pipe_set, old;
    int err = 0;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            prof_log("trace %s: write failed (%s); tracing is off from here, "
                     "the summary goes on", path, w < 0 ? strerror(err) : "short write");
            close(fd);
            fd = -1;
            __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
            state = OFF;
            break;
        }
        p += w;
        n -= (size_t)w;
        written += (uint64_t)w;
    }
    if (err == EPIPE && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void prof_trace_flush(void)
{
    event_place();
    if (fd < 0)
        return;
    /* Checked before the length: a buffer whose first allocation failed
     * is empty and failed. */
    if (buf.failed) {
        prof_log("trace %s: out of memory; tracing is off from here", path);
        state = CAPPED;
        buf.failed = 0;
        buf.len = 0;
        return;
    }
    if (buf.len == 0)
        return;
    write_all(buf.data, buf.len);
    buf.len = 0;
}

static void metadata(const char *what, uint32_t tid, const char *key, const char *svalue,
                     long ivalue)
{
    event_start();
    prof_buf_puts(&buf, "\"name\":\"");
    prof_buf_puts(&buf, what);
    prof_buf_puts(&buf, "\",");
    common("M", tid);
    prof_buf_printf(&buf, ",\"args\":{\"%s\":", key);
    if (svalue != NULL)
        prof_buf_json_string(&buf, svalue);
    else
        prof_buf_printf(&buf, "%ld", ivalue);
    prof_buf_puts(&buf, "}}");
}

static void header(void)
{
    const struct prof_process *p = prof_process_get();
    char name[128];

    if (p->rank >= 0)
        snprintf(name, sizeof name, "%s (rank %d)", p->program, p->rank);
    else
        snprintf(name, sizeof name, "%s", p->program);
    event_start();
    prof_buf_puts(&buf, "\"name\":\"process_name\",");
    common("M", (uint32_t)p->pid);
    prof_buf_puts(&buf, ",\"args\":{\"name\":");
    prof_buf_json_string(&buf, name);
    prof_buf_printf(&buf, ",\"prof\":{\"format\":1,\"version\":\"%s\",\"rank\":", PROF_VERSION_STRING);
    if (p->rank >= 0)
        prof_buf_printf(&buf, "%d", p->rank);
    else
        prof_buf_puts(&buf, "null");
    prof_buf_puts(&buf, ",\"host\":");
    prof_buf_json_string(&buf, p->host);
    prof_buf_printf(&buf, ",\"pid\":%d,\"realtime_minus_monotonic_ns\":%lld}}}", p->pid,
                    (long long)prof_clock_realtime_offset_ns());
    metadata("process_sort_index", (uint32_t)p->pid, "sort_index", NULL,
             p->rank >= 0 ? p->rank : 0);
}

int prof_trace_open(void)
{
    const struct prof_config *cfg = prof_config_get();
    int err;

    if (cfg->trace_path == NULL || state != OFF || fd >= 0)
        return 0;
    if (prof_path_expand(cfg->trace_path, path, sizeof path) != 0) {
        prof_log("PROF_TRACE: path too long; tracing is off");
        return -ENAMETOOLONG;
    }
    /* O_NONBLOCK for the open only: a FIFO with no reader fails (ENXIO)
     * instead of hanging the thread that recorded the first zone. */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) {
        err = errno;
        prof_log("trace %s: cannot open (%s)%s; tracing is off, the summary goes on", path,
                 strerror(err), err == ELOOP ? ": the path is a symbolic link, which prof "
                 "does not follow" : "");
        return -err;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    state = ON;
    written = nevents = 0;
    nstreams = 0;
    last_dropped = 0;
    header();
    prof_trace_flush();
    /* Only now, with the header out, may the signal path close the file. */
    if (fd >= 0)
        __atomic_store_n(&signal_fd, fd, __ATOMIC_RELAXED);
    return 0;
}

static void thread_meta(struct prof_thread *t)
{
    const char *name = __atomic_load_n(&t->name, __ATOMIC_RELAXED);
    char fallback[32];

    if (t->traced_name != NULL && t->traced_name == name)
        return;
    if (name == NULL) {
        if (t->traced_name != NULL)
            return;
        snprintf(fallback, sizeof fallback, t->index == 0 ? "main" : "thread %u", t->index);
        metadata("thread_name", t->tid, "name", fallback, 0);
        metadata("thread_sort_index", t->tid, "sort_index", NULL, (long)t->index);
        t->traced_name = prof_intern(fallback);
        return;
    }
    metadata("thread_name", t->tid, "name", name, 0);
    if (t->traced_name == NULL)
        metadata("thread_sort_index", t->tid, "sort_index", NULL, (long)t->index);
    t->traced_name = name;
}

static int room(void)
{
    const struct prof_config *cfg = prof_config_get();

    if (state != ON)
        return 0;
    if (cfg->trace_max_bytes && written + buf.len >= cfg->trace_max_bytes) {
        uint64_t mb = cfg->trace_max_bytes / (1024 * 1024);
        event_start();
        prof_buf_printf(&buf, "\"name\":\"prof: trace size limit reached (%llu MB); later "
                        "events not recorded\",\"cat\":\"prof\",", (unsigned long long)mb);
        common("i", (uint32_t)prof_process_get()->pid);
        prof_buf_puts(&buf, ",\"s\":\"t\",\"ts\":");
        prof_buf_us(&buf, prof_clock_now_ns());
        prof_buf_puts(&buf, "}");
        prof_log("trace %s: size limit of %llu MB reached; later events are not recorded "
                 "(PROF_TRACE_MAX_MB)", path, (unsigned long long)mb);
        state = CAPPED;
        prof_trace_flush();
        return 0;
    }
    if (buf.len >= FLUSH_AT)
        prof_trace_flush();
    return state == ON;
}

static void name_field(struct prof_stage *s)
{
    if (s->json_name == NULL) {
        struct prof_buf tmp = {0};
        prof_buf_json_string(&tmp, s->name);
        s->json_name = tmp.failed ? NULL : tmp.data;
        if (tmp.failed)
            prof_buf_free(&tmp);
    }
    prof_buf_puts(&buf, "\"name\":");
    if (s->json_name != NULL)
        prof_buf_puts(&buf, s->json_name);
    else
        prof_buf_json_string(&buf, s->name);
}

/* Where a zone goes on its thread's track. Ticks become nanoseconds at the
 * clock rate of the moment a record is drained, and the collector re-fits
 * that rate as the run goes: a parent drained after a re-fit could start a
 * few nanoseconds after a child drained before it, or a zone begin a few
 * nanoseconds before its predecessor ended. Viewers draw such zones wrong
 * (or not at all), so each zone is moved, by those few nanoseconds, to
 * where the order of its ticks puts it: after everything written before it
 * that it does not contain, around everything it does contain (the zones
 * below it written since its parent last ended: records arrive in the
 * order their zones end). */
void prof_trace_place(struct prof_thread *t, uint32_t depth, uint64_t *start, uint64_t *end)
{
    uint32_t d = depth > PROF_MAX_DEPTH_ - 1 ? PROF_MAX_DEPTH_ - 1 : depth;
    uint64_t first = 0, floor = UINT64_MAX;

    for (uint32_t k = d + 1; k <= t->trace_depth; k++) {
        if (t->trace_first[k] == 0)
            continue;
        if (first == 0 || t->trace_first[k] < first)
            first = t->trace_first[k];
        if (t->trace_floor[k] < floor)
            floor = t->trace_floor[k];
        t->trace_first[k] = 0;
    }
    if (first == 0)
        floor = t->trace_end;   /* no children: after all that came before */
    if (*start < floor)
        *start = floor;
    if (first != 0 && *start > first)
        *start = first;
    if (*end < *start)
        *end = *start;
    if (*end < t->trace_end)
        *end = t->trace_end;
    if (t->trace_first[d] == 0) {
        t->trace_first[d] = *start;
        t->trace_floor[d] = floor;
    } else if (*start < t->trace_first[d]) {
        t->trace_first[d] = *start;
    }
    if (d > t->trace_depth)
        t->trace_depth = d;
    t->trace_end = *end;
}

void prof_trace_zone(struct prof_thread *t, struct prof_stage *s, uint64_t start_ns,
                     uint64_t dur_ns, uint32_t depth)
{
    uint64_t end_ns = start_ns + dur_ns;

    if (!room())
        return;
    prof_trace_place(t, depth, &start_ns, &end_ns);
    dur_ns = end_ns - start_ns;
    thread_meta(t);
    event_start();
    name_field(s);
    prof_buf_puts(&buf, ",\"cat\":\"cpu\",");
    common("X", t->tid);
    prof_buf_puts(&buf, ",\"ts\":");
    prof_buf_us(&buf, start_ns);
    prof_buf_puts(&buf, ",\"dur\":");
    prof_buf_us(&buf, dur_ns);
    prof_buf_puts(&buf, ",\"args\":{\"depth\":");
    prof_buf_u64(&buf, depth);
    prof_buf_puts(&buf, "}}");
}

static uint32_t gpu_track(int device, uint64_t stream)
{
    char name[64];
    unsigned i;

    for (i = 0; i < nstreams; i++)
        if (streams[i] == stream && stream_device[i] == device)
            return GPU_TID_BASE + i;
    if (nstreams == MAX_STREAMS)
        return GPU_TID_BASE + MAX_STREAMS;   /* one shared track for the rest */
    streams[nstreams] = stream;
    stream_device[nstreams] = device;
    snprintf(name, sizeof name, "GPU %d stream %u", device, nstreams);
    metadata("thread_name", GPU_TID_BASE + nstreams, "name", name, 0);
    metadata("thread_sort_index", GPU_TID_BASE + nstreams, "sort_index", NULL,
             100000 + (long)nstreams);
    return GPU_TID_BASE + nstreams++;
}

void prof_trace_gpu_zone(struct prof_stage *s, int device, uint64_t stream, uint64_t start_ns,
                         uint64_t end_ns)
{
    uint32_t tid;

    if (!room())
        return;
    tid = gpu_track(device, stream);
    event_start();
    name_field(s);
    prof_buf_puts(&buf, ",\"cat\":\"gpu\",");
    common("X", tid);
    prof_buf_puts(&buf, ",\"ts\":");
    prof_buf_us(&buf, start_ns);
    prof_buf_puts(&buf, ",\"dur\":");
    prof_buf_us(&buf, end_ns > start_ns ? end_ns - start_ns : 0);
    prof_buf_puts(&buf, ",\"args\":{\"depth\":0}}");
}

void prof_trace_counter(struct prof_thread *t, const char *name, uint64_t ts, double value)
{
    if (!room())
        return;
    event_start();
    prof_buf_puts(&buf, "\"name\":");
    prof_buf_json_string(&buf, name ? name : "(null)");
    prof_buf_puts(&buf, ",");
    common("C", t ? t->tid : (uint32_t)prof_process_get()->pid);
    prof_buf_puts(&buf, ",\"ts\":");
    prof_buf_us(&buf, ts);
    prof_buf_puts(&buf, ",\"args\":{\"value\":");
    prof_buf_double(&buf, value);
    prof_buf_puts(&buf, "}}");
}

void prof_trace_instant(struct prof_thread *t, const char *name, const char *cat, uint64_t ts,
                        int64_t step)
{
    if (!room())
        return;
    thread_meta(t);
    event_start();
    prof_buf_puts(&buf, "\"name\":");
    prof_buf_json_string(&buf, name ? name : "(null)");
    prof_buf_printf(&buf, ",\"cat\":\"%s\",", cat);
    common("i", t->tid);
    prof_buf_puts(&buf, ",\"s\":\"t\",\"ts\":");
    prof_buf_us(&buf, ts);
    if (step >= 0)
        prof_buf_printf(&buf, ",\"args\":{\"step\":%lld}", (long long)step);
    prof_buf_puts(&buf, "}");
}

void prof_trace_dropped(uint64_t ts, uint64_t total)
{
    if (total == last_dropped)
        return;
    last_dropped = total;
    prof_trace_counter(NULL, "prof.dropped", ts, (double)total);
}

void prof_trace_close(void)
{
    if (fd < 0)
        return;
    prof_trace_flush();
    /* Written directly, not through the buffer, so that the file is closed
     * even when memory is short; "[" first when not even the header got
     * out. */
    if (fd >= 0) {
        const char *end = written == 0 ? "[\n]\n" : "\n]\n";
        write_all(end, strlen(end));
    }
    if (fd >= 0 && close(fd) != 0)
        prof_log("trace %s: close failed (%s)", path, strerror(errno));
    fd = -1;
    __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
    state = OFF;
    prof_buf_free(&buf);
}

void prof_trace_close_from_signal(void)
{
    int f = __atomic_load_n(&signal_fd, __ATOMIC_RELAXED);

    /* Only whole lines were ever written, so the file ends at an event. */
    if (f >= 0 && write(f, "\n]\n", 3) < 0) {
        /* Nothing more a signal handler may do. */
    }
}

void prof_trace_atfork_child(void)
{
    const struct prof_config *cfg = prof_config_get();

    /* The parent's buffer and descriptor stay the parent's. */
    if (fd >= 0)
        close(fd);
    fd = -1;
    __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
    state = OFF;
    buf.len = 0;
    open_event = SIZE_MAX;
    buf.failed = 0;
    if (cfg->trace_path != NULL && prof_path_has_pid(cfg->trace_path))
        prof_trace_open();
}
