/* log.h - the runtime's messages: one line each, to the user's logger. */
#ifndef PROF_LOG_H
#define PROF_LOG_H

#include <stddef.h>

/* Format a message and hand it to the logger set by prof_set_logger()
 * (default: "prof: <message>\n" on stderr). Safe from any thread. */
void prof_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* As prof_log, but only the first call with this flag prints: for notices
 * such as "no CUDA driver; CUDA zones time the CPU side only". */
void prof_log_once(int *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* NAME="VALUE": the one way a message shows a value the user set (an
 * environment variable's value, or a path made from one), after the name
 * of the variable it came from, so that the line says where to fix it.
 * VALUE is printable ASCII, at most PROF_LOG_VALUE_MAX characters: '"',
 * '\\', control and non-ASCII bytes as \xNN, and a value longer than that
 * kept as its head, "..." and its tail (a path's end names the file).
 * Writes at most size bytes (PROF_LOG_VALUE_SIZE holds any name of up to
 * 40 characters) and returns buf. */
#define PROF_LOG_VALUE_MAX 60
#define PROF_LOG_VALUE_SIZE (40 + 3 + PROF_LOG_VALUE_MAX + 1)
const char *prof_log_value(char *buf, size_t size, const char *name, const char *value);

/* Why dlopen(lib) failed, from dlerror() text err, as a message shows it
 * after prof_log_value(.., lib): the loader's text starts with the name
 * it was given, which is dropped (it is said once, quoted, before); the
 * rest is quoted and cut as a value. err NULL: "cannot load it". */
const char *prof_log_dlerror(char *buf, size_t size, const char *lib, const char *err);

/* The quoting under prof_log_value: v escaped as above and cut to fit
 * size - 1 characters (size >= 16). Messages echo a user's value through
 * prof_log_value, never through this alone. */
#define PROF_LOG_QUOTE_SIZE (PROF_LOG_VALUE_MAX + 1)
const char *prof_log_quote(char *buf, size_t size, const char *v);

/* The runtime's locks call these (runtime.h): while a thread holds any,
 * its messages are queued, and the last release delivers them. */
void prof_log_hold(void);
void prof_log_release(void);

/* In a forked child: the queue's lock may have been held by a thread that
 * is gone. */
void prof_log_atfork_child(void);

#endif
