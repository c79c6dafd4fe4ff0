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
 * header): the program then needs no libprof at all.
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
/* Zones (see the macros below; these types are what they expand to)        */

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
 * thread) before this call, and the trace file (PROF_TRACE) holds them.
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
    uint32_t flags;       /* PROF_STAGE_GPU for GPU stages, PROF_STAGE_LOSSY */
    uint64_t reserved[6];
} prof_stage_stats;

#define PROF_STAGE_GPU 1u
#define PROF_STAGE_LOSSY 2u   /* ran on a thread that lost records (full ring): count and times are short */

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

/* Cross-rank summaries: the parts prof_mpi.h and Python's prof.distributed
 * are built from (docs/DISTRIBUTED.md). At a step that closes a window,
 * every rank snapshots its last window into a state buffer, then for each
 * of PROF_RANKS_ROUNDS rounds contributes a buffer of int64 words that the
 * job's own communicator combines across ranks (an all-reduce: MIN over
 * the first parts[0] words, MAX over the next parts[1], SUM over the last
 * parts[2], or prof_ranks_combine as one user-defined op), and hands the
 * combined buffer back. The sizes do not grow with the number of ranks.
 * One rank then prints the cross-rank table. libprof never talks to
 * another process itself. Ranks must be below 2^20. */
#define PROF_RANKS_MAX_STAGES 64        /* stages in the cross-rank table */
#define PROF_RANKS_ROUNDS 3
#define PROF_RANKS_STATE_SIZE 65536     /* the state buffer, bytes */
#define PROF_RANKS_BUF_SIZE 16384       /* the largest round buffer, bytes */

/* Start cross-rank summaries in this process. On success *every_steps gets
 * the window length N (PROF_SUMMARY_EVERY=Nsteps): every rank must reduce
 * at each step that is a multiple of N; *timeout_ns (may be NULL) gets how
 * long a reduction may wait for the other ranks (PROF_RANKS_TIMEOUT,
 * default 60s). From then on this rank's own periodic summaries are not
 * printed (the final one still is). Idempotent. Returns 0; -EINVAL when
 * the windows are time-based (ranks agree on steps, not on seconds) and
 * -ENOENT when there are no periodic summaries, each said once in a
 * message; -EPERM under PROF_RANKS=0; -ECANCELED after
 * prof_ranks_abandon(). */
PROF_API int prof_ranks_start(uint64_t *every_steps, uint64_t *timeout_ns);

/* Flush (so that the window due at this step is closed), then snapshot
 * this rank's last window into state[0..size) (size >=
 * PROF_RANKS_STATE_SIZE, 8-byte aligned). A rank with no window snapshots
 * an empty one: it still takes part. Returns 0, -EINVAL (NULL, short
 * buffer) or -ERANGE (rank outside 0..2^20-1). */
PROF_API int prof_ranks_snapshot(void *state, size_t size, int rank);

/* The same from given rows (as prof_window_stats_list gives them; NULL:
 * no window), without the runtime: for tests and bench/ranks_scale. */
PROF_API int prof_ranks_snapshot_rows(void *state, size_t size, int rank,
                                      const prof_stage_stats *rows, size_t n,
                                      uint64_t end_step, uint64_t steps, uint64_t wall_ns);

/* This rank's contribution to round (0 .. PROF_RANKS_ROUNDS-1) into
 * buf[0..size), rounds in order, each after the previous one's result.
 * parts (may be NULL) gets the word counts of the MIN, MAX and SUM parts.
 * Returns the bytes written (a multiple of 8), or -EINVAL (short buffer,
 * round out of order). */
PROF_API int prof_ranks_contribute(void *state, int round, void *buf, size_t size,
                                   size_t parts[3]);

/* inout = inout (+) in, element-wise, for a contribution of size bytes
 * (any round: the buffer says which). Associative and commutative. Buffers
 * of another layout (another prof version) poison the result, which
 * prof_ranks_result then reports. Returns 0 or -EINVAL. */
PROF_API int prof_ranks_combine(void *inout, const void *in, size_t size);

/* Hand round's combined buffer (every rank's contribution) back to state.
 * Returns 0, -EINVAL, or -EPROTO when ranks ran another prof version. */
PROF_API int prof_ranks_result(void *state, int round, const void *buf, size_t size);

/* Format the cross-rank table of a state whose rounds are all in, into buf
 * like snprintf: returns the length the whole text needs; format is
 * PROF_FORMAT_TEXT, PROF_FORMAT_JSON or PROF_FORMAT_DEFAULT
 * (PROF_SUMMARY_FORMAT). Negative errno on failure. */
