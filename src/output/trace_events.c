/* trace_events.c - the trace's events other than zones: GPU kernels,
 * counters (a thread's on-CPU share, dropped records, the other sinks'
 * samples), instants (marks, steps, losses). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "process.h"
#include "registry.h"
#include "trace.h"
#include "trace_text.h"
#include "trace_track.h"

static uint64_t last_dropped;
static uint64_t nonfinite;       /* counter samples not written: NaN or Inf */

void prof_trace_counters_reset(void)
{
    nonfinite = 0;
    last_dropped = 0;
}

void prof_trace_gpu_kernel(int device, uint64_t stream, const char *kname, uint64_t start_ns,
                           uint64_t end_ns)
{
    struct prof_buf *buf = &prof_trace_fmt.buf;
    uint32_t tid;

    if (!room())
        return;
    tid = prof_trace_gpu_track(device, stream);
    prof_trace_event_start();
    prof_buf_puts(buf, "\"name\":");
    prof_buf_json_string(buf, kname != NULL ? kname : "(null)");
    prof_buf_puts(buf, ",");
    prof_trace_common("X", tid);
    prof_buf_puts(buf, ",\"ts\":");
    prof_buf_us(buf, rel(start_ns));
    prof_buf_puts(buf, ",\"dur\":");
    prof_buf_us(buf, end_ns > start_ns ? end_ns - start_ns : 0);
    prof_buf_puts(buf, ",\"cat\":\"gpu,kernel\"}");
}

void prof_trace_counter(struct prof_thread *t, const char *name, uint64_t ts, double value)
{
    struct prof_buf *buf = &prof_trace_fmt.buf;

    /* JSON has no NaN or Inf, and a null sample breaks the viewers'
     * counter tracks: such samples are left out (and counted). */
    if (!isfinite(value)) {
        nonfinite++;
        return;
    }
    if (!room())
        return;
    prof_trace_event_start();
    prof_buf_puts(buf, "\"name\":");
    prof_buf_json_string(buf, name ? name : "(null)");
    prof_buf_puts(buf, ",");
    prof_trace_common("C", t ? t->tid : (uint32_t)prof_process_get()->pid);
    prof_buf_puts(buf, ",\"ts\":");
    prof_buf_us(buf, rel(ts));
    prof_buf_puts(buf, ",\"args\":{\"value\":");
    prof_buf_double(buf, value);
    prof_buf_puts(buf, "}}");
}

uint64_t prof_trace_nonfinite(void)
{
    return nonfinite;
}

void prof_trace_instant(struct prof_thread *t, const char *name, const char *cat, uint64_t ts,
                        int64_t step)
{
    struct prof_buf *buf = &prof_trace_fmt.buf;
    struct trace_thread *tt;

    if (!room() || (tt = tthread(t)) == NULL)
        return;
    thread_meta(t, tt);
    prof_trace_event_start();
    prof_buf_puts(buf, "\"name\":");
    prof_buf_json_string(buf, name ? name : "(null)");
    prof_buf_printf(buf, ",\"cat\":\"%s\",", cat);
    prof_trace_common("i", thread_track(t, tt));
    prof_buf_puts(buf, ",\"s\":\"t\",\"ts\":");
    prof_buf_us(buf, rel(ts));
    if (step >= 0)
        prof_buf_printf(buf, ",\"args\":{\"step\":%lld}", (long long)step);
    prof_buf_puts(buf, "}");
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

void prof_trace_cpu_gone(struct prof_thread *t, struct trace_thread *tt)
{
    /* Its last span, and then nothing: the thread is gone. */
    if (tt->cpu_from_ns != 0 && prof_trace_active()) {
        if (tt->cpu_sum_ns != 0 && tt->cpu_last_ns > tt->cpu_from_ns) {
            cpu_point(t, tt, tt->cpu_last_ns);
            tt->cpu_from_ns = tt->cpu_last_ns;
        }
        tt->cpu_sum_ns = 0;
        cpu_point(t, tt, 0);
    }
}

void prof_trace_dropped(uint64_t ts, uint64_t total)
{
    if (total == last_dropped)
        return;
    last_dropped = total;
    prof_trace_counter(NULL, "prof.dropped", ts, (double)total);
}
