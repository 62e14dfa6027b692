"""cublas-warmup: the first cuBLAS GEMMs of a process vs the same GEMMs after a warm-up.

The first matrix product in a process creates the cuBLAS handle and, with CUDA's lazy
module loading, loads the library's kernels (``cuLibraryLoadData``/``cuModuleLoad*``) the
first time each is needed. The GPU sits idle for milliseconds while the host does this:
a hole in the timeline right after the first cuBLAS call. Doing the same GEMMs once
before the measured region moves that cost out of it.
"""

from __future__ import annotations

import time
from typing import Any

from gpugap.scenarios._base import (
    MEASURED_RANGE,
    Bound,
    Expect,
    Scenario,
    Variant,
    main,
    nvtx_range,
)

SCENARIO = Scenario(
    name="cublas-warmup",
    module="cublas_warmup",
    seed="002",
    title="Warm-up latency of the first cuBLAS calls",
    look_for="a multi-millisecond GPU idle gap after the first GEMM while the host loads "
             "cuBLAS and its kernels; gone when warmed up outside the measured region",
    requires=("torch", "nvtx"),
    params={"n": 1024, "iters": 5},
    variants={
        "bad": Variant(
            "bad", "first GEMMs of the process inside the measured region",
            expect=(Expect("warmup-latency"), Expect("launch-gap", "module-load")),
            bounds=(Bound("gpu_idle_pct", min=50.0),),
        ),
        "good": Variant(
            "good", "the same GEMMs run once before the measured region",
            expect=(Expect("warmup-latency", fire=False),
                    Expect("launch-gap", "module-load", fire=False)),
        ),
    },
)

DTYPES = ("float32", "bfloat16", "float16")


def run(variant: str, p: dict[str, Any]) -> dict[str, Any]:
    import torch

    n = p["n"]
    with nvtx_range("setup"):
        # Context creation and the RNG kernels are not what this scenario is about.
        inputs = {name: (torch.randn(n, n, device="cuda").to(getattr(torch, name)),
                         torch.randn(n, n, device="cuda").to(getattr(torch, name)))
                  for name in DTYPES}
        torch.cuda.synchronize()

    def gemms() -> dict[str, Any]:
        outs = {}
        for name, (a, b) in inputs.items():
            with nvtx_range(f"gemm {name}"):
                outs[name] = a @ b
        return outs

    if variant == "good":
        with nvtx_range("warmup"):
            gemms()
            torch.cuda.synchronize()

    timings = []
    with nvtx_range(MEASURED_RANGE):
        for _ in range(p["iters"]):
            started = time.perf_counter()
            with nvtx_range("iter"):
                outs = gemms()
                torch.cuda.synchronize()
            timings.append(time.perf_counter() - started)

    with nvtx_range("check"):
        checks = {}
        for name, (a, b) in inputs.items():
            ref = (a[:8].double() @ b.double())
            checks[name] = bool(torch.allclose(outs[name][:8].double(), ref,
                                               rtol=5e-2, atol=5e-1))
    return {
        "time_per_iter_ms": round(sum(timings) / len(timings) * 1e3, 3),
        "first_iter_ms": round(timings[0] * 1e3, 3),
        "later_iter_ms": round(min(timings[1:] or timings) * 1e3, 3),
        "check_ok": all(checks.values()),
        "check": f"GEMM rows vs float64: {checks}",
    }


if __name__ == "__main__":
    raise SystemExit(main(SCENARIO, run))
