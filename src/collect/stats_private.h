/* stats_private.h - what the statistics' files share, and nothing outside
 * them reads: the call-path node, the tables of stages and nodes stats.c
 * keeps, and the few helpers more than one of them needs.
 *
 *   stats.c           stages, path nodes, what each record adds (the sink)
 *   stats_counters.c  counters and marks
 *   stats_tree.c      the per-name tree and its order (the by-name API)
 *   stats_rows.c      the outputs' rows, one per call path
 *   stats_fill.c      a stage's or a row's numbers as the public struct
 *   stats_window.c    the window kept by name, window and run resets
 *
 * Collector side only, runtime lock held (stats.h). */
#ifndef PROF_STATS_PRIVATE_H
#define PROF_STATS_PRIVATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "intern.h"
#include "map.h"
#include "site.h"
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

/* stats.c's tables, read by the tree, the rows and the resets. */
extern struct prof_map prof_stats_by_name;   /* interned name -> stage */
extern struct prof_map prof_stats_nodes;     /* path hash -> node */
extern size_t prof_stats_shared_nodes;       /* nodes of stages with more than one */
extern uint64_t prof_stats_paths_nohist;     /* nodes past PROF_STATS_PATH_HISTS */

/* A call site's stage is its name's: the sites of one name share it.
 * site.c's answer in *site when site is not NULL (the stage cache keeps
 * it: prof_stats_site, stats.h). */
static inline const char *canonical(const char *raw, const struct prof_site_ **site)
{
    const struct prof_site_ *s = prof_site_of(raw);

    if (site != NULL)
        *site = s;
    raw = s != NULL ? s->name : raw;
    return raw == NULL ? prof_intern("(null)") : prof_intern(raw);
}

static inline void acc_clear(struct prof_acc *a)
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

/* A node's count and times. A stage's only node counts nothing itself
 * (the drain's common case costs one histogram and no more): its zones
 * are the stage's, less the strays. */
static inline struct prof_path_sum node_sum(const struct prof_node *n, int window)
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

/* A table's values as an array (*n of them, in no order; free() it). NULL
 * when out of memory. */
static inline void **collect(const struct prof_map *m, size_t *n)
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

/* Each value of a table handed to fn, then the table emptied. */
static inline void free_values(struct prof_map *m, void (*fn)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != 0)
            fn(m->slots[i].value);
    prof_map_clear(m);
}

/* stats.c. Create the nodes of zones that are still open on live threads,
 * where an ended zone names them as its parent. */
void prof_stats_resolve_open_parents(void);
/* stats.c. The window's numbers of every stage and path node cleared. */
void prof_stats_stages_window_reset(void);
/* stats.c. Every stage and path node freed (each sink's stage_gone
 * first), the name caches emptied. */
void prof_stats_stages_reset(void);

/* stats_counters.c. Every mark, sorted by name; free() the array. NULL
 * when out of memory. */
struct prof_mark **prof_stats_marks(size_t *n);
/* stats_counters.c. The window's numbers of every counter and mark
 * cleared; every counter and mark freed. */
void prof_stats_counters_window_reset(void);
void prof_stats_counters_reset(void);

/* stats_tree.c. The stages in the per-name tree's order (prof_stats_tree
 * built, no record taken since): the max_rows heaviest and their
 * ancestors. Only stage and depth are set in the rows. 0 or -ENOMEM. */
int prof_stats_stage_rows(struct prof_rows *r, int window, size_t max_rows);

#endif
