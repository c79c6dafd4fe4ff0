/* trace.c - stream Chrome Trace Event JSON.
 *
 * One event per line: the first line is "[{...}", each later line
 * ",{...}", and the file ends with "\n]\n". Lines are formatted into a
 * buffer (integers and names without printf: names are escaped once per
 * stage) and written in large write(2) calls.
 *
 * Time: ts is microseconds (three decimals) since an origin, the
 * CLOCK_MONOTONIC time recorded in the first event (args.prof.ts_origin_ns;
 * forked children keep their parent's). Small numbers keep the viewers'
 * double arithmetic well below a nanosecond of error, and each zone is
 * placed so that its end as a viewer computes it (ts + dur, two parsed
 * doubles added) nests as its ticks do (prof_trace_place).
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
 * the path is refused, never followed.
 *
 * A path ending in ".gz" gets a gzip stream (gz.c; zlib loaded at run
 * time, plain JSON to the name without ".gz" when it is missing). Each
 * batch is compressed on the writing side and ends at a sync point, so the
 * file always decompresses to whole events up to the last batch written;
 * a kill inside a batch's write(2) (microseconds per batch) can cut that
 * batch's last event. Padding does not apply to the compressed stream.
 *
 * Ending the file: exactly one path writes the end. A state word goes
 * OPEN -> WRITING -> OPEN around each write and OPEN -> ENDED when the
 * close path or the signal path (a second SIGINT/SIGTERM, in a handler)
 * claims it with compare-and-swap; whoever loses writes nothing. The
 * signal path writes prepared bytes with one write(2): "\n]\n", or for gz
 * a final stored block holding "\n]\n" plus the gzip trailer, computed
 * after every batch (no zlib call in the handler). A signal that arrives
 * while a batch is being written finds WRITING and leaves the file as a
 * killed process does. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "clock.h"
#include "env.h"
#include "fdio.h"
#include "gz.h"
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
#define GZ_LEVEL 6
#define END_TEXT "\n]\n"

enum { OFF, ON, CAPPED };
enum { W_CLOSED, W_OPEN, W_WRITING, W_ENDED };   /* wstate: who may write */

static int state = OFF;
static int fd = -1;
static int wstate = W_CLOSED;    /* atomic: shared with the signal path */
static int signal_fd = -1;       /* fd as the signal path may see it (atomic) */
static unsigned char end_bytes[64];   /* what the signal path writes; set before OPEN */
static size_t end_len;
static char path[4096];
static struct prof_buf buf;
static struct prof_gz *gz;       /* non-NULL: the file is a gzip stream */
static struct prof_buf zbuf;     /* compressed output of one batch */
static uint64_t written;         /* bytes in the file (compressed, for gz) */
static uint64_t raw_written;     /* bytes of JSON given to the file */
static uint64_t nevents;
static uint64_t origin_ns;       /* CLOCK_MONOTONIC ns of ts 0 */
static char pid_text[24];        /* ",\"pid\":<pid>,\"tid\":" */
static size_t pid_len;
static uint64_t streams[MAX_STREAMS];
static int stream_device[MAX_STREAMS];
static unsigned nstreams;
static uint64_t last_dropped;
static uint64_t nonfinite;       /* counter samples not written: NaN or Inf */
static size_t open_event = SIZE_MAX;   /* buffer offset of the event not yet placed */
static int zlib_note;

/* ts as written: ns since the origin, never 0 (viewers treat 0 as unset). */
static uint64_t rel(uint64_t ns)
{
    return ns > origin_ns ? ns - origin_ns : 1;
}

/* The end of a zone as a viewer computes it from the text: ts and dur each
 * parsed to the nearest double (the text is the exact value ns/1000, so
 * that is the correctly rounded quotient), then added. */
static double view_end(uint64_t rel_start, uint64_t dur)
{
    return (double)rel_start / 1000.0 + (double)dur / 1000.0;
}

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
    if (at == SIZE_MAX || buf.failed || at > buf.len || gz != NULL)
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
    prof_buf_put(&buf, "\"", 1);
    prof_buf_put(&buf, pid_text, pid_len);
    prof_buf_u64(&buf, tid);
}

