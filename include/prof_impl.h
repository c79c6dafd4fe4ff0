/*
 * prof_impl.h - the machinery behind prof.h. NOT API.
 *
 * Nothing here is part of prof's interface: every name it declares ends
 * in '_', and any of them may change or go in any release, patch releases
 * included.
 * Do not include this file: include <prof.h>, which includes it after the
 * API it implements (prof_zone, PROF_API and the calls the inline code
 * uses are declared there first). The manual is prof.h; this is what its
 * macros expand to.
 *
 * It is a header, not a .c file, because a zone must cost two clock reads
 * and a few stores: the thread's state, the ring push and the zone's open
 * and close are inline in the caller. The runtime (src/) includes it
 * through prof.h too, for the layouts it shares with the fast path;
 * src/capture/zone.c and src/capture/ring_room.c hold the out-of-line halves.
 *
 * Compiled out (PROF_DISABLE), prof.h does not include it: prof.h alone is
 * then the whole of prof a program needs.
 *
 * In this file: the call-site records and the macros' helpers; the ring
 * and the thread state; the fast path (ticks, path hash, re-entry guard,
 * push, open, close); C++ only: PROF_FUNC's name cutter and prof::Zone's
 * inline members; last, the per-language bodies of the zone macros.
 */
#ifndef PROF_IMPL_H
#define PROF_IMPL_H

/* Not a header of its own: it needs prof.h's declarations before it. */
#ifndef PROF_H
#  error "prof_impl.h is not API: include <prof.h> instead"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Call sites and the macros' helpers                                        */

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
 * passed as it is and has no site. */
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

/* ------------------------------------------------------------------------ */
/* The ring and the thread state
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
    PROF_RECORD_KZONE_ = 5,    /* PROF_CUDA=kernels: a CUDA zone's begin or end;
                                  start: ticks, end: CUPTI's stream id, bit 32
                                  set at the end (cuda.c, kernels.c) */
    PROF_RECORD_SKIP_ = 6,     /* not a record: the owner wrapped early, and
                                  end slots, this one included, hold nothing */
    PROF_RECORD_GAP_ = 7,      /* not a zone: records were dropped (ring
                                  full) just before this one; end holds the
                                  thread's dropped count */
    PROF_RECORD_CPU_ = 8,      /* an on-CPU sample (src/capture/sampler.c):
                                  start: ticks, end: CPU ns it stands for,
                                  depth: the innermost open zone's */
    PROF_RECORD_PEAK_ = 9      /* right after a CPU sample: the process's
                                  peak resident memory rose; start: ticks,
                                  end: the rise in bytes, depth: as the
                                  sample's */
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
                                      of ours (zone.c reads which); set
                                      by that thread, cleared only by the
                                      owner, tested by every open */
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

/* The runtime's side of the fast path: what the inline code reads, and its
 * out-of-line halves (src/). */
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
PROF_API void prof_lane_shared_(void);   /* a context found every lane in use */
PROF_API int prof_ring_room_(struct prof_thread_ *t, uint64_t head);
PROF_API int prof_signal_chain_(int sig);   /* sigchain.c: the Python module's worker hook */
PROF_API uint64_t prof_clock_fallback_ticks_(void);
PROF_API uint64_t prof_ticks_now_(void);   /* the tick source in use, out of line */

/* ------------------------------------------------------------------------ */
/* The fast path: ticks, path hash, re-entry guard, push, open, close       */

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
     * set PROF_DEPTH_REPAIR_ in it (zone.c). That flag can be lost to
     * this store; `foreign`, which only this thread clears, cannot: a zone
     * of ours that another thread ended before this open sends the open
     * out of line, which gives that zone's level back (registry.c). */
    d = __atomic_load_n(&t->depth, __ATOMIC_RELAXED);
    if (PROF_UNLIKELY_((uint16_t)d >= PROF_MAX_DEPTH_ ||   /* deep, or REPAIR */
                       __atomic_load_n(&t->foreign, __ATOMIC_RELAXED) != 0))
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

/* ------------------------------------------------------------------------ */
/* C++: PROF_FUNC's name cutter, prof::Zone's inline members                 */

namespace prof {
/* PROF_FUNC()'s name: where the qualified name lies in a
 * __PRETTY_FUNCTION__ string ("static void ns::Encoder::run(int) const",
 * "ns::Encoder::run()::<lambda()>" from gcc, "auto ns::Encoder::run()::
 * (lambda at f.cpp:3:5)::operator()() const" from clang). The parameter
 * list is the first '(' outside <>, (), [] and {} that follows a name; the
 * name starts after the last space before it at that level; "operator..."
 * names are stepped over whole. */
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

/* prof::Zone (prof.h) is the fast path in C++: the same inline open and
 * close as a C zone. */
inline prof::Zone::Zone(const char *name) : zone_(prof_zone_begin_inline_(name)) {}
inline prof::Zone::~Zone() { prof_zone_end_inline_(&zone_); }
#endif /* __cplusplus */

/* ------------------------------------------------------------------------ */
/* The zone macros' bodies, per language: prof.h defines PROF_ZONE,
 * PROF_FUNC, PROF_ZONE_BEGIN and PROF_CUDA_ZONE in terms of these, with a
 * variable name made unique per use (PROF_UNIQUE_).                         */

#ifdef __cplusplus
#  define PROF_ZONE_AT_(var, name) \
    PROF_SITE_(PROF_CONCAT_(var, _site), name); \
    ::prof::Zone var(PROF_SITE_NAME_(PROF_CONCAT_(var, _site), name))
/* C++14 and later cut PROF_FUNC's name at compile time into a constant per
 * call site, which then has a site; C++11 cuts it once per call site, on
 * first use (a function-local static), and interns it. */
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
#  define PROF_CUDA_ZONE_AT_(var, name, stream) ::prof::CudaZone var((name), (void *)(stream))

#else /* C */

/* The zone ends when the enclosing block exits, through the cleanup
 * attribute (gcc, clang). Aligned so that the 32-byte zone never straddles
 * two cache lines of the stack (that alone doubled an off zone's cost). */
#  define PROF_ZONE_AT_(var, name) \
    PROF_SITE_(PROF_CONCAT_(var, _site), name); \
    prof_zone var __attribute__((cleanup(prof_zone_end_inline_), unused, aligned(32))) = \
        prof_zone_begin_inline_(PROF_SITE_NAME_(PROF_CONCAT_(var, _site), name))
#  define PROF_FUNC_AT_(var) \
    PROF_SITE_NAMED_(PROF_CONCAT_(var, _site), __func__); \
    prof_zone var __attribute__((cleanup(prof_zone_end_inline_), unused, aligned(32))) = \
        prof_zone_begin_inline_(PROF_SITE_PTR_(PROF_CONCAT_(var, _site)))
#  define PROF_CUDA_ZONE_AT_(var, name, stream) \
    prof_cuda_zone var __attribute__((cleanup(prof_cuda_zone_end), unused)) = \
        prof_cuda_zone_begin((name), (void *)(stream))

#endif

/* Both languages: the explicit pair's variable, a plain prof_zone. */
#define PROF_ZONE_BEGIN_AT_(var, name) \
    PROF_SITE_(PROF_CONCAT_(var, _prof_site_), name); \
    prof_zone var __attribute__((aligned(32))) = \
        prof_zone_begin_inline_(PROF_SITE_NAME_(PROF_CONCAT_(var, _prof_site_), name))

#endif /* PROF_IMPL_H */
