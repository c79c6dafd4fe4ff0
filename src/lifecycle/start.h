/* start.h - starting the runtime (start.c). */
#ifndef PROF_START_H
#define PROF_START_H

/* NVTX is loaded: zones take the hooked path (set once, at load). */
extern int prof_nvtx_ok;

/* What atexit runs (the API layer's prof_shutdown); set at load, before
 * anything starts. */
void prof_runtime_on_exit(void (*fn)(void));

/* Start the runtime and the collector thread if they are not running.
 * Returns 0 or a negative errno. Any thread; takes the lock. */
int prof_runtime_start(void);

/* In a forked child, on its first record (prof_rt.fork_pending): open its
 * trace and start its collector (fork.c leaves the child set up to come
 * here). */
void prof_fork_setup(void);

/* 0 when a thread may attach: the runtime and its collector run. Starts
 * them when they do not (the first zone of a program that never called
 * prof_enable, or of a forked child). -ESRCH when recording cannot start. */
int prof_runtime_ready(void);

/* The value of prof_on_ while recording: PROF_ON_RECORD_, and
 * PROF_ON_HOOKS_ when zones must take the out-of-line path (NVTX, a CPU
 * counter the runtime does not trust). */
int prof_on_value(void);

#endif
