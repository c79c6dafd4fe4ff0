/* gpu_busy.c - how busy each GPU was: its devices' and streams' tracks.
 *
 * Design
 * ------
 * A sink (sink.h). Every completed GPU zone (cuda_poll.c, placed on the CPU
 * clock) adds its span to two tracks: its device's and its stream's. A
 * track keeps the union of the spans (gpu_spans.c), bounded, merging by a
 * doubling gap when full, so the busy time can only be overstated, by at
 * most the gaps filled (the JSON says the largest: "merged_gap_ns"). A
 * window's busy share is the union's length inside the window over its
 * wall time; the run's adds up the closed windows'. Spans older than the
 * window and the last trace bin are dropped.
 *
 * GPU zones arrive when the collector sees their end event complete, tens
 * of ms after the work, so a summary counts the work that completed and was
 * polled before it; a zone still running at a window's cut is clipped to
 * the next window. Trace bins (100 ms) and the metric are written
 * GPU_BIN_LAG_NS after their end, when their zones have arrived.
 *
 * The bottleneck check's idle attribution (which CPU stage the GPU waited
 * for) is gpu_idle.c's, settled on these tracks. This file computes the
 * figures (prof_gpu_figures_get, prof_gpu_live_locked, the published busy
 * ratio); gpu_format.c writes them as text, JSON and metric lines.
 *
 * Threads: every hook runs with the runtime lock held (one thread at a
 * time); the metric is published under pub_lock for the metrics thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "cuda.h"
#include "env.h"
#include "gpu_busy.h"
#include "gpu_idle.h"
#include "gpu_spans.h"
#include "gpu_track.h"
#include "gpu_mem.h"
#include "nvml.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "sink.h"
#include "stats.h"
#include "trace.h"

#define GPU_BIN_NS 100000000ull     /* trace counter and metric bins: 100 ms */
#define GPU_BIN_LAG_NS 300000000ull /* written this long after their end */
#define GPU_CHECK_BELOW 0.85        /* the checklist: above it, GPU-bound */

/* ---- GPU sides lost, per stage ---- */

struct lost_stage {
    struct prof_stage *stage;
    uint64_t win, run;
    int cause;                      /* the last one */
};

static struct lost_stage lost_tab[GPU_LOST_STAGES];
static uint64_t lost_other_win, lost_other_run;

static struct prof_gpu_track tracks[GPU_TRACKS];
static int ntracks, nstreams;
static uint64_t win_lo;             /* the current window's start, as last seen */
static uint64_t run_lo;             /* prof_rt.start_ns, as last seen (a reset moves it on) */

static int owner_pid;               /* the process whose GPU zones these are */
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct prof_gpu_busy_pub pub[GPU_TRACKS];
static int npub;

/* ---- tracks ---- */

static int track_of(int device, int is_stream, uint64_t stream)
{
    int i;

    for (i = 0; i < ntracks; i++)
        if (tracks[i].device == device && (tracks[i].stream_no >= 0) == is_stream &&
            (!is_stream || tracks[i].stream == stream))
            return i;
    if (ntracks == GPU_TRACKS)
        return -1;
    memset(&tracks[ntracks], 0, sizeof tracks[0]);
    tracks[ntracks].device = device;
    tracks[ntracks].stream_no = is_stream ? nstreams++ : -1;
    tracks[ntracks].stream = stream;
    return ntracks++;
}

/* ---- the sink ---- */

/* In a forked child (its CUDA zones time the CPU side only): nothing of
 * the parent's GPUs is the child's. pub_lock is made anew, as the parent's
 * metrics thread may have held it across the fork. */
static void forked_check(void)
{
    int pid = prof_process_get()->pid, k;

    if (owner_pid == pid)
        return;
    if (owner_pid != 0) {
        for (k = 0; k < ntracks; k++)
            free(tracks[k].sp.s);
        memset(tracks, 0, sizeof tracks);
        ntracks = nstreams = 0;
        prof_gpu_idle_drop_held();
        win_lo = run_lo = 0;
        memset(lost_tab, 0, sizeof lost_tab);
        lost_other_win = lost_other_run = 0;
        pthread_mutex_init(&pub_lock, NULL);
        npub = 0;
        prof_nvml_atfork_child();
        prof_gpu_mem_atfork_child();
    }
    owner_pid = pid;
}

