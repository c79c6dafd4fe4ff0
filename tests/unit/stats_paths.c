/* stats_paths.c - a row is a call path: a stage run under two parents is
 * shown under each, with its own numbers, so every row's children add up
 * to at most its own child time. `a` runs 50 times under `x` and 4 times
 * under `y` (a model reloaded for its test pass: word_language_model's
 * `model.rnn`); the table and the JSON summary must show `a` under `x`
 * with 50 and under `y` with 4, while what is asked by name
 * (prof_stats("a"), prof_stats_list) is the stage: 54. A recursive stage
 * is one row under its parent. Past the paths that keep a histogram of
 * their own, rows keep their counts and say their distribution is not
 * shown. With PROF_METRICS=FILE.prom (meson.build sets it), the metrics
 * written from the live snapshot label `a` by each path too. */
#include <prof.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* A JSON summary's row, the few fields this test reads. */
struct jrow {
    char name[32];
    unsigned depth;
    long parent_row;             /* -1: null or absent */
    int has_parent_row;
    uint64_t count, total_ns, self_ns;
    int p50_null;
};

static const char *json_field(const char *row, const char *end, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(row, pat);
    return p != NULL && p < end ? p + strlen(pat) : NULL;
}

/* The rows of the section that starts at sec ("total":{...}), at most cap. */
static size_t json_rows(const char *sec, struct jrow *rows, size_t cap)
{
    const char *p = strstr(sec, "\"stages\":[");
    const char *stop = p ? strstr(p, "],\"folded_stages\"") : NULL;
    size_t n = 0;

    CHECK_MSG(p != NULL && stop != NULL, "no stages in %.200s", sec);
    for (p = strstr(p, "{\"name\":\""); p != NULL && p < stop && n < cap;
         p = strstr(p + 1, "{\"name\":\"")) {
        const char *end = strstr(p + 1, "{\"name\":\"");
        const char *v;
        struct jrow *r = &rows[n++];
        size_t len;

        if (end == NULL || end > stop)
            end = stop;
        memset(r, 0, sizeof *r);
        v = p + strlen("{\"name\":\"");
        len = (size_t)(strchr(v, '"') - v);
        CHECK(len < sizeof r->name);
        memcpy(r->name, v, len);
        CHECK((v = json_field(p, end, "depth")) != NULL);
        r->depth = (unsigned)strtoul(v, NULL, 10);
        r->parent_row = -1;
        if ((v = json_field(p, end, "parent_row")) != NULL) {
            r->has_parent_row = 1;
            if (strncmp(v, "null", 4) != 0)
                r->parent_row = strtol(v, NULL, 10);
        }
        CHECK((v = json_field(p, end, "count")) != NULL);
        r->count = strtoull(v, NULL, 10);
        CHECK((v = json_field(p, end, "total_ns")) != NULL);
        r->total_ns = strtoull(v, NULL, 10);
        CHECK((v = json_field(p, end, "self_ns")) != NULL);
        r->self_ns = strtoull(v, NULL, 10);
        CHECK((v = json_field(p, end, "p50_ns")) != NULL);
        r->p50_null = strncmp(v, "null", 4) == 0;
    }
    return n;
}

/* The row named `name` right under the top-level row named `parent`, or
 * -1. Rows are in tree order: a row's children follow it, one deeper. */
static long json_child(const struct jrow *rows, size_t n, const char *parent, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (rows[i].depth != 0 || strcmp(rows[i].name, parent) != 0)
            continue;
        for (size_t k = i + 1; k < n && rows[k].depth > 0; k++)
            if (rows[k].depth == 1 && strcmp(rows[k].name, name) == 0)
                return (long)k;
    }
    return -1;
}

/* Every row's children (the rows after it one level deeper, before the
 * next row at its depth or above) add up to at most its child time. */
static void check_children_fit(const struct jrow *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t kids = 0;

        for (size_t k = i + 1; k < n && rows[k].depth > rows[i].depth; k++) {
            if (rows[k].depth != rows[i].depth + 1)
                continue;
            kids += rows[k].total_ns;
            if (rows[k].has_parent_row)
                CHECK_MSG(rows[k].parent_row == (long)i, "row %zu (%s): parent_row %ld, want %zu",
                          k, rows[k].name, rows[k].parent_row, i);
        }
        CHECK_MSG(kids <= rows[i].total_ns - rows[i].self_ns,
                  "row %zu (%s): its children's totals %llu ns, its child time %llu ns", i,
                  rows[i].name, (unsigned long long)kids,
                  (unsigned long long)(rows[i].total_ns - rows[i].self_ns));
    }
}

/* The count of the text table's row `name` right under the top-level row
 * `parent` (indented by two), or -1. */
static long text_child_count(const char *text, const char *parent, const char *name)
{
    int under = 0;

    for (const char *line = text; line != NULL && *line; line = strchr(line, '\n')) {
        char first[64], count[32];
        int indent = 0;

        if (*line == '\n')
            line++;
        while (line[indent] == ' ')
            indent++;
        if (sscanf(line + indent, "%63s %31s", first, count) != 2)
            continue;
        if (indent == 0) {
            under = strcmp(first, parent) == 0;
        } else if (under && indent == 2 && strcmp(first, name) == 0) {
            return strtol(count, NULL, 10);
        }
    }
    return -1;
}

/* The .prom file the metrics rewrite once a second holds every line of
 * want, within 15 s. */
