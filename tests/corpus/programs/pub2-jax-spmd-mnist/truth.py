"""Truth figures for pub2-jax-spmd-mnist (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

JAX's examples/spmd_mnist_classifier_fromscratch.py on synthetic MNIST, 3 epochs: one
process drives both GPUs through a mesh of 2 devices (axis "batch", explicit sharding);
each step cuts a 128-row numpy batch, device_puts it sharded (64 rows a GPU), and calls
the jitted train_step (params replicated, donated): XLA inserts the gradient all-reduce
(NCCL). After each epoch the jitted accuracy() runs on the whole train and test sets
(resharded from numpy), and after epochs 1 and 2 one more train_step runs outside the
set_mesh context on a new stream's first batch. No NVTX (XLA's domain TSL excluded).

Steps, per device: the uploads of the step's images, host-to-device copies of
``IMAGE_BYTES`` (64 x 784 float32; the 2,560-byte labels follow; the evaluations upload
other sizes). Also per device: the CUDA graph executions (XLA command buffers) by graph
and the NCCL kernels.

Steady window (device 0's steps): from the first step after the last compiler run or
module load that falls between steps (first-use work of the evaluation done) to the
last step. Per device in it: ``busy_pct`` (kernels, copies, memsets, graph executions),
``nccl_pct`` and ``nccl_exposed_pct`` (NCCL kernel time with no other work of the device
under it); its idle split by what ends each stretch: ``input_idle_pct`` (a batch upload
begins within 2 us: the host cutting the numpy batch and JAX staging it),
``eval_idle_pct`` (the idle inside step periods over 5 ms: the evaluations),
``other_idle_pct`` (the rest: jit dispatch after the upload, gaps inside the step);
medians over the short periods: ``step_period_us``, ``busy_us_per_step``,
``nccl_kernels_per_step``, ``h2d_per_step``, ``h2d_src``; ``d2h_in_short_steps``.
``step_skew_us_median``: device 1's step start minus device 0's (one host dispatches
both). Host: module loads, allocations, syncs and launches of the process in the window
and the launching threads (truth_jax). Compilation: truth_jax.compile_report against
device 0's steps. Capture check (truth_jax.capture_health): an incomplete export is an
error (exit 1).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import Report, clipped_ns, iv, ms, overlap_ns, pct  # noqa: E402

IMAGE_BYTES = 64 * 784 * 4          # a device's half of a 128-row batch of images
LONG_NS = 5_000_000                 # a step period over 5 ms holds an evaluation
TOUCH_NS = 2_000
NCCL = re.compile(r"nccl", re.IGNORECASE)


def step_starts(r: Report, dev: int) -> list[int]:
    return [m["start"] for m in r.memcpys(dev)
            if m["kind"] == "Host-to-Device" and m["bytes"] == IMAGE_BYTES]


def device_figures(r: Report, dev: int, st: list[int], lo: int, hi: int) -> dict:
    win = hi - lo
    allgpu = r.gpu_intervals(dev)
    kernels = r.kernels(dev)
    nccl = iv([k for k in kernels if NCCL.search(k[2])])
    other = iv([k for k in kernels if not NCCL.search(k[2])] + r.graph_launches(dev)
               + [(m["start"], m["end"]) for m in r.memcpys(dev)])
    busy = clipped_ns(allgpu, lo, hi)
    nccl_ns = clipped_ns(nccl, lo, hi)
    up = np.array(sorted(m["start"] for m in r.memcpys(dev) if m["kind"] == "Host-to-Device"),
                  dtype=np.int64)
    s = np.array(st, dtype=np.int64)
    inp = ev = oth = 0
    for a, b in r.idle_gaps(lo, hi, dev).tolist():
        k = int(np.searchsorted(s, a, side="right")) - 1          # the step period it is in
        period = (s[k + 1] - s[k]) if 0 <= k < len(s) - 1 else 0
        j = int(np.searchsorted(up, b - TOUCH_NS))
        if j < len(up) and up[j] <= b + TOUCH_NS and period <= LONG_NS:
            inp += b - a
        elif period > LONG_NS:
            ev += b - a
        else:
            oth += b - a
    short = [(a, b) for a, b in zip(st, st[1:]) if lo <= a < hi and b - a <= LONG_NS]
    h2d = [m for m in r.memcpys(dev) if m["kind"] == "Host-to-Device"]
    d2h = np.array(sorted(m["start"] for m in r.memcpys(dev) if m["kind"] == "Device-to-Host"),
                   dtype=np.int64)
    nst = np.array(sorted(k[0] for k in kernels if NCCL.search(k[2])), dtype=np.int64)
    hs = np.array([m["start"] for m in h2d], dtype=np.int64)
    count = lambda xs, a, b: int(np.searchsorted(xs, b) - np.searchsorted(xs, a))  # noqa: E731
    med = lambda xs: float(np.median(xs)) if xs else 0.0  # noqa: E731
    return {
        "busy_pct": pct(busy, win), "idle_pct": pct(win - busy, win),
        "nccl_pct": pct(nccl_ns, win),
        "nccl_exposed_pct": pct(nccl_ns - overlap_ns(nccl, other, lo, hi), win),
        "input_idle_pct": pct(inp, win), "eval_idle_pct": pct(ev, win),
        "other_idle_pct": pct(oth, win),
        "short_periods": len(short),
        "step_period_us": round(med([b - a for a, b in short]) / 1e3, 1),
        "busy_us_per_step": round(med([clipped_ns(allgpu, a, b) for a, b in short]) / 1e3, 1),
        "nccl_kernels_per_step": int(med([count(nst, a, b) for a, b in short])),
        "nccl_kernel_names": sorted({k[2] for k in kernels if NCCL.search(k[2])})[:5],
        "h2d_per_step": int(med([count(hs, a, b) for a, b in short])),
        "h2d_src": sorted({m["src"] for m in h2d if lo <= m["start"] < hi}),
        "d2h_in_short_steps": sum(count(d2h, a, b) for a, b in short),
    }


def main() -> int:
    r = Report(sys.argv[1])
    pid = tj.main_pid(r)
    devices = r.devices()
    out: dict = {"capture": tj.capture_health(r), "devices": devices,
                 "processes_with_gpu_work": len(r.processes_with_gpu_work()),
                 "result": tj.manifest_result(sys.argv[1]), "per_device": {}}
    starts = {d: step_starts(r, d) for d in devices}
    for d in devices:
        counts = tj.graph_counts(tj.graph_execs(r, d))
        out["per_device"][str(d)] = {
            "steps": len(starts[d]),
            "graph_executions_by_graph": {str(k): v for k, v in list(counts.items())[:8]},
            "nccl_kernels": sum(1 for k in r.kernels(d) if NCCL.search(k[2]))}
    st = starts.get(0, [])
    out["iterations"] = len(st)
    if len(st) < 10:
        return tj.finish(out)
    loads = [a for a, *_ in tj.api_rows(r, tj.MODULE_LOAD, pid)]
    runs = tj.compiler_runs(r, pid)
    inside = [a for a in loads if st[0] <= a < st[-1]] + \
             [x["end"] for x in runs if st[0] <= x["start"] < st[-1]]
    first = max(2, tj.steps_before(max(inside), st)) if inside else 2
    lo, hi = st[first], st[-1]
    periods = np.diff(st)
    out["long_periods_ms"] = {str(i): ms(p) for i, p in enumerate(periods) if p > LONG_NS}
    out["steady"] = {"first_step": first, "window_ms": ms(hi - lo),
                     "host_calls": tj.host_calls_in(r, pid, lo, hi),
                     "launching_threads": tj.launching_threads(r, pid, lo, hi)}
    for d in devices:
        if len(starts[d]) >= 10:
            out["per_device"][str(d)] |= device_figures(r, d, starts[d], lo, hi)
    if len(devices) == 2 and len(starts[devices[1]]) == len(st):
        skew = np.array(starts[devices[1]], dtype=np.int64) - np.array(st, dtype=np.int64)
        out["step_skew_us_median"] = round(float(np.median(skew[first:])) / 1e3, 1)
    out["compilation"] = tj.compile_report(r, pid, st, lo, hi)
    return tj.finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
