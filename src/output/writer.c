/* writer.c - the output writer thread (see writer.h for the contract).
 *
 * State, under `lock`: the services kicked so far, `kicks` (how many
 * kicks there were) and `done` (the kick count the writer had seen when
 * it last found every service empty). Everything kicked before kick k is
 * written once done >= k: a service writes its whole queue, and the writer
 * runs all of them again until a pass writes nothing, so a buffer queued
 * while a pass ran is either taken by that pass or by the next (its kick
 * made kicks > seen). The lock is never held across a service: a kick (the
 * collector's) waits at most for another kick or the writer's bookkeeping,
 * never for a write. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "writer.h"

#define SERVICES_MAX 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cond = PTHREAD_COND_INITIALIZER;   /* kicks moved */
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;   /* done moved */
static pthread_cond_t moved_cond = PTHREAD_COND_INITIALIZER;  /* progress moved */
static prof_writer_fn services[SERVICES_MAX];
static unsigned nservices;
static uint64_t kicks, done;
static uint64_t progress;        /* writes done (prof_writer_progress); written
                                    under lock, read atomically too */
static int stuck;                /* a program's wait gave up on the writer ... */
static uint64_t stuck_progress;  /* ... when progress was this */
static int running;              /* this process has a writer thread */
static int stopping;             /* prof_writer_stop: exit once idle */
static uint64_t exits;           /* threads that left writer_main */
static pthread_t writer_id;

