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
 * snapshots the window that just closed and the ranks reduce it in
 * PROF_RANKS_ROUNDS rounds of MPI_Iallreduce, each of one fixed-size buffer
 * (at most PROF_RANKS_BUF_SIZE bytes, whatever the number of ranks) with a
 * user-defined op that calls prof_ranks_combine; rank 0 prints one
 * cross-rank table naming the straggler (the rank and stage that cost the
 * step the most time). The other ranks print nothing periodic; every rank
 * still prints its own final summary. The layout, the op and the table are
 * libprof's (the same code as Python's prof.distributed); libprof itself
 * never links MPI: everything MPI is in this header, compiled into the
 * program.
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
 *   and waits for each reduction with MPI_Test for at most
 *   PROF_RANKS_TIMEOUT (default 60s). When a rank is missing or the
 *   reduction fails, it says so once (rank 0 names the ranks that did not
 *   arrive), abandons the request (its buffers are kept, since MPI may
 *   still write them) and every later call returns -ECANCELED: each rank
 *   prints its own summaries again.
 *
 * Returns 1 when this call reduced a window, 0 when the step closed no
 * window, and a negative errno when cross-rank summaries are off:
 * -EINVAL (time windows), -ENOENT (no PROF_SUMMARY_EVERY), -EPERM
 * (PROF_RANKS=0), -ETIMEDOUT / -EIO (this call's reduction timed out /
 * failed), -ECANCELED (an earlier one did).
 *
 * prof_mpi_last(buf, size, format) formats the last reduced table again
 * (PROF_FORMAT_TEXT or PROF_FORMAT_JSON; any rank) for a logger, like
 * snprintf; -ENOENT before the first one.
 */
#ifndef PROF_MPI_H
#define PROF_MPI_H

#include <errno.h>
#include <stdio.h>
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
    MPI_Op op;                   /* prof_ranks_combine */
    MPI_Datatype type[PROF_RANKS_ROUNDS];   /* one round's buffer, one element */
    uint64_t every, timeout_ns;
    void *last;                  /* the state of the last table, or NULL */
};

static inline struct prof_mpi_state_ *prof_mpi_state_(void)
{
    static struct prof_mpi_state_ s;
    static int init;

    if (!init) {
        int r;
        s.comm = MPI_COMM_NULL;
        s.op = MPI_OP_NULL;
        for (r = 0; r < PROF_RANKS_ROUNDS; r++)
            s.type[r] = MPI_DATATYPE_NULL;
        init = 1;
    }
    return &s;
}

/* The user-defined op: each element is one whole round buffer (a
 * contiguous type, so MPI never splits one), combined by libprof. */
