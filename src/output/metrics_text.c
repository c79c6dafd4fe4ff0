/* metrics_text.c - the live snapshot as Prometheus text (exposition
 * format 0.0.4): the stages' counters and window quantiles, the process's
 * and its kernels' figures, GPU busy and NVML gauges (metrics_text.h).
 * The one writer of Prometheus text: the figures come as numbers (the
 * snapshot, gpu_busy.h's and kstats.h's published figures), their names,
 * units and label escaping are here. What serves or writes the text is
 * metrics.c's. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "gpu_busy.h"
#include "kstats.h"
#include "json.h"
#include "live.h"
#include "metrics_text.h"

static void put_seconds(struct prof_buf *b, double ns)
{
    prof_buf_double(b, ns == ns ? ns / 1e9 : 0);
}

struct path {
    size_t off, len;             /* in the paths buffer */
};

/* Each row's stage label, escaped: its names from the top joined by '/',
 * so that a stage shown under two parents in two processes stays distinct
 * and the label says where it runs. Escaping is byte by byte, so a row's
 * is its parent's escaped path, '/', and its own escaped name. */
#define PROF_METRICS_PATH_MAX 256

static int paths_make(const struct prof_live_snap *s, struct prof_buf *names, struct path *out)
{
    for (size_t i = 0; i < s->table.len; i++) {
        const struct prof_stats_snap_row *r = &s->table.rows[i];
        int nested = r->parent != UINT32_MAX && r->parent < i;

        out[i].off = names->len;
        if (nested && out[r->parent].len > PROF_METRICS_PATH_MAX) {
            /* A chain thousands deep would make labels of megabytes: past
             * that, the path is cut at the front. A stage is one row, so
             * its name alone keeps the label distinct. */
            prof_buf_put(names, ".../", 4);
        } else if (nested) {
            /* Copied out first: the buffer may move as it grows. */
            struct path p = out[r->parent];

            if (prof_buf_room(names, p.len) == NULL)
                return -ENOMEM;
            memmove(names->data + names->len, names->data + p.off, p.len);
            prof_buf_commit(names, p.len);
            prof_buf_put(names, "/", 1);
        }
        prof_buf_prom_label(names, r->name, strlen(r->name));
        out[i].len = names->len - out[i].off;
    }
    return names->failed ? -ENOMEM : 0;
}

/* One per-stage sample up to its value: the metric's name, the stage's
 * label set (path, then rank) and close, which ends the set ("} ", or a
 * quantile label and "} "). */
static void stage_sample(struct prof_buf *b, const char *metric, const struct prof_buf *names,
                         const struct path *p, const char *rank, const char *close)
{
    prof_buf_puts(b, metric);
    prof_buf_put(b, "{stage=\"", 8);
    prof_buf_put(b, names->data + p->off, p->len);
    prof_buf_puts(b, rank);
    prof_buf_puts(b, close);
}

/* A metric of the whole process: head is its HELP and TYPE lines and its
 * name; the only label is the rank. */
static void process_metric(struct prof_buf *b, const char *head, const char *r_only, uint64_t v)
{
    prof_buf_puts(b, head);
    prof_buf_puts(b, r_only);
    prof_buf_u64(b, v);
    prof_buf_put(b, "\n", 1);
}

/* One kernels sample of GPU stage k up to its value: labelled by the
 * stage's path where the snapshot has its row, as every per-stage metric
 * is; by its name alone where it has none (a stage folded out of the
 * rows). */
static void kernel_sample(struct prof_buf *b, const char *metric, const struct prof_live_snap *s,
                          const struct prof_buf *names, const struct path *paths,
                          const struct prof_kstats_pub *k, const char *rank)
{
    for (size_t i = 0; i < s->table.len; i++)
        if (s->table.rows[i].name == k->stage || strcmp(s->table.rows[i].name, k->stage) == 0) {
            stage_sample(b, metric, names, &paths[i], rank, "} ");
            return;
        }
    prof_buf_puts(b, metric);
    prof_buf_put(b, "{stage=\"", 8);
    prof_buf_prom_label(b, k->stage, strlen(k->stage));
    prof_buf_puts(b, rank);
    prof_buf_puts(b, "} ");
}

static void kernel_metrics(struct prof_buf *b, const struct prof_live_snap *s,
                           const struct prof_buf *names, const struct path *paths,
                           const char *rank)
{
    struct prof_kstats_pub k[PROF_KSTATS_PUB];
    int n = prof_kstats_published(k, PROF_KSTATS_PUB);

    if (n == 0)
        return;
    prof_buf_puts(b, "# HELP prof_gpu_stage_kernel_busy_seconds_total Time the GPU stage's "
                     "kernels kept the GPU busy (union; PROF_CUDA=kernels).\n"
                     "# TYPE prof_gpu_stage_kernel_busy_seconds_total counter\n");
    for (int i = 0; i < n; i++) {
        kernel_sample(b, "prof_gpu_stage_kernel_busy_seconds_total", s, names, paths, &k[i], rank);
        prof_buf_fixed(b, (double)k[i].busy_ns / 1e9, 9);
        prof_buf_put(b, "\n", 1);
    }
    prof_buf_puts(b, "# HELP prof_gpu_stage_kernels_total Kernels, memcpys and memsets "
                     "the GPU stage ran (PROF_CUDA=kernels).\n"
                     "# TYPE prof_gpu_stage_kernels_total counter\n");
    for (int i = 0; i < n; i++) {
        kernel_sample(b, "prof_gpu_stage_kernels_total", s, names, paths, &k[i], rank);
        prof_buf_u64(b, k[i].count);
        prof_buf_put(b, "\n", 1);
    }
}

