"""A PyTorch training loop that calls ``loss.item()`` every step for its running log.

    python3 prog.py [--steps 150] [--batch 4096] [--width 1024] [--layers 4]

The model: 4 ``Linear(1024, 1024)`` layers with ReLU between them (4.2 M parameters,
fp32, TF32 off: PyTorch's default), trained with MSE against a random target and
``torch.optim.AdamW(fused=True)``. Four batches of 4096 rows (inputs and targets) are
generated on the GPU once before the loop and indexed inside it (views, no copies, no
data loading). Each of the 150 steps, inside ``torch.cuda.nvtx.range("train_step")``:
``zero_grad(set_to_none=True)``, forward (4 GEMMs, 3 ReLU, the MSE loss), ``backward``
(7 GEMMs, bias-gradient reductions, ReLU backward), ``opt.step()`` (the fused AdamW kernel
and the on-device step counter), then ``value = loss.item()`` appended to a Python list
and a tiny host check with it (finite, and not 10x the first loss: divergence).
~25-35 kernels a step, ~4,500 in all.

What is wrong: the ``.item()`` every step. It copies the loss to the host and waits
(cudaMemcpyAsync device-to-host + cudaStreamSynchronize) for everything queued before it,
so the GPU drains at the end of every step. The host then returns from the sync, does
the logging and the check, leaves and re-enters the NVTX range, ``zero_grad`` and the
Python of the first Linear before the next step's first GEMM is launched; meanwhile the
GPU has nothing to do. Without the ``.item()`` the host (~1.8-2.5 ms of Python, autograd
and launches per step on the capture machine, from the corpus's pt-nonvtx-train and
pt-checkpoint captures) would stay ahead of the GPU (~2.0-2.8 ms of work per step) and
the GPU would run steps back to back; with it, each step starts on an idle GPU. The fix:
keep the running loss on the device (``running += loss.detach()``) and read it every N
steps, or copy it with ``non_blocking=True`` into pinned memory and read it a step later.

Designed figures, per step: GPU work ~2.0-2.8 ms (11 fp32 GEMMs of 4096x1024x1024,
8.6 GFLOP each, ~175-210 us at ~40-50 TFLOP/s, plus ~0.25 ms of elementwise work and
~50 us of fused AdamW); the host's path from the end of the sync to the next step's
first kernel (return from the sync, list append and check, NVTX pop/push, zero_grad,
module calls down to the first cuBLAS launch, launch latency) ~0.3-0.8 ms, during which
the GPU is idle. Sync-wait share of the steady state ~0.3/(2.8+0.3) = 10 % .. 0.8/(2.0+0.8)
= 29 %, central estimate ~15-22 %. The GEMMs (~190 us) are longer than the host's
~80 us per forward layer and ~200 us per backward layer, so the GPU, once restarted,
stays busy until the next ``.item()``: the idle is one gap per step, right after the
sync (a short second gap may open where autograd's engine thread starts the backward,
~0.3 ms after the loss is launched, if the forward's backlog is shorter than that).
150 steps, ~0.4-0.5 s; step 0 includes cuBLAS/cuBLASLt initialisation and module loads.
NVTX: 150 ranges ``train_step`` (default domain, same name every step).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch


def build(width: int, layers: int) -> torch.nn.Sequential:
    mods: list[torch.nn.Module] = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batches", type=int, default=4, help="batches kept on the GPU")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = build(args.width, args.layers).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    xs = torch.randn(args.batches, args.batch, args.width, device=device)
    ys = torch.randn(args.batches, args.batch, args.width, device=device)

    losses: list[float] = []
    alarms = 0
    started = time.perf_counter()
    for step in range(args.steps):
        with torch.cuda.nvtx.range("train_step"):
            x, y = xs[step % args.batches], ys[step % args.batches]
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            value = loss.item()                   # D2H copy + sync: the GPU drains
            losses.append(value)                  # the running log
            if not math.isfinite(value) or value > 10.0 * losses[0]:
                alarms += 1                       # the small host-side check
    wall = time.perf_counter() - started

    result = {"program": "pt-item-sync", "steps": args.steps, "batch": args.batch,
              "width": args.width, "layers": args.layers, "params": n_params,
              "wall_s": round(wall, 4), "ms_per_step": round(wall / args.steps * 1e3, 4),
              "first_loss": round(losses[0], 6), "last_loss": round(losses[-1], 6),
              "checksum": round(math.fsum(losses), 6), "alarms": alarms}
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if alarms == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
