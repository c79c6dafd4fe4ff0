/* kernels.c - PROF_CUDA=kernels: CUPTI's records given to CUDA zones.
 *
 * Design
 * ------
 * With PROF_CUDA=kernels a CUDA zone records no events: its begin and its
 * end each push a PROF_RECORD_KZONE_ record (CUPTI's id of its stream, its
 * CPU time), and CUPTI reports what the GPU ran (cupti.c). Here, on the
 * collector:
 *
 *   - zones: per stream, the zones' CPU intervals, sorted by begin (open
 *     ones with no end yet), from every thread;
 *   - API records (runtime and driver): correlation id -> the launch's
 *     CPU time, in a direct-mapped table (ids are sequential);
 *   - a kernel (memcpy, memset) record: its launch's CPU time L from the
 *     table, then the innermost zone open on its stream at L (the latest
 *     begin <= L among those not ended before L), whichever thread opened
 *     it: kernels that autograd's thread launches land in the zone around
 *     backward(). None: the stage "(no zone)". The zones around that one,
 *     open at L too, have it in their span (not in their kernels).
 *
 * Ordering. The buffers are taken before the rings are drained
 * (prof_kernels_pass_begin), so a zone open at a kernel's launch had
 * pushed its begin record before the buffer completed, hence before this
 * drain: the choice is final when the kernel is read. A zone's GPU side
 * (the span of its kernels) is final when no more kernels can come for it:
 * when a kernel launched after its end has been read on its stream (a
 * stream runs in order), or 2 s after its end (KZ_HOLD_NS), or at
 * shutdown. A zone complete the first way is forgotten at once; one
 * delivered after the hold is kept KZ_KEEP_NS more, so that kernels of a
 * GPU more than 2 s behind still find it: they count in the stage's busy
 * time and kernels, not in its span.
 *
 * Streams. A slot per CUPTI stream id, made when a zone or a kernel first
 * names it. Programs make and destroy streams all along (a stream per
 * request, NCCL's), and CUPTI never tells prof that one is gone, so a slot
 * that holds no zone is free for the next new id: it holds nothing a
 * kernel could still need (a late kernel of its stream finds no zone
 * either way and counts as "(no zone)"; a later zone of that stream gets a
 * slot again). The least recently used free one is taken; only when every
 * slot holds zones does the table grow, up to KZ_STREAMS, as many streams
 * as have zones waiting for their kernels at once.
 *
 * Bounds: KZ_ZONES zones kept, KZ_STREAMS streams with zones at once,
 * KZ_PENDING kernels waiting for their API record, KZ_API launches
 * remembered, KZ_NAMES distinct kernel names (then "(other kernels)");
 * past each, dropped and counted.
 *
 * Threads: the runtime lock (one thread at a time). */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cupti.h"
#include "intern.h"
#include "kernels.h"
#include "log.h"
#include "map.h"

#define KZ_STREAMS 4096            /* streams with zones kept, at once */
#define KZ_ZONES 65536              /* zones kept for matching, all streams:
                                       218 ms of zones at 300k zones/s, as
                                       the event pool (cuda_pool.c) */
#define KZ_SCAN 4096                /* zones looked at per kernel, at most */
#define KZ_STALE_SCAN 64            /* zones looked at for lost ends */
#define KZ_API (1u << 16)           /* launches remembered (direct-mapped) */
#define KZ_PENDING 65536            /* kernels waiting for their launch */
#define KZ_PENDING_PASSES 64        /* then placed by their GPU start */
#define KZ_NAMES 4096               /* distinct kernel names */
#define KZ_HOLD_NS 2000000000ull    /* a zone's span is final this long after its end */
#define KZ_KEEP_NS 4000000000ull    /* kept for late kernels this long */
#define KZ_FLUSH_NS 50000000ull     /* cuptiActivityFlushAll at most this often */

const char prof_kernels_no_zone[] = "(no zone)";
static const char other_kernels[] = "(other kernels)";

struct kzone {
    const char *name;
    struct prof_thread *t;
    uint64_t b, e;                  /* CPU begin, end (0: open) */
    uint64_t ks, ke;                /* its kernels' span (ks 0: none yet) */
    uint32_t depth;
    int device;
    int emitted;                    /* 1: delivered after the hold; 2: complete */
};

