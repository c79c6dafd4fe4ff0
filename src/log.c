/* log.c - every message the runtime prints goes through here, so that a
 * program can route them (prof_set_logger) and the library itself decides
 * nothing about where text goes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "log.h"

struct logger {
    prof_log_fn fn;
    void *user;
};

static struct logger logger;  /* guarded by the atomics below */

PROF_API void prof_set_logger(prof_log_fn fn, void *user)
{
    __atomic_store_n(&logger.user, user, __ATOMIC_RELAXED);
    /* Release: a reader that sees fn also sees its user pointer. */
    __atomic_store_n(&logger.fn, fn, __ATOMIC_RELEASE);
}

static void log_message(const char *msg)
{
    prof_log_fn fn = __atomic_load_n(&logger.fn, __ATOMIC_ACQUIRE);
    char line[1100];
    size_t n;

    if (fn != NULL) {
        fn(__atomic_load_n(&logger.user, __ATOMIC_RELAXED), msg);
        return;
    }
    /* One write(2) per line so that messages from several threads or
     * processes do not interleave mid-line, and no stdio lock is taken
     * (a forked child may inherit it locked). */
    n = (size_t)snprintf(line, sizeof line, "prof: %s\n", msg);
    if (n >= sizeof line) {
        n = sizeof line - 1;
        line[n - 1] = '\n';
    }
    if (write(STDERR_FILENO, line, n) < 0) {
        /* Nowhere left to report it. */
    }
}

__attribute__((format(printf, 1, 0))) static void log_va(const char *fmt, va_list ap)
{
    char msg[1024];

    vsnprintf(msg, sizeof msg, fmt, ap);
    log_message(msg);
}

void prof_log(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_va(fmt, ap);
    va_end(ap);
}

void prof_log_once(int *flag, const char *fmt, ...)
{
    va_list ap;

    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        return;
    va_start(ap, fmt);
    log_va(fmt, ap);
    va_end(ap);
}
