/* children.c - forked workers that end before finishing (children.h).
 *
 * The table is shared memory that a whole process tree inherits: made in
 * the first fork's prepare handler (the parent's copy of the pointer stays
 * valid, every child's copy points at the same pages). A child's slot is
 * one 64-bit word, its pid in the high half and its state in the low, so
 * that every change is one compare-and-swap that names its owner: a child
 * whose slot was taken from it (below) can never change another child's.
 *
 *   FREE -> CLAIMING -> RUNNING <-> FINISHED      (the child)
 *                       RUNNING  -> CLOSED        (the child's signal path)
 *                       CLOSED   -> FINISHED, RUNNING   (the child: its final
 *                                   report; a restart)
 *   RUNNING, CLOSED, FINISHED -> FREE             (the parent, child gone)
 *
 * The parent and pid fields and the trace path are written by the child
 * before its release store of RUNNING, and not again while the slot is
 * held; the parent reads them after an acquire load of the word, and
 * checks the word again after reading.
 *
 * Whether a child is gone: waitid(WNOWAIT) on it. A zombie says how it
 * ended (exit status, or the signal) and stays a zombie for the program or
 * multiprocessing to reap; ECHILD means it was reaped already. Either way
 * it can no longer mark its slot, and a state read after that is final.
 *
 * Slots of children whose parent never looks (a forkserver's workers;
 * a parent that was killed first) would fill the table: a child that
 * finds it full frees those whose child and parent are both gone, and
 * finished ones whose child is gone. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "children.h"
#include "env.h"
#include "log.h"
#include "process.h"
#include "trace.h"

enum { FREE, CLAIMING, RUNNING, CLOSED, FINISHED };

struct slot {
    uint64_t word;               /* pid << 32 | state; 0 is FREE */
    int32_t parent;              /* the pid that forked it */
    uint32_t pad;
    char trace[112];             /* its trace file; "" if none or too long */
};

struct table {
    uint64_t unwatched;          /* children that found every slot taken */
    uint64_t pad[7];
    struct slot slots[PROF_CHILDREN_SLOTS];
};

static struct table *table;
/* This process's own slot: valid only where mine_pid is our pid (a child
 * inherits its parent's copy of both). */
static struct slot *mine;
static int32_t mine_pid;

static struct prof_children_ended ended;
static int32_t ended_pid;        /* whose list `ended` is */
static uint64_t released;        /* slots of our children freed, whole run (ended_pid's) */

static uint64_t word(int32_t pid, unsigned state)
{
    return (uint64_t)(uint32_t)pid << 32 | state;
}

static int32_t word_pid(uint64_t w)
{
    return (int32_t)(uint32_t)(w >> 32);
}

static unsigned word_state(uint64_t w)
{
    return (unsigned)(w & 0xffffffffu);
}

void prof_children_prepare(int prof_on)
{
    void *p;

    if (table != NULL || !prof_on)
        return;
    /* Zero-filled: every slot FREE. */
    p = mmap(NULL, sizeof *table, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        static int logged;
        prof_log_once(&logged, "cannot map the table of forked workers (%s): a worker killed "
                      "before it finishes will not be said", strerror(errno));
        return;
    }
    table = p;
}

