/* kstats.h - what each GPU stage ran, with PROF_CUDA=kernels (kstats.c):
 * per stage, its kernels' busy time (the union of their intervals), their
 * number and the top kernels by time. A sink (prof_kstats_sink);
 * collector side, the runtime lock held. */
#ifndef PROF_KSTATS_H
#define PROF_KSTATS_H

#include <stdint.h>

#include "json.h"
#include "sink.h"

struct prof_stage;

extern const struct prof_sink prof_kstats_sink;

/* The summary's line under GPU stage s, indented by indent spaces:
 * "busy 1.20ms, 12 kernels: gemm 60%, relu 30%, (memcpy) 10%". Nothing
 * when s ran no kernel in the view (window: the current window's). */
void prof_kstats_text(struct prof_buf *b, const struct prof_stage *s, int window, int indent);

/* The same as the JSON member ,"kernels":{...} of the stage; nothing
 * when it ran none. */
void prof_kstats_json(struct prof_buf *b, const struct prof_stage *s, int window);

/* For the metrics thread (metrics.c writes them, labelled as its other
 * per-stage metrics): the busiest GPU stages (at most PROF_KSTATS_PUB),
 * busiest first, with their kernels' busy time and count over the run, as
 * of the collector's last tick. stage is the stage's interned name (valid
 * until exit). Copies at most cap into out; returns how many. Any thread;
 * takes only this file's publication lock. */
#define PROF_KSTATS_PUB 32
struct prof_kstats_pub {
    const char *stage;
    uint64_t busy_ns, count;
};
int prof_kstats_published(struct prof_kstats_pub *out, int cap);

/* A GPU stage's figures for the live file (live.c's snapshot): its
 * kernels' busy time and count in the window and the run, and the top
 * kernel by time (the window's, the run's where the window ran none) with
 * its share of the kernels' time. 1 when s ran kernels in the run, else 0
 * and *out zeroed. Lock held; top is interned (valid until exit). */
struct prof_kstats_live {
    uint64_t win_busy_ns, win_count, run_busy_ns, run_count;
    double top_share;
    const char *top;
};
int prof_kstats_live_locked(const struct prof_stage *s, struct prof_kstats_live *out);

/* A periodic summary closed the window. */
void prof_kstats_window_close(void);

#endif
