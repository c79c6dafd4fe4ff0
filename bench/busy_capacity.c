/* busy_capacity.c - what one thread may record beside busy processes
 * (issue 20): a training job's DataLoader workers take every core, and the
 * collector is the thread that waits for one.
 *
 * The bench starts BUSY CPU-bound child processes (default 4, at the same
 * priority as itself), then paces one producer thread at rising rates for
 * SECONDS each with the default ring, and ends the children when done.
 * Printed: the highest rate that dropped nothing (nodrop_rate) and the
 * share of zones lost at 1 M zones/s (loss_1m). The producer is
 * bench_pace (bench.h), the one capacity.c runs.
 *
 *     PROF=1 PROF_SUMMARY=off build/bench/busy_capacity [busy] [seconds]
 *
 * Last line, for scripts:
 * prof-bench busy_capacity: busy=<n> seconds=<s> nodrop_rate=<M/s> loss_1m=<%> */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <prof.h>

#include "bench.h"

/* Zones dropped out of *made, one thread paced at rate for seconds. */
static uint64_t run_paced(double rate, double seconds, uint64_t *made)
{
    uint64_t d0;

    prof_flush();
    d0 = bench_dropped();
    *made = bench_pace(rate, seconds);
    prof_flush();
    return bench_dropped() - d0;
}

int main(int argc, char **argv)
{
    static const double rates[] = {0.1e6, 0.25e6, 0.5e6, 1e6, 2e6, 4e6, 8e6};
    int busy = argc > 1 ? atoi(argv[1]) : 4;
    double seconds = argc > 2 ? atof(argv[2]) : (getenv("PROF_BENCH_QUICK") ? 1.0 : 5.0);
    double best = 0, loss_1m = -1;
    pid_t kids[64];

    bench_require_env(argv, "PROF", "1");
    bench_require_env(argv, "PROF_SUMMARY", "off");
    if (busy > 64)
        busy = 64;
    { PROF_ZONE("attach"); }
    for (int i = 0; i < busy; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            volatile uint64_t x = 0;
            prof_enable(0);
            for (;;)
                x++;
        }
    }
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        uint64_t made, lost = run_paced(rates[r], seconds, &made);

        printf("%5.2f M/s: %llu of %llu zones dropped (%.3f%%)\n", rates[r] / 1e6,
               (unsigned long long)lost, (unsigned long long)made,
               made ? 100.0 * (double)lost / (double)made : 0.0);
        fflush(stdout);
        if (rates[r] == 1e6)
            loss_1m = made ? 100.0 * (double)lost / (double)made : 0.0;
        /* The highest rate up to which every rate dropped nothing. */
        if (lost == 0 && (r == 0 || best == rates[r - 1]))
            best = rates[r];
        if (lost != 0 && rates[r] >= 1e6)
            break;
    }
    for (int i = 0; i < busy; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    printf("prof-bench busy_capacity: busy=%d seconds=%.1f nodrop_rate=%.2f loss_1m=%.3f\n", busy,
           seconds, best / 1e6, loss_1m);
    return 0;
}
