/* drain_instr.c - the zones for bench/drain_instr.sh, which counts the
 * instructions of their drain with callgrind: after a warm-up that makes
 * every stage (its counts zeroed), ROUNDS times 16,000 zones cycling over
 * STAGES names, each batch drained by prof_flush() on this thread.
 *
 *     drain_instr STAGES [ROUNDS]
 *
 * Public API only (and valgrind's client request header), so it builds
 * against an older commit's library too. */
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/callgrind.h>

#include <prof.h>

#define BATCH 16000
#define MAX_STAGES 100000

static const char *names[MAX_STAGES];

__attribute__((noinline)) static void record(int n, int stages, int *k)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE(names[*k]);
        if (++*k == stages)
            *k = 0;
        __asm__ __volatile__("" ::: "memory");
    }
}

int main(int argc, char **argv)
{
    int stages = argc > 1 ? atoi(argv[1]) : 10, rounds = argc > 2 ? atoi(argv[2]) : 15, k = 0;

    if (stages < 1 || stages > MAX_STAGES)
        return 2;
    for (int i = 0; i < stages; i++) {
        char b[32];
        snprintf(b, sizeof b, "stage%06d", i);
        names[i] = prof_intern(b);
    }
    prof_enable(1);
    for (int i = 0; i < stages + 4 * BATCH; i += BATCH) {
        record(BATCH, stages, &k);
        prof_flush();
    }
    CALLGRIND_ZERO_STATS;
    for (int r = 0; r < rounds; r++) {
        record(BATCH, stages, &k);
        prof_flush();
    }
    return 0;
}
