"""A healthy control: a loop of large bf16 GEMMs, nothing between them but launches.

    python3 gemm_loop.py

Every step multiplies four 8192 x 8192 bf16 matrices pairs: each GEMM runs for over a
millisecond while its launch takes microseconds, so the host stays far ahead and the
GPU is busy the whole time. The first GEMM of the process loads cuBLAS's kernels (a
one-time start-up cost, not a problem of the loop). No NVTX ranges: gpugap finds the
steps from the repeating kernel sequence.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

N = 8192


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    started = time.perf_counter()
    for _ in range(args.steps):
        torch.mm(a, b, out=c)
        torch.mm(c, b, out=a)
        a.mul_(1e-2)
        torch.mm(a, b, out=c)
        torch.mm(c, b, out=a)
        a.mul_(1e-2)
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    tflops = 4 * 2 * N ** 3 * args.steps / wall / 1e12
    result = {"ms_per_step": round(wall / args.steps * 1e3, 3), "tflops": round(tflops, 1),
              "finite": bool(torch.isfinite(a).all())}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
