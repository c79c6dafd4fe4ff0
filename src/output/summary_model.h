/* summary_model.h - one summary's figures, gathered once (summary_model.c)
 * for its two writers: summary_text.c (the table) and summary_json.c (the
 * JSON line). Every figure a summary shows is here, computed as it is
 * shown; a writer lays them out, converts units and computes nothing.
 * Runtime lock held from prof_summary_model_get to prof_summary_model_free
 * (the model points into the collector's stages, counters and names). */
#ifndef PROF_SUMMARY_MODEL_H
#define PROF_SUMMARY_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "prof.h"
#include "gpu_busy.h"
#include "kstats.h"
#include "loss.h"
#include "memory.h"
#include "summary.h"

struct prof_acc;
struct prof_hist;
struct prof_process;

/* A row of the table: one call path of a stage (stats.h's prof_row). */
struct prof_summary_row {
    struct prof_stage_stats st;      /* the row's numbers (prof_stats_row_fill) */
    unsigned depth;                  /* 0 at the top */
    uint32_t parent_row;             /* the row it is under, UINT32_MAX at the top */
    int nohist;                      /* no distribution of its own: min, max and
                                        the percentiles are not shown */
    const struct prof_hist *hist;    /* its distribution (JSON's "hist"), or NULL */
    struct prof_acc *merged;         /* hist's owner where merged for this row */
    double cpu_pct;                  /* on-CPU share of the self time, percent;
                                        -1 where there is none to show */
    int kernels;                     /* k holds what it ran (PROF_CUDA=kernels) */
    struct prof_kstats_figures k;
};

struct prof_summary_counter {
    const char *name;
    uint64_t count, nonfinite;       /* values kept; NaN/inf left out */
    double last, min, max, avg;
};

struct prof_summary_mark {
    const char *name;
    uint64_t count;
};

/* The text's line under the table naming the stage that waited longest:
 * name NULL when no stage waited enough to be named. */
struct prof_summary_waiting {
    const char *name;
    uint64_t self_ns;
    double cpu_pct;
};

/* The text's line naming the stage that raised the peak resident memory
 * most: name NULL when none did. */
struct prof_summary_peak {
    const char *name;
    uint64_t rise_bytes;
};

/* A section: the current window's figures, or the whole run's. */
struct prof_summary_section {
    int ok;                          /* 0: no memory for its rows (none below) */
    int window;                      /* the current window's, else the run's */
    uint64_t wall_ns, steps;
    struct prof_summary_row *rows;
    size_t nrows;
    size_t folded;                   /* rows left out (too many), and */
    uint64_t folded_total;           /* their total time */
    size_t npaths;                   /* rows before folding */
    uint64_t paths_nohist;           /* paths past PROF_STATS_PATH_HISTS */
    struct prof_summary_counter *counters;   /* by name */
    size_t ncounters;
    struct prof_summary_mark *marks;
    size_t nmarks;
    struct prof_loss loss;
    struct prof_mem_figures mem;
    struct prof_gpu_figures gpu;
    struct prof_summary_waiting waiting;     /* the text's only */
    struct prof_summary_peak peak;           /* the text's only */
};

/* Where forked workers' own summaries and traces went (the text's
 * workers line), from the settings the workers share. */
enum prof_workers_summaries {
    PROF_WORKERS_SUMMARY_FILES,      /* PROF_SUMMARY's %p files */
    PROF_WORKERS_SUMMARY_NONE,       /* none: to a file without %p, off, or unset */
    PROF_WORKERS_SUMMARY_ABOVE,      /* each printed its own, above */
};
enum prof_workers_traces {
    PROF_WORKERS_TRACE_UNSET,        /* no PROF_TRACE: nothing said */
    PROF_WORKERS_TRACE_FILES,        /* PROF_TRACE's %p files */
    PROF_WORKERS_TRACE_NONE,         /* PROF_TRACE has no %p */
};

struct prof_summary_model {
    int format;                      /* PROF_FORMAT_TEXT or PROF_FORMAT_JSON */
    enum prof_summary_kind kind;
    const struct prof_process *proc;
    uint32_t forked_from;            /* parent pid in a forked child, else 0 */
    double unix_time;                /* when it was taken (JSON) */
    char clock[48];                  /* the clock's source (text) */
    uint64_t step;                   /* the step it is taken at */
    uint64_t run_wall_ns;            /* the run's wall time */
    uint64_t threads;                /* threads seen */
    uint64_t dropped, dropped_window;
    uint64_t merged;                 /* windows a periodic one holds (1 normally) */
    int by_steps;                    /* its windows are steps (PROF_SUMMARY_EVERY=N) */
    int sampled;                     /* the sampler was installed: cpu% and peak+ */
    struct prof_mem_figures mem_run; /* the run's memory (JSON's header) */
    const struct prof_children_ended *children;
    enum prof_workers_summaries workers_summaries;
    enum prof_workers_traces workers_traces;
    /* The sections its format shows: the text one (shown: the window's
     * for a periodic summary, else the run's); JSON the window's (a
     * periodic one) and the run's (not periodic, or PROF_SUMMARY_JSON=full).
     * NULL where not shown. */
    const struct prof_summary_section *shown, *window, *total;
};

/* Gather the summary of kind, in format, as of step `step` and time
 * now_ns (prof_summary_format's arguments; windows: the periods a
 * periodic one by time covers); children: the forked workers it lists
 * (summary.c asks the hook). The model is this file's own (one at a
 * time, lock held): read it, then prof_summary_model_free. The run's
 * text summary also hands the trace the GPU tracks' last busy bins
 * (prof_gpu_bins_final). */
const struct prof_summary_model *
prof_summary_model_get(int format, enum prof_summary_kind kind, uint64_t step, uint64_t now_ns,
                       uint64_t windows, const struct prof_children_ended *children);
void prof_summary_model_free(const struct prof_summary_model *m);

#endif
