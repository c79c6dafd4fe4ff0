/* json_strict.h - a strict JSON and UTF-8 checker for the hardening tests,
 * written independently of src/base/json.c so that it can judge it.
 *
 *     json_utf8_seq(s, avail, &cp)   length of the valid UTF-8 sequence at s
 *     json_utf8_valid(s, n)          every byte of s[0..n) is valid UTF-8
 *     json_strict_check(text, n, on_string, ctx, err, errsize)
 *                                    text is exactly one JSON value (RFC 8259)
 *     json_strict_string(text, n, out, &outlen)
 *                                    text is exactly one JSON string; decoded
 *
 * Strict means: UTF-8 only (no overlong forms, no encoded surrogates, nothing
 * past U+10FFFF), no raw control bytes in strings, only the escapes RFC 8259
 * lists, \u surrogates only in high-low pairs, numbers in the RFC grammar,
 * nothing but whitespace around the value. Header-only; no allocation except
 * in json_strict_check (one scratch buffer for decoded strings).
 */
#ifndef PROF_TEST_JSON_STRICT_H
#define PROF_TEST_JSON_STRICT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_STRICT_MAX_DEPTH 512

/* The length (1-4) of the valid UTF-8 sequence at s, of which avail bytes
 * may be read, with its code point in *cp; 0 when it is not valid. */
static inline size_t json_utf8_seq(const unsigned char *s, size_t avail, uint32_t *cp)
{
    uint32_t c, min;
    size_t n;

    if (avail == 0)
        return 0;
    c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if ((c & 0xe0) == 0xc0)
        n = 2, c &= 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        n = 3, c &= 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        n = 4, c &= 0x07, min = 0x10000;
    else
        return 0;
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

static inline int json_utf8_valid(const unsigned char *s, size_t n)
{
    uint32_t cp;

    for (size_t i = 0; i < n;) {
        size_t k = json_utf8_seq(s + i, n - i, &cp);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

static inline size_t json_utf8_put(unsigned char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Called for every string (is_key: an object key) with its decoded bytes;
 * return nonzero to stop with an error. */
typedef int (*json_strict_string_fn)(void *ctx, const unsigned char *s, size_t n, int is_key);

struct json_strict {
    const unsigned char *p, *end, *start;
    unsigned char *scratch;      /* decoded string, at least as long as text */
    json_strict_string_fn on_string;
    void *ctx;
    char *err;
    size_t errsize;
};

static inline int json_strict_fail(struct json_strict *j, const char *what)
{
    if (j->err != NULL && j->errsize > 0)
        snprintf(j->err, j->errsize, "%s at byte %zu", what, (size_t)(j->p - j->start));
    return -1;
}

static inline void json_strict_ws(struct json_strict *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static inline int json_strict_hex4(struct json_strict *j, uint32_t *v)
{
    *v = 0;
    if (j->end - j->p < 4)
        return json_strict_fail(j, "short \\u escape");
    for (int i = 0; i < 4; i++) {
        unsigned c = j->p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return json_strict_fail(j, "bad hex digit in \\u escape");
        *v = *v << 4 | d;
    }
    j->p += 4;
    return 0;
}

/* At a '"': parse the string, decoding into out (may be NULL). */
static inline int json_strict_str(struct json_strict *j, unsigned char *out, size_t *outlen)
{
    size_t n = 0;

    j->p++;
    for (;;) {
        uint32_t cp;
        size_t k;

        if (j->p >= j->end)
            return json_strict_fail(j, "unterminated string");
        if (*j->p == '"') {
            j->p++;
            break;
        }
        if (*j->p < 0x20)
            return json_strict_fail(j, "raw control byte in a string");
        if (*j->p == '\\') {
            unsigned char e;
            if (j->end - j->p < 2)
                return json_strict_fail(j, "unterminated escape");
            e = j->p[1];
            j->p += 2;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (json_strict_hex4(j, &cp) != 0)
                    return -1;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return json_strict_fail(j, "lone low surrogate escape");
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    uint32_t lo;
                    if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
                        return json_strict_fail(j, "lone high surrogate escape");
                    j->p += 2;
                    if (json_strict_hex4(j, &lo) != 0)
                        return -1;
                    if (lo < 0xdc00 || lo > 0xdfff)
                        return json_strict_fail(j, "high surrogate not followed by a low one");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                break;
            default:
                return json_strict_fail(j, "unknown escape");
            }
            if (out != NULL)
                n += json_utf8_put(out + n, cp);
            continue;
        }
        k = json_utf8_seq(j->p, (size_t)(j->end - j->p), &cp);
        if (k == 0)
            return json_strict_fail(j, "invalid UTF-8 in a string");
        if (out != NULL)
            memcpy(out + n, j->p, k);
        n += k;
        j->p += k;
    }
    if (outlen != NULL)
        *outlen = n;
    return 0;
}

static inline int json_strict_digits(struct json_strict *j)
{
    const unsigned char *s = j->p;

    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s ? 0 : json_strict_fail(j, "digit expected");
}

static inline int json_strict_number(struct json_strict *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (j->p < j->end && *j->p >= '1' && *j->p <= '9')
        json_strict_digits(j);
    else
        return json_strict_fail(j, "bad number");
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (json_strict_digits(j) != 0)
            return -1;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (json_strict_digits(j) != 0)
            return -1;
    }
    return 0;
}

static inline int json_strict_value(struct json_strict *j, int depth);

static inline int json_strict_string_value(struct json_strict *j, int is_key)
{
    size_t n;

    if (json_strict_str(j, j->scratch, &n) != 0)
        return -1;
    if (j->on_string != NULL && j->on_string(j->ctx, j->scratch, n, is_key) != 0)
        return json_strict_fail(j, "string rejected by the caller");
    return 0;
}

static inline int json_strict_value(struct json_strict *j, int depth)
{
    static const char *words[] = {"true", "false", "null"};

    if (depth > JSON_STRICT_MAX_DEPTH)
        return json_strict_fail(j, "nested too deep");
    json_strict_ws(j);
    if (j->p >= j->end)
        return json_strict_fail(j, "value expected");
    switch (*j->p) {
    case '{':
        j->p++;
        json_strict_ws(j);
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            return 0;
        }
        for (;;) {
            json_strict_ws(j);
            if (j->p >= j->end || *j->p != '"')
                return json_strict_fail(j, "object key expected");
            if (json_strict_string_value(j, 1) != 0)
                return -1;
            json_strict_ws(j);
            if (j->p >= j->end || *j->p != ':')
                return json_strict_fail(j, "':' expected");
            j->p++;
            if (json_strict_value(j, depth + 1) != 0)
                return -1;
            json_strict_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == '}') {
                j->p++;
                return 0;
            }
            return json_strict_fail(j, "',' or '}' expected");
        }
    case '[':
        j->p++;
        json_strict_ws(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            return 0;
        }
        for (;;) {
            if (json_strict_value(j, depth + 1) != 0)
                return -1;
            json_strict_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == ']') {
                j->p++;
                return 0;
            }
            return json_strict_fail(j, "',' or ']' expected");
        }
    case '"':
        return json_strict_string_value(j, 0);
    default:
        for (int i = 0; i < 3; i++) {
            size_t len = strlen(words[i]);
            if ((size_t)(j->end - j->p) >= len && memcmp(j->p, words[i], len) == 0) {
                j->p += len;
                return 0;
            }
        }
        return json_strict_number(j);
    }
}

