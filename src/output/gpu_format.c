/* gpu_format.c - the GPU figures as the summary's text and JSON
 * (gpu_format.h).
 *
 * Nothing here computes: gpu_busy.c hands a model (prof_gpu_figures) and
 * each function writes all of it in one format. */
#include <stdint.h>

#include "gpu_busy.h"
#include "gpu_format.h"
#include "json.h"

/* The summary's model, 11 KiB: kept off the caller's stack (an
 * application thread may print a summary); under the runtime lock, as
 * every summary is formatted. */
static struct prof_gpu_figures figures;

static int pct(double v)
{
    return (int)(v * 100.0 + 0.5);
}

static void lost_text(struct prof_buf *b, const struct prof_gpu_figures *g)
{
    int i, n = 0;

    for (i = 0; i < g->nlost; i++)
        prof_buf_printf(b, "%s %s %llu (%s)", n++ ? "," : "GPU sides lost:", g->lost[i].stage,
                        (unsigned long long)g->lost[i].count, g->lost[i].cause);
    if (g->lost_other)
        prof_buf_printf(b, "%s other stages %llu", n++ ? "," : "GPU sides lost:",
                        (unsigned long long)g->lost_other);
    if (n)
        prof_buf_puts(b, "\n");
}

static void lost_json(struct prof_buf *b, const struct prof_gpu_figures *g)
{
    int i;

    prof_buf_puts(b, ",\"gpu_lost\":[");
    for (i = 0; i < g->nlost; i++) {
        prof_buf_puts(b, i ? ",{\"stage\":" : "{\"stage\":");
        prof_buf_json_string(b, g->lost[i].stage);
        prof_buf_printf(b, ",\"count\":%llu,\"cause\":", (unsigned long long)g->lost[i].count);
        prof_buf_json_string(b, g->lost[i].cause);
        prof_buf_puts(b, "}");
    }
    prof_buf_printf(b, "],\"gpu_lost_other\":%llu", (unsigned long long)g->lost_other);
}

void prof_gpu_summary_text(struct prof_buf *b, int window, uint64_t wall_ns)
{
    struct prof_gpu_figures *g = &figures;
    int k, j;

    prof_gpu_figures_get(g, window, wall_ns);
    if (!window)
        prof_gpu_bins_final(wall_ns);
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
    lost_text(b, g);
}

void prof_gpu_summary_json(struct prof_buf *b, int window, uint64_t wall_ns)
{
    struct prof_gpu_figures *g = &figures;
    int k, j;

    prof_gpu_figures_get(g, window, wall_ns);
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
    prof_buf_puts(b, "]");
    lost_json(b, g);
}
