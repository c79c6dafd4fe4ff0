/* ranks_table.c - the cross-rank table from a state whose rounds are all
 * in (ranks_table.h): its model (each stage's medians across ranks from
 * round 2's histograms, the slowest rank and spread, the straggler), then
 * that model written as text or JSON. The protocol that fills the state
 * is ranks.c's.
 *
 * The straggler (one definition, shared with tools/prof-merge): for each
 * stage, each rank's self time per step in the window (a rank that did not
 * run the stage counts 0, ranks with no window are left out); the straggler
 * is the (rank, stage) with the largest excess of that value over the
 * median across ranks (the ceil(N/2)-th smallest value), or, with exactly
 * two ranks, over the other rank's value. Self time, so that a parent is
 * not blamed for its slow child; the median, so that the time the other
 * ranks spend waiting for the straggler in a collective is the
 * majority's, not an outlier. The largest excess of a stage is always its
 * maximum's, so MAXLOC and the median suffice. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "ranks_table.h"
#include "summary.h"
#include "units.h"

/* The on-CPU share is shown for a stage with at least this much sampled
 * self time over the ranks (10 sampling periods of 4 ms), as in the
 * summary's cpu%: below it one sample more or less moves it by 10
 * points or more. */
#define CPU_MIN_SELF_NS 40000000

/* The stage's on-CPU share of the self time of the ranks that sampled
 * it, 0-1, or -1 where none did. */
static double cpu_share(const struct ranks_stage *t)
{
    if (t->cpu_self_ns <= 0)
        return -1;
    return t->cpu_ns >= t->cpu_self_ns ? 1.0 : (double)t->cpu_ns / (double)t->cpu_self_ns;
}

/* The k-th smallest (1-based) of zeros zero values and the histogram's,
 * as the midpoint (in log(1 + ns)) of its bucket; the first and last
 * bucket give the exact min and max, where most ranks sit when one is an
 * outlier. */
static double hist_kth(const uint32_t *h, int64_t zeros, double lo, double hi, int64_t k)
{
    int64_t seen = zeros;
    double a = log1p(lo), span = log1p(hi) - a;

    if (k <= zeros)
        return 0;
    for (int b = 0; b < RANKS_HIST_BUCKETS; b++) {
        seen += h[b];
        if (seen >= k) {
            double v;
            if (b == 0 || !(span > 0))
                return lo;
            if (b == RANKS_HIST_BUCKETS - 1)
                return hi;
            v = expm1(a + span * (b + 0.5) / RANKS_HIST_BUCKETS);
            return v < lo ? lo : v > hi ? hi : v;
        }
    }
    return hi;
}

struct row {
    const struct ranks_stage *t;
    double avg_med, p95_med, spread, sps_med;
};

struct table {
    const struct ranks_state *s;
    struct row rows[PROF_RANKS_MAX_STAGES];
    int nrows;
    int s_rank, s_row;
    double s_excess, s_self, s_other;
};

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->t->total_ns != y->t->total_ns)
        return x->t->total_ns > y->t->total_ns ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static void table_build(struct table *tb, const struct ranks_state *s)
{
    int64_t ok = s->r1.ok;

    memset(tb, 0, sizeof *tb);
    tb->s = s;
    tb->s_rank = -1;
    for (int i = 0; i < s->nstages; i++) {
        const struct ranks_stage *t = &s->st[i];
        struct row *w = &tb->rows[tb->nrows];
        if (t->ranks <= 0)
            continue;
        w->t = t;
        w->avg_med = hist_kth(t->hist[0], 0, ranks_dec_val(t->min[0]), ranks_dec_val(t->max[0]),
                              (t->ranks + 1) / 2);
        w->p95_med = hist_kth(t->hist[1], 0, ranks_dec_val(t->min[1]), ranks_dec_val(t->max[1]),
                              (t->ranks + 1) / 2);
        w->sps_med = hist_kth(t->hist[2], ok - t->ranks, ranks_dec_val(t->min[2]), ranks_dec_val(t->max[2]),
                              (ok + 1) / 2);
        w->spread = w->avg_med > 0 ? ranks_dec_val(t->max[0]) / w->avg_med : 0;
        tb->nrows++;
    }
    qsort(tb->rows, (size_t)tb->nrows, sizeof *tb->rows, cmp_row);
    if (ok < 2)
        return;
    for (int k = 0; k < tb->nrows; k++) {
        const struct row *w = &tb->rows[k];
        double v = ranks_dec_val(w->t->max[2]), other;
        if (ok == 2)
            other = w->t->ranks == 2 ? ranks_dec_val(w->t->min[2]) : 0;
        else
            other = w->sps_med;
        if (v - other > tb->s_excess) {
            tb->s_excess = v - other;
            tb->s_rank = ranks_dec_rank(w->t->max[2]);
            tb->s_row = k;
            tb->s_self = v;
            tb->s_other = other;
        }
    }
}

