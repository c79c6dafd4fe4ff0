/* zone.c - the out-of-line half of the zone path: everything the inline
 * fast path (prof_impl.h) hands over when a zone does not end as the innermost
 * open zone of the thread that began it.
 *
 * One rule decides every case: a zone ends on the thread that began it,
 * and a refused zone gives back exactly the level its begin claimed.
 *
 * - Ended on another thread (or after its thread's exit destructor ran):
 *   refused and counted. The zone names its thread's slot and the slot's
 *   generation (registry.h): if the slot still holds that thread, the
 *   level goes into the slot's `foreign` bits, lock-free; the owner moves
 *   them to its dead levels on its own next slow path, so no thread ever
 *   writes another's nesting state.
 * - Ended by a signal handler while the same thread was in the middle of a
 *   push or a repair (`busy`): refused and counted; the handler's zone
 *   gives back its level and path, so the interrupted code finds the
 *   nesting as it left it.
 * - Ended while zones begun inside it are still open (generators, asyncio,
 *   explicit BEGIN/END pairs used out of order): recorded; its level is
 *   marked dead and given back when the zones inside it end. Dead levels
 *   are a bitmap of every level up to PROF_DEPTH_LIMIT_, so any number of
 *   out-of-order ends at any depth leave the nesting exact once the zones
 *   are closed.
 * - Nested deeper than PROF_MAX_DEPTH_: recorded, with exact depth and
 *   path (the enclosing path hash travels in each zone, and the slot keeps
 *   it per level for the repairs); only the open-zone names past that
 *   depth are not kept. Past PROF_DEPTH_LIMIT_ (the record's 16-bit depth)
 *   zones are refused and counted.
 *
 * While a thread has dead levels, PROF_DEPTH_REPAIR_ in its depth word
 * sends its opens and closes here, so the fast path tests nothing extra. */

#include <string.h>

#include "prof.h"
#include "log.h"
#include "registry.h"
#include "zone.h"

uint64_t prof_zones_foreign;
uint64_t prof_lanes_shared;
static int lanes_said;

PROF_API void prof_lane_shared_(void)
{
    __atomic_fetch_add(&prof_lanes_shared, 1, __ATOMIC_RELAXED);
    prof_log_once(&lanes_said, "more than %u asyncio tasks (or other contexts) are open at "
                  "once: the others share their thread's nesting and trace track, where "
                  "their self times and placement may mix (counted in the summary)",
                  PROF_LANES_MAX_);
}

static inline struct prof_thread *slot_of(struct prof_thread_ *t)
{
    return (struct prof_thread *)t;   /* hot is the slot's first member */
}

/* Levels run modulo 32768 (the level bits of the nesting word). */
#define LEVEL_MASK PROF_DEPTH_LEVEL_

static uint32_t level_span(uint32_t top, uint32_t lo)
{
    return (top - lo) & LEVEL_MASK;
}

/* The path hash of the open zones below level d (d in [lo, top]): from the
 * names the opens stored while the levels start at 0, else from the
 * table the slow path keeps. */
static uint32_t path_at(struct prof_thread_ *t, uint32_t d)
{
    struct prof_thread *s = slot_of(t);
    uint32_t h = PROF_PATH_ROOT_;

    if (d == s->lo)
        return s->shifted ? s->lo_path : PROF_PATH_ROOT_;
    if (s->shifted || d > PROF_MAX_DEPTH_)
        return s->levels->inner[(d - 1) & LEVEL_MASK];
    for (uint32_t k = 0; k < d; k++)
        h = prof_path_mix_(h, t->names[k]);
    return h;
}

static int is_dead(const struct prof_thread *s, uint32_t d)
{
    return (s->levels->dead[d / 64] >> (d % 64)) & 1;
}

static void set_dead(struct prof_thread *s, uint32_t d)
{
    if (!is_dead(s, d)) {
        s->levels->dead[d / 64] |= (uint64_t)1 << (d % 64);
        s->dead_count++;
    }
}

static void clear_dead(struct prof_thread *s, uint32_t d)
{
    s->levels->dead[d / 64] &= ~((uint64_t)1 << (d % 64));
    s->dead_count--;
}

/* Levels that other threads ended become dead levels of ours. A level not
 * open any more cannot have been marked (its zone would have had to end
 * twice), but a bit for one is dropped all the same. */
static void take_foreign(struct prof_thread_ *t, uint32_t top)
{
    struct prof_thread *s = slot_of(t);
    uint32_t span = level_span(top, s->lo);

    /* Acquire, on the exchange that clears the flag: a flag read as set
     * makes that ender's bits visible to the reads below; a mark that
     * sets the flag after the exchange is taken on the next slow path,
     * which the flag (tested by every open) forces. */
    if (__atomic_load_n(&t->foreign, __ATOMIC_RELAXED) == 0 ||
        __atomic_exchange_n(&t->foreign, 0, __ATOMIC_SEQ_CST) == 0)
        return;
    for (uint32_t w = 0; w < PROF_LEVEL_WORDS_; w++) {
        uint64_t bits;

        if (__atomic_load_n(&s->levels->foreign[w], __ATOMIC_RELAXED) == 0)
            continue;
        bits = __atomic_exchange_n(&s->levels->foreign[w], 0, __ATOMIC_ACQUIRE);
        for (; bits != 0; bits &= bits - 1) {
            uint32_t d = w * 64 + (uint32_t)__builtin_ctzll(bits);
            if (level_span(d, s->lo) < span)
                set_dead(s, d);
        }
    }
}

