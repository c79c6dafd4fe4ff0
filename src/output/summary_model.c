/* summary_model.c - gather one summary's figures (summary_model.h): the
 * header's, and per section the rows with every per-stage figure, the
 * counters and marks, the losses, the memory, the GPU devices' figures and
 * each GPU stage's kernels. Each figure is computed here once; the text
 * and JSON writers only write them. Runtime lock held. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "env.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "sampler.h"
#include "stats.h"
#include "summary_model.h"

/* The model, with its GPU figures 11 KiB a section: kept off the caller's
 * stack (an application thread may ask for a summary); one at a time, as
 * every summary is gathered under the runtime lock. */
static struct prof_summary_model model;
static struct prof_summary_section sections[2];

/* A step window normally holds PROF_SUMMARY_EVERY=N steps. When steps
 * come faster than their summaries can be written, or the step records
 * that end windows were dropped (a full ring), the collector gathers one
 * summary for the steps since the last one, labelled with the last due
 * step: it says so, with how many windows it holds. By time, windows
 * counts the periods a window covers. */
static uint64_t merged_windows(uint64_t steps, uint64_t windows)
{
    uint64_t every = prof_config_get()->every_steps;

    if (!every && windows > 1)
        return windows;
    return every && steps > every ? (steps + every - 1) / every : 1;
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

/* The stage that waited longest, where its share says so (the GPU check
 * names what the GPU waited for the same way). Every path of a stage
 * together: its stage's figures. */
static void waiting_get(struct prof_summary_section *s, const struct prof_rows *r)
{
    struct prof_stage_stats st, best;
    uint64_t best_wait = 0;

    for (size_t i = 0; i < r->len; i++) {
        double share;
        uint64_t wait;

        prof_stats_fill(r->rows[i].stage, s->window, s->wall_ns, &st);
        share = cpu_pct(&st);
        if (share < 0 || st.self_ns < WAIT_MIN_SELF_NS || !surely_under_half(&st))
            continue;
        wait = st.self_ns - st.cpu_ns;
        if (wait > best_wait && wait >= s->wall_ns / 20) {
            best = st;
            best_wait = wait;
        }
    }
    if (best_wait == 0)
        return;
    s->waiting.name = best.name;
    s->waiting.self_ns = best.self_ns;
    s->waiting.cpu_pct = cpu_pct(&best);
}

/* The stage whose samples claimed the most of the view's rises of the
 * process's peak resident memory, when it rose. */
static void peak_get(struct prof_summary_section *s, const struct prof_rows *r)
{
    struct prof_stage_stats st;

    for (size_t i = 0; i < r->len; i++) {
        prof_stats_fill(r->rows[i].stage, s->window, s->wall_ns, &st);
        if (st.peak_rise_bytes > s->peak.rise_bytes) {
            s->peak.rise_bytes = st.peak_rise_bytes;
            s->peak.name = st.name;
        }
    }
}

/* Row i of r with its numbers, its distribution and its kernels. 0, or
 * -1 out of memory (a distribution merged for the row has no room). */
static int row_get(struct prof_summary_row *row, const struct prof_row *r, int window,
                   uint64_t wall_ns)
{
    const struct prof_hist *hist;
    struct prof_acc tmp;

    prof_stats_row_fill(r, window, wall_ns, &row->st, &hist, &tmp);
    row->depth = r->depth;
    row->parent_row = r->parent_row;
    row->nohist = (row->st.flags & PROF_STAGE_NOHIST_) != 0;
    row->hist = hist;
    row->merged = NULL;
    if (hist == &tmp.hist) {
        /* Merged from the row's paths for it: kept with the model. An
         * empty one holds nothing to keep (and no bucket to write). */
        if (tmp.count == 0) {
            row->hist = NULL;
        } else if ((row->merged = malloc(sizeof *row->merged)) == NULL) {
            prof_stats_row_done(&tmp);
            return -1;
        } else {
            *row->merged = tmp;
            row->hist = &row->merged->hist;
        }
    }
    row->cpu_pct = cpu_pct(&row->st);
    row->kernels = prof_kstats_figures(r->stage, window, &row->k);
    return 0;
}

static void rows_free(struct prof_summary_section *s)
{
    for (size_t i = 0; i < s->nrows; i++)
        if (s->rows[i].merged != NULL) {
            prof_stats_row_done(s->rows[i].merged);
            free(s->rows[i].merged);
        }
    free(s->rows);
    free(s->counters);
    free(s->marks);
    s->rows = NULL;
    s->counters = NULL;
    s->marks = NULL;
    s->nrows = s->ncounters = s->nmarks = 0;
}

static void *array(size_t n, size_t size)
{
    return n ? calloc(n, size) : NULL;
}

/* The section's rows (at most max_rows, the rest folded), counters and
 * marks, and for the text the waiting and peak stages. 0, or -1 out of
 * memory (the section then holds none). */
static int rows_get(struct prof_summary_section *s, size_t max_rows, int lines)
{
    struct prof_rows r;
    size_t i;

    if (prof_stats_rows(&r, s->window, max_rows) != 0)
        return -1;
    s->rows = array(r.len, sizeof *s->rows);
    s->counters = array(r.ncounters, sizeof *s->counters);
    s->marks = array(r.nmarks, sizeof *s->marks);
    if ((r.len && s->rows == NULL) || (r.ncounters && s->counters == NULL) ||
        (r.nmarks && s->marks == NULL))
        goto fail;
    for (i = 0; i < r.len; i++, s->nrows++)
        if (row_get(&s->rows[i], &r.rows[i], s->window, s->wall_ns) != 0)
            goto fail;
    s->folded = r.folded;
    s->folded_total = r.folded_total;
    s->npaths = r.npaths;
    s->paths_nohist = r.paths_nohist;
    for (i = 0; i < r.ncounters; i++) {
        const struct prof_counter_acc *a = s->window ? &r.counters[i]->win : &r.counters[i]->run;
        struct prof_summary_counter *c = &s->counters[i];

        c->name = r.counters[i]->name;
        c->count = a->count;
        c->nonfinite = a->nonfinite;
        c->last = a->last;
        c->min = a->min;
        c->max = a->max;
        c->avg = a->count ? a->sum / (double)a->count : 0.0;
    }
    s->ncounters = r.ncounters;
    for (i = 0; i < r.nmarks; i++) {
        s->marks[i].name = r.marks[i]->name;
        s->marks[i].count = s->window ? r.marks[i]->win : r.marks[i]->run;
    }
    s->nmarks = r.nmarks;
    if (lines) {
        waiting_get(s, &r);
        peak_get(s, &r);
    }
    prof_rows_free(&r);
    return 0;
fail:
    prof_rows_free(&r);
    rows_free(s);
    return -1;
}

static void section_start(struct prof_summary_section *s, int window, uint64_t wall_ns,
                          uint64_t steps)
{
    rows_free(s);
    memset(s, 0, sizeof *s);
    s->window = window;
    s->wall_ns = wall_ns;
    s->steps = steps;
}

/* The text's one section: the view's memory and GPU devices first, as
 * the header and the lines under it show them, then its table. */
static const struct prof_summary_section *text_section(int window, uint64_t wall_ns,
                                                       uint64_t steps)
{
    struct prof_summary_section *s = &sections[0];

    section_start(s, window, wall_ns, steps);
    prof_mem_figures(window, &s->mem);
    prof_gpu_figures_get(&s->gpu, window, wall_ns);
    if (!window)
        prof_gpu_bins_final(wall_ns);
    s->ok = rows_get(s, PROF_SUMMARY_MAX_ROWS, model.sampled) == 0;
    s->loss = *prof_loss_get(window);
    return s;
}

/* A JSON section; run_mem: the run's memory, read for the header. */
static const struct prof_summary_section *json_section(int i, int window, uint64_t wall_ns,
                                                       uint64_t steps,
                                                       const struct prof_mem_figures *run_mem)
{
    struct prof_summary_section *s = &sections[i];

    section_start(s, window, wall_ns, steps);
    if (rows_get(s, PROF_SUMMARY_JSON_MAX_ROWS, 0) != 0)
        return NULL;
    s->ok = 1;
    s->loss = *prof_loss_get(window);
    prof_gpu_figures_get(&s->gpu, window, wall_ns);
    if (window)
        prof_mem_figures(1, &s->mem);
    else
        s->mem = *run_mem;
    return s;
}

static void workers_get(struct prof_summary_model *m)
{
    const struct prof_config *cfg = prof_config_get();
    int to = cfg->summary_to;

    if (to == PROF_TO_FILE && prof_path_has_pid(cfg->summary_path))
        m->workers_summaries = PROF_WORKERS_SUMMARY_FILES;
    else if (to == PROF_TO_OFF || to == PROF_TO_FILE || !cfg->summary_set)
        m->workers_summaries = PROF_WORKERS_SUMMARY_NONE;
    else
        m->workers_summaries = PROF_WORKERS_SUMMARY_ABOVE;
    if (cfg->trace_path != NULL && prof_path_has_pid(cfg->trace_path))
        m->workers_traces = PROF_WORKERS_TRACE_FILES;
    else if (cfg->trace_path != NULL)
        m->workers_traces = PROF_WORKERS_TRACE_NONE;
    else
        m->workers_traces = PROF_WORKERS_TRACE_UNSET;
}

const struct prof_summary_model *
prof_summary_model_get(int format, enum prof_summary_kind kind, uint64_t step, uint64_t now,
                       uint64_t windows, const struct prof_children_ended *children)
{
    struct prof_summary_model *m = &model;
    uint64_t run_ns = now > prof_rt.start_ns ? now - prof_rt.start_ns : 0;
    uint64_t win_ns = now > prof_rt.window_start_ns ? now - prof_rt.window_start_ns : 0;
    uint64_t win_steps = step - prof_rt.window_start_step;
    int periodic = kind == PROF_KIND_PERIODIC;

    m->format = format;
    m->kind = kind;
    m->proc = prof_process_get();
    m->forked_from = prof_rt.forked_from;
    m->step = step;
    m->run_wall_ns = run_ns;
    m->threads = prof_threads_seen;
    m->dropped = prof_rt.dropped;
    m->dropped_window = prof_rt.dropped_window;
    m->merged = periodic ? merged_windows(win_steps, windows) : 1;
    m->by_steps = prof_config_get()->every_steps != 0;
    m->sampled = prof_sampler_installed();
    m->children = children;
    workers_get(m);
    m->shown = m->window = m->total = NULL;
    if (format == PROF_FORMAT_JSON) {
        struct timespec rt;

        clock_gettime(CLOCK_REALTIME, &rt);
        m->unix_time = (double)rt.tv_sec + rt.tv_nsec / 1e9;
        m->clock[0] = '\0';
        prof_mem_figures(0, &m->mem_run);    /* the run's: a periodic line has no total */
        if (periodic)
            m->window = json_section(0, 1, win_ns, win_steps, &m->mem_run);
        /* A periodic line holds its window only: the whole run's section
         * (every stage's histogram since the start) made a 1-step summary
         * of 32 stages 128 KB. PROF_SUMMARY_JSON=full keeps it. */
        if (!periodic || prof_config_get()->summary_json_full)
            m->total = json_section(1, 0, run_ns, step, &m->mem_run);
        return m;
    }
    m->unix_time = 0;
    prof_clock_source(m->clock, sizeof m->clock);
    memset(&m->mem_run, 0, sizeof m->mem_run);
    m->shown = periodic ? text_section(1, win_ns, win_steps) : text_section(0, run_ns, step);
    return m;
}

void prof_summary_model_free(const struct prof_summary_model *m)
{
    (void)m;
    rows_free(&sections[0]);
    rows_free(&sections[1]);
}
