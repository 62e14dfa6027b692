"""Truth figures for pt-checkpoint: which steps save, how often, and what they cost.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step N``. Steady state: steps 2..39 (from the start of
``step 2`` to the end of the last step). A saving step is one whose device-to-host
copies total over 50 MB (torch.save copies the ~288 MB state dict; a normal step copies
only the 4-byte loss). The periodic-save share: the saving steps' time beyond the median
normal step, summed, as a % of the window; also the GPU idle inside the saving steps.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, pct, union, window_of  # noqa: E402

SKIP = 2
SAVE_BYTES = 50 * 2**20


def main(path: str) -> dict:
    r = Report(path)
    steps = sorted(r.ranges(r"^step \d+$"), key=lambda s: int(re.findall(r"\d+", s.name)[0]))
    out: dict = {"steps": len(steps)}
    if len(steps) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    u = union(r.gpu_intervals(dev))
    d2h = [c for c in r.memcpys(dev)
           if re.search(r"(?i)device.?to.?host|dtoh", str(c["kind"])) or c["kind"] == "2"]
    starts = np.array([c["start"] for c in d2h], dtype=np.int64)
    order = np.argsort(starts)
    starts = starts[order]
    nbytes = np.array([c["bytes"] for c in d2h], dtype=np.int64)[order]
    per_step = []
    for i, s in enumerate(steps):
        a, b = np.searchsorted(starts, s.start), np.searchsorted(starts, s.end)
        per_step.append({"step": i, "ns": s.ns, "d2h_bytes": int(nbytes[a:b].sum()),
                         "d2h_copies": int(b - a),
                         "idle_ns": s.ns - clipped_ns(u, s.start, s.end)})
    saves = [x["step"] for x in per_step if x["d2h_bytes"] > SAVE_BYTES]
    steady = per_step[SKIP:]
    normal = [x["ns"] for x in steady if x["step"] not in saves]
    median_normal = float(np.median(normal)) if normal else 0.0
    lo, hi = window_of(steps, SKIP)
    window = hi - lo
    steady_saves = [x for x in steady if x["step"] in saves]
    extra = sum(x["ns"] - median_normal for x in steady_saves)
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    out |= {
        "save_steps": saves,
        "save_every": sorted({b - a for a, b in zip(saves, saves[1:])}),
        "steady_save_hits": len(steady_saves),
        "steady_window_ms": ms(window),
        "steady_busy_pct": pct(clipped_ns(u, lo, hi), window),
        "normal_step_ms_median": ms(median_normal),
        "save_step_ms": [ms(x["ns"]) for x in steady_saves],
        "save_mb": [round(x["d2h_bytes"] / 2**20, 1) for x in steady_saves],
        # the designed cause: the saving steps' extra time, and their GPU idle
        "periodic_save_pct": pct(extra, window),
        "save_steps_idle_pct": pct(sum(x["idle_ns"] for x in steady_saves), window),
        "normal_steps_busy_pct": pct(sum(x["ns"] - x["idle_ns"] for x in steady
                                         if x["step"] not in saves),
                                     sum(x["ns"] for x in steady if x["step"] not in saves)),
        "d2h_copies_outside_saves": sum(x["d2h_copies"] for x in steady
                                        if x["step"] not in saves),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
