"""A training loop that checkpoints the model with torch.save every 10 steps.

    python3 prog.py [--steps 40] [--save-every 10]

The model: Linear 1024->4096, four Linear 4096x4096 layers and a 4096->1024 head, ReLU
between them, fp32: ~75 M parameters = ~300 MB. Each step trains on 4096 rows generated
on the GPU (MSE against a random target, AdamW): ~35-45 ms of GPU-heavy work (~1.9
TFLOP of fp32 GEMMs), ended by ``loss.item()`` for the running-loss log.

At 0-based steps 9, 19, 29 and 39 (``(step + 1) % 10 == 0``), still inside the step's
NVTX range, ``torch.save(model.state_dict(), "ckpt.pt")`` copies every parameter to the
host (synchronous device-to-host copies into pageable memory, ~300 MB) and writes the
file (zip records with CRC, ~300 MB): ~0.3-1 s during which the GPU has nothing to do.
All four saves fall in the steady state (steps 2..39). The file is removed at the end.
Designed figures: 34 normal steady steps of ~35-45 ms, 4 saving steps of ~0.3-1 s: the
saves take ~45-75 % of the steady state, once every 10 steps (on a CPU-only machine the
serialisation and write of the 288 MB file alone took ~0.55 s).
NVTX: one range ``step N`` per step.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

IN, HIDDEN, LAYERS, ROWS = 1024, 4096, 4, 4096


def build() -> torch.nn.Sequential:
    mods: list[torch.nn.Module] = [torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU()]
    for _ in range(LAYERS):
        mods += [torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU()]
    mods += [torch.nn.Linear(HIDDEN, IN)]
    return torch.nn.Sequential(*mods)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--path", default="ckpt.pt")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = build().to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(ROWS, IN, device=device)
    target = torch.randn(ROWS, IN, device=device)

    running = 0.0
    saves = []
    started = time.perf_counter()
    for step in range(args.steps):
        torch.cuda.nvtx.range_push(f"step {step}")
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        running += loss.item()
        if (step + 1) % args.save_every == 0:
            t = time.perf_counter()
            torch.save(model.state_dict(), args.path)
            saves.append({"step": step, "s": round(time.perf_counter() - t, 3)})
        torch.cuda.nvtx.range_pop()
    wall = time.perf_counter() - started
    size = os.path.getsize(args.path) if os.path.exists(args.path) else 0
    if os.path.exists(args.path):
        os.remove(args.path)

    result = {"steps": args.steps, "params_m": round(params / 1e6, 2),
              "checkpoint_mb": round(size / 2**20, 1), "saves": saves,
              "ms_per_step": round(wall / args.steps * 1e3, 3),
              "mean_loss": round(running / args.steps, 5)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
