# prof.pxd - the C API of prof for Cython: `cimport prof`.
#
# Every function is declared nogil: zones, counters and steps can be used
# inside `with nogil:` blocks and prange loops. Names must live for the
# life of the process: a string literal, or prof_intern() of a dynamic one.
#
#     cimport prof
#
#     cdef prof.prof_zone z
#     with nogil:
#         z = prof.prof_zone_begin("cy.kernel")
#         ...
#         prof.prof_zone_end(&z)
#
# prof_zone_begin/prof_zone_end are the runtime's exported copies of the
# inline fast path (stable ABI); prof_zone_begin_inline/prof_zone_end_inline
# compile the header's inline code into the module (a few ns cheaper; the
# module then carries the fast path of the prof.h it was built against).
# `cimport prof` finds the package's __init__.pxd on sys.path (or on
# Cython's -I path, see prof.get_pxd_dir()), which includes this file.

from libc.stdint cimport uint64_t, uint32_t, uint16_t
from libc.stdio cimport FILE

cdef extern from "prof.h" nogil:
    const char *PROF_VERSION_STRING
    int PROF_VERSION

    # Switching on and off
    int prof_enable(int on)
    int prof_enabled()

    # Zones
    ctypedef struct prof_zone:
        uint64_t start
        const char *name
        uint32_t parent
        uint16_t depth
        uint16_t gen
        void *thread

    prof_zone prof_zone_begin(const char *name)
    void prof_zone_end(prof_zone *zone)
    prof_zone prof_zone_begin_inline "prof_zone_begin_inline_"(const char *name)
    void prof_zone_end_inline "prof_zone_end_inline_"(prof_zone *zone)

    void prof_counter(const char *name, double value)
    void prof_mark(const char *name)
    uint64_t prof_step()
    int prof_thread_name(const char *name)
    const char *prof_intern(const char *s)

    # Results
    int prof_flush()

    ctypedef struct prof_stage_stats:
        const char *name
        const char *parent
        uint64_t count
        uint64_t total_ns
        uint64_t self_ns
        uint64_t min_ns
        uint64_t max_ns
        double avg_ns
        double p50_ns
        double p95_ns
        double p99_ns
        double wall_share
        uint32_t depth
        uint32_t flags
        uint64_t cpu_ns

    enum: PROF_STAGE_GPU
    enum: PROF_STAGE_LOSSY
    enum: PROF_STAGE_CPU

    int prof_stats(const char *name, prof_stage_stats *out)
    int prof_stats_list(prof_stage_stats *out, size_t cap)

    ctypedef struct prof_counter_stats:
        const char *name
        uint64_t count
        double last
        double min
        double max
        double avg

    int prof_counter_stats_get(const char *name, prof_counter_stats *out)
    int prof_counter_stats_list(prof_counter_stats *out, size_t cap)

    enum:
        PROF_FORMAT_DEFAULT
        PROF_FORMAT_TEXT
        PROF_FORMAT_JSON

    int prof_summary_print(FILE *f)
    int prof_summary_snprint(char *buf, size_t size, int format)
    int prof_reset()
    int prof_shutdown()

    enum:
        PROF_SUMMARY_PERIODIC
        PROF_SUMMARY_FINAL

    ctypedef void (*prof_summary_fn)(void *user, const char *text, int kind)
    void prof_set_summary_handler(prof_summary_fn fn, void *user)

    const char *prof_version()

    ctypedef void (*prof_log_fn)(void *user, const char *message)
    void prof_set_logger(prof_log_fn fn, void *user)

    # GPU zones: stream is a CUstream / cudaStream_t (NULL: default stream)
    ctypedef struct prof_cuda_zone:
        prof_zone cpu
        void *stream
        void *events

    prof_cuda_zone prof_cuda_zone_begin(const char *name, void *stream)
    void prof_cuda_zone_end(prof_cuda_zone *zone)
