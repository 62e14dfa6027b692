// cpp-graph-replay: a 30-kernel sequence captured once in a CUDA graph, replayed 300 times.
//
// What it does: captures 30 small-to-medium kernels (compute loops of 20..40 us each,
// alternating two kernels `layer_mix` and `layer_norm`, 2 x SMs blocks of 256 threads)
// on a stream into a CUDA graph (cudaStreamBeginCapture / cudaStreamEndCapture /
// cudaGraphInstantiate), then launches the graph 300 times back to back with
// cudaGraphLaunch and synchronises once, with cudaStreamSynchronize, at the end.
// No NVTX at all: the iterations are the graph launches.
//
// What is right with it: nothing is wrong. One launch call per ~900 us of GPU work, the
// host far ahead of the GPU, no synchronisation in the loop: the GPU is busy > 90% (by
// design ~97-100%: only the gaps between graph nodes and between replays are idle).
// A healthy control: 300 graph executions, no finding above info.
//
// Designed numbers: kernel i runs 20 + (13 * i) % 21 us (20..40 us, 30 us mean, 900 us
// per replay), 300 replays = ~270 ms of GPU work.

#include <cuda_runtime.h>

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

// A compute loop: chains of FMAs until `ns` nanoseconds have passed since the block began.
__device__ float burn(float x, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    return x;
}

__global__ void layer_mix(float* act, unsigned long long ns) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    act[tid] = burn(act[tid] + 0.5f, ns);
}

__global__ void layer_norm(float* act, unsigned long long ns) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    act[tid] = burn(act[tid] * 0.5f, ns) - 0.25f;
}

int main(int argc, char** argv) {
    int nodes = 30, replays = 300;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--nodes") && i + 1 < argc) nodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--replays") && i + 1 < argc) replays = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--nodes N] [--replays N]\n", argv[0]);
            return 2;
        }
    }
    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = 2 * sms, threads = 256;

    float* act;
    CHECK(cudaMalloc(&act, (size_t)blocks * threads * sizeof(float)));
    CHECK(cudaMemset(act, 0, (size_t)blocks * threads * sizeof(float)));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // Capture the sequence once.
    double replay_us = 0;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < nodes; ++i) {
        const int us = 20 + (13 * i) % 21;
        replay_us += us;
        if (i % 2 == 0)
            layer_mix<<<blocks, threads, 0, stream>>>(act, 1000ull * us);
        else
            layer_norm<<<blocks, threads, 0, stream>>>(act, 1000ull * us);
        CHECK(cudaGetLastError());
    }
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    // Replay it back to back; one synchronisation at the end.
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < replays; ++r) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    float check = 0;
    CHECK(cudaMemcpy(&check, act, sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(act));
    printf("RESULT {\"program\": \"cpp-graph-replay\", \"nodes\": %d, \"replays\": %d, "
           "\"blocks\": %d, \"designed_us_per_replay\": %.0f, \"wall_ms\": %.2f, "
           "\"us_per_replay\": %.1f, \"check\": %.4f}\n",
           nodes, replays, blocks, replay_us, wall_ms, wall_ms * 1000.0 / replays, check);
    return 0;
}
