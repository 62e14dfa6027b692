"""Truth figures for pt-eval-overlap (the same readings as pt-eval-numpy's truth.py).

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``batch N``. Steady state: batches 2.. (the first two
skipped), from the start of ``batch 2`` to the end of the last batch range.
Results-work share: the GPU idle stretches of the window that begin where a
device-to-host copy ends (the logits just came back and the host is busy with them),
summed, as a % of the window. Pageable-copy share: the time of the device-to-host copies
into pageable memory in the window. Also: the host time after the last CUDA call of
each batch (the numpy post-processing), median.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch import eval_batches_figures  # noqa: E402


def main(path: str) -> dict:
    return eval_batches_figures(path)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
