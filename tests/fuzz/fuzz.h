/* fuzz.h - what every fuzz target in this directory shares.
 *
 * Each target defines LLVMFuzzerTestOneInput (and may define
 * LLVMFuzzerInitialize). Built two ways (tests/fuzz/meson.build): with clang
 * and -fsanitize=fuzzer as a libFuzzer binary, and with any compiler against
 * replay.c, which feeds it the committed corpus so that every build runs the
 * regression inputs. FUZZ_CHECK stays on under NDEBUG and aborts, which both
 * libFuzzer and the replay runner report as a failure with the input. */
#ifndef PROF_TEST_FUZZ_H
#define PROF_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(expr, ...)                                                 \
    do {                                                                      \
        if (!(expr)) {                                                        \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__,       \
                    __LINE__, #expr);                                         \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            fflush(stderr);                                                   \
            abort();                                                          \
        }                                                                     \
    } while (0)

#endif
