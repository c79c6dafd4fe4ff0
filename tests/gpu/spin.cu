// spin.cu - a kernel of known length: one thread spins on the GPU's
// global timer (%globaltimer, ns) for `ns` nanoseconds. Built to PTX by
// nvcc where there is one (tests/gpu/meson.build); test_gpu.c carries the
// same kernel as hand-written PTX for builds without nvcc.
extern "C" __global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
