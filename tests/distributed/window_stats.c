/* window_stats.c - prof_window_stats_list() gives the numbers the last
 * periodic summary showed: the same stages in the same order with the same
 * count, total, self, min, max, avg and percentiles as that summary's JSON
 * "window" section, and the step it closed at. Before any window and after
 * prof_reset() it has none (-ENOENT).
 *
 * Run with PROF_SUMMARY_EVERY=5steps PROF_SUMMARY_FORMAT=json. */
#include <prof.h>

#include "check.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char *periodic[8];
static int nperiodic;

static void handler(void *user, const char *text, int kind)
{
    (void)user;
    if (kind != PROF_SUMMARY_PERIODIC)
        return;
    pthread_mutex_lock(&lock);
    if (nperiodic < 8)
        periodic[nperiodic++] = strdup(text);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

/* The i-th periodic summary, waiting up to 10 s for it: the window is kept
 * when its summary is formatted, but the collector may still be handing the
 * text to the handler when prof_flush() returns. */
static char *periodic_copy(int i)
{
    struct timespec deadline;
    char *s = NULL;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&lock);
    while (i >= nperiodic && pthread_cond_timedwait(&cond, &lock, &deadline) == 0) {
    }
    if (i < nperiodic)
        s = strdup(periodic[i]);
    pthread_mutex_unlock(&lock);
    return s;
}

/* The text after the first "key": at or after p. */
static const char *field(const char *p, const char *key)
{
    char pat[64];
    const char *f;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    f = strstr(p, pat);
    if (f == NULL)
        CHECK_FAIL_("no \"%s\" after: %.200s", key, p);
    return f + strlen(pat);
}

/* The next row object at or after p, before end, or NULL. A plain scan:
 * under ASan every strstr measures what is left of its haystack, which
 * over a 10,000-row section made the comparison quadratic (a minute). */
static const char *next_row(const char *p, const char *end)
{
    static const char pat[] = "{\"name\":\"";

    for (; p + sizeof pat - 1 <= end; p++)
        if (memcmp(p, pat, sizeof pat - 1) == 0)
            return p;
    return NULL;
}

/* Compare the list with the "window" section of a JSON summary, row by
 * row, each row searched in a copy of its own text. */
static void compare(const char *summary, const prof_stage_stats *st, int n)
{
    const char *p = field(summary, "window");
    const char *end = strstr(p, "],\"folded_stages\":");   /* the window's stages end */
    int rows = 0;

    CHECK(end != NULL);
    for (const char *q = next_row(p, end); q != NULL; q = next_row(q + 1, end))
        rows++;
    CHECK_EQ(rows, n);
    p = next_row(p, end);
    for (int i = 0; i < n; i++) {
        const char *next = next_row(p + 1, end);
        char *row = strndup(p, (size_t)((next ? next : end) - p)), name[128];
        const char *r = row + strlen("{\"name\":\"");

        CHECK(row != NULL);
        snprintf(name, sizeof name, "%.*s", (int)(strchr(r, '"') - r), r);
        CHECK_STR_EQ(name, st[i].name);
        CHECK_EQ_U64(strtoull(field(r, "count"), NULL, 10), st[i].count);
        CHECK_EQ_U64(strtoull(field(r, "total_ns"), NULL, 10), st[i].total_ns);
        CHECK_EQ_U64(strtoull(field(r, "self_ns"), NULL, 10), st[i].self_ns);
        CHECK_EQ_U64(strtoull(field(r, "min_ns"), NULL, 10), st[i].min_ns);
        CHECK_EQ_U64(strtoull(field(r, "max_ns"), NULL, 10), st[i].max_ns);
        CHECK_EQ(strtoull(field(r, "depth"), NULL, 10), st[i].depth);
        CHECK_EQ(strtod(field(r, "avg_ns"), NULL), st[i].avg_ns);
        CHECK_EQ(strtod(field(r, "p50_ns"), NULL), st[i].p50_ns);
        CHECK_EQ(strtod(field(r, "p95_ns"), NULL), st[i].p95_ns);
        CHECK_EQ(strtod(field(r, "p99_ns"), NULL), st[i].p99_ns);
        CHECK_EQ(strtod(field(r, "wall_share"), NULL), st[i].wall_share);
        free(row);
        p = next;
    }
}

