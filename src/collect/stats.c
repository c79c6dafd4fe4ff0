/* stats.c - stages, call-path nodes, counters and marks; the summary tree.
 *
 * Names reach the collector as raw pointers. A pointer map caches raw
 * pointer -> stage; on a miss the name is interned (one pointer per
 * contents) and looked up by that, so the same name from two call sites,
 * threads or languages lands in one stage.
 *
 * Nesting: each record carries the path hash of its parent (prof_impl.h). The
 * collector re-derives the record's own path hash and keeps a node per path
 * (stage, parent path). A parent's node exists once one of its zones ended;
 * for a zone still running (an "epoch" that lasts hours) the tree builder
 * reads the open-zone stacks of the live threads, recomputes their path
 * hashes and creates the nodes that children point to; a thread that exits
 * with zones still open (pthread_exit, pthread_cancel in C) leaves them the
 * same way as it is freed.
 *
 * Rows are paths. A stage's only node counts nothing itself: its zones
 * are the stage's (less the rare strays, zones of the stage in no node of
 * it). Once a stage has a second path, each of its nodes counts its zones
 * (count, total, self: struct prof_path_ext), and each zone's duration
 * goes into one histogram: its node's own, or, for the stage's first node
 * and for nodes past PROF_STATS_PATH_HISTS, its stage's. So a stage seen
 * on one path costs what it did when rows were per name, and each zone
 * costs one histogram bucket either way. The rows
 * (prof_stats_rows) group nodes by their path with recursion folded: a node
 * whose stage already runs above it shows in the outermost such row, and
 * nodes of one stage under one row (two call sites of a name, or the same
 * child below several depths of a recursion) share a row. A row's
 * distribution is its nodes' histograms merged; where some of them are in
 * the stage's histogram, it is the row's only when every zone there is the
 * row's, else the row shows none (PROF_STAGE_NOHIST_).
 *
 * What is asked by name (prof_stats_fill) is the stage: its histogram and
 * its paths' own merged, placed under the parent stage of its heaviest
 * node (prof_stats_tree). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "intern.h"
#include "map.h"
#include "order.h"
#include "registry.h"
#include "runtime.h"
#include "sampler.h"
#include "site.h"
#include "sink.h"
#include "slab.h"
#include "stats.h"

/* A path's own distribution (past its stage's first path, within
 * PROF_STATS_PATH_HISTS). */
struct prof_path_acc {
    struct prof_acc run, win;
    struct prof_path_acc *next;  /* the stage's next */
};

/* A path's own count and times, once its stage has more than one. */
struct prof_path_ext {
    struct prof_path_sum run, win;
    struct prof_path_acc *acc;   /* NULL: its zones are in the stage's */
};

struct prof_node {
    const char *raw;             /* the name pointer of the zone that made
                                    it: a zone whose hash finds a node of
                                    its own pointer takes the node's stage
                                    (one lookup, not two) */
    struct prof_stage *stage;
    /* NULL while it is its stage's only path: its count and times are
     * then the stage's (node_sum). 64 bytes a node: a drain over 100k
     * paths touches every node's first line, and their pages. */
    struct prof_path_ext *ext;
    uint32_t parent;             /* path hash of the parent zone */
    uint32_t gen;                /* the path tree build that placed it */
    /* Scratch of the path tree (prof_stats_rows): the node whose row it
     * shows in (itself when it is the row's first), and for a row's first
     * node, the row above; the row's nodes are linked from its first. */
    uint32_t row;                /* the first node's: its candidate index */
    uint32_t recursive;          /* its stage runs above it */
    struct prof_node *rep, *up, *next_member;
};
_Static_assert(sizeof(struct prof_node) <= 64, "a node is one cache line's worth");

uint64_t prof_stats_hist_lost;

static struct prof_map by_raw;      /* raw name pointer -> stage */
static struct prof_map by_name;     /* interned name -> stage */
static struct prof_map nodes;       /* path hash -> node */
static struct prof_map counters;    /* interned name -> counter */
static struct prof_map marks;       /* interned name -> mark */
static struct prof_map gpu_by_raw;  /* raw name pointer -> GPU stage */
static struct prof_slab stage_slab = PROF_SLAB_INIT(sizeof(struct prof_stage));
static struct prof_slab node_slab = PROF_SLAB_INIT(sizeof(struct prof_node));
static size_t path_hists;           /* prof_path_acc allocated */
static size_t shared_nodes;         /* nodes of stages with more than one */
static uint64_t paths_nohist;       /* nodes past PROF_STATS_PATH_HISTS */
static uint32_t tree_gen;

