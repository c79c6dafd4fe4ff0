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
 * This header is the manual, in the order a program meets it: switching on
 * and off; zones (PROF_ZONE, PROF_FUNC, PROF_ZONE_BEGIN/END, prof::Zone);
 * counters, marks, steps and names; results; windows and ranks; GPU zones;
 * last, what every call does when compiled out. The inline code the macros
 * expand to is in prof_impl.h, which this header includes: it is not API,
 * and any of it may change in any release.
 *
 * The environment, read when the library loads (docs/CONFIG.md has every
 * variable and value): PROF (on/off), PROF_SUMMARY (where the summary
 * goes), PROF_SUMMARY_EVERY (periodic summaries, by time or steps),
 * PROF_SUMMARY_FORMAT (text, json), PROF_TRACE (the Chrome trace's path),
 * PROF_TRACE_STEPS, PROF_SKIP_STEPS, PROF_BUFFER (records per thread
 * ring), PROF_METRICS (Prometheus), PROF_CUDA, PROF_NVTX, PROF_RANKS.
 *
 * Threading: every function here may be called from any thread. Zones are
 * per thread: a zone ends on the thread that began it. An end on another
 * thread is refused and counted with the dropped records (the beginning
 * thread's nesting is repaired); zones may end out of order and nest to any
 * depth (docs/CONFIG.md).
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
 * out and make every call an inline no-op (listed at the end of this
 * header): the program then needs no libprof at all, and no header but
 * this one.
 */
#ifndef PROF_H
#define PROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Compiled out, prof.h is enough on its own: a program that copies only
 * this file gets the no-ops, and prof_version() says "disabled" when
 * prof_version.h (PROF_VERSION_* macros) is not beside it. */
#if !defined(PROF_DISABLE) || !defined(__has_include)
#  include "prof_version.h"
#elif __has_include("prof_version.h")
#  include "prof_version.h"
#endif

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
/* Zones                                                                     */

/* A zone in progress. Lives on the stack of the thread that began it.
 * start == 0 means the zone was begun while off and records nothing. */
typedef struct prof_zone {
    uint64_t start;       /* clock ticks at begin */
    const char *name;
    uint32_t parent;      /* path hash of the enclosing zone */
    uint16_t depth;       /* nesting depth on this thread, 0 = outermost */
    uint16_t gen;         /* generation of the thread slot below: a slot
                             reused by a later thread has another */
    void *thread;         /* the runtime's slot of the thread that began it;
                             low bit set: begun through the hooks (NVTX) */
} prof_zone;

/* PROF_ZONE(name): a zone called name from here to the end of the
 * enclosing block, however the block is left (C: the cleanup attribute of
 * gcc and clang; C++: a prof::Zone, so an exception ends it too). It
 * declares a variable: put it where a declaration may go. Off, it costs
 * one load of a global flag; on, two clock reads and a few stores.
 *
 * PROF_FUNC(): the same, named after the enclosing function: __func__ in
 * C; in C++ the qualified name, "Encoder::run" (namespaces and class
 * template arguments included, return type and parameters left out), taken
 * from __PRETTY_FUNCTION__; a zone in a lambda is "<enclosing
 * function>::lambda". It costs what PROF_ZONE costs.
 *
 * PROF_ZONE_BEGIN(var, name) ... PROF_ZONE_END(var): an explicit pair, for
 * zones that do not match a block. PROF_ZONE_BEGIN declares the prof_zone
 * variable var; PROF_ZONE_END(var) ends it, on the thread that began it.
 *
 * What they expand to differs between C and C++ (prof_impl.h). Compiled
 * out, sizeof keeps the arguments type-checked and "used" without
 * evaluating them. */
#if !defined(PROF_DISABLE)
#  define PROF_ZONE(name) PROF_ZONE_AT_(PROF_UNIQUE_(prof_zone_), name)
#  define PROF_FUNC() PROF_FUNC_AT_(PROF_UNIQUE_(prof_func_))
#  define PROF_ZONE_BEGIN(var, name) PROF_ZONE_BEGIN_AT_(var, name)
#  define PROF_ZONE_END(var) prof_zone_end_inline_(&(var))
#else
#  define PROF_ZONE(name) ((void)sizeof(name))
#  define PROF_FUNC() ((void)0)
#  define PROF_ZONE_BEGIN(var, name) prof_zone var = {0, 0, 0, 0, 0, 0}
#  define PROF_ZONE_END(var) ((void)(var))
#endif

#ifdef __cplusplus
}  /* extern "C" */
namespace prof {
/* RAII zone: begins on construction, ends when the scope exits. Compiled
 * out the type still exists, so code that names it compiles; it records
 * nothing. */
class Zone {
public:
#  if !defined(PROF_DISABLE)
    explicit Zone(const char *name);   /* inline, in prof_impl.h */
    ~Zone();
#  else
    explicit Zone(const char *) {}
#  endif
    Zone(const Zone &) = delete;
    Zone &operator=(const Zone &) = delete;
#  if !defined(PROF_DISABLE)
private:
    prof_zone zone_;
#  endif
};
}  /* namespace prof */
extern "C" {
#endif

/* Out-of-line copies of the inline fast path, for FFI callers (Cython,
 * ctypes) and languages that cannot use the macros. Same contract. */
PROF_API prof_zone prof_zone_begin(const char *name);
PROF_API void prof_zone_end(prof_zone *zone);

/* ------------------------------------------------------------------------ */
/* Counters, marks, steps and names                                          */

/* PROF_COUNTER(name, value) is prof_counter(name, (double)value);
 * PROF_MARK(name) is prof_mark(name). Both are expressions. Compiled out,
 * neither evaluates its arguments. */
#if !defined(PROF_DISABLE)
#  define PROF_COUNTER(name, value) prof_counter((name), (double)(value))
#  define PROF_MARK(name) prof_mark(name)
#else
#  define PROF_COUNTER(name, value) ((void)sizeof(name), (void)sizeof(value))
#  define PROF_MARK(name) ((void)sizeof(name))
#endif

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
 * thread) before this call, then until the summaries due and the trace file
 * (PROF_TRACE) hold them. The wait for output is bounded: a writer that
 * completes no write for 1 s (a reader that does not read: a paused
 * `| less`, a trace FIFO nobody reads), or is still writing after 10 s, is
 * left to it (said once on the log), and later calls do not wait for it
 * until it writes again; the statistics are complete either way.
 * Returns 0; -ESRCH when recording never started;
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
    uint32_t flags;       /* PROF_STAGE_GPU for GPU stages, PROF_STAGE_LOSSY, PROF_STAGE_CPU */
    uint64_t cpu_ns;      /* of self_ns, the time its thread was running on a CPU (the rest
                             it waited: I/O, a lock, a queue, the GIL, another process);
                             sampled (PROF_CPU, docs/ARCHITECTURE.md), valid with PROF_STAGE_CPU */
    uint64_t peak_rise_bytes; /* how much the process's peak resident memory rose while the
                             stage ran (every path of its name together; sampled with cpu_ns,
                             docs/CONFIG.md "peak+") */
    uint64_t reserved[4];
} prof_stage_stats;