static int gone(int32_t pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* A table full of slots nobody will free: see the top of the file. */
static void sweep(void)
{
    for (size_t i = 0; i < PROF_CHILDREN_SLOTS; i++) {
        struct slot *s = &table->slots[i];
        uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
        int32_t parent = __atomic_load_n(&s->parent, __ATOMIC_RELAXED);

        if (w == 0 || !gone(word_pid(w)))
            continue;
        if (word_state(w) == FINISHED || word_state(w) == CLAIMING || gone(parent))
            __atomic_compare_exchange_n(&s->word, &w, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
}

static int claim(int32_t pid, uint32_t parent)
{
    const char *pattern = prof_config_get()->trace_path;

    for (size_t i = 0; i < PROF_CHILDREN_SLOTS; i++) {
        struct slot *s = &table->slots[i];
        uint64_t expect = 0;

        if (__atomic_load_n(&s->word, __ATOMIC_RELAXED) != 0 ||
            !__atomic_compare_exchange_n(&s->word, &expect, word(pid, CLAIMING), 0,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&s->parent, (int32_t)parent, __ATOMIC_RELAXED);
        if (!prof_trace_active() || pattern == NULL ||
            prof_path_expand(pattern, s->trace, sizeof s->trace) != 0)
            s->trace[0] = '\0';
        /* Release: the parent that sees RUNNING sees the fields above. */
        __atomic_store_n(&s->word, word(pid, RUNNING), __ATOMIC_RELEASE);
        /* Release: the signal path that sees our pid sees the slot. */
        __atomic_store_n(&mine, s, __ATOMIC_RELAXED);
        __atomic_store_n(&mine_pid, pid, __ATOMIC_RELEASE);
        return 0;
    }
    return -ENOSPC;
}

void prof_children_join(uint32_t forked_from)
{
    int32_t pid = prof_process_get()->pid;

    if (table == NULL || forked_from == 0)
        return;
    if (mine_pid == pid) {
        /* Started again after a final report (FINISHED), or after the
         * signal path ended the trace (CLOSED): running again, in the same
         * slot. A second slot would leave the first one behind, CLOSED, and
         * the parent would say a worker that finished ended before it. */
        uint64_t expect = word(pid, FINISHED);

        if (__atomic_compare_exchange_n(&mine->word, &expect, word(pid, RUNNING), 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) ||
            expect == word(pid, RUNNING))
            return;
        if (expect == word(pid, CLOSED) &&
            (__atomic_compare_exchange_n(&mine->word, &expect, word(pid, RUNNING), 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) ||
             expect == word(pid, RUNNING)))
            return;
    }
    __atomic_store_n(&mine_pid, 0, __ATOMIC_RELAXED);
    if (claim(pid, forked_from) == 0)
        return;
    sweep();
    if (claim(pid, forked_from) != 0)
        __atomic_add_fetch(&table->unwatched, 1, __ATOMIC_RELAXED);
}

void prof_children_finished(void)
{
    int32_t pid = prof_process_get()->pid;
    uint64_t expect;

    if (table == NULL || mine_pid != pid)
        return;
    /* Release: ordered before our exit, which the parent sees first. */
    expect = word(pid, RUNNING);
    if (!__atomic_compare_exchange_n(&mine->word, &expect, word(pid, FINISHED), 0,
                                     __ATOMIC_RELEASE, __ATOMIC_RELAXED) &&
        expect == word(pid, CLOSED))
        __atomic_compare_exchange_n(&mine->word, &expect, word(pid, FINISHED), 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void prof_children_trace_closed_from_signal(void)
{
    /* Only atomics on our own slot: async-signal-safe. mine_pid is
     * compared with the pid the kernel gives, not prof_process_get's,
     * which a signal may catch halfway through a refresh after fork. */
    int32_t pid = (int32_t)getpid();
    uint64_t expect = word(pid, RUNNING);
    struct slot *s;

    if (__atomic_load_n(&mine_pid, __ATOMIC_ACQUIRE) != pid)
        return;
    s = __atomic_load_n(&mine, __ATOMIC_RELAXED);
    __atomic_compare_exchange_n(&s->word, &expect, word(pid, CLOSED), 0, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT:  return "SIGINT";
    case SIGHUP:  return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS:  return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGILL:  return "SIGILL";
    case SIGFPE:  return "SIGFPE";
    case SIGPIPE: return "SIGPIPE";
    default:      return NULL;
    }
}

/* Whether the child has ended, and how, in words. 1 alive (or unknown
 * for now), 0 ended. */
static int alive(int32_t pid, char *how, size_t size)
{
    siginfo_t si;

    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno != ECHILD)
            return 1;               /* EINTR: the next summary looks again */
        snprintf(how, size, "killed?");
        return 0;
    }
    if (si.si_pid == 0)
        return 1;
    if (si.si_code == CLD_EXITED) {
        snprintf(how, size, "exited with status %d without its exit handlers", si.si_status);
    } else {
        const char *name = signal_name(si.si_status);
        const char *core = si.si_code == CLD_DUMPED ? ", core dumped" : "";

        if (name != NULL)
            snprintf(how, size, "killed by %s%s", name, core);
        else
            snprintf(how, size, "killed by signal %d%s", si.si_status, core);
    }
    return 0;
}

static void say(int32_t pid, const char *how, const char *trace, int closed)
{
    if (trace[0] == '\0')
        prof_log("worker %d ended before writing its summary (%s)", (int)pid, how);
    else if (closed)
        prof_log("worker %d ended before writing its summary (%s): its trace %s was closed "
                 "on the signal path", (int)pid, how, trace);
    else
        prof_log("worker %d ended before writing its summary (%s): its trace %s is cut "
                 "(prof-report reads it)", (int)pid, how, trace);
    if (ended.npids < PROF_CHILDREN_PIDS_KEPT)
        ended.pids[ended.npids++] = pid;
    ended.count++;
}

static struct prof_children_ended *ours(void)
{
    int32_t me = prof_process_get()->pid;

    /* A forked child starts with no ended children of its own. */
    if (ended_pid != me) {
        memset(&ended, 0, sizeof ended);
        ended.slots = PROF_CHILDREN_SLOTS;
        ended_pid = me;
        released = 0;
    }
    return &ended;
}

const struct prof_children_ended *prof_children_check_locked(void)
{
    int32_t me = prof_process_get()->pid;
    uint64_t held = 0;               /* our children's slots still taken */

    ours();
    if (table == NULL)
        return &ended;
    for (size_t i = 0; i < PROF_CHILDREN_SLOTS; i++) {
        struct slot *s = &table->slots[i];
        uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
        char how[96], trace[sizeof s->trace];
        int32_t pid = word_pid(w);

        if (word_state(w) < RUNNING || __atomic_load_n(&s->parent, __ATOMIC_RELAXED) != me)
            continue;
        memcpy(trace, s->trace, sizeof trace);
        trace[sizeof trace - 1] = '\0';
        /* Taken and refilled by another child meanwhile: not ours. */
        if (__atomic_load_n(&s->word, __ATOMIC_ACQUIRE) != w)
            continue;
        if (alive(pid, how, sizeof how)) {
            held++;
            continue;
        }
        /* Read after the child was seen gone: it can change no more. */
        w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
        if (word_pid(w) != pid || word_state(w) < RUNNING ||
            !__atomic_compare_exchange_n(&s->word, &w, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        released++;
        if (word_state(w) != FINISHED)
            say(pid, how, trace, word_state(w) == CLOSED);
    }
    ended.unwatched = __atomic_load_n(&table->unwatched, __ATOMIC_RELAXED);
    ended.recorded = released + held;
    return &ended;
}
