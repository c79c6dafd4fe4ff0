/* kstats.h - what each GPU stage ran, with PROF_CUDA=kernels (kstats.c):
 * per stage, its kernels' busy time (the union of their intervals), their
 * number and the top kernels by time. A sink (prof_kstats_sink);
 * collector side, the runtime lock held. */
#ifndef PROF_KSTATS_H
#define PROF_KSTATS_H

#include <stdint.h>

#include "sink.h"

struct prof_stage;

extern const struct prof_sink prof_kstats_sink;

/* What GPU stage s ran in a view (window: the current window's, else the
 * run's), for the summary's kernel line and JSON member: its kernels'
 * busy time (the union of their intervals), their number, their time
 * summed (the whole the top kernels' shares are of) and the top kernels
 * by time, most first. 1 when s ran kernels in the view, else 0 and *out
 * zeroed. Names are interned (valid until exit). */
#define PROF_KSTATS_TOP 3
struct prof_kstats_figures {
    uint64_t busy_ns, count, total_ns;
    unsigned ntop;
    struct {
        const char *name;
        uint64_t ns;
    } top[PROF_KSTATS_TOP];
};
int prof_kstats_figures(const struct prof_stage *s, int window, struct prof_kstats_figures *out);

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
