"""JAX training that checkpoints every 10 steps: device_get of ~340 MB, then np.savez.

What it does: a 4-layer MLP (4608 wide) with float32 master weights (~85M parameters,
340 MB) trained in bf16 compute (weights cast inside the step) on one device-resident
batch of 16384 x 4608 rows, with one ``jax.jit(train_step, donate_argnums=0)`` step
(value_and_grad + hand-written SGD on the float32 weights), 40 steps, no per-step sync.
After every 10th step (steps 9, 19, 29, 39, 0-based) it saves a checkpoint the simple
way: ``jax.device_get(params)`` (waits for the queued steps, then copies the 340 MB to
host numpy arrays through pageable memory) and ``np.savez(ckpt.npz)`` (CRC and write()
of 340 MB into the page cache), ~0.3-1 s on the host while the GPU has nothing queued.

What is wrong with it (deliberately): the saves are synchronous. Each one drains the
GPU (device_get), then keeps it idle for the whole file write, because the next step is
only dispatched after np.savez returns. Steps cost ~6 x 16384 x 85M = 8.4 TFLOP of bf16
GEMMs, ~12-20 ms on an H100, so 10 steps are ~0.15-0.2 s of GPU work against ~0.3-1 s
of saving: a periodic stall every 10 iterations (periodic-save). Three saves fall inside
the steady state (after steps 9, 19, 29); the fourth follows the last step, when there is
no more GPU work to delay. The device-to-host copies belong to the saves, not to the
training loop (they are not a separate pageable-copy problem of the steps).

Iterations: 40 calls of jit_train_step (XlaModule ranges), each one XLA command buffer
(CUDA graph) once recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

LR = 1e-3


def init_params(key, width: int, layers: int):
    keys = jax.random.split(key, layers)
    scale = 1.0 / np.sqrt(width)
    return [jax.random.normal(k, (width, width), jnp.float32) * scale for k in keys]


def make_batch(key, batch: int, width: int):
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (batch, width), jnp.bfloat16)
    y = jax.random.normal(ky, (batch, width), jnp.bfloat16)
    return x, y


def loss_fn(params, x, y):
    h = x
    for w in params[:-1]:
        h = jax.nn.relu(h @ w.astype(jnp.bfloat16))
    out = h @ params[-1].astype(jnp.bfloat16)
    return jnp.mean(jnp.square(out.astype(jnp.float32) - y.astype(jnp.float32)))


@partial(jax.jit, donate_argnums=(0,))
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return [p - LR * g for p, g in zip(params, grads)], loss


def save_checkpoint(params, path: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    host = jax.device_get(params)                 # waits for the queued steps, then D2H
    t1 = time.perf_counter()
    np.savez(path, **{f"w{i}": a for i, a in enumerate(host)})
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--width", type=int, default=4608)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16384)
    parser.add_argument("--path", default="ckpt.npz")
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "gpu" and not args.allow_cpu:
        raise SystemExit(f"no GPU backend (found {jax.default_backend()})")

    kp, kd = jax.random.split(jax.random.key(0))
    params = jax.jit(partial(init_params, width=args.width, layers=args.layers))(kp)
    x, y = jax.jit(partial(make_batch, batch=args.batch, width=args.width))(kd)
    jax.block_until_ready((params, x, y))

    started = time.perf_counter()
    loss = None
    saves = []
    for step in range(args.steps):
        params, loss = train_step(params, x, y)   # no sync: async dispatch
        if (step + 1) % args.save_every == 0:
            get_s, write_s = save_checkpoint(params, args.path)
            saves.append({"after_step": step, "device_get_s": round(get_s, 3),
                          "savez_s": round(write_s, 3)})
    jax.block_until_ready((params, loss))
    wall = time.perf_counter() - started
    size = os.path.getsize(args.path)
    os.remove(args.path)                          # keep the capture folder small

    n_params = args.layers * args.width * args.width
    result = {"program": "jax-checkpoint", "steps": args.steps, "wall_s": round(wall, 3),
              "save_every": args.save_every, "saves": saves, "ckpt_bytes": size,
              "param_mb": round(n_params * 4 / 2**20, 1),
              "flop_per_step": 6 * args.batch * n_params,
              "final_loss": float(loss), "device": str(jax.devices()[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
