/* ranks.c - pack one rank's window; format every rank's window as one
 * cross-rank table. The only formatter of that table: Python's
 * prof.distributed and prof_mpi.h both reach it through lib.c.
 *
 * A block holds up to PROF_RANKS_MAX_STAGES stages keyed by the FNV-1a hash
 * of their full name; the formatter joins ranks on that key, so ranks need
 * not agree on a stage list beforehand and one fixed-size gather suffices.
 * The name travels with the numbers (cut to PROF_RANKS_NAME_BYTES - 1
 * bytes) so that rank 0 can print stages it never ran itself.
 *
 * Per stage the table shows, across the ranks that ran it, the median, min
 * and max of avg and of p95, the rank with the highest avg and the spread
 * (that avg / the median avg). The straggler line answers "who made the
 * step slow": for every (rank, stage) it takes the rank's self time per
 * step in that stage minus the median rank's (a rank that never ran the
 * stage counts 0), and names the largest. Self time, so that a parent is
 * not blamed for its slow child; the median, so that the time the other
 * ranks spend waiting for the straggler in a collective (which makes them
 * the slow ones in that stage) is the majority's, not an outlier. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "summary.h"

_Static_assert(sizeof(struct prof_ranks_stage) == 112, "wire layout");
_Static_assert(sizeof(struct prof_ranks_header) == 64, "wire layout");
_Static_assert(sizeof(struct prof_ranks_block) == PROF_RANKS_BLOCK_SIZE,
               "PROF_RANKS_BLOCK_SIZE in prof.h");

int prof_ranks_muted;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Copy at most size - 1 bytes of s, never ending inside a UTF-8 sequence. */
static void copy_name(char *dst, size_t size, const char *s)
{
    size_t n = 0;

    while (s[n] != '\0') {
        size_t seq = prof_utf8_seq((const unsigned char *)s + n);
        if (seq == 0)
            seq = 1;
        if (n + seq > size - 1)
            break;
        n += seq;
    }
    memcpy(dst, s, n);
    memset(dst + n, 0, size - n);
}

static int cmp_total(const void *a, const void *b)
{
    const prof_stage_stats *x = *(const prof_stage_stats *const *)a;
    const prof_stage_stats *y = *(const prof_stage_stats *const *)b;

    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

void prof_ranks_pack_rows(struct prof_ranks_block *b, int rank, const prof_stage_stats *rows,
                          size_t n, uint64_t end_step, uint64_t start_step, uint64_t wall_ns)
{
    const prof_stage_stats **order;
    size_t used = 0;

    memset(b, 0, sizeof *b);
    b->h.magic = PROF_RANKS_MAGIC;
    b->h.version = PROF_RANKS_VERSION;
    b->h.rank = rank;
    if (rows == NULL)
        return;
    b->h.step = end_step;
    b->h.steps = end_step > start_step ? end_step - start_step : 0;
    b->h.wall_ns = wall_ns;
    if ((order = malloc((n ? n : 1) * sizeof *order)) == NULL) {
        /* Out of memory: the window is sent as empty rather than not at
         * all, so that every rank still takes part in the gather. */
        b->h.folded = (uint32_t)n;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i].count > 0)
            order[used++] = &rows[i];
    qsort(order, used, sizeof *order, cmp_total);
    if (used > PROF_RANKS_MAX_STAGES) {
        b->h.folded = (uint32_t)(used - PROF_RANKS_MAX_STAGES);
        used = PROF_RANKS_MAX_STAGES;
    }
    for (size_t k = 0; k < used; k++) {
        const prof_stage_stats *st = order[k];
        struct prof_ranks_stage *w = &b->stages[k];
        w->hash = name_hash(st->name);
        w->count = st->count;
        w->total_ns = st->total_ns;
        w->self_ns = st->self_ns;
        w->max_ns = st->max_ns;
        w->avg_ns = st->avg_ns;
        w->p50_ns = st->p50_ns;
        w->p95_ns = st->p95_ns;
        copy_name(w->name, sizeof w->name, st->name);
    }
    b->h.nstages = (uint16_t)used;
    free(order);
}

/* ------------------------------------------------------------------------ */
/* The formatter. */

enum { BLOCK_OK = 0, BLOCK_NO_WINDOW, BLOCK_BAD };

struct row {
    uint64_t hash;
    const char *name;            /* inside a block, NUL within PROF_RANKS_NAME_BYTES */
    int *at;                     /* per rank: index into its stages, or -1 */
    int ranks;                   /* ranks that ran it */
    double avg_med, avg_min, avg_max, p95_med, p95_min, p95_max, spread;
    double weight;               /* order: total over ranks */
    int slowest;
};

