"""serialized-streams: kernels put on different streams that ran one after another.

Kernels are walked in start order per device. A *serialized transition* is a kernel B on
one stream that starts after every earlier kernel has (almost) finished, the last of them
being A on another stream. Runs of consecutive serialized transitions with the same cause
and at least ``min_transitions`` of them become findings. The cause of each transition:

- ``host-launch-bound``: B's launch call began after A had already finished, and no
  synchronisation explains it: every kernel ends before the host launches the next (tiny
  kernels, launch overhead bound). Cost: the GPU idle time between them.
- ``explicit-sync``: a stream/device/event synchronisation (host side, or a stream
  waiting on an event) between A's launch and B's launch.
- ``legacy-default-stream``: A or B ran on the legacy NULL stream, or NULL-stream work
  was launched between them, and neither stream is non-blocking: the legacy default
  stream implicitly synchronises with every blocking stream.
- ``resource-saturation``: B was already launched while A ran, but A's grid alone fills
  the GPU (blocks >= SMs x resident blocks per SM for its block size, registers and
  shared memory): B could start only in A's last wave. Expected; severity info.
- ``unknown``: B was launched in time and nothing above explains the serialisation.

Cost (except host-launch-bound and saturation): the run's kernel time minus the busiest
stream's, an upper bound of what overlap could have saved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap.occupancy import capacity as kernel_capacity
from gpugap.report.trace import Trace
from gpugap.rules._common import SYNC, analysed_span, name_mask, range_labels, split_label
from gpugap.rules.base import Finding, Rule, Threshold, fmt_ns, severity_for

FIXES = {
    "legacy-default-stream": (
        "Keep work off the legacy default stream between them: compile with nvcc "
        "--default-stream per-thread (or use cudaStreamPerThread / CU_STREAM_PER_THREAD), or "
        "create the streams with cudaStreamNonBlocking (torch streams already are)."),
    "resource-saturation": (
        "Nothing to fix: each kernel already fills the GPU, so overlap is neither possible "
        "nor needed. Overlap matters only for kernels that leave SMs idle."),
    "host-launch-bound": (
        "Launch fewer, larger kernels: one batched/grouped GEMM instead of many small ones "
        "(torch.bmm/baddbmm, grouped GEMM in CUTLASS or cuBLASLt), fuse element-wise work "
        "(torch.compile), or capture the sequence once in a CUDA graph and replay it."),
    "explicit-sync": (
        "Remove synchronisation between independent work; order only what depends, with "
        "events (cudaEventRecord + cudaStreamWaitEvent), and synchronise the host once at "
        "the end."),
    "unknown": (
        "Check CUDA_DEVICE_MAX_CONNECTIONS (work from more streams than hardware queues "
        "falsely serialises), stream priorities, and cross-stream event waits."),
}

_WAIT = re.compile("StreamWaitEvent")


def _count_between(event_gtid: np.ndarray, event_t: np.ndarray, gtid: np.ndarray,
                   lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many events of the same thread fall in [lo, hi) for each query."""
    out = np.zeros(lo.size, dtype=np.int64)
    if event_t.size == 0 or lo.size == 0:
        return out
    for g in np.unique(gtid):
        q = gtid == g
        t = np.sort(event_t[event_gtid == g])
        if t.size:
            out[q] = np.searchsorted(t, hi[q], "left") - np.searchsorted(t, lo[q], "left")
    return out


