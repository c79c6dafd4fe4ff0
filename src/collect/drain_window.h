/* drain_window.h - step windows held and cut (drain_window.c), for the
 * drain: a STEP record that ends a window (PROF_SUMMARY_EVERY=Nsteps)
 * marks its summary due, or holds it while zones open at the step end;
 * the floor above takes the due summary after the drain. Runtime lock
 * held for everything here. */
#ifndef PROF_DRAIN_WINDOW_H
#define PROF_DRAIN_WINDOW_H

#include <stdint.h>

#include "prof.h"

struct prof_thread;

/* The thread whose step's window is held (NULL: none), and the step
 * whose summary is due (0: none). The drain reads both per record. */
extern struct prof_thread *prof_drain_window_held_;
extern uint64_t prof_drain_due_step_;

/* A STEP record r of t whose window's summary is due: due now when t has
 * no zone open, else held for the zones open at the step (cut_ns: where
 * the next window starts). */
void prof_drain_window_hold_locked(struct prof_thread *t, const prof_record_ *r, uint64_t cut_ns);

int prof_drain_window_check_held_(const prof_record_ *r);

/* Before a record r of t is taken: whether it begins the held step's
 * next window (then the window is released: its summary is due). A GPU
 * record carries no time; a gap may hide anything. */
static inline int prof_drain_window_check_locked(const struct prof_thread *t,
                                                 const prof_record_ *r)
{
    return t == prof_drain_window_held_ ? prof_drain_window_check_held_(r) : 0;
}

/* At the end of a collector pass (self: the pass runs on a recording
 * thread, inside prof_flush or a stats call). */
void prof_drain_window_pass_end_locked(void);

/* t has exited, its last records taken: a window it holds is released. */
void prof_drain_window_thread_gone_locked(const struct prof_thread *t);

/* The summary of a window the drain closed is due: its step and where
 * the next window starts. 1 (and forgotten here) or 0 (none due). */
int prof_drain_due_take(uint64_t *step, uint64_t *cut_ns);

/* A window held for the zones open at its step is released now (an
 * earlier step's window comes before a summary asked for). */
void prof_drain_window_release_locked(void);

/* In a forked child: the parent's held window and due step forgotten. */
void prof_drain_window_atfork_child(void);

#endif
