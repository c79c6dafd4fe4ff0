/* sink.h - the outputs the collector feeds. The drain resolves each record
 * once (its stage, its time in ns, its self time) and hands the event to
 * every sink, in the order of prof_sinks: statistics first, then the
 * trace. An output is one file that defines a struct prof_sink and one
 * line in sink.c; it keeps its own per-thread and per-stage state (keyed
 * by the thread or stage it is handed, freed in thread_gone), and touches
 * no struct of another part. Every hook runs on the collector side with
 * the runtime lock held, so it must not block (I/O happens after the pass,
 * with the lock released: trace_queue.c, summary_out.c, metrics.c). */
#ifndef PROF_SINK_H
#define PROF_SINK_H

#include <stdint.h>

struct prof_node;
struct prof_stage;
struct prof_thread;

/* Indexes into the side state of a thread slot and of a stage
 * (registry.h, stats.h): one per sink that keeps state of its own, then,
 * a thread's only, one per part of this floor that keeps some. */
enum {
    PROF_SIDE_TRACE,
    PROF_SIDE_GPU,               /* gpu_busy.c */
    PROF_SIDES_,
    PROF_SIDE_SELF = PROF_SIDES_,   /* selftime.c: per-depth children sums */
    PROF_SIDE_DRAIN,             /* drain.c: the losses already counted */
    PROF_SIDE_LOSS,              /* loss.c: the window it last lost records in */
    PROF_SIDES_THREAD_
};

struct prof_event {
    struct prof_thread *thread;
    const char *raw;             /* the record's name pointer: a call site
                                    (site.h) or a name */
    struct prof_stage *stage;    /* zones: their stage */
    struct prof_node *node;      /* zones: their path node (stats.c's; may
                                    be NULL) */
    uint64_t start_ns;           /* CLOCK_MONOTONIC; zones: 0 when no
                                    sink but the statistics (which do not
                                    read it) takes them */
    uint64_t dur_ns, self_ns;    /* zones */
    uint32_t parent;             /* zones: path hash of the enclosing zones */
    uint32_t depth;              /* zones: nesting level on their track */
    uint32_t lane;               /* zones: 0 on the thread's own track, else
                                    its asyncio task's (registry.h) */
    uint64_t cpu_ns;             /* zones: sampled CPU time of its self time */
    uint64_t peak_bytes;         /* zones: how much the process's peak
                                    resident memory rose at its samples */
    int cpu_unsampled;           /* zones: the sampler runs, but not on its
                                    thread (no timer, or stopped), so its
                                    self time has no samples to show */
};

struct prof_sink {
    const char *name;
    /* Whether it takes any record now: asked once per drain of a ring,
     * so that a sink with nothing to do costs the drain nothing per
     * record; wants is asked only of an active sink. NULL: always. */
    int (*active)(void);
    /* Whether it takes a record that began at ticks (the trace's step
     * window, PROF_TRACE_STEPS); NULL: every record. */
    int (*wants)(uint64_t ticks);
    void (*zone)(const struct prof_event *e);
    void (*counter)(const struct prof_event *e, double value);
    void (*mark)(const struct prof_event *e);
    void (*step)(const struct prof_event *e, uint64_t step);
    /* A GPU zone, its stage and its CPU zone's stage, in GPU time placed
     * on the CPU clock. */
    void (*gpu_zone)(struct prof_stage *gpu, struct prof_stage *cpu, int device,
                     uint64_t stream, uint64_t start_ns, uint64_t end_ns);
    /* PROF_CUDA=kernels: a kernel (memcpy, memset) that ran for the GPU
     * stage gpu (its CUDA zone's, or "(no zone)"'s), on CUPTI's stream id
     * `stream`; kname: its short name, interned (kernels.c). */
    void (*gpu_kernel)(struct prof_stage *gpu, int device, uint64_t stream, const char *kname,
                       uint64_t start_ns, uint64_t end_ns);
    /* A CUDA zone's record of t was taken: its GPU side runs on device
     * (-1: the driver did not say), or was lost on the application thread
     * (-2 - its cause, enum prof_cuda_lost_cause). */
    void (*gpu_launch)(struct prof_thread *t, const char *raw_name, int device);
    /* A GPU side lost on the collector's side (cuda_poll.c), counted for
     * the stage raw_name with its cause (enum prof_cuda_lost_cause). */
    void (*gpu_lost)(const char *raw_name, int cause);
    /* An on-CPU sample of t (sampler.c), taken at ts_ns while a zone was
     * open: cpu_ns of the thread's CPU time since its previous sample. */
    void (*cpu_sample)(struct prof_thread *t, uint64_t ts_ns, uint64_t cpu_ns);
    /* t has exited, its last records taken: forget it. */
    void (*thread_gone)(struct prof_thread *t);
    /* s is about to be freed (prof_reset, PROF_SKIP_STEPS, fork). */
    void (*stage_gone)(struct prof_stage *s);
    /* After each drain of every ring (any thread's). */
    void (*pass_end)(uint64_t now_ns);
    /* Once per wake of the collector thread (periodic outputs). */
    void (*tick)(uint64_t now_ns);
    /* t lost records to its full ring, and loss.c said so on the log
     * (at most once a window): `lost` records, buffer_hint the PROF_BUFFER
     * that would have kept them. */
    void (*loss)(struct prof_thread *t, uint64_t lost, uint64_t buffer_hint, uint64_t ts_ns);
};

/* The sinks, NULL-terminated, in the order events reach them. The drain
 * owns the pointer; the output floor owns the list (sink.c) and the floor
 * above installs it when the runtime starts (prof_sinks_install), so that
 * nothing here names an output. Until then only the statistics are fed
 * (prof_sinks_collect: what the collect floor itself provides). */
extern const struct prof_sink *const *prof_sinks;

/* Nonzero while gpu_zone is handed a zone whose GPU side is the span of
 * its kernels (PROF_CUDA=kernels): the busy share takes the kernels
 * themselves (gpu_kernel) instead. drain_gpu.c's. */
extern int prof_gpu_from_kernels;
extern const struct prof_sink *const prof_sinks_collect[];

/* sink.c: sets prof_sinks to every output's sink, in order. Runtime lock
 * held, or before any thread records. */
void prof_sinks_install(void);

#endif
