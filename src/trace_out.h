/* trace_out.h - the trace file's writing side.
 *
 * The formatter (trace.c) fills batches of JSON text under the runtime lock
 * and queues them here; the collector thread writes the queue (compressing
 * it for a .gz path) after each round, with the runtime lock released, so
 * no thread that waits on that lock (a first zone, prof_flush, prof_stats,
 * fork) waits on the disk. Batches are written whole and in order, by one
 * writer at a time. The queue is bounded (QUEUE_MAX in trace_out.c): a
 * formatter that finds it full writes it itself, so a disk slower than the
 * events slows the collector instead of growing memory.
 *
 * Lock order: runtime lock, then the writer's lock, then the queue's. */
#ifndef PROF_TRACE_OUT_H
#define PROF_TRACE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* Open path for writing (gzip when it ends in ".gz" and zlib loads; else
 * plain JSON to the name without ".gz", which is cut off path in place).
 * 0, or a negative errno after one message. */
int prof_trace_out_open(char *path);
int prof_trace_out_is_open(void);
int prof_trace_out_is_gz(void);

/* Queue the text in *b (taking its memory; *b comes back empty, with a
 * spare buffer's room when there is one). Writes the queue on the spot
 * when it is full. */
void prof_trace_out_queue(struct prof_buf *b);

/* Write every queued batch. Called without the runtime lock by the
 * collector thread; with it by the paths that must see the file written
 * (open, close, a full queue). */
void prof_trace_out_write(void);

/* Something is queued: the collector should write it soon. */
int prof_trace_out_pending(void);

/* Disk bytes per JSON byte so far (1 for plain JSON), for the size
 * limit. */
double prof_trace_out_ratio(void);

/* A write failed: the file is closed and the message given; the formatter
 * stops tracing. */
int prof_trace_out_failed(void);

/* Out of memory before a byte was written: end the file as "[" + end
 * (plain), or remove it (gzip). */
void prof_trace_out_abandon(void);

/* Write the queue, then the end ("\n]\n", or the end of the gzip member),
 * and close. */
void prof_trace_out_close(void);

/* A signal handler's end: see trace.h. */
void prof_trace_out_close_from_signal(void);

/* fork: the queue's lock is taken around fork (the writer's is not, so
 * fork never waits on the disk; the child makes it anew). */
void prof_trace_out_atfork_prepare(void);
void prof_trace_out_atfork_parent(void);
void prof_trace_out_atfork_child(void);
/* In a forked child: drop the parent's file, queue and stream. */
void prof_trace_out_forget(void);

#endif
