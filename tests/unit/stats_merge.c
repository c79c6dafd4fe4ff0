/* stats_merge.c - one stage per name: zones named "merged" through two
 * distinct arrays with the same contents, a string interned from a heap
 * copy and one from a stack buffer, from three threads and two functions,
 * all land in one row whose count is the exact sum. prof_intern() gives one
 * pointer per contents. */
#include <prof.h>

#include "check.h"

/* Distinct objects (unlike two identical literals, which a compiler may
 * fold into one): the runtime must merge them by contents. */
static const char name_a[] = "merged";
static const char name_b[] = "merged";

static long n;

static void zone_a(void)
{
    PROF_ZONE(name_a);
}

static void zone_b(void)
{
    PROF_ZONE(name_b);
}

static void *thread_a(void *arg)
{
    (void)arg;
    for (long i = 0; i < n; i++)
        zone_a();
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    for (long i = 0; i < n; i++)
        zone_b();
    return NULL;
}

static void *thread_interned(void *arg)
{
    char *copy = strdup("merged");
    const char *name;

    (void)arg;
    CHECK(copy != NULL);
    name = prof_intern(copy);
    free(copy);     /* the interned copy outlives the original */
    for (long i = 0; i < n; i++) {
        PROF_ZONE(name);
    }
    return NULL;
}

int main(void)
{
    void *(*fns[3])(void *) = {thread_a, thread_b, thread_interned};
    pthread_t t[3];
    prof_stage_stats rows[16];
    char stack_name[16];
    int nrows, found = 0;

    CHECK((const void *)name_a != (const void *)name_b);
    n = test_scale(10000);

    /* prof_intern: same contents, same pointer; a stable copy. */
    snprintf(stack_name, sizeof stack_name, "%s", "merged");
    CHECK(prof_intern(stack_name) == prof_intern(name_a));
    CHECK(prof_intern(stack_name) != stack_name);
    CHECK(prof_intern("merged!") != prof_intern("merged"));
    CHECK_STR_EQ(prof_intern(""), "");
    CHECK(prof_intern(NULL) == NULL);

    CHECK_EQ(prof_enable(1), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, fns[i], NULL), 0);
    /* And the main thread, through a name on its stack, interned. */
    for (long i = 0; i < n; i++) {
        PROF_ZONE(prof_intern(stack_name));
    }
    zone_a();
    zone_b();
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);

    CHECK_EQ(test_count("merged"), 4 * n + 2);
    CHECK(test_stats(name_b).name == prof_intern("merged"));
    nrows = prof_stats_list(rows, 16);
    CHECK_EQ(nrows, 1);
    for (int i = 0; i < nrows; i++)
        found += strcmp(rows[i].name, "merged") == 0;
    CHECK_EQ(found, 1);
    CHECK_EQ(rows[0].count, 4 * n + 2);
    CHECK_EQ(test_dropped(), 0);
    return 0;
}