struct kstream {
    uint32_t sid;
    int device;
    uint64_t horizon;               /* the latest launch read on it */
    uint64_t max_dur;               /* the longest closed zone's CPU interval */
    uint64_t min_open;              /* the earliest open zone's begin (this pass) */
    uint64_t used;                  /* when last named (use_clock): the LRU's key */
    struct kzone *z;
    unsigned n, cap;
};

struct api {
    uint32_t corr;
    uint64_t cpu_ns;
};

struct act {
    uint64_t start, end;
    const char *name;               /* CUPTI's, or a kind's */
    uint32_t sid, corr, device, passes;
};

static struct kstream *streams;
static unsigned nstreams, streams_cap, nzones, last_stream;
static uint64_t use_clock;
static struct api *api_tab;
static struct act *pend;
static unsigned npend;
static struct prof_map names;       /* CUPTI's name pointer -> short name */
static unsigned nnames;
static struct prof_cupti_buf *taken;
static uint64_t last_flush_ns, lost, cupti_lost;
static int flush_forced;                /* the next flush is the run's last */
static int note_zones, note_pending, note_empty, note_empty_end, note_unfinished, note_names;
static int note_streams;

/* The slot of stream sid; with create, a new one (a free slot reused, or
 * the table grown) when it has none. NULL when every one of KZ_STREAMS
 * slots holds zones, or out of memory. */
static struct kstream *stream_of(uint32_t sid, int create)
{
    struct kstream *s, *lru = NULL;
    unsigned i;

    /* Records come in runs of one stream: its slot first. */
    if (last_stream < nstreams && streams[last_stream].sid == sid) {
        s = &streams[last_stream];
        s->used = ++use_clock;
        return s;
    }
    for (i = 0; i < nstreams; i++) {
        s = &streams[i];
        if (s->sid == sid) {
            last_stream = i;
            s->used = ++use_clock;
            return s;
        }
        if (s->n == 0 && (lru == NULL || s->used < lru->used))
            lru = s;
    }
    if (!create)
        return NULL;
    if (lru == NULL) {
        if (nstreams == streams_cap) {
            unsigned cap = streams_cap ? streams_cap * 2 : 16;
            struct kstream *p;

            if (cap > KZ_STREAMS || (p = realloc(streams, cap * sizeof *p)) == NULL) {
                prof_log_once(&note_streams, "over %u CUDA streams had zones waiting for "
                              "their kernels at once (PROF_CUDA=kernels): the zones of "
                              "later ones are not kept, and their kernels count as (no zone)",
                              KZ_STREAMS);
                return NULL;
            }
            streams = p;
            streams_cap = cap;
        }
        lru = &streams[nstreams++];
        memset(lru, 0, sizeof *lru);
    }
    /* Reused: its zone array stays, the rest is the new stream's. */
    lru->sid = sid;
    lru->device = 0;
    lru->horizon = lru->max_dur = 0;
    lru->min_open = UINT64_MAX;
    lru->used = ++use_clock;
    last_stream = (unsigned)(lru - streams);
    return lru;
}

