/* metrics_ancestry.c - whether an ancestor process serves this tree's
 * metrics, read from /proc (metrics_ancestry.h).
 *
 * A process started afresh (subprocess, multiprocessing's spawn and
 * forkserver workers) inherits PROF_METRICS but is not a forked child. It
 * does not serve where an ancestor is a prof process started with the same
 * PROF_METRICS (that one serves the tree, or said why not), nor, where the
 * port turns out taken, when an ancestor serves prof metrics on it (one
 * that set PROF_METRICS after it started). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics_ancestry.h"

/* The inodes of the listening TCP sockets on port, from table
 * (/proc/net/tcp or tcp6): up to max of them. */
static int listeners(const char *table, unsigned port, unsigned long *inode, int n, int max)
{
    FILE *f = fopen(table, "re");
    char line[512];

    if (f == NULL)
        return n;
    while (n < max && fgets(line, sizeof line, f) != NULL) {
        unsigned lport, st;
        unsigned long ino;

        if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*x:%*x %*x:%*x %*x %*u "
                   "%*u %lu", &lport, &st, &ino) == 3 && lport == port && st == 0x0A)
            inode[n++] = ino;
    }
    fclose(f);
    return n;
}

/* Nonzero when pid has one of the sockets open. */
static int holds_socket(int pid, const unsigned long *inode, int n)
{
    char dir[64], path[320], link[64], want[40];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        ssize_t len;

        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if ((len = readlink(path, link, sizeof link - 1)) <= 0)
            continue;
        link[len] = '\0';
        for (int i = 0; i < n && !found; i++) {
            snprintf(want, sizeof want, "socket:[%lu]", inode[i]);
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/* Nonzero when pid has a thread named name (its server's, "prof-metrics"). */
static int has_thread(int pid, const char *name)
{
    char dir[64], path[400], comm[32];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(dir, sizeof dir, "/proc/%d/task", pid);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        if ((f = fopen(path, "re")) == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) != NULL) {
            comm[strcspn(comm, "\n")] = '\0';
            found = strcmp(comm, name) == 0;
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

/* The parent of pid from /proc/PID/stat, 0 where it cannot be read. */
static int parent_of(int pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    int ppid = 0;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    p = fgets(buf, sizeof buf, f);
    fclose(f);
    /* pid (comm) state ppid: comm may hold spaces and parentheses. */
    if (p == NULL || (p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1)
        return 0;
    return ppid;
}

/* The nearest ancestor (up to 32 levels, init excluded) for which is()
 * holds, or 0. */
static int ancestor_where(int (*is)(int pid, const void *arg), const void *arg)
{
    int pid = getppid();

    for (int depth = 0; depth < 32 && pid > 1; depth++, pid = parent_of(pid))
        if (is(pid, arg))
            return pid;
    return 0;
}

/* pid is a prof process (its collector runs) that was started with the
 * same PROF_METRICS (arg: "PROF_METRICS=value"). */
static int started_alike(int pid, const void *arg)
{
    char path[64], *entry = NULL;
    size_t cap = 0;
    FILE *f;
    int same = 0;

    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    while (!same && getdelim(&entry, &cap, '\0', f) > 0)
        same = strcmp(entry, (const char *)arg) == 0;
    free(entry);
    fclose(f);
    return same && has_thread(pid, "prof-collector");
}

struct listening {
    const unsigned long *inode;
    int n;
};

/* pid serves prof metrics on the port: it has one of its listening
 * sockets open and a thread named prof-metrics. */
static int serves_port(int pid, const void *arg)
{
    const struct listening *l = arg;

    return holds_socket(pid, l->inode, l->n) && has_thread(pid, "prof-metrics");
}

int prof_metrics_ancestor_serves(void)
{
    const char *v = getenv("PROF_METRICS");
    char want[512];
    int n;

    if (v == NULL)
        return 0;
    n = snprintf(want, sizeof want, "PROF_METRICS=%s", v);
    return n > 0 && (size_t)n < sizeof want && ancestor_where(started_alike, want) != 0;
}

int prof_metrics_port_held_by_ancestor(unsigned port)
{
    unsigned long inode[16];
    struct listening l = { inode, 0 };

    l.n = listeners("/proc/net/tcp", port, inode, 0, 16);
    l.n = listeners("/proc/net/tcp6", port, inode, l.n, 16);
    return l.n > 0 && ancestor_where(serves_port, &l) != 0;
}
