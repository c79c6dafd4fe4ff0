/* live_dir.h - where the live file goes: this user's own directory and
 * the file's name in it (live_dir.c). Collector side (the live file's
 * writer), or any caller for the names alone. */
#ifndef PROF_LIVE_DIR_H
#define PROF_LIVE_DIR_H

#include <stddef.h>
#include <stdint.h>

/* This user's first-choice directory for live files:
 * $XDG_RUNTIME_DIR/prof where that variable names a writable directory of
 * this user's, else /dev/shm/prof-UID. Only the name: the writer makes it
 * 0700, refuses it unless it is this user's alone, and then takes
 * /dev/shm/prof-UID, then a directory of its own that nobody else can
 * name first, /dev/shm/prof-UID.XXXXXX (mkdtemp; an existing one of this
 * user's alone is reused), where readers look too. 0 or -ENAMETOOLONG. */
int prof_live_dir(char *buf, size_t size);

/* The file's name in that directory for pid in the pid namespace of
 * inode pid_ns (0: unknown): prof-live-PID in the initial namespace (or
 * an unknown one), else prof-live-PID-nsINODE. 0 or -ENAMETOOLONG. */
int prof_live_name(int pid, uint32_t pid_ns, char *buf, size_t size);

/* This user's directory for the file, made where missing: the first
 * choice (prof_live_dir), then /dev/shm/prof-UID, then a private one;
 * each checked through its descriptor to be this user's alone (0700). Its
 * descriptor, its name in dir (size bytes), or -1. A refused choice is
 * said on the log (unless quiet), with where the file went instead. */
int prof_live_dir_open(char *dir, size_t size, int quiet);

#endif
