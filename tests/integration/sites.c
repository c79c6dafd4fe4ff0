/* sites.c - zones whose call sites must reach the trace (trace_sites.py
 * reads the "site:" comments below to know each zone's line). */
#include <stdint.h>
#include <string.h>

#include "prof.h"

/* A name that begins with a site's magic but is no site: it must stay a
 * name (and never be read as a site). */
static char forged[32] __attribute__((aligned(8)));

static volatile uint64_t sink;

static void work(void)
{
    for (int i = 0; i < 2000; i++)
        sink += (uint64_t)i;
}

static void twice(int i)
{
    if (i % 2) {
        PROF_ZONE("dup");   /* site: dup-odd */
        work();
    } else {
        PROF_ZONE("dup");   /* site: dup-even */
        work();
    }
}

static void func_zone(void)
{
    PROF_FUNC();            /* site: func_zone */
    work();
}

int main(void)
{
    uint64_t magic = PROF_SITE_MAGIC_;
    const char *runtime = prof_intern("runtime");

    memcpy(forged, &magic, sizeof magic);
    memcpy(forged + sizeof magic, "forged", 7);
    for (int i = 0; i < 10; i++) {
        PROF_ZONE("outer");     /* site: outer */
        twice(i);
        func_zone();
        {
            PROF_ZONE(runtime);
            work();
        }
        {
            PROF_ZONE(forged);
            work();
        }
        PROF_ZONE_BEGIN(z, "begin_end");    /* site: begin_end */
        work();
        PROF_ZONE_END(z);
    }
    return 0;
}
