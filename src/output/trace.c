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
 * Formatting happens here, on the thread that drains (the collector, or
 * an application thread in prof_flush), under the runtime lock; the text
 * goes to trace_out.c in batches, which the collector writes with the lock
 * released. Page placement counts the bytes queued, which is where the
 * file will be once they are written. */
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
#include "digits.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "loss.h"
#include "map.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "site.h"
#include "sink.h"
#include "stats.h"
#include "trace.h"
#include "trace_out.h"

#define FLUSH_AT (256 * 1024)
#define PAGE 4096u
#define GPU_TID_BASE 1000000000u
#define MAX_STREAMS 256

enum { OFF, ON, CAPPED };

static int state = OFF;
static char path[4096];
static struct prof_buf buf;
static uint64_t text_out;        /* JSON bytes handed to trace_out.c */
static uint64_t nevents;
static uint64_t origin_ns;       /* CLOCK_MONOTONIC ns of ts 0 */
static char pid_text[24];        /* ",\"pid\":<pid>,\"tid\":" */
static size_t pid_len;
static uint64_t gen;             /* trace files opened: the stages' text is per file */
static uint64_t streams[MAX_STREAMS];
static int stream_device[MAX_STREAMS];
static unsigned nstreams;
static uint64_t last_dropped;
static uint64_t nonfinite;       /* counter samples not written: NaN or Inf */
static size_t open_event = SIZE_MAX;   /* buffer offset of the event not yet placed */
static int pad_pages;            /* plain JSON: events kept off page boundaries */
/* Buffer length up to which room() says yes without looking: the next
 * look at the writer's failure and the size limit (every 4 KB). */
static size_t stop_at;
static size_t within_len;        /* buffer length at the last look within the size limit */

static int cap_look(void);

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

/* Move the event at buffer offset at, of len bytes, pad bytes on, with
 * spaces in front of it. */
