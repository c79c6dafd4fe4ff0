/* warmup.c - PROF_SKIP_STEPS=5 (set by meson): the first five steps count
 * in no statistic, so a slow first iteration does not skew the average or
 * the maximum; and the collector thread is named "prof-collector", as
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
            /* Warm-up: the first five steps are 20 ms, the rest 0.2 ms. */
            test_spin_ns(step <= 5 ? 20000000 : 200000);
        }
        prof_step();
    }
    st = test_stats("work");
    CHECK_EQ(st.count, 15);
    CHECK_LT(st.max_ns, 10000000);
    CHECK_LT(st.avg_ns, 10000000.0);
    CHECK_MSG(collector_named(), "no thread named prof-collector in /proc/self/task");
    return 0;
}
