// cpp-event-sync: a loop that waits for every kernel with an event before its host work.
//
// What it does: 300 iterations of
//   launch a ~150 us compute-loop kernel on a stream
//   cudaEventRecord + cudaEventSynchronize (wait for that kernel)
//   ~100 us of host CPU work: a small computation over a host array (a norm of 4096
//   floats, repeated until 100 us have passed on the steady clock), whose value is
//   checked (finite) before the next iteration
// NVTX (nvtx3): one push/pop range named `iter` per iteration (the same name each time).
//
// What is wrong with it (deliberately): the host synchronises with the GPU every
// iteration, so the queue drains and the host work, which does not depend on the kernel,
// runs while the GPU has nothing to do. The synchronisation serialises host and GPU:
// GPU idle ~100 us of host work + the launch and wake-up latencies (~10-20 us) out of
// ~265 us per iteration, ~40% of the steady state (design 35-45%). The fix: do not
// wait for the kernel before work that does not need it (record the event, do the host
// work, then cudaEventSynchronize only where the result is needed, or poll with
// cudaEventQuery), so the host work overlaps the kernel.
//
// Designed numbers: kernel 150 us, host work 100 us, 300 iterations (~80 ms in all).

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// A compute loop: chains of FMAs until `ns` nanoseconds have passed since the block began.
__device__ float burn(float x, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    return x;
}

__global__ void solver_step(float* state, unsigned long long ns) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x = burn(state[tid] + 1e-6f, ns);
    state[tid] = x;
}

// ~`us` microseconds of host work: sums of squares over the host array, repeated until
// the time has passed; returns the last norm (checked by the caller).
static double host_work(std::vector<float>& h, int us, int iter) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto until = t0 + std::chrono::microseconds(us);
    double norm = 0;
    int rounds = 0;
    do {
        double acc = 0;
        for (size_t j = 0; j < h.size(); ++j) {
            h[j] = h[j] * 0.5f + 0.25f * (float)((j + iter + rounds) & 7);
            acc += (double)h[j] * h[j];
        }
        norm = std::sqrt(acc);
        ++rounds;
    } while (std::chrono::steady_clock::now() < until);
    return norm;
}

int main(int argc, char** argv) {
    int iters = 300, kernel_us = 150, host_us = 100;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc) kernel_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--host-us") && i + 1 < argc) host_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--iters N] [--kernel-us US] [--host-us US]\n", argv[0]);
            return 2;
        }
    }
    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = 2 * sms, threads = 256;

    float* state;
    CHECK(cudaMalloc(&state, (size_t)blocks * threads * sizeof(float)));
    CHECK(cudaMemset(state, 0, (size_t)blocks * threads * sizeof(float)));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreate(&done));
    std::vector<float> h(4096, 1.0f);

    int bad = 0;
    double norm = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
        nvtxRangePushA("iter");
        solver_step<<<blocks, threads, 0, stream>>>(state, 1000ull * kernel_us);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(done, stream));
        CHECK(cudaEventSynchronize(done));     // the queue drains here, every iteration
        norm = host_work(h, host_us, it);      // ...so this runs while the GPU is idle
        if (!std::isfinite(norm)) ++bad;
        nvtxRangePop();
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaEventDestroy(done));
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(state));
    printf("RESULT {\"program\": \"cpp-event-sync\", \"iters\": %d, \"kernel_us\": %d, "
           "\"host_us\": %d, \"blocks\": %d, \"wall_ms\": %.2f, \"us_per_iter\": %.1f, "
           "\"designed_idle_pct\": %.1f, \"norm\": %.4f, \"bad\": %d}\n",
           iters, kernel_us, host_us, blocks, wall_ms, wall_ms * 1000.0 / iters,
           100.0 * host_us / (host_us + kernel_us), norm, bad);
    return 0;
}
