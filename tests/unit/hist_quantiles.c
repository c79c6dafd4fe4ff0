/* hist_quantiles.c - the log-linear histogram (src/base/hist.c, compiled into
 * this test) against an exact sort: p0..p100 within 1% relative error on
 * uniform, lognormal, Pareto, bimodal, small-integer and constant data;
 * merging equals recording everything in one; the bucket walk covers every
 * value with buckets no wider than 1/64 of their lower bound. */
#include "hist.h"

#include <stdint.h>

#include "check.h"

/* One quantile alone: a walk of its own. */
static double quantile(const struct prof_hist *h, double q, uint64_t min, uint64_t max)
{
    double v;

    prof_hist_quantiles(h, &q, &v, 1, min, max);
    return v;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    return test_rng(&rng_state);
}

static double unit(void)      /* (0, 1) */
{
    return ((double)(rng() >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
    return sqrt(-2.0 * log(unit())) * cos(6.283185307179586 * unit());
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

struct walk {
    uint64_t last_hi, total;
    int first;
};

static void walk_bucket(void *p, uint64_t lo, uint64_t hi, uint64_t count)
{
    struct walk *w = p;

    CHECK_LT(0, count);
    CHECK_MSG(lo < hi, "bucket [%" PRIu64 ", %" PRIu64 ")", lo, hi);
    CHECK_MSG(w->first || lo >= w->last_hi, "buckets out of order at %" PRIu64, lo);
    /* Width at most 1/64 of the lower bound: the midpoint is within 0.8%. */
    CHECK_MSG(lo < 64 ? hi - lo == 1 : (hi - lo) * 64 <= lo, "bucket [%" PRIu64 ", %" PRIu64 ")",
              lo, hi);
    w->last_hi = hi;
    w->first = 0;
    w->total += count;
}

/* Nearest rank, as documented in hist.h. */
static uint64_t exact_quantile(const uint64_t *sorted, size_t n, double q)
{
    double r = ceil(q * (double)n - 1e-9);
    size_t rank = r < 1 ? 1 : (size_t)r;

    return sorted[(rank > n ? n : rank) - 1];
}

static void check_data(const char *what, uint64_t *v, size_t n)
{
    static const double qs[] = {0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1};
    struct prof_hist h = {0}, a = {0}, b = {0};
    struct walk w = {0, 0, 1};
    uint64_t min = UINT64_MAX, max = 0;

    for (size_t i = 0; i < n; i++) {
        CHECK_EQ(prof_hist_record(&h, v[i]), 0);
        CHECK_EQ(prof_hist_record(i % 3 ? &a : &b, v[i]), 0);
        if (v[i] < min)
            min = v[i];
        if (v[i] > max)
            max = v[i];
    }
    CHECK_EQ_U64(h.count, n);
    CHECK_EQ(prof_hist_merge(&a, &b), 0);
    CHECK_EQ_U64(a.count, n);
    qsort(v, n, sizeof *v, cmp_u64);
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        double exact = (double)exact_quantile(v, n, qs[i]);
        double got = quantile(&h, qs[i], min, max);
        double merged = quantile(&a, qs[i], min, max);
        CHECK_MSG(fabs(got - exact) <= 0.01 * exact, "%s: q%g = %.1f, exact %.1f (%.3f%% off)",
                  what, qs[i], got, exact, 100 * fabs(got - exact) / (exact ? exact : 1));
        CHECK_MSG(merged == got, "%s: merged q%g = %.1f, one histogram %.1f", what, qs[i], merged,
                  got);
    }
    /* All of them in one walk (what a summary row does) equal each alone. */
    {
        double all[sizeof qs / sizeof qs[0]];
        prof_hist_quantiles(&h, qs, all, sizeof qs / sizeof qs[0], min, max);
        for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
            CHECK_MSG(all[i] == quantile(&h, qs[i], min, max),
                      "%s: q%g = %.1f in one walk, %.1f alone", what, qs[i], all[i],
                      quantile(&h, qs[i], min, max));
    }
    /* The ends are exact: clamped to the true min and max. */
    CHECK(quantile(&h, 0, min, max) >= (double)min);
    CHECK(quantile(&h, 1, min, max) <= (double)max);
    prof_hist_foreach(&h, walk_bucket, &w);
    CHECK_EQ_U64(w.total, n);
    prof_hist_clear(&h);
    prof_hist_clear(&a);
    prof_hist_clear(&b);
    CHECK_EQ_U64(h.count, 0);
    CHECK(quantile(&h, 0.5, 0, 0) == 0);
}

/* Every value lands in the bucket the walk reports for it. */
static void check_bucket_of(uint64_t x)
{
    struct prof_hist h = {0};
    struct walk w = {0, 0, 1};

    CHECK_EQ(prof_hist_record(&h, x), 0);
    prof_hist_foreach(&h, walk_bucket, &w);
    CHECK_EQ_U64(w.total, 1);
    /* Only one bucket: the quantile is its midpoint, clamped to x. */
    CHECK(quantile(&h, 0.5, x, x) == (double)x);
    CHECK(quantile(&h, 0.5, 0, UINT64_MAX) >= (double)x * 0.99);
    CHECK(quantile(&h, 0.5, 0, UINT64_MAX) <= (double)x * 1.01 + 1);
    prof_hist_clear(&h);
}

int main(void)
{
    size_t n = (size_t)test_scale(200000);
    uint64_t *v = malloc(n * sizeof *v);

    CHECK(v != NULL);
    for (size_t i = 0; i < n; i++)
        v[i] = 1 + rng() % 1000000000u;
    check_data("uniform 1..1e9", v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint64_t)exp(12.0 + 2.0 * normal());        /* lognormal around 160 us */
    check_data("lognormal", v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint64_t)(1000.0 / pow(unit(), 1.0 / 1.1));  /* Pareto, alpha 1.1: heavy tail */
    check_data("pareto", v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = i % 10 ? 20000 + rng() % 2000 : 5000000 + rng() % 100000;   /* 90% fast, 10% slow */
    check_data("bimodal", v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = rng() % 64;                                   /* exact buckets */
    check_data("0..63", v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = 123456789;
    check_data("constant", v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = rng() >> (1 + rng() % 63);                    /* every magnitude up to 2^63 */
    check_data("all magnitudes", v, n);

    for (uint64_t x = 1; x != 0 && x < UINT64_MAX / 3; x = x * 3 + 1)
        check_bucket_of(x);
    check_bucket_of(0);
    check_bucket_of(63);
    check_bucket_of(64);
    check_bucket_of(UINT64_MAX >> 1);
    free(v);
    return 0;
}
