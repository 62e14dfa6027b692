"""Truth figures for pt-ddp-uneven, from the export alone (sqlite3 + numpy, no gpugap).

Two processes (torchrun), one GPU each. The rank of a process is the device its kernels
ran on (LOCAL_RANK = device). Iterations: each process's NVTX ranges ``step N``. The
host may run ahead of its GPU, so each step's GPU work is found through its CUDA calls
(the kernels, copies and memsets whose call, from any thread of that process, started
inside the step's range). Steady window: from the earliest GPU start of step 2's work
on any rank to the latest GPU end of the last step's work. Per device: busy %, NCCL
kernel time % and its exposed part (NCCL time with no other work of that device under
it). A rank that waits for another in collectives shows long NCCL kernels (they spin
until the peer joins); the late rank is the one with the least NCCL time. Designed: rank 1
late (twice rank 0's batch), rank 0 waiting ~40-50 % of the step in its all-reduces
(``wait_share_exposed_pct``: rank 0's exposed NCCL time minus rank 1's).

Also (the torchrun readings): each device's idle split into waiting for its host's
launches and waiting with work queued; the NCCL kernels paired across the ranks, split
into the transfer itself (the shorter kernel of each pair) and each rank's waiting for
the other; ``not_compute_nor_intrinsic_comm_pct``: the device time that was neither
compute nor the transfer itself (on the waiting rank: its wait for the late rank); per
rank the longest CPU-only stretch of its step thread and how far rank 1's host ran ahead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch_multi import torchrun_figures  # noqa: E402


def main(path: str) -> dict:
    return torchrun_figures(path)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
