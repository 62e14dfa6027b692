"""A CuPy loop that loads its CUDA module anew every iteration.

The kernel ``relax`` (1M threads, 6000 dependent FMAs each: ~200 us on an H100) is
compiled ONCE, before the loop, to a cubin with CuPy's NVRTC wrapper
(``cupy.cuda.compiler.compile_using_nvrtc``). Then each of 100 iterations:

    mod = cupy.cuda.Module(); mod.load(cubin)      # cuModuleLoadData
    fn = mod.get_function("relax")                  # cuModuleGetFunction (lazy load)
    fn(grid, block, args)                           # cuLaunchKernel, ~200 us
    y[:1].get()                                     # small sync: a 4-byte D2H copy
    del fn, mod                                     # cuModuleUnload

What is wrong: the module is loaded (and unloaded) in every iteration of the steady
state, as code that wraps "load kernel, run it" in one helper tends to do. The GPU sits
idle while the host unloads the old module, loads the new one and resolves the function
(~40-120 us a iteration against ~200 us of kernel): library churn, designed for ~15-35 %
of the steady state. The fix is to load the module once, before the loop, and keep the
function object.

NVTX: one range ``iteration`` per iteration in the domain ``app`` (the ``nvtx`` package).
"""

from __future__ import annotations

import argparse
import json
import time

import cupy as cp
import numpy as np
import nvtx

SOURCE = r"""
extern "C" __global__ void relax(const float* __restrict__ x, float* __restrict__ y,
                                 int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int k = 0; k < iters; ++k) {
        v = v * 0.999f + 0.001f;
    }
    y[i] = v;
}
"""

THREADS = 256


def compile_cubin() -> bytes:
    """NVRTC -> cubin for the current device (CuPy 14: returns (binary, mapping))."""
    compiled = cp.cuda.compiler.compile_using_nvrtc(SOURCE, options=("-std=c++17",))
    cubin = compiled[0] if isinstance(compiled, tuple) else compiled
    if not isinstance(cubin, bytes) or cubin[:4] != b"\x7fELF":
        raise SystemExit("compile_using_nvrtc did not return a cubin (ELF)")
    return cubin


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--fma", type=int, default=6000, help="FMAs per element")
    args = parser.parse_args()

    cubin = compile_cubin()
    x = cp.linspace(0.0, 1.0, args.n, dtype=cp.float32)
    y = cp.zeros(args.n, dtype=cp.float32)
    blocks = (args.n + THREADS - 1) // THREADS
    n32, fma32 = np.int32(args.n), np.int32(args.fma)
    expected = float(1.0 - (1.0 - 0.0) * 0.999 ** args.fma)      # y[0], from x[0] = 0
    cp.cuda.Device().synchronize()

    bad = 0
    started = time.perf_counter()
    for _ in range(args.iters):
        with nvtx.annotate("iteration", domain="app"):
            mod = cp.cuda.Module()
            mod.load(cubin)                                   # cuModuleLoadData, every time
            fn = mod.get_function("relax")
            fn((blocks,), (THREADS,), (x, y, n32, fma32))
            first = float(y[:1].get()[0])                     # small sync
            if abs(first - expected) > 1e-3:
                bad += 1
            del fn, mod                                       # cuModuleUnload
    wall = time.perf_counter() - started

    result = {"iters": args.iters, "n": args.n, "fma_per_element": args.fma,
              "cubin_bytes": len(cubin), "wall_s": round(wall, 3),
              "us_per_iter": round(wall / args.iters * 1e6, 1), "y0": first,
              "expected_y0": round(expected, 6), "bad_checks": bad}
    print("RESULT " + json.dumps(result))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
