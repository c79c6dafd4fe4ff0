/* off.c - recording off costs nothing: no thread is started, nothing is
 * allocated, zones, counters, marks and steps are no-ops, and the result
 * functions say that recording never started.
 *
 *   off.c default   PROF unset: off until the program asks; at the end the
 *                   program switches on itself and it works.
 *   off.c forced    PROF=0: prof_enable(1) is refused (-EPERM) and nothing
 *                   is ever recorded. */
#include <prof.h>

#include <malloc.h>

#include "check.h"

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

static void instrumented(long i)
{
    PROF_FUNC();
    {
        PROF_ZONE("zone");
        PROF_COUNTER("counter", i);
    }
    {
        PROF_ZONE_BEGIN(z, "pair");
        PROF_ZONE_END(z);
    }
    {
        prof_zone z = prof_zone_begin("ffi");
        prof_zone_end(&z);
    }
    {
        PROF_CUDA_ZONE("cuda", NULL);
    }
    if (i % 1000 == 0) {
        PROF_MARK("mark");
        prof_step();
    }
}

static void check_nothing_recorded(void)
{
    prof_stage_stats st, rows[2];
    char buf[16];

    CHECK_EQ(prof_enabled(), 0);
    CHECK_EQ(prof_flush(), -ESRCH);
    CHECK_EQ(prof_stats("zone", &st), -ESRCH);
    CHECK_EQ(prof_stats_list(rows, 2), -ESRCH);
    CHECK_EQ(prof_summary_snprint(buf, sizeof buf, PROF_FORMAT_TEXT), -ESRCH);
    CHECK_EQ(prof_summary_print(stderr), -ESRCH);
    CHECK_EQ(prof_reset(), 0);
}

int main(int argc, char **argv)
{
    int forced = argc > 1 && strcmp(argv[1], "forced") == 0;
    long n = test_scale(1000000);
    int threads0 = test_threads_now();
    size_t heap0;

    if (forced) {
        const char *v = getenv("PROF");
        if (v == NULL || strcmp(v, "0") != 0)
            SKIP("run with PROF=0");
        CHECK_EQ(prof_enable(1), -EPERM);
        CHECK_EQ(prof_enable(0), 0);
    } else if (getenv("PROF") != NULL) {
        SKIP("run with PROF unset");
    }
    CHECK_EQ(prof_enabled(), 0);

    /* Warm up whatever libc allocates on first use (stdio, TLS). */
    instrumented(0);
    heap0 = heap_in_use();
    for (long i = 1; i <= n; i++)
        instrumented(i);
    CHECK_EQ(heap_in_use(), heap0);
    CHECK_THREADS(threads0);
    check_nothing_recorded();
    CHECK_THREADS(threads0);
    /* Naming a thread is part of instrumented code too (a loader thread
     * names itself when it starts): off, it must not start the runtime. */
    CHECK_EQ(prof_thread_name("named while off"), 0);
    CHECK_MSG(TEST_TSAN || test_threads_now() == threads0,
              "prof_thread_name() started a thread while off");
    check_nothing_recorded();

    if (forced) {
        /* PROF=0 wins over every later request too. */
        CHECK_EQ(prof_enable(1), -EPERM);
        instrumented(1);
        check_nothing_recorded();
        CHECK_THREADS(threads0);
    } else {
        /* Off by default, but the program may switch on itself. */
        CHECK_EQ(prof_enable(1), 0);
        CHECK_EQ(prof_enabled(), 1);
        instrumented(1);
        CHECK_EQ(test_stats("zone").count, 1);
        CHECK_THREADS(threads0 + 1);   /* the collector */
        CHECK_EQ(prof_shutdown(), 0);
        CHECK_THREADS(threads0);       /* and it is gone */
    }
    CHECK_EQ(prof_shutdown(), 0);
    return 0;
}