static void named_steps(struct prof_buf *o, const struct ranks_state *s, int json)
{
    int64_t ends[2] = {s->r1.step_min, s->r1.step_max};
    int said = 0;

    for (int e = 0; e < 2; e++) {
        int64_t st = (int64_t)ranks_dec_val(ends[e]);
        if (ends[e] < 0 || ends[e] == RANKS_ABSENT_MIN || st == s->r1.ref_step ||
            (e == 1 && ends[1] == ends[0]))
            continue;
        if (json)
            prof_buf_printf(o, "%s{\"rank\":%d,\"state\":\"other_steps\",\"step\":%lld}",
                            said ? "," : "", ranks_dec_rank(ends[e]), (long long)st);
        else
            prof_buf_printf(o, "%srank %d at step %lld", said ? ", " : "", ranks_dec_rank(ends[e]),
                            (long long)st);
        said = 1;
    }
}

static void notes_text(struct prof_buf *o, const struct table *tb)
{
    const struct ranks_state *s = tb->s;

    if (s->r1.no_window > 0) {
        prof_buf_printf(o, "%lld of %lld ranks: no window closed yet (rank %lld",
                        (long long)s->r1.no_window, (long long)s->r1.nranks,
                        (long long)s->r1.nowin_min);
        if (s->r1.nowin_max != s->r1.nowin_min)
            prof_buf_printf(o, "%s rank %lld", s->r1.no_window > 2 ? " ... " : " and",
                            (long long)s->r1.nowin_max);
        prof_buf_puts(o, ")\n");
    }
    if (s->differ > 0) {
        prof_buf_printf(o, "steps differ: %lld of %lld ranks ended this window at another step "
                           "than rank %lld (step %lld): ",
                        (long long)s->differ, (long long)s->r1.nranks, (long long)s->r1.ref_rank,
                        (long long)s->r1.ref_step);
        named_steps(o, s, 0);
        prof_buf_puts(o, "; rows marked ! hold their numbers\n");
    }
    if (s->r1.lost > 0 || s->r1.folded > 0)
        prof_buf_printf(o, "left out of the cross-rank view: %lld stages beyond the %d across "
                           "ranks (or a key collision), %lld beyond the %d heaviest of a rank "
                           "(summed over ranks)\n",
                        (long long)s->r1.lost, PROF_RANKS_MAX_STAGES, (long long)s->r1.folded,
                        RANKS_LOCAL_CAP);
}

