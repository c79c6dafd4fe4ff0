/* summary.h - the summary, as a table or one JSON line. Runtime lock held,
 * after a drain. */
#ifndef PROF_SUMMARY_H
#define PROF_SUMMARY_H

#include <stdint.h>

#include "json.h"

enum prof_summary_kind { PROF_KIND_PERIODIC = 1, PROF_KIND_FINAL = 2, PROF_KIND_DEMAND = 3 };

/* Append the summary to b, as of step `step` and time `now_ns`. A periodic
 * summary shows the current window (and the whole run in its header and
 * JSON); the others the whole run. windows: for a periodic summary by time
 * (PROF_SUMMARY_EVERY=10s), the periods its window covers (1, or more when
 * the summaries due meanwhile were not made: the writer was behind);
 * merged_windows says it. Step windows count their steps instead. */
void prof_summary_format(struct prof_buf *b, int format, enum prof_summary_kind kind,
                         uint64_t step, uint64_t now_ns, uint64_t windows);


/* Forked workers that ended before they could finish, as the summary
 * lists them. children.c, on the floor above, finds them and says each
 * once on the log. */
#define PROF_CHILDREN_PIDS_KEPT 64       /* pids kept; the count goes on */
struct prof_children_ended {
    uint64_t count;                         /* children said ended, whole run */
    uint32_t npids;                         /* pids[] kept (the first ones) */
    int32_t pids[PROF_CHILDREN_PIDS_KEPT];
    uint64_t unwatched;                     /* forked children in this tree
                                               that found the table full */
    uint32_t slots;                         /* the table's slots */
    uint64_t recorded;                      /* forked children of this process
                                               that recorded, whole run */
};

/* Where the summary learns of them: a hook the floor above installs
 * (start.c: prof_children_check_locked), called once per summary with the
 * runtime lock held. Without one, there are none. */
void prof_summary_children_hook(const struct prof_children_ended *(*check_locked)(void));

/* Stages shown before the rest are folded into one line. */
#define PROF_SUMMARY_MAX_ROWS 60
/* JSON sections: the heaviest stages (and their ancestors) kept, the rest
 * counted in folded_stages / folded_total_ns, so a run with a million
 * names writes a summary of megabytes, not hundreds. */
#define PROF_SUMMARY_JSON_MAX_ROWS 10000

#endif
