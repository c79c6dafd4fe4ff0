/* prof used as a meson subproject: 3 steps of "sub_step". With PROF=1 the
 * program checks its own stage through prof_stats(); built with
 * -Dprof:prof_disable=true it checks that the call is compiled out
 * (-ESRCH). Exit 0 when the numbers are as expected. */
#include <errno.h>
#include <stdio.h>

#include <prof.h>

int main(void)
{
    prof_stage_stats st;
    int rc;

    for (int i = 0; i < 3; i++) {
        PROF_ZONE("sub_step");
        prof_step();
    }
    rc = prof_stats("sub_step", &st);
#ifdef PROF_DISABLE
    if (rc != -ESRCH) {
        fprintf(stderr, "compiled out, prof_stats gave %d\n", rc);
        return 1;
    }
#else
    if (rc != 0 || st.count != 3) {
        fprintf(stderr, "prof_stats gave %d, count %llu\n", rc,
                rc == 0 ? (unsigned long long)st.count : 0ull);
        return 1;
    }
#endif
    return 0;
}
