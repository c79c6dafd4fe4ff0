/* stats_window.c - the ends of a summary window and of the run. As a
 * periodic summary closes its window, the window's stages are kept by
 * name, in the per-name tree's order (prof_stats_window_keep: what the
 * cross-rank table and prof_window_stats_list read), then every window
 * number is cleared (prof_stats_window_reset); a reset forgets everything,
 * the kept window with it (prof_stats_reset). Each owner clears its own:
 * stats.c its stages and nodes, stats_counters.c its counters and marks. */
#include <stdlib.h>

#include "prof.h"
#include "runtime.h"
#include "stats.h"
#include "stats_private.h"

/* The last closed window (prof_stats_window_last): one prof_stage_stats
 * per stage, replaced at every window, so its memory is bounded by the
 * number of stages. */
static struct prof_stage_stats *last_rows;
static size_t last_len, last_cap;
static uint64_t last_start_step, last_wall_ns;
static int last_valid;

/* Called as the periodic summary that showed the window has been formatted,
 * with the wall time it showed, before the window is reset: the stages by
 * name, in the per-name tree's order. */
void prof_stats_window_keep(uint64_t wall, size_t max_rows)
{
    struct prof_rows rows;

    last_valid = 0;
    last_len = 0;
    prof_stats_tree();
    if (prof_stats_stage_rows(&rows, 1, max_rows) != 0)
        return;
    if (rows.len > last_cap) {
        struct prof_stage_stats *grown = realloc(last_rows, rows.len * sizeof *grown);
        if (grown == NULL) {
            prof_rows_free(&rows);
            return;
        }
        last_rows = grown;
        last_cap = rows.len;
    }
    for (size_t i = 0; i < rows.len; i++) {
        prof_stats_fill(rows.rows[i].stage, 1, wall, &last_rows[i]);
        last_rows[i].depth = rows.rows[i].depth;
    }
    last_len = rows.len;
    last_start_step = prof_rt.window_start_step;
    last_wall_ns = wall;
    last_valid = 1;
    prof_rows_free(&rows);
}

const struct prof_stage_stats *prof_stats_window_last(size_t *n, uint64_t *start_step,
                                                      uint64_t *wall_ns)
{
    *n = last_valid ? last_len : 0;
    if (start_step != NULL)
        *start_step = last_start_step;
    if (wall_ns != NULL)
        *wall_ns = last_wall_ns;
    return last_valid ? last_rows : NULL;
}

void prof_stats_window_reset(void)
{
    prof_stats_stages_window_reset();
    prof_stats_counters_window_reset();
}

void prof_stats_reset(void)
{
    /* Its rows point at names and parents of the stages freed here. */
    free(last_rows);
    last_rows = NULL;
    last_len = last_cap = 0;
    last_valid = 0;
    prof_stats_stages_reset();
    prof_stats_counters_reset();
}
