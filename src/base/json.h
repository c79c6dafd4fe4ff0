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
/* A double as JSON: the shortest decimal that reads back as v, with ".0"
 * on integers below 1e15 (3.0, 0.25, 1e-07); non-finite values become
 * null. Locale-independent, like every number written here. */
void prof_buf_double(struct prof_buf *b, double v);
/* v with a fixed number of decimals (0-17), rounded as printf's "%.*f"
 * rounds (exact value, ties to even), but always with a '.'. */
void prof_buf_fixed(struct prof_buf *b, double v, int decimals);

/* Room for n more bytes at the end of b: a pointer to write them at, or
 * NULL (b->failed set). prof_buf_commit(b, k) then appends the k <= n
 * bytes written there. For writers that format in place. */
char *prof_buf_room(struct prof_buf *b, size_t n);
void prof_buf_commit(struct prof_buf *b, size_t k);

/* Locale-free formatting into a caller's array; each returns the length
 * written (no terminating NUL unless said).
 * prof_fmt_u64: out must have room for 20 bytes; those past the length
 * returned may be overwritten. prof_fmt_us: ns as microseconds with three
 * decimals, room for 24 bytes (the same). */
size_t prof_fmt_u64(char *out, uint64_t v);
size_t prof_fmt_us(char *out, uint64_t ns);
/* printf-like "%.*f" and "%.*g" (sig 1-17) and prof_buf_double's form,
 * NUL-terminated, into out[size] (size >= 32 always suffices for %g and
 * JSON; %f of a huge value is cut to size - 1). nan/inf print as "nan",
 * "inf", "-inf", as printf does (JSON callers use prof_buf_double). */
size_t prof_fmt_fixed(char *out, size_t size, double v, int decimals);
size_t prof_fmt_sig(char *out, size_t size, double v, int sig);
size_t prof_fmt_json_double(char *out, size_t size, double v);
void prof_buf_free(struct prof_buf *b);
/* Hand b's text to an snprintf-style caller and free b: returns the
 * length the whole text needs; buf gets the text cut to size - 1 bytes,
 * NUL-terminated (nothing when size is 0). */
int prof_buf_snprint(struct prof_buf *b, char *buf, size_t size);

/* Append s as a JSON string with its quotes. Quotes, backslashes and control
 * characters are escaped; bytes that are not valid UTF-8 become U+FFFD, so
 * no name can break the file. */
void prof_buf_json_string(struct prof_buf *b, const char *s);

/* Append s[0..n) as a Prometheus label value, without its quotes: valid
 * UTF-8 kept; \\, " and newline escaped as the exposition format says;
 * invalid bytes (the format is UTF-8) and other control bytes as the four
 * characters \\xNN (the backslash escaped), so no name breaks a line or
 * the scrape. The one escaper of every label prof writes. */
void prof_buf_prom_label(struct prof_buf *b, const char *s, size_t n);

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is invalid. */
size_t prof_utf8_seq(const unsigned char *s);

/* A name as it may reach a terminal (the text summary, the cross-rank
 * table, the kernels' line): valid UTF-8 kept, control bytes (escape
 * sequences and C1 controls included) and invalid bytes as \xNN, cut after
 * max_cols columns with "..." (at a character's end, never inside a UTF-8
 * sequence). Writes at most size bytes; returns the columns used. */
size_t prof_fmt_name(char *out, size_t size, const char *name, size_t max_cols);
/* The table's cut (columns) and a room that holds any name it cuts. */
#define PROF_NAME_COLS 48
#define PROF_NAME_ROOM 256

/* The one truncation rule of every name prof cuts into a fixed room: the
 * length of the longest head of s[0..len) of at most max bytes that does
 * not end inside a valid UTF-8 sequence (an invalid byte counts alone).
 * s must be NUL-terminated or hold complete sequences up to len. */
size_t prof_utf8_cut(const char *s, size_t len, size_t max);

#endif
