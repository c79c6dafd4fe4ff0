/* wake.h - how application threads wake the collector: one futex word,
 * so that the common case (the collector is awake anyway) costs an atomic
 * exchange and no system call, and every waker is async-signal-safe. */
#ifndef PROF_WAKE_H
#define PROF_WAKE_H

#include <stdint.h>

/* Any thread, signal handlers included. */
void prof_wake_collector(void);

/* The collector: sleep until woken or until the CLOCK_MONOTONIC time
 * until_ns. Returns at once when a wake came since the last wait. */
void prof_wake_wait(uint64_t until_ns);

/* In a forked child: no sleeper, no pending wake. */
void prof_wake_atfork_child(void);

#endif
