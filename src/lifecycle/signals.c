/* signals.c - SIGINT and SIGTERM end the run cleanly (final summary, trace
 * closed) when the program left them at their default action. The handler
 * only sets a flag and wakes the collector; the collector does the work and
 * then re-raises the signal with its default action. Supervisors (GNU
 * timeout, Slurm, Kubernetes) send SIGTERM to the process and then to its
 * group, so one repeat of the same signal within PROF_SIGNAL_GRACE_NS lets
 * the drain finish; a different signal, a third one, a later repeat, or a
 * signal with no collector closes the trace with async-signal-safe calls
 * and dies at once. */
#include <signal.h>
#include <string.h>
#include <time.h>

#include "children.h"
#include "collector.h"
#include "runtime.h"
#include "sigchain.h"
#include "signals.h"
#include "trace.h"
#include "wake.h"

#define PROF_SIGNAL_GRACE_NS (2 * 1000000000ull)

static void on_signal(int sig)
{
    /* Atomics: a supervisor's two signals may land on two threads at once;
     * a first_ns still 0 means the first one is being handled right now. */
    static uint64_t first_ns;
    static int repeats;
    uint64_t first;
    int prev = __atomic_exchange_n(&prof_pending_signal, sig, __ATOMIC_ACQ_REL);
    int running = __atomic_load_n(&prof_rt.collector_running, __ATOMIC_RELAXED);
    struct timespec ts;
    uint64_t now;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (running && prev == 0) {
        __atomic_store_n(&first_ns, now, __ATOMIC_RELEASE);
        prof_wake_collector();
        return;
    }
    first = __atomic_load_n(&first_ns, __ATOMIC_ACQUIRE);
    if (running && prev == sig && __atomic_add_fetch(&repeats, 1, __ATOMIC_ACQ_REL) == 1 &&
        (first == 0 || now - first < PROF_SIGNAL_GRACE_NS))
        return;
    prof_trace_close_from_signal();
    prof_children_trace_closed_from_signal();   /* the parent: no summary will come */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal(int sig)
{
    struct sigaction old, sa;

    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void prof_signals_install(void)
{
    install_signal(SIGINT);
    install_signal(SIGTERM);
    prof_sigchain_own(on_signal);
}
