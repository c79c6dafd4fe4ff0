/* cuda_test.h - shared by the CUDA zone tests: checks that stay on under
 * NDEBUG, the fake driver's entry points, a logger that keeps prof's
 * messages, and waiting (with a deadline) for the collector to deliver
 * GPU zones. Exit codes: 0 pass, 1 fail, 77 skip. */
#ifndef PROF_CUDA_TEST_H
#define PROF_CUDA_TEST_H

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prof.h>

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1); \
        } \
    } while (0)

#define CHECKF(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
            exit(1); \
        } \
    } while (0)

#define SKIP(...) \
    do { \
        fprintf(stderr, "skip: " __VA_ARGS__); \
        fputc('\n', stderr); \
        exit(77); \
    } while (0)

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;

/* The fake driver, opened a second time by the test (dlopen gives back the
 * same library prof loaded, so the state is shared). */
struct fake {
    void *h;
    CUresult (*init)(unsigned);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUcontext (*ctx_create)(int device);
    void (*ctx_destroy)(CUcontext);
    void (*launch)(CUstream, uint64_t ns);
    void (*stream_move)(CUstream, CUcontext);
    size_t (*stream_log)(CUstream, uint64_t *out, size_t cap);
    void (*set_delay_us)(uint64_t us);
    void (*set_capturing)(CUstream, int on);
    int (*fail)(const char *name, uint64_t nth, int relative, int sticky, int code);
    uint64_t (*calls)(const char *name);
    long (*live_events)(long *peak);
};

static inline void *fake_sym(void *h, const char *name)
{
    void *p = dlsym(h, name);

    CHECKF(p != NULL, "the fake driver lacks %s", name);
    return p;
}

/* Open the library PROF_CUDA_LIB names; skip the test without it. */
static inline void fake_open(struct fake *f)
{
    const char *path = getenv("PROF_CUDA_LIB");

    memset(f, 0, sizeof *f);
    if (path == NULL || *path == '\0')
        SKIP("PROF_CUDA_LIB is not set");
    f->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECKF(f->h != NULL, "dlopen %s: %s", path, dlerror());
    *(void **)&f->init = fake_sym(f->h, "cuInit");
    *(void **)&f->ctx_set_current = fake_sym(f->h, "cuCtxSetCurrent");
    *(void **)&f->ctx_get_current = fake_sym(f->h, "cuCtxGetCurrent");
    *(void **)&f->stream_create = fake_sym(f->h, "cuStreamCreate");
    *(void **)&f->stream_destroy = fake_sym(f->h, "cuStreamDestroy");
    *(void **)&f->event_create = fake_sym(f->h, "cuEventCreate");
    *(void **)&f->event_record = dlsym(f->h, "cuEventRecord");   /* absent in one variant */
    *(void **)&f->ctx_create = fake_sym(f->h, "fakecuda_ctx_create");
    *(void **)&f->ctx_destroy = fake_sym(f->h, "fakecuda_ctx_destroy");
    *(void **)&f->launch = fake_sym(f->h, "fakecuda_launch");
    *(void **)&f->stream_move = fake_sym(f->h, "fakecuda_stream_move");
    *(void **)&f->stream_log = fake_sym(f->h, "fakecuda_stream_log");
    *(void **)&f->set_delay_us = fake_sym(f->h, "fakecuda_set_delay_us");
    *(void **)&f->set_capturing = fake_sym(f->h, "fakecuda_set_capturing");
    *(void **)&f->fail = fake_sym(f->h, "fakecuda_fail");
    *(void **)&f->calls = fake_sym(f->h, "fakecuda_calls");
    *(void **)&f->live_events = fake_sym(f->h, "fakecuda_live_events");
}

/* Initialize the fake and make a new context on device current on this
 * thread, as an application's first CUDA call would. */
static inline CUcontext fake_context(struct fake *f, int device)
{
    CUcontext c;

    if (f->init(0) != 0)
        return NULL;
    c = f->ctx_create(device);
    CHECK(f->ctx_set_current(c) == 0);
    return c;
}