/* From top (levels [lo, top) open), give back the levels whose zones have
 * ended: at the top, and at the bottom. Once nothing is open, the levels
 * start at 0 again. Returns the new top. */
static uint32_t settle(struct prof_thread_ *t, uint32_t top)
{
    struct prof_thread *s = slot_of(t);

    while (s->dead_count != 0 && level_span(top, s->lo) > 0 &&
           is_dead(s, (top - 1) & LEVEL_MASK)) {
        top = (top - 1) & LEVEL_MASK;
        clear_dead(s, top);
    }
    while (s->dead_count != 0 && level_span(top, s->lo) > 0 && is_dead(s, s->lo)) {
        if (!s->shifted) {
            /* From now on paths come from the table: fill it for the
             * levels the fast path opened, while the names still hold. */
            uint32_t n = top < PROF_MAX_DEPTH_ ? top : PROF_MAX_DEPTH_, h = PROF_PATH_ROOT_;
            for (uint32_t k = 0; k < n; k++)
                s->levels->inner[k] = h = prof_path_mix_(h, t->names[k]);
            s->lo_path = PROF_PATH_ROOT_;
            s->shifted = 1;
        }
        s->lo_path = s->levels->inner[s->lo];
        clear_dead(s, s->lo);
        s->lo = (s->lo + 1) & LEVEL_MASK;
    }
    if (level_span(top, s->lo) == 0) {
        top = s->lo = 0;
        s->lo_path = PROF_PATH_ROOT_;
        s->shifted = 0;
    }
    return top;
}

static void set_depth(struct prof_thread_ *t, uint32_t d, uint32_t path)
{
    struct prof_thread *s = slot_of(t);
    int repair = s->dead_count != 0 || s->shifted ||
                 __atomic_load_n(&t->foreign, __ATOMIC_RELAXED) != 0;

    uint32_t gen = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & ~(uint32_t)0xffff;

    __atomic_store_n(&t->path, path, __ATOMIC_RELAXED);
    __atomic_store_n(&t->depth, gen | d | (repair ? PROF_DEPTH_REPAIR_ : 0), __ATOMIC_RELAXED);
}

static void count_refused(struct prof_thread_ *t)
{
    __atomic_store_n(&t->refused, t->refused + 1, __ATOMIC_RELAXED);
}

PROF_API prof_zone prof_zone_open_slow_(struct prof_thread_ *t, const char *name, uint64_t start)
{
    struct prof_thread *s = slot_of(t);
    prof_zone z = {0, 0, 0, 0, 0, 0};
    uint32_t was, d, path;

    /* A signal handler's zone that begins while its thread is inside prof
     * (a push, a repair) is refused; so is one that ends then. */
    if (!prof_busy_enter_(t)) {
        count_refused(t);
        return z;
    }
    was = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;
    take_foreign(t, was);
    d = settle(t, was);
    path = d == was ? t->path : path_at(t, d);
    if (level_span(d, s->lo) >= PROF_DEPTH_LIMIT_) {
        count_refused(t);
        set_depth(t, d, path);
    } else {
        z.name = name;
        z.depth = (uint16_t)d;
        z.gen = (uint16_t)(__atomic_load_n(&t->depth, __ATOMIC_RELAXED) >> PROF_DEPTH_GEN_SHIFT_);
        z.parent = path;
        if (d < PROF_MAX_DEPTH_)
            __atomic_store_n(&t->names[d], name, __ATOMIC_RELEASE);
        s->levels->inner[d] = prof_path_mix_(path, name);
        set_depth(t, (d + 1) & LEVEL_MASK, s->levels->inner[d]);
        z.thread = t;
    }
    prof_busy_leave_(t);
    if (z.thread != NULL)
        z.start = start;
    return z;
}

PROF_API void prof_zone_close_slow_(prof_zone *z, int raw_ticks)
{
    prof_zone_close_kind_(z, raw_ticks, PROF_RECORD_ZONE_);
}

/* A zone of a lane (an asyncio task): its caller has made it the thread's
 * innermost zone (prof_zone_resume_), so it closes like any other, and its
 * record names the lane. */
PROF_API void prof_zone_end_lane_(prof_zone *z, uint32_t lane)
{
    uint32_t kind = PROF_RECORD_ZONE_ | (lane <= PROF_LANES_MAX_ ? lane : 0)
                                            << PROF_RECORD_LANE_SHIFT_;

    if (z->start == 0)
        return;
    if ((uintptr_t)z->thread & 1) {
        prof_zone_end_inline_(z);   /* NVTX: the hooks' own close, no lane */
        return;
    }
    prof_zone_close_kind_(z, 1, kind);
}

