/* trace_zone.c - zones as trace events ("ph":"X"): a thread's, an asyncio
 * task lane's, a GPU stream's. The hot loop of tracing: everything but
 * the numbers is text made once and copied, a stage's event head once per
 * trace file, a call site's category once per site. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "digits.h"
#include "json.h"
#include "map.h"
#include "registry.h"
#include "sink.h"
#include "stats.h"
#include "trace.h"
#include "trace_text.h"
#include "trace_track.h"

/* The trace's own state of a stage (sink.h): its events' head, made once
 * per trace file and category (gen), and the args of the last call site
 * traced (raw name pointer -> args). */
struct trace_stage {
    char *head;
    uint32_t head_len, args_len;
    uint64_t gen;
    const char *raw, *args;
};

static struct trace_stage *tstage(struct prof_stage *s)
{
    struct trace_stage *ts = s->side[PROF_SIDE_TRACE];

    if (ts == NULL && (ts = calloc(1, sizeof *ts)) != NULL)
        s->side[PROF_SIDE_TRACE] = ts;
    return ts;
}

void prof_trace_stage_gone(struct prof_stage *s)
{
    struct trace_stage *ts = s->side[PROF_SIDE_TRACE];

    if (ts != NULL)
        free(ts->head);
    free(ts);
    s->side[PROF_SIDE_TRACE] = NULL;
}

/* What a zone event of stage s begins with, after "\n,{": its name, phase,
 * pid and "tid": made once per trace file (the pid is the file's: a forked
 * child opens its own), kept in the stage. The category comes last
 * (zone_cat). */
static const char *stage_head(struct prof_stage *s, struct trace_stage *ts)
{
    struct prof_buf tmp = {0};
    uint64_t key = prof_trace_fmt.gen;

    if (ts == NULL)
        return NULL;
    if (ts->gen == key && ts->head != NULL)
        return ts->head;
    prof_buf_puts(&tmp, "\"name\":");
    prof_buf_json_string(&tmp, s->name);
    prof_buf_puts(&tmp, ",\"ph\":\"X\"");
    prof_buf_put(&tmp, prof_trace_fmt.pid_text, prof_trace_fmt.pid_len);
    if (tmp.failed || tmp.len > UINT32_MAX) {
        prof_buf_free(&tmp);
        return NULL;
    }
    free(ts->head);
    ts->head = tmp.data;
    ts->head_len = (uint32_t)tmp.len;
    ts->gen = key;
    return ts->head;
}

/* A zone's category, the event's source: "cpu" or "gpu" (a CPU zone named
 * "x [gpu]" shares the GPU zones' stage); a CPU zone with a call site adds
 * it as a second category, ",\"cat\":\"cpu,src:file:line\"". The site is
 * not in args: speedscope names a frame by its name and args (one frame
 * per call site, labelled `name {"src":...}`), while Perfetto and Chrome
 * show the category beside the name. Escaped once per raw name pointer and
 * kept: one entry per raw pointer, as the statistics keep one. Copied, so
 * a site in a library unloaded later is never read again. */
static const char cat_cpu[] = ",\"cat\":\"cpu\"";
static const char cat_gpu[] = ",\"cat\":\"gpu\"";
static struct prof_map site_cats;

static const char *zone_cat(const char *raw)
{
    const struct prof_site_ *site;
    struct prof_buf src = {0}, out = {0};
    const char *a;

    if (raw == NULL)
        return cat_cpu;
    if ((a = prof_map_get(&site_cats, (uintptr_t)raw)) != NULL)
        return a;
    a = cat_cpu;
    /* The statistics asked site.c when the pointer made or found its
     * stage: their answer. */
    site = prof_stats_site(raw);
    if (site != NULL && site->file != NULL) {
        prof_buf_puts(&src, "cpu,src:");
        prof_buf_puts(&src, site->file);
        prof_buf_put(&src, ":", 1);
        prof_buf_u64(&src, site->line);
        prof_buf_puts(&out, ",\"cat\":");
        if (!src.failed)
            prof_buf_json_string(&out, src.data);
        if (!out.failed && !src.failed)
            a = out.data;
        else
            prof_buf_free(&out);
        prof_buf_free(&src);
    }
    if (prof_map_put(&site_cats, (uintptr_t)raw, (void *)a) != 0 && a != cat_cpu) {
        prof_buf_free(&out);    /* no memory to keep it: the site left out */
        a = cat_cpu;
    }
    return a;
}

