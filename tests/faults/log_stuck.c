/* log_stuck.c - prof's own messages on a stderr that nobody reads (driven
 * by log_stuck.py: stderr is a pipe of one page whose read end is held
 * open and never read, as under a paused `| less`).
 *
 *     log_stuck
 *
 * Fills stderr's pipe itself, then records zones with PROF_TRACE naming a
 * directory that does not exist: the open fails and prof says so, on the
 * thread that opens the trace, into the full pipe. Then prof_flush() and
 * prof_stats(); prints "done" on stdout and exits. Before the bound, that
 * message's write(2) blocked its thread for good (and with it every
 * prof_flush() and the exit): the alarm ends the program and the test
 * fails. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"

#define ZONES 1000

int main(void)
{
    struct prof_stage_stats st;
    char page[4096];
    int fl = fcntl(STDERR_FILENO, F_GETFL);

    alarm(60);
    memset(page, 'x', sizeof page);
    /* Fill the pipe without blocking here; then blocking again, as the
     * program's stderr was. */
    CHECK(fcntl(STDERR_FILENO, F_SETFL, fl | O_NONBLOCK) == 0);
    while (write(STDERR_FILENO, page, sizeof page) > 0) {
    }
    while (write(STDERR_FILENO, page, 1) > 0) {
    }
    CHECK(fcntl(STDERR_FILENO, F_SETFL, fl) == 0);
    for (int i = 0; i < ZONES; i++) {
        PROF_ZONE("stuck_zone");
    }
    CHECK(prof_flush() == 0);
    CHECK(prof_stats("stuck_zone", &st) == 0);
    CHECK(st.count == ZONES);
    printf("done\n");
    fflush(stdout);
    return 0;
}
