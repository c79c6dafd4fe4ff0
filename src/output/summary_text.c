/* summary_text.c - a summary's model (summary_model.h) written as the
 * table (docs/FORMATS.md): the header, the GPU devices' lines, the table
 * with each GPU stage's kernels under it, the waiting and peak lines, the
 * footers, the counters and the marks. Nothing here computes a figure: it
 * lays the model's out, in the units and with the names' cut that the
 * base floor's formatters (json.h, units.h) give. */
#include <string.h>

#include "prof.h"
#include "json.h"
#include "loss.h"
#include "process.h"
#include "stats.h"
#include "summary_text.h"
#include "units.h"

/* "1 step", "2 steps": the header reads as English. */
static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

/* A 0-1 share as a whole percent, as nvidia-smi shows one. */
static int pct(double v)
{
    return (int)(v * 100.0 + 0.5);
}

/* ", rss 1.23 GiB, peak 1.50 GiB", and the run's peak where a window's
 * is lower. */
static void memory_text(struct prof_buf *b, const struct prof_mem_figures *f, int window)
{
    char rss[48], peak[48], run[48];

    if (!f->known)
        return;
    prof_fmt_bytes(rss, sizeof rss, f->rss);
    prof_fmt_bytes(peak, sizeof peak, f->peak);
    prof_buf_printf(b, ", rss %s, peak %s", rss, peak);
    if (window && f->run_peak > f->peak) {
        prof_fmt_bytes(run, sizeof run, f->run_peak);
        prof_buf_printf(b, " (run %s)", run);
    }
}

static void header_text(struct prof_buf *b, const struct prof_summary_model *m,
                        const struct prof_summary_section *v)
{
    const struct prof_process *p = m->proc;
    char run[24], win[24];

    prof_fmt_dur(run, sizeof run, (double)m->run_wall_ns);
    prof_fmt_dur(win, sizeof win, (double)v->wall_ns);
    prof_buf_printf(b, "prof summary: %s (pid %d", p->program, p->pid);
    if (p->rank >= 0)
        prof_buf_printf(b, ", rank %d", p->rank);
    if (m->forked_from)
        prof_buf_printf(b, ", forked from %u", m->forked_from);
    prof_buf_puts(b, ")");
    if (m->kind == PROF_KIND_PERIODIC) {
        uint64_t n = m->merged;

        prof_buf_printf(b, ", step %llu: last %llu step%s in %s; run %s",
                        (unsigned long long)m->step, (unsigned long long)v->steps,
                        plural(v->steps), win, run);
        if (n > 1 && !m->by_steps)
            prof_buf_printf(b, " (%llu windows in one: the summaries' writer was behind)",
                            (unsigned long long)n);
        else if (n > 1)
            prof_buf_printf(b, " (%llu windows in one, steps %llu to %llu: faster than their "
                            "summaries, or their step records were dropped)", (unsigned long long)n,
                            (unsigned long long)(m->step - v->steps + 1),
                            (unsigned long long)m->step);
    }
    else
        prof_buf_printf(b, ", %s: %llu step%s, wall %s",
                        m->kind == PROF_KIND_FINAL ? "final" : "now",
                        (unsigned long long)m->step, plural(m->step), run);
    prof_buf_printf(b, ", %llu thread%s, %llu dropped",
                    (unsigned long long)m->threads, plural(m->threads),
                    (unsigned long long)(v->window ? m->dropped_window : m->dropped));
    memory_text(b, &v->mem, v->window);
    prof_buf_printf(b, ", clock %s\n", m->clock);
}

/* One line per device that ran GPU zones, under the header: its busy
 * share (and its streams'), NVML's figures where there are some, and the
 * bottleneck check under 85%; then the GPU sides lost. */
