/* metrics.h - PROF_METRICS: the live table in Prometheus's text format
 * (metrics_text.h), served over HTTP (HOST:PORT, metrics_http.h) or
 * written to a .prom file (metrics_file.h). */
#ifndef PROF_METRICS_H
#define PROF_METRICS_H

#include <stddef.h>

struct prof_live_snap;

/* Take a new snapshot into use: the server answers scrapes with it from
 * now on (started on the first call), or the .prom file is rewritten
 * (write + rename). Lock NOT held; never waits on a client. */
void prof_metrics_publish(const struct prof_live_snap *snap);

/* Nonzero where this process publishes metrics: PROF_METRICS is set and
 * this is not a forked child (one server per process tree, the first
 * process's), or it writes a .prom file whose name has %p. Any thread. */
int prof_metrics_wanted(void);

/* Stop the server thread and close its sockets (shutdown). */
void prof_metrics_stop(void);

/* The server's limits: connections open at once (a new one beyond that
 * closes the oldest that has not sent its request), and how long one may
 * take in all. */
#define PROF_METRICS_MAX_CONN 64
#define PROF_METRICS_CONN_NS (5 * 1000000000ull)
#define PROF_METRICS_MAX_REQUEST 8192

#endif
