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

In the accounting, each finding claims the GPU idle time during its items (first-call
and first-iteration: their excess share of it). Settled after launch-gap, whose
module-load gaps usually explain the same stall: warm-up findings then appear as their
consequences and cost only what is left. One finding per cause, device and phase.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap import intervals as tl
from gpugap.accounting.buckets import IDLE_IDS
from gpugap.accounting.labels import range_labels, ranges_of
from gpugap.memory import give_back
from gpugap.report.trace import NO_CALL, Trace
from gpugap.rules._common import LAUNCH, MODULE_LOAD, SYNC, name_mask
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.model import Cause, Mark, Severity, Span
from gpugap.units import fmt_ns

FIX = ("Warm up outside the region that matters: run each operation (first GEMM of each "
       "shape/dtype, first launch of each kernel) once before it; create library handles "
       "once at start-up; set CUDA_MODULE_LOADING=EAGER to load all kernels at start-up "
       "instead of on first use; cache compiled programs and descriptors (cuDNN/cuBLASLt "
       "plans, compiled kernels) across runs.")
FIXES = {
    "PyTorch": FIX.replace("compiled kernels", "torch.compile caches"),
    "JAX": ("Warm up outside the region that matters: call each jitted function once with "
            "the shapes and dtypes it will see (jax.jit(f).lower(...).compile() ahead of "
            "time), set CUDA_MODULE_LOADING=EAGER to load all kernels at start-up instead "
            "of on first use, and keep XLA's compilation cache across runs "
            "(jax_compilation_cache_dir)."),
    "CuPy": FIX.replace("compiled kernels", "CuPy's kernel cache, CUPY_CACHE_DIR"),
}
CAUSES = (Cause("module-load", "lazy loading of library/program modules", FIX, fixes=FIXES),
          Cause("library-init", "library handle creation", FIX, fixes=FIXES),
          Cause("first-call", "first call of an API / first launch of a kernel", FIX,
                fixes=FIXES),
          Cause("first-iteration", "first instance of a repeated NVTX range", FIX,
                fixes=FIXES))


def _first_vs_typical_idx(start: np.ndarray, end: np.ndarray, key: np.ndarray,
                          config: Mapping[str, float]) -> list[tuple[int, float, int]]:
    """Occurrences are grouped by key; for each key whose first occurrence (by start,
    ties in input order) exceeds the median of its later ones by the thresholds:
    (index of that first occurrence, the median, occurrences), in order of first
    occurrence. Only keys whose first call could pass the thresholds get a median."""
    if start.size == 0:
        return []
    start = np.asarray(start, dtype=np.int64)
    dur = np.asarray(end, dtype=np.int64) - start
    order = None if start.size < 2 or bool((start[1:] >= start[:-1]).all()) else \
        np.argsort(start, kind="stable")
    # Group codes numbered by first occurrence in start order; rows grouped by a stable
    # sort of the codes (start order kept within a group).
    codes, uniq = pd.factorize(key if order is None else key[order])
    groups = len(uniq)
    seg = np.argsort(codes.astype(np.int16) if groups < 32767 else codes, kind="stable")
    bounds = np.searchsorted(codes[seg], np.arange(groups + 1))
    sizes = np.diff(bounds)
    pos = seg if order is None else order[seg]
    d = dur[pos]
    firsts = bounds[:-1]
    first_dur = d[firsts]
    later = d.copy()
    later[firsts] = np.iinfo(np.int64).max
    later_min = np.minimum.reduceat(later, firsts)
    min_excess = config["min_excess_us"] * 1e3
    # The median is at least the minimum: keys whose first call is not min_excess above
    # the minimum of the later ones cannot pass.
    candidates = np.flatnonzero((sizes >= config["min_calls"]) & (sizes > 1)
                                & (first_dur - later_min >= min_excess))
    out = []
    for g in candidates.tolist():
        typical = float(np.median(d[firsts[g] + 1:bounds[g + 1]]))
        first = int(first_dur[g])
        excess = int(first - typical)
        if excess >= min_excess and first >= config["min_ratio"] * max(typical, 1):
            out.append((int(pos[firsts[g]]), typical, int(sizes[g])))
    return out


