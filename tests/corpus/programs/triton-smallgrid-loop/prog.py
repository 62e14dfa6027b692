"""A persistent Triton RMS-norm launched with 8 programs, inside a 150-iteration loop.

    python3 prog.py [--iters 150] [--rows 16384] [--cols 2048] [--programs 8]

What it does: ``rmsnorm_persistent_kernel`` normalises every row of a (16384, 2048)
float32 tensor ``x`` (y = x / sqrt(mean(x^2) + eps) * w, ``w`` a learned-looking gain of
2048 floats) the "persistent" way: the grid is a fixed number of programs (``--programs``,
default 8) and each program loops over its share of the rows, 4 rows (a 4 x 2048 tile,
32 KiB) per loop step, taking row blocks pid, pid + 8, pid + 16, ... (2048 rows, 512
loop steps per program). Each of 150 iterations, inside ``torch.cuda.nvtx.range("iter")``
(the same name every time): ``y = rmsnorm(x, w)`` (one Triton launch; ``y`` from
``torch.empty_like``, served by the caching allocator after the first iterations) and
the residual update ``x.add_(y, alpha=0.01)`` (one ordinary PyTorch elementwise kernel,
32 M elements, a full grid of thousands of blocks). No host synchronisation in the loop;
one ``torch.cuda.synchronize()`` after it, then a check against a PyTorch reference.
The kernel is called once before the loop (the warm-up: Triton JIT-compiles it there,
with TRITON_CACHE_DIR empty), so compilation is start-up only.

What is wrong: the grid. 8 programs are 8 thread blocks, so the kernel runs on 8 of an
H100's 132 SMs while the other 124 (94 %) have nothing to do; each SM moves its 32 MiB
(16 MiB read, 16 MiB written) alone, ~0.3-2 ms a launch, against ~0.13-0.15 ms for the
full-grid ``add_``, which moves 1.5x as much data (384 MiB at ~3 TB/s) over all 132
SMs. The host is never the limit: ~30-60 us of Python and launches an iteration against
~0.4-2 ms of GPU work, so after the first iterations the host is far ahead and the
stream is never empty (GPU busy ~100 %). The fix is the grid: launch one program per row block (grid =
cdiv(rows, BLOCK_ROWS), 4096 programs here), or at least a multiple of the SM count
(``torch.cuda.get_device_properties(0).multi_processor_count``) for a persistent kernel.

Designed figures, per steady iteration: RMS-norm ~0.3-2 ms (central ~0.6-1.2 ms: each
loop step waits ~0.7 us of DRAM latency for its 32 KiB tile, then reduces and stores;
at most ~110 GB/s through one SM), add_ ~0.13-0.15 ms, launch gaps ~2-4 us. Share of the
steady state lost to the small grid, as SM time left idle: (1 - 8/132) x T_norm /
(T_norm + T_add) = 0.939 x 0.3/0.44 = 64 % .. 0.939 x 2.0/2.14 = 88 % (central ~75-84 %);
the RMS-norm's plain share of the time is 68-94 %.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_persistent_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                              BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0)        # loaded once per program
    row_offs = tl.arange(0, BLOCK_ROWS)
    # Persistent loop: this program's row blocks are pid, pid + n_prog, pid + 2 n_prog, ...
    for first in tl.range(pid * BLOCK_ROWS, n_rows, n_prog * BLOCK_ROWS):
        rows = first + row_offs
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y, mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6, programs: int = 8,
            block_rows: int = 4) -> torch.Tensor:
    """RMS-norm over the last dimension of a contiguous 2-D tensor, ``programs`` programs."""
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    rmsnorm_persistent_kernel[(programs,)](
        x, w, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
        BLOCK_ROWS=block_rows, BLOCK_COLS=triton.next_power_of_2(n_cols), num_warps=8)
    return y


def rmsnorm_reference(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps) * w.double()).float()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=150)
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=2048)
    parser.add_argument("--programs", type=int, default=8, help="persistent programs")
    parser.add_argument("--block-rows", type=int, default=4, help="rows per loop step")
    parser.add_argument("--alpha", type=float, default=0.01, help="residual step")
    args = parser.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(args.rows, args.cols, device=dev, dtype=torch.float32)
    w = 1.0 + 0.1 * torch.randn(args.cols, device=dev, dtype=torch.float32)

    # Warm-up: the first call JIT-compiles the kernel (Triton -> PTX -> cubin).
    t0 = time.perf_counter()
    y = rmsnorm(x, w, programs=args.programs, block_rows=args.block_rows)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    warm_err = float((y - rmsnorm_reference(x, w)).abs().max())     # syncs (.item)

    started = time.perf_counter()
    for _ in range(args.iters):
        with torch.cuda.nvtx.range("iter"):
            y = rmsnorm(x, w, programs=args.programs, block_rows=args.block_rows)
            x.add_(y, alpha=args.alpha)
    torch.cuda.synchronize()
    wall = time.perf_counter() - started

    # Check the kernel once more against the float64 reference, after the loop.
    y_check = rmsnorm(x, w, programs=args.programs, block_rows=args.block_rows)
    err = float((y_check - rmsnorm_reference(x, w)).abs().max())
    x_rms = float(x.double().pow(2).mean().sqrt())
    checksum = float(x.double().sum())
    ok = err < 1e-4 and warm_err < 1e-4 and bool(torch.isfinite(x).all())
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = {"program": "triton-smallgrid-loop", "iters": args.iters,
              "shape": [args.rows, args.cols], "programs": args.programs,
              "block_rows": args.block_rows, "sm_count": sms,
              "compile_s": round(compile_s, 3), "wall_s": round(wall, 4),
              "ms_per_iter": round(wall / args.iters * 1e3, 4),
              "max_abs_err_vs_fp64": err, "warmup_err": warm_err,
              "x_rms": round(x_rms, 6), "checksum": round(checksum, 3),
              "triton": triton.__version__, "torch": torch.__version__, "ok": ok}
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