static void add_spans(int device, uint64_t stream, uint64_t start_ns, uint64_t end_ns);

static void sink_gpu_zone(struct prof_stage *gpu, struct prof_stage *cpu, int device,
                          uint64_t stream, uint64_t start_ns, uint64_t end_ns)
{
    forked_check();
    (void)gpu, (void)cpu;
    /* PROF_CUDA=kernels: the kernels themselves are the busy time
     * (sink_gpu_kernel), not their zones' spans. */
    if (!prof_gpu_from_kernels)
        add_spans(device, stream, start_ns, end_ns);
}

static void add_spans(int device, uint64_t stream, uint64_t start_ns, uint64_t end_ns)
{
    int d, s;

    d = track_of(device, 0, 0);
    s = track_of(device, 1, stream);

    if (d >= 0) {
        prof_spans_add(&tracks[d].sp, start_ns, end_ns);
        if (tracks[d].bin_at == 0) {
            tracks[d].bin_at = start_ns - start_ns % GPU_BIN_NS;
            prof_nvml_note_device(device);
            prof_gpu_mem_note_device(device);
        }
    }
    if (s >= 0)
        prof_spans_add(&tracks[s].sp, start_ns, end_ns);
}

static void sink_gpu_kernel(struct prof_stage *gpu, int device, uint64_t stream,
                            const char *kname, uint64_t start_ns, uint64_t end_ns)
{
    (void)gpu, (void)kname;
    forked_check();
    add_spans(device, stream, start_ns, end_ns);
}

void prof_gpu_lost(const char *raw_name, int cause)
{
    struct prof_stage *s = raw_name != NULL ? prof_stats_stage(raw_name, 0) : NULL;
    int i;

    forked_check();

    for (i = 0; i < GPU_LOST_STAGES && lost_tab[i].stage != NULL && lost_tab[i].stage != s; i++)
        ;
    if (s == NULL || i == GPU_LOST_STAGES) {
        lost_other_win++, lost_other_run++;
        return;
    }
    lost_tab[i].stage = s;
    lost_tab[i].win++;
    lost_tab[i].run++;
    lost_tab[i].cause = cause;
}

void prof_gpu_launcher(struct prof_thread *t, const char *raw_name, int device)
{
    forked_check();

    if (device <= -2) {
        prof_gpu_lost(raw_name, -2 - device);
        return;
    }
    prof_gpu_idle_launcher(t, device);
}

static void sink_zone(const struct prof_event *e)
{
    prof_gpu_idle_zone(e, tracks, ntracks, win_lo);
}

static void sink_thread_gone(struct prof_thread *t)
{
    prof_gpu_idle_thread_gone(t, tracks, ntracks, win_lo);
}

static void sink_stage_gone(struct prof_stage *s)
{
    int k;

    for (k = 0; k < ntracks; k++) {
        prof_gpu_idle_forget(&tracks[k].idle_win, s);
        prof_gpu_idle_forget(&tracks[k].idle_run, s);
    }
    for (k = 0; k < GPU_LOST_STAGES && lost_tab[k].stage != NULL; k++) {
        if (lost_tab[k].stage == s) {
            lost_other_win += lost_tab[k].win;
            lost_other_run += lost_tab[k].run;
            memmove(&lost_tab[k], &lost_tab[k + 1],
                    (GPU_LOST_STAGES - k - 1) * sizeof lost_tab[0]);
            memset(&lost_tab[GPU_LOST_STAGES - 1], 0, sizeof lost_tab[0]);
            break;
        }
    }
    prof_gpu_idle_stage_gone(s);
}

static void publish(void)
{
    int k;

    pthread_mutex_lock(&pub_lock);
    npub = 0;
    for (k = 0; k < ntracks; k++) {
        const struct prof_gpu_track *t = &tracks[k];
        double sum = 0;
        unsigned i;

        if (t->stream_no >= 0 || t->nbins == 0)
            continue;
        for (i = 0; i < t->nbins && i < GPU_BINS_METRIC; i++)
            sum += t->bins[i];
        pub[npub].device = t->device;
        pub[npub].busy = sum / (t->nbins < GPU_BINS_METRIC ? t->nbins : GPU_BINS_METRIC);
        npub++;
    }
    pthread_mutex_unlock(&pub_lock);
}

