/* stats.h - per-stage statistics, the nesting tree, counters and marks.
 *
 * Collector side (runtime lock held): records come in per thread, in the
 * order their zones ended. A stage is every zone with one name; a node is
 * one call path (the hash of the names of the open zones). The outputs'
 * rows are paths: a name run under two parents is two rows, each with its
 * own numbers (prof_stats_rows); what is asked by name (prof_stats(),
 * prof_stats_list(), the cross-rank table) is the stage, the sum over its
 * paths. Everything is kept twice: for the whole run and for the current
 * summary window. */
#ifndef PROF_STATS_H
#define PROF_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "hist.h"

struct prof_node;
struct prof_thread;

struct prof_acc {
    uint64_t count, total, self, min, max;
    struct prof_hist hist;
    /* On-CPU sampling (sampler.c): the CPU time of the samples, and the
     * self time of zones whose thread was not sampled (no timer, or
     * sampling stopped), which the share leaves out. Touched only by a
     * zone with samples or without a timer, never by the others: the
     * drain's cost per record stays what it was. */
    uint64_t cpu_ns, cpu_unsampled;
    /* How much the process's peak resident memory rose at its zones'
     * samples, bytes (sampler.c); per stage, like cpu_ns. */
    uint64_t peak_bytes;
};

/* PROF_STAGE_LOSSY for the current window only (prof_stats_fill). */
#define PROF_STAGE_LOSSY_WIN_ (1u << 30)
/* A row (a path) whose zones' distribution was not kept apart from other
 * paths of its name (past PROF_STATS_PATH_HISTS): count, total, self and
 * avg are its own; min, max and the percentiles are left 0 (shown "-"). */
#define PROF_STAGE_NOHIST_ (1u << 29)

/* Paths that keep a histogram of their own beside their stage's first
 * path (which uses the stage's). Each costs about 1 KB and its buckets;
 * past it, a path's count, total and self are still its own. */
#define PROF_STATS_PATH_HISTS 4096

#define PROF_STAGE_SIDES_ 2

/* A path's count and times. */
struct prof_path_sum {
    uint64_t count, total, self;
};

struct prof_stray {
    struct prof_path_sum run, win;
};

struct prof_stage {
    const char *name;            /* interned */
    uint32_t flags;              /* PROF_STAGE_GPU, PROF_STAGE_LOSSY(_WIN_) */
    uint32_t npaths;             /* its path nodes */
    struct prof_stage *fixed_parent;  /* GPU stages: their CPU stage */
    struct prof_acc run, win;
    /* The collector's outputs' own state for the stage (sink.h): side[k]
     * belongs to the sink whose index is k, which allocates it and frees
     * it in its stage_gone (called here before the stage is freed). */
    void *side[PROF_STAGE_SIDES_];
    /* Numbers of the zones whose path keeps no histogram of its own: its
     * first path's, and those past PROF_STATS_PATH_HISTS; a stage's
     * numbers are these plus its other paths' (prof_stats_fill). */
    struct prof_path_acc *paths;     /* its paths' own, linked */
    /* Its first node, whose count and times, while it is the stage's only
     * path, are the stage's less the strays: zones in no node of the stage
     * (no memory for one, or a node of another stage's hash), rare, so
     * kept out of line (a drain over 100k stages slowed by a third when a
     * stage grew by 80 bytes). */
    struct prof_node *first;
    struct prof_stray *stray;
    /* Scratch for building the per-name tree. */
    struct prof_stage *parent;
    uint64_t parent_weight;      /* time of the heaviest node under parent */
    uint64_t root_weight;        /* time spent at the top level */
    uint64_t outer_run, outer_win;
    int in_rows;
    size_t walk;                 /* the cycle check's walk that reached it */
    uint32_t row;                /* index while ordering */
};

struct prof_counter_acc {
    uint64_t count;
    uint64_t nonfinite;          /* NaN and infinite values, left out */
    double last, min, max, sum;
};

