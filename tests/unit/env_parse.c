/* env_parse.c - the environment parser (src/base/env.c and src/base/log.c compiled
 * into this test): every variable with good values, and with bad ones
 * (negative, overflowing, junk suffixes, wrong case, empty strings where a
 * number is needed, terminal escapes, a huge value). A bad value gives
 * exactly one message naming the variable and the value, printable and
 * bounded in length, and the default is used. */
#include <prof.h>

#include "env.h"
#include "log.h"
#include "check.h"

/* ------------------------------------------------------------------------ */
/* The value parsers. */

static void size_ok(const char *s, uint64_t want)
{
    uint64_t v = 12345;

    CHECK_MSG(prof_parse_size(s, &v) == 0, "prof_parse_size(\"%s\") refused", s);
    CHECK_MSG(v == want, "prof_parse_size(\"%s\") = %" PRIu64 ", want %" PRIu64, s, v, want);
}

static void size_bad(const char *s)
{
    uint64_t v = 12345;
    int err = prof_parse_size(s, &v);

    CHECK_MSG(err == -EINVAL || err == -ERANGE, "prof_parse_size(\"%s\") = %d, want an error", s,
              err);
}

static void every_ok(const char *s, uint64_t ns, uint64_t steps)
{
    uint64_t a = 1, b = 1;

    CHECK_MSG(prof_parse_every(s, &a, &b) == 0, "prof_parse_every(\"%s\") refused", s);
    CHECK_MSG(a == ns && b == steps, "prof_parse_every(\"%s\") = %" PRIu64 " ns, %" PRIu64
              " steps", s, a, b);
}

static void every_bad(const char *s)
{
    uint64_t a, b;
    int err = prof_parse_every(s, &a, &b);

    CHECK_MSG(err == -EINVAL || err == -ERANGE, "prof_parse_every(\"%s\") = %d, want an error", s,
              err);
}

static void range_ok(const char *s, uint64_t first, uint64_t last)
{
    uint64_t a, b;

    CHECK_MSG(prof_parse_range(s, &a, &b) == 0, "prof_parse_range(\"%s\") refused", s);
    CHECK_MSG(a == first && b == last, "prof_parse_range(\"%s\") = %" PRIu64 "-%" PRIu64, s, a, b);
}

static void range_bad(const char *s)
{
    uint64_t a, b;
    int err = prof_parse_range(s, &a, &b);

    CHECK_MSG(err == -EINVAL || err == -ERANGE, "prof_parse_range(\"%s\") = %d, want an error", s,
              err);
}

static void test_parsers(void)
{
    size_ok("0", 0);
    size_ok("16", 16);
    size_ok("4096", 4096);
    size_ok("64k", 65536);
    size_ok("64K", 65536);
    size_ok("1M", 1048576);
    size_ok("1m", 1048576);
    size_ok("2G", 2147483648u);
    size_ok("18446744073709551615", UINT64_MAX);
    size_ok("0016", 16);
    size_bad("");
    size_bad("-1");
    size_bad("+1");
    size_bad(" 1");
    size_bad("1 ");
    size_bad("1kb");
    size_bad("1.5");
    size_bad("1e3");
    size_bad("0x10");
    size_bad("k");
    size_bad("18446744073709551616");        /* 2^64: overflows the digits */
    size_bad("99999999999999999999999999");
    size_bad("17179869184G");                /* 2^34 G = 2^64: overflows the multiply */
    size_bad("16\n");

    every_ok("10s", 10000000000ull, 0);
    every_ok("500ms", 500000000ull, 0);
    every_ok("250us", 250000, 0);
    every_ok("1000ns", 1000, 0);
    every_ok("2m", 120000000000ull, 0);
    every_ok("2min", 120000000000ull, 0);
    every_ok("1h", 3600000000000ull, 0);
    every_ok("100steps", 0, 100);
    every_ok("1step", 0, 1);
    every_ok("off", 0, 0);
    every_ok("0", 0, 0);
    every_bad("");
    every_bad("10");                         /* seconds or steps? refused */
    every_bad("0s");
    every_bad("0steps");
    every_bad("-5s");
    every_bad("5 s");
    every_bad("5sec");
    every_bad("10s junk");
    every_bad("steps");
    every_bad("s");
    every_bad("1.5s");
    every_bad("99999999999999999999s");
    every_bad("18446744073709551615h");      /* overflows in ns */
    /* Periods that fit in 64 bits but wrap when the collector adds them to
     * a clock reading (a summary at every wake): refused past 2^63 ns. */
    every_bad("5124095h");
    every_bad("18446744073709551615ns");
    every_bad("9223372036854775808ns");
    every_bad("2562048h");
    every_ok("9223372036854775807ns", 9223372036854775807ull, 0);
    every_ok("2562047h", 2562047ull * 3600000000000ull, 0);
    every_bad("99999999999999999999steps");
    every_ok("18446744073709551615steps", 0, UINT64_MAX);
    every_bad("OFF1");

    range_ok("5-9", 5, 9);
    range_ok("5-", 5, UINT64_MAX);
    range_ok("5", 5, 5);
    range_bad("-9");      /* a negative step, not 0-9 */
    range_bad("-1");
    range_bad("-");
    range_ok("0-0", 0, 0);
    range_ok("7-7", 7, 7);
    range_bad("");
    range_bad("9-5");
    range_bad("a-b");
    range_bad("5-9x");
    range_bad("5--9");
    range_bad("5-a");
    range_bad(" 5-9");
    range_bad("5 - 9");
    range_bad("99999999999999999999-1");
    range_bad("1-99999999999999999999");
    range_bad("+5-9");
}

