/* stats.c - stages and call-path nodes, and what each record adds to
 * them: the statistics' sink (sink.h), on the drain's path.
 *
 * Names reach the collector as raw pointers. A pointer map caches raw
 * pointer -> stage; on a miss the name is interned (one pointer per
 * contents) and looked up by that, so the same name from two call sites,
 * threads or languages lands in one stage.
 *
 * Nesting: each record carries the path hash of its parent (prof_impl.h). The
 * collector re-derives the record's own path hash and keeps a node per path
 * (stage, parent path). A parent's node exists once one of its zones ended;
 * for a zone still running (an "epoch" that lasts hours) the tree builders
 * (stats_tree.c, stats_rows.c) have the open-zone stacks of the live
 * threads read here, their path hashes recomputed and the nodes that
 * children point to created; a thread that exits with zones still open
 * (pthread_exit, pthread_cancel in C) leaves them the same way as it is
 * freed.
 *
 * Rows are paths. A stage's only node counts nothing itself: its zones
 * are the stage's (less the rare strays, zones of the stage in no node of
 * it). Once a stage has a second path, each of its nodes counts its zones
 * (count, total, self: struct prof_path_ext), and each zone's duration
 * goes into one histogram: its node's own, or, for the stage's first node
 * and for nodes past PROF_STATS_PATH_HISTS, its stage's. So a stage seen
 * on one path costs its stage's numbers and no more (the drain's common
 * case), and each zone costs one histogram bucket either way. How rows
 * and the per-name tree are built from the nodes: stats_rows.c,
 * stats_tree.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "intern.h"
#include "map.h"
#include "registry.h"
#include "site.h"
#include "sink.h"
#include "slab.h"
#include "stats.h"
#include "stats_private.h"

uint64_t prof_stats_hist_lost;

static struct prof_map by_raw;      /* raw name pointer -> stage, tagged
                                       (raw_tag) */
struct prof_map prof_stats_by_name; /* interned name -> stage */
struct prof_map prof_stats_nodes;   /* path hash -> node */
static struct prof_map gpu_by_raw;  /* raw name pointer -> GPU stage */
static struct prof_slab stage_slab = PROF_SLAB_INIT(sizeof(struct prof_stage));
static struct prof_slab node_slab = PROF_SLAB_INIT(sizeof(struct prof_node));
static size_t path_hists;           /* prof_path_acc allocated */
size_t prof_stats_shared_nodes;     /* nodes of stages with more than one */
uint64_t prof_stats_paths_nohist;   /* nodes past PROF_STATS_PATH_HISTS */

/* by_raw keeps site.c's answer with the stage, so that no one asks it
 * again for the pointer (prof_stats_site): the stage's pointer with its
 * low bit set when the name pointer is a call site. A site's pointer is
 * the site (site.h), so the bit is the whole answer. Stages are slab
 * blocks, 16-aligned. */
#define RAW_SITE ((uintptr_t)1)

static inline void *raw_tag(struct prof_stage *s, const struct prof_site_ *site)
{
    return (void *)((uintptr_t)s | (site != NULL ? RAW_SITE : 0));
}

static inline struct prof_stage *raw_stage(void *v)
{
    return (struct prof_stage *)((uintptr_t)v & ~RAW_SITE);
}

static void acc_add(struct prof_acc *a, uint64_t dur, uint64_t self)
{
    if (a->count == 0 || dur < a->min)
        a->min = dur;
    if (dur > a->max)
        a->max = dur;
    a->count++;
    a->total += dur;
    a->self += self;
    /* Out of memory for a histogram group: the value is in every number
     * but the percentiles; counted, and shown with the losses. */
    if (prof_hist_record(&a->hist, dur) != 0)
        prof_stats_hist_lost++;
}

/* A zone's duration into the run and the window at once: one bucket
 * found for both histograms. */
static inline void acc_add_both(struct prof_acc *r, struct prof_acc *w, uint64_t dur,
                                uint64_t self)
{
    if (r->count == 0 || dur < r->min)
        r->min = dur;
    if (dur > r->max)
        r->max = dur;
    r->count++;
    r->total += dur;
    r->self += self;
    if (w->count == 0 || dur < w->min)
        w->min = dur;
    if (dur > w->max)
        w->max = dur;
    w->count++;
    w->total += dur;
    w->self += self;
    prof_stats_hist_lost += (uint64_t)prof_hist_record_pair(&r->hist, &w->hist, dur);
}

static struct prof_stage *stage_create(const char *name, uint32_t flags)
{
    struct prof_stage *s = prof_slab_alloc(&stage_slab);

