/* workers_killed.c - forked workers that end before they finish, and one
 * that finishes (issue 20; driven by workers_killed.py).
 *
 *     workers_killed ACTION...
 *
 * Forks one worker per ACTION, each recording zones (its runtime starts,
 * so its parent watches it), then:
 *   kill    SIGKILLed by the parent, which reaps it (waitpid);
 *   zombie  SIGKILLed by the parent, left a zombie until the parent exits;
 *   exit    returns from main: final summary, trace closed;
 *   _exit   _exit(3): no exit handlers, no summary; left a zombie.
 * Prints "<pid> <action>" for each, then records a zone of its own and
 * exits: its final summary must name the workers of kill, zombie and
 * _exit, and not the one of exit. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"

static void work(int n)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE("worker.step");
        struct timespec t = {0, 100000};
        nanosleep(&t, NULL);
    }
}

/* The worker has recorded (its runtime and its slot are set up) once it
 * has written its byte. */
static pid_t start(const char *action)
{
    int fds[2];
    pid_t pid;
    char c;

    CHECK(pipe(fds) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        work(5);
        prof_flush();
        CHECK(write(fds[1], "r", 1) == 1);
        close(fds[1]);
        if (strcmp(action, "exit") == 0) {
            work(5);
            exit(0);
        }
        if (strcmp(action, "_exit") == 0) {
            work(5);
            _exit(3);
        }
        for (;;)                /* kill, zombie: until the parent's SIGKILL */
            work(100);
    }
    close(fds[1]);
    CHECK(read(fds[0], &c, 1) == 1);
    close(fds[0]);
    return pid;
}

/* Until pid has ended, without reaping it. */
static void wait_ended(pid_t pid)
{
    for (int i = 0; i < 2000; i++) {
        siginfo_t si;

        memset(&si, 0, sizeof si);
        CHECK(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0);
        if (si.si_pid == pid)
            return;
        struct timespec t = {0, 5000000};
        nanosleep(&t, NULL);
    }
    CHECK(!"worker did not end");
}

int main(int argc, char **argv)
{
    /* Each worker starts its own collector thread, and ThreadSanitizer does
     * not support new threads after a multi-threaded fork. */
    if (TEST_TSAN)
        SKIP("ThreadSanitizer does not support threads in a child of a multi-threaded fork");
    {
        PROF_ZONE("parent.before");
    }
    for (int i = 1; i < argc; i++) {
        pid_t pid = start(argv[i]);
        int status;

        if (strcmp(argv[i], "kill") == 0 || strcmp(argv[i], "zombie") == 0)
            CHECK(kill(pid, SIGKILL) == 0);
        if (strcmp(argv[i], "kill") == 0 || strcmp(argv[i], "exit") == 0)
            CHECK(waitpid(pid, &status, 0) == pid);
        else
            wait_ended(pid);
        printf("%d %s\n", (int)pid, argv[i]);
        fflush(stdout);
    }
    {
        PROF_ZONE("parent.after");
    }
    return 0;
}
