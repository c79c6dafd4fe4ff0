/* env.h - the PROF_* environment variables, parsed once into prof_config. */
#ifndef PROF_ENV_H
#define PROF_ENV_H

#include <stdint.h>

enum prof_switch { PROF_SWITCH_UNSET = -1, PROF_SWITCH_OFF = 0, PROF_SWITCH_ON = 1 };
/* PROF_CUDA_KERNELS: GPU sides from CUPTI's kernel records, not events. */
enum prof_cuda_mode { PROF_CUDA_AUTO = 0, PROF_CUDA_OFF = 1, PROF_CUDA_ON = 2, PROF_CUDA_KERNELS = 3 };
/* PROF_TO_HANDLER ("logging"): to the summary handler a binding installs
 * (Python's logging); stderr when none is installed. */
enum prof_summary_to { PROF_TO_STDERR = 0, PROF_TO_STDOUT, PROF_TO_FILE, PROF_TO_OFF, PROF_TO_HANDLER };

struct prof_config {
    int prof;                    /* PROF: enum prof_switch */
    int summary_to;              /* PROF_SUMMARY: enum prof_summary_to */
    char *summary_path;          /* PROF_SUMMARY=PATH, malloc'd, or NULL */
    int summary_set;             /* PROF_SUMMARY was given (a worker's summary goes
                                    only where it was sent explicitly) */
    uint64_t every_ns;           /* PROF_SUMMARY_EVERY=10s: 0 = not by time */
    uint64_t every_steps;        /* PROF_SUMMARY_EVERY=100steps: 0 = not by steps */
    uint64_t skip_steps;         /* PROF_SKIP_STEPS=N: warm-up left out of every statistic */
    int format;                  /* PROF_SUMMARY_FORMAT: PROF_FORMAT_TEXT or _JSON */
    int summary_json_full;       /* PROF_SUMMARY_JSON=full: periodic JSON keeps "total" */
    uint64_t buffer;             /* PROF_BUFFER: ring records, a power of two */
    uint64_t buffer_warm;        /* of which resident from the start: all of a
                                    ring the user sized, else 32k */
    char *trace_path;            /* PROF_TRACE, unexpanded (%p, %r), or NULL */
    uint64_t trace_step_first;   /* PROF_TRACE_STEPS=A-B; 0/UINT64_MAX when unset */
    uint64_t trace_step_last;
    uint64_t trace_max_bytes;    /* PROF_TRACE_MAX_MB in bytes; 0 = no limit */
    int cuda;                    /* PROF_CUDA: enum prof_cuda_mode */
    char *cuda_lib;              /* PROF_CUDA_LIB: driver library to dlopen, or NULL */
    char *cupti_lib;             /* PROF_CUPTI_LIB: CUPTI library to dlopen, or NULL */
    unsigned cupti_buffers;      /* PROF_CUPTI_BUFFERS: 32 KiB buffers; 0: the default */
    int nvtx;                    /* PROF_NVTX=1 */
    int cpu;                     /* PROF_CPU: on-CPU sampling, 1 (default) or 0 */
    int gpu_check_off;           /* PROF_GPU_CHECK=0 */
    int nvml_off;                /* PROF_NVML=0 */
    char *nvml_lib;              /* PROF_NVML_LIB: NVML library to dlopen, or NULL */
    int live;                    /* PROF_LIVE: 1 (default) or 0 */
    int metrics;                 /* PROF_METRICS: enum prof_metrics_mode */
    char *metrics_path;          /* PROF_METRICS=PATH.prom, malloc'd, or NULL */
    uint32_t metrics_addr;       /* PROF_METRICS=HOST:PORT: IPv4, host order */
    uint16_t metrics_port;
};

enum prof_metrics_mode { PROF_METRICS_OFF = 0, PROF_METRICS_HTTP = 1, PROF_METRICS_FILE = 2 };

#define PROF_BUFFER_DEFAULT (128u * 1024u)
#define PROF_BUFFER_DEFAULT_WARM (32u * 1024u)   /* src/capture/ring.h: warm and cold slots */
#define PROF_BUFFER_MIN 16u
#define PROF_BUFFER_MAX (16u * 1024u * 1024u)

/* The configuration, parsed from the environment on first call; every bad
 * value is reported once through prof_log and replaced by its default. */
const struct prof_config *prof_config_get(void);

/* Parse into *cfg from getenv-like lookup; exposed for tests and fuzzers.
 * Returns the number of bad values found. Free with prof_config_clear. */
int prof_config_parse(struct prof_config *cfg, const char *(*lookup)(const char *name));
void prof_config_clear(struct prof_config *cfg);

/* Monotonic clock readings stay below this (2^63 ns: 292 years of uptime),
 * so a period of at most UINT64_MAX - this can be added to one. */
#define PROF_CLOCK_HORIZON_NS (UINT64_C(1) << 63)

/* Checked arithmetic for every size and duration the parsers build:
 * 0 and *out = the result, or -ERANGE (*out unspecified) when it wraps. */
int prof_u64_mul(uint64_t a, uint64_t b, uint64_t *out);
int prof_u64_add(uint64_t a, uint64_t b, uint64_t *out);

/* Parsers for one value each; 0 on success, -EINVAL on a bad value. */
int prof_parse_size(const char *s, uint64_t *out);       /* "64k", "1M", "4096" */
int prof_parse_every(const char *s, uint64_t *ns, uint64_t *steps); /* "10s", "500ms", "100steps";
                                                                     -ERANGE past 2^63 ns */
int prof_parse_range(const char *s, uint64_t *first, uint64_t *last); /* "A-B", "A-", "A" */
/* PROF_METRICS's address: "HOST:PORT", ":PORT" or "PORT" (host 127.0.0.1),
 * HOST a dotted IPv4 address or "localhost"; port 1-65535. */
int prof_parse_addr(const char *s, uint32_t *addr, uint16_t *port);

#endif
