/* PROF_CUDA=kernels on the fake driver and the fake CUPTI (fakecupti.c):
 * what the GPU ran, per GPU stage, from CUPTI's records.
 *
 *   test_cuda_kernels MODE
 *
 * attribution  thread A opens "outer" on stream 1 and launches k_a; thread
 *              B, while "outer" is open, runs 100 zones "bz" of its own on
 *              stream 1 (their kernels are theirs), launches k_b three
 *              times on stream 1 (they land in A's zone) and runs "other" on stream
 *              2 (a kernel, a memcpy, a memset); A then runs "inner"
 *              nested in "outer" (its kernel is inner's, not outer's),
 *              and while inner is open B runs 100 zones "late" on stream
 *              1 that launch nothing, so that they are still kept when
 *              inner and outer end (no later launch was read): those ends
 *              must find their begins behind 100 newer zones of another
 *              thread. Then a kernel outside every zone ("(no zone)
 *              [gpu]") and a zone whose stream runs nothing (a zero GPU
 *              side, said once).
 *              Busy time and kernel counts are exact against the fake's
 *              simulated lengths (one stream: no overlap); the summary
 *              text has the busy line with the top kernels under each GPU
 *              stage, the JSON its "kernels" member, the GPU busy share
 *              the kernels' union.
 * dropped      PROF_CUPTI_BUFFERS=1 and bursts of launches that fill it
 *              faster than the collector empties it: records are dropped,
 *              counted (kernels seen + dropped = launched), and said.
 * nolib, old, subscriber, flushfail
 *              no CUPTI, a CUPTI without the timestamp callback, another
 *              subscriber, cuptiActivityFlushAll failing: one line each,
 *              and the zones time the GPU with events.
 * many         30,000 zones with a kernel each, launched as fast as one
 *              thread can: every zone's GPU side and every kernel arrives
 *              (a zone is forgotten once a later launch on its stream was
 *              read, so the zones kept stay few), busy exact.
 * streams      1,000 streams made and destroyed, 4 alive at a time, a zone
 *              with one kernel on each: every kernel lands in its zone
 *              (none in "(no zone)" but the one launched outside every
 *              zone), every zone has its GPU side, nothing dropped or
 *              said: stream slots are reused once their zones are done.
 * labels       zones whose names put a 2-, 3- and 4-byte UTF-8 character
 *              across the 128th byte of their GPU stage's name, and one
 *              with quotes, a backslash, a newline, a control and an
 *              invalid byte, each with a kernel whose name is UTF-8; waits
 *              until PROF_METRICS (a .prom file) has their kernel samples,
 *              then prints that file between "--- metrics" and "--- end",
 *              and the text summary between "--- text" and "--- end"
 *              (labels.py judges both: UTF-8, the exposition format, one
 *              label per stage in every metric).
 * fork         a child forked after kernels mode began: one line, CPU
 *              sides only, and the parent's kernels still arrive.
 * names        6,000 kernels of distinct names: the first 4,096 names are
 *              kept, later kernels are "(other kernels)" (in the trace's
 *              slices), all are counted, and the bound is said once.
 * loaded       no PROF_CUPTI_LIB; the process has loaded a CUPTI by path
 *              (soname libcupti.so.13, as a torch wheel does) and a decoy
 *              libcupti.so, too old, is on the loader's path: prof uses the
 *              loaded one (a second copy would be a second CUPTI in the
 *              process): kernels mode, no line.
 * unfinished   the run ends while a 5 s kernel still runs: CUPTI's
 *              ordinary flush never hands back the buffer holding it, so
 *              the final summary needs the forced one: the zone before it
 *              is there with its kernel, the running one is counted as
 *              lost and said once. */
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_test.h"
#include "../fuzz/json_strict.h"

/* As test_cuda_fork.c: a fork with the collector running is left to the
 * builds whose runtime supports it. */
#if defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define UNDER_TSAN 1
#  endif
#endif
#if defined(__SANITIZE_THREAD__)
#  define UNDER_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#  define UNDER_ASAN 1
#endif

