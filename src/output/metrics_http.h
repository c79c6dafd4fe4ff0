/* metrics_http.h - PROF_METRICS=HOST:PORT: the HTTP server (metrics_http.c).
 * The collector calls these, lock released; the server thread never waits
 * on the collector nor the collector on it. */
#ifndef PROF_METRICS_HTTP_H
#define PROF_METRICS_HTTP_H

#include "json.h"

/* 0 when the server runs (started on the first call in this process),
 * -1 when this process does not serve: an ancestor started alike serves
 * the tree, or the server could not start (said once). */
int prof_metrics_http_ready(void);

/* Answer scrapes with a copy of b from now on (kept as is where memory
 * runs out). */
void prof_metrics_http_serve(const struct prof_buf *b);

/* Stop the server thread and close its sockets (shutdown); a later call
 * of prof_metrics_http_ready may serve again. */
void prof_metrics_http_stop(void);

#endif