#define PROF_STAGE_GPU 1u
#define PROF_STAGE_LOSSY 2u   /* ran on a thread that lost records (full ring): count and times are short */
#define PROF_STAGE_CPU 4u     /* cpu_ns is measured: its threads were sampled (PROF_CPU=1) */

/* Fill *out with the whole-run numbers of the stage called name, after
 * flushing: every zone of that name, whatever its path (the summary's rows
 * are call paths; a name under two parents is two rows there, one stage
 * here, under the parent it mostly runs inside). Returns 0, -EINVAL for NULL arguments, -ENOENT when no zone of
 * that name has ended, -ESRCH when recording never started. */
PROF_API int prof_stats(const char *name, prof_stage_stats *out);

/* Fill out[0..cap) with every stage (by name, as prof_stats() gives it) in
 * tree order, each under the stage it mostly runs inside, and return how
 * many stages there are (which may exceed cap), or a negative errno. */
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

/* Forget every statistic and counter (names stay interned): what ended
 * before the call is not counted, also the zones still waiting in a ring
 * (the trace keeps them); what ends after it is. Threads and rings are
 * kept. It does not drain the rings (with PROF_SUMMARY_EVERY=Nsteps it
 * does, to write the windows before it): beside threads that keep their
 * rings full it waits for one drain at most. The lost-records line is not
 * said again because of a reset. Returns 0. */
PROF_API int prof_reset(void);

/* Flush, print the final summary where PROF_SUMMARY says, close the trace
 * with its ']', and stop the collector. Zones recorded afterwards are
 * ignored unless prof_enable(1) is called again. Idempotent; also run at
 * exit. Returns 0. */
PROF_API int prof_shutdown(void);

/* Where the summaries that the runtime prints by itself (periodic ones and
 * the final one) go, instead of PROF_SUMMARY: fn receives the formatted
 * text (PROF_SUMMARY_FORMAT decides which form) and the kind, one of
 * PROF_SUMMARY_PERIODIC / PROF_SUMMARY_FINAL. It runs on prof's output
 * writer thread, never on the collector: a handler that blocks delays
 * later summaries (beyond 256 waiting or 4 MB, periodic ones are merged
 * into later ones) but no record; at exit the final one is waited for while the
 * handler is blocked for up to 2 s. The calls that wait for the collector
 * (prof_flush, prof_shutdown, prof_stats, ...) return -EDEADLK inside it
 * instead of hanging. NULL restores PROF_SUMMARY for summaries made from
 * then on. */
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
/* Windows and ranks                                                         */

