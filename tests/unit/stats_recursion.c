/* stats_recursion.c - a stage nested inside itself (a recursive function
 * with PROF_FUNC / PROF_ZONE) counts every call, but its share of wall time
 * counts only the outermost zones: it can never pass 100%, and it equals
 * the share of a flat stage that covers the same time. Also mutual
 * recursion (a -> b -> a). */
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
    int n;

    CHECK_EQ(prof_enable(1), 0);
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
    CHECK_GT(n, 0);
    CHECK_LE(n, 16);
    sf = find(rows, n, "f");
    sflat = find(rows, n, "flat");
    sa = find(rows, n, "a");
    sb = find(rows, n, "b");
    sa_flat = find(rows, n, "flat_ab");

    CHECK_EQ(sf.count, 3 * rounds);
    /* Nested totals count the inner calls again: more than the self
     * times, which add up to the outermost time. (Against flat's total,
     * as this compared before, a busy machine could stretch flat's spins
     * past the margin; f's own total and self come from the same zones.) */
    CHECK_GT(sf.total_ns, sf.self_ns);
    /* ... but the share counts the outermost zones only. */
    CHECK_LE(sf.wall_share, 1.0);
    CHECK_LE(sf.wall_share, sflat.wall_share);
    /* Self times of a recursive stage add up to its outermost time (the
     * few instructions between flat's and f's clock reads aside; 5%: a
     * preemption there on a loaded machine, or under a sanitizer) ... */
    CHECK_LE(sf.self_ns, sflat.total_ns);
    CHECK_NEAR(sf.self_ns, sflat.total_ns, 0.05);
    /* ... and the share is that same outermost time over the wall time,
     * exactly: flat's share scaled by f's outermost time over flat's. */
    CHECK_NEAR(sf.wall_share, sflat.wall_share * (double)sf.self_ns / (double)sflat.total_ns,
               0.005);

    CHECK_EQ(sa.count, 2 * rounds);
    CHECK_EQ(sb.count, 2 * rounds);
    CHECK_LE(sa.wall_share, 1.0);
    CHECK_NEAR(sa.wall_share, sa_flat.wall_share, 0.02);
    CHECK_LE(sb.wall_share, sa.wall_share);
    /* Shares of top-level stages never add up to more than the wall. */
    CHECK_LE(sflat.wall_share + sa_flat.wall_share, 1.0);
    CHECK_GT(sflat.wall_share + sa_flat.wall_share, 0.5);
    return 0;
}
