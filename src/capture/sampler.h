/* sampler.h - on-CPU samples: a per-thread CPU-time timer whose signal
 * writes a sample into the thread's own ring (sampler.c has the design). */
#ifndef PROF_SAMPLER_H
#define PROF_SAMPLER_H

#include <stdint.h>

struct prof_thread;

/* The sampling period, in thread CPU time. The kernel checks CPU-time
 * timers at its tick (250 Hz here), so a shorter period only makes each
 * signal carry overruns; this one caps the signal rate at 250 per second
 * and busy thread on kernels that tick at 1000 Hz too. */
#define PROF_SAMPLER_PERIOD_NS 4000000u

/* Install the signal handler, once per process (runtime start, lock held).
 * Does nothing with PROF_CPU=0. Returns 0 when sampling is on. */
int prof_sampler_install(void);

/* Whether samples are being taken (installed, and not stopped because the
 * program took the signal over). Any thread. */
int prof_sampler_on(void);

/* Whether the sampler was installed (PROF_CPU=1 and the runtime started):
 * the stages' on-CPU figures mean something, also after it stopped. */
int prof_sampler_installed(void);

/* The calling thread, t, starts its CPU-time timer (attach, or a forked
 * child's surviving thread). Sets t->cpu_timed when it runs. Owner only;
 * async-signal-safe (attaching may happen inside a signal handler). */
void prof_sampler_thread_start(struct prof_thread *t);

/* Delete t's timer, if it has one: its thread is exiting (the owner), or
 * sampling stopped (the collector, lock held). Either may come first; the
 * timer is deleted once. */
void prof_sampler_thread_stop(struct prof_thread *t);

/* In a forked child: timers are not inherited, and the parent's ids mean
 * nothing here. t (the thread that forked, or NULL) starts afresh. */
void prof_sampler_atfork_child(struct prof_thread *t);

/* The collector, once per pass (lock held): if the program installed its
 * own handler for the sampler's signal, stop sampling, say so once, and
 * delete every thread's timer (threads: the registry list); else disarm
 * every timer while recording is off, and arm them again when it is on.
 * Returns nonzero while sampling is on. */
int prof_sampler_check_locked(struct prof_thread *threads);

#endif
