"""A healthy CuPy pipeline: pinned chunks uploaded on one stream, computed on another.

What it does: 4 chunks of 4M float32 (16 MiB each, 64 MiB in all) live in pinned host
memory (``cupyx.empty_pinned``), filled once before the loop; chunk c holds values in
[0.1 c, 0.1 c + 0.5), so the chunks' results differ by several percent. Two device
input buffers (slots) are used in turn: double buffering. There are two non-blocking
streams (``cp.cuda.Stream(non_blocking=True)``): ``copy`` and ``compute``. Each of the
200 steps i:

  * (throttle, outside the step range) waits on the host for the ``done`` event of step
    i - 4 (``Event.synchronize``), a bounded lookahead of 4 steps: 3 kernels (~2.6 ms of
    GPU work) are still queued when the host wakes up, so this never drains the GPU;
  * pushes the NVTX range ``step`` (``cupy.cuda.nvtx.RangePush``);
  * on the copy stream: waits for the event ``freed`` of slot (i + 1) % 2 (recorded after
    kernel i - 1, the last kernel that read it), then ``cudaMemcpyAsync`` host-to-device
    of chunk (i + 1) % 4 (16 MiB, pinned, ~0.3 ms at the ~55 GB/s cpp-pinned measured)
    into that slot, then records the event ``ready`` of that slot; so the upload of
    chunk i + 1 starts when kernel i - 1 ends, i.e. when kernel i starts, and runs under it;
  * on the compute stream: waits for ``ready`` of slot i % 2 (its upload, enqueued one
    step earlier), launches ``fma_chain_sum`` over that slot (a RawKernel: each of the 4M
    threads runs 5000 dependent FMAs on its element, the block reduces in shared memory
    and atomically adds its partial sum into ``sums[i]``; ~0.8-0.95 ms on an H100 at
    ~23-25 TFMA/s, as the same kernel style measured in cupy-sync), then records
    ``freed`` of slot i % 2 and ``done`` of step i;
  * pops the range.
There is no other host synchronisation in the loop: one synchronize of each stream at
the end, then one ``sums.get()`` (200 floats) checked against the closed form.

What is right with it (a healthy control): the upload of chunk i + 1 (~0.3 ms) runs on
the copy stream while kernel i (~0.85 ms) runs on the compute stream, ordered only by
events, from pinned memory; each kernel's input was uploaded during the previous kernel
(with ~0.5 ms to spare), so the compute stream runs kernels back to back (the gap
between two kernels is the event wait, a few us). Nothing is wrong: designed for the
GPU busy > 95 % of the steady state (kernels alone ~99 %), every copy hidden under a
kernel, no pageable copy, no allocation, no compilation and no GPU-draining sync in
the loop.

Designed figures: 200 steps; per step ~0.85 ms of GPU kernel time (range 0.7-1.1) and
~0.3 ms of H2D copy (hidden); the host enqueues a step in ~30-80 us and then waits for
the lookahead; ~170-220 ms of steady state; 200 loop kernels and 200 H2D copies (the
first one, of chunk 0, just before the loop), one D2H copy of the sums after it. The
kernel is compiled by NVRTC (or loaded from CuPy's cache) and launched once (warm-up,
null stream) before the loop.
NVTX: 200 ranges named ``step`` (default domain), one per step.
"""

from __future__ import annotations

import argparse
import json
import time

import cupy as cp
import cupyx
import numpy as np
from cupy.cuda import nvtx

SOURCE = r"""
extern "C" __global__ void fma_chain_sum(const float* __restrict__ x, float* sums, int n,
                                         int iters, int slot) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (i < n) {
        v = x[i];
        for (int k = 0; k < iters; ++k) {
            v = v * 0.9999f + 0.0001f;        // dependent FMA chain: the compute
        }
    }
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(sums + slot, part[0]);
}
"""

THREADS = 256
A32, B32 = np.float32(0.9999), np.float32(0.0001)


