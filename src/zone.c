/* zone.c - the out-of-line half of the zone path: everything the inline
 * fast path in prof.h hands over when a zone does not end as the innermost
 * open zone of the thread that began it.
 *
 * One rule decides every case: a zone ends on the thread that began it,
 * and a refused zone gives back exactly the level its begin claimed.
 *
 * - Ended on another thread (or after its thread's exit destructor ran):
 *   refused and counted. The beginning thread is told, through its
 *   `foreign` word, that the level is free; it reads the word on its own
 *   next slow path, so no thread ever writes another's nesting state.
 * - Ended by a signal handler while the same thread was in the middle of a
 *   push or a repair (`busy`): refused and counted; the handler's zone
 *   gives back its level and path, so the interrupted code finds the
 *   nesting as it left it.
 * - Ended while zones begun inside it are still open (generators, asyncio,
 *   explicit BEGIN/END pairs used out of order): recorded; its level is
 *   marked dead and given back when the zones inside it end.
 * - Nested deeper than PROF_MAX_DEPTH_: recorded, with exact depth and
 *   path (the enclosing path hash travels in each zone); only the open-zone
 *   names past that depth are not kept. Past PROF_DEPTH_LIMIT_ (the
 *   record's 16-bit depth) zones are refused and counted.
 *
 * While a thread has dead levels, PROF_DEPTH_REPAIR_ in its depth word
 * sends its opens and closes here, so the fast path tests nothing extra. */

#include "prof.h"
#include "registry.h"
#include "zone.h"

uint64_t prof_zones_foreign;

static inline uint64_t below(uint32_t d)
{
    return d >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << d) - 1;
}

/* The path hash of the open zones at levels [0, d), d <= PROF_MAX_DEPTH_,
 * from the names the opens stored. */
static uint32_t path_at(const struct prof_thread_ *t, uint32_t d)
{
    uint32_t h = PROF_PATH_ROOT_;

    for (uint32_t k = 0; k < d; k++)
        h = prof_path_mix_(h, t->names[k]);
    return h;
}

/* Levels that other threads ended become dead levels of ours. */
static void take_foreign(struct prof_thread_ *t)
{
    if (__atomic_load_n(&t->foreign, __ATOMIC_RELAXED) != 0)
        t->dead |= __atomic_exchange_n(&t->foreign, 0, __ATOMIC_ACQUIRE);
}

/* From depth d (levels [0, d) open), fall through the levels at the top
 * whose zones have already ended. */
static uint32_t settle(struct prof_thread_ *t, uint32_t d)
{
    while (d > 0 && d <= 64 && (t->dead & ((uint64_t)1 << (d - 1))))
        d--;
    t->dead &= below(d);
    return d;
}

static void set_depth(struct prof_thread_ *t, uint32_t d, uint32_t path)
{
    __atomic_store_n(&t->path, path, __ATOMIC_RELAXED);
    int repair = t->dead != 0 || __atomic_load_n(&t->foreign, __ATOMIC_RELAXED) != 0;

    __atomic_store_n(&t->depth, d | (repair ? PROF_DEPTH_REPAIR_ : 0), __ATOMIC_RELAXED);
}

static void count_refused(struct prof_thread_ *t)
{
    __atomic_store_n(&t->refused, t->refused + 1, __ATOMIC_RELAXED);
}

PROF_API prof_zone prof_zone_open_slow_(struct prof_thread_ *t, const char *name, uint64_t start)
{
    prof_zone z = {0, 0, 0, 0, 0};
    uint32_t was, d, path;

    /* busy: a signal handler's zone that ends while we repair is refused
     * (its open, like this one, only claims the next level). */
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    take_foreign(t);
    was = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & ~PROF_DEPTH_REPAIR_;
    d = settle(t, was);
    path = d == was ? t->path : path_at(t, d);
    if (d >= PROF_DEPTH_LIMIT_) {
        count_refused(t);
        set_depth(t, d, path);
    } else {
        z.name = name;
        z.depth = d;
        z.parent = path;
        if (d < PROF_MAX_DEPTH_)
            __atomic_store_n(&t->names[d], name, __ATOMIC_RELEASE);
        set_depth(t, d + 1, prof_path_mix_(path, name));
        z.thread = t;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
    if (z.thread != NULL)
        z.start = start;
    return z;
}

PROF_API void prof_zone_close_slow_(prof_zone *z, int raw_ticks)
{
    struct prof_thread_ *t = (struct prof_thread_ *)z->thread;
    uint32_t cur, d = z->depth;
    uint64_t end;

    if (t != prof_thread_self_) {
        /* Not ours: t may have exited and been freed, so it is only
         * touched through the registry, which knows whether it lives. */
        __atomic_fetch_add(&prof_zones_foreign, 1, __ATOMIC_RELAXED);
        if (d < PROF_MAX_DEPTH_)
            prof_registry_mark_foreign(t, d, z->name);
        z->start = 0;
        return;
    }
    if (t->busy) {
        /* A signal handler's zone, ending inside its thread's own push or
         * repair: give back what its begin claimed, and nothing else. */
        count_refused(t);
        __atomic_store_n(&t->path, z->parent, __ATOMIC_RELAXED);
        __atomic_store_n(&t->depth, d | (__atomic_load_n(&t->depth, __ATOMIC_RELAXED) &
                                         PROF_DEPTH_REPAIR_), __ATOMIC_RELAXED);
        z->start = 0;
        return;
    }
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    end = raw_ticks ? prof_ticks_() : prof_ticks_now_();
    take_foreign(t);
    cur = settle(t, __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & ~PROF_DEPTH_REPAIR_);
    if (cur == d + 1) {
        /* Innermost: give the level back, and the levels under it whose
         * zones ended while this one ran. */
        uint32_t nd = settle(t, d);
        set_depth(t, nd, nd == d ? z->parent : path_at(t, nd));
    } else if (cur > d + 1) {
        /* Zones begun inside this one are still open: the level stays
         * taken until they end. */
        if (d < PROF_MAX_DEPTH_)
            t->dead |= (uint64_t)1 << d;
        set_depth(t, cur, t->path);
    } else {
        /* The level was given back already (an enclosing zone ended and
         * nothing was open inside it any more): nothing to give. */
        set_depth(t, cur, t->path);
    }
    prof_ring_push_(t, z->start, end, z->name, z->parent, d, PROF_RECORD_ZONE_);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
    z->start = 0;
}

/* The out-of-line copies of the inline fast path, for FFI (Cython, ctypes)
 * and for the parts of the runtime that begin zones of their own (cuda.c).
 * Here rather than in lib.c, so that those parts call nothing lib.c
 * defines. (With PROF_ON_HOOKS_ set, the inline path they copy still goes
 * on to lib.c's hooked variant, as it does from any caller of prof.h.) */
PROF_API prof_zone prof_zone_begin(const char *name)
{
    return prof_zone_begin_inline_(name);
}

PROF_API void prof_zone_end(prof_zone *zone)
{
    if (zone != NULL)
        prof_zone_end_inline_(zone);
}
