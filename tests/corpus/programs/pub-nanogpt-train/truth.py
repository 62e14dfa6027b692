"""Truth figures for pub-nanogpt-train (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (nanoGPT train.py, eager) has no NVTX ranges of its own (the only ranges are
CUB's and cuBLAS's). Its GPU work is found from the kernels:

* Forward passes: every forward of the GPT starts with the two embedding lookups, a pair
  of back-to-back ``vectorized_gather_kernel`` kernels (token and position embedding),
  and no other code launches that kernel: ``forwards`` counts the pairs (their first
  kernel's start is the forward's start).
* Training steps: a forward followed (before the next forward) by the loss's backward,
  the one ``nll_loss_backward_reduce_cuda_kernel_2d`` kernel of a step: ``train_steps``.
  The others are estimate_loss()'s evaluation forwards: ``eval_forwards``.
* Checkpoint saves (torch.save of model and AdamW state): bursts of device-to-pageable
  copies (copies under 50 ms apart form one burst): ``save_bursts``, and their copies.

Steady window: from the start of the 3rd training step's forward (index 2) to the end of
the last GPU work of the capture (the last step's optimizer); it holds the evaluations
and saves of iterations 25 and 50. Figures of the window (% of it):
  * ``gpu_busy_pct``: the union of kernels, copies and memsets.
  * The window's GPU idle stretches, each classified once, in this order:
    - ``save_idle_pct``: stretches inside a save's span (from a burst's first pageable
      copy to the first kernel after its last one);
    - ``input_idle_pct``: stretches that end where a host-to-device copy from pinned
      memory begins (a batch upload: x and y of get_batch, which re-opens the memmap,
      gathers 64 windows on the host, stacks and pins them while the GPU waits); of
      which ``input_idle_train_pct`` in training steps and ``input_idle_eval_pct`` in
      evaluation batches (those begin where the previous batch's loss.item() copy ended:
      a sync, then get_batch);
    - ``sync_idle_pct``: other stretches that begin where a device-to-host copy ended
      (within 2 us: a loss.item());
    - ``other_idle_pct``: the rest (gaps between launches), of which
      ``other_idle_train_pct`` inside training steps.
  * ``train_time_pct``, ``eval_time_pct``, ``save_time_pct``: the window's time in
    training steps (from a step's forward to the next forward, or to the window's end),
    in evaluation batches (idem, save spans taken out), in save spans.
Per steady training step (the 3rd on; a step's segment ends at the next forward, so the
evaluations and saves fall in evaluation segments; a step whose segment held either
would be left out: ``normal_steps`` counts those kept; medians): ``step_ms_median``, ``step_busy_pct_median``, ``kernels_per_step``,
``step_input_gap_ms_median`` (the idle stretch before the batch upload),
``step_other_idle_pct_median`` (idle of the step outside that stretch).
Also: the first training step's length (start-up: cuBLAS/cuDNN first use), module
loads (cuLibraryLoadData/cuModuleLoad*) in the window, cudaMalloc/cudaFree/
cudaHostAlloc calls in the window, loss copies (device-to-pinned: loss.item()) in the
window, idle stretches of the window by length (``idle_ms_in_gaps_under``: ms of idle in
stretches shorter than 50 us, 100 us, 1 ms; ``idle_ms``: all),
cudaStreamSynchronize calls in the window, cuDNN kernels (``cudnn*``: the SDPA flash kernels) in the window, the streams with
kernels, the launching threads and processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, ms, pct, union  # noqa: E402

SKIP = 2
TOUCH_NS = 2_000
BURST_NS = 50_000_000


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ks = r.kernels(dev)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    # forwards: pairs of back-to-back gather kernels (token + position embedding)
    fwd = []
    i = 0
    while i < len(ks):
        if ks[i][2] == "vectorized_gather_kernel":
            fwd.append(ks[i][0])
            i += 2 if i + 1 < len(ks) and ks[i + 1][2] == "vectorized_gather_kernel" else 1
        else:
            i += 1
    bwd = np.array([k[0] for k in ks if k[2].startswith("nll_loss_backward")], dtype=np.int64)
    end_all = int(max(k[1] for k in ks))
    segs = []                       # (start, end, is_train)
    for j, a in enumerate(fwd):
        b = fwd[j + 1] if j + 1 < len(fwd) else end_all
        train = bool(((bwd >= a) & (bwd < b)).any())
        segs.append((a, b, train))
    train = [s for s in segs if s[2]]
    out: dict = {"forwards": len(fwd), "train_steps": len(train),
                 "eval_forwards": len(fwd) - len(train),
                 "nll_loss_backward_kernels": int(len(bwd)), "kernels": len(ks)}
    lo, hi = train[SKIP][0], end_all
    win = hi - lo

    cps = r.memcpys(dev)
    pageable = sorted((c["start"], c["end"]) for c in cps
                      if c["kind"] == "Device-to-Host" and c["dst"] == "Pageable")
    bursts: list[list[int]] = []
    for a, b in pageable:
        if bursts and a - bursts[-1][1] < BURST_NS:
            bursts[-1][1] = max(bursts[-1][1], b)
            bursts[-1][2] += 1
        else:
            bursts.append([a, b, 1])
    spans = []
    for a, b, _n in bursts:
        k = int(np.searchsorted(starts, b, side="left"))
        spans.append((a, int(starts[k]) if k < len(starts) else end_all))
    span_iv = np.array(spans, dtype=np.int64).reshape(-1, 2)
    uploads = {c["start"] for c in cps if c["kind"] == "Host-to-Device" and c["src"] == "Pinned"}
    d2h_ends = np.array(sorted(c["end"] for c in cps if c["kind"] == "Device-to-Host"),
                        dtype=np.int64)
    train_iv = np.array([(a, b) for a, b, t in segs if t], dtype=np.int64)
    eval_iv = np.array([(a, b) for a, b, t in segs if not t], dtype=np.int64)

    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    cls = {"save": 0, "input_train": 0, "input_eval": 0, "sync": 0, "other_train": 0,
           "other_eval": 0}
    for a, b in r.idle_gaps(lo, hi, dev).tolist():
        n = b - a
        in_train = clipped_ns(train_iv, a, b) > 0
        if clipped_ns(span_iv, a, b) > 0:
            cls["save"] += n
        elif b in uploads:
            cls["input_train" if in_train else "input_eval"] += n
        else:
            k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
            if k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
                cls["sync"] += n
            else:
                cls["other_train" if in_train else "other_eval"] += n

    # per steady training step (one whose segment held a save or an evaluation would be
    # left out; none does: a step ends at the next forward)
    steady = [(a, b) for a, b, t in segs if t and a >= lo]
    normal = [(a, b) for a, b in steady if clipped_ns(span_iv, a, b) == 0
              and not any(a <= e[0] < b for e in eval_iv.tolist())]
    per = []
    for a, b in normal:
        gaps = r.idle_gaps(a, b, dev)
        inp = sum(int(y - x) for x, y in gaps.tolist() if y in uploads)
        idle = int((gaps[:, 1] - gaps[:, 0]).sum()) if len(gaps) else 0
        per.append((b - a, clipped_ns(u, a, b), inp, idle - inp,
                    int(((starts >= a) & (starts < b)).sum())))
    per_a = np.array(per, dtype=np.int64)

    gaps_all = r.idle_gaps(lo, hi, dev)
    gl = gaps_all[:, 1] - gaps_all[:, 0]

    def seg_time(segs_iv: np.ndarray) -> int:
        """Time of the window in these segments, save spans taken out."""
        return sum(max(0, min(b, hi) - max(a, lo)) - clipped_ns(span_iv, max(a, lo), min(b, hi))
                   for a, b in segs_iv.tolist() if b > lo)

    api = r.api_calls(".", lo, hi)
    launch_threads = r.thread_of_launches()
    out |= {
        "steady_train_steps": len(steady),
        "steady_window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "save_idle_pct": pct(cls["save"], win),
        "input_idle_pct": pct(cls["input_train"] + cls["input_eval"], win),
        "input_idle_train_pct": pct(cls["input_train"], win),
        "input_idle_eval_pct": pct(cls["input_eval"], win),
        "sync_idle_pct": pct(cls["sync"], win),
        "other_idle_pct": pct(cls["other_train"] + cls["other_eval"], win),
        "other_idle_train_pct": pct(cls["other_train"], win),
        "train_time_pct": pct(seg_time(train_iv), win),
        "eval_time_pct": pct(seg_time(eval_iv), win),
        "save_time_pct": pct(clipped_ns(span_iv, lo, hi), win),
        "save_bursts": len(bursts),
        "save_copies": [n for *_, n in bursts],
        "save_span_ms": [ms(b - a) for a, b in spans],
        "normal_steps": len(per),
        "step_ms_median": ms(float(np.median(per_a[:, 0]))),
        "step_busy_pct_median": round(float(np.median(100.0 * per_a[:, 1] / per_a[:, 0])), 2),
        "step_input_gap_ms_median": ms(float(np.median(per_a[:, 2]))),
        "step_input_gap_pct_median": round(float(np.median(100.0 * per_a[:, 2] / per_a[:, 0])), 2),
        "step_other_idle_pct_median": round(float(np.median(100.0 * per_a[:, 3] / per_a[:, 0])), 2),
        "kernels_per_step": int(np.median(per_a[:, 4])),
        "first_train_step_ms": ms(train[0][1] - train[0][0]),
        "module_loads_in_window": sum(1 for c in api if c[2].startswith(("cuLibraryLoad", "cuModuleLoad"))),
        "alloc_calls_in_window": sum(1 for c in api if c[2] in ("cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost")),
        "loss_copies_in_window": sum(1 for c in cps if c["kind"] == "Device-to-Host"
                                     and c["dst"] == "Pinned" and lo <= c["start"] < hi),
        "stream_sync_calls_in_window": sum(1 for c in api if c[2] == "cudaStreamSynchronize"),
        "idle_ms": ms(win - busy),
        "idle_ms_in_gaps_under": {f"{int(t / 1000)}us": ms(float(gl[gl < t].sum()))
                                  for t in (50_000, 100_000, 1_000_000)},
        "cudnn_kernels_in_window": sum(1 for k in ks if k[2].startswith("cudnn") and lo <= k[0] < hi),
        "streams": len({k[3] for k in ks}),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
        "launching_threads": len(launch_threads),
        "devices": len(r.devices()),
    }
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1) + "\n")
