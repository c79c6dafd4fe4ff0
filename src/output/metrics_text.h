/* metrics_text.h - the live snapshot as Prometheus text (metrics_text.c). */
#ifndef PROF_METRICS_TEXT_H
#define PROF_METRICS_TEXT_H

#include "json.h"

struct prof_live_snap;

/* Format snap as Prometheus text (exposition format 0.0.4) into b. */
void prof_metrics_format(struct prof_buf *b, const struct prof_live_snap *snap);

#endif
