/* fuzz_env.c - the environment parser (src/base/env.c) against hostile values.
 *
 * Input: up to 12 values separated by NUL bytes, served in order as PROF,
 * PROF_SUMMARY, PROF_SUMMARY_EVERY, PROF_SUMMARY_FORMAT, PROF_BUFFER,
 * PROF_TRACE, PROF_TRACE_STEPS, PROF_TRACE_MAX_MB, PROF_CUDA, PROF_CUDA_LIB,
 * PROF_NVTX and PROF_SKIP_STEPS by the lookup function given to prof_config_parse(); a
 * missing or empty value is unset, as getenv's empty strings are. Every
 * value is also fed to prof_parse_size / _every / _range directly.
 *
 * Checked against a reference parser written here from docs/CONFIG.md (not
 * from env.c): the parsed configuration, the number of bad values, and the
 * messages: exactly one per bad value, in order, naming the variable,
 * printable ASCII only, the value quoted and cut near 60 characters. Sizes,
 * periods and ranges accept exactly the documented grammar, with overflow
 * past 64 bits refused, and periods of 2^63 ns or more too. ASan/UBSan (libFuzzer build) and LeakSanitizer catch
 * what the checks do not. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "prof.h"
#include "env.h"
#include "fuzz.h"
#include "log.h"

#define NVARS 12
static const char *const var_names[NVARS] = {
    "PROF", "PROF_SUMMARY", "PROF_SUMMARY_EVERY", "PROF_SUMMARY_FORMAT", "PROF_BUFFER",
    "PROF_TRACE", "PROF_TRACE_STEPS", "PROF_TRACE_MAX_MB", "PROF_CUDA", "PROF_CUDA_LIB",
    "PROF_NVTX", "PROF_SKIP_STEPS",
};

/* Documented too (docs/CONFIG.md, docs/LIVE.md, docs/CUDA.md), checked by
 * the live, cuda, summary_json and env_parse tests rather than fuzzed
 * here: looked up, always unset. */
#define NQUIET 9
static const char *const quiet_names[NQUIET] = {"PROF_LIVE", "PROF_METRICS", "PROF_SUMMARY_JSON",
                                                "PROF_GPU_CHECK", "PROF_NVML", "PROF_NVML_LIB",
                                                "PROF_CUPTI_LIB", "PROF_CUPTI_BUFFERS",
                                                "PROF_CPU"};
static int quiet_looked_up[NQUIET];

static const char *values[NVARS];
static int looked_up[NVARS];

static const char *lookup(const char *name)
{
    for (int i = 0; i < NVARS; i++) {
        if (strcmp(name, var_names[i]) == 0) {
            FUZZ_CHECK(looked_up[i] == 0, "%s looked up twice", name);
            looked_up[i] = 1;
            return values[i];
        }
    }
    for (int i = 0; i < NQUIET; i++) {
        if (strcmp(name, quiet_names[i]) == 0) {
            FUZZ_CHECK(quiet_looked_up[i] == 0, "%s looked up twice", name);
            quiet_looked_up[i] = 1;
            return NULL;
        }
    }
    FUZZ_CHECK(0, "lookup of an undocumented variable %s", name);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Messages. */

#define MAX_MESSAGES 32
static char messages[MAX_MESSAGES][1100];
static int nmessages;

static void logger(void *user, const char *msg)
{
    (void)user;
    FUZZ_CHECK(nmessages < MAX_MESSAGES, "too many messages");
    snprintf(messages[nmessages++], sizeof messages[0], "%s", msg);
}

/* ------------------------------------------------------------------------ */
/* The reference parser: docs/CONFIG.md's grammar. */

/* Digits only; 0 ok, -1 no digit, -2 past UINT64_MAX. */
static int ref_u64(const char *s, const char **end, uint64_t *out)
{
    unsigned __int128 v = 0;
    int over = 0;

    if (!(*s >= '0' && *s <= '9'))
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (!over) {
            v = v * 10 + (unsigned)(*s - '0');
            if (v > UINT64_MAX)
                over = 1;
        }
    }
    *end = s;
    *out = (uint64_t)v;
    return over ? -2 : 0;
}

static int ref_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    unsigned __int128 p = (unsigned __int128)a * b;

    if (p > UINT64_MAX)
        return -1;
    *out = (uint64_t)p;
    return 0;
}