PROF_API int prof_ranks_format(const void *state, int format, char *buf, size_t size);

/* Format the table as PROF_SUMMARY_FORMAT says and write it where the
 * summaries go (PROF_SUMMARY, or the summary handler, as a periodic
 * summary). Returns 0 or a negative errno. */
PROF_API int prof_ranks_emit(const void *state);

/* A reduction failed or timed out: say so once (naming why), stop
 * cross-rank summaries in this process for good and print this rank's own
 * periodic summaries again. */
PROF_API void prof_ranks_abandon(const char *why);

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

/* A zone's call site, Tracy's static source location: PROF_ZONE,
 * PROF_FUNC and PROF_ZONE_BEGIN with a name known at compile time (a
 * string literal, __func__, a constant) make one of these per call site,
 * in read-only data, and pass its address where the name would go. A zone
 * costs the same either way (one address, computed at link time); the
 * collector tells a site from a name by its first two words (the magic,
 * then the site's own address, which no string holds) and reads the name,
 * file and line from it once per site. A name computed at run time is
 * passed as it is and has no site. Not API. */
#define PROF_SITE_MAGIC_ 0xf17e5173c0de51e5ull   /* no zero byte */
struct prof_site_ {
    uint64_t magic;
    const struct prof_site_ *self;
    const char *name;
    const char *file;
    uint32_t line;
};

/* The site's name is the zone's name when the compiler can tell that it is
 * a constant (gcc and clang fold __builtin_constant_p in a static
 * initializer), else NULL; PROF_SITE_NAME_ then folds to one address or
 * the other. PROF_FUNC's names (__func__, which __builtin_constant_p does
 * not call constant) always have a site. */
#ifdef __cplusplus
#  define PROF_SITE_NULL_ nullptr
#  define PROF_SITE_PTR_(var) reinterpret_cast<const char *>(&(var))
#else
#  define PROF_SITE_NULL_ 0
#  define PROF_SITE_PTR_(var) ((const char *)&(var))
#endif
#define PROF_SITE_(var, nm) PROF_SITE_NAMED_(var, __builtin_constant_p(nm) ? (nm) : PROF_SITE_NULL_)
#define PROF_SITE_NAMED_(var, nm) \
    static const struct prof_site_ var __attribute__((aligned(8), unused)) = { \
        PROF_SITE_MAGIC_, &var, nm, __FILE__, __LINE__}
#define PROF_SITE_NAME_(var, nm) ((var).name != PROF_SITE_NULL_ ? PROF_SITE_PTR_(var) : (nm))

#if defined(PROF_DISABLE)

/* Compiled out: sizeof keeps the arguments type-checked and "used" without
 * evaluating them. The API calls become inline no-ops at the end of this
 * header, so nothing here needs the library. */
#  define PROF_ZONE(name) ((void)sizeof(name))
#  define PROF_FUNC() ((void)0)
#  define PROF_ZONE_BEGIN(var, name) prof_zone var = {0, 0, 0, 0, 0, 0}
#  define PROF_ZONE_END(var) ((void)(var))
#  define PROF_CUDA_ZONE(name, stream) ((void)sizeof(name), (void)sizeof(stream))
#  define PROF_COUNTER(name, value) ((void)sizeof(name), (void)sizeof(value))
#  define PROF_MARK(name) ((void)sizeof(name))
#  ifdef __cplusplus
}  /* extern "C" */
namespace prof {
/* The RAII types still exist, so code that names them compiles; they
 * record nothing. */
class Zone {
public:
    explicit Zone(const char *) {}
    Zone(const Zone &) = delete;
    Zone &operator=(const Zone &) = delete;
};
class CudaZone {
public:
    CudaZone(const char *, void *) {}
    CudaZone(const CudaZone &) = delete;
    CudaZone &operator=(const CudaZone &) = delete;
};
}  /* namespace prof */
extern "C" {
#  endif

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

/* PROF_FUNC()'s name: where the qualified name lies in a
 * __PRETTY_FUNCTION__ string ("static void ns::Encoder::run(int) const",
 * "ns::Encoder::run()::<lambda()>" from gcc, "auto ns::Encoder::run()::
 * (lambda at f.cpp:3:5)::operator()() const" from clang). The parameter
 * list is the first '(' outside <>, (), [] and {} that follows a name; the
 * name starts after the last space before it at that level; "operator..."
 * names are stepped over whole. Not API. */
#  if __cplusplus >= 201402L
#    define PROF_CONSTEXPR14_ constexpr
#  else
#    define PROF_CONSTEXPR14_ inline
#  endif
struct FuncSpan_ {
    size_t begin, end;
    bool lambda;
};

PROF_CONSTEXPR14_ bool func_name_char_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '>';
}

