// cuda_train.cu - a small training step on the GPU, instrumented with CPU
// zones and CUDA zones.
//
// Each step copies a batch to the GPU on a copy stream while the compute
// stream runs forward, backward and the optimizer update of a one-layer
// model (y = W x), then reads the loss back: the one synchronization a
// training loop usually has (loss.item() in PyTorch). CUDA zones measure
// what ran on the GPU between their begin and end on their stream; the CPU
// zones around them measure the launch cost, which is what a CPU timer
// around a kernel launch sees.
//
//     PROF=1 PROF_TRACE=cuda_train.json ./cuda_train [--steps N] [--size N]
//
// The summary shows "forward" (CPU: launch) next to "forward [gpu]" (the
// kernels), and the trace has one GPU track per stream, aligned with the
// CPU threads. Built only when meson finds nvcc.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <prof.h>

#define CHECK_CUDA(call) \
    do { \
        cudaError_t err_ = (call); \
        if (err_ != cudaSuccess) { \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                         cudaGetErrorString(err_)); \
            std::exit(1); \
        } \
    } while (0)

// y[b][i] = sum_j W[i][j] x[b][j]
__global__ void forward_kernel(const float *w, const float *x, float *y, int n, int batch)
{
    int b = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || b >= batch)
        return;
    float acc = 0.0f;
    for (int j = 0; j < n; j++)
        acc += w[i * n + j] * x[b * n + j];
    y[b * n + i] = acc;
}

// Squared error against the target t; grad = 2 (y - t) / batch; the loss is
// summed into *loss.
__global__ void loss_kernel(const float *y, const float *t, float *grad, float *loss, int n,
                            int batch)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n * batch)
        return;
    float d = y[k] - t[k];
    grad[k] = 2.0f * d / batch;
    atomicAdd(loss, d * d / batch);
}

// gW[i][j] = sum_b grad[b][i] x[b][j]
__global__ void backward_kernel(const float *grad, const float *x, float *gw, int n, int batch)
{
    int i = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n)
        return;
    float acc = 0.0f;
    for (int b = 0; b < batch; b++)
        acc += grad[b * n + i] * x[b * n + j];
    gw[i * n + j] = acc;
}

__global__ void sgd_kernel(float *w, const float *gw, float lr, int count)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count)
        w[k] -= lr * gw[k];
}

int main(int argc, char **argv)
{
    int steps = 200, n = 512, batch = 64;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--steps") == 0)
            steps = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--size") == 0)
            n = std::atoi(argv[i + 1]);
    }

    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        std::fprintf(stderr, "cuda_train: no CUDA device; nothing to run\n");
        return 0;
    }
    prof_thread_name("main");

    cudaStream_t compute, copy;
    cudaEvent_t batch_ready;
    CHECK_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&batch_ready, cudaEventDisableTiming));

    size_t wsize = (size_t)n * n, xsize = (size_t)batch * n;
    float *w, *gw, *x, *t, *y, *grad, *loss;
    CHECK_CUDA(cudaMalloc(&w, wsize * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&gw, wsize * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&x, xsize * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&t, xsize * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&y, xsize * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&grad, xsize * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&loss, sizeof(float)));
    CHECK_CUDA(cudaMemset(w, 0, wsize * sizeof(float)));

    float *host_x, *host_t, host_loss = 0.0f;
    CHECK_CUDA(cudaMallocHost(&host_x, xsize * sizeof(float)));
    CHECK_CUDA(cudaMallocHost(&host_t, xsize * sizeof(float)));

    unsigned seed = 1;
    for (int step = 0; step < steps; step++) {
        PROF_ZONE("train_step");
        {
            PROF_ZONE("data");  // CPU: make a batch (target = 0.5 * input)
            for (size_t k = 0; k < xsize; k++) {
                seed = seed * 1103515245u + 12345u;
                host_x[k] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
                host_t[k] = 0.5f * host_x[k];
            }
        }
        {
            PROF_CUDA_ZONE("h2d", copy);
            CHECK_CUDA(cudaMemcpyAsync(x, host_x, xsize * sizeof(float), cudaMemcpyHostToDevice, copy));
            CHECK_CUDA(cudaMemcpyAsync(t, host_t, xsize * sizeof(float), cudaMemcpyHostToDevice, copy));
            CHECK_CUDA(cudaEventRecord(batch_ready, copy));
        }
        CHECK_CUDA(cudaStreamWaitEvent(compute, batch_ready, 0));
        {
            PROF_CUDA_ZONE("forward", compute);
            dim3 grid((n + 127) / 128, batch);
            forward_kernel<<<grid, 128, 0, compute>>>(w, x, y, n, batch);
            CHECK_CUDA(cudaMemsetAsync(loss, 0, sizeof(float), compute));
            loss_kernel<<<(unsigned)((xsize + 255) / 256), 256, 0, compute>>>(y, t, grad, loss, n, batch);
        }
        {
            PROF_CUDA_ZONE("backward", compute);
            dim3 grid((n + 127) / 128, n);
            backward_kernel<<<grid, 128, 0, compute>>>(grad, x, gw, n, batch);
        }
        {
            PROF_CUDA_ZONE("optimizer", compute);
            sgd_kernel<<<(unsigned)((wsize + 255) / 256), 256, 0, compute>>>(w, gw, 0.1f, (int)wsize);
        }
        {
            PROF_ZONE("loss.item");  // the step's one synchronization
            CHECK_CUDA(cudaMemcpyAsync(&host_loss, loss, sizeof(float), cudaMemcpyDeviceToHost, compute));
            CHECK_CUDA(cudaStreamSynchronize(compute));
        }
        PROF_COUNTER("loss", host_loss);
        prof_step();
        CHECK_CUDA(cudaGetLastError());
    }
    std::printf("cuda_train: %d steps, final loss %.6f\n", steps, host_loss);

    cudaFreeHost(host_x);
    cudaFreeHost(host_t);
    cudaFree(w);
    cudaFree(gw);
    cudaFree(x);
    cudaFree(t);
    cudaFree(y);
    cudaFree(grad);
    cudaFree(loss);
    cudaEventDestroy(batch_ready);
    cudaStreamDestroy(compute);
    cudaStreamDestroy(copy);
    return 0;
}
