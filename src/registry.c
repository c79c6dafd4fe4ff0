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
 * the API layer (lib.c), which sits above the registry, so the registry
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
    t = mmap(NULL, state_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        goto oom;
    t->hot.ring = mmap(NULL, cap * sizeof(prof_record_), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->hot.ring == MAP_FAILED) {
        munmap(t, state_size());
        goto oom;
    }
    prof_ring_init(&t->hot, t->hot.ring, cap, warm);
    prof_populate(t->hot.ring, t->hot.warm * sizeof(prof_record_));
    t->hot.path = PROF_PATH_ROOT_;
    t->name = pending_name;
    t->tid = (uint32_t)syscall(SYS_gettid);
    if (key_ok)
        pthread_setspecific(exit_key, t);
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

void prof_registry_mark_foreign(struct prof_thread_ *owner, uint32_t depth, const char *name)
{
    struct prof_thread *t;
    int tries;

    /* The lock keeps owner from being freed while we look. trylock: this
     * may run in a signal handler that interrupted the lock's holder. */
    for (tries = 0; pthread_mutex_trylock(&prof_rt.lock) != 0; tries++)
        if (tries == 1000)
            return;
    prof_registry_splice_locked();
    for (t = prof_threads; t != NULL; t = t->next) {
        if (&t->hot != owner)
            continue;
        /* Only while the zone still holds that level on its thread. */
        if (!__atomic_load_n(&t->exited, __ATOMIC_ACQUIRE) &&
            (__atomic_load_n(&t->hot.depth, __ATOMIC_RELAXED) & ~PROF_DEPTH_REPAIR_) > depth &&
            __atomic_load_n(&t->hot.names[depth], __ATOMIC_ACQUIRE) == name)
        {
            __atomic_fetch_or(&t->hot.foreign, (uint64_t)1 << depth, __ATOMIC_RELEASE);
            /* Send the owner's next open or close out of line, where it
             * reads foreign. Lost only if the owner stores its depth in
             * the same instant; foreign is then read on a later slow path
             * (at the latest when an enclosing zone ends). */
            __atomic_fetch_or(&t->hot.depth, PROF_DEPTH_REPAIR_, __ATOMIC_RELAXED);
        }
        break;
    }
    pthread_mutex_unlock(&prof_rt.lock);
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
    if (t == NULL)
        return;
    munmap(t->hot.ring, (t->hot.mask + 1) * sizeof(prof_record_));
    if (t->child != NULL)
        munmap(t->child, t->child_cap * sizeof *t->child);
    munmap(t, state_size());
}

void prof_registry_atfork_child(void)
{
    struct prof_thread *self = (struct prof_thread *)prof_thread_self_;
    struct prof_thread *t, *next;

    prof_registry_splice_locked();
    for (t = prof_threads; t != NULL; t = next) {
        next = t->next;
        if (t != self)
            prof_thread_free(t);
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
    self->dropped_seen = self->refused_seen = 0;
    self->traced_name = NULL;
    if (self->child != NULL)
        memset(self->child, 0, self->child_cap * sizeof *self->child);   /* still mapped */
    memset(self->trace_first, 0, sizeof self->trace_first);
    self->trace_depth = 0;
}
