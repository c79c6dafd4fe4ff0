/* summary.c - format the statistics as a table or as JSON (docs/FORMATS.md).
 * All of it runs off the hot path: on the collector thread, or on the
 * thread that asked for a summary, with the runtime lock held. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "env.h"
#include "gpu_format.h"
#include "kstats.h"
#include "loss.h"
#include "memory.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "sampler.h"
#include "stats.h"
#include "summary.h"

struct view {
    int window;                  /* show the window's numbers */
    uint64_t wall_ns;            /* wall time of what is shown */
    uint64_t steps;              /* steps in what is shown */
    uint64_t step;               /* the step the summary is taken at */
    uint64_t timed;              /* time windows shown (PROF_SUMMARY_EVERY=10s) */
};

/* A step window normally holds PROF_SUMMARY_EVERY=N steps. When steps
 * come faster than their summaries can be written, or the step records
 * that end windows were dropped (a full ring), the collector prints one
 * summary for the steps since the last one, labelled with the last due
 * step: it says so, with how many windows it holds. */
static uint64_t merged_windows(const struct view *v)
{
    uint64_t every = prof_config_get()->every_steps;

    if (v->window && !every && v->timed > 1)
        return v->timed;
    return v->window && every && v->steps > every ? (v->steps + every - 1) / every : 1;
}

/* "1 step", "2 steps": the header reads as English. */
static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

static void header_text(struct prof_buf *b, enum prof_summary_kind kind, const struct view *v,
                        uint64_t run_ns)
{
    const struct prof_process *p = prof_process_get();
    char clock[48], run[24], win[24];

    prof_clock_source(clock, sizeof clock);
    prof_fmt_dur(run, sizeof run, (double)run_ns);
    prof_fmt_dur(win, sizeof win, (double)v->wall_ns);
    prof_buf_printf(b, "prof summary: %s (pid %d", p->program, p->pid);
    if (p->rank >= 0)
        prof_buf_printf(b, ", rank %d", p->rank);
    if (prof_rt.forked_from)
        prof_buf_printf(b, ", forked from %u", prof_rt.forked_from);
    prof_buf_puts(b, ")");
    if (kind == PROF_KIND_PERIODIC) {
        uint64_t n = merged_windows(v);

        prof_buf_printf(b, ", step %llu: last %llu step%s in %s; run %s",
                        (unsigned long long)v->step, (unsigned long long)v->steps,
                        plural(v->steps), win, run);
        if (n > 1 && !prof_config_get()->every_steps)
            prof_buf_printf(b, " (%llu windows in one: the summaries' writer was behind)",
                            (unsigned long long)n);
        else if (n > 1)
            prof_buf_printf(b, " (%llu windows in one, steps %llu to %llu: faster than their "
                            "summaries, or their step records were dropped)", (unsigned long long)n,
                            (unsigned long long)(v->step - v->steps + 1),
                            (unsigned long long)v->step);
    }
    else
        prof_buf_printf(b, ", %s: %llu step%s, wall %s", kind == PROF_KIND_FINAL ? "final" : "now",
                        (unsigned long long)v->step, plural(v->step), run);
    prof_buf_printf(b, ", %llu thread%s, %llu dropped",
                    (unsigned long long)prof_threads_seen, plural(prof_threads_seen),
                    (unsigned long long)(v->window ? prof_rt.dropped_window : prof_rt.dropped));
    prof_mem_summary_text(b, v->window);    /* ", rss 1.23 GiB, peak 1.50 GiB" */
    prof_buf_printf(b, ", clock %s\n", clock);
}

/* Under the table, where the short counts are: what was lost and what
 * would have kept it. */
