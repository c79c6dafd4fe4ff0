/* fork.h - a fork in a recording process (fork.c). */
#ifndef PROF_FORK_H
#define PROF_FORK_H

/* Install the fork handlers: at load, not at start, so that a child
 * forked before the first record still knows it is a child. Also reads
 * PROF_PARENT_PID (prof_rt.parent_env) and, with PROF=1, sets it to this
 * process's pid for the processes it starts (fork.c). */
void prof_fork_install(void);

#endif
