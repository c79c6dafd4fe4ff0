/* fuzz_summary.c - hostile names through the whole runtime to the summary.
 *
 * Input: a name (up to its first NUL byte). It is interned and used as a
 * zone (with a child zone inside), a counter and a mark; then the text and
 * the JSON summaries are taken with prof_summary_snprint(). The text is what
 * reaches a terminal: it must be valid UTF-8 with no control character at
 * all but the newline (no C0, no DEL, no C1 such as U+009B, the 8-bit CSI),
 * and no line may grow with the name (the table cuts names at 48 columns).
 * The JSON summary must be one strict JSON document (json_strict.h) in which
 * the name appears decoded as the name with invalid UTF-8 bytes replaced by
 * U+FFFD, once as the stage, the counter and the mark. */
#include <string.h>

#include "prof.h"
#include "fuzz.h"
#include "json_strict.h"

static void quiet_log(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

static void quiet_summary(void *user, const char *text, int kind)
{
    (void)user;
    (void)text;
    (void)kind;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    prof_set_logger(quiet_log, NULL);
    prof_set_summary_handler(quiet_summary, NULL);
    FUZZ_CHECK(prof_enable(1) == 0, "prof_enable");
    return 0;
}

static char *summary(int format)
{
    size_t cap = 8192;

    for (;;) {
        char *buf = malloc(cap);
        int n;

        FUZZ_CHECK(buf != NULL, "out of memory");
        n = prof_summary_snprint(buf, cap, format);
        FUZZ_CHECK(n >= 0, "prof_summary_snprint: %d", n);
        if ((size_t)n < cap)
            return buf;
        free(buf);
        cap = (size_t)n + 1;
    }
}

struct want {
    const unsigned char *s;
    size_t n;
    int seen;
};

static int on_string(void *ctx, const unsigned char *s, size_t n, int is_key)
{
    struct want *w = ctx;

    if (!is_key && n == w->n && memcmp(s, w->s, n) == 0)
        w->seen++;
    return 0;
}

static void check_text(const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text), cols = 0;
    uint32_t cp;

    FUZZ_CHECK(strncmp(text, "prof summary:", 13) == 0, "text summary header: %.200s", text);
    for (size_t i = 0; i < n;) {
        size_t k = json_utf8_seq(s + i, n - i, &cp);
        FUZZ_CHECK(k != 0, "text summary has invalid UTF-8 at byte %zu", i);
        FUZZ_CHECK(cp == '\n' || (cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp <= 0x9f)),
                   "text summary has control character U+%04X at byte %zu", (unsigned)cp, i);
        if (cp == '\n') {
            /* 48 columns of name, \xNN escapes counted, plus the numbers. */
            FUZZ_CHECK(cols <= 320, "a line of %zu characters: the name was not cut", cols);
            cols = 0;
        } else {
            cols++;
        }
        i += k;
    }
    FUZZ_CHECK(n > 0 && text[n - 1] == '\n', "text summary does not end with a newline");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = strnlen((const char *)data, size), elen = 0;
    char *raw = malloc(n + 1), *text, *json, err[160];
    unsigned char *expect = malloc(3 * n + 1);
    const char *name;
    struct want w;
    prof_zone outer, inner;
    uint32_t cp;

    FUZZ_CHECK(raw != NULL && expect != NULL, "out of memory");
    memcpy(raw, data, n);
    raw[n] = '\0';
    name = prof_intern(raw);
    FUZZ_CHECK(name != NULL && strcmp(name, raw) == 0, "prof_intern");
    for (size_t i = 0; i < n;) {
        size_t k = json_utf8_seq((const unsigned char *)raw + i, n - i, &cp);
        if (k == 0) {
            memcpy(expect + elen, "\xef\xbf\xbd", 3);
            elen += 3;
            i++;
        } else {
            memcpy(expect + elen, raw + i, k);
            elen += k;
            i += k;
        }
    }

    FUZZ_CHECK(prof_reset() == 0, "prof_reset");
    outer = prof_zone_begin(name);
    inner = prof_zone_begin("inner");
    prof_zone_end(&inner);
    prof_zone_end(&outer);
    prof_counter(name, 1.5);
    prof_mark(name);

    text = summary(PROF_FORMAT_TEXT);
    check_text(text);

    json = summary(PROF_FORMAT_JSON);
    w.s = expect;
    w.n = elen;
    w.seen = 0;
    FUZZ_CHECK(json_strict_check(json, strlen(json), on_string, &w, err, sizeof err) == 0,
               "JSON summary not valid: %s", err);
    FUZZ_CHECK(w.seen >= 3, "the name appears %d times in the JSON summary, want 3 or more",
               w.seen);
    FUZZ_CHECK(strchr(json, '\n') == json + strlen(json) - 1, "JSON summary is not one line");

    free(text);
    free(json);
    free(expect);
    free(raw);
    return 0;
}
