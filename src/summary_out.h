/* summary_out.h - where summaries go (summary_out.c). */
#ifndef PROF_SUMMARY_OUT_H
#define PROF_SUMMARY_OUT_H

#include <stdint.h>

#include "prof.h"
#include "summary.h"

struct prof_buf;

/* Format a summary of kind as of step (wall time to now) and queue it.
 * 0, or -ENOMEM (said once while memory stays short). Lock held. */
int prof_summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t now);

/* Write the queued summaries in order, each with the runtime lock
 * released. Lock held; returns with it held. */
void prof_summary_write_pending_locked(void);

/* Wait until no summary is being written with the lock released (lock
 * held; released while waiting). */
void prof_summary_wait_written_locked(void);

/* The cross-rank table (ranks.c), written where the summaries go and in
 * order with them, as a periodic summary (never muted). Takes text's
 * buffer. Lock held; released while writing. */
int prof_summary_deliver_locked(struct prof_buf *text);

/* prof_set_summary_handler: summaries go to fn (NULL: to PROF_SUMMARY). */
void prof_summary_set_handler_locked(prof_summary_fn fn, void *user);

/* Whether this thread is inside the program's summary handler. */
int prof_summary_in_handler(void);

/* fork: the writer's lock is taken before the fork (after the runtime
 * lock); in the child, summaries the parent had queued are forgotten. */
void prof_summary_out_atfork_prepare(void);
void prof_summary_out_atfork_parent(void);
void prof_summary_out_atfork_child(void);

/* The run's end: close PROF_SUMMARY's file. */
void prof_summary_out_close(void);

#endif
