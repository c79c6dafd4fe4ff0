/* trace_sink.c - the trace as a sink of the collector (sink.h): which
 * records it takes (the step window), and each record's way to the trace's
 * writers (trace_zone.c, trace_events.c); a thread's and a stage's trace
 * state freed when they go. The zone hook is trace_zone.c's
 * prof_trace_sink_zone, so that the drain's per-record path is one
 * translation unit. */
#include <stdint.h>
#include <stdio.h>

#include "env.h"
#include "loss.h"
#include "registry.h"
#include "runtime.h"
#include "sink.h"
#include "trace.h"
#include "trace_text.h"
#include "trace_track.h"

/* Within the trace's step window (PROF_TRACE_STEPS), read from the
 * boundaries prof_step sets. */
static int sink_wants(uint64_t ticks)
{
    const struct prof_config *cfg = prof_config_get();
    uint64_t open, close;

    if (!trace_on())
        return 0;
    if (cfg->trace_step_first > 0) {
        open = __atomic_load_n(&prof_trace_open_ticks, __ATOMIC_ACQUIRE);
        if (open == 0 || ticks < open)
            return 0;
    }
    close = __atomic_load_n(&prof_trace_close_ticks, __ATOMIC_ACQUIRE);
    return close == 0 || ticks < close;
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
    struct trace_thread *tt = t->side[PROF_SIDE_TRACE];

    if (tt == NULL)
        return;
    prof_trace_cpu_gone(t, tt);
    prof_trace_thread_free(t, tt);
}

static void sink_stage_gone(struct prof_stage *s)
{
    prof_trace_stage_gone(s);
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
    .zone = prof_trace_sink_zone,
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
