/* stats_snap.c - the statistics' snapshot for the live view and the
 * metrics (stats_snap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "stats.h"
#include "stats_snap.h"

int prof_stats_snap_take_locked(struct prof_stats_snap *s, size_t max_rows)
{
    struct prof_rows rows;

    if (prof_stats_rows(&rows, 0, max_rows) != 0)
        return -ENOMEM;
    if (rows.len > s->cap) {
        struct prof_stats_snap_row *r = realloc(s->rows, rows.len * sizeof *r);
        uint32_t *st = r ? realloc(s->stack, rows.len * sizeof *st) : NULL;

        if (r != NULL)
            s->rows = r;
        if (st == NULL) {
            prof_rows_free(&rows);
            return -ENOMEM;
        }
        s->stack = st;
        s->cap = rows.len;
    }
    s->gpu_stages = 0;
    s->stages = rows.nstages;
    s->folded = rows.folded;
    s->len = rows.len;
    for (size_t i = 0; i < rows.len; i++) {
        const struct prof_row *pr = &rows.rows[i];
        const struct prof_stage *st = pr->stage;
        struct prof_stats_snap_row *r = &s->rows[i];
        unsigned d = pr->depth;
        const struct prof_hist *hist;
        struct prof_acc tmp;
        prof_stage_stats w;

        /* Rows come in tree order: a row's parent is the last row seen one
         * level up (a row's depth is at most its index). */
        if (d > i)
            d = (unsigned)i;
        s->stack[d] = (uint32_t)i;
        prof_stats_row_fill(pr, 1, 0, &w, &hist, &tmp);
        prof_stats_row_done(&tmp);
        r->name = st->name;
        r->stage = st;
        r->parent = d == 0 ? UINT32_MAX : s->stack[d - 1];
        r->depth = d;
        r->flags = st->flags;
        r->count = pr->run.count;
        r->total_ns = pr->run.total;
        r->self_ns = pr->run.self;
        r->outer_ns = pr->outer_run;
        r->win_count = w.count;
        r->win_total_ns = w.total_ns;
        r->p50_ns = w.p50_ns;
        r->p95_ns = w.p95_ns;
        r->p99_ns = w.p99_ns;
        r->cpu_known = prof_stats_row_cpu(pr, r->self_ns, &r->cpu_ns);
        if (!r->cpu_known)
            r->cpu_ns = 0;
        r->peak_known = prof_stats_row_peak(pr, &r->peak_rise_bytes);
        s->gpu_stages += (st->flags & PROF_STAGE_GPU) != 0;
    }
    prof_rows_free(&rows);
    return 0;
}

void prof_stats_snap_free(struct prof_stats_snap *s)
{
    free(s->rows);
    free(s->stack);
    memset(s, 0, sizeof *s);
}
