/* summary.h - the summary, as a table or one JSON line. Runtime lock held,
 * after a drain. */
#ifndef PROF_SUMMARY_H
#define PROF_SUMMARY_H

#include <stdint.h>

#include "json.h"

enum prof_summary_kind { PROF_KIND_PERIODIC = 1, PROF_KIND_FINAL = 2, PROF_KIND_DEMAND = 3 };

/* Append the summary to b, as of step `step` and time `now_ns`. A periodic
 * summary shows the current window (and the whole run in its header and
 * JSON); the others the whole run. */
void prof_summary_format(struct prof_buf *b, int format, enum prof_summary_kind kind,
                         uint64_t step, uint64_t now_ns);

/* Stages shown before the rest are folded into one line. */
#define PROF_SUMMARY_MAX_ROWS 60

#endif
