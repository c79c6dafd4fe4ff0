/* api_ranks.c - windows and ranks (docs/DISTRIBUTED.md). The reduction
 * itself belongs to the caller's communicator; here are only the window's
 * numbers, read under the lock for ranks.c, and the delivery of its
 * table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "prof_ranks.h"
#include "collector.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "ranks.h"
#include "ranks_table.h"
#include "runtime.h"
#include "stats.h"
#include "summary_out.h"

PROF_API int prof_window_stats_list(prof_stage_stats *out, size_t cap, uint64_t *window_end_step)
{
    const prof_stage_stats *rows;
    size_t n;

    if (out == NULL && cap > 0)
        return -EINVAL;
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_rt_unlock();
        return -ESRCH;
    }
    if ((rows = prof_stats_window_last(&n, NULL, NULL)) == NULL) {
        prof_rt_unlock();
        return -ENOENT;
    }
    if (cap > 0)
        memcpy(out, rows, (n < cap ? n : cap) * sizeof *out);
    /* The kept window ended where the current one began. */
    if (window_end_step != NULL)
        *window_end_step = prof_rt.window_start_step;
    prof_rt_unlock();
    return (int)n;
}

PROF_API uint64_t prof_step_count(void)
{
    return __atomic_load_n(&prof_steps, __ATOMIC_RELAXED);
}

/* 0: not started, 1: cross-rank summaries on, -1: abandoned for good.
 * Runtime lock. */
static int ranks_state;
static uint64_t ranks_timeout_ns;

#define PROF_RANKS_TIMEOUT_DEFAULT_NS (60ull * 1000000000ull)

PROF_API int prof_ranks_start(uint64_t *every_steps, uint64_t *timeout_ns)
{
    static int logged_time, logged_none, logged_timeout;
    const struct prof_config *cfg = prof_config_get();
    const char *v = getenv("PROF_RANKS");
    int err = 0;

    if (v != NULL && strcmp(v, "0") == 0)
        return -EPERM;
    if (cfg->every_ns) {
        prof_log_once(&logged_time, "cross-rank summaries need step windows, and "
                      "PROF_SUMMARY_EVERY is time-based (ranks agree on steps, not on seconds): "
                      "set PROF_SUMMARY_EVERY=Nsteps; each rank prints its own summaries");
        return -EINVAL;
    }
    if (!cfg->every_steps) {
        prof_log_once(&logged_none, "cross-rank summaries need PROF_SUMMARY_EVERY=Nsteps; "
                      "none will be printed");
        return -ENOENT;
    }
    prof_rt_lock();
    if (ranks_state < 0) {
        err = -ECANCELED;
    } else if (ranks_state == 0) {
        const char *t = getenv("PROF_RANKS_TIMEOUT");
        uint64_t ns = 0, steps = 0;
        ranks_timeout_ns = PROF_RANKS_TIMEOUT_DEFAULT_NS;
        if (t != NULL && *t != '\0') {
            if (prof_parse_every(t, &ns, &steps) == 0 && ns > 0)
                ranks_timeout_ns = ns;
            else {
                char q[PROF_LOG_VALUE_SIZE];
                prof_log_once(&logged_timeout, "%s is not valid (expected a duration such as "
                              "30s or 500ms); using 60s",
                              prof_log_value(q, sizeof q, "PROF_RANKS_TIMEOUT", t));
            }
        }
        ranks_state = 1;
        __atomic_store_n(&prof_ranks_muted, 1, __ATOMIC_RELAXED);
    }
    prof_rt_unlock();
    if (err == 0) {
        if (every_steps != NULL)
            *every_steps = cfg->every_steps;
        if (timeout_ns != NULL)
            *timeout_ns = ranks_timeout_ns;
    }
    return err;
}

PROF_API int prof_ranks_snapshot(void *state, size_t size, int rank)
{
    const prof_stage_stats *rows = NULL;
    uint64_t start = 0, wall = 0, end;
    size_t n = 0;
    int err;

    if (state == NULL || size < PROF_RANKS_STATE_SIZE)
        return -EINVAL;
    prof_flush();
    prof_rt_lock();
    if (prof_rt.started)
        rows = prof_stats_window_last(&n, &start, &wall);
    end = prof_rt.window_start_step;
    err = prof_ranks_snapshot_rows(state, size, rank, rows, n, rows ? end : 0,
                                   end > start ? end - start : 0, wall);
    prof_rt_unlock();
    return err;
}

static int ranks_format_buf(struct prof_buf *b, const void *state, int format)
{
    if (state == NULL || ((uintptr_t)state % 8) != 0)
        return -EINVAL;
    if (format == PROF_FORMAT_DEFAULT)
        format = prof_config_get()->format;
    if (format != PROF_FORMAT_TEXT && format != PROF_FORMAT_JSON)
        return -EINVAL;
    return prof_ranks_format_state(b, state, format);
}

PROF_API int prof_ranks_format(const void *state, int format, char *buf, size_t size)
{
    struct prof_buf b = {0};
    int err;

    if (buf == NULL && size > 0)
        return -EINVAL;
    if ((err = ranks_format_buf(&b, state, format)) != 0) {
        prof_buf_free(&b);
        return err;
    }
    return prof_buf_snprint(&b, buf, size);
}

PROF_API int prof_ranks_emit(const void *state)
{
    struct prof_buf b = {0};
    int err;

    if (prof_collector_is_self())
        return -EDEADLK;
    if ((err = ranks_format_buf(&b, state, PROF_FORMAT_DEFAULT)) != 0) {
        prof_buf_free(&b);
        return err;
    }
    prof_rt_lock();
    err = prof_summary_deliver_locked(&b);
    prof_rt_unlock();
    return err;
}

PROF_API void prof_ranks_abandon(const char *why)
{
    int was;

    prof_rt_lock();
    was = ranks_state;
    ranks_state = -1;
    __atomic_store_n(&prof_ranks_muted, 0, __ATOMIC_RELAXED);
    prof_rt_unlock();
    if (was >= 0)
        prof_log("cross-rank summary failed (%s); each rank prints its own summaries again",
                 why != NULL ? why : "no reason given");
}
