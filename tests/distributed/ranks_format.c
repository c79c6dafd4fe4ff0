/* ranks_format.c - the cross-rank table from synthetic windows, reduced
 * through the library's own rounds (snapshot, contribute, combine,
 * result) in one process: per-stage median/min/max of avg and p95, the
 * slowest rank and spread, the straggler (the rank and stage with the most
 * self time per step above the median rank; with two ranks, above the
 * other rank), stages only some ranks ran, ranks with no window or at
 * another step named, another version refused, hostile names escaped, the
 * on-CPU share across ranks, and the JSON form. */
#include <prof.h>
#include <prof_ranks.h>

#include "check.h"

#define MAXR 8

struct win {
    int nst;
    prof_stage_stats st[8];
    uint64_t end, steps;
};

static struct win w[MAXR];
static void *states[MAXR];

static void stage(struct win *x, const char *name, double avg_ms, double p95_ms,
                  double self_ms_per_step)
{
    prof_stage_stats *s = &x->st[x->nst++];

    memset(s, 0, sizeof *s);
    s->name = name;
    s->count = 10;
    s->avg_ns = avg_ms * 1e6;
    s->p50_ns = avg_ms * 1e6;
    s->p95_ns = p95_ms * 1e6;
    s->total_ns = (uint64_t)(s->avg_ns * 10);
    s->max_ns = (uint64_t)(s->p95_ns * 1.1);
    s->self_ns = (uint64_t)(self_ms_per_step * 1e6 * (double)x->steps);
}

/* The last stage of x sampled on a CPU pct percent of its self time. */
static void on_cpu(struct win *x, double pct)
{
    prof_stage_stats *s = &x->st[x->nst - 1];

    s->flags |= PROF_STAGE_CPU;
    s->cpu_ns = (uint64_t)((double)s->self_ns * pct / 100.0);
}

/* Reduce n ranks' windows; poison makes rank 1 send another layout. */
static void reduce(int n, int poison)
{
    static int64_t acc[PROF_RANKS_BUF_SIZE / 8], mine[PROF_RANKS_BUF_SIZE / 8];

    for (int r = 0; r < n; r++)
        CHECK_EQ(prof_ranks_snapshot_rows(states[r], PROF_RANKS_STATE_SIZE, r,
                                          w[r].end ? w[r].st : NULL, (size_t)w[r].nst, w[r].end,
                                          w[r].steps, 500000000), 0);
    for (int round = 0; round < PROF_RANKS_ROUNDS; round++) {
        int len = 0;
        size_t parts[3];
        for (int r = 0; r < n; r++) {
            len = prof_ranks_contribute(states[r], round, r ? mine : acc, sizeof acc, parts);
            CHECK_GT(len, 0);
            CHECK_EQ((size_t)len, 8 * (parts[0] + parts[1] + parts[2]));
            if (poison && r == 1)
                mine[0] ^= 1 << 20;
            if (r)
                CHECK_EQ(prof_ranks_combine(acc, mine, (size_t)len), 0);
        }
        for (int r = 0; r < n; r++) {
            int rc = prof_ranks_result(states[r], round, acc, (size_t)len);
            if (poison) {
                CHECK_EQ(rc, -EPROTO);
            } else {
                CHECK_EQ(rc, 0);
            }
        }
        if (poison)
            return;
    }
}

static char *format(int fmt)
{
    int n = prof_ranks_format(states[0], fmt, NULL, 0);
    char *buf;

    CHECK_GT(n, 0);
    buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    CHECK_EQ(prof_ranks_format(states[0], fmt, buf, (size_t)n + 1), n);
    CHECK_EQ(strlen(buf), (size_t)n);
    return buf;
}