/* Application threads write here too (prof_flush drains on the caller's
 * thread): a FIFO whose reader has gone must give EPIPE, not SIGPIPE, so
 * SIGPIPE is blocked while writing and the one we caused is consumed.
 * Called with wstate WRITING or ENDED held by the caller. */
static void write_all(const char *p, size_t n)
{
    size_t done;
    int err = prof_write_full(fd, p, n, &done);

    written += (uint64_t)done;
    if (err != 0) {
        prof_log("trace %s: write failed (%s); tracing is off from here, "
                 "the summary goes on", path, strerror(-err));
        __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
        __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELEASE);
        close(fd);
        fd = -1;
        state = OFF;
    }
}

/* Write one batch of JSON text (compressed for gz), holding WRITING. */
static void write_batch(const char *p, size_t n)
{
    int expect = W_OPEN;

    /* Acquire/release pair with the signal path's claim: it either ended
     * the file before this batch (nothing more is written) or sees OPEN
     * again only with end_bytes matching the file. */
    if (!__atomic_compare_exchange_n(&wstate, &expect, W_WRITING, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return;
    raw_written += n;
    if (gz != NULL) {
        zbuf.len = 0;
        if (prof_gz_write(gz, p, n, 0, &zbuf) != 0) {
            prof_log("trace %s: compression failed (out of memory?); tracing is off from "
                     "here", path);
            zbuf.failed = 0;
            state = CAPPED;
        } else {
            write_all(zbuf.data, zbuf.len);
            end_len = prof_gz_end_bytes(gz, END_TEXT, 3, end_bytes);
        }
    } else {
        write_all(p, n);
    }
    if (fd >= 0)
        __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
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
        if (written == 0) {
            /* Not even the opening bracket is out: write it directly (no
             * memory needed), so the end below makes "[]" and the file
             * stays valid JSON. A gz file with nothing in it is removed. */
            int expect = W_OPEN;

            if (gz != NULL) {
                if (__atomic_compare_exchange_n(&wstate, &expect, W_CLOSED, 0, __ATOMIC_ACQUIRE,
                                                __ATOMIC_RELAXED)) {
                    __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
                    close(fd);
                    fd = -1;
                    unlink(path);
                }
            } else if (__atomic_compare_exchange_n(&wstate, &expect, W_WRITING, 0,
                                                   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                write_all("[", 1);
                if (fd >= 0)
                    __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
            }
        }
        return;
    }
    if (buf.len == 0)
        return;
    write_batch(buf.data, buf.len);
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
    prof_buf_printf(&buf, ",\"pid\":%d,\"realtime_minus_monotonic_ns\":%lld,\"ts_origin_ns\":",
                    p->pid, (long long)prof_clock_realtime_offset_ns());
    prof_buf_u64(&buf, origin_ns);
    prof_buf_puts(&buf, "}}}");
    metadata("process_sort_index", (uint32_t)p->pid, "sort_index", NULL,
             p->rank >= 0 ? p->rank : 0);
}

static int ends_with_gz(const char *s)
{
    size_t n = strlen(s);

    return n > 3 && strcmp(s + n - 3, ".gz") == 0;
}

int prof_trace_open(void)
{
    const struct prof_config *cfg = prof_config_get();
    const char *why;
    size_t n;
    int err;

    if (cfg->trace_path == NULL || state != OFF || fd >= 0)
        return 0;
    if (prof_path_expand(cfg->trace_path, path, sizeof path) != 0) {
        prof_log("PROF_TRACE: path too long; tracing is off");
        return -ENAMETOOLONG;
    }
    if (ends_with_gz(path)) {
        if (prof_gz_load(&why) == 0)
            gz = prof_gz_new(GZ_LEVEL);
        else
            why = why != NULL ? why : "zlib not found";
        if (gz == NULL) {
            path[strlen(path) - 3] = '\0';
            prof_log_once(&zlib_note, "trace %s.gz: no zlib (%s); writing plain JSON to %s",
                          path, why, path);
        }
    }
    /* O_NONBLOCK for the open only: a FIFO with no reader fails (ENXIO)
     * instead of hanging the thread that recorded the first zone. */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) {
        err = errno;
        prof_log("trace %s: cannot open (%s)%s; tracing is off, the summary goes on", path,
                 strerror(err), err == ELOOP ? ": the path is a symbolic link, which prof "
                 "does not follow" : "");
        prof_gz_free(gz);
        gz = NULL;
        return -err;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    state = ON;
    written = raw_written = nevents = nonfinite = 0;
    nstreams = 0;
    last_dropped = 0;
    /* A forked child keeps its parent's origin: their traces line up. */
    if (origin_ns == 0) {
        uint64_t now = prof_clock_now_ns();
        /* A whole second, at least one before now: ts stays > 0 for
         * anything recorded around the start. */
        origin_ns = now >= 2000000000u ? (now / 1000000000u - 1) * 1000000000u : 0;
    }
    n = (size_t)snprintf(pid_text, sizeof pid_text, ",\"pid\":%d,\"tid\":",
                         (int)prof_process_get()->pid);
    pid_len = n < sizeof pid_text ? n : sizeof pid_text - 1;
    memcpy(end_bytes, END_TEXT, 3);
    end_len = 3;
    __atomic_store_n(&wstate, W_OPEN, __ATOMIC_RELEASE);
    /* The header is written at once: a process killed right after its
     * first zone still leaves "[" and the metadata. */
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
    /* The process's main thread is the one whose tid is the pid, whichever
     * thread recorded first; it sorts first. */
    int is_main = t->tid == (uint32_t)prof_process_get()->pid;
    long sort = is_main ? 0 : (long)t->index + 1;
    char fallback[32];

    if (t->traced_name != NULL && t->traced_name == name)
        return;
    if (name == NULL) {
        if (t->traced_name != NULL)
            return;
        if (is_main)
            snprintf(fallback, sizeof fallback, "main");
        else
            snprintf(fallback, sizeof fallback, "thread %u", t->index);
        metadata("thread_name", t->tid, "name", fallback, 0);
        metadata("thread_sort_index", t->tid, "sort_index", NULL, sort);
        t->traced_name = prof_intern(fallback);
        return;
    }
    metadata("thread_name", t->tid, "name", name, 0);
    if (t->traced_name == NULL)
        metadata("thread_sort_index", t->tid, "sort_index", NULL, sort);
    t->traced_name = name;
}

static int room(void)
{
    const struct prof_config *cfg = prof_config_get();
    uint64_t pending = buf.len;

    if (state != ON)
        return 0;
    /* The limit counts bytes on disk: what is buffered counts at the
     * compression ratio so far. */
    if (gz != NULL)
        pending = raw_written ? (uint64_t)((double)buf.len * (double)written /
                                           (double)raw_written) : buf.len / 8;
    if (cfg->trace_max_bytes && written + pending >= cfg->trace_max_bytes) {
        uint64_t mb = cfg->trace_max_bytes / (1024 * 1024);
        event_start();
        prof_buf_printf(&buf, "\"name\":\"prof: trace size limit reached (%llu MB); later "
                        "events not recorded\",\"cat\":\"prof\",", (unsigned long long)mb);
        common("i", (uint32_t)prof_process_get()->pid);
        prof_buf_puts(&buf, ",\"s\":\"t\",\"ts\":");
        prof_buf_us(&buf, rel(prof_clock_now_ns()));
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

/* The stage's name escaped once, kept in the stage. */
static const char *json_name(struct prof_stage *s)
{
    if (s->json_name == NULL) {
        struct prof_buf tmp = {0};
        prof_buf_json_string(&tmp, s->name);
        s->json_name = tmp.failed ? NULL : tmp.data;
        if (tmp.failed)
            prof_buf_free(&tmp);
    }
    return s->json_name;
}

#define LIT(q, s) (memcpy((q), (s), sizeof(s) - 1), (q) += sizeof(s) - 1)

/* One X event, formatted in place: the hot loop of tracing. */
static void zone_event(struct prof_stage *s, const char *cat_ph, size_t cat_len, uint32_t tid,
                       uint64_t rel_start, uint64_t dur)
{
    const char *name = json_name(s);
    size_t nlen;
    char *p, *q;

    if (name == NULL) {              /* out of memory: the slow way */
        event_start();
        prof_buf_puts(&buf, "\"name\":");
        prof_buf_json_string(&buf, s->name);
        name = "";
    } else {
        event_start();
        prof_buf_puts(&buf, "\"name\":");
    }
    nlen = strlen(name);
    if ((p = prof_buf_room(&buf, nlen + cat_len + pid_len + 80)) == NULL)
        return;
    q = p;
    memcpy(q, name, nlen);
    q += nlen;
    memcpy(q, cat_ph, cat_len);
    q += cat_len;
    memcpy(q, pid_text, pid_len);
    q += pid_len;
    q += prof_fmt_u64(q, tid);
    LIT(q, ",\"ts\":");
    q += prof_fmt_us(q, rel_start);
    LIT(q, ",\"dur\":");
    q += prof_fmt_us(q, dur);
    *q++ = '}';
    prof_buf_commit(&buf, (size_t)(q - p));
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
 * order their zones end).
 *
 * Then the same holds as viewers compute it: a viewer adds ts and dur as
 * doubles, and a child that ends at its parent's nanosecond can come out
 * one ulp later than the parent (Chrome leaves it undrawn, speedscope
 * complains). So a zone's end is pushed a nanosecond later when its viewer
 * end would fall before the last one written (t->trace_end_v; a parent
 * ending at its last child's nanosecond, and so on up, a nanosecond per
 * level at most), and what follows a zone may not start before the first
 * nanosecond that a viewer reads as at or after its end (the floor: its
 * end, or one more). One nanosecond is thousands of
 * ulps at the magnitudes written (ts from the origin: below 2^40 us, about
 * 12 days of run, an ulp is under 0.25 ns). */
void prof_trace_place(struct prof_thread *t, uint32_t depth, uint64_t *start, uint64_t *end)
{
    uint32_t d = depth > PROF_MAX_DEPTH_ - 1 ? PROF_MAX_DEPTH_ - 1 : depth;
    uint64_t first = 0, floor = UINT64_MAX;
    double v;

    for (uint32_t k = d + 1; k <= t->trace_depth; k++) {
        if (t->trace_first[k] == 0)
            continue;
        if (first == 0 || t->trace_first[k] < first)
            first = t->trace_first[k];
        if (t->trace_floor[k] < floor)
            floor = t->trace_floor[k];
        t->trace_first[k] = 0;
    }
    if (first == 0)         /* no children: after all that came before */
        floor = t->trace_end + ((double)rel(t->trace_end) / 1000.0 < t->trace_end_v);
    if (*start < floor)
        *start = floor;
    if (first != 0 && *start > first)
        *start = first;
    if (*end < *start)
        *end = *start;
    if (*end < t->trace_end)
        *end = t->trace_end;
    v = view_end(rel(*start), *end - *start);
    for (int i = 0; i < 4 && v < t->trace_end_v; i++)
        v = view_end(rel(*start), ++*end - *start);
    if (t->trace_first[d] == 0) {
        t->trace_first[d] = *start;
        t->trace_floor[d] = floor;
    } else if (*start < t->trace_first[d]) {
        t->trace_first[d] = *start;
    }
    if (d > t->trace_depth)
        t->trace_depth = d;
    t->trace_end = *end;
    t->trace_end_v = v;
}

void prof_trace_zone(struct prof_thread *t, struct prof_stage *s, uint64_t start_ns,
                     uint64_t dur_ns, uint32_t depth)
{
    static const char cpu[] = ",\"ph\":\"X\",\"cat\":\"cpu\"";
    uint64_t end_ns = start_ns + dur_ns;

    if (!room())
        return;
    prof_trace_place(t, depth, &start_ns, &end_ns);
    thread_meta(t);
    zone_event(s, cpu, sizeof cpu - 1, t->tid, rel(start_ns), end_ns - start_ns);
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
    static const char gpu[] = ",\"ph\":\"X\",\"cat\":\"gpu\"";
    uint32_t tid;

    if (!room())
        return;
    tid = gpu_track(device, stream);
    zone_event(s, gpu, sizeof gpu - 1, tid, rel(start_ns),
               end_ns > start_ns ? end_ns - start_ns : 0);
}

void prof_trace_counter(struct prof_thread *t, const char *name, uint64_t ts, double value)
{
    /* JSON has no NaN or Inf, and a null sample breaks the viewers'
     * counter tracks: such samples are left out (and counted). */
    if (!isfinite(value)) {
        nonfinite++;
        return;
    }
    if (!room())
        return;
    event_start();
    prof_buf_puts(&buf, "\"name\":");
    prof_buf_json_string(&buf, name ? name : "(null)");
    prof_buf_puts(&buf, ",");
    common("C", t ? t->tid : (uint32_t)prof_process_get()->pid);
    prof_buf_puts(&buf, ",\"ts\":");
    prof_buf_us(&buf, rel(ts));
    prof_buf_puts(&buf, ",\"args\":{\"value\":");
    prof_buf_double(&buf, value);
    prof_buf_puts(&buf, "}}");
}

uint64_t prof_trace_nonfinite(void)
{
    return nonfinite;
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
    prof_buf_us(&buf, rel(ts));
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
    int expect = W_OPEN;

    if (fd < 0)
        return;
    prof_trace_flush();
    /* The end is written by whichever of this path and the signal path
     * claims it first; directly, not through the buffer, so that the file
     * is closed even when memory is short. */
    if (fd >= 0 && __atomic_compare_exchange_n(&wstate, &expect, W_ENDED, 0, __ATOMIC_ACQUIRE,
                                               __ATOMIC_RELAXED)) {
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
        prof_log("trace %s: close failed (%s)", path, strerror(errno));
    fd = -1;
    __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELEASE);
    state = OFF;
    prof_buf_free(&buf);
    prof_buf_free(&zbuf);
    prof_gz_free(gz);
    gz = NULL;
}

void prof_trace_close_from_signal(void)
{
    int expect = W_OPEN;
    int f = __atomic_load_n(&signal_fd, __ATOMIC_RELAXED);

    /* Only whole batches were ever written, so the file ends at an event
     * (and for gz at a sync point, where end_bytes continue it). */
    if (f >= 0 && __atomic_compare_exchange_n(&wstate, &expect, W_ENDED, 0, __ATOMIC_ACQUIRE,
                                              __ATOMIC_RELAXED) &&
        write(f, end_bytes, end_len) < 0) {
        /* Nothing more a signal handler may do. */
    }
}

void prof_trace_atfork_child(void)
{
    const struct prof_config *cfg = prof_config_get();

    /* The parent's buffer, stream and descriptor stay the parent's. */
    __atomic_store_n(&signal_fd, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&wstate, W_CLOSED, __ATOMIC_RELAXED);
    if (fd >= 0)
        close(fd);
    fd = -1;
    /* Opened on the child's first record (prof_trace_open from the
     * runtime's fork setup), and only with its own %p name: a child that
     * execs leaves no file. CAPPED keeps a child without %p off for good. */
    state = cfg->trace_path != NULL && prof_path_has_pid(cfg->trace_path) ? OFF : CAPPED;
    buf.len = 0;
    open_event = SIZE_MAX;
    buf.failed = 0;
    zbuf.len = 0;
    zbuf.failed = 0;
    prof_gz_free(gz);
    gz = NULL;
}
