/* live_prog.c - a running prof process for the live tests: a request loop
 * ("request" > "parse", "handle", and "handle" > "db \"q\"\\n", a name the
 * metrics must escape) with a step per request, and five empty "tick"
 * zones per request at the top level (the most zones, the least time: it
 * sorts first by count and last by total), for SECONDS seconds.
 *
 * Once a quarter second a second thread calls prof_flush() and prints
 * "progress <requests> <count of parse> <flush us>" (flushed), so a test
 * can see that the zones keep being counted and prof_flush keeps
 * returning while it bothers the metrics server. "ready" once the first
 * request is counted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

static int done;
static long requests;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spin_us(double us)
{
    double end = now_s() + us / 1e6;

    while (now_s() < end)
        ;
}

static void *progress(void *arg)
{
    int ready = 0;

    (void)arg;
    while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
        prof_stage_stats st;
        double t0 = now_s(), t1;
        int err = prof_flush();

        t1 = now_s();
        if (err != 0 || prof_stats("parse", &st) != 0)
            st.count = 0;
        if (!ready && st.count > 0) {
            printf("ready\n");
            ready = 1;
        }
        printf("progress %ld %llu %.0f\n", __atomic_load_n(&requests, __ATOMIC_RELAXED),
               (unsigned long long)st.count,
               (t1 - t0) * 1e6);
        fflush(stdout);
        usleep(250000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 30, end;
    pthread_t th;

    prof_enable(1);
    prof_thread_name("main");
    pthread_create(&th, NULL, progress, NULL);
    end = now_s() + seconds;
    while (now_s() < end) {
        {
            PROF_ZONE("request");
            {
                PROF_ZONE("parse");
                spin_us(20);
            }
            {
                PROF_ZONE("handle");
                spin_us(50);
                {
                    PROF_ZONE("db \"q\"\\n");
                    spin_us(30);
                }
            }
        }
        for (int i = 0; i < 5; i++) {
            PROF_ZONE("tick");
        }
        __atomic_add_fetch(&requests, 1, __ATOMIC_RELAXED);
        prof_step();
        usleep(1000);
    }
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    return 0;
}
