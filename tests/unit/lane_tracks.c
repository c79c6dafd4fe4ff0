/* lane_tracks.c - every thread's lane gets a trace track of its own, for
 * as many threads as the process ever runs (src/output/trace_track.c).
 * Run by lane_tracks.py, which reads the trace.
 *
 *   lane_tracks N: N threads, one at a time, each with one zone in lane 1
 *   (an asyncio task's lane, as the Python binding records it) and one in
 *   its own nesting. A lane's track id used to be the thread's index
 *   masked to 14 bits: from the 16,385th thread on, lanes were drawn on
 *   earlier threads' tracks. Each thread's name puts a 2-byte UTF-8
 *   character across its 60th byte, where a lane's track name cuts the
 *   thread's name: the cut must not split it. */
#include <prof.h>

#include <pthread.h>
#include <stdlib.h>

#include "check.h"

static void *one(void *arg)
{
    /* 59 bytes, then U+00E9 in bytes 60-61. */
    prof_thread_name("wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\xc3\xa9x");
    prof_zone z = prof_zone_begin("task");

    (void)arg;
    prof_zone_end_lane_(&z, 1);
    {
        PROF_ZONE("own");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;

    CHECK_MSG(n > 0, "usage: lane_tracks N");
    CHECK_EQ(prof_enable(1), 0);
    for (long i = 0; i < n; i++) {
        pthread_t t;

        CHECK_EQ(pthread_create(&t, NULL, one, NULL), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
    }
    CHECK_EQ(prof_flush(), 0);
    CHECK_EQ(test_count("task"), (uint64_t)n);
    prof_shutdown();
    return 0;
}
