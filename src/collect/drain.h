/* drain.h - the drain, on the collect floor: every ring read up to its
 * head, each record resolved once (its stage, its time in ns, its self
 * time) and handed to every sink (sink.h); step windows cut and their
 * summaries marked due (drain_window.h); GPU zones polled (drain_gpu.h).
 * The floor above (collector.c: the collector thread, prof_flush's drain,
 * the exit) calls it and queues the summaries it marks due. Runtime lock
 * held for everything here. */
#ifndef PROF_DRAIN_H
#define PROF_DRAIN_H

#include <stdint.h>

/* Drain every ring once. */
void prof_drain_locked(void);

/* Set around the collector thread's drains (and prof_flush's): a drain
 * stops at a due step while its ring has little else waiting, so that the
 * window is cut exactly at its step. */
extern int prof_drain_exact_steps;
/* The last drain stopped at a due step, with records left. */
extern int prof_drain_stopped;

/* Every sink's tick (periodic outputs: prof-top, PROF_METRICS). */
void prof_drain_tick(uint64_t now_ns);

/* prof_reset(): from now on the drain hands what ended before this call
 * to every sink but the statistics, and the losses counted so far are
 * forgotten. Drains nothing: a reset waits only for the drain under way
 * (the lock). */
void prof_collect_forget_locked(void);

/* In a forked child: the parent's held window and due step, its
 * threads' losses counted and what a reset forgets, forgotten. */
void prof_drain_atfork_child(void);

#endif
