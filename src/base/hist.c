/* hist.c - see hist.h for the bucket layout. Group 0 holds the values
 * 0..63 exactly; group g >= 1 holds [2^(g+5), 2^(g+6)) in 64 buckets. */
#include <errno.h>
#include <stdlib.h>

#include "hist.h"
#include "slab.h"

static uint64_t bucket_lo(unsigned g, unsigned s)
{
    return g == 0 ? s : ((uint64_t)(PROF_HIST_SUB + s)) << (g - 1);
}

static uint64_t bucket_width(unsigned g)
{
    return g == 0 ? 1 : (uint64_t)1 << (g - 1);
}

/* Groups come from a slab (slab.h): every stage's first zone makes two. */
static struct prof_slab groups = PROF_SLAB_INIT(PROF_HIST_SUB * sizeof(uint64_t));

uint64_t *prof_hist_group_new_(struct prof_hist *h, unsigned g)
{
    return h->group[g] = prof_slab_alloc(&groups);
}

static uint64_t *group_get(struct prof_hist *h, unsigned g)
{
    return h->group[g] != NULL ? h->group[g] : prof_hist_group_new_(h, g);
}

int prof_hist_record(struct prof_hist *h, uint64_t v)
{
    unsigned g = prof_hist_group_(v);
    uint64_t *b = group_get(h, g);

    if (b == NULL)
        return -ENOMEM;
    b[prof_hist_sub_(v, g)]++;
    h->count++;
    return 0;
}

/* The nearest rank of quantile q among count values: the smallest rank
 * with at least q of the data at or below it (at least 1). */
static uint64_t rank_of(double q, uint64_t count)
{
    uint64_t rank;

    q = q < 0 ? 0 : q > 1 ? 1 : q;
    rank = (uint64_t)(q * (double)count + 0.999999999);
    return rank ? rank : 1;
}

void prof_hist_quantiles(const struct prof_hist *h, const double *q, double *out, unsigned n,
                         uint64_t min, uint64_t max)
{
    uint64_t seen = 0, rank;
    unsigned i = 0;

    if (h->count == 0 || min == max || n == 0) {
        /* Clamped to [min, max], every quantile of one value is that value:
         * no walk for the many stages that ran once. */
        for (i = 0; i < n; i++)
            out[i] = h->count ? (double)min : 0;
        return;
    }
    /* The live view takes the percentiles of thousands of stages a second
     * with the runtime lock held: a group that the next rank lies beyond is
     * stepped over with one sum of its buckets, and each rank is computed
     * once, not at every bucket. */
    rank = rank_of(q[0], h->count);
    for (unsigned g = 0; g < PROF_HIST_GROUPS; g++) {
        const uint64_t *b = h->group[g];
        uint64_t sum = 0;

        if (b == NULL)
            continue;
        for (unsigned s = 0; s < PROF_HIST_SUB; s++)
            sum += b[s];
        if (seen + sum < rank) {
            seen += sum;
            continue;
        }
        for (unsigned s = 0; s < PROF_HIST_SUB; s++) {
            seen += b[s];
            while (seen >= rank) {
                double mid = (double)bucket_lo(g, s) + (double)(bucket_width(g) - 1) / 2.0;

                out[i] = mid < (double)min ? (double)min : mid > (double)max ? (double)max : mid;
                if (++i == n)
                    return;
                rank = rank_of(q[i], h->count);
            }
        }
    }
    for (; i < n; i++)
        out[i] = (double)max;
}

int prof_hist_merge(struct prof_hist *dst, const struct prof_hist *src)
{
    for (unsigned g = 0; g < PROF_HIST_GROUPS; g++) {
        uint64_t *d;
        if (src->group[g] == NULL)
            continue;
        if ((d = group_get(dst, g)) == NULL)
            return -ENOMEM;
        for (unsigned s = 0; s < PROF_HIST_SUB; s++)
            d[s] += src->group[g][s];
    }
    dst->count += src->count;
    return 0;
}

void prof_hist_clear(struct prof_hist *h)
{
    for (unsigned g = 0; g < PROF_HIST_GROUPS; g++) {
        if (h->group[g] != NULL) {
            prof_slab_free(&groups, h->group[g]);
            h->group[g] = NULL;
        }
    }
    h->count = 0;
}

void prof_hist_foreach(const struct prof_hist *h,
                       void (*fn)(void *ctx, uint64_t lo, uint64_t hi, uint64_t count),
                       void *ctx)
{
    for (unsigned g = 0; g < PROF_HIST_GROUPS; g++) {
        if (h->group[g] == NULL)
            continue;
        for (unsigned s = 0; s < PROF_HIST_SUB; s++) {
            uint64_t lo;
            if (h->group[g][s] == 0)
                continue;
            lo = bucket_lo(g, s);
            fn(ctx, lo, lo + bucket_width(g), h->group[g][s]);
        }
    }
}
