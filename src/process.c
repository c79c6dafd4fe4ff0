/* process.c - program name, host, pid and rank for summaries, trace
 * metadata and %p / %r in paths. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "process.h"

static struct prof_process proc;
static int loaded;

static int rank_from_env(void)
{
    static const char *vars[] = {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r;
        if (v == NULL || *v == '\0')
            continue;
        r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0 && r < 1000000)
            return (int)r;
    }
    return -1;
}

void prof_process_refresh(void)
{
    FILE *f = fopen("/proc/self/comm", "re");

    proc.program[0] = '\0';
    if (f != NULL) {
        if (fgets(proc.program, sizeof proc.program, f) != NULL)
            proc.program[strcspn(proc.program, "\n")] = '\0';
        fclose(f);
    }
    if (proc.program[0] == '\0')
        snprintf(proc.program, sizeof proc.program, "process");
    if (gethostname(proc.host, sizeof proc.host) != 0)
        snprintf(proc.host, sizeof proc.host, "unknown");
    proc.host[sizeof proc.host - 1] = '\0';
    proc.pid = (int)getpid();
    proc.rank = rank_from_env();
    loaded = 1;
}

const struct prof_process *prof_process_get(void)
{
    if (!loaded)
        prof_process_refresh();
    return &proc;
}

int prof_path_expand(const char *pat, char *buf, size_t size)
{
    const struct prof_process *p = prof_process_get();
    size_t n = 0;

    for (; *pat != '\0'; pat++) {
        char tmp[24];
        const char *add = tmp;
        if (pat[0] == '%' && pat[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", p->pid);
            pat++;
        } else if (pat[0] == '%' && pat[1] == 'r') {
            snprintf(tmp, sizeof tmp, "%d", p->rank < 0 ? 0 : p->rank);
            pat++;
        } else if (pat[0] == '%' && pat[1] == '%') {
            add = "%";
            pat++;
        } else {
            tmp[0] = *pat;
            tmp[1] = '\0';
        }
        size_t len = strlen(add);
        if (n + len + 1 > size)
            return -ENAMETOOLONG;
        memcpy(buf + n, add, len);
        n += len;
    }
    buf[n] = '\0';
    return 0;
}

int prof_path_has_pid(const char *pat)
{
    for (; *pat != '\0'; pat++) {
        if (pat[0] == '%' && pat[1] == '%')
            pat++;
        else if (pat[0] == '%' && pat[1] == 'p')
            return 1;
    }
    return 0;
}
