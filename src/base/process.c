/* process.c - program name, host, pid and rank for summaries, trace
 * metadata and %p / %r in paths; and the runtime's place in the process:
 * the object that holds it stays loaded once it has started, and a second
 * copy of the runtime in the same process is reported. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "log.h"
#include "process.h"

static struct prof_process proc;
static int loaded;

/* A rank variable that is set but not a rank: said once, then the next
 * variable is tried, as if it were unset. */
static int rank_from_env(void)
{
    static const char *vars[] = {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    static int logged;

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end, q[PROF_LOG_VALUE_SIZE];
        long r;
        if (v == NULL || *v == '\0')
            continue;
        errno = 0;
        r = strtol(v, &end, 10);
        if (*end == '\0' && errno == 0 && r >= 0 && r < PROF_RANK_LIMIT && v[0] >= '0' &&
            v[0] <= '9')
            return (int)r;
        prof_log_once(&logged, "%s is not a rank (expected 0 to %d); ignored, "
                      "so %%r in paths is 0 unless another rank variable is set",
                      prof_log_value(q, sizeof q, vars[i], v), PROF_RANK_LIMIT - 1);
    }
    return -1;
}

/* Python's interpreter options that take a value (attached, -Xdev, or the
 * next word); -c and -m end the options. */
static int py_opt_takes_value(char c)
{
    return c == 'W' || c == 'X' || c == 'c' || c == 'm';
}

/* A Python process is named after what it runs, as its user calls it:
 * "train.py" for `python train.py`, the module for `python -m pkg.mod`,
 * "python" for -c, stdin or the interactive prompt. From /proc/self/cmdline,
 * so a process is named the same before and after `import prof`, and a
 * runtime started by a C extension agrees with the Python package. */
static void python_name(char *out, size_t size)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t n;
    const char *a, *end;

    if (f == NULL)
        return;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    end = buf + n;
    /* Past the interpreter's own path. */
    for (a = buf + strlen(buf) + 1; a < end; a += strlen(a) + 1) {
        if (strcmp(a, "--check-hash-based-pycs") == 0) {
            a += strlen(a) + 1;
            continue;
        }
        if (a[0] == '-' && a[1] == '-')
            continue;               /* --help, --version, -- */
        if (a[0] != '-' || a[1] == '\0')
            break;                  /* the script, or "-" (stdin) */
        for (const char *c = a + 1; *c != '\0'; c++) {
            const char *value;
            if (!py_opt_takes_value(*c))
                continue;
            value = c[1] != '\0' ? c + 1 : a + strlen(a) + 1;
            if (*c == 'c') {
                snprintf(out, size, "python");
                return;
            }
            if (*c == 'm') {
                /* `python -m prof script.py` (options already taken out,
                 * __main__.py execs itself without them) is named after
                 * what it runs: the script, or the module after -m. */
                if (value < end && strcmp(value, "prof") == 0 &&
                    value + strlen(value) + 1 < end) {
                    a = value;      /* the loop goes on with the next word */
                    break;
                }
                if (value < end && *value != '\0')
                    snprintf(out, size, "%s", value);
                return;
            }
            if (c[1] == '\0')
                a += strlen(a) + 1;  /* -W arg, -X arg */
            break;
        }
        if (a >= end)
            return;
    }
    if (a >= end || strcmp(a, "-") == 0) {
        snprintf(out, size, "python");
        return;
    }
    snprintf(out, size, "%s", strrchr(a, '/') ? strrchr(a, '/') + 1 : a);
}

int prof_process_is_mp_child(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t n;

    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (const char *a = buf; a < buf + n; a += strlen(a) + 1) {
        if (strcmp(a, "--multiprocessing-fork") == 0 ||
            strncmp(a, "from multiprocessing.forkserver import main", 43) == 0)
            return 1;
    }
    return 0;
}

void prof_process_refresh(void)
{
    FILE *f = fopen("/proc/self/comm", "re");

    proc.program[0] = '\0';
    if (f != NULL) {
        if (fgets(proc.program, sizeof proc.program, f) != NULL)
            proc.program[strcspn(proc.program, "\n")] = '\0';
        fclose(f);
    }
    if (strstr(proc.program, "python") == proc.program)
        python_name(proc.program, sizeof proc.program);
    if (proc.program[0] == '\0')
        snprintf(proc.program, sizeof proc.program, "process");
    if (gethostname(proc.host, sizeof proc.host) != 0)
        snprintf(proc.host, sizeof proc.host, "unknown");
    proc.host[sizeof proc.host - 1] = '\0';
    proc.pid = (int)getpid();
    proc.rank = rank_from_env();
    loaded = 1;
}

const struct prof_process *prof_process_get(void)
{
    if (!loaded)
        prof_process_refresh();
    return &proc;
}

