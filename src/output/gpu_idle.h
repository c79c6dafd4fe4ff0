/* gpu_idle.h - which CPU stage a GPU waited for (gpu_idle.c).
 *
 * The ML profiling checklist's bottleneck check: a thread whose CUDA zone
 * the drain takes is a launcher of its device; its CPU zones are held
 * until a summary, then each one's overlap with its device's idle time,
 * less its children's, is added to its stage. gpu_busy.c, which owns the
 * devices' tracks, calls everything here with the runtime lock held. */
#ifndef PROF_GPU_IDLE_H
#define PROF_GPU_IDLE_H

#include <stddef.h>
#include <stdint.h>

struct prof_event;
struct prof_stage;
struct prof_thread;
struct prof_gpu_track;

#define GPU_STAGES 16               /* stages named per device in the check */

struct prof_gpu_idle_stage {
    struct prof_stage *stage;
    uint64_t ns;
};

/* Where the launchers were while the GPU was idle. */
struct prof_gpu_idle {
    struct prof_gpu_idle_stage st[GPU_STAGES];
    uint64_t other_ns;              /* stages beyond GPU_STAGES */
};

/* into += from, stage by stage. */
void prof_gpu_idle_merge(struct prof_gpu_idle *into, const struct prof_gpu_idle *from);

/* The stage with the most idle time, and that time; NULL: none. */
const struct prof_gpu_idle_stage *prof_gpu_idle_top(const struct prof_gpu_idle *d);

/* Stage s is gone: its time counts as other stages' in d. */
void prof_gpu_idle_forget(struct prof_gpu_idle *d, const struct prof_stage *s);

/* Thread t launched GPU work on device: from now on its CPU zones are
 * held for the check (unless PROF_GPU_CHECK=0 or it already is). */
void prof_gpu_idle_launcher(struct prof_thread *t, int device);

/* Nonzero once a thread has launched GPU work (sink.h's active). */
int prof_gpu_idle_active(void);

/* A CPU zone the drain took: held when its thread is a launcher. When the
 * held zones fill, the older half is settled on tracks[0..ntracks) with
 * win_lo the current window's start. */
void prof_gpu_idle_zone(const struct prof_event *e, struct prof_gpu_track *tracks, int ntracks,
                        uint64_t win_lo);

/* Settle every held zone: each one's idle overlap goes to its device
 * track's idle_win. */
void prof_gpu_idle_settle(struct prof_gpu_track *tracks, int ntracks, uint64_t win_lo);

/* Thread t ends: its zones are settled, its launcher state freed. */
void prof_gpu_idle_thread_gone(struct prof_thread *t, struct prof_gpu_track *tracks, int ntracks,
                               uint64_t win_lo);

/* Stage s is gone: its held zones are dropped. */
void prof_gpu_idle_stage_gone(const struct prof_stage *s);

/* Drop every held zone unsettled (a reset, a forked child). */
void prof_gpu_idle_drop_held(void);

#endif
