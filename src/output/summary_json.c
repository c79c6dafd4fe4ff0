/* summary_json.c - a summary's model (summary_model.h) written as one
 * JSON line (docs/FORMATS.md): the header's members, then the window's
 * section (a periodic summary) and the whole run's, each with its stages
 * (their kernels), counters, marks, losses, GPU devices and memory.
 * Nothing here computes a figure; names go through json.c's escaper. */
#include "prof.h"
#include "hist.h"
#include "json.h"
#include "process.h"
#include "summary_json.h"

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

/* ,"kernels":{...}: what a GPU stage ran (PROF_CUDA=kernels). */
static void kernels_json(struct prof_buf *b, const struct prof_kstats_figures *k)
{
    unsigned i;

    prof_buf_printf(b, ",\"kernels\":{\"busy_ns\":%llu,\"count\":%llu,\"total_ns\":%llu,\"top\":[",
                    (unsigned long long)k->busy_ns, (unsigned long long)k->count,
                    (unsigned long long)k->total_ns);
    for (i = 0; i < k->ntop; i++) {
        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(b, k->top[i].name);
        prof_buf_printf(b, ",\"ns\":%llu,\"share\":", (unsigned long long)k->top[i].ns);
        prof_buf_double(b, k->total_ns ? (double)k->top[i].ns / (double)k->total_ns : 0.0);
        prof_buf_puts(b, "}");
    }
    prof_buf_puts(b, "]}");
}

static void row_json(struct prof_buf *b, const struct prof_summary_row *row, int sampled)
{
    const struct prof_stage_stats *st = &row->st;
    struct hist_ctx hc = {b, 1};

    prof_buf_json_string(b, st->name);
    prof_buf_puts(b, ",\"parent\":");
    if (st->parent)
        prof_buf_json_string(b, st->parent);
    else
        prof_buf_puts(b, "null");
    prof_buf_printf(b, ",\"depth\":%u", row->depth);
    /* parent_row: the index of the row it is under in this array (a row
     * is a path: one name can be a row under several parents). */
    if (row->parent_row != UINT32_MAX)
        prof_buf_printf(b, ",\"parent_row\":%u", row->parent_row);
    else
        prof_buf_puts(b, ",\"parent_row\":null");
    prof_buf_printf(b, ",\"gpu\":%s,\"lossy\":%s,\"count\":%llu,"
                    "\"total_ns\":%llu,\"self_ns\":%llu,",
                    (st->flags & PROF_STAGE_GPU) ? "true" : "false",
                    (st->flags & PROF_STAGE_LOSSY) ? "true" : "false",
                    (unsigned long long)st->count, (unsigned long long)st->total_ns,
                    (unsigned long long)st->self_ns);
    if (row->nohist)
        prof_buf_puts(b, "\"min_ns\":null,\"max_ns\":null,\"avg_ns\":");
    else
        prof_buf_printf(b, "\"min_ns\":%llu,\"max_ns\":%llu,\"avg_ns\":",
                        (unsigned long long)st->min_ns, (unsigned long long)st->max_ns);
    prof_buf_double(b, st->avg_ns);
    if (row->nohist) {
        prof_buf_puts(b, ",\"p50_ns\":null,\"p95_ns\":null,\"p99_ns\":null");
    } else {
        prof_buf_puts(b, ",\"p50_ns\":");
        prof_buf_double(b, st->p50_ns);
        prof_buf_puts(b, ",\"p95_ns\":");
        prof_buf_double(b, st->p95_ns);
        prof_buf_puts(b, ",\"p99_ns\":");
        prof_buf_double(b, st->p99_ns);
    }
    prof_buf_puts(b, ",\"wall_share\":");
    prof_buf_double(b, st->wall_share);
    /* Sampled CPU time of the self time; null where not measured. */
    if (st->flags & PROF_STAGE_CPU)
        prof_buf_printf(b, ",\"cpu_ns\":%llu", (unsigned long long)st->cpu_ns);
    else
        prof_buf_puts(b, ",\"cpu_ns\":null");
    /* The stage's rise of the process's peak resident memory, bytes;
     * null where nothing was sampled (PROF_CPU=0). */
    if (sampled && !(st->flags & PROF_STAGE_GPU))
        prof_buf_printf(b, ",\"peak_rise_bytes\":%llu", (unsigned long long)st->peak_rise_bytes);
    else
        prof_buf_puts(b, ",\"peak_rise_bytes\":null");
    prof_buf_puts(b, ",\"hist\":[");
    if (row->hist != NULL)
        prof_hist_foreach(row->hist, hist_bucket, &hc);
    prof_buf_puts(b, "]");
    if (row->kernels)
        kernels_json(b, &row->k);
}

