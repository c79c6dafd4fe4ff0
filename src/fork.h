/* fork.h - a fork in a recording process (fork.c). */
#ifndef PROF_FORK_H
#define PROF_FORK_H

/* Install the fork handlers: at load, not at start, so that a child
 * forked before the first record still knows it is a child. */
void prof_fork_install(void);

/* In a forked child, on its first record (prof_rt.fork_pending): open its
 * trace and start its collector. */
void prof_fork_setup(void);

#endif