/* A call site's stage is its name's: the sites of one name share it. */
const char *prof_stats_site_raw;
const struct prof_site_ *prof_stats_site;
static const char *canonical(const char *raw)
{
    prof_stats_site = prof_site_of(prof_stats_site_raw = raw);
    raw = prof_stats_site != NULL ? prof_stats_site->name : raw;
    return raw == NULL ? prof_intern("(null)") : prof_intern(raw);
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

static void acc_clear(struct prof_acc *a)
{
    /* Nothing added since the last clear: already clear. A window reset
     * of a million stages, most of them idle, costs a pass over them, not
     * a million histogram walks. The sampled figures are the stage's
     * whichever path its zones counted under, so they may be set on an
     * accumulator that counts none. */
    if (a->count == 0) {
        a->cpu_ns = a->cpu_unsampled = a->peak_bytes = 0;
        return;
    }
    prof_hist_clear(&a->hist);
    memset(a, 0, sizeof *a);
}

static struct prof_stage *stage_create(const char *name, uint32_t flags)
{
    struct prof_stage *s = prof_slab_alloc(&stage_slab);

    if (s == NULL)
        return NULL;
    s->name = name;
    s->flags = flags;
    if (prof_map_put(&by_name, (uintptr_t)name, s) != 0) {
        prof_slab_free(&stage_slab, s);
        return NULL;
    }
    return s;
}

struct prof_stage *prof_stats_stage(const char *raw, uint32_t flags)
{
    struct prof_map *cache = (flags & PROF_STAGE_GPU) ? &gpu_by_raw : &by_raw;
    struct prof_stage *s = prof_map_get(cache, raw ? (uintptr_t)raw : 1);
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
        name = canonical(raw);
    }
    if (name == NULL)
        return NULL;
    s = prof_map_get(&by_name, (uintptr_t)name);
    if (s == NULL && (s = stage_create(name, flags)) == NULL)
        return NULL;
    if (prof_map_put(cache, raw ? (uintptr_t)raw : 1, s) != 0)
        return NULL;
    return s;
}

/* A node's count and times. A stage's only node counts nothing itself
 * (the drain's common case costs one histogram and no more): its zones
 * are the stage's, less the strays. */
static struct prof_path_sum node_sum(const struct prof_node *n, int window)
{
    const struct prof_stage *s = n->stage;
    const struct prof_acc *a;
    const struct prof_path_sum *x;
    struct prof_path_sum r;

    if (n->ext != NULL)
        return window ? n->ext->win : n->ext->run;
    if (s->npaths != 1 || s->first != n) {
        memset(&r, 0, sizeof r);     /* (no memory for its own) */
        return r;
    }
    a = window ? &s->win : &s->run;
    r.count = a->count;
    r.total = a->total;
    r.self = a->self;
    if (s->stray != NULL) {
        x = window ? &s->stray->win : &s->stray->run;
        r.count -= x->count;
        r.total -= x->total;
        r.self -= x->self;
    }
    return r;
}

static struct prof_node *node_get(uint32_t hash, uint32_t parent, struct prof_stage *s,
                                  const char *raw)
{
    struct prof_node *n = prof_map_get(&nodes, hash);

    if (n == NULL) {
        if ((n = prof_slab_alloc(&node_slab)) == NULL)
            return NULL;
        memset(n, 0, sizeof *n);
        n->parent = parent;
        n->raw = raw;
        n->stage = s;
        if (prof_map_put(&nodes, hash, n) != 0) {
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
        shared_nodes += s->npaths == 1 ? 2 : s->npaths > 1;
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
                paths_nohist++;
            }
        }
    }
    return n;
}

struct prof_stage *prof_stats_zone_stage(const char *raw, uint32_t parent_path,
                                         struct prof_node **node)
{
    uint32_t hash = prof_path_mix_(parent_path, raw);
    struct prof_node *n = prof_map_get(&nodes, hash);
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

static void counter_add(struct prof_counter_acc *a, double v)
{
    /* NaN or an infinity would poison min, max and avg for the rest of the
     * run (and JSON has no such numbers): counted apart, shown apart. */
    if (!isfinite(v)) {
        a->nonfinite++;
        return;
    }
    if (a->count == 0 || v < a->min)
        a->min = v;
    if (a->count == 0 || v > a->max)
        a->max = v;
    a->count++;
    a->last = v;
    a->sum += v;
}

void prof_stats_counter(const char *raw, double v)
{
    const char *name = canonical(raw);
    struct prof_counter *c;

    if (name == NULL)
        return;
    if ((c = prof_map_get(&counters, (uintptr_t)name)) == NULL) {
        if ((c = calloc(1, sizeof *c)) == NULL)
            return;
        c->name = name;
        if (prof_map_put(&counters, (uintptr_t)name, c) != 0) {
            free(c);
            return;
        }
    }
    counter_add(&c->run, v);
    counter_add(&c->win, v);
}

void prof_stats_mark(const char *raw)
{
    const char *name = canonical(raw);
    struct prof_mark *m;

    if (name == NULL)
        return;
    if ((m = prof_map_get(&marks, (uintptr_t)name)) == NULL) {
        if ((m = calloc(1, sizeof *m)) == NULL)
            return;
        m->name = name;
        if (prof_map_put(&marks, (uintptr_t)name, m) != 0) {
            free(m);
            return;
        }
    }
    m->run++;
    m->win++;
}

struct prof_stage *prof_stats_find(const char *name)
{
    const char *n = prof_intern(name);

    return n ? prof_map_get(&by_name, (uintptr_t)n) : NULL;
}

struct prof_counter *prof_counter_find(const char *name)
{
    const char *n = prof_intern(name);

