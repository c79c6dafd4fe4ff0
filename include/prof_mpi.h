/*
 * prof_mpi.h - the live cross-rank summary over MPI, header-only.
 *
 *     #include <mpi.h>
 *     #include <prof_mpi.h>
 *
 *     for (int step = 0; step < n; step++) {
 *         { PROF_ZONE("data"); ... }
 *         { PROF_ZONE("compute"); ... }
 *         prof_step();
 *         prof_mpi_summary(MPI_COMM_WORLD);
 *     }
 *
 * Run with PROF=1 PROF_SUMMARY_EVERY=Nsteps: at every N-th step each rank
 * packs the window that just closed (one block of PROF_RANKS_BLOCK_SIZE
 * bytes), one MPI_Iallgather moves every rank's block to every rank, and
 * rank 0 prints one cross-rank table naming the straggler (the rank and
 * stage that cost the step the most time). The other ranks print nothing
 * periodic; every rank still prints its own final summary. The table is
 * formatted by libprof (the same formatter as Python's prof.distributed);
 * libprof itself never links MPI: everything MPI is in this header, compiled
 * into the program.
 *
 * Safety (docs/DISTRIBUTED.md):
 * - Call it on every rank of comm, after every prof_step(), on the thread
 *   that steps; between windows it costs one division. Use one communicator
 *   and one call site per process (the header keeps its state per
 *   translation unit).
 * - Only step windows are collective: with PROF_SUMMARY_EVERY=10s it says
 *   so once and returns -EINVAL; every rank keeps its own summaries.
 * - It never hangs a job: it works on a duplicate of comm (so it cannot
 *   mix with the program's own collectives) whose errors are returned,
 *   and waits for the gather with MPI_Test for at most PROF_RANKS_TIMEOUT
 *   (default 60s). When a rank is missing or the gather fails, it says so
 *   once, abandons the request (its buffers are kept, since MPI may still
 *   write them) and every later call returns -ECANCELED: each rank prints
 *   its own summaries again.
 *
 * Returns 1 when this call gathered a window, 0 when the step closed no
 * window, and a negative errno when cross-rank summaries are off:
 * -EINVAL (time windows), -ENOENT (no PROF_SUMMARY_EVERY), -EPERM
 * (PROF_RANKS=0), -ETIMEDOUT / -EIO (this call's gather timed out /
 * failed), -ECANCELED (an earlier one did).
 *
 * prof_mpi_last(buf, size, format) formats the last gathered table again
 * (PROF_FORMAT_TEXT or PROF_FORMAT_JSON; any rank) for a logger, like
 * snprintf; -ENOENT before the first one.
 */
#ifndef PROF_MPI_H
#define PROF_MPI_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "prof.h"

#if defined(__STRICT_ANSI__) && !defined(_POSIX_C_SOURCE)
/* Strict ISO C hides nanosleep: the wait polls MPI_Test without pausing. */
static inline void prof_mpi_pause_(void)
{
}
#else
#include <time.h>
static inline void prof_mpi_pause_(void)
{
    struct timespec ts = {0, 50000};   /* 50 us between two MPI_Test calls */

    nanosleep(&ts, NULL);
}
#endif

struct prof_mpi_state_ {
    int state;                   /* 0 not started, 1 on, -1 off */
    int err;                     /* why off */
    int rank, size;
    MPI_Comm comm;               /* our duplicate */
    uint64_t every, timeout_ns;
    char *last;                  /* size blocks of the last gather, or NULL */
};

static inline struct prof_mpi_state_ *prof_mpi_state_(void)
{
    static struct prof_mpi_state_ s = {0, 0, 0, 0, MPI_COMM_NULL, 0, 0, NULL};

    return &s;
}

/* Wait for req for at most timeout_ns. 1: complete, 0: timed out (req is
 * left pending), -1: failed. */
static inline int prof_mpi_wait_(MPI_Request *req, uint64_t timeout_ns)
{
    double deadline = MPI_Wtime() + (double)timeout_ns / 1e9;
    int done = 0;

    for (;;) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        if (done)
            return 1;
        if (MPI_Wtime() > deadline)
            return 0;
        prof_mpi_pause_();
    }
}

static inline int prof_mpi_off_(struct prof_mpi_state_ *s, int err, const char *why)
{
    s->state = -1;
    s->err = err;
    prof_ranks_abandon(why);
    return err;
}

static inline int prof_mpi_summary(MPI_Comm comm)
{
    struct prof_mpi_state_ *s = prof_mpi_state_();
    uint64_t n = prof_step_count();
    MPI_Request req;
    char *mine, *all;
    int w;

    if (s->state < 0)
        return s->err == -ETIMEDOUT || s->err == -EIO ? -ECANCELED : s->err;
    if (s->state == 0) {
        int err = prof_ranks_start(&s->every, &s->timeout_ns);
        if (err != 0) {
            s->state = -1;
            s->err = err;
            return err;
        }
        s->state = 1;
    }
    if (n == 0 || n % s->every != 0)
        return 0;
    if (s->comm == MPI_COMM_NULL) {
        /* A duplicate, made at the first window (every rank is there),
         * with errors returned instead of aborting the job. */
        MPI_Comm dup;
        if (MPI_Comm_idup(comm, &dup, &req) != MPI_SUCCESS)
            return prof_mpi_off_(s, -EIO, "MPI_Comm_idup failed");
        if ((w = prof_mpi_wait_(&req, s->timeout_ns)) != 1)
            return prof_mpi_off_(s, w == 0 ? -ETIMEDOUT : -EIO,
                                 w == 0 ? "duplicating the communicator timed out: a rank "
                                          "did not reach this step"
                                        : "duplicating the communicator failed");
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        MPI_Comm_rank(dup, &s->rank);
        MPI_Comm_size(dup, &s->size);
        s->comm = dup;
    }
    mine = (char *)malloc(PROF_RANKS_BLOCK_SIZE);
    all = (char *)malloc((size_t)s->size * PROF_RANKS_BLOCK_SIZE);
    if (mine == NULL || all == NULL) {
        /* This rank cannot take part: the others will time out. */
        free(mine);
        free(all);
        return prof_mpi_off_(s, -EIO, "out of memory");
    }
    prof_ranks_pack(mine, PROF_RANKS_BLOCK_SIZE, s->rank);
    if (MPI_Iallgather(mine, PROF_RANKS_BLOCK_SIZE, MPI_BYTE, all, PROF_RANKS_BLOCK_SIZE,
                       MPI_BYTE, s->comm, &req) != MPI_SUCCESS) {
        free(mine);
        free(all);
        return prof_mpi_off_(s, -EIO, "MPI_Iallgather failed");
    }
    if ((w = prof_mpi_wait_(&req, s->timeout_ns)) != 1)
        /* mine and all stay allocated: the abandoned request may still
         * read and write them. */
        return prof_mpi_off_(s, w == 0 ? -ETIMEDOUT : -EIO,
                             w == 0 ? "MPI_Iallgather timed out (PROF_RANKS_TIMEOUT): a rank "
                                      "did not reach this step"
                                    : "MPI_Iallgather failed");
    free(mine);
    if (s->rank == 0)
        prof_ranks_emit(all, (size_t)s->size);
    free(s->last);
    s->last = all;
    return 1;
}

static inline int prof_mpi_last(char *buf, size_t size, int format)
{
    struct prof_mpi_state_ *s = prof_mpi_state_();

    if (s->last == NULL)
        return -ENOENT;
    return prof_ranks_format(s->last, (size_t)s->size, format, buf, size);
}

#endif