static void gpu_text(struct prof_buf *b, const struct prof_gpu_figures *g, int window)
{
    int k, j, n = 0;

    for (k = 0; k < g->ndevices; k++) {
        const struct prof_gpu_device_figures *v = &g->dev[k];

        prof_buf_printf(b, "GPU %d busy %d%%", v->device, pct(v->busy));
        if (v->have_nv)
            prof_buf_printf(b, " (nvidia-smi %d%%)", pct(v->nv.util));
        prof_buf_printf(b, ", idle %d%% of the %s", 100 - pct(v->busy),
                        window ? "window" : "run");
        if (v->check) {
            if (v->top_stage != NULL)
                prof_buf_printf(b, ": %d%% of it in %s", pct(v->top_share), v->top_stage);
            prof_buf_printf(b, "; %s: %s", v->band, v->cause);
        }
        for (j = 0; j < v->nstreams; j++) {
            const struct prof_gpu_stream_figures *s = &g->str[v->first_stream + j];

            prof_buf_printf(b, "%s %d %d%%", j ? "," : "; streams", s->stream_no, pct(s->busy));
        }
        if (v->have_nv)
            prof_buf_printf(b, "; memory %llu MiB (peak %llu MiB), %d W, SM %u MHz",
                            (unsigned long long)(v->nv.mem_used / (1024 * 1024)),
                            (unsigned long long)(v->nv.mem_peak / (1024 * 1024)),
                            (int)(v->nv.power_w + 0.5), v->nv.sm_mhz);
        else if (v->have_drv)
            prof_buf_printf(b, "; memory %llu MiB (peak %llu MiB, driver)",
                            (unsigned long long)(v->drv_used / (1024 * 1024)),
                            (unsigned long long)(v->drv_peak / (1024 * 1024)));
        prof_buf_puts(b, "\n");
    }
    for (k = 0; k < g->nlost; k++)
        prof_buf_printf(b, "%s %s %llu (%s)", n++ ? "," : "GPU sides lost:", g->lost[k].stage,
                        (unsigned long long)g->lost[k].count, g->lost[k].cause);
    if (g->lost_other)
        prof_buf_printf(b, "%s other stages %llu", n++ ? "," : "GPU sides lost:",
                        (unsigned long long)g->lost_other);
    if (n)
        prof_buf_puts(b, "\n");
}

/* Under a GPU stage's row, indented by indent spaces: "busy 1.20 ms, 12
 * kernels: gemm 60%, relu 30%, (memcpy) 10%". */
static void kernels_text(struct prof_buf *b, const struct prof_kstats_figures *k, int indent)
{
    char d[24];
    unsigned i;

    prof_fmt_dur(d, sizeof d, (double)k->busy_ns);
    prof_buf_printf(b, "%*sbusy %s, %llu kernel%s", indent, "", d, (unsigned long long)k->count,
                    k->count == 1 ? "" : "s");
    for (i = 0; i < k->ntop; i++) {
        char pct[16];
        char name[PROF_NAME_ROOM];

        prof_fmt_fixed(pct, sizeof pct,
                       k->total_ns ? 100.0 * (double)k->top[i].ns / (double)k->total_ns : 0.0, 0);
        prof_fmt_name(name, sizeof name, k->top[i].name, PROF_NAME_COLS);
        prof_buf_printf(b, "%s %s %s%%", i ? "," : ":", name, pct);
    }
    prof_buf_puts(b, "\n");
}

/* Under the table, where the short counts are: what was lost and what
 * would have kept it. */
