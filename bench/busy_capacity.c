/* busy_capacity.c - what one thread may record beside busy processes
 * (issue 20): a training job's DataLoader workers take every core, and the
 * collector is the thread that waits for one.
 *
 * The bench starts BUSY CPU-bound child processes (default 4, at the same
 * priority as itself), then paces one producer thread at rising rates for
 * SECONDS each with the default ring, and ends the children when done.
 * Printed: the highest rate that dropped nothing (nodrop_rate) and the
 * share of zones lost at 1 M zones/s (loss_1m). The producer catches up
 * in bursts of at most 64, as capacity.c's does.
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

static uint64_t dropped_now(void)
{
    static char buf[1 << 16];
    const char *p;

    prof_summary_snprint(buf, sizeof buf, PROF_FORMAT_JSON);
    p = strstr(buf, "\"dropped\":");
    return p ? strtoull(p + 10, NULL, 10) : 0;
}

/* Zones dropped out of *made, one thread paced at rate for seconds. */
static uint64_t run_paced(double rate, double seconds, uint64_t *made)
{
    uint64_t t0, dur = (uint64_t)(seconds * 1e9), done = 0, d0;

    prof_flush();
    d0 = dropped_now();
    t0 = bench_now_ns();
    for (;;) {
        uint64_t el = bench_now_ns() - t0;
        uint64_t due = (uint64_t)((double)el * rate / 1e9);

        if (el >= dur)
            break;
        for (int k = 0; done < due && k < 64; k++, done++) {
            PROF_ZONE("paced");
            __asm__ __volatile__("" ::: "memory");
        }
    }
    prof_flush();
    *made = done;
    return dropped_now() - d0;
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