#define US 1000ull

static struct fake f;
static void (*launch_kind)(CUstream, uint64_t ns, int kind, const char *name);
static CUcontext ctx;
static CUstream s1, s2;
static char text[32768], json[131072];

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;

static void set_phase(int p)
{
    pthread_mutex_lock(&mu);
    phase = p;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_phase(int p)
{
    pthread_mutex_lock(&mu);
    while (phase < p)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void kernel(CUstream s, uint64_t ns, const char *name)
{
    launch_kind(s, ns, 10, name);
}

static void *thread_b(void *arg)
{
    (void)arg;
    CHECK(f.ctx_set_current(ctx) == 0);
    wait_phase(1);
    /* More zones of this thread on A's stream than the end's search for
     * lost ends looks at: A's zone must still find its end. */
    for (int i = 0; i < 100; i++) {
        PROF_CUDA_ZONE("bz", s1);
        kernel(s1, 1 * US, "_Z4tickv");
    }
    for (int i = 0; i < 3; i++)
        kernel(s1, 300 * US, "_Z3k_bPf");
    {
        PROF_CUDA_ZONE("other", s2);
        kernel(s2, 150 * US, "_Z4k_s2v");
        launch_kind(s2, 50 * US, 1, NULL);
        launch_kind(s2, 25 * US, 2, NULL);
    }
    set_phase(2);
    wait_phase(3);
    for (int i = 0; i < 100; i++) {
        PROF_CUDA_ZONE("late", s1);
    }
    set_phase(4);
    return NULL;
}

static void summaries(void)
{
    char err[128];

    CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) > 0);
    CHECK(prof_summary_snprint(json, sizeof json, PROF_FORMAT_JSON) > 0);
    CHECKF(json_strict_check(json, strlen(json), NULL, NULL, err, sizeof err) == 0,
           "summary JSON: %s", err);
    if (getenv("PROF_TEST_VERBOSE") != NULL)
        fprintf(stderr, "%s\n%s\n", text, json);
}

/* The line after the row of stage `row` in the text summary. */
static const char *line_under(const char *row, char *buf, size_t size)
{
    const char *p = strstr(text, row), *q;
    size_t n;

    CHECKF(p != NULL, "no row %s in:\n%s", row, text);
    CHECK((q = strchr(p, '\n')) != NULL);
    q++;
    n = strcspn(q, "\n");
    CHECK(n < size);
    memcpy(buf, q, n);
    buf[n] = '\0';
    return buf;
}

/* A number of the "kernels" member of stage `name` in the "total"
 * section of the JSON (the member ends the stage's object). */
static double kernels_number(const char *name, const char *key)
{
    char pat[128];
    const char *p = strstr(json, "\"total\":");
    double v;

    snprintf(pat, sizeof pat, "{\"name\":\"%s\"", name);
    CHECK(p != NULL);
    CHECKF((p = strstr(p, pat)) != NULL, "no stage %s in the JSON", name);
    CHECKF((p = strstr(p, "\"kernels\":{")) != NULL, "no kernels member for %s", name);
    CHECKF(json_number(p, key, &v) == 0, "no %s in %s's kernels", key, name);
    return v;
}

/* The records dropped in all, as the JSON summary says. */
static uint64_t dropped_count(void)
{
    static char buf[131072];
    double v = -1;

    CHECK(prof_summary_snprint(buf, sizeof buf, PROF_FORMAT_JSON) > 0);
    CHECK(json_number(buf, "dropped", &v) == 0);
    return (uint64_t)v;
}

static void expect(const char *hay, const char *needle)
{
    CHECKF(strstr(hay, needle) != NULL, "\"%s\" not in: %s", needle, hay);
}

static void check_trace(void);

/* PROF_METRICS: the stages' kernel busy seconds and counts, once the
 * file (rewritten every second) has them. */
