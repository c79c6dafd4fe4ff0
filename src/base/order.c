/* order.c - see order.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "order.h"

#define NONE UINT32_MAX

static int cmp_item(const void *a, const void *b)
{
    const struct prof_order_item *x = a, *y = b;

    return prof_order_cmp(x->key, x->name, y->key, y->name);
}

int prof_order_tree(struct prof_order_item *items, size_t n, uint32_t *order, uint32_t *depth,
                    size_t *len)
{
    /* By original index: the first child, the next sibling, the parent. */
    uint32_t *child = malloc((n ? n : 1) * 3 * sizeof *child);
    uint32_t *sibling = child + n, *up = sibling + n;
    size_t out = 0;

    *len = 0;
    if (child == NULL)
        return -ENOMEM;
    if (n == 0) {
        free(child);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        items[i].index = (uint32_t)i;
    qsort(items, n, sizeof *items, cmp_item);
    memset(child, 0xff, n * sizeof *child);
    /* Linked in reverse sorted order, so each list comes out sorted. */
    for (size_t k = n; k-- > 0;) {
        uint32_t i = items[k].index, p = items[k].parent;

        up[i] = p;
        sibling[i] = NONE;
        if (p != PROF_ORDER_ROOT) {
            sibling[i] = child[p];
            child[p] = i;
        }
    }
    for (size_t k = 0; k < n; k++) {
        uint32_t root = items[k].index, v = root, d = 0;

        if (items[k].parent != PROF_ORDER_ROOT)
            continue;
        for (;;) {
            order[out] = v;
            depth[out++] = d;
            if (child[v] != NONE) {
                v = child[v];
                d++;
                continue;
            }
            while (v != root && sibling[v] == NONE) {
                v = up[v];
                d--;
            }
            if (v == root)
                break;
            v = sibling[v];
        }
    }
    free(child);
    *len = out;
    return 0;
}
