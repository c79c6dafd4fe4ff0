/*
 * prof.h - instrumentation and timing for C, C++, Cython and Python code.
 *
 *     #include <prof.h>
 *
 *     for (int step = 0; step < n; step++) {
 *         PROF_ZONE("train_step");
 *         { PROF_ZONE("forward"); forward(batch); }
 *         prof_step();
 *     }
 *
 * Run with PROF=1 and a table of every stage (count, total, self, avg,
 * p50/p95/p99, max, share of wall time) is printed at exit; PROF_TRACE=f.json
 * also writes a Chrome trace. Off is the default: an instrumented zone then
 * costs one load of a global flag.
 *
 * Threading: every function here may be called from any thread. Zones are
 * per thread: a zone ends on the thread that began it.
 *
 * Names: a zone, counter or mark name is a pointer that must stay valid for
 * the life of the process: a string literal, __func__, or the result of
 * prof_intern(). The runtime reads the string later, on its own thread.
 *
 * Errors: functions returning int give 0 on success and a negative errno
 * value on failure. The zone macros never fail: when a record cannot be
 * kept (full ring, re-entry from a signal handler) it is dropped and counted,
 * and the count is reported in the summary and the trace.
 *
 * Define PROF_DISABLE before including this header (meson option
 * `-Dprof_disable=true` for users of the dependency) to compile every macro
 * out; the types and functions remain declared.
 */
#ifndef PROF_H
#define PROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prof_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PROF_STATIC)
#  define PROF_API
#elif defined(PROF_BUILDING_LIBRARY)
#  define PROF_API __attribute__((visibility("default")))
#else
#  define PROF_API
#endif

/* ------------------------------------------------------------------------ */
/* Switching on and off                                                      */

/* Switch recording on or off from code. PROF=0 in the environment wins: then
 * prof_enable(true) does nothing and returns -EPERM. Turning on starts the
 * collector thread on first use; turning off stops recording new zones
 * (zones already begun still end and are counted). Returns 0. */
PROF_API int prof_enable(int on);

/* Nonzero when zones are being recorded. */
PROF_API int prof_enabled(void);

/* ------------------------------------------------------------------------ */
/* Zones (see the macros below; these types are what they expand to)        */

/* A zone in progress. Lives on the stack of the thread that began it.
 * start == 0 means the zone was begun while off and records nothing. */
typedef struct prof_zone {
    uint64_t start;       /* clock ticks at begin */
    const char *name;
    uint32_t parent;      /* path hash of the enclosing zone */
    uint32_t depth;       /* nesting depth on this thread, 0 = outermost */
    void *thread;         /* the runtime's state of the thread that began it;
                             low bit set: begun through the hooks (NVTX) */
} prof_zone;

/* Out-of-line copies of the inline fast path, for FFI callers (Cython,
 * ctypes) and languages that cannot use the macros. Same contract. */
PROF_API prof_zone prof_zone_begin(const char *name);
PROF_API void prof_zone_end(prof_zone *zone);

/* A value track: aggregated as last/min/max/avg in the summary, and drawn as
 * a counter in the trace. Never blocks; dropped and counted when the ring is
 * full. */
PROF_API void prof_counter(const char *name, double value);

/* An instant event (epoch boundaries, checkpoints): counted in the summary,
 * an instant event in the trace. */
PROF_API void prof_mark(const char *name);

/* Mark an iteration boundary. Steps drive PROF_SUMMARY_EVERY=Nsteps and
 * PROF_TRACE_STEPS. Cheap: one atomic increment and one ring record; the
 * summary itself is formatted on the collector thread. Returns the number
 * of steps completed so far in this process. */
PROF_API uint64_t prof_step(void);

/* Name the calling thread in the summary and the trace. The string is
 * copied; names longer than 63 bytes are truncated. Returns 0, or -EINVAL
 * for NULL, or -ENOMEM. */
PROF_API int prof_thread_name(const char *name);

/* Return a pointer that lives until the process exits and holds a copy of
 * s; the same contents always give the same pointer. Use it for names built
 * at run time. Returns NULL when s is NULL or memory is exhausted. */
PROF_API const char *prof_intern(const char *s);

/* ------------------------------------------------------------------------ */
/* Results                                                                   */

/* Wait until the collector has taken in every zone that ended (on any
 * thread) before this call. Returns 0; -ESRCH when recording never started;
 * -EDEADLK when called from the collector itself (a logger callback). */
PROF_API int prof_flush(void);

/* One stage: every zone with this name, from every thread and call site.
 * Times are nanoseconds. Percentiles come from a log-linear histogram and
 * are within 1% of the exact value. */
