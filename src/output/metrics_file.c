/* metrics_file.c - PROF_METRICS=PATH.prom: the text written atomically for
 * node_exporter's textfile collector (metrics_file.h).
 *
 * The text goes to a temporary file beside the target and rename(2) puts
 * it in place, so node_exporter never reads half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof.h"
#include "env.h"
#include "fdio.h"
#include "json.h"
#include "log.h"
#include "metrics_file.h"
#include "process.h"


/* The .prom file's mode: node_exporter's textfile collector usually runs
 * as another user, so the file is readable by all, as a program's other
 * outputs are under the usual umask (docs/LIVE.md, "Who can read"). */
#define PROF_METRICS_FILE_MODE 0644

void prof_metrics_file_write(const struct prof_buf *b)
{
    static int logged;
    char path[4096], tmp[4200];
    const char *slash;
    int fd, n, err;

    if (prof_path_expand(prof_config_get()->metrics_path, path, sizeof path) != 0) {
        prof_log_once(&logged, "PROF_METRICS: path too long; no metrics");
        return;
    }
    /* The temporary is made by mkstemp beside the target (rename stays in
     * one file system): a name nobody can guess or take first, created
     * O_EXCL 0600, then given its mode once it holds the whole text. */
    slash = strrchr(path, '/');
    if (slash == NULL)
        n = snprintf(tmp, sizeof tmp, ".prof-metrics.XXXXXX");
    else
        n = snprintf(tmp, sizeof tmp, "%.*s/.prof-metrics.XXXXXX", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        err = -ENAMETOOLONG;
    } else if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
        err = -errno;
    } else {
        err = prof_write_full(fd, b->data, b->len, NULL);
        if (err == 0 && fchmod(fd, PROF_METRICS_FILE_MODE) != 0)
            err = -errno;
        if (close(fd) != 0 && err == 0)
            err = -errno;
        if (err == 0 && rename(tmp, path) != 0)
            err = -errno;
        if (err != 0)
            unlink(tmp);
    }
    if (err != 0) {
        char q[PROF_LOG_VALUE_SIZE];

        prof_log_once(&logged, "%s: cannot write it (%s); retried every second, said once",
                      prof_log_value(q, sizeof q, "PROF_METRICS", path), strerror(-err));
    }
}
