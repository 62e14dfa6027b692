// cpp-server-cv: a request loop whose GPU thread waits on a condition variable.
//
// What it does: a producer std::thread plays the clients: every 5 ms
// (std::this_thread::sleep_for) it pushes a request id into a std::queue guarded by a
// std::mutex and signals a std::condition_variable. The main thread serves: it waits on
// the condition variable (pthread_cond_wait underneath) until a request is queued, pops
// it, runs ~1 ms of GPU work for it (4 kernels of ~250 us on a stream) and
// cudaStreamSynchronize's before taking the next. 200 requests, then the producer stops.
// CUDA is initialised and the kernel loaded (one short launch) before the producer starts.
// NVTX (nvtx3): one range `request` (the same name each time) per handled request, from
// the pop to the end of the sync (the wait for the next request lies between ranges).
//
// What it shows: the GPU is idle ~80% of the time, and all of that is the serving thread
// blocked on the condition variable, waiting for the next request: the program is bound
// by its request rate (the other thread), not by CPU work, data loading or the GPU. The
// finding should name the wait (a thread-wait, on the condition variable), not host
// work or input; the fix is about the arrival rate (batch requests, or serve them from
// more clients / a deeper queue), not the GPU code.
//
// Designed numbers: period 5 ms (+ the sleep's overshoot, ~50-100 us), GPU work 1 ms per
// request: the thread waits ~3.9-4 ms of every ~5.07 ms, ~77-80% of the steady state.

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <queue>
#include <thread>

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

// One stage of serving a request: a compute loop until `ns` have passed since the block
// began, reading and updating the request's state.
__global__ void serve_stage(float* state, int request, unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x = state[tid] + 1e-3f * (float)(request & 15);
    do {
#pragma unroll 16
        for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 0.001f);
    } while (global_ns() - t0 < ns);
    state[tid] = x;
}

struct Requests {
    std::mutex m;
    std::condition_variable cv;
    std::queue<int> q;
    bool closed = false;
};

static void producer(Requests* r, int count, int period_us) {
    for (int i = 0; i < count; ++i) {
        std::this_thread::sleep_for(std::chrono::microseconds(period_us));
        {
            std::lock_guard<std::mutex> lk(r->m);
            r->q.push(i);
        }
        r->cv.notify_one();
    }
    {
        std::lock_guard<std::mutex> lk(r->m);
        r->closed = true;
    }
    r->cv.notify_one();
}

int main(int argc, char** argv) {
    int requests = 200, period_us = 5000, stages = 4, stage_us = 250;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--requests") && i + 1 < argc) requests = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--period-us") && i + 1 < argc) period_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stages") && i + 1 < argc) stages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stage-us") && i + 1 < argc) stage_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--requests N] [--period-us US] [--stages N] [--stage-us US]\n",
                    argv[0]);
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
    serve_stage<<<blocks, threads, 0, stream>>>(state, 0, 1000ull);   // load the module
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(stream));

    Requests reqs;
    std::thread clients(producer, &reqs, requests, period_us);
    int served = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        int id;
        {
            std::unique_lock<std::mutex> lk(reqs.m);
            reqs.cv.wait(lk, [&] { return !reqs.q.empty() || reqs.closed; });
            if (reqs.q.empty()) break;          // closed and drained
            id = reqs.q.front();
            reqs.q.pop();
        }
        nvtxRangePushA("request");
        for (int s = 0; s < stages; ++s) {
            serve_stage<<<blocks, threads, 0, stream>>>(state, id, 1000ull * stage_us);
            CHECK(cudaGetLastError());
        }
        CHECK(cudaStreamSynchronize(stream));   // the response is ready
        nvtxRangePop();
        ++served;
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    clients.join();
    float check = 0;
    CHECK(cudaMemcpy(&check, state, sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(state));
    printf("RESULT {\"program\": \"cpp-server-cv\", \"requests\": %d, \"served\": %d, "
           "\"period_us\": %d, \"stages\": %d, \"stage_us\": %d, \"wall_ms\": %.2f, "
           "\"ms_per_request\": %.3f, \"designed_gpu_pct\": %.1f, \"check\": %.4f}\n",
           requests, served, period_us, stages, stage_us, wall_ms, wall_ms / (served ? served : 1),
           100.0 * stages * stage_us / period_us, check);
    return 0;
}
