/* children_restart.c - a forked worker whose slot in the table of workers
 * was left CLOSED by the signal path (its trace ended there) and whose
 * runtime then starts again keeps that one slot: when it finishes and
 * exits, its parent's summary lists no worker that ended before finishing
 * (workers_unfinished_count 0) and the parent says nothing about it.
 * Before, the restart claimed a second slot and left the first CLOSED, so
 * the parent reported a worker that had finished as ended before its
 * summary ("its trace ... was closed on the signal path").
 *
 * The signal path's mark and the restart's join are called directly
 * (white-box: the runtime compiled into the test): no public sequence
 * reaches that state deterministically. Run with PROF=1, summaries in
 * JSON. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <prof.h>

#include "check.h"
#include "children.h"
#include "runtime.h"

int main(void)
{
    static char text[1 << 16];
    int status;
    pid_t pid;

    if (TEST_TSAN)
        SKIP("ThreadSanitizer cannot run a forked child that starts a thread");

    {
        PROF_ZONE("parent");
    }
    CHECK_EQ(prof_flush(), 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        {
            PROF_ZONE("child");      /* the child's runtime starts: a slot */
        }
        prof_children_trace_closed_from_signal();   /* the signal path's mark */
        prof_rt_lock();
        prof_children_join((uint32_t)getppid());    /* the runtime starts again */
        prof_rt_unlock();
        {
            PROF_ZONE("child");
        }
        prof_shutdown();             /* its final report: finished */
        _exit(0);
    }
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_JSON) > 0);
    if (strstr(text, "\"workers_unfinished_count\":0,") == NULL) {
        fprintf(stderr, "a worker that finished is listed as ended before finishing:\n%.600s\n",
                text);
        return 1;
    }
    return 0;
}
