/* signal_reentry.c - zones inside a signal handler that interrupts zones
 * on the same thread (a timer firing every 20 us while the main thread
 * records at full speed): nothing crashes or corrupts the ring, and every
 * zone is accounted for: recorded + dropped (refused re-entries count as
 * dropped) == issued, exactly. */
#include <prof.h>

#include <signal.h>
#include <sys/time.h>

#include "check.h"

static volatile sig_atomic_t handler_zones;

static void on_alarm(int sig)
{
    (void)sig;
    {
        PROF_ZONE("handler");
        PROF_COUNTER("handler_counter", 1);
    }
    handler_zones++;
}

int main(void)
{
    long n = test_scale(300000);
    struct sigaction sa;
    struct itimerval it = {{0, 20}, {0, 20}}, off = {{0, 0}, {0, 0}};
    uint64_t issued, recorded, dropped;
    prof_counter_stats cs;

    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("warm-up");   /* attach the thread outside the handler */
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    CHECK_EQ(sigaction(SIGALRM, &sa, NULL), 0);
    CHECK_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
    for (long i = 0; i < n; i++) {
        PROF_ZONE("main");
        {
            PROF_ZONE("inner");
        }
        if (i % 5000 == 0)
            CHECK_EQ(prof_flush(), 0);
    }
    CHECK_EQ(setitimer(ITIMER_REAL, &off, NULL), 0);
    CHECK_EQ(prof_flush(), 0);

    issued = 2 * (uint64_t)n + 2 * (uint64_t)handler_zones + 1;   /* + warm-up */
    recorded = test_count("main") + test_count("inner") + test_count("handler") +
               test_count("warm-up");
    if (prof_counter_stats_get("handler_counter", &cs) == 0)
        recorded += cs.count;
    dropped = test_dropped();
    fprintf(stderr, "%ld main zones, %d handler zones: %llu recorded, %llu dropped\n", n,
            (int)handler_zones, (unsigned long long)recorded, (unsigned long long)dropped);
    CHECK_GT(handler_zones, 0);
    CHECK_EQ_U64(recorded + dropped, issued);
    CHECK_LE(test_count("main"), n);
    CHECK_LE(test_count("inner"), n);
    return 0;
}
