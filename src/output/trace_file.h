/* trace_file.h - the trace's file (trace_file.c) as its queue
 * (trace_queue.c) drives it: every call here with write_lock held, the
 * lock that lets one writer at a time at the file. */
#ifndef PROF_TRACE_FILE_H
#define PROF_TRACE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "log.h"

/* Open path and write *opening to it (prof_trace_out_open in
 * trace_out.h); the signal path may not end the file yet. 0, or a
 * negative errno after one message. */
int prof_trace_file_open(char *path, struct prof_buf *opening);
/* The file is open for batches: the signal path may end it once the
 * opening is out. Nonzero when the pipe left some of the opening to the
 * writer (prof_trace_file_write_carry). */
int prof_trace_file_publish(void);
/* Write what the pipe did not take of the opening; nonzero when there was
 * some (and the file is open). */
int prof_trace_file_write_carry(void);
/* Write a batch of n bytes of JSON at p, after the note of dropped_events
 * events dropped before it (none when 0); at: the batch's offset as the
 * formatter counted. Nothing after a failed write. */
void prof_trace_file_write(const char *p, size_t n, uint64_t dropped_events, uint64_t at);
/* prof_trace_out_abandon's work: "[" written (plain) or the file removed
 * (gzip) when nothing was written yet. */
void prof_trace_file_abandon(void);
/* The file's end: the note of the unsaid dropped events, the total said
 * on stderr, the end written (unless the signal path wrote it) and the
 * file closed. */
void prof_trace_file_end(uint64_t unsaid, uint64_t total);
/* After prof_trace_file_end and the queue's own end: a new file may be
 * opened (prof_trace_out_is_open says 0). */
void prof_trace_file_closed(void);
/* In a forked child: the parent's descriptor and stream dropped. */
void prof_trace_file_forget(void);
/* The file's path as every message shows it. */
const char *prof_trace_file_path_said(char q[PROF_LOG_VALUE_SIZE]);

#endif