int prof_kernels_zone(struct prof_thread *t, const char *name, uint32_t sid, uint32_t depth,
                      int is_end, uint64_t ns)
{
    struct kstream *s = stream_of(sid, 1);
    struct kzone *z;
    unsigned i;

    if (s == NULL) {
        lost += is_end ? 0 : 1;
        return 0;
    }
    /* A zone of t still open at this depth or deeper, among the stream's
     * newest, lost its end record (a full ring): it ends here, rather than
     * take every later kernel of the stream. An end looks further back,
     * for its own begin. */
    for (i = s->n; i-- > 0 && (is_end || s->n - i <= KZ_STALE_SCAN);) {
        z = &s->z[i];
        if (z->e != 0 || z->t != t || z->depth < depth)
            continue;
        if (is_end && z->depth == depth && z->name == name) {
            z->e = ns > z->b ? ns : z->b;
            if (z->e - z->b > s->max_dur)
                s->max_dur = z->e - z->b;
            break;
        }
        if (s->n - i <= KZ_STALE_SCAN)
            z->e = ns > z->b ? ns : z->b;
    }
    if (is_end)
        return s->device;
    if (nzones >= KZ_ZONES || (s->n == s->cap && s->cap >= KZ_ZONES)) {
        lost++;
        prof_log_once(&note_zones, "over %u CUDA zones were waiting for their kernels "
                      "(PROF_CUDA=kernels): the kernels of later ones count as (no zone)",
                      KZ_ZONES);
        return s->device;
    }
    if (s->n == s->cap) {
        unsigned cap = s->cap ? s->cap * 2 : 16;
        struct kzone *p = realloc(s->z, cap * sizeof *p);

        if (p == NULL) {
            lost++;
            return s->device;
        }
        s->z = p;
        s->cap = cap;
    }
    /* Sorted by begin: records of several threads arrive a drain apart. */
    for (i = s->n; i > 0 && s->z[i - 1].b > ns; i--)
        ;
    memmove(&s->z[i + 1], &s->z[i], (s->n - i) * sizeof *s->z);
    z = &s->z[i];
    memset(z, 0, sizeof *z);
    z->name = name;
    z->t = t;
    z->b = ns;
    z->depth = depth;
    z->device = s->device;
    s->n++;
    nzones++;
    return s->device;
}

/* Whether zone z was open at launch time l. */
static int open_at(const struct kzone *z, uint64_t l)
{
    return z->b <= l && (z->e == 0 || z->e >= l);
}

/* Where the zones that could have been open at l end, going back from
 * the newest: none that began before l - (the longest closed zone) and
 * before every open one contains l. */
static int past_reach(const struct kstream *s, const struct kzone *z, uint64_t l)
{
    return z->b < s->min_open && l - z->b > s->max_dur;
}

/* The kernel (a, b), launched at l, for the zones of s: the innermost
 * zone open at l takes it; the spans of the zones around that one, open
 * at l too, cover it (a zone's GPU span covers its nested zones', as
 * events did). Returns the innermost, or NULL. */
static struct kzone *zone_take(struct kstream *s, uint64_t l, uint64_t a, uint64_t b)
{
    struct kzone *inner = NULL;
    unsigned i, seen = 0, lo = 0, hi = s->n;

    /* The zones that began by l: a binary search, as the GPU may be far
     * behind the launches (many newer zones). */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;

        if (s->z[mid].b <= l)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (i = lo; i-- > 0 && seen < KZ_SCAN; seen++) {
        struct kzone *z = &s->z[i];

        if (past_reach(s, z, l))
            break;
        if (!open_at(z, l))
            continue;
        if (inner == NULL)
            inner = z;
        if (z->ks == 0 || a < z->ks)
            z->ks = a;
        if (b > z->ke)
            z->ke = b;
    }
    return inner;
}

/* A short name: the function's own name of an Itanium-mangled symbol
 * (_ZN2at6native13reduce_kernelILi512E...EEvT_ -> reduce_kernel), or of a
 * demangled one with its arguments and templates cut. */
static size_t short_name(const char *m, const char **out)
{
    const char *p = m, *best = NULL;
    size_t bestn = 0;

    if (p[0] == '_' && p[1] == 'Z') {
        p += 2;
        if (*p == 'L')
            p++;
        if (*p == 'N') {
            p++;
            while (*p == 'r' || *p == 'V' || *p == 'K')
                p++;
        }
        while (*p >= '0' && *p <= '9') {
            size_t n = 0;

            while (*p >= '0' && *p <= '9')
                n = n * 10 + (size_t)(*p++ - '0');
            if (n == 0 || strnlen(p, n) < n)
                break;
            best = p;
            bestn = n;
            p += n;     /* on past a namespace; a template or the end stops */
        }
        if (best != NULL) {
            *out = best;
            return bestn;
        }
        *out = m;
        return strlen(m);
    }
    /* Demangled: "void ns::f<int>(float*)" -> "f". */
    {
        const char *end = m + strcspn(m, "(<"), *q;

        best = m;
        for (q = m; q < end; q++) {
            if (*q == ' ' || (*q == ':' && q + 1 < end && q[1] == ':'))
                best = q + (*q == ' ' ? 1 : 2);
        }
        *out = best;
        return (size_t)(end - best) > 0 ? (size_t)(end - best) : strlen(m);
    }
}

