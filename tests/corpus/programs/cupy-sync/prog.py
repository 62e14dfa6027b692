"""A CuPy RawKernel loop that copies one float back to the host every iteration.

Each of 300 iterations zeroes a one-float accumulator (``out.fill(0)``: a memset),
launches ``churn_sum`` (a hand-written RawKernel: every one of 1M threads runs a chain of
1500 dependent FMAs on its element, then the block reduces in shared memory and adds its
partial sum into the accumulator with atomicAdd; ~45-60 us on an H100), then reads the
accumulator back with ``out.get()`` (a 4-byte device-to-host copy, synchronous: the host
waits until the kernel is done) and checks it on the host (one float comparison).

What is wrong: the ``.get()`` every iteration. The host sits in the copy while the GPU
works, and only after it returns does it enqueue the next memset and kernel, so the GPU
drains every iteration and idles for the host's return from the sync, the check and the
next launches (~15-35 us, launch latency included) before the next kernel starts:
designed for ~25-45 % of the steady state idle (sync-wait). The fix is to keep the
result on the device (accumulate there, copy back once after the loop, or every N
iterations with a non-blocking copy into pinned memory).

No NVTX at all: iterations are recognisable only by the kernel ``churn_sum`` (one per
iteration, 300 in all; the first call compiles it with NVRTC).
"""

from __future__ import annotations

import argparse
import json
import time

import cupy as cp
import numpy as np

SOURCE = r"""
extern "C" __global__ void churn_sum(const float* __restrict__ x, float* out, int n, int iters) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (i < n) {
        v = x[i];
        for (int k = 0; k < iters; ++k) {
            v = v * 0.999f + 0.001f;          // dependent FMA chain: the elementwise work
        }
    }
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}
"""

THREADS = 256


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--fma", type=int, default=1500, help="FMAs per element")
    args = parser.parse_args()

    kernel = cp.RawKernel(SOURCE, "churn_sum")
    x = cp.linspace(0.0, 1.0, args.n, dtype=cp.float32)
    out = cp.zeros(1, dtype=cp.float32)
    # What the sum must be: v_k = 1 - (1 - x) * 0.999**k, summed over the elements.
    decay = 0.999 ** args.fma
    expected = float(np.sum(1.0 - (1.0 - np.linspace(0.0, 1.0, args.n)) * decay))
    blocks = (args.n + THREADS - 1) // THREADS
    n32, fma32 = np.int32(args.n), np.int32(args.fma)
    cp.cuda.Device().synchronize()

    bad = 0
    started = time.perf_counter()
    for _ in range(args.iters):
        out.fill(0)
        kernel((blocks,), (THREADS,), (x, out, n32, fma32))
        total = float(out.get()[0])                      # D2H copy + implicit sync
        if abs(total - expected) > 1e-3 * expected:      # the tiny host check
            bad += 1
    wall = time.perf_counter() - started

    result = {"iters": args.iters, "n": args.n, "fma_per_element": args.fma,
              "blocks": blocks, "threads": THREADS, "wall_s": round(wall, 3),
              "us_per_iter": round(wall / args.iters * 1e6, 1),
              "last_total": total, "expected": round(expected, 1), "bad_checks": bad}
    print("RESULT " + json.dumps(result))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