static void loss_footer(struct prof_buf *b, const struct view *v)
{
    const struct prof_loss *l = prof_loss_get(v->window);
    char hint[24], behind[24];

    if (l->lanes_shared != 0)
        prof_buf_printf(b, "* mixed: %llu asyncio task%s found all %u lanes in use and shared "
                        "%s thread's nesting and trace track\n",
                        (unsigned long long)l->lanes_shared, l->lanes_shared == 1 ? "" : "s",
                        PROF_LANES_MAX_, l->lanes_shared == 1 ? "its" : "their");
    if (l->records == 0)
        return;
    prof_loss_size(hint, sizeof hint, l->buffer_hint);
    prof_fmt_dur(behind, sizeof behind, (double)l->behind_ns);
    prof_buf_printf(b, "* short: %llu records lost (ring full) on %u thread%s, the collector up "
                    "to %s behind; PROF_BUFFER=%s would keep them\n",
                    (unsigned long long)l->records, l->threads, l->threads == 1 ? "" : "s",
                    behind, hint);
}

static const struct prof_children_ended *(*children_check)(void);
/* The summary being formatted's: set by prof_summary_format. */
static const struct prof_children_ended *children;

void prof_summary_children_hook(const struct prof_children_ended *(*check_locked)(void))
{
    children_check = check_locked;
}

/* The forked workers that recorded, folded into one line: their tables
 * and traces are where the same settings send them in the workers
 * (summary_out.c, trace.c), which this says. */
static void workers_line(struct prof_buf *b, uint64_t n)
{
    const struct prof_config *cfg = prof_config_get();
    int to = cfg->summary_to;

    prof_buf_printf(b, "%llu forked worker process%s recorded zones: ", (unsigned long long)n,
                    n == 1 ? "" : "es");
    if (to == PROF_TO_FILE && prof_path_has_pid(cfg->summary_path))
        prof_buf_puts(b, "summaries in PROF_SUMMARY's %p files");
    else if (to == PROF_TO_OFF || to == PROF_TO_FILE || !cfg->summary_set)
        prof_buf_puts(b, "no summaries of their own (PROF_SUMMARY=PATH with %p writes them)");
    else
        prof_buf_puts(b, "summaries of their own, above");
    if (cfg->trace_path != NULL && prof_path_has_pid(cfg->trace_path))
        prof_buf_puts(b, "; traces in PROF_TRACE's %p files");
    else if (cfg->trace_path != NULL)
        prof_buf_puts(b, "; no traces (PROF_TRACE has no %p)");
    prof_buf_puts(b, "\n");
}

/* Under the whole run's table: forked workers that ended before they
 * could finish (children.c), each already said once on the logger. */
static void children_footer(struct prof_buf *b, const struct view *v)
{
    const struct prof_children_ended *e = children;

    if (v->window)
        return;
    if (e->count) {
        prof_buf_printf(b, "%llu worker%s ended before finishing (no summary, trace cut): "
                        "pid%s", (unsigned long long)e->count, plural(e->count),
                        plural(e->count));
        for (uint32_t i = 0; i < e->npids; i++)
            prof_buf_printf(b, " %d", (int)e->pids[i]);
        if (e->count > e->npids)
            prof_buf_printf(b, " and %llu more", (unsigned long long)(e->count - e->npids));
        prof_buf_puts(b, "\n");
    }
    if (e->recorded)
        workers_line(b, e->recorded);
    if (e->unwatched)
        prof_buf_printf(b, "%llu forked worker%s in this process tree found no free slot among "
                        "%d and %s not watched\n", (unsigned long long)e->unwatched,
                        plural(e->unwatched), (int)e->slots,
                        e->unwatched == 1 ? "was" : "were");
}

/* The on-CPU share is shown for a stage with at least this much sampled
 * self time (10 sampling periods): below it one sample more or less moves
 * it by 10 points or more. */
#define CPU_MIN_SELF_NS (10ull * PROF_SAMPLER_PERIOD_NS)
/* The waiting line names a stage only past these: 25 periods of self time,
 * waiting 5% of the wall time or more, and on a CPU under half of it by a
 * margin sampling cannot make up: a stage of zones shorter than a period
 * gets its samples by chance, as many as its CPU time holds periods give
 * or take their square root (docs/ARCHITECTURE.md), so it needs two such
 * deviations under half of its self time's periods. */
#define WAIT_MIN_SELF_NS (25ull * PROF_SAMPLER_PERIOD_NS)

