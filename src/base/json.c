/* json.c - output buffer and JSON escaping. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits.h"
#include "json.h"

static int reserve(struct prof_buf *b, size_t n)
{
    size_t cap;
    char *d;

    if (b->failed)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
        cap *= 2;
    if ((d = realloc(b->data, cap)) == NULL) {
        b->failed = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void prof_buf_put(struct prof_buf *b, const char *s, size_t n)
{
    if (reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void prof_buf_puts(struct prof_buf *b, const char *s)
{
    prof_buf_put(b, s, strlen(s));
}

void prof_buf_printf(struct prof_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *prof_buf_room(struct prof_buf *b, size_t n)
{
    return reserve(b, n) == 0 ? b->data + b->len : NULL;
}

void prof_buf_commit(struct prof_buf *b, size_t k)
{
    b->len += k;
    b->data[b->len] = '\0';
}

size_t prof_fmt_u64(char *out, uint64_t v)
{
    return prof_digits_u64(out, v);
}

size_t prof_fmt_us(char *out, uint64_t ns)
{
    return prof_digits_us(out, ns);
}

void prof_buf_u64(struct prof_buf *b, uint64_t v)
{
    char *p = prof_buf_room(b, 20);

    if (p != NULL)
        prof_buf_commit(b, prof_fmt_u64(p, v));
}

void prof_buf_us(struct prof_buf *b, uint64_t ns)
{
    char *p = prof_buf_room(b, 24);

    if (p != NULL)
        prof_buf_commit(b, prof_fmt_us(p, ns));
}

/* ------------------------------------------------------------------------ */
/* Doubles without printf. printf's "%f" and "%g" write the locale's
 * decimal point (a program that calls setlocale(LC_ALL, "") under de_DE
 * gets "0,25", which is not JSON). Here a double's exact decimal value is
 * computed with integers: v = m * 2^e is m * 5^-e * 10^e when e < 0, so
 * the digits of the big integer m * 5^-e (or m * 2^e) are v's digits, all
 * of them (at most 767). Rounding that digit string is then exact, with
 * ties to even as glibc's printf rounds. The shortest form tries 1..17
 * significant digits and keeps the first that reads back as v (strtod
 * reads "25e-2" the same in every locale: there is no decimal point). */

#define DEC_MAX 800                  /* digits of the largest exact value: 767 */
#define LIMBS 84                     /* 2,550 bits: m * 5^1074 */

struct dec {
    int n;                           /* digits in d, no trailing zeros */
    int dp;                          /* value = 0.d[0..n) * 10^dp */
    char d[DEC_MAX];
};

