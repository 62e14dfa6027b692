"""h2d-copy: a host-to-device copy beside GEMMs on another stream, pageable vs pinned.

Each iteration copies the next input (64 MiB by default) on a copy stream, then queues a
few GEMMs on a compute stream, then synchronises, as a training step that prefetches its
next batch would. From pageable memory, ``cudaMemcpyAsync`` stages the data through the
driver's own pinned buffers and does not return until the last chunk is staged, so the
host cannot queue the GEMMs until the copy is almost over: copy and compute run one after
the other. From pinned memory the call returns at once and the two overlap.
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
    name="h2d-copy",
    module="h2d_copy",
    seed="001",
    title="Host-to-device copy beside GEMMs: pageable vs pinned memory",
    look_for="the pageable cudaMemcpyAsync holds the CPU thread for the whole copy, "
             "so the GEMMs start only after it and copy/compute overlap collapses",
    requires=("torch", "nvtx"),
    params={"n": 4096, "gemms": 4, "iters": 8, "warmup": 2},
    variants={
        "bad": Variant(
            "bad", "source tensor in pageable memory",
            expect=(Expect("blocking-memcpy", "pageable-async"),),
            bounds=(Bound("copy_compute_overlap_pct", max=20.0),),
        ),
        "good": Variant(
            "good", "source tensor in pinned (page-locked) memory",
            expect=(Expect("blocking-memcpy", fire=False),),
            bounds=(Bound("copy_compute_overlap_pct", min=60.0),),
        ),
    },
)


def run(variant: str, p: dict[str, Any]) -> dict[str, Any]:
    import torch

    dev = torch.device("cuda")
    n, pinned = p["n"], variant == "good"
    with nvtx_range("setup"):
        a = torch.randn(n, n, device=dev)
        b = torch.randn(n, n, device=dev)
        host = torch.randn(n, n).pin_memory() if pinned else torch.randn(n, n)
        dst = torch.empty(n, n, device=dev)
        out = torch.empty(n, n, device=dev)
        copy_stream, compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()

    def step() -> None:
        with torch.cuda.stream(copy_stream), nvtx_range("h2d copy"):
            dst.copy_(host, non_blocking=True)
        with torch.cuda.stream(compute_stream), nvtx_range("gemms"):
            for _ in range(p["gemms"]):
                torch.mm(a, b, out=out)
        torch.cuda.synchronize()

    with nvtx_range("warmup"):
        for _ in range(p["warmup"]):
            step()

    started = time.perf_counter()
    with nvtx_range(MEASURED_RANGE):
        for _ in range(p["iters"]):
            with nvtx_range("iter"):
                step()
    elapsed = time.perf_counter() - started

    with nvtx_range("check"):
        copy_ok = torch.equal(dst.cpu(), host)
        ref = (a[:16].double() @ b.double()).float()
        gemm_ok = torch.allclose(out[:16], ref, rtol=1e-2, atol=1e-1)
    return {
        "time_per_iter_ms": round(elapsed / p["iters"] * 1e3, 3),
        "bytes_per_copy": host.numel() * host.element_size(),
        "host_memory": "pinned" if pinned else "pageable",
        "check_ok": bool(copy_ok and gemm_ok),
        "check": f"copy exact: {copy_ok}; GEMM rows vs float64: {gemm_ok}",
    }


if __name__ == "__main__":
    raise SystemExit(main(SCENARIO, run))