/* The GPUs' gauges, from the last published samples (gpu_busy.h): each
 * device's busy ratio over the last second, NVML's last sample, and the
 * driver's device memory where NVML has none. Labelled by device and
 * rank, both numbers. */
static void gpu_metrics(struct prof_buf *b, int rank)
{
    static const struct {
        const char *name, *help;
    } nv[4] = {
        {"prof_gpu_utilization_ratio", "NVML's utilization (what nvidia-smi shows), last sample."},
        {"prof_gpu_memory_used_bytes", "NVML's device memory used, last sample."},
        {"prof_gpu_power_watts", "NVML's power draw, last sample."},
        {"prof_gpu_sm_clock_hertz", "NVML's SM clock, last sample."},
    };
    struct prof_gpu_pub_figures f;

    prof_gpu_pub_figures_get(&f);
    if (f.nbusy > 0)
        prof_buf_puts(b, "# HELP prof_gpu_busy_ratio Share of the last second during which "
                         "the device ran GPU zones' work (union of their spans).\n"
                         "# TYPE prof_gpu_busy_ratio gauge\n");
    for (int i = 0; i < f.nbusy; i++) {
        prof_buf_printf(b, "prof_gpu_busy_ratio{device=\"%d\",rank=\"%d\"} ", f.busy[i].device,
                        rank);
        prof_buf_fixed(b, f.busy[i].busy, 4);
        prof_buf_puts(b, "\n");
    }
    for (int k = 0; f.nnvml > 0 && k < 4; k++) {
        prof_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", nv[k].name, nv[k].help,
                        nv[k].name);
        for (int i = 0; i < f.nnvml; i++) {
            const struct prof_nvml_pub *d = &f.nvml[i];

            prof_buf_printf(b, "%s{device=\"%d\",rank=\"%d\"} ", nv[k].name, d->device, rank);
            if (k == 0)
                prof_buf_fixed(b, d->util, 2);
            else if (k == 1)
                prof_buf_printf(b, "%llu", (unsigned long long)d->mem_used);
            else if (k == 2)
                prof_buf_fixed(b, d->power_w, 3);
            else
                prof_buf_printf(b, "%llu", (unsigned long long)d->sm_mhz * 1000000ull);
            prof_buf_puts(b, "\n");
        }
    }
    if (f.nmem > 0) {
        prof_buf_puts(b, "# HELP prof_gpu_memory_used_bytes The driver's device memory used "
                         "(cuMemGetInfo), last sample.\n"
                         "# TYPE prof_gpu_memory_used_bytes gauge\n");
        for (int i = 0; i < f.nmem; i++)
            prof_buf_printf(b, "prof_gpu_memory_used_bytes{device=\"%d\",rank=\"%d\"} %llu\n",
                            f.mem[i].device, rank, (unsigned long long)f.mem[i].used);
    }
}

