/* memory_sample.c - what the process-memory sampler (src/output/memory.c)
 * costs the collector: the same reads, timed. Each sample (every 100 ms)
 * is one pread of /proc/self/statm and its parse; VmHWM (one pread of
 * /proc/self/status and a search) is read only when a summary, the live
 * file or the metrics ask. Prints the cost per read and the share of one
 * CPU at the sampler's period and the live file's (1 s).
 *
 *   memory_sample [N]      N reads of each (default 20000) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    int statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    int status = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    unsigned long long sum = 0, a, b;
    char buf[8192];
    double t0, t1, t2;

    if (statm < 0 || status < 0 || n <= 0) {
        fprintf(stderr, "memory_sample: no /proc/self\n");
        return 77;
    }
    t0 = now_s();
    for (int i = 0; i < n; i++) {
        ssize_t k = pread(statm, buf, sizeof buf - 1, 0);

        buf[k > 0 ? k : 0] = '\0';
        if (sscanf(buf, "%llu %llu", &a, &b) == 2)
            sum += b;
    }
    t1 = now_s();
    for (int i = 0; i < n; i++) {
        ssize_t k = pread(status, buf, sizeof buf - 1, 0);
        const char *p;

        buf[k > 0 ? k : 0] = '\0';
        if ((p = strstr(buf, "\nVmHWM:")) != NULL && sscanf(p + 7, "%llu", &a) == 1)
            sum += a;
    }
    t2 = now_s();
    printf("RSS sample (statm): %.2f us, %.4f%% of a CPU every 100 ms\n",
           (t1 - t0) / n * 1e6, (t1 - t0) / n / 0.1 * 100);
    printf("VmHWM read (status): %.2f us, %.4f%% of a CPU once a second\n",
           (t2 - t1) / n * 1e6, (t2 - t1) / n / 1.0 * 100);
    return sum == 0;
}
