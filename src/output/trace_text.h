/* trace_text.h - the trace's text as it is formatted (trace_text.c): the
 * formatter's state, shared by the files of the trace's formatter
 * (trace.c opens and closes, trace_zone.c and trace_events.c write
 * events, trace_track.c names tracks, trace_place.c places zones), and
 * what every event goes through: its start, its placement on the file's
 * pages, the look at the size limit. The runtime lock is held for all of
 * it. */
#ifndef PROF_TRACE_TEXT_H
#define PROF_TRACE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define TRACE_PAGE 4096u

enum { TRACE_OFF, TRACE_ON, TRACE_CAPPED };

struct prof_trace_fmt {
    int state;
    char path[4096];
    struct prof_buf buf;
    uint64_t text_out;           /* JSON bytes handed to trace_out.h */
    uint64_t nevents;
    uint64_t origin_ns;          /* CLOCK_MONOTONIC ns of ts 0 */
    char pid_text[24];           /* ",\"pid\":<pid>,\"tid\":" */
    size_t pid_len;
    uint64_t gen;                /* trace files opened: the stages' text is per file */
    size_t open_event;           /* buffer offset of the event not yet placed */
    int pad_pages;               /* plain JSON: events kept off page boundaries */
    /* Buffer length up to which room() says yes without looking: the next
     * look at the writer's failure and the size limit (every 4 KB). */
    size_t stop_at;
    size_t within_len;           /* buffer length at the last look within the size limit */
};

extern struct prof_trace_fmt prof_trace_fmt __attribute__((visibility("hidden")));

/* Move the event at buffer offset at, of len bytes, pad bytes on, with
 * spaces in front of it. */
void prof_trace_event_pad(size_t at, size_t len, size_t pad);
/* The slow side of room(): the writer's failure and the size limit. */
int prof_trace_room_look(void);
/* Place the event before (event_place), then begin a new one. */
void prof_trace_event_start(void);
/* "ph", "pid" and "tid" of an event. */
void prof_trace_common(const char *ph, uint32_t tid);
/* A metadata event ("M"): args.key is svalue, or ivalue when svalue is
 * NULL. */
void prof_trace_metadata(const char *what, uint32_t tid, const char *key, const char *svalue,
                         long ivalue);

/* Tracing on (prof_trace_active), inline for the drain's per-record
 * path (trace_sink.c's step window). */
static inline int trace_on(void)
{
    return prof_trace_fmt.state == TRACE_ON;
}

/* ts as written: ns since the origin, never 0 (viewers treat 0 as unset). */
static inline uint64_t rel(uint64_t ns)
{
    return ns > prof_trace_fmt.origin_ns ? ns - prof_trace_fmt.origin_ns : 1;
}

/* Place the last event so that it does not straddle a page boundary of the
 * file (see trace_text.c). Once per event: the common case is two
 * compares. */
static inline void event_place(void)
{
    struct prof_trace_fmt *f = &prof_trace_fmt;
    size_t at = f->open_event, len;
    uint64_t pos;

    f->open_event = SIZE_MAX;
    if (at >= f->buf.len || !f->pad_pages || f->buf.failed)
        return;
    len = f->buf.len - at;
    pos = f->text_out + at;
    if (pos / TRACE_PAGE == (pos + len - 1) / TRACE_PAGE || pos % TRACE_PAGE == 0 ||
        len > TRACE_PAGE)
        return;
    prof_trace_event_pad(at, len, TRACE_PAGE - pos % TRACE_PAGE);
}

/* Whether an event may be written: tracing on, the writer not failed, the
 * size limit not reached. Looked at every 4 KB of text (what one event
 * more costs the limit is its own size). */
static inline int room(void)
{
    return prof_trace_fmt.state == TRACE_ON && prof_trace_fmt.buf.len < prof_trace_fmt.stop_at
               ? 1
               : prof_trace_room_look();
}

#endif