/* The numbers of the last window a periodic summary showed
 * (PROF_SUMMARY_EVERY): the same stages, in the same order and with the
 * same values as that summary's window (its JSON "window" section: at most
 * the 10,000 heaviest stages of the window and the stages they run
 * inside). Fill out[0..cap) and return how many stages there are (which
 * may exceed cap); stages with no zone ended in the window are listed with
 * count 0, as in the summary.
 * *window_end_step (may be NULL) gets the step count at which the window
 * closed. Does not flush: call prof_flush() first to close a window that
 * is due. Returns -ENOENT while no periodic summary has closed a window
 * (since the start or prof_reset()), -ESRCH when recording never started,
 * -EINVAL for out == NULL with cap > 0. */
PROF_API int prof_window_stats_list(prof_stage_stats *out, size_t cap,
                                    uint64_t *window_end_step);

/* Steps counted so far (what the last prof_step() returned), without
 * stepping. */
PROF_API uint64_t prof_step_count(void);

/* Cross-rank summaries are built from the low-level calls in prof_ranks.h
 * (for prof_mpi.h, Python's prof.distributed and other glue); a program
 * uses prof_mpi.h or prof.distributed (docs/DISTRIBUTED.md). */

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

/* PROF_CUDA_ZONE(name, stream): a GPU zone from here to the end of the
 * enclosing block (C: the cleanup attribute; C++: a prof::CudaZone). */
#if !defined(PROF_DISABLE)
#  define PROF_CUDA_ZONE(name, stream) \
    PROF_CUDA_ZONE_AT_(PROF_UNIQUE_(prof_cuda_zone_), name, stream)
#else
#  define PROF_CUDA_ZONE(name, stream) ((void)sizeof(name), (void)sizeof(stream))
#endif

/* The end of the API, and of its extern "C" block. */
#ifdef __cplusplus
}  /* extern "C" */
namespace prof {
/* RAII GPU zone: prof_cuda_zone_begin on construction, prof_cuda_zone_end
 * when the scope exits. Compiled out it exists and records nothing. */
class CudaZone {
public:
#  if !defined(PROF_DISABLE)
    CudaZone(const char *name, void *stream) : zone_(prof_cuda_zone_begin(name, stream)) {}
    ~CudaZone() { prof_cuda_zone_end(&zone_); }
#  else
    CudaZone(const char *, void *) {}
#  endif
    CudaZone(const CudaZone &) = delete;
    CudaZone &operator=(const CudaZone &) = delete;
#  if !defined(PROF_DISABLE)
private:
    prof_cuda_zone zone_;
#  endif
};
}  /* namespace prof */
#endif

/* ------------------------------------------------------------------------ */
/* The inline machinery the macros above expand to: not API (prof_impl.h). */
#if !defined(PROF_DISABLE)
#  include "prof_impl.h"
#endif

#if defined(PROF_DISABLE)
/* ------------------------------------------------------------------------ */
/* Compiled out (PROF_DISABLE): every call above is a macro for an inline
 * no-op that returns what the runtime returns when recording never started,
 * so a program built this way links without libprof:
 *
 *   prof_enable() 0 (and nothing records)   prof_enabled()            0
 *   prof_step()   steps so far (see below)  prof_intern(s)            s
 *   prof_thread_name() 0 (-EINVAL for NULL) prof_version() PROF_VERSION_STRING
 *                                           ("disabled" without prof_version.h)
 *   prof_flush(), prof_stats(), prof_stats_list(),
 *   prof_counter_stats_get(), prof_counter_stats_list(),
 *   prof_summary_print(), prof_summary_snprint(), prof_window_stats_list()
 *                                           -ESRCH (snprint writes ""
 *                                           when size > 0)
 *   prof_step_count() steps so far
 *   prof_reset(), prof_shutdown()           0
 *   prof_zone_begin(), prof_cuda_zone_begin()   a zone that records nothing
 *   the void functions                      nothing
 *
 * prof_step() still counts, so code that acts every N steps behaves the
 * same: the count lives in a weak variable this header defines, one per
 * executable or shared object. Only taking a function's address (&prof_step)
 * still refers to the library. */
