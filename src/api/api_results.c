/* api_results.c - the results API: prof_flush, the statistics of a stage
 * or of all of them, counters, the summary on demand, where summaries go,
 * prof_reset. Every call but prof_reset drains the rings first, so it
 * sees every zone that ended before it; prof_reset forgets them instead. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "clock.h"
#include "collector.h"
#include "drain.h"
#include "env.h"
#include "fdio.h"
#include "json.h"
#include "loss.h"
#include "order.h"
#include "runtime.h"
#include "stats.h"
#include "summary.h"
#include "summary_out.h"
#include "trace.h"
#include "wake.h"


/* Take the lock with everything drained. Returns 0, or -ESRCH / -EDEADLK
 * (lock not taken). */
static int lock_flushed(void)
{
    if (prof_collector_is_self())
        return -EDEADLK;
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_rt_unlock();
        return -ESRCH;
    }
    prof_collect_all_locked();
    /* The writer writes what this drain gave the trace: this thread never
     * waits on the disk (prof_flush waits for it, bounded). */
    if (prof_trace_pending())
        prof_wake_collector();
    return 0;
}

PROF_API int prof_flush(void)
{
    int err = lock_flushed();

    if (err == 0) {
        /* A step summary that became due before the call is out when it
         * returns, not at the collector's next wake, and so is one the
         * collector is writing right now; and the trace holds the zones.
         * Both are the writer thread's to write: waited for here with the
         * runtime lock released, bounded (writer.h), so that a reader that
         * does not read costs this thread one bound per stall, never the
         * program. The numbers are complete either way. */
        prof_periodic_locked(prof_clock_now_ns());
        prof_summary_wait_written_locked();
        prof_rt_unlock();
        prof_trace_write();
    }
    return err;
}

PROF_API int prof_stats(const char *name, prof_stage_stats *out)
{
    struct prof_stage *s;
    int err;

    if (name == NULL || out == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    err = -ENOENT;
    if ((s = prof_stats_find(name)) != NULL) {
        prof_stats_tree();
        prof_stats_fill(s, 0, prof_clock_now_ns() - prof_rt.start_ns, out);
        /* The tree has no cycle: the walk ends. */
        for (const struct prof_stage *p = s->parent; p != NULL; p = p->parent)
            out->depth++;
        err = out->count ? 0 : -ENOENT;
    }
    prof_rt_unlock();
    return err;
}

/* Rows out[k] = out[order[k]] for k < n, in place, following each cycle
 * of the permutation once (order[] is spent). */
static void permute(prof_stage_stats *out, uint32_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        prof_stage_stats first;
        size_t j = k;

        if (order[k] == k)
            continue;
        first = out[k];
        while (order[j] != k) {
            size_t from = order[j];
            out[j] = out[from];
            order[j] = (uint32_t)j;
            j = from;
        }
        out[j] = first;
        order[j] = (uint32_t)j;
    }
}

/* A million stages is 150 MB of rows and a second of sorting and page
 * faults: the caller's rows are touched before the lock, the stages are
 * filled under it in no order, and put in summary order after it, so the
 * collector (and every thread waiting on the lock) is held only for the
 * copy. */
PROF_API int prof_stats_list(prof_stage_stats *out, size_t cap)
{
    struct prof_stage **all = NULL;
    struct prof_order_item *items = NULL;
    uint32_t *order = NULL;
    size_t n, len = 0;
    uint64_t wall;
    int err;

    if (out == NULL && cap > 0)
        return -EINVAL;
    if (prof_collector_is_self())
        return -EDEADLK;
    if (cap > 0) {
        prof_rt_lock();
        n = prof_rt.started ? prof_stats_nstages() : 0;
        prof_rt_unlock();
        memset(out, 0, (n < cap ? n : cap) * sizeof *out);
    }
    if ((err = lock_flushed()) != 0)
        return err;
    n = prof_stats_nstages();
    if (cap == 0 || n == 0) {
        prof_rt_unlock();
        return (int)n;
    }
    prof_stats_tree();
    wall = prof_clock_now_ns() - prof_rt.start_ns;
    if ((all = prof_stats_all(&n)) != NULL)
        items = prof_stats_items(all, n, 0);
    order = malloc(n * 2 * sizeof *order);
    err = -ENOMEM;
    if (items == NULL || order == NULL) {
        prof_rt_unlock();
    } else if (n <= cap) {
        for (size_t i = 0; i < n; i++)
            prof_stats_fill(all[i], 0, wall, &out[i]);
        prof_rt_unlock();
        err = prof_order_tree(items, n, order, order + n, &len);
        if (err == 0) {
            for (size_t k = 0; k < len; k++)
                out[order[k]].depth = order[n + k];
            permute(out, order, len);
        }
    } else {
        /* Which stages fill the first cap rows depends on the order. */
        err = prof_order_tree(items, n, order, order + n, &len);
        for (size_t k = 0; err == 0 && k < len && k < cap; k++) {
            prof_stats_fill(all[order[k]], 0, wall, &out[k]);
            out[k].depth = order[n + k];
        }
        prof_rt_unlock();
    }
    free(order);
    free(items);
    free(all);
    return err != 0 ? err : (int)len;
}

