"""Truth figures for pt-fsdp2-hostbound, from the export alone (sqlite3 + numpy, no gpugap).

Two processes (torchrun), one GPU each. The rank of a process is the device its kernels
ran on (LOCAL_RANK = device). Iterations: each process's NVTX ranges ``step N``. The
host may run ahead of its GPU, so each step's GPU work is found through its CUDA calls
(the kernels, copies and memsets whose call, from any thread of that process, started
inside the step's range). Steady window: from the earliest GPU start of step 2's work
on any rank to the latest GPU end of the last step's work. Per device: busy %, NCCL
kernel time % and its exposed part (NCCL time with no other work of that device under
it). A rank that waits for another in collectives shows long NCCL kernels (they spin
until the peer joins); the late rank is the one with the least NCCL time. Designed:
rank 0 late (15 ms of host work per step), rank 1 waiting ~45-65 % of the step
(``wait_share_pct``), both GPUs mostly idle otherwise (host-bound FSDP2).

Also (the torchrun readings): each device's idle split into waiting for its host's
launches and waiting with work queued; the NCCL kernels paired across the ranks, split
into the transfer itself (the shorter kernel of each pair) and each rank's waiting; per
rank the longest stretch per step of its step thread in neither a CUDA nor an OS call
(pure CPU work such as rank 0's numpy metrics) and how far rank 1's host ran ahead.
late_rank_extra_host_work_pct: the late rank's such stretch beyond the other's, as % of
its GPU step period; launch_bound_share_pct: the late rank's GPU idle waiting for launches
less that (FSDP2's host path). Per rank, over its steady steps (2 to the last): the CUDA
calls a step (all threads of the process), the kernel launches a step, and the allocation
calls (device and pinned host memory) with their time a step.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch_multi import pid_of, torchrun_figures  # noqa: E402
from truthlib import Report  # noqa: E402

ALLOC = r"^cu(da)?(Malloc|Free|MemCreate|MemRelease|MemAlloc|MemFree|HostAlloc|MallocHost|FreeHost|MemHostAlloc)"


def steady_calls(r: Report, pid: int, steady) -> dict:
    """CUDA calls (any thread of *pid*) starting inside its steady step ranges: all of
    them, the kernel launches and the allocation calls, per step."""
    n = max(1, len(steady))
    calls = [c for s in steady for c in r.api_calls(".", s.start, s.end)
             if pid_of(c[3]) == pid]
    alloc = [c for c in calls if re.search(ALLOC, c[2])]
    return {"cuda_calls_per_step": round(len(calls) / n, 1),
            "launches_per_step": round(sum("Launch" in c[2] for c in calls) / n, 1),
            "alloc_calls_per_step": round(len(alloc) / n, 1),
            "alloc_call_names": sorted({c[2] for c in alloc}),
            "alloc_ms_per_step": round(sum(b - a for a, b, *_ in alloc) / n / 1e6, 3)}


def main(path: str) -> dict:
    out = torchrun_figures(path, steady_calls)
    if "late_rank_by_nccl_time" not in out:
        return out
    late, waiting = str(out["late_rank_by_nccl_time"]), str(out["waiting_rank"])
    # The late rank's CPU-only stretch per step (rank 0's numpy metrics) beyond the
    # other rank's, as % of the late rank's GPU step period: the designed extra work.
    h = out["host"]
    period = out["ranks"].get(late, {}).get("gpu_step_period_ms_median")
    a = h.get(late, {}).get("longest_cpu_only_host_stretch_ms_median")
    b = h.get(waiting, {}).get("longest_cpu_only_host_stretch_ms_median")
    if period and a is not None and b is not None:
        out["late_rank_extra_host_work_pct"] = round(100.0 * (a - b) / period, 2)
        # What is left of the late rank's GPU idle, waiting for its host's launches:
        # FSDP2's host path (hooks, copies, launches) between tiny kernels.
        out["launch_bound_share_pct"] = round(
            out["idle"][late]["idle_waiting_for_launch_pct"]
            - out["late_rank_extra_host_work_pct"], 2)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
