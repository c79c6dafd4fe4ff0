/* summary_out.h - where summaries go (summary_out.c). */
#ifndef PROF_SUMMARY_OUT_H
#define PROF_SUMMARY_OUT_H

#include <stdint.h>

#include "prof.h"
#include "summary.h"

struct prof_buf;

/* Format a summary of kind as of step (wall time to now) and queue it for
 * the writer thread (writer.h), which writes it in order with the others
 * (the collector asks prof_summary_queue_full first for a periodic one).
 * 0, or -ENOMEM (said once while memory stays short). Lock held. */
int prof_summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t now);

/* Whether the summaries waiting for the writer fill their bound (256, or
 * 4 MB of text: a reader that does not read): then the collector makes no
 * periodic summary and keeps its window open, so that the next one merges
 * it, or, for a due step with none after it, the one the run's end makes
 * (counted; said once). */
int prof_summary_queue_full(void);

/* prof_reset: the window starts anew; periodic summaries not made before
 * it are not counted in the next one's merged_windows. Lock held. */
void prof_summary_window_reset_locked(void);

/* Wait until every summary queued before the call is written by the
 * writer: prof_flush's promise for its output. Bounded (prof_writer_wait:
 * a writer that completes no write for PROF_WRITER_WAIT_NS is left to
 * it, and not waited for again while it stays stuck). An application
 * thread only; the lock is held, released while waiting. Returns 0, or
 * -ETIMEDOUT / -ESRCH when the summaries are still queued; 0 at once in
 * the summary handler. */
int prof_summary_wait_written_locked(void);

/* The cross-rank table (ranks.c), written where the summaries go and in
 * order with them, as a periodic summary (never muted), and waited for
 * like prof_flush's. Takes text's buffer. Lock held; released while
 * waiting. */
int prof_summary_deliver_locked(struct prof_buf *text);

/* prof_set_summary_handler: summaries go to fn (NULL: to PROF_SUMMARY). */
void prof_summary_set_handler_locked(prof_summary_fn fn, void *user);

/* Whether this thread is inside the program's summary handler. */
int prof_summary_in_handler(void);

/* fork: the queue's lock and the writer thread's (writer.h) are taken
 * before the fork (after the runtime lock), never the lock held across a
 * write, so fork does not wait on a stalled reader; in the child,
 * summaries the parent had queued are forgotten and there is no writer
 * thread until the child queues something. */
void prof_summary_out_atfork_prepare(void);
void prof_summary_out_atfork_parent(void);
void prof_summary_out_atfork_child(void);

/* The run's end (the last step of prof_final_report_locked): wait for the
 * writer to write what is queued, the final summary and the trace's end,
 * PROF_WRITER_DRAIN_NS at most with the lock released; then say how often
 * periodic summaries were merged for a writer behind, if ever, and either
 * close PROF_SUMMARY's file or say in one line that the writer is stuck.
 * Lock held. */
void prof_summary_out_close(void);

#endif
