"""A Triton row-wise softmax (the tutorial's kernel) called 500 times on a small tensor.

Each of 500 iterations runs ``softmax_kernel`` (one Triton program per row) on a 64 x 1024
float32 tensor, then ``acc += y.sum()`` (a torch reduction and an add, kept on the GPU:
no sync in the loop). NVTX: ``torch.cuda.nvtx.range_push("iter")`` / ``range_pop()``
around each iteration (the same name every time, no number).

What is wrong: nothing on the GPU is big enough to hide the host. The three kernels of
an iteration take ~8-12 us together on an H100, while the host spends ~35-60 us an
iteration in Triton's Python launch path (argument binding, cache key, cuLaunchKernelEx)
and torch's two dispatches: the GPU idles ~70-85 % of the steady state waiting for
launches (launch-bound). The first call JIT-compiles the kernel (Triton -> PTX -> cubin,
caches empty): compilation at start-up, none in the steady state. The fix is fewer,
larger launches (batch the rows of many calls into one launch, fuse the sum into the
kernel) or a CUDA graph.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                              BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=4)
    return y


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--cols", type=int, default=1024)
    args = parser.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(args.rows, args.cols, device=dev, dtype=torch.float32)
    acc = torch.zeros((), device=dev, dtype=torch.float32)
    torch.cuda.synchronize()

    started = time.perf_counter()
    for _ in range(args.iters):
        torch.cuda.nvtx.range_push("iter")
        y = softmax(x)
        acc += y.sum()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - started

    err = float((softmax(x) - torch.softmax(x, dim=1)).abs().max())
    mean_rowsum = float(acc) / args.iters / args.rows        # every row sums to 1
    ok = err < 1e-5 and abs(mean_rowsum - 1.0) < 1e-3
    result = {"iters": args.iters, "shape": [args.rows, args.cols],
              "wall_s": round(wall, 3), "us_per_iter": round(wall / args.iters * 1e6, 1),
              "max_abs_err_vs_torch": err, "mean_row_sum": round(mean_rowsum, 6),
              "triton": triton.__version__, "torch": torch.__version__, "ok": ok}
    print("RESULT " + json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
