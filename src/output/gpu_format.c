/* gpu_format.c - the GPU figures as Prometheus lines (gpu_format.h). The
 * summary's GPU lines and JSON members are its writers' (summary_text.c,
 * summary_json.c), from gpu_busy.c's figures in the summary's model. */
#include <stdint.h>

#include "gpu_busy.h"
#include "gpu_format.h"
#include "json.h"
#include "gpu_mem.h"
#include "nvml.h"

void prof_gpu_metrics(struct prof_buf *b, int rank)
{
    struct prof_gpu_busy_pub pub[GPU_TRACKS];
    int i, n = prof_gpu_busy_published(pub, GPU_TRACKS);

    if (n > 0)
        prof_buf_puts(b, "# HELP prof_gpu_busy_ratio Share of the last second during which "
                         "the device ran GPU zones' work (union of their spans).\n"
                         "# TYPE prof_gpu_busy_ratio gauge\n");
    for (i = 0; i < n; i++) {
        prof_buf_printf(b, "prof_gpu_busy_ratio{device=\"%d\",rank=\"%d\"} ", pub[i].device, rank);
        prof_buf_fixed(b, pub[i].busy, 4);
        prof_buf_puts(b, "\n");
    }
    prof_gpu_mem_metrics(b, rank, prof_nvml_metrics(b, rank));
}
