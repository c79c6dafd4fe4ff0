/* trace_track.c - the trace's tracks: which tid each thread, asyncio task
 * lane and GPU stream is drawn on, and their names and sort order, written
 * as metadata events before a track's first event (trace_track.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "process.h"
#include "registry.h"
#include "sink.h"
#include "trace_text.h"
#include "trace_track.h"

#define GPU_TID_BASE 1000000000u
#define MAX_STREAMS 256

static struct trace_thread *trace_threads;
static uint64_t streams[MAX_STREAMS];
static int stream_device[MAX_STREAMS];
static unsigned nstreams;

struct trace_thread *prof_trace_thread_new(struct prof_thread *t)
{
    struct trace_thread *tt;

    if ((tt = calloc(1, sizeof *tt)) == NULL)
        return NULL;
    tt->thread = t;
    tt->next = trace_threads;
    trace_threads = tt;
    t->side[PROF_SIDE_TRACE] = tt;
    return tt;
}

void prof_trace_thread_free(struct prof_thread *t, struct trace_thread *tt)
{
    struct trace_thread **link = &trace_threads;

    while (*link != tt)
        link = &(*link)->next;
    *link = tt->next;
    free(tt->lanes);
    free(tt);
    t->side[PROF_SIDE_TRACE] = NULL;
}

/* A thread's track: its kernel tid, which viewers and other tools show,
 * unless an earlier thread of this process had it (the kernel hands tids
 * out again after pid_max of them, 32,768 on many systems): then a tid of
 * its own from THREAD_TID_BASE up, never reused, so that two threads
 * never share a track. Kernel tids lie below 2^22 (PID_MAX_LIMIT): a bit
 * each, 512 KB of address space of which a page per 32,768 tids is
 * touched. Forgotten in a forked child, whose trace is its own. */
#define THREAD_TID_BASE 1200000000u
#define KERNEL_TIDS (1u << 22)
static uint64_t *tids_seen;
static uint32_t thread_tids;     /* tracks handed out past a reused tid */

uint32_t prof_trace_thread_track_new(const struct prof_thread *t, struct trace_thread *tt)
{
    uint32_t tid = t->tid;

    if (tids_seen == NULL)
        tids_seen = calloc(KERNEL_TIDS / 64, sizeof *tids_seen);
    if (tid < KERNEL_TIDS && tids_seen != NULL) {
        uint64_t bit = (uint64_t)1 << (tid % 64);

        if (tids_seen[tid / 64] & bit)
            tid = THREAD_TID_BASE + 1 + thread_tids++ % (300000000u - 1);
        else
            tids_seen[tid / 64] |= bit;
    }
    return tt->track = tid;
}

void prof_trace_threads_forget(void)
{
    struct trace_thread *tt, *next;

    for (tt = trace_threads, trace_threads = NULL; tt != NULL; tt = next) {
        next = tt->next;
        tt->thread->side[PROF_SIDE_TRACE] = NULL;
        free(tt->lanes);
        free(tt);
    }
    free(tids_seen);
    tids_seen = NULL;
}

void __attribute__((noinline)) prof_trace_thread_meta_write(struct prof_thread *t,
                                                            struct trace_thread *tt,
                                                            const char *name)
{
    /* The process's main thread is the one whose tid is the pid, whichever
     * thread recorded first; it sorts first. */
    int is_main = t->tid == (uint32_t)prof_process_get()->pid;
    uint32_t tid = thread_track(t, tt);
    long sort = is_main ? 0 : (long)t->index + 1;
    char fallback[32];

    if (name == NULL) {
        if (is_main)
            snprintf(fallback, sizeof fallback, "main");
        else
            snprintf(fallback, sizeof fallback, "thread %u", t->index);
        prof_trace_metadata("thread_name", tid, "name", fallback, 0);
        prof_trace_metadata("thread_sort_index", tid, "sort_index", NULL, sort);
        tt->named = prof_intern(fallback);
        return;
    }
    prof_trace_metadata("thread_name", tid, "name", name, 0);
    if (tt->named == NULL)
        prof_trace_metadata("thread_sort_index", tid, "sort_index", NULL, sort);
    tt->named = name;
}

/* Lane tracks (an asyncio task's zones, prof_impl.h): each (thread, lane)
 * gets a tid of its own from LANE_TID_BASE up, in the order they first
 * record, never reused while the process lives (the thread's index
 * masked into the tid would wrap after 16,384 threads and draw later
 * threads' tasks on earlier ones' tracks). 647 million tracks fit
 * below 2^31 (viewers read tids as 32-bit signed); past that they would
 * start again. Named once per trace file. */
#define LANE_TID_BASE 1500000000u
#define LANE_TIDS (0x7fffffffu - LANE_TID_BASE)
struct trace_lane {
    uint32_t tid;                /* 0: none yet */
    uint32_t named;              /* the trace file (gen) it was named in */
};
static uint32_t lane_tids;       /* tracks handed out */

uint32_t prof_trace_lane_track(struct prof_thread *t, struct trace_thread *tt, uint32_t lane)
{
    const char *tname = __atomic_load_n(&t->name, __ATOMIC_RELAXED);
    uint64_t gen = prof_trace_fmt.gen;
    struct trace_lane *l;
    char name[96];

    if (lane >= tt->nlanes) {
        uint32_t n = tt->nlanes ? tt->nlanes : 8;

        while (n <= lane)
            n *= 2;
        if ((l = realloc(tt->lanes, n * sizeof *l)) == NULL)
            return LANE_TID_BASE;   /* placed on a shared track */
        memset(l + tt->nlanes, 0, (n - tt->nlanes) * sizeof *l);
        tt->lanes = l;
        tt->nlanes = n;
    }
    l = &tt->lanes[lane];
    if (l->tid == 0)
        l->tid = LANE_TID_BASE + 1 + lane_tids++ % LANE_TIDS;
    if (l->named == (uint32_t)gen)
        return l->tid;
    l->named = (uint32_t)gen;
    if (tname != NULL)
        snprintf(name, sizeof name, "%.*s task %u", (int)prof_utf8_cut(tname, strlen(tname), 60),
                 tname, lane);
    else if (t->tid == (uint32_t)prof_process_get()->pid)
        snprintf(name, sizeof name, "main task %u", lane);
    else
        snprintf(name, sizeof name, "thread %u task %u", t->index, lane);
    prof_trace_metadata("thread_name", l->tid, "name", name, 0);
    prof_trace_metadata("thread_sort_index", l->tid, "sort_index", NULL,
                        ((long)t->index + 1) * 4096 + (long)lane);
    return l->tid;
}

uint32_t prof_trace_gpu_track(int device, uint64_t stream)
{
    char name[64];
    unsigned i;

    for (i = 0; i < nstreams; i++)
        if (streams[i] == stream && stream_device[i] == device)
            return GPU_TID_BASE + i;
    if (nstreams == MAX_STREAMS)
        return GPU_TID_BASE + MAX_STREAMS;   /* one shared track for the rest */
    streams[nstreams] = stream;
    stream_device[nstreams] = device;
    snprintf(name, sizeof name, "GPU %d stream %u", device, nstreams);
    prof_trace_metadata("thread_name", GPU_TID_BASE + nstreams, "name", name, 0);
    prof_trace_metadata("thread_sort_index", GPU_TID_BASE + nstreams, "sort_index", NULL,
                        100000 + (long)nstreams);
    return GPU_TID_BASE + nstreams++;
}

void prof_trace_gpu_tracks_reset(void)
{
    nstreams = 0;
}
