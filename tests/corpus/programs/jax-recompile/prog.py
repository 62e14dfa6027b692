"""A jitted training step recompiled twice mid-run: the batch shape changes at steps 20, 40.

What it does: a 6-layer MLP (4096 wide, bf16, ~101M parameters) trained with one
``jax.jit(train_step, donate_argnums=0)`` step (value_and_grad + hand-written SGD), 60
steps, no per-step sync, one block_until_ready at the end. The batches are sequences of
16 tokens; the batch size grows during the run, as with bucketed or curriculum data:
256 sequences for steps 0-19, 384 for steps 20-39, 512 for steps 40-59 (4096, 6144, 8192
rows a step). The three batches are made on the device before the loop.

What is wrong with it (deliberately): jit specialises on shapes, so the first call with a
new batch shape (steps 20 and 40) traces, lowers and compiles the step again: XLA
compiles (an XlaCompile range, domain TSL) and autotunes the new GEMM shapes, several
hundred ms to a few seconds each, on the host, while the GPU runs out of queued work and
waits. The start-up compile at step 0 is expected; the two in the steady state are the
finding (compilation, 2 occurrences). Each step is GPU-heavy (6 x rows x 101M FLOP:
2.5 / 3.7 / 4.9 TFLOP, ~4-12 ms on an H100), so between compiles the GPU is busy.

Iterations: 60 calls of jit_train_step (XlaModule ranges); the steps of each shape run as
their own XLA command buffer (CUDA graph), the first of each shape possibly un-graphed.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

LR = 1e-3
SEQ = 16


def init_params(key, width: int, layers: int):
    keys = jax.random.split(key, layers)
    scale = 1.0 / np.sqrt(width)
    return [(jax.random.normal(k, (width, width), jnp.float32) * scale).astype(jnp.bfloat16)
            for k in keys]


def make_batch(key, batch: int, width: int):
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (batch, SEQ, width), jnp.bfloat16)
    y = jax.random.normal(ky, (batch, SEQ, width), jnp.bfloat16)
    return x, y


def loss_fn(params, x, y):
    h = x
    for w in params[:-1]:
        h = jax.nn.relu(h @ w)
    out = h @ params[-1]
    return jnp.mean(jnp.square(out.astype(jnp.float32) - y.astype(jnp.float32)))


@partial(jax.jit, donate_argnums=(0,))
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return [p - LR * g for p, g in zip(params, grads)], loss


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--change-every", type=int, default=20)
    parser.add_argument("--batches", default="256,384,512")
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "gpu" and not args.allow_cpu:
        raise SystemExit(f"no GPU backend (found {jax.default_backend()})")
    sizes = [int(b) for b in args.batches.split(",")]

    kp, kd = jax.random.split(jax.random.key(0))
    params = jax.jit(partial(init_params, width=args.width, layers=args.layers))(kp)
    data = [jax.jit(partial(make_batch, batch=b, width=args.width))(k)
            for b, k in zip(sizes, jax.random.split(kd, len(sizes)))]
    jax.block_until_ready((params, data))    # set-up done before the loop

    started = time.perf_counter()
    loss = None
    shapes = []
    for step in range(args.steps):
        x, y = data[min(step // args.change_every, len(data) - 1)]
        if not shapes or shapes[-1][1] != x.shape[0]:
            shapes.append((step, x.shape[0]))     # a new shape: this call recompiles
        params, loss = train_step(params, x, y)   # no sync: async dispatch
    jax.block_until_ready((params, loss))
    wall = time.perf_counter() - started

    n_params = args.layers * args.width * args.width
    result = {"program": "jax-recompile", "steps": args.steps, "wall_s": round(wall, 3),
              "ms_per_step": round(wall / args.steps * 1e3, 3),
              "shape_changes": [{"step": s, "batch": b, "rows": b * SEQ} for s, b in shapes],
              "recompiles_in_loop": len(shapes) - 1,
              "flop_per_step": [6 * b * SEQ * n_params for _, b in shapes],
              "final_loss": float(loss), "device": str(jax.devices()[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
