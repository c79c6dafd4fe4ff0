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
 * same way as it is freed. Each stage is shown once, under the parent stage
 * of its heaviest node. */
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

struct prof_node {
    uint32_t parent;             /* path hash of the parent zone */
    const char *raw;             /* the name pointer of the zone that made
                                    it: a zone whose hash finds a node of
                                    its own pointer takes the node's stage
                                    (one lookup, not two) */
    struct prof_stage *stage;
    uint64_t run_total, win_total;
};

uint64_t prof_stats_hist_lost;

static struct prof_map by_raw;      /* raw name pointer -> stage */
static struct prof_map by_name;     /* interned name -> stage */
static struct prof_map nodes;       /* path hash -> node */
static struct prof_map counters;    /* interned name -> counter */
static struct prof_map marks;       /* interned name -> mark */
static struct prof_map gpu_by_raw;  /* raw name pointer -> GPU stage */
static struct prof_slab stage_slab = PROF_SLAB_INIT(sizeof(struct prof_stage));
static struct prof_slab node_slab = PROF_SLAB_INIT(sizeof(struct prof_node));

/* A call site's stage is its name's: the sites of one name share it. */
static const char *canonical(const char *raw)
{
    raw = prof_site_name(raw);
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
static void acc_add_both(struct prof_stage *s, uint64_t dur, uint64_t self)
{
    struct prof_acc *r = &s->run, *w = &s->win;

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
     * a million histogram walks. */
    if (a->count == 0)
        return;
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

static struct prof_node *node_get(uint32_t hash, uint32_t parent, struct prof_stage *s,
                                  const char *raw)
{
    struct prof_node *n = prof_map_get(&nodes, hash);

    if (n == NULL) {
        if ((n = prof_slab_alloc(&node_slab)) == NULL)
            return NULL;
        n->parent = parent;
        n->raw = raw;
        n->stage = s;
        if (prof_map_put(&nodes, hash, n) != 0) {
            prof_slab_free(&node_slab, n);
            return NULL;
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

void prof_stats_zone(struct prof_stage *s, struct prof_node *n, uint64_t dur, uint64_t self)
{
    acc_add_both(s, dur, self);
    if (n != NULL) {
        n->run_total += dur;
        n->win_total += dur;
    }
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
        if (nodes.slots[i].key == 0)
            continue;
        s = n->stage;
        if (!node_recursive(n)) {
            s->outer_run += n->run_total;
            s->outer_win += n->win_total;
        }
        if (n->parent == PROF_PATH_ROOT_) {
            s->root_weight += n->run_total;
            continue;
        }
        p = prof_map_get(&nodes, n->parent);
        if (p == NULL || p->stage == s || s->fixed_parent != NULL)
            continue;
        /* +1: a running parent (no time yet) still wins over no parent. */
        if (n->run_total + 1 > s->parent_weight) {
            s->parent_weight = n->run_total + 1;
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

static uint64_t order_key(const struct prof_stage *s, int window)
{
    return window ? s->win.total : s->run.total;
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

int prof_stats_rows(struct prof_rows *r, int window, size_t max_rows)
{
    prof_stats_tree();
    return prof_stats_rows_of_tree(r, window, max_rows);
}

int prof_stats_rows_of_tree(struct prof_rows *r, int window, size_t max_rows)
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
            r->folded_total += window ? all[i]->win.total : all[i]->run.total;
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

void prof_stats_fill(const struct prof_stage *s, int window, uint64_t wall_ns,
                     struct prof_stage_stats *out)
{
    static const double q[3] = { 0.50, 0.95, 0.99 };
    const struct prof_acc *a = window ? &s->win : &s->run;
    uint64_t outer = window ? s->outer_win : s->outer_run;
    double pct[3];

    memset(out, 0, sizeof *out);
    out->name = s->name;
    out->parent = s->parent ? s->parent->name : NULL;
    out->count = a->count;
    out->total_ns = a->total;
    out->self_ns = a->self;
    out->min_ns = a->min;
    out->max_ns = a->max;
    out->avg_ns = a->count ? (double)a->total / (double)a->count : 0;
    prof_hist_quantiles(&a->hist, q, pct, 3, a->min, a->max);
    out->p50_ns = pct[0];
    out->p95_ns = pct[1];
    out->p99_ns = pct[2];
    out->wall_share = wall_ns ? (double)outer / (double)wall_ns : 0;
    out->flags = s->flags & ~(PROF_STAGE_LOSSY | PROF_STAGE_LOSSY_WIN_);
    if (prof_sampler_installed() && !(s->flags & PROF_STAGE_GPU) && a->self > a->cpu_unsampled) {
        /* Of the stage's self time, as sampled: the share measured on its
         * sampled zones, at most all of it (a sample stands for a whole
         * period, which a short stage may not have run). */
        double share = (double)a->cpu_ns / (double)(a->self - a->cpu_unsampled);
        out->cpu_ns = share >= 1.0 ? a->self : (uint64_t)(share * (double)a->self);
        out->flags |= PROF_STAGE_CPU;
    }
    if (s->flags & (window ? PROF_STAGE_LOSSY_WIN_ : PROF_STAGE_LOSSY))
        out->flags |= PROF_STAGE_LOSSY;
}

/* The last closed window (prof_stats_window_last): one prof_stage_stats
 * per stage, replaced at every window, so its memory is bounded by the
 * number of stages. */
static struct prof_stage_stats *last_rows;
static size_t last_len, last_cap;
static uint64_t last_start_step, last_wall_ns;
static int last_valid;

/* Called as the periodic summary that showed the window has been formatted,
 * with the wall time it showed: the tree it used is still built, so rows
 * come out in its order. */
void prof_stats_window_keep(uint64_t wall, size_t max_rows)
{
    struct prof_rows rows;

    last_valid = 0;
    last_len = 0;
    if (prof_stats_rows_of_tree(&rows, 1, max_rows) != 0)
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
        s->flags &= ~PROF_STAGE_LOSSY_WIN_;
        if (s->flags & PROF_STAGE_GPU)
            s->outer_win = 0;
    }
    for (size_t i = 0; i < nodes.cap; i++)
        if (nodes.slots[i].key != 0)
            ((struct prof_node *)nodes.slots[i].value)->win_total = 0;
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
    for (const struct prof_sink *const *k = prof_sinks; *k != NULL; k++)
        if ((*k)->stage_gone != NULL)
            (*k)->stage_gone(s);
    prof_slab_free(&stage_slab, s);
}

static void node_free(void *n)
{
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
