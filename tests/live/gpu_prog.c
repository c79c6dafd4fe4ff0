/* gpu_prog.c - a running prof process with CUDA zones, for prof-top's GPU
 * line (test_gpu.py), on the fake driver (PROF_CUDA_LIB) and fake NVML
 * (PROF_NVML_LIB).
 *
 *   gpu_prog SECONDS [PERIOD_MS KERNEL_MS]
 *
 * Every PERIOD_MS (10), on deadlines of the clock rather than after a
 * sleep, a CUDA zone "step" around a kernel of KERNEL_MS (3) on the fake
 * GPU, a CPU zone "data" between them: the GPU is busy KERNEL_MS /
 * PERIOD_MS of the time (30%) whatever the machine's load does to the
 * sleeps, since a late launch is followed by the ones it missed, at once,
 * and the fake runs them back to back. "ready" once the first GPU zone is
 * counted. */
#include "../cuda/cuda_test.h"

#define MS 1000000ull

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 30;
    uint64_t period = (argc > 2 ? strtoull(argv[2], NULL, 10) : 10) * MS;
    uint64_t kernel = (argc > 3 ? strtoull(argv[3], NULL, 10) : 3) * MS;
    uint64_t t0, end, next;
    struct fake f;
    CUstream s;
    int ready = 0;

    CHECK(period > 0 && kernel < period);
    s = fake_start(&f);
    prof_thread_name("main");
    t0 = now_ns();
    end = t0 + (uint64_t)(seconds * 1e9);
    for (next = t0; next < end; next += period) {
        {
            PROF_ZONE("data");
            struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};

            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
        }
        {
            PROF_CUDA_ZONE("step", s);
            f.launch(s, kernel);
        }
        if (!ready && stage_count("step [gpu]") > 0) {
            printf("ready\n");
            fflush(stdout);
            ready = 1;
        }
    }
    return 0;
}
