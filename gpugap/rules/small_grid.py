"""small-grid: kernels whose grid cannot occupy the GPU.

A kernel with fewer blocks than SMs leaves whole SMs idle however long it runs (1 block
on a 132-SM H100 uses under 1% of it), unless kernels on other streams fill them at the
same time. The rule weighs such kernels by their share of kernel time in each NVTX
range, so a rare tiny kernel stays silent and a loop made of them does not.

Cost: the SM time left idle while they ran. At each instant the idle share of the SMs
(1 - the SMs covered by all running grids, at most 1) is split among the running
kernels (gpugap.timeline.shared_idle_each): a small kernel alone costs its time x the
share of SMs it left idle; small kernels that together fill the GPU on concurrent
streams cost nothing, and the rule stays silent when the idle share of their time is
below min_idle_sm_pct (they already did what the fix asks).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap import timeline as tl
from gpugap.occupancy import sm_counts
from gpugap.report.trace import Trace
from gpugap.rules._common import folded_label_codes, split_label
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold, fmt_ns

FIX = ("Give each kernel enough blocks to fill the GPU (at least one per SM, better several: "
       "a grid-stride loop with grid = SMs x resident blocks per SM), batch many small "
       "problems into one launch (batched/grouped GEMM), or, when they are independent, run "
       "them concurrently on separate streams so they share the idle SMs.")


_CHUNK = 1 << 20


class _Group:
    """Running sums of one (device, phase, NVTX range) group of kernels."""

    def __init__(self) -> None:
        self.kernel_ns = self.small_ns = self.small = self.cost = 0
        self.wall_ns = 0.0      # the small kernels' own share of the wall time
        self.start = self.at = np.iinfo(np.int64).max
        self.end = np.iinfo(np.int64).min
        self.streams: set[int] = set()
        self.spans: list[tuple[np.ndarray, np.ndarray]] = []     # of the small kernels
        # (name code, blocks, threads) -> [count, time_ns, sms, example corr], kept in
        # order of first appearance.
        self.configs: dict[tuple[int, int, int], list[int]] = {}


def _idle_sm_ns(trace: Trace, sms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: (its part of the SM time left idle while it ran, its part of the wall
    time), see the module doc. *sms*: each kernel's device SM count."""
    k = trace.kernels
    share = np.minimum(k["blocks"].to_numpy(dtype=np.int64) / sms, 1.0)
    start, end = k["start"].to_numpy(), k["end"].to_numpy()
    device = k["device"].to_numpy()
    devices = np.unique(device)
    if devices.size <= 1:
        return tl.shared_idle_each(start, end, share)
    idle, own = np.zeros(len(k)), np.zeros(len(k))
    for dev in devices:
        on = device == dev
        idle[on], own[on] = tl.shared_idle_each(start[on], end[on], share[on])
    return idle, own


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    k = trace.kernels
    if k.empty:
        return []
    names = k["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    name_code = names.cat.codes.to_numpy()
    name_text = np.asarray(names.cat.categories, dtype=object)
    cols = {c: k[c].to_numpy() for c in ("blocks", "start", "end", "api_start", "device",
                                         "threads_per_block", "corr", "stream")}
    sms_all = sm_counts(k, trace.devices).astype(np.int32)   # SM counts fit easily
    idle_ns, own_ns = _idle_sm_ns(trace, sms_all)
    groups: dict[tuple[int, str, str], _Group] = {}
    # Kernels in batches (in their order), so memory stays bounded: every quantity is a
    # sum, min, max or first-seen value per group.
    for i0 in range(0, len(k), _CHUNK):
        part = slice(i0, min(i0 + _CHUNK, len(k)))
        sms = sms_all[part].astype(np.int64)
        blocks = cols["blocks"][part].astype(np.int64)
        start, end = cols["start"][part].astype(np.int64), cols["end"][part].astype(np.int64)
        launch = cols["api_start"][part]
        at = np.where(np.isnan(launch), start, np.nan_to_num(launch)).astype(np.int64)
        # Kernels outside the scope weigh nothing and are never small.
        dur = np.where(context.in_scope(cols["device"][part], at), end - start, 0)
        small = (blocks < config["max_sm_fraction"] * sms) & (dur > 0)
        device = cols["device"][part]
        # Groups: device, phase (by GPU time) and NVTX range (by launch time, numbered
        # instances folded), so a setup phase does not dilute a measured range.
        range_code, range_names = folded_label_codes(trace, at)
        phase = context.phases_of(device, start)
        label_code, labels = pd.factorize(phase + "|" + range_names[range_code])
        device_code, device_ids = pd.factorize(device)
        group, group_keys = pd.factorize(device_code.astype(np.int64) * len(labels)
                                         + label_code)
        gkeys = []
        for key in group_keys.tolist():
            dev, label = divmod(int(key), len(labels))
            gkeys.append((int(device_ids[dev]), str(labels[label]).split("|", 1)[0],
                          str(labels[label]).split("|", 1)[1]))
            groups.setdefault(gkeys[-1], _Group())
        total = np.bincount(group, weights=dur, minlength=len(gkeys))
        for g, key in enumerate(gkeys):
            groups[key].kernel_ns += int(round(total[g]))
        rows = np.flatnonzero(small)
        if not rows.size:
            continue
        idle_cost = np.rint(idle_ns[part][rows]).astype(np.int64)
        frame = pd.DataFrame({"group": group[rows], "name": name_code[part][rows],
                              "blocks": blocks[rows],
                              "threads": cols["threads_per_block"][part][rows],
                              "dur": dur[rows], "sms": sms[rows],
                              "corr": cols["corr"][part][rows],
                              "cost": idle_cost, "own": own_ns[part][rows],
                              "start": start[rows], "end": end[rows],
                              "at": at[rows], "stream": cols["stream"][part][rows]})
        per_group = frame.groupby("group", sort=False).agg(
            small_ns=("dur", "sum"), small=("dur", "size"), cost=("cost", "sum"),
            own=("own", "sum"),
            start=("start", "min"), end=("end", "max"), at=("at", "min"))
        for g, r in per_group.iterrows():
            acc = groups[gkeys[int(g)]]
            acc.small_ns += int(r["small_ns"])
            acc.small += int(r["small"])
            acc.cost += int(r["cost"])
            acc.wall_ns += float(r["own"])
            acc.start = min(acc.start, int(r["start"]))
            acc.end = max(acc.end, int(r["end"]))
            acc.at = min(acc.at, int(r["at"]))
        for g, mine in frame.groupby("group", sort=False):
            groups[gkeys[int(g)]].spans.append((mine["start"].to_numpy(),
                                                mine["end"].to_numpy()))
        for g, stream in frame[["group", "stream"]].drop_duplicates().itertuples(index=False):
            groups[gkeys[int(g)]].streams.add(int(stream))
        per_config = frame.groupby(["group", "name", "blocks", "threads"], sort=False).agg(
            count=("dur", "size"), time_ns=("dur", "sum"), sms=("sms", "first"),
            corr=("corr", "first"))
        for (g, name, nblocks, threads), r in per_config.iterrows():
            entry = groups[gkeys[int(g)]].configs.setdefault(
                (int(name), int(nblocks), int(threads)),
                [0, 0, int(r["sms"]), int(r["corr"])])
            entry[0] += int(r["count"])
            entry[1] += int(r["time_ns"])
    findings = []
    for (dev, phase, label), acc in groups.items():
        if acc.small == 0:
            continue
        share = 100.0 * acc.small_ns / max(acc.kernel_ns, 1)
        if share < config["min_time_share_pct"]:
            continue
        cost = acc.cost
        idle_pct = 100.0 * cost / max(acc.wall_ns, 1.0)
        if idle_pct < config["min_idle_sm_pct"]:
            continue
        configs = pd.DataFrame(
            [{"name": name_text[name], "blocks": nblocks, "threads": threads,
              "count": v[0], "time_ns": v[1], "sms": v[2], "example_corr": v[3]}
             for (name, nblocks, threads), v in acc.configs.items()]
        ).nlargest(int(config["max_examples"]), "time_ns")
        top = configs.iloc[0]
        n_sm = int(top["sms"])
        message = (f"{share:.0f}% of kernel time here ({fmt_ns(acc.small_ns)} in "
                   f"{acc.small} launches) went to grids too small to occupy the GPU: e.g. "
                   f"'{top['name']}' with {int(top['blocks'])} block(s) of {int(top['threads'])}"
                   f" threads uses at most {min(int(top['blocks']), n_sm)} of {n_sm} SMs "
                   f"(x{int(top['count'])}). The SMs sat {idle_pct:.0f}% idle while they "
                   f"ran (kernels on other streams included): idle-SM time {fmt_ns(cost)}.")
        kernels = tl.union(*(np.concatenate(c) for c in zip(*acc.spans, strict=True)))
        acc.spans.clear()
        findings.append(Finding(
            rule=RULE.id, cause="undersized-grid", severity="info",
            start_ns=acc.start, end_ns=acc.end, cost_ns=cost,
            at_ns=acc.at, message=message, fix=FIX,
            streams=sorted(acc.streams), device=dev, count=acc.small, phase=phase,
            ranges=split_label(label),
            claim=Claim(int(dev), kernels, ("compute",),
                        weight=min(1.0, cost / max(tl.total(kernels), 1))),
            evidence={"time_share_pct": round(share, 2), "sm_count": n_sm,
                      "idle_sm_pct": round(idle_pct, 2), "idle_sm_ns": cost,
                      "small_kernel_ns": acc.small_ns,
                      "kernel_ns": acc.kernel_ns,
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
        "min_idle_sm_pct": Threshold(25.0, "%", "report when the SMs sat idle for at least "
                                     "this share of the small kernels' time, counting SMs "
                                     "that concurrent kernels filled as busy"),
        "max_examples": Threshold(5, "kernels", "kernel configurations listed as evidence"),
    },
    rationale="SMs without a block do no work; a grid smaller than the GPU caps its speed.",
    fix=FIX,
    causes={"undersized-grid": "fewer blocks than the GPU has SMs"},
    detect=detect,
)
