/* writer.h - the output writer thread (writer.c): the one thread that
 * writes to the outputs' descriptors, so that the collector never waits on
 * a disk, a pipe or a reader.
 *
 * An output keeps its own bounded queue of buffers (summary_out.c: the
 * summaries; trace_queue.c: the trace's batches) and a service function
 * that writes what is queued. Whoever queues (the collector, under the
 * runtime lock, or an application thread in prof_flush) then calls
 * prof_writer_kick(service): the writer thread runs every service it was
 * given until none has anything left, and sleeps until the next kick. When
 * a reader stops reading, the writer blocks in write(2) and the outputs'
 * queues fill up; each output decides what a full queue costs (periodic
 * summaries merged into later ones; trace events dropped), counts it and
 * says so. The collector
 * goes on draining the rings.
 *
 * The writer thread is started on the first kick (and anew in a forked
 * child, where the parent's does not exist), takes no signals (the
 * program's handlers run on the program's threads) and never takes the
 * runtime lock itself; the summary handler it runs (user code) may.
 *
 * For other outputs (the live file, the .prom file): a service of their
 * own, kicked after queueing, gets the same thread; a file replaced
 * atomically is written by the service to a temporary made with mkstemp in
 * the target's directory and renamed there. A service runs on the writer
 * thread only, one at a time, so it needs no lock against itself. */
#ifndef PROF_WRITER_H
#define PROF_WRITER_H

#include <stdint.h>

/* How long the run's end waits for the writer to write what is queued
 * (the final summary, the trace's end) before it says the output is stuck
 * and goes on: PROF_WRITER_DRAIN_NS without a single write completed (a
 * reader that does not read), PROF_WRITER_DRAIN_MAX_NS in all (a reader or
 * a disk that is slow but moving gets the queue, up to 64 MB of trace,
 * unless it is slower than that). */
#define PROF_WRITER_DRAIN_NS (2 * 1000000000ull)
#define PROF_WRITER_DRAIN_MAX_NS (30 * 1000000000ull)

/* How long a program's thread waits for its output to be written
 * (prof_flush: the summaries due and the trace's events; the cross-rank
 * table) before it goes on without it: PROF_WRITER_WAIT_NS without a write
 * completed (the writer is stuck: a reader that does not read), and
 * PROF_WRITER_WAIT_MAX_NS in all (a writer that is moving, but slowly). */
#define PROF_WRITER_WAIT_NS (1 * 1000000000ull)
#define PROF_WRITER_WAIT_MAX_NS (10 * 1000000000ull)

/* Write what the output has queued; nonzero when something was written
 * (or dropped): the writer then runs every service again. Runs on the
 * writer thread, no prof lock held. */
typedef int (*prof_writer_fn)(void);

/* Hand fn to the writer (at most 8 distinct services) and wake it,
 * starting the thread if this process has none. Any thread, any lock held
 * (it takes only the writer's own lock). 0, or a negative errno when the
 * thread cannot be started (said once): nothing is written until a later
 * kick starts it, or the run's end writes it (prof_writer_drain). */
int prof_writer_kick(prof_writer_fn fn);

/* Whether the calling thread is the writer. */
int prof_writer_is_self(void);

/* A service runs a user's handler (a summary handler): inside it, the
 * calling thread counts as one that must never wait on an output (as the
 * collector), whichever thread it is. Thread-local. */
void prof_writer_handler_enter(void);
void prof_writer_handler_leave(void);
int prof_writer_in_handler(void);

/* A write of an output completed (a batch, a summary): the writer is
 * moving. Called by the services. */
void prof_writer_progress(void);

/* Wait until everything kicked before the call has been written: 0, or
 * -ETIMEDOUT when the writer completed no write for stall_ns (it is
 * stuck in one) or was still writing after max_ns. When this process has
 * no writer thread (it could not be started), the services run on the
 * calling thread instead. Must not hold a lock a service takes (the
 * runtime lock: the summary handler may take it). */
int prof_writer_drain(uint64_t stall_ns, uint64_t max_ns);

/* On a program's thread: wait until written(target) is true (what the
 * caller queued, up to target, is written), bounded by
 * PROF_WRITER_WAIT_NS / PROF_WRITER_WAIT_MAX_NS. written() is called with
 * no lock held and may take its output's own locks; the caller must not
 * hold a lock a service takes (the runtime lock: the summary handler may
 * take it). Returns 0 when written; -ETIMEDOUT when the wait gave up
 * (said once on the log); after that, while the writer has completed no
 * write since, every call returns at once (-ETIMEDOUT unless written), so
 * that a stuck reader costs a loop one bound, not one per call; -EDEADLK
 * on the writer itself or in the summary handler, -ESRCH when the writer
 * thread could not be started (nothing waited for). What is not written
 * stays queued, bounded as each output says. */
int prof_writer_wait(int (*written)(uint64_t), uint64_t target);

/* The run's end, after a drain: the writer thread exits once it has
 * nothing left (a program that shut prof down has no prof thread left);
 * the next kick starts a new one. Waits timeout_ns at most for it; a
 * thread still stuck in a write is left to it (-ETIMEDOUT). Same locking
 * rule as prof_writer_drain. */
int prof_writer_stop(uint64_t timeout_ns);

/* fork: the writer's lock is taken before the fork (after the outputs'
 * queue locks); in the child there is no writer thread and nothing
 * pending: the child's first kick starts its own. */
void prof_writer_atfork_prepare(void);
void prof_writer_atfork_parent(void);
void prof_writer_atfork_child(void);

#endif
