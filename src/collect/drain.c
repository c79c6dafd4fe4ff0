/* drain.c - the drain (drain.h): every ring read, each record resolved
 * once and handed to the sinks.
 *
 * Per thread, records arrive in the order their zones ended, so a zone's
 * children (which end first) have already been seen when it arrives, and
 * its self time is its duration minus what its children at depth + 1 added
 * up to since. Nothing waits for a parent to end. */
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "clock.h"
#include "cuda.h"
#include "dispatch.h"
#include "kernels.h"
#include "drain.h"
#include "drain_gpu.h"
#include "drain_window.h"
#include "env.h"
#include "loss.h"
#include "map.h"
#include "registry.h"
#include "ring.h"
#include "runtime.h"
#include "sampler.h"
#include "selftime.h"
#include "side.h"
#include "sink.h"
#include "stats.h"
#include "uncovered.h"
#include "zone.h"

/* How a step window is cut and its summary marked due: drain_window.c. */
int prof_drain_exact_steps;     /* set around the collector thread's drain */
int prof_drain_stopped;         /* a drain stopped at a due step */

/* The wall time of a window (and of the run) reaches back to the earliest
 * start of what it counts: a zone that began before a cut (another
 * thread's, cut where the drain is; one open across a reset) counts whole
 * where it ended, so its window must cover it whole, or a stage on one
 * thread shows more than 100% of the window's wall time. */
static void wall_cover_locked(uint64_t start_ns)
{
    if (start_ns < prof_rt.window_start_ns)
        prof_rt.window_start_ns = start_ns;
    if (start_ns < prof_rt.start_ns)
        prof_rt.start_ns = start_ns;
}

/* The sinks the drain feeds (sink.h): the statistics alone until the
 * floor above installs the outputs' list. */
const struct prof_sink *const prof_sinks_collect[] = {&prof_stats_sink, NULL};
const struct prof_sink *const *prof_sinks = prof_sinks_collect;

/* What a drain of one ring decides once, not per record: the thread's
 * children sums (selftime.c's, one pointer for the pass), the sinks that
 * take zones now (a trace that is off costs nothing per record), and
 * whether the thread lost records in this window (its stages are marked
 * short). */
#define MAX_SINKS 8
struct drain_ctx {
    struct prof_self_thread *self;   /* the thread's children sums */
    /* Its time outside every zone: the drain's side state's, copied in for
     * the pass and back at its end (drain_ctx_end), so that the depth-0
     * zone that reads and writes it costs what a field of the slot cost
     * (a pointer to it would add a load to every such zone). */
    struct prof_uncovered uncov;
    const struct prof_sink *zone_sinks[MAX_SINKS];
    int nzone;
    int lossy;
    int need_start;              /* a zone sink other than the statistics
                                    (which do not read start_ns) */
    uint64_t min_start;          /* the earliest zone start taken since the
                                    last wall_flush, in ticks */
    uint64_t forget_below;       /* forget_at's position for the thread */
    int stale;                   /* the record being taken lies below it */
    uint64_t uncov_ticks;        /* PROF_UNCOVERED_SLICE_NS in ticks */
    struct prof_clock_map cm;
    int cpu_unsampled;           /* the sampler is installed and the
                                    thread has no timer (sink.h) */
};

/* prof_reset() does not drain the rings: the records they held when it
 * was called (below the head it read, per thread) are forgotten by the
 * statistics as the drain reaches them, and still given to the other
 * sinks (the trace keeps every zone). So a reset waits at most for the
 * drain under way, never for the rings that threads recording flat out
 * keep full. Positions, not times: records carry whatever ticks their
 * source gives. Thread -> head at the reset (a ring position; NULL once
 * the drain has passed it or the thread is gone). */
static struct prof_map forget_at;

/* A thread's losses already counted: the drops and refusals of its ring
 * at its last drain (or at a reset, whose losses are forgotten); its time
 * outside every zone (uncovered.h). The drain's side state of the slot
 * (side.h), made at its first drain or reset. */
struct drain_thread {
    struct prof_side side;
    uint64_t dropped_seen, refused_seen;
    struct prof_uncovered uncov;
};
static struct prof_sides drain_threads = PROF_SIDES_INIT(PROF_SIDE_DRAIN, struct drain_thread);