/* Write the device tracks' trace bins that end by `until`. */
static void bins_write(uint64_t until)
{
    int k, binned = 0;

    for (k = 0; k < ntracks; k++) {
        struct prof_gpu_track *t = &tracks[k];
        char name[48];

        if (t->stream_no >= 0)
            continue;
        while (t->bin_at != 0 && t->bin_at + GPU_BIN_NS <= until) {
            double v = (double)prof_spans_busy(&t->sp, t->bin_at, t->bin_at + GPU_BIN_NS) /
                       (double)GPU_BIN_NS;

            snprintf(name, sizeof name, "GPU %d busy %%", t->device);
            prof_trace_counter(NULL, name, t->bin_at, v * 100.0);
            memmove(&t->bins[1], &t->bins[0], (GPU_BINS_METRIC - 1) * sizeof t->bins[0]);
            t->bins[0] = v;
            if (t->nbins < GPU_BINS_METRIC)
                t->nbins++;
            t->bin_at += GPU_BIN_NS;
            binned = 1;
        }
    }
    if (binned)
        publish();
}

static void sink_pass_end(uint64_t now)
{
    int k;

    forked_check();

    if (ntracks == 0)
        return;
    if (run_lo != 0 && prof_rt.start_ns > run_lo) {
        /* prof_reset or the warm-up's end: the run starts again. */
        for (k = 0; k < ntracks; k++) {
            tracks[k].run_busy_ns = 0;
            tracks[k].gap_run = 0;
            memset(&tracks[k].idle_run, 0, sizeof tracks[k].idle_run);
            memset(&tracks[k].idle_win, 0, sizeof tracks[k].idle_win);
        }
        prof_gpu_idle_drop_held();
        win_lo = prof_rt.window_start_ns;
        prof_nvml_run_reset();
        prof_gpu_mem_run_reset();
        memset(lost_tab, 0, sizeof lost_tab);
        lost_other_win = lost_other_run = 0;
    }
    run_lo = prof_rt.start_ns;
    if (win_lo == 0 || prof_rt.window_start_ns < win_lo)
        win_lo = prof_rt.window_start_ns;
    if (now > GPU_BIN_LAG_NS)
        bins_write(now - GPU_BIN_LAG_NS);
}

static void sink_tick(uint64_t now)
{
    prof_nvml_tick(now);
    prof_gpu_mem_tick(now);    /* the driver's figure where NVML has none */
}

const struct prof_sink prof_gpu_busy_sink = {
    .name = "gpu",
    .active = prof_gpu_idle_active,
    .tick = sink_tick,
    .zone = sink_zone,
    .gpu_zone = sink_gpu_zone,
    .gpu_kernel = sink_gpu_kernel,
    .thread_gone = sink_thread_gone,
    .stage_gone = sink_stage_gone,
    .pass_end = sink_pass_end,
    .gpu_launch = prof_gpu_launcher,
    .gpu_lost = prof_gpu_lost,
};

void prof_gpu_window_close(void)
{
    uint64_t lo = win_lo, hi = prof_rt.window_start_ns;
    int k;

    forked_check();

    for (k = 0; k < GPU_LOST_STAGES; k++)
        lost_tab[k].win = 0;
    lost_other_win = 0;
    if (ntracks == 0)
        return;
    prof_gpu_idle_settle(tracks, ntracks, win_lo);
    for (k = 0; k < ntracks; k++) {
        struct prof_gpu_track *t = &tracks[k];
        uint64_t keep = hi;

        if (hi > lo)
            t->run_busy_ns += prof_spans_busy(&t->sp, lo, hi);
        if (t->sp.gap_win > t->gap_run)
            t->gap_run = t->sp.gap_win;
        t->sp.gap_win = 0;
        t->sp.gap = 0;
        prof_gpu_idle_merge(&t->idle_run, &t->idle_win);
        memset(&t->idle_win, 0, sizeof t->idle_win);
        if (t->bin_at != 0 && t->bin_at < keep)
            keep = t->bin_at;
        prof_spans_drop_before(&t->sp, keep);
    }
    prof_nvml_window_close();
    prof_gpu_mem_window_close();
    win_lo = hi;
}

