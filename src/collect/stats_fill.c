/* stats_fill.c - a stage's or a row's numbers as the public struct
 * (struct prof_stage_stats): count, times, percentiles, wall share, the
 * on-CPU part and the peak rise. What is asked by name is the stage, its
 * histogram and its paths' own merged (prof_stats_fill); a row is its
 * nodes' (prof_stats_row_fill), its distribution shown only where it is
 * the row's own. */
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "hist.h"
#include "sampler.h"
#include "stats.h"
#include "stats_private.h"

/* src's numbers added into dst (a merged view: a histogram out of memory
 * is counted like a value left out). */
static void acc_merge(struct prof_acc *dst, const struct prof_acc *src)
{
    if (src->count == 0)
        return;
    if (dst->count == 0 || src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->count += src->count;
    dst->total += src->total;
    dst->self += src->self;
    if (prof_hist_merge(&dst->hist, &src->hist) != 0)
        prof_stats_hist_lost++;
}

void prof_stats_row_done(struct prof_acc *tmp)
{
    acc_clear(tmp);
}

/* The numbers and flags of out from a (distribution) and sum (count and
 * times), a NULL: no distribution. */
static void fill_numbers(const struct prof_stage *s, int window, const struct prof_acc *a,
                         const struct prof_path_sum *sum, uint64_t outer, uint64_t wall_ns,
                         struct prof_stage_stats *out)
{
    static const double q[3] = { 0.50, 0.95, 0.99 };
    double pct[3];

    out->name = s->name;
    out->count = sum->count;
    out->total_ns = sum->total;
    out->self_ns = sum->self;
    out->avg_ns = sum->count ? (double)sum->total / (double)sum->count : 0;
    out->wall_share = wall_ns ? (double)outer / (double)wall_ns : 0;
    out->flags = s->flags & ~(PROF_STAGE_LOSSY | PROF_STAGE_LOSSY_WIN_ | PROF_STAGE_NOHIST_);
    if (s->flags & (window ? PROF_STAGE_LOSSY_WIN_ : PROF_STAGE_LOSSY))
        out->flags |= PROF_STAGE_LOSSY;
    if (a == NULL) {
        out->flags |= PROF_STAGE_NOHIST_;
        return;
    }
    out->min_ns = a->min;
    out->max_ns = a->max;
    prof_hist_quantiles(&a->hist, q, pct, 3, a->min, a->max);
    out->p50_ns = pct[0];
    out->p95_ns = pct[1];
    out->p99_ns = pct[2];
}

/* The on-CPU part of a row's self time, row_self: the stage's share as
 * sampled (its samples over the self time of its sampled zones, every
 * path's together: samples are kept per stage), at most all of it (a
 * sample stands for a whole period, which a short stage may not have
 * run). Left unset where nothing was measured. */
static void fill_cpu(const struct prof_stage *s, int window, uint64_t row_self,
                     struct prof_stage_stats *out)
{
    const struct prof_acc *a = window ? &s->win : &s->run;
    uint64_t self = a->self;
    double share;

    for (const struct prof_path_acc *p = s->paths; p != NULL; p = p->next)
        self += (window ? &p->win : &p->run)->self;
    /* The rise is the stage's, whichever path it ran on. */
    out->peak_rise_bytes = a->peak_bytes;
    if (!prof_sampler_installed() || (s->flags & PROF_STAGE_GPU) || self <= a->cpu_unsampled)
        return;
    share = (double)a->cpu_ns / (double)(self - a->cpu_unsampled);
    out->cpu_ns = share >= 1.0 ? row_self : (uint64_t)(share * (double)row_self);
    out->flags |= PROF_STAGE_CPU;
}

int prof_stats_row_cpu(const struct prof_row *r, uint64_t row_self, uint64_t *cpu_ns)
{
    struct prof_stage_stats st;

    st.flags = 0;
    st.cpu_ns = 0;
    fill_cpu(r->stage, 0, row_self, &st);
    *cpu_ns = st.cpu_ns;
    return (st.flags & PROF_STAGE_CPU) != 0;
}

int prof_stats_row_peak(const struct prof_row *r, uint64_t *bytes)
{
    /* As the summary's JSON: the rise is sampled with the on-CPU time. */
    if (!prof_sampler_installed() || (r->stage->flags & PROF_STAGE_GPU)) {
        *bytes = 0;
        return 0;
    }
    *bytes = r->stage->run.peak_bytes;
    return 1;
}

void prof_stats_fill(const struct prof_stage *s, int window, uint64_t wall_ns,
                     struct prof_stage_stats *out)
{
    const struct prof_acc *a = window ? &s->win : &s->run;
    struct prof_acc tmp;
    struct prof_path_sum sum;

    memset(out, 0, sizeof *out);
    /* A stage is the sum of its paths. */
    if (s->paths != NULL) {
        memset(&tmp, 0, sizeof tmp);
        acc_merge(&tmp, a);
        for (const struct prof_path_acc *p = s->paths; p != NULL; p = p->next)
            acc_merge(&tmp, window ? &p->win : &p->run);
        a = &tmp;
    }
    sum.count = a->count;
    sum.total = a->total;
    sum.self = a->self;
    fill_numbers(s, window, a, &sum, window ? s->outer_win : s->outer_run, wall_ns, out);
    fill_cpu(s, window, sum.self, out);
    out->parent = s->parent ? s->parent->name : NULL;
    if (a == &tmp)
        acc_clear(&tmp);
}

void prof_stats_row_fill(const struct prof_row *r, int window, uint64_t wall_ns,
                         struct prof_stage_stats *out, const struct prof_hist **hist,
                         struct prof_acc *tmp)
{
    const struct prof_stage *s = r->stage;
    const struct prof_acc *in_stage = window ? &s->win : &s->run, *a = NULL;
    uint64_t from_stage = 0;
    unsigned sources = 0;

    memset(out, 0, sizeof *out);
    memset(tmp, 0, sizeof *tmp);
    if (r->node == NULL) {
        a = in_stage;
    } else {
        /* Its nodes' own histograms, and the stage's when some of its
         * nodes keep none: that one is the row's only if every zone in
         * it is the row's. */
        for (const struct prof_node *m = r->node; m != NULL; m = m->next_member) {
            const struct prof_path_acc *ma = m->ext != NULL ? m->ext->acc : NULL;
            if (ma != NULL) {
                const struct prof_acc *x = window ? &ma->win : &ma->run;
                if (x->count != 0) {
                    a = x;
                    sources++;
                }
            } else {
                from_stage += node_sum(m, window).count;
            }
        }
        if (from_stage != 0) {
            a = in_stage;
            sources++;
        }
        if (from_stage != 0 && from_stage != in_stage->count) {
            a = NULL;
        } else if (sources > 1) {
            for (const struct prof_node *m = r->node; m != NULL; m = m->next_member)
                if (m->ext != NULL && m->ext->acc != NULL)
                    acc_merge(tmp, window ? &m->ext->acc->win : &m->ext->acc->run);
            if (from_stage != 0)
                acc_merge(tmp, in_stage);
            a = tmp;
        } else if (sources == 0) {
            a = tmp;
        }
    }
    fill_numbers(s, window, a, window ? &r->win : &r->run,
                 window ? r->outer_win : r->outer_run, wall_ns, out);
    fill_cpu(s, window, out->self_ns, out);
    if (out->count != 0)
        out->avg_ns = (double)(window ? r->calls_win : r->calls_run) / (double)out->count;
    out->parent = r->parent;
    out->depth = r->depth;
    *hist = a != NULL ? &a->hist : NULL;
}
