// cpp-cublas-churn: a cuBLAS handle and its buffers created and destroyed every batch.
//
// What it does: 100 batches, each
//   cublasCreate(&handle)
//   cudaMalloc A, B, C (1024 x 1024 floats, 4 MiB each), A and B filled by a kernel
//   cublasSgemm C = A x B (1024^3: ~2.1 GFLOP, some tens of us on an H100)
//   cudaDeviceSynchronize
//   cudaFree C, B, A; cublasDestroy(handle)
// NVTX (nvtx3): one range `batch N` per batch (formatted with the number).
//
// What is wrong with it (deliberately): the library context is created and destroyed in
// the loop, as code that wraps each BLAS call in its own handle does. Every batch pays
// cublasCreate/cublasDestroy (the handle's internal allocations, its workspace, stream
// and event objects, and whatever module/library loading the library does for a new
// handle) plus three cudaMalloc and three cudaFree, while the GPU has one short GEMM to
// run. This is not a one-time warm-up cost (it recurs in every batch of the steady
// state), so warming up does not help; the fix is to create the handle (cublasCreate)
// and the buffers once, before the loop, and reuse them.
//
// Designed numbers: GEMM ~30-100 us per batch; create+destroy several hundred us (a
// public measurement on CUDA 13: ~330 us steady state on an RTX 4070 Ti SUPER) and
// 6 allocation calls: the GPU idle most of each batch (~60-95%).

#include <cublas_v2.h>
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

#define CHECK_BLAS(call)                                                               \
    do {                                                                               \
        cublasStatus_t st_ = (call);                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                            \
            fprintf(stderr, "cuBLAS error: %s failed at %s:%d: status %d\n", #call,    \
                    __FILE__, __LINE__, (int)st_);                                     \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

__global__ void fill(float* a, float* b, int n, int batch) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        a[i] = 1e-3f * (float)((i + batch) % 97);
        b[i] = 1e-3f * (float)((i * 7 + batch) % 89);
    }
}

int main(int argc, char** argv) {
    int batches = 100, n = 1024;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--batches N] [--n N]\n", argv[0]);
            return 2;
        }
    }
    int sms = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t elems = (size_t)n * n, bytes = elems * sizeof(float);
    const float alpha = 1.0f, beta = 0.0f;
    float c00 = 0;
    char label[32];

    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batches; ++b) {
        snprintf(label, sizeof label, "batch %d", b);
        nvtxRangePushA(label);
        cublasHandle_t handle;
        CHECK_BLAS(cublasCreate(&handle));             // the library context, every batch
        float *A, *B, *C;
        CHECK(cudaMalloc(&A, bytes));
        CHECK(cudaMalloc(&B, bytes));
        CHECK(cudaMalloc(&C, bytes));
        fill<<<2 * sms, 256>>>(A, B, (int)elems, b);
        CHECK(cudaGetLastError());
        CHECK_BLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, n, B, n,
                               &beta, C, n));
        CHECK(cudaDeviceSynchronize());
        if (b == batches - 1) CHECK(cudaMemcpy(&c00, C, sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(cudaFree(C));
        CHECK(cudaFree(B));
        CHECK(cudaFree(A));
        CHECK_BLAS(cublasDestroy(handle));             // ...and torn down again
        nvtxRangePop();
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("RESULT {\"program\": \"cpp-cublas-churn\", \"batches\": %d, \"n\": %d, "
           "\"wall_ms\": %.2f, \"ms_per_batch\": %.3f, \"c00\": %.6f}\n",
           batches, n, wall_ms, wall_ms / batches, c00);
    return 0;
}