def _transitions(trace: Trace, k: pd.DataFrame, cap: np.ndarray, config: Mapping[str, float]
                 ) -> pd.DataFrame:
    """One row per kernel B (after the first) with its predecessor A and the cause when
    the pair is serialized; cause '' for same-stream, None for overlapping."""
    start = k["start"].to_numpy(dtype=np.int64)
    end = k["end"].to_numpy(dtype=np.int64)
    stream = k["stream"].to_numpy(dtype=np.int64)
    pid = k["pid"].to_numpy(dtype=np.int64)
    reach = np.maximum.accumulate(end)
    idx = np.arange(end.size)
    # A = the kernel that set the running maximum of end times (the last to finish).
    arg = np.maximum.accumulate(np.where(end == reach, idx, 0))
    a, b = arg[:-1], idx[1:]
    dur = end - start
    tolerance = config["overlap_tolerance"] * np.minimum(dur[a], dur[b])
    serial = start[b] >= reach[:-1] - tolerance
    cross = stream[a] != stream[b]

    api_start = k["api_start"].to_numpy(dtype=np.float64)
    gtid = k["gtid"].fillna(-1).to_numpy(dtype=np.int64)
    late = np.nan_to_num(api_start[b], nan=-1) >= end[a]

    # Host-side synchronisation (or a stream waiting on an event) between the launches.
    api = trace.api
    sync_rows = api[name_mask(api["name"], SYNC) | name_mask(api["name"], _WAIT)]
    lo = np.nan_to_num(api_start[a], nan=0).astype(np.int64)
    hi = np.nan_to_num(api_start[b], nan=0).astype(np.int64)
    syncs = _count_between(sync_rows["gtid"].to_numpy(dtype=np.int64),
                           sync_rows["start"].to_numpy(dtype=np.int64), gtid[b], lo, hi)

    # The legacy default stream: which kernels ran on it, and when work was launched
    # onto it (per process). Streams are keyed pid << 32 | stream id.
    def keys(p: np.ndarray, st: np.ndarray) -> np.ndarray:
        return (p.astype(np.int64) << 32) | (st.astype(np.int64) & 0xFFFFFFFF)

    streams = trace.streams
    stream_keys = keys(streams["pid"].to_numpy(), streams["stream"].to_numpy())
    legacy_keys = stream_keys[streams["legacy_default"].to_numpy(dtype=bool)]
    nonblocking_keys = stream_keys[(streams["flag"] == "Non-blocking stream").to_numpy()]
    kernel_keys = keys(pid, stream)
    on_legacy = np.isin(kernel_keys, legacy_keys)
    nonblocking = np.isin(kernel_keys, nonblocking_keys)
    ops = trace.gpu_ops
    legacy_ops = ops[np.isin(keys(ops["pid"].to_numpy(), ops["stream"].to_numpy()),
                             legacy_keys) & ops["api_start"].notna().to_numpy()]
    legacy_between = _count_between(legacy_ops["pid"].to_numpy(dtype=np.int64),
                                    legacy_ops["api_start"].to_numpy(dtype=np.int64),
                                    pid[b], lo + 1, hi)
    blocking_pair = ~nonblocking[a] & ~nonblocking[b]
    implicit = blocking_pair & (on_legacy[a] | on_legacy[b] | (legacy_between > 0))
    saturated = k["blocks"].to_numpy(dtype=np.int64)[a] >= cap[a]

    cause = np.select(
        [~serial, ~cross, late & (syncs > 0), late, implicit, syncs > 0, saturated],
        ["", "", "explicit-sync", "host-launch-bound", "legacy-default-stream",
         "explicit-sync", "resource-saturation"], default="unknown").astype(object)
    cause[~serial] = None
    return pd.DataFrame({"a": a, "b": b, "cause": cause, "idle": np.maximum(start[b] - end[a], 0),
                         "syncs": syncs, "legacy_between": legacy_between})


def detect(trace: Trace, config: Mapping[str, float]) -> list[Finding]:
    kernels = trace.kernels
    if len(kernels) < 3:
        return []
    cap_all = kernel_capacity(trace)
    span = analysed_span(trace)
    findings: list[Finding] = []
    for device, k in kernels.groupby("device", sort=True):
        order = np.lexsort((k["end"].to_numpy(), k["start"].to_numpy()))
        positions = k.index.to_numpy()[order]
        k = k.loc[positions].reset_index(drop=True)
        cap = cap_all[kernels.index.get_indexer(positions)]
        t = _transitions(trace, k, cap, config)
        findings += _runs_to_findings(trace, int(device), k, cap, t, config, span)
    return findings