static int surely_under_half(const struct prof_stage_stats *st)
{
    double half = (double)st->self_ns / 2.0 / PROF_SAMPLER_PERIOD_NS;
    double got = (double)st->cpu_ns / PROF_SAMPLER_PERIOD_NS;

    return got + 2.0 * sqrt(half) <= half;
}

/* The stage's on-CPU share in percent, or -1 when it has none to show. */
static double cpu_pct(const struct prof_stage_stats *st)
{
    if (!(st->flags & PROF_STAGE_CPU) || (st->flags & PROF_STAGE_GPU) ||
        st->self_ns < CPU_MIN_SELF_NS)
        return -1;
    return 100.0 * (double)st->cpu_ns / (double)st->self_ns;
}

/* Whether the table has the cpu% column: the sampler was installed (it
 * may have stopped since: the column shows what it sampled). */
static int cpu_column(void)
{
    return prof_sampler_installed();
}

/* Under the table: the stage that waited longest, where its share says so
 * (the GPU check names what the GPU waited for the same way). */
static void waiting_line(struct prof_buf *b, const struct prof_rows *r, const struct view *v)
{
    struct prof_stage_stats st, best;
    uint64_t best_wait = 0;
    char self[24], pct[24], name[256];

    for (size_t i = 0; i < r->len; i++) {
        double share;
        uint64_t wait;

        prof_stats_fill(r->rows[i].stage, v->window, v->wall_ns, &st);
        share = cpu_pct(&st);
        if (share < 0 || st.self_ns < WAIT_MIN_SELF_NS || !surely_under_half(&st))
            continue;
        wait = st.self_ns - st.cpu_ns;
        if (wait > best_wait && wait >= v->wall_ns / 20) {
            best = st;
            best_wait = wait;
        }
    }
    if (best_wait == 0)
        return;
    prof_fmt_name(name, sizeof name, best.name, PROF_NAME_COLS);
    prof_fmt_dur(self, sizeof self, (double)best.self_ns);
    prof_fmt_fixed(pct, sizeof pct, cpu_pct(&best), 0);
    prof_buf_printf(b, "%s: %s, on CPU %s%%: waiting (not computing) most of its time\n", name,
                    self, pct);
}

/* Under the table: the stage whose samples claimed the most of the
 * window's rises of the process's peak resident memory, when it rose. */
static void peak_line(struct prof_buf *b, const struct prof_rows *r, const struct view *v)
{
    struct prof_stage_stats st;
    struct prof_mem_figures f;
    const char *best = NULL;
    uint64_t most = 0;
    char rise[48], to[48], name[256];

    for (size_t i = 0; i < r->len; i++) {
        prof_stats_fill(r->rows[i].stage, v->window, v->wall_ns, &st);
        if (st.peak_rise_bytes > most) {
            most = st.peak_rise_bytes;
            best = st.name;
        }
    }
    if (best == NULL)
        return;
    prof_fmt_name(name, sizeof name, best, PROF_NAME_COLS);
    prof_fmt_bytes(rise, sizeof rise, most);
    prof_mem_figures(v->window, &f);
    if (f.known) {
        prof_fmt_bytes(to, sizeof to, f.peak);
        prof_buf_printf(b, "%s raised the peak by %s (to %s)\n", name, rise, to);
    } else {
        prof_buf_printf(b, "%s raised the peak by %s\n", name, rise);
    }
}