static void check_metrics(void)
{
    const char *path = getenv("PROF_METRICS");
    static char m[65536];
    const char *want[] = {
        "prof_gpu_stage_kernel_busy_seconds_total{stage=\"outer/outer [gpu]\",rank=\"0\"} 0.001100000\n",
        "prof_gpu_stage_kernels_total{stage=\"outer/outer [gpu]\",rank=\"0\"} 4\n",
        "prof_gpu_stage_kernels_total{stage=\"(no zone) [gpu]\",rank=\"0\"} 3\n",
    };
    size_t n = 0;

    CHECK(path != NULL);
    for (int i = 0; i < 1000; i++) {
        FILE *fp = fopen(path, "r");

        n = 0;
        if (fp != NULL) {
            n = fread(m, 1, sizeof m - 1, fp);
            fclose(fp);
        }
        m[n] = '\0';
        if (strstr(m, want[2]) != NULL)
            break;
        pause_ms(20);
    }
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(m, want[i]) != NULL, "no %s in the metrics:\n%s", want[i], m);
}

static void attribution(void)
{
    pthread_t b;
    char line[512];
    prof_stage_stats st;
    double busy_ns;

    CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
    {
        PROF_CUDA_ZONE("outer", s1);
        kernel(s1, 200 * US, "_Z3k_av");
        set_phase(1);
        wait_phase(2);
        {
            PROF_CUDA_ZONE("inner", s1);
            kernel(s1, 100 * US, "_ZN4test7k_innerILi4EEEvPf");
            set_phase(3);
            wait_phase(4);
            /* Drained before this end: the collector takes the threads'
             * rings in any order. */
            CHECK(wait_count("late", 100, 20000) == 100);
        }
    }
    kernel(s1, 50 * US, "_Z6k_freev");
    {
        PROF_CUDA_ZONE("empty", s2);
    }
    CHECK(pthread_join(b, NULL) == 0);
    /* A later launch on each stream closes the zones' spans (a stream
     * runs in order); outside every zone, it adds to "(no zone)". */
    kernel(s1, 10 * US, "_Z6k_lastv");
    kernel(s2, 10 * US, "_Z6k_lastv");

    CHECKF(wait_count("outer [gpu]", 1, 20000) == 1, "outer's GPU side missing");
    CHECKF(wait_count("empty [gpu]", 1, 20000) == 1, "empty's GPU side missing");
    CHECKF(wait_count("(no zone) [gpu]", 3, 20000) == 3, "(no zone) kernels missing");
    CHECK(wait_count("inner [gpu]", 1, 20000) == 1);
    CHECK(wait_count("other [gpu]", 1, 20000) == 1);
    CHECK(wait_count("bz [gpu]", 100, 20000) == 100);
    CHECK(wait_count("late [gpu]", 100, 20000) == 100);
    summaries();
    CHECK(kernels_number("bz [gpu]", "count") == 100);
    CHECK(kernels_number("bz [gpu]", "busy_ns") == 100000);

    /* The text: the busy line under each GPU row, top kernels first. */
    line_under("outer [gpu]", line, sizeof line);
    expect(line, "busy 1.10 ms, 4 kernels: k_b 82%, k_a 18%");
    line_under("inner [gpu]", line, sizeof line);
    expect(line, "1 kernel: k_inner 100%");
    line_under("other [gpu]", line, sizeof line);
    expect(line, "busy 225.00 us, 3 kernels: k_s2 67%, (memcpy) 22%, (memset) 11%");
    line_under("(no zone) [gpu]", line, sizeof line);
    expect(line, "3 kernels: k_free 71%, k_last 29%");

    /* The JSON: exact busy and counts. */
    CHECK(kernels_number("outer [gpu]", "busy_ns") == 1100000);
    CHECK(kernels_number("outer [gpu]", "count") == 4);
    CHECK(kernels_number("inner [gpu]", "busy_ns") == 100000);
    CHECK(kernels_number("other [gpu]", "busy_ns") == 225000);
    CHECK(kernels_number("other [gpu]", "count") == 3);
    /* Two streams: k_last on stream 2 may run beside stream 1's. */
    CHECK(kernels_number("(no zone) [gpu]", "total_ns") == 70000);
    busy_ns = kernels_number("(no zone) [gpu]", "busy_ns");
    CHECKF(busy_ns >= 60000 && busy_ns <= 70000, "(no zone) busy %.0f ns", busy_ns);
    expect(json, "\"top\":[{\"name\":\"k_b\",\"ns\":900000,\"share\":");

    /* The zone spans its kernels: at least their busy time; the empty
     * one is zero. */
    CHECK(prof_stats("outer [gpu]", &st) == 0);
    /* Its span covers inner's and bz's kernels too, as events would. */
    CHECKF(st.total_ns >= 1300000, "outer [gpu] %llu ns", (unsigned long long)st.total_ns);
    CHECK(prof_stats("empty [gpu]", &st) == 0 && st.count == 1 && st.total_ns == 0);
    CHECK(prof_stats("late [gpu]", &st) == 0 && st.count == 100 && st.total_ns == 0);
    /* Once, naming the first of them ("empty" or "late", as they come). */
    CHECKF(log_matching("ran no kernel, memcpy or memset on its stream") == 1,
           "the zones with no kernel were not said, or said more than once");

    /* The GPU busy share is the kernels' union: stream 1 alone ran
     * 1360 us, all of them 1595 us (the streams may overlap). */
    {
        const char *p = strstr(json, "\"total\":");

        CHECK(p != NULL && (p = strstr(p, "\"gpus\":[{")) != NULL);
        CHECK(json_number(p, "busy_ns", &busy_ns) == 0);
        CHECKF(busy_ns >= 1360000 && busy_ns <= 1595000, "GPU busy %.0f ns", busy_ns);
    }
    CHECKF(dropped_count() == 0, "dropped %llu", (unsigned long long)dropped_count());
    check_metrics();
    check_trace();
}

