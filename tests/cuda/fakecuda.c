/* fakecuda.c - a stand-in for libcuda.so.1 with a simulated GPU, so the
 * CUDA zone path runs on machines without one.
 *
 * It implements the driver entry points prof resolves, plus a few
 * fakecuda_* functions for tests (reached with dlsym on the same library,
 * so they share its state):
 *
 *   - Time: the simulated GPU clock is CLOCK_MONOTONIC. Only differences
 *     ever leave the driver (cuEventElapsedTime), so an offset would not
 *     change anything observable.
 *   - Streams run in order. Each has busy_until, the GPU time its last
 *     queued work finishes. fakecuda_launch(stream, ns) queues a kernel:
 *     busy_until = max(busy_until, now + latency) + ns. cuEventRecord
 *     stamps the event at max(busy_until, now + latency) and remembers the
 *     stamp in the stream's log (fakecuda_stream_log), so a test knows
 *     exactly what GPU times prof should report.
 *   - An event completes (cuEventQuery == CUDA_SUCCESS) delay_us after its
 *     stamp, in real time: FAKECUDA_DELAY_US or fakecuda_set_delay_us().
 *   - Failures: FAKECUDA_INIT_FAIL=1 makes cuInit fail;
 *     FAKECUDA_FAIL=name:N[+][,name:N...] makes the Nth call of an entry
 *     point (and with '+' every later one) return FAKECUDA_FAIL_CODE
 *     (default 999, CUDA_ERROR_UNKNOWN); fakecuda_fail() does the same from
 *     a test. Building with -DFAKECUDA_OMIT_EVENT_RECORD leaves
 *     cuEventRecord out (the missing-symbol case); -DFAKECUDA_V1_ONLY
 *     exports only the unversioned names of an old driver.
 *
 * One global mutex serializes everything: this is a test double, not a
 * model of driver performance. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAKE_API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_UNKNOWN = 999,
};

#define MAGIC_CTX 0x63747821u
#define MAGIC_STREAM 0x73747221u
#define MAGIC_EVENT 0x65767421u
#define MAGIC_DEAD 0xdeadbeefu
#define STACK_MAX 16
#define MAX_DEVICES 8

struct fctx;

typedef struct fstream {
    unsigned magic;
    struct fctx *ctx;
    unsigned flags;
    int capturing;
    uint64_t busy_until;
    uint64_t *log;              /* GPU stamps of the events recorded on it */
    size_t nlog, caplog;
    uint64_t nrecords;
    uint32_t id;                /* as CUPTI numbers streams (fakecupti.c) */
    struct fstream *next_all;   /* every stream ever created: see all_streams */
} fstream;

/* Destroyed streams are kept (tests read their logs afterwards); this list
 * keeps them reachable, so leak checkers do not report them. */
static fstream *all_streams;

typedef struct fctx {
    unsigned magic;
    int device;
    int destroyed;
    fstream null_stream;        /* the legacy default stream */
} fctx;

typedef struct fevent {
    unsigned magic;
    fctx *ctx;
    unsigned flags;
    int recorded;
    uint64_t stamp;
    uint64_t done_at;
    struct fevent *prev, *next;   /* live_list: a driver holds its events */
} fevent;

/* Every live event, as a real driver keeps them with their context: events
 * an application (or prof, when a context failed under it) never destroys
 * are the driver's, not leaks of the program. */
static fevent *live_list;

typedef fctx *CUcontext;
typedef fstream *CUstream;
typedef fevent *CUevent;

enum {
    F_cuInit, F_cuCtxGetCurrent, F_cuCtxSetCurrent, F_cuCtxPushCurrent, F_cuCtxPopCurrent,
    F_cuCtxGetDevice, F_cuStreamGetCtx, F_cuStreamCreate, F_cuStreamDestroy,
    F_cuStreamIsCapturing, F_cuEventCreate, F_cuEventRecord, F_cuEventQuery,
    F_cuEventElapsedTime, F_cuEventDestroy, F_COUNT
};

