/* prof_ranks.h - the cross-rank reduction's low-level calls.
 *
 * Not for programs: a program gets cross-rank summaries from prof_mpi.h
 * (MPI) or Python's prof.distributed (torch.distributed), which are built
 * from these calls (docs/DISTRIBUTED.md). They are here for such glue: a
 * transport only moves the buffers these calls fill and read.
 *
 * Compiled out (PROF_DISABLE) every call is an inline stub returning
 * -ESRCH (prof_ranks_format writes "" when size > 0; prof_ranks_abandon
 * does nothing), as prof.h's calls are. */
#ifndef PROF_RANKS_H
#define PROF_RANKS_H

#include "prof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At a step that closes a window,
 * every rank snapshots its last window into a state buffer, then for each
 * of PROF_RANKS_ROUNDS rounds contributes a buffer of int64 words that the
 * job's own communicator combines across ranks (an all-reduce: MIN over
 * the first parts[0] words, MAX over the next parts[1], SUM over the last
 * parts[2], or prof_ranks_combine as one user-defined op), and hands the
 * combined buffer back. The sizes do not grow with the number of ranks.
 * One rank then prints the cross-rank table. libprof never talks to
 * another process itself. Ranks must be below 2^20. */
#define PROF_RANKS_MAX_STAGES 64        /* stages in the cross-rank table */
#define PROF_RANKS_ROUNDS 3
#define PROF_RANKS_STATE_SIZE 65536     /* the state buffer, bytes */
#define PROF_RANKS_BUF_SIZE 16384       /* the largest round buffer, bytes */

/* Start cross-rank summaries in this process. On success *every_steps gets
 * the window length N (PROF_SUMMARY_EVERY=Nsteps): every rank must reduce
 * at each step that is a multiple of N; *timeout_ns (may be NULL) gets how
 * long a reduction may wait for the other ranks (PROF_RANKS_TIMEOUT,
 * default 60s). From then on this rank's own periodic summaries are not
 * printed (the final one still is). Idempotent. Returns 0; -EINVAL when
 * the windows are time-based (ranks agree on steps, not on seconds) and
 * -ENOENT when there are no periodic summaries, each said once in a
 * message; -EPERM under PROF_RANKS=0; -ECANCELED after
 * prof_ranks_abandon(). */
PROF_API int prof_ranks_start(uint64_t *every_steps, uint64_t *timeout_ns);

/* Flush (so that the window due at this step is closed), then snapshot
 * this rank's last window into state[0..size) (size >=
 * PROF_RANKS_STATE_SIZE, 8-byte aligned). A rank with no window snapshots
 * an empty one: it still takes part. Returns 0, -EINVAL (NULL, short
 * buffer) or -ERANGE (rank outside 0..2^20-1). */
PROF_API int prof_ranks_snapshot(void *state, size_t size, int rank);

/* The same from given rows (as prof_window_stats_list gives them; NULL:
 * no window), without the runtime: for tests and bench/ranks_scale. */
PROF_API int prof_ranks_snapshot_rows(void *state, size_t size, int rank,
                                      const prof_stage_stats *rows, size_t n,
                                      uint64_t end_step, uint64_t steps, uint64_t wall_ns);

/* This rank's contribution to round (0 .. PROF_RANKS_ROUNDS-1) into
 * buf[0..size), rounds in order, each after the previous one's result.
 * parts (may be NULL) gets the word counts of the MIN, MAX and SUM parts.
 * Returns the bytes written (a multiple of 8), or -EINVAL (short buffer,
 * round out of order). */
PROF_API int prof_ranks_contribute(void *state, int round, void *buf, size_t size,
                                   size_t parts[3]);

/* inout = inout (+) in, element-wise, for a contribution of size bytes
 * (any round: the buffer says which). Associative and commutative. Buffers
 * of another layout (another prof version) poison the result, which
 * prof_ranks_result then reports. Returns 0 or -EINVAL. */
