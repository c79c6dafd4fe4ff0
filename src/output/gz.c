/* gz.c - gzip through a zlib found at run time.
 *
 * Like the CUDA driver (cuda_driver.c), zlib is dlopen'd on first use: libz.so.1,
 * or the path in PROF_ZLIB_LIB (tests point it at a missing file to see the
 * fallback). zlib.h is not needed to build: the few functions used are
 * declared here with zlib's stable ABI (z_stream's layout has not changed
 * since zlib 1.0; deflateInit2_ checks the size we pass and the major
 * version of the string, and we pass the loaded library's own).
 *
 * The stream is gzip (windowBits 31: header, raw deflate, CRC-32 and
 * length trailer). Each write ends with Z_SYNC_FLUSH, so the file on disk
 * is, at every moment between writes, a gzip member lacking only its last
 * block and trailer: decompressors output everything in it (and then
 * complain of the missing end). That same state lets prof_gz_end_bytes()
 * finish the member without zlib: a stored block needs no compressor, and
 * the CRC of the tail is combined from zlib's running CRC ahead of time. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gz.h"
#include "log.h"

/* zlib's z_stream (zlib.h), field for field. */
typedef struct {
    const unsigned char *next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state;
    void *zalloc, *zfree, *opaque;
    int data_type;
    unsigned long adler;             /* gzip: CRC-32 of the input so far */
    unsigned long reserved;
} z_stream;

#define Z_OK 0
#define Z_STREAM_END 1
#define Z_BUF_ERROR (-5)
#define Z_SYNC_FLUSH 2
#define Z_FINISH 4
#define Z_DEFLATED 8
#define Z_DEFAULT_STRATEGY 0
#define GZIP_WINDOW_BITS 31          /* 15-bit window, gzip wrapper */

static struct {
    int tried, ok;
    const char *why;
    int (*deflateInit2_)(z_stream *, int, int, int, int, int, const char *, int);
    int (*deflate)(z_stream *, int);
    int (*deflateEnd)(z_stream *);
    unsigned long (*crc32)(unsigned long, const unsigned char *, unsigned);
    const char *(*zlibVersion)(void);
} zl;

struct prof_gz {
    z_stream s;
};

int prof_gz_load(const char **why)
{
    static const char dflt[] = "libz.so.1";
    static char msg[256];
    const char *lib = getenv("PROF_ZLIB_LIB");
    void *h;

    if (lib == NULL || lib[0] == '\0')
        lib = dflt;
    if (!zl.tried) {
        zl.tried = 1;
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            char q[PROF_LOG_VALUE_SIZE], r[PROF_LOG_QUOTE_SIZE];

            snprintf(msg, sizeof msg, "%s: %s",
                     lib == dflt ? dflt : prof_log_value(q, sizeof q, "PROF_ZLIB_LIB", lib),
                     prof_log_dlerror(r, sizeof r, lib, dlerror()));
            zl.why = msg;
        } else {
            *(void **)&zl.deflateInit2_ = dlsym(h, "deflateInit2_");
            *(void **)&zl.deflate = dlsym(h, "deflate");
            *(void **)&zl.deflateEnd = dlsym(h, "deflateEnd");
            *(void **)&zl.crc32 = dlsym(h, "crc32");
            *(void **)&zl.zlibVersion = dlsym(h, "zlibVersion");
            if (!zl.deflateInit2_ || !zl.deflate || !zl.deflateEnd || !zl.crc32 ||
                !zl.zlibVersion) {
                zl.why = "the library lacks deflateInit2_, deflate, deflateEnd, crc32 or "
                         "zlibVersion";
                dlclose(h);
            } else {
                zl.ok = 1;           /* kept loaded: the stream's code lives there */
            }
        }
    }
    if (why != NULL)
        *why = zl.why;
    return zl.ok ? 0 : -ENOENT;
}

struct prof_gz *prof_gz_new(int level)
{
    struct prof_gz *z;

    if (!zl.ok || (z = calloc(1, sizeof *z)) == NULL)
        return NULL;
    if (zl.deflateInit2_(&z->s, level, Z_DEFLATED, GZIP_WINDOW_BITS, 8, Z_DEFAULT_STRATEGY,
                         zl.zlibVersion(), (int)sizeof(z_stream)) != Z_OK) {
        free(z);
        return NULL;
    }
    return z;
}

void prof_gz_free(struct prof_gz *z)
{
    if (z == NULL)
        return;
    zl.deflateEnd(&z->s);
    free(z);
}

int prof_gz_write(struct prof_gz *z, const void *in, size_t n, int finish, struct prof_buf *out)
{
    int flush = finish ? Z_FINISH : Z_SYNC_FLUSH;

    z->s.next_in = in;
    z->s.avail_in = (unsigned)n;         /* callers write batches well below 4 GB */
    for (;;) {
        size_t room = n / 4 + 4096;
        char *p = prof_buf_room(out, room);
        int rc;

        if (p == NULL)
            return -ENOMEM;
        z->s.next_out = (unsigned char *)p;
        z->s.avail_out = (unsigned)room;
        rc = zl.deflate(&z->s, flush);
        prof_buf_commit(out, room - z->s.avail_out);
        if (rc == Z_STREAM_END)
            return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return -EIO;
        /* Done when deflate left output space unused: all input taken
         * and the flush complete. */
        if (z->s.avail_out != 0 && z->s.avail_in == 0 && !finish)
            return 0;
    }
}

size_t prof_gz_end_bytes(struct prof_gz *z, const char *tail, size_t n, unsigned char *out)
{
    unsigned long crc = zl.crc32(z->s.adler, (const unsigned char *)tail, (unsigned)n);
    uint32_t size = (uint32_t)(z->s.total_in + n);    /* ISIZE is the length mod 2^32 */
    size_t k = 0;

    out[k++] = 0x01;                     /* BFINAL=1, BTYPE=00 (stored), padded */
    out[k++] = (unsigned char)n;
    out[k++] = (unsigned char)(n >> 8);
    out[k++] = (unsigned char)~n;
    out[k++] = (unsigned char)(~n >> 8);
    memcpy(out + k, tail, n);
    k += n;
    for (int i = 0; i < 4; i++)
        out[k++] = (unsigned char)(crc >> (8 * i));
    for (int i = 0; i < 4; i++)
        out[k++] = (unsigned char)(size >> (8 * i));
    return k;
}
