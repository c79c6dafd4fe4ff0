/* gz.h - gzip streams through a zlib loaded at run time (dlopen of
 * libz.so.1, or the library PROF_ZLIB_LIB names), so that libprof needs
 * nothing beyond libc and pthreads to build and run. Used by the trace
 * writer on the collector side only; nothing here is thread-safe. */
#ifndef PROF_GZ_H
#define PROF_GZ_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

struct prof_gz;

/* Load zlib once. 0, or -ENOENT with *why set to a static description of
 * what failed (dlerror's text, or the missing symbol). */
int prof_gz_load(const char **why);

/* A gzip stream at the given level (1-9). NULL if zlib is not loaded or
 * memory is short. */
struct prof_gz *prof_gz_new(int level);
void prof_gz_free(struct prof_gz *z);

/* Compress n bytes and append the output to out, ending at a sync point
 * (Z_SYNC_FLUSH: every byte given so far can be decompressed from the
 * output so far, and the output ends byte-aligned at a block boundary) or,
 * with finish, the end of the gzip member (Z_FINISH: last block, CRC and
 * length). 0, or a negative errno (-ENOMEM: out failed; -EIO: zlib
 * refused). */
int prof_gz_write(struct prof_gz *z, const void *in, size_t n, int finish, struct prof_buf *out);

/* The bytes that, appended to the output at its last sync point, end the
 * member as if `tail` (at most 64 bytes) had been compressed with finish:
 * a final stored block holding tail, then the gzip trailer (CRC-32 and
 * length of everything, tail included). Written into out (room for
 * 13 + n bytes); returns the length. Lets a signal handler, which may not
 * call zlib, close the stream with one write(2). */
size_t prof_gz_end_bytes(struct prof_gz *z, const char *tail, size_t n, unsigned char *out);

#endif
