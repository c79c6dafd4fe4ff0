/* metrics_ancestry.h - whether an ancestor serves this process tree's
 * metrics, read from /proc (metrics_ancestry.c). */
#ifndef PROF_METRICS_ANCESTRY_H
#define PROF_METRICS_ANCESTRY_H

/* Nonzero when an ancestor (up to 32 levels, init excluded) is a prof
 * process started with the same PROF_METRICS: it serves the tree, and
 * this process stays silent. Read once, at the first publish. */
int prof_metrics_ancestor_serves(void);

/* Nonzero when the TCP port (found taken) is listened on by an ancestor
 * that has a prof-metrics thread: one that set PROF_METRICS after it
 * started serves it; this process then says nothing. */
int prof_metrics_port_held_by_ancestor(unsigned port);

#endif