static void table_text(struct prof_buf *b, const struct prof_rows *r, const struct view *v)
{
    int cpu = cpu_column();
    static const char *cols[] = {"count", "total", "self", "avg", "p50", "p95", "p99", "max"};
    size_t width = 24;
    char name[256];

    for (size_t i = 0; i < r->len; i++) {
        size_t w = 2 * r->rows[i].depth + prof_fmt_name(name, sizeof name, r->rows[i].stage->name, PROF_NAME_COLS);
        if (w > width)
            width = w;
    }
    prof_buf_printf(b, "%-*s", (int)width, "stage");
    for (size_t c = 0; c < 8; c++)
        prof_buf_printf(b, " %10s", cols[c]);
    prof_buf_puts(b, cpu ? "  wall%   cpu%      peak+\n" : "  wall%\n");
    for (size_t i = 0; i < r->len; i++) {
        struct prof_stage_stats st;
        const struct prof_hist *hist;
        struct prof_acc tmp;
        char d[8][24];
        size_t cols_used;

        prof_stats_row_fill(&r->rows[i], v->window, v->wall_ns, &st, &hist, &tmp);
        prof_stats_row_done(&tmp);
        cols_used = prof_fmt_name(name, sizeof name, st.name, PROF_NAME_COLS);
        prof_buf_printf(b, "%*s%s%*s", (int)(2 * r->rows[i].depth), "", name,
                        (int)(width - 2 * r->rows[i].depth - cols_used), "");
        if (st.count == 0) {
            prof_buf_printf(b, " %10s  (open, none ended)\n", "0");
            continue;
        }
        prof_fmt_dur(d[0], 24, (double)st.total_ns);
        prof_fmt_dur(d[1], 24, (double)st.self_ns);
        prof_fmt_dur(d[2], 24, st.avg_ns);
        prof_fmt_dur(d[3], 24, st.p50_ns);
        prof_fmt_dur(d[4], 24, st.p95_ns);
        prof_fmt_dur(d[5], 24, st.p99_ns);
        prof_fmt_dur(d[6], 24, (double)st.max_ns);
        if (st.flags & PROF_STAGE_NOHIST_)
            for (int c = 3; c < 7; c++)
                strcpy(d[c], "-");
        {
            /* A stage of a thread that lost records: its count is short. */
            char cnt[24];
            snprintf(cnt, sizeof cnt, "%llu%s", (unsigned long long)st.count,
                     (st.flags & PROF_STAGE_LOSSY) ? "*" : "");
            prof_buf_printf(b, " %10s", cnt);
        }
        for (int c = 0; c < 7; c++)
            prof_buf_printf(b, " %10s", d[c]);
        {
            char pct[32];
            prof_fmt_fixed(pct, sizeof pct, 100.0 * st.wall_share, 1);
            prof_buf_printf(b, " %5s%%", pct);
            if (cpu) {
                double c = cpu_pct(&st);

                if (c < 0)
                    prof_buf_puts(b, "      -");
                else {
                    prof_fmt_fixed(pct, sizeof pct, c, 0);
                    prof_buf_printf(b, " %5s%%", pct);
                }
                /* The stage's rise of the peak (sampled with cpu%). */
                if (st.flags & PROF_STAGE_GPU)
                    prof_buf_puts(b, "          -");
                else if (st.peak_rise_bytes == 0)
                    prof_buf_puts(b, "          0");
                else {
                    char rise[48];

                    prof_fmt_bytes(rise, sizeof rise, st.peak_rise_bytes);
                    prof_buf_printf(b, " %10s", rise);
                }
            }
            prof_buf_puts(b, "\n");
        }
        if (st.flags & PROF_STAGE_GPU)
            prof_kstats_text(b, r->rows[i].stage, v->window, (int)(2 * r->rows[i].depth + 4));
    }
    if (r->folded) {
        char t[24];
        prof_fmt_dur(t, sizeof t, (double)r->folded_total);
        prof_buf_printf(b, "... %zu more stages (total %s) not shown\n", r->folded, t);
    }
    if (r->paths_nohist)
        prof_buf_printf(b, "* %llu path%s past the %u that keep a distribution of their own: "
                        "where such paths share their stage's, p50 to max show \"-\"\n",
                        (unsigned long long)r->paths_nohist, plural(r->paths_nohist),
                        (unsigned)PROF_STATS_PATH_HISTS);
    if (cpu) {
        waiting_line(b, r, v);
        peak_line(b, r, v);
    }
    loss_footer(b, v);
    children_footer(b, v);
    if (r->ncounters) {
        prof_buf_printf(b, "%-*s %10s %10s %10s %10s %10s\n", (int)width, "counter", "count",
                        "last", "min", "max", "avg");
        for (size_t i = 0; i < r->ncounters; i++) {
            const struct prof_counter_acc *a = v->window ? &r->counters[i]->win : &r->counters[i]->run;
            size_t w = prof_fmt_name(name, sizeof name, r->counters[i]->name, PROF_NAME_COLS);
            char g[4][32];
            prof_fmt_sig(g[0], sizeof g[0], a->last, 4);
            prof_fmt_sig(g[1], sizeof g[1], a->min, 4);
            prof_fmt_sig(g[2], sizeof g[2], a->max, 4);
            prof_fmt_sig(g[3], sizeof g[3], a->count ? a->sum / (double)a->count : 0.0, 4);
            prof_buf_printf(b, "%s%*s %10llu %10s %10s %10s %10s", name, (int)(width - w), "",
                            (unsigned long long)a->count, g[0], g[1], g[2], g[3]);
            if (a->nonfinite)
                prof_buf_printf(b, "  (+%llu NaN/inf left out)", (unsigned long long)a->nonfinite);
            prof_buf_puts(b, "\n");
        }
    }
    if (r->nmarks) {
        prof_buf_puts(b, "marks:");
        for (size_t i = 0; i < r->nmarks; i++) {
            prof_fmt_name(name, sizeof name, r->marks[i]->name, PROF_NAME_COLS);
            prof_buf_printf(b, " %s x%llu", name,
                            (unsigned long long)(v->window ? r->marks[i]->win : r->marks[i]->run));
        }
        prof_buf_puts(b, "\n");
    }
}