static void work(int step)
{
    PROF_ZONE("outer");
    {
        PROF_ZONE("inner");
        test_spin_ns(100000u + 37000u * (unsigned)(step % 7));
    }
    if (step <= 5) {
        PROF_ZONE("first_window_only");
        test_spin_ns(50000);
    }
    test_spin_ns(20000);
}

int main(void)
{
    prof_stage_stats st[16];
    uint64_t end = 0;
    int n, step = 0;

    CHECK_EQ(prof_enable(1), 0);
    prof_set_summary_handler(handler, NULL);
    while (step < 4) {
        work(++step);
        prof_step();
    }
    CHECK_EQ(prof_flush(), 0);
    CHECK_EQ(prof_window_stats_list(st, 16, &end), -ENOENT);
    CHECK_EQ(prof_step_count(), 4);

    for (int w = 1; w <= 2; w++) {
        char *text;
        while (step < 5 * w) {
            work(++step);
            prof_step();
        }
        CHECK_EQ(prof_flush(), 0);
        text = periodic_copy(w - 1);
        CHECK_MSG(text != NULL, "no periodic summary for window %d", w);
        n = prof_window_stats_list(st, 16, &end);
        CHECK_EQ(n, 4);          /* its 3 stages and "(no stage)": it steps */
        CHECK_EQ_U64(end, 5u * (unsigned)w);
        CHECK_EQ_U64(test_json_u64(text, "step"), end);
        compare(text, st, n);
        free(text);
        /* The window's own numbers, not the run's. */
        for (int i = 0; i < n; i++)
            if (strcmp(st[i].name, "outer") == 0)
                CHECK_EQ(st[i].count, 5);
    }
    /* The second window has no zone of first_window_only: listed with
     * count 0, as the summary lists it. */
    for (int i = 0; i < n; i++)
        if (strcmp(st[i].name, "first_window_only") == 0)
            CHECK_EQ(st[i].count, 0);
    CHECK_EQ(test_stats("outer").count, 10);
    /* cap smaller than the list: the count is still the whole list. */
    CHECK_EQ(prof_window_stats_list(st, 1, NULL), 4);
    CHECK_EQ(prof_window_stats_list(NULL, 0, NULL), 4);
    CHECK_EQ(prof_window_stats_list(NULL, 1, NULL), -EINVAL);

    /* A window of 12,000 more stages: the list is the JSON section, the
     * 10,000 heaviest and the stages they run inside, not all 12,003
     * (keeping all of them cost the collector a full sort at every
     * window). */
    {
        enum { MANY = 12000 };
        static prof_stage_stats big[MANY + 16];
        char *text;
        while (step < 15) {
            work(++step);
            if (step == 12) {
                for (int i = 0; i < MANY; i++) {
                    char name[32];
                    snprintf(name, sizeof name, "many_%05d", i);
                    PROF_ZONE(prof_intern(name));
                }
            }
            prof_step();
        }
        CHECK_EQ(prof_flush(), 0);
        text = periodic_copy(2);
        CHECK_MSG(text != NULL, "no periodic summary for window 3");
        n = prof_window_stats_list(big, MANY + 16, &end);
        CHECK_EQ_U64(end, 15);
        /* MANY + 3 stages and "(no stage)" (the stepping thread's time
         * between them). */
        CHECK_MSG(n >= 10000 && n < MANY, "%d rows for %d stages", n, MANY + 4);
        CHECK_EQ_U64(test_json_u64(strstr(text, "\"window\""), "folded_stages"),
                     (uint64_t)(MANY + 4 - n));
        compare(text, big, n);
        free(text);
    }

    CHECK_EQ(prof_reset(), 0);
    CHECK_EQ(prof_window_stats_list(st, 16, &end), -ENOENT);
    prof_set_summary_handler(NULL, NULL);
    for (int i = 0; i < nperiodic; i++)
        free(periodic[i]);
    return 0;
}
