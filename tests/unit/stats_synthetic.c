/* stats_synthetic.c - statistics on synthetic timestamps. The whole runtime
 * is compiled into this test with -DPROF_NO_TSC, so a tick is a nanosecond;
 * zones are opened through the real fast path (which sets their depth and
 * parent path) and their records pushed with chosen start and end ticks.
 * Every number is then known exactly: count, total, self, min, max, avg,
 * the percentiles' buckets, the parent, recursion's wall share. */
#include <prof.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime.h"

#ifndef PROF_NO_TSC
#error "build with -DPROF_NO_TSC: ticks must be nanoseconds"
#endif

#define T0 1000000000000ull     /* an arbitrary start, far from 0 */

static prof_zone open_at(const char *name, uint64_t t)
{
    prof_zone z = prof_zone_begin(name);

    CHECK(z.start != 0);
    z.start = T0 + t;
    return z;
}

/* prof_zone_end_inline_, with the end tick given. */
static void close_at(prof_zone *z, uint64_t t)
{
    /* Without a trusted CPU counter (this test's -DPROF_NO_TSC) zones take
     * the out-of-line path, which tags the thread pointer's low bit. */
    struct prof_thread_ *th = (struct prof_thread_ *)((uintptr_t)z->thread & ~(uintptr_t)1);

    CHECK(th != NULL);
    __atomic_store_n(&th->depth, z->depth, __ATOMIC_RELAXED);
    __atomic_store_n(&th->path, z->parent, __ATOMIC_RELAXED);
    prof_ring_push_(th, z->start, T0 + t, z->name, z->parent, z->depth, PROF_RECORD_ZONE_);
    z->start = 0;
}

static void test_self(int flush_between)
{
    prof_stage_stats p, c1, c2, g;

    CHECK_EQ(prof_reset(), 0);
    for (int rep = 0; rep < 3; rep++) {
        uint64_t base = (uint64_t)rep * 10000;
        prof_zone parent = open_at("parent", base + 0);
        prof_zone c = open_at("c1", base + 100);
        prof_zone gz = open_at("g", base + 150);
        close_at(&gz, base + 200);                    /* g: 50 */
        close_at(&c, base + 300);                     /* c1: 200, self 150 */
        c = open_at("c2", base + 400);
        close_at(&c, base + 450);                     /* c2: 50 */
        if (flush_between)
            CHECK_EQ(prof_flush(), 0);
        c = open_at("c1", base + 500);
        close_at(&c, base + 800);                     /* c1: 300 */
        close_at(&parent, base + 1000 + (uint64_t)rep * 100);   /* 1000, 1100, 1200 */
    }
    p = test_stats("parent");
    c1 = test_stats("c1");
    c2 = test_stats("c2");
    g = test_stats("g");
    CHECK_EQ(p.count, 3);
    CHECK_EQ(p.total_ns, 3300);
    CHECK_EQ(p.self_ns, 3300 - 3 * (200 + 50 + 300));
    CHECK_EQ(p.min_ns, 1000);
    CHECK_EQ(p.max_ns, 1200);
    CHECK(p.avg_ns == 1100.0);
    CHECK(p.p50_ns >= 1100 * 0.99 && p.p50_ns <= 1100 * 1.01);
    CHECK(p.p99_ns >= 1200 * 0.99 && p.p99_ns <= 1200);
    CHECK_EQ(c1.count, 6);
    CHECK_EQ(c1.total_ns, 3 * 500);
    CHECK_EQ(c1.self_ns, 3 * (500 - 50));
    CHECK_EQ(c1.min_ns, 200);
    CHECK_EQ(c1.max_ns, 300);
    CHECK_EQ(c2.total_ns, 150);
    CHECK_EQ(c2.self_ns, 150);
    CHECK_EQ(g.total_ns, 150);
    CHECK_EQ(g.self_ns, 150);
    CHECK(p.parent == NULL);
    CHECK_STR_EQ(c1.parent, "parent");
    CHECK_STR_EQ(c2.parent, "parent");
    CHECK_STR_EQ(g.parent, "c1");
    CHECK_EQ(g.depth, 2);
}

