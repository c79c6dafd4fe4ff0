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

/* Convert ticks (from prof_ticks_()) to CLOCK_MONOTONIC nanoseconds. Any
 * thread; uses the latest calibration. */
uint64_t prof_clock_to_ns(uint64_t ticks);

/* Convert a tick difference to nanoseconds. */
uint64_t prof_clock_delta_ns(uint64_t ticks);

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t prof_clock_now_ns(void);

/* CLOCK_REALTIME - CLOCK_MONOTONIC now, in nanoseconds. */
int64_t prof_clock_realtime_offset_ns(void);

/* Human-readable name of the tick source, e.g. "tsc (2.300 GHz)". */
void prof_clock_source(char *buf, size_t size);

#endif
