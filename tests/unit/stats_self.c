/* stats_self.c - self time, measured on real zones: a stage's self time is
 * its total minus the time of the zones nested directly in it. For a parent
 * whose children only ever run inside it, prof_stats() must give
 *     self(parent) == total(parent) - total(child1) - total(child2)
 * exactly (to the nanosecond), at every level, whatever the drains' timing
 * (some rounds flush between a child's end and its parent's). */
#include <prof.h>

#include "check.h"

static void leaf(const char *name, uint64_t ns)
{
    PROF_ZONE(name);
    test_spin_ns(ns);
}

static void middle(void)
{
    PROF_ZONE("middle");
    test_spin_ns(2000);
    leaf("grandchild", 3000);
    test_spin_ns(1000);
    leaf("grandchild", 2000);
}

int main(void)
{
    long rounds = test_scale(300);
    prof_stage_stats top, mid, a, b, g;

    CHECK_EQ(prof_enable(1), 0);
    for (long r = 0; r < rounds; r++) {
        PROF_ZONE("top");
        test_spin_ns(1000);
        leaf("child_a", 4000);
        middle();
        if (r % 7 == 0)
            CHECK_EQ(prof_flush(), 0);  /* children taken in before the parent ends */
        leaf("child_a", 1000);
        leaf("child_b", 2000);
        test_spin_ns(3000);
    }
    top = test_stats("top");
    mid = test_stats("middle");
    a = test_stats("child_a");
    b = test_stats("child_b");
    g = test_stats("grandchild");
    CHECK_EQ(top.count, rounds);
    CHECK_EQ(mid.count, rounds);
    CHECK_EQ(a.count, 2 * rounds);
    CHECK_EQ(b.count, rounds);
    CHECK_EQ(g.count, 2 * rounds);
    CHECK_EQ_U64(top.self_ns, top.total_ns - a.total_ns - mid.total_ns - b.total_ns);
    CHECK_EQ_U64(mid.self_ns, mid.total_ns - g.total_ns);
    CHECK_EQ_U64(a.self_ns, a.total_ns);
    CHECK_EQ_U64(b.self_ns, b.total_ns);
    CHECK_EQ_U64(g.self_ns, g.total_ns);
    /* The spins set a floor under each self time. */
    CHECK_GE(top.self_ns, (uint64_t)rounds * 4000);
    CHECK_GE(mid.self_ns, (uint64_t)rounds * 3000);
    CHECK_STR_EQ(mid.parent, "top");
    CHECK_STR_EQ(g.parent, "middle");
    CHECK_STR_EQ(a.parent, "top");
    CHECK_EQ(test_dropped(), 0);
    return 0;
}