def _runs_to_findings(trace: Trace, device: int, k: pd.DataFrame, cap: np.ndarray,
                      t: pd.DataFrame, config: Mapping[str, float], span: int
                      ) -> list[Finding]:
    # Same-stream transitions ('') continue the current run; overlapping ones (None) end
    # it; a change of cause starts a new one.
    cause = t["cause"]
    same = (cause == "").to_numpy()
    # Position of each same-stream transition within its streak: a long single-stream
    # stretch is a phase of its own, not part of an alternation between streams.
    streak_id = np.cumsum(~same)
    streak_pos = pd.Series(same.astype(np.int64)).groupby(streak_id).cumsum().to_numpy()
    too_long = same & (streak_pos > config["max_same_stream"])
    carried = cause.replace("", np.nan).ffill()
    boundary = (cause.isna() | (carried != carried.shift()) | carried.isna()
                | pd.Series(too_long, index=t.index))
    cause = cause.where(~too_long, None)
    t = t.assign(run=boundary.cumsum(), carried=carried)
    t = t[cause.notna().to_numpy() & carried.notna().to_numpy()]
    if t.empty:
        return []
    t = t.assign(serial=t["cause"] != "")
    stats = t.groupby("run").agg(cause=("carried", "first"), transitions=("serial", "sum"),
                                 first=("a", "min"), last=("b", "max"), idle=("idle", "sum"))
    stats = stats[stats["transitions"] >= config["min_transitions"]]
    if stats.empty:
        return []
    dur = (k["end"] - k["start"]).to_numpy(dtype=np.int64)
    stream = k["stream"].to_numpy(dtype=np.int64)
    rows = []
    for run, s in stats.iterrows():
        members = np.arange(int(s["first"]), int(s["last"]) + 1)
        per_stream = pd.Series(dur[members]).groupby(stream[members]).sum()
        if s["cause"] == "host-launch-bound":
            cost = int(s["idle"])
        elif s["cause"] == "resource-saturation":
            cost = 0
        else:
            cost = int(per_stream.sum() - per_stream.max())
        rows.append({"run": run, "cause": s["cause"], "transitions": int(s["transitions"]),
                     "first": int(s["first"]), "last": int(s["last"]), "cost": cost,
                     "streams": sorted(per_stream.index.tolist()),
                     "kernel_ns": int(per_stream.sum()), "idle": int(s["idle"])})
    runs = pd.DataFrame(rows)
    runs["at"] = k["api_start"].fillna(k["start"]).to_numpy(dtype=np.int64)[runs["first"]]
    runs["range"] = range_labels(trace, runs["at"].to_numpy())
    findings = []
    for (cause, label), g in runs.groupby(["cause", "range"], sort=False):
        cost = int(g["cost"].sum())
        worst = g.sort_values(["cost", "transitions"], ascending=False).iloc[0]
        members = np.arange(worst["first"], worst["last"] + 1)
        examples = _examples(trace, k, cap, t[t["run"] == worst["run"]],
                             int(config["max_examples"]))
        streams = sorted({s for ss in g["streams"] for s in ss})
        n_kernels = int(sum(r["last"] - r["first"] + 1 for _, r in g.iterrows()))
        message = _message(str(cause), g, k, cap, members, streams, n_kernels, examples)
        findings.append(Finding(
            rule=RULE.id, cause=str(cause),
            severity="info" if cause == "resource-saturation" else severity_for(cost, span),
            start_ns=int(k["start"].iloc[int(g["first"].min())]),
            end_ns=int(k["end"].iloc[int(g["last"].max())]), cost_ns=cost,
            at_ns=int(g["at"].min()), message=message, fix=FIXES[str(cause)],
            streams=streams, device=device, count=int(g["transitions"].sum()),
            ranges=split_label(str(label)),
            evidence={"runs": len(g), "kernels": n_kernels,
                      "serialized_transitions": int(g["transitions"].sum()),
                      "kernel_ns": int(g["kernel_ns"].sum()), "idle_ns": int(g["idle"].sum()),
                      "transitions": examples}))
    return findings


def _op_ref(k: pd.DataFrame, i: int) -> dict:
    r = k.iloc[i]
    return {"name": str(r["name"]), "stream": int(r["stream"]), "correlation_id": int(r["corr"]),
            "start_ns": int(r["start"]), "end_ns": int(r["end"]),
            "launched_ns": None if pd.isna(r["api_start"]) else int(r["api_start"]),
            "grid": [int(r["grid_x"]), int(r["grid_y"]), int(r["grid_z"])],
            "block": [int(r["block_x"]), int(r["block_y"]), int(r["block_z"])]}


