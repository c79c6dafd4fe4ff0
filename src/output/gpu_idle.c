/* gpu_idle.c - which CPU stage a GPU waited for (gpu_idle.h).
 *
 * Design
 * ------
 * The bottleneck check (the ML profiling checklist's first question: under
 * 85% busy, what did the GPU wait for?). A thread whose CUDA zone the
 * drain takes is a launcher of its device (prof_gpu_idle_launcher). Its CPU
 * zones are held (GPU_CPU_ZONES at most; when full the older half is
 * settled early) until a summary, when the GPU's spans of their time have
 * arrived; then each zone's overlap with the device's idle time (the window
 * less the busy union), less its children's (they ended before it, per
 * thread, as in selftime.c), is added to its stage: the stage a launcher
 * was in, itself, while the GPU had nothing to do. The summary names the
 * stage with the largest share of the idle time. The time a stepping
 * thread spends outside every zone ("(no stage)", uncovered.h) comes as a
 * zone at depth 0 just before the next top-level zone, after that zone's
 * children: it has no children and is no parent's, so it takes its whole
 * overlap and leaves the sums alone (taking them made the next top-level
 * zone's children's idle time count again as the zone's own).
 *
 * Threads: every call runs with the runtime lock held (one thread at a
 * time). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "env.h"
#include "gpu_idle.h"
#include "gpu_track.h"
#include "registry.h"
#include "sink.h"
#include "uncovered.h"

#define GPU_CPU_ZONES 16384         /* launchers' CPU zones held until a summary */
#define GPU_DEPTH 64                /* deeper CPU zones are left out of the check */

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
    int uncovered;              /* "(no stage)": no child, no parent */
};

static struct held *held;
static size_t nheld;
static int launchers;                /* a thread has a gthread (prof_gpu_idle_active) */
/* Every gthread, so that one whose thread is still alive at exit is held
 * from memory LeakSanitizer reads: thread slots are mapped pages. */
static struct gthread *gthreads;

static void idle_add(struct prof_gpu_idle *d, struct prof_stage *s, uint64_t ns)
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

void prof_gpu_idle_merge(struct prof_gpu_idle *into, const struct prof_gpu_idle *from)
{
    int i;

    for (i = 0; i < GPU_STAGES && from->st[i].stage != NULL; i++)
        idle_add(into, from->st[i].stage, from->st[i].ns);
    into->other_ns += from->other_ns;
}

const struct prof_gpu_idle_stage *prof_gpu_idle_top(const struct prof_gpu_idle *d)
{
    const struct prof_gpu_idle_stage *top = NULL;
    int i;

    for (i = 0; i < GPU_STAGES && d->st[i].stage != NULL; i++)
        if (top == NULL || d->st[i].ns > top->ns)
            top = &d->st[i];
    return top;
}

void prof_gpu_idle_forget(struct prof_gpu_idle *d, const struct prof_stage *s)
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

/* The device's own track (not a stream's), or -1. */
static int track_find(const struct prof_gpu_track *tracks, int ntracks, int device)
{
    int i;

    for (i = 0; i < ntracks; i++)
        if (tracks[i].device == device && tracks[i].stream_no < 0)
            return i;
    return -1;
}

/* Attribute the first n held CPU zones (see the design notes). */
static void settle(size_t n, struct prof_gpu_track *tracks, int ntracks, uint64_t win_lo)
{
    size_t i;

    if (n == 0)
        return;
    for (i = 0; i < n; i++) {
        const struct held *h = &held[i];
        struct gthread *g = h->g;
        struct prof_gpu_track *k;
        uint64_t a = h->a > win_lo ? h->a : win_lo, b = h->b, ov = 0, self;

        if (g->track >= ntracks ||
            (g->track < 0 && (g->track = track_find(tracks, ntracks, g->device)) < 0))
            continue;           /* no GPU zone of its device has completed */
        k = &tracks[g->track];
        if (b > a)
            ov = (b - a) - prof_spans_busy(&k->sp, a, b);
        if (h->uncovered) {
            idle_add(&k->idle_win, h->stage, ov);
            continue;
        }
        self = ov > g->child[h->depth + 1] ? ov - g->child[h->depth + 1] : 0;
        g->child[h->depth + 1] = 0;
        g->child[h->depth] += ov;
        idle_add(&k->idle_win, h->stage, self);
    }
    memmove(held, held + n, (nheld - n) * sizeof *held);
    nheld -= n;
}

void prof_gpu_idle_settle(struct prof_gpu_track *tracks, int ntracks, uint64_t win_lo)
{
    settle(nheld, tracks, ntracks, win_lo);
}

void prof_gpu_idle_launcher(struct prof_thread *t, int device)
{
    struct gthread *g;

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
int prof_gpu_idle_active(void)
{
    return launchers;
}

void prof_gpu_idle_zone(const struct prof_event *e, struct prof_gpu_track *tracks, int ntracks,
                        uint64_t win_lo)
{
    struct gthread *g;

    /* Two loads for a thread that launches no GPU work. */
    if (e->thread == NULL || (g = e->thread->side[PROF_SIDE_GPU]) == NULL || e->stage == NULL ||
        e->lane != 0 || e->depth >= GPU_DEPTH)
        return;
    if (held == NULL && (held = malloc(GPU_CPU_ZONES * sizeof *held)) == NULL)
        return;
    if (nheld == GPU_CPU_ZONES)
        settle(GPU_CPU_ZONES / 2, tracks, ntracks, win_lo);
    held[nheld].g = g;
    held[nheld].stage = e->stage;
    held[nheld].a = e->start_ns;
    held[nheld].b = e->start_ns + e->dur_ns;
    held[nheld].depth = e->depth;
    held[nheld].uncovered = e->raw == prof_no_stage;
    nheld++;
}

void prof_gpu_idle_thread_gone(struct prof_thread *t, struct prof_gpu_track *tracks, int ntracks,
                               uint64_t win_lo)
{
    struct gthread *g = t->side[PROF_SIDE_GPU];

    if (g == NULL)
        return;
    /* Its held zones are settled now, on what has arrived. */
    settle(nheld, tracks, ntracks, win_lo);
    for (struct gthread **p = &gthreads; *p != NULL; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    free(g);
    t->side[PROF_SIDE_GPU] = NULL;
}

void prof_gpu_idle_stage_gone(const struct prof_stage *s)
{
    size_t i, o = 0;

    for (i = 0; i < nheld; i++)
        if (held[i].stage != s)
            held[o++] = held[i];
    nheld = o;
}

void prof_gpu_idle_drop_held(void)
{
    nheld = 0;
}
