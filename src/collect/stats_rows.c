/* stats_rows.c - the outputs' rows, one per call path (prof_stats_rows),
 * built from stats.c's path nodes.
 *
 * The rows group nodes by their path with recursion folded: a node whose
 * stage already runs above it shows in the outermost such row, and nodes
 * of one stage under one row (two call sites of a name, or the same child
 * below several depths of a recursion) share a row. A row's distribution
 * is its nodes' histograms merged (stats_fill.c); where some of them are
 * in the stage's histogram, it is the row's only when every zone there is
 * the row's, else the row shows none (PROF_STAGE_NOHIST_). The heaviest
 * rows are kept with the rows above them, the rest folded; a GPU stage is
 * a row under its CPU stage's heaviest row. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "map.h"
#include "order.h"
#include "stats.h"
#include "stats_private.h"

static uint32_t tree_gen;           /* the path tree build (prof_node.gen) */

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
    while (b->gcap < 2 * prof_stats_shared_nodes)
        b->gcap *= 2;
    b->groups = calloc(b->gcap, sizeof *b->groups);
    for (size_t i = 0; i < prof_stats_nodes.cap; i++) {
        struct prof_node *n = prof_stats_nodes.slots[i].value, *p = NULL;
        size_t k = 0;

        if (prof_stats_nodes.slots[i].key == 0 || n->gen == tree_gen)
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
            p = c->parent == PROF_PATH_ROOT_ ? NULL : prof_map_get(&prof_stats_nodes, c->parent);
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

/* The heaviest-first heap of candidate rows (as stats_tree.c's
 * mark_heaviest, by index), ordered by the run's or the window's time. */
static const struct prof_row *cand_rows;
static int window_sort;

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
    size_t len = 0, cap = prof_stats_nodes.len + prof_stats_by_name.len + 1;
    struct prof_row *cand = malloc(cap * sizeof *cand);

    if (cand == NULL)
        return NULL;
    for (size_t i = 0; i < prof_stats_by_name.cap; i++)
        if (prof_stats_by_name.slots[i].key != 0)
            ((struct prof_stage *)prof_stats_by_name.slots[i].value)->row = UINT32_MAX;
    /* Rows in the order of the nodes map: a row's first node is placed
     * after the row above it, but may come before it in the map; parents
     * are linked once every row has its index. */
    for (size_t i = 0; i < prof_stats_nodes.cap; i++) {
        struct prof_node *n = prof_stats_nodes.slots[i].value;
        struct prof_row *r;

        if (prof_stats_nodes.slots[i].key == 0 || n->rep != n)
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
    for (size_t i = 0; i < prof_stats_by_name.cap; i++) {
        struct prof_stage *s = prof_stats_by_name.slots[i].value;
        struct prof_row *r;

        if (prof_stats_by_name.slots[i].key == 0 || !(s->flags & PROF_STAGE_GPU))
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
    prof_stats_resolve_open_parents();
    r->counters = prof_stats_counters(&r->ncounters);
    r->marks = prof_stats_marks(&r->nmarks);
    if (r->counters == NULL || r->marks == NULL || path_tree(&b) != 0 ||
        (cand = path_candidates(&n)) == NULL)
        goto nomem;
    r->nstages = prof_stats_by_name.len;
    r->npaths = n;
    r->paths_nohist = prof_stats_paths_nohist;
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

void prof_rows_free(struct prof_rows *r)
{
    free(r->rows);
    free(r->counters);
    free(r->marks);
    memset(r, 0, sizeof *r);
}
