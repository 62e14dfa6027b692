// cpp-pinned: the fixed cpp-pageable: pinned buffers, a copy stream, double buffering.
//
// What it does: the same 100 steps of work as cpp-pageable (a 64 MiB input uploaded, a
// kernel `consume` that reads it and runs a compute loop, a 16 MiB result downloaded),
// but the host buffers are pinned (cudaMallocHost) and the work is pipelined on two
// streams:
//   copy stream:    the H2D of step i+1 (into the other device input buffer) and the
//                   D2H of step i's result (from step i's output buffer)
//   compute stream: the kernel of step i
// ordered with events: the kernel of step i waits for `ready[i % 2]` (its upload done),
// the upload of step i+1 waits for `freed[(i+1) % 2]` (the kernel of step i-1, which
// last read that buffer, done), the download of step i waits for `freed[i % 2]` (the
// kernel of step i). On the copy stream the order is: upload i+1, download i, upload
// i+2, ...: while kernel i runs, the copy stream downloads step i-1's result and
// uploads step i+1's input (and the upload of step i+2 comes after the download of
// step i, so a kernel never overwrites an output buffer still being downloaded).
// The kernel runs 4 ms, longer than a step's copies (80 MiB at pinned PCIe bandwidth:
// ~1.6-3.5 ms), so the compute stream never waits for data after the first step.
// No host synchronisation in the loop; one at the end.
// NVTX (nvtx3): a domain `pipeline`, one range `step N` per step (nvtxDomainRangePushEx),
// pushed around the host's enqueueing of the step.
//
// What is right with it: nothing is wrong. The kernels run back to back and the copies
// hide under them: GPU busy (kernels and copies) ~100% of the steady state, a healthy
// control: no finding above info.
//
// Designed numbers: 100 steps x 4 ms kernel = ~0.4 s; per step H2D 64 MiB + D2H 16 MiB.

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

static void push_step(nvtxDomainHandle_t dom, int s) {
    char label[32];
    snprintf(label, sizeof label, "step %d", s);
    nvtxEventAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = 0xFF2E8B57;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = label;      // copied by the tool at the call
    nvtxDomainRangePushEx(dom, &attr);
}

int main(int argc, char** argv) {
    int steps = 100, in_mib = 64, out_mib = 16, kernel_us = 4000;
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

    // Pinned host buffers, two of each (double buffering), filled once.
    float *h_in[2], *h_out[2], *d_in[2], *d_out[2];
    for (int b = 0; b < 2; ++b) {
        CHECK(cudaMallocHost(&h_in[b], in_bytes));
        CHECK(cudaMallocHost(&h_out[b], out_bytes));
        for (size_t i = 0; i < n_in; ++i) h_in[b][i] = 1e-6f * (float)((i + b) & 1023);
        memset(h_out[b], 0, out_bytes);
        CHECK(cudaMalloc(&d_in[b], in_bytes));
        CHECK(cudaMalloc(&d_out[b], out_bytes));
    }
    cudaStream_t copy, compute;
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    cudaEvent_t ready[2], freed[2];
    for (int b = 0; b < 2; ++b) {
        CHECK(cudaEventCreateWithFlags(&ready[b], cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&freed[b], cudaEventDisableTiming));
    }

    nvtxDomainHandle_t dom = nvtxDomainCreateA("pipeline");
    const auto t0 = std::chrono::steady_clock::now();
    // Prologue: the first upload.
    CHECK(cudaMemcpyAsync(d_in[0], h_in[0], in_bytes, cudaMemcpyHostToDevice, copy));
    CHECK(cudaEventRecord(ready[0], copy));
    for (int s = 0; s < steps; ++s) {
        const int b = s % 2, nb = (s + 1) % 2;
        push_step(dom, s);
        // Compute step s once its input is there.
        CHECK(cudaStreamWaitEvent(compute, ready[b], 0));
        consume<<<2 * sms, 256, 0, compute>>>(d_in[b], n_in, d_out[b], n_out,
                                              1000ull * kernel_us);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(freed[b], compute));   // d_in[b] read, d_out[b] written
        // Upload step s+1 into the other buffer once step s-1's kernel has released it.
        if (s + 1 < steps) {
            CHECK(cudaStreamWaitEvent(copy, freed[nb], 0));
            CHECK(cudaMemcpyAsync(d_in[nb], h_in[nb], in_bytes, cudaMemcpyHostToDevice, copy));
            CHECK(cudaEventRecord(ready[nb], copy));
        }
        // Download step s's result once its kernel is done (overlaps kernel s+1).
        CHECK(cudaStreamWaitEvent(copy, freed[b], 0));
        CHECK(cudaMemcpyAsync(h_out[b], d_out[b], out_bytes, cudaMemcpyDeviceToHost, copy));
        nvtxDomainRangePop(dom);
    }
    CHECK(cudaStreamSynchronize(copy));
    CHECK(cudaStreamSynchronize(compute));
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const float check = h_out[(steps - 1) % 2][1];

    for (int b = 0; b < 2; ++b) {
        CHECK(cudaEventDestroy(ready[b]));
        CHECK(cudaEventDestroy(freed[b]));
        CHECK(cudaFreeHost(h_in[b]));
        CHECK(cudaFreeHost(h_out[b]));
        CHECK(cudaFree(d_in[b]));
        CHECK(cudaFree(d_out[b]));
    }
    CHECK(cudaStreamDestroy(copy));
    CHECK(cudaStreamDestroy(compute));
    nvtxDomainDestroy(dom);
    printf("RESULT {\"program\": \"cpp-pinned\", \"steps\": %d, \"in_mib\": %d, \"out_mib\": %d, "
           "\"kernel_us\": %d, \"host_memory\": \"pinned\", \"streams\": 2, \"wall_ms\": %.2f, "
           "\"ms_per_step\": %.3f, \"check\": %.4f}\n",
           steps, in_mib, out_mib, kernel_us, wall_ms, wall_ms / steps, check);
    return 0;
}
