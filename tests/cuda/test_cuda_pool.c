/* Event pairs are pooled and reused: a million CUDA zones create no more
 * events than the zones in flight at once (+ thread caches and the
 * reference events). And when the GPU falls so far behind that the pool is
 * full, further zones time their CPU side only, with one message. */
#include "cuda_test.h"

#define TOTAL 1000000
#define BATCH 1000
#define FLOOD 70000

int main(void)
{
    long live_first = 0, live, peak;
    uint64_t done = 0, got;
    struct fake f;
    CUstream s, s2;
    int i;

    s = fake_start(&f);

    while (done < TOTAL) {
        for (i = 0; i < BATCH; i++) {
            PROF_CUDA_ZONE("pooled", s);
            f.launch(s, 100);
        }
        done += BATCH;
        got = wait_count("pooled [gpu]", done, 20000);
        CHECKF(got == done, "%llu of %llu GPU zones delivered", (unsigned long long)got,
               (unsigned long long)done);
        if (done == BATCH)
            live_first = f.live_events(NULL);
    }
    live = f.live_events(&peak);
    printf("cuda pool: %d zones, %ld events alive after the first %d, %ld at the end, peak %ld\n",
           TOTAL, live_first, BATCH, live, peak);
    /* Two events per pair in flight, the thread's cache, two reference
     * events: nothing proportional to the number of zones. */
    CHECKF(peak <= 2 * (BATCH + 64) + 4, "peak %ld events", peak);
    /* The pool grows to the zones in flight at once, which a collector
     * woken early (a sanitizer's pace) can keep under a batch for a
     * while: bounded by the batch, not by the first batch's figure. */
    CHECKF(live <= 2 * (BATCH + 64) + 4, "events grew from %ld to %ld", live_first, live);
    CHECK(stage_count("pooled") == TOTAL);
    LOG_EXPECT_NONE();

    /* Exhaustion: more zones in flight on a new context than the pool's
     * bound (65,536 pairs). */
    CHECK(fake_context(&f, 1) != NULL);
    s2 = fake_stream(&f);
    /* Long enough that none completes while the flood is launched, even
     * under a sanitizer. */
    f.set_delay_us(5000000);
    for (i = 0; i < FLOOD; i++) {
        PROF_CUDA_ZONE("flood", s2);
        f.launch(s2, 100);
    }
    got = wait_count("flood [gpu]", FLOOD, 9000);
    printf("cuda pool: %llu of %d zones in flight got events\n", (unsigned long long)got, FLOOD);
    CHECKF(got >= 60000 && got <= 65536, "%llu", (unsigned long long)got);
    CHECK(stage_count("flood") == FLOOD);
    {
        /* The loss, counted for its stage, with its cause. */
        static char text[16384];
        char want[128];

        CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) > 0);
        snprintf(want, sizeof want, "GPU sides lost: flood %llu (event pool full",
                 (unsigned long long)(FLOOD - got));
        CHECKF(strstr(text, want) != NULL, "no \"%s\" in:\n%s", want, text);
    }
    if (log_total() != 1 || log_matching("event pool full") != 1) {
        log_dump();
        CHECKF(0, "expected one message about the full pool, got %d", log_total());
    }
    /* Once they completed, zones get events again. */
    for (i = 0; i < 10; i++) {
        PROF_CUDA_ZONE("flood", s2);
        f.launch(s2, 100);
    }
    CHECK(wait_count("flood [gpu]", got + 10, 9000) == got + 10);
    return 0;
}
