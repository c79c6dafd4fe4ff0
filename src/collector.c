/* collector.c - the collector thread and the drain.
 *
 * The thread sleeps on the wake word (wake.h) for PROF_COLLECT_PERIOD_NS
 * (or less when a timed summary is due), is woken early by prof_step when
 * a step summary is due and by any thread whose ring is half full, and on
 * each wake, under the runtime lock, drains every
 * ring: per thread, records arrive in the order their zones ended, so a
 * zone's children (which end first) have already been seen when it
 * arrives, and its self time is its duration minus what its children at
 * depth + 1 added up to since. Nothing waits for a parent to end. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof.h"
#include "children.h"
#include "clock.h"
#include "collector.h"
#include "cuda.h"
#include "env.h"
#include "fdio.h"
#include "live.h"
#include "log.h"
#include "loss.h"
#include "process.h"
#include "ranks.h"
#include "map.h"
#include "registry.h"
#include "ring.h"
#include "sigchain.h"
#include "runtime.h"
#include "stats.h"
#include "trace.h"
#include "wake.h"
#include "zone.h"

int prof_pending_signal;

/* Step summaries (PROF_SUMMARY_EVERY=Nsteps). A STEP record that ends a
 * window only marks its summary due (due_step, and where the next window
 * starts, due_cut_ns); the summary is formatted after the drain loop and
 * written before the collector drains again, so that what is held for
 * summaries is one at a time, whatever the step rate. On the collector
 * thread (exact_steps) a drain stops at a due STEP record while its ring
 * has little else waiting, so each window is cut exactly at its step and
 * gets its own summary; when the summaries cannot keep up (more waiting),
 * and in a drain for prof_flush or the exit, it goes on through the due
 * steps, and the one summary after the drain is labelled with the last of
 * them and covers every window since the last summary (merged_windows).
 * Never does a summary make the collector leave records in a ring. */
static uint64_t due_step, due_cut_ns;
static int exact_steps;          /* set around the collector thread's drain */
static int drain_stopped;        /* a drain stopped at a due step */

static pthread_t collector_id;

static void summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t cut_ns);
/* Summaries are written with the runtime lock released; write_lock keeps
 * them whole and one at a time, and guards the summary file's state. */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static int summary_fd = -1;
static int summary_failed;       /* PROF_SUMMARY's file is not used: stderr instead */
static int summary_pid;          /* the process that opened summary_fd */
static char summary_name[4096];  /* the expanded path, for messages */
static int stdout_failed;        /* a write to stdout failed: stderr instead */

/* The collector has taken the runtime lock once (see
 * prof_collector_start_locked). */
static int collector_ready;
static pthread_cond_t collector_ready_cond = PTHREAD_COND_INITIALIZER;

/* Set while this thread runs the user's summary handler: the handler may
 * run on any thread that writes queued summaries (the collector, or one in
 * prof_flush / prof_shutdown), and with write_lock held there. */
static __thread int in_summary_handler __attribute__((tls_model("initial-exec")));

int prof_collector_is_self(void)
{
    /* Acquire pairs with the release in prof_collector_start_locked: a
     * thread that sees running also sees collector_id. */
    return in_summary_handler ||
           (__atomic_load_n(&prof_rt.collector_running, __ATOMIC_ACQUIRE) &&
            pthread_equal(pthread_self(), collector_id));
}

static int traced(uint64_t ticks)
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

/* Self time. Within a thread zones nest, so the zones that ended at depth
 * d + 1 since the last zone at depth d are its children. Code that ends
 * zones out of order (Python generators and asyncio tasks) can leave a zone
 * at depth d + 1 ending after its parent; such time is not subtracted from
 * the next zone at depth d, because it does not lie inside it. Nor are the
 * children seen before a loss of records if they do not lie inside it: their
 * parent was lost (dropped with a full ring), and without the GAP record
 * that separates them the zone's own children would go unsubtracted too. */
static uint64_t take_children(struct prof_thread *t, uint32_t d, uint64_t start, uint64_t end,
                              uint64_t dur)
{
    struct prof_children *c = &t->child[d], *in = &t->child[d + 1];
    uint64_t children = 0;

    if (in->last != 0 && in->first >= start && in->last <= end)
        children += in->ns;
    if (in->before_last != 0 && in->before_first >= start && in->before_last <= end)
        children += in->before_ns;
    in->ns = in->before_ns = 0;
    in->last = in->before_last = 0;    /* empty: no zone ends at tick 0 */
    if (c->last == 0 || start < c->first)
        c->first = start;
    if (end > c->last)
        c->last = end;
    c->ns += dur;
    return children;
}

/* A GAP record: the children seen so far at every depth ended before the
 * loss. (Two losses with no parent between them merge into one span.) */