/* Durations 1..1000 us: the percentiles within 1%, the rest exact. */
static void test_distribution(void)
{
    prof_stage_stats s;

    CHECK_EQ(prof_reset(), 0);
    for (uint64_t i = 1; i <= 1000; i++) {
        prof_zone z = open_at("dist", i * 2000000);
        close_at(&z, i * 2000000 + i * 1000);
    }
    s = test_stats("dist");
    CHECK_EQ(s.count, 1000);
    CHECK_EQ(s.min_ns, 1000);
    CHECK_EQ(s.max_ns, 1000000);
    CHECK_EQ(s.total_ns, 1000ull * 1001 / 2 * 1000);
    CHECK(s.avg_ns == 500500.0);
    CHECK_NEAR(s.p50_ns, 500000, 0.01);
    CHECK_NEAR(s.p95_ns, 950000, 0.01);
    CHECK_NEAR(s.p99_ns, 990000, 0.01);
}

/* A clock that steps back (end before start) gives a zero duration, not a
 * wrapped 2^64 one. */
static void test_backwards(void)
{
    prof_zone z;
    prof_stage_stats s;

    CHECK_EQ(prof_reset(), 0);
    z = open_at("backwards", 5000);
    close_at(&z, 4000);
    s = test_stats("backwards");
    CHECK_EQ(s.count, 1);
    CHECK_EQ(s.total_ns, 0);
    CHECK_EQ(s.max_ns, 0);
}

/* f inside f inside f: the count is 3, the self times add up to the
 * outermost duration, and the wall share counts the outermost zone once:
 * the same as a flat stage of the same duration. Mutual recursion too. */
static void test_recursion(void)
{
    prof_stage_stats rows[16], f = {0}, flat = {0}, a = {0}, b = {0};
    prof_zone z1, z2, z3;
    int n;

    CHECK_EQ(prof_reset(), 0);
    /* Make the wall time long next to the time between two rows'
     * computations, so that their shares compare closely. */
    test_spin_ns(50000000);
    z1 = open_at("f", 0);
    z2 = open_at("f", 100000);
    z3 = open_at("f", 200000);
    close_at(&z3, 800000);
    close_at(&z2, 900000);
    close_at(&z1, 1000000);
    z1 = open_at("flat", 2000000);
    close_at(&z1, 3000000);
    z1 = open_at("a", 4000000);
    z2 = open_at("b", 4100000);
    z3 = open_at("a", 4200000);
    close_at(&z3, 4800000);
    close_at(&z2, 4900000);
    close_at(&z1, 5000000);
    n = prof_stats_list(rows, 16);
    CHECK_EQ(n, 4);
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].name, "f") == 0)
            f = rows[i];
        else if (strcmp(rows[i].name, "flat") == 0)
            flat = rows[i];
        else if (strcmp(rows[i].name, "a") == 0)
            a = rows[i];
        else if (strcmp(rows[i].name, "b") == 0)
            b = rows[i];
    }
    CHECK_EQ(f.count, 3);
    CHECK_EQ(f.total_ns, 1000000 + 800000 + 600000);
    CHECK_EQ(f.self_ns, 1000000);
    CHECK(f.parent == NULL);
    CHECK_GT(flat.wall_share, 0);
    /* The wall time grows a little between two rows' computations; a
     * share counted per call instead of once would be 2.4 times as big. */
    CHECK_NEAR(f.wall_share, flat.wall_share, 0.02);
    CHECK_EQ(a.count, 2);
    CHECK_EQ(a.total_ns, 1000000 + 600000);
    CHECK_NEAR(a.wall_share, flat.wall_share, 0.02);
    CHECK_NEAR(b.wall_share, 0.8 * flat.wall_share, 0.02);
    /* a's heaviest placement is the top level (1 ms there, 0.6 ms under
     * b); b only ever runs under a. */
    CHECK(a.parent == NULL);
    CHECK_STR_EQ(b.parent, "a");
}

/* "parent" is the stage a stage mostly runs inside (FORMATS.md): a stage
 * that spends nearly all its time at the top level and runs once, briefly,
 * inside another stage is a top-level row, not that stage's child. */
