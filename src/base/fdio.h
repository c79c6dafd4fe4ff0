/* fdio.h - writing to a descriptor or stream that may be a pipe whose
 * reader has gone, without dying of SIGPIPE: the runtime's one way to do
 * it (summaries, the trace, prof_summary_print). */
#ifndef PROF_FDIO_H
#define PROF_FDIO_H

#include <signal.h>
#include <stddef.h>

/* Write all n bytes at p to fd: retried on EINTR, continued after a short
 * write, with SIGPIPE blocked on the calling thread (and the SIGPIPE the
 * write raised, if any, consumed) so that a closed pipe gives -EPIPE.
 * Returns 0, or -errno from the write(2) that failed; a write(2) that
 * wrote nothing without an error gives -EIO. *done (done may be NULL) is
 * set to the bytes that went out, n on success. Any thread; not
 * async-signal-safe. */
int prof_write_full(int fd, const void *p, size_t n, size_t *done);

/* The same protection around writes of the caller's own (stdio):
 * prof_sigpipe_block blocks SIGPIPE on the calling thread and keeps the
 * previous mask in *saved; prof_sigpipe_restore puts that mask back, first
 * consuming the pending SIGPIPE when err is -EPIPE and the mask did not
 * already block it. err: what the writes ended with, 0 or -errno. */
void prof_sigpipe_block(sigset_t *saved);
void prof_sigpipe_restore(const sigset_t *saved, int err);

#endif