static void take_gap(struct prof_thread *t)
{
    for (uint32_t d = 0; d < t->child_cap; d++) {
        struct prof_children *c = &t->child[d];

        if (c->last == 0)
            continue;
        if (c->before_last == 0 || c->first < c->before_first)
            c->before_first = c->first;
        if (c->last > c->before_last)
            c->before_last = c->last;
        c->before_ns += c->ns;
        c->ns = 0;
        c->last = 0;
    }
}

/* Room for depths [0, d + 1]: the per-depth sums grow with the deepest
 * zone seen (at most PROF_DEPTH_LIMIT_ levels), never with the run. */
static int children_room(struct prof_thread *t, uint32_t d)
{
    size_t old = (size_t)t->child_cap * sizeof *t->child, bytes = old ? old : 4096;
    void *c;

    if (d + 2 <= t->child_cap)
        return 0;
    while (bytes < (d + 2) * sizeof *t->child)
        bytes *= 2;
    /* Mapped, like the thread state that points to it (so that leak
     * checkers, which do not look inside mappings, never see a heap block
     * whose only pointer they cannot find); new pages come zeroed. */
    c = old ? mremap(t->child, old, bytes, MREMAP_MAYMOVE)
            : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        return -ENOMEM;
    t->child = c;
    t->child_cap = (uint32_t)(bytes / sizeof *t->child);
    return 0;
}

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

