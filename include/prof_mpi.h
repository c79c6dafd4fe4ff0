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
 *   that steps; between windows it costs one division (and, until the
 *   duplicate communicator is ready, one MPI_Test). Use one communicator
 *   and one call site per process (the header keeps its state per
 *   translation unit). The first call starts duplicating comm (a
 *   collective): make it at the same point of the program on every rank.
 * - Only step windows are collective: with PROF_SUMMARY_EVERY=10s it says
 *   so once and returns -EINVAL; every rank keeps its own summaries.
 * - It never hangs a job: it works on a duplicate of comm (so it cannot
 *   mix with the program's own collectives) whose errors are returned,
 *   and waits for each reduction with MPI_Test for at most
 *   PROF_RANKS_TIMEOUT (default 60s). When a rank is missing or the
 *   reduction fails, the lowest rank that waited names the ranks that did
 *   not arrive and tells every rank, which says so once (a rank that had
 *   not started that window yet does not wait for it), abandons the
 *   request (its buffers are kept, since MPI may still write them) and
 *   every later call returns -ECANCELED: each rank prints its own
 *   summaries again.
 *
 * Returns 1 when this call reduced a window, 0 when the step closed no
 * window, and a negative errno when cross-rank summaries are off:
 * -EINVAL (time windows), -ENOENT (no PROF_SUMMARY_EVERY), -EPERM
 * (PROF_RANKS=0), -ETIMEDOUT / -EIO (this call's reduction timed out /
 * failed), -ECANCELED (an earlier one did, or another rank gave up on
 * this window).
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
#include "prof_ranks.h"

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

/* How a failed window is settled (docs/DISTRIBUTED.md, "A rank that does
 * not reach a window"). MPI cannot cancel a collective, and a rank that
 * gives up leaves its request behind, so a rank that waits later for the
 * same window would wait a whole timeout again. Two kinds of small
 * point-to-point messages, on prof's duplicate communicator (or on the
 * program's when duplicating it timed out), make one timeout the most
 * anyone waits:
 *
 * - here (PROF_MPI_TAG_HERE_, the window's step): a rank that timed out
 *   sends it to the candidate namers, ranks 0 .. PROF_MPI_NAMERS_-1. A
 *   candidate that is still waiting at the same window gives up as soon as
 *   one arrives (the reduction cannot complete without the rank that sent
 *   it). The lowest candidate that hears from no lower one within a second
 *   names the ranks it did not hear from: rank 1 names rank 0 when rank 0
 *   is the missing one. A here-message of another window is stale (a rank
 *   that gave up earlier) and ignored.
 * - abort (PROF_MPI_TAG_ABORT_, the namer's words): the namer sends it to
 *   every other rank. Every rank looks for one before it starts a window
 *   and while it waits for one, and goes off at once with those words
 *   instead of waiting: a rank that steps at another rate costs the others
 *   its own timeout only, not a second one at their window.
 *
 * Every rank that timed out waits up to PROF_MPI_GRACE_S_ for the words, so
 * that all ranks print the same line. The here-messages go to a few ranks
 * only (not all to all) so that a failure costs O(ranks) messages; when
 * all of those are missing, no rank names anyone. */
#define PROF_MPI_TAG_HERE_ 0x5052
#define PROF_MPI_TAG_ABORT_ 0x5053
#define PROF_MPI_NAMERS_ 8         /* the ranks that may name the missing ones */
#define PROF_MPI_LISTEN_S_ 1.0     /* how long a candidate namer listens */
#define PROF_MPI_GRACE_S_ 3.0      /* how long the others wait for its words */
#define PROF_MPI_WHY_ 512          /* the words, NUL included, at most */

struct prof_mpi_state_ {
    int state;                   /* 0 not started, 1 on, -1 off */
    int err;                     /* why off */
    int rank, size;
    MPI_Comm user;               /* the program's communicator */
    MPI_Comm comm;               /* our duplicate, once made */
    MPI_Comm dup;                /* the duplicate while MPI_Comm_idup runs */
    MPI_Request dup_req;         /* MPI_REQUEST_NULL once done */
    MPI_Op op;                   /* prof_ranks_combine */
    MPI_Datatype type[PROF_RANKS_ROUNDS];   /* one round's buffer, one element */
    uint64_t every, timeout_ns;
    int heard_from;              /* a rank whose here-message ended our wait, or -1 */
    void *last;                  /* the state of the last table, or NULL */
};

static inline struct prof_mpi_state_ *prof_mpi_state_(void)
{
    static struct prof_mpi_state_ s;
    static int init;

    if (!init) {
        int r;
        s.user = MPI_COMM_NULL;
        s.comm = MPI_COMM_NULL;
        s.dup = MPI_COMM_NULL;
        s.dup_req = MPI_REQUEST_NULL;
        s.op = MPI_OP_NULL;
        for (r = 0; r < PROF_RANKS_ROUNDS; r++)
            s.type[r] = MPI_DATATYPE_NULL;
        s.heard_from = -1;
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

/* The communicator the failure messages travel on: ours once made (the
 * program's own receives cannot take them there), else the program's. */
static inline MPI_Comm prof_mpi_talk_(const struct prof_mpi_state_ *s)
{
    return s->comm != MPI_COMM_NULL ? s->comm : s->user;
}

/* Has a namer's abort arrived (on ours or on the program's communicator:
 * a rank whose duplicate was never made talks on the program's)? 1 and
 * the words in why, else 0. */
static inline int prof_mpi_aborted_(struct prof_mpi_state_ *s, char *why)
{
    MPI_Comm c[2];
    int i;

    c[0] = s->comm;
    c[1] = s->user;
    for (i = 0; i < 2; i++) {
        MPI_Status st;
        int flag = 0, n = 0;
        if (c[i] == MPI_COMM_NULL || (i == 1 && c[1] == c[0]))
            continue;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PROF_MPI_TAG_ABORT_, c[i], &flag, &st) != MPI_SUCCESS ||
            !flag)
            continue;
        MPI_Get_count(&st, MPI_CHAR, &n);
        if (n < 1 || n > PROF_MPI_WHY_ ||
            MPI_Recv(why, n, MPI_CHAR, st.MPI_SOURCE, PROF_MPI_TAG_ABORT_, c[i],
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            snprintf(why, PROF_MPI_WHY_, "rank %d gave up on a reduction", st.MPI_SOURCE);
        why[PROF_MPI_WHY_ - 1] = '\0';
        return 1;
    }
    return 0;
}

/* Take the next here-message on comm, if any. 1: *from sent one for the
 * window of step (a stale one, of another window, is dropped and counts
 * as 0), 0: none. */
static inline int prof_mpi_here_(MPI_Comm comm, uint64_t step, int *from)
{
    unsigned long long w = 0;
    MPI_Status st;
    int flag = 0;

    if (MPI_Iprobe(MPI_ANY_SOURCE, PROF_MPI_TAG_HERE_, comm, &flag, &st) != MPI_SUCCESS || !flag)
        return 0;
    if (MPI_Recv(&w, 1, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, PROF_MPI_TAG_HERE_, comm,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS || w != (unsigned long long)step)
        return 0;
    *from = st.MPI_SOURCE;
    return 1;
}

/* Wait for req, the window of step's, for at most timeout_ns. 1:
 * complete, 0: timed out, -1: failed (req is left pending on 0 and -1),
 * 2: a namer's words arrived (in why), 3: a rank at this window gave up
 * (s->heard_from). */
static inline int prof_mpi_wait_(struct prof_mpi_state_ *s, MPI_Request *req, uint64_t step,
                                 char *why)
{
    double deadline = MPI_Wtime() + (double)s->timeout_ns / 1e9;
    int done = 0, from = -1;

    for (;;) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        if (done)
            return 1;
        if (prof_mpi_aborted_(s, why))
            return 2;
        if (prof_mpi_here_(prof_mpi_talk_(s), step, &from)) {
            s->heard_from = from;
            return 3;
        }
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

/* Append " r" or ", r" for each rank r whose mark is want, then " ..."
 * when the rest would not leave room bytes (at least 64) for the words
 * after the list. */
static inline void prof_mpi_list_(char *buf, size_t size, int *n, const char *mark, int nmark,
                                  char want, int room)
{
    int r, count = 0;

    for (r = 0; r < nmark; r++) {
        if (mark[r] != want)
            continue;
        if (*n >= (int)size - room) {
            *n += snprintf(buf + *n, size - (size_t)*n, " ...");
            return;
        }
        *n += snprintf(buf + *n, size - (size_t)*n, "%s %d", count ? "," : "", r);
        count++;
    }
}

/* This rank timed out (or saw a rank give up) at the window of step:
 * settle who names whom (see above), say so and go off. */
static inline int prof_mpi_timed_out_(struct prof_mpi_state_ *s, const char *what, uint64_t step)
{
    /* Sent without waiting: the buffers outlive this call. */
    static unsigned long long here;
    static char words[PROF_MPI_WHY_];
    MPI_Comm comm = prof_mpi_talk_(s);
    char why[PROF_MPI_WHY_];
    int rank = 0, size = 1, namers, r, lower = 0, from = -1;
    char *heard = NULL;
    double until;

    if (prof_mpi_aborted_(s, why))
        return prof_mpi_off_(s, -ECANCELED, why);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    namers = size < PROF_MPI_NAMERS_ ? size : PROF_MPI_NAMERS_;
    here = (unsigned long long)step;
    for (r = 0; r < namers; r++) {
        MPI_Request req;
        if (r != rank &&
            MPI_Isend(&here, 1, MPI_UNSIGNED_LONG_LONG, r, PROF_MPI_TAG_HERE_, comm, &req) ==
            MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    if (rank < namers && (heard = (char *)calloc((size_t)size, 1)) != NULL) {
        heard[rank] = 1;
        if (s->heard_from >= 0 && s->heard_from < size) {
            heard[s->heard_from] = 1;
            lower = s->heard_from < rank;
        }
        until = MPI_Wtime() + PROF_MPI_LISTEN_S_;
        while (!lower && MPI_Wtime() < until) {
            if (prof_mpi_aborted_(s, why)) {
                free(heard);
                return prof_mpi_off_(s, -ECANCELED, why);
            }
            if (!prof_mpi_here_(comm, step, &from)) {
                prof_mpi_pause_();
                continue;
            }
            if (from >= 0 && from < size)
                heard[from] = 1;
            lower = from < rank;
        }
        if (!lower) {
            /* The namer: no lower rank timed out at this window. */
            int missing = 0, n;
            for (r = 0; r < size; r++)
                missing += !heard[r];
            n = snprintf(words, sizeof words, "%s at step %llu timed out on rank %d "
                         "(PROF_RANKS_TIMEOUT %gs): ", what, (unsigned long long)step, rank,
                         (double)s->timeout_ns / 1e9);
            if (missing == 0) {
                snprintf(words + n, sizeof words - (size_t)n, "all ranks arrived, late");
            } else {
                n += snprintf(words + n, sizeof words - (size_t)n, "rank%s",
                              missing > 1 ? "s" : "");
                /* Room after this list for the other one, when it follows. */
                prof_mpi_list_(words, sizeof words, &n, heard, size, 0,
                               size - missing < missing ? 192 : 64);
                n += snprintf(words + n, sizeof words - (size_t)n, " did not reach this step");
                if (size - missing < missing) {
                    /* Most ranks are elsewhere: the odd one is the one that came. */
                    n += snprintf(words + n, sizeof words - (size_t)n, "; only rank%s",
                                  size - missing > 1 ? "s" : "");
                    prof_mpi_list_(words, sizeof words, &n, heard, size, 1, 64);
                    snprintf(words + n, sizeof words - (size_t)n, " did (another step rate?)");
                }
            }
            free(heard);
            for (r = 0; r < size; r++) {
                MPI_Request req;
                if (r != rank &&
                    MPI_Isend(words, (int)strlen(words) + 1, MPI_CHAR, r, PROF_MPI_TAG_ABORT_,
                              comm, &req) == MPI_SUCCESS)
                    MPI_Request_free(&req);
            }
            return prof_mpi_off_(s, -ETIMEDOUT, words);
        }
        free(heard);
    }
    /* A lower rank names them: wait for its words. */
    until = MPI_Wtime() + PROF_MPI_GRACE_S_;
    while (MPI_Wtime() < until) {
        if (prof_mpi_aborted_(s, why))
            return prof_mpi_off_(s, -ETIMEDOUT, why);
        while (prof_mpi_here_(comm, step, &from))
            ;   /* drained: no one reads them here */
        prof_mpi_pause_();
    }
    snprintf(why, sizeof why, "%s at step %llu timed out on rank %d (PROF_RANKS_TIMEOUT %gs): "
             "a rank did not reach this step, and no rank named it within %gs", what,
             (unsigned long long)step, rank, (double)s->timeout_ns / 1e9, PROF_MPI_GRACE_S_);
    return prof_mpi_off_(s, -ETIMEDOUT, why);
}

/* A wait that did not complete: say why, from prof_mpi_wait_'s answer. */
static inline int prof_mpi_failed_(struct prof_mpi_state_ *s, int w, const char *what,
                                   uint64_t step, char *why)
{
    if (w == 2)
        return prof_mpi_off_(s, -ECANCELED, why);
    if (w == 0 || w == 3)
        return prof_mpi_timed_out_(s, what, step);
    snprintf(why, PROF_MPI_WHY_, "%s failed", what);
    return prof_mpi_off_(s, -EIO, why);
}

/* The duplicate is ready: errors returned instead of aborting the job. */
static inline int prof_mpi_dup_done_(struct prof_mpi_state_ *s)
{
    s->comm = s->dup;
    s->dup = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    if (MPI_Op_create(prof_mpi_combine_, 1, &s->op) != MPI_SUCCESS)
        return prof_mpi_off_(s, -EIO, "MPI_Op_create failed");
    return 0;
}

static inline int prof_mpi_summary(MPI_Comm comm)
{
    struct prof_mpi_state_ *s = prof_mpi_state_();
    uint64_t n = prof_step_count();
    MPI_Request req;
    void *state = NULL, *buf = NULL;
    char why[PROF_MPI_WHY_];
    int w, round, done = 0;

    if (s->state < 0)
        return s->err == -ETIMEDOUT || s->err == -EIO || s->err == -ECANCELED ? -ECANCELED
                                                                               : s->err;
    if (s->state == 0) {
        int err = prof_ranks_start(&s->every, &s->timeout_ns);
        if (err != 0) {
            s->state = -1;
            s->err = err;
            return err;
        }
        s->state = 1;
        /* The duplicate is started at the first call, where every rank
         * calls this at the same point of the program (a collective on
         * comm must be in the same order on every rank: at the first
         * window, a rank that steps at another rate would start it
         * between other collectives than the others). */
        s->user = comm;
        if (MPI_Comm_idup(comm, &s->dup, &s->dup_req) != MPI_SUCCESS)
            return prof_mpi_off_(s, -EIO, "MPI_Comm_idup failed");
    }
    if (s->dup_req != MPI_REQUEST_NULL) {
        /* Progress it between windows (one MPI_Test per step until done). */
        if (MPI_Test(&s->dup_req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return prof_mpi_off_(s, -EIO, "duplicating the communicator failed");
        if (done && prof_mpi_dup_done_(s) != 0)
            return s->err;
    }
    if (n == 0 || n % s->every != 0)
        return 0;
    s->heard_from = -1;
    /* A rank that gave up told us: do not wait for it again. */
    if (prof_mpi_aborted_(s, why))
        return prof_mpi_off_(s, -ECANCELED, why);
    if (s->dup_req != MPI_REQUEST_NULL) {
        if ((w = prof_mpi_wait_(s, &s->dup_req, n, why)) != 1)
            return prof_mpi_failed_(s, w, "duplicating the communicator", n, why);
        if (prof_mpi_dup_done_(s) != 0)
            return s->err;
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
        if ((w = prof_mpi_wait_(s, &req, n, why)) != 1) {
            /* buf stays allocated: the abandoned request may still read
             * and write it. */
            free(state);
            return prof_mpi_failed_(s, w, "the reduction", n, why);
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