PROF_API int prof_ranks_combine(void *inout, const void *in, size_t size);

/* Hand round's combined buffer (every rank's contribution) back to state.
 * Returns 0, -EINVAL, or -EPROTO when ranks ran another prof version. */
PROF_API int prof_ranks_result(void *state, int round, const void *buf, size_t size);

/* Format the cross-rank table of a state whose rounds are all in, into buf
 * like snprintf: returns the length the whole text needs; format is
 * PROF_FORMAT_TEXT, PROF_FORMAT_JSON or PROF_FORMAT_DEFAULT
 * (PROF_SUMMARY_FORMAT). Negative errno on failure. */
PROF_API int prof_ranks_format(const void *state, int format, char *buf, size_t size);

/* Format the table as PROF_SUMMARY_FORMAT says and write it where the
 * summaries go (PROF_SUMMARY, or the summary handler, as a periodic
 * summary); waits for it to be written as prof_flush() waits, bounded.
 * Returns 0 or a negative errno. */
PROF_API int prof_ranks_emit(const void *state);

/* A reduction failed or timed out: say so once (naming why), stop
 * cross-rank summaries in this process for good and print this rank's own
 * periodic summaries again. */
PROF_API void prof_ranks_abandon(const char *why);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#if defined(PROF_DISABLE)
/* The stubs, as prof.h's: each takes its call's parameter types and
 * evaluates each argument once. */
#  ifdef __cplusplus
extern "C" {
#  endif
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wunused-parameter"
static inline int prof_ranks_start_off_(uint64_t *every, uint64_t *timeout) { return -ESRCH; }
static inline int prof_ranks_snapshot_off_(void *st, size_t size, int rank) { return -ESRCH; }
static inline int prof_ranks_snapshot_rows_off_(void *st, size_t size, int rank,
                                                const prof_stage_stats *rows, size_t n,
                                                uint64_t end, uint64_t steps, uint64_t wall)
{ return -ESRCH; }
static inline int prof_ranks_contribute_off_(void *st, int round, void *buf, size_t size,
                                             size_t *parts)
{ return -ESRCH; }
static inline int prof_ranks_combine_off_(void *inout, const void *in, size_t size)
{ return -ESRCH; }
static inline int prof_ranks_result_off_(void *st, int round, const void *buf, size_t size)
{ return -ESRCH; }
static inline int prof_ranks_format_off_(const void *st, int format, char *buf, size_t size)
{ if (buf != NULL && size > 0) buf[0] = '\0'; return -ESRCH; }
static inline int prof_ranks_emit_off_(const void *st) { return -ESRCH; }
static inline void prof_ranks_abandon_off_(const char *why) {}
#  pragma GCC diagnostic pop
#  ifdef __cplusplus
}  /* extern "C" */
#  endif

#  define prof_ranks_start(every, timeout) prof_ranks_start_off_(every, timeout)
#  define prof_ranks_snapshot(state, size, rank) prof_ranks_snapshot_off_(state, size, rank)
#  define prof_ranks_snapshot_rows(state, size, rank, rows, n, end, steps, wall) \
    prof_ranks_snapshot_rows_off_(state, size, rank, rows, n, end, steps, wall)
#  define prof_ranks_contribute(state, round, buf, size, parts) \
    prof_ranks_contribute_off_(state, round, buf, size, parts)
#  define prof_ranks_combine(inout, in, size) prof_ranks_combine_off_(inout, in, size)
#  define prof_ranks_result(state, round, buf, size) prof_ranks_result_off_(state, round, buf, size)
#  define prof_ranks_format(state, fmt, buf, size) prof_ranks_format_off_(state, fmt, buf, size)
#  define prof_ranks_emit(state) prof_ranks_emit_off_(state)
#  define prof_ranks_abandon(why) prof_ranks_abandon_off_(why)
#endif /* PROF_DISABLE */

#endif /* PROF_RANKS_H */
