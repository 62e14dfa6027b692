"""A jitted JAX training loop that reads the loss back to the host after every step.

What it does: an MLP regressor of 4 fp32 layers of width 1024 (1024 -> 1024 -> 1024 ->
1024 -> 1024, ReLU between, 4.2 M parameters, 16.8 MB, held as a list of (W, b) arrays;
matmuls at ``jax_default_matmul_precision = "highest"``, i.e. true fp32, no TF32) learns
a fixed random teacher (y = tanh(x @ T / sqrt(1024))) by one ``jax.jit`` step:
``jax.value_and_grad`` of the mean squared error, then a hand-written SGD update
(p - lr * g, no optax), parameters DONATED (``donate_argnums=0``; the learning rate is a
static argument, so no scalar is uploaded per call). The data are 8 batches of 2048 x
1024 made on the device once, by one jitted call, before the loop (no host input); step
i uses batch i % 8. 200 steps.

What is wrong with it (deliberately): the habit of logging every step. After each call
of the step the loop does ``loss_value = float(loss)``, checks it is finite and appends
it to a Python list. ``float()`` of a device array waits for the step to finish and
copies the 4-byte loss to the host, so the host cannot run ahead of the GPU: every step
the GPU finishes, the loss is copied back, and the GPU sits idle while the host wakes
from the wait, returns through ``float()``, runs the loop and dispatches the next step
(sync-wait). JAX's asynchronous dispatch would otherwise keep the GPU fed.

Designed figures (H100): a step is 6 x 2048 x 4 x 1024^2 = 51.5 GFLOP of fp32 GEMMs at
~35-45 TFLOP/s (jax-host-input's fp32 HIGHEST step ran at ~38 TFLOP/s on the capture
machine) plus ~0.05 ms of element-wise work and the SGD update: ~1.2-1.55 ms of GPU work,
one XLA command buffer (CUDA graph). The GPU idle after it, per step, by the same JAX
path measured in jax-host-loop's capture: ~0.3 ms from the step's end to the start of the
loss copy (PjRt enqueues the device-to-host copy from a worker thread once the host
learns the step is done), a few us of copy, ~0.05-0.3 ms until the main thread wakes
and leaves ``float()``, ~0.1-0.25 ms of Python and jit dispatch under tracing, ~0.02 ms
of launch latency: ~0.45-0.9 ms. Sync-wait share = gap / (step + gap) = 0.45 / 2.0 ..
0.9 / 2.1 = ~22-43 % (central ~30 %) of the steady state; the GPU is busy the rest.
RESULT's ms_per_step (steps 1.., step 0's compile excluded) should be ~1.7-2.4 ms.
The fix: keep the losses on the device and read them back every N steps or once at the
end (e.g. accumulate ``loss`` arrays in the list and ``jax.device_get`` them later).

Nothing else is wrong: batches are device-resident (no uploads in the loop), one graph
launch a step (not launch-bound), the host's own work per step is a few tens of us, and
XLA compiles the step once, at its first call (start-up). No NVTX.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np


def init_params(key, width: int, layers: int):
    """He-initialised hidden layers, a LeCun-initialised output layer, zero biases."""
    params = []
    for i, k in enumerate(jax.random.split(key, layers)):
        gain = 2.0 if i < layers - 1 else 1.0
        w = jax.random.normal(k, (width, width), jnp.float32) * np.sqrt(gain / width)
        params.append((w, jnp.zeros((width,), jnp.float32)))
    return params


def make_dataset(key, n: int, batch: int, width: int):
    """n (x, y) batches for a fixed random teacher, made on the device in one call."""
    kt, kd = jax.random.split(key)
    teacher = jax.random.normal(kt, (width, width), jnp.float32) / np.sqrt(width)
    data = []
    for k in jax.random.split(kd, n):
        x = jax.random.normal(k, (batch, width), jnp.float32)
        data.append((x, jnp.tanh(x @ teacher)))
    return data


def mlp(params, x):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return h @ w + b


def loss_fn(params, x, y):
    return jnp.mean(jnp.square(mlp(params, x) - y))


@partial(jax.jit, donate_argnums=(0,), static_argnames=("lr",))
def train_step(params, x, y, lr: float):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    return params, loss


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batches", type=int, default=8, help="device-resident batches")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--precision", default="highest",
                        help="jax_default_matmul_precision (highest = true fp32)")
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "gpu" and not args.allow_cpu:
        raise SystemExit(f"no GPU backend (found {jax.default_backend()})")
    jax.config.update("jax_default_matmul_precision", args.precision)

    kp, kd = jax.random.split(jax.random.key(0))
    params = jax.jit(partial(init_params, width=args.width, layers=args.layers))(kp)
    batches = jax.jit(partial(make_dataset, n=args.batches, batch=args.batch,
                              width=args.width))(kd)
    jax.block_until_ready((params, batches))          # set-up done before the loop

    history: list[float] = []
    started = time.perf_counter()
    first_done = started
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        params, loss = train_step(params, x, y, lr=args.lr)
        loss_value = float(loss)                        # log every step: waits for the GPU
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"loss is {loss_value} at step {step}")
        history.append(loss_value)
        if step == 0:
            first_done = time.perf_counter()            # step 0 includes XLA's compile
    wall = time.perf_counter() - started

    host_params = jax.device_get(params)
    checksum = sum(float(np.sum(w, dtype=np.float64)) + float(np.sum(b, dtype=np.float64))
                   for w, b in host_params)
    n_params = sum(int(w.size) + int(b.size) for w, b in host_params)
    result = {"program": "jax-step-sync", "steps": args.steps, "batch": args.batch,
              "width": args.width, "layers": args.layers, "precision": args.precision,
              "donated": True, "wall_s": round(wall, 3),
              "first_step_s": round(first_done - started, 3),
              "ms_per_step": round((started + wall - first_done)
                                   / max(args.steps - 1, 1) * 1e3, 3),
              "flop_per_step": 6 * args.batch * args.layers * args.width * args.width,
              "params": n_params, "losses_logged": len(history),
              "first_loss": round(history[0], 6), "final_loss": round(history[-1], 6),
              "loss_sum": round(sum(history), 6), "checksum": round(checksum, 6),
              "device": str(jax.devices()[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
