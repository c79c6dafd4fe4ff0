/* shutdown.c - prof_shutdown() in every order a program may call it.
 *
 *   before:  before any zone (PROF=1): returns 0, no summary, no thread;
 *            zones afterwards are ignored; calling it again is harmless.
 *   twice:   after zones: one final summary (to the summary handler), the
 *            collector gone; a second call does nothing; zones after it
 *            are ignored and the numbers stay readable; prof_enable(1)
 *            starts a new recording, and the next shutdown reports it.
 *   handler: prof_flush(), prof_shutdown() and prof_stats() from inside a
 *            summary handler fail with -EDEADLK instead of deadlocking,
 *            both on the collector's thread (periodic summaries) and on
 *            the thread in prof_shutdown (the final one). */
#include <prof.h>


#include "check.h"

static int finals, periodics;
static int handler_flush = 1, handler_shutdown = 1;
static int final_flush = 1, final_stats = 1;

static void handler(void *user, const char *text, int kind)
{
    (void)user;
    CHECK(text != NULL && strncmp(text, "prof summary", 12) == 0);
    if (kind == PROF_SUMMARY_FINAL) {
        prof_stage_stats st;

        __atomic_store_n(&final_flush, prof_flush(), __ATOMIC_RELAXED);
        __atomic_store_n(&final_stats, prof_stats("z", &st), __ATOMIC_RELAXED);
        __atomic_add_fetch(&finals, 1, __ATOMIC_RELAXED);
    }
    if (kind == PROF_SUMMARY_PERIODIC) {
        /* Forbidden in a handler: must fail, not hang. */
        __atomic_store_n(&handler_flush, prof_flush(), __ATOMIC_RELAXED);
        __atomic_store_n(&handler_shutdown, prof_shutdown(), __ATOMIC_RELAXED);
        __atomic_add_fetch(&periodics, 1, __ATOMIC_RELAXED);
    }
}

static void zones(int n)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE("z");
    }
}

static void test_before(void)
{
    prof_stage_stats st;
    int threads0 = test_threads_now();

    CHECK_EQ(prof_enabled(), 1);      /* PROF=1 */
    CHECK_EQ(prof_shutdown(), 0);
    CHECK_EQ(prof_enabled(), 0);
    CHECK_EQ(prof_shutdown(), 0);
    zones(100);
    CHECK_EQ(prof_stats("z", &st), -ESRCH);
    CHECK_EQ(prof_flush(), -ESRCH);
    CHECK_EQ(finals, 0);
    CHECK_THREADS(threads0);
}

static void test_twice(void)
{
    int threads0 = test_threads_now();

    zones(100);
    CHECK_EQ(test_count("z"), 100);
    CHECK_THREADS(threads0 + 1);
    CHECK_EQ(prof_shutdown(), 0);
    CHECK_EQ(finals, 1);
    CHECK_EQ(prof_enabled(), 0);
    CHECK_THREADS(threads0);
    CHECK_EQ(prof_shutdown(), 0);
    CHECK_EQ(finals, 1);

    zones(100);                        /* ignored */
    CHECK_EQ(prof_flush(), 0);
    CHECK_EQ(test_count("z"), 100);    /* still readable */
    CHECK_THREADS(threads0);

    CHECK_EQ(prof_enable(1), 0);       /* a new recording */
    zones(10);
    CHECK_EQ(test_count("z"), 110);
    CHECK_EQ(prof_shutdown(), 0);
    CHECK_EQ(finals, 2);
    CHECK_EQ(prof_shutdown(), 0);
    CHECK_EQ(finals, 2);
}

static void test_handler(void)
{
    uint64_t deadline = test_now_ns() + 30000000000ull;

    /* PROF_SUMMARY_EVERY=1step: each step wakes the collector, which calls
     * the handler. */
    while (__atomic_load_n(&periodics, __ATOMIC_RELAXED) == 0) {
        zones(1);
        prof_step();
        CHECK_MSG(test_now_ns() < deadline, "no periodic summary in 30 s");
        test_spin_ns(100000);
    }
    CHECK_EQ(__atomic_load_n(&handler_flush, __ATOMIC_RELAXED), -EDEADLK);
    CHECK_EQ(__atomic_load_n(&handler_shutdown, __ATOMIC_RELAXED), -EDEADLK);
    CHECK_EQ(prof_enabled(), 1);
    CHECK_EQ(prof_shutdown(), 0);
    CHECK_EQ(finals, 1);
    CHECK_EQ(final_flush, -EDEADLK);
    CHECK_EQ(final_stats, -EDEADLK);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *v = getenv("PROF");

    if (v == NULL || strcmp(v, "1") != 0)
        SKIP("run with PROF=1");
    prof_set_summary_handler(handler, NULL);
    if (strcmp(mode, "before") == 0)
        test_before();
    else if (strcmp(mode, "twice") == 0)
        test_twice();
    else if (strcmp(mode, "handler") == 0)
        test_handler();
    else
        CHECK_MSG(0, "usage: shutdown before|twice|handler");
    return 0;
}
