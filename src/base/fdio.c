/* fdio.c - SIGPIPE-safe writes (fdio.h).
 *
 * A write(2) to a pipe or socket whose reader has gone raises SIGPIPE on
 * the writing thread, which kills the process unless the program handles
 * it; the runtime writes summaries and traces to descriptors a user chose
 * (a FIFO, `| head`), so it must get EPIPE instead and say so. SIGPIPE is
 * blocked on the writing thread for the duration (only that thread: the
 * signal an EPIPE write raises is directed at the thread that wrote), and
 * the one the write raised is taken back off the pending set before the
 * old mask returns, where it would otherwise be delivered at once. A
 * SIGPIPE that was already blocked when we began is left pending: it is
 * the program's. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "fdio.h"

void prof_sigpipe_block(sigset_t *saved)
{
    sigset_t pipe_set;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, saved);
}

void prof_sigpipe_restore(const sigset_t *saved, int err)
{
    if (err == -EPIPE && !sigismember(saved, SIGPIPE)) {
        /* Consume the SIGPIPE we caused before unblocking it. */
        sigset_t pipe_set;
        struct timespec zero = {0, 0};

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

int prof_write_full(int fd, const void *p, size_t n, size_t *done)
{
    const char *c = p;
    size_t left = n;
    sigset_t old;
    int err = 0;

    prof_sigpipe_block(&old);
    while (left > 0) {
        ssize_t w = write(fd, c, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? -errno : -EIO;
            break;
        }
        c += w;
        left -= (size_t)w;
    }
    prof_sigpipe_restore(&old, err);
    if (done != NULL)
        *done = n - left;
    return err;
}