static void test_parent_choice(void)
{
    prof_zone z, y;
    prof_stage_stats st;

    CHECK_EQ(prof_reset(), 0);
    for (uint64_t i = 0; i < 10; i++) {
        z = open_at("checkpoint", 10000000 + i * 2000000);
        close_at(&z, 10000000 + i * 2000000 + 1000000);      /* 10 x 1 ms at the top */
    }
    y = open_at("train_step", 50000000);
    z = open_at("checkpoint", 50000100);
    close_at(&z, 50000200);                                  /* once, 100 ns, inside */
    close_at(&y, 50001000);
    st = test_stats("checkpoint");
    CHECK_EQ(st.count, 11);
    CHECK_MSG(st.parent == NULL, "checkpoint (10 ms at the top level, 100 ns in train_step) "
              "is shown under \"%s\"", st.parent);
    CHECK_EQ(st.depth, 0);
}

/* Many stages: every one reaches prof_stats_list; a table or JSON section
 * shows the heaviest (chosen without sorting them all) and counts the rest
 * with their exact total. Stage i lasts (i + 1) us, under "root". */
static void test_many_stages(void)
{
    enum { N = 12000, JSON_ROWS = 10000, TEXT_ROWS = 60 };
    static prof_stage_stats all[N + 8];
    static char text[1 << 16];
    uint64_t folded_total = 0;
    char name[32], want[96];
    size_t cap = 16u << 20;
    char *json = malloc(cap);
    prof_zone root, z;
    int n;

    CHECK(json != NULL);
    CHECK_EQ(prof_reset(), 0);
    root = open_at("root", 0);
    for (uint64_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "s%05u", (unsigned)i);
        z = open_at(prof_intern(name), 1000 + i * 20000);
        close_at(&z, 1000 + i * 20000 + (i + 1) * 1000);
    }
    close_at(&root, 1000 + N * 20000);
    n = prof_stats_list(all, N + 8);
    CHECK_EQ(n, N + 1);
    /* Every row whole and in summary order: root, then s11999 down to
     * s00000 under it (rows are ordered with the lock released). A stage
     * whose path hash another shares (32 bits, 12,001 paths) is a top-level
     * row after root's: the order is checked on the rows under root. */
    CHECK_STR_EQ(all[0].name, "root");
    CHECK_EQ(all[0].depth, 0);
    CHECK(all[0].parent == NULL);
    {
        static unsigned char seen[N];
        int under = 0, last = N;
        for (int k = 1; k <= N; k++) {
            unsigned i = (unsigned)atoi(all[k].name + 1);
            snprintf(name, sizeof name, "s%05u", i);
            CHECK_STR_EQ(all[k].name, name);
            CHECK_MSG(i < N && !seen[i], "row %d: %s twice", k, name);
            seen[i] = 1;
            CHECK_EQ(all[k].count, 1);
            CHECK_EQ(all[k].total_ns, (i + 1) * 1000ull);
            CHECK_EQ(all[k].max_ns, (i + 1) * 1000ull);
            if (all[k].parent == NULL) {
                CHECK_EQ(all[k].depth, 0);
                continue;
            }
            CHECK_STR_EQ(all[k].parent, "root");
            CHECK_EQ(all[k].depth, 1);
            CHECK_MSG(k == under + 1 && (int)i < last, "row %d: %s after s%05d", k, all[k].name,
                      last);
            last = (int)i;
            under++;
        }
        CHECK_GE(under, N - 8);
    }
    /* A short array gets the first rows of the same order. */
    {
        prof_stage_stats few[3];
        CHECK_EQ(prof_stats_list(few, 3), N + 1);
        for (int k = 0; k < 3; k++) {
            CHECK_STR_EQ(few[k].name, all[k].name);
            CHECK_EQ(few[k].depth, all[k].depth);
            CHECK_EQ(few[k].total_ns, all[k].total_ns);
        }
    }
    CHECK_EQ(prof_stats_list(NULL, 0), N + 1);

    /* JSON: "root" and the 9,999 heaviest stages s02001..s11999 shown... */
    n = prof_summary_snprint(json, cap, PROF_FORMAT_JSON);
    CHECK(n > 0 && (size_t)n < cap);
    for (uint64_t i = 0; i < N - JSON_ROWS + 1; i++)
        folded_total += (i + 1) * 1000;
    snprintf(want, sizeof want, "\"folded_stages\":%d,\"folded_total_ns\":%llu", N - JSON_ROWS + 1,
             (unsigned long long)folded_total);
    CHECK_MSG(strstr(json, want) != NULL, "JSON summary lacks %s", want);
    CHECK(strstr(json, "\"name\":\"s11999\"") != NULL);
    CHECK(strstr(json, "\"name\":\"s02001\"") != NULL);
    /* ...and the lighter ones not. */
    CHECK(strstr(json, "\"name\":\"s02000\"") == NULL);
    CHECK(strstr(json, "\"name\":\"s00000\"") == NULL);

    /* Text: the 59 heaviest under root, heaviest first, then one line. */
    n = prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT);
    CHECK(n > 0 && (size_t)n < sizeof text);
    CHECK(strstr(text, "s11999") != NULL && strstr(text, "s11941") != NULL);
    CHECK(strstr(text, "s11940") == NULL);
    CHECK(strstr(text, "s11999") < strstr(text, "s11998"));
    snprintf(want, sizeof want, "... %d more stages", N - TEXT_ROWS + 1);
    CHECK_MSG(strstr(text, want) != NULL, "text summary lacks \"%s\":\n%s", want, text);
    free(json);
}