def _first_vs_typical(groups: pd.DataFrame, keys: list[str], config: Mapping[str, float]
                      ) -> pd.DataFrame:
    """Rows (one per key) whose first occurrence (by start) exceeds the median of the
    later ones by the thresholds; columns first_ns, typical_ns, excess_ns, n, start, end."""
    if groups.empty:
        return groups.assign(first_ns=[], typical_ns=[], excess_ns=[], n=[])
    key = groups.groupby(keys, sort=False, observed=True).ngroup().to_numpy()
    hits = _first_vs_typical_idx(groups["start"].to_numpy(), groups["end"].to_numpy(), key,
                                 config)
    rows = [i for i, _, _ in hits]
    first = groups.iloc[rows].reset_index(drop=True)
    first_ns = (first["end"] - first["start"]).astype(np.int64)
    typical = np.array([t for _, t, _ in hits], dtype=np.float64)
    return first.assign(first_ns=first_ns, typical_ns=typical,
                        excess_ns=(first_ns - typical).astype(np.int64),
                        n=np.array([n for _, _, n in hits], dtype=np.int64))


def _module_load_inside(trace: Trace, starts: np.ndarray, ends: np.ndarray,
                        gtids: np.ndarray) -> np.ndarray:
    api = trace.api
    out = np.zeros(starts.size, dtype=np.int64)
    if api.empty or starts.size == 0:
        return out
    loads = np.flatnonzero(name_mask(api["name"], MODULE_LOAD))
    load_gtid = api["gtid"].to_numpy()[loads]
    for gtid in np.unique(gtids):
        sel = gtids == gtid
        mine = loads[load_gtid == gtid]
        if len(mine):
            u = tl.union(api["start"].to_numpy()[mine], api["end"].to_numpy()[mine])
            out[sel] = tl.overlap_each(starts[sel], ends[sel], u)
    return out


_CHUNK = 1 << 18


def _first_vs_typical_stream(n: int, chunk, config: Mapping[str, float], keys: int
                             ) -> list[tuple[int, float, int]]:
    """_first_vs_typical_idx for many rows, in bounded memory. ``chunk(i0, i1)`` gives
    rows i0..i1 (in start order, ties in input order) as (durations, key codes in
    0..keys-1, -1 for rows that do not count). Two passes: counts and first occurrences
    per key; then, for the keys whose first call could pass the thresholds, the median
    of their later calls. Returns (row, median, count) in order of first occurrence."""
    counts = np.zeros(keys, dtype=np.int64)
    first = np.full(keys, -1, dtype=np.int64)
    first_dur = np.zeros(keys, dtype=np.int64)
    min_dur = np.full(keys, np.iinfo(np.int64).max, dtype=np.int64)
    negative = False
    low = high = 0                                    # the range of the durations
    for i0 in range(0, n, _CHUNK):
        dur, key = chunk(i0, min(i0 + _CHUNK, n))
        valid = np.flatnonzero(key >= 0)
        kv, dv = key[valid], dur[valid]
        counts += np.bincount(kv, minlength=keys)
        here = np.full(keys, -1, dtype=np.int64)
        here[kv[::-1]] = valid[::-1]                  # the first row of each key here
        new = (first < 0) & (here >= 0)
        first[new] = here[new] + i0
        first_dur[new] = dur[here[new]]
        if dv.size:
            least = int(dv.min())
            low, high = min(low, least), max(high, int(dv.max()))
            if least < 0:                                 # only in broken exports
                negative = True
                np.minimum.at(min_dur, kv, dv)
    min_excess = config["min_excess_us"] * 1e3
    # The median is at least the minimum, which is at least 0 unless some call ended
    # before it started: only keys whose first call is long enough can pass.
    floor = np.where(min_dur < 0, min_dur, 0) if negative else 0
    candidates = np.flatnonzero((counts >= config["min_calls"]) & (counts > 1)
                                & (first_dur - floor >= min_excess))
    if not candidates.size:
        return []
    lut = np.full(keys, -1, dtype=np.int64)
    lut[candidates] = np.arange(candidates.size)
    # Each candidate's later calls written in place (their number is known): no list of
    # parts joined, and the median partitions them where they lie.
    # In 4 bytes when they fit (calls under 2 s): the same median, half the memory.
    width = np.int32 if np.iinfo(np.int32).min <= low and high <= np.iinfo(np.int32).max \
        else np.int64
    later = [np.empty(int(counts[key]) - 1, dtype=width) for key in candidates.tolist()]
    filled = [0] * candidates.size
    for i0 in range(0, n, _CHUNK):
        dur, key = chunk(i0, min(i0 + _CHUNK, n))
        which = np.where(key >= 0, lut[np.maximum(key, 0)], -1)
        rows = np.flatnonzero(which >= 0)
        if not rows.size:
            continue
        # Rows grouped by candidate (stable), each group's run taken once.
        group = which[rows]
        order = np.argsort(group, kind="stable")
        rows, group = rows[order], group[order]
        cuts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        for c, lo, hi in zip(group[cuts].tolist(), cuts.tolist(),
                             [*cuts[1:].tolist(), rows.size], strict=True):
            mine = rows[lo:hi]
            mine = mine[mine + i0 != first[candidates[c]]]
            later[c][filled[c]:filled[c] + mine.size] = dur[mine]
            filled[c] += mine.size
    out = []
    for c, key in enumerate(candidates.tolist()):
        typical = float(np.median(later[c], overwrite_input=True))
        later[c] = np.empty(0, dtype=np.int64)             # its memory, before the next
        first_ns = int(first_dur[key])
        excess = int(first_ns - typical)
        if excess >= min_excess and first_ns >= config["min_ratio"] * max(typical, 1):
            out.append((int(first[key]), typical, int(counts[key])))
    return sorted(out)


