"""Truth figures for pt-model-parallel, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the NVTX ranges ``step N`` (one process drives both GPUs). The host runs
ahead of the GPUs (no sync in the loop), so each step's GPU work is found through its
CUDA calls: the kernels, copies and memsets whose launching call (any thread of the
process: autograd's device threads launch backward work) started inside the step's
range. Steady window: from the first GPU start of step 2's work to the last GPU end of
the last step's work. Per device: busy %, and the time it was idle while the other
device was busy (cross-device wait: its queued work waits for the other GPU), as % of
the window; the verdict's share is that figure (designed ~45 % on each GPU).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch_multi import one_process_figures  # noqa: E402


def main(path: str) -> dict:
    return one_process_figures(path)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
