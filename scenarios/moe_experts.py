"""moe-experts: 32 small expert FFNs round-robin over 8 streams vs one batched FFN.

Each expert is GEMM + bias, SiLU, GEMM + bias on a few dozen tokens: kernels of a few
microseconds. Spread over 8 streams they should overlap, but the host needs longer to
*launch* each kernel (framework overhead plus the launch itself) than the GPU needs to
run it, so each kernel has finished before the next one is even issued: the streams look
serialised and the GPU mostly waits. The fix is fewer, larger launches: all experts in
one batched GEMM (``baddbmm``), or the whole forward captured in a CUDA graph.
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
    name="moe-experts",
    module="moe_experts",
    seed="000",
    title="Many tiny expert GEMMs over 8 streams vs a batched GEMM",
    look_for="streams that never overlap because every kernel ends before the host "
             "launches the next one (host-launch bound); the batched form is several "
             "times faster per forward",
    requires=("torch", "nvtx"),
    params={"experts": 32, "streams": 8, "tokens": 64, "d_model": 512, "d_ff": 1024,
            "iters": 20, "warmup": 3},
    variants={
        "bad": Variant(
            "bad", "one small FFN per expert, round-robin over 8 streams",
            expect=(Expect("serialized-streams", "host-launch-bound"),),
            bounds=(Bound("kernel_overlap_pct", max=20.0), Bound("gpu_idle_pct", min=40.0)),
        ),
        "good": Variant(
            "good", "all experts in one batched FFN (baddbmm) on one stream",
            expect=(Expect("serialized-streams", fire=False),),
        ),
    },
)


def run(variant: str, p: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    E, T, D, H = p["experts"], p["tokens"], p["d_model"], p["d_ff"]
    with nvtx_range("setup"):
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(E, T, D, device="cuda", generator=g)
        w1 = torch.randn(E, D, H, device="cuda", generator=g) / D ** 0.5
        b1 = torch.randn(E, 1, H, device="cuda", generator=g)
        w2 = torch.randn(E, H, D, device="cuda", generator=g) / H ** 0.5
        b2 = torch.randn(E, 1, D, device="cuda", generator=g)
        out = torch.empty(E, T, D, device="cuda")
        streams = [torch.cuda.Stream() for _ in range(p["streams"])]
        torch.cuda.synchronize()

    def per_expert_streams() -> None:
        main_stream = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main_stream)
        for e in range(E):
            with torch.cuda.stream(streams[e % len(streams)]):
                h = F.silu(torch.addmm(b1[e], x[e], w1[e]))
                torch.addmm(b2[e], h, w2[e], out=out[e])
        for s in streams:
            main_stream.wait_stream(s)

    def batched() -> None:
        h = F.silu(torch.baddbmm(b1, x, w1))
        torch.baddbmm(b2, h, w2, out=out)

    forward = per_expert_streams if variant == "bad" else batched
    with nvtx_range("warmup"):
        for _ in range(p["warmup"]):
            forward()
        torch.cuda.synchronize()

    started = time.perf_counter()
    with nvtx_range(MEASURED_RANGE):
        for _ in range(p["iters"]):
            with nvtx_range("forward"):
                forward()
                torch.cuda.synchronize()
    elapsed = time.perf_counter() - started

    with nvtx_range("check"):
        xd = x.double()
        ref = torch.baddbmm(b2.double(), F.silu(torch.baddbmm(b1.double(), xd, w1.double())),
                            w2.double())
        ok = bool(torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2))
    return {
        "time_per_iter_ms": round(elapsed / p["iters"] * 1e3, 3),
        "kernels_per_forward": 3 * E if variant == "bad" else 3,
        "check_ok": ok,
        "check": f"output vs float64 reference: {ok}",
    }


if __name__ == "__main__":
    raise SystemExit(main(SCENARIO, run))