void prof_metrics_format(struct prof_buf *b, const struct prof_live_snap *s)
{
    static const char *const q[3] = { ",quantile=\"0.5\"} ", ",quantile=\"0.95\"} ",
                                      ",quantile=\"0.99\"} " };
    struct prof_buf names = {0};
    struct path *paths = calloc(s->table.len ? s->table.len : 1, sizeof *paths);
    char rank[32], r_only[32];

    /* What follows the stage's value in every label set. */
    snprintf(rank, sizeof rank, "\",rank=\"%d\"", s->rank >= 0 ? s->rank : 0);
    snprintf(r_only, sizeof r_only, "{rank=\"%d\"} ", s->rank >= 0 ? s->rank : 0);
    if (paths == NULL || paths_make(s, &names, paths) != 0) {
        free(paths);
        prof_buf_free(&names);
        b->failed = 1;
        return;
    }

    prof_buf_puts(b, "# HELP prof_stage_count_total Zones ended, per stage, whole run.\n"
                     "# TYPE prof_stage_count_total counter\n");
    for (size_t i = 0; i < s->table.len; i++) {
        stage_sample(b, "prof_stage_count_total", &names, &paths[i], rank, "} ");
        prof_buf_u64(b, s->table.rows[i].count);
        prof_buf_put(b, "\n", 1);
    }
    prof_buf_puts(b, "# HELP prof_stage_seconds_total Time in zones, per stage, whole run.\n"
                     "# TYPE prof_stage_seconds_total counter\n");
    for (size_t i = 0; i < s->table.len; i++) {
        stage_sample(b, "prof_stage_seconds_total", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)s->table.rows[i].total_ns);
        prof_buf_put(b, "\n", 1);
    }
    prof_buf_puts(b, "# HELP prof_stage_self_seconds_total Time in zones less their child "
                     "zones, per stage, whole run.\n"
                     "# TYPE prof_stage_self_seconds_total counter\n");
    for (size_t i = 0; i < s->table.len; i++) {
        stage_sample(b, "prof_stage_self_seconds_total", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)s->table.rows[i].self_ns);
        prof_buf_put(b, "\n", 1);
    }
    /* The on-CPU part of the self time, for the rows that have it
     * (PROF_CPU sampled their threads; not GPU stages): the family is
     * left out where no row has it. */
    for (size_t i = 0, head = 0; i < s->table.len; i++) {
        if (!s->table.rows[i].cpu_known)
            continue;
        if (!head++)
            prof_buf_puts(b, "# HELP prof_stage_cpu_seconds_total Of the self time, the time its "
                             "thread ran on a CPU (sampled), per stage, whole run.\n"
                             "# TYPE prof_stage_cpu_seconds_total counter\n");
        stage_sample(b, "prof_stage_cpu_seconds_total", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)s->table.rows[i].cpu_ns);
        prof_buf_put(b, "\n", 1);
    }
    /* How much the process's peak resident memory rose while the stage
     * ran, for the rows that have it (sampled with the on-CPU time): the
     * family is left out where no row has it (PROF_CPU=0). */
    for (size_t i = 0, head = 0; i < s->table.len; i++) {
        if (!s->table.rows[i].peak_known)
            continue;
        if (!head++)
            prof_buf_puts(b, "# HELP prof_stage_peak_rise_bytes How much the process's peak "
                             "resident memory rose while the stage ran (sampled), per stage, "
                             "whole run.\n"
                             "# TYPE prof_stage_peak_rise_bytes gauge\n");
        stage_sample(b, "prof_stage_peak_rise_bytes", &names, &paths[i], rank, "} ");
        prof_buf_u64(b, s->table.rows[i].peak_rise_bytes);
        prof_buf_put(b, "\n", 1);
    }
    /* Quantiles of the current summary window (the whole run without
     * PROF_SUMMARY_EVERY); _sum and _count of the whole run, as a
     * summary's are cumulative. */
    prof_buf_puts(b, "# HELP prof_stage_latency_seconds Zone durations, per stage: quantiles "
                     "of the current window.\n"
                     "# TYPE prof_stage_latency_seconds summary\n");
    for (size_t i = 0; i < s->table.len; i++) {
        const struct prof_stats_snap_row *r = &s->table.rows[i];
        double v[3] = { r->p50_ns, r->p95_ns, r->p99_ns };

        for (int k = 0; k < 3; k++) {
            stage_sample(b, "prof_stage_latency_seconds", &names, &paths[i], rank, q[k]);
            put_seconds(b, v[k]);
            prof_buf_put(b, "\n", 1);
        }
        stage_sample(b, "prof_stage_latency_seconds_sum", &names, &paths[i], rank, "} ");
        put_seconds(b, (double)r->total_ns);
        prof_buf_put(b, "\n", 1);
        stage_sample(b, "prof_stage_latency_seconds_count", &names, &paths[i], rank, "} ");
        prof_buf_u64(b, r->count);
        prof_buf_put(b, "\n", 1);
    }
    process_metric(b, "# HELP prof_dropped_records_total Records lost (full rings, refused "
                      "zones, GPU sides not timed).\n"
                      "# TYPE prof_dropped_records_total counter\nprof_dropped_records_total",
                   r_only, s->dropped);
    process_metric(b, "# HELP prof_steps_total Steps counted by prof_step.\n"
                      "# TYPE prof_steps_total counter\nprof_steps_total", r_only, s->steps);
    process_metric(b, "# HELP prof_threads Threads recording zones.\n"
                      "# TYPE prof_threads gauge\nprof_threads", r_only, s->threads);
    process_metric(b, "# HELP prof_stages Stages seen; those beyond the heaviest are not "
                      "labelled (prof_stages_folded).\n"
                      "# TYPE prof_stages gauge\nprof_stages", r_only, s->table.stages);
    process_metric(b, "# HELP prof_stages_folded Stages left out of the per-stage metrics.\n"
                      "# TYPE prof_stages_folded gauge\nprof_stages_folded", r_only,
                   s->table.folded);
    if (s->mem_known) {
        /* The Prometheus client libraries' name for RSS; the peak is ours. */
        process_metric(b, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                          "# TYPE process_resident_memory_bytes gauge\n"
                          "process_resident_memory_bytes", r_only, s->rss);
        process_metric(b, "# HELP prof_process_resident_memory_peak_bytes The process's peak "
                          "resident memory since it started (the kernel's VmHWM).\n"
                          "# TYPE prof_process_resident_memory_peak_bytes gauge\n"
                          "prof_process_resident_memory_peak_bytes", r_only, s->rss_peak_run);
    }
    gpu_metrics(b, s->rank >= 0 ? s->rank : 0);         /* GPU busy, NVML (gpu_busy.h) */
    kernel_metrics(b, s, &names, paths, rank);          /* PROF_CUDA=kernels (kstats.h) */
    free(paths);
    prof_buf_free(&names);
}

