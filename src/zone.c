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
#include <sched.h>
#include <time.h>

#include "prof.h"
#include "registry.h"
#include "wake.h"
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

/* Whether a thread that has run through its cold slots, reaching the end
 * of the warm ones with the collector keeping up, may go back to them:
 * only if it took warm_lap_ns (ring.h) or longer to fill them, or as long
 * for as many records since it last looked. A warm lap rides out a stall
 * of the collector only in the slots the lap has left, so a thread that
 * needed the cold slots once keeps them while it records fast. Called at
 * every look past the warm slots, so that the time is always recent. The
 * coarse clock (a few ms resolution, no system call) is enough to tell a
 * 20 ms lap. */
static int slow_enough_to_wrap(struct prof_thread_ *t, uint64_t head)
{
    struct timespec ts;
    uint64_t now, records = head - t->lap_head, elapsed;

    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    elapsed = now - t->lap_ns;
    t->lap_head = head;
    t->lap_ns = now;
    /* records / elapsed <= warm / warm_lap_ns, without a division by 0
     * (in double: an hour in ns times 32k would overflow 64 bits). */
    return (double)records * (double)t->warm_lap_ns <= (double)elapsed * (double)t->warm;
}

/* The out-of-line half of prof_ring_push_ (prof.h); the ring's layout,
 * warm and cold slots, is in ring.h. Returns 0 when the ring is full (the
 * record is dropped and counted); otherwise the push goes on at t->head,
 * which has moved if the ring wrapped early. */
PROF_API int prof_ring_room_(struct prof_thread_ *t, uint64_t head)
{
    /* Acquire: the collector finished reading the slots it gave back. */
    uint64_t tail = __atomic_load_n(&t->tail, __ATOMIC_ACQUIRE);
    uint64_t fill = head - tail, pos = head & t->mask, step = t->check + 1, next;
    /* The records waiting, without the slots of a SKIP the collector has
     * not reached (they hold nothing to drain; at most one is pending:
     * the next early wrap is a warm lap after it). */
    uint64_t backlog = tail < t->skip_end ? fill - t->skip_len : fill;

    /* Wake the collector once per crossing of the mark, and again if the
     * ring has gained another half of the warm slots since: the
     * collector drains what was there when it looked, then sleeps, so it
     * may sleep with the ring still above the mark. (Waking it again at
     * every look that found it had drained some dropped far more at 10 M
     * zones/s: a collector woken that often ran late.) */
    if (backlog <= t->wake_fill) {
        t->woke_fill = 0;
    } else if (t->woke_fill == 0 || backlog >= t->woke_fill + 2 * step) {
        t->woke_fill = backlog;
        prof_wake_collector();
    }
    /* Full: look again at the next push. The first push after a loss
     * needs a second slot, for the GAP record that marks where the loss
     * was: the collector pairs no zone with children across it. */
    if (fill > t->mask || (t->dropped != t->gap_dropped && fill + 1 > t->mask)) {
        t->check_base = head - step;
        __atomic_store_n(&t->dropped, t->dropped + 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (t->dropped != t->gap_dropped) {
        prof_record_ *r = &t->ring[pos];

        r->start = 0;
        r->end = t->dropped;
        r->name = NULL;
        r->parent = 0;
        r->depth = 0;
        r->kind = PROF_RECORD_GAP_;
        t->gap_dropped = t->dropped;
        head++;
        fill++;
        pos = head & t->mask;
        __atomic_store_n(&t->head, head, __ATOMIC_RELEASE);
    }
    if (pos < t->warm) {
        /* In the warm slots, whatever the lap. */
    } else if (fill > t->warm / 2 || (!slow_enough_to_wrap(t, head) &&
                                      t->wake_fill > t->warm / 2)) {
        /* A lap through all the slots: the collector fell behind, or it
         * did once and the thread is still fast. The collector is woken
         * only at half of them. (Waking it at every quarter of the warm
         * slots instead dropped records at 10 M zones/s on a 2-vCPU VM,
         * where waking it at half of a 128k ring dropped none.) */
        t->wake_fill = (t->mask + 1) / 2;
    } else {
        /* Back to the warm slots. The skipped ones are free (fill <= pos),
         * and the SKIP record and the new head are published together. */
        prof_record_ *r = &t->ring[pos];
        uint64_t skip = t->mask + 1 - pos;

        r->start = 0;
        r->end = skip;
        r->name = NULL;
        r->parent = 0;
        r->depth = 0;
        r->kind = PROF_RECORD_SKIP_;
        head += skip;
        fill += skip;
        pos = 0;
        t->skip_end = head;
        t->skip_len = skip - 1;
        __atomic_store_n(&t->head, head, __ATOMIC_RELEASE);
        t->lap_head = head;
        t->wake_fill = t->warm / 2;
    }
    /* Look again after a quarter of the warm slots, at their end, and
     * before the ring can be full: no push in between can overwrite. */
    next = t->mask + 1 - fill;
    if (next > step)
        next = step;
    if (pos < t->warm && t->warm - pos < next)
        next = t->warm - pos;
    t->check_base = head + next - step;
    return 1;
}
