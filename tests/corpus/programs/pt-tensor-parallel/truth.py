"""Truth figures for pt-tensor-parallel, from the export alone (sqlite3 + numpy, no gpugap).

Two processes (torchrun), one GPU each. The rank of a process is the device its kernels
ran on (LOCAL_RANK = device). Iterations: each process's NVTX ranges ``step N``. The
host may run ahead of its GPU, so each step's GPU work is found through its CUDA calls
(the kernels, copies and memsets whose call, from any thread of that process, started
inside the step's range). Steady window: from the earliest GPU start of step 2's work
on any rank to the latest GPU end of the last step's work. Per device: busy %, NCCL
kernel time % and its exposed part (NCCL time with no other work of that device under
it). A rank that waits for another in collectives shows long NCCL kernels (they spin
until the peer joins); the late rank is the one with the least NCCL time. Designed: no late
rank (symmetric work); exposed communication (``exposed_communication_pct_mean``,
the all-reduces on the critical path) ~18 % of the step.

Also (the torchrun readings): each device's idle split into waiting for its host's
launches and waiting with work queued; the NCCL kernels paired across the ranks, split
into the transfer itself (the shorter kernel of each pair: ``nccl_intrinsic_pct``, the
communication a faster host could not remove) and each rank's waiting for the other;
``not_compute_nor_intrinsic_comm_pct``: the device time that was neither (its idle plus
its waiting in NCCL: what the hosts' pace costs, ``launch_bound_share_pct`` per device);
per rank the longest CPU-only stretch of its step thread and how far rank 1's host ran
ahead of rank 0's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch_multi import torchrun_figures  # noqa: E402


def main(path: str) -> dict:
    out = torchrun_figures(path)
    if "nccl_split" not in out:         # no steady window
        return out
    devices = list(out["devices"])      # "0", "1": by device
    ns = out["nccl_split"]
    if ns.get("paired"):
        out["exposed_communication_intrinsic_pct"] = ns[devices[0]]["nccl_intrinsic_pct"]
        out["launch_bound_share_pct"] = {d: ns[d]["not_compute_nor_intrinsic_comm_pct"]
                                         for d in devices}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