PROF_API void prof_zone_close_kind_(prof_zone *z, int raw_ticks, uint32_t kind)
{
    struct prof_thread_ *t = (struct prof_thread_ *)z->thread;
    struct prof_thread *s;
    uint32_t cur, span, pos, d = z->depth;
    uint64_t end;

    if (t != prof_thread_self_ ||
        z->gen != (uint16_t)(__atomic_load_n(&t->depth, __ATOMIC_RELAXED) >> PROF_DEPTH_GEN_SHIFT_)) {
        /* Not ours: begun on another thread, or by the thread that held
         * this slot before us. The slot outlives its thread, and the
         * generation says whether it still holds the one that began it. */
        __atomic_fetch_add(&prof_zones_foreign, 1, __ATOMIC_RELAXED);
        prof_registry_mark_foreign(t, z->gen, d);
        z->start = 0;
        return;
    }
    if (!prof_busy_enter_(t)) {
        /* A signal handler's zone, ending inside its thread's own push or
         * repair: give back what its begin claimed, and nothing else. */
        count_refused(t);
        __atomic_store_n(&t->path, z->parent, __ATOMIC_RELAXED);
        __atomic_store_n(&t->depth, prof_zone_word_(z) | (__atomic_load_n(&t->depth,
                                                                          __ATOMIC_RELAXED) &
                                                            PROF_DEPTH_REPAIR_),
                         __ATOMIC_RELAXED);
        z->start = 0;
        return;
    }
    s = slot_of(t);
    end = raw_ticks ? prof_ticks_() : prof_ticks_now_();
    cur = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;
    take_foreign(t, cur);
    cur = settle(t, cur);
    span = level_span(cur, s->lo);
    pos = level_span(d, s->lo);
    if (span > 0 && pos == span - 1) {
        /* Innermost: give the level back, and the levels under it whose
         * zones ended while this one ran. */
        uint32_t nd = settle(t, d);
        set_depth(t, nd, level_span(nd, s->lo) == 0 ? PROF_PATH_ROOT_
                         : nd == d                ? z->parent
                                                  : path_at(t, nd));
    } else if (pos < span) {
        /* Zones begun inside this one are still open: the level stays
         * taken until they end. */
        set_dead(s, d);
        set_depth(t, cur, t->path);
    } else {
        /* The level was given back already (an enclosing zone ended and
         * nothing was open inside it any more): nothing to give. */
        set_depth(t, cur, t->path);
    }
    prof_ring_push_(t, z->start, end, z->name, z->parent, d, kind);
    prof_busy_leave_(t);
    z->start = 0;
}

/* Python's zones nest by task (python/prof/_prof_zone_stack.c): a task that
 * resumes takes up its own nesting, whatever zones other tasks left open
 * on the thread. Their levels are the other tasks' to give back when
 * their zones end (each end first resumes its own task's nesting), so the
 * dead levels above the new top are forgotten. */
PROF_API void prof_zone_resume_(uint32_t depth, uint32_t path)
{
    struct prof_thread_ *t = prof_thread_self_;
    struct prof_thread *s;
    uint32_t top;

    if (t == NULL || depth >= PROF_DEPTH_LIMIT_)
        return;
    s = slot_of(t);
    if (!prof_busy_enter_(t))
        return;
    top = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;
    take_foreign(t, top);
    if (s->shifted) {
        memset(s->levels->dead, 0, sizeof s->levels->dead);
        s->dead_count = 0;
        s->lo = 0;
        s->lo_path = PROF_PATH_ROOT_;
        s->shifted = 0;
    } else {
        for (uint32_t d = depth; s->dead_count != 0 && d < top; d++)
            if (is_dead(s, d))
                clear_dead(s, d);
    }
    set_depth(t, depth, path);
    prof_busy_leave_(t);
}

/* For tests and the Python binding's debug view: the calling thread's
 * depth, its dead levels, and whether a repair is pending. */
PROF_API void prof_thread_nesting_(uint32_t *depth, uint32_t *dead, int *repair)
{
    struct prof_thread_ *t = prof_thread_self_;
    uint32_t w = t != NULL ? __atomic_load_n(&t->depth, __ATOMIC_RELAXED) : 0;

    *depth = w & PROF_DEPTH_LEVEL_;
    *dead = t != NULL ? slot_of(t)->dead_count : 0;
    *repair = (w & PROF_DEPTH_REPAIR_) != 0 ||
              (t != NULL && __atomic_load_n(&t->foreign, __ATOMIC_RELAXED) != 0);
}

/* The out-of-line copies of the inline fast path, for FFI (Cython, ctypes)
 * and for the parts of the runtime that begin zones of their own (cuda.c).
 * Here rather than in the API files, so that those parts call nothing the API
 * defines. (With PROF_ON_HOOKS_ set, the inline path they copy still goes
 * on to api.c's hooked variant, as it does from any caller of prof.h.) */
PROF_API prof_zone prof_zone_begin(const char *name)
{
    return prof_zone_begin_inline_(name);
}

PROF_API void prof_zone_end(prof_zone *zone)
{
    if (zone != NULL)
        prof_zone_end_inline_(zone);
}