static void loss_footer(struct prof_buf *b, const struct prof_loss *l)
{
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

/* The forked workers that recorded, folded into one line: their tables
 * and traces are where the same settings send them in the workers
 * (summary_out.c, trace.c), which this says. */
static void workers_line(struct prof_buf *b, const struct prof_summary_model *m, uint64_t n)
{
    prof_buf_printf(b, "%llu forked worker process%s recorded zones: ", (unsigned long long)n,
                    n == 1 ? "" : "es");
    if (m->workers_summaries == PROF_WORKERS_SUMMARY_FILES)
        prof_buf_puts(b, "summaries in PROF_SUMMARY's %p files");
    else if (m->workers_summaries == PROF_WORKERS_SUMMARY_NONE)
        prof_buf_puts(b, "no summaries of their own (PROF_SUMMARY=PATH with %p writes them)");
    else
        prof_buf_puts(b, "summaries of their own, above");
    if (m->workers_traces == PROF_WORKERS_TRACE_FILES)
        prof_buf_puts(b, "; traces in PROF_TRACE's %p files");
    else if (m->workers_traces == PROF_WORKERS_TRACE_NONE)
        prof_buf_puts(b, "; no traces (PROF_TRACE has no %p)");
    prof_buf_puts(b, "\n");
}

/* Under the whole run's table: forked workers that ended before they
 * could finish (children.c), each already said once on the logger. */
static void children_footer(struct prof_buf *b, const struct prof_summary_model *m)
{
    const struct prof_children_ended *e = m->children;

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
        workers_line(b, m, e->recorded);
    if (e->unwatched)
        prof_buf_printf(b, "%llu forked worker%s in this process tree found no free slot among "
                        "%d and %s not watched\n", (unsigned long long)e->unwatched,
                        plural(e->unwatched), (int)e->slots,
                        e->unwatched == 1 ? "was" : "were");
}

/* "outer: 1.20 s, on CPU 12%: waiting (not computing) most of its time" */
static void waiting_line(struct prof_buf *b, const struct prof_summary_waiting *w)
{
    char self[24], pct[24], name[256];

    if (w->name == NULL)
        return;
    prof_fmt_name(name, sizeof name, w->name, PROF_NAME_COLS);
    prof_fmt_dur(self, sizeof self, (double)w->self_ns);
    prof_fmt_fixed(pct, sizeof pct, w->cpu_pct, 0);
    prof_buf_printf(b, "%s: %s, on CPU %s%%: waiting (not computing) most of its time\n", name,
                    self, pct);
}

/* "outer raised the peak by 873 KiB (to 1.20 GiB)" */
static void peak_line(struct prof_buf *b, const struct prof_summary_peak *p,
                      const struct prof_mem_figures *f)
{
    char rise[48], to[48], name[256];

    if (p->name == NULL)
        return;
    prof_fmt_name(name, sizeof name, p->name, PROF_NAME_COLS);
    prof_fmt_bytes(rise, sizeof rise, p->rise_bytes);
    if (f->known) {
        prof_fmt_bytes(to, sizeof to, f->peak);
        prof_buf_printf(b, "%s raised the peak by %s (to %s)\n", name, rise, to);
    } else {
        prof_buf_printf(b, "%s raised the peak by %s\n", name, rise);
    }
}

/* A row's cells after its name, count to wall% (and cpu%, peak+). */
static void row_cells(struct prof_buf *b, const struct prof_summary_row *row, int cpu)
{
    const struct prof_stage_stats *st = &row->st;
    char d[8][24], cnt[24], pct[32];

    prof_fmt_dur(d[0], 24, (double)st->total_ns);
    prof_fmt_dur(d[1], 24, (double)st->self_ns);
    prof_fmt_dur(d[2], 24, st->avg_ns);
    prof_fmt_dur(d[3], 24, st->p50_ns);
    prof_fmt_dur(d[4], 24, st->p95_ns);
    prof_fmt_dur(d[5], 24, st->p99_ns);
    prof_fmt_dur(d[6], 24, (double)st->max_ns);
    if (row->nohist)
        for (int c = 3; c < 7; c++)
            strcpy(d[c], "-");
    /* A stage of a thread that lost records: its count is short. */
    snprintf(cnt, sizeof cnt, "%llu%s", (unsigned long long)st->count,
             (st->flags & PROF_STAGE_LOSSY) ? "*" : "");
    prof_buf_printf(b, " %10s", cnt);
    for (int c = 0; c < 7; c++)
        prof_buf_printf(b, " %10s", d[c]);
    prof_fmt_fixed(pct, sizeof pct, 100.0 * st->wall_share, 1);
    prof_buf_printf(b, " %5s%%", pct);
    if (cpu) {
        if (row->cpu_pct < 0)
            prof_buf_puts(b, "      -");
        else {
            prof_fmt_fixed(pct, sizeof pct, row->cpu_pct, 0);
            prof_buf_printf(b, " %5s%%", pct);
        }
        /* The stage's rise of the peak (sampled with cpu%). */
        if (st->flags & PROF_STAGE_GPU)
            prof_buf_puts(b, "          -");
        else if (st->peak_rise_bytes == 0)
            prof_buf_puts(b, "          0");
        else {
            char rise[48];

            prof_fmt_bytes(rise, sizeof rise, st->peak_rise_bytes);
            prof_buf_printf(b, " %10s", rise);
        }
    }
    prof_buf_puts(b, "\n");
}

static void counters_text(struct prof_buf *b, const struct prof_summary_section *s, size_t width)
{
    char name[256];

    prof_buf_printf(b, "%-*s %10s %10s %10s %10s %10s\n", (int)width, "counter", "count",
                    "last", "min", "max", "avg");
    for (size_t i = 0; i < s->ncounters; i++) {
        const struct prof_summary_counter *a = &s->counters[i];
        size_t w = prof_fmt_name(name, sizeof name, a->name, PROF_NAME_COLS);
        char g[4][32];

        prof_fmt_sig(g[0], sizeof g[0], a->last, 4);
        prof_fmt_sig(g[1], sizeof g[1], a->min, 4);
        prof_fmt_sig(g[2], sizeof g[2], a->max, 4);
        prof_fmt_sig(g[3], sizeof g[3], a->avg, 4);
        prof_buf_printf(b, "%s%*s %10llu %10s %10s %10s %10s", name, (int)(width - w), "",
                        (unsigned long long)a->count, g[0], g[1], g[2], g[3]);
        if (a->nonfinite)
            prof_buf_printf(b, "  (+%llu NaN/inf left out)", (unsigned long long)a->nonfinite);
        prof_buf_puts(b, "\n");
    }
}

static void table_text(struct prof_buf *b, const struct prof_summary_model *m,
                       const struct prof_summary_section *s)
{
    static const char *cols[] = {"count", "total", "self", "avg", "p50", "p95", "p99", "max"};
    int cpu = m->sampled;
    size_t width = 24;
    char name[256];

    for (size_t i = 0; i < s->nrows; i++) {
        size_t w = 2 * s->rows[i].depth + prof_fmt_name(name, sizeof name, s->rows[i].st.name,
                                                         PROF_NAME_COLS);
        if (w > width)
            width = w;
    }
    prof_buf_printf(b, "%-*s", (int)width, "stage");
    for (size_t c = 0; c < 8; c++)
        prof_buf_printf(b, " %10s", cols[c]);
    prof_buf_puts(b, cpu ? "  wall%   cpu%      peak+\n" : "  wall%\n");
    for (size_t i = 0; i < s->nrows; i++) {
        const struct prof_summary_row *row = &s->rows[i];
        int indent = (int)(2 * row->depth);
        size_t cols_used = prof_fmt_name(name, sizeof name, row->st.name, PROF_NAME_COLS);

        prof_buf_printf(b, "%*s%s%*s", indent, "", name, (int)(width - (size_t)indent - cols_used),
                        "");
        if (row->st.count == 0) {
            prof_buf_printf(b, " %10s  (open, none ended)\n", "0");
            continue;
        }
        row_cells(b, row, cpu);
        if ((row->st.flags & PROF_STAGE_GPU) && row->kernels)
            kernels_text(b, &row->k, indent + 4);
    }
    if (s->folded) {
        char t[24];
        prof_fmt_dur(t, sizeof t, (double)s->folded_total);
        prof_buf_printf(b, "... %zu more stages (total %s) not shown\n", s->folded, t);
    }
    if (s->paths_nohist)
        prof_buf_printf(b, "* %llu path%s past the %u that keep a distribution of their own: "
                        "where such paths share their stage's, p50 to max show \"-\"\n",
                        (unsigned long long)s->paths_nohist, plural(s->paths_nohist),
                        (unsigned)PROF_STATS_PATH_HISTS);
    if (cpu) {
        waiting_line(b, &s->waiting);
        peak_line(b, &s->peak, &s->mem);
    }
    loss_footer(b, &s->loss);
    if (!s->window)
        children_footer(b, m);
    if (s->ncounters)
        counters_text(b, s, width);
    if (s->nmarks) {
        prof_buf_puts(b, "marks:");
        for (size_t i = 0; i < s->nmarks; i++) {
            prof_fmt_name(name, sizeof name, s->marks[i].name, PROF_NAME_COLS);
            prof_buf_printf(b, " %s x%llu", name, (unsigned long long)s->marks[i].count);
        }
        prof_buf_puts(b, "\n");
    }
}

void prof_summary_text(struct prof_buf *b, const struct prof_summary_model *m)
{
    const struct prof_summary_section *s = m->shown;

    header_text(b, m, s);
    gpu_text(b, &s->gpu, s->window);
    if (!s->ok) {
        prof_buf_puts(b, "(out of memory building the table)\n");
        return;
    }
    table_text(b, m, s);
}
