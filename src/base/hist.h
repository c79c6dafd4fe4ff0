/* hist.h - log-linear histogram of durations in nanoseconds.
 *
 * Values below 64 have a bucket each; above, every power of two is split
 * into 64 equal buckets, so a bucket spans at most 1/64 of its lower bound
 * and its midpoint is within 0.8% of any value in it (HdrHistogram's
 * scheme with 6 significant bits). Buckets are allocated 64 at a time, per
 * power of two actually seen, so memory follows the range of the data, not
 * the count: a stage whose zones span 10 us to 10 ms uses about 5 KB. */
#ifndef PROF_HIST_H
#define PROF_HIST_H

#include <stddef.h>
#include <stdint.h>

#define PROF_HIST_SUB_BITS 6
#define PROF_HIST_SUB (1u << PROF_HIST_SUB_BITS)
#define PROF_HIST_GROUPS (64 - PROF_HIST_SUB_BITS + 1)

struct prof_hist {
    uint64_t *group[PROF_HIST_GROUPS];   /* PROF_HIST_SUB counts each, or NULL */
    uint64_t count;
};

/* Count one value. Returns 0, or -ENOMEM (the value is then lost and the
 * caller counts it). */
int prof_hist_record(struct prof_hist *h, uint64_t value);
/* The group a value falls in, and its bucket there. */
static inline unsigned prof_hist_group_(uint64_t v)
{
    if (v < PROF_HIST_SUB)
        return 0;
    return (unsigned)(63 - __builtin_clzll(v)) - PROF_HIST_SUB_BITS + 1;
}

static inline unsigned prof_hist_sub_(uint64_t v, unsigned g)
{
    return g == 0 ? (unsigned)v : (unsigned)(v >> (g - 1)) & (PROF_HIST_SUB - 1);
}

/* Group g of h, allocated now (out of line: once per group and
 * histogram); NULL when out of memory. */
uint64_t *prof_hist_group_new_(struct prof_hist *h, unsigned g);

/* Count one value in two histograms (a run's and a window's): the
 * bucket is found once. Returns how many of the two lost it (0, 1 or 2:
 * out of memory). Inline: the drain counts every zone here, and a call
 * would be a third of the cost. */
static inline int prof_hist_record_pair(struct prof_hist *a, struct prof_hist *b, uint64_t v)
{
    unsigned g = prof_hist_group_(v), s = prof_hist_sub_(v, g);
    uint64_t *x = a->group[g], *y = b->group[g];
    int lost = 0;

    if (__builtin_expect(x == NULL, 0) && (x = prof_hist_group_new_(a, g)) == NULL) {
        lost++;
    } else {
        x[s]++;
        a->count++;
    }
    if (__builtin_expect(y == NULL, 0) && (y = prof_hist_group_new_(b, g)) == NULL) {
        lost++;
    } else {
        y[s]++;
        b->count++;
    }
    return lost;
}

/* The values at n quantiles q[] (0..1, ascending) into out[], in one walk:
 * nearest rank, as the midpoint of its bucket clamped to [min, max]; 0
 * when empty. */
void prof_hist_quantiles(const struct prof_hist *h, const double *q, double *out, unsigned n,
                         uint64_t min, uint64_t max);

/* Add every count of src into dst. Returns 0 or -ENOMEM. */
int prof_hist_merge(struct prof_hist *dst, const struct prof_hist *src);

void prof_hist_clear(struct prof_hist *h);   /* frees the buckets */

/* Walk the non-empty buckets in ascending order: fn(ctx, lo, hi, count),
 * lo inclusive, hi exclusive. */
void prof_hist_foreach(const struct prof_hist *h,
                       void (*fn)(void *ctx, uint64_t lo, uint64_t hi, uint64_t count),
                       void *ctx);

#endif
