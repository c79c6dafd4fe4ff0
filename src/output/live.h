/* live.h - live statistics for readers outside the process: prof-top's
 * file (a table in shared memory, by pid) and, with PROF_METRICS,
 * Prometheus metrics (metrics.h).
 *
 * Two halves, so that a collector sink can call them: a snapshot taken with
 * the runtime lock held (numbers only, bounded by PROF_LIVE_MAX_ROWS), and
 * a publish with the lock released: the live file (a copy into a shared
 * mapping) on the collector, the metrics (formatting, a .prom file) on a
 * thread of their own, started only with PROF_METRICS, so the collector
 * never waits on a socket or on formatting megabytes of text, and a
 * process without PROF_METRICS has no thread but the collector. The
 * zone's path is untouched. */
#ifndef PROF_LIVE_H
#define PROF_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_busy.h"
#include "kstats.h"
#include "stats_snap.h"

/* Rows published: the heaviest stages of the run and their ancestors (the
 * rest are counted in folded), so the cost per second is bounded however
 * many names a program makes. */
#define PROF_LIVE_MAX_ROWS 4096
/* How often the collector publishes: every second, or less often where
 * the snapshot costs more than a PROF_LIVE_LOCK_SHARE-th of that. */
#define PROF_LIVE_PERIOD_NS 1000000000ull
#define PROF_LIVE_LOCK_SHARE 50
/* GPUs published: gpu_busy.c follows 64 tracks, devices and streams. */
#define PROF_LIVE_MAX_GPUS 64
/* GPU stages with kernel figures published (PROF_CUDA=kernels): the
 * first in the table's order, which puts the heaviest first. */
#define PROF_LIVE_MAX_KSTAGES 256

/* A GPU stage's kernel figures, by its row in the snapshot. */
struct prof_live_kstage {
    uint32_t row;
    struct prof_kstats_live k;
};

/* A snapshot: the process's numbers and what the statistics publish
 * (stats_snap.h), taken with the lock held, read with it released. */
struct prof_live_snap {
    int pid, rank;
    char program[64], host[64];
    uint64_t real_ns;            /* CLOCK_REALTIME when taken */
    uint64_t run_ns;             /* wall time of the run so far */
    uint64_t win_ns;             /* wall time of the current window */
    uint64_t win_start_step, steps, dropped;
    uint32_t threads;
    uint64_t snap_ns;            /* what taking the previous snapshot cost (lock held) */
    uint64_t publish_ns;         /* writing the previous one to the file (lock released) */
    uint64_t metrics_ns;         /* formatting (and writing) the previous metrics */
    struct prof_stats_snap table;  /* the stages */
    int ngpus;                   /* devices that ran GPU zones (gpu_busy.h) */
    struct prof_gpu_live gpus[PROF_LIVE_MAX_GPUS];
    int mem_known;               /* the process's memory (memory.h), bytes */
    uint64_t rss, rss_peak_win, rss_peak_run;
    int nkst;                    /* GPU stages that ran kernels (kstats.h) */
    struct prof_live_kstage kst[PROF_LIVE_MAX_KSTAGES];
};

/* ---- The file's layout (docs/LIVE.md; python/prof/live.py reads it). ----
 * A header, then nrows fixed rows, then the names (UTF-8, not terminated),
 * then (minor version 1) ngpus GPU entries at gpu_off, 8-aligned, then
 * (minor version 2) nkern kernel entries at kern_off, 8-aligned. Between
 * the names and the GPU entries: (minor version 4) the memory entry at
 * mem_off, then (minor version 5) the rows' on-CPU times at cpu_off,
 * then (minor version 6) the rows' peak rises right after them.
 * Written seqlock-style: seq is odd while the writer is inside; a reader
 * reads seq, the table, seq again, and retries unless both are the same
 * even number. Native byte order (readers are on the same host).
 *
 * Versions: version changes only where a reader of the last one would
 * misread the file (it refuses any other). What a reader may ignore is
 * added after the names and announced by minor_version, in what was
 * reserved space (zero in older files): a version-1 reader that does not
 * know it reads the table as before (the GPU entries are bytes past the
 * last name), and a newer reader takes minor_version 0 for a writer that
 * published no GPU figures. An entry may grow (gpu_size): a reader takes
 * the fields it knows from the front of each. */
#define PROF_LIVE_MAGIC "PROFLIVE"
#define PROF_LIVE_VERSION 1
#define PROF_LIVE_MINOR 6
#define PROF_LIVE_PREFIX "prof-live-"
/* The initial pid namespace's inode (the kernel's PROC_PID_INIT_INO, fixed
 * since Linux 3.8): a process there keeps the plain name prof-live-PID;
 * one in any other pid namespace is prof-live-PID-nsINODE, so two
 * containers' pid 1 sharing a /dev/shm never take each other's name. */
#define PROF_LIVE_INIT_PID_NS 0xEFFFFFFCu

