/* alloc_fail.c - allocation-failure injection (driven by alloc_sweep.py).
 *
 * Linked against the static runtime with -Wl,--wrap for malloc, calloc,
 * realloc, aligned_alloc and strdup, so that every allocation the runtime
 * makes goes through the wrappers below (allocations inside libc itself,
 * e.g. fopen's buffer, do not). From a constructor that runs before the
 * runtime's own, the wrappers count calls; PROF_FAULT_N=N makes call N fail
 * (PROF_FAULT_MODE=once) or every call from N on (PROF_FAULT_MODE=from).
 * PROF_FAULT_THREAD=1 instead makes the runtime's pthread_create fail (the
 * collector thread). At exit the number of calls and the function each
 * failed call came from are printed ("fault-total:", "fault-site:").
 *
 * The workload is a small training loop: two threads and main record
 * nested zones under literal and interned names, counters, marks and steps
 * (PROF_SUMMARY_EVERY=Nsteps makes the collector format summaries), name
 * themselves, then main flushes, asks for stats, prints a summary to stdout
 * and returns, so that the final summary and the trace's ']' are written at
 * exit. Whatever fails, the program must exit 0: the runtime's results are
 * only checked for consistency (a stage count never exceeds what was
 * issued), not for completeness. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

/* ------------------------------------------------------------------------ */
/* The wrappers. */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
char *__wrap_strdup(const char *s);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

static int armed;
static unsigned long fail_at;        /* 0: never */
static int fail_from;                /* fail every call from fail_at on */
static int fail_thread;
static unsigned long calls;
#define MAX_SITES 64
static void *sites[MAX_SITES];
static unsigned long nfailed;

static int should_fail(void *site)
{
    unsigned long n;

    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED))
        return 0;
    n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (fail_at == 0 || n < fail_at || (!fail_from && n != fail_at))
        return 0;
    n = __atomic_fetch_add(&nfailed, 1, __ATOMIC_RELAXED);
    if (n < MAX_SITES)
        sites[n] = site;
    return 1;
}

#define SITE __builtin_extract_return_addr(__builtin_return_address(0))

void *__wrap_malloc(size_t n)
{
    return should_fail(SITE) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail(SITE) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return should_fail(SITE) ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return should_fail(SITE) ? NULL : __real_aligned_alloc(align, n);
}

char *__wrap_strdup(const char *s)
{
    return should_fail(SITE) ? NULL : __real_strdup(s);
}

static void *worker(void *arg);

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    if (fail_thread && fn != worker)
        return EAGAIN;
    return __real_pthread_create(t, a, fn, arg);
}

static void report(void)
{
    unsigned long n = __atomic_load_n(&nfailed, __ATOMIC_RELAXED);

    __atomic_store_n(&armed, 0, __ATOMIC_RELAXED);
    fprintf(stderr, "fault-total: %lu calls, %lu failed\n", calls, n);
    for (unsigned long i = 0; i < n && i < MAX_SITES; i++) {
        /* The address and the executable's load address, for addr2line. */
        Dl_info info;
        uintptr_t base = dladdr(sites[i], &info) != 0 ? (uintptr_t)info.dli_fbase : 0;
        fprintf(stderr, "fault-site: 0x%lx 0x%lx\n", (unsigned long)(uintptr_t)sites[i],
                (unsigned long)base);
    }
}

/* Before the runtime's constructor (default priority), so that the
 * environment parser's allocations are counted too; atexit registered here
 * runs after the runtime's final report. */
__attribute__((constructor(101))) static void arm(void)
{
    const char *n = getenv("PROF_FAULT_N"), *mode = getenv("PROF_FAULT_MODE");
    const char *th = getenv("PROF_FAULT_THREAD");

    fail_at = n != NULL ? strtoul(n, NULL, 10) : 0;
    fail_from = mode != NULL && strcmp(mode, "from") == 0;
    fail_thread = th != NULL && strcmp(th, "1") == 0;
    atexit(report);
    __atomic_store_n(&armed, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* The workload. */

#define ITERS 200
#define LAYERS 8

static const char *layer_names[LAYERS];

static void fail(const char *what, long v)
{
    fprintf(stderr, "alloc_fail: %s (%ld)\n", what, v);
    exit(1);
}

/* About us of CPU work: gives the collector time to wake between steps,
 * so that periodic summaries are formatted during the run. */
static void spin_us(unsigned us)
{
    struct timespec a, b;

    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < (long)us * 1000);
}

static void one_step(int who)
{
    PROF_ZONE("step");
    {
        PROF_ZONE("forward");
        for (int l = 0; l < LAYERS; l++) {
            PROF_ZONE(layer_names[l]);
            PROF_COUNTER("activation", l * 0.5 + who);
        }
    }
    {
        PROF_ZONE("backward");
        PROF_MARK("grad");
    }
}

static void *worker(void *arg)
{
    int who = (int)(long)arg;
    char name[32];

    snprintf(name, sizeof name, "worker-%d", who);
    prof_thread_name(name);
    for (int i = 0; i < ITERS; i++)
        one_step(who);
    return NULL;
}

int main(void)
{
    static char text[1 << 16];
    pthread_t t[2];
    prof_stage_stats st;
    char name[32];
    int err;

    for (int l = 0; l < LAYERS; l++) {
        snprintf(name, sizeof name, "layer.%d", l);
        /* NULL when interning failed: the stage is then "(null)". */
        layer_names[l] = prof_intern(name);
    }
    if (prof_enable(1) != 0)
        fail("prof_enable", 0);
    prof_thread_name("main");
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(long)(i + 1)) != 0)
            fail("pthread_create", i);
    for (int i = 0; i < ITERS; i++) {
        one_step(0);
        prof_step();
        spin_us(100);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);

    err = prof_flush();
    if (err != 0 && err != -ESRCH)
        fail("prof_flush", err);
    err = prof_stats("step", &st);
    if (err == 0 && st.count > 3 * ITERS)
        fail("more steps counted than issued", (long)st.count);
    if (err != 0 && err != -ENOENT && err != -ESRCH && err != -ENOMEM)
        fail("prof_stats", err);
    err = prof_summary_print(stdout);
    if (err != 0 && err != -ENOMEM && err != -ESRCH)
        fail("prof_summary_print", err);
    err = prof_summary_snprint(text, sizeof text, PROF_FORMAT_JSON);
    if (err < 0 && err != -ENOMEM && err != -ESRCH)
        fail("prof_summary_snprint", err);
    return 0;
}
