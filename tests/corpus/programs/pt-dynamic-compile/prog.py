"""torch.compile'd training whose sequence length changes mid-run: recompilation in the steady state.

    python3 prog.py [--steps 60] [--lengths 128,192,256] [--change-every 20]

The model: 4 pre-norm MLP blocks (d 1024, hidden 4096, fp32) on a batch of 32
sequences, compiled with ``torch.compile(model)`` (default mode, ``dynamic`` not set),
trained with SGD on the mean square of its output. The sequence length is 128 for steps
0-19, 192 for steps 20-39 and 256 from step 40 (inputs pre-generated on the GPU).

- step 0: Dynamo + AOTAutograd + Inductor compile forward and backward for length 128
  (seconds, start-up);
- step 20: the length changes, the shape guard fails and Dynamo recompiles; with
  automatic dynamic shapes it marks the length dimension dynamic (seconds again, in the
  steady state);
- step 40: the dynamic graph should cover length 256 without compiling again (if a
  guard still specialises, a third compile happens here: one to two steady hits).

Between compiles each step is ~15-35 ms of GPU work (0.8-1.6 TFLOP of fp32 GEMMs)
ended by ``loss.item()``; a recompile is seconds of host work with the GPU idle, so
compilation dominates the steady state although it hits one or two steps.
NVTX: one range ``step N`` per step (the compiles happen inside steps 0 and 20).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

DIM, BATCH, BLOCKS = 1024, 32, 4


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, 4 * DIM)
        self.down = torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lengths", default="128,192,256")
    parser.add_argument("--change-every", type=int, default=20)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    lengths = [int(v) for v in args.lengths.split(",")]
    model = torch.nn.Sequential(*[Block() for _ in range(BLOCKS)]).to(device)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    inputs = {t: torch.randn(BATCH, t, DIM, device=device) for t in lengths}

    running, step_s = 0.0, []
    started = time.perf_counter()
    for step in range(args.steps):
        seq = lengths[min(step // args.change_every, len(lengths) - 1)]
        torch.cuda.nvtx.range_push(f"step {step}")
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = compiled(inputs[seq]).square().mean()
        loss.backward()
        opt.step()
        running += loss.item()
        step_s.append(time.perf_counter() - t)
        torch.cuda.nvtx.range_pop()
    wall = time.perf_counter() - started

    ordered = sorted(step_s)
    median = ordered[len(ordered) // 2]
    slow = [i for i, s in enumerate(step_s) if s > max(10 * median, 0.2)]
    result = {"steps": args.steps, "lengths": lengths, "change_every": args.change_every,
              "slow_steps": slow, "slow_step_s": [round(step_s[i], 2) for i in slow],
              "median_step_ms": round(median * 1e3, 3), "wall_s": round(wall, 2),
              "mean_loss": round(running / args.steps, 5)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
