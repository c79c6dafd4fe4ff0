/* env.c - PROF_* environment variables, parsed once.
 *
 * Every variable has a default; a value that does not parse produces one
 * line naming the variable and the value (escaped, truncated) and the
 * default is used. An empty value counts as unset. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "env.h"
#include "log.h"

static const char *env_lookup(const char *name)
{
    const char *v = getenv(name);

    return (v != NULL && v[0] != '\0') ? v : NULL;
}

int prof_u64_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -ERANGE : 0;
}

int prof_u64_add(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -ERANGE : 0;
}

/* Digits only, no sign, no overflow. */
static int parse_u64(const char *s, const char **end, uint64_t *out)
{
    uint64_t v = 0;

    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    for (; isdigit((unsigned char)*s); s++)
        if (prof_u64_mul(v, 10, &v) != 0 || prof_u64_add(v, (uint64_t)(*s - '0'), &v) != 0)
            return -ERANGE;
    *end = s;
    *out = v;
    return 0;
}

int prof_parse_size(const char *s, uint64_t *out)
{
    const char *end;
    uint64_t v, mult = 1;
    int err = parse_u64(s, &end, &v);

    if (err)
        return err;
    if (*end == 'k' || *end == 'K')
        mult = 1024, end++;
    else if (*end == 'm' || *end == 'M')
        mult = 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G')
        mult = 1024ull * 1024 * 1024, end++;
    if (*end != '\0')
        return -EINVAL;
    return prof_u64_mul(v, mult, out);
}

int prof_parse_every(const char *s, uint64_t *ns, uint64_t *steps)
{
    static const struct { const char *suffix; uint64_t ns; } units[] = {
        {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000ull},
        {"m", 60000000000ull}, {"min", 60000000000ull}, {"h", 3600000000000ull},
    };
    const char *end;
    uint64_t v;
    int err;

    *ns = 0;
    *steps = 0;
    if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0)
        return 0;
    if ((err = parse_u64(s, &end, &v)) != 0)
        return err;
    if (v == 0)
        return -EINVAL;
    if (strcmp(end, "steps") == 0 || strcmp(end, "step") == 0) {
        *steps = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            /* The collector adds the period to CLOCK_MONOTONIC readings
             * (below 2^63 ns, 292 years of uptime): a period that could
             * make that sum wrap would schedule a summary at every wake. */
            if ((err = prof_u64_mul(v, units[i].ns, ns)) != 0 ||
                (err = prof_u64_add(*ns, PROF_CLOCK_HORIZON_NS, &v)) != 0)
                *ns = 0;
            return err;
        }
    return -EINVAL;   /* a bare number is ambiguous: seconds or steps? */
}

int prof_parse_range(const char *s, uint64_t *first, uint64_t *last)
{
    const char *end;
    int err;

    *first = 0;
    *last = UINT64_MAX;
    /* A starts the range: "-1" reads as a negative step, not as "0-1". */
    if ((err = parse_u64(s, &end, first)) != 0)
        return err;
    s = end;
    if (*s == '\0') {
        *last = *first;
        return 0;
    }
    if (*s++ != '-')
        return -EINVAL;
    if (*s != '\0') {
        if ((err = parse_u64(s, &end, last)) != 0)
            return err;
        if (*end != '\0')
            return -EINVAL;
    }
    return *first <= *last ? 0 : -EINVAL;
}

static int parse_switch(const char *s, int *out)
{
    static const char *on[] = {"1", "on", "true", "yes"};
    static const char *off[] = {"0", "off", "false", "no"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, on[i]) == 0)
            return *out = PROF_SWITCH_ON, 0;
        if (strcasecmp(s, off[i]) == 0)
            return *out = PROF_SWITCH_OFF, 0;
    }
    return -EINVAL;
}

static void bad_value(const char *name, const char *value, const char *expected,
                      const char *fallback)
{
    char q[PROF_LOG_VALUE_SIZE];

    prof_log("%s is not valid (expected %s); using %s", prof_log_value(q, sizeof q, name, value),
             expected, fallback);
}

static char *dup_or_warn(const char *s)
{
    char *d = strdup(s);

    if (d == NULL)
        prof_log("out of memory reading the environment");
    return d;
}

