/* children.h - forked workers that end before finishing: a worker
 * killed with SIGKILL (a supervisor's grace period, the OOM killer) writes
 * no summary and leaves its trace without its end; its parent says so,
 * once, on its logger and in its summaries.
 *
 * A process tree shares one small table (MAP_SHARED, made at the first
 * fork while prof is on, inherited by every child). A forked child whose
 * runtime starts takes a slot: its pid, its parent's pid, its trace path.
 * Its final report marks the slot finished. A parent looks at its own
 * children's slots at each summary: a child gone (reaped, or a zombie)
 * whose slot is not finished ended before it could finish. Nothing here
 * ever reaps a child. */
#ifndef PROF_CHILDREN_H
#define PROF_CHILDREN_H

#include <stdint.h>

#include "summary.h"

/* Slots in the table: the forked workers of a tree watched at one time.
 * A child that finds none free is not watched: counted in the table, and
 * every parent's summaries give the count. */
#define PROF_CHILDREN_SLOTS 256

/* fork prepare handler, runtime lock held: makes the table if prof is on
 * and there is none yet (one mmap per tree; a failure only means children
 * are not watched). */
void prof_children_prepare(int prof_on);

/* In a forked child (forked_from != 0), each time its collector starts
 * (runtime lock held): takes a slot, or takes back its own after a
 * restart. No-op in a process that was not forked with a table. */
void prof_children_join(uint32_t forked_from);

/* The final report is written (runtime lock held). */
void prof_children_finished(void);

/* The trace was ended on the signal path, the summary will not be:
 * async-signal-safe. */
void prof_children_trace_closed_from_signal(void);

/* At each summary (runtime lock held; the summary's hook, installed by
 * start.c): logs each child found ended before finishing, once, and frees
 * its slot; frees the slots of children that finished and are gone.
 * Returns what this process has found so far. */
const struct prof_children_ended *prof_children_check_locked(void);

#endif
