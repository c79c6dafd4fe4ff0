/* ranks_format.c - the cross-rank table from synthetic blocks: per-stage
 * median/min/max of avg and p95, the slowest rank and spread, the
 * straggler (the rank and stage with the most self time per step above the
 * median rank), stages only some ranks ran, unreadable blocks and ranks at
 * another step named, hostile names escaped, and the JSON form.
 *
 * The blocks are built with the wire layout of src/ranks.h, as any rank's
 * prof_ranks_pack() would send them. */
#include <prof.h>

#include "check.h"
#include "ranks.h"

static struct prof_ranks_block blocks[4];

static void stage(struct prof_ranks_block *b, const char *name, uint64_t hash, double avg_ms,
                  double p95_ms, double self_ms_per_step)
{
    struct prof_ranks_stage *s = &b->stages[b->h.nstages++];

    s->hash = hash;
    s->count = 10;
    s->avg_ns = avg_ms * 1e6;
    s->p50_ns = avg_ms * 1e6;
    s->p95_ns = p95_ms * 1e6;
    s->total_ns = (uint64_t)(s->avg_ns * 10);
    s->max_ns = (uint64_t)(s->p95_ns * 1.1);
    s->self_ns = (uint64_t)(self_ms_per_step * 1e6 * 10);
    snprintf(s->name, sizeof s->name, "%s", name);
}

static char *format(int fmt)
{
    int n = prof_ranks_format(blocks, 4, fmt, NULL, 0);
    char *buf;

    CHECK_GT(n, 0);
    buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    CHECK_EQ(prof_ranks_format(blocks, 4, fmt, buf, (size_t)n + 1), n);
    CHECK_EQ(strlen(buf), (size_t)n);
    return buf;
}

int main(void)
{
    char *text, *json;

    CHECK_EQ(sizeof(struct prof_ranks_block), PROF_RANKS_BLOCK_SIZE);
    for (int r = 0; r < 4; r++) {
        struct prof_ranks_block *b = &blocks[r];
        b->h.magic = PROF_RANKS_MAGIC;
        b->h.version = PROF_RANKS_VERSION;
        b->h.rank = r;
        b->h.step = 40;
        b->h.steps = 10;
        b->h.wall_ns = 500000000;
        /* Rank 2 is slow in data (4 ms more per step); the others wait for
         * it in backward's all-reduce, so their backward is the longer
         * one: the median tells the wait from the cause. */
        stage(b, "data", 1, r == 2 ? 5.0 : 1.0, r == 2 ? 6.0 : 1.2, r == 2 ? 5.0 : 1.0);
        stage(b, "backward", 2, r == 2 ? 2.0 : 6.0, r == 2 ? 2.5 : 6.5, r == 2 ? 2.0 : 6.0);
        stage(b, "forward", 3, 3.0 + 0.1 * r, 3.5 + 0.1 * r, 3.0 + 0.1 * r);
    }
    stage(&blocks[3], "evil\x1b]0;title\x07name", 4, 0.5, 0.5, 0.5);

    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "prof ranks: step 40, last 10 steps, 4 ranks");
    CHECK_STR_CONTAINS(text, "straggler: rank 2 in data, +4.00 ms per step");
    /* data: median avg 1 ms, max 5 ms on rank 2, spread 5x. */
    CHECK_STR_CONTAINS(text, "1.00 ms    1.00 ms    5.00 ms");
    CHECK_STR_CONTAINS(text, "rank 2   5.00x");
    /* forward: the slowest avg is rank 3's. */
    CHECK_STR_CONTAINS(text, "rank 3   1.05x");
    /* Hostile bytes never reach the terminal raw. */
    CHECK(strchr(text, '\x1b') == NULL && strchr(text, '\x07') == NULL);
    CHECK_STR_CONTAINS(text, "evil\\x1b]0;title\\x07name     1");
    free(text);

    json = format(PROF_FORMAT_JSON);
    CHECK_STR_CONTAINS(json, "{\"prof\":\"ranks\",\"format\":1,");
    CHECK_STR_CONTAINS(json, "\"straggler\":{\"rank\":2,\"stage\":\"data\",\"excess_ns_per_step\":4000000.0");
    CHECK_STR_CONTAINS(json, "\"name\":\"data\",\"ranks\":4,\"avg_ns\":{\"median\":1000000.0,\"min\":1000000.0,\"max\":5000000.0}");
    CHECK_STR_CONTAINS(json, "\"evil\\u001b]0;title\\u0007name\"");
    CHECK(strchr(json, '\n') == json + strlen(json) - 1);
    free(json);

    /* Rank 1 sent something else, rank 3 is a window behind: both named,
     * the table made of the ranks that can be read. */
    blocks[1].h.magic = 0x12345678;
    blocks[3].h.step = 30;
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "rank 1: its numbers could not be read");
    CHECK_STR_CONTAINS(text, "rank 3: window ends at step 30, not 40");
    CHECK_STR_CONTAINS(text, "straggler: rank 2 in data");
    free(text);
    /* A name without its NUL is refused, not read past. */
    memset(blocks[0].stages[0].name, 'x', sizeof blocks[0].stages[0].name);
    text = format(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "rank 0: its numbers could not be read");
    free(text);
    CHECK_EQ(prof_ranks_format(blocks, 0, PROF_FORMAT_TEXT, NULL, 0), -EINVAL);
    CHECK_EQ(prof_ranks_format(blocks, 4, 7, NULL, 0), -EINVAL);
    return 0;
}
