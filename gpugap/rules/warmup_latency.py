"""warmup-latency: first calls that cost far more than later calls of the same kind.

Causes:
- ``module-load``: bursts of library/module loading (cuLibraryLoadData, cuModuleLoad*):
  CUDA's lazy loading of the kernels a library (cuBLAS, cuDNN...) or a program uses, on
  first use. Cost: the time spent loading.
- ``library-init``: a traced library creating its handle (cublasCreate, cudnnCreate...).
  Cost: the call's duration.
- ``first-call``: the first call of a CUDA API (or the first launch of a kernel) took far
  longer than its later calls. Cost: first minus typical (median of the later calls).
- ``first-iteration``: the first instance of a repeated NVTX range took far longer than
  the later ones (e.g. the first training step). Cost: first minus typical.

Synchronisation calls are left out of first-call: their length depends on queued work.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap import timeline as tl
from gpugap.report.trace import Trace
from gpugap.rules._common import (
    LAUNCH,
    MODULE_LOAD,
    SYNC,
    analysed_span,
    name_mask,
    range_labels,
    split_label,
)
from gpugap.rules.base import Finding, Rule, Threshold, fmt_ns, severity_for

FIX = ("Warm up outside the region that matters: run each operation (first GEMM of each "
       "shape/dtype, first launch of each kernel) once before it; create library handles "
       "once at start-up; set CUDA_MODULE_LOADING=EAGER to load all kernels at start-up "
       "instead of on first use; cache compiled programs and descriptors (cudnn/cuBLASLt "
       "plans, torch.compile caches) across runs.")


def _first_vs_typical(groups: pd.DataFrame, keys: list[str], config: Mapping[str, float]
                      ) -> pd.DataFrame:
    """Rows (one per key) whose first occurrence (by start) exceeds the median of the
    later ones by the thresholds; columns first_ns, typical_ns, excess_ns, n, start, end."""
    if groups.empty:
        return groups.assign(first_ns=[], typical_ns=[], excess_ns=[], n=[])
    g = groups.sort_values("start", kind="stable")
    g = g.assign(dur=(g["end"] - g["start"]).astype(np.int64))
    g["nth"] = g.groupby(keys, sort=False, observed=True).cumcount()
    counts = g.groupby(keys, sort=False, observed=True)["dur"].transform("size")
    g = g[counts >= config["min_calls"]]
    later = g[g["nth"] > 0].groupby(keys, sort=False, observed=True)["dur"].median()
    first = g[g["nth"] == 0].set_index(keys)
    first = first.assign(typical_ns=later.reindex(first.index).to_numpy(),
                         n=g.groupby(keys, sort=False, observed=True)["dur"].size()
                         .reindex(first.index).to_numpy())
    first["first_ns"] = first["dur"]
    first["excess_ns"] = (first["first_ns"] - first["typical_ns"]).astype(np.int64)
    hit = ((first["excess_ns"] >= config["min_excess_us"] * 1e3)
           & (first["first_ns"] >= config["min_ratio"] * np.maximum(first["typical_ns"], 1)))
    return first[hit].reset_index()


def _module_load_inside(trace: Trace, starts: np.ndarray, ends: np.ndarray,
                        gtids: np.ndarray) -> np.ndarray:
    api = trace.api
    out = np.zeros(starts.size, dtype=np.int64)
    if api.empty or starts.size == 0:
        return out
    loads = api[name_mask(api["name"], MODULE_LOAD)]
    for gtid in np.unique(gtids):
        sel = gtids == gtid
        mine = loads[loads["gtid"] == gtid]
        if len(mine):
            u = tl.union(mine["start"].to_numpy(), mine["end"].to_numpy())
            out[sel] = tl.overlap_each(starts[sel], ends[sel], u)
    return out


def _items_first_calls(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    api = trace.api
    if api.empty:
        return []
    skip = (name_mask(api["name"], SYNC) | name_mask(api["name"], MODULE_LOAD)
            | name_mask(api["name"], LAUNCH))
    calls = api[~skip][["start", "end", "pid", "gtid", "name"]]
    calls = calls.assign(name=calls["name"].astype(str))
    items = []
    for r in _first_vs_typical(calls, ["pid", "name"], config).itertuples():
        items.append({"cause": "first-call", "what": f"first {r.name}", "start": int(r.start),
                      "end": int(r.end), "gtid": int(r.gtid), "cost": int(r.excess_ns),
                      "first_ns": int(r.first_ns), "typical_ns": int(r.typical_ns),
                      "calls": int(r.n)})
    # First launch of each kernel: the launch call, matched to its kernel by correlation.
    k = trace.kernels
    k = k[k["api_start"].notna()]
    if len(k):
        launches = pd.DataFrame({"start": k["api_start"].to_numpy(dtype=np.int64),
                                 "end": k["api_end"].to_numpy(dtype=np.int64),
                                 "pid": k["pid"].to_numpy(), "gtid": k["gtid"].to_numpy(np.int64),
                                 "kernel": k["name"].astype(str).to_numpy(),
                                 "api": k["api_name"].astype(str).to_numpy()})
        for r in _first_vs_typical(launches, ["pid", "kernel"], config).itertuples():
            items.append({"cause": "first-call", "what": f"first {r.api} of '{r.kernel}'",
                          "start": int(r.start), "end": int(r.end), "gtid": int(r.gtid),
                          "cost": int(r.excess_ns), "first_ns": int(r.first_ns),
                          "typical_ns": int(r.typical_ns), "calls": int(r.n)})
    return items


def _items_module_load(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    api = trace.api
    if api.empty:
        return []
    loads = api[name_mask(api["name"], MODULE_LOAD)]
    items = []
    for gtid, g in loads.groupby("gtid", sort=False):
        g = g.sort_values("start")
        s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
        label = range_labels(trace, s)
        # A burst: loads less than cluster_gap apart (a library loads its kernels in a
        # row), within one NVTX range.
        new = np.r_[True, (s[1:] - e[:-1] > config["cluster_gap_ms"] * 1e6)
                    | (label[1:] != label[:-1])]
        for burst in np.split(np.arange(s.size), np.flatnonzero(new)[1:]):
            cost = int((e[burst] - s[burst]).sum())
            if cost >= config["min_excess_us"] * 1e3:
                names = ", ".join(sorted(set(g["name"].astype(str).to_numpy()[burst])))
                items.append({"cause": "module-load",
                              "what": f"{burst.size} module loads ({names})",
                              "start": int(s[burst[0]]), "end": int(e[burst[-1]]),
                              "gtid": int(gtid), "cost": cost, "calls": int(burst.size)})
    return items


def _items_library_init(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    nv = trace.nvtx
    if nv.empty:
        return []
    lib = nv[nv["library"] & nv["name"].str.contains(r"Create|Init", regex=True)]
    lib = lib[(lib["end"] - lib["start"]) >= config["min_excess_us"] * 1e3]
    return [{"cause": "library-init", "what": f"{r.domain} {r.name}", "start": int(r.start),
             "end": int(r.end), "gtid": int(r.gtid), "cost": int(r.end - r.start), "calls": 1}
            for r in lib.itertuples()]


def _items_first_iteration(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    nv = trace.nvtx
    if nv.empty:
        return []
    ranges = nv[~nv["library"]][["start", "end", "gtid", "domain", "name", "depth"]]
    ranges = ranges.assign(name=ranges["name"].astype(str))
    firsts = _first_vs_typical(ranges, ["gtid", "domain", "name", "depth"],
                               config | {"min_calls": max(config["min_calls"], 3)})
    if firsts.empty:
        return []
    # A first outer range contains the first of each range nested in it: keep the
    # outermost so one warm-up is not counted twice.
    s, e = firsts["start"].to_numpy(np.int64), firsts["end"].to_numpy(np.int64)
    g = firsts["gtid"].to_numpy(np.int64)
    nested = np.array([((s <= s[i]) & (e >= e[i]) & (g == g[i])).sum() > 1
                       for i in range(len(firsts))], dtype=bool)
    firsts = firsts[~nested]
    loads = _module_load_inside(trace, firsts["start"].to_numpy(np.int64),
                                firsts["end"].to_numpy(np.int64),
                                firsts["gtid"].to_numpy(np.int64))
    return [{"cause": "first-iteration", "what": f"first '{r.name}' range",
             "start": int(r.start), "end": int(r.end), "gtid": int(r.gtid),
             "cost": int(r.excess_ns), "first_ns": int(r.first_ns),
             "typical_ns": int(r.typical_ns), "calls": int(r.n), "module_load_ns": int(ml)}
            for r, ml in zip(firsts.itertuples(), loads.tolist(), strict=True)]


def detect(trace: Trace, config: Mapping[str, float]) -> list[Finding]:
    items = (_items_module_load(trace, config) + _items_library_init(trace, config)
             + _items_first_calls(trace, config) + _items_first_iteration(trace, config))
    if not items:
        return []
    frame = pd.DataFrame(items)
    frame["range"] = range_labels(trace, frame["start"].to_numpy(np.int64))
    span = analysed_span(trace)
    findings = []
    for (cause, label), g in frame.groupby(["cause", "range"], sort=False):
        g = g.sort_values("cost", ascending=False)
        cost = int(g["cost"].sum())
        worst = {k: (0 if isinstance(v, float) and np.isnan(v) else v)
                 for k, v in g.iloc[0].to_dict().items()}
        detail = {
            "module-load": f"{fmt_ns(cost)} loading modules ({worst['what']})",
            "library-init": f"{worst['what']} took {fmt_ns(int(worst['cost']))}",
            "first-call": (f"{worst['what']} took {fmt_ns(int(worst.get('first_ns', 0)))} vs "
                           f"{fmt_ns(int(worst.get('typical_ns', 0)))} typical over "
                           f"{int(worst['calls'])} calls"),
            "first-iteration": (f"{worst['what']} took {fmt_ns(int(worst.get('first_ns', 0)))}"
                                f" vs {fmt_ns(int(worst.get('typical_ns', 0)))} typical over "
                                f"{int(worst['calls'])} instances"
                                + (f", {fmt_ns(int(worst.get('module_load_ns', 0)))} of it "
                                   "loading modules" if worst.get("module_load_ns", 0) else "")),
        }[str(cause)]
        more = f" (+{len(g) - 1} more)" if len(g) > 1 else ""
        findings.append(Finding(
            rule=RULE.id, cause=str(cause), severity=severity_for(cost, span),
            start_ns=int(g["start"].min()), end_ns=int(g["end"].max()), cost_ns=cost,
            at_ns=int(g["start"].min()),
            message=f"Warm-up cost {fmt_ns(cost)}: {detail}{more}.", fix=FIX,
            device=None, count=len(g), ranges=split_label(str(label)),
            evidence={"items": [{k: (v if not isinstance(v, (np.integer,)) else int(v))
                                 for k, v in row.items() if k != "range" and pd.notna(v)}
                                for row in g.head(int(config["max_examples"]))
                                .to_dict("records")]}))
    return findings


RULE = Rule(
    id="warmup-latency",
    title="First calls far slower than later ones",
    thresholds={
        "min_excess_us": Threshold(1000, "us", "report warm-up costing at least this much"),
        "min_ratio": Threshold(5, "x", "a first call must take at least this multiple of "
                               "the typical (median) later call"),
        "min_calls": Threshold(2, "calls", "calls of a kind needed to know its typical cost"),
        "cluster_gap_ms": Threshold(50, "ms", "module loads closer than this form one burst"),
        "max_examples": Threshold(5, "items", "items listed as evidence per finding"),
    },
    rationale=("One-time costs (loading kernels, creating handles, first launches) belong "
               "before the measured or latency-critical region, not inside it."),
    fix=FIX,
    causes={"module-load": "lazy loading of library/program modules",
            "library-init": "library handle creation",
            "first-call": "first call of an API / first launch of a kernel",
            "first-iteration": "first instance of a repeated NVTX range"},
    detect=detect,
)
