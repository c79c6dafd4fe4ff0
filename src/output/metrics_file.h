/* metrics_file.h - PROF_METRICS=PATH.prom written atomically (metrics_file.c). */
#ifndef PROF_METRICS_FILE_H
#define PROF_METRICS_FILE_H

#include "json.h"

/* Replace the configured .prom file (its %p expanded) with b's text: a
 * temporary made by mkstemp beside it, mode 0644, then rename(2). A
 * failure is said once on stderr; the next second tries again. */
void prof_metrics_file_write(const struct prof_buf *b);

#endif