def _categories(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, category texts) of a name column."""
    if not isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(str).astype("category")
    # The codes themselves (read-only), not the copy .cat.codes makes: 24 MB at 24M calls.
    return values.array.codes, np.asarray(values.cat.categories, dtype=object)


def _items_first_calls(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    api = trace.api
    if api.empty:
        return []
    name_code, name_text = _categories(api["name"])
    skip = np.array([bool(SYNC.search(t) or MODULE_LOAD.search(t) or LAUNCH.search(t))
                     for t in name_text] + [False])
    width = len(name_text) + 1
    start = api["start"].to_numpy(dtype=np.int64)
    end = api["end"].to_numpy(dtype=np.int64)
    pid = api["pid"].to_numpy()
    pids = np.sort(pd.unique(pid))
    order = None if tl.is_sorted(start) else np.argsort(start, kind="stable")

    def calls(i0: int, i1: int) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(i0, i1) if order is None else order[i0:i1]
        code = name_code[rows]
        key = np.searchsorted(pids, pid[rows]).astype(np.int64) * width + code + 1
        return end[rows] - start[rows], np.where(skip[code], -1, key)

    items = []
    for i, typical, n in _first_vs_typical_stream(len(api), calls, config,
                                                  len(pids) * width):
        row = i if order is None else int(order[i])
        first = int(end[row] - start[row])
        items.append({"cause": "first-call", "what": f"first {name_text[name_code[row]]}",
                      "start": int(start[row]), "end": int(end[row]),
                      "gtid": int(api["gtid"].iloc[row]), "cost": int(first - typical),
                      "first_ns": first, "typical_ns": int(typical), "calls": n})
    give_back()                        # the calls' batches, before the launches' own
    # First launch of each kernel: the launch call, matched to its kernel by correlation.
    k = trace.kernels
    launch = k["api_start"].to_numpy()
    known = launch != NO_CALL
    if known.any():
        kernel_code, kernel_text = _categories(k["name"])
        width = len(kernel_text) + 1
        pid = k["pid"].to_numpy()
        pids = np.sort(pd.unique(pid))
        rows_all = None if bool(known.all()) else np.flatnonzero(known)
        times = launch if rows_all is None else launch[rows_all]
        order = None if tl.is_sorted(times) else np.argsort(times, kind="stable")
        if order is not None and rows_all is not None:
            order = rows_all[order]
        elif order is None:
            order = rows_all
        del times, known
        api_end = k["api_end"].to_numpy()
        n_rows = len(k) if order is None else order.size

        def launches(i0: int, i1: int) -> tuple[np.ndarray, np.ndarray]:
            rows = slice(i0, i1) if order is None else order[i0:i1]
            dur = api_end[rows].astype(np.int64) - launch[rows].astype(np.int64)
            key = (np.searchsorted(pids, pid[rows]).astype(np.int64) * width
                   + kernel_code[rows] + 1)
            return dur, key

        for i, typical, n in _first_vs_typical_stream(n_rows, launches, config,
                                                      len(pids) * width):
            row = i if order is None else int(order[i])
            first = int(api_end[row]) - int(launch[row])
            items.append({"cause": "first-call",
                          "what": f"first {k['api_name'].iloc[row]} of "
                                  f"'{kernel_text[kernel_code[row]]}'",
                          "start": int(launch[row]), "end": int(api_end[row]),
                          "gtid": int(k["gtid"].iloc[row]), "cost": int(first - typical),
                          "first_ns": first, "typical_ns": int(typical), "calls": n})
    return items


def _items_module_load(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    api = trace.api
    if api.empty:
        return []
    loads = api.iloc[np.flatnonzero(name_mask(api["name"], MODULE_LOAD))]   # no mask frame
    items = []
    for gtid, g in loads.groupby("gtid", sort=False):
        g = g.sort_values("start")
        s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
        label = range_labels(trace, s)
        load_names = g["name"].astype(str).to_numpy()
        # A burst: loads less than cluster_gap apart (a library loads its kernels in a
        # row), within one NVTX range.
        new = np.r_[True, (s[1:] - e[:-1] > config["cluster_gap_ms"] * 1e6)
                    | (label[1:] != label[:-1])]
        for burst in np.split(np.arange(s.size), np.flatnonzero(new)[1:]):
            cost = int((e[burst] - s[burst]).sum())
            if cost >= config["min_excess_us"] * 1e3:
                names = ", ".join(sorted(set(load_names[burst])))
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


def _thread_devices(trace: Trace) -> dict[int, int]:
    """The device each launching thread sends most of its kernels to (ties: the pair seen
    first), counted in batches of kernels."""
    k = trace.kernels
    gtid, device = k["gtid"].to_numpy(), k["device"].to_numpy()
    counts: dict[tuple[int, int], int] = {}             # (thread, device): in order seen
    for i0 in range(0, len(k), _CHUNK):
        g, d = gtid[i0:i0 + _CHUNK], device[i0:i0 + _CHUNK]
        known = g != NO_CALL
        g_code, g_ids = pd.factorize(g[known])
        d_code, d_ids = pd.factorize(d[known])
        pair, pairs = pd.factorize(g_code.astype(np.int64) * len(d_ids) + d_code)
        for key, n in zip(pairs.tolist(), np.bincount(pair).tolist(), strict=True):
            gi, di = divmod(key, len(d_ids))
            at = (int(g_ids[gi]), int(d_ids[di]))
            counts[at] = counts.get(at, 0) + n
    best: dict[int, tuple[int, int]] = {}
    for (g, d), n in counts.items():
        if int(g) not in best or n > best[int(g)][1]:
            best[int(g)] = (d, n)
    return {g: d for g, (d, _) in best.items()}


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    items = _items_module_load(trace, config) + _items_library_init(trace, config)
    give_back()                  # the module loads' mask over every call, to the system
    items += _items_first_calls(trace, config) + _items_first_iteration(trace, config)
    if not items or not context.accounting.devices:
        return []
    frame = pd.DataFrame(items)
    devices = _thread_devices(trace)
    default = next(iter(context.accounting.devices))
    frame["device"] = [devices.get(int(g), default) for g in frame["gtid"].tolist()]
    frame = frame[context.in_scope(frame["device"].to_numpy(),
                                   frame["start"].to_numpy(np.int64))]
    if frame.empty:
        return []
    frame["phase"] = context.phases_of(frame["device"].to_numpy(),
                                       frame["start"].to_numpy(np.int64))
    findings = []
    for (cause, device, phase), g in frame.groupby(["cause", "device", "phase"], sort=False):
        g = g.sort_values("cost", ascending=False)
        cost = int(g["cost"].sum())
        worst = {k: (0 if isinstance(v, float) and np.isnan(v) else v)
                 for k, v in g.iloc[0].to_dict().items()}
        text = message(str(cause), cost_ns=cost, what=str(worst["what"]),
                       item_cost_ns=int(worst["cost"]),
                       first_ns=int(worst.get("first_ns", 0)),
                       typical_ns=int(worst.get("typical_ns", 0)), calls=int(worst["calls"]),
                       module_load_ns=int(worst.get("module_load_ns", 0)), more=len(g) - 1)
        starts = g["start"].to_numpy(np.int64)
        ends = np.maximum(g["end"].to_numpy(np.int64), starts)
        # first-call / first-iteration: only the excess over a typical call is warm-up.
        share = np.where(g["cause"].isin(["first-call", "first-iteration"]).to_numpy(),
                         g["cost"].to_numpy(np.float64) / np.maximum(ends - starts, 1), 1.0)
        weight = float(np.clip(np.average(share, weights=np.maximum(ends - starts, 1)), 0, 1))
        shown = g.head(int(config["max_examples"]))
        findings.append(Finding(
            rule=RULE.id, cause=str(cause), severity=Severity.INFO,
            start_ns=int(starts.min()), end_ns=int(ends.max()), cost_ns=cost,
            at_ns=int(starts.min()), message=text,
            fix=RULE.causes[str(cause)].fix_for(context.framework),
            marks=_marks(shown),
            device=int(device), count=len(g), phase=str(phase),
            ranges=ranges_of(trace, starts),
            claim=Claim(int(device), tl.union(starts, ends), IDLE_IDS, weight=weight),
            evidence={"items": [{k: (v if not isinstance(v, (np.integer,)) else int(v))
                                 for k, v in row.items()
                                 if k not in ("range", "device", "phase") and pd.notna(v)}
                                for row in shown.to_dict("records")]}))
    return findings


def _marks(items: pd.DataFrame) -> list[Mark]:
    """Each item's time on its thread: a first iteration on the NVTX lane (it is a range),
    the others on the CUDA API lane."""
    return [Span(int(r.start), int(r.end), int(r.gtid),
                 lane="nvtx" if r.cause == "first-iteration" else "api", label=str(r.what))
            for r in items.itertuples()]


def message(cause: str, *, cost_ns: int, what: str, item_cost_ns: int, first_ns: int,
            typical_ns: int, calls: int, module_load_ns: int, more: int) -> str:
    """The warm-up cost of a finding, with its costliest item (*what*, its cost; for
    first-call and first-iteration its first and typical time over *calls*) and how many
    *more* items it has."""
    detail = {
        "module-load": f"{fmt_ns(cost_ns)} loading modules ({what})",
        "library-init": f"{what} took {fmt_ns(item_cost_ns)}",
        "first-call": (f"{what} took {fmt_ns(first_ns)} vs {fmt_ns(typical_ns)} typical over "
                       f"{calls} calls"),
        "first-iteration": (f"{what} took {fmt_ns(first_ns)} vs {fmt_ns(typical_ns)} typical "
                            f"over {calls} instances"
                            + (f", {fmt_ns(module_load_ns)} of it loading modules"
                               if module_load_ns else "")),
    }[cause]
    others = f" (+{more} more)" if more > 0 else ""
    return f"Warm-up cost {fmt_ns(cost_ns)}: {detail}{others}."


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
    causes=CAUSES,
    detect=detect,
    color="#0b84a5",
    priority=60,      # last: the module loading that launch-gap settles explains it
)
