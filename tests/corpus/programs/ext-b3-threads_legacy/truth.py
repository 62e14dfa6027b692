"""Truth figures for ext-b3-threads_legacy (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
kernels, their streams and grid sizes, the sum of kernel time over the time of their
union (1: one after another; 4: the four threads' kernels fully overlapped), the
memsets and their streams.
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
    "kernels": "serialized by the legacy stream",
    "tell_first": "The legacy default stream serializes the four threads' streams."
}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    k = r.q("select start, end, streamId, gridX from CUPTI_ACTIVITY_KIND_KERNEL")
    a = np.array([(s, e) for s, e, *_ in k], dtype=np.int64)
    u = union(a)
    m["kernels"] = len(k)
    m["kernel_streams"] = len({s for _, _, s, _ in k})
    m["grids"] = sorted({g for *_, g in k})
    m["kernel_time_over_union"] = round(float((a[:, 1] - a[:, 0]).sum() / (u[:, 1] - u[:, 0]).sum()), 2)
    m["memsets"] = len(r.q("select 1 from CUPTI_ACTIVITY_KIND_MEMSET"))
    m["memset_streams"] = len({s for (s,) in r.q("select distinct streamId from CUPTI_ACTIVITY_KIND_MEMSET")})
    return {"program": "ext-b3-threads_legacy", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
