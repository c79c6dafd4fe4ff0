/* registry.c - attaching threads to the runtime and letting them go.
 *
 * A thread attaches on its first zone (the only time the fast path
 * allocates): its state and ring are allocated, linked into the registry
 * under the runtime lock, and a pthread key destructor is set so that when
 * the thread exits its state is marked exited. The collector drains an
 * exited thread's ring one last time and frees it; the exiting thread never
 * waits for that. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof.h"
#include "env.h"
#include "log.h"
#include "registry.h"
#include "ring.h"
#include "runtime.h"
#include "sampler.h"
#include "slab.h"

PROF_API __thread struct prof_thread_ *prof_thread_self_ __attribute__((tls_model("initial-exec")));

/* 0 idle; 1 while this thread is attaching: an instrumented allocator (or
 * a signal handler) that re-enters a zone gets a no-op zone instead of
 * recursing; 2 after a failure, so later zones give up at once; 3 after
 * the thread's exit destructor ran: zones in destructors that run later
 * record nothing rather than register the thread a second time. In 1-3
 * every record is counted in prof_records_unattached. */
static __thread int attach_state __attribute__((tls_model("initial-exec")));

/* A name given by prof_thread_name() before this thread attached. */
static __thread const char *pending_name __attribute__((tls_model("initial-exec")));

struct prof_thread *prof_threads;
uint64_t prof_threads_seen;
uint64_t prof_records_unattached;

/* Threads that attached since the collector last looked: pushed without a
 * lock (so that attaching takes no lock an interrupted thread could hold),
 * moved into prof_threads under the runtime lock. */
static struct prof_thread *incoming;

/* What gets the runtime running before a thread attaches: installed by
 * the API layer (api.c), which sits above the registry, so the registry
 * never calls up into it. NULL until then: no thread attaches. */
static int (*start_hook)(void);

static pthread_key_t exit_key;
static int key_ok;
static int oom_logged;

static void thread_exited(void *p)
{
    struct prof_thread *t = p;

    prof_thread_self_ = NULL;
    attach_state = 3;
    prof_sampler_thread_stop(t);
    /* Release: every record this thread pushed is visible to a collector
     * that sees exited == 1. */
    __atomic_store_n(&t->exited, 1, __ATOMIC_RELEASE);
}

void prof_registry_init(void)
{
    if (!key_ok)
        key_ok = pthread_key_create(&exit_key, thread_exited) == 0;
}

void prof_registry_splice_locked(void)
{
    struct prof_thread *t = __atomic_exchange_n(&incoming, NULL, __ATOMIC_ACQUIRE);

    /* incoming is newest first; keep the registry newest first too. */
    while (t != NULL) {
        struct prof_thread *next = t->next;
        t->index = (uint32_t)prof_threads_seen++;
        t->next = prof_threads;
        prof_threads = t;
        t = next;
    }
}

static size_t state_size(void)
{
    return (sizeof(struct prof_thread) + 4095) & ~(size_t)4095;
}

/* Free slots (registry.h): a stack whose head word is the slot's address
 * with a 28-bit tag, advanced at every push and pop, so that a pop that
 * read a stale `free_next` fails its compare instead of taking a slot in
 * use. The tag lives where the address has no bits: the low 12 (slots are
 * page-aligned) and the high 16 (user addresses lie below 2^48 on x86-64
 * and arm64 unless a mapping asks for more, which prof's never do; a slot
 * that lay higher would be retired, not listed).
 *
 * Why 28 bits suffice: a pop goes wrong only if, between its read of the
 * head and its compare, the head comes back to the same slot with the
 * same tag, that is after exactly a multiple of 2^28 pushes and pops. A
 * push is a thread's exit handled by the collector, a pop a thread's
 * start: 268 million thread lifetimes (over half an hour of nothing but
 * creating threads, at some 10 us each) while one attaching thread sits
 * between two instructions. 12 bits would be 4,096 lifetimes, a few tens
 * of milliseconds of a thread pool's churn.
 *
 * Pushed by the collector, popped by attaching threads, no lock: a slot
 * is never unmapped, so reading the `free_next` of a slot another thread
 * has just taken is harmless. */