static void drain_thread_gone(struct prof_thread *t)
{
    struct drain_thread *dt = prof_side_of(&drain_threads, t);

    if (dt != NULL)
        prof_side_free(&drain_threads, dt);
}

static void drain_ctx_init(struct drain_ctx *dc, struct prof_thread *t, struct drain_thread *dt)
{
    dc->nzone = dc->need_start = 0;
    for (const struct prof_sink *const *k = prof_sinks; *k != NULL; k++)
        if ((*k)->zone != NULL && ((*k)->active == NULL || (*k)->active()) &&
            dc->nzone < MAX_SINKS) {
            dc->zone_sinks[dc->nzone++] = *k;
            dc->need_start |= *k != &prof_stats_sink;
        }
    dc->self = prof_self_thread(t);
    dc->uncov = dt->uncov;
    dc->min_start = UINT64_MAX;
    dc->lossy = prof_loss_thread_lossy(t);
    /* A thread whose timer was never set up, or every thread once the
     * program took the signal over. (An exited thread's timer is gone,
     * but its last records were sampled.) */
    dc->cpu_unsampled = prof_sampler_installed() &&
                        (!prof_sampler_on() || !__atomic_load_n(&t->cpu_ever, __ATOMIC_RELAXED));
    dc->forget_below = forget_at.len ? (uint64_t)(uintptr_t)prof_map_get(&forget_at,
                                                                       (uintptr_t)t)
                                     : 0;
    dc->stale = 0;
}

static void drain_ctx_end(const struct drain_ctx *dc, struct drain_thread *dt)
{
    dt->uncov = dc->uncov;
}

/* The wall time covers the zones taken since the last call (see
 * wall_cover_locked): once per drain, and before a step record (a
 * warm-up's end starts the wall time afresh there). */
static void wall_flush(struct drain_ctx *dc)
{
    if (dc->min_start != UINT64_MAX) {
        wall_cover_locked(prof_clock_map_ns(&dc->cm, dc->min_start));
        dc->min_start = UINT64_MAX;
    }
}

/* Time on t between from and to (ticks) that no zone covers (uncovered.h):
 * a zone of the stage "(no stage)" at depth 0 for every sink when it is
 * long enough to draw; a shorter one only adds to the thread's sum, which
 * the statistics take as one zone at the end of the thread's drain or at
 * its step (uncovered_flush): a thread of back-to-back zones would
 * otherwise add a stage update to each of its records (4x the drain's
 * cost a record over 100,000 stages; docs/BENCHMARKS.md). The window's
 * wall time reaches back to its start, as for a zone. */
static void take_uncovered(struct prof_thread *t, uint64_t from, uint64_t to,
                           struct drain_ctx *dc)
{
    struct prof_event e = {
        .thread = t,
        .raw = prof_no_stage,
        .parent = PROF_PATH_ROOT_,
    };

