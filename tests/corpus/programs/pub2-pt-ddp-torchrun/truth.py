"""Truth figures for pub2-pt-ddp-torchrun (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

pytorch/examples distributed/ddp-tutorial-series/multigpu_torchrun.py under torchrun, two
ranks: DDP over a Linear(20, 1), 10 epochs of 32 steps a rank (2,048 random samples,
DistributedSampler, batch 32), a snapshot (torch.save) by rank 0 after epochs 0 and 5.
No NVTX. Steps: each rank's step begins with the upload of its batch, a host-to-device
copy of 2,560 bytes (32 x 20 float32, from the DataLoader's pinned batch; the 128-byte
targets follow).

Figures: tests/corpus/truth_torchrun_steps.py.

And ``input`` per device: the window's GPU idle time that ends where a batch upload
begins (within 2 us: the main thread fetching, collating and pinning the next batch,
num_workers=0) against the rest (``other_idle_pct``: launches, DDP and optimizer
Python); ``epoch_boundaries``: the steps over 3x the median (an epoch's start: the
sampler's set_epoch, the extra next(iter(...)) for the batch size, the print, rank 0's
snapshot) and their share of the window."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torchrun_steps import SKIP, job_figures  # noqa: E402
from truthlib import Report, pct  # noqa: E402

BATCH_BYTES = 32 * 20 * 4      # one rank's batch of inputs: 32 x 20 float32
TOUCH_NS = 2_000


def step_starts(r: Report, dev: int) -> list[int]:
    """The rank's steps: the uploads of its batches (host-to-device, BATCH_BYTES)."""
    return [m["start"] for m in r.memcpys(dev)
            if m["kind"] == "Host-to-Device" and m["bytes"] == BATCH_BYTES]


def input_split(r: Report, lo: int, hi: int, starts: dict[int, list[int]]) -> dict:
    """Per device: idle in [lo, hi) that ends where a batch upload begins (the host
    loading the next batch) and the rest; the long steps (epoch boundaries)."""
    out = {}
    for dev, st in starts.items():
        up = np.array(st, dtype=np.int64)
        gaps = r.idle_gaps(lo, hi, dev)
        k = np.searchsorted(up, gaps[:, 1] - TOUCH_NS)
        hit = (k < len(up)) & (up[np.minimum(k, len(up) - 1)] <= gaps[:, 1] + TOUCH_NS)
        span = gaps[:, 1] - gaps[:, 0]
        d = np.diff(st[SKIP:])
        long_ = d > 3 * np.median(d)
        out[str(dev)] = {"input_idle_pct": pct(int(span[hit].sum()), hi - lo),
                         "other_idle_pct": pct(int(span[~hit].sum()), hi - lo),
                         "input_stretches": int(hit.sum()),
                         "epoch_boundaries": int(long_.sum()),
                         "epoch_boundaries_pct": pct(int(d[long_].sum()), hi - lo)}
    return {"input": out}


def main(path: str) -> dict:
    return job_figures(path, step_starts, input_split)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