struct hist_ctx {
    struct prof_buf *b;
    int first;
};

static void hist_bucket(void *p, uint64_t lo, uint64_t hi, uint64_t count)
{
    struct hist_ctx *c = p;

    prof_buf_printf(c->b, "%s[%llu,%llu,%llu]", c->first ? "" : ",", (unsigned long long)lo,
                    (unsigned long long)hi, (unsigned long long)count);
    c->first = 0;
}

static void section_json(struct prof_buf *b, const struct prof_rows *r, const struct view *v)
{
    prof_buf_printf(b, "{\"steps\":%llu,\"wall_ns\":%llu,\"stages\":[",
                    (unsigned long long)v->steps, (unsigned long long)v->wall_ns);
    for (size_t i = 0; i < r->len; i++) {
        const struct prof_stage *s = r->rows[i].stage;
        const struct prof_hist *hist;
        struct prof_acc tmp;
        struct prof_stage_stats st;
        struct hist_ctx hc = {b, 1};
        int nohist;

        prof_stats_row_fill(&r->rows[i], v->window, v->wall_ns, &st, &hist, &tmp);
        nohist = (st.flags & PROF_STAGE_NOHIST_) != 0;
        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(b, st.name);
        prof_buf_puts(b, ",\"parent\":");
        if (st.parent)
            prof_buf_json_string(b, st.parent);
        else
            prof_buf_puts(b, "null");
        prof_buf_printf(b, ",\"depth\":%u", r->rows[i].depth);
        /* parent_row: the index of the row it is under in this array (a
         * row is a path: one name can be a row under several parents). */
        if (r->rows[i].parent_row != UINT32_MAX)
            prof_buf_printf(b, ",\"parent_row\":%u", r->rows[i].parent_row);
        else
            prof_buf_puts(b, ",\"parent_row\":null");
        prof_buf_printf(b, ",\"gpu\":%s,\"lossy\":%s,\"count\":%llu,"
                        "\"total_ns\":%llu,\"self_ns\":%llu,",
                        (st.flags & PROF_STAGE_GPU) ? "true" : "false",
                        (st.flags & PROF_STAGE_LOSSY) ? "true" : "false",
                        (unsigned long long)st.count, (unsigned long long)st.total_ns,
                        (unsigned long long)st.self_ns);
        if (nohist)
            prof_buf_puts(b, "\"min_ns\":null,\"max_ns\":null,\"avg_ns\":");
        else
            prof_buf_printf(b, "\"min_ns\":%llu,\"max_ns\":%llu,\"avg_ns\":",
                            (unsigned long long)st.min_ns, (unsigned long long)st.max_ns);
        prof_buf_double(b, st.avg_ns);
        if (nohist) {
            prof_buf_puts(b, ",\"p50_ns\":null,\"p95_ns\":null,\"p99_ns\":null");
        } else {
            prof_buf_puts(b, ",\"p50_ns\":");
            prof_buf_double(b, st.p50_ns);
            prof_buf_puts(b, ",\"p95_ns\":");
            prof_buf_double(b, st.p95_ns);
            prof_buf_puts(b, ",\"p99_ns\":");
            prof_buf_double(b, st.p99_ns);
        }
        prof_buf_puts(b, ",\"wall_share\":");
        prof_buf_double(b, st.wall_share);
        /* Sampled CPU time of the self time; null where not measured. */
        if (st.flags & PROF_STAGE_CPU)
            prof_buf_printf(b, ",\"cpu_ns\":%llu", (unsigned long long)st.cpu_ns);
        else
            prof_buf_puts(b, ",\"cpu_ns\":null");
        /* The stage's rise of the process's peak resident memory, bytes;
         * null where nothing was sampled (PROF_CPU=0). */
        if (prof_sampler_installed() && !(st.flags & PROF_STAGE_GPU))
            prof_buf_printf(b, ",\"peak_rise_bytes\":%llu",
                            (unsigned long long)st.peak_rise_bytes);
        else
            prof_buf_puts(b, ",\"peak_rise_bytes\":null");
        prof_buf_puts(b, ",\"hist\":[");
        if (hist != NULL)
            prof_hist_foreach(hist, hist_bucket, &hc);
        prof_buf_puts(b, "]");
        prof_stats_row_done(&tmp);
        prof_kstats_json(b, s, v->window);    /* ,"kernels":{...} with PROF_CUDA=kernels */
        prof_buf_puts(b, "}");
    }
    prof_buf_printf(b, "],\"folded_stages\":%zu,\"folded_total_ns\":%llu,"
                    "\"paths\":%zu,\"paths_without_hist\":%llu", r->folded,
                    (unsigned long long)r->folded_total, r->npaths,
                    (unsigned long long)r->paths_nohist);
    prof_buf_puts(b, ",\"counters\":[");
    for (size_t i = 0; i < r->ncounters; i++) {
        const struct prof_counter_acc *a = v->window ? &r->counters[i]->win : &r->counters[i]->run;
        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(b, r->counters[i]->name);
        prof_buf_printf(b, ",\"count\":%llu,\"nonfinite\":%llu,\"last\":", (unsigned long long)a->count,
                        (unsigned long long)a->nonfinite);
        prof_buf_double(b, a->last);
        prof_buf_puts(b, ",\"min\":");
        prof_buf_double(b, a->min);
        prof_buf_puts(b, ",\"max\":");
        prof_buf_double(b, a->max);
        prof_buf_puts(b, ",\"avg\":");
        prof_buf_double(b, a->count ? a->sum / (double)a->count : 0.0);
        prof_buf_puts(b, "}");
    }
    prof_buf_puts(b, "],\"marks\":[");
    for (size_t i = 0; i < r->nmarks; i++) {
        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(b, r->marks[i]->name);
        prof_buf_printf(b, ",\"count\":%llu}",
                        (unsigned long long)(v->window ? r->marks[i]->win : r->marks[i]->run));
    }
    {
        const struct prof_loss *l = prof_loss_get(v->window);

        prof_buf_printf(b, "],\"loss\":{\"records\":%llu,\"threads\":%u,\"behind_ns\":%llu,"
                        "\"buffer_hint\":%llu,\"lanes_shared\":%llu}",
                        (unsigned long long)l->records, l->threads,
                        (unsigned long long)l->behind_ns, (unsigned long long)l->buffer_hint,
                        (unsigned long long)l->lanes_shared);
    }
    prof_gpu_summary_json(b, v->window, v->wall_ns);    /* ,"gpus":[...] (gpu_busy.h) */
    prof_mem_summary_json(b, v->window);                /* ,"memory":{...} (memory.h) */
    prof_buf_puts(b, "}");
}

