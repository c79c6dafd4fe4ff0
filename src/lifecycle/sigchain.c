/* sigchain.c - see sigchain.h. A DataLoader worker still running when its
 * parent exits is sent SIGTERM by multiprocessing, and PyTorch's worker
 * handler (set when the worker loop starts, over the runtime's inherited
 * one) _exit()s at once when the parent sent it: no summary, a trace with
 * no end. The Python module calls prof_signal_chain_ once PyTorch has set
 * its handler; from then on the signal wakes the collector, which writes
 * the final report and then gives the signal, siginfo unchanged, to
 * PyTorch's handler. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof.h"
#include "children.h"
#include "collector.h"
#include "runtime.h"
#include "sigchain.h"
#include "trace.h"
#include "wake.h"

static void (*own)(int);
static struct sigaction chained[SIGTERM + 1];
static int chained_on[SIGTERM + 1];
static siginfo_t chained_info[SIGTERM + 1];

void prof_sigchain_own(void (*handler)(int))
{
    own = handler;
}

/* Hand sig on, in a handler: as the chained handler would have run. */
static void hand_on(int sig, siginfo_t *info, void *ctx)
{
    sigaction(sig, &chained[sig], NULL);
    if (chained[sig].sa_flags & SA_SIGINFO)
        chained[sig].sa_sigaction(sig, info, ctx);
    else if (chained[sig].sa_handler != SIG_IGN && chained[sig].sa_handler != SIG_DFL)
        chained[sig].sa_handler(sig);
    else if (chained[sig].sa_handler == SIG_DFL)
        raise(sig);
}

static void on_chained(int sig, siginfo_t *info, void *ctx)
{
    if (info != NULL)
        chained_info[sig] = *info;
    /* The first signal with a collector: it writes the final report, then
     * prof_signal_resend hands the signal on. Otherwise on at once, the
     * trace closed with async-signal-safe calls. */
    if (__atomic_load_n(&prof_rt.collector_running, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&prof_pending_signal, sig, __ATOMIC_ACQ_REL) == 0) {
        prof_wake_collector();
        return;
    }
    prof_trace_close_from_signal();
    prof_children_trace_closed_from_signal();   /* the parent: no summary will come */
    hand_on(sig, info, ctx);
}

PROF_API int prof_signal_chain_(int sig)
{
    struct sigaction cur, sa;

    if (sig != SIGINT && sig != SIGTERM)
        return -EINVAL;
    if (sigaction(sig, NULL, &cur) != 0)
        return -errno;
    if (cur.sa_flags & SA_SIGINFO ? cur.sa_sigaction == on_chained
                                  : (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN ||
                                     cur.sa_handler == own))
        return 0;   /* ours already, or nothing to go in front of */
    chained[sig] = cur;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_chained;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    if (sigaction(sig, &sa, NULL) != 0)
        return -errno;
    chained_on[sig] = 1;
    return 0;
}

void prof_signal_resend(int sig)
{
    if (sig >= 0 && sig <= SIGTERM && chained_on[sig]) {
        /* The same siginfo (the sender's pid: PyTorch's handler checks it
         * is the parent), queued to this thread: the kernel takes a
         * sender's siginfo only for the caller's own thread. The collector
         * blocks every signal; unblocked, it runs the handler now in
         * place. */
        siginfo_t info = chained_info[sig];
        sigset_t one;

        sigaction(sig, &chained[sig], NULL);
        sigemptyset(&one);
        sigaddset(&one, sig);
        if (syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), sig,
                    &info) == 0) {
            pthread_sigmask(SIG_UNBLOCK, &one, NULL);
            return;
        }
    }
    signal(sig, SIG_DFL);
    kill(getpid(), sig);
}
