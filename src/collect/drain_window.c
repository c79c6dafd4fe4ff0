/* drain_window.c - step windows held and cut (drain_window.h): where the
 * drain cuts a step window, and which summary is due after it. */
#include <stdint.h>

#include "prof.h"
#include "clock.h"
#include "drain.h"
#include "drain_window.h"
#include "registry.h"
#include "runtime.h"

/* Step summaries (PROF_SUMMARY_EVERY=Nsteps). A STEP record that ends a
 * window only marks its summary due (prof_drain_due_step_, and where the
 * next window starts, due_cut_ns); the summary is formatted after the
 * drain loop and written before the collector drains again, so that what
 * is held for summaries is one at a time, whatever the step rate. On the
 * collector thread (prof_drain_exact_steps) a drain stops at a due STEP
 * record while its ring has little else waiting, so each window is cut
 * exactly at its step and gets its own summary; when the summaries cannot
 * keep up (more waiting), and in a drain for prof_flush or the exit, it goes on through the due
 * steps, and the one summary after the drain is labelled with the last of
 * them and covers every window since the last summary (merged_windows).
 * Never does a summary make the collector leave records in a ring. */
uint64_t prof_drain_due_step_;
static uint64_t due_cut_ns;

/* A step window closes after the zones that were open at its step end.
 * The README's loop calls prof_step() last inside the iteration's zone, so
 * that zone ends just after the step: cut at the step record, it fell into
 * the next window (the first window held 99 of 100 iterations, the next
 * 101 and more than 100% of its wall time). So the summary of a step taken
 * with zones open is held until the stepping thread's first record that
 * begins at or after the step (its next iteration): the records before it
 * are the zones that were open at the step, ending. Held until the end of
 * the collector pass in which the stepping thread itself flushes (its
 * records are all in then), or in which its outermost zone open at the
 * step ended (zones nest: the inner ones ended before it; a thread idle
 * after its last step held the summary WINDOW_HOLD_NS without this), and
 * at most WINDOW_HOLD_NS: a thread that stays inside its zone after the
 * step (blocked, or descheduled on a busy machine) delays the summary that
 * long, then its zone goes to the next window, as an epoch's zone open
 * across many steps always does. */
#define WINDOW_HOLD_NS 1000000000ull

struct prof_thread *prof_drain_window_held_;

static struct {
    uint64_t step, cut_ns, cut_ticks;
    uint64_t since_ns;           /* when it was held */
    int ended;                   /* its outermost zone open at the step ended */
} held;

/* The summary of the window that ends at step is due (formatted after
 * the drain). A later due step in the same drain merges with it. */
static void mark_due(uint64_t step, uint64_t cut_ns)
{
    prof_drain_due_step_ = step;
    due_cut_ns = cut_ns;
}

void prof_drain_window_release_locked(void)
{
    if (prof_drain_window_held_ == NULL)
        return;
    prof_drain_window_held_ = NULL;
    /* A prof_reset() since the step began a fresh window after it. */
    if (held.step >= prof_rt.window_start_step)
        mark_due(held.step, held.cut_ns);
}

void prof_drain_window_hold_locked(struct prof_thread *t, const prof_record_ *r, uint64_t cut_ns)
{
    prof_drain_window_release_locked();
    if (r->depth == 0) {
        mark_due(r->end, cut_ns);
        return;
    }
    prof_drain_window_held_ = t;
    held.ended = 0;
    held.step = r->end;
    held.cut_ns = cut_ns;
    held.cut_ticks = r->start;
    held.since_ns = prof_clock_now_ns();
}

int prof_drain_window_check_held_(const prof_record_ *r)
{
    uint32_t kind = r->kind & PROF_RECORD_KIND_MASK_;

    /* A sample, taken in a zone still open, is the zone's, not the next
     * window's. */
    if (kind == PROF_RECORD_CUDA_ || kind == PROF_RECORD_KZONE_ || kind == PROF_RECORD_CPU_ ||
        kind == PROF_RECORD_PEAK_)
        return 0;
    if (kind == PROF_RECORD_STEP_ || kind == PROF_RECORD_GAP_ || r->start >= held.cut_ticks) {
        prof_drain_window_release_locked();
        return 1;
    }
    if (kind == PROF_RECORD_ZONE_ && r->depth == 0)
        held.ended = 1;     /* this window's; released at the pass's end */
    return 0;
}

void prof_drain_window_pass_end_locked(void)
{
    const struct prof_thread *t = prof_drain_window_held_;

    if (t == NULL)
        return;
    if (held.ended || prof_thread_self_ == &t->hot ||
        prof_clock_now_ns() - held.since_ns >= WINDOW_HOLD_NS)
        prof_drain_window_release_locked();
}

void prof_drain_window_thread_gone_locked(const struct prof_thread *t)
{
    if (prof_drain_window_held_ == t)
        prof_drain_window_release_locked();
}

int prof_drain_due_take(uint64_t *step, uint64_t *cut_ns)
{
    if (prof_drain_due_step_ == 0)
        return 0;
    *step = prof_drain_due_step_;
    *cut_ns = due_cut_ns;
    prof_drain_due_step_ = 0;
    return 1;
}

void prof_drain_window_atfork_child(void)
{
    prof_drain_window_held_ = NULL;   /* the parent's threads and window */
    prof_drain_due_step_ = 0;
}