/* ---- the figures ---- */

struct figures {
    double busy;                    /* share of the wall time */
    uint64_t busy_ns, wall_ns;
    struct prof_gpu_idle idle;      /* launchers' stages in the idle time */
    uint64_t gap_ns;
};

static void figures_of(const struct prof_gpu_track *t, int window, uint64_t wall_ns,
                       struct figures *f)
{
    uint64_t lo = window ? prof_rt.window_start_ns : prof_rt.start_ns, hi = lo + wall_ns;
    uint64_t wlo = win_lo != 0 && win_lo < hi ? win_lo : prof_rt.window_start_ns;

    if (wlo < lo)
        wlo = lo;

    memset(f, 0, sizeof *f);
    f->wall_ns = wall_ns;
    f->busy_ns = window ? prof_spans_busy(&t->sp, lo, hi)
                        : t->run_busy_ns + prof_spans_busy(&t->sp, wlo, hi);
    if (f->busy_ns > wall_ns)
        f->busy_ns = wall_ns;
    f->busy = wall_ns ? (double)f->busy_ns / (double)wall_ns : 0;
    f->idle = t->idle_win;
    if (!window)
        prof_gpu_idle_merge(&f->idle, &t->idle_run);
    f->gap_ns = t->sp.gap_win > t->gap_run || window ? t->sp.gap_win : t->gap_run;
}

static const char *band_of(double u, const char **cause)
{
    if (u < 0.30) {
        *cause = "data loading starves the GPU";
        return "under 30%";
    }
    if (u < 0.60) {
        *cause = "Python or CPU preprocessing";
        return "30-60%";
    }
    *cause = "too many small ops";
    return "60-85%";
}

/* What the summary says of one device, in text or JSON: the zones' busy
 * share, NVML's figures, and the check where the utilization (NVML's
 * where there, else the zones') is under GPU_CHECK_BELOW. */
struct device_view {
    struct figures f;
    struct prof_nvml_figures nv;
    int have_nv;
    int have_drv;                   /* no NVML figures: the driver's memory (gpu_mem.h) */
    uint64_t drv_used, drv_peak;
    double util;
    int check;
    const char *band, *cause;
    const struct prof_gpu_idle_stage *top;  /* the stage to name; NULL: none */
    double top_share;               /* its share of the idle time */
};

static void device_view(const struct prof_gpu_track *t, int window, uint64_t wall_ns,
                        struct device_view *v)
{
    uint64_t idle_ns;

    memset(v, 0, sizeof *v);
    figures_of(t, window, wall_ns, &v->f);
    v->have_nv = prof_nvml_figures(t->device, window, &v->nv) == 0;
    v->have_drv = !v->have_nv &&
                  prof_gpu_mem_figures(t->device, window, &v->drv_used, &v->drv_peak) == 0;
    v->util = v->have_nv ? v->nv.util : v->f.busy;
    v->check = !prof_config_get()->gpu_check_off && v->util < GPU_CHECK_BELOW;
    if (!v->check)
        return;
    v->band = band_of(v->util, &v->cause);
    idle_ns = v->f.wall_ns - v->f.busy_ns;
    v->top = idle_ns > 0 ? prof_gpu_idle_top(&v->f.idle) : NULL;
    if (v->top != NULL)
        v->top_share = v->top->ns > idle_ns ? 1.0 : (double)v->top->ns / (double)idle_ns;
}

/* The next stream track of device at index j or after it; ntracks: none. */
static int stream_next(int device, int j)
{
    while (j < ntracks && (tracks[j].stream_no < 0 || tracks[j].device != device))
        j++;
    return j;
}

/* The live view's figures: the summary's busy shares and NVML's
 * utilization, without the check (prof-top shows no bottleneck line).
 * Zones still running, or completed and not polled yet, are not counted:
 * the current window's share reads low by the poll's lag over its length,
 * noticeably only in the first second after a periodic summary cut it. */