/* The trace: strict JSON; the kernels are slices ("cat": "gpu,kernel")
 * on their stream's GPU track, inside their zone's slice. */
static void check_trace(void)
{
    const char *path = getenv("PROF_TRACE");
    static char all[1 << 20];
    char line[4096], err[128];
    double zts = -1, zdur = 0, ztid = -1, ts, dur, tid;
    int kernels = 0, inside = 0;
    size_t n;
    FILE *fp;

    CHECK(prof_shutdown() == 0);
    CHECK(path != NULL && (fp = fopen(path, "r")) != NULL);
    n = fread(all, 1, sizeof all - 1, fp);
    all[n] = '\0';
    CHECKF(json_strict_check(all, n, NULL, NULL, err, sizeof err) == 0, "trace: %s", err);
    rewind(fp);
    while (fgets(line, sizeof line, fp) != NULL) {
        if (json_has(line, "name", "outer [gpu]") && json_has(line, "cat", "gpu")) {
            CHECK(json_number(line, "ts", &zts) == 0 && json_number(line, "dur", &zdur) == 0);
            CHECK(json_number(line, "tid", &ztid) == 0);
        }
    }
    CHECK(zts >= 0);
    rewind(fp);
    while (fgets(line, sizeof line, fp) != NULL) {
        if (!json_has(line, "cat", "gpu,kernel"))
            continue;
        kernels++;
        CHECK(json_number(line, "ts", &ts) == 0 && json_number(line, "dur", &dur) == 0);
        CHECK(json_number(line, "tid", &tid) == 0);
        if (json_has(line, "name", "k_a") || json_has(line, "name", "k_b")) {
            CHECKF(tid == ztid && ts >= zts - 0.001 && ts + dur <= zts + zdur + 0.001,
                   "kernel outside its zone: %s", line);
            inside++;
        }
    }
    fclose(fp);
    CHECKF(kernels == 111 && inside == 4, "%d kernel slices, %d in outer", kernels, inside);
}

