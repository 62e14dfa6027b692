"""Truth figures for cupy-module-churn, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the NVTX ranges ``iteration`` of the domain ``app`` (one per iteration).
Steady window: from the start of the 3rd range to the end of the last. Library-churn
share: the GPU idle time of the window during which the program was inside a module or
library call (cuModule* / cuLibrary* / cudaLibrary*: load, get function, unload), as %
of the window (idle_in_module_calls_pct: the traced calls only; nsys does not trace
cuModuleGetFunction, and with lazy loading the function is loaded to the GPU inside the
first cuLaunchKernel after each load), and the GPU idle from each cuModuleUnload's start
to the next relax kernel's start (idle_unload_to_kernel_pct: unload, load, the untraced
get_function and the lazily loading launch, i.e. the whole churn span the design names).
library_churn_share_pct is the latter. Also: those calls per steady iteration and their
total time, and the launch times (a plain cuLaunchKernel is ~5 us).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, overlap_ns, pct, window_of  # noqa: E402

MODULE_CALLS = r"^(cuModule|cuLibrary|cudaLibrary)"


def main(path: str) -> dict:
    r = Report(path)
    its = r.ranges(r"^iteration$", domain="app")
    out: dict = {"iterations": len(its)}
    if len(its) < 5:
        return out
    lo, hi = window_of(its, 2)
    win = hi - lo
    dev = r.devices()[0] if r.devices() else None
    busy = r.busy_ns(lo, hi, dev)
    gaps = r.idle_gaps(lo, hi, dev)
    calls = r.api_calls(MODULE_CALLS, lo, hi)
    civ = iv(calls)
    by_name = {k: {"count": c, "ms": round(t / 1e6, 3)}
               for k, (c, t) in r.call_time_by_name(calls).items()}
    loads = sum(v["count"] for k, v in by_name.items() if "Load" in k)
    steady = len(its) - 2
    ks = [k for k in r.kernels(dev) if k[2] == "relax" and lo <= k[0] < hi]
    out |= {
        "steady_iterations": steady,
        "steady_window_ms": round(win / 1e6, 3),
        "us_per_iteration": round(win / steady / 1e3, 1),
        "relax_kernels_in_window": len(ks),
        "relax_us_median": round(float(np.median([b - a for a, b, *_ in ks])) / 1e3, 1)
        if ks else None,
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "module_calls": by_name,
        "module_loads_per_iteration": round(loads / steady, 2),
        "host_in_module_calls_pct": pct(clipped_ns(civ, lo, hi), win),
        "idle_in_module_calls_pct": pct(overlap_ns(gaps, civ), win),
    }
    gpu_iv = r.gpu_intervals(dev)
    kstarts = np.array([k[0] for k in r.kernels(dev) if k[2] == "relax"], dtype=np.int64)
    span = 0
    for a, _b, name, _g in calls:
        if name != "cuModuleUnload" or not len(kstarts):
            continue
        j = np.searchsorted(kstarts, a, side="left")
        if j < len(kstarts) and kstarts[j] <= hi:
            nxt = int(kstarts[j])
            span += (nxt - a) - clipped_ns(gpu_iv, a, nxt)
    launches = [b - a for a, b, *_ in r.api_calls(r"^cuLaunchKernel$", lo, hi)]
    out["cuLaunchKernel_us_median"] = round(float(np.median(launches)) / 1e3, 1) \
        if launches else None
    out["idle_unload_to_kernel_pct"] = pct(span, win)
    out["library_churn_share_pct"] = out["idle_unload_to_kernel_pct"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
