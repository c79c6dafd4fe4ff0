/* memory_prog.c - ground truth for the process's memory figures
 * (memory.py checks them).
 *
 *   memory_prog load MS   step 1 ("load") maps and touches 200 MB and holds
 *                         it MS ms; step 2 ("free") unmaps it; steps 3-4
 *                         do little. Prints the kernel's VmHWM (bytes) on
 *                         stdout as its last act.
 *   memory_prog fork      a forked child maps and touches 300 MB in its
 *                         own "child_load" stage and exits; the parent
 *                         waits for it and prints its own VmHWM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static int run_load(long hold_ms)
{
    char *p;

    {
        PROF_ZONE("load");
        p = touch(200 * MB);
        sleep_ms(hold_ms);
    }
    prof_step();
    {
        PROF_ZONE("free");
        munmap(p, 200 * MB);
    }
    prof_step();
    for (int i = 0; i < 2; i++) {
        PROF_ZONE("idle");
        sleep_ms(150);
        prof_step();
    }
    printf("VmHWM %llu\n", vm_hwm());
    return 0;
}

static int run_fork(void)
{
    pid_t pid;
    int st;

    {
        PROF_ZONE("parent");
        sleep_ms(50);
    }
    prof_flush();
    if ((pid = fork()) < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        {
            PROF_ZONE("child_load");
            (void)touch(300 * MB);
            sleep_ms(250);
        }
        printf("child VmHWM %llu\n", vm_hwm());
        fflush(stdout);
        exit(0);
    }
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "the child failed\n");
        return 2;
    }
    {
        PROF_ZONE("parent");
        sleep_ms(250);
    }
    printf("VmHWM %llu\n", vm_hwm());
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "load") == 0)
        return run_load(atol(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "fork") == 0)
        return run_fork();
    fprintf(stderr, "usage: memory_prog load MS | fork\n");
    return 2;
}