    if (s == NULL)
        return NULL;
    s->name = name;
    s->flags = flags;
    if (prof_map_put(&prof_stats_by_name, (uintptr_t)name, s) != 0) {
        prof_slab_free(&stage_slab, s);
        return NULL;
    }
    return s;
}

struct prof_stage *prof_stats_stage(const char *raw, uint32_t flags)
{
    struct prof_map *cache = (flags & PROF_STAGE_GPU) ? &gpu_by_raw : &by_raw;
    struct prof_stage *s = raw_stage(prof_map_get(cache, raw ? (uintptr_t)raw : 1));
    const struct prof_site_ *site = NULL;
    const char *name;

    if (s != NULL)
        return s;
    if (flags & PROF_STAGE_GPU) {
        /* "<name> [gpu]": built once per raw pointer, then cached. */
        const char *cpu = raw ? prof_site_name(raw) : "(null)";
        size_t n = strlen(cpu);
        char *tmp = malloc(n + 7);
        if (tmp == NULL)
            return NULL;
        memcpy(tmp, cpu, n);
        memcpy(tmp + n, " [gpu]", 7);
        name = prof_intern(tmp);
        free(tmp);
    } else {
        name = canonical(raw, &site);
    }
    if (name == NULL)
        return NULL;
    s = prof_map_get(&prof_stats_by_name, (uintptr_t)name);
    if (s == NULL && (s = stage_create(name, flags)) == NULL)
        return NULL;
    if (prof_map_put(cache, raw ? (uintptr_t)raw : 1, raw_tag(s, site)) != 0)
        return NULL;
    return s;
}

static struct prof_node *node_get(uint32_t hash, uint32_t parent, struct prof_stage *s,
                                  const char *raw)
{
    struct prof_node *n = prof_map_get(&prof_stats_nodes, hash);

    if (n == NULL) {
        if ((n = prof_slab_alloc(&node_slab)) == NULL)
            return NULL;
        memset(n, 0, sizeof *n);
        n->parent = parent;
        n->raw = raw;
        n->stage = s;
        if (prof_map_put(&prof_stats_nodes, hash, n) != 0) {
            prof_slab_free(&node_slab, n);
            return NULL;
        }
        /* The stage's first path uses the stage's histogram; another
         * gets its own, within the bound (else its zones join the
         * stage's, and rows that share it may show no distribution).
         * The first one's count and times, implicit while it was alone,
         * are kept from now on. */
        if (s->npaths == 0) {
            s->first = n;
        }
        prof_stats_shared_nodes += s->npaths == 1 ? 2 : s->npaths > 1;
        if (s->npaths == 1) {
            struct prof_path_sum run = node_sum(s->first, 0), win = node_sum(s->first, 1);
            if ((s->first->ext = calloc(1, sizeof *s->first->ext)) != NULL) {
                s->first->ext->run = run;
                s->first->ext->win = win;
            }
        }
        if (s->npaths++ > 0 && (n->ext = calloc(1, sizeof *n->ext)) != NULL) {
            if (path_hists < PROF_STATS_PATH_HISTS &&
                (n->ext->acc = calloc(1, sizeof *n->ext->acc)) != NULL) {
                path_hists++;
                n->ext->acc->next = s->paths;
                s->paths = n->ext->acc;
            } else {
                prof_stats_paths_nohist++;
            }
        }
    }
    return n;
}

struct prof_stage *prof_stats_zone_stage(const char *raw, uint32_t parent_path,
                                         struct prof_node **node)
{
    uint32_t hash = prof_path_mix_(parent_path, raw);
    struct prof_node *n = prof_map_get(&prof_stats_nodes, hash);
    struct prof_stage *s;

    /* The drain's common case: a path seen before, by the same pointer. A
     * node made by another pointer (a 32-bit hash shared by two paths)
     * keeps its stage; this zone's is looked up by its own name. */
    if (n != NULL && n->raw == raw) {
        *node = n;
        return n->stage;
    }
    if ((s = prof_stats_stage(raw, 0)) == NULL)
        return NULL;
    *node = n != NULL ? n : node_get(hash, parent_path, s, raw);
    return s;
}

/* A zone of s in no node of s (out of line: rare). Out of memory for the
 * strays' count, the stage's first path counts it as its own. */
static void stray_add(struct prof_stage *s, uint64_t dur, uint64_t self)
{
    if (s->stray == NULL && (s->stray = calloc(1, sizeof *s->stray)) == NULL)
        return;
    s->stray->run.count++;
    s->stray->run.total += dur;
    s->stray->run.self += self;
    s->stray->win.count++;
    s->stray->win.total += dur;
    s->stray->win.self += self;
}

