/* zone.h - the out-of-line zone path (zone.c). */
#ifndef PROF_ZONE_PATH_H
#define PROF_ZONE_PATH_H

#include <stdint.h>

/* Zones ended on another thread than the one that began them, refused
 * (atomic; the collector reports them with the other losses). */
extern uint64_t prof_zones_foreign;

#endif
