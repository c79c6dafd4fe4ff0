/* outputs_golden.c - one fixed run whose every output is known to the byte.
 *
 * The runtime is compiled into this test with its CLOCK_MONOTONIC replaced
 * by golden_clock_gettime() below (-Dclock_gettime=golden_clock_gettime,
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

/* This file is compiled with the runtime's flags, clock_gettime renamed
 * too: the real one is called by its own name here. */
#undef clock_gettime
extern int clock_gettime(clockid_t id, struct timespec *ts);

/* The fake CLOCK_MONOTONIC: 1000.5 s at the start (the trace's origin is
 * then 999 s), moved only by at(). */
#define T0 1000500000000ull

static uint64_t fake_ns = T0;

int golden_clock_gettime(clockid_t id, struct timespec *ts);

int golden_clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id == CLOCK_MONOTONIC) {
        uint64_t ns = __atomic_load_n(&fake_ns, __ATOMIC_ACQUIRE);

        ts->tv_sec = (time_t)(ns / 1000000000u);
        ts->tv_nsec = (long)(ns % 1000000000u);
        return 0;
    }
    return clock_gettime(id, ts);
}

/* The on-CPU sampler's timers (src/capture/sampler.c), renamed like the
 * clock: made and armed, never firing. Its samples are cpu() below. */
int golden_timer_create(clockid_t id, struct sigevent *ev, timer_t *timer);
int golden_timer_settime(timer_t timer, int flags, const struct itimerspec *it,
                         struct itimerspec *old);
int golden_timer_delete(timer_t timer);

int golden_timer_create(clockid_t id, struct sigevent *ev, timer_t *timer)
{
    (void)id;
    (void)ev;
    *timer = (timer_t)(uintptr_t)1;
    return 0;
}

int golden_timer_settime(timer_t timer, int flags, const struct itimerspec *it,
                         struct itimerspec *old)
{
    (void)timer;
    (void)flags;
    (void)it;
    if (old != NULL)
        memset(old, 0, sizeof *old);
    return 0;
}

int golden_timer_delete(timer_t timer)
{
    (void)timer;
    return 0;
}

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

static uint64_t now_us(void)
{
    return (__atomic_load_n(&fake_ns, __ATOMIC_RELAXED) - T0) / 1000u;
}

/* A zone of dur_us starting now; the clock ends at its end. */
static void zone(const char *name, uint64_t dur_us)
{
    prof_zone z = prof_zone_begin(name);

    at(now_us() + dur_us);
    prof_zone_end(&z);
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

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

static void demand(const char *dir, const char *name, int format)
{
    static char buf[1 << 20];
    int n = prof_summary_snprint(buf, sizeof buf, format);

    CHECK(n > 0 && (size_t)n < sizeof buf);
    write_file(dir, name, buf);
}

static void stats_list(const char *dir)
{
    static prof_stage_stats st[64];
    static char buf[1 << 16];
    size_t len = 0;
    int n = prof_stats_list(st, 64);

    CHECK(n > 0 && n <= 64);
    for (int i = 0; i < n; i++) {
        int w = snprintf(buf + len, sizeof buf - len,
                         "%s parent=%s depth=%d count=%llu total=%llu self=%llu min=%llu "
                         "max=%llu avg=%.3f p50=%.3f p95=%.3f p99=%.3f wall=%.6f flags=%u\n",
                         st[i].name, st[i].parent ? st[i].parent : "-", st[i].depth,
                         (unsigned long long)st[i].count, (unsigned long long)st[i].total_ns,
                         (unsigned long long)st[i].self_ns, (unsigned long long)st[i].min_ns,
                         (unsigned long long)st[i].max_ns, st[i].avg_ns, st[i].p50_ns, st[i].p95_ns,
                         st[i].p99_ns, st[i].wall_share, (unsigned)st[i].flags);
        CHECK(w > 0 && (size_t)w < sizeof buf - len);
        len += (size_t)w;
    }
    write_file(dir, "stats.txt", buf);
}

/* Waits until the metrics file holds the step count steps (the live
 * view's tick, on the collector thread, writes it once the clock has
 * moved a second past the last one). */
static void wait_metrics(int steps)
{
    const char *path = getenv("PROF_METRICS");
    char want[64], buf[1 << 16];

    snprintf(want, sizeof want, "prof_steps_total{rank=\"0\"} %d\n", steps);
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(path, "r");

        if (f != NULL) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);

            fclose(f);
            buf[n] = '\0';
            if (strstr(buf, want) != NULL)
                return;
        }
        usleep(10000);
    }
    CHECK_MSG(0, "%s never said %s", path, want);
}

/* The runner reads the live file (prof-top) while the process lives:
 * DIR/ready says it may, DIR/go that it did. */
static void live_handshake(const char *dir)
{
    char path[4096];

    write_file(dir, "ready", "");
    snprintf(path, sizeof path, "%s/go", dir);
    for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++)
        usleep(10000);
    CHECK_MSG(access(path, F_OK) == 0, "the runner never wrote %s", path);
    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/ready", dir);
    CHECK(unlink(path) == 0);
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
