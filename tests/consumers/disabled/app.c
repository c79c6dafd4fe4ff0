/* A program instrumented with prof and built with -DPROF_DISABLE and no
 * -lprof: every call in prof.h must compile to an inline no-op that gives
 * the "off" value prof.h documents. run.py checks that this file calls
 * every public function prof.h declares, so a new call without a
 * compiled-out twin fails here. Exit 0 when every value is as documented. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <prof.h>
#include <prof_ranks.h>

static int failures;

#define EXPECT(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "disabled/app.c:%d: %s\n", __LINE__, #cond); \
            failures++; \
        } \
    } while (0)

static void on_summary(void *user, const char *text, int kind)
{
    (void)user; (void)text; (void)kind;
}

static void on_log(void *user, const char *message)
{
    (void)user; (void)message;
}

static void work(void)
{
    PROF_FUNC();
    PROF_COUNTER("depth", 1);
    PROF_MARK("mark");
}

int main(void)
{
    char buf[64] = "untouched";
    char name[] = "dynamic";
    prof_stage_stats st;
    prof_counter_stats cs;
    prof_zone z;
    prof_cuda_zone cz;

    EXPECT(prof_enable(1) == 0);
    EXPECT(prof_enabled() == 0);
    for (int i = 0; i < 3; i++) {
        PROF_ZONE("step");
        work();
        EXPECT(prof_step() == (uint64_t)i + 1);
    }
    {
        PROF_ZONE_BEGIN(pair, "pair");
        PROF_ZONE_END(pair);
        PROF_CUDA_ZONE("gpu", NULL);
    }
    z = prof_zone_begin("zone");
    EXPECT(z.start == 0);
    prof_zone_end(&z);
    cz = prof_cuda_zone_begin("cuda", NULL);
    EXPECT(cz.cpu.start == 0);
    prof_cuda_zone_end(&cz);
    prof_counter("c", 2.0);
    prof_mark("m");
    EXPECT(prof_thread_name("main") == 0);
    EXPECT(prof_thread_name(NULL) == -EINVAL);
    EXPECT(prof_intern(name) == name);
    EXPECT(prof_flush() == -ESRCH);
    EXPECT(prof_stats("step", &st) == -ESRCH);
    EXPECT(prof_stats_list(&st, 1) == -ESRCH);
    EXPECT(prof_counter_stats_get("c", &cs) == -ESRCH);
    EXPECT(prof_counter_stats_list(&cs, 1) == -ESRCH);
    EXPECT(prof_summary_print(stdout) == -ESRCH);
    EXPECT(prof_summary_snprint(buf, sizeof buf, PROF_FORMAT_TEXT) == -ESRCH);
    EXPECT(buf[0] == '\0');
    EXPECT(prof_reset() == 0);
    {
        uint64_t every = 0, end = 0, before = prof_step_count();
        static uint64_t state[PROF_RANKS_STATE_SIZE / 8];
        size_t parts[3];

        EXPECT(prof_window_stats_list(&st, 1, &end) == -ESRCH);
        EXPECT(prof_step() == before + 1);
        EXPECT(prof_ranks_start(&every, NULL) == -ESRCH);
        EXPECT(prof_ranks_snapshot(state, sizeof state, 0) == -ESRCH);
        EXPECT(prof_ranks_snapshot_rows(state, sizeof state, 0, NULL, 0, 0, 0, 0) == -ESRCH);
        EXPECT(prof_ranks_contribute(state, 0, buf, sizeof buf, parts) == -ESRCH);
        EXPECT(prof_ranks_combine(buf, buf, 8) == -ESRCH);
        EXPECT(prof_ranks_result(state, 0, buf, sizeof buf) == -ESRCH);
        EXPECT(prof_ranks_format(state, PROF_FORMAT_TEXT, buf, sizeof buf) == -ESRCH);
        EXPECT(buf[0] == '\0');
        EXPECT(prof_ranks_emit(state) == -ESRCH);
        prof_ranks_abandon("test");
    }
    prof_set_summary_handler(on_summary, NULL);
    prof_set_logger(on_log, NULL);
#ifdef PROF_VERSION_STRING
    EXPECT(strcmp(prof_version(), PROF_VERSION_STRING) == 0);
#else
    /* Built with prof.h alone (no prof_version.h beside it). */
    EXPECT(strcmp(prof_version(), "disabled") == 0);
#endif
    EXPECT(prof_shutdown() == 0);
    printf("disabled: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
