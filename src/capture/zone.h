/* zone.h - the out-of-line zone path (zone.c). */
#ifndef PROF_ZONE_PATH_H
#define PROF_ZONE_PATH_H

#include <stdint.h>

/* Zones ended on another thread than the one that began them, refused
 * (atomic; the collector reports them with the other losses). */
extern uint64_t prof_zones_foreign;

/* Contexts (asyncio tasks) that found all PROF_LANES_MAX_ lanes in use
 * and recorded in their thread's own nesting instead (atomic; said once
 * on the log, and in the summary with the losses). */
extern uint64_t prof_lanes_shared;

#endif
