"""Truth figures for ext-b3-noranges_train (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
the batch uploads (host-to-device copies of 64x3x96x96 floats: one an iteration), the
program's NVTX ranges (none), and the GPU's busy share from the third upload to the
last GPU work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch3"
README = {
    "iterations": 41,
    "gpu_idle_pct": 89,
    "hta_idle_pct": 89.1,
    "hta_host_wait_pct_of_idle": 99,
    "tell_first": "Input-bound: the GPU waits for the Dataset's numpy __getitem__ in the main process."
}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    up = sorted(c["start"] for c in r.memcpys(0)
                if c["kind"] == "Host-to-Device" and c["bytes"] == 64 * 3 * 96 * 96 * 4)
    m["batch_uploads"] = len(up)
    m["nvtx_ranges"] = len(r.ranges(r"^(?!cublas)"))
    # from the 3rd batch upload to the last GPU work: the GPU's busy share
    lo, hi = up[2], int(r.gpu_intervals(0)[:, 1].max())
    m["from_upload_3"] = {"window_ms": ms(hi - lo), "busy_pct": pct(r.busy_ns(lo, hi, 0), hi - lo)}
    return {"program": "ext-b3-noranges_train", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
