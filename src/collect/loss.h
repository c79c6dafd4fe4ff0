/* loss.h - records lost to full rings, said where the user looks: one
 * log line at the first loss of a summary window, with
 * the thread, how many records, how far behind the collector was and the
 * PROF_BUFFER that would have kept them; the summary's footer and JSON,
 * and the stages recorded on a thread in a window where it lost records
 * (PROF_STAGE_LOSSY). Collector side: every call with the runtime lock
 * held. */
#ifndef PROF_LOSS_H
#define PROF_LOSS_H

#include <stddef.h>
#include <stdint.h>

struct prof_thread;

struct prof_loss {
    uint64_t records;           /* ring-full drops */
    uint64_t behind_ns;         /* the longest the collector had been away
                                   when a drain found a loss */
    uint64_t buffer_hint;       /* a PROF_BUFFER (records) that would have
                                   kept the largest loss of one drain */
    uint32_t threads;           /* threads that lost records */
    uint64_t lanes_shared;      /* asyncio tasks that found every lane in
                                   use (zone.h): not a loss of records, but
                                   their self time and placement may mix */
};

/* A drain of t found `lost` more records dropped by its full ring; the
 * collector's previous drain ended behind_ns ago. Logs the first loss of
 * the window. Call before t's records are taken, so that the stages they
 * hold are marked. Returns the PROF_BUFFER (records) that would have kept
 * them when this loss was said on the log, else 0: the drain then hands
 * the loss to the sinks (sink.h's `loss`: the trace's instant), so that
 * what the log says and what the trace shows are the same losses. */
uint64_t prof_loss_note(struct prof_thread *t, uint64_t lost, uint64_t behind_ns, uint64_t ts_ns);

/* Whether t lost records in the current window: its stages are short. */
int prof_loss_thread_lossy(const struct prof_thread *t);

/* t has exited and is about to be freed: its state goes. */
void prof_loss_thread_gone(struct prof_thread *t);

/* In a forked child: the other threads' states go. */
void prof_loss_atfork_child(void);

/* What was lost in the current window (window != 0) or the whole run. */
const struct prof_loss *prof_loss_get(int window);

/* A periodic summary closed the window; prof_reset or the warm-up's end
 * forgets everything. */
void prof_loss_window_reset(void);
void prof_loss_reset(void);

/* "256k", "1M": records as PROF_BUFFER takes them. */
void prof_loss_size(char *buf, size_t size, uint64_t records);

#endif
