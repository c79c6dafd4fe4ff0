/* intern.h - strings that live until the process exits, one copy per
 * distinct contents. */
#ifndef PROF_INTERN_H
#define PROF_INTERN_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a over n bytes; used by every name table. */
uint64_t prof_hash_bytes(const void *p, size_t n);

/* Intern the n bytes at s (need not be NUL-terminated). NULL on ENOMEM. */
const char *prof_intern_n(const char *s, size_t n);

/* After fork in the child: the lock may have been held by a thread that no
 * longer exists. */
void prof_intern_atfork_prepare(void);
void prof_intern_atfork_parent(void);
void prof_intern_atfork_child(void);

#endif
