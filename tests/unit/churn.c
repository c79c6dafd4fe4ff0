/* churn.c - threads that start, record and exit, thousands of them, a few
 * at a time, while the collector runs: no zone of a finished thread is
 * lost (count exact), every thread is counted once, and memory does not
 * grow with the number of threads (each exited thread's state and ring are
 * freed by the collector: the heap in use after the churn is what it was
 * after the warm-up). */
#include <prof.h>

#include <malloc.h>

#include "check.h"

#define AT_ONCE 4
#define ZONES 50

static void *worker(void *arg)
{
    (void)arg;
    CHECK_EQ(prof_thread_name("churn"), 0);
    for (int i = 0; i < ZONES; i++) {
        PROF_ZONE("churn");
        {
            PROF_ZONE("inner");
        }
    }
    return NULL;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

static void run(long nthreads)
{
    for (long i = 0; i < nthreads; i += AT_ONCE) {
        pthread_t t[AT_ONCE];
        for (int k = 0; k < AT_ONCE; k++)
            CHECK_EQ(pthread_create(&t[k], NULL, worker, NULL), 0);
        for (int k = 0; k < AT_ONCE; k++)
            CHECK_EQ(pthread_join(t[k], NULL), 0);
    }
}

int main(void)
{
    long total = test_scale(5000) / AT_ONCE * AT_ONCE;
    long warm = total / 10 / AT_ONCE * AT_ONCE;
    size_t heap_warm, heap_end;
    char *json;

    if (warm < AT_ONCE)
        warm = AT_ONCE;
    CHECK_EQ(prof_enable(1), 0);
    run(warm);
    CHECK_EQ(prof_flush(), 0);
    /* Build the summary once so that its buffers exist in both samples. */
    free(test_summary(PROF_FORMAT_JSON));
    heap_warm = heap_in_use();

    run(total - warm);
    CHECK_EQ(prof_flush(), 0);
    free(test_summary(PROF_FORMAT_JSON));
    heap_end = heap_in_use();

    CHECK_EQ(test_count("churn"), total * ZONES);
    CHECK_EQ(test_count("inner"), total * ZONES);
    json = test_summary(PROF_FORMAT_JSON);
    CHECK_EQ(test_json_u64(json, "threads"), total);
    CHECK_EQ(test_json_u64(json, "dropped"), 0);
    free(json);
    fprintf(stderr, "%ld threads: heap %zu bytes after %ld, %zu after all\n", total, heap_warm,
            warm, heap_end);
    /* Flat: no per-thread leftovers (a ring alone is 1 MB by default). */
    CHECK_LE(heap_end, heap_warm + 64 * 1024);
    return 0;
}