#define LIT(q, s) (memcpy((q), (s), sizeof(s) - 1), (q) += sizeof(s) - 1)

/* One X event, formatted in place: the hot loop of tracing. Everything
 * but the numbers is text made once (the stage's head, the site's args)
 * and copied; the event is written with one reservation. */
static void zone_event(struct prof_stage *s, const char *raw, int is_gpu, uint32_t tid,
                       uint64_t rel_start, uint64_t dur)
{
    struct prof_trace_fmt *f = &prof_trace_fmt;
    struct trace_stage *ts = tstage(s);
    const char *head = stage_head(s, ts), *args = is_gpu ? cat_gpu : cat_cpu;
    size_t hlen = 0, alen = strlen(args);
    char *p, *q;

    if (raw != NULL && !is_gpu && ts != NULL) {
        /* Most stages have one call site: its category is kept on the stage. */
        if (ts->raw != raw) {
            const char *a = zone_cat(raw);
            ts->args = a;
            ts->args_len = (uint32_t)strlen(a);
            ts->raw = raw;
        }
        args = ts->args;
        alen = ts->args_len;
    } else if (raw != NULL && !is_gpu) {
        args = zone_cat(raw);
        alen = strlen(args);
    }
    if (head == NULL) {              /* out of memory: the slow way */
        prof_trace_event_start();
        prof_buf_puts(&f->buf, "\"name\":");
        prof_buf_json_string(&f->buf, s->name);
        prof_buf_puts(&f->buf, ",\"ph\":\"X\"");
        prof_buf_put(&f->buf, f->pid_text, f->pid_len);
    } else {
        event_place();
        f->open_event = f->buf.len;
        hlen = ts->head_len;
    }
    if ((p = prof_buf_room(&f->buf, hlen + alen + 96)) == NULL)
        return;
    q = p;
    if (head != NULL) {
        if (f->nevents++)
            LIT(q, "\n,{");
        else
            LIT(q, "[{");
        memcpy(q, head, hlen);
        q += hlen;
    }
    q += prof_digits_u64(q, tid);
    LIT(q, ",\"ts\":");
    q += prof_digits_us(q, rel_start);
    LIT(q, ",\"dur\":");
    q += prof_digits_us(q, dur);
    memcpy(q, args, alen);
    q += alen;
    *q++ = '}';
    prof_buf_commit(&f->buf, (size_t)(q - p));
}

void prof_trace_zone(struct prof_thread *t, struct prof_stage *s, const char *raw,
                     uint64_t start_ns, uint64_t dur_ns, uint32_t depth)
{
    uint64_t end_ns = start_ns + dur_ns;
    struct trace_thread *tt;

    if (!room() || (tt = tthread(t)) == NULL)
        return;
    prof_trace_place(t, depth, &start_ns, &end_ns);
    thread_meta(t, tt);
    zone_event(s, raw, 0, thread_track(t, tt), rel(start_ns), end_ns - start_ns);
}

/* Not inlined into prof_trace_sink_zone: the zone of a thread's own track,
 * the common case, is. */
void __attribute__((noinline)) prof_trace_lane_zone(struct prof_thread *t, uint32_t lane,
                                                    struct prof_stage *s, const char *raw,
                                                    uint64_t start_ns, uint64_t dur_ns)
{
    struct trace_thread *tt;
    uint32_t tid;

    if (!room() || (tt = tthread(t)) == NULL)
        return;
    thread_meta(t, tt);
    tid = prof_trace_lane_track(t, tt, lane);
    zone_event(s, raw, 0, tid, rel(start_ns), dur_ns);
}

/* The trace sink's zone hook (prof_trace_sink, trace_sink.c), here beside
 * the writers it calls: the drain's per-record path is one translation
 * unit, prof_trace_zone inlined into it. */
void prof_trace_sink_zone(const struct prof_event *e)
{
    if (e->lane != 0)
        prof_trace_lane_zone(e->thread, e->lane, e->stage, e->raw, e->start_ns, e->dur_ns);
    else
        prof_trace_zone(e->thread, e->stage, e->raw, e->start_ns, e->dur_ns, e->depth);
}

void prof_trace_gpu_zone(struct prof_stage *s, int device, uint64_t stream, uint64_t start_ns,
                         uint64_t end_ns)
{
    uint32_t tid;

    if (!room())
        return;
    tid = prof_trace_gpu_track(device, stream);
    zone_event(s, NULL, 1, tid, rel(start_ns),
               end_ns > start_ns ? end_ns - start_ns : 0);
}
