/* warmup.c - PROF_SKIP_STEPS=5 (set by meson): the first five steps count
 * in no statistic, so an odd first iteration does not skew the numbers;
 * and the collector thread is named "prof-collector", as
 * top -H, gdb and py-spy show it. */
#include <prof.h>

#include <dirent.h>

#include "check.h"

static int collector_named(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int found = 0;

    CHECK(d != NULL);
    while ((e = readdir(d)) != NULL && !found) {
        char path[300], comm[64] = "";
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) != NULL)
            found = strcmp(comm, "prof-collector\n") == 0;
        fclose(f);
    }
    closedir(d);
    return found;
}

int main(void)
{
    prof_stage_stats st;

    CHECK_EQ(prof_enable(1), 0);
    for (int step = 1; step <= 20; step++) {
        {
            PROF_ZONE("work");
            /* The first five steps are empty, the rest at least 2 ms: a
             * warm-up zone in the statistics shows as a minimum under 2
             * ms, which no load can fake (it only makes zones longer). */
            if (step > 5)
                test_spin_ns(2000000);
        }
        prof_step();
    }
    st = test_stats("work");
    CHECK_EQ(st.count, 15);
    CHECK_GE(st.min_ns, 2000000);
    CHECK_MSG(collector_named(), "no thread named prof-collector in /proc/self/task");
    return 0;
}