static void dropped(void)
{
    void (*counts)(uint64_t *, uint64_t *);
    uint64_t written = 0, lost = 0, n = 0;
    prof_stage_stats st;

    {
        PROF_CUDA_ZONE("burst", s1);     /* the first zone: CUPTI is loaded */
    }
    {
        void *h = dlopen(getenv("PROF_CUPTI_LIB"), RTLD_NOW | RTLD_NOLOAD);

        CHECK(h != NULL);
        *(void **)&counts = dlsym(h, "fakecupti_counts");
    }
    CHECK(counts != NULL);
    /* One buffer of 32 KiB holds ~140 kernels with their API records;
     * each burst of 10,000 writes some 70 buffers' worth at once, faster than any
     * collector pass. */
    for (int round = 0; round < 5 && lost == 0; round++) {
        for (int i = 0; i < 10000; i++)
            kernel(s1, 1, "_Z5tinyv");
        n += 10000;
        counts(&written, &lost);
        pause_ms(100);
    }
    CHECKF(lost > 0, "nothing dropped (%llu written)", (unsigned long long)written);
    /* Every kernel is either counted in (no zone) or dropped and counted. */
    for (int i = 0; i < 500; i++) {
        prof_flush();
        if (prof_stats("(no zone) [gpu]", &st) == 0 && st.count + lost >= n)
            break;
        pause_ms(20);
    }
    counts(&written, &lost);
    CHECK(prof_stats("(no zone) [gpu]", &st) == 0);
    /* Each kernel and each API record is a record: a kernel whose record
     * was dropped is missing, one whose API record was dropped is placed
     * by its start. */
    CHECKF(st.count < n && st.count + lost >= n,
           "%llu kernels seen, %llu records dropped, %llu launched",
           (unsigned long long)st.count, (unsigned long long)lost, (unsigned long long)n);
    CHECKF(dropped_count() >= lost, "%llu dropped in the summary, %llu by CUPTI",
           (unsigned long long)dropped_count(), (unsigned long long)lost);
    CHECKF(log_matching("kernel records were dropped") == 1, "the drop was not said");
    summaries();
}

/* The failure paths: one line, then events time the zones. */
static void fallback(const char *needle)
{
    uint64_t log[8];

    for (int i = 0; i < 4; i++) {
        PROF_CUDA_ZONE("step", s1);
        kernel(s1, 100 * US, "_Z3k_av");
    }
    CHECKF(wait_count("step [gpu]", 4, 20000) == 4, "events did not time the zones");
    CHECK(f.stream_log(s1, log, 8) >= 8);  /* the zones' events were recorded */
    if (log_matching(needle) != 1 || log_total() != 1) {
        log_dump();
        CHECKF(0, "expected one line with \"%s\"", needle);
    }
}

static void flushfail(void)
{
    /* Kernels mode first works, then the flush fails: events from then on. */
    {
        PROF_CUDA_ZONE("before", s1);
        kernel(s1, 100 * US, "_Z3k_av");
    }
    kernel(s1, 10 * US, "_Z6k_lastv");
    CHECK(wait_count("before [gpu]", 1, 20000) == 1);
    for (int i = 0; i < 200 && log_matching("cuptiActivityFlushAll failed") == 0; i++)
        pause_ms(10);
    CHECK(log_matching("cuptiActivityFlushAll failed") == 1);
    /* The first zone after the failure still takes the kernels path's
     * check; from the next one on, events. */
    for (int i = 0; i < 5; i++) {
        PROF_CUDA_ZONE("after", s1);
        kernel(s1, 100 * US, "_Z3k_av");
    }
    CHECKF(wait_count("after [gpu]", 4, 20000) >= 4, "events did not take over");
    CHECKF(log_total() == 1, "%d lines", log_total());
}

static void many(void)
{
    enum { N = 30000 };

    for (int i = 0; i < N; i++) {
        PROF_CUDA_ZONE("z", s1);
        kernel(s1, 1000, "_Z4tickv");
    }
    kernel(s1, 10 * US, "_Z6k_lastv");
    CHECKF(wait_count("z [gpu]", N, 30000) == N, "%llu of %d GPU sides",
           (unsigned long long)stage_count("z [gpu]"), N);
    summaries();
    CHECK(kernels_number("z [gpu]", "count") == N);
    CHECK(kernels_number("z [gpu]", "busy_ns") == N * 1000.0);
    CHECK(dropped_count() == 0);
    LOG_EXPECT_NONE();
}