def _examples(trace: Trace, k: pd.DataFrame, cap: np.ndarray, t: pd.DataFrame, n: int
              ) -> list[dict]:
    out = []
    for r in t[t["cause"] != ""].head(n).itertuples():
        a, b = int(r.a), int(r.b)
        item = {"cause": r.cause, "first": _op_ref(k, a), "then": _op_ref(k, b),
                "idle_ns": int(r.idle)}
        if r.cause == "resource-saturation":
            item["first_blocks"] = int(k["blocks"].iloc[a])
            item["device_capacity_blocks"] = int(cap[a])
        if r.cause == "legacy-default-stream":
            legacy = trace.legacy_streams()
            item["legacy_stream"] = sorted({s for p, s in legacy if p == int(k["pid"].iloc[b])})
            item["legacy_ops_launched_between"] = int(r.legacy_between)
        if r.cause == "explicit-sync":
            item["sync_calls_between"] = int(r.syncs)
        out.append(item)
    return out


def _message(cause: str, g: pd.DataFrame, k: pd.DataFrame, cap: np.ndarray,
             members: np.ndarray, streams: list[int], n_kernels: int, examples: list[dict]
             ) -> str:
    head = (f"{n_kernels} kernels on {len(streams)} streams ({', '.join(map(str, streams[:8]))}"
            f"{'...' if len(streams) > 8 else ''}) ran one after another in {len(g)} "
            f"run{'s' if len(g) > 1 else ''} ({int(g['transitions'].sum())} serialized "
            "stream switches)")
    dur = (k["end"] - k["start"]).to_numpy()[members]
    if cause == "legacy-default-stream":
        legacy = next((e.get("legacy_stream") for e in examples if e.get("legacy_stream")), [])
        return (f"{head}: work on the legacy default stream {legacy} sits between them, and "
                "the legacy stream implicitly synchronises with every blocking stream. "
                f"Overlap could have saved up to {fmt_ns(int(g['cost'].sum()))}.")
    if cause == "resource-saturation":
        first = examples[0] if examples else {}
        blocks = first.get("first_blocks", int(k["blocks"].iloc[members[0]]))
        held = first.get("device_capacity_blocks", int(cap[members[0]]))
        return (f"{head}: each grid alone fills the GPU ({blocks} blocks vs {held} the device "
                "holds at once), so the next kernel could start only in the last wave of the "
                "one before. Overlap is neither possible nor needed.")
    if cause == "host-launch-bound":
        launch_gap = np.diff(k["api_start"].to_numpy(dtype=np.float64)[members])
        return (f"{head}: each kernel (median {fmt_ns(float(np.median(dur)))}) finished "
                "before the host even launched the next (median launch-to-launch "
                f"{fmt_ns(float(np.nanmedian(launch_gap)) if launch_gap.size else 0)}), so "
                f"the GPU waited on the host for {fmt_ns(int(g['idle'].sum()))}.")
    if cause == "explicit-sync":
        return (f"{head}: a synchronisation between the launches (stream/device/event sync "
                "or a stream waiting on an event) made each wait for the one before. "
                f"Overlap could have saved up to {fmt_ns(int(g['cost'].sum()))}.")
    return (f"{head}: the kernels were launched in time, used no legacy stream and no "
            "synchronisation, and did not fill the GPU, yet did not overlap. Overlap could "
            f"have saved up to {fmt_ns(int(g['cost'].sum()))}.")


RULE = Rule(
    id="serialized-streams",
    title="Work on different streams that did not overlap",
    thresholds={
        "min_transitions": Threshold(2, "switches", "serialized stream switches a run needs "
                                     "(one alone is just two batches in a row)"),
        "overlap_tolerance": Threshold(0.2, "fraction", "kernels overlapping less than this "
                                       "share of the shorter one count as serialized"),
        "max_same_stream": Threshold(8, "kernels", "a run ends after this many kernels in a "
                                     "row on one stream (a phase, not an alternation)"),
        "max_examples": Threshold(5, "transitions", "transitions listed as evidence"),
    },
    rationale=("Streams exist so independent work can run concurrently; when it does not, "
               "the cause decides whether anything can be gained."),
    fix=FIXES["legacy-default-stream"],
    causes={"legacy-default-stream": "implicit synchronisation through the legacy NULL stream",
            "resource-saturation": "each kernel fills the GPU (expected)",
            "host-launch-bound": "kernels finish before the host launches the next",
            "explicit-sync": "stream/device/event synchronisation between them",
            "unknown": "launched in time, yet serialized"},
    detect=detect,
)