static int run_services(void)
{
    prof_writer_fn fns[SERVICES_MAX];
    unsigned n;
    int any = 0;

    pthread_mutex_lock(&lock);
    n = nservices;
    memcpy(fns, services, n * sizeof fns[0]);
    pthread_mutex_unlock(&lock);
    for (unsigned i = 0; i < n; i++)
        any |= fns[i]() != 0;
    return any;
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "prof-writer");
    pthread_mutex_lock(&lock);
    for (;;) {
        uint64_t seen;

        while (done == kicks && !stopping)
            pthread_cond_wait(&wake_cond, &lock);
        if (done == kicks)
            break;    /* stopping, and nothing left */
        seen = kicks;
        pthread_mutex_unlock(&lock);
        while (run_services()) {
        }
        pthread_mutex_lock(&lock);
        done = seen;
        pthread_cond_broadcast(&idle_cond);
    }
    /* A kick from now on starts a new thread. */
    if (pthread_equal(pthread_self(), writer_id))
        running = 0;
    exits++;
    pthread_cond_broadcast(&idle_cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* lock held. */
static int writer_start(void)
{
    static int logged;
    pthread_attr_t attr;
    sigset_t all, old;
    int err;

    /* No signals: a SIGINT handler must run on a program thread, and the
     * signal path's trace end must never find the writing thread to be
     * itself. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_init(&attr);
    stopping = 0;
    err = pthread_create(&writer_id, &attr, writer_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        prof_log_once(&logged, "cannot start the output writer thread (%s); summaries and the "
                      "trace are written at the run's end", strerror(err));
        return -err;
    }
    running = 1;
    return 0;
}

int prof_writer_kick(prof_writer_fn fn)
{
    unsigned i;
    int err = 0;

    pthread_mutex_lock(&lock);
    for (i = 0; i < nservices && services[i] != fn; i++) {
    }
    if (i == nservices && nservices < SERVICES_MAX)
        services[nservices++] = fn;
    kicks++;
    if (!running)
        err = writer_start();
    pthread_cond_signal(&wake_cond);
    pthread_mutex_unlock(&lock);
    return err;
}

static __thread int in_handler __attribute__((tls_model("initial-exec")));

void prof_writer_handler_enter(void)
{
    in_handler = 1;
}

void prof_writer_handler_leave(void)
{
    in_handler = 0;
}

int prof_writer_in_handler(void)
{
    return in_handler;
}

int prof_writer_is_self(void)
{
    int self;

    pthread_mutex_lock(&lock);
    self = running && pthread_equal(pthread_self(), writer_id);
    pthread_mutex_unlock(&lock);
    return self;
}

/* timeout_ns from now, on pthread_cond_timedwait's clock. */
static void deadline(struct timespec *end, uint64_t timeout_ns)
{
    clock_gettime(CLOCK_REALTIME, end);
    end->tv_sec += (time_t)(timeout_ns / 1000000000u);
    end->tv_nsec += (long)(timeout_ns % 1000000000u);
    if (end->tv_nsec >= 1000000000) {
        end->tv_sec++;
        end->tv_nsec -= 1000000000;
    }
}

void prof_writer_progress(void)
{
    /* Under the lock, so that a program's thread in prof_writer_wait that
     * found its output not yet written either sees the new count or is
     * woken by the broadcast. */
    pthread_mutex_lock(&lock);
    __atomic_add_fetch(&progress, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&moved_cond);
    pthread_mutex_unlock(&lock);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int prof_writer_drain(uint64_t stall_ns, uint64_t max_ns)
{
    uint64_t start = mono_ns(), now = start, moved = start, target, seen, until;
    struct timespec end;
    int err;

    pthread_mutex_lock(&lock);
    target = kicks;
    if (!running && done < target) {
        /* No thread (it could not be started): write here, so that the
         * run's end still has its final summary and trace end. */
        pthread_mutex_unlock(&lock);
        while (run_services()) {
        }
        pthread_mutex_lock(&lock);
        if (done < target)
            done = target;
    }
    seen = __atomic_load_n(&progress, __ATOMIC_RELAXED);
    /* A writer that keeps writing (a slow disk, a reader that reads) is
     * waited for up to max_ns; one that wrote nothing for stall_ns is
     * stuck. Looked at every 100 ms. */
    while (done < target && now - moved < stall_ns && now - start < max_ns) {
        uint64_t p;

        if (running && pthread_equal(pthread_self(), writer_id))
            break;   /* the writer's own handler: what it waits for is itself */
        until = moved + stall_ns < start + max_ns ? moved + stall_ns : start + max_ns;
        if (until > now + 100000000u)
            until = now + 100000000u;
        deadline(&end, until - now);
        pthread_cond_timedwait(&idle_cond, &lock, &end);
        now = mono_ns();
        if ((p = __atomic_load_n(&progress, __ATOMIC_RELAXED)) != seen) {
            seen = p;
            moved = now;
        }
    }
    err = done < target ? -ETIMEDOUT : 0;
    pthread_mutex_unlock(&lock);
    return err;
}

int prof_writer_wait(int (*written)(uint64_t), uint64_t target)
{
    static int logged;
    uint64_t start, moved, now, seen, gen;

    if (written(target))
        return 0;
    /* The summary handler runs on the writer: what it would wait for is
     * itself. */
    if (prof_writer_in_handler() || prof_writer_is_self())
        return -EDEADLK;
    pthread_mutex_lock(&lock);
    if (!running) {
        /* No thread (it could not be started): nothing will write before
         * a later kick starts one, or the run's end writes it. */
        pthread_mutex_unlock(&lock);
        return -ESRCH;
    }
    if (stuck && progress == stuck_progress) {
        /* An earlier wait found the writer stuck and it has completed no
         * write since: a loop that flushes every step pays the bound once
         * per stall, not once per call. */
        pthread_mutex_unlock(&lock);
        return written(target) ? 0 : -ETIMEDOUT;
    }
    stuck = 0;
    start = moved = now = mono_ns();
    seen = progress;
    for (;;) {
        uint64_t until;
        struct timespec end;

        gen = progress;
        pthread_mutex_unlock(&lock);
        if (written(target))
            return 0;
        pthread_mutex_lock(&lock);
        now = mono_ns();
        if (progress != seen) {
            seen = progress;
            moved = now;
        }
        if (now - moved >= PROF_WRITER_WAIT_NS || now - start >= PROF_WRITER_WAIT_MAX_NS)
            break;
        if (progress != gen)
            continue;   /* a write completed since written() looked */
        until = moved + PROF_WRITER_WAIT_NS < start + PROF_WRITER_WAIT_MAX_NS
                    ? moved + PROF_WRITER_WAIT_NS : start + PROF_WRITER_WAIT_MAX_NS;
        deadline(&end, until - now);
        pthread_cond_timedwait(&moved_cond, &lock, &end);
    }
    stuck = 1;
    stuck_progress = progress;
    pthread_mutex_unlock(&lock);
    if (written(target))
        return 0;
    prof_log_once(&logged, "the output writer is behind (%s: a reader that does not read, "
                  "such as a paused `| less` or a trace FIFO nobody reads?): prof_flush and "
                  "the cross-rank table return without waiting for it while it stays so; "
                  "their numbers are complete, and what is queued is written when the reader "
                  "reads again", now - moved >= PROF_WRITER_WAIT_NS
                  ? "no write completed for 1 s" : "still writing after 10 s");
    return -ETIMEDOUT;
}

int prof_writer_stop(uint64_t timeout_ns)
{
    struct timespec end;
    pthread_t id;
    uint64_t exits0;
    int err = 0;

    deadline(&end, timeout_ns);
    pthread_mutex_lock(&lock);
    if (!running || pthread_equal(pthread_self(), writer_id)) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    id = writer_id;
    exits0 = exits;
    stopping = 1;
    pthread_cond_signal(&wake_cond);
    while (exits == exits0 && err == 0)
        err = pthread_cond_timedwait(&idle_cond, &lock, &end);
    if (exits == exits0) {
        /* Stuck in a write: it exits when the write returns (or with the
         * process); kicks meanwhile are still its. */
        pthread_mutex_unlock(&lock);
        return -ETIMEDOUT;
    }
    pthread_mutex_unlock(&lock);
    pthread_join(id, NULL);
    return 0;
}

void prof_writer_atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void prof_writer_atfork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void prof_writer_atfork_child(void)
{
    pthread_cond_t fresh_wake = PTHREAD_COND_INITIALIZER, fresh_idle = PTHREAD_COND_INITIALIZER;
    pthread_cond_t fresh_moved = PTHREAD_COND_INITIALIZER;

    /* The parent's writer does not exist here, and what it had queued is
     * the parent's to write (the outputs forget it in their own handlers):
     * nothing is pending, and the first kick starts this process's own. */
    wake_cond = fresh_wake;
    idle_cond = fresh_idle;
    moved_cond = fresh_moved;
    running = stopping = stuck = 0;
    done = kicks;
    pthread_mutex_unlock(&lock);
}