static const char *const fn_names[F_COUNT] = {
    "cuInit", "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",
    "cuCtxGetDevice", "cuStreamGetCtx", "cuStreamCreate", "cuStreamDestroy",
    "cuStreamIsCapturing", "cuEventCreate", "cuEventRecord", "cuEventQuery",
    "cuEventElapsedTime", "cuEventDestroy",
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized, configured;
static uint64_t delay_ns, latency_ns;
static uint64_t calls[F_COUNT];
static uint64_t fail_at[F_COUNT];       /* 0: never */
static int fail_after[F_COUNT];         /* fail every call from fail_at on */
static int fail_code = CUDA_ERROR_UNKNOWN;
static int init_fail;
static long live_events, live_events_peak;
static fctx *primary[MAX_DEVICES];
static uint32_t next_stream_id = 7;

/* The fake CUPTI's (fakecupti.c): told of each kernel, memcpy and memset
 * with its simulated GPU times and the CPU time of its launch. */
typedef void (*fakecuda_activity_fn)(int kind, uint32_t stream_id, int device, uint64_t start,
                                     uint64_t end, const char *name, uint64_t cpu_ns);
static fakecuda_activity_fn activity_hook;

static __thread fctx *ctx_stack[STACK_MAX];
static __thread int ctx_depth;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The last time read. Lock held. An event whose completion time is already
 * behind it is complete without a new read: clock_gettime is a third of a
 * CUDA zone's collector-side cost on some VMs (no vDSO counter), and the
 * high-rate tests need the fake to be cheaper than the collector. */
static uint64_t seen_ns;

static int reached(uint64_t at)
{
    return at <= seen_ns || (seen_ns = now_ns()) >= at;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? strtoull(v, NULL, 10) : def;
}

static void parse_fail(const char *spec)
{
    char buf[256], *save = NULL, *item;

    snprintf(buf, sizeof buf, "%s", spec);
    for (item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        int i;

        if (colon == NULL)
            continue;
        *colon = '\0';
        for (i = 0; i < F_COUNT; i++) {
            if (strcmp(item, fn_names[i]) == 0) {
                fail_at[i] = strtoull(colon + 1, NULL, 10);
                fail_after[i] = strchr(colon + 1, '+') != NULL;
            }
        }
    }
}

/* Read the environment once. Lock held. */
static void configure(void)
{
    const char *spec;

    if (configured)
        return;
    configured = 1;
    delay_ns = env_u64("FAKECUDA_DELAY_US", 0) * 1000u;
    latency_ns = env_u64("FAKECUDA_LATENCY_NS", 0);
    init_fail = (int)env_u64("FAKECUDA_INIT_FAIL", 0);
    fail_code = (int)env_u64("FAKECUDA_FAIL_CODE", CUDA_ERROR_UNKNOWN);
    if ((spec = getenv("FAKECUDA_FAIL")) != NULL)
        parse_fail(spec);
}

/* Count a call; nonzero when it must fail. Lock held. */
static int failing(int fn)
{
    uint64_t n;

    configure();
    n = ++calls[fn];
    return fail_at[fn] != 0 && (n == fail_at[fn] || (fail_after[fn] && n > fail_at[fn]));
}

#define ENTER(fn) \
    pthread_mutex_lock(&lock); \
    if (failing(fn)) { \
        pthread_mutex_unlock(&lock); \
        return fail_code; \
    } \
    if (!initialized && (fn) != F_cuInit) { \
        pthread_mutex_unlock(&lock); \
        return CUDA_ERROR_NOT_INITIALIZED; \
    }
#define LEAVE(rc) \
    do { \
        pthread_mutex_unlock(&lock); \
        return (rc); \
    } while (0)

static fctx *current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

static int ctx_ok(const fctx *c)
{
    return c != NULL && c->magic == MAGIC_CTX && !c->destroyed;
}

/* The stream a handle stands for: NULL, CU_STREAM_LEGACY (1) and
 * CU_STREAM_PER_THREAD (2) are the current context's default stream. */
static fstream *stream_of(CUstream s)
{
    fctx *c;

    if ((uintptr_t)s <= 2) {
        c = current();
        return ctx_ok(c) ? &c->null_stream : NULL;
    }
    return s->magic == MAGIC_STREAM ? s : NULL;
}

static fctx *ctx_new(int device)
{
    fctx *c = calloc(1, sizeof *c);

    c->magic = MAGIC_CTX;
    c->device = device;
    c->null_stream.magic = MAGIC_STREAM;
    c->null_stream.ctx = c;
    c->null_stream.id = next_stream_id++;
    return c;
}

/* ------------------------------------------------------------------------ */
/* Driver entry points                                                       */

FAKE_API CUresult cuInit(unsigned flags)
{
    ENTER(F_cuInit);
    (void)flags;
    if (init_fail)
        LEAVE(CUDA_ERROR_NO_DEVICE);
    initialized = 1;
    LEAVE(CUDA_SUCCESS);
}

/* As NVML names devices: fakenvml.c finds device d at bus 0x10 + d. */
FAKE_API CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice dev)
{
    if (buf == NULL || len < 13 || dev < 0 || dev >= MAX_DEVICES)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(buf, (size_t)len, "00000000:%02x:00.0", 0x10 + dev);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= MAX_DEVICES)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetCount(int *n)
{
    *n = 2;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (dev < 0 || dev >= MAX_DEVICES)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (primary[dev] == NULL)
        primary[dev] = ctx_new(dev);
    *ctx = primary[dev];
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    ENTER(F_cuCtxGetCurrent);
    *ctx = current();
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    ENTER(F_cuCtxSetCurrent);
    if (ctx == NULL) {
        if (ctx_depth > 0)
            ctx_depth--;
        LEAVE(CUDA_SUCCESS);
    }
    if (!ctx_ok(ctx))
        LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    LEAVE(CUDA_SUCCESS);
}