static int ref_size(const char *s, uint64_t *out)
{
    const char *end;
    uint64_t v, mult = 1;

    if (ref_u64(s, &end, &v) != 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    default: break;
    }
    if (*end != '\0')
        return -1;
    return ref_mul(v, mult, out);
}

static int ref_every(const char *s, uint64_t *ns, uint64_t *steps)
{
    static const struct { const char *unit; uint64_t ns; } units[] = {
        {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000ull},
        {"m", 60000000000ull}, {"min", 60000000000ull}, {"h", 3600000000000ull},
    };
    const char *end;
    uint64_t v;

    *ns = *steps = 0;
    if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0)
        return 0;
    if (ref_u64(s, &end, &v) != 0 || v == 0)
        return -1;
    if (strcmp(end, "steps") == 0 || strcmp(end, "step") == 0) {
        *steps = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0) {
            /* docs/CONFIG.md: a period below 2^63 ns. */
            if (ref_mul(v, units[i].ns, ns) != 0 || *ns >= (1ull << 63)) {
                *ns = 0;
                return -1;
            }
            return 0;
        }
    return -1;
}

/* A-[B] or A. */
static int ref_range(const char *s, uint64_t *first, uint64_t *last)
{
    const char *end;

    *first = 0;
    *last = UINT64_MAX;
    if (ref_u64(s, &end, first) != 0)
        return -1;
    s = end;
    if (*s == '\0') {
        *last = *first;
        return 0;
    }
    if (*s++ != '-')
        return -1;
    if (*s != '\0') {
        if (ref_u64(s, &end, last) != 0 || *end != '\0')
            return -1;
    }
    return *first <= *last ? 0 : -1;
}

static int ascii_ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

static int ref_switch(const char *s, int *out)
{
    static const char *on[] = {"1", "on", "true", "yes"};
    static const char *off[] = {"0", "off", "false", "no"};

    for (int i = 0; i < 4; i++) {
        if (ascii_ieq(s, on[i]))
            return *out = 1, 0;
        if (ascii_ieq(s, off[i]))
            return *out = 0, 0;
    }
    return -1;
}

static int str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* ------------------------------------------------------------------------ */

static void check_parsers(const char *v)
{
    uint64_t a = 7, b = 7, ra, rb;
    int err, ref;

    err = prof_parse_size(v, &a);
    ref = ref_size(v, &ra);
    FUZZ_CHECK((err == 0) == (ref == 0), "prof_parse_size(\"%s\") = %d, reference %d", v, err, ref);
    FUZZ_CHECK(err == 0 || err == -EINVAL || err == -ERANGE, "prof_parse_size: odd error %d", err);
    if (err == 0)
        FUZZ_CHECK(a == ra, "prof_parse_size(\"%s\") = %llu, reference %llu", v,
                   (unsigned long long)a, (unsigned long long)ra);

    err = prof_parse_every(v, &a, &b);
    ref = ref_every(v, &ra, &rb);
    FUZZ_CHECK((err == 0) == (ref == 0), "prof_parse_every(\"%s\") = %d, reference %d", v, err,
               ref);
    FUZZ_CHECK(err == 0 || err == -EINVAL || err == -ERANGE, "prof_parse_every: odd error %d", err);
    if (err == 0)
        FUZZ_CHECK(a == ra && b == rb && !(a != 0 && b != 0),
                   "prof_parse_every(\"%s\") = %llu ns %llu steps, reference %llu %llu", v,
                   (unsigned long long)a, (unsigned long long)b, (unsigned long long)ra,
                   (unsigned long long)rb);

    err = prof_parse_range(v, &a, &b);
    ref = ref_range(v, &ra, &rb);
    FUZZ_CHECK((err == 0) == (ref == 0), "prof_parse_range(\"%s\") = %d, reference %d", v, err,
               ref);
    FUZZ_CHECK(err == 0 || err == -EINVAL || err == -ERANGE, "prof_parse_range: odd error %d", err);
    if (err == 0)
        FUZZ_CHECK(a == ra && b == rb && a <= b, "prof_parse_range(\"%s\") = %llu-%llu", v,
                   (unsigned long long)a, (unsigned long long)b);
}