/* ,"gpus":[...],"gpu_lost":[...],"gpu_lost_other":N */
static void gpus_json(struct prof_buf *b, const struct prof_gpu_figures *g)
{
    int k, j;

    prof_buf_puts(b, ",\"gpus\":[");
    for (k = 0; k < g->ndevices; k++) {
        const struct prof_gpu_device_figures *v = &g->dev[k];

        prof_buf_printf(b, "%s{\"device\":%d,\"busy\":", k ? "," : "", v->device);
        prof_buf_double(b, v->busy);
        prof_buf_printf(b, ",\"busy_ns\":%llu,\"wall_ns\":%llu,\"merged_gap_ns\":%llu,"
                           "\"streams\":[", (unsigned long long)v->busy_ns,
                        (unsigned long long)v->wall_ns, (unsigned long long)v->gap_ns);
        for (j = 0; j < v->nstreams; j++) {
            const struct prof_gpu_stream_figures *s = &g->str[v->first_stream + j];

            prof_buf_printf(b, "%s{\"stream\":%d,\"busy\":", j ? "," : "", s->stream_no);
            prof_buf_double(b, s->busy);
            prof_buf_puts(b, "}");
        }
        prof_buf_puts(b, "],\"nvml\":");
        if (v->have_nv) {
            prof_buf_puts(b, "{\"utilization\":");
            prof_buf_double(b, v->nv.util);
            prof_buf_printf(b, ",\"memory_used_bytes\":%llu,\"memory_peak_bytes\":%llu,"
                            "\"power_w\":", (unsigned long long)v->nv.mem_used,
                            (unsigned long long)v->nv.mem_peak);
            prof_buf_double(b, v->nv.power_w);
            prof_buf_printf(b, ",\"sm_clock_mhz\":%u,\"samples\":%llu}", v->nv.sm_mhz,
                            (unsigned long long)v->nv.samples);
        } else {
            prof_buf_puts(b, "null");
        }
        /* Device memory, NVML's or else the driver's: the last sample and
         * the largest. */
        if (v->have_nv || v->have_drv)
            prof_buf_printf(b, ",\"memory\":{\"used_bytes\":%llu,\"peak_bytes\":%llu,"
                            "\"source\":\"%s\"}",
                            (unsigned long long)(v->have_nv ? v->nv.mem_used : v->drv_used),
                            (unsigned long long)(v->have_nv ? v->nv.mem_peak : v->drv_peak),
                            v->have_nv ? "nvml" : "driver");
        else
            prof_buf_puts(b, ",\"memory\":null");
        prof_buf_puts(b, ",\"check\":");
        if (v->check) {
            prof_buf_puts(b, "{\"band\":");
            prof_buf_json_string(b, v->band);
            prof_buf_puts(b, ",\"cause\":");
            prof_buf_json_string(b, v->cause);
            prof_buf_printf(b, ",\"utilization_source\":\"%s\",\"utilization\":",
                            v->have_nv ? "nvml" : "zones");
            prof_buf_double(b, v->util);
            prof_buf_puts(b, ",\"idle\":");
            prof_buf_double(b, 1.0 - v->busy);
            prof_buf_puts(b, ",\"stage\":");
            if (v->top_stage != NULL) {
                prof_buf_json_string(b, v->top_stage);
                prof_buf_puts(b, ",\"stage_share\":");
                prof_buf_double(b, v->top_share);
            } else {
                prof_buf_puts(b, "null,\"stage_share\":null");
            }
            prof_buf_puts(b, "}");
        } else {
            prof_buf_puts(b, "null");
        }
        prof_buf_puts(b, "}");
    }
    prof_buf_puts(b, "],\"gpu_lost\":[");
    for (k = 0; k < g->nlost; k++) {
        prof_buf_puts(b, k ? ",{\"stage\":" : "{\"stage\":");
        prof_buf_json_string(b, g->lost[k].stage);
        prof_buf_printf(b, ",\"count\":%llu,\"cause\":", (unsigned long long)g->lost[k].count);
        prof_buf_json_string(b, g->lost[k].cause);
        prof_buf_puts(b, "}");
    }
    prof_buf_printf(b, "],\"gpu_lost_other\":%llu", (unsigned long long)g->lost_other);
}

/* ,"memory":{...} (null where unknown) */
static void memory_json(struct prof_buf *b, const struct prof_mem_figures *f)
{
    if (!f->known) {
        prof_buf_puts(b, ",\"memory\":null");
        return;
    }
    prof_buf_printf(b, ",\"memory\":{\"rss_bytes\":%llu,\"rss_peak_bytes\":%llu}",
                    (unsigned long long)f->rss, (unsigned long long)f->peak);
}