static void streams_churn(void)
{
    enum { N = 1000, ALIVE = 4 };
    CUstream live[ALIVE] = {0};
    prof_stage_stats st;
    uint64_t busy = 0;

    for (int i = 0; i < N; i++) {
        CUstream *s = &live[i % ALIVE];

        if (*s != NULL)
            CHECK(f.stream_destroy(*s) == 0);
        *s = fake_stream(&f);
        {
            PROF_CUDA_ZONE("per_stream", *s);
            kernel(*s, 1000 + (uint64_t)(i % 7) * 100, "_Z8k_streamv");
            busy += 1000 + (uint64_t)(i % 7) * 100;
        }
    }
    for (int i = 0; i < ALIVE; i++)
        CHECK(f.stream_destroy(live[i]) == 0);
    kernel(s1, 10 * US, "_Z6k_lastv");
    /* No later launch is read on a destroyed stream: its zone's GPU side
     * comes after the 2 s hold. */
    CHECKF(wait_count("per_stream [gpu]", N, 30000) == N, "%llu of %d GPU sides",
           (unsigned long long)stage_count("per_stream [gpu]"), N);
    CHECKF(wait_count("(no zone) [gpu]", 1, 30000) == 1, "%llu kernels in (no zone)",
           (unsigned long long)stage_count("(no zone) [gpu]"));
    summaries();
    CHECKF(kernels_number("per_stream [gpu]", "count") == N, "%.0f kernels in the zones",
           kernels_number("per_stream [gpu]", "count"));
    /* Each zone's GPU side is its own kernel's span: the sides add up to
     * the kernels' times (streams overlap, so busy is their union). */
    CHECK(kernels_number("per_stream [gpu]", "total_ns") == (double)busy);
    CHECK(prof_stats("per_stream [gpu]", &st) == 0 && st.total_ns == busy);
    CHECK(kernels_number("(no zone) [gpu]", "count") == 1);
    CHECK(dropped_count() == 0);
    LOG_EXPECT_NONE();
}

static void labels(void)
{
    static char n[4][256], m[65536];
    static const char *kernels[4] = {
        "void ns::k\xc3\xa9rnel<int>(float*)", "void \xe5\x90\x8d\xe5\x89\x8d(float*)",
        "_Z4tickv", "void ns::\xf0\x9f\x98\x80_k(float*)",
    };
    const char *path = getenv("PROF_METRICS");
    size_t len = 0;
    int found = 0;

    CHECK(path != NULL);
    /* " [gpu]" follows: bytes 126-127, 125-127 and 124-127 of the GPU
     * stage's name are one character each. */
    memset(n[0], 'a', 126);
    memcpy(n[0] + 126, "\xc3\xa9x", 4);
    snprintf(n[1], sizeof n[1], "%.125s\xe2\x82\xacy", n[0]);
    snprintf(n[2], sizeof n[2], "%.124s\xf0\x9f\x98\x80z", n[0]);
    snprintf(n[3], sizeof n[3], "q\"uo\\te\nnl\x01\xff \xc3\xa9");
    CHECK(strlen(n[0]) == 129 && strlen(n[1]) == 129 && strlen(n[2]) == 129);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 4; i++) {
            PROF_CUDA_ZONE(prof_intern(n[i]), s1);
            kernel(s1, 1000 * (uint64_t)(i + 1), kernels[i]);
        }
    kernel(s1, 10 * US, "_Z6k_lastv");
    for (int tries = 0; tries < 1000 && found < 4; tries++) {
        FILE *fp = fopen(path, "r");
        const char *p;

        pause_ms(20);
        if (fp == NULL)
            continue;
        len = fread(m, 1, sizeof m - 1, fp);
        fclose(fp);
        m[len] = '\0';
        for (found = 0, p = m; (p = strstr(p, "\nprof_gpu_stage_kernels_total{")) != NULL; p++)
            found++;
    }
    CHECKF(found >= 4, "%d kernel samples in the metrics:\n%s", found, m);
    summaries();
    printf("--- metrics\n%s--- end\n--- text\n%s--- end\n", m, text);
    fflush(stdout);
    LOG_EXPECT_NONE();
}

