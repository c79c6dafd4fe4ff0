/* handover.c - zones that end on another thread, or out of order, at any
 * scale: the thread that began them always gets its nesting back exactly
 * (src/zone.c, src/registry.c). Each mode checks what the user sees: the
 * tree, the counts, the loss count, the thread's depth.
 *
 *   aba:       thread A begins "work" and exits; its slot goes to thread
 *              B, which begins "work" too; main then ends A's zone. The
 *              end is refused and counted, and B's nesting is untouched:
 *              B's child is under B's "work".
 *   locked:    ends on another thread while a third thread holds the
 *              runtime lock in summaries of 200,000 stages: every owner
 *              level comes back (a marking that needed the lock gave up).
 *   many:      70,000 zones begun on one thread and ended on another,
 *              with a thread polling summaries: the owner's own zones are
 *              all recorded, top-level, and its depth ends at 0 (past 64
 *              leaked levels nothing was given back, and the owner hit
 *              the depth limit).
 *   unordered: 70,000 zones on one thread, five open at a time and each
 *              ended oldest first (asyncio's pattern): nothing refused,
 *              depth back to 0, a later zone at the top level.
 *   logger:    a logger that calls the API, for a message raised while the
 *              runtime lock is held (the trace cannot be opened): it runs
 *              after the lock is released, and does not deadlock. */
#include <prof.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static uint32_t depth_now(void)
{
    uint32_t depth, dead;
    int repair;

    prof_thread_nesting_(&depth, &dead, &repair);
    return depth;
}

/* ------------------------------------------------------------------------ */

static prof_zone zone_a;
static sem_t b_begun, a_ended;
static uint32_t b_depth = 99;
static void *b_slot;

static void *thread_a(void *arg)
{
    (void)arg;
    zone_a = prof_zone_begin("work");
    return NULL;
}

static void *thread_b(void *arg)
{
    prof_zone z = prof_zone_begin("work");

    (void)arg;
    b_slot = z.thread;
    sem_post(&b_begun);
    sem_wait(&a_ended);
    {
        PROF_ZONE("child");
    }
    prof_zone_end(&z);
    b_depth = depth_now();
    return NULL;
}

static void test_aba(void)
{
    pthread_t a, b;
    prof_stage_stats child, work;
    uint64_t d0;

    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("start");
    }
    d0 = test_dropped();
    sem_init(&b_begun, 0, 0);
    sem_init(&a_ended, 0, 0);
    CHECK_EQ(pthread_create(&a, NULL, thread_a, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    CHECK_EQ(prof_flush(), 0);   /* A's state is given back */
    CHECK_EQ(pthread_create(&b, NULL, thread_b, NULL), 0);
    sem_wait(&b_begun);
    /* The case under test: B sits where A sat. */
    CHECK_MSG(b_slot == zone_a.thread, "B did not take A's slot (%p, %p)", b_slot, zone_a.thread);
    prof_zone_end(&zone_a);
    sem_post(&a_ended);
    CHECK_EQ(pthread_join(b, NULL), 0);
    CHECK_EQ(b_depth, 0);
    CHECK_EQ(test_dropped() - d0, 1);
    work = test_stats("work");
    child = test_stats("child");
    CHECK_EQ(work.count, 1);
    CHECK_STR_EQ(child.parent, "work");
    CHECK_EQ(child.depth, 1);
}

/* ------------------------------------------------------------------------ */
/* A thread that owns zones, handing each to an ender. */

static prof_zone mailbox;
static sem_t full, empty;
static long handovers;
static uint32_t owner_depth = 99;
static int stop_polling;

static void *owner(void *arg)
{
    (void)arg;
    for (long i = 0; i < handovers; i++) {
        sem_wait(&empty);
        mailbox = prof_zone_begin("handed");
        sem_post(&full);
        {
            PROF_ZONE("own");
        }
    }
    sem_wait(&empty);   /* the last one has been ended */
    {
        PROF_ZONE("own_last");
    }
    owner_depth = depth_now();
    return NULL;
}

static void *ender(void *arg)
{
    (void)arg;
    for (long i = 0; i < handovers; i++) {
        sem_wait(&full);
        prof_zone_end(&mailbox);
        sem_post(&empty);
    }
    return NULL;
}

static void *poller(void *arg)
{
    size_t size = 1 << 16;
    char *buf = malloc(size);

    (void)arg;
    CHECK(buf != NULL);
    while (!__atomic_load_n(&stop_polling, __ATOMIC_ACQUIRE))
        prof_summary_snprint(buf, size, PROF_FORMAT_TEXT);
    free(buf);
    return NULL;
}

static void run_handovers(long n)
{
    pthread_t o, e, p;
    prof_stage_stats own, last;
    uint64_t d0;

    d0 = test_dropped();
    handovers = n;
    sem_init(&full, 0, 0);
    sem_init(&empty, 0, 1);
    stop_polling = 0;
    CHECK_EQ(pthread_create(&p, NULL, poller, NULL), 0);
    CHECK_EQ(pthread_create(&o, NULL, owner, NULL), 0);
    CHECK_EQ(pthread_create(&e, NULL, ender, NULL), 0);
    CHECK_EQ(pthread_join(e, NULL), 0);
    CHECK_EQ(pthread_join(o, NULL), 0);
    __atomic_store_n(&stop_polling, 1, __ATOMIC_RELEASE);
    CHECK_EQ(pthread_join(p, NULL), 0);
    CHECK_EQ(owner_depth, 0);
    CHECK_EQ(test_count("handed"), 0);
    CHECK_EQ(test_dropped() - d0, (uint64_t)n);   /* the foreign ends, nothing else */
    own = test_stats("own");
    last = test_stats("own_last");
    CHECK_EQ(own.count, (uint64_t)n);
    CHECK(own.parent == NULL);
    CHECK(last.parent == NULL);
}

static void test_many(void)
{
    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("start");
    }
    run_handovers(test_scale(70000));
}

