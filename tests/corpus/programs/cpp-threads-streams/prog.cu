// cpp-threads-streams: four host threads, each feeding its own non-blocking stream.
//
// What it does: 4 std::threads; thread K creates a cudaStreamNonBlocking stream and
// launches 200 kernels on it back to back (no host synchronisation inside the loop),
// then synchronises its own stream once after the loop; main joins the threads.
// Each kernel is a compute loop (chains of FMAs) that runs for a set time, measured on
// the GPU's global timer from the start of each block: kernel k of worker K runs
// 100 + 50 * ((k + K) % 5) us (100..300 us, mean 200 us), on 2 x SMs blocks of 128
// threads (264 blocks on an H100: more blocks than SMs, yet all four workers' grids fit
// on the GPU at once, 8 blocks of 128 threads per SM).
// Built with nvcc --default-stream per-thread (no legacy NULL stream anywhere).
//
// What is right with it: nothing is wrong. Each stream always has queued work (the host
// enqueues 200 launches in well under a millisecond of launch calls each, against 40 ms
// of GPU work per stream), the four streams run concurrently, and the GPU is busy from
// the first kernel to the last: a healthy control (GPU busy > 90% of the steady state,
// ~100% by design; no finding above info).
// NVTX (nvtx3): each thread pushes one range `worker K` around its launch loop.
//
// Designed numbers: 4 x 200 = 800 kernels, 40 ms of kernel time per stream, all four
// streams concurrent: ~40-45 ms of GPU time in all, GPU busy ~100% from the third
// kernel to the last.

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(call)                                                                    \
    do {                                                                               \
        cudaError_t err_ = (call);                                                     \
        if (err_ != cudaSuccess) {                                                     \
            fprintf(stderr, "CUDA error: %s failed at %s:%d: %s\n", #call, __FILE__,   \
                    __LINE__, cudaGetErrorString(err_));                               \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// A compute loop: chains of FMAs, checked against the global timer every 64 of them,
// until `ns` nanoseconds have passed since this block started.
__device__ float burn(float x, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    return x;
}

__global__ void worker_step(float* out, unsigned long long ns) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x = burn(1.0f + tid * 1e-7f, ns);
    if (threadIdx.x == 0) out[blockIdx.x] = x;
}

struct Args {
    int threads = 4;
    int kernels = 200;
    int base_us = 100;
    int step_us = 50;
};

static Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) a.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) a.kernels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--base-us") && i + 1 < argc) a.base_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--step-us") && i + 1 < argc) a.step_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--kernels N] [--base-us US] [--step-us US]\n",
                    argv[0]);
            exit(2);
        }
    }
    return a;
}

static void worker(int k, const Args& a, int blocks, float* out, double* gpu_us) {
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    char name[32];
    snprintf(name, sizeof name, "worker %d", k);
    double total = 0;
    nvtxRangePushA(name);
    for (int i = 0; i < a.kernels; ++i) {
        const int us = a.base_us + a.step_us * ((i + k) % 5);
        total += us;
        worker_step<<<blocks, 128, 0, stream>>>(out, 1000ull * us);
        CHECK(cudaGetLastError());
    }
    nvtxRangePop();
    CHECK(cudaStreamSynchronize(stream));   // once, after the loop
    CHECK(cudaStreamDestroy(stream));
    *gpu_us = total;
}

int main(int argc, char** argv) {
    const Args a = parse(argc, argv);
    int dev = 0, sms = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int blocks = 2 * sms;

    std::vector<float*> outs(a.threads);
    for (auto& p : outs) CHECK(cudaMalloc(&p, blocks * sizeof(float)));
    // Load the kernel's module before the workers start (one short launch).
    worker_step<<<blocks, 128>>>(outs[0], 1000ull);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    std::vector<double> gpu_us(a.threads, 0.0);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int k = 0; k < a.threads; ++k)
        pool.emplace_back(worker, k, std::cref(a), blocks, outs[k], &gpu_us[k]);
    for (auto& t : pool) t.join();
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    float check = 0;
    CHECK(cudaMemcpy(&check, outs[a.threads - 1], sizeof(float), cudaMemcpyDeviceToHost));
    for (auto p : outs) CHECK(cudaFree(p));
    double per_stream_ms = 0;
    for (double v : gpu_us) per_stream_ms = v / 1000.0 > per_stream_ms ? v / 1000.0 : per_stream_ms;
    printf("RESULT {\"program\": \"cpp-threads-streams\", \"threads\": %d, \"kernels_per_thread\": %d, "
           "\"blocks\": %d, \"threads_per_block\": 128, \"kernel_us\": [%d, %d], "
           "\"designed_gpu_ms_per_stream\": %.1f, \"wall_ms\": %.2f, \"check\": %.4f}\n",
           a.threads, a.kernels, blocks, a.base_us, a.base_us + 4 * a.step_us, per_stream_ms,
           wall_ms, check);
    return 0;
}
