// cpp-p2p-2gpu: a two-stage pipeline over two GPUs in one process, without micro-batches.
//
// What it does: stage 1 of a model lives on GPU 0, stage 2 on GPU 1. Each of 100
// iterations:
//   GPU 0 (stream s0): wait for GPU 1's previous iteration (cudaStreamWaitEvent on an
//     event recorded on GPU 1's stream: the dependency a backward pass would bring),
//     run `stage1` (~1 ms compute loop, writing a 32 MiB activation), copy the
//     activation to GPU 1 (cudaMemcpyPeerAsync), record event e0
//   GPU 1 (stream s1): wait for e0 (cudaStreamWaitEvent), run `stage2` (~1 ms, reading
//     the activation), record event e1
// All of it is issued ahead by the host (no host synchronisation inside the loop, one
// per device at the end), so both GPUs always have queued work, and peer access is
// enabled both ways where cudaDeviceCanAccessPeer allows it (NVLink on an H100 pair).
// NVTX (nvtx3): one range `iter N` per iteration around the host's enqueueing.
//
// What is wrong with it (deliberately): with one batch in flight the two stages can only
// take turns: while GPU 1 runs stage 2, GPU 0's next stage 1 waits for it, and while
// GPU 0 runs stage 1 (and the copy), GPU 1's stage 2 waits for it. Each GPU is idle
// about half the time with work queued, blocked by the other GPU: a cross-device wait.
// The fix is pipelining with micro-batches (split the batch so stage 1 of micro-batch
// k+1 runs while stage 2 of micro-batch k does), as pipeline-parallel schedules do.
//
// Designed numbers: per iteration 1 ms stage 1 + the 32 MiB peer copy (~0.1 ms over
// NVLink) + 1 ms stage 2: GPU 0 idle ~1 ms of ~2.1 ms (~48%), GPU 1 idle ~1.1 ms
// (~52%), all of it waiting for the other GPU.

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// Stage 1: a compute loop until `ns` have passed since the block began, then writes the
// activation (grid-stride).
__global__ void stage1(float* act, size_t n, int iter, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float x = 1e-3f * (float)(iter & 31);
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    for (size_t i = tid; i < n; i += stride) act[i] = x + (float)(i & 7);
}

// Stage 2: reads the activation (grid-stride sum), then a compute loop until `ns` have
// passed since the block began; one partial result per block.
__global__ void stage2(const float* act, size_t n, float* out, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float x = 0.f;
    for (size_t i = tid; i < n; i += stride) x += act[i];
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    if (threadIdx.x == 0) out[blockIdx.x] = x;
}

int main(int argc, char** argv) {
    int iters = 100, mib = 32, stage_us = 1000;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stage-us") && i + 1 < argc) stage_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--iters N] [--mib M] [--stage-us US]\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev));
    if (ndev < 2) {
        fprintf(stderr, "needs 2 GPUs, found %d\n", ndev);
        return 1;
    }
    const size_t bytes = (size_t)mib << 20, n = bytes / sizeof(float);
    int sms[2], peer01 = 0, peer10 = 0;
    float* act[2];
    float* out1;
    cudaStream_t st[2];
    for (int d = 0; d < 2; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaDeviceGetAttribute(&sms[d], cudaDevAttrMultiProcessorCount, d));
        CHECK(cudaMalloc(&act[d], bytes));
        CHECK(cudaMemset(act[d], 0, bytes));
        CHECK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
    }
    CHECK(cudaMalloc(&out1, 2 * sms[1] * sizeof(float)));    // on device 1 (current)
    CHECK(cudaDeviceCanAccessPeer(&peer01, 0, 1));
    CHECK(cudaDeviceCanAccessPeer(&peer10, 1, 0));
    if (peer01) {
        CHECK(cudaSetDevice(0));
        CHECK(cudaDeviceEnablePeerAccess(1, 0));
    }
    if (peer10) {
        CHECK(cudaSetDevice(1));
        CHECK(cudaDeviceEnablePeerAccess(0, 0));
    }
    cudaEvent_t e0, e1;                  // e0 on device 0 (s0), e1 on device 1 (s1)
    CHECK(cudaSetDevice(0));
    CHECK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming));
    CHECK(cudaSetDevice(1));
    CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    for (int d = 0; d < 2; ++d) {        // all set-up done before the loop
        CHECK(cudaSetDevice(d));
        CHECK(cudaDeviceSynchronize());
    }

    char label[32];
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
        snprintf(label, sizeof label, "iter %d", it);
        nvtxRangePushA(label);
        CHECK(cudaSetDevice(0));
        if (it > 0) CHECK(cudaStreamWaitEvent(st[0], e1, 0));   // GPU 1's previous iteration
        stage1<<<2 * sms[0], 256, 0, st[0]>>>(act[0], n, it, 1000ull * stage_us);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyPeerAsync(act[1], 1, act[0], 0, bytes, st[0]));
        CHECK(cudaEventRecord(e0, st[0]));
        CHECK(cudaSetDevice(1));
        CHECK(cudaStreamWaitEvent(st[1], e0, 0));               // this iteration's activation
        stage2<<<2 * sms[1], 256, 0, st[1]>>>(act[1], n, out1, 1000ull * stage_us);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(e1, st[1]));
        nvtxRangePop();
    }
    for (int d = 0; d < 2; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaStreamSynchronize(st[d]));
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    float check = 0;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMemcpy(&check, out1, sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaEventDestroy(e1));
    CHECK(cudaFree(out1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaEventDestroy(e0));
    for (int d = 0; d < 2; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaStreamDestroy(st[d]));
        CHECK(cudaFree(act[d]));
    }
    printf("RESULT {\"program\": \"cpp-p2p-2gpu\", \"iters\": %d, \"mib\": %d, \"stage_us\": %d, "
           "\"peer_access\": [%d, %d], \"wall_ms\": %.2f, \"ms_per_iter\": %.3f, "
           "\"designed_idle_pct_per_gpu\": 50, \"check\": %.4f}\n",
           iters, mib, stage_us, peer01, peer10, wall_ms, wall_ms / iters, check);
    return 0;
}