static void take_zone(struct prof_thread *t, const prof_record_ *r,
                      const struct prof_clock_map *cm)
{
    uint32_t d = r->depth;
    uint64_t dur = r->end > r->start ? prof_clock_map_delta(cm, r->end - r->start) : 0;
    uint64_t children;
    struct prof_stage *s;

    if (children_room(t, d) != 0) {
        prof_rt.lost_memory++;
        return;
    }
    children = take_children(t, d, r->start, r->end, dur);

    if ((s = prof_stats_stage(r->name, 0)) == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    if (prof_loss_thread_lossy(t))
        s->flags |= PROF_STAGE_LOSSY | PROF_STAGE_LOSSY_WIN_;
    prof_stats_zone(s, r->parent, r->name, dur, children < dur ? dur - children : 0);
    wall_cover_locked(prof_clock_map_ns(cm, r->start));
    if (traced(r->start))
        prof_trace_zone(t, s, r->name, prof_clock_map_ns(cm, r->start), dur, r->depth);
}

/* PROF_SKIP_STEPS=N: at the Nth step every statistic starts afresh, as
 * with prof_reset(), cut where the step's record is (other threads' zones
 * where the drain is), so warm-up counts in no average, percentile or
 * window. */
/* A zone of a lane (an asyncio task, registry.h): its children are the
 * lane's zones one level down, not those of other tasks that ran on the
 * thread meanwhile, so each lane keeps its own per-depth sums, found by
 * (thread, lane, depth). Bounded: lanes are reused, depths are the
 * task's. */
static struct prof_map lane_children;
static size_t lane_live;   /* values in lane_children (the map cannot delete) */

static struct prof_children *lane_child(const struct prof_thread *t, uint32_t lane, uint32_t d)
{
    uint64_t key = ((uint64_t)(t->index + 1) << 32) | (uint64_t)lane << 16 | (d & 0xffff);
    struct prof_children *c = prof_map_get(&lane_children, key);

    if (c == NULL) {
        if ((c = calloc(1, sizeof *c)) == NULL)
            return NULL;
        if (prof_map_put(&lane_children, key, c) != 0) {
            free(c);
            return NULL;
        }
        lane_live++;
    }
    return c;
}

static void take_lane_zone(struct prof_thread *t, const prof_record_ *r,
                           const struct prof_clock_map *cm)
{
    uint32_t lane = r->kind >> PROF_RECORD_LANE_SHIFT_, d = r->depth;
    uint64_t dur = r->end > r->start ? prof_clock_map_delta(cm, r->end - r->start) : 0;
    struct prof_children *c = lane_child(t, lane, d), *in = lane_child(t, lane, d + 1);
    uint64_t children = 0;
    struct prof_stage *s;

    if (c == NULL || in == NULL || (s = prof_stats_stage(r->name, 0)) == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    if (in->last != 0 && in->first >= r->start && in->last <= r->end)
        children = in->ns;
    in->ns = 0;
    in->last = 0;
    if (c->last == 0 || r->start < c->first)
        c->first = r->start;
    if (r->end > c->last)
        c->last = r->end;
    c->ns += dur;
    prof_stats_zone(s, r->parent, r->name, dur, children < dur ? dur - children : 0);
    wall_cover_locked(prof_clock_map_ns(cm, r->start));
    if (traced(r->start))
        prof_trace_lane_zone(t, lane, s, r->name, prof_clock_map_ns(cm, r->start), dur);
}

/* A thread's lanes go with it. */
static void lanes_gone(const struct prof_thread *t)
{
    for (size_t i = 0; i < lane_children.cap; i++) {
        if (lane_children.keys == NULL || lane_children.keys[i] == 0 ||
            lane_children.keys[i] >> 32 != (uint64_t)t->index + 1)
            continue;
        if (lane_children.values[i] != NULL)
            lane_live--;
        free(lane_children.values[i]);
        lane_children.values[i] = NULL;
    }
    if (lane_live == 0)
        prof_map_clear(&lane_children);
}

static void skip_warm_up(uint64_t at_ns)
{
    prof_stats_reset();
    prof_rt.start_ns = prof_rt.window_start_ns = at_ns;
    prof_rt.window_start_step = prof_config_get()->skip_steps;
    prof_rt.dropped = prof_rt.dropped_window = 0;
    prof_loss_reset();
}

/* A step window closes after the zones that were open at its step end.
 * The README's loop calls prof_step() last inside the iteration's zone, so
 * that zone ends just after the step: cut at the step record, it fell into
 * the next window (the first window held 99 of 100 iterations, the next
 * 101 and more than 100% of its wall time). So the summary of a step taken
 * with zones open is held until the stepping thread's first record that
 * begins at or after the step (its next iteration): the records before it
 * are the zones that were open at the step, ending. Held until the end of
 * the collector pass in which the stepping thread itself flushes (its
 * records are all in then), and at most WINDOW_HOLD_NS: a thread that
 * stays inside its zone after the step (blocked, or descheduled on a busy
 * machine) delays the summary that long, then its zone goes to the next
 * window, as an epoch's zone open across many steps always does. */
#define WINDOW_HOLD_NS 1000000000ull

static struct {
    struct prof_thread *t;       /* NULL: no window held */
    uint64_t step, cut_ns, cut_ticks;
    uint64_t since_ns;           /* when it was held */
} held;

/* The summary of the window that ends at step is due (formatted after
 * the drain). A later due step in the same drain merges with it. */
static void mark_due(uint64_t step, uint64_t cut_ns)
{
    due_step = step;
    due_cut_ns = cut_ns;
}

static void window_release_locked(void)
{
    struct prof_thread *t = held.t;

    if (t == NULL)
        return;
    held.t = NULL;
    /* A prof_reset() since the step began a fresh window after it. */
    if (held.step >= prof_rt.window_start_step)
        mark_due(held.step, held.cut_ns);
}

static void window_hold_locked(struct prof_thread *t, const prof_record_ *r, uint64_t cut_ns)
{
    window_release_locked();
    if (r->depth == 0) {
        mark_due(r->end, cut_ns);
        return;
    }
    held.t = t;
    held.step = r->end;
    held.cut_ns = cut_ns;
    held.cut_ticks = r->start;
    held.since_ns = prof_clock_now_ns();
}

/* Before a record of t is taken: whether it begins the held step's next
 * window (then the window is released: its summary is due). A GPU record
 * carries no time; a gap may hide anything. */
static int window_check_locked(const struct prof_thread *t, const prof_record_ *r)
{
    uint32_t kind = r->kind & PROF_RECORD_KIND_MASK_;

    if (held.t != t || kind == PROF_RECORD_CUDA_)
        return 0;
    if (kind == PROF_RECORD_STEP_ || kind == PROF_RECORD_GAP_ || r->start >= held.cut_ticks) {
        window_release_locked();
        return 1;
    }
    return 0;
}

/* At the end of a collector pass (self: the pass runs on a recording
 * thread, inside prof_flush or a stats call). */
static void window_pass_end_locked(void)
{
    if (held.t == NULL)
        return;
    if (prof_thread_self_ == &held.t->hot ||
        prof_clock_now_ns() - held.since_ns >= WINDOW_HOLD_NS)
        window_release_locked();
}

static void take_record(struct prof_thread *t, const prof_record_ *r,
                        const struct prof_clock_map *cm)
{
    double v;

    switch (r->kind & PROF_RECORD_KIND_MASK_) {
    case PROF_RECORD_ZONE_:
        if (r->kind >> PROF_RECORD_LANE_SHIFT_)
            take_lane_zone(t, r, cm);
        else
            take_zone(t, r, cm);
        break;
    case PROF_RECORD_COUNTER_:
        memcpy(&v, &r->end, sizeof v);
        prof_stats_counter(r->name, v);
        if (traced(r->start))
            prof_trace_counter(t, r->name, prof_clock_map_ns(cm, r->start), v);
        break;
    case PROF_RECORD_MARK_:
        prof_stats_mark(r->name);
        if (traced(r->start))
            prof_trace_instant(t, r->name, "mark", prof_clock_map_ns(cm, r->start), -1);
        break;
    case PROF_RECORD_STEP_:
        if (r->end == prof_config_get()->skip_steps)
            skip_warm_up(prof_clock_map_ns(cm, r->start));
        /* Marked due here, formatted after the drain loop. On the
         * collector thread the drain stops right after this record (see
         * due_step), so the summary is cut exactly at the step on the
         * thread that counts steps: its zones before the step are in the
         * window, the ones after are not. (Other threads are cut where the
         * drain happens to be; merged windows where the drain ended.) */
        if (prof_config_get()->every_steps && r->end % prof_config_get()->every_steps == 0 &&
            r->end > prof_rt.summary_step_done) {
            prof_rt.summary_step_done = r->end;
            window_hold_locked(t, r, prof_clock_map_ns(cm, r->start));
        }
        if (traced(r->start)) {
            char name[40];
            snprintf(name, sizeof name, "step %llu", (unsigned long long)r->end);
            prof_trace_instant(t, name, "step", prof_clock_map_ns(cm, r->start), (int64_t)r->end);
        }
        break;
    case PROF_RECORD_CUDA_:
        prof_cuda_submit(r);
        break;
    case PROF_RECORD_GAP_:
        take_gap(t);
        break;
    default:
        break;
    }
}

/* When the last drain of every ring ended: how far behind the collector
 * was when a drain finds a loss. */
static uint64_t last_collect_ns;

/* Returns 1 when it stopped at a due step (exact_steps) with records left. */
static int drain(struct prof_thread *t)
{
    /* The ring's reader protocol (ring.h): records up to head were fully
     * written by their thread; once released, the thread may reuse them. */
    struct prof_ring_reader rd;
    struct prof_clock_map cm;
    const prof_record_ *r;
    uint64_t lost, taken = 0;

    /* Read before head: every loss counted here lies before a record
     * this drain takes, so the stages those records hold are marked. */
    lost = prof_ring_dropped(&t->hot);
    prof_clock_map_get(&cm);
    prof_ring_read(&t->hot, &rd);
    if (lost != t->dropped_seen) {
        /* How far behind: the age of the oldest record waiting, else the
         * time since the last drain. */
        struct prof_ring_reader peek = rd;
        const prof_record_ *first = prof_ring_next(&peek);
        uint64_t now = prof_clock_now_ns(), then = last_collect_ns;

        if (first != NULL && (first->kind == PROF_RECORD_ZONE_ ? first->end : first->start) != 0)
            then = prof_clock_map_ns(&cm, first->kind == PROF_RECORD_ZONE_ ? first->end
                                                                         : first->start);
        prof_loss_note(t, lost - t->dropped_seen, then && now > then ? now - then : 0, now);
        prof_rt.dropped += lost - t->dropped_seen;
        prof_rt.dropped_window += lost - t->dropped_seen;
        t->dropped_seen = lost;
    }
    while ((r = prof_ring_next(&rd)) != NULL) {
        /* A held window ends before the first record of the next one: on
         * the collector thread the drain stops there, unread, so that the
         * summary is cut exactly (as at a due STEP record below). */
        if (window_check_locked(t, r) && exact_steps &&
            rd.head - rd.tail + 1 <= t->hot.warm / 4) {
            rd.tail--;
            prof_ring_release(&t->hot, rd.tail);
            drain_stopped = 1;
            return 1;
        }
        take_record(t, r, &cm);
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
        if (exact_steps && due_step != 0 && r->kind == PROF_RECORD_STEP_ && r->end == due_step &&
            rd.head - rd.tail > 0 && rd.head - rd.tail <= t->hot.warm / 4) {
            prof_ring_release(&t->hot, rd.tail);
            drain_stopped = 1;
            return 1;
        }
    }
    prof_ring_release(&t->hot, rd.tail);

    lost = __atomic_load_n(&t->hot.refused, __ATOMIC_RELAXED);
    if (lost != t->refused_seen) {
        prof_rt.dropped += lost - t->refused_seen;
        prof_rt.dropped_window += lost - t->refused_seen;
        t->refused_seen = lost;
    }
    return 0;
}

static void gpu_sink(void *ctx, const char *name, int device, uint64_t stream, uint64_t start_ns,
                     uint64_t end_ns)
{
    struct prof_stage *gpu = prof_stats_stage(name, PROF_STAGE_GPU);
    struct prof_stage *cpu = prof_stats_stage(name, 0);
    uint64_t dur = end_ns > start_ns ? end_ns - start_ns : 0;

    (void)ctx;
    if (gpu == NULL || cpu == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    prof_stats_gpu_zone(gpu, cpu, dur);
    if (prof_trace_active())
        prof_trace_gpu_zone(gpu, device, stream, start_ns, end_ns);
}

void prof_collect_locked(void)
{
    struct prof_thread **link = &prof_threads;
    uint64_t lost;

    /* A step record is pushed before its summary is marked due, so once this
     * drain is over, the record of this step has been taken unless a full
     * ring dropped it (prof_periodic_locked). */
    prof_rt.step_due_drained = __atomic_load_n(&prof_summary_step_due, __ATOMIC_ACQUIRE);
    drain_stopped = 0;
    prof_clock_calibrate();
    prof_registry_splice_locked();
    while (*link != NULL) {
        struct prof_thread *t = *link;
        /* Acquire pairs with thread_exited(): read before the last drain. */
        int exited = __atomic_load_n(&t->exited, __ATOMIC_ACQUIRE);

        /* A ring left at a due step keeps its thread for the next drain. */
        if (drain(t) == 0 && exited) {
            if (held.t == t)
                window_release_locked();
            prof_stats_thread_gone(t);
            lanes_gone(t);
            *link = t->next;
            prof_thread_free(t);
        } else {
            prof_registry_repair_pending(t);
            link = &t->next;
        }
    }
    window_pass_end_locked();
    prof_cuda_poll(gpu_sink, NULL);
    lost = prof_cuda_lost();
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
    if (prof_trace_active())
        prof_trace_dropped(prof_clock_now_ns(), prof_rt.dropped);
    prof_trace_flush();
    last_collect_ns = prof_clock_now_ns();
    if (due_step != 0) {
        summary_queue_locked(PROF_KIND_PERIODIC, due_step, due_cut_ns);
        due_step = 0;
    }
}

/* Whether PROF_TRACE, expanded in this process, names the file at path:
 * the same string, or (where both exist) the same inode. */
static int summary_is_trace(const char *path)
{
    const char *pattern = prof_config_get()->trace_path;
    char trace[4096];
    struct stat a, b;

    if (pattern == NULL || prof_path_expand(pattern, trace, sizeof trace) != 0)
        return 0;
    if (strcmp(trace, path) == 0)
        return 1;
    return stat(trace, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static int summary_target(void)
{
    const struct prof_config *cfg = prof_config_get();
    char *path = summary_name;
    int to = cfg->summary_to;

    if (to == PROF_TO_FILE && prof_rt.forked_from && !prof_path_has_pid(cfg->summary_path))
        to = PROF_TO_STDERR;   /* a forked child must not write into the parent's file */
    switch (to) {
    case PROF_TO_OFF:
        return -1;
    case PROF_TO_HANDLER: {
        static int logged;
        prof_log_once(&logged, "PROF_SUMMARY=logging but no summary handler is installed "
                      "(Python's prof module installs one); summaries go to stderr");
        return STDERR_FILENO;
    }
    case PROF_TO_STDOUT:
        if (stdout_failed)
            return STDERR_FILENO;
        fflush(stdout);
        return STDOUT_FILENO;
    case PROF_TO_FILE:
        if (summary_pid != prof_process_get()->pid) {
            /* Forked since the parent opened (or failed to open) its file:
             * that descriptor is the parent's file, never ours. */
            if (summary_fd >= 0)
                close(summary_fd);
            summary_fd = -1;
            summary_failed = 0;
            summary_pid = prof_process_get()->pid;
        }
        if (summary_fd >= 0 || summary_failed)
            return summary_fd;
        if (prof_path_expand(cfg->summary_path, path, sizeof summary_name) != 0) {
            prof_log("PROF_SUMMARY: path too long; summaries go to stderr");
            summary_failed = 1;
            return -1;
        }
        /* Checked before the open, whose O_TRUNC would wipe the trace. The
         * trace keeps the file: it is the larger loss, and it was opened
         * first (when the runtime started). */
        if (summary_is_trace(path)) {
            prof_log("PROF_SUMMARY and PROF_TRACE name the same file (%s); it keeps the trace, "
                     "summaries go to stderr", path);
            summary_failed = 1;
            return -1;
        }
        /* O_NONBLOCK for the open only: a FIFO with no reader fails (ENXIO)
         * instead of hanging the exit. */
        summary_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
                          O_NONBLOCK, 0644);
        if (summary_fd < 0) {
            prof_log("summary %s: cannot open (%s); summaries go to stderr", path, strerror(errno));
            summary_failed = 1;
        } else {
            fcntl(summary_fd, F_SETFL, fcntl(summary_fd, F_GETFL) & ~O_NONBLOCK);
        }
        return summary_fd;
    default:
        return STDERR_FILENO;
    }
}

/* Where summaries go instead of PROF_SUMMARY (prof_set_summary_handler). */
static prof_summary_fn summary_handler;
static void *summary_handler_user;

void prof_collector_set_summary_handler_locked(prof_summary_fn fn, void *user)
{
    summary_handler = fn;
    summary_handler_user = user;
}

/* Summaries wait here between being formatted (lock held, possibly in
 * the middle of a drain) and being written (lock released). */
struct pending_summary {
    struct prof_buf text;
    int kind;
    int cross_rank;              /* prof_summary_deliver_locked: never muted */
    struct pending_summary *next;
};

static struct pending_summary *pending, **pending_end = &pending;
static struct pending_summary *in_flight;   /* being written, lock released */
/* Broadcast (runtime lock held) each time a summary was written. */
static pthread_cond_t written_cond = PTHREAD_COND_INITIALIZER;

/* Format a summary as of step `step`. The next window starts at cut_ns
 * (the step's own time when a step record cut it). The wall time shown runs
 * to now, not to the cut: other threads' zones are in up to where the drain
 * is, so the wall time must cover them too (shares never pass 100% for a
 * stage on one thread). */
static void summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t cut_ns)
{
    struct pending_summary *p = calloc(1, sizeof *p);
    uint64_t now = prof_clock_now_ns();
    static int oom_logged;

    if (p != NULL)
        prof_summary_format(&p->text, prof_config_get()->format, kind, step, now);
    if (kind == PROF_KIND_PERIODIC) {
        if (p == NULL)
            prof_stats_tree();    /* built by the summary, when there is one */
        /* The rows the summary's JSON window section has. */
        prof_stats_window_keep(now > prof_rt.window_start_ns ? now - prof_rt.window_start_ns : 0,
                               PROF_SUMMARY_JSON_MAX_ROWS);
        prof_stats_window_reset();
        prof_rt.window_start_ns = cut_ns < now ? cut_ns : now;
        prof_rt.window_start_step = step;
        prof_rt.dropped_window = 0;
        prof_loss_window_reset();
    }
    if (p == NULL || p->text.failed) {
        prof_log_once(&oom_logged, "out of memory formatting a summary; summaries are skipped "
                      "while memory is short");
        if (p != NULL)
            prof_buf_free(&p->text);
        free(p);
        return;
    }
    p->kind = kind == PROF_KIND_PERIODIC ? PROF_SUMMARY_PERIODIC : PROF_SUMMARY_FINAL;
    *pending_end = p;
    pending_end = &p->next;
}

static void summary_write(const struct pending_summary *p, prof_summary_fn fn, void *user)
{
    int fd, err;

    /* A cross-rank table stands in for this rank's periodic summaries. */
    if (p->kind == PROF_SUMMARY_PERIODIC && !p->cross_rank &&
        __atomic_load_n(&prof_ranks_muted, __ATOMIC_RELAXED))
        return;
    if (fn != NULL) {
        in_summary_handler = 1;
        fn(user, p->text.data, p->kind);
        in_summary_handler = 0;
        return;
    }
    fd = summary_target();
    if (fd < 0 && summary_failed)
        fd = STDERR_FILENO;
    if (fd < 0 || (err = prof_write_full(fd, p->text.data, p->text.len, NULL)) == 0)
        return;
    if (fd == STDERR_FILENO) {
        static int logged;
        prof_log_once(&logged, "writing the summary to stderr failed (%s); later summaries may "
                      "be lost", strerror(-err));
        return;
    }
    /* A full disk, /dev/full, a pipe whose reader has gone: this summary
     * (it may be the final one, what the run was for) and every later one
     * go to stderr, said once. Part of it may have reached the target. */
    if (fd == STDOUT_FILENO) {
        stdout_failed = 1;
        prof_log("writing the summary to stdout failed (%s); this and later summaries go to "
                 "stderr", strerror(-err));
    } else {
        prof_log("writing the summary to %s failed (%s); this and later summaries go to stderr",
                 summary_name, strerror(-err));
        close(summary_fd);
        summary_fd = -1;
        summary_failed = 1;
    }
    prof_write_full(STDERR_FILENO, p->text.data, p->text.len, NULL);
}

/* Write the queued summaries in order. The lock is released while each
 * goes out: a slow pipe or a handler must not stall the threads that wait
 * for a flush. */
static void summary_write_pending_locked(void)
{
    while (pending != NULL) {
        struct pending_summary *p = pending;
        prof_summary_fn fn = summary_handler;
        void *user = summary_handler_user;

        pending = p->next;
        if (pending == NULL)
            pending_end = &pending;
        in_flight = p;
        prof_rt_unlock();
        pthread_mutex_lock(&write_lock);
        summary_write(p, fn, user);
        pthread_mutex_unlock(&write_lock);
        prof_rt_lock();
        in_flight = NULL;
        pthread_cond_broadcast(&written_cond);
        prof_buf_free(&p->text);
        free(p);
    }
}

void prof_summary_wait_written_locked(void)
{
    while (in_flight != NULL)
        pthread_cond_wait(&written_cond, &prof_rt.lock);
}

void prof_summary_emit_locked(enum prof_summary_kind kind)
{
    window_release_locked();     /* an earlier step's window comes first */
    if (due_step != 0) {
        summary_queue_locked(PROF_KIND_PERIODIC, due_step, due_cut_ns);
        due_step = 0;
    }
    summary_queue_locked(kind, __atomic_load_n(&prof_steps, __ATOMIC_RELAXED),
                         prof_clock_now_ns());
    summary_write_pending_locked();
}

void prof_collector_atfork_prepare(void)
{
    pthread_mutex_lock(&write_lock);
}

void prof_collector_atfork_parent(void)
{
    pthread_mutex_unlock(&write_lock);
}

void prof_collector_atfork_child(void)
{
    pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;

    /* A thread of the parent may have been waiting on them. */
    collector_ready_cond = fresh;
    written_cond = fresh;
    pthread_mutex_unlock(&write_lock);
    /* The parent's queued summaries are the parent's to print; the child's
     * copies are freed unprinted. */
    while (pending != NULL) {
        struct pending_summary *p = pending;
        pending = p->next;
        prof_buf_free(&p->text);
        free(p);
    }
    pending_end = &pending;
    held.t = NULL;               /* the parent's threads and window */
    due_step = 0;
    if (in_flight != NULL) {
        /* Forked while another thread was writing it. */
        prof_buf_free(&in_flight->text);
        free(in_flight);
        in_flight = NULL;
    }
}

void prof_collect_all_locked(void)
{
    /* Windows are cut at their steps here too, one summary written at a
     * time, while the rings have little waiting; a thread that steps on
     * meanwhile is not chased for ever: past 64 windows, one drain to the
     * end merges the rest. */
    exact_steps = 1;
    for (int i = 0; i < 64; i++) {
        drain_stopped = 0;
        prof_collect_locked();
        summary_write_pending_locked();
        if (!drain_stopped)
            break;
    }
    exact_steps = 0;
    if (drain_stopped) {
        drain_stopped = 0;
        prof_collect_locked();
    }
}

void prof_final_report_locked(void)
{
    uint64_t deadline;
    size_t incomplete;

    prof_collect_all_locked();
    /* GPU zones still running get 2 s, waited for with the lock released
     * (threads that still record or flush go on meanwhile). */
    for (deadline = prof_clock_now_ns() + 2000000000u;;) {
        struct timespec ms = {0, 1000000};

        prof_cuda_poll(gpu_sink, NULL);
        if (!prof_cuda_waiting() || prof_clock_now_ns() >= deadline)
            break;
        prof_rt_unlock();
        nanosleep(&ms, NULL);
        prof_rt_lock();
    }
    incomplete = prof_cuda_abandon();
    if (incomplete)
        prof_log("%zu GPU zones had not completed 2 s after shutdown began; they are not counted",
                 incomplete);
    /* The windows since the last step summary whose step records were
     * dropped get theirs before the final one. */
    prof_periodic_locked(0);
    /* A forked child that recorded nothing stays silent. */
    if (!prof_rt.forked_from || prof_stats_nstages() > 0)
        prof_summary_emit_locked(PROF_KIND_FINAL);
    prof_trace_close();
    prof_children_finished();
    pthread_mutex_lock(&write_lock);
    if (summary_fd >= 0) {
        close(summary_fd);
        summary_fd = -1;
    }
    pthread_mutex_unlock(&write_lock);
}

void prof_periodic_locked(uint64_t now)
{
    const struct prof_config *cfg = prof_config_get();
    uint64_t due = prof_rt.step_due_drained;

    /* A forked child that has recorded nothing stays silent (as at exit). */
    int quiet = prof_rt.forked_from && prof_stats_nstages() == 0;

    summary_write_pending_locked();
    /* A step whose record was dropped (full ring) still gets its summary,
     * labelled with that step. Only a step marked due before the last
     * drain began counts, and only if that drain went to the end of every
     * ring: a later one's record may still be in its ring, and taking it
     * here would swallow the summaries of the steps before it. */
    if (cfg->every_steps && due > prof_rt.summary_step_done && !drain_stopped) {
        prof_rt.summary_step_done = due;
        if (!quiet) {
            summary_queue_locked(PROF_KIND_PERIODIC, due, prof_clock_now_ns());
            summary_write_pending_locked();
        }
    }
    if (cfg->every_ns && now >= prof_rt.next_summary_ns) {
        if (!quiet)
            prof_summary_emit_locked(PROF_KIND_PERIODIC);
        prof_rt.next_summary_ns = now + cfg->every_ns;
    }
}

static void end_by_signal(int sig)
{
    prof_rt.shut_down = 1;
    __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
    prof_final_report_locked();
    prof_rt_unlock();
    /* Let the signal do what it would have done without us. */
    prof_signal_resend(sig);
    prof_rt_lock();
}

static void *collector_main(void *arg)
{
    (void)arg;
    /* Named, so that top -H, gdb and py-spy say what it is. */
    pthread_setname_np(pthread_self(), "prof-collector");
    prof_rt_lock();
    collector_ready = 1;
    pthread_cond_broadcast(&collector_ready_cond);
    while (!prof_rt.stopping) {
        const struct prof_config *cfg = prof_config_get();
        uint64_t now = prof_clock_now_ns();
        uint64_t wait = PROF_COLLECT_PERIOD_NS;
        int sig, again = drain_stopped;

        if (cfg->every_ns && prof_rt.next_summary_ns > now && prof_rt.next_summary_ns - now < wait)
            wait = prof_rt.next_summary_ns - now;
        prof_rt_unlock();
        /* The trace is written here, with the lock released: threads that
         * take it (a first zone, prof_flush, fork) never wait on the disk. */
        prof_trace_write();
        /* A drain that stopped at a due step goes on at once. */
        if (!again)
            prof_wake_wait(now + wait);
        prof_rt_lock();
        if (prof_rt.stopping)
            break;
        exact_steps = 1;
        drain_stopped = 0;
        prof_collect_locked();
        exact_steps = 0;
        if ((sig = __atomic_load_n(&prof_pending_signal, __ATOMIC_ACQUIRE)) != 0) {
            end_by_signal(sig);
            break;
        }
        prof_periodic_locked(prof_clock_now_ns());
        prof_live_tick_locked(prof_clock_now_ns());   /* prof-top, PROF_METRICS */
    }
    prof_rt_unlock();
    return NULL;
}

int prof_collector_start_locked(void)
{
    pthread_attr_t attr;
    sigset_t all, old;
    int err;

    if (prof_rt.collector_running) {
        /* Another thread started it and waits for it below (with the lock
         * released): wait with it, so that every caller returns with the
         * collector up. */
        while (!collector_ready)
            pthread_cond_wait(&collector_ready_cond, &prof_rt.lock);
        __atomic_store_n(&prof_rt.ready, 1, __ATOMIC_RELEASE);
        return 0;
    }

    /* The collector takes no signals: the program's handlers must run on
     * the program's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_init(&attr);
    collector_ready = 0;
    err = pthread_create(&collector_id, &attr, collector_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        static int logged;
        /* Nothing would drain the rings: switch recording off rather than
         * have every thread's first zone try (and report) again. */
        __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
        prof_log_once(&logged, "cannot start the collector thread (%s); recording is off",
                      strerror(err));
        return -err;
    }
    prof_rt.stopping = 0;
    __atomic_store_n(&prof_rt.collector_running, 1, __ATOMIC_RELEASE);
    /* Wait until the new thread holds the lock (the wait releases it), so
     * that it has finished starting: from then on the collector runs only
     * with a lock that the fork handlers take, and a fork can never catch
     * it halfway through thread start-up or an allocation. That matters
     * under allocators that are not fork-safe (GCC 12's AddressSanitizer:
     * the child's first allocation waited forever for a lock a starting
     * thread held at the fork). */
    while (!collector_ready)
        pthread_cond_wait(&collector_ready_cond, &prof_rt.lock);
    /* Release: a thread that sees ready may attach without the lock. */
    __atomic_store_n(&prof_rt.ready, 1, __ATOMIC_RELEASE);
    prof_children_join(prof_rt.forked_from);   /* a forked worker: its parent watches it */
    return 0;
}

void prof_collector_stop(void)
{
    prof_rt_lock();
    if (!__atomic_load_n(&prof_rt.collector_running, __ATOMIC_RELAXED) || prof_collector_is_self()) {
        prof_rt_unlock();
        return;
    }
    prof_rt.stopping = 1;
    __atomic_store_n(&prof_rt.ready, 0, __ATOMIC_RELAXED);
    prof_rt_unlock();
    prof_wake_collector();
    pthread_join(collector_id, NULL);
    prof_rt_lock();
    __atomic_store_n(&prof_rt.collector_running, 0, __ATOMIC_RELEASE);
    prof_rt.stopping = 0;
    prof_rt_unlock();
}

/* The cross-rank table (ranks.c), written where the summaries go and in
 * order with them, as a periodic summary. Takes text's buffer. */
int prof_summary_deliver_locked(struct prof_buf *text)
{
    struct pending_summary *p = calloc(1, sizeof *p);

    if (p == NULL) {
        prof_buf_free(text);
        return -ENOMEM;
    }
    p->text = *text;
    memset(text, 0, sizeof *text);
    p->kind = PROF_SUMMARY_PERIODIC;
    p->cross_rank = 1;
    *pending_end = p;
    pending_end = &p->next;
    summary_write_pending_locked();
    return 0;
}