static const char *kernel_name(const char *cupti_name)
{
    const char *s, *r;
    size_t n;

    if (cupti_name == NULL)
        return "(unnamed kernel)";
    if ((r = prof_map_get(&names, (uintptr_t)cupti_name)) != NULL)
        return r;
    if (nnames >= KZ_NAMES) {
        prof_log_once(&note_names, "over %u distinct kernel names (PROF_CUDA=kernels): "
                      "later ones are named \"%s\"", KZ_NAMES, other_kernels);
        return other_kernels;
    }
    n = short_name(cupti_name, &s);
    if ((r = prof_intern_n(s, n)) == NULL || prof_map_put(&names, (uintptr_t)cupti_name,
                                                         (void *)(uintptr_t)r) != 0)
        return other_kernels;
    nnames++;
    return r;
}

static void take_api(const struct cupti_rec_api *a)
{
    struct api *e;

    if (api_tab == NULL && (api_tab = calloc(KZ_API, sizeof *api_tab)) == NULL)
        return;
    e = &api_tab[a->correlation & (KZ_API - 1)];
    e->corr = a->correlation;
    e->cpu_ns = a->start;
}

static void take_act(uint64_t start, uint64_t end, const char *name, uint32_t sid, uint32_t corr,
                     uint32_t device)
{
    struct act *a;

    if (start == 0 || end < start) {
        /* Still running when the last, forced flush took its buffer:
         * CUPTI gives it no end time, and never again. */
        lost++;
        prof_log_once(&note_unfinished, "kernels still running on the GPU at the run's end "
                      "(PROF_CUDA=kernels) have no end time: they are counted as lost");
        return;
    }
    if (pend == NULL && (pend = malloc(KZ_PENDING * sizeof *pend)) == NULL) {
        lost++;
        return;
    }
    if (npend == KZ_PENDING) {
        lost++;
        prof_log_once(&note_pending, "over %u kernel records waited for their launch's "
                      "record (PROF_CUDA=kernels): later ones are dropped and counted",
                      KZ_PENDING);
        return;
    }
    a = &pend[npend++];
    a->start = start;
    a->end = end;
    a->name = name;
    a->sid = sid;
    a->corr = corr;
    a->device = device;
    a->passes = 0;
}

static void read_buffer(struct prof_cupti_buf *b)
{
    const void *r = NULL;

    while (prof_cupti_next(b, &r) == 0) {
        uint32_t kind;

        memcpy(&kind, r, sizeof kind);
        switch (kind) {
        case CUPTI_KIND_CONCURRENT_KERNEL: {
            const struct cupti_rec_kernel *k = r;

            take_act(k->start, k->end, k->name, k->stream, k->correlation, k->device);
            break;
        }
        case CUPTI_KIND_MEMCPY: {
            const struct cupti_rec_memcpy *m = r;

            take_act(m->start, m->end, "(memcpy)", m->stream, m->correlation, m->device);
            break;
        }
        case CUPTI_KIND_MEMSET: {
            const struct cupti_rec_memset *m = r;

            take_act(m->start, m->end, "(memset)", m->stream, m->correlation, m->device);
            break;
        }
        case CUPTI_KIND_RUNTIME:
        case CUPTI_KIND_DRIVER:
            take_api(r);
            break;
        default:
            break;
        }
    }
}

void prof_kernels_pass_begin(void)
{
    uint64_t now = prof_clock_now_ns();

    if (now - last_flush_ns >= KZ_FLUSH_NS) {
        last_flush_ns = now;
        prof_cupti_flush(flush_forced);
    }
    /* Appended: a pass_begin without its poll (none today) keeps them. */
    if (taken == NULL) {
        taken = prof_cupti_take();
    } else {
        struct prof_cupti_buf *b = taken;

        while (b->next != NULL)
            b = b->next;
        b->next = prof_cupti_take();
    }
}

