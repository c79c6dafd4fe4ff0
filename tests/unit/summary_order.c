/* summary_order.c - summaries reach the program in the order of their
 * steps, whichever threads write them.
 *
 * PROF_SUMMARY_EVERY=1step, a summary handler that takes a millisecond,
 * and three threads that may each write queued summaries: the collector,
 * the stepping thread (prof_flush after its steps) and a thread that
 * flushes in a loop. Each periodic summary's step must be greater than the
 * one before it (merged windows are labelled with their last step, so
 * still increasing), and the final one comes last. Two writers that each
 * took a summary from the queue and raced for the writer's lock printed
 * step 4 before step 2 (tests/python/test_newcomer.py, 3 runs in 6 on a
 * busy machine). */
#include <prof.h>

#include <unistd.h>

#include "check.h"

#define STEPS 300

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[STEPS + 8];
static int nseen, finals, final_last = 1;
static int stop;

static void handler(void *user, const char *text, int kind)
{
    const char *at = strstr(text, "), step ");
    struct timespec ms = {0, 1000000};

    (void)user;
    pthread_mutex_lock(&seen_lock);
    if (kind == PROF_SUMMARY_FINAL) {
        finals++;
    } else if (at != NULL && nseen < (int)(sizeof seen / sizeof *seen)) {
        seen[nseen++] = strtoull(at + 8, NULL, 10);
        if (finals)
            final_last = 0;
    }
    pthread_mutex_unlock(&seen_lock);
    nanosleep(&ms, NULL);    /* a slow handler widens the race */
}

static void *flusher(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        int err = prof_flush();
        CHECK(err == 0 || err == -ESRCH);
    }
    return NULL;
}

int main(void)
{
    pthread_t th;

    prof_set_summary_handler(handler, NULL);
    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("warm");
    }
    CHECK_EQ(pthread_create(&th, NULL, flusher, NULL), 0);
    for (int i = 0; i < STEPS; i++) {
        {
            PROF_ZONE("step_work");
        }
        prof_step();
        if (i % 3 == 0)
            CHECK_EQ(prof_flush(), 0);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(prof_shutdown(), 0);

    CHECK(nseen > 0);
    for (int i = 1; i < nseen; i++)
        if (seen[i] <= seen[i - 1])
            CHECK_FAIL_("summary %d is for step %" PRIu64 ", after one for step %" PRIu64
                        " (%d periodic summaries)", i, seen[i], seen[i - 1], nseen);
    CHECK_EQ(seen[nseen - 1], STEPS);
    CHECK_EQ(finals, 1);
    CHECK_EQ(final_last, 1);
    printf("%d periodic summaries in step order, then the final one\n", nseen);
    return 0;
}
