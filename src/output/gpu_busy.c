/* gpu_busy.c - how busy each GPU was, and what it waited for.
 *
 * Design
 * ------
 * A sink (sink.h). Every completed GPU zone (cuda_poll.c, placed on the CPU
 * clock) adds its span to two tracks: its device's and its stream's. A
 * track keeps the union of the spans as sorted, disjoint spans in a
 * bounded array (GPU_SPANS); when it fills, spans closer than a gap that
 * doubles each time (1 us, 2 us, ...) are merged, so the busy time can only
 * be overstated, by at most the gaps filled (the JSON says the largest:
 * "merged_gap_ns"). A window's busy share is the union's length inside the
 * window over its wall time; the run's adds up the closed windows'.
 * Spans older than the window and the last trace bin are dropped.
 *
 * GPU zones arrive when the collector sees their end event complete, tens
 * of ms after the work, so a summary counts the work that completed and was
 * polled before it; a zone still running at a window's cut is clipped to
 * the next window. Trace bins (100 ms) and the metric are written
 * GPU_BIN_LAG_NS after their end, when their zones have arrived.
 *
 * The bottleneck check (the ML profiling checklist's first question: under
 * 85% busy, what did the GPU wait for?). A thread whose CUDA zone the
 * drain takes is a launcher of its device (prof_gpu_launcher). Its CPU
 * zones are held (GPU_CPU_ZONES at most;
 * when full the older half is settled early) until a summary, when the
 * GPU's spans of their time have arrived; then each zone's overlap with the
 * device's idle time (the window less the busy union), less its children's
 * (they ended before it, per thread, as in selftime.c), is added to its
 * stage: the stage a launcher was in, itself, while the GPU had nothing to
 * do. The summary names the stage with the largest share of the idle time.
 *
 * Threads: every hook runs with the runtime lock held (one thread at a
 * time); the metric is published under pub_lock for the metrics thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "cuda.h"
#include "env.h"
#include "gpu_busy.h"
#include "json.h"
#include "log.h"
#include "gpu_mem.h"
#include "nvml.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "sink.h"
#include "stats.h"
#include "trace.h"

#define GPU_TRACKS 64               /* devices and streams followed */
#define GPU_SPANS 4096              /* merged busy spans kept per track */
#define GPU_GAP_FIRST_NS 1000u      /* the first merge when a track is full */
#define GPU_BIN_NS 100000000ull     /* trace counter and metric bins: 100 ms */
#define GPU_BIN_LAG_NS 300000000ull /* written this long after their end */
#define GPU_BINS_METRIC 10          /* the metric: the last second */
#define GPU_CPU_ZONES 16384         /* launchers' CPU zones held until a summary */
#define GPU_STAGES 16               /* stages named per device in the check */
#define GPU_DEPTH 64                /* deeper CPU zones are left out of the check */
#define GPU_CHECK_BELOW 0.85        /* the checklist: above it, GPU-bound */

struct span {
    uint64_t a, b;
};

struct idle_stage {
    struct prof_stage *stage;
    uint64_t ns;
};

/* Where the launchers were while the GPU was idle. */
struct idle {
    struct idle_stage st[GPU_STAGES];
    uint64_t other_ns;              /* stages beyond GPU_STAGES */
};

struct track {
    int device;
    int stream_no;                  /* -1: the device; else as the trace numbers it */
    uint64_t stream;
    struct span *s;
    unsigned n, cap;
    uint64_t gap;                   /* spans closer than this are merged (0: exact) */
    uint64_t gap_win, gap_run;      /* the largest merged in the window, run */
    uint64_t run_busy_ns;           /* busy in closed windows */
    /* Device tracks only. */
    uint64_t bin_at;                /* the next trace bin's start */
    double bins[GPU_BINS_METRIC];
    unsigned nbins;
    struct idle idle_win, idle_run;
};

/* A launcher thread's state (its side state, PROF_SIDE_GPU). */
struct gthread {
    int device;                     /* of its first CUDA zone */
    int track;                      /* its device's track; -1 until its first GPU zone */
    uint64_t child[GPU_DEPTH + 1];  /* children's idle overlap, per depth */
    struct gthread *next;           /* in gthreads */
};

struct held {
    struct gthread *g;
    struct prof_stage *stage;
    uint64_t a, b;
    uint32_t depth;
};

/* ---- GPU sides lost, per stage ---- */

#define GPU_LOST_STAGES 16