#define SLOT_TAG_LOW 0xfffu
#define SLOT_TAG_BITS 28
#define SLOT_ADDR_TOP ((uint64_t)1 << 48)
#define SLOT_ADDR_MASK ((SLOT_ADDR_TOP - 1) & ~(uint64_t)SLOT_TAG_LOW)
static uint64_t free_slots;

/* The head word after h with t on top: t's address, h's tag plus one. */
static uint64_t slot_head(const struct prof_thread *t, uint64_t h)
{
    uint64_t tag = ((h & SLOT_TAG_LOW) | (h >> 48) << 12) + 1;

    tag &= ((uint64_t)1 << SLOT_TAG_BITS) - 1;
    return (uint64_t)(uintptr_t)t | (tag & SLOT_TAG_LOW) | (tag >> 12) << 48;
}

static struct prof_thread *slot_at(uint64_t h)
{
    return (struct prof_thread *)(uintptr_t)(h & SLOT_ADDR_MASK);
}

static struct prof_thread *slot_take(void)
{
    uint64_t h = __atomic_load_n(&free_slots, __ATOMIC_ACQUIRE);

    for (;;) {
        struct prof_thread *t = slot_at(h);
        uint64_t next;

        if (t == NULL)
            return NULL;
        next = slot_head(__atomic_load_n(&t->free_next, __ATOMIC_RELAXED), h);
        if (__atomic_compare_exchange_n(&free_slots, &h, next, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_ACQUIRE))
            return t;
    }
}

