/* churn.c - thread churn: THREADS threads (10,000 unless argv[1] says) that
 * each name themselves, record ZONES zones and a counter, and exit, at most
 * ALIVE at a time, while the collector drains and periodic summaries are
 * written (PROF_SUMMARY_EVERY=50ms to PROF_SUMMARY, set by the test).
 *
 * Checked: no zone of a finished thread is lost (counts exact, nothing
 * dropped); the runtime keeps no state for threads that are gone: the heap
 * in use after the run is within 4 MB of what it was after the first tenth,
 * and resident memory (once malloc_trim has returned what the allocator
 * keeps for reuse) grows by less than RING_KB / 1024 per thread churned
 * after that tenth, though each thread had a ring of RING_KB resident: a
 * runtime that kept one ring in 1,024 would fail. No thread is left but
 * main and the collector; the periodic summaries were written.
 *
 * Peak RSS is printed, not judged: it is the rings of finished threads the
 * collector has not drained yet, which is how far the machine's scheduler
 * let it fall behind (719 MB was seen on a loaded 2-core machine), not
 * something this program or the runtime controls. Leaks are checked by
 * running the same program under valgrind (tests/load/meson.build, 1,000
 * threads, "no-rss": valgrind's own memory fills the RSS figures). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"
#include "load.h"

#define ALIVE 16
#define ZONES 20
/* The resident part of a default ring (docs/CONFIG.md, PROF_BUFFER: its
 * first 32k records, 1 MB, are populated when the thread starts). */
#define RING_KB 1024L

static void *churner(void *arg)
{
    char name[32];

    snprintf(name, sizeof name, "churn-%ld", (long)arg);
    prof_thread_name(name);
    for (int i = 0; i < ZONES / 2; i++) {
        PROF_ZONE("churn.zone");
        {
            PROF_ZONE("churn.inner");
        }
    }
    PROF_COUNTER("churn.counter", (double)(long)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? atol(argv[1]) : 10000;
    /* "no-rss": under valgrind, whose own memory fills the figures. */
    int rss_checks = !(argc > 2 && strcmp(argv[2], "no-rss") == 0);
    const char *summary = getenv("PROF_SUMMARY_CHECK");
    pthread_t t[ALIVE];
    long warm_kb = 0, end_kb, created = 0, warm_threads = 0;
    size_t warm_heap = 0, end_heap;
    long trim_kb;
    int base_threads;
    uint64_t t0 = test_now_ns();
    prof_counter_stats cs;

    CHECK(prof_enabled());
    { PROF_ZONE("churn.main"); }
    base_threads = load_threads();   /* main, the collector (and a sanitizer's) */
    while (created < threads) {
        int batch = 0;
        for (; batch < ALIVE && created < threads; batch++, created++)
            CHECK(pthread_create(&t[batch], NULL, churner, (void *)created) == 0);
        for (int i = 0; i < batch; i++)
            pthread_join(t[i], NULL);
        if (warm_kb == 0 && created >= threads / 10) {
            prof_flush();
            warm_kb = load_rss_kb();
            warm_heap = load_heap_bytes();
            warm_threads = created;
        }
    }
    CHECK_EQ(prof_flush(), 0);
    end_kb = load_rss_kb();
    end_heap = load_heap_bytes();
    /* What the allocator keeps for reuse is not prof's: give it back
     * before judging (the raw figures are printed too). */
    malloc_trim(0);
    trim_kb = load_rss_kb();

    FIGURE("churn.threads", "threads", "%ld", threads);
    FIGURE("churn.seconds", "s", "%.2f", (test_now_ns() - t0) / 1e9);
    FIGURE("churn.rss_after_10pct", "MB", "%.1f", warm_kb / 1024.0);
    FIGURE("churn.rss_end", "MB", "%.1f", end_kb / 1024.0);
    FIGURE("churn.rss_end_after_malloc_trim", "MB", "%.1f", trim_kb / 1024.0);
    FIGURE("churn.rss_peak", "MB", "%.1f", load_rss_peak_kb() / 1024.0);
    FIGURE("churn.rss_growth_per_thread", "kB", "%.3f",
           (double)(trim_kb - warm_kb) / (double)(threads - warm_threads));
    FIGURE("churn.heap_after_10pct", "MB", "%.2f", warm_heap / 1048576.0);
    FIGURE("churn.heap_end", "MB", "%.2f", end_heap / 1048576.0);
    CHECK_EQ(test_count("churn.zone"), threads * (ZONES / 2));
    CHECK_EQ(test_count("churn.inner"), threads * (ZONES / 2));
    CHECK_EQ(prof_counter_stats_get("churn.counter", &cs), 0);
    CHECK_EQ(cs.count, threads);
    CHECK_EQ(test_dropped(), 0);
    if (rss_checks) {
        /* Per thread churned after the warm-up: what a thread may leave
         * behind is bounded by the ring it had, not by the machine. */
        CHECK_MSG((trim_kb - warm_kb) * 1024 < (threads - warm_threads) * RING_KB,
                  "RSS grew %ld kB from 10%% to the end over %ld threads: more than "
                  "%ld kB (1/1024 of a %ld kB ring) per thread", trim_kb - warm_kb,
                  threads - warm_threads, RING_KB / 1024, RING_KB);
        /* A thread's state and its 1 MB ring are freed once it is drained:
         * the heap holds only the interned thread names on top. */
        CHECK_MSG(end_heap < warm_heap + 4 * 1048576, "heap grew from %zu to %zu bytes",
                  warm_heap, end_heap);
    }
    /* Every churner is gone: only main, the collector and, once a
     * periodic summary was written, the output writer run. */
    CHECK(load_threads() == base_threads || load_threads() == base_threads + 1);
    if (summary != NULL) {
        /* The periodic summaries written during the run. */
        FILE *f = fopen(summary, "r");
        char line[512];
        int periodic = 0;
        CHECK(f != NULL);
        while (fgets(line, sizeof line, f) != NULL)
            periodic += strncmp(line, "prof summary:", 13) == 0 && strstr(line, ", step ") != NULL;
        fclose(f);
        FIGURE("churn.periodic_summaries", "summaries", "%d", periodic);
        CHECK_GE(periodic, 1);
    }
    return 0;
}