void prof_stats_zone(struct prof_stage *s, struct prof_node *n, uint64_t dur, uint64_t self)
{
    struct prof_acc *r = &s->run, *w = &s->win;

    /* A node of another stage (two paths sharing a 32-bit hash): the
     * zone is its stage's, in no path's row. */
    if (__builtin_expect(n == NULL || n->stage != s, 0)) {
        stray_add(s, dur, self);
    } else if (n->ext != NULL) {
        struct prof_path_ext *x = n->ext;
        x->run.count++;
        x->run.total += dur;
        x->run.self += self;
        x->win.count++;
        x->win.total += dur;
        x->win.self += self;
        if (x->acc != NULL) {
            r = &x->acc->run;
            w = &x->acc->win;
        }
    } else if (s->npaths > 1) {
        /* (no memory for the path's own count) */
        stray_add(s, dur, self);
    }
    acc_add_both(r, w, dur, self);
}

void prof_stats_zone_cpu(struct prof_stage *s, struct prof_node *n, uint64_t self, uint64_t cpu,
                         int unsampled)
{
    (void)n;   /* per stage; a path node keeps only its total */
    s->run.cpu_ns += cpu;
    s->win.cpu_ns += cpu;
    if (unsampled) {
        s->run.cpu_unsampled += self;
        s->win.cpu_unsampled += self;
    }
}

void prof_stats_zone_peak(struct prof_stage *s, uint64_t bytes)
{
    s->run.peak_bytes += bytes;
    s->win.peak_bytes += bytes;
}

void prof_stats_gpu_zone(struct prof_stage *gpu, struct prof_stage *cpu, uint64_t dur)
{
    gpu->fixed_parent = cpu;
    acc_add(&gpu->run, dur, dur);
    acc_add(&gpu->win, dur, dur);
    /* GPU time overlaps CPU time: it never counts toward wall share other
     * than its own. */
    gpu->outer_run += dur;
    gpu->outer_win += dur;
}

const struct prof_site_ *prof_stats_site(const char *raw)
{
    uintptr_t v = (uintptr_t)prof_map_get(&by_raw, raw ? (uintptr_t)raw : 1);

    if (v == 0)
        return prof_site_of(raw);   /* no zone of it taken since the last reset */
    return (v & RAW_SITE) ? (const struct prof_site_ *)(const void *)raw : NULL;
}

struct prof_stage *prof_stats_find(const char *name)
{
    const char *n = prof_intern(name);

    return n ? prof_map_get(&prof_stats_by_name, (uintptr_t)n) : NULL;
}

size_t prof_stats_nstages(void)
{
    return prof_stats_by_name.len;
}

/* Create the nodes of the zones open on t's stack that an ended zone
 * names as its parent. Returns -ENOMEM when a stage could not be made. */