#  include <errno.h>
#  ifdef __cplusplus
extern "C" {
#  endif
extern uint64_t prof_disabled_steps_;
__attribute__((weak)) uint64_t prof_disabled_steps_;

/* Each call is a macro for a stub that takes the call's own parameter
 * types, so a program that builds compiled out builds with the library
 * too; a stub evaluates each argument once, as a call does, and most
 * ignore them. */
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wunused-parameter"
static inline int prof_enable_off_(int on) { return 0; }
static inline int prof_enabled_off_(void) { return 0; }
static inline prof_zone prof_zone_begin_off_(const char *n)
{ prof_zone z = {0, 0, 0, 0, 0, 0}; return z; }
static inline void prof_zone_end_off_(prof_zone *z) {}
static inline void prof_counter_off_(const char *n, double v) {}
static inline void prof_mark_off_(const char *n) {}
static inline uint64_t prof_step_off_(void)
{ return __atomic_add_fetch(&prof_disabled_steps_, 1, __ATOMIC_RELAXED); }
static inline int prof_thread_name_off_(const char *n) { return n ? 0 : -EINVAL; }
static inline const char *prof_intern_off_(const char *s) { return s; }
static inline int prof_flush_off_(void) { return -ESRCH; }
static inline int prof_stats_off_(const char *n, prof_stage_stats *o) { return -ESRCH; }
static inline int prof_stats_list_off_(prof_stage_stats *o, size_t c) { return -ESRCH; }
static inline int prof_counter_stats_get_off_(const char *n, prof_counter_stats *o)
{ return -ESRCH; }
static inline int prof_counter_stats_list_off_(prof_counter_stats *o, size_t c) { return -ESRCH; }
static inline int prof_summary_print_off_(FILE *f) { return -ESRCH; }
static inline int prof_summary_snprint_off_(char *buf, size_t size, int format)
{ if (buf != NULL && size > 0) buf[0] = '\0'; return -ESRCH; }
static inline int prof_reset_off_(void) { return 0; }
static inline int prof_shutdown_off_(void) { return 0; }
static inline void prof_set_summary_handler_off_(prof_summary_fn f, void *u) {}
#  ifdef PROF_VERSION_STRING
static inline const char *prof_version_off_(void) { return PROF_VERSION_STRING; }
#  else
static inline const char *prof_version_off_(void) { return "disabled"; }
#  endif
static inline void prof_set_logger_off_(prof_log_fn f, void *u) {}
static inline int prof_window_stats_list_off_(prof_stage_stats *o, size_t c, uint64_t *e)
{ return -ESRCH; }
static inline uint64_t prof_step_count_off_(void)
{ return __atomic_load_n(&prof_disabled_steps_, __ATOMIC_RELAXED); }
static inline prof_cuda_zone prof_cuda_zone_begin_off_(const char *n, void *s)
{ prof_cuda_zone z = {{0, 0, 0, 0, 0, 0}, 0, 0}; return z; }
static inline void prof_cuda_zone_end_off_(prof_cuda_zone *z) {}
#  pragma GCC diagnostic pop
#  ifdef __cplusplus
}  /* extern "C" */
#  endif

#  define prof_enable(on) prof_enable_off_(on)
#  define prof_enabled() prof_enabled_off_()
#  define prof_zone_begin(name) prof_zone_begin_off_(name)
#  define prof_zone_end(zone) prof_zone_end_off_(zone)
#  define prof_counter(name, value) prof_counter_off_(name, value)
#  define prof_mark(name) prof_mark_off_(name)
#  define prof_step() prof_step_off_()
#  define prof_thread_name(name) prof_thread_name_off_(name)
#  define prof_intern(s) prof_intern_off_(s)
#  define prof_flush() prof_flush_off_()
#  define prof_stats(name, out) prof_stats_off_(name, out)
#  define prof_stats_list(out, cap) prof_stats_list_off_(out, cap)
#  define prof_counter_stats_get(name, out) prof_counter_stats_get_off_(name, out)
#  define prof_counter_stats_list(out, cap) prof_counter_stats_list_off_(out, cap)
#  define prof_summary_print(f) prof_summary_print_off_(f)
#  define prof_summary_snprint(buf, size, fmt) prof_summary_snprint_off_(buf, size, fmt)
#  define prof_reset() prof_reset_off_()
#  define prof_shutdown() prof_shutdown_off_()
#  define prof_set_summary_handler(fn, user) prof_set_summary_handler_off_(fn, user)
#  define prof_version() prof_version_off_()
#  define prof_set_logger(fn, user) prof_set_logger_off_(fn, user)
#  define prof_window_stats_list(out, cap, end) prof_window_stats_list_off_(out, cap, end)
#  define prof_step_count() prof_step_count_off_()
#  define prof_cuda_zone_begin(name, stream) prof_cuda_zone_begin_off_(name, stream)
#  define prof_cuda_zone_end(zone) prof_cuda_zone_end_off_(zone)
#endif /* PROF_DISABLE */

#endif /* PROF_H */
