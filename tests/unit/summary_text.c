/* summary_text.c - the table a user reads: a header line (program, pid,
 * steps, wall, threads, dropped, clock), the column titles in order (stage
 * count total self avg p50 p95 p99 max wall%), one row per stage in tree
 * order with nested stages indented two spaces per level under their
 * parent, the counters (count last min max avg, exact) and the marks.
 * Also prof_summary_snprint()'s snprintf contract and argument checks. */
#include <prof.h>

#include "check.h"

/* The line of text that starts with prefix (after indentation of exactly
 * indent spaces), copied into out; exits when there is none. */
static void find_row(const char *text, const char *name, int indent, char *out, size_t size)
{
    for (const char *line = text; *line; ) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int sp = 0;
        while (line[sp] == ' ')
            sp++;
        if (sp == indent && strncmp(line + sp, name, strlen(name)) == 0 &&
            line[sp + (int)strlen(name)] == ' ') {
            snprintf(out, size, "%.*s", (int)len, line);
            return;
        }
        line += len + (end != NULL);
    }
    CHECK_MSG(0, "no row \"%s\" indented %d in:\n%s", name, indent, text);
}

/* The row without its last column, peak+ ("0", "-", or bytes: "1.20 MiB"). */
static void drop_peak(char *row)
{
    char *sp = strrchr(row, ' ');

    CHECK(sp != NULL);
    if (strcmp(sp, " B") == 0 || strcmp(sp + 2, "iB") == 0) {
        *sp = '\0';
        sp = strrchr(row, ' ');
        CHECK(sp != NULL);
    }
    CHECK(strcmp(sp, " 0") == 0 || strcmp(sp, " -") == 0 || (sp[1] >= '0' && sp[1] <= '9'));
    while (sp > row && sp[-1] == ' ')
        sp--;
    *sp = '\0';
}

static size_t line_index(const char *text, const char *row)
{
    const char *p = strstr(text, row);

    CHECK(p != NULL);
    return (size_t)(p - text);
}

