"""grid-sweep: the same kernel on 5 streams at several grid sizes.

Kernels on different streams overlap only when there are free SMs for them. A grid of one
block of 1024 threads leaves 131 of an H100's 132 SMs idle, so five of them run side by
side (perfect overlap) yet the GPU is almost empty and the work takes long. Once one grid
alone fills every SM, the next kernel can only start in the last wave of the one before:
the streams look serialised, which is expected and harmless, and the total time is far
shorter. The bad variant sweeps undersized grids, the good one grids sized to the GPU;
both report the time to finish all five kernels per grid size.
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
    name="grid-sweep",
    module="grid_sweep",
    seed="003",
    title="Overlap vs grid size: five streams, one kernel each",
    look_for="small grids overlap perfectly on an idle GPU; grids that fill the GPU "
             "serialise by saturation and finish far sooner",
    requires=("cuda-python", "nvtx"),
    params={"streams": 5, "threads": 1024, "elements": 10 * 1024 * 1024, "reps": 3,
            "bad_grids": (1, 8, 32), "good_grids": (1024, 5120, 20480)},
    variants={
        "bad": Variant(
            "bad", "undersized grids (1, 8, 32 blocks): overlap, but an idle GPU",
            expect=(Expect("small-grid"),
                    Expect("serialized-streams", fire=False)),
            bounds=(Bound("kernel_overlap_pct", min=50.0),),
        ),
        "good": Variant(
            "good", "grids that fill the GPU (1024 to 20480 blocks)",
            expect=(Expect("serialized-streams", "resource-saturation", severity="info"),
                    Expect("small-grid", fire=False)),
            bounds=(Bound("kernel_overlap_pct", max=30.0),),
        ),
    },
)


def run(variant: str, p: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from gpugap.scenarios._cudakernels import Kernels

    grids = p["bad_grids"] if variant == "bad" else p["good_grids"]
    with nvtx_range("setup"):
        k = Kernels()
        streams = [k.device.create_stream() for _ in range(p["streams"])]
        n = np.uint32(p["elements"])
        bufs = [k.zeros(p["elements"], s) for s in streams]
        k.device.sync()
        for buf, s in zip(bufs, streams, strict=True):  # untimed: loads the module
            k.launch(s, k.add_one, 1, p["threads"], k.ptr(buf), n)
        k.device.sync()

    times: dict[int, list[float]] = {grid: [] for grid in grids}
    with nvtx_range(MEASURED_RANGE):
        for grid in grids:
            with nvtx_range(f"grid={grid}"):
                for _ in range(p["reps"]):
                    started = time.perf_counter()
                    for buf, s in zip(bufs, streams, strict=True):
                        k.launch(s, k.add_one, grid, p["threads"], k.ptr(buf), n)
                    k.device.sync()
                    times[grid].append(time.perf_counter() - started)
    # Statistics after the measured region: a first call into numpy can import modules.
    per_grid = {str(g): round(float(np.median(t)) * 1e3, 3) for g, t in times.items()}

    with nvtx_range("check"):
        expected = float(1 + p["reps"] * len(grids))
        ok = all(bool(np.all(k.to_host(b, p["elements"]) == expected)) for b in bufs)
    return {
        "time_per_iter_ms": round(sum(per_grid.values()) / len(per_grid), 3),
        "time_to_finish_ms_by_grid": per_grid,
        "sm_count": k.sm_count,
        "check_ok": ok,
        "check": f"every element == {expected:g}: {ok}",
    }


if __name__ == "__main__":
    raise SystemExit(main(SCENARIO, run))
