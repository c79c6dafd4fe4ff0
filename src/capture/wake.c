/* wake.c - the collector's futex word.
 *
 * States: AWAKE (the collector runs, no wake pending), WOKEN (a wake came
 * while it ran, or is on its way to the sleeper), ASLEEP (it sleeps in
 * futex_wait). A waker swaps in WOKEN and calls futex_wake only when it
 * swapped out ASLEEP; the collector goes to sleep only by moving AWAKE to
 * ASLEEP, so a wake between its last look and the sleep is never lost. */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wake.h"

enum { AWAKE = 0, WOKEN = 1, ASLEEP = 2 };

static uint32_t word;

void prof_wake_collector(void)
{
    if (__atomic_exchange_n(&word, WOKEN, __ATOMIC_SEQ_CST) == ASLEEP)
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void prof_wake_wait(uint64_t until_ns)
{
    uint32_t expect = AWAKE;

    if (__atomic_compare_exchange_n(&word, &expect, ASLEEP, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
        struct timespec until;

        until.tv_sec = (time_t)(until_ns / 1000000000u);
        until.tv_nsec = (long)(until_ns % 1000000000u);
        /* Absolute CLOCK_MONOTONIC deadline (FUTEX_WAIT_BITSET measures
         * against CLOCK_MONOTONIC unless told otherwise). EINTR, EAGAIN
         * (woken before we slept) and ETIMEDOUT all mean: look again. */
        syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, ASLEEP, &until, NULL,
                FUTEX_BITSET_MATCH_ANY);
    }
    __atomic_store_n(&word, AWAKE, __ATOMIC_SEQ_CST);
}

void prof_wake_atfork_child(void)
{
    __atomic_store_n(&word, AWAKE, __ATOMIC_RELAXED);
}
