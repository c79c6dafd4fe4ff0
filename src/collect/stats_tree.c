/* stats_tree.c - the per-name tree: what is asked by name (prof_stats(),
 * prof_stats_list(), the windows the cross-rank table reads) is the stage,
 * the sum over its paths (stats_fill.c), placed under the parent stage of
 * its heaviest node (prof_stats_tree), and ordered as the summary orders
 * its rows (order.c's rule): the heaviest kept, their ancestors with them,
 * the rest folded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "map.h"
#include "order.h"
#include "stats.h"
#include "stats_private.h"

/* True when an ancestor of n runs the same stage (recursion). */
static int node_recursive(const struct prof_node *n)
{
    const struct prof_node *p = n;

    for (int i = 0; i <= PROF_MAX_DEPTH_ + 1; i++) {
        if (p->parent == PROF_PATH_ROOT_ ||
            (p = prof_map_get(&prof_stats_nodes, p->parent)) == NULL)
            return 0;
        if (p->stage == n->stage)
            return 1;
    }
    return 0;
}

void prof_stats_tree(void)
{
    for (size_t i = 0; i < prof_stats_by_name.cap; i++) {
        struct prof_stage *s = prof_stats_by_name.slots[i].value;
        if (prof_stats_by_name.slots[i].key == 0)
            continue;
        s->parent = s->fixed_parent;
        s->parent_weight = 0;
        s->root_weight = 0;
        s->walk = 0;
        if (!(s->flags & PROF_STAGE_GPU))
            s->outer_run = s->outer_win = 0;
    }
    prof_stats_resolve_open_parents();
    for (size_t i = 0; i < prof_stats_nodes.cap; i++) {
        struct prof_node *n = prof_stats_nodes.slots[i].value, *p;
        struct prof_stage *s;
        uint64_t run;
        if (prof_stats_nodes.slots[i].key == 0)
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
        p = prof_map_get(&prof_stats_nodes, n->parent);
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
    for (size_t i = 0; i < prof_stats_by_name.cap; i++) {
        struct prof_stage *s = prof_stats_by_name.slots[i].value;
        if (prof_stats_by_name.slots[i].key != 0 && s->fixed_parent == NULL &&
            s->parent != NULL && s->root_weight >= s->parent_weight)
            s->parent = NULL;
    }
    /* A stage can be the heaviest parent of its own heaviest parent (A in B
     * here, B in A there): break such cycles by making the stage where a
     * walk up from some stage comes back to itself a root. Each stage is
     * walked once (marked with the walk that reached it first), so a chain
     * a million deep costs a million steps, not a million squared. */
    for (size_t i = 0, walk = 0; i < prof_stats_by_name.cap; i++) {
        struct prof_stage *p = prof_stats_by_name.slots[i].value;
        if (prof_stats_by_name.slots[i].key == 0 || p->walk != 0)
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
    return (struct prof_stage **)collect(&prof_stats_by_name, n);
}

/* The stages in the per-name tree's order (prof_stats_tree built, no
 * record taken since): the max_rows heaviest and their ancestors. Only
 * stage and depth are set in the rows. */
int prof_stats_stage_rows(struct prof_rows *r, int window, size_t max_rows)
{
    struct prof_stage **all;
    struct prof_order_item *items = NULL;
    uint32_t *order = NULL;
    size_t n, keep, len;

    memset(r, 0, sizeof *r);
    all = prof_stats_all(&n);
    r->rows = malloc((n ? n : 1) * sizeof *r->rows);
    r->counters = prof_stats_counters(&r->ncounters);
    r->marks = prof_stats_marks(&r->nmarks);
    if (all == NULL || r->rows == NULL || r->counters == NULL || r->marks == NULL)
        goto nomem;
    r->nstages = n;
    window_sort = window;

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