static void names(void)
{
    enum { N = 6000, KEPT = 4096 };
    static char name[N][16];
    const char *path = getenv("PROF_TRACE");
    static char line[4096];
    int other = 0, first = 0, last = 0;
    FILE *fp;

    {
        PROF_CUDA_ZONE("first", s1);     /* the first zone: CUPTI is loaded */
        kernel(s1, 1000, "_Z5firstv");
    }
    /* Distinct strings: CUPTI gives one name pointer per kernel. */
    for (int i = 0; i < N; i++) {
        snprintf(name[i], sizeof name[i], "_Z5k%04dv", i);
        kernel(s1, 1000, name[i]);
    }
    kernel(s1, 10 * US, "_Z6k_lastv");
    CHECKF(wait_count("(no zone) [gpu]", N + 1, 30000) == N + 1, "%llu of %d kernels",
           (unsigned long long)stage_count("(no zone) [gpu]"), N + 1);
    summaries();
    CHECK(kernels_number("(no zone) [gpu]", "count") == N + 1);
    CHECK(kernels_number("(no zone) [gpu]", "busy_ns") == N * 1000.0 + 10 * US);
    CHECKF(log_matching("over 4096 distinct kernel names") == 1 && log_total() == 1,
           "the name bound was not said once");
    CHECK(prof_shutdown() == 0);
    CHECK(path != NULL && (fp = fopen(path, "r")) != NULL);
    while (fgets(line, sizeof line, fp) != NULL) {
        if (!json_has(line, "cat", "gpu,kernel"))
            continue;
        other += json_has(line, "name", "(other kernels)");
        first += json_has(line, "name", "k0000");
        last += json_has(line, "name", "k4094");
    }
    fclose(fp);
    /* Kept: "first", k0000 to k4094; k4095 on and k_last are the others. */
    CHECKF(other == N - (KEPT - 1) + 1 && first == 1 && last == 1,
           "%d slices named (other kernels), k0000 %d, k4094 %d", other, first, last);
}

/* Whether dir is one of the entries of the colon-separated list. */
static int on_path(const char *list, const char *dir)
{
    size_t n = strlen(dir);

    for (const char *p = list; p != NULL && *p != '\0'; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL)
        if (strncmp(p, dir, n) == 0 && (p[n] == ':' || p[n] == '\0'))
            return 1;
    return 0;
}

static void loaded(void)
{
    const char *good = getenv("FAKECUPTI_LOADED"), *decoy = getenv("FAKECUPTI_DECOY");
    char dir[4096];

    CHECK(good != NULL && decoy != NULL && getenv("PROF_CUPTI_LIB") == NULL);
    /* The decoy must be where the loader looks, or this proves nothing. */
    snprintf(dir, sizeof dir, "%s", decoy);
    CHECK(strrchr(dir, '/') != NULL);
    *strrchr(dir, '/') = '\0';
    CHECKF(on_path(getenv("LD_LIBRARY_PATH"), dir), "the decoy's folder %s is not on "
           "LD_LIBRARY_PATH (%s)", dir, getenv("LD_LIBRARY_PATH"));
    CHECKF(dlopen(good, RTLD_NOW | RTLD_LOCAL) != NULL, "%s: %s", good, dlerror());
    {
        PROF_CUDA_ZONE("step", s1);     /* CUPTI is opened here */
        kernel(s1, 100 * US, "_Z3k_av");
    }
    kernel(s1, 10 * US, "_Z6k_lastv");
    CHECK(wait_count("step [gpu]", 1, 20000) == 1);
    summaries();
    CHECK(kernels_number("step [gpu]", "count") == 1);
    LOG_EXPECT_NONE();
}

