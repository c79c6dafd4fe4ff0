/* clock.h - ticks from the inline fast path, converted to CLOCK_MONOTONIC ns. */
#ifndef PROF_CLOCK_H
#define PROF_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Choose the tick source (TSC when invariant, else clock_gettime) and take
 * the first calibration point. Idempotent; called before recording is
 * switched on (the choice decides which path zones take). */
void prof_clock_init(void);

/* Refine the tick rate against CLOCK_MONOTONIC. Collector thread only. */
void prof_clock_calibrate(void);

/* The conversion in effect, read once: a drain converts thousands of
 * records with one (reading the published parameters per record would
 * cost a tenth of the drain's time), so a re-fit takes effect at the next
 * drain. */
struct prof_clock_map {
    uint64_t tick0, mono0;
    double ns_per_tick;
};

void prof_clock_map_get(struct prof_clock_map *m);

static inline uint64_t prof_clock_map_ns(const struct prof_clock_map *m, uint64_t ticks)
{
    double d;

    if (ticks >= m->tick0)
        return m->mono0 + (uint64_t)((double)(ticks - m->tick0) * m->ns_per_tick + 0.5);
    d = (double)(m->tick0 - ticks) * m->ns_per_tick;
    return d >= (double)m->mono0 ? 1 : m->mono0 - (uint64_t)(d + 0.5);
}

static inline uint64_t prof_clock_map_delta(const struct prof_clock_map *m, uint64_t ticks)
{
    return (uint64_t)((double)ticks * m->ns_per_tick + 0.5);
}

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t prof_clock_now_ns(void);

/* CLOCK_REALTIME - CLOCK_MONOTONIC now, in nanoseconds. */
int64_t prof_clock_realtime_offset_ns(void);

/* Human-readable name of the tick source, e.g. "tsc (2.300 GHz)". */
void prof_clock_source(char *buf, size_t size);

#endif
