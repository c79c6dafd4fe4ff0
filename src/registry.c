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
#include "runtime.h"

PROF_API __thread struct prof_thread_ *prof_thread_self_ __attribute__((tls_model("initial-exec")));

/* 0 idle; 1 while this thread is attaching: an instrumented allocator (or
 * a signal handler) that re-enters a zone gets a no-op zone instead of
 * recursing; 2 after a failure, so later zones give up at once. */
static __thread int attach_state __attribute__((tls_model("initial-exec")));

/* A name given by prof_thread_name() before this thread attached. */
static __thread const char *pending_name __attribute__((tls_model("initial-exec")));

struct prof_thread *prof_threads;
uint64_t prof_threads_seen;

static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;
static int oom_logged;

static void thread_exited(void *p)
{
    struct prof_thread *t = p;

    prof_thread_self_ = NULL;
    /* Release: every record this thread pushed is visible to a collector
     * that sees exited == 1. */
    __atomic_store_n(&t->exited, 1, __ATOMIC_RELEASE);
}

static void make_key(void)
{
    key_ok = pthread_key_create(&exit_key, thread_exited) == 0;
}

PROF_API struct prof_thread_ *prof_thread_attach_(void)
{
    struct prof_thread *t;
    uint64_t cap;

    if (attach_state != 0)
        return NULL;
    attach_state = 1;
    if (prof_runtime_start() != 0)
        goto fail;
    pthread_once(&key_once, make_key);
    cap = prof_config_get()->buffer;
    t = aligned_alloc(64, (sizeof *t + 63) & ~(size_t)63);
    if (t == NULL)
        goto oom;
    memset(t, 0, sizeof *t);
    /* The ring is mapped, not malloc'd, so that it goes back to the system
     * when the thread's state is freed (glibc would keep a freed megabyte in
     * its pools and clear it again for the next thread). It is populated
     * now, on the thread's first zone, so that no later zone takes a page
     * fault and resident memory does not creep up during the first lap. */
    t->hot.ring = mmap(NULL, cap * sizeof(prof_record_), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (t->hot.ring == MAP_FAILED) {
        free(t);
        goto oom;
    }
    t->hot.mask = cap - 1;
    t->name = pending_name;
    t->hot.path[0] = PROF_PATH_ROOT_;
    t->tid = (uint32_t)syscall(SYS_gettid);

    pthread_mutex_lock(&prof_rt.lock);
    t->index = (uint32_t)prof_threads_seen++;
    t->next = prof_threads;
    prof_threads = t;
    pthread_mutex_unlock(&prof_rt.lock);

    if (key_ok)
        pthread_setspecific(exit_key, t);
    prof_thread_self_ = &t->hot;
    attach_state = 0;
    return &t->hot;
oom:
    prof_log_once(&oom_logged, "out of memory for a thread's ring (PROF_BUFFER=%llu records); "
                  "that thread's zones are not recorded", (unsigned long long)cap);
fail:
    attach_state = 2;
    return NULL;
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
    free(t);
}

void prof_registry_atfork_child(void)
{
    struct prof_thread *self = (struct prof_thread *)prof_thread_self_;
    struct prof_thread *t, *next;

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
    self->hot.tail_cache = self->hot.head;
    self->hot.dropped = self->hot.reentered = 0;
    self->dropped_seen = self->reentered_seen = 0;
    self->traced_name = NULL;
    memset(self->child_ns, 0, sizeof self->child_ns);
    memset(self->child_first, 0, sizeof self->child_first);
    memset(self->child_last, 0, sizeof self->child_last);
    memset(self->trace_first, 0, sizeof self->trace_first);
    self->trace_depth = 0;
}
