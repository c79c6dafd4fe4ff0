/* gpu_spans.h - the union of a GPU track's busy spans (gpu_spans.c).
 *
 * A set of sorted, disjoint spans [a, b) in a bounded array: adding a span
 * merges it with those it touches; when the array is full, spans closer
 * than a gap that doubles each time (GPU_GAP_FIRST_NS, then twice that,
 * ...) are merged, so the busy time read back can only be overstated, by
 * at most the gaps filled. Pure arithmetic: no lock, no prof state; the
 * caller (gpu_busy.c) serializes. */
#ifndef PROF_GPU_SPANS_H
#define PROF_GPU_SPANS_H

#include <stdint.h>

#define GPU_SPANS 4096              /* merged busy spans kept per set */
#define GPU_GAP_FIRST_NS 1000u      /* the first merge when a set is full */

struct prof_span {
    uint64_t a, b;
};

struct prof_spans {
    struct prof_span *s;
    unsigned n, cap;
    uint64_t gap;                   /* spans closer than this are merged (0: exact) */
    uint64_t gap_win;               /* the largest gap merged since the caller cleared it */
};

/* Add [a, b) to the union (nothing when b <= a). Grows the array up to
 * GPU_SPANS spans, then merges by the gap; where memory runs out the
 * span is merged likewise, or left out from an empty set. */
void prof_spans_add(struct prof_spans *k, uint64_t a, uint64_t b);

/* The union's length inside [lo, hi). */
uint64_t prof_spans_busy(const struct prof_spans *k, uint64_t lo, uint64_t hi);

/* Forget the spans that end before t. */
void prof_spans_drop_before(struct prof_spans *k, uint64_t t);

#endif
