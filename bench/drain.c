/* drain.c - what the collector's drain costs, and what it keeps up with
 * (issue 28), measured in one process with the default ring:
 *
 *   drain_ns_10 / _1k / _100k   CPU ns per record of a prof_flush() that
 *                               drains DRAIN_RECORDS zones cycling over
 *                               10 / 1,000 / 100,000 stages (all made
 *                               before: the cost of a record, not of a new
 *                               stage). The zones are recorded by another
 *                               thread, as the collector drains other
 *                               threads' rings; the flushing thread's CPU
 *                               time (CLOCK_THREAD_CPUTIME_ID) is divided
 *                               by the records. Median of RUNS flushes.
 *   loss_1m_10k                 the share of zones dropped when one thread
 *                               records 1 M zones/s, paced with the clock,
 *                               cycling over 10,000 stages for SECONDS.
 *   reset_ms / reset_max_ms     how long prof_reset() takes while FLOODERS
 *                               threads record as fast as they can (median
 *                               and longest of RESETS calls).
 *
 *     build/bench/drain [seconds [parts]]   (PROF_BENCH_QUICK=1: shorter runs)
 *
 * PROF_BENCH_DRAIN_STEP=1: the producer calls prof_step() once first, so
 * that it is a thread that steps and the time between its back-to-back
 * zones is counted as "(no stage)" (src/collect/uncovered.h): the worst
 * case of that count, one span per record.
 *
 * parts: any of d (drain), l (loss), r (reset); default all. A part left
 * out prints 0.
 *
 * Its source uses only the public API, so bench/old_new.sh builds it
 * against an older commit's library too and runs both alternated.
 *
 * Last line, for scripts:
 * prof-bench drain: drain_ns_10=<ns> drain_ns_1k=<ns> drain_ns_100k=<ns>
 *     loss_1m_10k=<%> reset_ms=<ms> reset_max_ms=<ms> */
#include <pthread.h>
#include <stdlib.h>

#include <prof.h>

#include "bench.h"

/* Under half a ring's warm slots (src/capture/ring.h): a producer never wakes the
 * collector at its fill mark, so the flush drains them all itself. */
#define DRAIN_RECORDS 16000
#define RUNS 31
#define MAX_STAGES 100000
#define FLOODERS 4
#define RESETS 21

static const char *names[MAX_STAGES];

static uint64_t cpu_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The producer: records `count` zones cycling over `nstages` names from
 * where it left off, when asked; the main thread waits, then flushes. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int count, nstages, next, quit;
    unsigned done;
} job = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0};

__attribute__((noinline)) static void record(int count, int nstages, int *next)
{
    int k = *next;

    for (int i = 0; i < count; i++) {
        PROF_ZONE(names[k]);
        if (++k == nstages)
            k = 0;
        __asm__ __volatile__("" ::: "memory");
    }
    *next = k;
}

static void *producer(void *arg)
{
    unsigned seen = 0;

    (void)arg;
    if (getenv("PROF_BENCH_DRAIN_STEP") != NULL && atoi(getenv("PROF_BENCH_DRAIN_STEP")) != 0)
        prof_step();
    pthread_mutex_lock(&job.lock);
    for (;;) {
        while (job.count == 0 && !job.quit)
            pthread_cond_wait(&job.cond, &job.lock);
        if (job.quit)
            break;
        pthread_mutex_unlock(&job.lock);
        record(job.count, job.nstages, &job.next);
        pthread_mutex_lock(&job.lock);
        job.count = 0;
        job.done = ++seen;
        pthread_cond_broadcast(&job.cond);
    }
    pthread_mutex_unlock(&job.lock);
    return NULL;
}

static void produce(int count, int nstages)
{
    unsigned want;

    pthread_mutex_lock(&job.lock);
    if (job.nstages != nstages)
        job.next = 0;
    job.nstages = nstages;
    job.count = count;
    want = job.done + 1;
    pthread_cond_broadcast(&job.cond);
    while (job.done != want)
        pthread_cond_wait(&job.cond, &job.lock);
    pthread_mutex_unlock(&job.lock);
}

/* CPU ns per record of the flush that drains DRAIN_RECORDS zones over
 * nstages stages. */
