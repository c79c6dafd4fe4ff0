/* json.h - a growable output buffer and the JSON pieces written into it by
 * the summary and the trace (on the collector thread only). */
#ifndef PROF_JSON_H
#define PROF_JSON_H

#include <stddef.h>
#include <stdint.h>

struct prof_buf {
    char *data;
    size_t len, cap;
    int failed;                  /* an allocation failed: output incomplete */
};

void prof_buf_put(struct prof_buf *b, const char *s, size_t n);
void prof_buf_puts(struct prof_buf *b, const char *s);
void prof_buf_printf(struct prof_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void prof_buf_u64(struct prof_buf *b, uint64_t v);
/* ns as microseconds with three decimals: 1234567 -> "1234.567". */
void prof_buf_us(struct prof_buf *b, uint64_t ns);
/* A double as JSON (non-finite values become null). */
void prof_buf_double(struct prof_buf *b, double v);
void prof_buf_free(struct prof_buf *b);

/* Append s as a JSON string with its quotes. Quotes, backslashes and control
 * characters are escaped; bytes that are not valid UTF-8 become U+FFFD, so
 * no name can break the file. */
void prof_buf_json_string(struct prof_buf *b, const char *s);

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is invalid. */
size_t prof_utf8_seq(const unsigned char *s);

#endif
