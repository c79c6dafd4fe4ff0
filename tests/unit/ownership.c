/* ownership.c - the zone ownership rule (include/prof.h, src/capture/zone.c): a
 * zone ends on the thread that began it, and every refusal gives back
 * exactly the level its begin claimed. Each mode checks what the user
 * sees: the tree (parents), self times, and the loss count.
 *
 *   signals:  SIGALRM every 20 us; the handler runs a zone, so some of its
 *             zones end inside the main loop's own push and are refused.
 *             Afterwards the thread is at depth 0 and the tree is intact.
 *   deep:     recursion 100 deep: self time is right past the 64 levels
 *             whose names are kept, and the tree holds.
 *   limit:    zones nested past PROF_DEPTH_LIMIT_: the deeper ones are refused
 *             and counted, the others recorded.
 *   foreign:  a zone begun on one thread and ended on another is refused
 *             and counted, and the beginning thread's next zones are
 *             top-level again (its level was given back).
 *   unordered: zones ended out of order on their own thread (outer before
 *             inner): both recorded; later zones nest where they belong.
 *   late:     a zone in a thread-specific-data destructor that runs after
 *             prof's own: refused and counted, the thread counted once. */
#include <prof.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"

static void spin(int n)
{
    for (volatile int i = 0; i < n; i++)
        ;
}

static uint32_t depth_now(void)
{
    return prof_thread_self_ == NULL ? 0 : prof_thread_self_->depth & (PROF_DEPTH_LEVEL_ | PROF_DEPTH_REPAIR_);
}

/* ------------------------------------------------------------------------ */

static volatile long handler_runs;

static void on_alarm(int sig)
{
    PROF_ZONE("handler");
    handler_runs++;
    (void)sig;
    spin(20);
}

static void test_signals(void)
{
    long n = test_scale(2000000);
    struct itimerval it = {{0, 20}, {0, 20}};
    prof_stage_stats m, in, h;
    uint64_t dropped;

    CHECK_EQ(prof_enable(1), 0);
    /* The runtime starts on the process's first zone, which calls the
     * loader (not async-signal-safe: TSan saw free() in a handler when the
     * first alarm came before the loop's first zone): started here, so
     * the handler's zones test ownership, not start-up. */
    {
        PROF_ZONE("start-up");
    }
    signal(SIGALRM, on_alarm);
    CHECK_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
    for (long i = 0; i < n; i++) {
        PROF_ZONE("main");
        {
            PROF_ZONE("inner");
        }
    }
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
    signal(SIGALRM, SIG_IGN);
    CHECK_EQ(depth_now(), 0);
    m = test_stats("main");
    in = test_stats("inner");
    h = test_stats("handler");
    dropped = test_dropped();
    CHECK_MSG(h.count > 100, "only %llu handler zones: the timer did not fire",
              (unsigned long long)h.count);
    /* Every zone is kept or counted as lost, exactly: refused (handler
     * zones that ended inside the loop's own push, or began while the
     * thread was attaching, on its first zone: some 70 of them with the
     * timer at 20 us, once lost uncounted) or dropped by a full ring. */
    CHECK_EQ(m.count + in.count + h.count + dropped, 2 * (uint64_t)n + (uint64_t)handler_runs);
    CHECK(m.parent == NULL);
    CHECK_STR_EQ(in.parent, "main");
    CHECK_EQ(in.depth, 1);
    /* main's self is its total less inner and the handler zones that ran
     * inside it: never near its total (the bug this guards gave self ==
     * total, off by inner's whole total). A loaded CI run once gave 37 us
     * more than total - inner over 2 M zones: a handler zone placed across
     * the edge of the main it interrupted leaves that main's children
     * unsubtracted; 0.1% of main's total is allowed for it. A full ring
     * breaks the rule: an inner whose main was dropped counts in inner's
     * total and in no main's children (CONFIG.md; before the ring marked
     * its losses, the next main's own inner went unsubtracted too). With
     * the default ring a collector starved by three busy loops let one run
     * in 8 exceed it by 0.2% (64,000 zones dropped); meson gives this test
     * a ring of 1M records, which holds half a second of it. How long the
     * collector is kept away is the scheduler's: the rule is asked only
     * where no record was lost (main is then not marked lossy). */
    if (m.flags & PROF_STAGE_LOSSY) {
        fprintf(stderr, "the ring lost records (the collector was starved): main's self time "
                "is not checked\n");
        return;
    }
    CHECK_MSG(m.self_ns <= m.total_ns - in.total_ns + m.total_ns / 1000,
              "main self %llu, total - inner %llu (main total %llu; %llu zones dropped or "
              "refused)", (unsigned long long)m.self_ns,
              (unsigned long long)(m.total_ns - in.total_ns), (unsigned long long)m.total_ns,
              (unsigned long long)dropped);
}

