/* trace_text.c - the trace's text as it is formatted: one buffer of whole
 * events, each event's start and its placement on the file's pages, the
 * size limit, and the batches handed to trace_out.h.
 *
 * One event per line: the first line is "[{...}", each later line
 * ",{...}", and the file ends with "\n]\n". Lines are formatted into a
 * buffer (integers and names without printf: names are escaped once per
 * stage) and written in large write(2) calls.
 *
 * A process killed in the middle of a write(2) (SIGKILL, the OOM killer)
 * leaves a short write, and Linux cuts a write to a file only between the
 * pages it copies: at a file offset that is a multiple of 4096. So no event
 * of up to 4096 bytes is placed across such an offset: the event before it
 * is padded with spaces (JSON whitespace) to the boundary. Whatever the
 * process dies of, the file then ends at an event, and appending "]" makes
 * it valid JSON (Perfetto and speedscope accept it as it is). Only an event
 * longer than a page (a name of kilobytes) can still be cut. Padding does
 * not apply to a gzip stream (trace_out.h), whose batches each end at a
 * sync point.
 *
 * Formatting happens on the thread that drains (the collector, or an
 * application thread in prof_flush), under the runtime lock; the text goes
 * to trace_out.h in batches, which the writer thread writes with the lock
 * released. Page placement counts the bytes queued, which is where the
 * file will be once they are written. */
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "process.h"
#include "trace.h"
#include "trace_out.h"
#include "trace_text.h"

#define FLUSH_AT (256 * 1024)

struct prof_trace_fmt prof_trace_fmt = {.state = TRACE_OFF, .open_event = SIZE_MAX};

static int cap_look(void);

int prof_trace_active(void)
{
    return trace_on();
}

void __attribute__((noinline)) prof_trace_event_pad(size_t at, size_t len, size_t pad)
{
    static const char spaces[64] = "                                                               ";
    struct prof_buf *buf = &prof_trace_fmt.buf;

    for (size_t n = pad; n > 0;) {     /* grow by pad bytes */
        size_t k = n < sizeof spaces ? n : sizeof spaces;
        prof_buf_put(buf, spaces, k);
        n -= k;
    }
    if (buf->failed)
        return;
    memmove(buf->data + at + pad, buf->data + at, len);
    memset(buf->data + at, ' ', pad);
}

void prof_trace_event_start(void)
{
    struct prof_trace_fmt *f = &prof_trace_fmt;

    event_place();
    f->open_event = f->buf.len;
    prof_buf_puts(&f->buf, f->nevents++ ? "\n,{" : "[{");
}

void prof_trace_common(const char *ph, uint32_t tid)
{
    struct prof_buf *buf = &prof_trace_fmt.buf;

    prof_buf_puts(buf, "\"ph\":\"");
    prof_buf_puts(buf, ph);
    prof_buf_put(buf, "\"", 1);
    prof_buf_put(buf, prof_trace_fmt.pid_text, prof_trace_fmt.pid_len);
    prof_buf_u64(buf, tid);
}

void prof_trace_flush(void)
{
    struct prof_trace_fmt *f = &prof_trace_fmt;

    event_place();
    if (!prof_trace_out_is_open())
        return;
    /* No batch goes out past the limit (the note comes with it). */
    cap_look();
    /* Checked before the length: a buffer whose first allocation failed
     * is empty and failed. */
    if (f->buf.failed) {
        char q[PROF_LOG_VALUE_SIZE];

        prof_log("trace %s: out of memory; tracing is off from here",
                 prof_log_value(q, sizeof q, "PROF_TRACE", f->path));
        f->state = TRACE_CAPPED;
        f->buf.failed = 0;
        f->buf.len = 0;
        if (f->text_out == 0)
            prof_trace_out_abandon();
        return;
    }
    f->stop_at = 0;
    f->within_len = 0;
    if (f->buf.len == 0)
        return;
    f->text_out += f->buf.len;
    prof_trace_out_queue(&f->buf);
}

