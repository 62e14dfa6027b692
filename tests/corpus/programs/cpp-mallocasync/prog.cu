// cpp-mallocasync: the fixed cpp-malloc-loop: stream-ordered allocation from a pool.
//
// What it does: the same 200 iterations of work as cpp-malloc-loop (a 256 MiB scratch
// buffer, a ~300 us kernel `scratch_pass` that writes it and computes), but the buffer
// comes from cudaMallocAsync and goes back with cudaFreeAsync, both on one created
// stream, and the device's default memory pool keeps what is freed
// (cudaMemPoolAttrReleaseThreshold raised to UINT64_MAX), so after the first iteration
// every allocation is served from the pool without touching the driver's mappings.
// No host synchronisation in the loop; one cudaStreamSynchronize at the end.
// NVTX (nvtx3): one start/end range `iter N` per iteration (nvtxRangeStartA /
// nvtxRangeEnd), around the host's enqueueing (the host runs ahead of the GPU).
//
// What is right with it: nothing is wrong. The kernels run back to back on the stream,
// the allocation calls take microseconds on the host and never hold the GPU: GPU busy
// ~100% of the steady state, a healthy control, the allocation cause silent.
//
// Designed numbers: 200 x 300 us = ~60 ms of kernels.

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdint>
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

// Writes all of `buf` (grid-stride), then a compute loop until `ns` have passed since
// the block began.
__global__ void scratch_pass(float* buf, size_t n, unsigned long long ns, float* sink) {
    const unsigned long long t0 = global_ns();
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = tid; i < n; i += stride) buf[i] = (float)(i & 255);
    float x = (float)tid;
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    if (x == -1.0f) *sink = x;       // never true: keeps the loop's result alive
}

int main(int argc, char** argv) {
    int iters = 200, mib = 256, kernel_us = 300;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc) kernel_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--iters N] [--mib M] [--kernel-us US]\n", argv[0]);
            return 2;
        }
    }
    int sms = 0, pools = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
    if (!pools) {
        fprintf(stderr, "device 0 does not support memory pools\n");
        return 1;
    }
    const size_t bytes = (size_t)mib << 20, n = bytes / sizeof(float);

    // The default pool keeps freed memory instead of releasing it at each sync point.
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t threshold = UINT64_MAX;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float* sink;
    CHECK(cudaMallocAsync(&sink, sizeof(float), stream));

    char label[32];
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
        snprintf(label, sizeof label, "iter %d", it);
        const nvtxRangeId_t id = nvtxRangeStartA(label);
        float* buf;
        CHECK(cudaMallocAsync(&buf, bytes, stream));          // from the pool
        scratch_pass<<<2 * sms, 256, 0, stream>>>(buf, n, 1000ull * kernel_us, sink);
        CHECK(cudaGetLastError());
        CHECK(cudaFreeAsync(buf, stream));                    // back to the pool, no sync
        nvtxRangeEnd(id);
    }
    CHECK(cudaFreeAsync(sink, stream));
    CHECK(cudaStreamSynchronize(stream));                     // once, at the end
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    uint64_t reserved = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    CHECK(cudaStreamDestroy(stream));
    printf("RESULT {\"program\": \"cpp-mallocasync\", \"iters\": %d, \"mib\": %d, "
           "\"kernel_us\": %d, \"allocator\": \"cudaMallocAsync\", \"wall_ms\": %.2f, "
           "\"us_per_iter\": %.1f, \"pool_reserved_mib\": %.1f}\n",
           iters, mib, kernel_us, wall_ms, wall_ms * 1000.0 / iters,
           (double)reserved / (1 << 20));
    return 0;
}
