/* golden.h - what the golden runs share (outputs_golden.c, the CPU paths;
 * outputs_golden_gpu.c, the GPU paths): the CLOCK_MONOTONIC the program
 * moves itself, the sampler's timers that never fire, and the outputs a
 * run writes into its directory (the demand summaries, prof_stats_list)
 * or waits for (the metrics file, the runner's reading of the live file).
 *
 * Included once per program, after check.h: golden_clock_gettime and the
 * timers are the program's (the runtime compiled in calls them by the
 * names -Dclock_gettime=golden_clock_gettime etc. give it). */
#ifndef PROF_TEST_GOLDEN_H
#define PROF_TEST_GOLDEN_H

#include <prof.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "wake.h"

/* This file is compiled with the runtime's flags, clock_gettime renamed
 * too: the real one is called by its own name here. */
#undef clock_gettime
extern int clock_gettime(clockid_t id, struct timespec *ts);

/* The fake CLOCK_MONOTONIC: 2.5 s at the start (the trace's origin is
 * then 1 s), moved only by the program. It stays behind the real one on
 * any machine up for more than a few seconds: the collector's sleeps end
 * at deadlines on this clock, which the kernel reads on the real one, so
 * they end at once and the collector runs as often as it can, as on a
 * machine up for hours. (Ahead of the real clock, it would sleep until
 * woken: the same outputs but for a window's start, which a sleeping
 * collector takes at its first drain, one step late.) */
#define T0 2500000000ull

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

/* The clock moves to T0 + t microseconds, never back: each program's
 * own (the GPU run's moves it with the runtime lock held). */
static void at(uint64_t t_us);

static uint64_t now_us(void)
{
    return (__atomic_load_n(&fake_ns, __ATOMIC_RELAXED) - T0) / 1000u;
}

/* A CPU zone of dur_us starting now; the clock ends at its end. */
static void zone(const char *name, uint64_t dur_us)
{
    prof_zone z = prof_zone_begin(name);

    at(now_us() + dur_us);
    prof_zone_end(&z);
}

/* The on-CPU sampler's timers (src/capture/sampler.c), renamed like the
 * clock: made and armed, never firing. */
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

/* The collector sleeps until a deadline on the fake clock, which the
 * kernel reads as real CLOCK_MONOTONIC: on a machine up for less time
 * than the fake clock says, it would sleep for the difference. A program
 * waiting for something the collector does (its tick) wakes it. */
static void wake_collector(void)
{
    prof_wake_collector();
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
        wake_collector();
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

#endif
