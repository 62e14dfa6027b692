"""small-grid: kernels whose grid cannot occupy the GPU.

A kernel with fewer blocks than SMs leaves whole SMs idle however long it runs (1 block
on a 132-SM H100 uses under 1% of it), unless kernels on other streams fill them at the
same time. The rule weighs such kernels by their share of kernel time in each NVTX
range, so a rare tiny kernel stays silent and a loop made of them does not.

Cost: the SM time left idle while they ran. At each instant the idle share of the SMs
(1 - the SMs covered by all running grids, at most 1) is split among the running
kernels (gpugap.intervals.shared_idle_each): a small kernel alone costs its time x the
share of SMs it left idle; small kernels that together fill the GPU on concurrent
streams cost nothing, and the rule stays silent when the idle share of their time is
below min_idle_sm_pct (they already did what the fix asks). Small grids on streams that
ran one after another are serialized-streams' findings too: the two settle as peers,
the larger claim first (bigger grids, or running them concurrently, whichever would
recover more), and that finding explains the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap import scan
from gpugap.accounting.labels import split_label
from gpugap.accounting.metrics import COMM, kernel_flags
from gpugap.accounting.occupancy import sm_counts
from gpugap.memory import joined
from gpugap.report.table import Table, concat, factorize, unique_in_order
from gpugap.report.trace import NO_CALL, Trace, demangled_name
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.groups import Groups, first_seen_codes
from gpugap.rules.model import Cause, EventRef, Mark, Outline, Severity
from gpugap.units import fmt_ns

FIX = ("Give each kernel enough blocks to fill the GPU (at least one per SM, better several: "
       "a grid-stride loop with grid = SMs x resident blocks per SM), batch many small "
       "problems into one launch (batched/grouped GEMM), or, when they are independent, run "
       "them concurrently on separate streams so they share the idle SMs.")
FIX_SEVERAL_STREAMS = (
    "These small grids already run on {streams} streams: let them overlap (remove what "
    "serializes the streams: work on the legacy default stream, a synchronization between "
    "them), so they share the idle SMs; where the problem can grow, give each kernel "
    "enough blocks to fill the GPU (a grid-stride loop with grid = SMs x resident blocks "
    "per SM) or batch many small problems into one launch.")
# What is left to do once the streams overlap.
THEN_FIX = ("where the problem can grow, give each kernel more blocks (grid = SMs x "
            "resident blocks per SM) or batch small problems into one launch.")
CAUSES = (Cause("undersized-grid", "fewer blocks than the GPU has SMs", FIX,
                title="Grids too small for the GPU"),)
# A library's own kernels: the library picks their grids from the problem's shape.
LIBRARY_KERNEL = re.compile(r"cudnn|cublas|cutlass|xmma|nvjet|gemv|gemmSN|cufft|cusparse",
                            re.IGNORECASE)
LIBRARY_NAMES = {"cudnn": "cuDNN", "cufft": "cuFFT", "cusparse": "cuSPARSE"}
FIX_LIBRARY = ("These are the library's own kernels ({library}): it picks their grids from "
               "the problem's shape. Give it bigger problems (a larger batch, batched "
               "calls), another layout it has wider kernels for (channels_last with "
               "mixed precision for cuDNN's convolutions and batch norm), or fuse the "
               "operation away (torch.compile, XLA).")


class _SmCounts:
    """occupancy.sm_counts of kernels, from their device ids (one lookup per device, not
    an array of every kernel's)."""

    def __init__(self, trace: Trace) -> None:
        device = trace.table("kernels")["device"]
        lo, hi = device.min(), device.max()
        # As a rule one device: its id without numbering a million kernels' ids.
        self.ids = np.array([lo]) if lo == hi else np.sort(factorize(device)[1])
        self.counts = sm_counts(Table({"device": self.ids}), trace.table("devices"))

    def __call__(self, device: np.ndarray) -> np.ndarray:
        if self.ids.size == 1:
            return np.full(device.shape, self.counts[0])
        return self.counts[np.searchsorted(self.ids, device)]


class _IdleSm:
    """Per kernel, read chunk by chunk (``take``, in order): (its part of the SM time
    left idle while it ran, its part of the wall time), see the module doc. *sms*: each
    kernel's device SM count. Kernels of one device in start order (as exports are) are
    swept as they are taken (intervals.SharedIdle): no array of every kernel's values."""

    def __init__(self, trace: Trace, sms_of: _SmCounts) -> None:
        k = trace.table("kernels")
        blocks = k["blocks"].astype(np.int64, copy=False)
        start, end, device = k["start"], k["end"], k["device"]
        devices = sms_of.ids
        self._sweep: tl.SharedIdle | None = None
        if devices.size <= 1 and tl.is_sorted(start):
            sms = sms_of.counts[0]                # the one device's, for every kernel
            self._sweep = tl.SharedIdle(
                start.astype(np.int64, copy=False), end.astype(np.int64, copy=False),
                lambda at: np.minimum(blocks[at] / sms, 1.0))
            return
        share = np.minimum(blocks / sms_of(device), 1.0)
        if devices.size <= 1:
            self._idle, self._own = tl.shared_idle_each(start, end, share)
            return
        self._idle, self._own = np.zeros(len(k)), np.zeros(len(k))
        for dev in devices:
            on = device == dev
            self._idle[on], self._own[on] = tl.shared_idle_each(start[on], end[on],
                                                                share[on])

    def take(self, i0: int, i1: int) -> tuple[np.ndarray, np.ndarray]:
        if self._sweep is not None:
            return self._sweep.take(i0, i1)
        return self._idle[i0:i1], self._own[i0:i1]


def _int_sums(code: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of *values* per code (0..n-1)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, code, values)
    return out


def _sums(totals: list[Table], partial: list[Table], n_groups: int
          ) -> dict[str, np.ndarray]:
    """Per-chunk, per-group partial results -> one value per group (global id), each
    accumulated in chunk order (float sums added in the same order as chunk by chunk)."""
    out = {}
    both = concat(totals)
    acc = np.zeros(n_groups, dtype=np.int64)
    np.add.at(acc, both["gid"], both["kernel_ns"].astype(np.int64))
    out["kernel_ns"] = acc
    both = concat(partial)
    gid = both["gid"]
    for col in ("small_ns", "small", "cost"):
        acc = np.zeros(n_groups, dtype=np.int64)
        np.add.at(acc, gid, both[col].astype(np.int64, copy=False))
        out[col] = acc
    wall = np.zeros(n_groups, dtype=np.float64)
    np.add.at(wall, gid, both["own"].astype(np.float64, copy=False))
    out["wall_ns"] = wall
    for col, fn, init in (("start", np.minimum, np.iinfo(np.int64).max),
                          ("end", np.maximum, np.iinfo(np.int64).min),
                          ("at", np.minimum, np.iinfo(np.int64).max)):
        acc = np.full(n_groups, init, dtype=np.int64)
        fn.at(acc, gid, both[col].astype(np.int64, copy=False))
        out[col] = acc
    return out


def _top_configs(configs: list[Table], max_examples: int) -> dict[int, Table]:
    """The launch configurations of each group (global id), at most *max_examples* of
    the most time, from the chunks' partial ones. A configuration's count and time sum
    over chunks; its SM count and example are those of its first launch, and
    configurations keep the order they appeared in."""
    parts = concat(configs)
    parts = parts.rows(np.argsort(parts["row"], kind="stable"))
    config_code, first = first_seen_codes(parts["gid"], parts["name"], parts["blocks"],
                                          parts["threads"])
    per_config = parts.select(("gid", "name", "blocks", "threads")).rows(first).with_columns(
        count=_int_sums(config_code, parts["count"], first.size),
        time_ns=_int_sums(config_code, parts["time_ns"], first.size),
        sms=parts["sms"][first], corr=parts["corr"][first], row=parts["row"][first])
    # The most time first in each group (ties: first seen first, as nlargest keeps them).
    per_config = per_config.rows(np.lexsort((per_config["row"], -per_config["time_ns"],
                                             per_config["gid"])))
    gid = per_config["gid"]
    cuts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    bounds = np.r_[cuts, gid.size]
    return {int(gid[lo]): per_config.rows(np.arange(lo, min(hi, lo + max_examples)))
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)}