/* A chain: c_i runs inside c_(i-1) longer than it runs at the top level,
 * so each is the child of the one before, up to N deep. The tree is built
 * in time linear in N (its cycle check walked to the root from every
 * stage: 2 minutes here) and the rows come out in tree order without
 * recursion. Paths are 32-bit hashes of name pointers, so among N paths a
 * few collide and cut the chain into a few pieces; the rows must still
 * form a consistent tree. */
static void test_deep_chain(void)
{
    enum { N = 200000 };
    static prof_stage_stats rows[N + 1];
    static const char *names[N + 1], *at_depth[N + 1];
    static unsigned char seen[N + 1];
    static char text[1 << 16];
    size_t cap = 64u << 20;
    char *json = malloc(cap);
    char name[32];
    uint64_t t = 1000;
    uint32_t deepest = 0;
    int n;

    CHECK(json != NULL);
    CHECK_EQ(prof_reset(), 0);
    for (int i = 0; i <= N; i++) {
        snprintf(name, sizeof name, "c%06d", i);
        names[i] = prof_intern(name);
    }
    for (uint64_t i = 0; i < N; i++) {
        uint64_t d = 2 * (N - i) + 2;        /* c_i at the top: D_i */
        prof_zone outer = open_at(names[i], t), inner = open_at(names[i + 1], t + 1);
        close_at(&inner, t + d);             /* c_(i+1) inside: D_i - 1 > D_(i+1) */
        close_at(&outer, t + d);
        t += d + 10;
        if (i % 10000 == 0)
            CHECK_EQ(prof_flush(), 0);
    }
    n = prof_stats_list(rows, N + 1);
    CHECK_EQ(n, N + 1);
    for (int k = 0; k <= N; k++) {
        const prof_stage_stats *r = &rows[k];
        int i = atoi(r->name + 1);

        CHECK_MSG(i >= 0 && i <= N && r->name == names[i] && !seen[i], "row %d: %s", k, r->name);
        seen[i] = 1;
        CHECK_MSG(k > 0 ? r->depth <= rows[k - 1].depth + 1 : r->depth == 0,
                  "row %d: depth %u after %u", k, r->depth, k ? rows[k - 1].depth : 0);
        CHECK_MSG(r->depth == 0 ? r->parent == NULL : r->parent == at_depth[r->depth - 1],
                  "row %d (%s, depth %u): parent %s, the row above at depth %u is %s", k,
                  r->name, r->depth, r->parent, r->depth - 1,
                  r->depth ? at_depth[r->depth - 1] : "-");
        at_depth[r->depth] = r->name;
        deepest = r->depth > deepest ? r->depth : deepest;
    }
    /* Some 19 of the 400,000 paths share a hash; 12 runs gave a deepest
     * piece of 27,000 to 78,000 levels. */
    CHECK_MSG(deepest >= N / 50, "the chain is at most %u deep", deepest);
    n = prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT);
    CHECK(n > 0 && (size_t)n < sizeof text);
    CHECK_STR_CONTAINS(text, "more stages");
    n = prof_summary_snprint(json, cap, PROF_FORMAT_JSON);
    CHECK(n > 0 && (size_t)n < cap);
    /* The 10,000 heaviest rows and their ancestors shown, the rest
     * folded. Rows are paths: c_i at the top and under c_(i-1). */
    {
        const char *f = strstr(json, "\"folded_stages\":");
        long folded = f ? strtol(f + strlen("\"folded_stages\":"), NULL, 10) : -1;
        long paths = (long)test_json_u64(json, "paths");
        /* (less the few that share a hash with another) */
        CHECK_MSG(paths <= 2 * N && paths > 2 * N - 1000, "paths %ld", paths);
        CHECK_MSG(folded > 0 && folded <= paths - 10000, "folded_stages %ld", folded);
    }
    free(json);
}

