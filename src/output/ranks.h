/* ranks.h - the cross-rank summary as a reduction (docs/DISTRIBUTED.md).
 *
 * A window's cross-rank table is built in PROF_RANKS_ROUNDS rounds. In
 * each round every rank contributes a buffer of int64 words whose size
 * does not depend on the number of ranks, the transport combines them
 * element-wise (MIN over the first part, MAX over the second, SUM over the
 * third: associative and commutative, so any reduction tree will do) and
 * every rank hands the combined buffer back (prof_ranks_result):
 *
 *   round 0  keys: which stages (at most PROF_RANKS_MAX_STAGES, matched by
 *            the hash of their name through a table of RANKS_KEY_SLOTS
 *            slots) the table will have.
 *   round 1  per stage: sums, counts, min and max with the rank holding
 *            them, the name, the on-CPU time and the self time it is of; per window: the reference rank's step.
 *   round 2  per stage: fixed-size histograms of the per-rank values over
 *            the [min, max] of round 1, for the medians; unequal steps.
 *
 * The transports (prof.distributed, prof_mpi.h) only move the buffers;
 * ranks_table.c builds and writes the table from the combined state.
 * Everything here is pure: api_ranks.c takes the window under the runtime lock
 * and hands the rows to prof_ranks_snapshot_rows. */
#ifndef PROF_RANKS_PROTOCOL_H
#define PROF_RANKS_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "prof.h"
#include "prof_ranks.h"
#include "json.h"

#define PROF_RANKS_MAGIC 0x5246u             /* in every round's magic word */
#define PROF_RANKS_VERSION 3u
#define RANKS_LOCAL_CAP 256                  /* the heaviest stages a rank offers */
#define RANKS_KEY_SLOTS 1024                 /* round 0's table */
#define RANKS_HIST_BUCKETS 24                /* per histogram, round 2 */
#define RANKS_NAME_WORDS 6                   /* 7 bytes a word: names up to 41 bytes */
#define RANKS_RANK_BITS 20                   /* ranks below 2^20 (loc encoding) */
#define RANKS_COUNT_BITS 21                  /* three histogram counts a word */

/* One stage of this rank's window, as the snapshot keeps it. */
struct ranks_local {
    uint64_t hash;               /* 47-bit key (never 0) */
    uint64_t count, total_ns, self_ns, max_ns;
    uint64_t cpu_ns, cpu_self_ns;    /* on-CPU time, of cpu_self_ns of self time (PROF_CPU) */
    double avg_ns, p95_ns, self_per_step;
    char name[RANKS_NAME_WORDS * 7];
};

struct ranks_r1 {                /* round 1's combined numbers, decoded */
    int64_t nranks, ok, no_window, folded, lost;
    int64_t step_min, step_max;  /* loc-encoded end steps of ranks with a window */
    int64_t nowin_min, nowin_max;    /* lowest/highest rank with no window, or -1 */
    int64_t ref_rank;            /* lowest rank with a window, or -1 */
    int64_t ref_step, ref_steps, ref_wall;
};

struct ranks_stage {             /* one row, decoded */
    uint64_t hash;
    int64_t ranks, count, total_ns, self_ns, off;
    int64_t cpu_ns, cpu_self_ns;     /* summed over the ranks that sampled it */
    int64_t min[3], max[3];      /* loc-encoded avg, p95, self per step */
    int64_t max_ns;
    char name[RANKS_NAME_WORDS * 7 + 1];
    uint32_t hist[3][RANKS_HIST_BUCKETS];
};

/* The caller's opaque state buffer (PROF_RANKS_STATE_SIZE bytes). */
struct ranks_state {
    uint32_t magic, version;
    int32_t rank;
    int32_t nlocal;
    int32_t have_window;
    int32_t done;                /* rounds whose result is in */
    int32_t bad;                 /* a round combined buffers of another layout */
    int32_t nstages;             /* the table's stages, from round 0 */
    uint64_t end_step, steps, wall_ns, folded;
    struct ranks_local local[RANKS_LOCAL_CAP];
    uint64_t keys[PROF_RANKS_MAX_STAGES];    /* the table's stages, in round 0's order */
    int32_t at[PROF_RANKS_MAX_STAGES];       /* index into local[], or -1 */
    int64_t lost;                /* this rank's stages not in the table */
    struct ranks_r1 r1;
    int64_t differ;              /* ranks at another end step than the reference */
    struct ranks_stage st[PROF_RANKS_MAX_STAGES];
};

/* Per-rank periodic summaries are muted while a cross-rank summary stands
 * in for them (prof_ranks_start .. prof_ranks_abandon); the collector
 * checks it as it writes a periodic summary. */
extern int prof_ranks_muted;

/* Words that carry the rank holding a value (MINLOC/MAXLOC): the value,
 * whole ns, above RANKS_RANK_BITS bits of rank. A MIN part's word no rank
 * set reads RANKS_ABSENT_MIN, a MAX part's RANKS_ABSENT_MAX. */
#define RANKS_ABSENT_MIN INT64_MAX
#define RANKS_ABSENT_MAX INT64_C(-1)

static inline double ranks_dec_val(int64_t w)
{
    return (double)(w >> RANKS_RANK_BITS);
}

static inline int ranks_dec_rank(int64_t w)
{
    return (int)(w & ((INT64_C(1) << RANKS_RANK_BITS) - 1));
}

#endif