    if (from < dc->min_start)
        dc->min_start = from;
    if (to - from < dc->uncov_ticks) {
        dc->uncov.uncov_short += to - from;
        return;
    }
    if ((e.stage = prof_stats_zone_stage(prof_no_stage, PROF_PATH_ROOT_, &e.node)) == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    e.dur_ns = e.self_ns = prof_clock_map_delta(&dc->cm, to - from);
    e.start_ns = prof_clock_map_ns(&dc->cm, from);
    for (int i = 0; i < dc->nzone; i++)
        if (dc->zone_sinks[i]->wants == NULL || dc->zone_sinks[i]->wants(from))
            dc->zone_sinks[i]->zone(&e);
}

/* The short spans of uncovered time summed since the last call: one zone
 * of "(no stage)" for the statistics (no slice: too short to draw). */
static void uncovered_flush(struct prof_thread *t, struct drain_ctx *dc)
{
    struct prof_event e = {.thread = t, .raw = prof_no_stage, .parent = PROF_PATH_ROOT_};

    if (dc->uncov.uncov_short == 0)
        return;
    e.dur_ns = e.self_ns = prof_clock_map_delta(&dc->cm, dc->uncov.uncov_short);
    dc->uncov.uncov_short = 0;
    if ((e.stage = prof_stats_zone_stage(prof_no_stage, PROF_PATH_ROOT_, &e.node)) == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    prof_stats_sink.zone(&e);
}

/* A zone: its self time, its stage (resolved here once for every sink).
 * Its start in ns only for a sink that reads it (the trace): the
 * statistics need durations. */
static void take_zone(struct prof_thread *t, const prof_record_ *r, struct drain_ctx *dc)
{
    struct prof_event e = {
        .thread = t,
        .raw = r->name,
        .start_ns = dc->need_start ? prof_clock_map_ns(&dc->cm, r->start) : 0,
        .dur_ns = r->end > r->start ? prof_clock_map_delta(&dc->cm, r->end - r->start) : 0,
        .parent = r->parent,
        .depth = r->depth,
        .lane = r->kind >> PROF_RECORD_LANE_SHIFT_,
    };
    int err = e.lane ? prof_self_lane_zone(t, e.lane, e.depth, r->start, r->end, e.dur_ns,
                                           &e.self_ns)
                     : prof_self_zone(dc->self, e.depth, r->start, r->end, e.dur_ns, &e.self_ns);
    uint64_t from;

    if (e.depth == 0 && e.lane == 0 && !dc->stale &&
        (from = prof_uncovered_zone(&dc->uncov, r->start, r->end)) != 0)
        take_uncovered(t, from, r->start, dc);

    /* Its on-CPU samples (sampler.c), which came before it in the ring. */
    e.cpu_ns = prof_self_cpu_take(dc->self, e.depth, r->start, &e.peak_bytes);
    e.cpu_unsampled = dc->cpu_unsampled;

    if (err == 0 && dc->stale) {
        /* Ended before prof_reset(): for the sinks other than the
         * statistics, and no stage is made for it unless one takes it. */
        int i = 0;

        while (i < dc->nzone && dc->zone_sinks[i] == &prof_stats_sink)
            i++;
        if (i == dc->nzone)
            return;
        if ((e.stage = prof_stats_zone_stage(r->name, r->parent, &e.node)) == NULL) {
            prof_rt.lost_memory++;
            return;
        }
        for (; i < dc->nzone; i++)
            if (dc->zone_sinks[i] != &prof_stats_sink &&
                (dc->zone_sinks[i]->wants == NULL || dc->zone_sinks[i]->wants(r->start)))
                dc->zone_sinks[i]->zone(&e);
        return;
    }
    if (err != 0 || (e.stage = prof_stats_zone_stage(r->name, r->parent, &e.node)) == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    if (dc->lossy)
        e.stage->flags |= PROF_STAGE_LOSSY | PROF_STAGE_LOSSY_WIN_;
    if (r->start < dc->min_start)
        dc->min_start = r->start;
    for (int i = 0; i < dc->nzone; i++)
        if (dc->zone_sinks[i]->wants == NULL || dc->zone_sinks[i]->wants(r->start))
            dc->zone_sinks[i]->zone(&e);
}

static void skip_warm_up(uint64_t at_ns)
{
    prof_stats_reset();
    prof_rt.start_ns = prof_rt.window_start_ns = at_ns;
    prof_rt.window_start_step = prof_config_get()->skip_steps;
    prof_rt.dropped = prof_rt.dropped_window = 0;
    prof_loss_reset();
}

static void take_record(struct prof_thread *t, const prof_record_ *r, struct drain_ctx *dc)
{
    const struct prof_clock_map *cm = &dc->cm;
    struct prof_event e;
    uint64_t from;
    double v;
    int device;

    /* Nearly every record is a zone: its event is made in take_zone. */
    if ((r->kind & PROF_RECORD_KIND_MASK_) == PROF_RECORD_ZONE_) {
        take_zone(t, r, dc);
        return;
    }
    memset(&e, 0, sizeof e);
    e.thread = t;
    e.raw = r->name;
    switch (r->kind & PROF_RECORD_KIND_MASK_) {
    case PROF_RECORD_COUNTER_:
        memcpy(&v, &r->end, sizeof v);
        e.start_ns = prof_clock_map_ns(cm, r->start);
        if (dc->stale)
            SINKS_TAKE_STALE(counter, r->start, &e, v);
        else
            SINKS_TAKE(counter, r->start, &e, v);
        break;
    case PROF_RECORD_MARK_:
        e.start_ns = prof_clock_map_ns(cm, r->start);
        if (dc->stale)
            SINKS_TAKE_STALE(mark, r->start, &e);
        else
            SINKS_TAKE(mark, r->start, &e);
        break;
    case PROF_RECORD_STEP_:
        /* Before the step: a warm-up's end forgets what came before. */
        if (!dc->stale && (from = prof_uncovered_step(&dc->uncov, r->start, r->depth)) != 0)
            take_uncovered(t, from, r->start, dc);
        e.start_ns = prof_clock_map_ns(cm, r->start);
        if (r->end == prof_config_get()->skip_steps)
            skip_warm_up(e.start_ns);
        /* Marked due here, formatted after the drain loop. On the
         * collector thread the drain stops right after this record (see
         * prof_drain_due_step_), so the summary is cut exactly at the step on the
         * thread that counts steps: its zones before the step are in the
         * window, the ones after are not. (Other threads are cut where the
         * drain happens to be; merged windows where the drain ended.) */
        if (prof_config_get()->every_steps && r->end % prof_config_get()->every_steps == 0 &&
            r->end > prof_rt.summary_step_done) {
            prof_rt.summary_step_done = r->end;
            prof_drain_window_hold_locked(t, r, e.start_ns);
        }
        SINKS_TAKE(step, r->start, &e, r->end);
        break;
    case PROF_RECORD_CUDA_:
        device = prof_cuda_submit(r);
        SINKS_ALL(gpu_launch, t, r->name, device);
        break;
    case PROF_RECORD_KZONE_:
        device = prof_kernels_zone(t, r->name, (uint32_t)r->end, r->depth, (int)(r->end >> 32),
                                   prof_clock_map_ns(cm, r->start));
        if (r->end >> 32)
            SINKS_ALL(gpu_launch, t, r->name, device);
        break;
    case PROF_RECORD_GAP_:
        prof_self_gap(dc->self);
        break;
    case PROF_RECORD_CPU_:
        if (prof_self_cpu_sample(dc->self, r->depth, r->start, r->end) != 0)
            prof_rt.lost_memory++;
        SINKS_TAKE(cpu_sample, r->start, t, prof_clock_map_ns(cm, r->start), r->end);
        break;
    case PROF_RECORD_PEAK_:
        if (prof_self_peak_sample(dc->self, r->depth, r->end) != 0)
            prof_rt.lost_memory++;
        break;
    default:
        break;
    }
}

/* When the last drain of every ring ended: how far behind the collector
 * was when a drain finds a loss. */
static uint64_t last_collect_ns;

/* Returns 1 when it stopped at a due step (prof_drain_exact_steps) with records left. */
static int drain(struct prof_thread *t)
{
    /* The ring's reader protocol (ring.h): records up to head were fully
     * written by their thread; once released, the thread may reuse them. */
    struct prof_ring_reader rd;
    struct drain_ctx dc;
    struct drain_thread *dt = prof_side_get(&drain_threads, t);
    const prof_record_ *r;
    uint64_t lost, hint, taken = 0;

    /* No memory for its state: its records wait for a pass that has some. */
    if (dt == NULL)
        return 1;
    /* Read before head: every loss counted here lies before a record
     * this drain takes, so the stages those records hold are marked. */
    lost = prof_ring_dropped(&t->hot);
    prof_clock_map_get(&dc.cm);
    prof_ring_read(&t->hot, &rd);
    if (lost != dt->dropped_seen) {
        /* How far behind: the age of the oldest record waiting, else the
         * time since the last drain. */
        struct prof_ring_reader peek = rd;
        const prof_record_ *first = prof_ring_next(&peek);
        uint64_t now = prof_clock_now_ns(), then = last_collect_ns;

        if (first != NULL && (first->kind == PROF_RECORD_ZONE_ ? first->end : first->start) != 0)
            then = prof_clock_map_ns(&dc.cm, first->kind == PROF_RECORD_ZONE_ ? first->end
                                                                            : first->start);
        hint = prof_loss_note(t, lost - dt->dropped_seen, then && now > then ? now - then : 0,
                              now);
        if (hint != 0)
            SINKS_ALL(loss, t, lost - dt->dropped_seen, hint, now);
        prof_rt.dropped += lost - dt->dropped_seen;
        prof_rt.dropped_window += lost - dt->dropped_seen;
        dt->dropped_seen = lost;
    }
    drain_ctx_init(&dc, t, dt);
    dc.uncov_ticks = dc.cm.ns_per_tick > 0
                         ? (uint64_t)((double)PROF_UNCOVERED_SLICE_NS / dc.cm.ns_per_tick)
                         : PROF_UNCOVERED_SLICE_NS;
    while ((r = prof_ring_next(&rd)) != NULL) {
        /* A held window ends before the first record of the next one: on
         * the collector thread the drain stops there, unread, so that the
         * summary is cut exactly (as at a due STEP record below). */
        if (prof_drain_window_check_locked(t, r) && prof_drain_exact_steps &&
            rd.head - rd.tail + 1 <= t->hot.warm / 4) {
            rd.tail--;
            prof_ring_release(&t->hot, rd.tail);
            uncovered_flush(t, &dc);
            wall_flush(&dc);
            drain_ctx_end(&dc, dt);
            prof_drain_stopped = 1;
            return 1;
        }
        dc.stale = rd.tail <= dc.forget_below;
        if ((r->kind & PROF_RECORD_KIND_MASK_) == PROF_RECORD_STEP_)
            wall_flush(&dc);
        take_record(t, r, &dc);
        /* The warm-up's last step (PROF_SKIP_STEPS) forgets the losses. */
        if ((r->kind & PROF_RECORD_KIND_MASK_) == PROF_RECORD_STEP_)
            dc.lossy = prof_loss_thread_lossy(t);
        /* Give slots back as it goes: a drain of a ring filled while the
         * collector was away takes milliseconds, and a thread recording
         * meanwhile needs the slots already read, not only the ones left
         * when it began (100k records after a 100 ms absence at 1 M/s:
         * released only at the end, the ring overflowed during the drain). */
        if ((++taken & 4095) == 0)
            prof_ring_release(&t->hot, rd.tail);
        /* Stop at the step whose summary is due, unless the ring holds
         * more than a quarter of its warm slots: then the summaries merge
         * rather than keep the records waiting. */
        if (prof_drain_exact_steps && prof_drain_due_step_ != 0 &&
            r->kind == PROF_RECORD_STEP_ && r->end == prof_drain_due_step_ &&
            rd.head - rd.tail > 0 && rd.head - rd.tail <= t->hot.warm / 4) {
            prof_ring_release(&t->hot, rd.tail);
            wall_flush(&dc);
            drain_ctx_end(&dc, dt);
            prof_drain_stopped = 1;
            return 1;
        }
    }
    prof_ring_release(&t->hot, rd.tail);
    uncovered_flush(t, &dc);
    wall_flush(&dc);
    drain_ctx_end(&dc, dt);
    if (dc.forget_below != 0 && rd.tail >= dc.forget_below)
        prof_map_put(&forget_at, (uintptr_t)t, NULL);

    lost = __atomic_load_n(&t->hot.refused, __ATOMIC_RELAXED);
    if (lost != dt->refused_seen) {
        prof_rt.dropped += lost - dt->refused_seen;
        prof_rt.dropped_window += lost - dt->refused_seen;
        dt->refused_seen = lost;
    }
    return 0;
}

void prof_drain_locked(void)
{
    struct prof_thread **link = &prof_threads;
    uint64_t lost;

    /* A step record is pushed before its summary is marked due, so once this
     * drain is over, the record of this step has been taken unless a full
     * ring dropped it (prof_periodic_locked). */
    prof_rt.step_due_drained = __atomic_load_n(&prof_summary_step_due, __ATOMIC_ACQUIRE);
    prof_drain_stopped = 0;
    if (prof_config_get()->cuda == PROF_CUDA_KERNELS)
        prof_kernels_pass_begin();
    prof_clock_calibrate();
    prof_registry_splice_locked();
    /* A program that took the sampler's signal over stops it here. */
    prof_sampler_check_locked(prof_threads);
    while (*link != NULL) {
        struct prof_thread *t = *link;
        /* Acquire pairs with thread_exited(): read before the last drain. */
        int exited = __atomic_load_n(&t->exited, __ATOMIC_ACQUIRE);

        /* A ring left at a due step keeps its thread for the next drain. */
        if (drain(t) == 0 && exited) {
            prof_drain_window_thread_gone_locked(t);
            SINKS_ALL(thread_gone, t);
            prof_self_thread_gone(t);
            prof_loss_thread_gone(t);
            drain_thread_gone(t);
            if (forget_at.len)
                prof_map_put(&forget_at, (uintptr_t)t, NULL);
            *link = t->next;
            prof_thread_free(t);
        } else {
            prof_registry_repair_pending(t);
            link = &t->next;
        }
    }
    prof_drain_window_pass_end_locked();
    prof_drain_gpu_poll_locked();
    lost = prof_cuda_lost() + prof_kernels_lost();
    if (lost != prof_rt.cuda_lost_seen) {
        /* GPU sides that could not be timed count as dropped records. */
        prof_rt.dropped += lost - prof_rt.cuda_lost_seen;
        prof_rt.dropped_window += lost - prof_rt.cuda_lost_seen;
        prof_rt.cuda_lost_seen = lost;
    }
    /* Losses counted outside the rings: zones ended on another thread,
     * records of a thread with no ring (registry.h), records the
     * collector had no memory for. All are shown as dropped. */
    lost = __atomic_load_n(&prof_zones_foreign, __ATOMIC_RELAXED) +
           __atomic_load_n(&prof_records_unattached, __ATOMIC_RELAXED) + prof_rt.lost_memory +
           prof_stats_hist_lost;
    if (lost != prof_rt.loss_seen) {
        prof_rt.dropped += lost - prof_rt.loss_seen;
        prof_rt.dropped_window += lost - prof_rt.loss_seen;
        prof_rt.loss_seen = lost;
    }
    SINKS_ALL(pass_end, prof_clock_now_ns());
    last_collect_ns = prof_clock_now_ns();
}

void prof_drain_tick(uint64_t now_ns)
{
    SINKS_ALL(tick, now_ns);
}

void prof_drain_atfork_child(void)
{
    const struct prof_thread *self = (const struct prof_thread *)prof_thread_self_;
    struct drain_thread *dt;

    prof_drain_window_atfork_child();
    prof_map_clear(&forget_at);  /* the parent's threads, gone here */
    /* The caller's losses counted and its time outside every zone are the
     * parent's (whether it steps is kept). */
    if ((dt = prof_side_atfork_child(&drain_threads, self, NULL)) != NULL) {
        dt->dropped_seen = dt->refused_seen = 0;
        dt->uncov.top_end = dt->uncov.uncov_short = 0;
    }
}

void prof_collect_forget_locked(void)
{
    struct prof_thread *t;
    struct drain_thread *dt;

    prof_registry_splice_locked();
    prof_map_clear(&forget_at);
    /* Losses counted so far are the forgotten run's: the next drain
     * counts (and says) only the ones after the reset. */
    for (t = prof_threads; t != NULL; t = t->next) {
        /* Acquire, as a drain reads it: the records below are whole. */
        uint64_t head = __atomic_load_n(&t->hot.head, __ATOMIC_ACQUIRE);

        /* Out of memory: those records count after the reset, as when
         * a reset drained them. */
        if (head != t->hot.tail)
            (void)prof_map_put(&forget_at, (uintptr_t)t, (void *)(uintptr_t)head);
        if ((dt = prof_side_get(&drain_threads, t)) != NULL) {
            /* Outside stages: from the next zone. (No memory for its
             * state: the state made later starts there too.) */
            dt->uncov.top_end = dt->uncov.uncov_short = 0;
            dt->dropped_seen = prof_ring_dropped(&t->hot);
            dt->refused_seen = __atomic_load_n(&t->hot.refused, __ATOMIC_RELAXED);
        }
    }
    prof_rt.cuda_lost_seen = prof_cuda_lost() + prof_kernels_lost();
    prof_rt.loss_seen = __atomic_load_n(&prof_zones_foreign, __ATOMIC_RELAXED) +
                        __atomic_load_n(&prof_records_unattached, __ATOMIC_RELAXED) +
                        prof_rt.lost_memory + prof_stats_hist_lost;
}
