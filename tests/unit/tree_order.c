/* tree_order.c - the summary's row order (src/base/order.c, compiled into this
 * test) against a plain recursive reference: random forests with many tied
 * times, a chain of a million parents (no recursion in order.c, so no stack
 * overflow), and parents in a cycle left out. */
#include "order.h"

#include <stdint.h>

#include "check.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
    return test_rng(&rng_state);
}

/* The reference: the children of p (PROF_ORDER_ROOT for the roots), each
 * followed by its subtree, heaviest first and then by name, found by
 * scanning all items for the next one that sorts after the last. */
struct ref {
    const struct prof_order_item *items;   /* unsorted, as given */
    size_t n, len;
    uint32_t *order, *depth;
};

static int before(const struct prof_order_item *a, const struct prof_order_item *b)
{
    return a->key != b->key ? a->key > b->key : strcmp(a->name, b->name) < 0;
}

static void ref_children(struct ref *r, uint32_t p, uint32_t d)
{
    const struct prof_order_item *last = NULL;

    for (;;) {
        const struct prof_order_item *next = NULL;
        for (size_t i = 0; i < r->n; i++) {
            const struct prof_order_item *c = &r->items[i];
            if (c->parent == p && (last == NULL || before(last, c)) &&
                (next == NULL || before(c, next)))
                next = c;
        }
        if (next == NULL)
            return;
        r->order[r->len] = (uint32_t)(next - r->items);
        r->depth[r->len++] = d;
        ref_children(r, (uint32_t)(next - r->items), d + 1);
        last = next;
    }
}

static void check_forest(size_t n, uint64_t keys)
{
    struct prof_order_item *items = malloc(n * sizeof *items), *given = malloc(n * sizeof *items);
    uint32_t *order = malloc(2 * n * sizeof *order), *want = malloc(2 * n * sizeof *want);
    char (*names)[16] = malloc(n * sizeof *names);
    struct ref r = { given, n, 0, want, want + n };
    size_t len;

    CHECK(items && given && order && want && names);
    for (size_t i = 0; i < n; i++) {
        /* Distinct names in an order unrelated to the indices. */
        snprintf(names[i], sizeof names[i], "s%08llx", (unsigned long long)(i * 2654435761u % 1000003));
        items[i].key = rng() % keys;
        items[i].name = names[i];
        /* A parent of lower index: a forest, any shape from flat to deep. */
        items[i].parent = i == 0 || rng() % 4 == 0 ? PROF_ORDER_ROOT : (uint32_t)(rng() % i);
        items[i].index = 12345;
    }
    memcpy(given, items, n * sizeof *items);
    ref_children(&r, PROF_ORDER_ROOT, 0);
    CHECK_EQ(r.len, n);
    CHECK_EQ(prof_order_tree(items, n, order, order + n, &len), 0);
    CHECK_EQ(len, n);
    for (size_t k = 0; k < n; k++) {
        CHECK_MSG(order[k] == want[k] && order[n + k] == want[n + k],
                  "n=%zu keys=%llu row %zu: item %u depth %u, want item %u depth %u", n,
                  (unsigned long long)keys, k, order[k], order[n + k], want[k], want[n + k]);
    }
    free(items);
    free(given);
    free(order);
    free(want);
    free(names);
}

static void check_chain(size_t n)
{
    struct prof_order_item *items = malloc(n * sizeof *items);
    uint32_t *order = malloc(2 * n * sizeof *order);
    size_t len;

    CHECK(items && order);
    for (size_t i = 0; i < n; i++) {
        /* Each lighter than its parent, so sorting moves nothing useful. */
        items[i].key = i;
        items[i].name = "x";
        items[i].parent = i == 0 ? PROF_ORDER_ROOT : (uint32_t)(i - 1);
    }
    CHECK_EQ(prof_order_tree(items, n, order, order + n, &len), 0);
    CHECK_EQ(len, n);
    for (size_t k = 0; k < n; k++)
        CHECK_MSG(order[k] == k && order[n + k] == k, "chain row %zu: item %u depth %u", k,
                  order[k], order[n + k]);
    free(items);
    free(order);
}

static void check_cycle(void)
{
    /* 0 is a root with child 3; 1 and 2 are each other's parent. */
    struct prof_order_item items[4] = {
        { 10, "a", PROF_ORDER_ROOT, 0 }, { 50, "b", 2, 0 }, { 40, "c", 1, 0 }, { 5, "d", 0, 0 },
    };
    uint32_t order[8];
    size_t len;

    CHECK_EQ(prof_order_tree(items, 4, order, order + 4, &len), 0);
    CHECK_EQ(len, 2);
    CHECK_EQ(order[0], 0);
    CHECK_EQ(order[1], 3);
    CHECK_EQ(order[4 + 1], 1);
}

int main(void)
{
    size_t len;

    CHECK_EQ(prof_order_tree(NULL, 0, NULL, NULL, &len), 0);
    CHECK_EQ(len, 0);
    for (size_t n = 1; n <= 64; n++)
        for (int rep = 0; rep < 20; rep++)
            check_forest(n, rep % 2 ? 3 : 1000000);
    check_forest(3000, 4);
    check_forest(3000, 1u << 30);
    check_chain(1000000);
    check_cycle();
    return 0;
}
