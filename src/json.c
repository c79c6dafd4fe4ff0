/* json.c - output buffer and JSON escaping. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void prof_buf_u64(struct prof_buf *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    prof_buf_put(b, tmp + i, sizeof tmp - i);
}

void prof_buf_us(struct prof_buf *b, uint64_t ns)
{
    char frac[4];
    unsigned f = (unsigned)(ns % 1000);

    prof_buf_u64(b, ns / 1000);
    frac[0] = '.';
    frac[1] = (char)('0' + f / 100);
    frac[2] = (char)('0' + f / 10 % 10);
    frac[3] = (char)('0' + f % 10);
    prof_buf_put(b, frac, 4);
}

void prof_buf_double(struct prof_buf *b, double v)
{
    if (!isfinite(v))
        prof_buf_puts(b, "null");
    else if (v == floor(v) && fabs(v) < 1e15)
        prof_buf_printf(b, "%.1f", v);
    else
        prof_buf_printf(b, "%.17g", v);
}

void prof_buf_free(struct prof_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
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