PROF_CONSTEXPR14_ bool func_starts_(const char *s, size_t n, size_t i, const char *word)
{
    for (; *word != '\0'; word++, i++)
        if (i >= n || s[i] != *word)
            return false;
    return true;
}

PROF_CONSTEXPR14_ FuncSpan_ func_span_(const char *s, size_t n)
{
    FuncSpan_ r = {0, n, false};
    size_t depth = 0, i = 0;

    for (; i < n; i++) {
        char c = s[i];
        if (depth == 0 && func_starts_(s, n, i, "operator") &&
            (i == 0 || !func_name_char_(s[i - 1]))) {
            /* "operator()", "operator<<", "operator new": up to the '(' of
             * the parameter list. */
            i += 8;
            if (func_starts_(s, n, i, "()"))
                i += 2;
            while (i < n && s[i] != '(')
                i++;
            break;
        }
        if (c == '<' || c == '[' || c == '{') {
            depth++;
        } else if (c == '>' || c == ']' || c == '}' || c == ')') {
            if (depth > 0)
                depth--;
        } else if (c == '(') {
            if (depth == 0 && i > r.begin && func_name_char_(s[i - 1]))
                break;
            depth++;    /* "(anonymous namespace)", a function-pointer type */
        } else if (c == ' ' && depth == 0) {
            r.begin = i + 1;
        }
    }
    while (r.begin < i && (s[r.begin] == '*' || s[r.begin] == '&'))
        r.begin++;
    r.end = i;
    for (; i < n; i++)
        if (func_starts_(s, n, i, "::<lambda") || func_starts_(s, n, i, "::(lambda") ||
            func_starts_(s, n, i, "::(anonymous class)"))
            r.lambda = true;
    return r;
}

/* Copies the name out of pretty[0..n) into out (room for n bytes, which
 * always holds the name plus "::lambda": a lambda's pretty name is longer
 * than that). */
PROF_CONSTEXPR14_ void func_name_copy_(char *out, const char *pretty, size_t n)
{
    FuncSpan_ sp = func_span_(pretty, n > 0 ? n - 1 : 0);
    size_t o = 0;

    for (size_t i = sp.begin; i < sp.end && o + 1 < n; i++)
        out[o++] = pretty[i];
    if (sp.lambda)
        for (const char *t = "::lambda"; *t != '\0' && o + 1 < n; t++)
            out[o++] = *t;
    out[o] = '\0';
}

