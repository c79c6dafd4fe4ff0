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

const struct prof_process *prof_process_get(void);
void prof_process_refresh(void);   /* after fork */

/* Expand %p (pid), %r (rank, 0 if none) and %% in a path pattern into buf.
 * Returns 0, or -ENAMETOOLONG. */
int prof_path_expand(const char *pattern, char *buf, size_t size);

/* Nonzero when pattern contains %p. */
int prof_path_has_pid(const char *pattern);

#endif