int prof_parse_addr(const char *s, uint32_t *addr, uint16_t *port)
{
    const char *colon = strrchr(s, ':'), *p = colon ? colon + 1 : s, *end;
    uint32_t a = 0x7f000001u;
    uint64_t v;

    if (parse_u64(p, &end, &v) != 0 || *end != '\0' || v == 0 || v > 65535)
        return -EINVAL;
    if (colon != NULL && colon != s) {
        size_t len = (size_t)(colon - s);
        const char *q = s;

        if (len == 9 && strncmp(s, "localhost", 9) == 0)
            goto done;
        a = 0;
        for (int i = 0; i < 4; i++) {
            uint64_t b;

            if (parse_u64(q, &end, &b) != 0 || b > 255 || end > colon)
                return -EINVAL;
            a = a << 8 | (uint32_t)b;
            if (i < 3 && *end != '.')
                return -EINVAL;
            q = end + 1;
        }
        if (end != colon)
            return -EINVAL;
    }
done:
    *addr = a;
    *port = (uint16_t)v;
    return 0;
}

int prof_config_parse(struct prof_config *cfg, const char *(*lookup)(const char *name))
{
    const char *v;
    uint64_t n, m;
    int bad = 0, sw;

    memset(cfg, 0, sizeof *cfg);
    cfg->prof = PROF_SWITCH_UNSET;
    cfg->format = PROF_FORMAT_TEXT;
    cfg->buffer = PROF_BUFFER_DEFAULT;
    cfg->buffer_warm = PROF_BUFFER_DEFAULT_WARM;
    cfg->trace_step_last = UINT64_MAX;
    cfg->live = 1;
    cfg->cpu = 1;

    if ((v = lookup("PROF")) != NULL) {
        if (parse_switch(v, &sw) == 0)
            cfg->prof = sw;
        else
            bad++, bad_value("PROF", v, "1 or 0", "off");
    }
    if ((v = lookup("PROF_SUMMARY")) != NULL) {
        if (strcmp(v, "stderr") == 0)
            cfg->summary_to = PROF_TO_STDERR;
        else if (strcmp(v, "stdout") == 0 || strcmp(v, "-") == 0)
            cfg->summary_to = PROF_TO_STDOUT;
        else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
            cfg->summary_to = PROF_TO_OFF;
        else if (strcmp(v, "logging") == 0)
            cfg->summary_to = PROF_TO_HANDLER;
        else if ((cfg->summary_path = dup_or_warn(v)) != NULL)
            cfg->summary_to = PROF_TO_FILE;
        cfg->summary_set = cfg->summary_to != PROF_TO_STDERR || strcmp(v, "stderr") == 0;
    }
    if ((v = lookup("PROF_SUMMARY_EVERY")) != NULL &&
        prof_parse_every(v, &cfg->every_ns, &cfg->every_steps) != 0)
        bad++, bad_value("PROF_SUMMARY_EVERY", v, "e.g. 10s, 500ms, 100steps or off",
                         "a summary at exit only");
    if ((v = lookup("PROF_SUMMARY_FORMAT")) != NULL) {
        if (strcmp(v, "text") == 0)
            cfg->format = PROF_FORMAT_TEXT;
        else if (strcmp(v, "json") == 0)
            cfg->format = PROF_FORMAT_JSON;
        else
            bad++, bad_value("PROF_SUMMARY_FORMAT", v, "text or json", "text");
    }
    if ((v = lookup("PROF_SUMMARY_JSON")) != NULL) {
        if (strcmp(v, "full") == 0)
            cfg->summary_json_full = 1;
        else if (strcmp(v, "window") != 0)
            bad++, bad_value("PROF_SUMMARY_JSON", v, "window or full", "window");
    }
    if ((v = lookup("PROF_BUFFER")) != NULL) {
        if (prof_parse_size(v, &n) == 0 && n >= PROF_BUFFER_MIN && n <= PROF_BUFFER_MAX) {
            /* Round up to a power of two so the ring can mask. */
            for (m = PROF_BUFFER_MIN; m < n; m <<= 1)
                ;
            /* A ring the user sized is theirs whole, resident from the
             * first zone, as they may have sized it for a burst. */
            cfg->buffer = cfg->buffer_warm = m;
        } else {
            bad++, bad_value("PROF_BUFFER", v, "a record count from 16 to 16M, e.g. 64k",
                             "131072");
        }
    }
    if ((v = lookup("PROF_TRACE")) != NULL)
        cfg->trace_path = dup_or_warn(v);
    if ((v = lookup("PROF_TRACE_STEPS")) != NULL &&
        prof_parse_range(v, &cfg->trace_step_first, &cfg->trace_step_last) != 0) {
        cfg->trace_step_first = 0;
        cfg->trace_step_last = UINT64_MAX;
        bad++, bad_value("PROF_TRACE_STEPS", v, "A-B with A <= B, A- or A", "every step");
    }
    if ((v = lookup("PROF_TRACE_MAX_MB")) != NULL) {
        if (prof_parse_size(v, &n) == 0 && prof_u64_mul(n, 1024 * 1024, &m) == 0)
            cfg->trace_max_bytes = m;
        else
            bad++, bad_value("PROF_TRACE_MAX_MB", v, "a whole number of megabytes", "no limit");
    }
    if ((v = lookup("PROF_CUDA")) != NULL) {
        if (strcmp(v, "auto") == 0)
            cfg->cuda = PROF_CUDA_AUTO;
        else if (strcmp(v, "kernels") == 0)
            cfg->cuda = PROF_CUDA_KERNELS;
        else if (parse_switch(v, &sw) == 0)
            cfg->cuda = sw == PROF_SWITCH_ON ? PROF_CUDA_ON : PROF_CUDA_OFF;
        else
            bad++, bad_value("PROF_CUDA", v, "auto, kernels, 0 or 1", "auto");
    }
    if ((v = lookup("PROF_CUDA_LIB")) != NULL)
        cfg->cuda_lib = dup_or_warn(v);
    if ((v = lookup("PROF_CUPTI_LIB")) != NULL)
        cfg->cupti_lib = dup_or_warn(v);
    if ((v = lookup("PROF_CUPTI_BUFFERS")) != NULL) {
        if (prof_parse_size(v, &n) == 0 && n >= 1 && n <= 8192)
            cfg->cupti_buffers = (unsigned)n;
        else
            bad++, bad_value("PROF_CUPTI_BUFFERS", v, "1 to 8192 (32 KiB buffers)", "256");
    }
    if ((v = lookup("PROF_NVTX")) != NULL) {
        if (parse_switch(v, &sw) == 0)
            cfg->nvtx = sw == PROF_SWITCH_ON;
        else
            bad++, bad_value("PROF_NVTX", v, "0 or 1", "0");
    }
    if ((v = lookup("PROF_CPU")) != NULL) {
        if (parse_switch(v, &sw) == 0)
            cfg->cpu = sw == PROF_SWITCH_ON;
        else
            bad++, bad_value("PROF_CPU", v, "0 or 1", "1");
    }
    if ((v = lookup("PROF_GPU_CHECK")) != NULL) {
        if (parse_switch(v, &sw) == 0)
            cfg->gpu_check_off = sw != PROF_SWITCH_ON;
        else
            bad++, bad_value("PROF_GPU_CHECK", v, "0 or 1", "1");
    }
    if ((v = lookup("PROF_NVML")) != NULL) {
        if (parse_switch(v, &sw) == 0)
            cfg->nvml_off = sw != PROF_SWITCH_ON;
        else
            bad++, bad_value("PROF_NVML", v, "0 or 1", "1");
    }
    if ((v = lookup("PROF_NVML_LIB")) != NULL)
        cfg->nvml_lib = dup_or_warn(v);
    if ((v = lookup("PROF_LIVE")) != NULL) {
        if (parse_switch(v, &sw) == 0)
            cfg->live = sw == PROF_SWITCH_ON;
        else
            bad++, bad_value("PROF_LIVE", v, "0 or 1", "1");
    }
    if ((v = lookup("PROF_METRICS")) != NULL) {
        size_t len = strlen(v);

        /* A path ends in .prom (node_exporter's textfile collector reads
         * only those); anything else is an address. */
        if (len > 5 && strcmp(v + len - 5, ".prom") == 0) {
            if ((cfg->metrics_path = dup_or_warn(v)) != NULL)
                cfg->metrics = PROF_METRICS_FILE;
        } else if (strcmp(v, "0") == 0 || strcmp(v, "off") == 0) {
            cfg->metrics = PROF_METRICS_OFF;
        } else if (prof_parse_addr(v, &cfg->metrics_addr, &cfg->metrics_port) == 0) {
            cfg->metrics = PROF_METRICS_HTTP;
        } else {
            bad++, bad_value("PROF_METRICS", v, "HOST:PORT with an IPv4 host (127.0.0.1:9464), "
                             "PORT, or a path ending in .prom", "no metrics");
        }
    }
    if ((v = lookup("PROF_SKIP_STEPS")) != NULL) {
        char *end;
        unsigned long long steps;

        errno = 0;
        steps = strtoull(v, &end, 10);
        if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0)
            bad++, bad_value("PROF_SKIP_STEPS", v, "a whole number of steps", "0 (none skipped)");
        else
            cfg->skip_steps = steps;
    }
    return bad;
}

void prof_config_clear(struct prof_config *cfg)
{
    free(cfg->summary_path);
    free(cfg->trace_path);
    free(cfg->cuda_lib);
    free(cfg->cupti_lib);
    free(cfg->nvml_lib);
    free(cfg->metrics_path);
    memset(cfg, 0, sizeof *cfg);
}

static struct prof_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static void config_load(void)
{
    prof_config_parse(&config, env_lookup);
}

const struct prof_config *prof_config_get(void)
{
    pthread_once(&config_once, config_load);
    return &config;
}