#  if __cplusplus >= 201402L
template <size_t N>
struct FuncName_ {
    char str[N];
    constexpr explicit FuncName_(const char (&pretty)[N]) : str() { func_name_copy_(str, pretty, N); }
};
#  else
inline const char *func_name_intern_(const char *pretty, size_t n)
{
    char buf[512];
    if (n > sizeof buf)
        return prof_intern(pretty);
    func_name_copy_(buf, pretty, n);
    return prof_intern(buf);
}
#  endif
}  /* namespace prof */
extern "C" {
#  define PROF_ZONE(name) PROF_ZONE_AT_(PROF_UNIQUE_(prof_zone_), name)
#  define PROF_ZONE_AT_(var, name) \
    PROF_SITE_(PROF_CONCAT_(var, _site), name); \
    ::prof::Zone var(PROF_SITE_NAME_(PROF_CONCAT_(var, _site), name))
/* C++: the qualified name, "Encoder::run" (namespaces and class template
 * arguments included, return type and parameters left out), taken from
 * __PRETTY_FUNCTION__; a zone in a lambda is "<enclosing function>::lambda".
 * C++14 and later cut the name at compile time into a constant per call
 * site; C++11 cuts it once per call site, on first use (a function-local
 * static), and interns it. The zone itself costs what PROF_ZONE costs. */
#  define PROF_FUNC() PROF_FUNC_AT_(PROF_UNIQUE_(prof_func_))
#  if __cplusplus >= 201402L
#    define PROF_FUNC_AT_(var) \
    static constexpr ::prof::FuncName_<sizeof(__PRETTY_FUNCTION__)> \
        PROF_CONCAT_(var, _name)(__PRETTY_FUNCTION__); \
    PROF_SITE_NAMED_(PROF_CONCAT_(var, _site), PROF_CONCAT_(var, _name).str); \
    ::prof::Zone var(PROF_SITE_PTR_(PROF_CONCAT_(var, _site)))
#  else
#    define PROF_FUNC_AT_(var) \
    static const char *const PROF_CONCAT_(var, _name) = \
        ::prof::func_name_intern_(__PRETTY_FUNCTION__, sizeof(__PRETTY_FUNCTION__)); \
    ::prof::Zone var(PROF_CONCAT_(var, _name))
#  endif
#  define PROF_CUDA_ZONE(name, stream) \
    ::prof::CudaZone PROF_UNIQUE_(prof_cuda_zone_)((name), (void *)(stream))

#else /* C */

/* The zone ends when the enclosing block exits, through the cleanup
 * attribute (gcc, clang). Aligned so that the 32-byte zone never straddles
 * two cache lines of the stack (that alone doubled an off zone's cost). */
#  define PROF_ZONE(name) PROF_ZONE_AT_(PROF_UNIQUE_(prof_zone_), name)
#  define PROF_ZONE_AT_(var, name) \
    PROF_SITE_(PROF_CONCAT_(var, _site), name); \
    prof_zone var __attribute__((cleanup(prof_zone_end_inline_), unused, aligned(32))) = \
        prof_zone_begin_inline_(PROF_SITE_NAME_(PROF_CONCAT_(var, _site), name))
#  define PROF_FUNC() PROF_FUNC_AT_(PROF_UNIQUE_(prof_func_))
#  define PROF_FUNC_AT_(var) \
    PROF_SITE_NAMED_(PROF_CONCAT_(var, _site), __func__); \
    prof_zone var __attribute__((cleanup(prof_zone_end_inline_), unused, aligned(32))) = \
        prof_zone_begin_inline_(PROF_SITE_PTR_(PROF_CONCAT_(var, _site)))
#  define PROF_CUDA_ZONE(name, stream) \
    prof_cuda_zone PROF_UNIQUE_(prof_cuda_zone_) \
        __attribute__((cleanup(prof_cuda_zone_end), unused)) = \
        prof_cuda_zone_begin((name), (void *)(stream))

#endif

#if !defined(PROF_DISABLE)
/* An explicit pair, for zones that do not match a block. The zone variable
 * is declared by PROF_ZONE_BEGIN. */
#  define PROF_ZONE_BEGIN(var, name) \
    PROF_SITE_(PROF_CONCAT_(var, _prof_site_), name); \
    prof_zone var __attribute__((aligned(32))) = \
        prof_zone_begin_inline_(PROF_SITE_NAME_(PROF_CONCAT_(var, _prof_site_), name))
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

/* Zones nest to any depth up to PROF_DEPTH_LIMIT_ (deeper ones are refused
 * and counted); the names of the outermost PROF_MAX_DEPTH_ open zones are
 * kept where the collector can read them, to place the children of zones
 * that have not ended yet. */
#define PROF_MAX_DEPTH_ 64
#define PROF_DEPTH_LIMIT_ 32767u

enum {
    PROF_RECORD_ZONE_ = 0,
    PROF_RECORD_COUNTER_ = 1,  /* end holds the value's bits */
    PROF_RECORD_MARK_ = 2,
    PROF_RECORD_STEP_ = 3,     /* end holds the step number */
    PROF_RECORD_CUDA_ = 4,     /* start holds the pooled event pair */
    /* 5: unused */
    PROF_RECORD_SKIP_ = 6,     /* not a record: the owner wrapped early, and
                                  end slots, this one included, hold nothing */
    PROF_RECORD_GAP_ = 7       /* not a zone: records were dropped (ring
                                  full) just before this one; end holds the
                                  thread's dropped count */
};
/* A zone's record may name, above the kind's low 4 bits, the lane it ran
 * in: an asyncio task (or other context) of its thread, whose zones nest
 * among themselves and interleave with other lanes' (zone.c). 0: the
 * thread's own nesting. */
#define PROF_RECORD_KIND_MASK_ 0xfu
#define PROF_RECORD_LANE_SHIFT_ 4
#define PROF_LANES_MAX_ 4095u

/* 32 bytes: two records per cache line. */
typedef struct prof_record_ {
    uint64_t start;       /* ticks; PROF_RECORD_CUDA_: the pooled event pair */
    uint64_t end;         /* ticks; counters: the value's bits; steps: the step */
    const char *name;
    uint32_t parent;      /* path hash of the enclosing zone */
    uint16_t depth;       /* nesting depth, < PROF_DEPTH_LIMIT_ */
    uint16_t kind;
} prof_record_;

/* prof_thread_::depth, the thread's nesting word: bits 0-14 the level
 * (open zones), bit 15 PROF_DEPTH_REPAIR_, bits 16-31 the generation of
 * the thread's slot. A zone keeps the word's low and high halves in its
 * depth and gen fields, so the close's one compare of the word checks the
 * level and that the slot still holds the thread that began the zone (a
 * slot is reused by later threads with a new generation: registry.h).
 * REPAIR is set while the thread has zones that ended out of order (on
 * this thread or another): every open and close then takes the
 * out-of-line path, which repairs the nesting. The fast path needs no test
 * of its own for it: the flag makes the level compare fail. */
#define PROF_DEPTH_LEVEL_ 0x7fffu
#define PROF_DEPTH_REPAIR_ 0x8000u
#define PROF_DEPTH_GEN_SHIFT_ 16

struct prof_thread_ {
    /* Written by the owning thread, read by the collector. */
    uint64_t head;                 /* next slot to write; release-published */
    uint64_t check_base;           /* a push goes out of line, to look at
                                      tail, once head - check_base > check */
    uint64_t dropped;              /* ring full: records lost */
    uint64_t refused;              /* zones refused: re-entry from a signal
                                      handler mid-push, depth limit */
    prof_record_ *ring;
    uint64_t mask;                 /* capacity - 1; capacity is a power of 2 */
    uint64_t check;                /* see check_base: a quarter of warm, - 1 */
    uint32_t depth;                /* the nesting word: level, REPAIR, gen */
    uint32_t busy;                 /* nonzero while the owner edits the ring */
    uint32_t path;                 /* path hash of the innermost open zone */
    uint32_t foreign;              /* nonzero: another thread ended zones
                                      of ours (zone.c reads which) */
    const char *names[PROF_MAX_DEPTH_];     /* the open zones, outermost first */
    uint64_t warm;                 /* the first slots, used alone while the
                                      collector keeps up (ring.h) */
    uint64_t wake_fill;            /* past this fill, wake the collector: half
                                      of the slots in use, warm or all */
    uint64_t woke_fill;            /* the fill when the owner last woke it,
                                      0 once seen below wake_fill (zone.c) */
    uint64_t skip_end;             /* the last early wrap: head after it, */
    uint64_t skip_len;             /* and the empty slots it skipped */
    uint64_t warm_lap_ns;          /* back to the warm slots only from a lap
                                      at least this long (zone.c) */
    uint64_t lap_head;             /* head and CLOCK_MONOTONIC_COARSE time */
    uint64_t lap_ns;               /* when a push last reached warm's end */
    uint64_t gap_dropped;          /* dropped, as of the last GAP record */
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
PROF_API prof_zone prof_zone_open_slow_(struct prof_thread_ *t, const char *name, uint64_t start);
PROF_API void prof_zone_close_slow_(prof_zone *zone, int raw_ticks);
PROF_API void prof_zone_close_kind_(prof_zone *zone, int raw_ticks, uint32_t kind);
PROF_API void prof_thread_nesting_(uint32_t *depth, uint32_t *dead, int *repair);
PROF_API void prof_zone_resume_(uint32_t depth, uint32_t path);
PROF_API void prof_zone_end_lane_(prof_zone *zone, uint32_t lane);
PROF_API int prof_ring_room_(struct prof_thread_ *t, uint64_t head);
PROF_API int prof_signal_chain_(int sig);   /* sigchain.c: the Python module's worker hook */
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

/* The re-entry guard, the one way into a thread's own ring, nesting or
 * per-thread caches: a signal handler that runs a zone (or a counter, a
 * mark, a CUDA zone) while its thread is inside one of those finds `busy`
 * set and is refused and counted instead of corrupting them. enter returns
 * 0 when the thread is already inside; leave pairs with a successful
 * enter. The compiler fences keep the guarded stores between the two. */
static inline int prof_busy_enter_(struct prof_thread_ *t)
{
    if (t->busy)
        return 0;
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return 1;
}

static inline void prof_busy_leave_(struct prof_thread_ *t)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
}

/* Push one record. That is one compare; every few thousand pushes (and at
 * every push while the ring is full) prof_ring_room_ looks at tail: it
 * wakes the collector past half of the slots in use (once per crossing,
 * without a system call unless it sleeps), wraps early to keep to the
 * warm slots, and drops and counts the record when the ring is full. */
static inline void prof_ring_push_(struct prof_thread_ *t, uint64_t start, uint64_t end,
                                   const char *name, uint32_t parent, uint32_t depth,
                                   uint32_t kind)
{
    uint64_t head = t->head;
    prof_record_ *r;

    if (PROF_UNLIKELY_(head - t->check_base > t->check)) {
        if (!prof_ring_room_(t, head))
            return;
        head = t->head;   /* past the slots it skipped, if it wrapped early */
    }
    r = &t->ring[head & t->mask];
    r->start = start;
    r->end = end;
    r->name = name;
    r->parent = parent;
    r->depth = (uint16_t)depth;
    r->kind = (uint16_t)kind;
    /* Release: the record's fields are visible before the new head. */
    __atomic_store_n(&t->head, head + 1, __ATOMIC_RELEASE);
}

/* Open a zone on the calling thread (recording is known to be on).
 *
 * The clock is read before the level is claimed, and the level before the
 * name and path are set, so a signal handler that runs a zone in the
 * middle of this uses the next level and leaves this zone's alone; its zone
 * lies before this one or inside it, never partly outside (at worst it is
 * placed under a stale parent in the summary tree).
 * The path hash of the enclosing zone travels in the zone itself, so
 * nesting has no fixed limit; a deep zone, or a thread whose nesting needs
 * repair, takes the out-of-line path. */
static inline prof_zone prof_zone_open_(const char *name, int raw_ticks)
{
    prof_zone z = {0, 0, 0, 0, 0, 0};
    struct prof_thread_ *t = prof_thread_self_;
    uint32_t d;
    uint64_t start;

    if (PROF_UNLIKELY_(t == NULL) && (t = prof_thread_attach_()) == NULL)
        return z;
    start = raw_ticks ? prof_ticks_() : prof_ticks_now_();
    /* Atomic loads and stores of depth (plain moves): another thread may
     * set PROF_DEPTH_REPAIR_ in it (zone.c). */
    d = __atomic_load_n(&t->depth, __ATOMIC_RELAXED);
    if (PROF_UNLIKELY_((uint16_t)d >= PROF_MAX_DEPTH_))   /* deep, or REPAIR */
        return prof_zone_open_slow_(t, name, start);
    __atomic_store_n(&t->depth, d + 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    z.name = name;
    z.depth = (uint16_t)d;
    z.gen = (uint16_t)(d >> PROF_DEPTH_GEN_SHIFT_);
    z.parent = t->path;
    /* Release: the collector reads the open-zone stack (and the name it
     * points to) to place children of zones that have not ended yet, and
     * checks what it read against the path hashes in records. */
    __atomic_store_n(&t->names[(uint16_t)d], name, __ATOMIC_RELEASE);
    __atomic_store_n(&t->path, prof_path_mix_(z.parent, name), __ATOMIC_RELAXED);
    z.thread = t;
    z.start = start;
    return z;
}

static inline prof_zone prof_zone_begin_inline_(const char *name)
{
    int on = __atomic_load_n(&prof_on_, __ATOMIC_RELAXED);

    if (PROF_LIKELY_(!on)) {
        prof_zone off = {0, 0, 0, 0, 0, 0};
        return off;
    }
    if (PROF_UNLIKELY_(on & PROF_ON_HOOKS_))
        return prof_zone_begin_hooked_(name);
    return prof_zone_open_(name, 1);
}

/* Close a zone: read the clock, give its level back and push its record.
 *
 * The ownership rule: a zone ends on the thread that began it, as the
 * innermost open zone, outside any push of the same thread. Anything else
 * (an end on another thread, from a signal handler in the middle of a
 * push, out of order, or with repairs pending) goes out of line, where it
 * is refused and counted or repaired, and every refusal gives back exactly
 * the level the begin claimed. The clock is read with `busy` set: a signal
 * handler's zone either ends before that read (inside this zone) or is
 * refused. */
static inline uint32_t prof_zone_word_(const prof_zone *z)
{
    return (uint32_t)z->gen << PROF_DEPTH_GEN_SHIFT_ | z->depth;
}

static inline void prof_zone_close_(prof_zone *z, int raw_ticks)
{
    struct prof_thread_ *t = (struct prof_thread_ *)z->thread;
    uint32_t word = prof_zone_word_(z);
    uint64_t end;

    if (PROF_UNLIKELY_(t != prof_thread_self_ ||
                       __atomic_load_n(&t->depth, __ATOMIC_RELAXED) != word + 1 ||
                       !prof_busy_enter_(t))) {
        prof_zone_close_slow_(z, raw_ticks);
        return;
    }
    end = raw_ticks ? prof_ticks_() : prof_ticks_now_();
    __atomic_store_n(&t->depth, word, __ATOMIC_RELAXED);
    __atomic_store_n(&t->path, z->parent, __ATOMIC_RELAXED);
    prof_ring_push_(t, z->start, end, z->name, z->parent, z->depth, PROF_RECORD_ZONE_);
    prof_busy_leave_(t);
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
    prof_zone_close_(z, 1);
}

#ifdef __cplusplus
}  /* extern "C" */
#  if !defined(PROF_DISABLE)
inline prof::Zone::Zone(const char *name) : zone_(prof_zone_begin_inline_(name)) {}
inline prof::Zone::~Zone() { prof_zone_end_inline_(&zone_); }
#  endif
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
 *   prof_summary_print(), prof_summary_snprint(), prof_window_stats_list(),
 *   prof_ranks_*()                          -ESRCH (snprint and ranks_format
 *                                           write "" when size > 0)
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

static inline int prof_enable_off_(int on) { (void)on; return 0; }
static inline int prof_enabled_off_(void) { return 0; }
static inline prof_zone prof_zone_begin_off_(const char *name)
{
    prof_zone z = {0, 0, 0, 0, 0, 0};
    (void)name;
    return z;
}
static inline void prof_zone_end_off_(prof_zone *zone) { (void)zone; }
static inline void prof_counter_off_(const char *name, double value) { (void)name; (void)value; }
static inline void prof_mark_off_(const char *name) { (void)name; }
static inline uint64_t prof_step_off_(void)
{
    return __atomic_add_fetch(&prof_disabled_steps_, 1, __ATOMIC_RELAXED);
}
static inline int prof_thread_name_off_(const char *name) { return name ? 0 : -EINVAL; }
static inline const char *prof_intern_off_(const char *s) { return s; }
static inline int prof_flush_off_(void) { return -ESRCH; }
static inline int prof_stats_off_(const char *name, prof_stage_stats *out)
{
    (void)name; (void)out;
    return -ESRCH;
}
static inline int prof_stats_list_off_(prof_stage_stats *out, size_t cap)
{
    (void)out; (void)cap;
    return -ESRCH;
}
static inline int prof_counter_stats_get_off_(const char *name, prof_counter_stats *out)
{
    (void)name; (void)out;
    return -ESRCH;
}
static inline int prof_counter_stats_list_off_(prof_counter_stats *out, size_t cap)
{
    (void)out; (void)cap;
    return -ESRCH;
}
static inline int prof_summary_print_off_(FILE *f) { (void)f; return -ESRCH; }
static inline int prof_summary_snprint_off_(char *buf, size_t size, int format)
{
    (void)format;
    if (buf != NULL && size > 0)
        buf[0] = '\0';
    return -ESRCH;
}
static inline int prof_reset_off_(void) { return 0; }
static inline int prof_shutdown_off_(void) { return 0; }
static inline void prof_set_summary_handler_off_(prof_summary_fn fn, void *user)
{
    (void)fn; (void)user;
}
#ifdef PROF_VERSION_STRING
static inline const char *prof_version_off_(void) { return PROF_VERSION_STRING; }
#else
static inline const char *prof_version_off_(void) { return "disabled"; }
#endif
static inline void prof_set_logger_off_(prof_log_fn fn, void *user) { (void)fn; (void)user; }
static inline prof_cuda_zone prof_cuda_zone_begin_off_(const char *name, void *stream)
{
    prof_cuda_zone z = {{0, 0, 0, 0, 0, 0}, 0, 0};
    (void)name; (void)stream;
    return z;
}
static inline void prof_cuda_zone_end_off_(prof_cuda_zone *zone) { (void)zone; }
static inline int prof_window_stats_list_off_(prof_stage_stats *out, size_t cap, uint64_t *end)
{
    (void)out; (void)cap; (void)end;
    return -ESRCH;
}
static inline uint64_t prof_step_count_off_(void)
{
    return __atomic_load_n(&prof_disabled_steps_, __ATOMIC_RELAXED);
}
static inline int prof_ranks_start_off_(uint64_t *every, uint64_t *timeout)
{
    (void)every; (void)timeout;
    return -ESRCH;
}
static inline int prof_ranks_snapshot_off_(void *state, size_t size, int rank)
{
    (void)state; (void)size; (void)rank;
    return -ESRCH;
}
static inline int prof_ranks_snapshot_rows_off_(void *state, size_t size, int rank,
                                                const prof_stage_stats *rows, size_t n,
                                                uint64_t end, uint64_t steps, uint64_t wall)
{
    (void)state; (void)size; (void)rank; (void)rows; (void)n; (void)end; (void)steps;
    (void)wall;
    return -ESRCH;
}
static inline int prof_ranks_contribute_off_(void *state, int round, void *buf, size_t size,
                                             size_t *parts)
{
    (void)state; (void)round; (void)buf; (void)size; (void)parts;
    return -ESRCH;
}
static inline int prof_ranks_combine_off_(void *inout, const void *in, size_t size)
{
    (void)inout; (void)in; (void)size;
    return -ESRCH;
}
static inline int prof_ranks_result_off_(void *state, int round, const void *buf, size_t size)
{
    (void)state; (void)round; (void)buf; (void)size;
    return -ESRCH;
}
static inline int prof_ranks_format_off_(const void *state, int format, char *buf, size_t size)
{
    (void)state; (void)format;
    if (buf != NULL && size > 0)
        buf[0] = '\0';
    return -ESRCH;
}
static inline int prof_ranks_emit_off_(const void *state)
{
    (void)state;
    return -ESRCH;
}
static inline void prof_ranks_abandon_off_(const char *why) { (void)why; }
#  ifdef __cplusplus
}  /* extern "C" */
#  endif

