"""default-stream: kernels on 5 streams with small work on the default stream between them.

The streams are ordinary blocking streams (``cudaStreamCreate``). Between two launches the
host puts a tiny kernel on "the default stream". On the *legacy* default stream that tiny
kernel waits for all earlier work on every blocking stream, and every later launch waits
for it: the five big kernels run one after another although nothing orders them. On the
*per-thread* default stream (``--default-stream per-thread`` in nvcc,
``CU_STREAM_PER_THREAD`` here) there is no implicit synchronisation and they overlap.
Built on cuda-python (cuda.core) with an NVRTC-compiled kernel.
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
    name="default-stream",
    module="default_stream",
    seed="003",
    title="Implicit synchronisation through the legacy default stream",
    look_for="kernels on different streams that never overlap, with a small launch on "
             "the legacy NULL stream between each pair",
    requires=("cuda-python", "nvtx"),
    params={"streams": 5, "rounds": 3, "blocks": 32, "threads": 1024,
            "elements": 10 * 1024 * 1024},
    variants={
        "bad": Variant(
            "bad", "in-between work on the legacy default stream",
            expect=(Expect("serialized-streams", "legacy-default-stream"),),
            bounds=(Bound("kernel_overlap_pct", max=10.0),),
        ),
        "good": Variant(
            "good", "in-between work on the per-thread default stream",
            # 5 streams x 32 blocks = 160 blocks running together cover all 132 SMs of an
            # H100/H200: the small grids share the GPU, so small-grid has nothing to say.
            expect=(Expect("serialized-streams", "legacy-default-stream", fire=False),
                    Expect("small-grid", fire=False)),
            bounds=(Bound("kernel_overlap_pct", min=50.0),),
        ),
    },
)


def run(variant: str, p: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from cuda.core import LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM, StreamOptions
    from gpugap.scenarios._cudakernels import Kernels

    with nvtx_range("setup"):
        k = Kernels()
        # Blocking streams (flag 1): only these synchronise with the legacy default stream.
        streams = [k.device.create_stream(options=StreamOptions(nonblocking=False))
                   for _ in range(p["streams"])]
        default = LEGACY_DEFAULT_STREAM if variant == "bad" else PER_THREAD_DEFAULT_STREAM
        n = np.uint32(p["elements"])
        bufs = [k.zeros(p["elements"], s) for s in streams]
        counter = k.zeros(1, streams[0])
        k.device.sync()
        # One untimed round so module loading is not part of the measurement.
        for buf, s in zip(bufs, streams, strict=True):
            k.launch(s, k.add_one, p["blocks"], p["threads"], k.ptr(buf), n)
            k.launch(default, k.bump, 1, 1, k.ptr(counter))
        k.device.sync()

    started = time.perf_counter()
    with nvtx_range(MEASURED_RANGE):
        for _ in range(p["rounds"]):
            with nvtx_range("round"):
                for buf, s in zip(bufs, streams, strict=True):
                    k.launch(s, k.add_one, p["blocks"], p["threads"], k.ptr(buf), n)
                    k.launch(default, k.bump, 1, 1, k.ptr(counter))
        k.device.sync()
    elapsed = time.perf_counter() - started

    with nvtx_range("check"):
        expected = float(p["rounds"] + 1)
        ok = all(bool(np.all(k.to_host(b, p["elements"]) == expected)) for b in bufs)
        bumps = float(k.to_host(counter, 1)[0])
        ok = ok and bumps == p["streams"] * (p["rounds"] + 1)
    return {
        "time_per_iter_ms": round(elapsed / p["rounds"] * 1e3, 3),
        "default_stream": "legacy" if variant == "bad" else "per-thread",
        "check_ok": ok,
        "check": f"every element == {expected:g}, counter == {bumps:g}: {ok}",
    }


if __name__ == "__main__":
    raise SystemExit(main(SCENARIO, run))
