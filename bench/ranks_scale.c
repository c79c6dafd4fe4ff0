/* ranks_scale - the cross-rank reduction at N simulated ranks, in one
 * process, through the library's own snapshot/contribute/combine/format
 * code (the calls prof.distributed and prof_mpi.h make), one rank after
 * the other for each round.
 *
 *   ranks_scale [N [S]] [--check]      (default 16384 ranks, 64 stages)
 *
 * prints
 *   prof-bench ranks: ranks=N stages=S bytes_per_rank=B rank0_peak_mb=M ms=T
 * bytes_per_rank: what one rank sends plus receives per window (its
 * contribution and the combined buffer, every round: an all-reduce moves
 * no more than that per rank, whatever N); rank0_peak_mb: this process's
 * peak resident size, an upper bound of rank 0's (it also holds the
 * simulation); ms: the time to combine all N contributions of every round
 * and format the table (rank 0 in a flat reduction; a tree divides it).
 * Rank N/3 is slower in one stage by 5 ms per step; --check exits 1 when
 * the table does not name it as the straggler. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <prof_ranks.h>

#include "bench.h"

#define STEPS 10

static char names[256][32];

static int snapshot(void *state, int rank, int nstages, int slow)
{
    prof_stage_stats rows[256];

    memset(rows, 0, sizeof rows);
    for (int i = 0; i < nstages; i++) {
        prof_stage_stats *r = &rows[i];
        /* A few per cent of jitter by rank, so that the histograms have
         * something to spread. */
        double avg = (100e3 + 1e3 * i) * (1 + 0.03 * ((rank * 7 + i) % 11) / 10.0);
        if (rank == slow && i == 5)
            avg += 5e6;
        r->name = names[i];
        r->count = STEPS;
        r->total_ns = (uint64_t)(avg * STEPS);
        r->self_ns = r->total_ns;
        r->avg_ns = avg;
        r->p50_ns = avg;
        r->p95_ns = avg * 1.2;
        r->max_ns = (uint64_t)(avg * 1.5);
    }
    return prof_ranks_snapshot_rows(state, PROF_RANKS_STATE_SIZE, rank, rows, (size_t)nstages,
                                    100, STEPS, (uint64_t)(STEPS * 1e6));
}

int main(int argc, char **argv)
{
    int nranks = 16384, nstages = 64, check = 0, npos = 0;
    void *state = NULL, *acc = NULL, *mine = NULL, *results[PROF_RANKS_ROUNDS] = {0};
    size_t bytes = 0, len[PROF_RANKS_ROUNDS] = {0};
    uint64_t combine_ns = 0, t0;
    struct rusage ru;
    char *text;
    int n, slow;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0)
            check = 1;
        else if (npos++ == 0)
            nranks = atoi(argv[i]);
        else
            nstages = atoi(argv[i]);
    }
    if (nranks < 1 || nstages < 6 || nstages > 256) {
        fprintf(stderr, "usage: ranks_scale [N >= 1 [6 <= S <= 256]] [--check]\n");
        return 2;
    }
    slow = nranks / 3;
    for (int i = 0; i < 256; i++)
        snprintf(names[i], sizeof names[i], "stage_%03d", i);
    if (posix_memalign(&state, 8, PROF_RANKS_STATE_SIZE) != 0 ||
        posix_memalign(&acc, 8, PROF_RANKS_BUF_SIZE) != 0 ||
        posix_memalign(&mine, 8, PROF_RANKS_BUF_SIZE) != 0)
        return 1;
    for (int round = 0; round < PROF_RANKS_ROUNDS; round++) {
        for (int r = 0; r < nranks; r++) {
            void *out = r == 0 ? acc : mine;
            int got;
            /* Each simulated rank has seen the results of the earlier
             * rounds, as a real one would. */
            if (snapshot(state, r, nstages, slow) != 0)
                return 1;
            for (int k = 0; k < round; k++)
                if (prof_ranks_result(state, k, results[k], len[k]) != 0)
                    return 1;
            got = prof_ranks_contribute(state, round, out, PROF_RANKS_BUF_SIZE, NULL);
            if (got <= 0)
                return 1;
            len[round] = (size_t)got;
            if (r > 0) {
                t0 = bench_now_ns();
                if (prof_ranks_combine(acc, mine, len[round]) != 0)
                    return 1;
                combine_ns += bench_now_ns() - t0;
            }
        }
        bytes += 2 * len[round];
        if ((results[round] = malloc(len[round])) == NULL)
            return 1;
        memcpy(results[round], acc, len[round]);
    }
    /* Rank 0 takes every result in and formats the table. */
    t0 = bench_now_ns();
    if (snapshot(state, 0, nstages, slow) != 0)
        return 1;
    for (int k = 0; k < PROF_RANKS_ROUNDS; k++)
        if (prof_ranks_result(state, k, results[k], len[k]) != 0)
            return 1;
    n = prof_ranks_format(state, PROF_FORMAT_TEXT, NULL, 0);
    if (n < 0 || (text = malloc((size_t)n + 1)) == NULL)
        return 1;
    prof_ranks_format(state, PROF_FORMAT_TEXT, text, (size_t)n + 1);
    combine_ns += bench_now_ns() - t0;
    getrusage(RUSAGE_SELF, &ru);
    printf("prof-bench ranks: ranks=%d stages=%d bytes_per_rank=%zu rank0_peak_mb=%.1f ms=%.1f\n",
           nranks, nstages, bytes, (double)ru.ru_maxrss / 1024.0, (double)combine_ns / 1e6);
    if (check) {
        char want[96];
        snprintf(want, sizeof want, "straggler: rank %d in stage_005,", slow);
        if (strstr(text, want) == NULL || strstr(text, "stage_063") == NULL) {
            fprintf(stderr, "ranks_scale: the table does not name rank %d in stage_005:\n%s",
                    slow, text);
            return 1;
        }
    }
    if (getenv("RANKS_SCALE_PRINT"))
        fputs(text, stdout);
    free(text);
    for (int k = 0; k < PROF_RANKS_ROUNDS; k++)
        free(results[k]);
    free(state);
    free(acc);
    free(mine);
    return 0;
}
