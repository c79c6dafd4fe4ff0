/* fork_fixed.c - workers that record under a PROF_TRACE without %p
 * (driven by fork_fixed.py): the parent's file is the parent's alone,
 * whatever the workers do and however they end.
 *
 *     fork_fixed
 *
 * Forks four workers before the parent's first zone (as a DataLoader
 * forks its workers before the loop's first zone: the parent's runtime
 * has not started, so each worker starts its own), then four more after
 * it, and execs one more process of this program ("exec-child": started
 * below the parent with its environment, PROF_TRACE included). Each
 * worker records zones, waits until the parent has opened its trace and
 * written into it, records more, then ends by turns:
 *   0  returns from main (exit handlers: final report, trace end);
 *   1  _exit(0);
 *   2  SIGKILL;
 *   3  SIGTERM (prof's handler ends the run, then the signal kills).
 * The parent records its own zones, flushes, reaps every worker (each
 * ended as asked) and exits. Prints "parent <pid>" and "worker <pid>"
 * lines for the driver. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"

#define WORKERS 4

static void record(const char *name, int n)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE_BEGIN(z, name);
        PROF_ZONE_END(z);
    }
}

/* Parent: fork one worker that blocks on go[0] between its two bursts. */
static pid_t fork_worker(int way, int go_fd_read, int go_fd_write)
{
    pid_t pid = fork();
    char c;

    if (pid != 0)
        return pid;
    close(go_fd_write);
    record("worker_zone", 50);
    prof_flush();           /* its trace (if it opened one) has its events */
    if (read(go_fd_read, &c, 1) < 0) {
        /* The parent is gone: end as asked anyway. */
    }
    record("worker_zone", 50);
    prof_flush();
    switch (way) {
    case 0:
        exit(0);
    case 1:
        _exit(0);
    case 2:
        raise(SIGKILL);
        break;
    default:
        raise(SIGTERM);
        break;
    }
    /* prof's SIGTERM handler hands the signal to the collector, which
     * ends the run and raises it again: wait here for it, as a program
     * would go on until then. */
    for (;;)
        pause();
}

static int ended_as_asked(int status, int way)
{
    switch (way) {
    case 0:
    case 1:
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    case 2:
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    default:
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
    }
}

int main(int argc, char **argv)
{
    pid_t kids[2 * WORKERS + 1];
    int go[2], status, n = 0, bad = 0;
    char c = 'g';

    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        record("exec_zone", 20);
        return 0;
    }
    if (pipe(go) != 0)
        return 2;
    printf("parent %d\n", (int)getpid());
    fflush(stdout);
    /* Before the parent's first zone. */
    for (int w = 0; w < WORKERS; w++)
        kids[n++] = fork_worker(w, go[0], go[1]);
    /* The parent's trace opens with its first zone, after the workers
     * have recorded theirs. */
    record("parent_zone", 100);
    prof_flush();
    for (int w = 0; w < WORKERS; w++)
        kids[n++] = fork_worker(w, go[0], go[1]);
    kids[n] = fork();
    if (kids[n] == 0) {
        execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
        _exit(127);
    }
    n++;
    record("parent_zone", 100);
    prof_flush();
    /* Every worker goes on writing now that the parent's file has its
     * header and events. */
    for (int i = 0; i < n; i++)
        CHECK(write(go[1], &c, 1) == 1);
    for (int i = 0; i < n; i++) {
        int way = i < 2 * WORKERS ? i % WORKERS : 0;

        printf("worker %d\n", (int)kids[i]);
        CHECK(waitpid(kids[i], &status, 0) == kids[i]);
        if (!ended_as_asked(status, way)) {
            fprintf(stderr, "worker %d (way %d) ended with status 0x%x\n", (int)kids[i], way,
                    status);
            bad++;
        }
    }
    record("parent_zone", 100);
    return bad ? 1 : 0;
}