    return n ? prof_map_get(&counters, (uintptr_t)n) : NULL;
}

size_t prof_stats_nstages(void)
{
    return by_name.len;
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
        for (size_t i = 0; i < nodes.cap && !wanted; i++) {
            struct prof_node *n = nodes.slots[i].value;
            wanted = nodes.slots[i].key != 0 && n->parent == path[d];
        }
        if (!wanted || prof_map_get(&nodes, path[d]) != NULL)
            continue;
        for (uint32_t k = 1; k <= d; k++) {
            struct prof_stage *s;
            if (prof_map_get(&nodes, path[k]) != NULL)
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
static void resolve_open_parents(void)
{
    int missing = 0;

    for (size_t i = 0; i < nodes.cap && !missing; i++) {
        struct prof_node *n = nodes.slots[i].value;
        if (nodes.slots[i].key != 0 && n->parent != PROF_PATH_ROOT_ &&
            prof_map_get(&nodes, n->parent) == NULL)
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

/* True when an ancestor of n runs the same stage (recursion). */
static int node_recursive(const struct prof_node *n)
{
    const struct prof_node *p = n;

    for (int i = 0; i <= PROF_MAX_DEPTH_ + 1; i++) {
        if (p->parent == PROF_PATH_ROOT_ || (p = prof_map_get(&nodes, p->parent)) == NULL)
            return 0;
        if (p->stage == n->stage)
            return 1;
    }
    return 0;
}

void prof_stats_tree(void)
{
    for (size_t i = 0; i < by_name.cap; i++) {
        struct prof_stage *s = by_name.slots[i].value;
        if (by_name.slots[i].key == 0)
            continue;
        s->parent = s->fixed_parent;
        s->parent_weight = 0;
        s->root_weight = 0;
        s->walk = 0;
        if (!(s->flags & PROF_STAGE_GPU))
            s->outer_run = s->outer_win = 0;
    }
    resolve_open_parents();
    for (size_t i = 0; i < nodes.cap; i++) {
        struct prof_node *n = nodes.slots[i].value, *p;
        struct prof_stage *s;
        uint64_t run;
        if (nodes.slots[i].key == 0)
            continue;
        s = n->stage;
        run = node_sum(n, 0).total;
        if (!node_recursive(n)) {
            s->outer_run += run;
            s->outer_win += node_sum(n, 1).total;
        }
        if (n->parent == PROF_PATH_ROOT_) {
            s->root_weight += run;
            continue;
        }
        p = prof_map_get(&nodes, n->parent);
        if (p == NULL || p->stage == s || s->fixed_parent != NULL)
            continue;
        /* +1: a running parent (no time yet) still wins over no parent. */
        if (run + 1 > s->parent_weight) {
            s->parent_weight = run + 1;
            s->parent = p->stage;
        }
    }
    /* A stage that spends more time at the top level than in its heaviest
     * placement is a top-level row. */
    for (size_t i = 0; i < by_name.cap; i++) {
        struct prof_stage *s = by_name.slots[i].value;
        if (by_name.slots[i].key != 0 && s->fixed_parent == NULL && s->parent != NULL &&
            s->root_weight >= s->parent_weight)
            s->parent = NULL;
    }
    /* A stage can be the heaviest parent of its own heaviest parent (A in B
     * here, B in A there): break such cycles by making the stage where a
     * walk up from some stage comes back to itself a root. Each stage is
     * walked once (marked with the walk that reached it first), so a chain
     * a million deep costs a million steps, not a million squared. */
    for (size_t i = 0, walk = 0; i < by_name.cap; i++) {
        struct prof_stage *p = by_name.slots[i].value;
        if (by_name.slots[i].key == 0 || p->walk != 0)
            continue;
        walk++;
        for (; p != NULL && p->walk == 0; p = p->parent)
            p->walk = walk;
        if (p != NULL && p->walk == walk)
            p->parent = NULL;
    }
}

/* A stage's total over its paths. */
static uint64_t order_key(const struct prof_stage *s, int window)
{
    uint64_t t = window ? s->win.total : s->run.total;

    for (const struct prof_path_acc *p = s->paths; p != NULL; p = p->next)
        t += window ? p->win.total : p->run.total;
    return t;
}

static int window_sort;

/* The summary's order for two stages (order.c's rule); the heap below
 * keeps the heaviest without sorting them all. */
static int cmp_stage(const void *a, const void *b)
{
    const struct prof_stage *x = *(struct prof_stage *const *)a;
    const struct prof_stage *y = *(struct prof_stage *const *)b;

    return prof_order_cmp(order_key(x, window_sort), x->name, order_key(y, window_sort), y->name);
}

static int cmp_counter(const void *a, const void *b)
{
    return strcmp((*(struct prof_counter *const *)a)->name, (*(struct prof_counter *const *)b)->name);
}

static int cmp_mark(const void *a, const void *b)
{
    return strcmp((*(struct prof_mark *const *)a)->name, (*(struct prof_mark *const *)b)->name);
}

static void **collect(const struct prof_map *m, size_t *n)
{
    void **v = malloc((m->len ? m->len : 1) * sizeof *v);

    *n = 0;
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != 0)
            v[(*n)++] = m->slots[i].value;
    return v;
}

struct prof_counter **prof_stats_counters(size_t *n)
{
    struct prof_counter **c = (struct prof_counter **)collect(&counters, n);

    if (c != NULL)
        qsort(c, *n, sizeof *c, cmp_counter);
    return c;
}

/* Sift heap[i] down a heap whose root is the stage that sorts last. */
static void heap_down(struct prof_stage **heap, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        struct prof_stage *t;

        if (l < n && cmp_stage(&heap[l], &heap[m]) > 0)
            m = l;
        if (l + 1 < n && cmp_stage(&heap[l + 1], &heap[m]) > 0)
            m = l + 1;
        if (m == i)
            return;
        t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/* Mark the k stages of all[0..n) that sort first (and their ancestors)
 * in_rows, without sorting all n: a table of a million stages shows 60. */
static void mark_heaviest(struct prof_stage **all, size_t n, size_t k)
{
    struct prof_stage **heap = all;     /* the first k slots, as a heap */

    for (size_t i = k / 2; i-- > 0;)
        heap_down(heap, k, i);
    for (size_t i = k; i < n; i++) {
        if (cmp_stage(&all[i], &heap[0]) < 0) {
            struct prof_stage *t = heap[0];
            heap[0] = all[i];
            all[i] = t;
            heap_down(heap, k, 0);
        }
    }
    for (size_t i = 0; i < k; i++)
        for (struct prof_stage *s = heap[i]; s != NULL && !s->in_rows; s = s->parent)
            s->in_rows = 1;
}

struct prof_order_item *prof_stats_items(struct prof_stage **all, size_t n, int window)
{
    struct prof_order_item *items = malloc((n ? n : 1) * sizeof *items);

    if (items == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        all[i]->row = (uint32_t)i;
    for (size_t i = 0; i < n; i++) {
        items[i].key = order_key(all[i], window);
        items[i].name = all[i]->name;
        items[i].parent = all[i]->parent ? all[i]->parent->row : PROF_ORDER_ROOT;
    }
    return items;
}

struct prof_stage **prof_stats_all(size_t *n)
{
    return (struct prof_stage **)collect(&by_name, n);
}

/* The stages in the per-name tree's order (prof_stats_tree built, no
 * record taken since): the max_rows heaviest and their ancestors. Only
 * stage and depth are set in the rows. */
static int stage_rows(struct prof_rows *r, int window, size_t max_rows)
{
    struct prof_stage **all;
    struct prof_order_item *items = NULL;
    uint32_t *order = NULL;
    size_t n, keep, len;

    memset(r, 0, sizeof *r);
    all = prof_stats_all(&n);
    r->rows = malloc((n ? n : 1) * sizeof *r->rows);
    r->counters = prof_stats_counters(&r->ncounters);
    r->marks = (struct prof_mark **)collect(&marks, &r->nmarks);
    if (all == NULL || r->rows == NULL || r->counters == NULL || r->marks == NULL)
        goto nomem;
    r->nstages = n;
    window_sort = window;
    qsort(r->marks, r->nmarks, sizeof *r->marks, cmp_mark);

    /* Keep the heaviest max_rows stages and their ancestors; fold the rest
     * (counted, and left out of the sort). */
    for (size_t i = 0; i < n; i++)
        all[i]->in_rows = max_rows == 0 || n <= max_rows;
    if (max_rows != 0 && n > max_rows)
        mark_heaviest(all, n, max_rows);
    keep = 0;
    for (size_t i = 0; i < n; i++) {
        if (all[i]->in_rows) {
            all[keep++] = all[i];
        } else {
            r->folded++;
            r->folded_total += order_key(all[i], window);
        }
    }
    n = keep;
    /* A kept stage's ancestors are kept: every parent is an item. */
    items = prof_stats_items(all, n, window);
    order = malloc((n ? n : 1) * 2 * sizeof *order);
    if (items == NULL || order == NULL || prof_order_tree(items, n, order, order + n, &len) != 0)
        goto nomem;
    for (size_t k = 0; k < len; k++) {
        r->rows[k].stage = all[order[k]];
        r->rows[k].depth = order[n + k];
    }
    r->len = len;
    free(order);
    free(items);
    free(all);
    return 0;

nomem:
    free(order);
    free(items);
    free(all);
    prof_rows_free(r);
    return -ENOMEM;
}

void prof_rows_free(struct prof_rows *r)
{
    free(r->rows);
    free(r->counters);
    free(r->marks);
    memset(r, 0, sizeof *r);
}

/* src's numbers added into dst (a merged view: a histogram out of memory
 * is counted like a value left out). */
static void acc_merge(struct prof_acc *dst, const struct prof_acc *src)
{
    if (src->count == 0)
        return;
    if (dst->count == 0 || src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->count += src->count;
    dst->total += src->total;
    dst->self += src->self;
    if (prof_hist_merge(&dst->hist, &src->hist) != 0)
        prof_stats_hist_lost++;
}

void prof_stats_row_done(struct prof_acc *tmp)
{
    acc_clear(tmp);
}

/* The numbers and flags of out from a (distribution) and sum (count and
 * times), a NULL: no distribution. */
static void fill_numbers(const struct prof_stage *s, int window, const struct prof_acc *a,
                         const struct prof_path_sum *sum, uint64_t outer, uint64_t wall_ns,
                         struct prof_stage_stats *out)
{
    static const double q[3] = { 0.50, 0.95, 0.99 };
    double pct[3];

    out->name = s->name;
    out->count = sum->count;
    out->total_ns = sum->total;
    out->self_ns = sum->self;
    out->avg_ns = sum->count ? (double)sum->total / (double)sum->count : 0;
    out->wall_share = wall_ns ? (double)outer / (double)wall_ns : 0;
    out->flags = s->flags & ~(PROF_STAGE_LOSSY | PROF_STAGE_LOSSY_WIN_ | PROF_STAGE_NOHIST_);
    if (s->flags & (window ? PROF_STAGE_LOSSY_WIN_ : PROF_STAGE_LOSSY))
        out->flags |= PROF_STAGE_LOSSY;
    if (a == NULL) {
        out->flags |= PROF_STAGE_NOHIST_;
        return;
    }
    out->min_ns = a->min;
    out->max_ns = a->max;
    prof_hist_quantiles(&a->hist, q, pct, 3, a->min, a->max);
    out->p50_ns = pct[0];
    out->p95_ns = pct[1];
    out->p99_ns = pct[2];
}

/* The on-CPU part of a row's self time, row_self: the stage's share as
 * sampled (its samples over the self time of its sampled zones, every
 * path's together: samples are kept per stage), at most all of it (a
 * sample stands for a whole period, which a short stage may not have
 * run). Left unset where nothing was measured. */
static void fill_cpu(const struct prof_stage *s, int window, uint64_t row_self,
                     struct prof_stage_stats *out)
{
    const struct prof_acc *a = window ? &s->win : &s->run;
    uint64_t self = a->self;
    double share;

    for (const struct prof_path_acc *p = s->paths; p != NULL; p = p->next)
        self += (window ? &p->win : &p->run)->self;
    /* The rise is the stage's, whichever path it ran on. */
    out->peak_rise_bytes = a->peak_bytes;
    if (!prof_sampler_installed() || (s->flags & PROF_STAGE_GPU) || self <= a->cpu_unsampled)
        return;
    share = (double)a->cpu_ns / (double)(self - a->cpu_unsampled);
    out->cpu_ns = share >= 1.0 ? row_self : (uint64_t)(share * (double)row_self);
    out->flags |= PROF_STAGE_CPU;
}

int prof_stats_row_cpu(const struct prof_row *r, uint64_t row_self, uint64_t *cpu_ns)
{
    struct prof_stage_stats st;

    st.flags = 0;
    st.cpu_ns = 0;
    fill_cpu(r->stage, 0, row_self, &st);
    *cpu_ns = st.cpu_ns;
    return (st.flags & PROF_STAGE_CPU) != 0;
}

int prof_stats_row_peak(const struct prof_row *r, uint64_t *bytes)
{
    /* As the summary's JSON: the rise is sampled with the on-CPU time. */
    if (!prof_sampler_installed() || (r->stage->flags & PROF_STAGE_GPU)) {
        *bytes = 0;
        return 0;
    }
    *bytes = r->stage->run.peak_bytes;
    return 1;
}

void prof_stats_fill(const struct prof_stage *s, int window, uint64_t wall_ns,
                     struct prof_stage_stats *out)
{
    const struct prof_acc *a = window ? &s->win : &s->run;
    struct prof_acc tmp;
    struct prof_path_sum sum;

    memset(out, 0, sizeof *out);
    /* A stage is the sum of its paths. */
    if (s->paths != NULL) {
        memset(&tmp, 0, sizeof tmp);
        acc_merge(&tmp, a);
        for (const struct prof_path_acc *p = s->paths; p != NULL; p = p->next)
            acc_merge(&tmp, window ? &p->win : &p->run);
        a = &tmp;
    }
    sum.count = a->count;
    sum.total = a->total;
    sum.self = a->self;
    fill_numbers(s, window, a, &sum, window ? s->outer_win : s->outer_run, wall_ns, out);
    fill_cpu(s, window, sum.self, out);
    out->parent = s->parent ? s->parent->name : NULL;
    if (a == &tmp)
        acc_clear(&tmp);
}

/* ------------------------------------------------------------------------ */
/* The path tree: the outputs' rows, one per call path. */

/* The row of (the row above, stage): nodes of one stage under one row
 * share it. */
struct group_slot {
    const struct prof_node *up;
    const struct prof_stage *stage;
    struct prof_node *rep;
};

struct path_build {
    struct group_slot *groups;   /* NULL: out of memory, no sharing */
    size_t gcap;
    struct prof_node **stack;    /* nodes waiting for their parent's row */
    size_t scap;
};

static struct group_slot *group_find(struct path_build *b, const struct prof_node *up,
                                     const struct prof_stage *s)
{
    uint64_t h = ((uint64_t)(uintptr_t)up * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uintptr_t)s;

    if (b->groups == NULL)
        return NULL;
    for (size_t i = prof_map_slot_(h | 1, b->gcap);; i = (i + 1) & (b->gcap - 1))
        if (b->groups[i].rep == NULL || (b->groups[i].up == up && b->groups[i].stage == s))
            return &b->groups[i];
}

/* The deepest row chain walked for recursion: paths nest at most this deep
 * in practice (the capture keeps PROF_MAX_DEPTH_ names); past it, a stage
 * recursing further up shows as a row of its own. */
#define PATH_WALK_MAX (4 * PROF_MAX_DEPTH_)

/* Place m under the row prow (NULL: the top level): in the outermost row
 * of its own stage above it (recursion), else in the row its stage has
 * under prow, else as a new row. */
static void path_place(struct path_build *b, struct prof_node *m, struct prof_node *prow)
{
    struct prof_node *same = NULL;
    struct group_slot *g;
    int d = 0;

    for (struct prof_node *r = prow; r != NULL && d < PATH_WALK_MAX; r = r->up, d++)
        if (r->stage == m->stage)
            same = r;
    m->gen = tree_gen;
    m->recursive = same != NULL;
    m->next_member = NULL;
    if (same == NULL && m->stage->npaths > 1 && (g = group_find(b, prow, m->stage)) != NULL) {
        if (g->rep == NULL) {
            g->up = prow;
            g->stage = m->stage;
            g->rep = m;
        }
        same = g->rep;
    }
    if (same == NULL || same == m) {
        m->rep = m;
        m->up = prow;
        return;
    }
    m->rep = same;
    m->next_member = same->next_member;
    same->next_member = m;
}

/* Place every node: each after its parent (a running parent's node made
 * by resolve_open_parents; a parent never seen: the top level). */
static int path_tree(struct path_build *b)
{
    uint32_t visiting;

    tree_gen = (tree_gen + 1) & 0x7fffffffu;
    if (tree_gen == 0)
        tree_gen = 1;
    visiting = tree_gen | 0x80000000u;
    /* Only nodes of a stage with several paths can share a row. */
    b->gcap = 16;
    while (b->gcap < 2 * shared_nodes)
        b->gcap *= 2;
    b->groups = calloc(b->gcap, sizeof *b->groups);
    for (size_t i = 0; i < nodes.cap; i++) {
        struct prof_node *n = nodes.slots[i].value, *p = NULL;
        size_t k = 0;

        if (nodes.slots[i].key == 0 || n->gen == tree_gen)
            continue;
        /* Up to the first placed ancestor; a cycle of hashes (two paths'
         * hashes naming each other) is cut where it closes. */
        for (struct prof_node *c = n;;) {
            if (k == b->scap) {
                size_t cap = b->scap ? 2 * b->scap : 64;
                struct prof_node **st = realloc(b->stack, cap * sizeof *st);
                if (st == NULL)
                    return -ENOMEM;
                b->stack = st;
                b->scap = cap;
            }
            b->stack[k++] = c;
            c->gen = visiting;
            p = c->parent == PROF_PATH_ROOT_ ? NULL : prof_map_get(&nodes, c->parent);
            if (p == NULL || p->gen == tree_gen || p->gen == visiting) {
                if (p != NULL && p->gen == visiting)
                    p = NULL;
                break;
            }
            c = p;
        }
        while (k > 0) {
            struct prof_node *c = b->stack[--k];
            path_place(b, c, p != NULL ? p->rep : NULL);
            p = c;
        }
    }
    return 0;
}

/* The heaviest-first heap of candidate rows (mark_heaviest's, by index). */
static const struct prof_row *cand_rows;

static int cmp_cand(uint32_t a, uint32_t b)
{
    const struct prof_row *x = &cand_rows[a], *y = &cand_rows[b];

    return prof_order_cmp(window_sort ? x->win.total : x->run.total, x->stage->name,
                          window_sort ? y->win.total : y->run.total, y->stage->name);
}

static void cand_heap_down(uint32_t *heap, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        uint32_t t;

        if (l < n && cmp_cand(heap[l], heap[m]) > 0)
            m = l;
        if (l + 1 < n && cmp_cand(heap[l + 1], heap[m]) > 0)
            m = l + 1;
        if (m == i)
            return;
        t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/* keep[i] for the k heaviest of cand[0..n) and the rows above them. */
static int cand_mark_heaviest(const struct prof_row *cand, size_t n, size_t k, char *keep)
{
    uint32_t *idx = malloc((n ? n : 1) * sizeof *idx);

    if (idx == NULL)
        return -ENOMEM;
    cand_rows = cand;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    for (size_t i = k / 2; i-- > 0;)
        cand_heap_down(idx, k, i);
    for (size_t i = k; i < n; i++) {
        if (cmp_cand(idx[i], idx[0]) < 0) {
            uint32_t t = idx[0];
            idx[0] = idx[i];
            idx[i] = t;
            cand_heap_down(idx, k, 0);
        }
    }
    for (size_t i = 0; i < k; i++)
        for (uint32_t c = idx[i]; c != UINT32_MAX && !keep[c]; c = cand[c].parent_row)
            keep[c] = 1;
    free(idx);
    return 0;
}

/* The candidate rows: one per row of the path tree, one per GPU stage
 * (under its CPU stage's heaviest row). parent_row: a candidate index. */
static struct prof_row *path_candidates(size_t *count)
{
    /* At most a row per node and per (GPU) stage: sized once. */
    size_t len = 0, cap = nodes.len + by_name.len + 1;
    struct prof_row *cand = malloc(cap * sizeof *cand);

    if (cand == NULL)
        return NULL;
    for (size_t i = 0; i < by_name.cap; i++)
        if (by_name.slots[i].key != 0)
            ((struct prof_stage *)by_name.slots[i].value)->row = UINT32_MAX;
    /* Rows in the order of the nodes map: a row's first node is placed
     * after the row above it, but may come before it in the map; parents
     * are linked once every row has its index. */
    for (size_t i = 0; i < nodes.cap; i++) {
        struct prof_node *n = nodes.slots[i].value;
        struct prof_row *r;

        if (nodes.slots[i].key == 0 || n->rep != n)
            continue;
        if (len == cap)
            break;
        r = &cand[len];
        memset(r, 0, sizeof *r);
        r->stage = n->stage;
        r->node = n;
        n->row = (uint32_t)len;
        for (const struct prof_node *m = n; m != NULL; m = m->next_member) {
            struct prof_path_sum mr = node_sum(m, 0), mw = node_sum(m, 1);

            r->run.count += mr.count;
            r->run.self += mr.self;
            r->win.count += mw.count;
            r->win.self += mw.self;
            r->calls_run += mr.total;
            r->calls_win += mw.total;
            if (!m->recursive) {
                r->outer_run += mr.total;
                r->outer_win += mw.total;
            }
        }
        r->run.total = r->outer_run;
        r->win.total = r->outer_win;
        /* The stage's heaviest row, where its GPU stage goes. */
        if (n->stage->row == UINT32_MAX || cand[n->stage->row].run.total < r->run.total)
            n->stage->row = (uint32_t)len;
        len++;
    }
    for (size_t i = 0; i < len; i++) {
        const struct prof_node *up = cand[i].node->up;
        cand[i].parent_row = up != NULL ? up->row : UINT32_MAX;
    }
    for (size_t i = 0; i < by_name.cap; i++) {
        struct prof_stage *s = by_name.slots[i].value;
        struct prof_row *r;

        if (by_name.slots[i].key == 0 || !(s->flags & PROF_STAGE_GPU))
            continue;
        if (len == cap)
            break;
        r = &cand[len++];
        memset(r, 0, sizeof *r);
        r->stage = s;
        r->parent_row = s->fixed_parent != NULL ? s->fixed_parent->row : UINT32_MAX;
        r->run = (struct prof_path_sum){s->run.count, s->run.total, s->run.self};
        r->win = (struct prof_path_sum){s->win.count, s->win.total, s->win.self};
        r->outer_run = s->outer_run;
        r->outer_win = s->outer_win;
        r->calls_run = s->run.total;
        r->calls_win = s->win.total;
    }
    *count = len;
    return cand;
}

int prof_stats_rows(struct prof_rows *r, int window, size_t max_rows)
{
    struct path_build b = {0};
    struct prof_row *cand = NULL;
    struct prof_order_item *items = NULL;
    uint32_t *order = NULL, *pos = NULL, *at = NULL;
    char *keep = NULL;
    size_t n = 0, kept = 0, len;
    int err;

    memset(r, 0, sizeof *r);
    /* (The per-name tree is not needed: a row's parent is its path's.) */
    resolve_open_parents();
    r->counters = prof_stats_counters(&r->ncounters);
    r->marks = (struct prof_mark **)collect(&marks, &r->nmarks);
    if (r->counters == NULL || r->marks == NULL || path_tree(&b) != 0 ||
        (cand = path_candidates(&n)) == NULL)
        goto nomem;
    qsort(r->marks, r->nmarks, sizeof *r->marks, cmp_mark);
    r->nstages = by_name.len;
    r->npaths = n;
    r->paths_nohist = paths_nohist;
    window_sort = window;
    keep = calloc(n ? n : 1, 1);
    pos = malloc((n ? n : 1) * sizeof *pos);
    if (keep == NULL || pos == NULL)
        goto nomem;
    /* Keep the heaviest max_rows rows and the rows above them; fold the
     * rest (counted, and left out of the sort). */
    if (max_rows == 0 || n <= max_rows)
        memset(keep, 1, n);
    else if (cand_mark_heaviest(cand, n, max_rows, keep) != 0)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        if (keep[i]) {
            pos[i] = (uint32_t)kept++;
        } else {
            r->folded++;
            r->folded_total += window ? cand[i].win.total : cand[i].run.total;
        }
    }
    items = malloc((kept ? kept : 1) * sizeof *items);
    order = malloc((kept ? kept : 1) * 2 * sizeof *order);
    r->rows = malloc((kept ? kept : 1) * sizeof *r->rows);
    if (items == NULL || order == NULL || r->rows == NULL)
        goto nomem;
    for (size_t i = 0, k = 0; i < n; i++) {
        if (!keep[i])
            continue;
        items[k].key = window ? cand[i].win.total : cand[i].run.total;
        items[k].name = cand[i].stage->name;
        items[k].parent = cand[i].parent_row == UINT32_MAX ? PROF_ORDER_ROOT
                                                           : pos[cand[i].parent_row];
        if (k != i)
            cand[k] = cand[i];   /* k < i */
        k++;
    }
    if (prof_order_tree(items, kept, order, order + kept, &len) != 0 ||
        (at = malloc((kept ? kept : 1) * sizeof *at)) == NULL)
        goto nomem;
    /* at: a kept candidate's place in the rows (a row's parent is above
     * it, so it is set when the row is reached). */
    for (size_t k = 0; k < len; k++) {
        struct prof_row *row = &r->rows[k];

        *row = cand[order[k]];
        at[order[k]] = (uint32_t)k;
        row->depth = order[kept + k];
        if (row->parent_row != UINT32_MAX)
            row->parent_row = at[pos[row->parent_row]];
        row->parent = row->parent_row == UINT32_MAX ? NULL : r->rows[row->parent_row].stage->name;
    }
    r->len = len;
    err = 0;
    goto out;

nomem:
    err = -ENOMEM;
out:
    free(b.groups);
    free(b.stack);
    free(cand);
    free(keep);
    free(pos);
    free(items);
    free(order);
    free(at);
    if (err != 0)
        prof_rows_free(r);
    return err;
}

void prof_stats_row_fill(const struct prof_row *r, int window, uint64_t wall_ns,
                         struct prof_stage_stats *out, const struct prof_hist **hist,
                         struct prof_acc *tmp)
{
    const struct prof_stage *s = r->stage;
    const struct prof_acc *in_stage = window ? &s->win : &s->run, *a = NULL;
    uint64_t from_stage = 0;
    unsigned sources = 0;

    memset(out, 0, sizeof *out);
    memset(tmp, 0, sizeof *tmp);
    if (r->node == NULL) {
        a = in_stage;
    } else {
        /* Its nodes' own histograms, and the stage's when some of its
         * nodes keep none: that one is the row's only if every zone in
         * it is the row's. */
        for (const struct prof_node *m = r->node; m != NULL; m = m->next_member) {
            const struct prof_path_acc *ma = m->ext != NULL ? m->ext->acc : NULL;
            if (ma != NULL) {
                const struct prof_acc *x = window ? &ma->win : &ma->run;
                if (x->count != 0) {
                    a = x;
                    sources++;
                }
            } else {
                from_stage += node_sum(m, window).count;
            }
        }
        if (from_stage != 0) {
            a = in_stage;
            sources++;
        }
        if (from_stage != 0 && from_stage != in_stage->count) {
            a = NULL;
        } else if (sources > 1) {
            for (const struct prof_node *m = r->node; m != NULL; m = m->next_member)
                if (m->ext != NULL && m->ext->acc != NULL)
                    acc_merge(tmp, window ? &m->ext->acc->win : &m->ext->acc->run);
            if (from_stage != 0)
                acc_merge(tmp, in_stage);
            a = tmp;
        } else if (sources == 0) {
            a = tmp;
        }
    }
    fill_numbers(s, window, a, window ? &r->win : &r->run,
                 window ? r->outer_win : r->outer_run, wall_ns, out);
    fill_cpu(s, window, out->self_ns, out);
    if (out->count != 0)
        out->avg_ns = (double)(window ? r->calls_win : r->calls_run) / (double)out->count;
    out->parent = r->parent;
    out->depth = r->depth;
    *hist = a != NULL ? &a->hist : NULL;
}

/* The last closed window (prof_stats_window_last): one prof_stage_stats
 * per stage, replaced at every window, so its memory is bounded by the
 * number of stages. */
static struct prof_stage_stats *last_rows;
static size_t last_len, last_cap;
static uint64_t last_start_step, last_wall_ns;
static int last_valid;

/* Called as the periodic summary that showed the window has been formatted,
 * with the wall time it showed, before the window is reset: the stages by
 * name, in the per-name tree's order. */
void prof_stats_window_keep(uint64_t wall, size_t max_rows)
{
    struct prof_rows rows;

    last_valid = 0;
    last_len = 0;
    prof_stats_tree();
    if (stage_rows(&rows, 1, max_rows) != 0)
        return;
    if (rows.len > last_cap) {
        struct prof_stage_stats *grown = realloc(last_rows, rows.len * sizeof *grown);
        if (grown == NULL) {
            prof_rows_free(&rows);
            return;
        }
        last_rows = grown;
        last_cap = rows.len;
    }
    for (size_t i = 0; i < rows.len; i++) {
        prof_stats_fill(rows.rows[i].stage, 1, wall, &last_rows[i]);
        last_rows[i].depth = rows.rows[i].depth;
    }
    last_len = rows.len;
    last_start_step = prof_rt.window_start_step;
    last_wall_ns = wall;
    last_valid = 1;
    prof_rows_free(&rows);
}

const struct prof_stage_stats *prof_stats_window_last(size_t *n, uint64_t *start_step,
                                                      uint64_t *wall_ns)
{
    *n = last_valid ? last_len : 0;
    if (start_step != NULL)
        *start_step = last_start_step;
    if (wall_ns != NULL)
        *wall_ns = last_wall_ns;
    return last_valid ? last_rows : NULL;
}

void prof_stats_window_reset(void)
{
    for (size_t i = 0; i < by_name.cap; i++) {
        struct prof_stage *s = by_name.slots[i].value;
        if (by_name.slots[i].key == 0)
            continue;
        acc_clear(&s->win);
        if (s->stray != NULL)
            memset(&s->stray->win, 0, sizeof s->stray->win);
        s->flags &= ~PROF_STAGE_LOSSY_WIN_;
        if (s->flags & PROF_STAGE_GPU)
            s->outer_win = 0;
    }
    for (size_t i = 0; i < nodes.cap; i++) {
        struct prof_node *n = nodes.slots[i].value;
        if (nodes.slots[i].key == 0)
            continue;
        if (n->ext == NULL)
            continue;
        memset(&n->ext->win, 0, sizeof n->ext->win);
        if (n->ext->acc != NULL)
            acc_clear(&n->ext->acc->win);
    }
    for (size_t i = 0; i < counters.cap; i++)
        if (counters.slots[i].key != 0)
            memset(&((struct prof_counter *)counters.slots[i].value)->win, 0,
                   sizeof(struct prof_counter_acc));
    for (size_t i = 0; i < marks.cap; i++)
        if (marks.slots[i].key != 0)
            ((struct prof_mark *)marks.slots[i].value)->win = 0;
}

static void free_values(struct prof_map *m, void (*fn)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != 0)
            fn(m->slots[i].value);
    prof_map_clear(m);
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

void prof_stats_reset(void)
{
    /* Its rows point at names and parents of the stages freed here. */
    free(last_rows);
    last_rows = NULL;
    last_len = last_cap = 0;
    last_valid = 0;
    free_values(&by_name, stage_free);
    free_values(&nodes, node_free);
    path_hists = 0;
    paths_nohist = 0;
    shared_nodes = 0;
    free_values(&counters, free);
    free_values(&marks, free);
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