typedef struct prof_stage_stats {
    const char *name;     /* valid until prof_shutdown() */
    const char *parent;   /* the stage it mostly runs inside, or NULL */
    uint64_t count;
    uint64_t total_ns;    /* sum of durations */
    uint64_t self_ns;     /* total minus time in child zones */
    uint64_t min_ns;
    uint64_t max_ns;
    double avg_ns;
    double p50_ns;
    double p95_ns;
    double p99_ns;
    double wall_share;    /* outermost time / wall time; recursion counted once */
    uint32_t depth;       /* depth in the summary tree, 0 = top level */
    uint32_t flags;       /* PROF_STAGE_GPU for GPU stages */
    uint64_t reserved[6];
} prof_stage_stats;

#define PROF_STAGE_GPU 1u

/* Fill *out with the whole-run numbers of the stage called name, after
 * flushing. Returns 0, -EINVAL for NULL arguments, -ENOENT when no zone of
 * that name has ended, -ESRCH when recording never started. */
PROF_API int prof_stats(const char *name, prof_stage_stats *out);

/* Fill out[0..cap) with every stage in summary order (tree order) and return
 * how many stages there are (which may exceed cap), or a negative errno. */
PROF_API int prof_stats_list(prof_stage_stats *out, size_t cap);

typedef struct prof_counter_stats {
    const char *name;
    uint64_t count;
    double last, min, max, avg;
    uint64_t reserved[4];
} prof_counter_stats;

/* Same as prof_stats(), for a PROF_COUNTER track. */
PROF_API int prof_counter_stats_get(const char *name, prof_counter_stats *out);

/* Fill out[0..cap) with every counter, by name, and return how many there
 * are (which may exceed cap), or a negative errno. */
PROF_API int prof_counter_stats_list(prof_counter_stats *out, size_t cap);

/* Summary formats for prof_summary_print() / prof_summary_snprint(). */
enum {
    PROF_FORMAT_DEFAULT = 0,  /* as PROF_SUMMARY_FORMAT says (text if unset) */
    PROF_FORMAT_TEXT = 1,     /* the table */
    PROF_FORMAT_JSON = 2      /* one JSON object on one line */
};

/* Flush, then print the whole-run summary to f. Returns 0, -EINVAL for a
 * NULL stream, -EIO when writing failed, -ESRCH when recording never
 * started. */
PROF_API int prof_summary_print(FILE *f);

/* Flush, then format the whole-run summary into buf like snprintf: returns
 * the length the full text needs (excluding the NUL); the output is
 * truncated to size-1 bytes and NUL-terminated when size > 0. Negative
 * errno on failure. */
PROF_API int prof_summary_snprint(char *buf, size_t size, int format);

/* Forget every statistic and counter (names stay interned). Threads and
 * rings are kept. Returns 0. */
PROF_API int prof_reset(void);

/* Flush, print the final summary where PROF_SUMMARY says, close the trace
 * with its ']', and stop the collector. Zones recorded afterwards are
 * ignored unless prof_enable(1) is called again. Idempotent; also run at
 * exit. Returns 0. */
PROF_API int prof_shutdown(void);

/* Where the summaries that the runtime prints by itself (periodic ones and
 * the final one) go, instead of PROF_SUMMARY: fn receives the formatted
 * text (PROF_SUMMARY_FORMAT decides which form) and the kind, one of
 * PROF_SUMMARY_PERIODIC / PROF_SUMMARY_FINAL. It runs on the collector
 * thread (or on a thread inside prof_flush, prof_shutdown or exit) and
 * should not block for long; the calls that wait for the collector
 * (prof_flush, prof_shutdown, prof_stats, ...) return -EDEADLK inside it
 * instead of hanging. NULL restores PROF_SUMMARY. */
enum { PROF_SUMMARY_PERIODIC = 1, PROF_SUMMARY_FINAL = 2 };
typedef void (*prof_summary_fn)(void *user, const char *text, int kind);
PROF_API void prof_set_summary_handler(prof_summary_fn fn, void *user);

/* The runtime's version, "MAJOR.MINOR.PATCH". */
PROF_API const char *prof_version(void);

/* Where the runtime's messages go (bad environment values, I/O errors, one
 * notice per degraded feature). Default: "prof: ..." lines on stderr. The
 * callback may run on any thread, including the collector; it must not call
 * prof_flush(). Pass NULL to restore the default. */