void prof_summary_format(struct prof_buf *b, int format, enum prof_summary_kind kind,
                         uint64_t step, uint64_t now, uint64_t windows)
{
    struct view run = {0, now > prof_rt.start_ns ? now - prof_rt.start_ns : 0, step, step, 1};
    struct view win = {1, now > prof_rt.window_start_ns ? now - prof_rt.window_start_ns : 0,
                       step - prof_rt.window_start_step, step, windows};
    const struct view *shown = kind == PROF_KIND_PERIODIC ? &win : &run;
    struct prof_rows rows;

    static const struct prof_children_ended none;

    /* Workers found ended are logged here, and listed below. */
    children = children_check != NULL ? children_check() : &none;
    if (format == PROF_FORMAT_JSON) {
        const struct prof_process *p = prof_process_get();
        static const char *kinds[] = {"", "periodic", "final", "demand"};
        struct timespec rt;

        clock_gettime(CLOCK_REALTIME, &rt);
        prof_buf_puts(b, "{\"prof\":\"summary\",\"format\":1,\"version\":\"" PROF_VERSION_STRING
                         "\",\"kind\":\"");
        prof_buf_puts(b, kinds[kind]);
        prof_buf_puts(b, "\",\"program\":");
        prof_buf_json_string(b, p->program);
        prof_buf_printf(b, ",\"pid\":%d,\"host\":", p->pid);
        prof_buf_json_string(b, p->host);
        if (p->rank >= 0)
            prof_buf_printf(b, ",\"rank\":%d", p->rank);
        else
            prof_buf_puts(b, ",\"rank\":null");
        prof_buf_puts(b, ",\"unix_time\":");
        prof_buf_fixed(b, (double)rt.tv_sec + rt.tv_nsec / 1e9, 3);
        prof_buf_printf(b, ",\"step\":%llu,\"wall_ns\":%llu,\"threads\":%llu,"
                        "\"dropped\":%llu",
                        (unsigned long long)step,
                        (unsigned long long)run.wall_ns, (unsigned long long)prof_threads_seen,
                        (unsigned long long)prof_rt.dropped);
        prof_mem_summary_json(b, 0);    /* the run's: a periodic line has no total */
        {
            const struct prof_children_ended *e = children;

            prof_buf_puts(b, ",\"workers_unfinished\":[");
            for (uint32_t i = 0; i < e->npids; i++)
                prof_buf_printf(b, "%s%d", i ? "," : "", (int)e->pids[i]);
            prof_buf_printf(b, "],\"workers_unfinished_count\":%llu,\"workers_unwatched\":%llu,"
                            "\"workers_recorded\":%llu",
                            (unsigned long long)e->count, (unsigned long long)e->unwatched,
                            (unsigned long long)e->recorded);
        }
        if (kind == PROF_KIND_PERIODIC &&
            prof_stats_rows(&rows, 1, PROF_SUMMARY_JSON_MAX_ROWS) == 0) {
            prof_buf_printf(b, ",\"merged_windows\":%llu",
                            (unsigned long long)merged_windows(&win));
            prof_buf_puts(b, ",\"window\":");
            section_json(b, &rows, &win);
            prof_rows_free(&rows);
        }
        /* A periodic line holds its window only: the whole run's section
         * (every stage's histogram since the start) made a 1-step summary
         * of 32 stages 128 KB. PROF_SUMMARY_JSON=full keeps it. */
        if ((kind != PROF_KIND_PERIODIC || prof_config_get()->summary_json_full) &&
            prof_stats_rows(&rows, 0, PROF_SUMMARY_JSON_MAX_ROWS) == 0) {
            prof_buf_puts(b, ",\"total\":");
            section_json(b, &rows, &run);
            prof_rows_free(&rows);
        }
        prof_buf_puts(b, "}\n");
        return;
    }
    header_text(b, kind, shown, run.wall_ns);
    prof_gpu_summary_text(b, shown->window, shown->wall_ns);
    if (prof_stats_rows(&rows, shown->window, PROF_SUMMARY_MAX_ROWS) != 0) {
        prof_buf_puts(b, "(out of memory building the table)\n");
        return;
    }
    table_text(b, &rows, shown);
    prof_rows_free(&rows);
}
