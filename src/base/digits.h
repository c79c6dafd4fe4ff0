/* digits.h - unsigned integers as decimal text, locale-free, inline: the
 * trace writes three of them per event (tid, ts, dur), a quarter of the
 * collector's time when tracing (perf), each a chain of dependent
 * multiplications; inline in the formatter the three overlap (2-3% more
 * events a second than calls into json.c). json.h's prof_fmt_u64 and
 * prof_fmt_us are these, for the rest of src/.
 *
 * Both write whole 8-byte words: out needs room for 20 bytes (24 for
 * prof_digits_us), and the bytes past the length returned are scratch. */
#ifndef PROF_DIGITS_H
#define PROF_DIGITS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Two digits at a time: half the divisions of a digit loop. */
static const char prof_digit_pairs_[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t prof_pow10_[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u,
    1000000000u, 10000000000u, 100000000000u, 1000000000000u, 10000000000000u,
    100000000000000u, 1000000000000000u, 10000000000000000u, 100000000000000000u,
    1000000000000000000u, 10000000000000000000u};

/* Digits in v > 0: floor(log10(2^bits)) by 1233/4096 ~ log10(2), then one
 * compare. */
static inline unsigned prof_ndigits_(uint64_t v)
{
    unsigned n = (unsigned)(64 - __builtin_clzll(v)) * 1233u >> 12;

    return n + (v >= prof_pow10_[n]);
}

static inline uint64_t prof_digit_pair_(unsigned v)
{
    uint16_t w;

    memcpy(&w, prof_digit_pairs_ + 2 * v, 2);
    return w;
}

/* v < 10^8 as 8 digits, leading zeros included, in the bytes of a word in
 * memory order: two 32-bit divisions instead of four 64-bit ones. */
static inline uint64_t prof_digits8_(uint32_t v)
{
    uint32_t hi = v / 10000, lo = v % 10000;
    uint64_t w = prof_digit_pair_(hi / 100) | prof_digit_pair_(hi % 100) << 16 |
                 prof_digit_pair_(lo / 100) << 32 | prof_digit_pair_(lo % 100) << 48;

    if (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
        w = __builtin_bswap64(w);
    return w;
}

/* The last n (1-8) digits of prof_digits8_(v) at out; writes 8 bytes. */
static inline void prof_put_digits_(char *out, uint32_t v, unsigned n)
{
    uint64_t w = prof_digits8_(v);

    if (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
        w <<= 8 * (8 - n);
    else
        w >>= 8 * (8 - n);
    memcpy(out, &w, 8);
}

/* v in decimal; returns its length (1-20). */
static inline size_t prof_digits_u64(char *out, uint64_t v)
{
    unsigned n, top;

    if (v < 10) {
        out[0] = (char)('0' + v);
        return 1;
    }
    n = prof_ndigits_(v);
    if (n <= 8) {
        prof_put_digits_(out, (uint32_t)v, n);
        return n;
    }
    if (n <= 16) {
        prof_put_digits_(out, (uint32_t)(v / 100000000u), n - 8);
        prof_put_digits_(out + n - 8, (uint32_t)(v % 100000000u), 8);
        return n;
    }
    top = (unsigned)(v / 10000000000000000u);  /* 1-1844 */
    v %= 10000000000000000u;
    prof_put_digits_(out, top, n - 16);
    prof_put_digits_(out + n - 16, (uint32_t)(v / 100000000u), 8);
    prof_put_digits_(out + n - 8, (uint32_t)(v % 100000000u), 8);
    return n;
}

/* ns as microseconds with three decimals: 1234567 -> "1234.567". */
static inline size_t prof_digits_us(char *out, uint64_t ns)
{
    size_t n = prof_digits_u64(out, ns / 1000);
    unsigned f = (unsigned)(ns % 1000);

    out[n] = '.';
    out[n + 1] = (char)('0' + f / 100);
    memcpy(out + n + 2, prof_digit_pairs_ + 2 * (f % 100), 2);
    return n + 4;
}

#endif