struct prof_counter {
    const char *name;
    struct prof_counter_acc run, win;
};

struct prof_mark {
    const char *name;
    uint64_t run, win;
};

/* The stage for a name pointer as it came from a record (NULL becomes
 * "(null)"); created on first sight. NULL only when out of memory. */
struct prof_stage *prof_stats_stage(const char *raw_name, uint32_t flags);

/* The call site a zone's name pointer raw stands for, or NULL (a name):
 * site.c's answer, asked when the pointer first made or found its CPU
 * stage (prof_stats_stage) and kept with it, so that a sink handed the
 * zone (the trace's call-site category) does not ask again: site.c is
 * asked once per new name pointer. A pointer with no zone taken since the
 * last reset is asked of site.c here. */
const struct prof_site_ *prof_stats_site(const char *raw);

/* The stage of a zone named raw_name whose enclosing zones' path hash is
 * parent_path, and in *node the path node it adds to (NULL when out of
 * memory for it); both created on first sight. One map lookup when the
 * path was seen before. NULL only when out of memory. */
struct prof_stage *prof_stats_zone_stage(const char *raw_name, uint32_t parent_path,
                                         struct prof_node **node);

/* One ended zone: its stage and path node (prof_stats_zone_stage),
 * duration and self time in ns. */
void prof_stats_zone(struct prof_stage *s, struct prof_node *node, uint64_t dur_ns,
                     uint64_t self_ns);
/* A zone of stage s and path node n whose samples add up to cpu_ns of
 * its self time self_ns; unsampled: its thread had no timer (its self time
 * is then left out of the share). Called only for zones with samples or
 * unsampled ones. */
void prof_stats_zone_cpu(struct prof_stage *s, struct prof_node *n, uint64_t self_ns,
                         uint64_t cpu_ns, int unsampled);
/* A GPU zone (no path: placed under its CPU stage). */
/* A zone of stage s whose samples claimed a rise of the process's peak
 * resident memory of bytes. */
void prof_stats_zone_peak(struct prof_stage *s, uint64_t bytes);

void prof_stats_gpu_zone(struct prof_stage *gpu, struct prof_stage *cpu, uint64_t dur_ns);
void prof_stats_counter(const char *raw_name, double value);
void prof_stats_mark(const char *raw_name);
/* Thread t exited and is about to be freed: keep the zones it left open
 * (pthread_exit inside a zone) as the parents of the zones it ended in
 * them. Collector, lock held. */
void prof_stats_thread_gone(const struct prof_thread *t);

/* Rows in summary order: one per call path, recursion folded into the
 * outermost zone of its stage (a recursive function is one row). */
struct prof_row {
    struct prof_stage *stage;
    struct prof_node *node;      /* the path (its first node); NULL: a GPU
                                    stage, under its CPU stage's heaviest row */
    const char *parent;          /* the stage name of the row it is under */
    uint32_t parent_row;         /* its index in rows, UINT32_MAX at the top */
    unsigned depth;
    /* total: time in its outermost zones, each moment once (a recursive
     * row's nested calls are inside it), so that a row's children add up
     * to at most its child time; count and self: every call. */
    struct prof_path_sum run, win;
    uint64_t outer_run, outer_win;   /* time outside zones of its own stage */
    uint64_t calls_run, calls_win;   /* every call's duration summed (avg) */
};

struct prof_rows {
    struct prof_row *rows;
    size_t len;
    size_t folded;               /* rows left out (too many) */
    uint64_t folded_total;       /* their total time */
    size_t npaths;               /* rows before folding */
    uint64_t paths_nohist;       /* paths past PROF_STATS_PATH_HISTS */
    struct prof_counter **counters;  /* sorted by name */
    size_t ncounters;
    struct prof_mark **marks;
    size_t nmarks;
    size_t nstages;
};

/* Build the tree only: each stage's parent and outer time, what
 * prof_stats_fill reads (no sort: cheap enough for one stage's lookup). */