def expected_sum(n: int, chunk_sum: float, iters: int) -> float:
    """Closed form of the kernel's sum: v_k = f - (f - x) a^k, f = b / (1 - a)."""
    a, b = float(A32), float(B32)
    f = b / (1.0 - a)
    return n * f - (n * f - chunk_sum) * a ** iters


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--n", type=int, default=1 << 22, help="floats per chunk")
    parser.add_argument("--fma", type=int, default=5000, help="FMAs per element")
    parser.add_argument("--host-chunks", type=int, default=4)
    parser.add_argument("--ring", type=int, default=2, help="device input buffers")
    parser.add_argument("--lookahead", type=int, default=4,
                        help="steps in flight before the host waits (0: unbounded)")
    args = parser.parse_args()
    if args.ring < 2:
        raise SystemExit("--ring must be >= 2")

    n, nh, ring = args.n, args.host_chunks, args.ring
    nbytes = n * 4
    rng = np.random.default_rng(0)
    host = cupyx.empty_pinned((nh, n), dtype=np.float32)          # pinned, page-locked
    for c in range(nh):
        host[c] = rng.random(n, dtype=np.float32) * np.float32(0.5) + np.float32(0.1 * c)
    chunk_sums = [float(host[c].sum(dtype=np.float64)) for c in range(nh)]

    kernel = cp.RawKernel(SOURCE, "fma_chain_sum")
    dev = [cp.empty(n, dtype=cp.float32) for _ in range(ring)]
    sums = cp.zeros(args.steps, dtype=cp.float32)
    warm = cp.zeros(1, dtype=cp.float32)
    blocks = (n + THREADS - 1) // THREADS
    n32, fma32 = np.int32(n), np.int32(args.fma)

    copy = cp.cuda.Stream(non_blocking=True)
    compute = cp.cuda.Stream(non_blocking=True)
    ready = [cp.cuda.Event(disable_timing=True) for _ in range(ring)]
    freed = [cp.cuda.Event(disable_timing=True) for _ in range(ring)]
    look = max(args.lookahead, 0)
    done = [cp.cuda.Event(disable_timing=True) for _ in range(look)]

    # Warm-up outside the loop: NVRTC compile / module load and one launch.
    dev[0].fill(0)
    kernel((blocks,), (THREADS,), (dev[0], warm, n32, np.int32(1), np.int32(0)))
    cp.cuda.Device().synchronize()

    def upload(j: int) -> None:
        """Enqueue the H2D copy of chunk j into ring slot j % ring on the copy stream."""
        b = j % ring
        if j >= ring:
            copy.wait_event(freed[b])        # kernel j - ring, the last reader of slot b
        cp.cuda.runtime.memcpyAsync(dev[b].data.ptr, host[j % nh].ctypes.data, nbytes,
                                    cp.cuda.runtime.memcpyHostToDevice, copy.ptr)
        ready[b].record(copy)

    started = time.perf_counter()
    upload(0)                                 # prologue: the first chunk
    for i in range(args.steps):
        if look and i >= look:
            done[i % look].synchronize()      # bounded lookahead: step i - look finished
        nvtx.RangePush("step")
        if i + 1 < args.steps:
            upload(i + 1)                     # overlaps kernel i (and i - 1)
        b = i % ring
        compute.wait_event(ready[b])
        kernel((blocks,), (THREADS,), (dev[b], sums, n32, fma32, np.int32(i)),
               stream=compute)
        freed[b].record(compute)
        if look:
            done[i % look].record(compute)
        nvtx.RangePop()
    compute.synchronize()
    copy.synchronize()
    wall = time.perf_counter() - started

    got = sums.get()
    bad = 0
    for i in range(args.steps):
        want = expected_sum(n, chunk_sums[i % nh], args.fma)
        if abs(float(got[i]) - want) > 2e-3 * abs(want):
            bad += 1
    result = {"program": "cupy-streams-overlap", "steps": args.steps, "n": n,
              "fma_per_element": args.fma, "chunk_mib": nbytes / 2**20,
              "host_chunks": nh, "ring": ring, "lookahead": look, "blocks": blocks,
              "wall_s": round(wall, 4), "ms_per_step": round(wall / args.steps * 1e3, 4),
              "checksum": round(float(got.astype(np.float64).sum()), 1),
              "last_sum": float(got[-1]), "bad_checks": bad}
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
