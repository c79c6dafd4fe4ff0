/* process.h - who we are: program, host, pid, rank. Read once, refreshed
 * in a forked child. */
#ifndef PROF_PROCESS_H
#define PROF_PROCESS_H

#include <stddef.h>

struct prof_process {
    char program[64];
    char host[64];
    int pid;
    int rank;        /* RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK; -1 if none */
};

/* Ranks from the environment are 0 to PROF_RANK_LIMIT - 1; a variable
 * outside that, or not a number, is said once and ignored. */
#define PROF_RANK_LIMIT 1000000

const struct prof_process *prof_process_get(void);

/* Whether this copy of the runtime found another started in this process
 * before it (said once; each keeps its own statistics). */
int prof_process_other_copy(void);
void prof_process_refresh(void);   /* after fork */

/* Expand %p (pid), %r (rank, 0 if none) and %% in a path pattern into buf.
 * Returns 0, or -ENAMETOOLONG. */
int prof_path_expand(const char *pattern, char *buf, size_t size);

/* Whether this process was started by Python's multiprocessing to run a
 * worker (spawn: `--multiprocessing-fork`; a forkserver and the processes
 * it forks: `from multiprocessing.forkserver import main`), read from
 * /proc/self/cmdline. */
int prof_process_is_mp_child(void);

/* Nonzero when pattern contains %p (%r). */
int prof_path_has_pid(const char *pattern);
int prof_path_has_rank(const char *pattern);

/* Once per process, when the runtime starts, before it takes the runtime
 * lock (this takes the dynamic loader's): keeps the object that contains
 * the runtime (libprof.so, or a plugin that linked libprof_static) loaded
 * for good (RTLD_NODELETE), so that a dlclose cannot unmap the collector,
 * the thread-exit destructor or the signal handlers; and says once, naming
 * both objects, when another copy of the runtime has started in this
 * process. Any thread; returns at once after the first call. */
void prof_process_start(void);

#endif
