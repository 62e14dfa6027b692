// cpp-tiny-kernels: a relaxation loop made of many tiny elementwise kernels, each launched
// on its own from the host.
//
// What it does: three device vectors of --n floats (64k by default: x, the state; y, a
// momentum term; f, a forcing term) and x0 (the state at the start of the iteration),
// one created non-blocking stream, no NVTX. 300 iterations; each launches --kernels (48)
// kernels back to back on the stream, with a cudaGetLastError check after every launch:
//   iter_begin     x0 = x; f = 0.01 sin(phase(it) + i/1024)   (once, first)
//   then 47 elementwise ops cycling through
//   scale_kernel   y = 0.5 y
//   axpy_kernel    y = y + 0.25 x
//   add_kernel     x = x + y - f
//   clamp_kernel   x = clamp(x, -1, 1)
// (11 full cycles, then scale, axpy, add). Every grid is ceil(n / block) blocks of --block
// threads: 512 blocks of 128 threads for 64k floats, ~3.9 blocks per SM on a 132-SM H100,
// all resident at once: the grids fill the GPU. Every kernel is launched once before the
// loop (warm-up: lazy module loading happens there, then one sync). In the loop, one
// cudaStreamSynchronize after every --sync-every (50) iterations to time the chunk and
// nothing else: no allocation, no copies, no host work besides the launches. After the
// loop x and x0 are copied back once and checked (finite, within the clamp plus one add).
//
// What is wrong with it (deliberately): each kernel touches 256 KB and runs for ~1.5-2.5
// us on the GPU, but the host needs ~3.5-6 us to launch it (cudaLaunchKernel and the
// cudaGetLastError check, under CUDA API tracing): every kernel finishes before the host
// has launched the next one, so the GPU idles between kernels most of the time:
// launch-bound. The fix: capture the 48 launches of an iteration once in a CUDA graph
// (stream capture, cudaGraphInstantiate) and cudaGraphLaunch it each iteration, or fuse
// the elementwise chain into one kernel.
//
// Designed numbers (defaults in program.toml): 300 iterations x 48 kernels = 14,400
// kernels + 5 warm-up. GPU time per kernel K ~1.5-2.5 us; host launch interval L ~3.5-6
// us (corpus evidence: jax-eager's 64k-element kernels ran 1.38 us; launch calls under
// nsys tracing took ~5-7 us in jax-eager and cpp-default-stream). The GPU is paced by the
// host: an iteration takes ~48 x L = ~170-290 us, of which ~48 x K = ~70-120 us is kernel
// time: GPU idle = 1 - K/L = ~60% (design 35-85%), all of it gaps of a few us between
// consecutive kernels. The 6 syncs (every 50 iterations) cost ~6 gaps of ~10 us: < 0.1%.
// Must be silent: small-grid (512 blocks >= 132 SMs), sync-wait (6 syncs in 300
// iterations, the GPU already waits for the host), host-work (no CPU work between
// launches: every gap is a few us, far below 100 us), allocation (all buffers made before
// the loop), module-load (every kernel warmed up before the loop), compilation (SASS for
// sm_90 built ahead), pageable-copy (no copies in the loop), serialized-streams (one
// stream).

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

// Start of an iteration: keep the state, refresh the time-dependent forcing.
__global__ void iter_begin(const float* __restrict__ x, float* __restrict__ x0,
                           float* __restrict__ f, float phase, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x0[i] = x[i];
        f[i] = 0.01f * __sinf(phase + i * (1.0f / 1024.0f));
    }
}

__global__ void scale_kernel(float* __restrict__ y, float s, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s;
}

__global__ void axpy_kernel(float* __restrict__ y, float a, const float* __restrict__ x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaf(a, x[i], y[i]);
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y,
                           const float* __restrict__ f, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + y[i] - f[i];
}

__global__ void clamp_kernel(float* __restrict__ x, float lo, float hi, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fminf(fmaxf(x[i], lo), hi);
}

struct Buffers {
    float *x, *x0, *y, *f;
};

// One of the four elementwise ops of the chain, by its position in the iteration.
static void launch_op(int op, const Buffers& b, int grid, int block, cudaStream_t s, int n) {
    switch (op % 4) {
        case 0: scale_kernel<<<grid, block, 0, s>>>(b.y, 0.5f, n); break;
        case 1: axpy_kernel<<<grid, block, 0, s>>>(b.y, 0.25f, b.x, n); break;
        case 2: add_kernel<<<grid, block, 0, s>>>(b.x, b.y, b.f, n); break;
        default: clamp_kernel<<<grid, block, 0, s>>>(b.x, -1.0f, 1.0f, n); break;
    }
    CHECK(cudaGetLastError());
}

