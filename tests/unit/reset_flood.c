/* reset_flood.c - prof_reset() beside threads that keep their rings full
 * (issue 30).
 *
 * loss_line: two threads record flat out into small rings (PROF_BUFFER=1k,
 * so they lose records all the time) while the main thread calls
 * prof_reset() RESETS times. The "lost records" line is said once: a
 * reset does not bring it back (it came once per reset: 51 lines in 11 s).
 * The logger counts the lines; no timing is asserted.
 *
 * forget: a reset forgets the zones that ended before it, also those
 * still waiting in a ring (the reset does not drain the rings: the drain
 * forgets them when it reaches them), and counts every zone that ends
 * after it: "before" never shows, "after" has exactly its count, and a
 * zone open across the reset counts where it ends.
 *
 *     reset_flood loss_line|forget */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <prof.h>

#include "check.h"

#define RESETS 10

static int lines;
static int flooding = 1;

static void logger(void *user, const char *message)
{
    (void)user;
    if (strstr(message, " lost ") != NULL)
        __atomic_fetch_add(&lines, 1, __ATOMIC_RELAXED);
}

static void *flood(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&flooding, __ATOMIC_RELAXED)) {
        for (int i = 0; i < 1000; i++) {
            PROF_ZONE("flood");
            __asm__ __volatile__("" ::: "memory");
        }
    }
    return NULL;
}

static int loss_line(void)
{
    pthread_t f[2];
    prof_stage_stats st;
    time_t t0;
    long elapsed;

    prof_set_logger(logger, NULL);
    prof_enable(1);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&f[i], NULL, flood, NULL) == 0);
    /* Each reset follows losses: wait (without a deadline that load could
     * move) until the drains have seen the first one, then reset while the
     * floods go on losing. */
    while (__atomic_load_n(&lines, __ATOMIC_RELAXED) == 0) {
        prof_flush();
        usleep(1000);
    }
    t0 = time(NULL);
    for (int i = 0; i < RESETS; i++) {
        CHECK_EQ(prof_reset(), 0);
        /* Losses after the reset reach a drain before the next one (a
         * stage recorded in a window with a loss is marked lossy). */
        do
            usleep(1000);
        while (prof_stats("flood", &st) != 0 || !(st.flags & PROF_STAGE_LOSSY));
    }
    elapsed = (long)(time(NULL) - t0);
    __atomic_store_n(&flooding, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_join(f[i], NULL);
    /* Once; a machine so slow that this took 10 s or more may hear it
     * again every 10 s (the line's own limit), never at every reset. */
    CHECK_MSG(__atomic_load_n(&lines, __ATOMIC_RELAXED) <= 1 + elapsed / 10,
              "%d lines in %ld s after %d resets", lines, elapsed, RESETS);
    return 0;
}

static int stage;            /* the other thread's progress */

static void wait_stage(int want)
{
    while (__atomic_load_n(&stage, __ATOMIC_ACQUIRE) != want)
        usleep(100);
}

static void *recorder(void *arg)
{
    (void)arg;
    {
        PROF_ZONE("across");             /* open across the reset */
        for (int i = 0; i < 3000; i++) {
            PROF_ZONE("before");
            __asm__ __volatile__("" ::: "memory");
        }
        for (int i = 0; i < 1000; i++) {
            PROF_ZONE("both");
            __asm__ __volatile__("" ::: "memory");
        }
        /* The records wait in the ring: nothing here flushes, and the
         * main thread resets now. */
        __atomic_store_n(&stage, 1, __ATOMIC_RELEASE);
        wait_stage(2);
        for (int i = 0; i < 700; i++) {
            PROF_ZONE("both");
            __asm__ __volatile__("" ::: "memory");
        }
    }
    return NULL;
}

static int forget(void)
{
    pthread_t t;
    prof_stage_stats st;
    char *text;

    prof_enable(1);
    CHECK(pthread_create(&t, NULL, recorder, NULL) == 0);
    wait_stage(1);
    CHECK_EQ(prof_reset(), 0);
    __atomic_store_n(&stage, 2, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK_EQ(prof_flush(), 0);
    CHECK_EQ(prof_stats("before", &st), -ENOENT);
    CHECK_EQ(prof_stats("both", &st), 0);
    CHECK_EQ(st.count, 700);
    CHECK_EQ(prof_stats("across", &st), 0);
    CHECK_EQ(st.count, 1);
    text = test_summary(PROF_FORMAT_TEXT);
    CHECK(strstr(text, "before") == NULL);
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "loss_line") == 0)
        return loss_line();
    if (argc > 1 && strcmp(argv[1], "forget") == 0)
        return forget();
    fprintf(stderr, "usage: reset_flood loss_line|forget\n");
    return 2;
}