static void test_locked(void)
{
    long stages = test_scale(200000);
    char name[32];

    CHECK_EQ(prof_enable(1), 0);
    for (long i = 0; i < stages; i++) {
        snprintf(name, sizeof name, "stage%ld", i);
        PROF_ZONE(prof_intern(name));
    }
    CHECK_EQ(prof_flush(), 0);
    /* Each summary holds the lock for a good part of a second here. */
    run_handovers(20);
}

/* ------------------------------------------------------------------------ */

static void test_unordered(void)
{
    enum { K = 5 };
    long n = test_scale(70000);
    prof_zone open[K];
    prof_stage_stats later;
    uint64_t d0;

    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("start");
    }
    d0 = test_dropped();
    for (int k = 0; k < K; k++)
        open[k] = prof_zone_begin("poll");
    for (long i = 0; i < n; i++) {
        prof_zone_end(&open[i % K]);           /* the oldest */
        open[i % K] = prof_zone_begin("poll");
    }
    for (long i = n; i < n + K; i++)
        prof_zone_end(&open[i % K]);
    CHECK_EQ(depth_now(), 0);
    {
        PROF_ZONE("later");
    }
    CHECK_EQ(test_dropped() - d0, 0);
    CHECK_EQ(test_count("poll"), (uint64_t)(n + K));
    later = test_stats("later");
    CHECK(later.parent == NULL);
    CHECK_EQ(later.depth, 0);
}

/* ------------------------------------------------------------------------ */

static int logged, api_result = 1;

static void api_logger(void *user, const char *message)
{
    (void)user;
    if (strstr(message, "trace") != NULL && !logged) {
        logged = 1;
        api_result = prof_stats_list(NULL, 0);
    }
}

static void test_logger(void)
{
    alarm(30);   /* a deadlock fails here rather than at the suite's limit */
    prof_set_logger(api_logger, NULL);
    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("first");   /* starts the runtime: the trace cannot open */
    }
    CHECK_EQ(prof_flush(), 0);
    CHECK_MSG(logged, "no message about the trace reached the logger");
    /* It ran (on whichever thread raised the message) and returned: the
     * stage count, or -EDEADLK on the collector thread, which cannot wait
     * for itself. */
    CHECK_MSG(api_result >= 0 || api_result == -EDEADLK, "prof_stats_list gave %d", api_result);
    CHECK_EQ(test_count("first"), 1);
    prof_set_logger(NULL, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    if (strcmp(mode, "aba") == 0)
        test_aba();
    else if (strcmp(mode, "locked") == 0)
        test_locked();
    else if (strcmp(mode, "many") == 0)
        test_many();
    else if (strcmp(mode, "unordered") == 0)
        test_unordered();
    else if (strcmp(mode, "logger") == 0)
        test_logger();
    else
        CHECK_MSG(0, "usage: handover aba|locked|many|unordered|logger");
    return 0;
}
