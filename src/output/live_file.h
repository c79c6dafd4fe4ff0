/* live_file.h - this process's live file: the snapshot (live.h) copied
 * into a seqlocked table in shared memory (live_file.c; the layout is
 * live.h's). Collector side, lock NOT held; one caller at a time. */
#ifndef PROF_LIVE_FILE_H
#define PROF_LIVE_FILE_H

struct prof_live_snap;

/* Write snap to this process's live file (PROF_LIVE). Lock NOT held; one
 * caller at a time. */
void prof_live_publish(const struct prof_live_snap *snap);

/* At shutdown: this process's file removed, unless something else took
 * its name since (a file this process did not make is left alone), and
 * its mapping released. */
void prof_live_file_remove(void);

#endif