int prof_gpu_live_locked(struct prof_gpu_live *out, int max, uint64_t win_ns, uint64_t run_ns)
{
    int k, n = 0;

    forked_check();

    for (k = 0; k < ntracks && n < max; k++) {
        const struct prof_gpu_track *t = &tracks[k];
        struct prof_nvml_figures nv;
        struct figures f;

        if (t->stream_no >= 0)
            continue;
        memset(&out[n], 0, sizeof out[n]);
        out[n].device = t->device;
        figures_of(t, 1, win_ns, &f);
        out[n].busy_win = f.busy;
        figures_of(t, 0, run_ns, &f);
        out[n].busy_run = f.busy;
        if (prof_nvml_figures(t->device, 1, &nv) == 0) {
            out[n].nvml |= 1;
            out[n].nvml_win = nv.util;
            out[n].mem_used = nv.mem_used;
            out[n].mem_peak_win = nv.mem_peak;
            out[n].nvml |= 4;
        } else if (prof_gpu_mem_figures(t->device, 1, &out[n].mem_used,
                                        &out[n].mem_peak_win) == 0) {
            out[n].nvml |= 4;
        }
        if (prof_nvml_figures(t->device, 0, &nv) == 0) {
            out[n].nvml |= 2;
            out[n].nvml_run = nv.util;
        }
        n++;
    }
    return n;
}

void prof_gpu_figures_get(struct prof_gpu_figures *out, int window, uint64_t wall_ns)
{
    int k, j, i;

    forked_check();

    prof_gpu_idle_settle(tracks, ntracks, win_lo);
    out->window = window;
    out->ndevices = out->nstreams = out->nlost = 0;
    for (k = 0; k < ntracks; k++) {
        const struct prof_gpu_track *t = &tracks[k];
        struct prof_gpu_device_figures *d = &out->dev[out->ndevices++];
        struct device_view v;

        if (t->stream_no >= 0) {
            out->ndevices--;
            continue;
        }
        device_view(t, window, wall_ns, &v);
        d->device = t->device;
        d->busy = v.f.busy;
        d->busy_ns = v.f.busy_ns;
        d->wall_ns = v.f.wall_ns;
        d->gap_ns = v.f.gap_ns;
        d->have_nv = v.have_nv;
        d->have_drv = v.have_drv;
        d->drv_used = v.drv_used;
        d->drv_peak = v.drv_peak;
        d->nv = v.nv;
        d->util = v.util;
        d->check = v.check;
        d->band = v.band;
        d->cause = v.cause;
        d->top_stage = v.top != NULL ? v.top->stage->name : NULL;
        d->top_share = v.top_share;
        d->first_stream = out->nstreams;
        for (j = stream_next(t->device, 0); j < ntracks; j = stream_next(t->device, j + 1)) {
            struct figures fs;

            figures_of(&tracks[j], window, wall_ns, &fs);
            out->str[out->nstreams].stream_no = tracks[j].stream_no;
            out->str[out->nstreams].busy = fs.busy;
            out->nstreams++;
        }
        d->nstreams = out->nstreams - d->first_stream;
    }
    for (i = 0; i < GPU_LOST_STAGES && lost_tab[i].stage != NULL; i++) {
        uint64_t c = window ? lost_tab[i].win : lost_tab[i].run;

        if (c == 0)
            continue;
        out->lost[out->nlost].stage = lost_tab[i].stage->name;
        out->lost[out->nlost].count = c;
        out->lost[out->nlost].cause = prof_cuda_lost_cause_name(lost_tab[i].cause);
        out->nlost++;
    }
    out->lost_other = window ? lost_other_win : lost_other_run;
}

void prof_gpu_bins_final(uint64_t wall_ns)
{
    forked_check();

    bins_write(prof_rt.start_ns + wall_ns);
}

void prof_gpu_pub_figures_get(struct prof_gpu_pub_figures *out)
{
    pthread_mutex_lock(&pub_lock);
    out->nbusy = npub;
    memcpy(out->busy, pub, (size_t)npub * sizeof *out->busy);
    pthread_mutex_unlock(&pub_lock);
    out->nnvml = prof_nvml_published(out->nvml, GPU_TRACKS);
    out->nmem = out->nnvml > 0 ? 0 : prof_gpu_mem_published(out->mem, GPU_TRACKS);
}