static void counter_fill(const struct prof_counter *c, prof_counter_stats *out)
{
    memset(out, 0, sizeof *out);
    out->name = c->name;
    out->count = c->run.count;
    out->last = c->run.last;
    out->min = c->run.min;
    out->max = c->run.max;
    out->avg = c->run.count ? c->run.sum / (double)c->run.count : 0;
}

PROF_API int prof_counter_stats_get(const char *name, prof_counter_stats *out)
{
    struct prof_counter *c;
    int err;

    if (name == NULL || out == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    c = prof_counter_find(name);
    if (c != NULL)
        counter_fill(c, out);
    prof_rt_unlock();
    return c != NULL ? 0 : -ENOENT;
}

PROF_API int prof_counter_stats_list(prof_counter_stats *out, size_t cap)
{
    struct prof_counter **counters;
    size_t n;
    int err;

    if (out == NULL && cap > 0)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    counters = prof_stats_counters(&n);
    for (size_t i = 0; counters != NULL && i < n && i < cap; i++)
        counter_fill(counters[i], &out[i]);
    prof_rt_unlock();
    free(counters);
    return counters != NULL ? (int)n : -ENOMEM;
}

PROF_API int prof_summary_snprint(char *buf, size_t size, int format)
{
    struct prof_buf b = {0};
    int err;

    if (buf == NULL && size > 0)
        return -EINVAL;
    if (format == PROF_FORMAT_DEFAULT)
        format = prof_config_get()->format;
    if (format != PROF_FORMAT_TEXT && format != PROF_FORMAT_JSON)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    prof_summary_format(&b, format, PROF_KIND_DEMAND,
                        __atomic_load_n(&prof_steps, __ATOMIC_RELAXED), prof_clock_now_ns(), 1);
    prof_rt_unlock();
    if (b.failed) {
        prof_buf_free(&b);
        return -ENOMEM;
    }
    return prof_buf_snprint(&b, buf, size);
}

PROF_API int prof_summary_print(FILE *f)
{
    struct prof_buf b = {0};
    int err;

    if (f == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    prof_summary_format(&b, prof_config_get()->format, PROF_KIND_DEMAND,
                        __atomic_load_n(&prof_steps, __ATOMIC_RELAXED), prof_clock_now_ns(), 1);
    prof_rt_unlock();
    err = b.failed ? -ENOMEM : 0;
    if (!err) {
        /* A pipe whose reader has gone gives -EIO, not death by SIGPIPE
         * (docs/CONFIG.md): block it while writing, consume the one we
         * caused. */
        sigset_t old;
        int saved = 0;

        prof_sigpipe_block(&old);
        errno = 0;
        if (fwrite(b.data, 1, b.len, f) != b.len || fflush(f) != 0) {
            saved = errno;
            err = -EIO;
        }
        prof_sigpipe_restore(&old, -saved);
    }
    prof_buf_free(&b);
    return err;
}

PROF_API void prof_set_summary_handler(prof_summary_fn fn, void *user)
{
    prof_rt_lock();
    prof_summary_set_handler_locked(fn, user);
    prof_rt_unlock();
}

PROF_API int prof_reset(void)
{
    if (prof_collector_is_self())
        return -EDEADLK;
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_rt_unlock();
        return 0;
    }
    /* Step summaries are cut at their step records: the windows before
     * the reset get theirs from a drain first. Otherwise nothing is
     * drained: the records that ended before now are forgotten as the
     * collector reaches them (prof_collect_forget_locked), so a reset
     * beside threads that keep their rings full waits for one drain at
     * most (224 ms with four such threads when it drained them itself). */
    if (prof_config_get()->every_steps)
        prof_collect_all_locked();
    prof_collect_forget_locked();
    prof_stats_reset();
    prof_summary_window_reset_locked();
    prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
    prof_rt.window_start_step = __atomic_load_n(&prof_steps, __ATOMIC_RELAXED);
    prof_rt.dropped = prof_rt.dropped_window = 0;
    prof_loss_reset();
    prof_rt_unlock();
    return 0;
}

