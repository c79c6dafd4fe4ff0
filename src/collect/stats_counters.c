/* stats_counters.c - counters (prof_counter: last, min, max, sum of a
 * value) and marks (prof_mark: a count), one per name, each kept for the
 * whole run and for the current summary window (stats.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "map.h"
#include "stats.h"
#include "stats_private.h"

static struct prof_map counters;    /* interned name -> counter */
static struct prof_map marks;       /* interned name -> mark */

static void counter_add(struct prof_counter_acc *a, double v)
{
    /* NaN or an infinity would poison min, max and avg for the rest of the
     * run (and JSON has no such numbers): counted apart, shown apart. */
    if (!isfinite(v)) {
        a->nonfinite++;
        return;
    }
    if (a->count == 0 || v < a->min)
        a->min = v;
    if (a->count == 0 || v > a->max)
        a->max = v;
    a->count++;
    a->last = v;
    a->sum += v;
}

void prof_stats_counter(const char *raw, double v)
{
    const char *name = canonical(raw, NULL);
    struct prof_counter *c;

    if (name == NULL)
        return;
    if ((c = prof_map_get(&counters, (uintptr_t)name)) == NULL) {
        if ((c = calloc(1, sizeof *c)) == NULL)
            return;
        c->name = name;
        if (prof_map_put(&counters, (uintptr_t)name, c) != 0) {
            free(c);
            return;
        }
    }
    counter_add(&c->run, v);
    counter_add(&c->win, v);
}

void prof_stats_mark(const char *raw)
{
    const char *name = canonical(raw, NULL);
    struct prof_mark *m;

    if (name == NULL)
        return;
    if ((m = prof_map_get(&marks, (uintptr_t)name)) == NULL) {
        if ((m = calloc(1, sizeof *m)) == NULL)
            return;
        m->name = name;
        if (prof_map_put(&marks, (uintptr_t)name, m) != 0) {
            free(m);
            return;
        }
    }
    m->run++;
    m->win++;
}

struct prof_counter *prof_counter_find(const char *name)
{
    const char *n = prof_intern(name);

    return n ? prof_map_get(&counters, (uintptr_t)n) : NULL;
}

static int cmp_counter(const void *a, const void *b)
{
    return strcmp((*(struct prof_counter *const *)a)->name, (*(struct prof_counter *const *)b)->name);
}

static int cmp_mark(const void *a, const void *b)
{
    return strcmp((*(struct prof_mark *const *)a)->name, (*(struct prof_mark *const *)b)->name);
}

struct prof_counter **prof_stats_counters(size_t *n)
{
    struct prof_counter **c = (struct prof_counter **)collect(&counters, n);

    if (c != NULL)
        qsort(c, *n, sizeof *c, cmp_counter);
    return c;
}

struct prof_mark **prof_stats_marks(size_t *n)
{
    struct prof_mark **m = (struct prof_mark **)collect(&marks, n);

    if (m != NULL)
        qsort(m, *n, sizeof *m, cmp_mark);
    return m;
}

void prof_stats_counters_window_reset(void)
{
    for (size_t i = 0; i < counters.cap; i++)
        if (counters.slots[i].key != 0)
            memset(&((struct prof_counter *)counters.slots[i].value)->win, 0,
                   sizeof(struct prof_counter_acc));
    for (size_t i = 0; i < marks.cap; i++)
        if (marks.slots[i].key != 0)
            ((struct prof_mark *)marks.slots[i].value)->win = 0;
}

void prof_stats_counters_reset(void)
{
    free_values(&counters, free);
    free_values(&marks, free);
}