/* ------------------------------------------------------------------------ */

static void recurse(int n)
{
    PROF_ZONE("rec");
    spin(50);
    if (n > 1)
        recurse(n - 1);
    else {
        PROF_ZONE("leaf");
        spin(50);
    }
}

static void test_deep(void)
{
    prof_stage_stats top, rec, leaf;

    CHECK_EQ(prof_enable(1), 0);
    for (int i = 0; i < 50; i++) {
        PROF_ZONE("top");
        recurse(100);
    }
    CHECK_EQ(depth_now(), 0);
    top = test_stats("top");
    rec = test_stats("rec");
    leaf = test_stats("leaf");
    CHECK_EQ(rec.count, 50 * 100);
    CHECK_EQ(leaf.count, 50);
    CHECK_STR_EQ(rec.parent, "top");
    CHECK_STR_EQ(leaf.parent, "rec");
    /* Self times add up to the outermost zone: top's own time, every level
     * of rec's own time and leaf's make top's total (within a nanosecond
     * of rounding per zone). */
    CHECK_LE(rec.self_ns, top.total_ns);
    CHECK_LE(leaf.total_ns, rec.total_ns);
    {
        int64_t sum = (int64_t)(top.self_ns + rec.self_ns + leaf.self_ns);
        int64_t diff = sum - (int64_t)top.total_ns;
        CHECK_MSG(diff <= 5100 && diff >= -5100, "self times add up to %lld ns, top's total is "
                  "%llu ns", (long long)sum, (unsigned long long)top.total_ns);
    }
}

/* ------------------------------------------------------------------------ */

/* Nested by a loop rather than by recursion: ThreadSanitizer keeps a shadow
 * stack of 64k frames and overflows it (a SIGSEGV now and then) before
 * prof's limit of 32767 zones is reached.  prof sees the same thing either
 * way: zones opened on one thread, each inside the last. */
static void *limit_thread(void *arg)
{
    long n = *(long *)arg, i;
    prof_zone *z = malloc((size_t)n * sizeof *z);

    if (z == NULL)
        return (void *)1;
    for (i = 0; i < n; i++)
        z[i] = prof_zone_begin("lim");
    for (i = n - 1; i >= 0; i--)
        prof_zone_end(&z[i]);
    free(z);
    return NULL;
}

static void test_limit(void)
{
    long n = (long)PROF_DEPTH_LIMIT_ + 1000;
    void *res;
    pthread_t t;
    uint64_t d0;

    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("start");
    }
    d0 = test_dropped();
    CHECK_EQ(pthread_create(&t, NULL, limit_thread, &n), 0);
    CHECK_EQ(pthread_join(t, &res), 0);
    CHECK_MSG(res == NULL, "out of memory for %ld zones", n);
    /* The ring may drop some of 66k records; what is kept plus what is
     * dropped is what was recorded, and the 1000 past the limit are lost
     * either way. */
    CHECK_EQ(test_count("lim") + test_dropped() - d0, (uint64_t)n);
    CHECK_LE(test_count("lim"), (uint64_t)PROF_DEPTH_LIMIT_);
}

/* ------------------------------------------------------------------------ */