static void four(void)
{
    memset(w, 0, sizeof w);
    for (int r = 0; r < 4; r++) {
        struct win *x = &w[r];
        x->end = 40;
        x->steps = 10;
        /* Rank 2 is slow in data (4 ms more per step); the others wait for
         * it in backward's all-reduce, so their backward is the longer
         * one: the median tells the wait from the cause. */
        stage(x, "data", r == 2 ? 5.0 : 1.0, r == 2 ? 6.0 : 1.2, r == 2 ? 5.0 : 1.0);
        stage(x, "backward", r == 2 ? 2.0 : 6.0, r == 2 ? 2.5 : 6.5, r == 2 ? 2.0 : 6.0);
        stage(x, "forward", 3.0 + 0.1 * r, 3.5 + 0.1 * r, 3.0 + 0.1 * r);
    }
    stage(&w[3], "evil\x1b]0;title\x07name", 0.5, 0.5, 0.5);
}

int main(void)
{
    char *text, *json;

    for (int r = 0; r < MAXR; r++)
        CHECK_EQ(posix_memalign(&states[r], 8, PROF_RANKS_STATE_SIZE), 0);

    four();
    reduce(4, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "prof ranks: step 40, last 10 steps, 4 ranks");
    CHECK_STR_CONTAINS(text, "straggler: rank 2 in data, +4.00 ms per step");
    CHECK_STR_CONTAINS(text, "median rank 1.00 ms)");
    /* data: median avg 1 ms, max 5 ms on rank 2, spread 5x. */
    CHECK_STR_CONTAINS(text, "1.00 ms    1.00 ms    5.00 ms");
    CHECK_STR_CONTAINS(text, "rank 2   5.00x");
    /* forward: the slowest avg is rank 3's. */
    CHECK_STR_CONTAINS(text, "rank 3   1.0");
    /* Hostile bytes never reach the terminal raw. */
    CHECK(strchr(text, '\x1b') == NULL && strchr(text, '\x07') == NULL);
    CHECK_STR_CONTAINS(text, "evil\\x1b]0;title\\x07name     1 ");
    CHECK(strstr(text, "steps differ") == NULL && strstr(text, "no window") == NULL);
    free(text);

    json = format(PROF_FORMAT_JSON);
    CHECK_STR_CONTAINS(json, "{\"prof\":\"ranks\",\"format\":2,");
    CHECK_STR_CONTAINS(json, "\"straggler\":{\"rank\":2,\"stage\":\"data\",\"excess_ns_per_step\":4000000.0");
    CHECK_STR_CONTAINS(json, "\"against\":\"median\"");
    CHECK_STR_CONTAINS(json, "\"name\":\"data\",\"ranks\":4,");
    CHECK_STR_CONTAINS(json, "\"avg_ns\":{\"median\":1000000.0,\"min\":1000000.0,\"min_rank\":0,\"max\":5000000.0,\"max_rank\":2}");
    CHECK_STR_CONTAINS(json, "\"evil\\u001b]0;title\\u0007name\"");
    CHECK_STR_CONTAINS(json, "\"ranks\":[],");
    CHECK(strchr(json, '\n') == json + strlen(json) - 1);
    free(json);

    /* Rank 3 closed its window at another step, rank 1 has none: both
     * named, the table made of the ranks that have one. */
    four();
    w[3].end = 80;
    w[1].end = 0;
    reduce(4, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "1 of 4 ranks: no window closed yet (rank 1)");
    CHECK_STR_CONTAINS(text, "steps differ: 1 of 4 ranks ended this window at another step "
                             "than rank 0 (step 40): rank 3 at step 80");
    CHECK_STR_CONTAINS(text, "straggler: rank 2 in data");
    /* forward and evil hold rank 3's numbers: marked. */
    CHECK_STR_CONTAINS(text, "forward                      3!");
    free(text);
    json = format(PROF_FORMAT_JSON);
    CHECK_STR_CONTAINS(json, "\"ranks\":[{\"rank\":1,\"state\":\"no_window\"},{\"rank\":3,"
                             "\"state\":\"other_steps\",\"step\":80}]");
    CHECK_STR_CONTAINS(json, "\"ranks_other_steps\":1,");
    free(json);

    /* Two ranks: the excess is against the other rank, not the median of
     * two (their mean), and the table says so. */
    memset(w, 0, sizeof w);
    for (int r = 0; r < 2; r++) {
        w[r].end = 20;
        w[r].steps = 10;
        stage(&w[r], "compute", r ? 9.0 : 1.0, 1, r ? 9.0 : 1.0);
    }
    reduce(2, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "straggler: rank 1 in compute, +8.00 ms per step (self 9.00 ms per "
                             "step, the other rank 1.00 ms; two ranks: against the other rank");
    free(text);
    /* A stage only one of two ranks ran: against 0. */
    stage(&w[0], "save", 2.0, 2.0, 20.0);
    reduce(2, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "straggler: rank 0 in save, +20.00 ms per step");
    free(text);

    /* Rank 1's extra time is outside every stage (the stage "(no stage)"
     * of its stepping thread): the straggler line says where it is, not
     * "in" a stage, and does not blame the other rank. */
    memset(w, 0, sizeof w);
    for (int r = 0; r < 2; r++) {
        w[r].end = 20;
        w[r].steps = 10;
        stage(&w[r], "compute", 2.0, 2.0, 2.0);
        stage(&w[r], "(no stage)", r ? 3.0 : 0.5, r ? 3.0 : 0.5, r ? 3.0 : 0.5);
    }
    reduce(2, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "straggler: rank 1 outside stages, +2.50 ms per step (self 3.00 ms "
                             "per step, the other rank 500.00 us;");
    CHECK_STR_CONTAINS(text, "\n(no stage) ");
    free(text);

    /* The on-CPU share across ranks, of the self time of the ranks that
     * sampled the stage: compute 90% and 70% of 50 ms each (80%), wait 2%
     * on rank 0, unsampled on rank 1 (2%), tiny sampled 100% but of 20 ms
     * (too little to show, as in the summary), io never sampled. */
    memset(w, 0, sizeof w);
    for (int r = 0; r < 2; r++) {
        w[r].end = 20;
        w[r].steps = 10;
        stage(&w[r], "compute", 5, 5, 5);
        on_cpu(&w[r], r ? 70 : 90);
        stage(&w[r], "wait", 5, 5, 5);
        if (r == 0)
            on_cpu(&w[r], 2);
        stage(&w[r], "tiny", 1, 1, 1);
        on_cpu(&w[r], 100);
        stage(&w[r], "io", 2, 2, 2);
    }
    reduce(2, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "spread   cpu%\n");
    CHECK_STR_CONTAINS(text, "1.00x    80%\n");
    CHECK_STR_CONTAINS(text, "1.00x     2%\n");
    CHECK(strstr(text, "1.00x      -\n") != NULL &&
          strstr(strstr(text, "1.00x      -\n") + 1, "1.00x      -\n") != NULL);
    free(text);
    json = format(PROF_FORMAT_JSON);
    CHECK_STR_CONTAINS(json, "\"cpu_share\":0.8}");
    CHECK_STR_CONTAINS(json, "\"cpu_share\":0.02}");
    CHECK_STR_CONTAINS(json, "\"cpu_share\":1.0}");
    CHECK_STR_CONTAINS(json, "\"cpu_share\":null}");
    free(json);
    /* No rank sampled: no column. */
    four();
    reduce(4, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK(strstr(text, "cpu%") == NULL);
    free(text);

    /* A rank of another layout: refused, said, never read. */
    four();
    reduce(4, 1);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "could not be combined (another prof version");
    free(text);

    /* No rank has a window yet. */
    memset(w, 0, sizeof w);
    reduce(3, 0);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "prof ranks: 3 ranks, no window closed on any rank yet");
    free(text);

    CHECK_EQ(prof_ranks_format(states[0], 7, NULL, 0), -EINVAL);
    CHECK_EQ(prof_ranks_contribute(states[0], 1, NULL, 0, NULL), -EINVAL);
    CHECK_EQ(prof_ranks_snapshot_rows(states[0], PROF_RANKS_STATE_SIZE, 1 << 20, NULL, 0, 0, 0,
                                      0), -ERANGE);
    for (int r = 0; r < MAXR; r++)
        free(states[r]);
    return 0;
}
