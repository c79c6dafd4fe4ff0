/* stages.c - many stage names: STAGES (100,000) distinct names, generated
 * per layer ("layer.00042.fwd") and interned, each recorded inside an
 * outer "model" zone.
 *
 * Checked and measured:
 *  - memory grows with the number of stages only: the heap after the first
 *    pass gives bytes per stage (printed); a second pass that records every
 *    name three more times adds less than 10% of that;
 *  - the text summary stays readable: at most 60 stage rows (plus the
 *    ancestors they need), then one "... N more stages (total ...) not
 *    shown" line whose N makes up the rest, and no line longer than 250
 *    characters;
 *  - the JSON summary is still one strict JSON document (json_strict.h):
 *    the 10,000 heaviest stages (and their ancestors), and folded_stages
 *    counting the rest;
 *  - every zone counted, nothing dropped.
 * The time to format each summary is printed too. */
#include <stdlib.h>
#include <string.h>

#include <prof.h>

#include "../unit/check.h"
#include "../fuzz/json_strict.h"
#include "load.h"

static const char **names;

static void pass(long stages, int repeat)
{
    PROF_ZONE("model");
    for (long i = 0; i < stages; i++) {
        for (int r = 0; r < repeat; r++) {
            PROF_ZONE(names[i]);
        }
        if (i % 5000 == 4999)
            prof_flush();   /* keep the ring from filling: this test is about names */
    }
}

static int count_stage_keys(void *ctx, const unsigned char *s, size_t n, int is_key)
{
    /* "gpu" is a key of stage objects only (docs/FORMATS.md). */
    if (is_key && n == 3 && memcmp(s, "gpu", 3) == 0)
        ++*(long *)ctx;
    return 0;
}

int main(int argc, char **argv)
{
    long stages = argc > 1 ? atol(argv[1]) : 100000;
    size_t heap0, heap1, heap2;
    long rss0, rss1, rows = 0, folded = -1, json_stages = 0, longest = 0;
    uint64_t t;
    char *text, *json, err[160], name[64];
    const char *line, *fold;

    CHECK(prof_enabled());
    { PROF_ZONE("warmup"); }
    prof_flush();
    heap0 = load_heap_bytes();
    rss0 = load_rss_kb();
    names = malloc((size_t)stages * sizeof *names);
    CHECK(names != NULL);
    for (long i = 0; i < stages; i++) {
        snprintf(name, sizeof name, "layer.%05ld.fwd", i);
        CHECK((names[i] = prof_intern(name)) != NULL);
    }

    pass(stages, 1);
    CHECK_EQ(prof_flush(), 0);
    heap1 = load_heap_bytes() - stages * sizeof *names;
    rss1 = load_rss_kb();
    pass(stages, 3);
    CHECK_EQ(prof_flush(), 0);
    heap2 = load_heap_bytes() - stages * sizeof *names;

    FIGURE("stages.count", "stages", "%ld", stages);
    FIGURE("stages.heap_per_stage", "bytes", "%.0f", (double)(heap1 - heap0) / stages);
    FIGURE("stages.rss_per_stage", "bytes", "%.0f", (rss1 - rss0) * 1024.0 / stages);
    FIGURE("stages.heap_second_pass", "bytes", "%ld", (long)heap2 - (long)heap1);
    CHECK_MSG((long)heap2 - (long)heap1 < (long)(heap1 - heap0) / 10,
              "recording the same %ld names again grew the heap by %ld bytes", stages,
              (long)heap2 - (long)heap1);
    CHECK_EQ(test_count(names[0]), 4);
    CHECK_EQ(test_count(names[stages - 1]), 4);
    CHECK_EQ(test_count("model"), 2);
    CHECK_EQ(test_dropped(), 0);

    t = test_now_ns();
    text = test_summary(PROF_FORMAT_TEXT);
    FIGURE("stages.text_summary_ms", "ms", "%.0f", (test_now_ns() - t) / 1e6);
    /* Rows: the lines after the "stage ... wall%" header up to the fold. */
    line = strstr(text, "\nstage ");
    CHECK(line != NULL);
    line = strchr(line + 1, '\n') + 1;
    for (; *line != '\0'; line = strchr(line, '\n') + 1) {
        const char *eol = strchr(line, '\n');
        CHECK(eol != NULL);
        if (eol - line > longest)
            longest = eol - line;
        if (strncmp(line, "... ", 4) == 0) {
            folded = atol(line + 4);
            break;
        }
        rows++;
    }
    fold = strstr(text, "... ");
    printf("text summary: %ld rows, then: %.*s\n", rows, fold ? (int)strcspn(fold, "\n") : 0,
           fold ? fold : "");
    FIGURE("stages.text_rows", "rows", "%ld", rows);
    CHECK_LE(rows, 62);
    CHECK_MSG(folded >= 0 && strstr(fold, " more stages (total ") != NULL,
              "no \"... N more stages\" line");
    CHECK_EQ(rows + folded, stages + 2);   /* + "model" and "warmup" */
    CHECK_LE(longest, 250);
    CHECK_LE(strlen(text), 64 * 1024);

    t = test_now_ns();
    json = test_summary(PROF_FORMAT_JSON);
    FIGURE("stages.json_summary_ms", "ms", "%.0f", (test_now_ns() - t) / 1e6);
    FIGURE("stages.json_summary_bytes", "bytes", "%zu", strlen(json));
    CHECK_MSG(json_strict_check(json, strlen(json), count_stage_keys, &json_stages, err,
                                sizeof err) == 0, "JSON summary: %s", err);
    /* The JSON keeps the 10,000 heaviest stages and counts the rest. */
    {
        const char *f = strstr(json, "\"folded_stages\":");
        long json_folded = f ? atol(f + 16) : -1;
        long shown = stages + 2 < 10000 ? stages + 2 : 10000;

        CHECK_EQ(json_stages, shown);
        CHECK_EQ(json_folded, stages + 2 - shown);
    }
    free(text);
    free(json);
    free(names);
    return 0;
}