int prof_trace_write(void)
{
    return prof_trace_out_write();
}

int prof_trace_pending(void)
{
    return prof_trace_out_pending();
}

void prof_trace_metadata(const char *what, uint32_t tid, const char *key, const char *svalue,
                         long ivalue)
{
    struct prof_buf *buf = &prof_trace_fmt.buf;

    prof_trace_event_start();
    prof_buf_puts(buf, "\"name\":\"");
    prof_buf_puts(buf, what);
    prof_buf_puts(buf, "\",");
    prof_trace_common("M", tid);
    prof_buf_printf(buf, ",\"args\":{\"%s\":", key);
    if (svalue != NULL)
        prof_buf_json_string(buf, svalue);
    else
        prof_buf_printf(buf, "%ld", ivalue);
    prof_buf_puts(buf, "}}");
}

/* PROF_TRACE_MAX_MB is a promise: a plain JSON file ends no larger than
 * the limit. Each look (every 4 KB of text, and before each batch goes
 * out) counts the text so far plus what ending the trace still adds (the
 * note, the page padding it may get, the closing "\n]\n"); a look that
 * finds that past the limit takes the buffer back to the previous look's
 * length, an event boundary that was within it, and ends the trace there
 * with the note. For .gz the compressed size is known only per batch, so
 * the text counts at the compression ratio so far: within one batch. */
#define CAP_NOTE_MAX 256u
#define CAP_RESERVE (TRACE_PAGE + CAP_NOTE_MAX + 3u)

/* Nonzero when the limit is reached: the trace then ends with its note
 * (state CAPPED), the caller flushes. */
static int cap_look(void)
{
    const struct prof_config *cfg = prof_config_get();
    struct prof_trace_fmt *f = &prof_trace_fmt;
    uint64_t mb = cfg->trace_max_bytes / (1024 * 1024), need;
    char q[PROF_LOG_VALUE_SIZE];

    if (!cfg->trace_max_bytes || f->state != TRACE_ON)
        return 0;
    event_place();
    need = (uint64_t)((double)(f->text_out + f->buf.len) * prof_trace_out_ratio()) +
           (f->pad_pages ? CAP_RESERVE : 0);
    if (need <= cfg->trace_max_bytes) {
        f->within_len = f->buf.len;
        return 0;
    }
    if (f->within_len < f->buf.len) {
        f->buf.len = f->within_len;
        f->open_event = SIZE_MAX;
    }
    prof_trace_event_start();
    prof_buf_printf(&f->buf, "\"name\":\"prof: trace size limit reached (%llu MB); later "
                    "events not recorded\",\"cat\":\"prof\",", (unsigned long long)mb);
    prof_trace_common("i", (uint32_t)prof_process_get()->pid);
    prof_buf_puts(&f->buf, ",\"s\":\"t\",\"ts\":");
    prof_buf_us(&f->buf, rel(prof_clock_now_ns()));
    prof_buf_puts(&f->buf, "}");
    prof_log("trace %s: size limit of %llu MB reached; later events are not recorded "
             "(PROF_TRACE_MAX_MB)", prof_log_value(q, sizeof q, "PROF_TRACE", f->path),
             (unsigned long long)mb);
    f->state = TRACE_CAPPED;
    return 1;
}

int __attribute__((noinline)) prof_trace_room_look(void)
{
    struct prof_trace_fmt *f = &prof_trace_fmt;

    if (f->state == TRACE_ON && prof_trace_out_failed())
        f->state = TRACE_OFF;
    if (f->state != TRACE_ON)
        return 0;
    if (cap_look()) {
        prof_trace_flush();
        return 0;
    }
    if (f->buf.len >= FLUSH_AT)
        prof_trace_flush();
    f->stop_at = f->buf.len + 4096 < FLUSH_AT ? f->buf.len + 4096 : FLUSH_AT;
    return f->state == TRACE_ON;
}
