/* json_numbers.c - the integers of the trace and the summaries
 * (prof_fmt_u64, prof_fmt_us, src/base/json.c) read as printf writes them, at
 * every digit-count boundary and at random, and write nothing past the
 * room they are given (20 and 24 bytes; bytes after the length are
 * scratch): a wrong digit count shifts every later field of an event. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "json.h"

static uint64_t seed = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

static int fails;

static void one(uint64_t v)
{
    char got[64], want[64];
    size_t n;

    memset(got, '#', sizeof got);
    n = prof_fmt_u64(got, v);
    snprintf(want, sizeof want, "%" PRIu64, v);
    if (n != strlen(want) || memcmp(got, want, n) != 0 || got[20] != '#') {
        if (fails++ < 10)
            fprintf(stderr, "prof_fmt_u64(%" PRIu64 "): \"%.*s\" (%zu bytes)\n", v, (int)n,
                    got, n);
    }
    memset(got, '#', sizeof got);
    n = prof_fmt_us(got, v);
    snprintf(want, sizeof want, "%" PRIu64 ".%03u", v / 1000, (unsigned)(v % 1000));
    if (n != strlen(want) || memcmp(got, want, n) != 0 || got[24] != '#') {
        if (fails++ < 10)
            fprintf(stderr, "prof_fmt_us(%" PRIu64 "): \"%.*s\", want %s\n", v, (int)n, got,
                    want);
    }
}

int main(void)
{
    uint64_t p = 1;

    one(0);
    one(UINT64_MAX);
    one(UINT64_MAX - 1);
    for (int k = 0; k < 20; k++, p *= 10) {
        one(p - 1);
        one(p);
        one(p + 1);
        one(2 * p);
        one(9 * p + (p - 1));
    }
    for (int b = 0; b < 64; b++) {           /* every bit length */
        one((uint64_t)1 << b);
        one(((uint64_t)1 << b) - 1);
    }
    for (int i = 0; i < 1000000; i++)
        one(next() >> (next() % 64));
    CHECK_MSG(fails == 0, "%d numbers written wrong", fails);
    return 0;
}
