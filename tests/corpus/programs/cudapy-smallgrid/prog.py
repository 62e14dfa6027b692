"""cuda.core: a long per-thread kernel launched with a grid of 8 blocks, 200 times.

The kernel ``solve`` is compiled with NVRTC through cuda.core (``Program`` with
``ProgramOptions(arch="sm_90")``); every thread runs a chain of 600k dependent FMAs
(latency-bound: ~1.2-1.5 ms a launch). It is launched 200 times on one stream
(``Device().create_stream()``) with grid = 8 blocks x 256 threads, back to back, and the
host synchronises once, after the last launch. NVTX: one range ``solve`` per launch in
the domain ``solver`` (the ``nvtx`` package; the range covers the launch call).

What is wrong: the grid. 8 blocks occupy 8 of an H100's 132 SMs; the other 124 (94 %)
stay idle the whole time although the GPU is never without work (the stream is always
full: no host gap, no sync in the loop). Designed: GPU busy ~100 % of the steady state,
~94 % of its SM time idle (small grid). The fix is a grid of at least one block per SM
(here: split the work over >= 132 blocks, e.g. more, shorter chains per thread).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import nvtx

SOURCE = r"""
extern "C" __global__ void solve(float* out, unsigned int iters) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (float)(i & 1023u) * 1.0e-3f;
    for (unsigned int k = 0; k < iters; ++k) {
        v = v * 0.9999f + 1.0e-4f;          // dependent chain: one FMA per step
    }
    out[i] = v;
}
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--threads", type=int, default=256)
    parser.add_argument("--iters", type=int, default=600_000, help="FMAs per thread")
    args = parser.parse_args()

    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    program = Program(SOURCE, code_type="c++",
                      options=ProgramOptions(std="c++17", arch="sm_90"))
    kernel = program.compile("cubin").get_kernel("solve")
    stream = dev.create_stream()
    n = args.blocks * args.threads
    buf = dev.allocate(n * 4, stream=stream)
    buf.fill(0, stream=stream)
    config = LaunchConfig(grid=args.blocks, block=args.threads)
    iters = np.uint32(args.iters)
    dev.sync()

    started = time.perf_counter()
    for _ in range(args.launches):
        with nvtx.annotate("solve", domain="solver"):
            launch(stream, config, kernel, int(buf.handle), iters)
    dev.sync()
    wall = time.perf_counter() - started

    host = np.empty(n, dtype=np.float32)
    (err,) = driver.cuMemcpyDtoH(host.ctypes.data, int(buf.handle), n * 4)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemcpyDtoH failed: {err}")
    ok = bool(np.all(np.abs(host - 1.0) < 1e-2))     # the chain converges to ~1.0
    sms = dev.properties.multiprocessor_count
    result = {"launches": args.launches, "grid": args.blocks, "block": args.threads,
              "fma_per_thread": args.iters, "sm_count": sms,
              "sms_used_pct": round(100.0 * min(args.blocks, sms) / sms, 1),
              "wall_s": round(wall, 3), "ms_per_launch": round(wall / args.launches * 1e3, 3),
              "ok": ok}
    print("RESULT " + json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
