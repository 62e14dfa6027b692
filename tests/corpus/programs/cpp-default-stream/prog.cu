// cpp-default-stream: two streams that should overlap, serialised by the legacy default
// stream.
//
// What it does: two streams made with plain cudaStreamCreate (blocking streams: they
// synchronise with the legacy NULL stream), then 200 iterations, each inside one NVTX
// push/pop range named `iteration` (nvtx3, the same name every time):
//   work_a        <<<8, 256, 0, s1>>>   ~150 us: each block runs a dependent-FMA chain
//                                       for --kernel-us us (GPU global timer)
//   mark_progress <<<1, 32>>>           ~2 us, no stream argument: the legacy default
//                                       stream (stream 0); bumps a progress counter
//   work_b        <<<8, 256, 0, s2>>>   ~150 us, same shape as work_a, independent of it
//   mark_progress <<<1, 32>>>           ~2 us, legacy default stream again
// The host never synchronises in the loop (one cudaDeviceSynchronize after it). Built
// with plain nvcc (no --default-stream per-thread), so `<<<1, 32>>>` means the legacy
// stream. work_a and work_b use 8 blocks of 256 threads each (8 of 132 SMs): two of them
// (or more) fit on the GPU side by side.
//
// What is wrong with it (deliberately): a kernel on the legacy default stream waits for
// all earlier work in every blocking stream and holds all later work in them. The first
// marker makes work_b (s2) wait for work_a (s1) of the same iteration; the second marker
// makes the next iteration's work_a wait for this iteration's work_b. (With only the
// first marker, work_b of iteration i would overlap work_a of iteration i+1, so the
// second marker is what makes the serialisation complete.) work_a and work_b never
// overlap although they are independent and small: the GPU is always busy with one
// kernel, and the two streams' kernels run one after the other: serialized streams.
// The host is far ahead (4 launches, ~20-40 us of host time, per ~310 us of GPU work),
// so nothing else is wrong: no sync, no allocation, no copies in the loop.
//
// Designed numbers (defaults in program.toml): 200 iterations; per iteration
// work_a 150 + marker ~2-5 + work_b 150 + marker ~2-5 us, plus the cross-stream
// dependency latencies (a few us each): ~305-320 us per iteration, ~63 ms in all, GPU
// busy ~97-100% of the steady state. Had work_a and work_b overlapped (markers off the
// legacy stream, or non-blocking streams), an iteration would take ~155-160 us: overlap
// would save ~150 of ~310 us, ~48% of the steady state (design range 40-52%, for the
// markers' and dependency latencies' share); the serialized-streams cause should take
// that share. 800 kernels in the loop + 3 warm-up.
// Must be silent: sync-wait, allocation, pageable-copy, module-load, compilation,
// launch-bound, host-work (the GPU is busy; the host is ahead). small-grid is NOT
// designed away: each work kernel uses 8 blocks on 132 SMs by construction (the reason
// two of them could share the GPU), so a small-grid finding is true, not a false one.
// The fix: create the streams with cudaStreamNonBlocking, put the markers on a stream of
// their own (or use cudaStreamPerThread / --default-stream per-thread), so the legacy
// stream's implicit synchronisation does not chain s1 and s2.

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

// A dependent-FMA chain, checked against the global timer every 64 FMAs, until `ns`
// nanoseconds have passed since this block began.
__device__ float burn(float x, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    return x;
}

__global__ void work_a(float* state, unsigned long long ns) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    state[tid] = burn(state[tid] + 1e-6f, ns);
}

__global__ void work_b(float* state, unsigned long long ns) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    state[tid] = burn(state[tid] + 2e-6f, ns);
}

// The tiny marker: a short chain, then thread 0 bumps the progress counter.
__global__ void mark_progress(unsigned int* counter, unsigned long long ns) {
    const float v = burn(1.0f + threadIdx.x * 1e-7f, ns);
    if (threadIdx.x == 0 && v > 0.0f) atomicAdd(counter, 1u);
}