static void emit_ready(prof_kzone_sink zone, uint64_t now, int final)
{
    unsigned i, j, k;

    for (i = 0; i < nstreams; i++) {
        struct kstream *s = &streams[i];

        for (j = 0; j < s->n; j++) {
            struct kzone *z = &s->z[j];

            if (z->emitted || z->e == 0)
                continue;
            if (!final && s->horizon < z->e && now < z->e + KZ_HOLD_NS)
                continue;
            /* 2: a later launch was read, so every kernel of the zone was
             * (a stream runs in order): nothing more can come for it. */
            z->emitted = s->horizon >= z->e ? 2 : 1;
            if (z->ks == 0 && final && note_unfinished) {
                prof_log_once(&note_empty_end, "a CUDA zone (\"%s\") has no kernel, memcpy "
                              "or memset that finished before the run's end (PROF_CUDA="
                              "kernels): its GPU side is zero", z->name);
                zone(z->name, z->device, s->sid, z->e, z->e);
            } else if (z->ks == 0) {
                prof_log_once(&note_empty, "a CUDA zone (\"%s\") ran no kernel, memcpy or "
                              "memset on its stream (PROF_CUDA=kernels): its GPU side is zero",
                              z->name);
                zone(z->name, z->device, s->sid, z->e, z->e);
            } else {
                zone(z->name, z->device, s->sid, z->ks, z->ke);
            }
        }
        /* Forget delivered zones no kernel can come for any more; keep
         * order. */
        for (j = k = 0; j < s->n; j++) {
            struct kzone *z = &s->z[j];

            if (z->emitted == 2 || (z->emitted && (final || now >= z->e + KZ_KEEP_NS))) {
                nzones--;
                continue;
            }
            s->z[k++] = *z;
        }
        s->n = k;
    }
}

void prof_kernels_poll(prof_kernel_sink kernel, prof_kzone_sink zone, int final)
{
    uint64_t now = prof_clock_now_ns();
    struct prof_cupti_buf *b, *next;
    unsigned i, k;

    if (final) {
        prof_kernels_pass_begin();
        last_flush_ns = 0;
        flush_forced = 1;
        prof_kernels_pass_begin();
        flush_forced = 0;
    }
    for (b = taken; b != NULL; b = next) {
        next = b->next;
        read_buffer(b);
        prof_cupti_give_back(b);
    }
    taken = NULL;
    for (i = 0; i < nstreams; i++) {
        streams[i].min_open = UINT64_MAX;
        for (k = 0; k < streams[i].n; k++)
            if (streams[i].z[k].e == 0 && streams[i].z[k].b < streams[i].min_open)
                streams[i].min_open = streams[i].z[k].b;
    }

    for (i = k = 0; i < npend; i++) {
        struct act *a = &pend[i];
        struct api *e = api_tab != NULL ? &api_tab[a->corr & (KZ_API - 1)] : NULL;
        struct kstream *s;
        struct kzone *z;
        uint64_t l;

        if (e != NULL && e->corr == a->corr && a->corr != 0) {
            l = e->cpu_ns;
        } else if (final || ++a->passes >= KZ_PENDING_PASSES) {
            l = a->start;       /* its launch never came: placed by its start */
        } else {
            pend[k++] = *a;
            continue;
        }
        s = stream_of(a->sid, 1);
        z = s != NULL ? zone_take(s, l, a->start, a->end) : NULL;
        if (s != NULL) {
            s->device = (int)a->device;
            if (l > s->horizon)
                s->horizon = l;
        }
        if (z != NULL)
            z->device = (int)a->device;
        kernel(z != NULL ? z->name : prof_kernels_no_zone, (int)a->device, a->sid,
               kernel_name(a->name), a->start, a->end);
    }
    npend = k;
    cupti_lost = prof_cupti_dropped();
    emit_ready(zone, now, final);
}

uint64_t prof_kernels_lost(void)
{
    return lost + cupti_lost;
}

void prof_kernels_atfork_child(void)
{
    unsigned i;

    for (i = 0; i < nstreams; i++)
        streams[i].n = 0;
    nzones = 0;
    npend = 0;
    taken = NULL;
}
