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

/* A user's value (a variable's value, a path, a name) as a message shows
 * it: printable ASCII with '"', '\\', control and non-ASCII bytes as \xNN,
 * and a value longer than fits kept as its head, "..." and its tail (a
 * path's end names the file). Writes at most size bytes (size >= 16) and
 * returns buf. Every message that echoes something a user set passes it
 * through here, in quotes, after the name of the variable it came from. */
#define PROF_LOG_QUOTE_SIZE 96
const char *prof_log_quote(char *buf, size_t size, const char *v);

/* The runtime's locks call these (runtime.h): while a thread holds any,
 * its messages are queued, and the last release delivers them. */
void prof_log_hold(void);
void prof_log_release(void);

/* In a forked child: the queue's lock may have been held by a thread that
 * is gone. */
void prof_log_atfork_child(void);

#endif
