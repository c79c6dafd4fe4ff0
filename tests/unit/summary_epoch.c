/* summary_epoch.c - a zone that has not ended yet (an "epoch" that lasts
 * hours) still shows the stages running inside it nested under it: the
 * children's rows name it as parent, the running stage has a row with
 * count 0 ("running" in the table), and prof_stats() on it says -ENOENT
 * until it ends. Two levels still open (epoch > batch > forward). */
#include <prof.h>

#include "check.h"

static prof_stage_stats find(const prof_stage_stats *rows, int n, const char *name, int *index)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0) {
            *index = i;
            return rows[i];
        }
    CHECK_MSG(0, "no row %s", name);
    return rows[0];
}

int main(void)
{
    prof_stage_stats rows[16], st;
    int n, ie, ib, iff, ibk;
    char *text;

    CHECK_EQ(prof_enable(1), 0);
    PROF_ZONE_BEGIN(epoch, "epoch");
    PROF_ZONE_BEGIN(batch, "batch");
    for (int i = 0; i < 10; i++) {
        {
            PROF_ZONE("forward");
            test_spin_ns(10000);
        }
        {
            PROF_ZONE("backward");
            test_spin_ns(20000);
        }
    }
    n = prof_stats_list(rows, 16);
    CHECK_EQ(n, 4);
    st = find(rows, n, "epoch", &ie);
    CHECK_EQ(st.count, 0);
    CHECK(st.parent == NULL);
    CHECK_EQ(st.depth, 0);
    st = find(rows, n, "batch", &ib);
    CHECK_EQ(st.count, 0);
    CHECK_STR_EQ(st.parent, "epoch");
    CHECK_EQ(st.depth, 1);
    st = find(rows, n, "forward", &iff);
    CHECK_EQ(st.count, 10);
    CHECK_STR_EQ(st.parent, "batch");
    CHECK_EQ(st.depth, 2);
    st = find(rows, n, "backward", &ibk);
    CHECK_STR_EQ(st.parent, "batch");
    CHECK_EQ(st.depth, 2);
    /* Tree order: each row after its parent. */
    CHECK_LT(ie, ib);
    CHECK_LT(ib, iff);
    CHECK_LT(ib, ibk);
    CHECK_EQ(prof_stats("epoch", &st), -ENOENT);

    text = test_summary(PROF_FORMAT_TEXT);
    fprintf(stderr, "%s", text);
    CHECK_STR_CONTAINS(text, "\nepoch ");
    CHECK_STR_CONTAINS(text, "\n  batch ");
    CHECK_STR_CONTAINS(text, "\n    forward ");
    CHECK_STR_CONTAINS(text, "\n    backward ");
    CHECK_STR_CONTAINS(text, "(open, none ended)");
    free(text);

    PROF_ZONE_END(batch);
    PROF_ZONE_END(epoch);
    st = test_stats("epoch");
    CHECK_EQ(st.count, 1);
    st = test_stats("forward");
    CHECK_STR_EQ(st.parent, "batch");
    st = test_stats("batch");
    CHECK_STR_EQ(st.parent, "epoch");
    CHECK_EQ_U64(st.self_ns, st.total_ns - test_stats("forward").total_ns -
                 test_stats("backward").total_ns);
    return 0;
}
