/* hostile_env.c - a small instrumented program for env_hostile.py: CPU
 * zones, steps, a counter, a mark and a CUDA zone with a kernel on the fake
 * driver, then the summary at exit. It switches prof on itself, so a
 * hostile PROF still records. The fake driver's path comes as argv[1], not
 * from PROF_CUDA_LIB, which the driver may have made hostile.
 *
 *   hostile_env FAKECUDA_PATH
 *
 * Prints ran=1 on stdout once it recorded everything; exit 0. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include <prof.h>
#include <prof_ranks.h>

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;

int main(int argc, char **argv)
{
    CUresult (*init)(unsigned);
    CUresult (*set_current)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUcontext (*ctx_create)(int);
    void (*launch)(CUstream, uint64_t);
    CUstream s = NULL;
    void *h;

    if (argc < 2 || (h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "usage: hostile_env FAKECUDA_PATH (%s)\n", dlerror());
        return 2;
    }
    *(void **)&init = dlsym(h, "cuInit");
    *(void **)&set_current = dlsym(h, "cuCtxSetCurrent");
    *(void **)&stream_create = dlsym(h, "cuStreamCreate");
    *(void **)&ctx_create = dlsym(h, "fakecuda_ctx_create");
    *(void **)&launch = dlsym(h, "fakecuda_launch");
    if (!init || !set_current || !stream_create || !ctx_create || !launch || init(0) != 0 ||
        set_current(ctx_create(0)) != 0 || stream_create(&s, 0) != 0) {
        fprintf(stderr, "hostile_env: the fake driver did not start\n");
        return 2;
    }
    prof_enable(1);
    prof_thread_name("main");
    /* Reads PROF_RANKS and PROF_RANKS_TIMEOUT (refused without step
     * windows: that is said, and is no failure here). */
    prof_ranks_start(NULL, NULL);
    for (int i = 0; i < 5; i++) {
        PROF_ZONE("step");
        {
            PROF_ZONE("work");
            PROF_COUNTER("loss", 1.0 / (i + 1));
        }
        {
            PROF_CUDA_ZONE("gpu_work", s);
            launch(s, 1000);
        }
        PROF_MARK("mark");
        prof_step();
    }
    printf("ran=1\n");
    fflush(stdout);
    return 0;
}
