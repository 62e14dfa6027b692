"""small-grid: kernels whose grid cannot occupy the GPU.

A kernel with fewer blocks than SMs leaves whole SMs idle however long it runs (1 block
on a 132-SM H100 uses under 1% of it). The rule weighs such kernels by their share of
kernel time in each NVTX range, so a rare tiny kernel stays silent and a loop made of
them does not. Cost: their time x the share of SMs they left idle, an upper bound of
what a full-GPU grid could save (less when other streams filled the idle SMs).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap.occupancy import sm_counts
from gpugap.report.trace import Trace
from gpugap.rules._common import analysed_span, range_labels, split_label
from gpugap.rules.base import Finding, Rule, Threshold, fmt_ns, severity_for

FIX = ("Give each kernel enough blocks to fill the GPU (at least one per SM, better several: "
       "a grid-stride loop with grid = SMs x resident blocks per SM), batch many small "
       "problems into one launch (batched/grouped GEMM), or, when they are independent, run "
       "them concurrently on separate streams so they share the idle SMs.")


def detect(trace: Trace, config: Mapping[str, float]) -> list[Finding]:
    k = trace.kernels
    if k.empty:
        return []
    sms = sm_counts(k, trace.devices)
    blocks = k["blocks"].to_numpy(dtype=np.int64)
    frame = pd.DataFrame({
        "device": k["device"].to_numpy(), "name": k["name"].astype(str).to_numpy(),
        "blocks": blocks, "threads": k["threads_per_block"].to_numpy(),
        "dur": (k["end"] - k["start"]).to_numpy(dtype=np.int64), "sms": sms,
        "small": blocks < config["max_sm_fraction"] * sms,
        "start": k["start"].to_numpy(), "end": k["end"].to_numpy(),
        "corr": k["corr"].to_numpy(), "stream": k["stream"].to_numpy()})
    frame["used"] = np.minimum(frame["blocks"], frame["sms"]) / frame["sms"]
    frame["idle_cost"] = (frame["dur"] * (1 - frame["used"])).astype(np.int64)
    at = k["api_start"].fillna(k["start"]).to_numpy(dtype=np.int64)
    frame["at"] = at
    frame["range"] = range_labels(trace, at)
    span = analysed_span(trace)
    findings = []
    for (device, label), g in frame.groupby(["device", "range"], sort=False):
        small = g[g["small"]]
        if small.empty:
            continue
        share = 100.0 * small["dur"].sum() / max(int(g["dur"].sum()), 1)
        if share < config["min_time_share_pct"]:
            continue
        cost = int(small["idle_cost"].sum())
        configs = (small.groupby(["name", "blocks", "threads"], sort=False)
                   .agg(count=("dur", "size"), time_ns=("dur", "sum"), sms=("sms", "first"),
                        example_corr=("corr", "first"))
                   .reset_index().nlargest(int(config["max_examples"]), "time_ns"))
        top = configs.iloc[0]
        n_sm = int(top["sms"])
        message = (f"{share:.0f}% of kernel time here ({fmt_ns(int(small['dur'].sum()))} in "
                   f"{len(small)} launches) went to grids too small to occupy the GPU: e.g. "
                   f"'{top['name']}' with {int(top['blocks'])} block(s) of {int(top['threads'])}"
                   f" threads uses at most {min(int(top['blocks']), n_sm)} of {n_sm} SMs "
                   f"(x{int(top['count'])}). Idle-SM time: {fmt_ns(cost)}.")
        findings.append(Finding(
            rule=RULE.id, cause="undersized-grid", severity=severity_for(cost, span),
            start_ns=int(small["start"].min()), end_ns=int(small["end"].max()), cost_ns=cost,
            at_ns=int(small["at"].min()), message=message, fix=FIX,
            streams=sorted({int(s) for s in small["stream"]}), device=int(device),
            count=len(small), ranges=split_label(str(label)),
            evidence={"time_share_pct": round(share, 2), "sm_count": n_sm,
                      "small_kernel_ns": int(small["dur"].sum()),
                      "kernel_ns": int(g["dur"].sum()),
                      "kernels": [{"name": r.name, "blocks": int(r.blocks),
                                   "threads_per_block": int(r.threads),
                                   "sms_used": min(int(r.blocks), int(r.sms)),
                                   "count": int(r.count), "time_ns": int(r.time_ns),
                                   "example_correlation_id": int(r.example_corr)}
                                  for r in configs.itertuples()]}))
    return findings


RULE = Rule(
    id="small-grid",
    title="Grids too small to occupy the GPU",
    thresholds={
        "max_sm_fraction": Threshold(0.5, "fraction", "a grid is small when it has fewer "
                                     "blocks than this share of the SMs"),
        "min_time_share_pct": Threshold(5.0, "%", "report when small grids take at least "
                                        "this share of the kernel time in an NVTX range"),
        "max_examples": Threshold(5, "kernels", "kernel configurations listed as evidence"),
    },
    rationale="SMs without a block do no work; a grid smaller than the GPU caps its speed.",
    fix=FIX,
    causes={"undersized-grid": "fewer blocks than the GPU has SMs"},
    detect=detect,
)