int main(int argc, char** argv) {
    int iters = 200, kernel_us = 150, marker_us = 2, blocks = 8;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc) kernel_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--marker-us") && i + 1 < argc) marker_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--iters N] [--kernel-us US] [--marker-us US] [--blocks N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (iters < 1 || kernel_us < 1 || marker_us < 0 || blocks < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    const int threads = 256;
    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

    float *state_a, *state_b;
    unsigned int* counter;
    const size_t bytes = (size_t)blocks * threads * sizeof(float);
    CHECK(cudaMalloc(&state_a, bytes));
    CHECK(cudaMalloc(&state_b, bytes));
    CHECK(cudaMalloc(&counter, sizeof(unsigned int)));
    CHECK(cudaMemset(state_a, 0, bytes));
    CHECK(cudaMemset(state_b, 0, bytes));
    CHECK(cudaMemset(counter, 0, sizeof(unsigned int)));

    // Plain cudaStreamCreate: blocking streams, which synchronise with the legacy stream.
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreate(&s2));

    // Warm-up: load the module (each kernel once), before the loop.
    work_a<<<blocks, threads, 0, s1>>>(state_a, 1000ull);
    CHECK(cudaGetLastError());
    work_b<<<blocks, threads, 0, s2>>>(state_b, 1000ull);
    CHECK(cudaGetLastError());
    mark_progress<<<1, 32>>>(counter, 1000ull);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    const unsigned long long kernel_ns = 1000ull * kernel_us;
    const unsigned long long marker_ns = 1000ull * marker_us;
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
        nvtxRangePushA("iteration");
        work_a<<<blocks, threads, 0, s1>>>(state_a, kernel_ns);
        CHECK(cudaGetLastError());
        mark_progress<<<1, 32>>>(counter, marker_ns);   // legacy default stream: waits for
        CHECK(cudaGetLastError());                       // work_a, holds work_b
        work_b<<<blocks, threads, 0, s2>>>(state_b, kernel_ns);
        CHECK(cudaGetLastError());
        mark_progress<<<1, 32>>>(counter, marker_ns);   // waits for work_b, holds the next
        CHECK(cudaGetLastError());                       // iteration's work_a
        nvtxRangePop();
    }
    const double launch_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CHECK(cudaDeviceSynchronize());   // once, after the loop
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    unsigned int marks = 0;
    std::vector<float> ha((size_t)blocks * threads), hb((size_t)blocks * threads);
    CHECK(cudaMemcpy(&marks, counter, sizeof(unsigned int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ha.data(), state_a, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hb.data(), state_b, bytes, cudaMemcpyDeviceToHost));
    double checksum = 0;
    for (size_t i = 0; i < ha.size(); ++i) checksum += (double)ha[i] + (double)hb[i];
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    CHECK(cudaFree(state_a));
    CHECK(cudaFree(state_b));
    CHECK(cudaFree(counter));

    const unsigned int want_marks = 1u + 2u * (unsigned int)iters;   // warm-up + 2 per iter
    const int ok = marks == want_marks && std::isfinite(checksum);
    const double serial_us = 2.0 * kernel_us + 2.0 * marker_us;
    const double overlapped_us = kernel_us + 2.0 * marker_us;
    printf("RESULT {\"program\": \"cpp-default-stream\", \"iters\": %d, \"blocks\": %d, "
           "\"threads\": %d, \"sms\": %d, \"kernel_us\": %d, \"marker_us\": %d, "
           "\"launch_ms\": %.2f, \"wall_ms\": %.2f, \"us_per_iter\": %.1f, "
           "\"designed_serial_us_per_iter\": %.1f, \"designed_overlap_saving_pct\": %.1f, "
           "\"marks\": %u, \"checksum\": %.4f, \"ok\": %s}\n",
           iters, blocks, threads, sms, kernel_us, marker_us, launch_ms, wall_ms,
           wall_ms * 1000.0 / iters, serial_us, 100.0 * (serial_us - overlapped_us) / serial_us,
           marks, checksum, ok ? "true" : "false");
    return ok ? 0 : 1;
}
