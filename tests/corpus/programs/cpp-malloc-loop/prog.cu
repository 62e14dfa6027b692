// cpp-malloc-loop: a 256 MiB cudaMalloc / cudaFree around every kernel.
//
// What it does: 200 iterations, each
//   cudaMalloc 256 MiB
//   `scratch_pass`: a kernel that writes the whole buffer (grid-stride) and then runs a
//     compute loop, ~300 us in all
//   cudaFree (which waits for the device to finish before it frees: an implicit
//     synchronisation)
// NVTX (nvtx3): one range `iter N` per iteration (nvtxRangePushEx, with a colour).
//
// What is wrong with it (deliberately): device memory is allocated and freed in the
// loop. cudaMalloc of 256 MiB maps fresh physical memory every time, and cudaFree waits
// for the GPU and unmaps it again, so the GPU idles during each cudaMalloc, during the
// unmapping part of each cudaFree and the relaunch after it: allocation calls, not GPU
// work, set the pace. The fix: allocate once before the loop and reuse the buffer, or
// use the stream-ordered allocator (cudaMallocAsync/cudaFreeAsync from a pool that
// keeps its memory; cpp-mallocasync is that version).
//
// Designed numbers: kernel 300 us; cudaMalloc + the freeing part of cudaFree of 256 MiB
// ~0.2-1 ms together (driver-dependent): GPU idle ~40-80% of each iteration.

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
    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t bytes = (size_t)mib << 20, n = bytes / sizeof(float);
    float* sink;
    CHECK(cudaMalloc(&sink, sizeof(float)));

    nvtxEventAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = 0xFFB22222;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    char label[32];

    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
        snprintf(label, sizeof label, "iter %d", it);
        attr.message.ascii = label;
        nvtxRangePushEx(&attr);
        float* buf;
        CHECK(cudaMalloc(&buf, bytes));                        // every iteration
        scratch_pass<<<2 * sms, 256>>>(buf, n, 1000ull * kernel_us, sink);
        CHECK(cudaGetLastError());
        CHECK(cudaFree(buf));                                  // waits for the kernel
        nvtxRangePop();
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(sink));
    printf("RESULT {\"program\": \"cpp-malloc-loop\", \"iters\": %d, \"mib\": %d, "
           "\"kernel_us\": %d, \"alloc_in_loop\": true, \"wall_ms\": %.2f, "
           "\"us_per_iter\": %.1f}\n",
           iters, mib, kernel_us, wall_ms, wall_ms * 1000.0 / iters);
    return 0;
}