struct table {
    const struct prof_ranks_block *b;
    size_t nranks;
    int *state;                  /* BLOCK_* per rank */
    struct row *rows;
    size_t nrows;
    int *at_pool;
    double *scratch;             /* nranks doubles */
    int ref;                     /* the first rank with a window, or -1 */
    /* The straggler. */
    int s_rank;
    size_t s_row;
    double s_excess, s_self, s_median;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int block_state(const struct prof_ranks_block *b)
{
    if (b->h.magic != PROF_RANKS_MAGIC || b->h.version != PROF_RANKS_VERSION ||
        b->h.nstages > PROF_RANKS_MAX_STAGES)
        return BLOCK_BAD;
    for (unsigned i = 0; i < b->h.nstages; i++)
        if (memchr(b->stages[i].name, '\0', PROF_RANKS_NAME_BYTES) == NULL)
            return BLOCK_BAD;
    return b->h.step == 0 ? BLOCK_NO_WINDOW : BLOCK_OK;
}

static double per_step(const struct prof_ranks_block *b, uint64_t ns)
{
    return b->h.steps ? (double)ns / (double)b->h.steps : (double)ns;
}

static void table_free(struct table *t)
{
    free(t->state);
    free(t->rows);
    free(t->at_pool);
    free(t->scratch);
}

static int table_build(struct table *t, const void *blocks, size_t nranks)
{
    size_t cap = 0;

    memset(t, 0, sizeof *t);
    t->b = blocks;
    t->nranks = nranks;
    t->ref = -1;
    t->s_rank = -1;
    t->state = calloc(nranks ? nranks : 1, sizeof *t->state);
    t->scratch = calloc(nranks ? nranks : 1, sizeof *t->scratch);
    if (t->state == NULL || t->scratch == NULL)
        return -ENOMEM;
    for (size_t r = 0; r < nranks; r++) {
        t->state[r] = block_state(&t->b[r]);
        if (t->state[r] == BLOCK_OK) {
            cap += t->b[r].h.nstages;
            if (t->ref < 0)
                t->ref = (int)r;
        }
    }
    t->rows = calloc(cap ? cap : 1, sizeof *t->rows);
    t->at_pool = malloc((cap ? cap : 1) * (nranks ? nranks : 1) * sizeof *t->at_pool);
    if (t->rows == NULL || t->at_pool == NULL)
        return -ENOMEM;
    for (size_t r = 0; r < nranks; r++) {
        if (t->state[r] != BLOCK_OK)
            continue;
        for (int i = 0; i < t->b[r].h.nstages; i++) {
            const struct prof_ranks_stage *s = &t->b[r].stages[i];
            size_t k;
            for (k = 0; k < t->nrows && t->rows[k].hash != s->hash; k++) {
            }
            if (k == t->nrows) {
                t->rows[k].hash = s->hash;
                t->rows[k].name = s->name;
                t->rows[k].at = t->at_pool + k * nranks;
                for (size_t q = 0; q < nranks; q++)
                    t->rows[k].at[q] = -1;
                t->nrows++;
            }
            if (t->rows[k].at[r] < 0)
                t->rows[k].at[r] = i;
        }
    }
    for (size_t k = 0; k < t->nrows; k++) {
        struct row *w = &t->rows[k];
        size_t n = 0;
        w->slowest = -1;
        for (size_t r = 0; r < nranks; r++) {
            const struct prof_ranks_stage *s;
            if (w->at[r] < 0)
                continue;
            s = &t->b[r].stages[w->at[r]];
            w->weight += (double)s->total_ns;
            if (n == 0 || s->avg_ns < w->avg_min)
                w->avg_min = s->avg_ns;
            if (n == 0 || s->avg_ns > w->avg_max) {
                w->avg_max = s->avg_ns;
                w->slowest = (int)r;
            }
            if (n == 0 || s->p95_ns < w->p95_min)
                w->p95_min = s->p95_ns;
            if (n == 0 || s->p95_ns > w->p95_max)
                w->p95_max = s->p95_ns;
            t->scratch[n++] = s->avg_ns;
        }
        w->ranks = (int)n;
        w->avg_med = median(t->scratch, n);
        n = 0;
        for (size_t r = 0; r < nranks; r++)
            if (w->at[r] >= 0)
                t->scratch[n++] = t->b[r].stages[w->at[r]].p95_ns;
        w->p95_med = median(t->scratch, n);
        w->spread = w->avg_med > 0 ? w->avg_max / w->avg_med : 0;
    }
    qsort(t->rows, t->nrows, sizeof *t->rows, cmp_row);
    /* The straggler, after sorting: s_row indexes the sorted rows. */
    for (size_t k = 0; k < t->nrows; k++) {
        const struct row *w = &t->rows[k];
        double med;
        size_t n = 0;
        for (size_t r = 0; r < nranks; r++)
            if (t->state[r] == BLOCK_OK)
                t->scratch[n++] = w->at[r] >= 0
                                      ? per_step(&t->b[r], t->b[r].stages[w->at[r]].self_ns)
                                      : 0;
        if (n < 2)
            continue;
        med = median(t->scratch, n);
        for (size_t r = 0; r < nranks; r++) {
            double v;
            if (t->state[r] != BLOCK_OK || w->at[r] < 0)
                continue;
            v = per_step(&t->b[r], t->b[r].stages[w->at[r]].self_ns);
            if (v - med > t->s_excess) {
                t->s_excess = v - med;
                t->s_rank = (int)r;
                t->s_row = k;
                t->s_self = v;
                t->s_median = med;
            }
        }
    }
    return 0;
}


static void notes_text(struct prof_buf *o, const struct table *t)
{
    const struct prof_ranks_block *ref = t->ref >= 0 ? &t->b[t->ref] : NULL;

    for (size_t r = 0; r < t->nranks; r++) {
        if (t->state[r] == BLOCK_BAD)
            prof_buf_printf(o, "rank %zu: its numbers could not be read (another prof version "
                            "or byte order)\n", r);
        else if (t->state[r] == BLOCK_NO_WINDOW)
            prof_buf_printf(o, "rank %zu: no window closed yet\n", r);
        else if (ref != NULL && t->b[r].h.step != ref->h.step)
            prof_buf_printf(o, "rank %zu: window ends at step %llu, not %llu (steps differ "
                            "between ranks)\n", r, (unsigned long long)t->b[r].h.step,
                            (unsigned long long)ref->h.step);
        else if (t->state[r] == BLOCK_OK && t->b[r].h.folded)
            prof_buf_printf(o, "rank %zu: %u more stages not sent (more than %d)\n", r,
                            t->b[r].h.folded, PROF_RANKS_MAX_STAGES);
    }
}

static void format_text(struct prof_buf *o, const struct table *t)
{
    static const char *cols[] = {"avg med", "avg min", "avg max", "p95 med", "p95 min",
                                 "p95 max"};
    const struct prof_ranks_block *ref = t->ref >= 0 ? &t->b[t->ref] : NULL;
    char name[PROF_RANKS_NAME_BYTES * 4 + 8], wall[24];
    size_t width = 24;

    if (ref == NULL) {
        prof_buf_printf(o, "prof ranks: %zu ranks, no window closed on any rank yet\n",
                        t->nranks);
        notes_text(o, t);
        return;
    }
    prof_summary_fmt_dur(wall, sizeof wall, (double)ref->h.wall_ns);
    prof_buf_printf(o, "prof ranks: step %llu, last %llu steps, %zu ranks (window %s on rank %d)\n",
                    (unsigned long long)ref->h.step, (unsigned long long)ref->h.steps, t->nranks,
                    wall, t->ref);
    for (size_t k = 0; k < t->nrows; k++) {
        size_t w = prof_summary_name(name, sizeof name, t->rows[k].name, 1000);
        if (w > width)
            width = w;
    }
    prof_buf_printf(o, "%-*s %5s", (int)width, "stage", "ranks");
    for (int c = 0; c < 6; c++)
        prof_buf_printf(o, " %10s", cols[c]);
    prof_buf_printf(o, " %8s %7s\n", "slowest", "spread");
    for (size_t k = 0; k < t->nrows; k++) {
        const struct row *w = &t->rows[k];
        double v[6] = {w->avg_med, w->avg_min, w->avg_max, w->p95_med, w->p95_min, w->p95_max};
        size_t cols_used = prof_summary_name(name, sizeof name, w->name, 1000);
        char d[24], slow[16];

        prof_buf_printf(o, "%s%*s %5d", name, (int)(width - cols_used), "", w->ranks);
        for (int c = 0; c < 6; c++) {
            prof_summary_fmt_dur(d, sizeof d, v[c]);
            prof_buf_printf(o, " %10s", d);
        }
        snprintf(slow, sizeof slow, "rank %d", w->slowest);
        prof_buf_printf(o, " %8s %6.2fx\n", slow, w->spread);
    }
    if (t->s_rank >= 0) {
        char ex[24], self[24], med[24];
        prof_summary_fmt_dur(ex, sizeof ex, t->s_excess);
        prof_summary_fmt_dur(self, sizeof self, t->s_self);
        prof_summary_fmt_dur(med, sizeof med, t->s_median);
        prof_summary_name(name, sizeof name, t->rows[t->s_row].name, 1000);
        prof_buf_printf(o, "straggler: rank %d in %s, +%s per step (self %s per step, median "
                        "rank %s)\n", t->s_rank, name, ex, self, med);
    } else {
        prof_buf_puts(o, "straggler: none (no rank spent more than the median rank in any "
                         "stage)\n");
    }
    notes_text(o, t);
}

static void json_stat(struct prof_buf *o, const char *key, double med, double min, double max)
{
    prof_buf_printf(o, ",\"%s\":{\"median\":", key);
    prof_buf_double(o, med);
    prof_buf_puts(o, ",\"min\":");
    prof_buf_double(o, min);
    prof_buf_puts(o, ",\"max\":");
    prof_buf_double(o, max);
    prof_buf_puts(o, "}");
}

static void format_json(struct prof_buf *o, const struct table *t)
{
    const struct prof_ranks_block *ref = t->ref >= 0 ? &t->b[t->ref] : NULL;
    static const char *states[] = {"ok", "no_window", "unreadable"};

    prof_buf_printf(o, "{\"prof\":\"ranks\",\"format\":1,\"version\":\"" PROF_VERSION_STRING
                       "\",\"step\":%llu,\"steps\":%llu,\"nranks\":%zu,\"ranks\":[",
                    (unsigned long long)(ref ? ref->h.step : 0),
                    (unsigned long long)(ref ? ref->h.steps : 0), t->nranks);
    for (size_t r = 0; r < t->nranks; r++) {
        const struct prof_ranks_block *b = &t->b[r];
        prof_buf_printf(o, "%s{\"rank\":%zu,\"state\":\"%s\"", r ? "," : "", r,
                        states[t->state[r]]);
        if (t->state[r] == BLOCK_OK)
            prof_buf_printf(o, ",\"step\":%llu,\"steps\":%llu,\"wall_ns\":%llu,\"folded\":%u",
                            (unsigned long long)b->h.step, (unsigned long long)b->h.steps,
                            (unsigned long long)b->h.wall_ns, b->h.folded);
        prof_buf_puts(o, "}");
    }
    prof_buf_puts(o, "],\"stages\":[");
    for (size_t k = 0; k < t->nrows; k++) {
        const struct row *w = &t->rows[k];
        int first = 1;
        prof_buf_puts(o, k ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(o, w->name);
        prof_buf_printf(o, ",\"ranks\":%d", w->ranks);
        json_stat(o, "avg_ns", w->avg_med, w->avg_min, w->avg_max);
        json_stat(o, "p95_ns", w->p95_med, w->p95_min, w->p95_max);
        prof_buf_printf(o, ",\"slowest_rank\":%d,\"spread\":", w->slowest);
        prof_buf_double(o, w->spread);
        prof_buf_puts(o, ",\"per_rank\":[");
        for (size_t r = 0; r < t->nranks; r++) {
            const struct prof_ranks_stage *s;
            if (w->at[r] < 0)
                continue;
            s = &t->b[r].stages[w->at[r]];
            prof_buf_printf(o, "%s{\"rank\":%zu,\"count\":%llu,\"total_ns\":%llu,\"self_ns\":%llu,"
                            "\"max_ns\":%llu,\"avg_ns\":", first ? "" : ",", r,
                            (unsigned long long)s->count, (unsigned long long)s->total_ns,
                            (unsigned long long)s->self_ns, (unsigned long long)s->max_ns);
            prof_buf_double(o, s->avg_ns);
            prof_buf_puts(o, ",\"p50_ns\":");
            prof_buf_double(o, s->p50_ns);
            prof_buf_puts(o, ",\"p95_ns\":");
            prof_buf_double(o, s->p95_ns);
            prof_buf_puts(o, "}");
            first = 0;
        }
        prof_buf_puts(o, "]}");
    }
    prof_buf_puts(o, "],\"straggler\":");
    if (t->s_rank >= 0) {
        prof_buf_printf(o, "{\"rank\":%d,\"stage\":", t->s_rank);
        prof_buf_json_string(o, t->rows[t->s_row].name);
        prof_buf_puts(o, ",\"excess_ns_per_step\":");
        prof_buf_double(o, t->s_excess);
        prof_buf_puts(o, ",\"self_ns_per_step\":");
        prof_buf_double(o, t->s_self);
        prof_buf_puts(o, ",\"median_self_ns_per_step\":");
        prof_buf_double(o, t->s_median);
        prof_buf_puts(o, "}");
    } else {
        prof_buf_puts(o, "null");
    }
    prof_buf_puts(o, "}\n");
}

int prof_ranks_format_blocks(struct prof_buf *out, const void *blocks, size_t nranks, int format)
{
    struct table t;
    int err = table_build(&t, blocks, nranks);

    if (err == 0) {
        if (format == PROF_FORMAT_JSON)
            format_json(out, &t);
        else
            format_text(out, &t);
    }
    table_free(&t);
    if (err == 0 && out->failed)
        err = -ENOMEM;
    return err;
}
