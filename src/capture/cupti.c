/* cupti.c - CUPTI's activity API, loaded at run time, for PROF_CUDA=kernels.
 *
 * CUPTI (libcupti.so, or PROF_CUPTI_LIB) is dlopen'd with the driver, on
 * the first CUDA zone, and never linked; the few entry points and record
 * prefixes prof uses are declared in cupti.h. Opening it registers prof's
 * clock (cuptiActivityRegisterTimestampCallback: CLOCK_MONOTONIC ns, so
 * GPU times land on the CPU timeline with no conversion), the buffer
 * callbacks, and enables kernel, memcpy, memset and the runtime and driver
 * API kinds (the API records carry the launching thread, its CPU time and
 * the correlation id that ties a kernel to its launch).
 *
 * Buffers: a fixed pool (PROF_CUPTI_BUFFERS of CUPTI_BUF_BYTES, made on
 * demand). bufferRequested, on any of CUPTI's threads, hands a free one or
 * none; with none, CUPTI drops the records it had for it and counts them
 * (cuptiActivityGetNumDroppedRecords), so a collector that falls behind
 * loses kernels, counted, and never makes the application wait.
 * bufferCompleted only queues the buffer; the collector takes the queue,
 * reads the records (kernels.c) and gives the buffers back.
 *
 * Threads: pool and queue under `lock` (CUPTI's threads and the
 * collector); everything else is the collector's, or written once under
 * cuda.c's load lock before the state that publishes it. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cupti.h"
#include "env.h"
#include "log.h"
#include "wake.h"

/* Small buffers: CUPTI hands one back (cuptiActivityFlushAll(0)) only
 * when every record in it is complete, so while the GPU never idles the
 * buffer being filled comes back only once full. At some 300 bytes a
 * launch (its kernel and API records) 32 KiB is ~100 launches: 10 ms of a
 * loop launching 10k kernels a second, 0.5 s at 200 (kernels.c holds a
 * zone's span 2 s for its kernels). Many of them, so that a fast launcher
 * fills them for longer than a collector pass: 256 are 8 MB, made only
 * as needed, and a quarter of them completed wakes the collector. */
#define CUPTI_BUF_BYTES (32u << 10)
#define CUPTI_BUFS_DEFAULT 256
#define CUPTI_BUFS_MAX 8192

typedef int CUptiResult;
enum {
    CUPTI_SUCCESS = 0,
    CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
};

typedef void (*buf_requested_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*buf_completed_fn)(void *ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                 size_t valid);

static struct {
    CUptiResult (*enable)(int kind);
    CUptiResult (*disable)(int kind);
    CUptiResult (*register_callbacks)(buf_requested_fn req, buf_completed_fn done);
    CUptiResult (*register_timestamp)(uint64_t (*fn)(void));
    CUptiResult (*flush_all)(uint32_t flag);
    CUptiResult (*next_record)(uint8_t *buffer, size_t valid, void **record);
    CUptiResult (*dropped)(void *ctx, uint32_t stream, size_t *dropped);
    CUptiResult (*stream_id)(void *ctx, void *stream, uint8_t per_thread, uint32_t *id);
    CUptiResult (*result_string)(CUptiResult r, const char **s);
} api;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct prof_cupti_buf *free_bufs;      /* lock */
static struct prof_cupti_buf *done_head, **done_tail = &done_head;   /* lock */
static struct prof_cupti_buf *all_bufs[CUPTI_BUFS_MAX];
static unsigned nbufs, max_bufs;              /* lock */
static unsigned ndone;                        /* buffers queued; lock */
static uint64_t refused;                      /* requests with no buffer; lock */
static uint64_t dropped_seen;                 /* CUPTI's own count; collector */
static int failed;                            /* atomic */
static int opened;                            /* atomic: prof_cupti_open succeeded */
static int note_unavailable, note_flush, note_refused;

static const char *result_name(CUptiResult r, char *buf)
{
    const char *s = NULL;

    if (api.result_string != NULL && api.result_string(r, &s) == CUPTI_SUCCESS && s != NULL)
        return s;
    snprintf(buf, 32, "CUPTI error %d", r);
    return buf;
}
#define cupti_error_name(r) result_name((r), (char[32]){0})

static uint64_t timestamp(void)
{
    return prof_clock_now_ns();
}

/* Any of CUPTI's threads. */
static void buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    struct prof_cupti_buf *b;

    pthread_mutex_lock(&lock);
    if ((b = free_bufs) != NULL) {
        free_bufs = b->next;
    } else if (nbufs < max_bufs && (b = calloc(1, sizeof *b)) != NULL) {
        /* CUPTI wants 8-byte aligned buffers; malloc's are 16. */
        if ((b->data = malloc(CUPTI_BUF_BYTES)) == NULL) {
            free(b);
            b = NULL;
        } else {
            all_bufs[nbufs++] = b;
        }
    }
    if (b == NULL)
        refused++;
    pthread_mutex_unlock(&lock);
    *buffer = b != NULL ? b->data : NULL;
    *size = b != NULL ? CUPTI_BUF_BYTES : 0;
    *max_records = 0;
}