int main(int argc, char** argv) {
    int iters = 300, kernels = 48, n = 1 << 16, block = 128, sync_every = 50;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--block") && i + 1 < argc) block = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sync-every") && i + 1 < argc) sync_every = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--iters N] [--kernels K] [--n N] [--block B] [--sync-every S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (iters < 1 || kernels < 2 || n < 1 || block < 32 || block > 1024 || sync_every < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }

    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int grid = (n + block - 1) / block;
    const size_t bytes = (size_t)n * sizeof(float);

    // Deterministic start: x in [-0.5, 0.5) from a fixed LCG, y = 0, f = 0.
    std::vector<float> hx(n), hx0(n);
    unsigned int seed = 12345u;
    for (int i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        hx[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    Buffers b;
    CHECK(cudaMalloc(&b.x, bytes));
    CHECK(cudaMalloc(&b.x0, bytes));
    CHECK(cudaMalloc(&b.y, bytes));
    CHECK(cudaMalloc(&b.f, bytes));
    CHECK(cudaMemcpy(b.x, hx.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(b.y, 0, bytes));
    CHECK(cudaMemset(b.f, 0, bytes));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // Warm-up: every kernel once (loads the module), then wait.
    iter_begin<<<grid, block, 0, stream>>>(b.x, b.x0, b.f, 0.0f, n);
    CHECK(cudaGetLastError());
    for (int op = 0; op < 4; ++op) launch_op(op, b, grid, block, stream, n);
    CHECK(cudaStreamSynchronize(stream));

    std::vector<double> chunk_ms;
    const auto t0 = std::chrono::steady_clock::now();
    auto tc = t0;
    for (int it = 0; it < iters; ++it) {
        iter_begin<<<grid, block, 0, stream>>>(b.x, b.x0, b.f, 0.05f * (float)it, n);
        CHECK(cudaGetLastError());
        for (int k = 1; k < kernels; ++k) launch_op(k - 1, b, grid, block, stream, n);
        if ((it + 1) % sync_every == 0) {           // progress timing, every sync_every iterations
            CHECK(cudaStreamSynchronize(stream));
            const auto now = std::chrono::steady_clock::now();
            chunk_ms.push_back(std::chrono::duration<double, std::milli>(now - tc).count());
            tc = now;
        }
    }
    if (iters % sync_every != 0) CHECK(cudaStreamSynchronize(stream));
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    CHECK(cudaMemcpy(hx.data(), b.x, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hx0.data(), b.x0, bytes, cudaMemcpyDeviceToHost));
    double checksum = 0.0, delta = 0.0;
    int bad = 0;
    for (int i = 0; i < n; ++i) {
        // The iteration ends with an add (no clamp after it): x stays within the clamp's
        // bound plus what one add can bring (|y| <= 1, |f| <= 0.01).
        if (!std::isfinite(hx[i]) || std::fabs(hx[i]) > 2.5f) ++bad;
        checksum += hx[i];
        delta += std::fabs((double)hx[i] - (double)hx0[i]);
    }
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(b.x));
    CHECK(cudaFree(b.x0));
    CHECK(cudaFree(b.y));
    CHECK(cudaFree(b.f));

    std::string chunks = "[";
    for (size_t i = 0; i < chunk_ms.size(); ++i) {
        char buf[32];
        snprintf(buf, sizeof buf, "%s%.3f", i ? ", " : "", chunk_ms[i]);
        chunks += buf;
    }
    chunks += "]";
    const long launches = (long)iters * kernels;
    const int ok = bad == 0 && std::isfinite(checksum) && std::isfinite(delta);
    printf("RESULT {\"program\": \"cpp-tiny-kernels\", \"iters\": %d, \"kernels_per_iter\": %d, "
           "\"n\": %d, \"block\": %d, \"grid\": %d, \"sms\": %d, \"sync_every\": %d, "
           "\"syncs_in_loop\": %d, \"wall_ms\": %.3f, \"us_per_iter\": %.2f, "
           "\"us_per_launch\": %.3f, \"chunk_ms\": %s, \"checksum\": %.6f, "
           "\"last_step_l1\": %.6f, \"ok\": %s}\n",
           iters, kernels, n, block, grid, sms, sync_every, iters / sync_every, wall_ms,
           wall_ms * 1000.0 / iters, wall_ms * 1000.0 / launches, chunks.c_str(), checksum,
           delta, ok ? "true" : "false");
    return ok ? 0 : 1;
}