/* One message: "NAME=\"quoted\" is not valid (expected ...); using ...". */
static void check_message(const char *msg, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    const char *q, *qend;

    for (const char *p = msg; *p; p++)
        FUZZ_CHECK(*p >= 0x20 && *p < 0x7f, "message has byte 0x%02x: %s", (unsigned char)*p, msg);
    FUZZ_CHECK(strncmp(msg, name, nlen) == 0 && msg[nlen] == '=' && msg[nlen + 1] == '"',
               "message does not start with %s=\": %s", name, msg);
    q = msg + nlen + 2;
    qend = strstr(q, "\" is not valid");
    FUZZ_CHECK(qend != NULL, "message has no closing quote: %s", msg);
    /* prof_log_quote: the value escaped, or its head, "..." and its tail,
     * within PROF_LOG_QUOTE_SIZE - 1 characters. */
    FUZZ_CHECK(qend - q < PROF_LOG_QUOTE_SIZE, "quoted value is %d characters: %s",
               (int)(qend - q), msg);
    FUZZ_CHECK(memchr(q, '"', (size_t)(qend - q)) == NULL, "quote inside the quoted value: %s", msg);
    /* A short, plain value is quoted as it is: the message names it. */
    if (strlen(value) <= 60 && strpbrk(value, "\"\\") == NULL) {
        int plain = 1;
        for (const char *p = value; *p; p++)
            plain &= *p >= 0x20 && *p < 0x7f;
        if (plain)
            FUZZ_CHECK((size_t)(qend - q) == strlen(value) && memcmp(q, value, strlen(value)) == 0,
                       "value \"%s\" not quoted as it is: %s", value, msg);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    char *pieces[64];
    size_t npieces = 0;
    struct prof_config cfg;
    const char *bad_names[NVARS], *bad_values[NVARS];
    int nbad = 0, bad, sw;
    uint64_t a, b;
    const char *v;

    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    /* Split at NUL bytes. */
    for (size_t i = 0, start = 0; i <= size && npieces < 64; i++) {
        if (i == size || copy[i] == '\0') {
            pieces[npieces++] = copy + start;
            start = i + 1;
        }
    }
    for (int i = 0; i < NVARS; i++) {
        values[i] = (size_t)i < npieces && pieces[i][0] != '\0' ? pieces[i] : NULL;
        looked_up[i] = 0;
    }
    for (int i = 0; i < NQUIET; i++)
        quiet_looked_up[i] = 0;
    for (size_t i = 0; i < npieces; i++)
        check_parsers(pieces[i]);

    prof_set_logger(logger, NULL);
    nmessages = 0;
    bad = prof_config_parse(&cfg, lookup);
    prof_set_logger(NULL, NULL);

    /* The reference, variable by variable. */
#define BAD(i) (bad_names[nbad] = var_names[i], bad_values[nbad] = values[i], nbad++)
    if ((v = values[0]) != NULL && ref_switch(v, &sw) == 0)
        FUZZ_CHECK(cfg.prof == sw, "PROF=%s gave %d", v, cfg.prof);
    else
        FUZZ_CHECK(cfg.prof == PROF_SWITCH_UNSET, "PROF unset/bad gave %d", cfg.prof);
    if (v != NULL && ref_switch(v, &sw) != 0)
        BAD(0);

    v = values[1];
    if (v == NULL || strcmp(v, "stderr") == 0)
        FUZZ_CHECK(cfg.summary_to == PROF_TO_STDERR && cfg.summary_path == NULL, "PROF_SUMMARY");
    else if (strcmp(v, "stdout") == 0 || strcmp(v, "-") == 0)
        FUZZ_CHECK(cfg.summary_to == PROF_TO_STDOUT, "PROF_SUMMARY=%s", v);
    else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
        FUZZ_CHECK(cfg.summary_to == PROF_TO_OFF, "PROF_SUMMARY=%s", v);
    else if (strcmp(v, "logging") == 0)
        FUZZ_CHECK(cfg.summary_to == PROF_TO_HANDLER, "PROF_SUMMARY=logging");
    else
        FUZZ_CHECK(cfg.summary_to == PROF_TO_FILE && str_eq(cfg.summary_path, v),
                   "PROF_SUMMARY=%s as a path", v);

    if ((v = values[2]) != NULL && ref_every(v, &a, &b) == 0)
        FUZZ_CHECK(cfg.every_ns == a && cfg.every_steps == b, "PROF_SUMMARY_EVERY=%s", v);
    else
        FUZZ_CHECK(cfg.every_ns == 0 && cfg.every_steps == 0, "PROF_SUMMARY_EVERY default");
    if (v != NULL && ref_every(v, &a, &b) != 0)
        BAD(2);

    if ((v = values[3]) != NULL && strcmp(v, "json") == 0)
        FUZZ_CHECK(cfg.format == PROF_FORMAT_JSON, "PROF_SUMMARY_FORMAT=json");
    else
        FUZZ_CHECK(cfg.format == PROF_FORMAT_TEXT, "PROF_SUMMARY_FORMAT text");
    if (v != NULL && strcmp(v, "json") != 0 && strcmp(v, "text") != 0)
        BAD(3);

    if ((v = values[4]) != NULL && ref_size(v, &a) == 0 && a >= 16 && a <= (16u << 20)) {
        uint64_t want = 16;
        while (want < a)
            want <<= 1;
        FUZZ_CHECK(cfg.buffer == want, "PROF_BUFFER=%s gave %llu, want %llu", v,
                   (unsigned long long)cfg.buffer, (unsigned long long)want);
    } else {
        FUZZ_CHECK(cfg.buffer == 131072, "PROF_BUFFER default gave %llu",
                   (unsigned long long)cfg.buffer);
        if (v != NULL)
            BAD(4);
    }
    FUZZ_CHECK(cfg.buffer >= 16 && cfg.buffer <= (16u << 20) && (cfg.buffer & (cfg.buffer - 1)) == 0,
               "PROF_BUFFER not a power of two in range: %llu", (unsigned long long)cfg.buffer);

    FUZZ_CHECK(str_eq(cfg.trace_path, values[5]), "PROF_TRACE");

    if ((v = values[6]) != NULL && ref_range(v, &a, &b) == 0)
        FUZZ_CHECK(cfg.trace_step_first == a && cfg.trace_step_last == b, "PROF_TRACE_STEPS=%s", v);
    else
        FUZZ_CHECK(cfg.trace_step_first == 0 && cfg.trace_step_last == UINT64_MAX,
                   "PROF_TRACE_STEPS default");
    if (v != NULL && ref_range(v, &a, &b) != 0)
        BAD(6);

    if ((v = values[7]) != NULL && ref_size(v, &a) == 0 && ref_mul(a, 1u << 20, &b) == 0) {
        FUZZ_CHECK(cfg.trace_max_bytes == b, "PROF_TRACE_MAX_MB=%s", v);
    } else {
        FUZZ_CHECK(cfg.trace_max_bytes == 0, "PROF_TRACE_MAX_MB default");
        if (v != NULL)
            BAD(7);
    }

    if ((v = values[8]) == NULL || strcmp(v, "auto") == 0)
        FUZZ_CHECK(cfg.cuda == PROF_CUDA_AUTO, "PROF_CUDA auto");
    else if (ref_switch(v, &sw) == 0)
        FUZZ_CHECK(cfg.cuda == (sw ? PROF_CUDA_ON : PROF_CUDA_OFF), "PROF_CUDA=%s", v);
    else {
        FUZZ_CHECK(cfg.cuda == PROF_CUDA_AUTO, "PROF_CUDA bad");
        BAD(8);
    }

    FUZZ_CHECK(str_eq(cfg.cuda_lib, values[9]), "PROF_CUDA_LIB");

    if ((v = values[10]) != NULL && ref_switch(v, &sw) == 0)
        FUZZ_CHECK(cfg.nvtx == sw, "PROF_NVTX=%s", v);
    else
        FUZZ_CHECK(cfg.nvtx == 0, "PROF_NVTX default");
    if (v != NULL && ref_switch(v, &sw) != 0)
        BAD(10);

    {   /* PROF_SKIP_STEPS: a whole number, digits only */
        const char *end;

        if ((v = values[11]) != NULL && ref_u64(v, &end, &a) == 0 && *end == '\0') {
            FUZZ_CHECK(cfg.skip_steps == a, "PROF_SKIP_STEPS=%s", v);
        } else {
            FUZZ_CHECK(cfg.skip_steps == 0, "PROF_SKIP_STEPS default");
            if (v != NULL)
                BAD(11);
        }
    }
#undef BAD

    FUZZ_CHECK(bad == nbad, "prof_config_parse counted %d bad values, reference %d", bad, nbad);
    FUZZ_CHECK(nmessages == nbad, "%d messages for %d bad values", nmessages, nbad);
    for (int i = 0; i < nbad; i++)
        check_message(messages[i], bad_names[i], bad_values[i]);

    prof_config_clear(&cfg);
    free(copy);
    return 0;
}