static void slot_give(struct prof_thread *t)
{
    uint64_t h = __atomic_load_n(&free_slots, __ATOMIC_RELAXED), next;

    do {
        __atomic_store_n(&t->free_next, slot_at(h), __ATOMIC_RELAXED);
        next = slot_head(t, h);
    } while (!__atomic_compare_exchange_n(&free_slots, &h, next, 0, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

uint64_t prof_slots_retired;

/* A slot whose generations are spent (or that the head word cannot hold)
 * is never handed out again: a zone of any of its past threads could
 * otherwise match a later one (registry.h). It keeps its page, so that
 * such a zone's end still reads a slot, which refuses it (the generation
 * differs, and `exited` stays set); what only a live thread uses goes
 * back to the system. */
static void slot_retire(struct prof_thread *t)
{
    if (t->levels != NULL)
        munmap(t->levels, sizeof *t->levels);
    t->levels = NULL;
    __atomic_fetch_add(&prof_slots_retired, 1, __ATOMIC_RELAXED);
}

/* A slot for a new thread: a freed one, cleared but for what it keeps
 * (its generation, its level tables), or a new mapping. */
static struct prof_thread *slot_new(void)
{
    struct prof_thread *t = slot_take();

    if (t != NULL) {
        /* Cleared but for the words other threads may still touch, which
         * keep their values, written only atomically: the nesting word and
         * enders (a late end from the slot's previous thread reads the one
         * and counts itself in and out of the other), and free_next (a pop
         * that lost the race to this one read it). free_next and enders
         * are neighbours (registry.h). */
        const size_t depth_at = offsetof(struct prof_thread, hot.depth);
        const size_t kept_at = offsetof(struct prof_thread, free_next);
        const size_t kept_end = offsetof(struct prof_thread, enders) + sizeof t->enders;
        uint32_t gen = __atomic_load_n(&t->hot.depth, __ATOMIC_RELAXED) & ~(uint32_t)0xffff;
        struct prof_levels *levels = t->levels;
        char *p = (char *)t;

        _Static_assert(offsetof(struct prof_thread, hot.depth) <
                           offsetof(struct prof_thread, free_next), "layout");
        _Static_assert(offsetof(struct prof_thread, enders) ==
                           offsetof(struct prof_thread, free_next) + sizeof(void *),
                       "free_next, enders");
        memset(p, 0, depth_at);
        memset(p + depth_at + sizeof t->hot.depth, 0, kept_at - depth_at - sizeof t->hot.depth);
        memset(p + kept_end, 0, sizeof *t - kept_end);
        __atomic_store_n(&t->hot.depth, gen, __ATOMIC_RELAXED);
        t->levels = levels;
        return t;
    }
    t = mmap(NULL, state_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return NULL;
    /* Up to PROF_DEPTH_LIMIT_ levels, about 280 KB of address space: only
     * the pages a thread nests or repairs into become resident. */
    t->levels = mmap(NULL, sizeof *t->levels, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->levels == MAP_FAILED) {
        munmap(t, state_size());
        return NULL;
    }
    t->hot.depth = 1u << PROF_DEPTH_GEN_SHIFT_;
    return t;
}

void prof_registry_set_start(int (*start)(void))
{
    __atomic_store_n(&start_hook, start, __ATOMIC_RELEASE);
}

PROF_API struct prof_thread_ *prof_thread_attach_(void)
{
    struct prof_thread *t;
    int (*start)(void);
    uint64_t cap, warm;

    if (attach_state != 0) {
        __atomic_fetch_add(&prof_records_unattached, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    attach_state = 1;
    /* Acquire: pairs with the release in prof_registry_set_start. */
    start = __atomic_load_n(&start_hook, __ATOMIC_ACQUIRE);
    if (start == NULL || start() != 0)
        goto fail;
    cap = prof_config_get()->buffer;
    warm = prof_config_get()->buffer_warm;
    /* Mapped, not malloc'd: attaching may happen on a thread's first zone
     * inside a signal handler, so it uses no allocator and takes no lock.
     * The warm slots (ring.h) are populated now, so that no zone takes a
     * page fault while the collector keeps up and resident memory does
     * not creep up during the first lap; the cold ones only when a burst
     * reaches them. All of it goes back to the system when the thread's
     * state is freed. */
    t = slot_new();
    if (t == NULL)
        goto oom;
    t->hot.ring = mmap(NULL, cap * sizeof(prof_record_), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->hot.ring == MAP_FAILED) {
        t->hot.ring = NULL;
        slot_give(t);
        goto oom;
    }
    prof_ring_init(&t->hot, t->hot.ring, cap, warm);
    prof_populate(t->hot.ring, t->hot.warm * sizeof(prof_record_));
    t->hot.path = PROF_PATH_ROOT_;
    t->name = pending_name;
    t->tid = (uint32_t)syscall(SYS_gettid);
    if (key_ok)
        pthread_setspecific(exit_key, t);
    prof_sampler_thread_start(t);
    prof_thread_self_ = &t->hot;
    /* Release: the collector that takes t from incoming sees it whole. */
    t->next = __atomic_load_n(&incoming, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&incoming, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    attach_state = 0;
    return &t->hot;
oom:
    prof_log_once(&oom_logged, "out of memory for a thread's ring (PROF_BUFFER=%llu records); "
                  "that thread's zones are not recorded (counted as dropped)",
                  (unsigned long long)cap);
    attach_state = 2;
    __atomic_fetch_add(&prof_records_unattached, 1, __ATOMIC_RELAXED);
    return NULL;
fail:
    attach_state = 0;   /* not started (or not yet, in a forked child): try again later */
    return NULL;
}

void prof_registry_mark_foreign(struct prof_thread_ *owner, uint32_t gen, uint32_t depth)
{
    struct prof_thread *t = (struct prof_thread *)owner;

    if (t == NULL || depth > PROF_DEPTH_LEVEL_)
        return;
    /* While enders is nonzero the slot is not given to another thread
     * (prof_thread_free advances the generation first, then waits for
     * enders to drain): so either we see the new generation, or the slot
     * still holds the thread we compare against until we are done. */
    __atomic_add_fetch(&t->enders, 1, __ATOMIC_SEQ_CST);
    if ((uint16_t)(__atomic_load_n(&owner->depth, __ATOMIC_SEQ_CST) >> PROF_DEPTH_GEN_SHIFT_) ==
            (uint16_t)gen &&
        !__atomic_load_n(&t->exited, __ATOMIC_ACQUIRE)) {
        /* The bit before the flag, both seq_cst: the owner that clears
         * the flag and reads it set sees the bit (zone.c's take_foreign). */
        __atomic_fetch_or(&t->levels->foreign[depth / 64], (uint64_t)1 << (depth % 64),
                          __ATOMIC_SEQ_CST);
        /* The flag is what makes this end take effect: the owner's every
         * open tests it (prof_impl.h), and only the owner clears it, so
         * once this end has returned, the owner's next zone opens out of
         * line, gives the level back and opens at its own level. */
        __atomic_store_n(&owner->foreign, 1, __ATOMIC_SEQ_CST);
        /* A hint: sends the owner's next close out of line too. The
         * owner's own stores of its depth may overwrite it (they are not
         * read-modify-writes, to keep the fast path cheap), so nothing
         * relies on it; the collector sets it again meanwhile
         * (prof_registry_repair_pending). */
        __atomic_fetch_or(&owner->depth, PROF_DEPTH_REPAIR_, __ATOMIC_RELAXED);
    }
    __atomic_sub_fetch(&t->enders, 1, __ATOMIC_SEQ_CST);
}

void prof_registry_repair_pending(struct prof_thread *t)
{
    if (__atomic_load_n(&t->hot.foreign, __ATOMIC_ACQUIRE) != 0 &&
        !(__atomic_load_n(&t->hot.depth, __ATOMIC_RELAXED) & PROF_DEPTH_REPAIR_))
        __atomic_fetch_or(&t->hot.depth, PROF_DEPTH_REPAIR_, __ATOMIC_RELAXED);
}

int prof_thread_set_name(const char *interned)
{
    struct prof_thread *t = (struct prof_thread *)prof_thread_self_;

    if (t == NULL)
        pending_name = interned;   /* applied when the thread attaches */
    else
        __atomic_store_n(&t->name, interned, __ATOMIC_RELAXED);
    return 0;
}

void prof_thread_free(struct prof_thread *t)
{
    uint32_t word;

    if (t == NULL)
        return;
    /* The new generation first: an end from another thread that has not
     * yet compared it now fails the compare; one that has is waited for. */
    word = __atomic_add_fetch(&t->hot.depth, 1u << PROF_DEPTH_GEN_SHIFT_, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&t->enders, __ATOMIC_SEQ_CST) != 0)
        sched_yield();
    if (t->hot.ring != NULL)
        munmap(t->hot.ring, (t->hot.mask + 1) * sizeof(prof_record_));
    t->hot.ring = NULL;
    if (t->dead_count != 0 || t->hot.foreign != 0) {
        memset(t->levels->dead, 0, sizeof t->levels->dead);
        memset(t->levels->foreign, 0, sizeof t->levels->foreign);
    }
    /* Generations run from 1 to 0xffff: past the last, the slot retires
     * rather than come back to a generation its past threads' zones
     * still hold (1 slot per 65,535 thread lifetimes). 0 is never a live
     * generation. */
    if (word >> PROF_DEPTH_GEN_SHIFT_ == 0 || (uint64_t)(uintptr_t)t >= SLOT_ADDR_TOP) {
        slot_retire(t);
        return;
    }
    slot_give(t);
}

void prof_registry_atfork_child(void)
{
    struct prof_thread *self = (struct prof_thread *)prof_thread_self_;
    struct prof_thread *t, *next;

    prof_registry_splice_locked();
    for (t = prof_threads; t != NULL; t = next) {
        next = t->next;
        if (t != self) {
            t->enders = 0;   /* an end in the parent's other threads, cut off */
            prof_thread_free(t);
        }
    }
    prof_threads = self;
    prof_threads_seen = self != NULL;
    if (self == NULL)
        return;
    self->next = NULL;
    self->index = 0;
    self->tid = (uint32_t)syscall(SYS_gettid);
    /* The records still in the ring are the parent's, counted there. */
    self->hot.tail = self->hot.head;
    prof_ring_look_again(&self->hot);
    self->hot.dropped = self->hot.refused = self->hot.gap_dropped = 0;
    prof_sampler_atfork_child(self);
    /* Its side state is its owners' to reset (prof_drain_atfork_child,
     * prof_loss_atfork_child, prof_trace_forget_parent). */
}
