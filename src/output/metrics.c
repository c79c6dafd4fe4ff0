/* metrics.c - PROF_METRICS: where the Prometheus text goes (metrics.h).
 *
 * The collector formats the text (metrics_text.c) once a second, lock
 * released, and either swaps it in as what the server answers
 * (metrics_http.c) or writes it to PATH.prom (metrics_file.c). This file
 * decides which, and whether this process publishes at all. */
#include <stdlib.h>

#include "prof.h"
#include "env.h"
#include "json.h"
#include "metrics.h"
#include "metrics_file.h"
#include "metrics_http.h"
#include "metrics_text.h"
#include "process.h"
#include "runtime.h"

int prof_metrics_wanted(void)
{
    const struct prof_config *cfg = prof_config_get();

    switch (cfg->metrics) {
    case PROF_METRICS_HTTP:
        /* One server per process tree, the first process's: a forked child
         * (a DataLoader worker) never binds the port, whenever its parent
         * first publishes, and says nothing about it. */
        return !prof_rt.forked_from;
    case PROF_METRICS_FILE:
        /* A forked child writes only to a file of its own (%p). */
        return !prof_rt.forked_from || prof_path_has_pid(cfg->metrics_path);
    default:
        return 0;
    }
}

void prof_metrics_publish(const struct prof_live_snap *snap)
{
    const struct prof_config *cfg = prof_config_get();
    struct prof_buf b = {0};

    if (!prof_metrics_wanted())
        return;
    if (cfg->metrics == PROF_METRICS_FILE) {
        prof_metrics_format(&b, snap);
        if (!b.failed)
            prof_metrics_file_write(&b);
        prof_buf_free(&b);
        return;
    }
    if (prof_metrics_http_ready() != 0)
        return;
    prof_metrics_format(&b, snap);
    if (!b.failed)
        prof_metrics_http_serve(&b);
    prof_buf_free(&b);
}

void prof_metrics_stop(void)
{
    prof_metrics_http_stop();
}