#  define prof_enable(on) prof_enable_off_(on)
#  define prof_enabled() prof_enabled_off_()
#  define prof_zone_begin(name) prof_zone_begin_off_(name)
#  define prof_zone_end(zone) prof_zone_end_off_(zone)
#  define prof_counter(name, value) prof_counter_off_((name), (value))
#  define prof_mark(name) prof_mark_off_(name)
#  define prof_step() prof_step_off_()
#  define prof_thread_name(name) prof_thread_name_off_(name)
#  define prof_intern(s) prof_intern_off_(s)
#  define prof_flush() prof_flush_off_()
#  define prof_stats(name, out) prof_stats_off_((name), (out))
#  define prof_stats_list(out, cap) prof_stats_list_off_((out), (cap))
#  define prof_counter_stats_get(name, out) prof_counter_stats_get_off_((name), (out))
#  define prof_counter_stats_list(out, cap) prof_counter_stats_list_off_((out), (cap))
#  define prof_summary_print(f) prof_summary_print_off_(f)
#  define prof_summary_snprint(buf, size, format) \
    prof_summary_snprint_off_((buf), (size), (format))
#  define prof_reset() prof_reset_off_()
#  define prof_shutdown() prof_shutdown_off_()
#  define prof_set_summary_handler(fn, user) prof_set_summary_handler_off_((fn), (user))
#  define prof_version() prof_version_off_()
#  define prof_set_logger(fn, user) prof_set_logger_off_((fn), (user))
#  define prof_cuda_zone_begin(name, stream) prof_cuda_zone_begin_off_((name), (stream))
#  define prof_cuda_zone_end(zone) prof_cuda_zone_end_off_(zone)
#  define prof_window_stats_list(out, cap, end) prof_window_stats_list_off_((out), (cap), (end))
#  define prof_step_count() prof_step_count_off_()
#  define prof_ranks_start(every, timeout) prof_ranks_start_off_((every), (timeout))
#  define prof_ranks_snapshot(state, size, rank) \
    prof_ranks_snapshot_off_((state), (size), (rank))
#  define prof_ranks_snapshot_rows(state, size, rank, rows, n, end, steps, wall) \
    prof_ranks_snapshot_rows_off_((state), (size), (rank), (rows), (n), (end), (steps), (wall))
#  define prof_ranks_contribute(state, round, buf, size, parts) \
    prof_ranks_contribute_off_((state), (round), (buf), (size), (parts))
#  define prof_ranks_combine(inout, in, size) prof_ranks_combine_off_((inout), (in), (size))
#  define prof_ranks_result(state, round, buf, size) \
    prof_ranks_result_off_((state), (round), (buf), (size))
#  define prof_ranks_format(state, format, buf, size) \
    prof_ranks_format_off_((state), (format), (buf), (size))
#  define prof_ranks_emit(state) prof_ranks_emit_off_(state)
#  define prof_ranks_abandon(why) prof_ranks_abandon_off_(why)
#endif /* PROF_DISABLE */

#endif /* PROF_H */
