// cpp-pageable: uploads and downloads through pageable (malloc'd) host memory.
//
// What it does: 100 steps on one created stream, each
//   cudaMemcpyAsync H2D of a 64 MiB input from a malloc'd (pageable) host buffer
//   `consume`: a kernel that reads the whole input (grid-stride sum) and then runs a
//     compute loop, ~1.5 ms in all, writing a 16 MiB result
//   cudaMemcpyAsync D2H of the 16 MiB result into another malloc'd (pageable) buffer
//   cudaStreamSynchronize
// NVTX (nvtx3): one range `step N` per step (nvtxRangePushA with the number).
//
// What is wrong with it (deliberately): both host buffers are pageable. A copy from or to
// pageable memory cannot be done by the copy engine directly: the driver stages it
// through a pinned bounce buffer, chunk by chunk, and the "Async" call blocks the host
// until the data has been staged (H2D) or has arrived (D2H). The copies run at a fraction
// of the pinned bandwidth, cannot overlap anything, and the host cannot run ahead: the
// step is dominated by the two copies (~64+16 MiB at a few to ~15 GB/s, several ms)
// against a 1.5 ms kernel. The fix: allocate the host buffers pinned (cudaMallocHost /
// cudaHostAlloc, or cudaHostRegister the existing ones), then overlap with a second
// stream (cpp-pinned is that version).
//
// Designed numbers: 100 steps; H2D 64 MiB + D2H 16 MiB pageable, kernel 1.5 ms; the
// copies take ~70-90% of a step (they depend on the host's pageable bandwidth).

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

// Reads all of `in` (grid-stride), then a compute loop until `ns` have passed since the
// block began; writes `out` (grid-stride).
__global__ void consume(const float* in, size_t n_in, float* out, size_t n_out,
                        unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float acc = 0.f;
    for (size_t i = tid; i < n_in; i += stride) acc += in[i];
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) acc = fmaf(acc, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    for (size_t i = tid; i < n_out; i += stride) out[i] = acc + (float)(i & 15);
}

int main(int argc, char** argv) {
    int steps = 100, in_mib = 64, out_mib = 16, kernel_us = 1500;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--in-mib") && i + 1 < argc) in_mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out-mib") && i + 1 < argc) out_mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc) kernel_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--steps N] [--in-mib M] [--out-mib M] [--kernel-us US]\n",
                    argv[0]);
            return 2;
        }
    }
    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t in_bytes = (size_t)in_mib << 20, out_bytes = (size_t)out_mib << 20;
    const size_t n_in = in_bytes / sizeof(float), n_out = out_bytes / sizeof(float);

    // Pageable host memory (plain malloc), touched once so no page faults in the loop.
    float* h_in = (float*)malloc(in_bytes);
    float* h_out = (float*)malloc(out_bytes);
    if (!h_in || !h_out) {
        fprintf(stderr, "malloc failed\n");
        return 1;
    }
    for (size_t i = 0; i < n_in; ++i) h_in[i] = 1e-6f * (float)(i & 1023);
    memset(h_out, 0, out_bytes);

    float *d_in, *d_out;
    CHECK(cudaMalloc(&d_in, in_bytes));
    CHECK(cudaMalloc(&d_out, out_bytes));
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));

    char label[32];
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
        snprintf(label, sizeof label, "step %d", s);
        nvtxRangePushA(label);
        CHECK(cudaMemcpyAsync(d_in, h_in, in_bytes, cudaMemcpyHostToDevice, stream));
        consume<<<2 * sms, 256, 0, stream>>>(d_in, n_in, d_out, n_out, 1000ull * kernel_us);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(h_out, d_out, out_bytes, cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        nvtxRangePop();
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const float check = h_out[1];
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_in));
    free(h_out);
    free(h_in);
    printf("RESULT {\"program\": \"cpp-pageable\", \"steps\": %d, \"in_mib\": %d, \"out_mib\": %d, "
           "\"kernel_us\": %d, \"host_memory\": \"pageable\", \"wall_ms\": %.2f, "
           "\"ms_per_step\": %.3f, \"copy_gb_s_est\": %.2f, \"check\": %.4f}\n",
           steps, in_mib, out_mib, kernel_us, wall_ms, wall_ms / steps,
           (double)(in_bytes + out_bytes) * steps / 1e9 /
               ((wall_ms - steps * kernel_us / 1000.0) / 1000.0),
           check);
    return 0;
}
