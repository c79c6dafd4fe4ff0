/* abi_size.c - the sizes and layouts that the inline fast path (compiled
 * into every user's code) and the runtime must agree on, and the public
 * structs whose size is part of the ABI. A change here is an ABI change:
 * bump the soname and the format. 64-bit targets only. */
#include <prof.h>

#include <stdalign.h>
#include <stddef.h>

#include "check.h"

#if UINTPTR_MAX == UINT64_MAX
/* One record per zone: start, end, name, parent path, depth, kind; 32
 * bytes, two records per cache line. */
_Static_assert(sizeof(prof_record_) == 32, "prof_record_ is 32 bytes");
_Static_assert(64 % sizeof(prof_record_) == 0, "records never straddle a cache line");
_Static_assert(offsetof(prof_record_, start) == 0, "record layout");
_Static_assert(offsetof(prof_record_, end) == 8, "record layout");
_Static_assert(offsetof(prof_record_, name) == 16, "record layout");
_Static_assert(offsetof(prof_record_, parent) == 24, "record layout");
_Static_assert(offsetof(prof_record_, depth) == 28, "record layout");
_Static_assert(offsetof(prof_record_, kind) == 30, "record layout");

/* A zone in progress lives on the user's stack (and in the Python
 * binding's and the Cython .pxd's copies of this struct). */
_Static_assert(sizeof(prof_zone) == 32, "prof_zone is 32 bytes");
_Static_assert(offsetof(prof_zone, start) == 0, "zone layout");
_Static_assert(offsetof(prof_zone, name) == 8, "zone layout");
_Static_assert(offsetof(prof_zone, parent) == 16, "zone layout");
_Static_assert(offsetof(prof_zone, depth) == 20, "zone layout");
_Static_assert(offsetof(prof_zone, thread) == 24, "zone layout");
_Static_assert(sizeof(prof_cuda_zone) == 48, "prof_cuda_zone is 48 bytes");

/* The producer's fields and the consumer's index on different cache lines
 * (no false sharing between the thread and the collector). */
_Static_assert(offsetof(struct prof_thread_, tail) % 64 == 0, "tail starts a cache line");
_Static_assert(offsetof(struct prof_thread_, tail) >= offsetof(struct prof_thread_, head) + 64,
               "head and tail on different cache lines");
_Static_assert(offsetof(struct prof_thread_, head) == 0, "head first");
_Static_assert(alignof(struct prof_thread_) == 64, "thread state is cache-line aligned");

/* Public result structs: fixed size, with reserved space for growth. */
_Static_assert(sizeof(prof_stage_stats) == 152, "prof_stage_stats size");
/* cpu_ns took the first reserved word: every field before it stays put. */
_Static_assert(offsetof(prof_stage_stats, flags) == 100, "prof_stage_stats flags");
_Static_assert(offsetof(prof_stage_stats, cpu_ns) == 104, "prof_stage_stats cpu_ns");
_Static_assert(sizeof(prof_counter_stats) == 80, "prof_counter_stats size");
#endif

int main(void)
{
    if (sizeof(void *) != 8)
        SKIP("sizes are checked on 64-bit targets");
    /* The same facts at run time, so a failure names the numbers. */
    CHECK_EQ(sizeof(prof_record_), 32);
    CHECK_EQ(sizeof(prof_zone), 32);
    CHECK_EQ(offsetof(struct prof_thread_, tail) % 64, 0);
    CHECK_EQ(PROF_MAX_DEPTH_, 64);
    /* The constants the API documents. */
    CHECK_EQ(PROF_FORMAT_DEFAULT, 0);
    CHECK_EQ(PROF_FORMAT_TEXT, 1);
    CHECK_EQ(PROF_FORMAT_JSON, 2);
    CHECK_EQ(PROF_SUMMARY_PERIODIC, 1);
    CHECK_EQ(PROF_SUMMARY_FINAL, 2);
    CHECK_EQ(PROF_STAGE_GPU, 1);
    return 0;
}
