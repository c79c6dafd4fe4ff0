/* fakecupti.c - a stand-in for libcupti.so over the fake driver's
 * simulated GPU (fakecuda.c), so PROF_CUDA=kernels runs without a GPU.
 *
 * It implements the activity API entry points prof resolves. The fake
 * driver (the library PROF_CUDA_LIB names, found already loaded) tells it
 * of each kernel, memcpy and memset launched with fakecuda_launch_kind,
 * with its simulated GPU start and end (CLOCK_MONOTONIC, the driver's
 * simulated clock) and its launch's CPU time; when the kind is enabled it
 * writes a runtime API record (correlation id, thread, CPU time from the
 * registered timestamp callback) and the activity record into the current
 * buffer, in the layouts prof reads (CUDA 13's, cupti.h). A full buffer is
 * completed and a new one requested; when prof has none to give, the
 * records are dropped and counted (cuptiActivityGetNumDroppedRecords).
 * Records are written at launch, times in the future included; as a real
 * CUPTI, cuptiActivityFlushAll(0) hands back the current buffer only when
 * every record in it is complete (its end has passed on the registered
 * clock), so a GPU that never idles leaves it until it is full, and a
 * forced flush (flag 1) hands it back with the unfinished records' end
 * times zero (CUPTI never delivers those again).
 *
 * Failures: FAKECUPTI_FAIL=enable (cuptiActivityEnable says another
 * subscriber holds CUPTI: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
 * FAKECUPTI_FAIL=flush:N (the Nth cuptiActivityFlushAll and every later
 * one fail). Built with -DFAKECUPTI_OLD it lacks
 * cuptiActivityRegisterTimestampCallback, as a CUPTI older than 11.6. */
#include <dlfcn.h>
#include <stddef.h>
#include <time.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FAKE_API __attribute__((visibility("default")))

typedef int CUptiResult;
enum {
    CUPTI_SUCCESS = 0,
    CUPTI_ERROR_INVALID_PARAMETER = 1,
    CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
    CUPTI_ERROR_INVALID_KIND = 21,
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
    CUPTI_ERROR_UNKNOWN = 999,
};

#define PACKED __attribute__((packed, aligned(8)))

/* The record prefixes (cupti.h), padded to a plausible full size. */
struct PACKED rec_kernel {
    uint32_t kind;
    uint8_t cache_config, shared_config;
    uint16_t regs;
    uint32_t pgc_requested, pgc_executed;
    uint64_t start, end, completed;
    uint32_t device, context, stream;
    int32_t grid[3], block[3];
    int32_t static_shared, dynamic_shared;
    uint32_t local_per_thread, local_total;
    uint32_t correlation;
    int64_t grid_id;
    const char *name;
    uint8_t rest[88];
};

struct PACKED rec_copy {            /* memcpy and memset share the fields read */
    uint32_t kind;
    uint32_t value_or_kinds;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, correlation;
    uint8_t rest[24];
};

struct PACKED rec_api {
    uint32_t kind;
    uint32_t cbid;
    uint64_t start, end;
    uint32_t process, thread, correlation, result;
};

typedef void (*req_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*done_fn)(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);
typedef void (*hook_fn)(int kind, uint32_t stream_id, int device, uint64_t start, uint64_t end,
                        const char *name, uint64_t cpu_ns);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static req_fn requested;
static done_fn completed;
static uint64_t (*timestamp)(void);
static int enabled[64];
static uint8_t *cur;
static size_t cur_size, cur_used;
static uint64_t cur_last_end;       /* the latest end of a record in cur */
static uint32_t corr;
static uint64_t dropped, dropped_total, written;
static uint64_t flushes, flush_fail_at;
static int fail_enable;
static void *driver;

static void configure(void)
{
    static int done;
    const char *f;

    if (done)
        return;
    done = 1;
    f = getenv("FAKECUPTI_FAIL");
    if (f != NULL && strcmp(f, "enable") == 0)
        fail_enable = 1;
    if (f != NULL && strncmp(f, "flush:", 6) == 0)
        flush_fail_at = strtoull(f + 6, NULL, 10);
}

static void *driver_sym(const char *name)
{
    const char *path = getenv("PROF_CUDA_LIB");

    if (driver == NULL && path != NULL)
        driver = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    return driver != NULL ? dlsym(driver, name) : NULL;
}

/* Room for n bytes in the current buffer, completing and requesting one
 * as CUPTI does. Lock held; the callbacks are prof's, which take only
 * locks of their own. */
static uint8_t *room(size_t n)
{
    size_t max = 0;

    if (cur != NULL && cur_used + n <= cur_size)
        return cur + cur_used;
    if (cur != NULL) {
        completed(NULL, 0, cur, cur_size, cur_used);
        cur = NULL;
        cur_last_end = 0;
    }
    if (requested == NULL)
        return NULL;
    requested(&cur, &cur_size, &max);
    cur_used = 0;
    if (cur == NULL || cur_size < n) {
        cur = NULL;
        return NULL;
    }
    return cur;
}

static void put(const void *rec, size_t n)
{
    uint8_t *p = room(n);

    if (p == NULL) {
        dropped++;
        dropped_total++;
        return;
    }
    memcpy(p, rec, n);
    cur_used += n;
    written++;
}