static void format_text(struct prof_buf *o, const struct table *tb)
{
    static const char *cols[] = {"avg med", "avg min", "avg max", "p95 med", "p95 min",
                                 "p95 max"};
    const struct ranks_state *s = tb->s;
    char name[sizeof s->st[0].name * 4 + 8], wall[24];
    size_t width = 24;
    int cpu = 0;

    if (s->bad) {
        prof_buf_puts(o, "prof ranks: the ranks' numbers could not be combined (another prof "
                         "version or byte order on some rank)\n");
        return;
    }
    if (s->r1.ref_rank < 0) {
        prof_buf_printf(o, "prof ranks: %lld ranks, no window closed on any rank yet\n",
                        (long long)s->r1.nranks);
        return;
    }
    prof_fmt_dur(wall, sizeof wall, (double)s->r1.ref_wall);
    prof_buf_printf(o, "prof ranks: step %lld, last %lld steps, %lld ranks (window %s on rank "
                       "%lld)\n",
                    (long long)s->r1.ref_step, (long long)s->r1.ref_steps,
                    (long long)s->r1.nranks, wall, (long long)s->r1.ref_rank);
    for (int k = 0; k < tb->nrows; k++) {
        size_t w = prof_fmt_name(name, sizeof name, tb->rows[k].t->name, 1000);
        if (w > width)
            width = w;
        /* The column where any rank sampled any stage (PROF_CPU). */
        cpu |= tb->rows[k].t->cpu_self_ns > 0;
    }
    prof_buf_printf(o, "%-*s %6s", (int)width, "stage", "ranks");
    for (int c = 0; c < 6; c++)
        prof_buf_printf(o, " %10s", cols[c]);
    prof_buf_printf(o, " %10s %7s%s\n", "slowest", "spread", cpu ? "   cpu%" : "");
    for (int k = 0; k < tb->nrows; k++) {
        const struct row *w = &tb->rows[k];
        const struct ranks_stage *t = w->t;
        double v[6] = {w->avg_med, ranks_dec_val(t->min[0]), ranks_dec_val(t->max[0]),
                       w->p95_med, ranks_dec_val(t->min[1]), ranks_dec_val(t->max[1])};
        size_t cols_used = prof_fmt_name(name, sizeof name, t->name, 1000);
        char d[24], slow[24];

        prof_buf_printf(o, "%s%*s %5lld%s", name, (int)(width - cols_used), "",
                        (long long)t->ranks, t->off > 0 ? "!" : " ");
        for (int c = 0; c < 6; c++) {
            prof_fmt_dur(d, sizeof d, v[c]);
            prof_buf_printf(o, " %10s", d);
        }
        snprintf(slow, sizeof slow, "rank %d", ranks_dec_rank(t->max[0]));
        prof_buf_printf(o, " %10s %6.2fx", slow, w->spread);
        if (cpu && cpu_share(t) >= 0 && t->cpu_self_ns >= CPU_MIN_SELF_NS)
            prof_buf_printf(o, " %5.0f%%\n", 100.0 * cpu_share(t));
        else
            prof_buf_puts(o, cpu ? "      -\n" : "\n");
    }
    if (tb->s_rank >= 0) {
        char ex[24], self[24], oth[24];
        prof_fmt_dur(ex, sizeof ex, tb->s_excess);
        prof_fmt_dur(self, sizeof self, tb->s_self);
        prof_fmt_dur(oth, sizeof oth, tb->s_other);
        /* The time no stage covers (uncovered.h) is where the rank is,
         * not a stage it is in. */
        if (strcmp(tb->rows[tb->s_row].t->name, "(no stage)") == 0) {
            snprintf(name, sizeof name, "outside stages");
        } else {
            memcpy(name, "in ", 3);
            prof_fmt_name(name + 3, sizeof name - 3, tb->rows[tb->s_row].t->name, 1000);
        }
        if (s->r1.ok == 2)
            prof_buf_printf(o, "straggler: rank %d %s, +%s per step (self %s per step, the "
                               "other rank %s; two ranks: against the other rank, not a "
                               "median)\n", tb->s_rank, name, ex, self, oth);
        else
            prof_buf_printf(o, "straggler: rank %d %s, +%s per step (self %s per step, "
                               "median rank %s)\n", tb->s_rank, name, ex, self, oth);
    } else {
        prof_buf_puts(o, "straggler: none (no rank spent more than the median rank in any "
                         "stage)\n");
    }
    notes_text(o, tb);
}

static void json_stat(struct prof_buf *o, const char *key, double med, int64_t min, int64_t max)
{
    prof_buf_printf(o, ",\"%s\":{\"median\":", key);
    prof_buf_double(o, med);
    prof_buf_puts(o, ",\"min\":");
    prof_buf_double(o, ranks_dec_val(min));
    prof_buf_printf(o, ",\"min_rank\":%d,\"max\":", ranks_dec_rank(min));
    prof_buf_double(o, ranks_dec_val(max));
    prof_buf_printf(o, ",\"max_rank\":%d}", ranks_dec_rank(max));
}