static inline void prof_mpi_combine_(void *in, void *inout, int *len, MPI_Datatype *type)
{
    int size = 0, i;

    MPI_Type_size(*type, &size);
    for (i = 0; i < *len; i++)
        prof_ranks_combine((char *)inout + (size_t)i * (size_t)size,
                           (const char *)in + (size_t)i * (size_t)size, (size_t)size);
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

#define PROF_MPI_TAG_ 0x5052   /* the here-messages after a timeout */

/* A reduction timed out: every rank that was waiting tells rank 0 (on
 * comm: our duplicate, or the program's when duplicating it timed out),
 * which listens for a second and names the ranks it did not hear from. */
static inline int prof_mpi_timed_out_(struct prof_mpi_state_ *s, MPI_Comm comm, const char *what,
                                      uint64_t step)
{
    static int here;   /* the message outlives this call: MPI may send it later */
    char why[512];
    int n = 0, rank = 0, size = 1;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != 0) {
        MPI_Request req;
        here = rank;
        if (MPI_Isend(&here, 1, MPI_INT, 0, PROF_MPI_TAG_, comm, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
        snprintf(why, sizeof why, "%s at step %llu timed out (PROF_RANKS_TIMEOUT): a rank did "
                 "not reach this step; rank 0 names it", what, (unsigned long long)step);
        return prof_mpi_off_(s, -ETIMEDOUT, why);
    }
    {
        char *heard = (char *)calloc((size_t)size, 1);
        double until = MPI_Wtime() + 1.0;
        int r, missing = 0;
        if (heard == NULL)
            return prof_mpi_off_(s, -ETIMEDOUT, "the reduction timed out (PROF_RANKS_TIMEOUT)");
        heard[0] = 1;
        while (MPI_Wtime() < until) {
            int flag = 0, from = 0;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, PROF_MPI_TAG_, comm, &flag, &st);
            if (!flag) {
                prof_mpi_pause_();
                continue;
            }
            MPI_Recv(&from, 1, MPI_INT, st.MPI_SOURCE, PROF_MPI_TAG_, comm, MPI_STATUS_IGNORE);
            if (from > 0 && from < size)
                heard[from] = 1;
        }
        n = snprintf(why, sizeof why, "%s at step %llu timed out (PROF_RANKS_TIMEOUT): rank",
                     what, (unsigned long long)step);
        for (r = 0; r < size && n < (int)sizeof why - 40; r++)
            if (!heard[r]) {
                n += snprintf(why + n, sizeof why - (size_t)n, "%s %d", missing ? "," : "", r);
                missing++;
            }
        if (missing == 0)
            snprintf(why + n, sizeof why - (size_t)n, "s all arrived, late");
        else
            snprintf(why + n, sizeof why - (size_t)n, " did not reach this step");
        free(heard);
    }
    return prof_mpi_off_(s, -ETIMEDOUT, why);
}

static inline int prof_mpi_summary(MPI_Comm comm)
{
    struct prof_mpi_state_ *s = prof_mpi_state_();
    uint64_t n = prof_step_count();
    MPI_Request req;
    void *state = NULL, *buf = NULL;
    int w, round;

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
        if ((w = prof_mpi_wait_(&req, s->timeout_ns)) != 1) {
            if (w == 0)
                return prof_mpi_timed_out_(s, comm, "duplicating the communicator", n);
            return prof_mpi_off_(s, -EIO, "duplicating the communicator failed");
        }
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        MPI_Comm_rank(dup, &s->rank);
        MPI_Comm_size(dup, &s->size);
        s->comm = dup;
        if (MPI_Op_create(prof_mpi_combine_, 1, &s->op) != MPI_SUCCESS)
            return prof_mpi_off_(s, -EIO, "MPI_Op_create failed");
    }
    /* malloc's alignment suits the state's int64 words. */
    state = malloc(PROF_RANKS_STATE_SIZE);
    buf = malloc(PROF_RANKS_BUF_SIZE);
    if (state == NULL || buf == NULL) {
        /* This rank cannot take part: the others will time out. */
        free(state);
        free(buf);
        return prof_mpi_off_(s, -EIO, "out of memory");
    }
    if (prof_ranks_snapshot(state, PROF_RANKS_STATE_SIZE, s->rank) != 0) {
        free(state);
        free(buf);
        return prof_mpi_off_(s, -EIO, "this rank's window could not be read");
    }
    for (round = 0; round < PROF_RANKS_ROUNDS; round++) {
        int len = prof_ranks_contribute(state, round, buf, PROF_RANKS_BUF_SIZE, NULL);
        if (len <= 0) {
            free(state);
            free(buf);
            return prof_mpi_off_(s, -EIO, "prof_ranks_contribute failed");
        }
        if (s->type[round] == MPI_DATATYPE_NULL) {
            MPI_Type_contiguous(len, MPI_BYTE, &s->type[round]);
            MPI_Type_commit(&s->type[round]);
        }
        if (MPI_Iallreduce(MPI_IN_PLACE, buf, 1, s->type[round], s->op, s->comm, &req) !=
            MPI_SUCCESS) {
            free(state);
            free(buf);
            return prof_mpi_off_(s, -EIO, "MPI_Iallreduce failed");
        }
        if ((w = prof_mpi_wait_(&req, s->timeout_ns)) != 1) {
            /* buf stays allocated: the abandoned request may still read
             * and write it. */
            free(state);
            if (w == 0)
                return prof_mpi_timed_out_(s, s->comm, "the reduction", n);
            return prof_mpi_off_(s, -EIO, "MPI_Iallreduce failed");
        }
        prof_ranks_result(state, round, buf, (size_t)len);
    }
    free(buf);
    if (s->rank == 0)
        prof_ranks_emit(state);
    free(s->last);
    s->last = state;
    return 1;
}

static inline int prof_mpi_last(char *buf, size_t size, int format)
{
    struct prof_mpi_state_ *s = prof_mpi_state_();

    if (s->last == NULL)
        return -ENOENT;
    return prof_ranks_format(s->last, format, buf, size);
}

#endif