static inline CUstream fake_stream(struct fake *f)
{
    CUstream s = NULL;

    CHECK(f->stream_create(&s, 0) == 0);
    return s;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void pause_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* ---- prof's messages ---- */

#define LOG_MAX 64
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[LOG_MAX][512];
static int log_count;

static inline void log_keep(void *user, const char *message)
{
    (void)user;
    pthread_mutex_lock(&log_lock);
    if (log_count < LOG_MAX)
        snprintf(log_lines[log_count], sizeof log_lines[0], "%s", message);
    log_count++;
    pthread_mutex_unlock(&log_lock);
    if (getenv("PROF_TEST_VERBOSE") != NULL)
        fprintf(stderr, "[prof] %s\n", message);
}

static inline void log_capture(void)
{
    prof_set_logger(log_keep, NULL);
}

static inline int log_total(void)
{
    int n;

    pthread_mutex_lock(&log_lock);
    n = log_count;
    pthread_mutex_unlock(&log_lock);
    return n;
}

/* How many messages contain needle. */
static inline int log_matching(const char *needle)
{
    int i, n = 0;

    pthread_mutex_lock(&log_lock);
    for (i = 0; i < log_count && i < LOG_MAX; i++)
        n += strstr(log_lines[i], needle) != NULL;
    pthread_mutex_unlock(&log_lock);
    return n;
}

static inline void log_dump(void)
{
    int i;

    pthread_mutex_lock(&log_lock);
    for (i = 0; i < log_count && i < LOG_MAX; i++)
        fprintf(stderr, "  message %d: %s\n", i, log_lines[i]);
    pthread_mutex_unlock(&log_lock);
}

/* Fail, listing them, if prof said anything. */
#define LOG_EXPECT_NONE() \
    do { \
        if (log_total() != 0) { \
            log_dump(); \
            CHECKF(0, "%d unexpected messages", log_total()); \
        } \
    } while (0)

/* ---- waiting for the collector ---- */

/* The count of stage name (0 while it does not exist). */
static inline uint64_t stage_count(const char *name)
{
    prof_stage_stats st;

    return prof_stats(name, &st) == 0 ? st.count : 0;
}

/* Poll until stage name has at least want zones or timeout_ms passed;
 * returns the count. The collector delivers GPU zones once their events
 * complete, which no flush can force. */
static inline uint64_t wait_count(const char *name, uint64_t want, unsigned timeout_ms)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u, n;

    for (;;) {
        n = stage_count(name);
        if (n >= want || now_ns() > deadline)
            return n;
        pause_ms(2);
    }
}

/* ---- the trace ---- */

/* Find "key": in line and parse the number after it. */
static inline int json_number(const char *line, const char *key, double *out)
{
    char pat[64];
    const char *p;
    char *end;

    snprintf(pat, sizeof pat, "\"%s\"", key);
    if ((p = strstr(line, pat)) == NULL)
        return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    *out = strtod(p, &end);
    return end == p ? -1 : 0;
}

/* Nonzero when "key": "value" is in line. */
static inline int json_has(const char *line, const char *key, const char *value)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof pat, "\"%s\"", key);
    if ((p = strstr(line, pat)) == NULL)
        return 0;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    return *p == '"' && strncmp(p + 1, value, strlen(value)) == 0 && p[1 + strlen(value)] == '"';
}

struct gpu_event {
    double ts_us, dur_us;
    char name[64];
};

/* Read the GPU zones ("cat": "gpu" X events) of a trace file into out,
 * ts in the CLOCK_MONOTONIC domain (the file's ts plus its origin,
 * args.prof.ts_origin_ns of the first event); returns how many there are
 * (may exceed cap), or -1 if the file cannot be read. */
static inline long trace_gpu_events(const char *path, struct gpu_event *out, long cap)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    long n = 0;
    double origin_ns = 0;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        double ts, dur;
        const char *nm;

        if (n == 0 && origin_ns == 0)
            json_number(line, "ts_origin_ns", &origin_ns);
        if (!json_has(line, "ph", "X") || !json_has(line, "cat", "gpu"))
            continue;
        if (json_number(line, "ts", &ts) != 0 || json_number(line, "dur", &dur) != 0)
            continue;
        if (n < cap) {
            out[n].ts_us = ts + origin_ns / 1000.0;
            out[n].dur_us = dur;
            out[n].name[0] = '\0';
            if ((nm = strstr(line, "\"name\"")) != NULL && (nm = strchr(nm + 6, '"')) != NULL) {
                size_t k = 0;

                for (nm++; *nm != '\0' && *nm != '"' && k + 1 < sizeof out[n].name; nm++)
                    out[n].name[k++] = *nm;
                out[n].name[k] = '\0';
            }
        }
        n++;
    }
    fclose(f);
    return n;
}

/* The start most tests share: the fake opened, prof's messages captured,
 * recording on, a context current on device 0; returns a new stream. */
static inline CUstream fake_start(struct fake *f)
{
    fake_open(f);
    log_capture();
    prof_enable(1);
    CHECK(fake_context(f, 0) != NULL);
    return fake_stream(f);
}

#endif
