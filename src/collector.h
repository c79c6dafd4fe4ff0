/* collector.h - the collector thread: drains rings, feeds statistics and
 * the trace, prints periodic summaries. */
#ifndef PROF_COLLECTOR_H
#define PROF_COLLECTOR_H

#include <stdint.h>

#include "prof.h"

#include "summary.h"

/* Wake period: rings are drained at least this often. */
#define PROF_COLLECT_PERIOD_NS (20 * 1000000ull)

/* Start the thread (runtime lock held). Returns 0 or a negative errno. */
int prof_collector_start_locked(void);

/* Ask the thread to exit and wait for it (runtime lock NOT held). */
void prof_collector_stop(void);

/* prof_set_summary_handler: summaries go to fn (NULL: to PROF_SUMMARY). */
void prof_collector_set_summary_handler_locked(prof_summary_fn fn, void *user);

/* Nonzero where waiting for the collector would deadlock: on its thread,
 * and inside a summary handler on any thread. */
int prof_collector_is_self(void);

/* Format a summary (lock held) and deliver it where PROF_SUMMARY or the
 * summary handler says, with the lock released while writing. Called with
 * the lock held; returns with it held. */
void prof_summary_emit_locked(enum prof_summary_kind kind);

/* Wait until no summary is being written with the lock released (lock
 * held; released while waiting). */
void prof_summary_wait_written_locked(void);

/* Print the periodic summaries that are due (by steps or by time). Lock
 * held; released while writing. */
void prof_periodic_locked(uint64_t now);

/* Everything that ends a run: final drain, pending GPU zones, the final
 * summary, the trace's closing ']'. Lock held. */
void prof_final_report_locked(void);

/* fork: the summary writer's lock is taken before the fork (after the
 * runtime lock); in the child, summaries the parent had queued are
 * forgotten. */
void prof_collector_atfork_prepare(void);
void prof_collector_atfork_parent(void);
void prof_collector_atfork_child(void);

/* A signal asked for the run to end (SIGINT/SIGTERM, see lib.c). */
extern int prof_pending_signal;


#endif