struct prof_live_file_header {
    char magic[8];
    uint32_t version, header_size, row_size, nrows;
    uint64_t seq;                /* offset 24 */
    uint64_t size;               /* bytes in use: header, rows, names */
    int32_t pid, rank;
    char program[64], host[64];
    uint64_t real_ns, run_ns, win_ns, win_start_step, steps, dropped;
    uint32_t threads, gpu_stages;
    uint64_t stages, folded, snap_ns, publish_ns, publishes, metrics_ns;
    uint32_t minor_version;      /* offset 280: PROF_LIVE_MINOR; 0 before GPU entries */
    uint32_t gpu_size;           /* bytes per GPU entry */
    uint32_t ngpus, gpu_off;     /* entries, and where they start */
    uint32_t kern_size;          /* offset 296 (minor 2): bytes per kernel entry */
    uint32_t nkern, kern_off;    /* entries, and where they start */
    /* Minor 5: the rows' on-CPU time, nrows uint64_t at cpu_off
     * (8-aligned, after the memory entry, before the GPU entries): of
     * the row's self_ns, the time its thread ran on a CPU,
     * PROF_LIVE_CPU_UNKNOWN where not measured (PROF_CPU=0, a GPU
     * stage). 0 in a minor 0-4 file.
     * Minor 6: then, at cpu_off + 8 * nrows, the rows' peak rises, nrows
     * uint64_t: how much the process's peak resident memory rose while
     * the row's stage ran (every path of its name together), whole run,
     * bytes; PROF_LIVE_PEAK_UNKNOWN where not measured (as the on-CPU
     * time). The header has no room left for an offset of its own, and a
     * larger header would be refused by a reader of this one. */
    uint32_t cpu_off;            /* offset 308 */
    /* Minor 3: who the process is beyond its pid, so that a reader in
     * another pid namespace (a container sharing /dev/shm) neither takes
     * it for its own pid nor removes its file: the inodes of its pid and
     * time namespaces (/proc/self/ns/pid, /proc/self/ns/time; 0 where
     * unknown) and its start time (/proc/self/stat field 22, clock ticks
     * since boot as its time namespace counts them; 0 where unknown). */
    uint32_t pid_ns;             /* offset 312 */
    uint32_t time_ns;            /* offset 316 */
    uint64_t start_ticks;        /* offset 320 */
    /* Minor 4: the process's memory, an entry of mem_size bytes at
     * mem_off (8-aligned, after the kernel entries); 0 and 0 where the
     * writer knows none. */
    uint32_t mem_size;           /* offset 328 */
    uint32_t mem_off;            /* offset 332 */
};

struct prof_live_file_row {
    uint32_t name_off, name_len;   /* into the names, which follow the rows */
    uint32_t parent, depth, flags, pad;
    uint64_t count, total_ns, self_ns, outer_ns, win_count, win_total_ns;
    double p50_ns, p95_ns, p99_ns;
};

/* A device that ran GPU zones (minor version 1). */
struct prof_live_file_gpu {
    int32_t device;
    uint32_t flags;              /* bit 0: nvml_win is known, bit 1: nvml_run */
    double busy_win, busy_run;   /* share of the window's, the run's wall time, 0-1 */
    double nvml_win, nvml_run;   /* NVML's mean utilization, 0-1 (0 where unknown) */
    /* Minor 4: device memory used (NVML's, else the driver's), bytes
     * (with bit 2 of flags): the last sample, and the window's largest. */
    uint64_t mem_used, mem_peak_win;
};

/* The process's resident memory (minor version 4), bytes: RSS at the
 * snapshot, its peak over the window and over the run (memory.h). */
struct prof_live_file_memory {
    uint64_t rss, peak_win, peak_run;
};

/* A GPU stage's kernels (minor version 2, PROF_CUDA=kernels). */
struct prof_live_file_kernels {
    uint32_t row;                /* the stage's row */
    uint32_t flags;              /* 0 */
    uint64_t win_busy_ns, win_count;   /* the window's: busy (union), kernels */
    uint64_t run_busy_ns, run_count;   /* the run's */
    double top_share;            /* the top kernel's share of the kernels' time, 0-1 */
    char top[32];                /* its short name, cut, NUL-padded ("" where none) */
};

/* A row's on-CPU time where it was not measured. */
#define PROF_LIVE_CPU_UNKNOWN UINT64_MAX
/* A row's peak rise where it was not measured. */
#define PROF_LIVE_PEAK_UNKNOWN UINT64_MAX

/* The collector's hook: once a PROF_LIVE_PERIOD_NS, a snapshot (lock
 * held), written to the live file with the lock released, then handed to
 * the metrics thread (PROF_METRICS; started on the first call). Lock held
 * on entry and return. */
void prof_live_tick_locked(uint64_t now_ns);

/* The live view as a sink of the collector (sink.h): its tick. */
struct prof_sink;
extern const struct prof_sink prof_live_sink;

/* Fill snap (rows reused from call to call). Lock held. 0 or -ENOMEM. */
int prof_live_snap_take_locked(struct prof_live_snap *snap);
void prof_live_snap_free(struct prof_live_snap *snap);

/* At shutdown, the collector stopped, lock NOT held: the metrics thread
 * stopped, a last publish for the metrics file, the live file removed, the
 * metrics server stopped. */
void prof_live_stop(void);

#endif
