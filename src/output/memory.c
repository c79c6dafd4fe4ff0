/* memory.c - the process's resident memory, sampled (memory.h).
 *
 * RSS is /proc/self/statm's second field (resident pages), read with one
 * pread on a descriptor kept open: about 5 us, once every
 * PROF_MEM_PERIOD_NS on the collector thread, never on a thread of the
 * program. Each sample goes to the trace (a counter track) and into the
 * window's largest. The peak is the kernel's own: VmHWM in
 * /proc/self/status (about 40 us, read only when a summary, the live file
 * or the metrics ask, at most a few times a second). VmHWM is per address
 * space, so a forked worker's memory is never the parent's; ru_maxrss is
 * not used, as it keeps the peak of the program an exec replaced.
 *
 * A window's peak: where VmHWM rose during the window, the new VmHWM (the
 * process reached it in this window: exact); otherwise the largest of the
 * window's samples and RSS now, which misses a rise and fall shorter than
 * the period that stayed under the run's peak (docs/CONFIG.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "memory.h"
#include "trace.h"

static struct {
    int statm, status;           /* descriptors; -1: not open */
    pid_t pid;                   /* whose they are (a forked child reopens) */
    int failed;                  /* /proc/self cannot be read: no figures */
    long page;
    uint64_t next_ns;
    uint64_t rss;                /* the last sample */
    uint64_t win_max;            /* the window's largest sample */
    uint64_t hwm_win_start;      /* VmHWM when the window began */
} m = {-1, -1, 0, 0, 0, 0, 0, 0, 0};

static void mem_close(void)
{
    if (m.statm >= 0)
        close(m.statm);
    if (m.status >= 0)
        close(m.status);
    m.statm = m.status = -1;
}

static ssize_t read_at0(int fd, char *buf, size_t size)
{
    ssize_t n;

    do
        n = pread(fd, buf, size - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* VmHWM in bytes; 0 where unknown. */
static uint64_t read_hwm(void)
{
    char buf[8192];
    const char *p;
    unsigned long long kb;

    if (m.status < 0 || read_at0(m.status, buf, sizeof buf) < 0)
        return 0;
    if ((p = strstr(buf, "\nVmHWM:")) == NULL || sscanf(p + 7, "%llu", &kb) != 1)
        return 0;
    return (uint64_t)kb * 1024;
}

/* Resident bytes now; 0 where unknown. */
static uint64_t read_rss(void)
{
    char buf[128];
    unsigned long long size, res;

    if (m.statm < 0 || read_at0(m.statm, buf, sizeof buf) < 0 ||
        sscanf(buf, "%llu %llu", &size, &res) != 2)
        return 0;
    return (uint64_t)res * (uint64_t)m.page;
}

/* The descriptors, opened by this process (a forked child's are its
 * parent's /proc entries: it opens its own and starts its window anew).
 * 0, or -1 where /proc/self cannot be read. */
static int mem_ready(void)
{
    pid_t pid = getpid();

    if (m.pid == pid)
        return m.failed ? -1 : 0;
    mem_close();
    m.pid = pid;
    m.failed = 0;
    m.rss = m.win_max = 0;
    m.page = sysconf(_SC_PAGESIZE);
    m.statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    m.status = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (m.statm < 0 || m.status < 0 || m.page <= 0) {
        mem_close();
        m.failed = 1;
        return -1;
    }
    m.hwm_win_start = read_hwm();
    return 0;
}

static void sample(uint64_t now)
{
    uint64_t rss = read_rss();

    if (rss == 0)
        return;
    m.rss = rss;
    if (rss > m.win_max)
        m.win_max = rss;
    prof_trace_counter(NULL, "RSS MiB", now, (double)rss / (1024.0 * 1024.0));
}

static void sink_tick(uint64_t now)
{
    if (now < m.next_ns || mem_ready() != 0)
        return;
    m.next_ns = now + PROF_MEM_PERIOD_NS;
    sample(now);
}

const struct prof_sink prof_memory_sink = {
    .name = "memory",
    .tick = sink_tick,
};

void prof_mem_figures(int window, struct prof_mem_figures *out)
{
    uint64_t rss, hwm;

    memset(out, 0, sizeof *out);
    if (mem_ready() != 0 || (rss = read_rss()) == 0)
        return;
    hwm = read_hwm();
    out->known = 1;
    out->rss = rss;
    out->peak = rss > m.win_max ? rss : m.win_max;
    if (hwm > out->peak && (!window || hwm > m.hwm_win_start))
        out->peak = hwm;
    out->run_peak = hwm > out->peak ? hwm : out->peak;
}

void prof_mem_window_close(void)
{
    if (mem_ready() != 0)
        return;
    m.hwm_win_start = read_hwm();
    /* What is resident as the next window starts is part of its peak. */
    m.win_max = read_rss();
}