static int attach_open_stack(const struct prof_thread *t)
{
    uint32_t path[PROF_MAX_DEPTH_ + 1];
    const char *names[PROF_MAX_DEPTH_];
    uint32_t depth = __atomic_load_n(&t->hot.depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;

    if (depth > PROF_MAX_DEPTH_)
        depth = PROF_MAX_DEPTH_;
    path[0] = PROF_PATH_ROOT_;
    for (uint32_t d = 0; d < depth; d++) {
        /* Acquire pairs with the opening thread's release: the string
         * a pointer names is visible with it. */
        names[d] = __atomic_load_n(&t->hot.names[d], __ATOMIC_ACQUIRE);
        path[d + 1] = prof_path_mix_(path[d], names[d]);
    }
    /* The stack may have moved while we read it; a torn read gives hashes
     * that no record refers to, so nothing is attached to them. Only add
     * the prefix that ends at a hash some node waits for. */
    for (uint32_t d = depth; d >= 1; d--) {
        int wanted = 0;
        for (size_t i = 0; i < prof_stats_nodes.cap && !wanted; i++) {
            struct prof_node *n = prof_stats_nodes.slots[i].value;
            wanted = prof_stats_nodes.slots[i].key != 0 && n->parent == path[d];
        }
        if (!wanted || prof_map_get(&prof_stats_nodes, path[d]) != NULL)
            continue;
        for (uint32_t k = 1; k <= d; k++) {
            struct prof_stage *s;
            if (prof_map_get(&prof_stats_nodes, path[k]) != NULL)
                continue;
            if ((s = prof_stats_stage(names[k - 1], 0)) == NULL)
                return -ENOMEM;
            node_get(path[k], path[k - 1], s, names[k - 1]);
        }
        break;
    }
    return 0;
}

/* Create the nodes of zones that are still open on live threads, where an
 * ended zone names them as its parent. */
void prof_stats_resolve_open_parents(void)
{
    int missing = 0;

    for (size_t i = 0; i < prof_stats_nodes.cap && !missing; i++) {
        struct prof_node *n = prof_stats_nodes.slots[i].value;
        if (prof_stats_nodes.slots[i].key != 0 && n->parent != PROF_PATH_ROOT_ &&
            prof_map_get(&prof_stats_nodes, n->parent) == NULL)
            missing = 1;
    }
    if (!missing)
        return;
    for (struct prof_thread *t = prof_threads; t != NULL; t = t->next)
        if (attach_open_stack(t) != 0)
            return;
}

void prof_stats_thread_gone(const struct prof_thread *t)
{
    /* Its open-zone stack is about to be freed: the nodes its children
     * point to must exist before it goes, or they lose their parent. */
    if ((__atomic_load_n(&t->hot.depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_) > 0)
        attach_open_stack(t);
}

void prof_stats_stages_window_reset(void)
{
    for (size_t i = 0; i < prof_stats_by_name.cap; i++) {
        struct prof_stage *s = prof_stats_by_name.slots[i].value;
        if (prof_stats_by_name.slots[i].key == 0)
            continue;
        acc_clear(&s->win);
        if (s->stray != NULL)
            memset(&s->stray->win, 0, sizeof s->stray->win);
        s->flags &= ~PROF_STAGE_LOSSY_WIN_;
        if (s->flags & PROF_STAGE_GPU)
            s->outer_win = 0;
    }
    for (size_t i = 0; i < prof_stats_nodes.cap; i++) {
        struct prof_node *n = prof_stats_nodes.slots[i].value;
        if (prof_stats_nodes.slots[i].key == 0)
            continue;
        if (n->ext == NULL)
            continue;
        memset(&n->ext->win, 0, sizeof n->ext->win);
        if (n->ext->acc != NULL)
            acc_clear(&n->ext->acc->win);
    }
}

static void stage_free(void *p)
{
    struct prof_stage *s = p;

    acc_clear(&s->run);
    acc_clear(&s->win);
    free(s->stray);
    for (const struct prof_sink *const *k = prof_sinks; *k != NULL; k++)
        if ((*k)->stage_gone != NULL)
            (*k)->stage_gone(s);
    prof_slab_free(&stage_slab, s);
}

static void node_free(void *p)
{
    struct prof_node *n = p;

    if (n->ext != NULL && n->ext->acc != NULL) {
        acc_clear(&n->ext->acc->run);
        acc_clear(&n->ext->acc->win);
        free(n->ext->acc);
    }
    free(n->ext);
    prof_slab_free(&node_slab, n);
}

void prof_stats_stages_reset(void)
{
    free_values(&prof_stats_by_name, stage_free);
    free_values(&prof_stats_nodes, node_free);
    path_hists = 0;
    prof_stats_paths_nohist = 0;
    prof_stats_shared_nodes = 0;
    prof_map_clear(&by_raw);
    prof_map_clear(&gpu_by_raw);
}

/* ------------------------------------------------------------------------ */
/* The statistics as the collector's first sink (sink.h). */

static void sink_zone(const struct prof_event *e)
{
    prof_stats_zone(e->stage, e->node, e->dur_ns, e->self_ns);
    if (__builtin_expect(e->cpu_ns != 0 || e->cpu_unsampled, 0))
        prof_stats_zone_cpu(e->stage, e->node, e->self_ns, e->cpu_ns, e->cpu_unsampled);
    if (__builtin_expect(e->peak_bytes != 0, 0))
        prof_stats_zone_peak(e->stage, e->peak_bytes);
}

static void sink_counter(const struct prof_event *e, double value)
{
    prof_stats_counter(e->raw, value);
}

static void sink_mark(const struct prof_event *e)
{
    prof_stats_mark(e->raw);
}

static void sink_thread_gone(struct prof_thread *t)
{
    prof_stats_thread_gone(t);
}

static void sink_gpu_zone(struct prof_stage *gpu, struct prof_stage *cpu, int device,
                          uint64_t stream, uint64_t start_ns, uint64_t end_ns)
{
    (void)device;
    (void)stream;
    prof_stats_gpu_zone(gpu, cpu, end_ns > start_ns ? end_ns - start_ns : 0);
}

const struct prof_sink prof_stats_sink = {
    .name = "stats",
    .zone = sink_zone,
    .counter = sink_counter,
    .mark = sink_mark,
    .gpu_zone = sink_gpu_zone,
    .thread_gone = sink_thread_gone,
};