struct lost_stage {
    struct prof_stage *stage;
    uint64_t win, run;
    int cause;                      /* the last one */
};

static struct lost_stage lost_tab[GPU_LOST_STAGES];
static uint64_t lost_other_win, lost_other_run;

static struct track tracks[GPU_TRACKS];
static int ntracks, nstreams;
static struct held *held;
static int launchers;                /* a thread has a gthread (sink_active) */
/* Every gthread, so that one whose thread is still alive at exit is held
 * from memory LeakSanitizer reads: thread slots are mapped pages. */
static struct gthread *gthreads;
static size_t nheld;
static uint64_t win_lo;             /* the current window's start, as last seen */
static uint64_t run_lo;             /* prof_rt.start_ns, as last seen (a reset moves it on) */

static int owner_pid;               /* the process whose GPU zones these are */
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int device;
    double busy;
} pub[GPU_TRACKS];
static int npub;

/* ---- spans ---- */

/* The first span that ends at or after t. */
static unsigned first_ending_after(const struct track *k, uint64_t t)
{
    unsigned lo = 0, hi = k->n;

    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;

        if (k->s[mid].b < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void coarsen(struct track *k)
{
    while (k->n > k->cap * 3 / 4) {
        unsigned i, o = 0;

        k->gap = k->gap ? k->gap * 2 : GPU_GAP_FIRST_NS;
        for (i = 1; i < k->n; i++) {
            if (k->s[i].a - k->s[o].b <= k->gap) {
                if (k->s[i].a - k->s[o].b > k->gap_win)
                    k->gap_win = k->s[i].a - k->s[o].b;
                if (k->s[i].b > k->s[o].b)
                    k->s[o].b = k->s[i].b;
            } else {
                k->s[++o] = k->s[i];
            }
        }
        k->n = o + 1;
    }
}

static void span_add(struct track *k, uint64_t a, uint64_t b)
{
    unsigned lo, hi;

    if (b <= a)
        return;
    if (k->n == k->cap) {
        unsigned cap = k->cap ? k->cap * 2 : 64;
        struct span *s;

        if (cap > GPU_SPANS)
            coarsen(k);
        else if ((s = realloc(k->s, cap * sizeof *s)) != NULL)
            k->s = s, k->cap = cap;
        else if (k->cap == 0)
            return;
        else
            coarsen(k);
    }
    /* Spans touching [a - gap, b + gap] merge with it. */
    lo = first_ending_after(k, a > k->gap ? a - k->gap : 0);
    for (hi = lo; hi < k->n && k->s[hi].a <= b + k->gap; hi++)
        ;
    if (lo == hi) {
        memmove(&k->s[lo + 1], &k->s[lo], (k->n - lo) * sizeof *k->s);
        k->s[lo].a = a;
        k->s[lo].b = b;
        k->n++;
        return;
    }
    if (k->s[lo].a < a)
        a = k->s[lo].a;
    if (k->s[hi - 1].b > b)
        b = k->s[hi - 1].b;
    k->s[lo].a = a;
    k->s[lo].b = b;
    memmove(&k->s[lo + 1], &k->s[hi], (k->n - hi) * sizeof *k->s);
    k->n -= hi - lo - 1;
}

/* Busy time of the track inside [lo, hi). */
static uint64_t busy(const struct track *k, uint64_t lo, uint64_t hi)
{
    uint64_t sum = 0;
    unsigned i;

    for (i = first_ending_after(k, lo + 1); i < k->n && k->s[i].a < hi; i++) {
        uint64_t a = k->s[i].a > lo ? k->s[i].a : lo;
        uint64_t b = k->s[i].b < hi ? k->s[i].b : hi;

        if (b > a)
            sum += b - a;
    }
    return sum;
}

static void drop_before(struct track *k, uint64_t t)
{
    unsigned i = first_ending_after(k, t);

    if (i > 0) {
        memmove(&k->s[0], &k->s[i], (k->n - i) * sizeof *k->s);
        k->n -= i;
    }
}

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

static int track_find(int device)
{
    int i;

    for (i = 0; i < ntracks; i++)
        if (tracks[i].device == device && tracks[i].stream_no < 0)
            return i;
    return -1;
}

/* ---- the check's idle attribution ---- */

static void idle_add(struct idle *d, struct prof_stage *s, uint64_t ns)
{
    int i;

    if (ns == 0)
        return;
    for (i = 0; i < GPU_STAGES && d->st[i].stage != NULL; i++) {
        if (d->st[i].stage == s) {
            d->st[i].ns += ns;
            return;
        }
    }
    if (i == GPU_STAGES) {
        d->other_ns += ns;
        return;
    }
    d->st[i].stage = s;
    d->st[i].ns = ns;
}

static void idle_merge(struct idle *into, const struct idle *from)
{
    int i;

    for (i = 0; i < GPU_STAGES && from->st[i].stage != NULL; i++)
        idle_add(into, from->st[i].stage, from->st[i].ns);
    into->other_ns += from->other_ns;
}

/* The stage with the most idle time, and that time. */
static const struct idle_stage *idle_top(const struct idle *d)
{
    const struct idle_stage *top = NULL;
    int i;

    for (i = 0; i < GPU_STAGES && d->st[i].stage != NULL; i++)
        if (top == NULL || d->st[i].ns > top->ns)
            top = &d->st[i];
    return top;
}

/* Attribute the first n held CPU zones (see the design notes). */
static void settle(size_t n)
{
    size_t i;

    if (n == 0)
        return;
    for (i = 0; i < n; i++) {
        const struct held *h = &held[i];
        struct gthread *g = h->g;
        struct track *k;
        uint64_t a = h->a > win_lo ? h->a : win_lo, b = h->b, ov = 0, self;

        if (g->track >= ntracks || (g->track < 0 && (g->track = track_find(g->device)) < 0))
            continue;           /* no GPU zone of its device has completed */
        k = &tracks[g->track];
        if (b > a)
            ov = (b - a) - busy(k, a, b);
        self = ov > g->child[h->depth + 1] ? ov - g->child[h->depth + 1] : 0;
        g->child[h->depth + 1] = 0;
        g->child[h->depth] += ov;
        idle_add(&k->idle_win, h->stage, self);
    }
    memmove(held, held + n, (nheld - n) * sizeof *held);
    nheld -= n;
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
            free(tracks[k].s);
        memset(tracks, 0, sizeof tracks);
        ntracks = nstreams = 0;
        nheld = 0;
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
        span_add(&tracks[d], start_ns, end_ns);
        if (tracks[d].bin_at == 0) {
            tracks[d].bin_at = start_ns - start_ns % GPU_BIN_NS;
            prof_nvml_note_device(device);
            prof_gpu_mem_note_device(device);
        }
    }
    if (s >= 0)
        span_add(&tracks[s], start_ns, end_ns);
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

static void lost_text(struct prof_buf *b, int window)
{
    uint64_t other = window ? lost_other_win : lost_other_run;
    int i, n = 0;

    for (i = 0; i < GPU_LOST_STAGES && lost_tab[i].stage != NULL; i++) {
        uint64_t c = window ? lost_tab[i].win : lost_tab[i].run;

        if (c == 0)
            continue;
        prof_buf_printf(b, "%s %s %llu (%s)", n++ ? "," : "GPU sides lost:",
                        lost_tab[i].stage->name, (unsigned long long)c,
                        prof_cuda_lost_cause_name(lost_tab[i].cause));
    }
    if (other)
        prof_buf_printf(b, "%s other stages %llu", n++ ? "," : "GPU sides lost:",
                        (unsigned long long)other);
    if (n)
        prof_buf_puts(b, "\n");
}

static void lost_json(struct prof_buf *b, int window)
{
    int i, n = 0;

    prof_buf_puts(b, ",\"gpu_lost\":[");
    for (i = 0; i < GPU_LOST_STAGES && lost_tab[i].stage != NULL; i++) {
        uint64_t c = window ? lost_tab[i].win : lost_tab[i].run;

        if (c == 0)
            continue;
        prof_buf_puts(b, n++ ? ",{\"stage\":" : "{\"stage\":");
        prof_buf_json_string(b, lost_tab[i].stage->name);
        prof_buf_printf(b, ",\"count\":%llu,\"cause\":", (unsigned long long)c);
        prof_buf_json_string(b, prof_cuda_lost_cause_name(lost_tab[i].cause));
        prof_buf_puts(b, "}");
    }
    prof_buf_printf(b, "],\"gpu_lost_other\":%llu",
                    (unsigned long long)(window ? lost_other_win : lost_other_run));
}

void prof_gpu_launcher(struct prof_thread *t, const char *raw_name, int device)
{
    struct gthread *g;

    forked_check();

    if (device <= -2) {
        prof_gpu_lost(raw_name, -2 - device);
        return;
    }
    if (t->side[PROF_SIDE_GPU] != NULL || prof_config_get()->gpu_check_off ||
        (g = calloc(1, sizeof *g)) == NULL)
        return;
    g->device = device;
    g->track = -1;
    g->next = gthreads;
    gthreads = g;
    t->side[PROF_SIDE_GPU] = g;
    launchers = 1;
}

/* Until a thread has launched GPU work, no CPU zone is held: the drain
 * then converts no zone's start for this sink (sink.h's active). */
static int sink_active(void)
{
    return launchers;
}

static void sink_zone(const struct prof_event *e)
{
    struct gthread *g;

    /* Two loads for a thread that launches no GPU work. */
    if (e->thread == NULL || (g = e->thread->side[PROF_SIDE_GPU]) == NULL || e->stage == NULL ||
        e->lane != 0 || e->depth >= GPU_DEPTH)
        return;
    if (held == NULL && (held = malloc(GPU_CPU_ZONES * sizeof *held)) == NULL)
        return;
    if (nheld == GPU_CPU_ZONES)
        settle(GPU_CPU_ZONES / 2);
    held[nheld].g = g;
    held[nheld].stage = e->stage;
    held[nheld].a = e->start_ns;
    held[nheld].b = e->start_ns + e->dur_ns;
    held[nheld].depth = e->depth;
    nheld++;
}

static void sink_thread_gone(struct prof_thread *t)
{
    struct gthread *g = t->side[PROF_SIDE_GPU];

    if (g == NULL)
        return;
    /* Its held zones are settled now, on what has arrived. */
    settle(nheld);
    for (struct gthread **p = &gthreads; *p != NULL; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    free(g);
    t->side[PROF_SIDE_GPU] = NULL;
}

static void stage_forget(struct idle *d, const struct prof_stage *s)
{
    int i, j;

    for (i = 0; i < GPU_STAGES && d->st[i].stage != NULL; i++) {
        if (d->st[i].stage == s) {
            d->other_ns += d->st[i].ns;
            for (j = i; j + 1 < GPU_STAGES; j++)
                d->st[j] = d->st[j + 1];
            d->st[GPU_STAGES - 1].stage = NULL;
            d->st[GPU_STAGES - 1].ns = 0;
            return;
        }
    }
}

static void sink_stage_gone(struct prof_stage *s)
{
    size_t i, o = 0;
    int k;

    for (k = 0; k < ntracks; k++) {
        stage_forget(&tracks[k].idle_win, s);
        stage_forget(&tracks[k].idle_run, s);
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
    for (i = 0; i < nheld; i++)
        if (held[i].stage != s)
            held[o++] = held[i];
    nheld = o;
}

static void publish(void)
{
    int k;

    pthread_mutex_lock(&pub_lock);
    npub = 0;
    for (k = 0; k < ntracks; k++) {
        const struct track *t = &tracks[k];
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
        struct track *t = &tracks[k];
        char name[48];

        if (t->stream_no >= 0)
            continue;
        while (t->bin_at != 0 && t->bin_at + GPU_BIN_NS <= until) {
            double v = (double)busy(t, t->bin_at, t->bin_at + GPU_BIN_NS) / (double)GPU_BIN_NS;

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
        nheld = 0;
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
    .active = sink_active,
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
    settle(nheld);
    for (k = 0; k < ntracks; k++) {
        struct track *t = &tracks[k];
        uint64_t keep = hi;

        if (hi > lo)
            t->run_busy_ns += busy(t, lo, hi);
        if (t->gap_win > t->gap_run)
            t->gap_run = t->gap_win;
        t->gap_win = 0;
        t->gap = 0;
        idle_merge(&t->idle_run, &t->idle_win);
        memset(&t->idle_win, 0, sizeof t->idle_win);
        if (t->bin_at != 0 && t->bin_at < keep)
            keep = t->bin_at;
        drop_before(t, keep);
    }
    prof_nvml_window_close();
    prof_gpu_mem_window_close();
    win_lo = hi;
}

/* ---- the summary ---- */

struct figures {
    double busy;                    /* share of the wall time */
    uint64_t busy_ns, wall_ns;
    struct idle idle;               /* launchers' stages in the idle time */
    uint64_t gap_ns;
};

static void figures_of(const struct track *t, int window, uint64_t wall_ns, struct figures *f)
{
    uint64_t lo = window ? prof_rt.window_start_ns : prof_rt.start_ns, hi = lo + wall_ns;
    uint64_t wlo = win_lo != 0 && win_lo < hi ? win_lo : prof_rt.window_start_ns;

    if (wlo < lo)
        wlo = lo;

    memset(f, 0, sizeof *f);
    f->wall_ns = wall_ns;
    f->busy_ns = window ? busy(t, lo, hi) : t->run_busy_ns + busy(t, wlo, hi);
    if (f->busy_ns > wall_ns)
        f->busy_ns = wall_ns;
    f->busy = wall_ns ? (double)f->busy_ns / (double)wall_ns : 0;
    f->idle = t->idle_win;
    if (!window)
        idle_merge(&f->idle, &t->idle_run);
    f->gap_ns = t->gap_win > t->gap_run || window ? t->gap_win : t->gap_run;
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

static int pct(double v)
{
    return (int)(v * 100.0 + 0.5);
}

/* What the summary says of one device, in text or JSON: the zones' busy
 * share, NVML's figures, and the check where the utilization (NVML's
 * where there, else the zones') is under GPU_CHECK_BELOW. */
struct device_view {
    struct figures f;
    struct prof_nvml_figures nv;
    int have_nv;
    double util;
    int check;
    const char *band, *cause;
    const struct idle_stage *top;   /* the stage to name; NULL: none */
    int have_drv;                   /* no NVML figures: the driver's memory (gpu_mem.h) */
    uint64_t drv_used, drv_peak;
    double top_share;               /* its share of the idle time */
};

static void device_view(const struct track *t, int window, uint64_t wall_ns,
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
    v->top = idle_ns > 0 ? idle_top(&v->f.idle) : NULL;
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

void prof_gpu_summary_text(struct prof_buf *b, int window, uint64_t wall_ns)
{
    int k, j;

    forked_check();

    settle(nheld);
    /* The whole run's (at exit, or asked for): the trace gets its last
     * bins now, on what has arrived. */
    if (!window)
        bins_write(prof_rt.start_ns + wall_ns);
    for (k = 0; k < ntracks; k++) {
        const struct track *t = &tracks[k];
        struct device_view v;
        int nstr = 0;

        if (t->stream_no >= 0)
            continue;
        device_view(t, window, wall_ns, &v);
        prof_buf_printf(b, "GPU %d busy %d%%", t->device, pct(v.f.busy));
        if (v.have_nv)
            prof_buf_printf(b, " (nvidia-smi %d%%)", pct(v.nv.util));
        prof_buf_printf(b, ", idle %d%% of the %s", 100 - pct(v.f.busy),
                        window ? "window" : "run");
        if (v.check) {
            if (v.top != NULL)
                prof_buf_printf(b, ": %d%% of it in %s", pct(v.top_share), v.top->stage->name);
            prof_buf_printf(b, "; %s: %s", v.band, v.cause);
        }
        for (j = stream_next(t->device, 0); j < ntracks; j = stream_next(t->device, j + 1)) {
            struct figures fs;

            figures_of(&tracks[j], window, wall_ns, &fs);
            prof_buf_printf(b, "%s %d %d%%", nstr++ ? "," : "; streams", tracks[j].stream_no,
                            pct(fs.busy));
        }
        if (v.have_nv)
            prof_buf_printf(b, "; memory %llu MiB (peak %llu MiB), %d W, SM %u MHz",
                            (unsigned long long)(v.nv.mem_used / (1024 * 1024)),
                            (unsigned long long)(v.nv.mem_peak / (1024 * 1024)),
                            (int)(v.nv.power_w + 0.5), v.nv.sm_mhz);
        else if (v.have_drv)
            prof_buf_printf(b, "; memory %llu MiB (peak %llu MiB, driver)",
                            (unsigned long long)(v.drv_used / (1024 * 1024)),
                            (unsigned long long)(v.drv_peak / (1024 * 1024)));
        prof_buf_puts(b, "\n");
    }
    lost_text(b, window);
}

void prof_gpu_summary_json(struct prof_buf *b, int window, uint64_t wall_ns)
{
    int k, j, n = 0;

    forked_check();

    settle(nheld);
    prof_buf_puts(b, ",\"gpus\":[");
    for (k = 0; k < ntracks; k++) {
        const struct track *t = &tracks[k];
        struct device_view v;
        int ns = 0;

        if (t->stream_no >= 0)
            continue;
        device_view(t, window, wall_ns, &v);
        prof_buf_printf(b, "%s{\"device\":%d,\"busy\":", n++ ? "," : "", t->device);
        prof_buf_double(b, v.f.busy);
        prof_buf_printf(b, ",\"busy_ns\":%llu,\"wall_ns\":%llu,\"merged_gap_ns\":%llu,"
                           "\"streams\":[", (unsigned long long)v.f.busy_ns,
                        (unsigned long long)v.f.wall_ns, (unsigned long long)v.f.gap_ns);
        for (j = stream_next(t->device, 0); j < ntracks; j = stream_next(t->device, j + 1)) {
            struct figures fs;

            figures_of(&tracks[j], window, wall_ns, &fs);
            prof_buf_printf(b, "%s{\"stream\":%d,\"busy\":", ns++ ? "," : "", tracks[j].stream_no);
            prof_buf_double(b, fs.busy);
            prof_buf_puts(b, "}");
        }
        prof_buf_puts(b, "],\"nvml\":");
        if (v.have_nv) {
            prof_buf_puts(b, "{\"utilization\":");
            prof_buf_double(b, v.nv.util);
            prof_buf_printf(b, ",\"memory_used_bytes\":%llu,\"memory_peak_bytes\":%llu,"
                            "\"power_w\":", (unsigned long long)v.nv.mem_used,
                            (unsigned long long)v.nv.mem_peak);
            prof_buf_double(b, v.nv.power_w);
            prof_buf_printf(b, ",\"sm_clock_mhz\":%u,\"samples\":%llu}", v.nv.sm_mhz,
                            (unsigned long long)v.nv.samples);
        } else {
            prof_buf_puts(b, "null");
        }
        /* Device memory, NVML's or else the driver's: the last sample and
         * the largest. */
        if (v.have_nv || v.have_drv)
            prof_buf_printf(b, ",\"memory\":{\"used_bytes\":%llu,\"peak_bytes\":%llu,"
                            "\"source\":\"%s\"}",
                            (unsigned long long)(v.have_nv ? v.nv.mem_used : v.drv_used),
                            (unsigned long long)(v.have_nv ? v.nv.mem_peak : v.drv_peak),
                            v.have_nv ? "nvml" : "driver");
        else
            prof_buf_puts(b, ",\"memory\":null");
        prof_buf_puts(b, ",\"check\":");
        if (v.check) {
            prof_buf_puts(b, "{\"band\":");
            prof_buf_json_string(b, v.band);
            prof_buf_puts(b, ",\"cause\":");
            prof_buf_json_string(b, v.cause);
            prof_buf_printf(b, ",\"utilization_source\":\"%s\",\"utilization\":",
                            v.have_nv ? "nvml" : "zones");
            prof_buf_double(b, v.util);
            prof_buf_puts(b, ",\"idle\":");
            prof_buf_double(b, 1.0 - v.f.busy);
            prof_buf_puts(b, ",\"stage\":");
            if (v.top != NULL) {
                prof_buf_json_string(b, v.top->stage->name);
                prof_buf_puts(b, ",\"stage_share\":");
                prof_buf_double(b, v.top_share);
            } else {
                prof_buf_puts(b, "null,\"stage_share\":null");
            }
            prof_buf_puts(b, "}");
        } else {
            prof_buf_puts(b, "null");
        }
        prof_buf_puts(b, "}");
    }
    prof_buf_puts(b, "]");
    lost_json(b, window);
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
        const struct track *t = &tracks[k];
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

void prof_gpu_metrics(struct prof_buf *b, int rank)
{
    int i;

    pthread_mutex_lock(&pub_lock);
    if (npub > 0)
        prof_buf_puts(b, "# HELP prof_gpu_busy_ratio Share of the last second during which "
                         "the device ran GPU zones' work (union of their spans).\n"
                         "# TYPE prof_gpu_busy_ratio gauge\n");
    for (i = 0; i < npub; i++) {
        prof_buf_printf(b, "prof_gpu_busy_ratio{device=\"%d\",rank=\"%d\"} ", pub[i].device, rank);
        prof_buf_fixed(b, pub[i].busy, 4);
        prof_buf_puts(b, "\n");
    }
    pthread_mutex_unlock(&pub_lock);
    prof_gpu_mem_metrics(b, rank, prof_nvml_metrics(b, rank));
}