class _GroupSums:
    """The groups' figures, batch by batch (``add``): partial sums per group and per
    launch configuration, and each group's small kernels' streams and unions. Every
    figure is a sum, min, max or first-seen value per group, so the batches' parts are
    combined at the end (_sums, _top_configs), and a batch's arrays go when it is done
    (vectorised: no Python work per kernel name or configuration)."""

    def __init__(self, trace: Trace, config: Mapping[str, float], context: Context
                 ) -> None:
        k = trace.table("kernels")
        self.config, self.context = config, context
        self.name_code = k.labels("name").codes
        self.cols = {c: k[c] for c in ("blocks", "start", "end", "api_start", "device",
                                       "threads_per_block", "corr", "stream")}
        self.sms_of = _SmCounts(trace)
        self.flags = kernel_flags(trace)               # each kernel's; compared per batch
        self.idle_sm = _IdleSm(trace, self.sms_of)
        # Groups (device, phase, NVTX range) get global ids in order of first appearance.
        self.groups = Groups(trace, context)
        self.totals: list[Table] = []
        self.partial: list[Table] = []
        self.configs: list[Table] = []
        self.streams: dict[int, set[int]] = {}      # per group: its small kernels' streams
        self.spans: dict[int, list[tl.Intervals]] = {}   # per group: their unions

    def add(self, part: slice) -> None:
        """Kernels *part*: its partial sums per group and configuration."""
        cols, config, sms_of = self.cols, self.config, self.sms_of
        idle_ns, own_ns = self.idle_sm.take(part.start, part.stop)   # in order, first
        blocks = cols["blocks"][part].astype(np.int64, copy=False)
        start = cols["start"][part].astype(np.int64, copy=False)
        end = cols["end"][part].astype(np.int64, copy=False)
        launch = cols["api_start"][part]
        at = np.where(launch == NO_CALL, start, launch).astype(np.int64, copy=False)
        # Kernels outside the scope weigh nothing and are never small; communication
        # kernels (NCCL) are small by design: they move data, not fill SMs.
        dur = np.where(self.context.in_scope(cols["device"][part], at), end - start, 0)
        small = ((blocks < config["max_sm_fraction"] * sms_of(cols["device"][part]))
                 & (dur > 0) & (self.flags[part] != COMM))
        device = cols["device"][part]
        # Groups: device, phase (by GPU time) and NVTX range (by launch time, numbered
        # instances folded), so a setup phase does not dilute a measured range.
        group, to_global = self.groups.of_batch(device, start, at)
        total = np.bincount(group, weights=dur, minlength=to_global.size)
        self.totals.append(Table({"gid": to_global, "kernel_ns": np.rint(total)}))
        rows = np.flatnonzero(small)
        if not rows.size:
            return
        # The batch's small kernels grouped by group id (stable: each group's kernels in
        # their order), every sum, min, max and first one reduceat over each group's run.
        local = group[rows]
        # Groups are few: as 2-byte keys numpy sorts them by radix (stable), in one pass.
        order = np.argsort(local.astype(np.uint16) if to_global.size <= 1 << 16 else local,
                           kind="stable")
        rows, local = rows[order], local[order]
        cuts = np.flatnonzero(np.r_[True, local[1:] != local[:-1]])
        gids = to_global[local[cuts]]
        start, end, at = start[rows], end[rows], at[rows]
        small_dur = dur[rows].astype(np.int64, copy=False)
        # The batch's arrays go as soon as they are used (megabytes each): the batch's
        # peak is its last steps, with the unions of all batches before it held.
        del order, dur, group
        self.partial.append(Table({
            "gid": gids, "small_ns": np.add.reduceat(small_dur, cuts),
            "small": np.diff(np.r_[cuts, rows.size]),
            "cost": np.add.reduceat(np.rint(idle_ns[rows]).astype(np.int64), cuts),
            "own": np.add.reduceat(own_ns[rows], cuts),
            "start": np.minimum.reduceat(start, cuts), "end": np.maximum.reduceat(end, cuts),
            "at": np.minimum.reduceat(at, cuts)}))
        stream = cols["stream"][part][rows]
        for g, lo, hi in zip(gids.tolist(), cuts.tolist(), [*cuts[1:].tolist(), rows.size],
                             strict=True):
            self.spans.setdefault(g, []).append(tl.union(start[lo:hi], end[lo:hi]))
            # The streams as they first appear (hashed or counted, not sorted: they are
            # sorted once per group at the end).
            self.streams.setdefault(g, set()).update(unique_in_order(stream[lo:hi]).tolist())
        del start, end, at, stream
        # Launch configurations (group, name, blocks, threads) in order of first launch.
        blocks, threads = blocks[rows], cols["threads_per_block"][part][rows]
        launch_config, first = first_seen_codes(to_global[local], self.name_code[part][rows],
                                                blocks, threads)
        first_row = rows[first]
        self.configs.append(Table({
            "gid": to_global[local[first]], "name": self.name_code[part][first_row],
            "blocks": blocks[first], "threads": threads[first],
            "count": np.bincount(launch_config, minlength=first.size),
            "time_ns": _int_sums(launch_config, small_dur, first.size),
            "sms": sms_of(cols["device"][part][first_row]),
            "corr": cols["corr"][part][first_row], "row": first_row + part.start}))


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    k = trace.table("kernels")
    if k.empty:
        return []
    name_text = k.labels("name").categories
    sums = _GroupSums(trace, config, context)
    # The kernels a batch at a time, in order (the idle SMs are swept as they are taken);
    # the batches' freed arrays lie in the heap between the unions kept, so they are
    # given back after each.
    scan.each(len(k), sums.add, rows=scan.SUM_ROWS, give_back=True)
    groups, spans, partial = sums.groups, sums.spans, sums.partial
    if not partial:
        return []
    acc = _sums(sums.totals, partial, len(groups))
    top_of = _top_configs(sums.configs, int(config["max_examples"]))
    stream_of = {g: sorted(s) for g, s in sums.streams.items()}
    findings = []
    for (dev, phase, label), g in groups.keys():
        n_small = int(acc["small"][g])
        if n_small == 0:
            continue
        small_ns, kernel_ns = int(acc["small_ns"][g]), int(acc["kernel_ns"][g])
        share = 100.0 * small_ns / max(kernel_ns, 1)
        if share < config["min_time_share_pct"]:
            continue
        cost = int(acc["cost"][g])
        idle_pct = 100.0 * cost / max(float(acc["wall_ns"][g]), 1.0)
        if idle_pct < config["min_idle_sm_pct"]:
            continue
        top_configs = top_of[g]
        shown = list(top_configs.records())
        top = shown[0]
        n_sm = int(top["sms"])
        top_name = name_text[int(top["name"])]
        text = message(time_share_pct=share, small_ns=small_ns, launches=n_small,
                       name=str(top_name), blocks=int(top["blocks"]),
                       threads=int(top["threads"]), sms=n_sm, count=int(top["count"]),
                       idle_sm_pct=idle_pct, idle_sm_ns=cost)
        kernels = _joined_union(spans.pop(g))
        demangled = demangled_name(trace.table("kernels"), int(top["row"]))
        library = LIBRARY_KERNEL.search(demangled)
        fix = (FIX_LIBRARY.format(library=LIBRARY_NAMES.get(library.group(0).lower(),
                                                            "cuBLAS")) if library
               else RULE.causes["undersized-grid"].fix_for(context.framework))
        library_name = (LIBRARY_NAMES.get(library.group(0).lower(), "cuBLAS") if library
                        else None)
        several = len(stream_of[g]) > 1
        if several and not library:
            # Already on separate streams: the advice to go concurrent is moot; what keeps
            # them from overlapping is the remedy (serialized-streams settles first).
            fix = FIX_SEVERAL_STREAMS.format(streams=len(stream_of[g]))
        findings.append(Finding(
            rule=RULE.id, cause="undersized-grid", severity=Severity.INFO,
            # A library's kernel: its grid follows the problem's shape, no launch
            # configuration for the program to change (context, never the verdict).
            max_severity=Severity.INFO if library else None,
            start_ns=int(acc["start"][g]), end_ns=int(acc["end"][g]), cost_ns=cost,
            at_ns=int(acc["at"][g]), message=text, fix=fix,
            marks=_marks(k, top_configs),
            streams=stream_of[g], device=dev, count=n_small, phase=phase,
            settles_after=("serialized-streams",) if several else (),
            ranges=split_label(label),
            claim=Claim(int(dev), kernels, ("compute",),
                        weight=min(1.0, cost / max(tl.total(kernels), 1))),
            evidence={"time_share_pct": round(share, 2), "sm_count": n_sm,
                      **({"then_fix": THEN_FIX} if several and not library else {}),
                      "library": library_name,
                      "idle_sm_pct": round(idle_pct, 2), "idle_sm_ns": cost,
                      "small_kernel_ns": small_ns,
                      "kernel_ns": kernel_ns,
                      "kernels": [{"name": name_text[r["name"]],
                                   "demangled": demangled_name(trace.table("kernels"), r["row"]),
                                   "blocks": r["blocks"], "threads_per_block": r["threads"],
                                   "sms_used": min(r["blocks"], r["sms"]),
                                   "count": r["count"], "time_ns": r["time_ns"],
                                   "example_correlation_id": r["corr"]}
                                  for r in shown]}))
    return findings


