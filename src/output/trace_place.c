/* trace_place.c - where a zone goes on its thread's track
 * (prof_trace_place, trace.h).
 *
 * Time: ts is microseconds (three decimals) since an origin, the
 * CLOCK_MONOTONIC time recorded in the first event (args.prof.ts_origin_ns;
 * forked children keep their parent's). Small numbers keep the viewers'
 * double arithmetic well below a nanosecond of error, and each zone is
 * placed so that its end as a viewer computes it (ts + dur, two parsed
 * doubles added) nests as its ticks do.
 *
 * Ticks become nanoseconds at the clock rate of the moment a record is
 * drained, and the collector re-fits that rate as the run goes: a parent
 * drained after a re-fit could start a few nanoseconds after a child
 * drained before it, or a zone begin a few nanoseconds before its
 * predecessor ended. Viewers draw such zones wrong (or not at all), so
 * each zone is moved, by those few nanoseconds, to where the order of its
 * ticks puts it: after everything written before it that it does not
 * contain, around everything it does contain (the zones below it written
 * since its parent last ended: records arrive in the order their zones
 * end).
 *
 * Then the same holds as viewers compute it: a viewer adds ts and dur as
 * doubles, and a child that ends at its parent's nanosecond can come out
 * one ulp later than the parent (Chrome leaves it undrawn, speedscope
 * complains). So a zone's end is pushed a nanosecond later when its viewer
 * end would fall before the last one written (a parent ending at its last
 * child's nanosecond, and so on up, a nanosecond per level at most), and
 * what follows a zone may not start before the first nanosecond that a
 * viewer reads as at or after its end (the floor: its end, or one more).
 * One nanosecond is thousands of ulps at the magnitudes written (ts from
 * the origin: below 2^40 us, about 12 days of run, an ulp is under 0.25
 * ns), so a viewer's value is within half a nanosecond of the exact one,
 * and the doubles (three divisions, most of this function's time) are
 * computed only for an end within two nanoseconds of the last end, a
 * start at or before it, and a floor that a parent will need. */
#include <stdint.h>

#include "registry.h"
#include "trace.h"
#include "trace_text.h"
#include "trace_track.h"

#define VIEW_EXACT_NS (1ull << 50)      /* 13 days: a viewer's error < 0.5 ns */

/* The end of a zone as a viewer computes it from the text: ts and dur each
 * parsed to the nearest double (the text is the exact value ns/1000, so
 * that is the correctly rounded quotient), then added. */
static double view_end(uint64_t rel_start, uint64_t dur)
{
    return (double)rel_start / 1000.0 + (double)dur / 1000.0;
}

/* The end of t's last zone as a viewer computes it. */
static double last_view_end(const struct trace_thread *tt)
{
    return view_end(rel(tt->end_start), tt->end - tt->end_start);
}

void prof_trace_place(struct prof_thread *t, uint32_t depth, uint64_t *start, uint64_t *end)
{
    uint32_t d = depth > PROF_MAX_DEPTH_ - 1 ? PROF_MAX_DEPTH_ - 1 : depth;
    uint64_t first = 0, floor = UINT64_MAX;
    struct trace_thread *tt = tthread(t);

    if (tt == NULL)
        return;

    for (uint32_t k = d + 1; k <= tt->depth; k++) {
        if (tt->first[k] == 0)
            continue;
        if (first == 0 || tt->first[k] < first)
            first = tt->first[k];
        if (tt->floor[k] < floor)
            floor = tt->floor[k];
        tt->first[k] = 0;
    }
    if (first == 0) {       /* no children: after all that came before */
        if (*start <= tt->end || tt->first[d] == 0)
            floor = tt->end + ((double)rel(tt->end) / 1000.0 < last_view_end(tt));
        else
            floor = tt->end;   /* *start is past either floor: unused */
    }
    if (*start < floor)
        *start = floor;
    if (first != 0 && *start > first)
        *start = first;
    if (*end < *start)
        *end = *start;
    if (*end < tt->end)
        *end = tt->end;
    if (*end < tt->end + 2 || rel(*end) >= VIEW_EXACT_NS) {
        double last = last_view_end(tt), v = view_end(rel(*start), *end - *start);

        for (int i = 0; i < 4 && v < last; i++)
            v = view_end(rel(*start), ++*end - *start);
    }
    if (tt->first[d] == 0) {
        tt->first[d] = *start;
        tt->floor[d] = floor;
    } else if (*start < tt->first[d]) {
        tt->first[d] = *start;
    }
    if (d > tt->depth)
        tt->depth = d;
    tt->end = *end;
    tt->end_start = *start;
}
