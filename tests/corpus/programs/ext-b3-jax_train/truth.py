"""Truth figures for ext-b3-jax_train (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
the CUDA-graph executions (count, median duration), the window from the third to the
last and its busy share, the NVTX domains (XLA's TSL, cuBLAS: none of the program's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch3"
README = {
    "graph_launches": 60,
    "graph_ms": 11,
    "steady_busy_pct": 99,
    "xla_compile_s": 3.9,
    "tell_first": "Healthy steady state: the 60 graph launches are the iterations. XLA compilation (3.9 s) is start-up."
}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    g = r.graph_launches(0)
    m["graph_executions"] = len(g)
    m["graph_ms_median"] = ms(float(np.median([b - a for a, b, _ in g])))
    lo, hi = g[2][0], g[-1][1]
    m["graphs_3_60"] = {"window_ms": ms(hi - lo), "busy_pct": pct(r.busy_ns(lo, hi, 0), hi - lo)}
    m["nvtx_domains"] = sorted({x.domain for x in r.ranges(".")})
    return {"program": "ext-b3-jax_train", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
