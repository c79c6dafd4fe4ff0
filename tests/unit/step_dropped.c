/* step_dropped.c - PROF_SUMMARY_EVERY=10steps with a ring of 16 records: a
 * step whose own record was dropped (full ring) still gets its periodic
 * summary, once, by the time prof_flush() returns.
 *
 * Once the step-10 summary has reached the handler, the test holds the
 * collector off (it takes the runtime lock, which every drain needs) while
 * this thread overfills its ring and steps on to 20, so the step-20 record
 * is dropped. Then steps 21-30 run normally. The summaries must be those of
 * steps 10, 20 and 30, in order, each once.
 *
 * "merged": the thread steps on to 30 while the collector is held, so the
 * records of steps 20 and 30 are both dropped: one summary, at step 30,
 * covers both windows and says so ("merged_windows":2).
 *
 * The handler runs on the output writer thread, not the collector: a
 * handler that blocks holds no drain back (it once did, and this test held
 * the collector that way; since the writer thread it passed or failed by
 * scheduling: CI failed it on a busy machine). */
#include <prof.h>

#include "check.h"
#include "runtime.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int entered;
static uint64_t steps_seen[16], merged_seen[16];
static int nseen;

static void handler(void *user, const char *text, int kind)
{
    (void)user;
    if (kind != PROF_SUMMARY_PERIODIC)
        return;
    pthread_mutex_lock(&lock);
    if (nseen < 16) {
        merged_seen[nseen] = test_json_u64(text, "merged_windows");
        steps_seen[nseen++] = test_json_u64(text, "step");
    }
    entered = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

/* The summaries' steps so far (copied: a failed check exits, and the
 * summary printed at exit must not find the lock held). */
static int seen(uint64_t *out)
{
    int n;

    pthread_mutex_lock(&lock);
    n = nseen;
    memcpy(out, steps_seen, sizeof steps_seen);
    pthread_mutex_unlock(&lock);
    return n;
}

static void steps(int n)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE("step_body");
        prof_step();
    }
}

int main(int argc, char **argv)
{
    int merged = argc > 1 && strcmp(argv[1], "merged") == 0;
    uint64_t got[16];
    struct timespec deadline;

    CHECK_EQ(prof_enable(1), 0);
    prof_set_summary_handler(handler, NULL);
    /* Step 10's record goes through the ring (drained before it). */
    steps(9);
    CHECK_EQ(prof_flush(), 0);
    steps(1);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    pthread_mutex_lock(&lock);
    while (!entered && pthread_cond_timedwait(&cond, &lock, &deadline) == 0) {
    }
    pthread_mutex_unlock(&lock);
    CHECK_MSG(entered, "no summary at step 10 within 20 s");

    /* Nothing drains while the lock is held (no check may fail meanwhile:
     * the summary at exit needs the lock). */
    prof_rt_lock();
    for (int i = 0; i < 100; i++) {
        PROF_ZONE("fill");
    }
    steps(merged ? 20 : 10);   /* step 20 (and 30): its record finds the ring full */
    prof_rt_unlock();
    CHECK_EQ(prof_flush(), 0);
    CHECK_GT(test_dropped(), 80);

    CHECK_EQ(seen(got), 2);
    CHECK_EQ(got[0], 10);
    if (merged) {
        uint64_t m;

        CHECK_EQ(got[1], 30);
        pthread_mutex_lock(&lock);
        m = merged_seen[1];
        pthread_mutex_unlock(&lock);
        CHECK_EQ(m, 2);
        prof_set_summary_handler(NULL, NULL);
        return 0;
    }
    CHECK_EQ(got[1], 20);

    steps(10);
    CHECK_EQ(prof_flush(), 0);
    CHECK_EQ(seen(got), 3);
    CHECK_EQ(got[2], 30);
    prof_set_summary_handler(NULL, NULL);
    return 0;
}