/* ------------------------------------------------------------------------ */
/* The whole configuration, from a table standing in for the environment. */

static const char *const *env_table;
static char messages[8][2048];
static int nmessages;

static const char *lookup(const char *name)
{
    for (const char *const *p = env_table; p != NULL && *p != NULL; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static void logger(void *user, const char *msg)
{
    (void)user;
    if (nmessages < 8)
        snprintf(messages[nmessages], sizeof messages[0], "%s", msg);
    nmessages++;
}

/* Parse with the given variables; returns the number of bad values. */
static int parse(struct prof_config *cfg, const char *const *table)
{
    int bad;

    env_table = table;
    nmessages = 0;
    prof_config_clear(cfg);         /* the previous parse's strings */
    bad = prof_config_parse(cfg, lookup);
    CHECK_EQ(bad, nmessages);
    return bad;
}

static void check_defaults_except(const struct prof_config *cfg, const char *var)
{
    if (strcmp(var, "PROF") != 0)
        CHECK_EQ(cfg->prof, PROF_SWITCH_UNSET);
    if (strcmp(var, "PROF_SUMMARY") != 0) {
        CHECK_EQ(cfg->summary_to, PROF_TO_STDERR);
        CHECK(cfg->summary_path == NULL);
    }
    if (strcmp(var, "PROF_SUMMARY_EVERY") != 0) {
        CHECK_EQ(cfg->every_ns, 0);
        CHECK_EQ(cfg->every_steps, 0);
    }
    if (strcmp(var, "PROF_SUMMARY_FORMAT") != 0)
        CHECK_EQ(cfg->format, PROF_FORMAT_TEXT);
    if (strcmp(var, "PROF_BUFFER") != 0) {
        CHECK_EQ(cfg->buffer, PROF_BUFFER_DEFAULT);
        CHECK_EQ(cfg->buffer_warm, PROF_BUFFER_DEFAULT_WARM);   /* 1 MB resident of 4 */
    }
    if (strcmp(var, "PROF_TRACE") != 0)
        CHECK(cfg->trace_path == NULL);
    if (strcmp(var, "PROF_TRACE_STEPS") != 0) {
        CHECK_EQ(cfg->trace_step_first, 0);
        CHECK_EQ_U64(cfg->trace_step_last, UINT64_MAX);
    }
    if (strcmp(var, "PROF_TRACE_MAX_MB") != 0)
        CHECK_EQ(cfg->trace_max_bytes, 0);
    if (strcmp(var, "PROF_CUDA") != 0)
        CHECK_EQ(cfg->cuda, PROF_CUDA_AUTO);
    if (strcmp(var, "PROF_NVTX") != 0)
        CHECK_EQ(cfg->nvtx, 0);
    if (strcmp(var, "PROF_CPU") != 0)
        CHECK_EQ(cfg->cpu, 1);
}

/* One good value: no message, the field set, everything else default. */
static void good(const char *var, const char *value, struct prof_config *cfg)
{
    const char *table[] = {var, value, NULL};

    CHECK_MSG(parse(cfg, table) == 0, "%s=\"%s\" refused: %s", var, value, messages[0]);
    check_defaults_except(cfg, var);
}

/* One bad value: exactly one message, naming the variable and showing the
 * value (escaped), one line, bounded; every field at its default. */
static void bad(const char *var, const char *value, const char *shown)
{
    const char *table[] = {var, value, NULL};
    struct prof_config cfg = {0};

    CHECK_MSG(parse(&cfg, table) == 1, "%s=\"%s\" accepted", var, value);
    CHECK_EQ(nmessages, 1);
    check_defaults_except(&cfg, "");
    CHECK_MSG(strstr(messages[0], var) != NULL, "message does not name %s: %s", var, messages[0]);
    CHECK_MSG(strstr(messages[0], shown) != NULL, "message does not show \"%s\": %s", shown,
              messages[0]);
    CHECK_MSG(strchr(messages[0], '\n') == NULL, "message spans lines: %s", messages[0]);
    for (const char *p = messages[0]; *p; p++)
        CHECK_MSG((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
                  "message has byte 0x%02x: %s", (unsigned char)*p, messages[0]);
    CHECK_MSG(strlen(messages[0]) < 400, "message of %zu bytes", strlen(messages[0]));
    prof_config_clear(&cfg);
}

static void test_config(void)
{
    struct prof_config cfg = {0};
    static char huge[100001];

    CHECK_EQ(parse(&cfg, NULL), 0);
    check_defaults_except(&cfg, "");
    prof_config_clear(&cfg);

    static const char *on[] = {"1", "on", "true", "yes", "ON", "True", "YES"};
    static const char *off[] = {"0", "off", "false", "no", "OFF", "No"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        good("PROF", on[i], &cfg);
        CHECK_EQ(cfg.prof, PROF_SWITCH_ON);
        prof_config_clear(&cfg);
    }
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        good("PROF", off[i], &cfg);
        CHECK_EQ(cfg.prof, PROF_SWITCH_OFF);
        prof_config_clear(&cfg);
    }
    bad("PROF", "2", "\"2\"");
    bad("PROF", "-1", "\"-1\"");
    bad("PROF", "onn", "\"onn\"");
    bad("PROF", " 1", "\" 1\"");
    bad("PROF", "1\n", "1\\x0a");
    bad("PROF", "\x1b[31mred", "\\x1b[31mred");     /* a terminal escape is shown, not sent */
    bad("PROF", "%s%n%s", "%s%n%s");                 /* shown literally, never interpreted */
    bad("PROF", "\"quoted\"", "\\x22quoted\\x22");
    bad("PROF", "\xff\xfe", "\\xff\\xfe");

    good("PROF_SUMMARY", "stderr", &cfg);
    CHECK_EQ(cfg.summary_to, PROF_TO_STDERR);
    good("PROF_SUMMARY", "stdout", &cfg);
    CHECK_EQ(cfg.summary_to, PROF_TO_STDOUT);
    good("PROF_SUMMARY", "-", &cfg);
    CHECK_EQ(cfg.summary_to, PROF_TO_STDOUT);
    good("PROF_SUMMARY", "off", &cfg);
    CHECK_EQ(cfg.summary_to, PROF_TO_OFF);
    good("PROF_SUMMARY", "0", &cfg);
    CHECK_EQ(cfg.summary_to, PROF_TO_OFF);
    good("PROF_SUMMARY", "/tmp/run-%p.txt", &cfg);
    CHECK_EQ(cfg.summary_to, PROF_TO_FILE);
    CHECK_STR_EQ(cfg.summary_path, "/tmp/run-%p.txt");
    prof_config_clear(&cfg);

    good("PROF_SUMMARY_EVERY", "100steps", &cfg);
    CHECK_EQ(cfg.every_steps, 100);
    good("PROF_SUMMARY_EVERY", "10s", &cfg);
    CHECK_EQ_U64(cfg.every_ns, 10000000000ull);
    good("PROF_SUMMARY_EVERY", "off", &cfg);
    bad("PROF_SUMMARY_EVERY", "10", "\"10\"");
    bad("PROF_SUMMARY_EVERY", "-10s", "\"-10s\"");
    bad("PROF_SUMMARY_EVERY", "0steps", "\"0steps\"");
    bad("PROF_SUMMARY_EVERY", "10 steps", "\"10 steps\"");
    bad("PROF_SUMMARY_EVERY", "99999999999999999999999steps", "99999999999");
    bad("PROF_SUMMARY_EVERY", "18446744073709551615h", "18446744073709551615h");
    bad("PROF_SUMMARY_EVERY", "5124095h", "\"5124095h\"");
    bad("PROF_SUMMARY_EVERY", "18446744073709551615ns", "\"18446744073709551615ns\"");

    good("PROF_SUMMARY_FORMAT", "text", &cfg);
    CHECK_EQ(cfg.format, PROF_FORMAT_TEXT);
    good("PROF_SUMMARY_FORMAT", "json", &cfg);
    CHECK_EQ(cfg.format, PROF_FORMAT_JSON);
    bad("PROF_SUMMARY_FORMAT", "xml", "\"xml\"");
    bad("PROF_SUMMARY_FORMAT", "json ", "\"json \"");

    good("PROF_BUFFER", "16", &cfg);
    CHECK_EQ(cfg.buffer, 16);
    good("PROF_BUFFER", "17", &cfg);
    CHECK_EQ(cfg.buffer, 32);                        /* rounded up to a power of two */
    good("PROF_BUFFER", "100", &cfg);
    CHECK_EQ(cfg.buffer, 128);
    good("PROF_BUFFER", "64k", &cfg);
    CHECK_EQ(cfg.buffer, 65536);
    CHECK_EQ(cfg.buffer_warm, 65536);                /* a ring the user sized: all resident */
    good("PROF_BUFFER", "16M", &cfg);
    CHECK_EQ(cfg.buffer, PROF_BUFFER_MAX);
    bad("PROF_BUFFER", "0", "\"0\"");
    bad("PROF_BUFFER", "15", "\"15\"");
    bad("PROF_BUFFER", "-1", "\"-1\"");
    bad("PROF_BUFFER", "64q", "\"64q\"");
    bad("PROF_BUFFER", "17M", "\"17M\"");
    bad("PROF_BUFFER", "1G", "\"1G\"");
    bad("PROF_BUFFER", "99999999999999999999999", "99999999999");
    bad("PROF_BUFFER", "1k1", "\"1k1\"");

    good("PROF_TRACE", "/tmp/t-%p.json", &cfg);
    CHECK_STR_EQ(cfg.trace_path, "/tmp/t-%p.json");
    prof_config_clear(&cfg);

    good("PROF_TRACE_STEPS", "5-9", &cfg);
    CHECK_EQ(cfg.trace_step_first, 5);
    CHECK_EQ(cfg.trace_step_last, 9);
    good("PROF_TRACE_STEPS", "100-", &cfg);
    CHECK_EQ(cfg.trace_step_first, 100);
    CHECK_EQ_U64(cfg.trace_step_last, UINT64_MAX);
    bad("PROF_TRACE_STEPS", "9-5", "\"9-5\"");
    bad("PROF_TRACE_STEPS", "five", "\"five\"");
    bad("PROF_TRACE_STEPS", "5-9x", "\"5-9x\"");
    bad("PROF_TRACE_STEPS", "99999999999999999999999-", "9999999");

    good("PROF_TRACE_MAX_MB", "1", &cfg);
    CHECK_EQ(cfg.trace_max_bytes, 1024 * 1024);
    good("PROF_TRACE_MAX_MB", "0", &cfg);
    CHECK_EQ(cfg.trace_max_bytes, 0);
    good("PROF_TRACE_MAX_MB", "4096", &cfg);
    CHECK_EQ_U64(cfg.trace_max_bytes, 4096ull << 20);
    bad("PROF_TRACE_MAX_MB", "-1", "\"-1\"");
    bad("PROF_TRACE_MAX_MB", "1.5", "\"1.5\"");
    bad("PROF_TRACE_MAX_MB", "lots", "\"lots\"");
    bad("PROF_TRACE_MAX_MB", "17592186044416", "17592186044416");    /* 2^44 MB = 2^64 bytes */

    good("PROF_CUDA", "auto", &cfg);
    CHECK_EQ(cfg.cuda, PROF_CUDA_AUTO);
    good("PROF_CUDA", "0", &cfg);
    CHECK_EQ(cfg.cuda, PROF_CUDA_OFF);
    good("PROF_CUDA", "1", &cfg);
    CHECK_EQ(cfg.cuda, PROF_CUDA_ON);
    bad("PROF_CUDA", "2", "\"2\"");
    bad("PROF_CUDA", "gpu", "\"gpu\"");

    good("PROF_NVTX", "1", &cfg);
    CHECK_EQ(cfg.nvtx, 1);
    good("PROF_NVTX", "0", &cfg);
    CHECK_EQ(cfg.nvtx, 0);
    bad("PROF_NVTX", "2", "\"2\"");
    good("PROF_CPU", "0", &cfg);
    CHECK_EQ(cfg.cpu, 0);
    good("PROF_CPU", "1", &cfg);
    CHECK_EQ(cfg.cpu, 1);
    bad("PROF_CPU", "sometimes", "\"sometimes\"");
    prof_config_clear(&cfg);

    /* A huge value: one short line, cut with "...". */
    memset(huge, 'x', sizeof huge - 1);
    bad("PROF_BUFFER", huge, "xxxxxxxxxx...");

    /* Several bad values: one message each. */
    {
        const char *table[] = {"PROF", "maybe", "PROF_BUFFER", "7", "PROF_SUMMARY_EVERY", "10",
                               "PROF_TRACE_STEPS", "x", "PROF_SUMMARY_FORMAT", "yaml",
                               "PROF_TRACE_MAX_MB", "-", "PROF_CUDA", "no way", "PROF_NVTX", "?",
                               NULL};
        CHECK_EQ(parse(&cfg, table), 8);
        check_defaults_except(&cfg, "");
        prof_config_clear(&cfg);
        prof_config_clear(&cfg);     /* clearing twice is harmless */
    }
}

/* prof_log_quote: what a message shows of a user's value. */
static void quote_is(const char *v, size_t size, const char *want)
{
    char buf[256];

    prof_log_quote(buf, size, v);
    CHECK_MSG(strcmp(buf, want) == 0, "quote(\"%s\", %zu) = \"%s\", want \"%s\"", v, size, buf,
              want);
}

static void test_quote(void)
{
    char big[400], buf[PROF_LOG_QUOTE_SIZE];

    quote_is("libz.so.1", 96, "libz.so.1");
    quote_is("\x1b[31mred", 96, "\\x1b[31mred");
    quote_is("a\"b\\c\n\xc3\xa9", 96, "a\\x22b\\x5cc\\x0a\\xc3\\xa9");
    quote_is("", 96, "");
    quote_is(NULL, 96, "(null)");
    quote_is("0123456789abcdef", 17, "0123456789abcdef");          /* fits exactly */
    quote_is("0123456789abcdefg", 17, "0123456...bcdefg");          /* head ... tail */
    memset(big, 'A', 300);
    strcpy(big + 300, "/libz.so.1");
    prof_log_quote(buf, sizeof buf, big);
    CHECK(strlen(buf) < sizeof buf && strstr(buf, "...") != NULL);
    CHECK(strncmp(buf, "AAAA", 4) == 0 && strcmp(buf + strlen(buf) - 10, "/libz.so.1") == 0);
    /* Every size, escapes at every boundary: within size, printable, and
     * either the whole escaped value or head...tail. */
    for (size_t size = 16; size < 120; size++)
        for (int shift = 0; shift < 8; shift++) {
            char v[200], out[200];
            size_t n = 0;

            for (int i = 0; i < 150; i++)
                v[n++] = (char)((i + shift) % 5 == 0 ? 0x01 : 'a' + i % 26);
            v[n] = '\0';
            prof_log_quote(out, size, v);
            CHECK_MSG(strlen(out) < size, "size %zu: %zu characters", size, strlen(out));
            for (const char *p = out; *p; p++)
                CHECK_MSG(*p >= 0x20 && *p < 0x7f, "size %zu: raw byte %#x", size, *p);
            CHECK_MSG(strstr(out, "...") != NULL, "size %zu: not shortened", size);
        }
}

/* prof_log_value: NAME="value", the value within PROF_LOG_VALUE_MAX
 * characters; prof_log_dlerror: the loader's text without the name. */
static void test_value(void)
{
    static char big[4001];
    char buf[PROF_LOG_VALUE_SIZE], r[PROF_LOG_QUOTE_SIZE];
    size_t n;

    for (size_t i = 0; i < 4000; i++)
        big[i] = (char)(i % 7 == 0 ? 0xff : i % 11 == 0 ? '\n' : 'a' + i % 26);
    prof_log_value(buf, sizeof buf, "PROF_CUPTI_LIB", big);
    n = strlen(buf);
    CHECK_MSG(strncmp(buf, "PROF_CUPTI_LIB=\"", 16) == 0 && buf[n - 1] == '"', "%s", buf);
    CHECK_MSG(n - 17 <= PROF_LOG_VALUE_MAX && strstr(buf, "...") != NULL, "%zu: %s", n, buf);
    prof_log_value(buf, sizeof buf, "PROF", "maybe");
    CHECK(strcmp(buf, "PROF=\"maybe\"") == 0);
    CHECK(strcmp(prof_log_dlerror(r, sizeof r, "/x/libz.so", "/x/libz.so: cannot open shared "
                                  "object file"), "cannot open shared object file") == 0);
    CHECK(strcmp(prof_log_dlerror(r, sizeof r, "libz.so", "other: bad ELF"), "other: bad ELF") == 0);
    CHECK(strcmp(prof_log_dlerror(r, sizeof r, "libz.so", NULL), "cannot load it") == 0);
    prof_log_dlerror(r, sizeof r, big, big);
    CHECK(strlen(r) <= PROF_LOG_VALUE_MAX);
}

int main(void)
{
    test_value();
    test_quote();
    prof_set_logger(logger, NULL);
    test_parsers();
    test_config();
    return 0;
}
