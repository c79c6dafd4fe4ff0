/* step_writer_behind.c - the run's last due steps come while the
 * summaries' writer is behind (PROF_SUMMARY_EVERY=1step, JSON): their
 * windows still get a periodic summary, before the final one.
 *
 * The summary handler (it runs on the writer thread) holds the first
 * periodic summary until the loop is done, so the queue (256 summaries)
 * fills and the summaries of the later due steps are not made: their
 * windows stay open. Each step is drained at once (prof_stats), so every
 * step is due on its own and the queue is full well before the last one,
 * whatever the scheduling. After the release and prof_shutdown(), the
 * periodic summaries are labelled with due steps, in order, and their
 * merged_windows add up to every due step: the last one is labelled with
 * the last step. */
#include <prof.h>

#include "check.h"

#define STEPS 600
#define MAX_SUMMARIES 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int released;
static uint64_t step_of[MAX_SUMMARIES], windows_of[MAX_SUMMARIES];
static int nperiodic, nfinal, final_after_periodic = 1;

static void handler(void *user, const char *text, int kind)
{
    (void)user;
    pthread_mutex_lock(&lock);
    while (!released)
        pthread_cond_wait(&cond, &lock);
    if (kind == PROF_SUMMARY_FINAL) {
        nfinal++;
    } else if (kind == PROF_SUMMARY_PERIODIC && nperiodic < MAX_SUMMARIES) {
        if (nfinal)
            final_after_periodic = 0;
        step_of[nperiodic] = test_json_u64(text, "step");
        windows_of[nperiodic] = test_json_u64(text, "merged_windows");
        nperiodic++;
    }
    pthread_mutex_unlock(&lock);
}

int main(void)
{
    prof_stage_stats st;
    uint64_t prev = 0, sum = 0;

    prof_set_summary_handler(handler, NULL);
    CHECK_EQ(prof_enable(1), 0);
    for (int i = 0; i < STEPS; i++) {
        {
            PROF_ZONE("iter");
        }
        prof_step();
        /* Drained here: this step's summary is made or, the queue full,
         * not made (its window stays open). */
        CHECK_EQ(prof_stats("iter", &st), 0);
    }
    CHECK_EQ(st.count, STEPS);
    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    CHECK_EQ(prof_shutdown(), 0);

    /* The writer is done: prof_shutdown waits for it. */
    pthread_mutex_lock(&lock);
    printf("figure: %d periodic summaries for %d due steps; the last labelled %llu, holding "
           "%llu windows\n", nperiodic, STEPS,
           (unsigned long long)(nperiodic ? step_of[nperiodic - 1] : 0),
           (unsigned long long)(nperiodic ? windows_of[nperiodic - 1] : 0));
    CHECK_EQ(nfinal, 1);
    CHECK_MSG(final_after_periodic, "a periodic summary came after the final one");
    CHECK_MSG(nperiodic < STEPS, "%d periodic summaries: the queue never filled", nperiodic);
    for (int i = 0; i < nperiodic; i++) {
        CHECK_MSG(step_of[i] > prev, "summary %d labelled %llu after %llu", i,
                  (unsigned long long)step_of[i], (unsigned long long)prev);
        CHECK_MSG(windows_of[i] == step_of[i] - prev, "step %llu says %llu windows, the last "
                  "summary was at step %llu", (unsigned long long)step_of[i],
                  (unsigned long long)windows_of[i], (unsigned long long)prev);
        sum += windows_of[i];
        prev = step_of[i];
    }
    CHECK_MSG(sum == STEPS && prev == STEPS, "merged_windows add up to %llu, the last summary is "
              "at step %llu; %d steps were due", (unsigned long long)sum,
              (unsigned long long)prev, STEPS);
    pthread_mutex_unlock(&lock);
    return 0;
}