int main(void)
{
    char *text, *json, row[512], small[10];
    const char *cols[] = {"stage", "count", "total", "self", "avg", "p50", "p95", "p99", "max",
                          "wall%", "cpu%", "peak+"};
    const char *p;
    prof_counter_stats cs, clist[4];
    int n;

    CHECK_EQ(prof_enable(1), 0);
    for (int i = 0; i < 5; i++) {
        PROF_ZONE("outer");
        {
            PROF_ZONE("mid");
            test_spin_ns(20000);
            {
                PROF_ZONE("leaf");
                test_spin_ns(50000);
            }
        }
        {
            PROF_ZONE("sibling");
            test_spin_ns(10000);
        }
        prof_step();
    }
    {
        PROF_ZONE("lonely");
    }
    PROF_COUNTER("loss", 2.0);
    PROF_COUNTER("loss", 1.0);
    PROF_COUNTER("loss", 3.0);
    PROF_COUNTER("lr", 0.5);
    PROF_MARK("epoch");
    PROF_MARK("epoch");

    text = test_summary(PROF_FORMAT_TEXT);
    fprintf(stderr, "%s", text);
    CHECK(strncmp(text, "prof summary: ", 14) == 0);
    CHECK_STR_CONTAINS(text, "(pid ");
    CHECK_STR_CONTAINS(text, "5 steps");
    /* Singular for one (issue 19: "1 threads"). */
    CHECK_STR_CONTAINS(text, ", 1 thread, ");
    CHECK_STR_CONTAINS(text, "0 dropped");
    CHECK_STR_CONTAINS(text, "clock ");

    /* The column titles, in order, on the second line. */
    p = strchr(text, '\n');
    CHECK(p != NULL);
    p++;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        const char *q = strstr(p, cols[i]);
        CHECK_MSG(q != NULL && q < strchr(p, '\n'), "column %s missing or out of order", cols[i]);
        p = q + strlen(cols[i]);
    }

    /* Tree order and indentation; each row has its count and ends in its
     * cpu%, or '-' where its self time is too short to sample (these
     * stages' are), before its peak+. */
    find_row(text, "outer", 0, row, sizeof row);
    CHECK_STR_CONTAINS(row, " 5 ");
    drop_peak(row);
    CHECK(row[strlen(row) - 1] == '%' || row[strlen(row) - 1] == '-');
    find_row(text, "mid", 2, row, sizeof row);
    CHECK_STR_CONTAINS(row, " 5 ");
    find_row(text, "leaf", 4, row, sizeof row);
    CHECK_STR_CONTAINS(row, " 5 ");
    drop_peak(row);
    CHECK(row[strlen(row) - 1] == '%' || row[strlen(row) - 1] == '-');
    find_row(text, "sibling", 2, row, sizeof row);
    find_row(text, "lonely", 0, row, sizeof row);
    CHECK(line_index(text, "\nouter ") < line_index(text, "\n  mid "));
    CHECK(line_index(text, "\n  mid ") < line_index(text, "\n    leaf "));
    /* Children sorted by total: mid (70 us each) before sibling (10 us),
     * unless the machine preempted a sibling for longer than that: the
     * rule checked is the order of the totals the table shows, whichever
     * way a busy machine made them. */
    {
        prof_stage_stats mid, sib;

        CHECK_EQ(prof_stats("mid", &mid), 0);
        CHECK_EQ(prof_stats("sibling", &sib), 0);
        if (mid.total_ns > sib.total_ns)
            CHECK(line_index(text, "\n    leaf ") < line_index(text, "\n  sibling "));
        else
            CHECK(line_index(text, "\n  sibling ") < line_index(text, "\n  mid "));
    }

    /* Counters and marks. */
    find_row(text, "counter", 0, row, sizeof row);
    find_row(text, "loss", 0, row, sizeof row);
    {
        unsigned long long cnt;
        double last, min, max, avg;
        CHECK_EQ(sscanf(row, "loss %llu %lf %lf %lf %lf", &cnt, &last, &min, &max, &avg), 5);
        CHECK_EQ(cnt, 3);
        CHECK(last == 3.0 && min == 1.0 && max == 3.0 && avg == 2.0);
    }
    CHECK_STR_CONTAINS(text, "marks:");
    CHECK_STR_CONTAINS(text, "epoch x2");
    free(text);

    CHECK_EQ(prof_counter_stats_get("loss", &cs), 0);
    CHECK_EQ(cs.count, 3);
    CHECK(cs.last == 3.0 && cs.min == 1.0 && cs.max == 3.0 && cs.avg == 2.0);
    CHECK_EQ(prof_counter_stats_get("nope", &cs), -ENOENT);
    CHECK_EQ(prof_counter_stats_get(NULL, &cs), -EINVAL);
    n = prof_counter_stats_list(clist, 4);
    CHECK_EQ(n, 2);
    CHECK_STR_EQ(clist[0].name, "loss");
    CHECK_STR_EQ(clist[1].name, "lr");
    CHECK_EQ(prof_counter_stats_list(NULL, 0), 2);

    /* snprintf contract. */
    n = prof_summary_snprint(NULL, 0, PROF_FORMAT_TEXT);
    CHECK_GT(n, 100);
    /* The header's wall time moves between two calls ("9.99 ms", then
     * "10.00 ms"), so the length may differ by a character or two. */
    {
        int m = prof_summary_snprint(small, sizeof small, PROF_FORMAT_TEXT);
        CHECK(m >= n - 4 && m <= n + 4);
    }
    CHECK_EQ(strlen(small), sizeof small - 1);
    CHECK(strncmp(small, "prof summ", 9) == 0);
    CHECK_EQ(prof_summary_snprint(NULL, 5, PROF_FORMAT_TEXT), -EINVAL);
    CHECK_EQ(prof_summary_snprint(small, sizeof small, 7), -EINVAL);
    CHECK_EQ(prof_summary_print(NULL), -EINVAL);
    CHECK_EQ(prof_stats(NULL, NULL), -EINVAL);
    CHECK_EQ(prof_stats_list(NULL, 3), -EINVAL);
    /* Five stages and "(no stage)": the thread steps, and its time
     * between "outer" and "lonely" is outside every zone. */
    CHECK_EQ(prof_stats_list(NULL, 0), 6);
    {
        prof_stage_stats st;
        CHECK_EQ(prof_stats("no such stage", &st), -ENOENT);
    }

    /* The JSON form: one line, one object, kind "demand". */
    json = test_summary(PROF_FORMAT_JSON);
    CHECK(strncmp(json, "{\"prof\":\"summary\"", 17) == 0);
    CHECK(strchr(json, '\n') == json + strlen(json) - 1);
    CHECK_STR_CONTAINS(json, "\"kind\":\"demand\"");
    CHECK_STR_CONTAINS(json, "\"name\":\"leaf\",\"parent\":\"mid\",\"depth\":2");
    free(json);

    /* prof_summary_print writes the same table to a stream. */
    {
        FILE *f = tmpfile();
        long size;
        CHECK(f != NULL);
        CHECK_EQ(prof_summary_print(f), 0);
        size = ftell(f);
        CHECK_GT(size, 100);
        fclose(f);
    }
    return 0;
}
