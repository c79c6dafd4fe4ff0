/* cuda_stub.c - temporary: CPU-only CUDA zones until cuda.c lands. */
#include "cuda.h"
#include "nvtx.h"

PROF_API prof_cuda_zone prof_cuda_zone_begin(const char *name, void *stream)
{
    prof_cuda_zone z;
    z.cpu = prof_zone_begin(name);
    z.stream = stream;
    z.events = 0;
    return z;
}
PROF_API void prof_cuda_zone_end(prof_cuda_zone *z) { prof_zone_end(&z->cpu); }
void prof_cuda_submit(const prof_record_ *r) { (void)r; }
void prof_cuda_poll(prof_gpu_sink sink, void *ctx) { (void)sink; (void)ctx; }
size_t prof_cuda_finish(prof_gpu_sink sink, void *ctx, unsigned t) { (void)sink; (void)ctx; (void)t; return 0; }
void prof_cuda_atfork_child(void) {}
int prof_nvtx_init(void) { return -1; }
void prof_nvtx_push(const char *name) { (void)name; }
void prof_nvtx_pop(void) {}
