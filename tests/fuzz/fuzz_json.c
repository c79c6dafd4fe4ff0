/* fuzz_json.c - the JSON name escaper (prof_buf_json_string, src/base/json.c).
 *
 * Input: a name (up to its first NUL byte). Appended to a buffer that
 * already holds some text, its output must be exactly one JSON string by a
 * strict checker written independently (tests/fuzz/json_strict.h): strict
 * UTF-8, no raw control bytes, only RFC 8259 escapes, no lone surrogates.
 * Decoded, it must equal the name with every byte that does not start a
 * valid UTF-8 sequence replaced by U+FFFD (docs/CONFIG.md), which for valid
 * UTF-8 names is the name itself: the round trip. prof_utf8_seq() must
 * agree with the independent decoder at every position. The text already in
 * the buffer must be left alone. */
#include <string.h>

#include "json.h"
#include "fuzz.h"
#include "json_strict.h"

#define PREFIX "{\"name\":"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = strnlen((const char *)data, size), elen = 0, dlen = 0;
    char *name = malloc(n + 1);
    unsigned char *expect = malloc(3 * n + 1), *decoded;
    struct prof_buf b = {0};
    char err[160];
    uint32_t cp;

    if (name == NULL || expect == NULL) {
        free(name);
        free(expect);
        return 0;
    }
    memcpy(name, data, n);
    name[n] = '\0';

    /* The expected decoded text, and the two decoders compared. */
    for (size_t i = 0; i < n;) {
        size_t k = json_utf8_seq((const unsigned char *)name + i, n - i, &cp);
        size_t theirs = prof_utf8_seq((const unsigned char *)name + i);
        FUZZ_CHECK(theirs == k, "prof_utf8_seq says %zu at byte %zu (0x%02x), reference %zu",
                   theirs, i, (unsigned char)name[i], k);
        if (k == 0) {
            memcpy(expect + elen, "\xef\xbf\xbd", 3);
            elen += 3;
            i++;
        } else {
            memcpy(expect + elen, name + i, k);
            elen += k;
            i += k;
        }
    }

    prof_buf_puts(&b, PREFIX);
    prof_buf_json_string(&b, name);
    if (b.failed) {   /* out of memory: nothing to judge */
        prof_buf_free(&b);
        free(name);
        free(expect);
        return 0;
    }
    FUZZ_CHECK(b.len >= strlen(PREFIX) && memcmp(b.data, PREFIX, strlen(PREFIX)) == 0,
               "text before the string was changed");
    FUZZ_CHECK(b.data[b.len] == '\0', "buffer not NUL-terminated");
    FUZZ_CHECK(strlen(b.data) == b.len, "NUL byte inside the output");

    decoded = malloc(b.len + 1);
    FUZZ_CHECK(decoded != NULL, "out of memory");
    FUZZ_CHECK(json_strict_string(b.data + strlen(PREFIX), b.len - strlen(PREFIX), decoded, &dlen,
                                  err, sizeof err) == 0,
               "not one strict JSON string: %s: %s", err, b.data + strlen(PREFIX));
    FUZZ_CHECK(json_utf8_valid(decoded, dlen), "decoded string is not valid UTF-8");
    FUZZ_CHECK(dlen == elen && memcmp(decoded, expect, dlen) == 0,
               "decoded string differs from the name with U+FFFD replacements (%zu vs %zu bytes)",
               dlen, elen);
    if (json_utf8_valid((const unsigned char *)name, n))
        FUZZ_CHECK(dlen == n && memcmp(decoded, name, n) == 0, "valid UTF-8 did not round-trip");

    /* The whole buffer, closed as an object, is a JSON document. */
    prof_buf_puts(&b, "}");
    if (!b.failed)
        FUZZ_CHECK(json_strict_check(b.data, b.len, NULL, NULL, err, sizeof err) == 0,
                   "object not valid: %s", err);

    free(decoded);
    prof_buf_free(&b);
    free(name);
    free(expect);
    return 0;
}