/* 0 when text[0..n) is exactly one JSON value with optional whitespace
 * around it; -1 with a message in err otherwise (-2: out of memory). */
static inline int json_strict_check(const char *text, size_t n, json_strict_string_fn on_string,
                                    void *ctx, char *err, size_t errsize)
{
    struct json_strict j;
    int r;

    j.start = j.p = (const unsigned char *)text;
    j.end = j.p + n;
    j.on_string = on_string;
    j.ctx = ctx;
    j.err = err;
    j.errsize = errsize;
    if ((j.scratch = malloc(n + 1)) == NULL)
        return -2;
    r = json_strict_value(&j, 0);
    if (r == 0) {
        json_strict_ws(&j);
        if (j.p != j.end)
            r = json_strict_fail(&j, "trailing bytes after the value");
    }
    free(j.scratch);
    return r;
}

/* 0 when text[0..n) is exactly one JSON string (no whitespace); its decoded
 * bytes go to out (room for n bytes) and their count to *outlen. */
static inline int json_strict_string(const char *text, size_t n, unsigned char *out,
                                     size_t *outlen, char *err, size_t errsize)
{
    struct json_strict j;

    memset(&j, 0, sizeof j);
    j.start = j.p = (const unsigned char *)text;
    j.end = j.p + n;
    j.err = err;
    j.errsize = errsize;
    if (n == 0 || *j.p != '"')
        return json_strict_fail(&j, "a string must start with '\"'");
    if (json_strict_str(&j, out, outlen) != 0)
        return -1;
    if (j.p != j.end)
        return json_strict_fail(&j, "bytes after the closing quote");
    return 0;
}

#endif
