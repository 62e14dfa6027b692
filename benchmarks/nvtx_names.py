#!/usr/bin/env python3
"""Does NVTX grouping scale with the number of distinct range names?

    python benchmarks/nvtx_names.py                    # 10k, 100k and 1M ranges
    python benchmarks/nvtx_names.py --sizes 1M --repeat 3

A real report (default: tests/data/scenarios/moe-experts-bad.sqlite, 5,184 kernels on one
thread) is loaded once; its NVTX ranges are then replaced by a HAND-BUILT frame (not a
capture): one outer range 'run' around the launching thread's work, and inside it N
back-to-back ranges on that thread tiling it, named either all alike ('op', one name) or
all differently ('blk0000001/fwd', ...: N distinct names that do not end in a number, so
nothing folds them into one iteration name, as with torch's emit_nvtx 'aten::mm, seq = 7').
Nothing else changes: same kernels, same API calls.

For each size, in one run, best of --repeat: the time of ``analyze()`` on the in-memory
trace (accounting with iteration detection, every rule, metrics, the range table) plus
rendering the result (terminal text and JSON), for one name and for N names; and their
ratio. Loading is left out: the frames are built here, not read. The target of issue 13
(item 7): the ratio stays under ~3x at 1M ranges (it grew with N before: a scan of every
range per distinct name).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from gpugap.analysis import analyze  # noqa: E402
from gpugap.report import load  # noqa: E402

DEFAULT_SOURCE = REPO / "tests" / "data" / "scenarios" / "moe-experts-bad.sqlite"


def parse_count(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def nvtx_frame(trace, n: int, distinct: bool) -> pd.DataFrame:
    """'run' (depth 0) around the launching thread's work, N ranges tiling it (depth 1)."""
    k = trace.kernels
    gtid = int(k["gtid"].mode().iloc[0])
    launch = k["api_start"][k["api_start"] >= 0].to_numpy(dtype=np.int64)
    lo, hi = int(launch.min()) - 1000, int(launch.max()) + 1000
    edges = np.linspace(lo, hi, n + 1).astype(np.int64)
    starts, ends = edges[:-1], np.maximum(edges[1:] - 1, edges[:-1])
    names = (np.array([f"blk{i:07d}/fwd" for i in range(n)], dtype=object) if distinct
             else np.full(n, "op", dtype=object))
    pid, tid = gtid >> 24 & 0xFFFFFF, gtid & 0xFFFFFF
    frame = pd.DataFrame({
        "start": np.r_[lo - 1, starts], "end": np.r_[hi + 1, ends],
        "name": np.r_[np.array(["run"], dtype=object), names],
        "domain": "", "gtid": gtid, "pid": pid, "tid": tid,
        "depth": np.r_[0, np.ones(n, dtype=np.int64)], "library": False,
        "kind": "push/pop"})
    frame["name"] = frame["name"].astype(object)
    return frame.astype(trace.nvtx.dtypes.to_dict())


def measure(trace, frame: pd.DataFrame) -> tuple[float, int]:
    from rich.console import Console

    from gpugap import jsonout
    from gpugap.render import terminal

    t = trace.replace(nvtx=frame)      # fresh object: no cached state
    gc.collect()
    t0 = time.perf_counter()
    result = analyze(t)
    terminal.render(result, Console(file=io.StringIO(), width=120))
    jsonout.dumps(result.to_dict())
    return time.perf_counter() - t0, len(result.ranges)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k,1M")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = ap.parse_args(argv)
    trace = load(args.source)
    import gpugap

    print(f"gpugap: {Path(gpugap.__file__).parent}; source: {args.source.name} "
          f"({len(trace.kernels)} kernels); NVTX frames hand-built (see --help)")
    print(f"{'ranges':>10} {'1 name':>10} {'N names':>10} {'ratio':>7} {'rows':>6}")
    results = []
    for n in (parse_count(s) for s in args.sizes.split(",")):
        one_frame, many_frame = nvtx_frame(trace, n, False), nvtx_frame(trace, n, True)
        one = min(measure(trace, one_frame)[0] for _ in range(args.repeat))
        timed = [measure(trace, many_frame) for _ in range(args.repeat)]
        many, rows = min(t for t, _ in timed), timed[0][1]
        results.append({"ranges": n, "one_name_s": round(one, 3),
                        "distinct_names_s": round(many, 3), "ratio": round(many / one, 2),
                        "table_rows": rows})
        print(f"{n:>10,} {one:>9.2f}s {many:>9.2f}s {many / one:>6.2f}x {rows:>6}",
              flush=True)
    print(json.dumps({"benchmark": "nvtx_names", "source": args.source.name,
                      "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
