/* peak_prog.c - ground truth for which stage raised the process's peak
 * resident memory (peak.py checks the summaries against it).
 *
 *   peak_prog two      two threads. The main thread runs 12 steps of
 *                      "churn" (map, touch and unmap 1 MB, then compute
 *                      5 ms) and "idle" (sleep 10 ms). After its first
 *                      step the worker's "load" stage maps and touches
 *                      200 MB once (memset) and keeps it, then computes
 *                      40 ms of its own CPU time, while the main thread
 *                      computes in "compute" until it is done.
 *   peak_prog burst MS a "spin" stage computes MS ms; then a "burst" stage
 *                      touches 8 MB and ends at once (a few ms, about one
 *                      sampling period), then "after" computes MS ms. The
 *                      rise happened in "burst"; the sampler may see it
 *                      there or at the next sample, in "after".
 *
 * Prints key=value lines: the kernel's VmHWM at the end (hwm=bytes). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "prof.h"

#include "mem_check.h"

static char *touch(size_t bytes)
{
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    memset(p, 1, bytes);    /* every page resident */
    return p;
}

static char *loaded;
static volatile int loaded_done;

static void *worker(void *arg)
{
    (void)arg;
    prof_thread_name("worker");
    {
        PROF_ZONE("load");
        loaded = touch(200 * MB);
        spin_cpu_ms(40);
    }
    __atomic_store_n(&loaded_done, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++) {
        PROF_ZONE("idle");
        sleep_ms(10);
    }
    return NULL;
}

static void churn_step(void)
{
    {
        PROF_ZONE("churn");
        /* mmap and munmap: the megabyte is faulted in again every step
         * (an allocator might keep it resident). */
        char *p = touch(1 * MB);

        munmap(p, 1 * MB);
        spin_cpu_ms(5);
    }
    {
        PROF_ZONE("idle");
        sleep_ms(10);
    }
    prof_step();
}

static int run_two(void)
{
    pthread_t th;

    churn_step();
    if (pthread_create(&th, NULL, worker, NULL) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 2;
    }
    {
        /* On a CPU the whole time the worker loads, faulting nothing:
         * its samples see the peak rise and must leave it. */
        PROF_ZONE("compute");
        while (!__atomic_load_n(&loaded_done, __ATOMIC_ACQUIRE))
            spin_cpu_ms(1);
    }
    prof_step();
    for (int step = 1; step < 12; step++)
        churn_step();
    pthread_join(th, NULL);
    printf("hwm=%llu\n", vm_hwm());
    munmap(loaded, 200 * MB);
    return 0;
}

static int run_burst(double ms)
{
    {
        PROF_ZONE("spin");
        spin_cpu_ms(ms);
    }
    {
        PROF_ZONE("burst");
        (void)touch(8 * MB);
    }
    {
        PROF_ZONE("after");
        spin_cpu_ms(ms);
    }
    printf("hwm=%llu\n", vm_hwm());
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "two") == 0)
        return run_two();
    if (argc >= 3 && strcmp(argv[1], "burst") == 0)
        return run_burst(atof(argv[2]));
    fprintf(stderr, "usage: peak_prog two | burst MS\n");
    return 2;
}
