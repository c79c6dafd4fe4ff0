/* trace.c - the Chrome trace (Chrome Trace Event JSON, docs/FORMATS.md):
 * opened on the first record with its header, closed at the run's end,
 * forgotten in a forked child.
 *
 * The trace's parts, each in its file: the text being formatted, each
 * event's start, its page placement and the size limit (trace_text.c);
 * the tracks and their names (trace_track.c); where a zone goes on its
 * thread's track (trace_place.c); zone events (trace_zone.c) and the other
 * events (trace_events.c); the collector's hooks (trace_sink.c). The file,
 * its queue of batches and the writer thread's writes are trace_out.h's.
 *
 * Time: ts is microseconds since an origin, a whole second at least a
 * second before the file is opened, written in its header
 * (args.prof.ts_origin_ns; forked children keep their parent's). The file is opened with
 * O_NOFOLLOW|O_CLOEXEC and mode 0644 (before umask): a symlink planted at
 * the path is refused, never followed. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "prof.h"
#include "clock.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "process.h"
#include "runtime.h"
#include "trace.h"
#include "trace_out.h"
#include "trace_text.h"
#include "trace_track.h"

static void header(void)
{
    const struct prof_process *p = prof_process_get();
    struct prof_buf *buf = &prof_trace_fmt.buf;
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
    prof_trace_event_start();
    prof_buf_puts(buf, "\"name\":\"process_name\",");
    prof_trace_common("M", (uint32_t)p->pid);
    prof_buf_puts(buf, ",\"args\":{\"name\":");
    prof_buf_json_string(buf, name);
    prof_buf_printf(buf, ",\"prof\":{\"format\":1,\"version\":\"%s\",\"rank\":", PROF_VERSION_STRING);
    if (p->rank >= 0)
        prof_buf_printf(buf, "%d", p->rank);
    else
        prof_buf_puts(buf, "null");
    prof_buf_puts(buf, ",\"host\":");
    prof_buf_json_string(buf, p->host);
    prof_buf_printf(buf, ",\"pid\":%d,", p->pid);
    if (prof_rt.forked_from)
        prof_buf_printf(buf, "\"forked_from\":%u,", prof_rt.forked_from);
    prof_buf_printf(buf, "\"realtime_minus_monotonic_ns\":%lld,\"ts_origin_ns\":",
                    (long long)prof_clock_realtime_offset_ns());
    prof_buf_u64(buf, prof_trace_fmt.origin_ns);
    prof_buf_puts(buf, "}}}");
    prof_trace_metadata("process_sort_index", (uint32_t)p->pid, "sort_index", NULL,
                        p->rank >= 0 ? p->rank : 0);
}

int prof_trace_open(void)
{
    const struct prof_config *cfg = prof_config_get();
    struct prof_trace_fmt *f = &prof_trace_fmt;
    size_t n;
    int err;

    if (cfg->trace_path == NULL || f->state != TRACE_OFF || prof_trace_out_is_open())
        return 0;
    if (prof_path_expand(cfg->trace_path, f->path, sizeof f->path) != 0) {
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

        f->state = TRACE_CAPPED;
        if (!prof_rt_is_worker())
            prof_log_once(&logged, "trace %s: this process was started below prof process %u, "
                          "whose trace it is (PROF_TRACE has no %%p); no trace here (%%p in the "
                          "path gives each process its own)", prof_log_value(q, sizeof q, "PROF_TRACE", f->path), (unsigned)prof_rt_below());
        return 0;
    }
    f->stop_at = f->within_len = 0;
    f->gen++;
    /* Placement of the opening does not depend on it (it starts the
     * file); set again once the open says whether it is gzip. */
    f->pad_pages = 0;
    f->text_out = f->nevents = 0;
    prof_trace_counters_reset();
    prof_trace_gpu_tracks_reset();
    /* A forked child keeps its parent's origin: their traces line up. */
    if (f->origin_ns == 0) {
        uint64_t now = prof_clock_now_ns();
        /* A whole second, at least one before now: ts stays > 0 for
         * anything recorded around the start. */
        f->origin_ns = now >= 2000000000u ? (now / 1000000000u - 1) * 1000000000u : 0;
    }
    prof_trace_out_origin(f->origin_ns);   /* for the writer's own note of dropped events */
    n = (size_t)snprintf(f->pid_text, sizeof f->pid_text, ",\"pid\":%d,\"tid\":",
                         (int)prof_process_get()->pid);
    f->pid_len = n < sizeof f->pid_text ? n : sizeof f->pid_text - 1;
    /* The opening ("[" and the metadata) is formatted before the file is
     * made and written by the open itself: a process killed right after
     * the file appears still leaves "[" and the metadata (and only with
     * them out may the signal path end the file). */
    f->buf.len = 0;
    f->buf.failed = 0;
    header();
    event_place();
    if (f->buf.failed) {
        char q[PROF_LOG_VALUE_SIZE];

        prof_log("trace %s: out of memory; tracing is off",
                 prof_log_value(q, sizeof q, "PROF_TRACE", f->path));
        f->buf.len = 0;
        f->buf.failed = 0;
        return -ENOMEM;
    }
    n = f->buf.len;
    if ((err = prof_trace_out_open(f->path, &f->buf)) != 0) {
        f->buf.len = 0;
        return err;
    }
    f->state = TRACE_ON;
    f->text_out = n;
    f->pad_pages = !prof_trace_out_is_gz();
    return 0;
}

void prof_trace_close(void)
{
    if (!prof_trace_out_is_open())
        return;
    prof_trace_flush();
    prof_trace_out_close();
    prof_trace_fmt.state = TRACE_OFF;
    prof_buf_free(&prof_trace_fmt.buf);
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
    struct prof_trace_fmt *f = &prof_trace_fmt;

    /* The parent's buffer, queue, stream and descriptor stay the parent's. */
    prof_trace_out_forget();
    /* Its threads are gone, and the forking one starts afresh (a new
     * file, a new placement): each gets new state on its first event. */
    prof_trace_threads_forget();
    /* Opened on the child's first record (prof_trace_open from the
     * runtime's fork setup), and only with its own %p name: a child that
     * execs leaves no file. CAPPED keeps a child without %p off for good. */
    f->state = cfg->trace_path != NULL && prof_path_has_pid(cfg->trace_path) ? TRACE_OFF
                                                                             : TRACE_CAPPED;
    f->buf.len = 0;
    f->open_event = SIZE_MAX;
    f->buf.failed = 0;
}