static void check_metrics(const char *path, const char *const *want, size_t n)
{
    static char text[1 << 16];
    size_t got = 0;

    for (int tries = 0; tries < 150; tries++) {
        FILE *f = fopen(path, "r");

        got = 0;
        if (f != NULL) {
            size_t len = fread(text, 1, sizeof text - 1, f);
            text[len] = '\0';
            fclose(f);
            while (got < n && strstr(text, want[got]) != NULL)
                got++;
            if (got == n)
                return;
        }
        usleep(100000);
    }
    CHECK_MSG(0, "%s lacks \"%s\":\n%s", path, want[got], text);
}

static void recurse(int depth)
{
    PROF_ZONE("r");
    test_spin_ns(2000);
    if (depth > 1)
        recurse(depth - 1);
}

static void two_parents(void)
{
    struct jrow rows[64];
    prof_stage_stats list[16], st;
    char *text, *json;
    const char *total;
    size_t n;
    long k;
    int nl, seen_a = 0;

    CHECK_EQ(prof_reset(), 0);
    for (int i = 0; i < 50; i++) {
        PROF_ZONE("x");
        {
            PROF_ZONE("a");
            test_spin_ns(20000);
        }
        test_spin_ns(2000);
    }
    for (int i = 0; i < 4; i++) {
        PROF_ZONE("y");
        {
            PROF_ZONE("a");
            test_spin_ns(20000);
        }
        test_spin_ns(2000);
    }
    for (int i = 0; i < 3; i++) {
        PROF_ZONE("x");
        recurse(3);
    }

    text = test_summary(PROF_FORMAT_TEXT);
    CHECK_MSG(text_child_count(text, "x", "a") == 50, "a under x is not 50:\n%s", text);
    CHECK_MSG(text_child_count(text, "y", "a") == 4, "a under y is not 4:\n%s", text);
    /* The recursion is one row under x: 9 calls, none under r itself. */
    CHECK_MSG(text_child_count(text, "x", "r") == 9, "r under x is not 9:\n%s", text);
    CHECK_MSG(strstr(text, "\n    r ") == NULL, "r shown under r:\n%s", text);
    free(text);

    json = test_summary(PROF_FORMAT_JSON);
    CHECK((total = strstr(json, "\"total\":{")) != NULL);
    n = json_rows(total, rows, 64);
    k = json_child(rows, n, "x", "a");
    CHECK_MSG(k >= 0 && rows[k].count == 50, "JSON: a under x: %s", json);
    CHECK(!rows[k].p50_null);
    k = json_child(rows, n, "y", "a");
    CHECK_MSG(k >= 0 && rows[k].count == 4, "JSON: a under y: %s", json);
    k = json_child(rows, n, "x", "r");
    CHECK_MSG(k >= 0 && rows[k].count == 9, "JSON: r under x: %s", json);
    for (size_t i = 0; i < n; i++)
        seen_a += strcmp(rows[i].name, "a") == 0;
    CHECK_EQ(seen_a, 2);
    check_children_fit(rows, n);
    free(json);

    /* By name: the stage, every path. */
    st = test_stats("a");
    CHECK_EQ(st.count, 54);
    CHECK_EQ(test_stats("r").count, 9);
    nl = prof_stats_list(list, 16);
    CHECK_EQ(nl, 4);
    for (int i = 0; i < nl; i++)
        if (strcmp(list[i].name, "a") == 0)
            CHECK_EQ(list[i].count, 54);

    if (getenv("PROF_METRICS") != NULL) {
        static const char *const want[] = {
            "prof_stage_count_total{stage=\"x/a\",rank=\"0\"} 50\n",
            "prof_stage_count_total{stage=\"y/a\",rank=\"0\"} 4\n",
            "prof_stage_count_total{stage=\"x/r\",rank=\"0\"} 9\n",
        };
        check_metrics(getenv("PROF_METRICS"), want, 3);
    }
}

/* More paths than keep a histogram: each row still has its own count;
 * those that share their stage's histogram say they show no percentiles,
 * and the stage asked by name has them all. */
static void many_paths(void)
{
    enum { N = 4200 };
    struct jrow *rows = malloc((2 * N + 8) * sizeof *rows);
    char name[32], *text, *json;
    const char *total;
    size_t n, nohist = 0, ones = 0;

    CHECK(rows != NULL);
    CHECK_EQ(prof_reset(), 0);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "p%04d", i);
        prof_zone z = prof_zone_begin(prof_intern(name));
        {
            PROF_ZONE("c");
        }
        prof_zone_end(&z);
    }
    json = test_summary(PROF_FORMAT_JSON);
    CHECK_EQ(test_json_u64(json, "paths_without_hist"), N - 1 - 4096);
    CHECK((total = strstr(json, "\"total\":{")) != NULL);
    n = json_rows(total, rows, 2 * N + 8);
    CHECK_EQ(n, 2 * N);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].name, "c") != 0)
            continue;
        ones += rows[i].count == 1;
        nohist += rows[i].p50_null;
    }
    CHECK_EQ(ones, N);
    /* The stage's first path and those past the bound share its
     * histogram: none of them shows one. */
    CHECK_EQ(nohist, N - 4096);
    check_children_fit(rows, n);
    free(json);
    text = test_summary(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "paths past the 4096 that keep a distribution of their own");
    free(text);
    CHECK_EQ(test_stats("c").count, N);
    CHECK_GT(test_stats("c").p50_ns, 0);
    free(rows);
}

int main(void)
{
    CHECK_EQ(prof_enable(1), 0);
    two_parents();
    many_paths();
    return 0;
}
