/* collector.h - the collector thread, on the lifecycle floor: on each
 * wake it drains the rings (drain.h), queues the step summaries the drain
 * marked due (summary_out.h writes them), makes periodic and final
 * reports; start, stop and fork. */
#ifndef PROF_COLLECTOR_H
#define PROF_COLLECTOR_H

#include <stdint.h>

#include "prof.h"

#include "summary.h"

/* Wake period: rings are drained at least this often. */
#define PROF_COLLECT_PERIOD_NS (20 * 1000000ull)

/* Drain every ring (drain.h) and queue the summary it marked due. Lock
 * held. */
void prof_collect_locked(void);

/* The same for a caller that is not the collector (prof_flush, the exit):
 * drains until every ring is empty, writing the step summaries that come
 * due on the way one at a time. Lock held. */
void prof_collect_all_locked(void);


/* Start the thread (runtime lock held). Returns 0 or a negative errno. */
int prof_collector_start_locked(void);

/* Ask the thread to exit and wait for it (runtime lock NOT held). */
void prof_collector_stop(void);

/* Nonzero where waiting for the collector would deadlock: on its thread,
 * and inside a summary handler on any thread. */
int prof_collector_is_self(void);

/* Format a summary (lock held) and deliver it where PROF_SUMMARY or the
 * summary handler says, with the lock released while writing. Called with
 * the lock held; returns with it held. */
void prof_summary_emit_locked(enum prof_summary_kind kind);

/* Print the periodic summaries that are due (by steps or by time). Lock
 * held; released while writing. */
void prof_periodic_locked(uint64_t now);

/* Everything that ends a run: final drain, pending GPU zones, the final
 * summary, the trace's closing ']'. Lock held. */
void prof_final_report_locked(void);

/* fork: the summary writer's lock is taken before the fork (after the
 * runtime lock); in the child, summaries the parent had queued, its
 * threads' held window and its due step are forgotten. */
void prof_collector_atfork_prepare(void);
void prof_collector_atfork_parent(void);
void prof_collector_atfork_child(void);

/* A signal asked for the run to end (SIGINT/SIGTERM, see signals.c). */
extern int prof_pending_signal;

#endif