static struct prof_cupti_buf *buf_of(const uint8_t *data)
{
    unsigned i, n = nbufs;

    for (i = 0; i < n; i++)
        if (all_bufs[i]->data == data)
            return all_bufs[i];
    return NULL;
}

/* Any of CUPTI's threads, or the collector inside its flush: queue it. */
static void buf_completed(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    struct prof_cupti_buf *b;
    int wake = 0;

    (void)ctx, (void)stream, (void)size;
    if (buffer == NULL)
        return;
    pthread_mutex_lock(&lock);
    if ((b = buf_of(buffer)) != NULL) {
        b->valid = valid;
        b->next = NULL;
        *done_tail = b;
        done_tail = &b->next;
        wake = ++ndone == (max_bufs + 3) / 4;
    }
    pthread_mutex_unlock(&lock);
    /* A futex wake, once per quarter of the pool: safe on CUPTI's thread. */
    if (wake)
        prof_wake_collector();
}

static void *sym(void *h, const char *name)
{
    return dlsym(h, name);
}

int prof_cupti_open(void)
{
    /* A CUPTI the process has already loaded comes first (a torch wheel
     * loads its own libcupti.so.13 by path): another found on the paths
     * would be a second copy, a second CUPTI in one process. */
    static const char *const loaded[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    /* Then the loader's path (a venv's nvidia-cuda-cupti, LD_LIBRARY_PATH),
     * then where the toolkit installs it, which the loader does not search
     * by default. */
    static const char *const libs[] = {
        "libcupti.so", "libcupti.so.13", "libcupti.so.12",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so",
        "/usr/local/cuda/lib/libcupti.so",
    };
    static const int kinds[] = {CUPTI_KIND_CONCURRENT_KERNEL, CUPTI_KIND_MEMCPY,
                                CUPTI_KIND_MEMSET, CUPTI_KIND_RUNTIME, CUPTI_KIND_DRIVER};
    const struct prof_config *cfg = prof_config_get();
    const char *lib = cfg->cupti_lib, *missing = NULL, *err = NULL;
    char q[PROF_LOG_VALUE_SIZE], r[PROF_LOG_QUOTE_SIZE];
    int named = lib != NULL && lib[0] != '\0';
    void *h = NULL;
    CUptiResult rc;
    unsigned i;

    if (named) {
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        err = h == NULL ? dlerror() : NULL;
    } else {
        for (i = 0; h == NULL && i < sizeof loaded / sizeof loaded[0]; i++)
            h = dlopen(lib = loaded[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        for (i = 0; h == NULL && i < sizeof libs / sizeof libs[0]; i++) {
            lib = libs[i];
            if ((h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) == NULL && err == NULL)
                err = dlerror();
        }
    }
    if (h == NULL && named) {
        prof_log_once(&note_unavailable, "PROF_CUDA=kernels but no CUPTI (%s: %s); CUDA zones "
                      "use events", prof_log_value(q, sizeof q, "PROF_CUPTI_LIB", lib),
                      prof_log_dlerror(r, sizeof r, lib, err));
        return -ENODEV;
    }
    if (h == NULL) {
        prof_log_once(&note_unavailable, "PROF_CUDA=kernels but no CUPTI (%s; PROF_CUPTI_LIB "
                      "names its path); CUDA zones use events",
                      prof_log_quote(r, sizeof r, err != NULL ? err : lib));
        return -ENODEV;
    }
    max_bufs = cfg->cupti_buffers != 0 ? cfg->cupti_buffers : CUPTI_BUFS_DEFAULT;
    if (max_bufs > CUPTI_BUFS_MAX)
        max_bufs = CUPTI_BUFS_MAX;

#define REQUIRE(field, name) \
    do { \
        *(void **)&api.field = sym(h, name); \
        if (api.field == NULL && missing == NULL) \
            missing = name; \
    } while (0)
    REQUIRE(enable, "cuptiActivityEnable");
    REQUIRE(disable, "cuptiActivityDisable");
    REQUIRE(register_callbacks, "cuptiActivityRegisterCallbacks");
    /* CUDA 11.6 and later: the oldest CUPTI prof can use. */
    REQUIRE(register_timestamp, "cuptiActivityRegisterTimestampCallback");
    REQUIRE(flush_all, "cuptiActivityFlushAll");
    REQUIRE(next_record, "cuptiActivityGetNextRecord");
    REQUIRE(dropped, "cuptiActivityGetNumDroppedRecords");
    REQUIRE(stream_id, "cuptiGetStreamIdEx");
#undef REQUIRE
    *(void **)&api.result_string = sym(h, "cuptiGetResultString");
    if (missing != NULL) {
        prof_log_once(&note_unavailable, "PROF_CUDA=kernels but CUPTI %s lacks %s (too old); "
                      "CUDA zones use events",
                      named ? prof_log_value(q, sizeof q, "PROF_CUPTI_LIB", lib) : lib, missing);
        memset(&api, 0, sizeof api);
        dlclose(h);
        return -ENODEV;
    }
    if ((rc = api.register_timestamp(timestamp)) != CUPTI_SUCCESS) {
        err = "cuptiActivityRegisterTimestampCallback";
        goto refused;
    }
    if ((rc = api.register_callbacks(buf_requested, buf_completed)) != CUPTI_SUCCESS) {
        err = "cuptiActivityRegisterCallbacks";
        goto refused;
    }
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if ((rc = api.enable(kinds[i])) != CUPTI_SUCCESS) {
            err = "cuptiActivityEnable";
            while (i-- > 0)
                api.disable(kinds[i]);
            goto refused;
        }
    }
    __atomic_store_n(&opened, 1, __ATOMIC_RELEASE);
    return 0;

refused:
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        prof_log_once(&note_unavailable, "PROF_CUDA=kernels but another tool already uses "
                      "CUPTI (%s: %s; nsys, torch.profiler and the like: CUPTI allows one); "
                      "CUDA zones use events", err, cupti_error_name(rc));
    else
        prof_log_once(&note_unavailable, "PROF_CUDA=kernels but %s failed (%s); CUDA zones "
                      "use events", err, cupti_error_name(rc));
    /* Its library stays loaded: CUPTI may hold our callbacks. */
    return -ENODEV;
}

int prof_cupti_stream_id(void *ctx, void *stream, uint32_t *id)
{
    uintptr_t s = (uintptr_t)stream;

    /* CU_STREAM_PER_THREAD (2) is the per-thread default stream. */
    return api.stream_id(ctx, s <= 2 ? NULL : stream, s == 2, id) == CUPTI_SUCCESS ? 0 : -1;
}

int prof_cupti_flush(int forced)
{
    CUptiResult rc;

    /* Acquire: api was written before opened. */
    if (!__atomic_load_n(&opened, __ATOMIC_ACQUIRE) || __atomic_load_n(&failed, __ATOMIC_RELAXED))
        return -1;
    /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED (1): the buffers with records not
     * complete too, at the end; those records come with no end time. */
    if ((rc = api.flush_all(forced ? 1u : 0u)) == CUPTI_SUCCESS)
        return 0;
    prof_log_once(&note_flush, "cuptiActivityFlushAll failed (%s): kernels are no longer "
                  "read, and CUDA zones use events from now on", cupti_error_name(rc));
    __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
    return -1;
}

struct prof_cupti_buf *prof_cupti_take(void)
{
    struct prof_cupti_buf *b;

    pthread_mutex_lock(&lock);
    b = done_head;
    done_head = NULL;
    done_tail = &done_head;
    ndone = 0;
    pthread_mutex_unlock(&lock);
    return b;
}

void prof_cupti_give_back(struct prof_cupti_buf *b)
{
    pthread_mutex_lock(&lock);
    b->next = free_bufs;
    free_bufs = b;
    pthread_mutex_unlock(&lock);
}

int prof_cupti_next(struct prof_cupti_buf *b, const void **rec)
{
    void *r = (void *)*rec;

    if (api.next_record(b->data, b->valid, &r) != CUPTI_SUCCESS)
        return -1;
    *rec = r;
    return 0;
}

uint64_t prof_cupti_dropped(void)
{
    size_t n = 0;
    uint64_t r;

    /* CUPTI's count covers every context and stream with NULL, 0. */
    if (__atomic_load_n(&opened, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&failed, __ATOMIC_RELAXED) && api.dropped(NULL, 0, &n) == CUPTI_SUCCESS)
        dropped_seen += n;
    pthread_mutex_lock(&lock);
    r = refused;
    pthread_mutex_unlock(&lock);
    if (r != 0)
        prof_log_once(&note_refused, "CUPTI's buffers (%u of 32 KiB, PROF_CUPTI_BUFFERS) were "
                      "all waiting for the collector: kernel records were dropped, and are "
                      "counted as dropped", max_bufs);
    return dropped_seen;
}

int prof_cupti_failed(void)
{
    return __atomic_load_n(&failed, __ATOMIC_RELAXED);
}

void prof_cupti_atfork_child(void)
{
    /* The child has no CUPTI of its own: the parent's buffers and
     * subscriber state mean nothing here. */
    __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
    pthread_mutex_init(&lock, NULL);
    done_head = NULL;
    done_tail = &done_head;
    ndone = 0;
}
