/* ranks.h - the cross-rank summary: one rank's last window packed into a
 * fixed-size block, and the one formatter that turns the blocks of every
 * rank into the cross-rank table (text or JSON, docs/DISTRIBUTED.md).
 *
 * The blocks travel over whatever communicator the job has (Python's
 * torch.distributed, prof_mpi.h's MPI) as opaque bytes; libprof itself
 * never talks to another process. Packing and formatting need no lock:
 * lib.c takes the window's numbers under the runtime lock and hands them
 * here. */
#ifndef PROF_RANKS_H
#define PROF_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "prof.h"
#include "json.h"

#define PROF_RANKS_MAGIC 0x52465250u   /* "PRFR" in a little-endian dump */
#define PROF_RANKS_VERSION 1u
#define PROF_RANKS_NAME_BYTES 48       /* NUL included; longer names are cut */

/* One stage of one rank's window. Fixed size: every rank sends the same
 * number of bytes, so one gather of equal blocks moves the whole table. */
struct prof_ranks_stage {
    uint64_t hash;               /* FNV-1a of the full name: the key across ranks */
    uint64_t count, total_ns, self_ns, max_ns;
    double avg_ns, p50_ns, p95_ns;
    char name[PROF_RANKS_NAME_BYTES];
};

struct prof_ranks_header {
    uint32_t magic;              /* PROF_RANKS_MAGIC: also catches another byte order */
    uint16_t version;
    uint16_t nstages;            /* used entries of stages[] */
    int32_t rank;
    uint32_t folded;             /* stages left out (more than PROF_RANKS_MAX_STAGES) */
    uint64_t step;               /* the step the window ended at; 0 = no window */
    uint64_t steps;              /* steps in the window */
    uint64_t wall_ns;            /* the window's wall time */
    uint64_t reserved[3];
};

struct prof_ranks_block {
    struct prof_ranks_header h;
    struct prof_ranks_stage stages[PROF_RANKS_MAX_STAGES];
};

/* Pack a window (rows as prof_stats_window_last gives them) into b: the
 * PROF_RANKS_MAX_STAGES heaviest stages by total time, stages with no zone
 * in the window left out. rows may be NULL (no window: step 0). */
void prof_ranks_pack_rows(struct prof_ranks_block *b, int rank, const prof_stage_stats *rows,
                          size_t n, uint64_t end_step, uint64_t start_step, uint64_t wall_ns);

/* Append the cross-rank table of blocks[0..nranks) (rank order) to out, as
 * text or one JSON line (format PROF_FORMAT_TEXT / PROF_FORMAT_JSON).
 * Blocks that are not valid are named in the output, never read past.
 * Returns 0 or -ENOMEM (out->failed). */
int prof_ranks_format_blocks(struct prof_buf *out, const void *blocks, size_t nranks,
                             int format);

/* Per-rank periodic summaries are muted while a cross-rank summary stands
 * in for them (prof_ranks_start .. prof_ranks_abandon); the collector
 * checks it as it writes a periodic summary. */
extern int prof_ranks_muted;

/* Write a formatted cross-rank table where the summaries go, in order with
 * them (collector.c). Takes text's buffer; lock held, released while
 * writing. Returns 0 or -ENOMEM. */
int prof_summary_deliver_locked(struct prof_buf *text);

#endif