static void forked(void)
{
    pid_t pid;
    int status;

#ifdef UNDER_TSAN
    SKIP("ThreadSanitizer does not support threads in a child of a multi-threaded fork");
#endif
#ifdef UNDER_ASAN
    SKIP("GCC 12's AddressSanitizer allocator is not fork-safe with other threads running");
#endif
    {
        PROF_CUDA_ZONE("parent", s1);
        kernel(s1, 100 * US, "_Z3k_av");
    }
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prof_stage_stats st;

        for (int i = 0; i < 3; i++) {
            PROF_CUDA_ZONE("child", s1);
        }
        prof_flush();
        if (prof_stats("child", &st) != 0 || st.count != 3)
            _exit(2);
        if (prof_stats("child [gpu]", &st) == 0 && st.count != 0)
            _exit(3);
        if (log_matching("forked from a process that used CUDA") != 1)
            _exit(4);
        _exit(prof_shutdown() == 0 ? 0 : 5);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
    /* The parent goes on with kernels: its zone's kernel arrives. */
    kernel(s1, 10 * US, "_Z6k_lastv");
    CHECK(wait_count("parent [gpu]", 1, 20000) == 1);
    summaries();
    CHECK(kernels_number("parent [gpu]", "count") == 1);
    CHECK(kernels_number("parent [gpu]", "busy_ns") == 100000);
}

static void capture_final(void *user, const char *t, int kind)
{
    (void)user;
    if (kind == PROF_SUMMARY_FINAL)
        snprintf(text, sizeof text, "%s", t);
}

static void unfinished(void)
{
    char line[256];

    prof_set_summary_handler(capture_final, NULL);
    {
        PROF_CUDA_ZONE("done", s1);
        kernel(s1, 100 * US, "_Z6k_donev");
    }
    {
        PROF_CUDA_ZONE("tail", s1);
        kernel(s1, 5000000 * US, "_Z6k_tailv");
    }
    pause_ms(200);      /* k_done has run; k_tail runs on */
    prof_flush();
    CHECK(prof_shutdown() == 0);
    if (getenv("PROF_TEST_VERBOSE") != NULL)
        fprintf(stderr, "%s\n", text);
    line_under("done [gpu]", line, sizeof line);
    expect(line, "busy 100.00 us, 1 kernel: k_done 100%");
    CHECKF(log_matching("kernels still running on the GPU at the run's end") == 1,
           "the unfinished kernel was not said");
    CHECKF(log_matching("(\"tail\") has no kernel, memcpy or memset that finished") == 1 &&
           log_total() == 2, "tail's zero GPU side not said as such");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "attribution";

    s1 = fake_start(&f);
    CHECK(f.ctx_get_current(&ctx) == 0 && ctx != NULL);
    s2 = fake_stream(&f);
    *(void **)&launch_kind = fake_sym(f.h, "fakecuda_launch_kind");

    if (strcmp(mode, "attribution") == 0)
        attribution();
    else if (strcmp(mode, "dropped") == 0)
        dropped();
    else if (strcmp(mode, "nolib") == 0)
        fallback("PROF_CUDA=kernels but no CUPTI");
    else if (strcmp(mode, "old") == 0)
        fallback("lacks cuptiActivityRegisterTimestampCallback");
    else if (strcmp(mode, "subscriber") == 0)
        fallback("another tool already uses CUPTI");
    else if (strcmp(mode, "flushfail") == 0)
        flushfail();
    else if (strcmp(mode, "many") == 0)
        many();
    else if (strcmp(mode, "loaded") == 0)
        loaded();
    else if (strcmp(mode, "names") == 0)
        names();
    else if (strcmp(mode, "labels") == 0)
        labels();
    else if (strcmp(mode, "streams") == 0)
        streams_churn();
    else if (strcmp(mode, "fork") == 0)
        forked();
    else if (strcmp(mode, "unfinished") == 0)
        unfinished();
    else
        CHECKF(0, "unknown mode %s", mode);
    return 0;
}
