/* dispatch.h - the one way the collect floor hands what it took to the
 * sinks (sink.h): through prof_sinks, in its order, each hook only of the
 * sinks that have it. drain.c (records) and drain_gpu.c (GPU zones) call
 * the sinks through these alone. */
#ifndef PROF_DISPATCH_H
#define PROF_DISPATCH_H

#include "sink.h"
#include "stats.h"

/* Call a hook of every sink that has it (SINKS_ALL), or of every sink that
 * takes a record begun at ticks (SINKS_TAKE). */
#define SINKS_ALL(hook, ...)                                                      \
    do {                                                                          \
        for (const struct prof_sink *const *k_ = prof_sinks; *k_ != NULL; k_++)  \
            if ((*k_)->hook != NULL)                                              \
                (*k_)->hook(__VA_ARGS__);                                         \
    } while (0)
#define SINKS_TAKE(hook, ticks, ...)                                              \
    do {                                                                          \
        for (const struct prof_sink *const *k_ = prof_sinks; *k_ != NULL; k_++)  \
            if ((*k_)->hook != NULL && ((*k_)->wants == NULL || (*k_)->wants(ticks))) \
                (*k_)->hook(__VA_ARGS__);                                         \
    } while (0)
/* SINKS_TAKE for a record made before prof_reset(): the statistics forget
 * it. */
#define SINKS_TAKE_STALE(hook, ticks, ...)                                        \
    do {                                                                          \
        for (const struct prof_sink *const *k_ = prof_sinks; *k_ != NULL; k_++)  \
            if (*k_ != &prof_stats_sink && (*k_)->hook != NULL &&                 \
                ((*k_)->wants == NULL || (*k_)->wants(ticks)))                    \
                (*k_)->hook(__VA_ARGS__);                                         \
    } while (0)

#endif