static void on_activity(int kind, uint32_t stream_id, int device, uint64_t start, uint64_t end,
                        const char *name, uint64_t cpu_ns)
{
    struct rec_api a;

    pthread_mutex_lock(&lock);
    if (kind < 0 || kind >= 64 || !enabled[kind]) {
        pthread_mutex_unlock(&lock);
        return;
    }
    memset(&a, 0, sizeof a);
    a.kind = 5;     /* CUPTI_ACTIVITY_KIND_RUNTIME: cudaLaunchKernel and the like */
    a.cbid = 211;
    /* The launch's CPU time on the registered clock: the driver's
     * simulated clock is CLOCK_MONOTONIC, as prof's callback. */
    a.start = cpu_ns;
    a.end = timestamp != NULL ? timestamp() : cpu_ns;
    a.process = (uint32_t)getpid();
    a.thread = (uint32_t)syscall(SYS_gettid);
    a.correlation = ++corr;
    if (enabled[5])
        put(&a, sizeof a);
    if (kind == 10) {
        struct rec_kernel k;

        memset(&k, 0, sizeof k);
        k.kind = 10;
        k.start = start;
        k.end = end;
        k.completed = end;
        k.device = (uint32_t)device;
        k.context = 1;
        k.stream = stream_id;
        k.correlation = a.correlation;
        k.name = name;
        put(&k, sizeof k);
    } else {
        struct rec_copy c;

        memset(&c, 0, sizeof c);
        c.kind = (uint32_t)kind;
        c.bytes = 4096;
        c.start = start;
        c.end = end;
        c.device = (uint32_t)device;
        c.context = 1;
        c.stream = stream_id;
        c.correlation = a.correlation;
        put(&c, sizeof c);
    }
    /* After the puts: one may have begun a new buffer. */
    if (cur != NULL && end > cur_last_end)
        cur_last_end = end;
    pthread_mutex_unlock(&lock);
}

static size_t rec_size(uint32_t kind)
{
    return kind == 10 ? sizeof(struct rec_kernel)
         : kind == 4 || kind == 5 ? sizeof(struct rec_api) : sizeof(struct rec_copy);
}

FAKE_API CUptiResult cuptiActivityEnable(int kind)
{
    void (*set_hook)(hook_fn);

    pthread_mutex_lock(&lock);
    configure();
    if (fail_enable) {
        pthread_mutex_unlock(&lock);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    if (kind <= 0 || kind >= 64) {
        pthread_mutex_unlock(&lock);
        return CUPTI_ERROR_INVALID_KIND;
    }
    enabled[kind] = 1;
    pthread_mutex_unlock(&lock);
    *(void **)&set_hook = driver_sym("fakecuda_set_activity_hook");
    if (set_hook != NULL)
        set_hook(on_activity);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityDisable(int kind)
{
    pthread_mutex_lock(&lock);
    if (kind > 0 && kind < 64)
        enabled[kind] = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityRegisterCallbacks(req_fn req, done_fn done)
{
    pthread_mutex_lock(&lock);
    requested = req;
    completed = done;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

#ifndef FAKECUPTI_OLD
FAKE_API CUptiResult cuptiActivityRegisterTimestampCallback(uint64_t (*fn)(void))
{
    pthread_mutex_lock(&lock);
    timestamp = fn;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}
#endif

static uint64_t now_ns(void)
{
    struct timespec ts;

    if (timestamp != NULL)
        return timestamp();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Forced: the records of cur still running get no end, as CUPTI's. */
static void unfinished_ends(uint64_t now)
{
    size_t off = 0;

    while (off < cur_used) {
        uint32_t kind;
        uint64_t end;

        memcpy(&kind, cur + off, sizeof kind);
        if (kind == 10 || kind == 1 || kind == 2) {
            size_t at = kind == 10 ? offsetof(struct rec_kernel, end) : offsetof(struct rec_copy, end);

            memcpy(&end, cur + off + at, sizeof end);
            if (end > now) {
                end = 0;
                memcpy(cur + off + at, &end, sizeof end);
            }
        }
        off += rec_size(kind);
    }
}

FAKE_API CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    pthread_mutex_lock(&lock);
    configure();
    flushes++;
    if (flush_fail_at != 0 && flushes >= flush_fail_at) {
        pthread_mutex_unlock(&lock);
        return CUPTI_ERROR_UNKNOWN;
    }
    if (cur != NULL && cur_used > 0) {
        uint64_t now = now_ns();

        if (now < cur_last_end && !(flag & 1)) {
            pthread_mutex_unlock(&lock);
            return CUPTI_SUCCESS;       /* a record not complete: kept */
        }
        if (now < cur_last_end)
            unfinished_ends(now);
        completed(NULL, 0, cur, cur_size, cur_used);
        cur = NULL;
        cur_last_end = 0;
    }
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record)
{
    uint8_t *p = *record;
    uint32_t kind;

    if (p == NULL) {
        p = buffer;
    } else {
        memcpy(&kind, p, sizeof kind);
        p += rec_size(kind);
    }
    if (p >= buffer + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = p;
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *n)
{
    (void)ctx, (void)stream;
    pthread_mutex_lock(&lock);
    *n = (size_t)dropped;
    dropped = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiGetStreamIdEx(void *ctx, void *stream, uint8_t per_thread, uint32_t *id)
{
    int (*stream_id)(void *, void *, uint32_t *);

    (void)per_thread;
    *(void **)&stream_id = driver_sym("fakecuda_stream_id");
    if (stream_id == NULL || stream_id(ctx, stream, id) != 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    switch (r) {
    case CUPTI_SUCCESS: *s = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_UNKNOWN: *s = "CUPTI_ERROR_UNKNOWN"; break;
    default: *s = NULL; return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

/* For tests: records written and dropped so far. */
FAKE_API void fakecupti_counts(uint64_t *written_out, uint64_t *dropped_out)
{
    pthread_mutex_lock(&lock);
    *written_out = written;
    *dropped_out = dropped_total;
    pthread_mutex_unlock(&lock);
}