def _joined_union(parts: list[tl.Intervals]) -> tl.Intervals:
    """The union of unions: put end to end when they follow one another in time apart
    (kernels in start order), else merged. The parts go as they are copied (millions of
    intervals: never held twice)."""
    starts, ends = [p[0] for p in parts], [p[1] for p in parts]
    parts.clear()
    s, e = joined(starts), joined(ends)
    if bool((s[1:] > e[:-1]).all()):
        return s, e
    return tl.union(s, e)


def _marks(kernels: Table, configs: Table) -> list[Mark]:
    """An example kernel of each configuration listed, outlined."""
    rows = configs["row"]
    streams, pids, starts = (kernels[c][rows].tolist() for c in ("stream", "pid", "start"))
    return [Outline(EventRef("kernel", int(corr), stream=int(stream), pid=int(pid),
                             start_ns=int(start)))
            for corr, stream, pid, start in zip(configs["corr"].tolist(), streams, pids,
                                                starts, strict=True)]


def message(*, time_share_pct: float, small_ns: int, launches: int, name: str, blocks: int,
            threads: int, sms: int, count: int, idle_sm_pct: float, idle_sm_ns: int) -> str:
    """How much kernel time went to small grids, with the largest configuration."""
    return (f"{time_share_pct:.0f}% of kernel time here ({fmt_ns(small_ns)} in "
            f"{launches} launches) went to grids too small to occupy the GPU: e.g. "
            f"'{name}' with {blocks} block(s) of {threads}"
            f" threads uses at most {min(blocks, sms)} of {sms} SMs "
            f"(x{count}). The SMs sat {idle_sm_pct:.0f}% idle while they "
            f"ran (kernels on other streams included): idle-SM time {fmt_ns(idle_sm_ns)}.")


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
    causes=CAUSES,
    detect=detect,
    color="#c2185b",
    # serialized-streams' peer: SMs that small grids leave idle are what running them
    # concurrently would fill, so where both claim the same time the larger claim (the
    # bigger saving: bigger grids, or overlap) settles it and explains the other.
    priority=30,
    peer=True,
)