typedef void (*prof_log_fn)(void *user, const char *message);
PROF_API void prof_set_logger(prof_log_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* GPU zones (CUDA). stream is a CUstream / cudaStream_t (NULL: the legacy
 * default stream). The GPU time of work enqueued on stream between begin and
 * end becomes a stage "<name> [gpu]"; the CPU time of the block is the stage
 * "<name>". Without a CUDA driver (or PROF_CUDA=0) only the CPU side is
 * timed, and one notice says so. The application thread never waits for the
 * GPU. */
typedef struct prof_cuda_zone {
    prof_zone cpu;
    void *stream;
    void *events;         /* the runtime's pooled event pair, or NULL */
} prof_cuda_zone;

PROF_API prof_cuda_zone prof_cuda_zone_begin(const char *name, void *stream);
PROF_API void prof_cuda_zone_end(prof_cuda_zone *zone);

/* ------------------------------------------------------------------------ */
/* Macros                                                                    */

#define PROF_CONCAT_INNER_(a, b) a##b
#define PROF_CONCAT_(a, b) PROF_CONCAT_INNER_(a, b)
#ifdef __COUNTER__
#  define PROF_UNIQUE_(prefix) PROF_CONCAT_(prefix, __COUNTER__)
#else
#  define PROF_UNIQUE_(prefix) PROF_CONCAT_(prefix, __LINE__)
#endif

#if defined(PROF_DISABLE)

#  define PROF_ZONE(name) ((void)sizeof(name))
#  define PROF_FUNC() ((void)0)
#  define PROF_ZONE_BEGIN(var, name) prof_zone var = {0, 0, 0, 0, 0}
#  define PROF_ZONE_END(var) ((void)(var))
#  define PROF_CUDA_ZONE(name, stream) ((void)sizeof(name), (void)sizeof(stream))
#  define PROF_COUNTER(name, value) ((void)sizeof(name), (void)sizeof(value))
#  define PROF_MARK(name) ((void)sizeof(name))

#elif defined(__cplusplus)

}  /* extern "C" */
namespace prof {
/* RAII zone: begins on construction, ends when the scope exits. */
class Zone {
public:
    explicit Zone(const char *name);
    ~Zone();
    Zone(const Zone &) = delete;
    Zone &operator=(const Zone &) = delete;
private:
    prof_zone zone_;
};
class CudaZone {
public:
    CudaZone(const char *name, void *stream) : zone_(prof_cuda_zone_begin(name, stream)) {}
    ~CudaZone() { prof_cuda_zone_end(&zone_); }
    CudaZone(const CudaZone &) = delete;
    CudaZone &operator=(const CudaZone &) = delete;
private:
    prof_cuda_zone zone_;
};
}  /* namespace prof */
extern "C" {
#  define PROF_ZONE(name) ::prof::Zone PROF_UNIQUE_(prof_zone_)(name)
#  define PROF_FUNC() PROF_ZONE(__func__)
#  define PROF_CUDA_ZONE(name, stream) \
    ::prof::CudaZone PROF_UNIQUE_(prof_cuda_zone_)((name), (void *)(stream))

#else /* C */

/* The zone ends when the enclosing block exits, through the cleanup
 * attribute (gcc, clang). */
#  define PROF_ZONE(name) \
    prof_zone PROF_UNIQUE_(prof_zone_) \
        __attribute__((cleanup(prof_zone_end_inline_), unused)) = prof_zone_begin_inline_(name)
#  define PROF_FUNC() PROF_ZONE(__func__)
#  define PROF_CUDA_ZONE(name, stream) \
    prof_cuda_zone PROF_UNIQUE_(prof_cuda_zone_) \
        __attribute__((cleanup(prof_cuda_zone_end), unused)) = \
        prof_cuda_zone_begin((name), (void *)(stream))

#endif

#if !defined(PROF_DISABLE)
/* An explicit pair, for zones that do not match a block. The zone variable
 * is declared by PROF_ZONE_BEGIN. */
#  define PROF_ZONE_BEGIN(var, name) prof_zone var = prof_zone_begin_inline_(name)
#  define PROF_ZONE_END(var) prof_zone_end_inline_(&(var))
#  define PROF_COUNTER(name, value) prof_counter((name), (double)(value))
#  define PROF_MARK(name) prof_mark(name)
#endif

/* ------------------------------------------------------------------------ */
/* The inline fast path. Not API: names ending in '_' may change in any
 * release. It is here so a zone costs two clock reads and a few stores.
 *
 * Each thread owns one single-producer/single-consumer ring of records. The
 * thread writes a record when a zone ends and publishes it by advancing
 * `head` (release); the collector thread reads records up to `head`
 * (acquire) and hands the slots back by advancing `tail` (release). Indices
 * run free and are masked on access, so the fill level is head - tail.  */

#define PROF_MAX_DEPTH_ 64

enum {
    PROF_RECORD_ZONE_ = 0,
    PROF_RECORD_COUNTER_ = 1,  /* end holds the value's bits */
    PROF_RECORD_MARK_ = 2,
    PROF_RECORD_STEP_ = 3,     /* end holds the step number */
    PROF_RECORD_CUDA_ = 4,     /* start holds the pooled event pair */
    PROF_RECORD_CUDA_CPU_ = 5  /* a zone's CPU side; the GPU side follows */
};

/* 32 bytes: two records per cache line. */
typedef struct prof_record_ {
    uint64_t start;       /* ticks; PROF_RECORD_CUDA_: the pooled event pair */
    uint64_t end;         /* ticks; counters: the value's bits; steps: the step */
    const char *name;
    uint32_t parent;      /* path hash of the enclosing zone */
    uint16_t depth;       /* nesting depth (mod 65536) */
    uint16_t kind;
} prof_record_;

struct prof_thread_ {
    /* Written by the owning thread, read by the collector. */
    uint64_t head;                 /* next slot to write; release-published */
    uint64_t tail_cache;           /* the owner's last view of tail */
    uint64_t dropped;              /* ring full: records lost */
    uint64_t reentered;            /* zones refused while a push was under way */
    prof_record_ *ring;
    uint64_t mask;                 /* capacity - 1; capacity is a power of 2 */
    uint32_t depth;
    uint32_t busy;                 /* nonzero while the owner edits the ring */
    const char *names[PROF_MAX_DEPTH_];     /* the open zones, outermost first */
    uint32_t path[PROF_MAX_DEPTH_ + 1];     /* path[d]: hash of names[0..d) */
    /* Written by the collector: on its own cache line. */
    uint64_t tail __attribute__((aligned(64)));
};

/* The flag every zone tests: 0 off; PROF_ON_RECORD_ set when recording;
 * PROF_ON_HOOKS_ also set when zones must take the out-of-line path
 * (PROF_NVTX=1, or a CPU counter the runtime does not trust), so that
 * otherwise the fast path pays for neither. */
#define PROF_ON_RECORD_ 1
#define PROF_ON_HOOKS_ 2
extern PROF_API int prof_on_;
extern PROF_API int prof_clock_is_tsc_;        /* 1: ticks are the TSC / CNTVCT */
/* initial-exec: one pointer of static TLS, read without a call into the
 * dynamic linker even from shared objects (Python extensions). The whole
 * runtime keeps a few bytes of TLS so that it fits the static TLS reserve
 * glibc keeps for libraries loaded with dlopen. */
extern PROF_API __thread struct prof_thread_ *prof_thread_self_
    __attribute__((tls_model("initial-exec")));

PROF_API struct prof_thread_ *prof_thread_attach_(void);
PROF_API prof_zone prof_zone_begin_hooked_(const char *name);
PROF_API void prof_zone_end_hooked_(prof_zone *zone);
PROF_API uint64_t prof_clock_fallback_ticks_(void);
PROF_API uint64_t prof_ticks_now_(void);   /* the tick source in use, out of line */

#if defined(__GNUC__)
#  define PROF_LIKELY_(x) __builtin_expect(!!(x), 1)
#  define PROF_UNLIKELY_(x) __builtin_expect(!!(x), 0)
#else
#  define PROF_LIKELY_(x) (x)
#  define PROF_UNLIKELY_(x) (x)
#endif

#define PROF_PATH_ROOT_ 0x70726f66u /* "prof": the hash of the empty path */

/* The CPU's counter, read raw: the TSC on x86-64, CNTVCT on arm64. The
 * inline zone path uses it only while prof_clock_is_tsc_ holds: when the
 * runtime does not trust the counter it sets PROF_ON_HOOKS_, and zones take
 * the out-of-line path, which reads prof_ticks_now_() instead. So the fast
 * path tests no clock flag of its own. */
static inline uint64_t prof_ticks_(void)
{
#if defined(__x86_64__) && !defined(PROF_NO_TSC)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__) && !defined(PROF_NO_TSC)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
#else
    return prof_clock_fallback_ticks_();
#endif
}

/* The path hash of a zone named name inside the path h: 32 bits, so a
 * record stays 32 bytes; a collision only misplaces a row of the tree. */
static inline uint32_t prof_path_mix_(uint32_t h, const char *name)
{
    uint64_t x = ((uint64_t)h << 32 | h) ^ (uint64_t)(uintptr_t)name;
    return (uint32_t)((x * 0x9e3779b97f4a7c15ull) >> 32);
}

/* Push one record; drop and count when the ring is full. */
static inline void prof_ring_push_(struct prof_thread_ *t, uint64_t start, uint64_t end,
                                   const char *name, uint32_t parent, uint32_t depth,
                                   uint32_t kind)
{
    uint64_t head = t->head;
    prof_record_ *r;

    if (PROF_UNLIKELY_(head - t->tail_cache > t->mask)) {
        /* Acquire: the collector finished reading the slots it gave back. */
        t->tail_cache = __atomic_load_n(&t->tail, __ATOMIC_ACQUIRE);
        if (head - t->tail_cache > t->mask) {
            __atomic_store_n(&t->dropped, t->dropped + 1, __ATOMIC_RELAXED);
            return;
        }
    }
    r = &t->ring[head & t->mask];
    r->start = start;
    r->end = end;
    r->name = name;
    r->parent = parent;
    r->depth = (uint16_t)depth;   /* wraps past 65535 levels: harmless */
    r->kind = (uint16_t)kind;
    /* Release: the record's fields are visible before the new head. */
    __atomic_store_n(&t->head, head + 1, __ATOMIC_RELEASE);
}

/* Open a zone on the calling thread (recording is known to be on).
 *
 * No re-entry guard is needed here: depth is claimed first, so a signal
 * handler that opens a zone in the middle of this uses the next stack
 * slot and leaves this zone's slot alone (at worst the handler's zone is
 * placed under a stale parent in the summary tree). */
static inline prof_zone prof_zone_open_(const char *name, int raw_ticks)
{
    prof_zone z = {0, 0, 0, 0, 0};
    struct prof_thread_ *t = prof_thread_self_;
    uint32_t d;

    if (PROF_UNLIKELY_(t == NULL) && (t = prof_thread_attach_()) == NULL)
        return z;
    d = t->depth;
    __atomic_store_n(&t->depth, d + 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    z.name = name;
    z.depth = d;
    if (PROF_LIKELY_(d < PROF_MAX_DEPTH_)) {
        z.parent = t->path[d];
        /* Relaxed stores: the collector reads the open-zone stack to place
         * children of zones that have not ended yet, and checks what it
         * read against the path hashes in records. */
        __atomic_store_n(&t->names[d], name, __ATOMIC_RELAXED);
        __atomic_store_n(&t->path[d + 1], prof_path_mix_(z.parent, name), __ATOMIC_RELAXED);
    } else {
        z.parent = t->path[PROF_MAX_DEPTH_];
    }
    z.thread = t;
    z.start = raw_ticks ? prof_ticks_() : prof_ticks_now_();
    return z;
}

static inline prof_zone prof_zone_begin_inline_(const char *name)
{
    int on = __atomic_load_n(&prof_on_, __ATOMIC_RELAXED);

    if (PROF_LIKELY_(!on)) {
        prof_zone off = {0, 0, 0, 0, 0};
        return off;
    }
    if (PROF_UNLIKELY_(on & PROF_ON_HOOKS_))
        return prof_zone_begin_hooked_(name);
    return prof_zone_open_(name, 1);
}

/* Close a zone at tick `end`: restore the depth and push its record. */
static inline void prof_zone_close_(prof_zone *z, uint64_t end)
{
    struct prof_thread_ *t = (struct prof_thread_ *)z->thread;

    if (PROF_UNLIKELY_(t->busy)) {
        __atomic_store_n(&t->reentered, t->reentered + 1, __ATOMIC_RELAXED);
        return;
    }
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&t->depth, z->depth, __ATOMIC_RELAXED);
    prof_ring_push_(t, z->start, end, z->name, z->parent, z->depth, PROF_RECORD_ZONE_);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
    z->start = 0;
}

static inline void prof_zone_end_inline_(prof_zone *z)
{
    if (z->start == 0)
        return;
    if (PROF_UNLIKELY_((uintptr_t)z->thread & 1)) {
        prof_zone_end_hooked_(z);
        return;
    }
    prof_zone_close_(z, prof_ticks_());
}

#ifdef __cplusplus
}  /* extern "C" */
#  if !defined(PROF_DISABLE)
inline prof::Zone::Zone(const char *name) : zone_(prof_zone_begin_inline_(name)) {}
inline prof::Zone::~Zone() { prof_zone_end_inline_(&zone_); }
#  endif
#endif

#endif /* PROF_H */