static void format_json(struct prof_buf *o, const struct table *tb)
{
    const struct ranks_state *s = tb->s;
    int first = 1;

    prof_buf_printf(o, "{\"prof\":\"ranks\",\"format\":2,\"version\":\"" PROF_VERSION_STRING
                       "\",\"step\":%lld,\"steps\":%lld,\"nranks\":%lld,\"ranks_ok\":%lld,"
                       "\"readable\":%s,\"ranks\":[",
                    (long long)s->r1.ref_step, (long long)s->r1.ref_steps,
                    (long long)s->r1.nranks, (long long)s->r1.ok, s->bad ? "false" : "true");
    if (!s->bad && s->r1.no_window > 0) {
        prof_buf_printf(o, "{\"rank\":%lld,\"state\":\"no_window\"}", (long long)s->r1.nowin_min);
        if (s->r1.nowin_max != s->r1.nowin_min)
            prof_buf_printf(o, ",{\"rank\":%lld,\"state\":\"no_window\"}",
                            (long long)s->r1.nowin_max);
        first = 0;
    }
    if (!s->bad && s->differ > 0) {
        if (!first)
            prof_buf_puts(o, ",");
        named_steps(o, s, 1);
    }
    prof_buf_printf(o, "],\"ranks_no_window\":%lld,\"ranks_other_steps\":%lld,"
                       "\"stages_left_out\":%lld,\"stages_folded\":%lld,\"stages\":[",
                    (long long)s->r1.no_window, (long long)s->differ, (long long)s->r1.lost,
                    (long long)s->r1.folded);
    for (int k = 0; k < tb->nrows; k++) {
        const struct row *w = &tb->rows[k];
        const struct ranks_stage *t = w->t;
        prof_buf_puts(o, k ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(o, t->name);
        prof_buf_printf(o, ",\"ranks\":%lld,\"ranks_other_steps\":%lld,\"count\":%lld,"
                           "\"total_ns\":%lld,\"self_ns\":%lld,\"max_ns\":%lld",
                        (long long)t->ranks, (long long)t->off, (long long)t->count,
                        (long long)t->total_ns, (long long)t->self_ns, (long long)t->max_ns);
        json_stat(o, "avg_ns", w->avg_med, t->min[0], t->max[0]);
        json_stat(o, "p95_ns", w->p95_med, t->min[1], t->max[1]);
        json_stat(o, "self_ns_per_step", w->sps_med, t->min[2], t->max[2]);
        prof_buf_printf(o, ",\"slowest_rank\":%d,\"spread\":", ranks_dec_rank(t->max[0]));
        prof_buf_double(o, w->spread);
        prof_buf_puts(o, ",\"cpu_share\":");
        if (cpu_share(t) >= 0)
            prof_buf_double(o, cpu_share(t));
        else
            prof_buf_puts(o, "null");
        prof_buf_puts(o, "}");
    }
    prof_buf_puts(o, "],\"straggler\":");
    if (tb->s_rank >= 0) {
        prof_buf_printf(o, "{\"rank\":%d,\"stage\":", tb->s_rank);
        prof_buf_json_string(o, tb->rows[tb->s_row].t->name);
        prof_buf_puts(o, ",\"excess_ns_per_step\":");
        prof_buf_double(o, tb->s_excess);
        prof_buf_puts(o, ",\"self_ns_per_step\":");
        prof_buf_double(o, tb->s_self);
        prof_buf_puts(o, ",\"median_self_ns_per_step\":");
        prof_buf_double(o, tb->s_other);
        prof_buf_printf(o, ",\"against\":\"%s\"}", s->r1.ok == 2 ? "other_rank" : "median");
    } else {
        prof_buf_puts(o, "null");
    }
    prof_buf_puts(o, "}\n");
}

int prof_ranks_format_state(struct prof_buf *out, const struct ranks_state *s, int format)
{
    struct table *tb;

    if (s->magic != PROF_RANKS_MAGIC || s->done != PROF_RANKS_ROUNDS)
        return -EINVAL;
    if ((tb = malloc(sizeof *tb)) == NULL)
        return -ENOMEM;
    table_build(tb, s);
    if (format == PROF_FORMAT_JSON)
        format_json(out, tb);
    else
        format_text(out, tb);
    free(tb);
    return out->failed ? -ENOMEM : 0;
}
