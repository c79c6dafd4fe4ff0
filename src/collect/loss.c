/* loss.c - records lost to full rings, said once per window (loss.h).
 * A count of drops in the summary's header alone does not do: a run that
 * lost three quarters of its zones would read as 13 calls of 50, with
 * nothing to say so or what to do about it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "env.h"
#include "log.h"
#include "loss.h"
#include "registry.h"
#include "side.h"
#include "sink.h"
#include "units.h"
#include "zone.h"

static struct prof_loss run, win;
/* The window's number: a thread whose window is this one lost records in
 * it. Starts at 1, so that a new thread (0) has lost none. */
static uint64_t window_gen = 1;

static int said;                 /* the window's line is out */
/* When the last line went out: at most one every PROF_LOSS_QUIET_NS, so
 * that windows of 10 ms or of one short step do not flood stderr (their
 * summaries say the rest). */
static uint64_t said_ns;
#define PROF_LOSS_QUIET_NS (10 * 1000000000ull)

/* A thread's own: the window it last lost records in, made at its first
 * loss (side.h; none: 0). */
struct loss_thread {
    struct prof_side side;
    uint64_t window;
};
static struct prof_sides loss_threads = PROF_SIDES_INIT(PROF_SIDE_LOSS, struct loss_thread);

void prof_loss_thread_gone(struct prof_thread *t)
{
    struct loss_thread *lt = prof_side_of(&loss_threads, t);

    if (lt != NULL)
        prof_side_free(&loss_threads, lt);
}

void prof_loss_atfork_child(void)
{
    const struct prof_thread *self = (const struct prof_thread *)prof_thread_self_;

    /* The caller's stays, with the parent's window number: older than
     * every window of the child's (prof_loss_reset starts a new one), so
     * it has lost nothing in them. */
    (void)prof_side_atfork_child(&loss_threads, self, NULL);
}

void prof_loss_size(char *buf, size_t size, uint64_t records)
{
    if (records >= 1024 * 1024 && records % (1024 * 1024) == 0)
        snprintf(buf, size, "%lluM", (unsigned long long)(records >> 20));
    else if (records >= 1024 && records % 1024 == 0)
        snprintf(buf, size, "%lluk", (unsigned long long)(records >> 10));
    else
        snprintf(buf, size, "%llu", (unsigned long long)records);
}

static void add(struct prof_loss *l, const struct prof_thread *t, uint64_t lost,
                uint64_t behind_ns, uint64_t hint, int new_thread)
{
    l->records += lost;
    if (behind_ns > l->behind_ns)
        l->behind_ns = behind_ns;
    if (hint > l->buffer_hint)
        l->buffer_hint = hint;
    l->threads += new_thread;
    (void)t;
}

uint64_t prof_loss_note(struct prof_thread *t, uint64_t lost, uint64_t behind_ns, uint64_t ts_ns)
{
    uint64_t cap = t->hot.mask + 1, hint, bytes;
    struct loss_thread *lt;
    uint64_t last;
    int new_win, new_run;
    char size[24], now[24], name[64], behind[24];

    if (lost == 0)
        return 0;
    /* Out of memory for its state: counted as a thread new to the
     * window and the run, and its stages not marked. */
    lt = prof_side_get(&loss_threads, t);
    last = lt != NULL ? lt->window : 0;
    new_win = last != window_gen;
    new_run = last == 0;
    /* The ring that would have held this drain's records and the lost
     * ones, to the next power of two, as PROF_BUFFER rounds. */
    for (hint = cap; hint < cap + lost && hint < PROF_BUFFER_MAX; hint <<= 1)
        ;
    if (lt != NULL)
        lt->window = window_gen;
    add(&win, t, lost, behind_ns, hint, new_win);
    add(&run, t, lost, behind_ns, hint, new_run);
    if (said || (said_ns != 0 && ts_ns - said_ns < PROF_LOSS_QUIET_NS))
        return 0;
    said = 1;
    said_ns = ts_ns;
    prof_loss_size(size, sizeof size, hint);
    prof_loss_size(now, sizeof now, cap);
    prof_fmt_dur(behind, sizeof behind, (double)behind_ns);
    bytes = hint * sizeof(prof_record_);
    if (t->name != NULL)
        snprintf(name, sizeof name, "\"%.40s\" (tid %u)", t->name, t->tid);
    else
        snprintf(name, sizeof name, "tid %u", t->tid);
    prof_log("thread %s lost %llu records: its ring of %s filled while the collector was "
             "%s behind; PROF_BUFFER=%s would keep them (%llu %s per thread); the stages "
             "it recorded are marked * in the summary (said at most once per summary window "
             "and 10 s)",
             name, (unsigned long long)lost, now, behind, size,
             (unsigned long long)(bytes >= (1u << 20) ? bytes >> 20 : bytes >> 10),
             bytes >= (1u << 20) ? "MB" : "KB");
    return hint;
}

int prof_loss_thread_lossy(const struct prof_thread *t)
{
    const struct loss_thread *lt = prof_side_of(&loss_threads, t);

    return lt != NULL && lt->window == window_gen;
}

/* Counted by the zone path, outside the collector (zone.h). */
static uint64_t lanes_at_window, lanes_at_reset;

const struct prof_loss *prof_loss_get(int window)
{
    uint64_t lanes = __atomic_load_n(&prof_lanes_shared, __ATOMIC_RELAXED);

    run.lanes_shared = lanes - lanes_at_reset;
    win.lanes_shared = lanes - lanes_at_window;
    return window ? &win : &run;
}

void prof_loss_window_reset(void)
{
    memset(&win, 0, sizeof win);
    lanes_at_window = __atomic_load_n(&prof_lanes_shared, __ATOMIC_RELAXED);
    window_gen++;
    said = 0;
}

void prof_loss_reset(void)
{
    prof_loss_window_reset();
    /* said_ns stays: a program that resets often (every epoch, or in a
     * loop beside threads that keep losing) would otherwise hear the line
     * again at every reset (51 lines in 11 s). */
    memset(&run, 0, sizeof run);
    lanes_at_reset = lanes_at_window;
    /* Threads whose window is an old number have lost nothing since. */
}