/* Finite v != 0: its exact digits. */
static void dec_exact(double v, struct dec *x)
{
    uint32_t big[LIMBS];
    uint64_t bits, m;
    int e, len, k = 0;
    char chunk[DEC_MAX + 16];
    int pos = (int)sizeof chunk;

    memcpy(&bits, &v, sizeof bits);
    e = (int)((bits >> 52) & 0x7ff);
    m = bits & ((UINT64_C(1) << 52) - 1);
    if (e == 0)
        e = 1 - 1075;                /* subnormal */
    else
        m |= UINT64_C(1) << 52, e -= 1075;
    while ((m & 1) == 0)             /* fewer 5s to multiply by */
        m >>= 1, e++;
    big[0] = (uint32_t)m;
    big[1] = (uint32_t)(m >> 32);
    len = big[1] ? 2 : 1;
    if (e > 0) {
        /* Shift left by e bits. */
        int words = e / 32, sh = e % 32;
        uint32_t carry = 0;
        for (int i = 0; i < len; i++) {
            uint32_t w = big[i];
            big[i] = sh ? (w << sh) | carry : w;
            carry = sh ? w >> (32 - sh) : 0;
        }
        if (carry)
            big[len++] = carry;
        if (words) {
            memmove(big + words, big, (size_t)len * sizeof big[0]);
            memset(big, 0, (size_t)words * sizeof big[0]);
            len += words;
        }
    } else if (e < 0) {
        /* Multiply by 5^-e, 5^13 (< 2^32) at a time. */
        int left = -e;
        k = e;
        while (left > 0) {
            int step = left < 13 ? left : 13;
            uint64_t f = 1, carry = 0;
            for (int i = 0; i < step; i++)
                f *= 5;
            for (int i = 0; i < len; i++) {
                uint64_t t = (uint64_t)big[i] * f + carry;
                big[i] = (uint32_t)t;
                carry = t >> 32;
            }
            if (carry)
                big[len++] = (uint32_t)carry;
            left -= step;
        }
    }
    /* Decimal digits, nine at a time from the bottom. */
    while (len > 0) {
        uint64_t rem = 0;
        for (int i = len - 1; i >= 0; i--) {
            uint64_t cur = (rem << 32) | big[i];
            big[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (len > 0 && big[len - 1] == 0)
            len--;
        for (int i = 0; i < 9; i++) {
            chunk[--pos] = (char)('0' + rem % 10);
            rem /= 10;
        }
    }
    while (pos < (int)sizeof chunk && chunk[pos] == '0')
        pos++;
    x->n = (int)sizeof chunk - pos;
    memcpy(x->d, chunk + pos, (size_t)x->n);
    x->dp = x->n + k;
    while (x->n > 0 && x->d[x->n - 1] == '0')
        x->n--;
}

/* Keep the first keep digits (keep may be <= 0), rounding the rest away
 * with ties to even. A value that rounds to nothing gets n = 0. */
static void dec_round(struct dec *x, int keep)
{
    int up;

    if (keep >= x->n)
        return;
    if (keep < 0) {
        x->n = 0;
        return;
    }
    up = x->d[keep] > '5' ||
         (x->d[keep] == '5' && (x->n > keep + 1 || (keep > 0 && (x->d[keep - 1] - '0') % 2)));
    x->n = keep;
    if (up) {
        int i = keep - 1;
        while (i >= 0 && x->d[i] == '9')
            i--;
        if (i < 0) {
            x->d[0] = '1';
            x->n = 1;
            x->dp++;
        } else {
            x->d[i]++;
            x->n = i + 1;
        }
    }
    while (x->n > 0 && x->d[x->n - 1] == '0')
        x->n--;
}

static double dec_value(const struct dec *x)
{
    char s[48];
    int n = x->n;

    memcpy(s, x->d, (size_t)n);
    s[n++] = 'e';
    snprintf(s + n, sizeof s - (size_t)n, "%d", x->dp - x->n);   /* an integer: no locale */
    return strtod(s, NULL);
}

/* Appending into a fixed array, cut at its end. */
struct out {
    char *p;
    size_t size, len;
};

static void out_put(struct out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, o->len++)
        if (o->len + 1 < o->size)
            o->p[o->len] = s[i];
}

static void out_zeros(struct out *o, int n)
{
    for (; n > 0; n--)
        out_put(o, "0", 1);
}

static size_t out_end(struct out *o)
{
    size_t n = o->len < o->size ? o->len : o->size - 1;

    o->p[n] = '\0';
    return n;
}

/* Digits of x placed around the point, at least decimals after it. */
static void out_positional(struct out *o, const struct dec *x, int decimals)
{
    int after;

    if (x->dp <= 0) {
        out_put(o, "0", 1);
    } else if (x->n >= x->dp) {
        out_put(o, x->d, (size_t)x->dp);
    } else {
        out_put(o, x->d, (size_t)x->n);
        out_zeros(o, x->dp - x->n);
    }
    after = x->n - x->dp;            /* digits after the point */
    if (after < decimals)
        after = decimals;
    if (after <= 0)
        return;
    out_put(o, ".", 1);
    for (int i = 0; i < after; i++) {
        int at = x->dp + i;
        out_put(o, at >= 0 && at < x->n ? &x->d[at] : "0", 1);
    }
}

static void out_scientific(struct out *o, const struct dec *x, int printf_exp)
{
    char tmp[20];               /* prof_fmt_u64's room */
    int ex = x->dp - 1;
    size_t n;

    out_put(o, x->d, 1);
    if (x->n > 1) {
        out_put(o, ".", 1);
        out_put(o, x->d + 1, (size_t)x->n - 1);
    }
    out_put(o, ex < 0 ? "e-" : printf_exp ? "e+" : "e", ex < 0 || printf_exp ? 2 : 1);
    ex = ex < 0 ? -ex : ex;
    if (printf_exp && ex < 10)
        out_put(o, "0", 1);
    n = prof_fmt_u64(tmp, (uint64_t)ex);
    out_put(o, tmp, n);
}

static int special(struct out *o, double v)
{
    if (isnan(v)) {
        out_put(o, "nan", 3);
        return 1;
    }
    if (signbit(v))
        out_put(o, "-", 1);
    if (isinf(v)) {
        out_put(o, "inf", 3);
        return 1;
    }
    return 0;
}

size_t prof_fmt_fixed(char *buf, size_t size, double v, int decimals)
{
    struct out o = {buf, size, 0};
    struct dec x;

    if (decimals < 0)
        decimals = 0;
    if (decimals > 17)
        decimals = 17;
    if (!special(&o, v)) {
        x.n = 0;
        x.dp = 0;
        if (v != 0)
            dec_exact(fabs(v), &x);
        dec_round(&x, x.dp + decimals);
        if (x.n == 0)
            x.dp = 0;
        out_positional(&o, &x, decimals);
    }
    return out_end(&o);
}

size_t prof_fmt_sig(char *buf, size_t size, double v, int sig)
{
    struct out o = {buf, size, 0};
    struct dec x;

    if (sig < 1)
        sig = 1;
    if (sig > 17)
        sig = 17;
    if (!special(&o, v)) {
        if (v == 0) {
            out_put(&o, "0", 1);
        } else {
            dec_exact(fabs(v), &x);
            dec_round(&x, sig);
            if (x.dp - 1 < -4 || x.dp - 1 >= sig)
                out_scientific(&o, &x, 1);
            else
                out_positional(&o, &x, 0);
        }
    }
    return out_end(&o);
}

size_t prof_fmt_json_double(char *buf, size_t size, double v)
{
    struct out o = {buf, size, 0};
    struct dec exact, x;

    if (!isfinite(v)) {
        out_put(&o, "null", 4);
        return out_end(&o);
    }
    if (signbit(v))
        out_put(&o, "-", 1);
    if (v == 0) {
        out_put(&o, "0.0", 3);
        return out_end(&o);
    }
    dec_exact(fabs(v), &exact);
    for (int sig = 1; sig <= 17; sig++) {
        x = exact;
        dec_round(&x, sig);
        if (sig == 17 || dec_value(&x) == fabs(v))
            break;
    }
    if (x.dp >= x.n && x.dp <= 15)
        out_positional(&o, &x, 1);        /* an integer: "3.0" */
    else if (x.dp - 1 >= -5 && x.dp - 1 < 17)
        out_positional(&o, &x, 0);
    else
        out_scientific(&o, &x, 0);
    return out_end(&o);
}

void prof_buf_double(struct prof_buf *b, double v)
{
    char tmp[40];

    prof_buf_put(b, tmp, prof_fmt_json_double(tmp, sizeof tmp, v));
}

void prof_buf_fixed(struct prof_buf *b, double v, int decimals)
{
    char tmp[400];

    prof_buf_put(b, tmp, prof_fmt_fixed(tmp, sizeof tmp, v, decimals));
}

void prof_buf_free(struct prof_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

int prof_buf_snprint(struct prof_buf *b, char *buf, size_t size)
{
    int n = (int)b->len;

    if (size > 0) {
        size_t k = b->len < size - 1 ? b->len : size - 1;
        memcpy(buf, b->data, k);
        buf[k] = '\0';
    }
    prof_buf_free(b);
    return n;
}

size_t prof_fmt_name(char *out, size_t size, const char *name, size_t max_cols)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t n = 0, cols = 0;

    while (*s != '\0' && n + 8 < size) {
        size_t seq = prof_utf8_seq(s);
        if (cols >= max_cols) {
            memcpy(out + n, "...", 3);
            n += 3;
            cols += 3;
            break;
        }
        if (seq == 1 && *s >= 0x20 && *s != 0x7f) {
            out[n++] = (char)*s++;
        } else if (seq > 1 && !(seq == 2 && s[0] == 0xc2 && s[1] < 0xa0)) {
            /* U+0080..U+009F (C1 controls, e.g. U+009B, CSI) are escaped
             * byte by byte below, like C0 controls. */
            memcpy(out + n, s, seq);
            n += seq;
            s += seq;
        } else {
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", *s++);
            cols += 3;
        }
        cols++;
    }
    out[n] = '\0';
    return cols;
}

size_t prof_utf8_cut(const char *s, size_t len, size_t max)
{
    size_t n = 0;

    if (len <= max)
        return len;
    while (n < len) {
        size_t seq = prof_utf8_seq((const unsigned char *)s + n);

        if (seq == 0)
            seq = 1;
        if (n + seq > max)
            break;
        n += seq;
    }
    return n;
}

void prof_buf_prom_label(struct prof_buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;

    /* Runs of plain bytes go in one copy. */
    while (p < end) {
        size_t k = 1;

        if (*p >= 0x20 && *p < 0x7f && *p != '\\' && *p != '"') {
            p++;
            continue;
        }
        if (*p >= 0x80 && (k = prof_utf8_seq(p)) != 0 && p + k <= end) {
            p += k;
            continue;
        }
        prof_buf_put(b, (const char *)run, (size_t)(p - run));
        if (*p == '\\')
            prof_buf_put(b, "\\\\", 2);
        else if (*p == '"')
            prof_buf_put(b, "\\\"", 2);
        else if (*p == '\n')
            prof_buf_put(b, "\\n", 2);
        else
            prof_buf_printf(b, "\\\\x%02x", *p);
        run = ++p;
    }
    prof_buf_put(b, (const char *)run, (size_t)(p - run));
}

size_t prof_utf8_seq(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are invalid. */
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void prof_buf_json_string(struct prof_buf *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    static const char hex[] = "0123456789abcdef";

    prof_buf_put(b, "\"", 1);
    while (*s != '\0') {
        const unsigned char *run = s;
        /* Copy plain ASCII in one go. */
        while (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
            s++;
        if (s != run)
            prof_buf_put(b, (const char *)run, (size_t)(s - run));
        if (*s == '\0')
            break;
        if (*s == '"' || *s == '\\') {
            char e[2] = {'\\', (char)*s};
            prof_buf_put(b, e, 2);
            s++;
        } else if (*s < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[*s >> 4], hex[*s & 15]};
            prof_buf_put(b, e, 6);
            s++;
        } else {
            size_t n = prof_utf8_seq(s);
            if (n == 0) {
                prof_buf_put(b, "\\ufffd", 6);
                s++;
            } else {
                prof_buf_put(b, (const char *)s, n);
                s += n;
            }
        }
    }
    prof_buf_put(b, "\"", 1);
}
