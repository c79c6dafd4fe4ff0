/* thread_exit.c - threads that leave in the middle of a zone, by
 * pthread_exit and by pthread_cancel, while the collector runs.
 *
 * What a user relies on: the zones such a thread ended are all counted,
 * its state and ring are freed (no leak under ASan, no thread left over),
 * the stages it ran still sit under the zone it left open in the summary,
 * and the rest of the program records on as before. The zone left open is
 * counted only where the language runs it to its end on the way out: in
 * C++ the destructor runs while pthread_exit unwinds the thread; in C the
 * cleanup attribute runs only in code built with -fexceptions (gcc and
 * clang do not by default), so there the open zone is not counted. Built
 * as C (thread_exit) and as C++ (thread_exit_cpp, from thread_exit.cpp). */
#include <prof.h>

#include <sched.h>

#include "check.h"

#define THREADS 8
#define ENDED 100

#if defined(__cplusplus) || defined(__EXCEPTIONS)
#  define OPEN_ZONE_ENDS 1
#else
#  define OPEN_ZONE_ENDS 0
#endif

static struct test_barrier inside;

static void record_ended(void)
{
    for (int i = 0; i < ENDED; i++) {
        PROF_ZONE("ended");
    }
}

static void *exit_mid_zone(void *arg)
{
    (void)arg;
    PROF_ZONE("left_open");
    record_ended();
    pthread_exit(NULL);
    return NULL;
}

static void *cancelled_mid_zone(void *arg)
{
    (void)arg;
    PROF_ZONE("left_open");
    record_ended();
    /* Not cancelled inside the barrier's wait. */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    test_barrier_wait(&inside);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    /* Cancelled in pthread_testcancel(), not in a blocking call such as
     * pause(): ThreadSanitizer loses track of synchronisation in a thread
     * cancelled inside a call it intercepts, and reports races that are
     * not there (google/sanitizers#646). */
    for (;;) {
        pthread_testcancel();
        sched_yield();
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2 * THREADS];
    prof_stage_stats st;
    char *text;

    CHECK_EQ(prof_enable(1), 0);
    test_barrier_init(&inside, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        CHECK_EQ(pthread_create(&t[i], NULL, exit_mid_zone, NULL), 0);
        CHECK_EQ(pthread_create(&t[THREADS + i], NULL, cancelled_mid_zone, NULL), 0);
    }
    test_barrier_wait(&inside);
    for (int i = 0; i < THREADS; i++)
        CHECK_EQ(pthread_cancel(t[THREADS + i]), 0);
    for (int i = 0; i < 2 * THREADS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);

    /* The program goes on recording. */
    for (int i = 0; i < ENDED; i++) {
        PROF_ZONE("after");
    }
    CHECK_EQ(prof_flush(), 0);

    CHECK_EQ(test_count("ended"), 2 * THREADS * ENDED);
    CHECK_EQ(test_count("after"), ENDED);
    CHECK_EQ(test_count("left_open"), OPEN_ZONE_ENDS ? 2 * THREADS : 0);
    CHECK_EQ(prof_stats("ended", &st), 0);
    CHECK_STR_EQ(st.parent, "left_open");
    CHECK_EQ(test_dropped(), 0);

    /* Every thread counted once; none of their state outlives them. */
    text = test_summary(PROF_FORMAT_JSON);
    CHECK_EQ(test_json_u64(text, "threads"), 2 * THREADS + 1);
    free(text);
    text = test_summary(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "  ended");
    free(text);
    CHECK_THREADS(2);   /* this one and the collector */
    test_barrier_destroy(&inside);
    return 0;
}
