/* trace_out.h - the trace file's writing side: the queue of batches and
 * the writer's service (trace_queue.c), the file (trace_file.c).
 *
 * The formatter (trace_text.c) fills batches of JSON text under the runtime
 * lock and queues them here; the output writer thread (writer.h) writes the
 * queue (compressing it for a .gz path), so neither the collector nor a
 * thread that waits on the runtime lock (a first zone, prof_flush,
 * prof_stats, fork) writes to the disk or to the file's reader; a program's
 * thread waits for the writer only in prof_flush (and for room in a full
 * queue), bounded (writer.h). Batches are written whole and in order, by
 * one writer at a time. The queue is bounded (QUEUE_MAX in trace_queue.c,
 * 64 MB): a batch that finds it full is dropped and its events counted; the
 * file says how many in an instant event ("prof: N trace events dropped
 * ...") before the next batch written, and stderr says it once, then the
 * total at the end.
 *
 * Lock order: runtime lock, then the writer's lock, then the queue's. */
#ifndef PROF_TRACE_OUT_H
#define PROF_TRACE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* Open path for writing (gzip when it ends in ".gz" and zlib loads; else
 * plain JSON to the name without ".gz", which is cut off path in place)
 * and write *opening (the "[" and the metadata) at once, on the calling
 * thread, without blocking: a process killed right after the file appears
 * still leaves a file the tools read. What a full pipe does not take is
 * written by the writer thread before anything else. *opening comes back
 * empty. 0, or a negative errno after one message. */
int prof_trace_out_open(char *path, struct prof_buf *opening);
int prof_trace_out_is_open(void);
int prof_trace_out_is_gz(void);

/* The trace's origin (CLOCK_MONOTONIC ns of ts 0), for the writer's note
 * of dropped events. */
void prof_trace_out_origin(uint64_t origin_ns);

/* Queue the text in *b (taking its memory; *b comes back empty, with a
 * spare buffer's room when there is one) and wake the writer thread. When
 * the queue is full (or the end was asked for), the text is dropped and
 * its events counted; on a program's thread (not the collector) a full
 * queue is first waited for, bounded by writer.h's PROF_WRITER_WAIT_NS
 * (the runtime lock is then held: a summary handler that takes it delays
 * the writer until the bound). Never writes. */
void prof_trace_out_queue(struct prof_buf *b);

/* Wake the writer thread if anything is queued. On a program's thread
 * (prof_flush), then wait until it has written what was queued before the
 * call, bounded (prof_writer_wait): 0, or -ETIMEDOUT / -ESRCH with the
 * batches still queued. On the collector or the writer: 0 at once. No
 * lock held. */
int prof_trace_out_write(void);

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

/* Ask the writer thread to write the queue, then the end ("\n]\n", or the
 * end of the gzip member), and close; returns at once (the run's end waits
 * for the writer, bounded: prof_summary_out_close). Batches queued after
 * this are dropped. */
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
