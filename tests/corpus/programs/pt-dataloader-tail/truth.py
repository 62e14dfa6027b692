"""Truth figures for pt-dataloader-tail: input (between the step ranges) vs in-step idle.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step N`` (pushed inside ``for x, y in loader``, so batch
N is loaded in the gap just before ``step N``). Steady state: steps 2..59 together with
the loading before each, i.e. from the end of ``step 1`` to the end of the last step.
Input share: the GPU idle time inside the loading gaps (between one step range's end
and the next one's start), as a % of that window. In-step idle (what a launch-bound
reading would count): the GPU idle time inside the step ranges. Also given: the same
two figures on the median iteration (a cache hit), and the cache misses found (gaps
over 20 ms).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, pct, union  # noqa: E402

SKIP = 2
MISS_NS = 20_000_000


def busy_in(u: np.ndarray, a: int, b: int) -> int:
    """Busy time of the disjoint sorted intervals *u* inside [a, b)."""
    if b <= a or not len(u):
        return 0
    i = int(np.searchsorted(u[:, 1], a, side="right"))
    j = int(np.searchsorted(u[:, 0], b, side="left"))
    seg = u[i:j]
    if not len(seg):
        return 0
    return int((np.minimum(seg[:, 1], b) - np.maximum(seg[:, 0], a)).clip(min=0).sum())


def main(path: str) -> dict:
    r = Report(path)
    steps = sorted(r.ranges(r"^step \d+$"), key=lambda s: int(re.findall(r"\d+", s.name)[0]))
    out: dict = {"steps": len(steps)}
    if len(steps) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    u = union(r.gpu_intervals(dev))
    lo, hi = steps[SKIP - 1].end, steps[-1].end
    rows = []
    for i in range(SKIP, len(steps)):
        la, lb = steps[i - 1].end, steps[i].start
        sa, sb = steps[i].start, steps[i].end
        rows.append({"step": i, "load_ns": lb - la, "load_idle_ns": (lb - la) - busy_in(u, la, lb),
                     "step_ns": sb - sa, "step_idle_ns": (sb - sa) - busy_in(u, sa, sb)})
    window = hi - lo
    load_idle = sum(x["load_idle_ns"] for x in rows)
    step_idle = sum(x["step_idle_ns"] for x in rows)
    busy = busy_in(u, lo, hi)
    misses = [x["step"] for x in rows if x["load_ns"] > MISS_NS]
    hits = [x for x in rows if x["load_ns"] <= MISS_NS]
    totals = np.array([x["load_ns"] + x["step_ns"] for x in rows])
    med = rows[int(np.argsort(totals)[len(totals) // 2])]
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    out |= {
        "steady_iterations": len(rows),
        "steady_window_ms": ms(window),
        "steady_busy_pct": pct(busy, window),
        # the designed cause: the GPU idles while the training thread loads the batch
        "input_idle_pct": pct(load_idle, window),
        "input_time_pct": pct(sum(x["load_ns"] for x in rows), window),
        # what a launch-bound reading would count: idle inside the step ranges
        "in_step_idle_pct": pct(step_idle, window),
        "cache_miss_steps": misses,
        "cache_miss_count": len(misses),
        "load_ms_hit_median": ms(float(np.median([x["load_ns"] for x in hits]))) if hits else None,
        "load_ms_miss_median": ms(float(np.median([x["load_ns"] for x in rows
                                                   if x["step"] in misses]))) if misses else None,
        "step_ms_median": ms(float(np.median([x["step_ns"] for x in rows]))),
        "median_iteration": {"step": med["step"], "load_idle_ms": ms(med["load_idle_ns"]),
                             "in_step_idle_ms": ms(med["step_idle_ns"]),
                             "total_ms": ms(med["load_ns"] + med["step_ns"])},
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
