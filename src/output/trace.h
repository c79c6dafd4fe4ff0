/* trace.h - the Chrome trace (docs/FORMATS.md): events formatted on the
 * collector side, runtime lock held, into batches of whole lines that
 * trace_out.h writes with the lock released, so a killed process leaves a
 * file that ends at an event boundary. Defined by trace.c (open, close,
 * fork), trace_text.c (flush), trace_place.c, trace_zone.c, trace_events.c
 * and trace_sink.c. */
#ifndef PROF_TRACE_H
#define PROF_TRACE_H

#include <stdint.h>

struct prof_thread;
struct prof_stage;

/* Open the file PROF_TRACE names (after %p / %r). On failure: one message,
 * tracing stays off. Returns 0 or a negative errno. */
int prof_trace_open(void);
int prof_trace_active(void);

/* A zone of stage s; raw is its record's name pointer (a call site gives
 * the event its source location). */
void prof_trace_zone(struct prof_thread *t, struct prof_stage *s, const char *raw,
                     uint64_t start_ns, uint64_t dur_ns, uint32_t depth);
/* A zone of lane `lane` of t (an asyncio task, registry.h): on a track of
 * its own beside t's, named after t and the lane, where the lane's zones
 * nest among themselves. */
void prof_trace_lane_zone(struct prof_thread *t, uint32_t lane, struct prof_stage *s,
                          const char *raw, uint64_t start_ns, uint64_t dur_ns);

/* Where prof_trace_zone() puts a zone on t's track: [*start, *end] moved,
 * by the few nanoseconds clock re-fits shift, so that t's zones nest as
 * their ticks do. Zones must come in the order they ended. */
void prof_trace_place(struct prof_thread *t, uint32_t depth, uint64_t *start, uint64_t *end);
void prof_trace_gpu_zone(struct prof_stage *s, int device, uint64_t stream, uint64_t start_ns,
                         uint64_t end_ns);

/* PROF_CUDA=kernels: a kernel (memcpy, memset) named kname, a slice on
 * its stream's GPU track, under its zone's ("cat": "gpu,kernel"). */
void prof_trace_gpu_kernel(int device, uint64_t stream, const char *kname, uint64_t start_ns,
                           uint64_t end_ns);
void prof_trace_counter(struct prof_thread *t, const char *name, uint64_t ts_ns, double value);
/* cat "mark" or "step" (step >= 0 adds args.step). */
void prof_trace_instant(struct prof_thread *t, const char *name, const char *cat, uint64_t ts_ns,
                        int64_t step);
void prof_trace_dropped(uint64_t ts_ns, uint64_t total);
/* An on-CPU sample of t (sampler.c): the thread's "prof.on_cpu TID"
 * counter track. */
void prof_trace_cpu_sample(struct prof_thread *t, uint64_t ts_ns, uint64_t cpu_ns);
/* Counter samples left out of the trace because they were NaN or Inf
 * (JSON has no such numbers) since the trace was opened. */
uint64_t prof_trace_nonfinite(void);

/* Hand what is buffered to the writer (trace_out.h). */
void prof_trace_flush(void);
/* Have the writer write what is queued, without the runtime lock: the
 * collector only wakes it; a program's thread (prof_flush) also waits for
 * it, bounded (trace_out.h): 0, or -ETIMEDOUT / -ESRCH. */
int prof_trace_write(void);
/* Something is waiting to be written. */
int prof_trace_pending(void);
/* Write the closing ']' and close. */
void prof_trace_close(void);

/* The signal path: write the closing ']' with async-signal-safe calls only
 * (buffered events are lost; the file stays valid). Exactly one of this
 * and prof_trace_close() writes the end: whichever claims it first. If
 * another thread is writing a batch (or the end) at that moment, this
 * waits for it (half a second at most); on the writing thread itself
 * nothing is written here and the file is left as a killed process leaves
 * it. A gzip trace is ended with prepared bytes (a stored block and the
 * trailer), no zlib call. */
void prof_trace_close_from_signal(void);

/* The trace as a sink of the collector (sink.h). */
struct prof_sink;
extern const struct prof_sink prof_trace_sink;

/* fork handlers (runtime lock held), called in every fork. */
void prof_trace_atfork_prepare(void);
void prof_trace_atfork_parent(void);
void prof_trace_atfork_child(void);
/* In a forked child of a started runtime: never touch the parent's file;
 * reopen when the path has %p, else stay off. */
void prof_trace_forget_parent(void);

/* Between the trace's own files (trace_sink.c, trace.c). */
struct trace_thread;
/* The sink's zone hook: a zone record to prof_trace_zone or
 * prof_trace_lane_zone (trace_zone.c). */
struct prof_event;
void prof_trace_sink_zone(const struct prof_event *e);
/* Stage s is gone: its event head and call site freed (trace_zone.c). */
void prof_trace_stage_gone(struct prof_stage *s);
/* Thread t is gone: its on-CPU counter's last span written, then a point
 * of 0 (trace_events.c). */
void prof_trace_cpu_gone(struct prof_thread *t, struct trace_thread *tt);
/* A new trace file: NaN and Inf samples counted from 0, the dropped count
 * written anew (trace_events.c). */
void prof_trace_counters_reset(void);

#endif