static CUresult ctx_push(CUcontext ctx)
{
    ENTER(F_cuCtxPushCurrent);
    if (!ctx_ok(ctx))
        LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (ctx_depth == STACK_MAX)
        LEAVE(CUDA_ERROR_UNKNOWN);
    ctx_stack[ctx_depth++] = ctx;
    LEAVE(CUDA_SUCCESS);
}

static CUresult ctx_pop(CUcontext *ctx)
{
    ENTER(F_cuCtxPopCurrent);
    if (ctx_depth == 0)
        LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    ctx_depth--;
    if (ctx != NULL)
        *ctx = ctx_stack[ctx_depth];
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *dev)
{
    fctx *c;

    ENTER(F_cuCtxGetDevice);
    c = current();
    if (!ctx_ok(c))
        LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    *dev = c->device;
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamGetCtx(CUstream s, CUcontext *ctx)
{
    fstream *st;

    ENTER(F_cuStreamGetCtx);
    st = stream_of(s);
    if (st == NULL || !ctx_ok(st->ctx))
        LEAVE((uintptr_t)s <= 2 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE);
    *ctx = st->ctx;
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamCreate(CUstream *s, unsigned flags)
{
    fctx *c;
    fstream *st;

    ENTER(F_cuStreamCreate);
    c = current();
    if (!ctx_ok(c))
        LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    st = calloc(1, sizeof *st);
    if (st == NULL)
        LEAVE(CUDA_ERROR_UNKNOWN);
    st->next_all = all_streams;
    all_streams = st;
    st->magic = MAGIC_STREAM;
    st->ctx = c;
    st->flags = flags;
    st->id = next_stream_id++;
    *s = st;
    LEAVE(CUDA_SUCCESS);
}

static CUresult stream_destroy(CUstream s)
{
    ENTER(F_cuStreamDestroy);
    if ((uintptr_t)s <= 2 || s->magic != MAGIC_STREAM)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    /* Kept, and its log with it, so that tests can read what it ran; the
     * handle is no longer a stream. */
    s->magic = MAGIC_DEAD;
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamIsCapturing(CUstream s, int *status)
{
    fstream *st;

    ENTER(F_cuStreamIsCapturing);
    st = stream_of(s);
    if (st == NULL)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    *status = st->capturing;
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuEventCreate(CUevent *ev, unsigned flags)
{
    fctx *c;
    fevent *e;

    ENTER(F_cuEventCreate);
    c = current();
    if (!ctx_ok(c))
        LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    e = calloc(1, sizeof *e);
    if (e == NULL)
        LEAVE(CUDA_ERROR_UNKNOWN);
    e->next = live_list;
    if (live_list != NULL)
        live_list->prev = e;
    live_list = e;
    e->magic = MAGIC_EVENT;
    e->ctx = c;
    e->flags = flags;
    *ev = e;
    if (++live_events > live_events_peak)
        live_events_peak = live_events;
    LEAVE(CUDA_SUCCESS);
}

#ifndef FAKECUDA_OMIT_EVENT_RECORD
FAKE_API CUresult cuEventRecord(CUevent ev, CUstream s)
{
    fstream *st;
    uint64_t t;

    ENTER(F_cuEventRecord);
    st = stream_of(s);
    if (ev == NULL || ev->magic != MAGIC_EVENT || st == NULL)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx_ok(ev->ctx) || ev->ctx != st->ctx)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    t = (seen_ns = now_ns()) + latency_ns;
    if (st->busy_until > t)
        t = st->busy_until;
    st->busy_until = t;
    ev->recorded = 1;
    ev->stamp = t;
    ev->done_at = t + delay_ns;
    if (st->nlog == st->caplog && st->caplog < (1u << 20)) {
        size_t cap = st->caplog ? st->caplog * 2 : 256;
        uint64_t *p = realloc(st->log, cap * sizeof *p);

        if (p != NULL) {
            st->log = p;
            st->caplog = cap;
        }
    }
    if (st->nlog < st->caplog)
        st->log[st->nlog++] = t;
    st->nrecords++;
    LEAVE(CUDA_SUCCESS);
}
#endif

FAKE_API CUresult cuEventQuery(CUevent ev)
{
    ENTER(F_cuEventQuery);
    if (ev == NULL || ev->magic != MAGIC_EVENT)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (!ev->recorded || reached(ev->done_at))
        LEAVE(CUDA_SUCCESS);
    LEAVE(CUDA_ERROR_NOT_READY);
}

static CUresult event_elapsed(float *ms, CUevent a, CUevent b)
{
    ENTER(F_cuEventElapsedTime);
    if (a == NULL || b == NULL || a->magic != MAGIC_EVENT || b->magic != MAGIC_EVENT ||
        !a->recorded || !b->recorded || a->ctx != b->ctx)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (!reached(a->done_at) || !reached(b->done_at))
        LEAVE(CUDA_ERROR_NOT_READY);
    *ms = (float)((double)(int64_t)(b->stamp - a->stamp) / 1e6);
    LEAVE(CUDA_SUCCESS);
}

static CUresult event_destroy(CUevent ev)
{
    ENTER(F_cuEventDestroy);
    if (ev == NULL || ev->magic != MAGIC_EVENT)
        LEAVE(CUDA_ERROR_INVALID_HANDLE);
    ev->magic = MAGIC_DEAD;
    if (ev->prev != NULL)
        ev->prev->next = ev->next;
    else
        live_list = ev->next;
    if (ev->next != NULL)
        ev->next->prev = ev->prev;
    free(ev);
    live_events--;
    LEAVE(CUDA_SUCCESS);
}

FAKE_API CUresult cuGetErrorName(CUresult rc, const char **name)
{
    switch (rc) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_READY: *name = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_UNKNOWN: *name = "CUDA_ERROR_UNKNOWN"; break;
    default: *name = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Versioned names, as a CUDA 12.8+ driver exports them (and the plain ones
 * that older headers map to). */
#ifndef FAKECUDA_V1_ONLY
FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return ctx_push(ctx); }
FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *ctx) { return ctx_pop(ctx); }
FAKE_API CUresult cuStreamDestroy_v2(CUstream s) { return stream_destroy(s); }
FAKE_API CUresult cuEventDestroy_v2(CUevent ev) { return event_destroy(ev); }
FAKE_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { return event_elapsed(ms, a, b); }
#endif
FAKE_API CUresult cuCtxPushCurrent(CUcontext ctx) { return ctx_push(ctx); }
FAKE_API CUresult cuCtxPopCurrent(CUcontext *ctx) { return ctx_pop(ctx); }
FAKE_API CUresult cuStreamDestroy(CUstream s) { return stream_destroy(s); }
FAKE_API CUresult cuEventDestroy(CUevent ev) { return event_destroy(ev); }
FAKE_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { return event_elapsed(ms, a, b); }

/* Device memory and a memset, for the benchmark's PROF_CUDA=kernels run
 * (bench/cuda_zone.c): the memset is 1 us of simulated work, reported to
 * the fake CUPTI as a memset. The "memory" is an address nothing reads. */
typedef unsigned long long CUdeviceptr;

FAKE_API void fakecuda_launch_kind(CUstream s, uint64_t ns, int kind, const char *name);

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
    static uint64_t next = 0x7f0000000000ull;

    if (p == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *p = __atomic_fetch_add(&next, (bytes + 255) & ~(size_t)255, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n;
    fakecuda_launch_kind(s, 1000, 2, NULL);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* For tests                                                                 */

/* A new context on a device (not current anywhere). */
FAKE_API CUcontext fakecuda_ctx_create(int device)
{
    fctx *c;

    pthread_mutex_lock(&lock);
    c = ctx_new(device);
    pthread_mutex_unlock(&lock);
    return c;
}

/* Destroy a context: every later call on it or its events fails. */
FAKE_API void fakecuda_ctx_destroy(CUcontext c)
{
    pthread_mutex_lock(&lock);
    c->destroyed = 1;
    pthread_mutex_unlock(&lock);
}

/* Give stream s to context c, as if it had been destroyed and its handle
 * reused for a new stream in c (real drivers reuse freed addresses). */
FAKE_API void fakecuda_stream_move(CUstream s, CUcontext c)
{
    pthread_mutex_lock(&lock);
    s->ctx = c;
    s->busy_until = 0;
    pthread_mutex_unlock(&lock);
}

/* Queue ns of simulated work of a CUPTI activity kind (10 a kernel, 1 a
 * memcpy, 2 a memset) on a stream; the fake CUPTI, when enabled, hears of
 * it with its GPU times. */
FAKE_API void fakecuda_launch_kind(CUstream s, uint64_t ns, int kind, const char *name)
{
    fstream *st;
    uint64_t t = 0, cpu;
    uint32_t id = 0;
    int device = 0;
    fakecuda_activity_fn hook;

    pthread_mutex_lock(&lock);
    configure();
    cpu = now_ns();
    st = stream_of(s);
    if (st != NULL) {
        t = cpu + latency_ns;
        if (st->busy_until > t)
            t = st->busy_until;
        st->busy_until = t + ns;
        id = st->id;
        device = st->ctx->device;
    }
    hook = activity_hook;
    pthread_mutex_unlock(&lock);
    if (st != NULL && hook != NULL)
        hook(kind, id, device, t, t + ns, name, cpu);
}

/* Queue ns of simulated kernel work on a stream. */
FAKE_API void fakecuda_launch(CUstream s, uint64_t ns)
{
    fakecuda_launch_kind(s, ns, 10, "_Z11fake_kernelv");
}

FAKE_API void fakecuda_set_activity_hook(fakecuda_activity_fn fn)
{
    pthread_mutex_lock(&lock);
    activity_hook = fn;
    pthread_mutex_unlock(&lock);
}

/* CUPTI's id of a stream (cuptiGetStreamIdEx): a special handle is the
 * default stream of ctx, or of the current context. 0, or -1. */
FAKE_API int fakecuda_stream_id(CUcontext ctx, CUstream s, uint32_t *id)
{
    fstream *st = NULL;

    pthread_mutex_lock(&lock);
    if ((uintptr_t)s <= 2)
        st = ctx_ok(ctx) ? &ctx->null_stream : stream_of(s);
    else if (s->magic == MAGIC_STREAM)
        st = s;
    if (st != NULL)
        *id = st->id;
    pthread_mutex_unlock(&lock);
    return st != NULL ? 0 : -1;
}

/* A stream's CUPTI id, for tests. */
FAKE_API uint32_t fakecuda_stream_cupti_id(CUstream s)
{
    uint32_t id = 0;

    fakecuda_stream_id(NULL, s, &id);
    return id;
}

/* Copy up to cap GPU stamps of the events recorded on s (in order; the
 * first 2^20 are kept) and return how many were recorded in all. Works on
 * destroyed streams. */
FAKE_API size_t fakecuda_stream_log(CUstream s, uint64_t *out, size_t cap)
{
    fstream *st;
    size_t n;

    pthread_mutex_lock(&lock);
    st = (uintptr_t)s <= 2 ? stream_of(s) : s;
    n = st != NULL ? (size_t)st->nrecords : 0;
    if (st != NULL) {
        size_t k = st->nlog < cap ? st->nlog : cap;
        if (k > 0)
            memcpy(out, st->log, k * sizeof *out);
    }
    pthread_mutex_unlock(&lock);
    return n;
}

static long long mem_used_mib = 512;    /* fakecuda_set_mem_used_mib */
static unsigned long long mem_info_calls;

/* Device memory as the driver says it: 80 GiB, mem_used_mib of it used.
 * Needs a current context, as the real one does. */
FAKE_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    fctx *c = current();
    size_t total = (size_t)80 << 30;
    size_t used = (size_t)__atomic_load_n(&mem_used_mib, __ATOMIC_RELAXED) << 20;

    if (!ctx_ok(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *total_bytes = total;
    *free_bytes = total - used;
    __atomic_fetch_add(&mem_info_calls, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

FAKE_API unsigned long long fakecuda_mem_info_calls(void)
{
    return __atomic_load_n(&mem_info_calls, __ATOMIC_RELAXED);
}

FAKE_API void fakecuda_set_mem_used_mib(long long mib)
{
    __atomic_store_n(&mem_used_mib, mib, __ATOMIC_RELAXED);
}

FAKE_API void fakecuda_set_delay_us(uint64_t us)
{
    pthread_mutex_lock(&lock);
    configure();
    delay_ns = us * 1000u;
    pthread_mutex_unlock(&lock);
}

FAKE_API void fakecuda_set_capturing(CUstream s, int on)
{
    fstream *st;

    pthread_mutex_lock(&lock);
    if ((st = stream_of(s)) != NULL)
        st->capturing = on;
    pthread_mutex_unlock(&lock);
}

/* Make the nth call of entry point name (counting from now if relative is
 * nonzero) fail with code; every call from then on when sticky. */
FAKE_API int fakecuda_fail(const char *name, uint64_t nth, int relative, int sticky, int code)
{
    int i;

    pthread_mutex_lock(&lock);
    configure();
    for (i = 0; i < F_COUNT; i++) {
        if (strcmp(name, fn_names[i]) == 0) {
            fail_at[i] = nth + (relative ? calls[i] : 0);
            fail_after[i] = sticky;
            fail_code = code;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return i < F_COUNT ? 0 : -1;
}

/* How many times an entry point was called. */
FAKE_API uint64_t fakecuda_calls(const char *name)
{
    uint64_t n = 0;
    int i;

    pthread_mutex_lock(&lock);
    for (i = 0; i < F_COUNT; i++)
        if (strcmp(name, fn_names[i]) == 0)
            n = calls[i];
    pthread_mutex_unlock(&lock);
    return n;
}

/* Events that exist now, and the most that ever existed at once. */
FAKE_API long fakecuda_live_events(long *peak)
{
    long n;

    pthread_mutex_lock(&lock);
    n = live_events;
    if (peak != NULL)
        *peak = live_events_peak;
    pthread_mutex_unlock(&lock);
    return n;
}
