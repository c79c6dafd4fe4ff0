/* order.h - the order of a summary's rows: a tree, each stage under its
 * parent, roots and siblings heaviest first (ties by name).
 *
 * It works on plain items, not on stages, so that prof_stats_list() can
 * order a snapshot of a million rows with the runtime lock released, and
 * the summary under the lock, by one rule. */
#ifndef PROF_ORDER_H
#define PROF_ORDER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PROF_ORDER_ROOT UINT32_MAX

struct prof_order_item {
    uint64_t key;                /* time: the heavier sorts first */
    const char *name;            /* then by name (strcmp) */
    uint32_t parent;             /* index of the parent item, or PROF_ORDER_ROOT */
    uint32_t index;              /* scratch */
};

/* The rule, for anything that picks rows by it (the summary's heap of the
 * heaviest stages): < 0 when (ka, na) comes first. */
static inline int prof_order_cmp(uint64_t ka, const char *na, uint64_t kb, const char *nb)
{
    if (ka != kb)
        return ka > kb ? -1 : 1;
    return strcmp(na, nb);
}

/* Put items[0..n) in tree order: order[k] is the index of the item shown
 * k-th and depth[k] its depth (0 at the top); *len is how many were
 * placed, n unless parents form a cycle (its items are left out). Every
 * parent index must be below n. Sorts items in place. Returns 0, or
 * -ENOMEM. No recursion: a chain of a million parents is fine. */
int prof_order_tree(struct prof_order_item *items, size_t n, uint32_t *order, uint32_t *depth,
                    size_t *len);

#endif
