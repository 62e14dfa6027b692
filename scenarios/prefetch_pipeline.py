"""prefetch-pipeline: copy batch i+1 on a copy stream while batch i computes.

The bad variant does everything on one stream: copy a batch in, compute on it, copy the
next in... The copy engine and the SMs take turns and each waits for the other. The good
variant double-buffers: a copy stream fills one device buffer while the compute stream
works on the other, ordered with CUDA events (copy done -> compute may start; compute
done -> the buffer may be overwritten). Host batches are pinned in both variants, so the
only difference is the schedule.
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
    name="prefetch-pipeline",
    module="prefetch_pipeline",
    seed="004",
    title="Copy/compute pipeline with two streams and events",
    look_for="on one stream every copy waits for the previous compute and vice versa "
             "(no copy/compute overlap); with a copy stream and events they overlap",
    requires=("torch", "nvtx"),
    params={"batches": 12, "host_batches": 3, "rows": 4096, "cols": 4096, "out_cols": 2048},
    variants={
        "bad": Variant(
            "bad", "copies and compute on one stream",
            expect=(Expect("copy-compute-serialized", "same-stream"),
                    Expect("blocking-memcpy", fire=False)),
            bounds=(Bound("copy_compute_overlap_pct", max=10.0),),
        ),
        "good": Variant(
            "good", "copy stream + compute stream, double-buffered, ordered by events",
            expect=(Expect("copy-compute-serialized", fire=False),
                    Expect("blocking-memcpy", fire=False)),
            bounds=(Bound("copy_compute_overlap_pct", min=60.0),),
        ),
    },
)


def run(variant: str, p: dict[str, Any]) -> dict[str, Any]:
    import torch

    R, C, B = p["rows"], p["cols"], p["batches"]
    with nvtx_range("setup"):
        g = torch.Generator().manual_seed(0)
        host = [torch.randn(R, C, generator=g).pin_memory() for _ in range(p["host_batches"])]
        w = torch.randn(C, p["out_cols"], device="cuda") / C ** 0.5
        dev = [torch.empty(R, C, device="cuda") for _ in range(2)]
        sums = torch.zeros(B, device="cuda")
        copy_stream, compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
        copy_done = [torch.cuda.Event() for _ in range(2)]
        compute_done = [torch.cuda.Event() for _ in range(2)]

    def compute(i: int, buf: torch.Tensor) -> None:
        with nvtx_range("compute"):
            sums[i] = torch.relu(buf @ w).sum()

    with nvtx_range("warmup"):
        # Loads cuBLAS and the relu/sum kernels outside the measured region.
        dev[0].copy_(host[0], non_blocking=True)
        compute(0, dev[0])
        torch.cuda.synchronize()

    def one_stream() -> None:
        for i in range(B):
            with nvtx_range("batch"):
                with nvtx_range("copy"):
                    dev[0].copy_(host[i % len(host)], non_blocking=True)
                compute(i, dev[0])

    def pipelined() -> None:
        with torch.cuda.stream(copy_stream), nvtx_range("copy"):
            dev[0].copy_(host[0], non_blocking=True)
            copy_done[0].record(copy_stream)
        for i in range(B):
            cur, nxt = i % 2, (i + 1) % 2
            with nvtx_range("batch"):
                if i + 1 < B:
                    with torch.cuda.stream(copy_stream), nvtx_range("copy"):
                        if i >= 1:  # buffer nxt still feeds batch i-1's compute
                            copy_stream.wait_event(compute_done[nxt])
                        dev[nxt].copy_(host[(i + 1) % len(host)], non_blocking=True)
                        copy_done[nxt].record(copy_stream)
                with torch.cuda.stream(compute_stream):
                    compute_stream.wait_event(copy_done[cur])
                    compute(i, dev[cur])
                    compute_done[cur].record(compute_stream)
        torch.cuda.current_stream().wait_stream(compute_stream)

    schedule = one_stream if variant == "bad" else pipelined
    started = time.perf_counter()
    with nvtx_range(MEASURED_RANGE):
        schedule()
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started

    with nvtx_range("check"):
        ref = torch.stack([torch.relu(host[i % len(host)].cuda() @ w).sum() for i in range(B)])
        ok = bool(torch.allclose(sums, ref, rtol=1e-3))
    return {
        "time_per_iter_ms": round(elapsed / B * 1e3, 3),
        "bytes_per_copy": R * C * 4,
        "check_ok": ok,
        "check": f"per-batch sums vs recomputed: {ok}",
    }


if __name__ == "__main__":
    raise SystemExit(main(SCENARIO, run))