static void __attribute__((noinline)) event_pad(size_t at, size_t len, size_t pad)
{
    static const char spaces[64] = "                                                               ";

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

/* Place the last event so that it does not straddle a page boundary of the
 * file (see the top of this file). Once per event: the common case is two
 * compares. */
static inline void event_place(void)
{
    size_t at = open_event, len;
    uint64_t pos;

    open_event = SIZE_MAX;
    if (at >= buf.len || !pad_pages || buf.failed)
        return;
    len = buf.len - at;
    pos = text_out + at;
    if (pos / PAGE == (pos + len - 1) / PAGE || pos % PAGE == 0 || len > PAGE)
        return;
    event_pad(at, len, PAGE - pos % PAGE);
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

void prof_trace_flush(void)
{
    event_place();
    if (!prof_trace_out_is_open())
        return;
    /* No batch goes out past the limit (the note comes with it). */
    cap_look();
    /* Checked before the length: a buffer whose first allocation failed
     * is empty and failed. */
    if (buf.failed) {
        char q[PROF_LOG_VALUE_SIZE];

        prof_log("trace %s: out of memory; tracing is off from here",
                 prof_log_value(q, sizeof q, "PROF_TRACE", path));
        state = CAPPED;
        buf.failed = 0;
        buf.len = 0;
        if (text_out == 0)
            prof_trace_out_abandon();
        return;
    }
    stop_at = 0;
    within_len = 0;
    if (buf.len == 0)
        return;
    text_out += buf.len;
    prof_trace_out_queue(&buf);
}

int prof_trace_write(void)
{
    return prof_trace_out_write();
}

int prof_trace_pending(void)
{
    return prof_trace_out_pending();
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

    /* A forked worker (a DataLoader's) says whose: tools tell it from a
     * rank by args.prof.forked_from (prof-merge compares only ranks). */
    if (prof_rt.forked_from && p->rank >= 0)
        snprintf(name, sizeof name, "%s (rank %d, worker of pid %u)", p->program, p->rank,
                 prof_rt.forked_from);
    else if (prof_rt.forked_from)
        snprintf(name, sizeof name, "%s (worker of pid %u)", p->program, prof_rt.forked_from);
    else if (p->rank >= 0)
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
    prof_buf_printf(&buf, ",\"pid\":%d,", p->pid);
    if (prof_rt.forked_from)
        prof_buf_printf(&buf, "\"forked_from\":%u,", prof_rt.forked_from);
    prof_buf_printf(&buf, "\"realtime_minus_monotonic_ns\":%lld,\"ts_origin_ns\":",
                    (long long)prof_clock_realtime_offset_ns());
    prof_buf_u64(&buf, origin_ns);
    prof_buf_puts(&buf, "}}}");
    metadata("process_sort_index", (uint32_t)p->pid, "sort_index", NULL,
             p->rank >= 0 ? p->rank : 0);
}

int prof_trace_open(void)
{
    const struct prof_config *cfg = prof_config_get();
    size_t n;
    int err;

    if (cfg->trace_path == NULL || state != OFF || prof_trace_out_is_open())
        return 0;
    if (prof_path_expand(cfg->trace_path, path, sizeof path) != 0) {
        prof_log("PROF_TRACE: path too long; tracing is off");
        return -ENAMETOOLONG;
    }
    if (prof_rt_path_is_parents(cfg->trace_path)) {
        /* A path without %p is the file of the process this one was
         * started below (a worker): opening it again would cut that file
         * and interleave two writers. A worker's parent says so in its
         * summary; any other process says it here. */
        static int logged;
        char q[PROF_LOG_VALUE_SIZE];

        state = CAPPED;
        if (!prof_rt_is_worker())
            prof_log_once(&logged, "trace %s: this process was started below prof process %u, "
                          "whose trace it is (PROF_TRACE has no %%p); no trace here (%%p in the "
                          "path gives each process its own)", prof_log_value(q, sizeof q, "PROF_TRACE", path), (unsigned)prof_rt_below());
        return 0;
    }
    stop_at = within_len = 0;
    gen++;
    /* Placement of the opening does not depend on it (it starts the
     * file); set again once the open says whether it is gzip. */
    pad_pages = 0;
    text_out = nevents = nonfinite = 0;
    nstreams = 0;
    last_dropped = 0;
    /* A forked child keeps its parent's origin: their traces line up. */
    if (origin_ns == 0) {
        uint64_t now = prof_clock_now_ns();
        /* A whole second, at least one before now: ts stays > 0 for
         * anything recorded around the start. */
        origin_ns = now >= 2000000000u ? (now / 1000000000u - 1) * 1000000000u : 0;
    }
    prof_trace_out_origin(origin_ns);   /* for the writer's own note of dropped events */
    n = (size_t)snprintf(pid_text, sizeof pid_text, ",\"pid\":%d,\"tid\":",
                         (int)prof_process_get()->pid);
    pid_len = n < sizeof pid_text ? n : sizeof pid_text - 1;
    /* The opening ("[" and the metadata) is formatted before the file is
     * made and written by the open itself: a process killed right after
     * the file appears still leaves "[" and the metadata (and only with
     * them out may the signal path end the file). */
    buf.len = 0;
    buf.failed = 0;
    header();
    event_place();
    if (buf.failed) {
        char q[PROF_LOG_VALUE_SIZE];

        prof_log("trace %s: out of memory; tracing is off",
                 prof_log_value(q, sizeof q, "PROF_TRACE", path));
        buf.len = 0;
        buf.failed = 0;
        return -ENOMEM;
    }
    n = buf.len;
    if ((err = prof_trace_out_open(path, &buf)) != 0) {
        buf.len = 0;
        return err;
    }
    state = ON;
    text_out = n;
    pad_pages = !prof_trace_out_is_gz();
    return 0;
}

/* The trace's own state of a thread (sink.h), in the slot's side pointer,
 * and on a list of the trace's: a forked child frees the parent's other
 * threads without telling the sinks (prof_trace_forget_parent). */
struct trace_thread {
    struct prof_thread *thread;
    struct trace_thread *next;
    const char *named;           /* the name last written to the trace */
    /* Placement (prof_trace_place): the latest end written and the start
     * of the zone that ended there, and per depth, for the zones written
     * since their parent ended, the earliest start and what that start
     * could not precede. 0 = none. */
    uint64_t end, end_start;
    uint64_t first[PROF_MAX_DEPTH_ + 1];
    uint64_t floor[PROF_MAX_DEPTH_ + 1];
    uint32_t depth;              /* deepest depth with a first */
    struct trace_lane *lanes;    /* per lane of the thread seen: its track */
    uint32_t nlanes;
    uint32_t track;              /* the thread's own track (thread_track) */
    /* The on-CPU counter (prof_trace_cpu_sample): the CPU time sampled
     * since cpu_from_ns, where its next point goes. */
    uint64_t cpu_from_ns, cpu_sum_ns, cpu_last_ns;
};

static struct trace_thread *trace_threads;

/* NULL when out of memory: the thread's events are left out. */
static struct trace_thread *tthread(struct prof_thread *t)
{
    struct trace_thread *tt = t->side[PROF_SIDE_TRACE];

    if (tt != NULL)
        return tt;
    if ((tt = calloc(1, sizeof *tt)) == NULL)
        return NULL;
    tt->thread = t;
    tt->next = trace_threads;
    trace_threads = tt;
    t->side[PROF_SIDE_TRACE] = tt;
    return tt;
}

/* The trace's own state of a stage (sink.h): its events' head, made once
 * per trace file and category (gen), and the args of the last call site
 * traced (raw name pointer -> args). */
struct trace_stage {
    char *head;
    uint32_t head_len, args_len;
    uint64_t gen;
    const char *raw, *args;
};

static struct trace_stage *tstage(struct prof_stage *s)
{
    struct trace_stage *ts = s->side[PROF_SIDE_TRACE];

    if (ts == NULL && (ts = calloc(1, sizeof *ts)) != NULL)
        s->side[PROF_SIDE_TRACE] = ts;
    return ts;
}

/* A thread's track: its kernel tid, which viewers and other tools show,
 * unless an earlier thread of this process had it (the kernel hands tids
 * out again after pid_max of them, 32,768 on many systems): then a tid of
 * its own from THREAD_TID_BASE up, never reused, so that two threads
 * never share a track. Kernel tids lie below 2^22 (PID_MAX_LIMIT): a bit
 * each, 512 KB of address space of which a page per 32,768 tids is
 * touched. Forgotten in a forked child, whose trace is its own. */
#define THREAD_TID_BASE 1200000000u
#define KERNEL_TIDS (1u << 22)
static uint64_t *tids_seen;
static uint32_t thread_tids;     /* tracks handed out past a reused tid */

static uint32_t thread_track(const struct prof_thread *t, struct trace_thread *tt)
{
    uint32_t tid = t->tid;

    if (tt->track != 0)
        return tt->track;
    if (tids_seen == NULL)
        tids_seen = calloc(KERNEL_TIDS / 64, sizeof *tids_seen);
    if (tid < KERNEL_TIDS && tids_seen != NULL) {
        uint64_t bit = (uint64_t)1 << (tid % 64);

        if (tids_seen[tid / 64] & bit)
            tid = THREAD_TID_BASE + 1 + thread_tids++ % (300000000u - 1);
        else
            tids_seen[tid / 64] |= bit;
    }
    return tt->track = tid;
}

static void __attribute__((noinline)) thread_meta_write(struct prof_thread *t,
                                                        struct trace_thread *tt, const char *name)
{
    /* The process's main thread is the one whose tid is the pid, whichever
     * thread recorded first; it sorts first. */
    int is_main = t->tid == (uint32_t)prof_process_get()->pid;
    uint32_t tid = thread_track(t, tt);
    long sort = is_main ? 0 : (long)t->index + 1;
    char fallback[32];

    if (name == NULL) {
        if (is_main)
            snprintf(fallback, sizeof fallback, "main");
        else
            snprintf(fallback, sizeof fallback, "thread %u", t->index);
        metadata("thread_name", tid, "name", fallback, 0);
        metadata("thread_sort_index", tid, "sort_index", NULL, sort);
        tt->named = prof_intern(fallback);
        return;
    }
    metadata("thread_name", tid, "name", name, 0);
    if (tt->named == NULL)
        metadata("thread_sort_index", tid, "sort_index", NULL, sort);
    tt->named = name;
}

/* t's name and sort order, before its first event and when its name
 * changes (a thread that never names itself gets one by its index). */
static inline void thread_meta(struct prof_thread *t, struct trace_thread *tt)
{
    const char *name = __atomic_load_n(&t->name, __ATOMIC_RELAXED);

    if (tt->named == NULL || (name != NULL && name != tt->named))
        thread_meta_write(t, tt, name);
}

/* PROF_TRACE_MAX_MB is a promise: a plain JSON file ends no larger than
 * the limit. Each look (every 4 KB of text, and before each batch goes
 * out) counts the text so far plus what ending the trace still adds (the
 * note, the page padding it may get, the closing "\n]\n"); a look that
 * finds that past the limit takes the buffer back to the previous look's
 * length, an event boundary that was within it, and ends the trace there
 * with the note. For .gz the compressed size is known only per batch, so
 * the text counts at the compression ratio so far: within one batch. */
#define CAP_NOTE_MAX 256u
#define CAP_RESERVE (PAGE + CAP_NOTE_MAX + 3u)

/* Nonzero when the limit is reached: the trace then ends with its note
 * (state CAPPED), the caller flushes. */
static int cap_look(void)
{
    const struct prof_config *cfg = prof_config_get();
    uint64_t mb = cfg->trace_max_bytes / (1024 * 1024), need;
    char q[PROF_LOG_VALUE_SIZE];

    if (!cfg->trace_max_bytes || state != ON)
        return 0;
    event_place();
    need = (uint64_t)((double)(text_out + buf.len) * prof_trace_out_ratio()) +
           (pad_pages ? CAP_RESERVE : 0);
    if (need <= cfg->trace_max_bytes) {
        within_len = buf.len;
        return 0;
    }
    if (within_len < buf.len) {
        buf.len = within_len;
        open_event = SIZE_MAX;
    }
    event_start();
    prof_buf_printf(&buf, "\"name\":\"prof: trace size limit reached (%llu MB); later "
                    "events not recorded\",\"cat\":\"prof\",", (unsigned long long)mb);
    common("i", (uint32_t)prof_process_get()->pid);
    prof_buf_puts(&buf, ",\"s\":\"t\",\"ts\":");
    prof_buf_us(&buf, rel(prof_clock_now_ns()));
    prof_buf_puts(&buf, "}");
    prof_log("trace %s: size limit of %llu MB reached; later events are not recorded "
             "(PROF_TRACE_MAX_MB)", prof_log_value(q, sizeof q, "PROF_TRACE", path),
             (unsigned long long)mb);
    state = CAPPED;
    return 1;
}

static int __attribute__((noinline)) room_look(void)
{
    if (state == ON && prof_trace_out_failed())
        state = OFF;
    if (state != ON)
        return 0;
    if (cap_look()) {
        prof_trace_flush();
        return 0;
    }
    if (buf.len >= FLUSH_AT)
        prof_trace_flush();
    stop_at = buf.len + 4096 < FLUSH_AT ? buf.len + 4096 : FLUSH_AT;
    return state == ON;
}

/* Whether an event may be written: tracing on, the writer not failed, the
 * size limit not reached. Looked at every 4 KB of text (what one event
 * more costs the limit is its own size). */
static inline int room(void)
{
    return state == ON && buf.len < stop_at ? 1 : room_look();
}

/* What a zone event of stage s begins with, after "\n,{": its name, phase,
 * pid and "tid": made once per trace file (the pid is the file's: a forked
 * child opens its own), kept in the stage. The category comes last
 * (zone_cat). */
static const char *stage_head(struct prof_stage *s, struct trace_stage *ts)
{
    struct prof_buf tmp = {0};
    uint64_t key = gen;

    if (ts == NULL)
        return NULL;
    if (ts->gen == key && ts->head != NULL)
        return ts->head;
    prof_buf_puts(&tmp, "\"name\":");
    prof_buf_json_string(&tmp, s->name);
    prof_buf_puts(&tmp, ",\"ph\":\"X\"");
    prof_buf_put(&tmp, pid_text, pid_len);
    if (tmp.failed || tmp.len > UINT32_MAX) {
        prof_buf_free(&tmp);
        return NULL;
    }
    free(ts->head);
    ts->head = tmp.data;
    ts->head_len = (uint32_t)tmp.len;
    ts->gen = key;
    return ts->head;
}

/* A zone's category, the event's source: "cpu" or "gpu" (a CPU zone named
 * "x [gpu]" shares the GPU zones' stage); a CPU zone with a call site adds
 * it as a second category, ",\"cat\":\"cpu,src:file:line\"". The site is
 * not in args: speedscope names a frame by its name and args (one frame
 * per call site, labelled `name {"src":...}`), while Perfetto and Chrome
 * show the category beside the name. Escaped once per raw name pointer and
 * kept: one entry per raw pointer, as the statistics keep one. Copied, so
 * a site in a library unloaded later is never read again. */
static const char cat_cpu[] = ",\"cat\":\"cpu\"";
static const char cat_gpu[] = ",\"cat\":\"gpu\"";
static struct prof_map site_cats;

static const char *zone_cat(const char *raw)
{
    const struct prof_site_ *site;
    struct prof_buf src = {0}, out = {0};
    const char *a;

    if (raw == NULL)
        return cat_cpu;
    if ((a = prof_map_get(&site_cats, (uintptr_t)raw)) != NULL)
        return a;
    a = cat_cpu;
    /* The statistics asked about this pointer last (a zone whose record
     * made its stage): their answer. */
    site = raw == prof_stats_site_raw ? prof_stats_site : prof_site_of(raw);
    if (site != NULL && site->file != NULL) {
        prof_buf_puts(&src, "cpu,src:");
        prof_buf_puts(&src, site->file);
        prof_buf_put(&src, ":", 1);
        prof_buf_u64(&src, site->line);
        prof_buf_puts(&out, ",\"cat\":");
        if (!src.failed)
            prof_buf_json_string(&out, src.data);
        if (!out.failed && !src.failed)
            a = out.data;
        else
            prof_buf_free(&out);
        prof_buf_free(&src);
    }
    if (prof_map_put(&site_cats, (uintptr_t)raw, (void *)a) != 0 && a != cat_cpu) {
        prof_buf_free(&out);    /* no memory to keep it: the site left out */
        a = cat_cpu;
    }
    return a;
}

#define LIT(q, s) (memcpy((q), (s), sizeof(s) - 1), (q) += sizeof(s) - 1)

/* One X event, formatted in place: the hot loop of tracing. Everything
 * but the numbers is text made once (the stage's head, the site's args)
 * and copied; the event is written with one reservation. */
static void zone_event(struct prof_stage *s, const char *raw, int is_gpu, uint32_t tid,
                       uint64_t rel_start, uint64_t dur)
{
    struct trace_stage *ts = tstage(s);
    const char *head = stage_head(s, ts), *args = is_gpu ? cat_gpu : cat_cpu;
    size_t hlen = 0, alen = strlen(args);
    char *p, *q;

    if (raw != NULL && !is_gpu && ts != NULL) {
        /* Most stages have one call site: its category is kept on the stage. */
        if (ts->raw != raw) {
            const char *a = zone_cat(raw);
            ts->args = a;
            ts->args_len = (uint32_t)strlen(a);
            ts->raw = raw;
        }
        args = ts->args;
        alen = ts->args_len;
    } else if (raw != NULL && !is_gpu) {
        args = zone_cat(raw);
        alen = strlen(args);
    }
    if (head == NULL) {              /* out of memory: the slow way */
        event_start();
        prof_buf_puts(&buf, "\"name\":");
        prof_buf_json_string(&buf, s->name);
        prof_buf_puts(&buf, ",\"ph\":\"X\"");
        prof_buf_put(&buf, pid_text, pid_len);
    } else {
        event_place();
        open_event = buf.len;
        hlen = ts->head_len;
    }
    if ((p = prof_buf_room(&buf, hlen + alen + 96)) == NULL)
        return;
    q = p;
    if (head != NULL) {
        if (nevents++)
            LIT(q, "\n,{");
        else
            LIT(q, "[{");
        memcpy(q, head, hlen);
        q += hlen;
    }
    q += prof_digits_u64(q, tid);
    LIT(q, ",\"ts\":");
    q += prof_digits_us(q, rel_start);
    LIT(q, ",\"dur\":");
    q += prof_digits_us(q, dur);
    memcpy(q, args, alen);
    q += alen;
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
 * end would fall before the last one written (a parent ending at its last
 * child's nanosecond, and so on up, a nanosecond per level at most), and
 * what follows a zone may not start before the first nanosecond that a
 * viewer reads as at or after its end (the floor: its end, or one more).
 * One nanosecond is thousands of ulps at the magnitudes written (ts from
 * the origin: below 2^40 us, about 12 days of run, an ulp is under 0.25
 * ns), so a viewer's value is within half a nanosecond of the exact one,
 * and the doubles (three divisions, most of this function's time) are
 * computed only for an end within two nanoseconds of the last end, a
 * start at or before it, and a floor that a parent will need. */
#define VIEW_EXACT_NS (1ull << 50)      /* 13 days: a viewer's error < 0.5 ns */

/* The end of t's last zone as a viewer computes it. */
static double last_view_end(const struct trace_thread *tt)
{
    return view_end(rel(tt->end_start), tt->end - tt->end_start);
}

void prof_trace_place(struct prof_thread *t, uint32_t depth, uint64_t *start, uint64_t *end)
{
    uint32_t d = depth > PROF_MAX_DEPTH_ - 1 ? PROF_MAX_DEPTH_ - 1 : depth;
    uint64_t first = 0, floor = UINT64_MAX;
    struct trace_thread *tt = tthread(t);

    if (tt == NULL)
        return;

    for (uint32_t k = d + 1; k <= tt->depth; k++) {
        if (tt->first[k] == 0)
            continue;
        if (first == 0 || tt->first[k] < first)
            first = tt->first[k];
        if (tt->floor[k] < floor)
            floor = tt->floor[k];
        tt->first[k] = 0;
    }
    if (first == 0) {       /* no children: after all that came before */
        if (*start <= tt->end || tt->first[d] == 0)
            floor = tt->end + ((double)rel(tt->end) / 1000.0 < last_view_end(tt));
        else
            floor = tt->end;   /* *start is past either floor: unused */
    }
    if (*start < floor)
        *start = floor;
    if (first != 0 && *start > first)
        *start = first;
    if (*end < *start)
        *end = *start;
    if (*end < tt->end)
        *end = tt->end;
    if (*end < tt->end + 2 || rel(*end) >= VIEW_EXACT_NS) {
        double last = last_view_end(tt), v = view_end(rel(*start), *end - *start);

        for (int i = 0; i < 4 && v < last; i++)
            v = view_end(rel(*start), ++*end - *start);
    }
    if (tt->first[d] == 0) {
        tt->first[d] = *start;
        tt->floor[d] = floor;
    } else if (*start < tt->first[d]) {
        tt->first[d] = *start;
    }
    if (d > tt->depth)
        tt->depth = d;
    tt->end = *end;
    tt->end_start = *start;
}

void prof_trace_zone(struct prof_thread *t, struct prof_stage *s, const char *raw,
                     uint64_t start_ns, uint64_t dur_ns, uint32_t depth)
{
    uint64_t end_ns = start_ns + dur_ns;
    struct trace_thread *tt;

    if (!room() || (tt = tthread(t)) == NULL)
        return;
    prof_trace_place(t, depth, &start_ns, &end_ns);
    thread_meta(t, tt);
    zone_event(s, raw, 0, thread_track(t, tt), rel(start_ns), end_ns - start_ns);
}

/* Lane tracks (an asyncio task's zones, prof_impl.h): each (thread, lane)
 * gets a tid of its own from LANE_TID_BASE up, in the order they first
 * record, never reused while the process lives. (The thread's index
 * masked into the tid, as before, wrapped after 16,384 threads and drew
 * later threads' tasks on earlier ones' tracks.) 647 million tracks fit
 * below 2^31 (viewers read tids as 32-bit signed); past that they would
 * start again. Named once per trace file. */
#define LANE_TID_BASE 1500000000u
#define LANE_TIDS (0x7fffffffu - LANE_TID_BASE)
struct trace_lane {
    uint32_t tid;                /* 0: none yet */
    uint32_t named;              /* the trace file (gen) it was named in */
};
static uint32_t lane_tids;       /* tracks handed out */

static uint32_t lane_track(struct prof_thread *t, struct trace_thread *tt, uint32_t lane)
{
    const char *tname = __atomic_load_n(&t->name, __ATOMIC_RELAXED);
    struct trace_lane *l;
    char name[96];

    if (lane >= tt->nlanes) {
        uint32_t n = tt->nlanes ? tt->nlanes : 8;

        while (n <= lane)
            n *= 2;
        if ((l = realloc(tt->lanes, n * sizeof *l)) == NULL)
            return LANE_TID_BASE;   /* placed on a shared track */
        memset(l + tt->nlanes, 0, (n - tt->nlanes) * sizeof *l);
        tt->lanes = l;
        tt->nlanes = n;
    }
    l = &tt->lanes[lane];
    if (l->tid == 0)
        l->tid = LANE_TID_BASE + 1 + lane_tids++ % LANE_TIDS;
    if (l->named == (uint32_t)gen)
        return l->tid;
    l->named = (uint32_t)gen;
    if (tname != NULL)
        snprintf(name, sizeof name, "%.*s task %u", (int)prof_utf8_cut(tname, strlen(tname), 60),
                 tname, lane);
    else if (t->tid == (uint32_t)prof_process_get()->pid)
        snprintf(name, sizeof name, "main task %u", lane);
    else
        snprintf(name, sizeof name, "thread %u task %u", t->index, lane);
    metadata("thread_name", l->tid, "name", name, 0);
    metadata("thread_sort_index", l->tid, "sort_index", NULL,
             ((long)t->index + 1) * 4096 + (long)lane);
    return l->tid;
}

void prof_trace_lane_zone(struct prof_thread *t, uint32_t lane, struct prof_stage *s,
                          const char *raw, uint64_t start_ns, uint64_t dur_ns)
{
    struct trace_thread *tt;
    uint32_t tid;

    if (!room() || (tt = tthread(t)) == NULL)
        return;
    thread_meta(t, tt);
    tid = lane_track(t, tt, lane);
    zone_event(s, raw, 0, tid, rel(start_ns), dur_ns);
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
    zone_event(s, NULL, 1, tid, rel(start_ns),
               end_ns > start_ns ? end_ns - start_ns : 0);
}

void prof_trace_gpu_kernel(int device, uint64_t stream, const char *kname, uint64_t start_ns,
                           uint64_t end_ns)
{
    uint32_t tid;

    if (!room())
        return;
    tid = gpu_track(device, stream);
    event_start();
    prof_buf_puts(&buf, "\"name\":");
    prof_buf_json_string(&buf, kname != NULL ? kname : "(null)");
    prof_buf_puts(&buf, ",");
    common("X", tid);
    prof_buf_puts(&buf, ",\"ts\":");
    prof_buf_us(&buf, rel(start_ns));
    prof_buf_puts(&buf, ",\"dur\":");
    prof_buf_us(&buf, end_ns > start_ns ? end_ns - start_ns : 0);
    prof_buf_puts(&buf, ",\"cat\":\"gpu,kernel\"}");
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
    struct trace_thread *tt;

    if (!room() || (tt = tthread(t)) == NULL)
        return;
    thread_meta(t, tt);
    event_start();
    prof_buf_puts(&buf, "\"name\":");
    prof_buf_json_string(&buf, name ? name : "(null)");
    prof_buf_printf(&buf, ",\"cat\":\"%s\",", cat);
    common("i", thread_track(t, tt));
    prof_buf_puts(&buf, ",\"s\":\"t\",\"ts\":");
    prof_buf_us(&buf, rel(ts));
    if (step >= 0)
        prof_buf_printf(&buf, ",\"args\":{\"step\":%lld}", (long long)step);
    prof_buf_puts(&buf, "}");
}

/* The thread's on-CPU share as a counter track of its own, "prof.on_cpu
 * TID": each point holds the share of the wall time from it to the next
 * point that the thread ran (its samples' CPU time over that span), so
 * that a viewer's step line shows it over the span it describes. Points
 * are written at least CPU_POINT_NS apart (a busy thread takes up to 250
 * samples a second); events may come out of time order, which the
 * viewers sort. A thread that blocks takes no samples: its next sample
 * writes the low share of the whole span. */
#define CPU_POINT_NS 20000000u

static void cpu_point(struct prof_thread *t, struct trace_thread *tt, uint64_t to_ns)
{
    char name[40];
    double v = to_ns > tt->cpu_from_ns ? (double)tt->cpu_sum_ns / (double)(to_ns - tt->cpu_from_ns)
                                       : 0.0;

    snprintf(name, sizeof name, "prof.on_cpu %u", t->tid);
    prof_trace_counter(t, name, tt->cpu_from_ns, v > 1.0 ? 1.0 : v);
}

void prof_trace_cpu_sample(struct prof_thread *t, uint64_t ts, uint64_t cpu_ns)
{
    struct trace_thread *tt = tthread(t);

    if (tt == NULL)
        return;
    if (tt->cpu_from_ns == 0) {
        /* The first sample: its CPU time was spent just before it. */
        tt->cpu_from_ns = ts > cpu_ns ? ts - cpu_ns : 1;
        tt->cpu_sum_ns = 0;
    }
    tt->cpu_sum_ns += cpu_ns;
    tt->cpu_last_ns = ts;
    if (ts >= tt->cpu_from_ns + CPU_POINT_NS) {
        cpu_point(t, tt, ts);
        tt->cpu_from_ns = ts;
        tt->cpu_sum_ns = 0;
    }
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
    if (!prof_trace_out_is_open())
        return;
    prof_trace_flush();
    prof_trace_out_close();
    state = OFF;
    prof_buf_free(&buf);
}

void prof_trace_close_from_signal(void)
{
    prof_trace_out_close_from_signal();
}

void prof_trace_atfork_prepare(void)
{
    prof_trace_out_atfork_prepare();
}

void prof_trace_atfork_parent(void)
{
    prof_trace_out_atfork_parent();
}

void prof_trace_atfork_child(void)
{
    prof_trace_out_atfork_child();
}

void prof_trace_forget_parent(void)
{
    const struct prof_config *cfg = prof_config_get();

    struct trace_thread *tt, *next;

    /* The parent's buffer, queue, stream and descriptor stay the parent's. */
    prof_trace_out_forget();
    /* Its threads are gone, and the forking one starts afresh (a new
     * file, a new placement): each gets new state on its first event. */
    for (tt = trace_threads, trace_threads = NULL; tt != NULL; tt = next) {
        next = tt->next;
        tt->thread->side[PROF_SIDE_TRACE] = NULL;
        free(tt->lanes);
        free(tt);
    }
    free(tids_seen);
    tids_seen = NULL;
    /* Opened on the child's first record (prof_trace_open from the
     * runtime's fork setup), and only with its own %p name: a child that
     * execs leaves no file. CAPPED keeps a child without %p off for good. */
    state = cfg->trace_path != NULL && prof_path_has_pid(cfg->trace_path) ? OFF : CAPPED;
    buf.len = 0;
    open_event = SIZE_MAX;
    buf.failed = 0;
}

/* ------------------------------------------------------------------------ */
/* The trace as a sink of the collector (sink.h). */

/* Within the trace's step window (PROF_TRACE_STEPS), read from the
 * boundaries prof_step sets. */
static int sink_wants(uint64_t ticks)
{
    const struct prof_config *cfg = prof_config_get();
    uint64_t open, close;

    if (!prof_trace_active())
        return 0;
    if (cfg->trace_step_first > 0) {
        open = __atomic_load_n(&prof_trace_open_ticks, __ATOMIC_ACQUIRE);
        if (open == 0 || ticks < open)
            return 0;
    }
    close = __atomic_load_n(&prof_trace_close_ticks, __ATOMIC_ACQUIRE);
    return close == 0 || ticks < close;
}

static void sink_zone(const struct prof_event *e)
{
    if (e->lane != 0)
        prof_trace_lane_zone(e->thread, e->lane, e->stage, e->raw, e->start_ns, e->dur_ns);
    else
        prof_trace_zone(e->thread, e->stage, e->raw, e->start_ns, e->dur_ns, e->depth);
}

static void sink_counter(const struct prof_event *e, double value)
{
    prof_trace_counter(e->thread, e->raw, e->start_ns, value);
}

static void sink_mark(const struct prof_event *e)
{
    prof_trace_instant(e->thread, e->raw, "mark", e->start_ns, -1);
}

static void sink_step(const struct prof_event *e, uint64_t step)
{
    char name[40];

    snprintf(name, sizeof name, "step %llu", (unsigned long long)step);
    prof_trace_instant(e->thread, name, "step", e->start_ns, (int64_t)step);
}

static void sink_gpu_zone(struct prof_stage *gpu, struct prof_stage *cpu, int device,
                          uint64_t stream, uint64_t start_ns, uint64_t end_ns)
{
    (void)cpu;
    if (prof_trace_active())
        prof_trace_gpu_zone(gpu, device, stream, start_ns, end_ns);
}

static void sink_gpu_kernel(struct prof_stage *gpu, int device, uint64_t stream,
                            const char *kname, uint64_t start_ns, uint64_t end_ns)
{
    (void)gpu;
    if (prof_trace_active())
        prof_trace_gpu_kernel(device, stream, kname, start_ns, end_ns);
}

static void sink_thread_gone(struct prof_thread *t)
{
    struct trace_thread *tt = t->side[PROF_SIDE_TRACE], **link = &trace_threads;

    if (tt == NULL)
        return;
    /* Its last span, and then nothing: the thread is gone. */
    if (tt->cpu_from_ns != 0 && prof_trace_active()) {
        if (tt->cpu_sum_ns != 0 && tt->cpu_last_ns > tt->cpu_from_ns) {
            cpu_point(t, tt, tt->cpu_last_ns);
            tt->cpu_from_ns = tt->cpu_last_ns;
        }
        tt->cpu_sum_ns = 0;
        cpu_point(t, tt, 0);
    }
    while (*link != tt)
        link = &(*link)->next;
    *link = tt->next;
    free(tt->lanes);
    free(tt);
    t->side[PROF_SIDE_TRACE] = NULL;
}

static void sink_stage_gone(struct prof_stage *s)
{
    struct trace_stage *ts = s->side[PROF_SIDE_TRACE];

    if (ts != NULL)
        free(ts->head);
    free(ts);
    s->side[PROF_SIDE_TRACE] = NULL;
}

static void sink_cpu_sample(struct prof_thread *t, uint64_t ts_ns, uint64_t cpu_ns)
{
    if (prof_trace_active())
        prof_trace_cpu_sample(t, ts_ns, cpu_ns);
}

static void sink_pass_end(uint64_t now_ns)
{
    if (prof_trace_active())
        prof_trace_dropped(now_ns, prof_rt.dropped);
    prof_trace_flush();
}

/* A loss loss.c said on the log: an instant on the thread's track where
 * its records went missing. */
static void sink_loss(struct prof_thread *t, uint64_t lost, uint64_t buffer_hint, uint64_t ts_ns)
{
    char size[24], what[128];

    if (!prof_trace_active())
        return;
    prof_loss_size(size, sizeof size, buffer_hint);
    snprintf(what, sizeof what, "prof.loss: %llu records dropped (PROF_BUFFER=%s)",
             (unsigned long long)lost, size);
    prof_trace_instant(t, what, "prof", ts_ns, -1);
}

const struct prof_sink prof_trace_sink = {
    .name = "trace",
    .active = prof_trace_active,
    .wants = sink_wants,
    .zone = sink_zone,
    .counter = sink_counter,
    .mark = sink_mark,
    .step = sink_step,
    .gpu_zone = sink_gpu_zone,
    .gpu_kernel = sink_gpu_kernel,
    .cpu_sample = sink_cpu_sample,
    .thread_gone = sink_thread_gone,
    .stage_gone = sink_stage_gone,
    .pass_end = sink_pass_end,
    .loss = sink_loss,
};
