/* header_ranks.c - prof_ranks.h stands on its own: it is the first
 * include, and this file is built with -std=c99 and -std=c11 (and as C++11
 * by header_ranks.cpp) under -Wall -Wextra -Wpedantic -Werror, on and
 * compiled out (PROF_DISABLE). Each call is made once with arguments it
 * refuses: -EINVAL from the library, -ESRCH compiled out. */
#include <prof_ranks.h>

#include <errno.h>
#include <stdio.h>

#ifdef PROF_DISABLE
#  define WANT (-ESRCH)
#else
#  define WANT (-EINVAL)
#endif

static int bad;

static void expect(int got, const char *what)
{
    if (got != WANT) {
        fprintf(stderr, "%s: %d, want %d\n", what, got, WANT);
        bad = 1;
    }
}

int main(void)
{
    char buf[64] = "x";
    size_t parts[3];

    expect(prof_ranks_snapshot(NULL, 0, 0), "prof_ranks_snapshot");
    expect(prof_ranks_snapshot_rows(NULL, 0, 0, NULL, 0, 0, 0, 0), "prof_ranks_snapshot_rows");
    expect(prof_ranks_contribute(NULL, 0, buf, sizeof buf, parts), "prof_ranks_contribute");
    expect(prof_ranks_combine(buf, buf, 7), "prof_ranks_combine");
    expect(prof_ranks_result(NULL, 0, buf, sizeof buf), "prof_ranks_result");
    expect(prof_ranks_format(NULL, PROF_FORMAT_TEXT, buf, sizeof buf), "prof_ranks_format");
    expect(prof_ranks_emit(NULL), "prof_ranks_emit");
    if (PROF_RANKS_ROUNDS < 1 || PROF_RANKS_STATE_SIZE < PROF_RANKS_BUF_SIZE) {
        fprintf(stderr, "PROF_RANKS_* constants\n");
        bad = 1;
    }
    printf("%s\n", bad ? "not ok" : "ok");
    return bad;
}
