/* trace_prog.c - what the trace drivers (trace_gz.py, trace_valid.py) run
 * beside prog.c: one mode per behaviour, chosen by argv[1], key=value lines
 * on stdout, exit 1 with the reason on stderr if a check of its own fails.
 *
 *   locale              setlocale(LC_ALL, "") (the environment's locale,
 *                       e.g. de_DE.UTF-8), then zones and counters with
 *                       fractional values (0.25, 1.5e-7) and NaN/Inf;
 *                       prints decimal_point= as the locale has it
 *   late_main           a worker thread records (and is joined) before the
 *                       main thread records anything
 *   close_race US       records zones in bulk, then raises SIGINT (prof
 *                       drains and closes the trace) while another thread
 *                       sends SIGTERM US microseconds later: a second
 *                       signal during the final close
 *   flat N              N back-to-back zones "a" each holding "b" and "c",
 *                       c ending with a (nesting as viewers compute it)
 *   nostage N           N steps of a zone "a" (2 ms) and 1 ms outside every
 *                       zone on the main thread, which steps; a worker
 *                       thread records zones "w" with 3 ms between them
 *                       and never steps
 */
#include <prof.h>

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...)                                                             \
    do {                                                                      \
        fprintf(stderr, "trace_prog: %s:%d: ", __FILE__, __LINE__);           \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        exit(1);                                                              \
    } while (0)

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int mode_locale(void)
{
    const char *loc = setlocale(LC_ALL, "");

    printf("locale=%s\n", loc != NULL ? loc : "(none)");
    printf("decimal_point=%s\n", localeconv()->decimal_point);
    for (int i = 0; i < 20; i++) {
        PROF_ZONE("outer");
        {
            PROF_ZONE("inner");
            sleep_us(100);
        }
        PROF_COUNTER("loss", 0.25);
        PROF_COUNTER("tiny", 1.5e-7);
        prof_step();
    }
    PROF_COUNTER("loss", NAN);
    PROF_COUNTER("loss", INFINITY);
    PROF_COUNTER("loss", -INFINITY);
    PROF_COUNTER("loss", 0.75);
    return 0;
}

static void *late_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++) {
        PROF_ZONE("worker_zone");
    }
    prof_flush();
    return NULL;
}

static int mode_late_main(void)
{
    pthread_t t;

    if (pthread_create(&t, NULL, late_worker, NULL) != 0)
        FAIL("pthread_create");
    pthread_join(t, NULL);
    for (int i = 0; i < 10; i++) {
        PROF_ZONE("main_zone");
    }
    printf("pid=%d\n", (int)getpid());
    return 0;
}

static long race_us;

static void *terminator(void *arg)
{
    (void)arg;
    sleep_us(race_us);
    kill(getpid(), SIGTERM);
    return NULL;
}

static int mode_close_race(long us)
{
    pthread_t t;

    race_us = us;
    for (long i = 0; i < 200000; i++) {
        PROF_ZONE("bulk");
    }
    printf("ready=1\n");
    fflush(stdout);
    if (pthread_create(&t, NULL, terminator, NULL) != 0)
        FAIL("pthread_create");
    raise(SIGINT);
    pthread_join(t, NULL);
    for (;;)
        pause();
}

static int mode_flat(long n)
{
    for (long i = 0; i < n; i++) {
        PROF_ZONE("a");
        {
            PROF_ZONE("b");
        }
        {
            PROF_ZONE("c");
        }
    }
    return 0;
}

static void *nostage_worker(void *arg)
{
    for (long i = 0; i < (long)(intptr_t)arg; i++) {
        {
            PROF_ZONE("w");
            sleep_us(500);
        }
        sleep_us(3000);
    }
    return NULL;
}

static int mode_nostage(long n)
{
    pthread_t th;

    if (pthread_create(&th, NULL, nostage_worker, (void *)(intptr_t)n) != 0)
        FAIL("pthread_create");
    for (long i = 0; i < n; i++) {
        {
            PROF_ZONE("a");
            sleep_us(2000);
        }
        sleep_us(1000);
        prof_step();
    }
    pthread_join(th, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long arg = argc > 2 ? atol(argv[2]) : 0;

    if (strcmp(mode, "locale") == 0)
        return mode_locale();
    if (strcmp(mode, "late_main") == 0)
        return mode_late_main();
    if (strcmp(mode, "close_race") == 0)
        return mode_close_race(arg);
    if (strcmp(mode, "flat") == 0)
        return mode_flat(arg);
    if (strcmp(mode, "nostage") == 0)
        return mode_nostage(arg);
    FAIL("unknown mode %s", mode);
}