void prof_stats_tree(void);

/* Build the tree (placing children of zones still running through the live
 * stacks of the registry) and the rows, one per path: the max_rows
 * heaviest and their ancestors (0 = all). window selects which numbers
 * order the rows. Returns 0 or -ENOMEM. */
int prof_stats_rows(struct prof_rows *out, int window, size_t max_rows);
void prof_rows_free(struct prof_rows *r);

struct prof_stage_stats;
/* A row's numbers as the public struct (out->parent: the row it is under),
 * with hist its histogram (NULL when it kept none: PROF_STAGE_NOHIST_ in
 * out->flags). The histogram may live in tmp: prof_stats_row_done(tmp)
 * after use. */
void prof_stats_row_fill(const struct prof_row *r, int window, uint64_t wall_ns,
                         struct prof_stage_stats *out, const struct prof_hist **hist,
                         struct prof_acc *tmp);
void prof_stats_row_done(struct prof_acc *tmp);
/* The on-CPU part of row r's run self time row_self (as the summary's
 * cpu_ns): 1 and *cpu_ns where measured, else 0. Lock held. */
int prof_stats_row_cpu(const struct prof_row *r, uint64_t row_self, uint64_t *cpu_ns);
/* How much the process's peak resident memory rose while row r's stage
 * ran, whole run (as the summary's peak_rise_bytes): 1 and *bytes where
 * measured (the sampler is installed, not a GPU stage), else 0. Lock held. */
int prof_stats_row_peak(const struct prof_row *r, uint64_t *bytes);

/* For prof_stats_list(), which orders with the lock released: every stage
 * (*n of them, in no order; free() the array), and, with the tree built,
 * their order items (order.h) with parents as indices into all. NULL when
 * out of memory. */
struct prof_order_item;
struct prof_stage **prof_stats_all(size_t *n);
struct prof_order_item *prof_stats_items(struct prof_stage **all, size_t n, int window);

/* Every counter, sorted by name; free() the array. NULL when out of
 * memory. */
struct prof_counter **prof_stats_counters(size_t *n);

/* Fill the public struct from a stage: the sum over its paths, parent the
 * stage it mostly runs inside (prof_stats_tree). wall_ns scales
 * wall_share. depth is left 0: it is the position in the rows, which the
 * caller knows. */
struct prof_stage_stats;
void prof_stats_fill(const struct prof_stage *s, int window, uint64_t wall_ns,
                     struct prof_stage_stats *out);

struct prof_stage *prof_stats_find(const char *name);
struct prof_counter *prof_counter_find(const char *name);

size_t prof_stats_nstages(void);

/* Values left out of a histogram for want of memory (collector only). */
extern uint64_t prof_stats_hist_lost;

void prof_stats_window_reset(void);  /* a window summary was printed */

/* Keep the window a periodic summary has just shown (wall_ns: the wall
 * time it showed): its stages by name (the cross-rank table's rows), the
 * max_rows heaviest of the window and their ancestors in the per-name tree
 * (prof_stats_tree, built since the last record), before
 * prof_stats_window_reset() clears it. Lock held. */
void prof_stats_window_keep(uint64_t wall_ns, size_t max_rows);

/* The window kept last: its stages' numbers in the per-name tree's order. *n is set to the row count; *start_step
 * to the step the window began at (it ended where the current window
 * begins: prof_rt.window_start_step); *wall_ns to its wall time (either
 * may be NULL). Returns NULL (and *n = 0) while no window has closed since
 * the start or the last prof_stats_reset(). Lock held; the array stays
 * valid until the next window is kept. */
struct prof_stage_stats;
const struct prof_stage_stats *prof_stats_window_last(size_t *n, uint64_t *start_step,
                                                      uint64_t *wall_ns);
void prof_stats_reset(void);         /* forget everything */

/* The statistics as the collector's first sink (sink.h). */
struct prof_sink;
extern const struct prof_sink prof_stats_sink;

#endif
