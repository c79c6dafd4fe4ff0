/* stats_recursion.c - a stage nested inside itself (a recursive function
 * with PROF_FUNC / PROF_ZONE) counts every call, but its share of wall time
 * counts only the outermost zones: it can never pass 100%, and it equals
 * the share of a flat stage that covers the same time. Also mutual
 * recursion (a -> b -> a).
 *
 * Real clocks: every check holds whatever the scheduler does (a preemption
 * only lengthens the zone it lands in). The exact figures, on synthetic
 * ticks, are stats_synthetic.c's test_recursion. */
#include <prof.h>

#include "check.h"

static void f(int depth)
{
    PROF_ZONE("f");
    test_spin_ns(300000);
    if (depth > 1)
        f(depth - 1);
}

static void b(int depth);

static void a(int depth)
{
    PROF_ZONE("a");
    test_spin_ns(100000);
    if (depth > 1)
        b(depth - 1);
}

static void b(int depth)
{
    PROF_ZONE("b");
    test_spin_ns(100000);
    if (depth > 1)
        a(depth - 1);
}

static prof_stage_stats find(const prof_stage_stats *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0)
            return rows[i];
    CHECK_MSG(0, "no row %s", name);
    return rows[0];
}

int main(void)
{
    long rounds = test_scale(40);
    prof_stage_stats rows[16], sf, sflat, sa, sb, sa_flat;
    uint64_t t0, t3;
    int n;

    CHECK_EQ(prof_enable(1), 0);
    t0 = test_now_ns();
    CHECK_EQ(prof_reset(), 0);      /* wall time starts now */
    for (long r = 0; r < rounds; r++) {
        {
            PROF_ZONE("flat");
            f(3);
        }
        {
            PROF_ZONE("flat_ab");
            a(4);
        }
    }
    n = prof_stats_list(rows, 16);
    t3 = test_now_ns();
    CHECK_GT(n, 0);
    CHECK_LE(n, 16);
    sf = find(rows, n, "f");
    sflat = find(rows, n, "flat");
    sa = find(rows, n, "a");
    sb = find(rows, n, "b");
    sa_flat = find(rows, n, "flat_ab");

    CHECK_EQ(sf.count, 3 * rounds);
    /* Nested totals count the inner calls again: more than the self
     * times, by at least the inner calls' spins. */
    CHECK_GE(sf.total_ns, sf.self_ns + rounds * (uint64_t)(2 * 300000 + 300000));
    /* ... but the share counts the outermost zones only. */
    CHECK_LE(sf.wall_share, 1.0);
    CHECK_LE(sf.wall_share, sflat.wall_share);
    /* Self times of a recursive stage add up to its outermost time: at
     * least the three spins of each outermost call, at most flat's time
     * around it (a self time counted per call would pass flat's). */
    CHECK_GE(sf.self_ns, rounds * (uint64_t)(3 * 300000));
    CHECK_LE(sf.self_ns, sflat.total_ns);
    /* ... and the share is that same outermost time over the wall time:
     * flat's share scaled by f's outermost time over flat's. One call of
     * prof_stats_list divides every row by the same wall time, so this is
     * arithmetic, not timing. */
    CHECK_NEAR(sf.wall_share, sflat.wall_share * (double)sf.self_ns / (double)sflat.total_ns,
               0.005);

    CHECK_EQ(sa.count, 2 * rounds);
    CHECK_EQ(sb.count, 2 * rounds);
    CHECK_GE(sa.self_ns, rounds * (uint64_t)(2 * 100000));
    CHECK_GE(sb.self_ns, rounds * (uint64_t)(2 * 100000));
    /* a's and b's self times add up to a's outermost time, which lies in
     * flat_ab: a's share is flat_ab's scaled by it (counted per call, it
     * would be nearly twice that). */
    CHECK_LE(sa.self_ns + sb.self_ns, sa_flat.total_ns);
    CHECK_LE(sa.wall_share, 1.0);
    CHECK_LE(sa.wall_share, sa_flat.wall_share);
    CHECK_NEAR(sa.wall_share,
               sa_flat.wall_share * (double)(sa.self_ns + sb.self_ns) / (double)sa_flat.total_ns,
               0.005);
    /* b runs only inside a. */
    CHECK_LE(sb.wall_share, sa.wall_share);
    /* Shares of top-level stages never add up to more than the wall. */
    CHECK_LE(sflat.wall_share + sa_flat.wall_share, 1.0);
    /* The wall time is at most the whole test's, read on the test's own
     * clock (1% for the two clocks' rates): a share at least this. */
    CHECK_GE(sflat.wall_share, 0.99 * (double)sflat.total_ns / (double)(t3 - t0));
    CHECK_GE(sa_flat.wall_share, 0.99 * (double)sa_flat.total_ns / (double)(t3 - t0));
    return 0;
}