/* A full ring loses records: main (100 ns) around inner (60 ns, from 20
 * to 80) in pairs; the thread fills its ring while the collector is held
 * off (the test holds the runtime lock), so that the last pair it keeps is
 * cut after its inner, and two more pairs are lost whole. The next pair's
 * main must still have its own inner subtracted, and not the inner whose
 * main was lost, which ended before it began (the GAP record the ring
 * writes before the first record after a loss says where the loss was).
 * Without it that main's self was all of its 100 ns. */
static void pair_at(uint64_t t)
{
    prof_zone m = open_at("loss_main", t), in = open_at("loss_inner", t + 20);

    close_at(&in, t + 80);
    close_at(&m, t + 100);
}

struct loss {
    uint64_t pairs_kept, dropped;
};

static void *loss_thread(void *arg)
{
    struct loss *l = arg;
    uint64_t t = 1000, cap, before = test_dropped();
    prof_zone solo;

    pthread_mutex_lock(&prof_rt.lock);
    solo = open_at("loss_solo", t);          /* attaches the thread: 1 record */
    close_at(&solo, t + 10);
    cap = prof_thread_self_->mask + 1;
    /* 1 + 2 * pairs = cap - 1 records, then one more pair: its inner is
     * the ring's last record, its main the first one lost. */
    l->pairs_kept = (cap - 2) / 2;
    for (uint64_t i = 0; i < l->pairs_kept + 3; i++, t += 200)
        pair_at(t);
    pthread_mutex_unlock(&prof_rt.lock);
    CHECK_EQ(prof_flush(), 0);
    pair_at(t);                              /* after the loss */
    l->pairs_kept++;
    CHECK_EQ(prof_flush(), 0);
    l->dropped = test_dropped() - before;
    return NULL;
}

