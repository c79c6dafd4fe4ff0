/* outputs_golden.c - one fixed run whose every output is known to the byte.
 *
 * The runtime is compiled into this test with its CLOCK_MONOTONIC replaced
 * by golden_clock_gettime() (golden.h; -Dclock_gettime=golden_clock_gettime,
 * -DPROF_NO_TSC: a tick is a nanosecond of that clock). The clock stands
 * still until the program moves it, so every time prof reads (a zone's
 * ends, a step, a counter, a summary's wall, the trace's timestamps, the
 * live view's and the memory sampler's ticks) is chosen here. What stays
 * real: the pid, thread ids, the host, the process's memory and the
 * realtime clock; outputs_golden.py masks those and compares the rest of
 * every output with tests/unit/golden/ (docs/ARCHITECTURE.md: "a figure is
 * computed once; each format writes it": a change in how any format is
 * written shows here as a diff).
 *
 * The run: a training loop of 6 steps on the main thread (data, forward
 * with a recursive attention and a norm, backward with the same norm, an
 * optimizer), a loss counter and a checkpoint mark, a loader thread's
 * zones between steps, hostile names (a quote and a backslash, invalid
 * UTF-8, a name longer than the table's column); PROF_SUMMARY_EVERY=3
 * makes two periodic summaries, then a demand summary in each format
 * (prof_summary_snprint), the by-name statistics (prof_stats_list) and
 * the final summary at prof_shutdown. On-CPU samples (and rises of the
 * peak with them) are pushed as the sampler's handler pushes them, at
 * chosen times with chosen values. Threads run one at a time, each
 * drained before the next, so that the trace's lines come in one order.
 *
 *     outputs_golden DIR     writes DIR/demand.txt, DIR/demand.json,
 *                            DIR/stats.txt (PROF_SUMMARY, PROF_TRACE,
 *                            PROF_METRICS are the runner's)
 */
#include <prof.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "golden.h"

/* An on-CPU sample now, as the sampler's signal handler pushes it: cpu_us
 * of CPU time for the innermost open zone, and a rise of the process's
 * peak resident memory with it. */
static void cpu(uint64_t cpu_us, uint64_t peak_rise)
{
    struct prof_thread_ *t = prof_thread_self_;
    uint32_t level = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;
    uint64_t now = __atomic_load_n(&fake_ns, __ATOMIC_RELAXED);

    CHECK(level > 0);
    prof_ring_push_(t, now, cpu_us * 1000u, t->names[level - 1], t->path, level - 1,
                    PROF_RECORD_CPU_);
    if (peak_rise != 0)
        prof_ring_push_(t, now, peak_rise, t->names[level - 1], t->path, level - 1,
                        PROF_RECORD_PEAK_);
}

/* The clock moves to T0 + t microseconds (never back). */
static void at(uint64_t t_us)
{
    uint64_t ns = T0 + t_us * 1000u;

    CHECK(ns >= __atomic_load_n(&fake_ns, __ATOMIC_RELAXED));
    __atomic_store_n(&fake_ns, ns, __ATOMIC_RELEASE);
}

#define LONG_NAME "a stage whose name is longer than the table's forty-eight columns"

static void *loader(void *arg)
{
    int round = *(int *)arg;

    CHECK_EQ(prof_thread_name("loader"), 0);
    for (int i = 0; i < 3; i++) {
        prof_zone d = prof_zone_begin("decode");

        at(now_us() + 40 + 10 * (uint64_t)i);
        cpu(30, 0);
        zone("resize", 25 + 5 * (uint64_t)round);
        at(now_us() + 5);
        prof_zone_end(&d);
    }
    zone("q\"uote\\name", 7);
    return NULL;
}

static void norm(uint64_t us)
{
    zone("norm", us);
}

/* attn inside attn, depth levels deep: one row (recursion folds). */
static void attn(int levels, uint64_t us)
{
    prof_zone z = prof_zone_begin("attn");

    at(now_us() + us);
    if (levels > 1)
        attn(levels - 1, us / 2);
    at(now_us() + us / 4);
    prof_zone_end(&z);
}

static void train_step(int s)
{
    prof_zone step = prof_zone_begin("step");
    prof_zone z;

    /* The first zone started the runtime: its live view's first tick
     * comes now, with the clock still. (One that ran while the clock
     * moves would measure its own cost on it and, taking that for a slow
     * snapshot, put its next tick off: live.c.) */
    if (s == 0)
        wait_metrics(0);
    z = prof_zone_begin("data");
    at(now_us() + 20000);
    cpu(1500, 0);                     /* data mostly waits */
    at(now_us() + 20000 + 50 * (uint64_t)(s % 3));
    prof_zone_end(&z);
    z = prof_zone_begin("forward");
    at(now_us() + 20);
    cpu(16, s == 2 ? (uint64_t)64 << 20 : 0);   /* 64 MiB more, once */
    attn(3, 400 + 16 * (uint64_t)s);
    norm(60 + (uint64_t)s);
    zone(LONG_NAME, 11);
    prof_zone_end(&z);
    z = prof_zone_begin("backward");
    at(now_us() + 30);
    norm(90 + 2 * (uint64_t)s);
    zone("bad\xff\xfename", 13);
    /* Long enough for a cpu% (40 ms of self time in the run), the whole
     * run under the live view's second. */
    at(now_us() + 45000 + 10 * (uint64_t)s);
    cpu(41000 + 100 * (uint64_t)s, 4096u * (uint64_t)(s + 1));
    prof_zone_end(&z);
    zone("optimizer", 150);
    prof_counter("loss", 2.5 / (s + 1));
    if (s == 3)
        prof_mark("checkpoint");
    prof_zone_end(&step);
    /* Uncovered spans under 10 us (PROF_UNCOVERED_SLICE_NS) are summed
     * until the drain's pass ends, so their count would be the drain's:
     * every span here is longer. */
    at(now_us() + 12);
    prof_step();
}

int main(int argc, char **argv)
{
    pthread_t th;
    int round;

    CHECK_MSG(argc == 2, "usage: outputs_golden DIR");
    CHECK_EQ(prof_thread_name("main"), 0);
    for (int s = 0; s < 6; s++) {
        at(now_us() + 17);
        train_step(s);
        if (s % 2 == 1) {
            /* The loader runs alone, each side drained before the other
             * runs again, so the trace's lines come in one order. */
            CHECK_EQ(prof_flush(), 0);
            round = s;
            CHECK_EQ(pthread_create(&th, NULL, loader, &round), 0);
            CHECK_EQ(pthread_join(th, NULL), 0);
            CHECK_EQ(prof_flush(), 0);
        }
    }
    CHECK_EQ(prof_flush(), 0);
    /* A second past the last tick: the live view publishes, the metrics
     * file is written. */
    at(now_us() + 1100000);
    wait_metrics(6);
    if (getenv("GOLDEN_LIVE") != NULL)
        live_handshake(argv[1]);
    demand(argv[1], "demand.txt", PROF_FORMAT_TEXT);
    demand(argv[1], "demand.json", PROF_FORMAT_JSON);
    stats_list(argv[1]);
    at(now_us() + 250);
    prof_shutdown();
    return 0;
}