static void section_json(struct prof_buf *b, const struct prof_summary_section *s, int sampled)
{
    const struct prof_loss *l = &s->loss;

    prof_buf_printf(b, "{\"steps\":%llu,\"wall_ns\":%llu,\"stages\":[",
                    (unsigned long long)s->steps, (unsigned long long)s->wall_ns);
    for (size_t i = 0; i < s->nrows; i++) {
        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        row_json(b, &s->rows[i], sampled);
        prof_buf_puts(b, "}");
    }
    prof_buf_printf(b, "],\"folded_stages\":%zu,\"folded_total_ns\":%llu,"
                    "\"paths\":%zu,\"paths_without_hist\":%llu", s->folded,
                    (unsigned long long)s->folded_total, s->npaths,
                    (unsigned long long)s->paths_nohist);
    prof_buf_puts(b, ",\"counters\":[");
    for (size_t i = 0; i < s->ncounters; i++) {
        const struct prof_summary_counter *a = &s->counters[i];

        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(b, a->name);
        prof_buf_printf(b, ",\"count\":%llu,\"nonfinite\":%llu,\"last\":",
                        (unsigned long long)a->count, (unsigned long long)a->nonfinite);
        prof_buf_double(b, a->last);
        prof_buf_puts(b, ",\"min\":");
        prof_buf_double(b, a->min);
        prof_buf_puts(b, ",\"max\":");
        prof_buf_double(b, a->max);
        prof_buf_puts(b, ",\"avg\":");
        prof_buf_double(b, a->avg);
        prof_buf_puts(b, "}");
    }
    prof_buf_puts(b, "],\"marks\":[");
    for (size_t i = 0; i < s->nmarks; i++) {
        prof_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(b, s->marks[i].name);
        prof_buf_printf(b, ",\"count\":%llu}", (unsigned long long)s->marks[i].count);
    }
    prof_buf_printf(b, "],\"loss\":{\"records\":%llu,\"threads\":%u,\"behind_ns\":%llu,"
                    "\"buffer_hint\":%llu,\"lanes_shared\":%llu}",
                    (unsigned long long)l->records, l->threads,
                    (unsigned long long)l->behind_ns, (unsigned long long)l->buffer_hint,
                    (unsigned long long)l->lanes_shared);
    gpus_json(b, &s->gpu);
    memory_json(b, &s->mem);
    prof_buf_puts(b, "}");
}

void prof_summary_json(struct prof_buf *b, const struct prof_summary_model *m)
{
    const struct prof_process *p = m->proc;
    const struct prof_children_ended *e = m->children;
    static const char *kinds[] = {"", "periodic", "final", "demand"};

    prof_buf_puts(b, "{\"prof\":\"summary\",\"format\":1,\"version\":\"" PROF_VERSION_STRING
                     "\",\"kind\":\"");
    prof_buf_puts(b, kinds[m->kind]);
    prof_buf_puts(b, "\",\"program\":");
    prof_buf_json_string(b, p->program);
    prof_buf_printf(b, ",\"pid\":%d,\"host\":", p->pid);
    prof_buf_json_string(b, p->host);
    if (p->rank >= 0)
        prof_buf_printf(b, ",\"rank\":%d", p->rank);
    else
        prof_buf_puts(b, ",\"rank\":null");
    prof_buf_puts(b, ",\"unix_time\":");
    prof_buf_fixed(b, m->unix_time, 3);
    prof_buf_printf(b, ",\"step\":%llu,\"wall_ns\":%llu,\"threads\":%llu,\"dropped\":%llu",
                    (unsigned long long)m->step, (unsigned long long)m->run_wall_ns,
                    (unsigned long long)m->threads, (unsigned long long)m->dropped);
    memory_json(b, &m->mem_run);
    prof_buf_puts(b, ",\"workers_unfinished\":[");
    for (uint32_t i = 0; i < e->npids; i++)
        prof_buf_printf(b, "%s%d", i ? "," : "", (int)e->pids[i]);
    prof_buf_printf(b, "],\"workers_unfinished_count\":%llu,\"workers_unwatched\":%llu,"
                    "\"workers_recorded\":%llu",
                    (unsigned long long)e->count, (unsigned long long)e->unwatched,
                    (unsigned long long)e->recorded);
    if (m->window != NULL) {
        prof_buf_printf(b, ",\"merged_windows\":%llu", (unsigned long long)m->merged);
        prof_buf_puts(b, ",\"window\":");
        section_json(b, m->window, m->sampled);
    }
    if (m->total != NULL) {
        prof_buf_puts(b, ",\"total\":");
        section_json(b, m->total, m->sampled);
    }
    prof_buf_puts(b, "}\n");
}
