/* clock.c - the tick source of the fast path and its conversion to
 * CLOCK_MONOTONIC nanoseconds.
 *
 * Zones read raw ticks: the TSC on x86-64 (rdtsc, ~20 ns on a VM, no system
 * call) when it is trustworthy, the generic timer (cntvct_el0) on arm64, and
 * clock_gettime(CLOCK_MONOTONIC) otherwise, in which case a tick is a
 * nanosecond. The TSC is trusted when the CPU says it is invariant (CPUID
 * 0x80000007 EDX bit 8) or when the kernel itself chose it as clocksource
 * (hypervisors often hide the CPUID bit while the kernel validated the TSC).
 *
 * Conversion is linear: ns = mono0 + (ticks - tick0) * rate. The anchor
 * (tick0, mono0) is taken once; the rate is re-measured by the collector on
 * every wake against a fresh (tick, mono) pair, so its baseline grows with
 * the run. Each pair is read as mono, ticks, mono and kept only when the two
 * monotonic reads are close; its error is half that gap (tens of ns), which
 * over the first 2 ms baseline is a rate error below 0.003% and shrinks as
 * the run goes on. The parameters are published with a sequence lock so any
 * thread can convert.
 *
 * The inline zone path reads the counter without testing which source is
 * in use: when the counter is not trusted, the runtime keeps zones on the
 * out-of-line path (PROF_ON_HOOKS_), which reads prof_ticks_now_(). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "json.h"

PROF_API int prof_clock_is_tsc_;

static struct prof_clock_map params = {0, 0, 1.0};
static unsigned params_seq;     /* odd while the collector rewrites params */
static int calibrated;          /* collector only */

static uint64_t mono_ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

PROF_API uint64_t prof_clock_fallback_ticks_(void)
{
    return mono_ns(CLOCK_MONOTONIC);
}

PROF_API uint64_t prof_ticks_now_(void)
{
    return __atomic_load_n(&prof_clock_is_tsc_, __ATOMIC_RELAXED) ? prof_ticks_()
                                                                  : prof_clock_fallback_ticks_();
}

uint64_t prof_clock_now_ns(void)
{
    return mono_ns(CLOCK_MONOTONIC);
}

int64_t prof_clock_realtime_offset_ns(void)
{
    uint64_t m1 = mono_ns(CLOCK_MONOTONIC);
    uint64_t r = mono_ns(CLOCK_REALTIME);
    uint64_t m2 = mono_ns(CLOCK_MONOTONIC);

    return (int64_t)(r - (m1 + (m2 - m1) / 2));
}

#if defined(__x86_64__) && !defined(PROF_NO_TSC)
static int cpu_has_invariant_tsc(void)
{
    unsigned a, b, c, d;

    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000000u), "c"(0));
    if (a < 0x80000007u)
        return 0;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000007u), "c"(0));
    return (d >> 8) & 1;
}

static int kernel_uses_tsc(void)
{
    char buf[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

    if (f == NULL)
        return 0;
    if (fgets(buf, sizeof buf, f) == NULL)
        buf[0] = '\0';
    fclose(f);
    return strncmp(buf, "tsc", 3) == 0;
}
#endif

/* A (ticks, mono) pair read as close together as this VM allows. */
static void read_pair(uint64_t *ticks, uint64_t *mono)
{
    uint64_t best_gap = UINT64_MAX;

    *ticks = *mono = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t m1 = mono_ns(CLOCK_MONOTONIC);
        uint64_t t = prof_ticks_();
        uint64_t m2 = mono_ns(CLOCK_MONOTONIC);

        if (m2 - m1 < best_gap) {
            best_gap = m2 - m1;
            *ticks = t;
            *mono = m1 + (m2 - m1) / 2;
        }
    }
}

static void params_publish(const struct prof_clock_map *p)
{
    unsigned seq = __atomic_load_n(&params_seq, __ATOMIC_RELAXED);
    double rate = p->ns_per_tick;

    __atomic_store_n(&params_seq, seq + 1, __ATOMIC_RELAXED);
    /* Release fence: readers that see the new fields also see the odd seq. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&params.tick0, p->tick0, __ATOMIC_RELAXED);
    __atomic_store_n(&params.mono0, p->mono0, __ATOMIC_RELAXED);
    __atomic_store(&params.ns_per_tick, &rate, __ATOMIC_RELAXED);
    /* Release: the fields are visible before the even seq. */
    __atomic_store_n(&params_seq, seq + 2, __ATOMIC_RELEASE);
}

static struct prof_clock_map params_read(void)
{
    struct prof_clock_map p;
    unsigned s1, s2;

    do {
        /* Acquire pairs with the release store of an even seq. */
        s1 = __atomic_load_n(&params_seq, __ATOMIC_ACQUIRE);
        p.tick0 = __atomic_load_n(&params.tick0, __ATOMIC_RELAXED);
        p.mono0 = __atomic_load_n(&params.mono0, __ATOMIC_RELAXED);
        __atomic_load(&params.ns_per_tick, &p.ns_per_tick, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&params_seq, __ATOMIC_RELAXED);
    } while ((s1 & 1) || s1 != s2);
    return p;
}

static void clock_init_once(void)
{
    struct prof_clock_map p = {0, 0, 1.0};
    int tsc = 0;

#if defined(__x86_64__) && !defined(PROF_NO_TSC)
    tsc = cpu_has_invariant_tsc() || kernel_uses_tsc();
#elif defined(__aarch64__) && !defined(PROF_NO_TSC)
    tsc = 1;
#endif
    __atomic_store_n(&prof_clock_is_tsc_, tsc, __ATOMIC_RELAXED);
    if (tsc) {
        read_pair(&p.tick0, &p.mono0);
#if defined(__aarch64__)
        {
            uint64_t freq;
            __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(freq));
            p.ns_per_tick = freq ? 1e9 / (double)freq : 1.0;
        }
#else
        p.ns_per_tick = 0.0;   /* unknown until the first calibration */
#endif
    }
    params_publish(&p);
}

void prof_clock_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, clock_init_once);
}

void prof_clock_calibrate(void)
{
    struct prof_clock_map p = params_read();
    uint64_t t = 0, m = 0;

    if (!prof_clock_is_tsc_)
        return;
    read_pair(&t, &m);
    /* The first calibration needs a baseline long enough that the pairs'
     * read error (tens of ns) is negligible: 2 ms gives < 0.003%. */
    while (!calibrated && m - p.mono0 < 2000000) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        read_pair(&t, &m);
    }
    if (t <= p.tick0)
        return;
    p.ns_per_tick = (double)(m - p.mono0) / (double)(t - p.tick0);
    params_publish(&p);
    calibrated = 1;
}

void prof_clock_map_get(struct prof_clock_map *m)
{
    *m = params_read();
}

void prof_clock_source(char *buf, size_t size)
{
    struct prof_clock_map p = params_read();

    if (!prof_clock_is_tsc_)
        snprintf(buf, size, "clock_gettime(CLOCK_MONOTONIC)");
    else if (p.ns_per_tick > 0) {
        char ghz[32];   /* locale-free: printf's %f writes the locale's comma */
        prof_fmt_fixed(ghz, sizeof ghz, 1.0 / p.ns_per_tick, 3);
        snprintf(buf, size, "tsc (%s GHz)", ghz);
    }
    else
        snprintf(buf, size, "tsc (not yet calibrated)");
}
