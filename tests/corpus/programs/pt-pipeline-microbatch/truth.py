"""Truth figures for pt-pipeline-microbatch, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the NVTX ranges ``step N`` (one process drives both GPUs). The host runs
ahead of the GPUs (no sync in the loop), so each step's GPU work is found through its
CUDA calls: the kernels, copies and memsets whose launching call (any thread of the
process: autograd's device threads launch backward work) started inside the step's
range. Steady window: from the first GPU start of step 2's work to the last GPU end of
the last step's work. Per device: busy %, and the time it was idle while the other
device was busy (cross-device wait: its queued work waits for the other GPU), as % of
the window; the verdict's share is that figure (designed a few % at most: the healthy control).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch_multi import one_process_figures  # noqa: E402


def gemm_medians(ops, lo: int, hi: int, devices) -> dict:
    """Per device: the median GEMM (nvjet) kernel time in [lo, hi), in us."""
    gemm = {}
    for d in devices:
        durs = [b - a for a, b, dd, _p, _c, n in ops
                if dd == d and lo <= a < hi and n.startswith("nvjet")]
        if durs:
            gemm[str(d)] = round(float(np.median(durs)) / 1e3, 1)
    return {"gemm_us_median": gemm}     # the two stages' speed (their balance sets the waits)


def main(path: str) -> dict:
    return one_process_figures(path, gemm_medians)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