int prof_path_expand(const char *pat, char *buf, size_t size)
{
    const struct prof_process *p = prof_process_get();
    size_t n = 0;

    for (; *pat != '\0'; pat++) {
        char tmp[24];
        const char *add = tmp;
        if (pat[0] == '%' && pat[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", p->pid);
            pat++;
        } else if (pat[0] == '%' && pat[1] == 'r') {
            snprintf(tmp, sizeof tmp, "%d", p->rank < 0 ? 0 : p->rank);
            pat++;
        } else if (pat[0] == '%' && pat[1] == '%') {
            add = "%";
            pat++;
        } else {
            tmp[0] = *pat;
            tmp[1] = '\0';
        }
        size_t len = strlen(add);
        if (n + len + 1 > size)
            return -ENAMETOOLONG;
        memcpy(buf + n, add, len);
        n += len;
    }
    buf[n] = '\0';
    return 0;
}

static int path_has(const char *pat, char what)
{
    for (; *pat != '\0'; pat++) {
        if (pat[0] == '%' && pat[1] == '%')
            pat++;
        else if (pat[0] == '%' && pat[1] == what)
            return 1;
    }
    return 0;
}

int prof_path_has_pid(const char *pat)
{
    return path_has(pat, 'p');
}

int prof_path_has_rank(const char *pat)
{
    return path_has(pat, 'r');
}

/* ------------------------------------------------------------------------ */
/* The runtime's place in the process. */

/* What identifies this copy of the runtime: its address is different in
 * every copy, whether a shared libprof or libprof_static linked into a
 * plugin (even one that hides the library's symbols). */
static const char copy_marker;

#define RUNTIME_VAR "PROF_RUNTIME_LOADED"

/* Copies of the runtime do not link each other (a plugin may hide every
 * symbol of the static library it carries, and Python loads extensions
 * RTLD_LOCAL, out of reach of dlsym(RTLD_DEFAULT)), but they share the
 * environment. Each copy, as it starts, reads and then writes
 * "<image>:<marker address>:<path>", where image names this process image:
 * the pid and the kernel's random bytes for it (AT_RANDOM, new at every
 * exec), so that a value inherited through exec, even an exec that keeps
 * the pid, is a stranger's.
 * setenv is not safe against a concurrent getenv in another thread; this
 * runs once per copy, when the runtime starts. */
static void image_id(char *buf, size_t size)
{
    const unsigned char *r = (const unsigned char *)(uintptr_t)getauxval(AT_RANDOM);
    unsigned long long bits = 0;

    if (r != NULL)
        memcpy(&bits, r, sizeof bits);
    snprintf(buf, size, "%ld-%llx", (long)getpid(), bits);
}

static int other_copy;

int prof_process_other_copy(void)
{
    return __atomic_load_n(&other_copy, __ATOMIC_RELAXED);
}

static void check_other_copy(const char *self_path)
{
    const char *v = getenv(RUNTIME_VAR);
    char mine[4200], image[64];
    size_t n;

    image_id(image, sizeof image);
    n = strlen(image);
    if (v != NULL && strncmp(v, image, n) == 0 && v[n] == ':') {
        unsigned long long addr = 0;
        int used = 0;
        if (sscanf(v + n, ":%llx:%n", &addr, &used) == 1 && used > 0 &&
            addr != (unsigned long long)(uintptr_t)&copy_marker) {
            static int logged;

            __atomic_store_n(&other_copy, 1, __ATOMIC_RELAXED);
            prof_log_once(&logged, "two copies of the prof runtime in one process: %s and %s; "
                          "each keeps its own statistics, summary and trace (link every module "
                          "against one shared libprof)", v + n + used, self_path);
            return;   /* the first copy's entry stays: a third copy names it too */
        }
    }
    snprintf(mine, sizeof mine, "%s:%llx:%s", image, (unsigned long long)(uintptr_t)&copy_marker,
             self_path);
    setenv(RUNTIME_VAR, mine, 1);
}

/* dlclose of the object holding a started runtime would unmap the code of
 * the collector thread, of the thread-exit destructor and of the SIGINT /
 * SIGTERM handlers while they stay registered: RTLD_NODELETE keeps it, and
 * the handle is never closed. The main program is never unloaded; dlopen
 * of its name may fail, which is fine. */
static void pin(const Dl_info *info)
{
    if (info->dli_fname == NULL || info->dli_fname[0] == '\0')
        return;
    if (dlopen(info->dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == NULL) {
        /* the main program, or a name the loader no longer knows */
    }
}

void prof_process_start(void)
{
    static int done;
    Dl_info info;

    /* No waiting on another thread here: a thread inside dlopen (holding
     * the loader's lock) may be the one that started first. */
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    memset(&info, 0, sizeof info);
    if (dladdr(&copy_marker, &info) == 0 || info.dli_fname == NULL)
        info.dli_fname = "(unknown object)";
    pin(&info);
    check_other_copy(info.dli_fname);
}