static double drain_ns(int nstages)
{
    double ns[RUNS];

    /* Every stage made (and the producer's ring laps taken) first. */
    for (int i = 0; i < nstages; i += DRAIN_RECORDS) {
        produce(DRAIN_RECORDS, nstages);
        prof_flush();
    }
    for (int i = 0; i < 4; i++) {
        produce(DRAIN_RECORDS, nstages);
        prof_flush();
    }
    for (int run = 0; run < RUNS; run++) {
        uint64_t c0;

        produce(DRAIN_RECORDS, nstages);
        c0 = cpu_now_ns();
        prof_flush();
        ns[run] = (double)(cpu_now_ns() - c0) / DRAIN_RECORDS;
    }
    return bench_median(ns, RUNS);
}

/* One thread at rate zones/s cycling over nstages names for seconds;
 * returns the percentage of its zones dropped. */
static double loss(double rate, int nstages, double seconds)
{
    uint64_t t0, dur = (uint64_t)(seconds * 1e9), made = 0, d0;
    int k = 0;

    prof_flush();
    d0 = bench_dropped();
    t0 = bench_now_ns();
    for (;;) {
        uint64_t el = bench_now_ns() - t0;
        uint64_t due = (uint64_t)((double)el * rate / 1e9);

        if (el >= dur)
            break;
        /* Behind, it catches up in bursts of at most 64 (bench_pace). */
        for (int b = 0; made < due && b < 64; b++, made++) {
            PROF_ZONE(names[k]);
            if (++k == nstages)
                k = 0;
            __asm__ __volatile__("" ::: "memory");
        }
    }
    prof_flush();
    return made ? 100.0 * (double)(bench_dropped() - d0) / (double)made : 0;
}

static int flooding;

static void *flooder(void *arg)
{
    int k = (int)(intptr_t)arg;

    while (__atomic_load_n(&flooding, __ATOMIC_RELAXED)) {
        for (int i = 0; i < 1024; i++) {
            PROF_ZONE(names[k]);
            if (++k == 1000)
                k = 0;
            __asm__ __volatile__("" ::: "memory");
        }
    }
    return NULL;
}

/* prof_reset() while FLOODERS threads record flat out: median and
 * longest, in ms. */
static void reset_ms(double *median, double *longest)
{
    pthread_t f[FLOODERS];
    double ms[RESETS];

    __atomic_store_n(&flooding, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < FLOODERS; i++)
        pthread_create(&f[i], NULL, flooder, (void *)(intptr_t)(i * 250));
    usleep(200000);
    *longest = 0;
    for (int i = 0; i < RESETS; i++) {
        uint64_t t0 = bench_now_ns();

        prof_reset();
        ms[i] = (double)(bench_now_ns() - t0) / 1e6;
        if (ms[i] > *longest)
            *longest = ms[i];
        usleep(50000);
    }
    __atomic_store_n(&flooding, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < FLOODERS; i++)
        pthread_join(f[i], NULL);
    *median = bench_median(ms, RESETS);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : (getenv("PROF_BENCH_QUICK") ? 1.0 : 3.0);
    const char *parts = argc > 2 ? argv[2] : "dlr";
    double d10 = 0, d1k = 0, d100k = 0, l = 0, rmed = 0, rmax = 0;
    pthread_t p;

    bench_require_env(argv, "PROF", "1");
    bench_require_env(argv, "PROF_SUMMARY", "off");
    for (int i = 0; i < MAX_STAGES; i++) {
        char b[32];
        snprintf(b, sizeof b, "stage%06d", i);
        names[i] = prof_intern(b);
    }
    { PROF_ZONE("attach"); }
    if (pthread_create(&p, NULL, producer, NULL) != 0)
        return 1;
    if (strchr(parts, 'd')) {
        d10 = drain_ns(10);
        d1k = drain_ns(1000);
        d100k = drain_ns(100000);
    }
    pthread_mutex_lock(&job.lock);
    job.quit = 1;
    pthread_cond_broadcast(&job.cond);
    pthread_mutex_unlock(&job.lock);
    pthread_join(p, NULL);
    if (strchr(parts, 'l'))
        l = loss(1e6, 10000, seconds);
    if (strchr(parts, 'r'))
        reset_ms(&rmed, &rmax);
    printf("prof-bench drain: drain_ns_10=%.1f drain_ns_1k=%.1f drain_ns_100k=%.1f "
           "loss_1m_10k=%.2f reset_ms=%.2f reset_max_ms=%.2f\n", d10, d1k, d100k, l, rmed, rmax);
    return 0;
}
