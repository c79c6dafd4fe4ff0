/* cupti.h - CUPTI's activity API as PROF_CUDA=kernels uses it, declared by
 * hand (no CUPTI header is needed to build) and loaded at run time
 * (cupti.c). Private to the cuda*.c, cupti.c and kernels.c files.
 *
 * Record layouts: the prefixes prof reads of the records that CUDA 13's
 * CUPTI writes for the kinds it enables: CUpti_ActivityKernel10 (for
 * CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL; CUDA 12's Kernel9 has the same
 * fields up to `name`), CUpti_ActivityMemcpy6,
 * CUpti_ActivityMemset4 and CUpti_ActivityAPI (unversioned). The fields
 * after the ones read are left out: records are walked with
 * cuptiActivityGetNextRecord, never by size. tests/cuda/cupti_layout.c
 * checks each field read against the toolkit's header where one is
 * installed. */
#ifndef PROF_CUPTI_H
#define PROF_CUPTI_H

#include <stddef.h>
#include <stdint.h>

enum {
    CUPTI_KIND_MEMCPY = 1,
    CUPTI_KIND_MEMSET = 2,
    CUPTI_KIND_DRIVER = 4,
    CUPTI_KIND_RUNTIME = 5,
    CUPTI_KIND_CONCURRENT_KERNEL = 10,
};

#define CUPTI_PACKED __attribute__((packed, aligned(8)))

struct CUPTI_PACKED cupti_rec_kernel {     /* CUpti_ActivityKernel10 (and 9), prefix */
    uint32_t kind;
    uint8_t cache_config, shared_config;
    uint16_t regs;
    uint32_t pgc_requested, pgc_executed;
    uint64_t start, end, completed;
    uint32_t device, context, stream;
    int32_t grid[3], block[3];
    int32_t static_shared, dynamic_shared;
    uint32_t local_per_thread, local_total;
    uint32_t correlation;
    int64_t grid_id;
    const char *name;
};

struct CUPTI_PACKED cupti_rec_memcpy {     /* CUpti_ActivityMemcpy6, prefix */
    uint32_t kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, correlation;
};

struct CUPTI_PACKED cupti_rec_memset {     /* CUpti_ActivityMemset4, prefix */
    uint32_t kind;
    uint32_t value;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, correlation;
};

struct CUPTI_PACKED cupti_rec_api {        /* CUpti_ActivityAPI */
    uint32_t kind;
    uint32_t cbid;
    uint64_t start, end;
    uint32_t process, thread, correlation, result;
};

/* A completed activity buffer, queued by CUPTI's thread for the
 * collector. */
struct prof_cupti_buf {
    uint8_t *data;
    size_t valid;
    struct prof_cupti_buf *next;
};

/* Application thread, once, under cuda.c's load lock: dlopen CUPTI
 * (PROF_CUPTI_LIB, else libcupti.so, .so.13, .so.12), put its timestamps
 * on CLOCK_MONOTONIC, hand it the buffer pool and enable the kinds above.
 * 0, or -ENODEV when it cannot (no library, a missing entry point,
 * another subscriber, a refused kind): said once, and CUDA zones fall back
 * to events. */
int prof_cupti_open(void);

/* CUPTI's id of stream in context ctx (the legacy stream's for a special
 * handle), as kernel records carry it. Any thread after prof_cupti_open.
 * 0, or -1. */
int prof_cupti_stream_id(void *ctx, void *stream, uint32_t *id);

/* Collector: cuptiActivityFlushAll, so that the buffers whose records
 * are all complete come back; forced (at the end), every buffer, its
 * unfinished records with no end time. 0; -1 when it failed (said once: kernels mode is then over, zones time
 * their CPU side and prof_cupti_failed() says so). */
int prof_cupti_flush(int forced);

/* Collector: the completed buffers, oldest first, or NULL. */
struct prof_cupti_buf *prof_cupti_take(void);

/* Collector: a buffer's records were read: back to the pool. */
void prof_cupti_give_back(struct prof_cupti_buf *b);

/* The next record of a buffer: *rec is advanced; 0, or -1 at the end. */
int prof_cupti_next(struct prof_cupti_buf *b, const void **rec);

/* Records lost so far: CUPTI dropped them (no buffer from the pool, or its
 * own count, cuptiActivityGetNumDroppedRecords). Collector. */
uint64_t prof_cupti_dropped(void);

/* Whether kernels mode failed after it began (the flush failed, or fork):
 * zones then time their CPU side only. Any thread. */
int prof_cupti_failed(void);

/* In a forked child: CUPTI's state is the parent's; kernels mode is off. */
void prof_cupti_atfork_child(void);

#endif
