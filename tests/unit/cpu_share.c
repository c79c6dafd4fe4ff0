/* cpu_share.c - the on-CPU share per stage (cpu% column, cpu_ns) against
 * ground truth the test builds: each zone reads its thread's exact CPU
 * time (CLOCK_THREAD_CPUTIME_ID) and wall time inside itself.
 *
 *     cpu_share THREADS [BUSY]
 *
 * Each of THREADS threads runs a stage that spins, one that alternates
 * 1 ms spin / 1 ms sleep, and one that sleeps, 250 ms of each; BUSY
 * processes spin beside them meanwhile. Checked per stage: prof's share
 * is within 10 points of the truth; the sleeping stage is at most 10%
 * (scheduling cannot move that one); where the threads had their CPUs
 * (truth), the spinning stage reads >= 90% and the alternating one 35-65%;
 * the spinning stage reads at least the alternating one, which reads at
 * least the sleeping one, wherever the truth is ordered so. A thread
 * preempted by the busy processes is waiting for a CPU: its truth and its
 * reading drop together. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

#include "check.h"

#define STAGE_NS 250000000ull

enum { SPIN, ALT, SLEEP, NSTAGES };
static const char *names[NSTAGES] = {"spin", "alternate", "sleep"};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t truth_cpu[NSTAGES], truth_wall[NSTAGES];

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;

    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* One zone of stage k, of about ns of wall time, its truth added up. */
static void zone(int k, uint64_t ns)
{
    uint64_t c0, w0, c1, w1;

    PROF_ZONE_BEGIN(z, names[k]);
    c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    w0 = clock_ns(CLOCK_MONOTONIC);
    if (k == SPIN)
        test_spin_ns(ns);
    else if (k == SLEEP)
        sleep_ns(ns);
    else {
        test_spin_ns(ns / 2);
        sleep_ns(ns / 2);
    }
    c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    w1 = clock_ns(CLOCK_MONOTONIC);
    PROF_ZONE_END(z);
    pthread_mutex_lock(&lock);
    truth_cpu[k] += c1 - c0;
    truth_wall[k] += w1 - w0;
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
    (void)arg;
    zone(SPIN, STAGE_NS);
    for (uint64_t t = 0; t < STAGE_NS; t += 2000000)
        zone(ALT, 2000000);
    for (int i = 0; i < 25; i++)
        zone(SLEEP, STAGE_NS / 25);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1, busy = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t tid[16];
    pid_t pids[8];
    double share[NSTAGES], truth[NSTAGES];
    char *text;

    CHECK(threads >= 1 && threads <= 16 && busy >= 0 && busy <= 8);
    CHECK_EQ(prof_enable(1), 0);
    for (int i = 0; i < busy; i++) {
        CHECK((pids[i] = fork()) >= 0);
        if (pids[i] == 0) {
            uint64_t end = clock_ns(CLOCK_MONOTONIC) + 3 * STAGE_NS + 500000000u;
            while (clock_ns(CLOCK_MONOTONIC) < end) {
            }
            _exit(0);
        }
    }
    for (int i = 0; i < threads; i++)
        CHECK_EQ(pthread_create(&tid[i], NULL, worker, NULL), 0);
    for (int i = 0; i < threads; i++)
        CHECK_EQ(pthread_join(tid[i], NULL), 0);
    for (int i = 0; i < busy; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
    for (int k = 0; k < NSTAGES; k++) {
        prof_stage_stats st;

        CHECK_EQ(prof_stats(names[k], &st), 0);
        CHECK_MSG(st.flags & PROF_STAGE_CPU, "%s: no on-CPU figure", names[k]);
        CHECK(st.self_ns >= STAGE_NS * 9 / 10);
        share[k] = (double)st.cpu_ns / (double)st.self_ns;
        truth[k] = (double)truth_cpu[k] / (double)truth_wall[k];
        fprintf(stderr, "%-10s prof %5.1f%%  truth %5.1f%%  (self %.0f ms, %d threads, %d busy)\n",
                names[k], 100 * share[k], 100 * truth[k], st.self_ns / 1e6, threads, busy);
    }
    for (int k = 0; k < NSTAGES; k++)
        CHECK_MSG(share[k] >= truth[k] - 0.10 && share[k] <= truth[k] + 0.10,
                  "%s: %.3f on CPU, truth %.3f", names[k], share[k], truth[k]);
    CHECK(share[SLEEP] <= 0.10);
    if (truth[SPIN] >= 0.97)
        CHECK(share[SPIN] >= 0.90);
    if (truth[ALT] >= 0.42 && truth[ALT] <= 0.58)
        CHECK(share[ALT] >= 0.35 && share[ALT] <= 0.65);
    if (truth[SPIN] >= truth[ALT] + 0.2)
        CHECK(share[SPIN] >= share[ALT]);
    if (truth[ALT] >= truth[SLEEP] + 0.2)
        CHECK(share[ALT] >= share[SLEEP]);

    /* The table: a cpu% column, and the line that names the stage that
     * waited longest (sleep, or alternate where its thread also waited
     * for a CPU: both have 250 ms or more of self time, under half of it
     * on a CPU). */
    text = test_summary(PROF_FORMAT_TEXT);
    fprintf(stderr, "%s", text);
    CHECK_STR_CONTAINS(text, "cpu%");
    CHECK_STR_CONTAINS(text, ": waiting (not computing) most of its time");
    free(text);
    text = test_summary(PROF_FORMAT_JSON);
    CHECK_STR_CONTAINS(text, "\"cpu_ns\":");
    free(text);
    return 0;
}