static prof_zone handed;
static struct test_barrier begun, ended;

static void *ender(void *arg)
{
    (void)arg;
    test_barrier_wait(&begun);
    PROF_ZONE_END(handed);
    test_barrier_wait(&ended);
    return NULL;
}

static void test_foreign(void)
{
    pthread_t t;
    prof_stage_stats after, child;
    uint64_t d0;

    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("start");
    }
    d0 = test_dropped();
    test_barrier_init(&begun, 2);
    test_barrier_init(&ended, 2);
    CHECK_EQ(pthread_create(&t, NULL, ender, NULL), 0);
    {
        PROF_ZONE_BEGIN(z, "handed");
        handed = z;
    }
    test_barrier_wait(&begun);
    test_barrier_wait(&ended);
    CHECK_EQ(pthread_join(t, NULL), 0);
    for (int i = 0; i < 10; i++) {
        PROF_ZONE("after");
        PROF_ZONE("after_child");
    }
    CHECK_EQ(depth_now(), 0);
    CHECK_EQ(test_count("handed"), 0);
    CHECK_EQ(test_dropped() - d0, 1);
    after = test_stats("after");
    child = test_stats("after_child");
    CHECK(after.parent == NULL);
    CHECK_EQ(after.depth, 0);
    CHECK_STR_EQ(child.parent, "after");
}

/* ------------------------------------------------------------------------ */

static void test_unordered(void)
{
    prof_stage_stats later, inside;

    CHECK_EQ(prof_enable(1), 0);
    for (int i = 0; i < 10; i++) {
        PROF_ZONE_BEGIN(outer, "outer");
        PROF_ZONE_BEGIN(inner, "inner_open");
        PROF_ZONE_END(outer);             /* out of order */
        {
            PROF_ZONE("inside");          /* still inside inner_open */
        }
        PROF_ZONE_END(inner);
        {
            PROF_ZONE("later");           /* nothing open: top level */
        }
    }
    CHECK_EQ(depth_now(), 0);
    CHECK_EQ(test_count("outer"), 10);
    CHECK_EQ(test_count("inner_open"), 10);
    inside = test_stats("inside");
    later = test_stats("later");
    CHECK_STR_EQ(inside.parent, "inner_open");
    CHECK(later.parent == NULL);
}

/* ------------------------------------------------------------------------ */

static pthread_key_t late_key;

static void late_destructor(void *p)
{
    (void)p;
    PROF_ZONE("late");
}

static void *late_thread(void *arg)
{
    (void)arg;
    {
        PROF_ZONE("early");
    }
    pthread_setspecific(late_key, (void *)1);
    return NULL;
}

static void test_late(void)
{
    enum { N = 20 };
    pthread_t t[N];
    char *s;
    uint64_t d0;

    CHECK_EQ(prof_enable(1), 0);
    {
        PROF_ZONE("start");   /* prof's own key exists before ours */
    }
    d0 = test_dropped();
    CHECK_EQ(pthread_key_create(&late_key, late_destructor), 0);
    for (int i = 0; i < N; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, late_thread, NULL), 0);
    for (int i = 0; i < N; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    CHECK_EQ(test_count("early"), N);
    CHECK_EQ(test_count("late"), 0);
    CHECK_EQ(test_dropped() - d0, N);
    s = test_summary(PROF_FORMAT_JSON);
    CHECK_EQ(test_json_u64(s, "threads"), N + 1);
    free(s);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    if (strcmp(mode, "signals") == 0)
        test_signals();
    else if (strcmp(mode, "deep") == 0)
        test_deep();
    else if (strcmp(mode, "limit") == 0)
        test_limit();
    else if (strcmp(mode, "foreign") == 0)
        test_foreign();
    else if (strcmp(mode, "unordered") == 0)
        test_unordered();
    else if (strcmp(mode, "late") == 0)
        test_late();
    else
        CHECK_MSG(0, "usage: ownership signals|deep|limit|foreign|unordered|late");
    return 0;
}
