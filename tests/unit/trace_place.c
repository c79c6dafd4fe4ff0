/* trace_place.c - the trace keeps a thread's zones nested as their ticks
 * are, although the collector converts ticks to nanoseconds with a clock
 * rate it re-fits between drains.
 *
 * A random tree of zones in ticks (siblings back to back, gaps of 0-2
 * ticks), converted batch by batch with offsets that jump by up to +-15 ns
 * (what a re-fit shifts), goes through prof_trace_place() in the order the
 * zones end. Checked, for every pair of zones: one inside the other in
 * ticks => inside in the trace; one before the other => before, both in
 * nanoseconds and as a viewer computes them (ts and dur as doubles in
 * microseconds, added); and no zone moved further than the jumps (and the
 * viewers' nanoseconds). With one exact conversion, nothing moves by more
 * than the nanoseconds (one per level) that keep the viewers' double sums
 * nested. */
#include <prof.h>

#include "check.h"
#include "registry.h"
#include "trace.h"

#define MAX_ZONES 4000

struct zone {
    uint64_t ts, te;          /* ticks */
    uint64_t s, e;            /* ns as converted, then as placed */
    uint32_t depth;
};

static struct zone z[MAX_ZONES];
static int nz;
static uint64_t seed = 42;

static uint32_t rnd(uint32_t n)
{
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(seed >> 33) % n;
}

/* Zones from tick t at depth d, siblings back to back; returns the tick
 * after the last one. Appended in the order they end (post-order). */
static uint64_t gen(uint64_t t, uint32_t depth, int siblings)
{
    for (int i = 0; i < siblings && nz < MAX_ZONES - 64; i++) {
        uint64_t start = t + rnd(3), end;

        if (depth < 5 && rnd(3)) {
            /* One draw after the other: as arguments, their order would
             * be the compiler's (gcc and clang made different trees). */
            uint64_t first = start + rnd(3);
            int n = 1 + (int)rnd(4);

            end = gen(first, depth + 1, n);
        } else {
            end = start + 1 + rnd(4);
        }
        end += rnd(3);
        z[nz].ts = start;
        z[nz].te = end;
        z[nz].depth = depth;
        nz++;
        t = end;
    }
    return t;
}

/* Returns how many zones had to move. base: ns from the trace's origin
 * of the first zone (far from it, a viewer's doubles round ts and dur to
 * a fraction of a nanosecond, and their sums reorder zones that end
 * within a nanosecond of each other). */
static int place_all(int jitter, uint64_t base)
{
    int moved = 0;

    struct prof_thread *t = calloc(1, sizeof *t);
    int64_t offset = 0;

    CHECK(t != NULL);
    for (int i = 0; i < nz; i++) {
        if (jitter && i % 7 == 0)
            offset = (int64_t)rnd(31) - 15;   /* a new drain, a new rate */
        z[i].s = (uint64_t)((int64_t)(base + z[i].ts * 10) + offset);
        z[i].e = (uint64_t)((int64_t)(base + z[i].te * 10) + offset);
        {
            uint64_t s0 = z[i].s, e0 = z[i].e;

            prof_trace_place(t, z[i].depth, &z[i].s, &z[i].e);
            if (!jitter) {
                /* A nanosecond per level of zones ending together. */
                CHECK(z[i].s <= s0 + 8 && z[i].s >= s0);
                CHECK(z[i].e <= e0 + 8 && z[i].e >= e0);
            }
            /* The jumps (30 ns at most between two drains), and the
             * viewers' nanoseconds on top: a start pushed to the floor of
             * a zone 30 ns later in the other conversion came out at 31
             * (10 days from the origin, clang's trees). */
            CHECK(z[i].s + 30 + 8 >= s0 && z[i].s <= s0 + 30 + 8);
            CHECK(z[i].e + 30 + 8 >= e0 && z[i].e <= e0 + 30 + 8);
            moved += z[i].s != s0 || z[i].e != e0;
        }
    }
    free(t);
    return moved;
}

/* As a viewer: "ts" and "dur" parsed (ns / 1000 correctly rounded), added. */
static double view_start(int i)
{
    return (double)z[i].s / 1000.0;
}

static double view_end(int i)
{
    return (double)z[i].s / 1000.0 + (double)(z[i].e - z[i].s) / 1000.0;
}

static void check_order(void)
{
    for (int i = 0; i < nz; i++) {
        CHECK(z[i].s <= z[i].e);
        for (int j = 0; j < nz; j++) {
            if (i == j)
                continue;
            if (z[j].ts >= z[i].ts && z[j].te <= z[i].te && z[j].depth > z[i].depth)
                CHECK_MSG(z[j].s >= z[i].s && z[j].e <= z[i].e && view_end(j) <= view_end(i),
                          "zone %d (depth %u) not inside zone %d (depth %u)", j, z[j].depth, i,
                          z[i].depth);
            else if (z[i].te <= z[j].ts)
                CHECK_MSG(z[i].e <= z[j].s && view_end(i) <= view_start(j),
                          "zone %d ends after zone %d starts", i, j);
        }
    }
}

int main(void)
{
    /* 1 ms, and 10 days and 3 ns (ts ~ 8.6e11 us: ulps of 0.12 ns) from
     * the origin. */
    static const uint64_t bases[] = {1000000u, 864000000000003u};
    int moved = 0;

    for (int round = 0; round < 40; round++) {
        uint64_t base = bases[round % 2] + (uint64_t)rnd(1000);

        nz = 0;
        gen(1000, 0, 40);
        CHECK_GT(nz, 100);

        place_all(0, base);   /* exact conversion: at most the viewers' nanoseconds */
        check_order();

        moved += place_all(1, base);
        check_order();
    }
    CHECK_GT(moved, 0);   /* the jitter did disorder zones, and they were repaired */
    return 0;
}