static void test_self_across_loss(void)
{
    struct loss l;
    pthread_t th;
    prof_stage_stats m, in;

    CHECK_EQ(prof_reset(), 0);
    CHECK_EQ(pthread_create(&th, NULL, loss_thread, &l), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    m = test_stats("loss_main");
    in = test_stats("loss_inner");
    CHECK_EQ(l.dropped, 5);                  /* a main and two pairs */
    CHECK_EQ(m.count, l.pairs_kept);
    CHECK_EQ(in.count, l.pairs_kept + 1);    /* and the inner whose main was lost */
    CHECK_EQ(m.total_ns, 100 * l.pairs_kept);
    CHECK_MSG(m.self_ns == 40 * l.pairs_kept, "main self %llu ns over %llu mains, want 40 each",
              (unsigned long long)m.self_ns, (unsigned long long)l.pairs_kept);
    CHECK_EQ(m.max_ns, 100);
    CHECK_STR_EQ(in.parent, "loss_main");
}

/* A step record at tick t, as prof_step() pushes it outside every zone. */
static void step_at(uint64_t n, uint64_t t)
{
    prof_zone z = prof_zone_begin("probe");   /* attaches the thread; its record is never pushed */
    struct prof_thread_ *th = (struct prof_thread_ *)((uintptr_t)z.thread & ~(uintptr_t)1);

    CHECK(th != NULL);
    __atomic_store_n(&th->depth, z.depth, __ATOMIC_RELAXED);
    __atomic_store_n(&th->path, z.parent, __ATOMIC_RELAXED);
    prof_ring_push_(th, T0 + t, n, "step", z.parent, z.depth, PROF_RECORD_STEP_);
}

/* A worker's zones with 5 ms between them; it never steps. */
static void *idle_worker(void *arg)
{
    for (uint64_t k = 0; k < 3; k++) {
        prof_zone z = open_at("idle_a", 200000000000ull + k * 6000000);

        close_at(&z, 200000000000ull + k * 6000000 + 1000000);
    }
    CHECK_EQ(prof_flush(), 0);
    return arg;
}

/* Time outside every stage: steps of a 2 ms zone `a` and 1 ms outside any
 * zone. The stepping thread's uncovered time is the stage "(no stage)":
 * 1 ms a step, half of a's time, so a third of the time the thread
 * recorded; in the table, the JSON and prof_stats(). A thread that never
 * steps counts none: its zones `idle_a` with 5 ms between them add no
 * uncovered time. */
static void test_no_stage(void)
{
    enum { STEPS = 10 };
    const uint64_t base = 100000000000ull;   /* after every earlier test's ticks */
    prof_stage_stats ns, a, rows[8];
    char text[8192], json[16384], want[128];
    int n;

    CHECK_EQ(prof_reset(), 0);
    test_spin_ns(20000000);   /* a wall time much longer than the rows' computations */
    for (uint64_t k = 0; k < STEPS; k++) {
        uint64_t t = base + k * 3000000;
        prof_zone z;

        step_at(k + 1, t);
        z = open_at("a", t);
        close_at(&z, t + 2000000);
    }
    step_at(STEPS + 1, base + STEPS * 3000000);
    ns = test_stats("(no stage)");
    a = test_stats("a");
    CHECK_EQ(a.count, STEPS);
    CHECK_EQ(a.total_ns, STEPS * 2000000ull);
    CHECK_EQ(ns.count, STEPS);
    CHECK_EQ(ns.total_ns, STEPS * 1000000ull);
    CHECK_EQ(ns.self_ns, STEPS * 1000000ull);
    CHECK_EQ(ns.min_ns, 1000000);
    CHECK_EQ(ns.max_ns, 1000000);
    CHECK(ns.parent == NULL);
    CHECK_GT(ns.wall_share, 0);
    CHECK_NEAR(ns.wall_share, 0.5 * a.wall_share, 0.02);
    /* The share of what the thread recorded: a third. */
    CHECK_NEAR((double)ns.total_ns / (double)(ns.total_ns + a.total_ns), 1.0 / 3, 0.001);

    n = prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT);
    CHECK(n > 0 && (size_t)n < sizeof text);
    CHECK_MSG(strstr(text, "\n(no stage) ") != NULL || strstr(text, " (no stage) ") != NULL,
              "text summary lacks the (no stage) row:\n%s", text);
    n = prof_summary_snprint(json, sizeof json, PROF_FORMAT_JSON);
    CHECK(n > 0 && (size_t)n < sizeof json);
    CHECK_MSG(strstr(json, "\"name\":\"(no stage)\"") != NULL, "JSON lacks (no stage):\n%s",
              json);
    snprintf(want, sizeof want, "\"total_ns\":%llu", (unsigned long long)(STEPS * 1000000ull));
    CHECK_MSG(strstr(strstr(json, "\"name\":\"(no stage)\""), want) != NULL,
              "JSON (no stage) lacks %s:\n%s", want, json);

    /* A thread that does not step: no uncovered time of its own. */
    CHECK_EQ(prof_reset(), 0);
    {
        pthread_t th;

        CHECK_EQ(pthread_create(&th, NULL, idle_worker, NULL), 0);
        CHECK_EQ(pthread_join(th, NULL), 0);
    }
    n = prof_stats_list(rows, 8);
    CHECK_EQ(n, 1);
    CHECK_STR_EQ(rows[0].name, "idle_a");
}

int main(void)
{
    CHECK_EQ(prof_enable(1), 0);
    test_self(0);
    test_self(1);
    test_distribution();
    test_backwards();
    test_recursion();
    test_parent_choice();
    test_many_stages();
    test_deep_chain();
    test_self_across_loss();
    test_no_stage();
    return 0;
}
