/* stats_snap.h - what the statistics publish for the outputs that show
 * numbers while the program runs (the live file, the metrics): the
 * heaviest stages of the run and their ancestors, in the summary's tree
 * order, as plain numbers. Taken with the runtime lock held; the output
 * copies it out and formats it with the lock released, and never touches
 * a stage or another struct of stats.c. */
#ifndef PROF_STATS_SNAP_H
#define PROF_STATS_SNAP_H

#include <stddef.h>
#include <stdint.h>

struct prof_stats_snap_row {
    const char *name;            /* interned: valid until exit */
    const struct prof_stage *stage;  /* for a sink's own figures per stage (kstats.c), lock held */
    uint32_t parent;             /* row index, or UINT32_MAX at the top */
    uint32_t depth, flags;       /* flags: PROF_STAGE_GPU */
    uint64_t count, total_ns, self_ns;             /* whole run */
    uint64_t outer_ns;           /* run time outside zones of its own stage (wall share) */
    uint64_t win_count, win_total_ns;              /* current summary window */
    double p50_ns, p95_ns, p99_ns;                 /* of the window */
    uint64_t cpu_ns;             /* of self_ns, on a CPU (the summary's cpu_ns) */
    int cpu_known;               /* cpu_ns was measured (PROF_STAGE_CPU) */
    uint64_t peak_rise_bytes;    /* the stage's rise of the process's peak RSS, whole run */
    int peak_known;              /* peak_rise_bytes was measured (sampler on, not GPU) */
};

struct prof_stats_snap {
    struct prof_stats_snap_row *rows;
    size_t len;
    uint64_t stages, folded;     /* all stages; those not in rows */
    uint32_t gpu_stages;         /* GPU stages among the rows */
    /* Scratch, kept between snapshots. */
    uint32_t *stack;             /* the last row seen at each depth */
    size_t cap;
};

/* Fill s (its arrays grown as needed, kept for the next snapshot) with at
 * most max_rows rows. Runtime lock held. 0, or -ENOMEM (s keeps its
 * arrays; its rows are not valid). */
int prof_stats_snap_take_locked(struct prof_stats_snap *s, size_t max_rows);

void prof_stats_snap_free(struct prof_stats_snap *s);

#endif
