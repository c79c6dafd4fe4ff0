/* gpu_spans.c - the union of a GPU track's busy spans (gpu_spans.h).
 *
 * Spans are kept sorted by start and disjoint, so every lookup is a binary
 * search for the first span that ends at or after a time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_spans.h"

/* The first span that ends at or after t. */
static unsigned first_ending_after(const struct prof_spans *k, uint64_t t)
{
    unsigned lo = 0, hi = k->n;

    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;

        if (k->s[mid].b < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Merge spans closer than a doubling gap until a quarter of the array is
 * free; the largest gap merged is kept for the JSON's "merged_gap_ns". */
static void coarsen(struct prof_spans *k)
{
    while (k->n > k->cap * 3 / 4) {
        unsigned i, o = 0;

        k->gap = k->gap ? k->gap * 2 : GPU_GAP_FIRST_NS;
        for (i = 1; i < k->n; i++) {
            if (k->s[i].a - k->s[o].b <= k->gap) {
                if (k->s[i].a - k->s[o].b > k->gap_win)
                    k->gap_win = k->s[i].a - k->s[o].b;
                if (k->s[i].b > k->s[o].b)
                    k->s[o].b = k->s[i].b;
            } else {
                k->s[++o] = k->s[i];
            }
        }
        k->n = o + 1;
    }
}

void prof_spans_add(struct prof_spans *k, uint64_t a, uint64_t b)
{
    unsigned lo, hi;

    if (b <= a)
        return;
    if (k->n == k->cap) {
        unsigned cap = k->cap ? k->cap * 2 : 64;
        struct prof_span *s;

        if (cap > GPU_SPANS)
            coarsen(k);
        else if ((s = realloc(k->s, cap * sizeof *s)) != NULL)
            k->s = s, k->cap = cap;
        else if (k->cap == 0)
            return;
        else
            coarsen(k);
    }
    /* Spans touching [a - gap, b + gap] merge with it. */
    lo = first_ending_after(k, a > k->gap ? a - k->gap : 0);
    for (hi = lo; hi < k->n && k->s[hi].a <= b + k->gap; hi++)
        ;
    if (lo == hi) {
        memmove(&k->s[lo + 1], &k->s[lo], (k->n - lo) * sizeof *k->s);
        k->s[lo].a = a;
        k->s[lo].b = b;
        k->n++;
        return;
    }
    if (k->s[lo].a < a)
        a = k->s[lo].a;
    if (k->s[hi - 1].b > b)
        b = k->s[hi - 1].b;
    k->s[lo].a = a;
    k->s[lo].b = b;
    memmove(&k->s[lo + 1], &k->s[hi], (k->n - hi) * sizeof *k->s);
    k->n -= hi - lo - 1;
}

uint64_t prof_spans_busy(const struct prof_spans *k, uint64_t lo, uint64_t hi)
{
    uint64_t sum = 0;
    unsigned i;

    for (i = first_ending_after(k, lo + 1); i < k->n && k->s[i].a < hi; i++) {
        uint64_t a = k->s[i].a > lo ? k->s[i].a : lo;
        uint64_t b = k->s[i].b < hi ? k->s[i].b : hi;

        if (b > a)
            sum += b - a;
    }
    return sum;
}

void prof_spans_drop_before(struct prof_spans *k, uint64_t t)
{
    unsigned i = first_ending_after(k, t);

    if (i > 0) {
        memmove(&k->s[0], &k->s[i], (k->n - i) * sizeof *k->s);
        k->n -= i;
    }
}
