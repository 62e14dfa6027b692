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

import re
from collections.abc import Callable, Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap import scan
from gpugap.accounting.api_names import LAUNCH, MODULE_LOAD, SYNCHRONIZE
from gpugap.accounting.buckets import IDLE_IDS
from gpugap.accounting.labels import range_labels, ranges_of
from gpugap.report.table import Table, as_labels, factorize
from gpugap.report.trace import NO_CALL, Trace
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.evidence import group_ids, rows_by_group
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
    order = None if tl.is_sorted(start) else np.argsort(start, kind="stable")
    # Group codes numbered by first occurrence in start order; rows grouped by a stable
    # sort of the codes (start order kept within a group).
    codes, uniq = factorize(key if order is None else key[order])
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


def _first_vs_typical(rows: Table, key: np.ndarray, config: Mapping[str, float]) -> Table:
    """The rows (one per group of *key*, group_ids' numbers) whose first occurrence (by
    start) exceeds the median of the later ones by the thresholds, with columns first_ns,
    typical_ns, excess_ns, n added."""
    hits = _first_vs_typical_idx(rows["start"], rows["end"], key, config)
    first = rows.rows(np.array([i for i, _, _ in hits], dtype=np.intp))
    first_ns = (first["end"] - first["start"]).astype(np.int64)
    typical = np.array([t for _, t, _ in hits], dtype=np.float64)
    return first.with_columns(first_ns=first_ns, typical_ns=typical,
                              excess_ns=(first_ns - typical).astype(np.int64),
                              n=np.array([n for _, _, n in hits], dtype=np.int64))


def _module_load_inside(trace: Trace, starts: np.ndarray, ends: np.ndarray,
                        gtids: np.ndarray) -> np.ndarray:
    api = trace.table("api")
    out = np.zeros(starts.size, dtype=np.int64)
    if api.empty or starts.size == 0:
        return out
    loads = np.flatnonzero(as_labels(api["name"]).matching(MODULE_LOAD))
    load_gtid = api["gtid"][loads]
    for gtid in np.unique(gtids):
        sel = gtids == gtid
        mine = loads[load_gtid == gtid]
        if len(mine):
            u = tl.union(api["start"][mine], api["end"][mine])
            out[sel] = tl.overlap_each(starts[sel], ends[sel], u)
    return out


def _first_vs_typical_stream(n: int, rows_of: Callable[[slice], tuple[np.ndarray, np.ndarray]],
                             config: Mapping[str, float], keys: int
                             ) -> list[tuple[int, float, int]]:
    """_first_vs_typical_idx for many rows, in bounded memory (a batch at a time:
    gpugap.scan). ``rows_of(batch)`` gives the rows of a batch of 0..n-1 (in start
    order, ties in input order) as (durations, key codes in 0..keys-1, -1 for rows that
    do not count). Two passes: counts and first occurrences per key; then, for the keys
    whose first call could pass the thresholds, the median of their later calls.
    Returns (row, median, count) in order of first occurrence."""
    counts = np.zeros(keys, dtype=np.int64)
    first = np.full(keys, -1, dtype=np.int64)
    first_dur = np.zeros(keys, dtype=np.int64)
    min_dur = np.full(keys, np.iinfo(np.int64).max, dtype=np.int64)

    def count(part: slice, seen: tuple[bool, int, int]) -> tuple[bool, int, int]:
        """Rows *part*: counts and first occurrences per key, in place. *seen*: whether
        a duration so far was negative, and the range of the durations."""
        negative, low, high = seen
        dur, key = rows_of(part)
        valid = np.flatnonzero(key >= 0)
        kv, dv = key[valid], dur[valid]
        counts[:] += np.bincount(kv, minlength=keys)
        here = np.full(keys, -1, dtype=np.int64)
        here[kv[::-1]] = valid[::-1]                  # the first row of each key here
        new = (first < 0) & (here >= 0)
        first[new] = here[new] + part.start
        first_dur[new] = dur[here[new]]
        if dv.size:
            least = int(dv.min())
            low, high = min(low, least), max(high, int(dv.max()))
            if least < 0:                                 # only in broken exports
                negative = True
                np.minimum.at(min_dur, kv, dv)
        return negative, low, high

    negative, low, high = scan.fold(n, count, (False, 0, 0))
    min_excess = config["min_excess_us"] * 1e3
    # The median is at least the minimum, which is at least 0 unless some call ended
    # before it started: only keys whose first call is long enough can pass.
    floor = np.where(min_dur < 0, min_dur, 0) if negative else 0
    candidates = np.flatnonzero((counts >= config["min_calls"]) & (counts > 1)
                                & (first_dur - floor >= min_excess))
    if not candidates.size:
        return []
    # Each key's candidate number, -1 for the rest; one slot more, the last, for the key
    # -1 of rows that do not count (lut[key] is then -1 for them too, without a mask).
    lut = np.full(keys + 1, -1, dtype=np.int64)
    lut[candidates] = np.arange(candidates.size)
    # Each candidate's later calls written in place (their number is known): no list of
    # parts joined, and the median partitions them where they lie.
    # In 4 bytes when they fit (calls under 2 s): the same median, half the memory.
    width = np.int32 if np.iinfo(np.int32).min <= low and high <= np.iinfo(np.int32).max \
        else np.int64
    later = [np.empty(int(counts[key]) - 1, dtype=width) for key in candidates.tolist()]
    filled = [0] * candidates.size

    def collect(part: slice) -> None:
        """Rows *part*: the candidates' later calls, written in place."""
        dur, key = rows_of(part)
        which = lut[key]
        rows = np.flatnonzero(which >= 0)
        if not rows.size:
            return
        # Rows grouped by candidate (stable), each group's run taken once.
        group = which[rows]
        # Few candidates: their numbers in 2 bytes, which numpy sorts stably by radix.
        order = np.argsort(group.astype(np.int16) if candidates.size < 32767 else group,
                           kind="stable")
        rows, group = rows[order], group[order]
        cuts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        for c, lo, hi in zip(group[cuts].tolist(), cuts.tolist(),
                             [*cuts[1:].tolist(), rows.size], strict=True):
            mine = rows[lo:hi]
            mine = mine[mine + part.start != first[candidates[c]]]
            later[c][filled[c]:filled[c] + mine.size] = dur[mine]
            filled[c] += mine.size

    scan.each(n, collect)
    out = []
    for c, key in enumerate(candidates.tolist()):
        typical = float(np.median(later[c], overwrite_input=True))
        later[c] = np.empty(0, dtype=np.int64)             # its memory, before the next
        first_ns = int(first_dur[key])
        excess = int(first_ns - typical)
        if excess >= min_excess and first_ns >= config["min_ratio"] * max(typical, 1):
            out.append((int(first[key]), typical, int(counts[key])))
    return sorted(out)


def _distinct_ids(ids: np.ndarray) -> np.ndarray:
    """The distinct values of *ids* of a small range (process ids), sorted: counted over
    that range, not sorted as np.unique would (millions of calls)."""
    if not ids.size:
        return ids[:0]
    low, high = int(ids.min()), int(ids.max())
    if low == high:                      # one process (most reports): nothing to count
        return ids[:1].copy()
    return (np.flatnonzero(np.bincount(ids - low)) + low).astype(ids.dtype)


def _key_codes(pids: np.ndarray, pid: np.ndarray, code: np.ndarray, width: int
               ) -> np.ndarray:
    """The key (int64) of each row of (process *pid*, name *code*): the place of its
    process among *pids* (distinct, sorted; every pid is one of them) times *width*, plus
    its code + 1. One process (most reports): every place is 0, not searched for."""
    if pids.size == 1:
        return code.astype(np.int64) + 1
    return np.searchsorted(pids, pid).astype(np.int64) * width + code + 1


def _items_first_calls(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    api = trace.table("api")
    if api.empty:
        return []
    names = as_labels(api["name"])
    name_code, name_text = names.codes, names.categories
    skip = np.array([bool(SYNCHRONIZE.search(t) or MODULE_LOAD.search(t) or LAUNCH.search(t))
                     for t in name_text] + [False])
    width = len(name_text) + 1
    start, end, pid = api["start"], api["end"], api["pid"]
    pids = _distinct_ids(pid)
    order = None if tl.is_sorted(start) else np.argsort(start, kind="stable")

    def calls(part: slice) -> tuple[np.ndarray, np.ndarray]:
        rows = part if order is None else order[part]
        code = name_code[rows]
        key = _key_codes(pids, pid[rows], code, width)
        return end[rows] - start[rows], np.where(skip[code], -1, key)

    items = []
    for i, typical, n in _first_vs_typical_stream(len(api), calls, config,
                                                  len(pids) * width):
        row = i if order is None else int(order[i])
        first = int(end[row] - start[row])
        items.append({"cause": "first-call", "what": f"first {name_text[name_code[row]]}",
                      "start": int(start[row]), "end": int(end[row]),
                      "gtid": int(api["gtid"][row]), "cost": int(first - typical),
                      "first_ns": first, "typical_ns": int(typical), "calls": n})
    # First launch of each kernel: the launch call, matched to its kernel by correlation.
    k = trace.table("kernels")
    launch = k["api_start"]
    known = launch != NO_CALL
    if known.any():
        kernel_names = as_labels(k["name"])
        kernel_code, kernel_text = kernel_names.codes, kernel_names.categories
        width = len(kernel_text) + 1
        pid = k["pid"]
        pids = _distinct_ids(pid)
        rows_all = None if bool(known.all()) else np.flatnonzero(known)
        times = launch if rows_all is None else launch[rows_all]
        order = None if tl.is_sorted(times) else np.argsort(times, kind="stable")
        if order is not None and rows_all is not None:
            order = rows_all[order]
        elif order is None:
            order = rows_all
        del times, known
        api_end = k["api_end"]
        n_rows = len(k) if order is None else order.size

        def launches(part: slice) -> tuple[np.ndarray, np.ndarray]:
            rows = part if order is None else order[part]
            dur = (api_end[rows].astype(np.int64, copy=False)
                   - launch[rows].astype(np.int64, copy=False))
            return dur, _key_codes(pids, pid[rows], kernel_code[rows], width)

        for i, typical, n in _first_vs_typical_stream(n_rows, launches, config,
                                                      len(pids) * width):
            row = i if order is None else int(order[i])
            first = int(api_end[row]) - int(launch[row])
            items.append({"cause": "first-call",
                          "what": f"first {k['api_name'][row]} of "
                                  f"'{kernel_text[kernel_code[row]]}'",
                          "start": int(launch[row]), "end": int(api_end[row]),
                          "gtid": int(k["gtid"][row]), "cost": int(first - typical),
                          "first_ns": first, "typical_ns": int(typical), "calls": n})
    return items


def _items_module_load(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    api = trace.table("api")
    if api.empty:
        return []
    loads = api.rows(as_labels(api["name"]).matching(MODULE_LOAD))
    items = []
    for rows in rows_by_group(group_ids([loads["gtid"]])):
        # sort_values("start"): a quicksort, whose order of ties is pandas' too.
        g = loads.rows(rows[np.argsort(loads["start"][rows], kind="quicksort")])
        s, e = g["start"], g["end"]
        label = range_labels(trace, s)
        load_names = as_labels(g["name"]).strings()
        # A burst: loads less than cluster_gap apart (a library loads its kernels in a
        # row), within one NVTX range.
        new = np.r_[True, (s[1:] - e[:-1] > config["cluster_gap_ms"] * 1e6)
                    | (label[1:] != label[:-1])]
        for burst in np.split(np.arange(s.size), np.flatnonzero(new)[1:]):
            cost = int((e[burst] - s[burst]).sum())
            if cost >= config["min_excess_us"] * 1e3:
                names = ", ".join(sorted(set(load_names[burst])))
                items.append({"cause": "module-load",
                              "what": f"{burst.size} module load"
                                      f"{'s' if burst.size != 1 else ''} ({names})",
                              "start": int(s[burst[0]]), "end": int(e[burst[-1]]),
                              "gtid": int(g["gtid"][0]), "cost": cost,
                              "calls": int(burst.size)})
    return items


# Library calls that set the library up (NVTX ranges of cuBLAS, cuDNN... domains).
LIBRARY_SETUP = re.compile(r"Create|Init")


def _items_library_init(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    nv = trace.table("nvtx")
    if nv.empty:
        return []
    lib = nv.rows(nv["library"])
    lib = lib.rows(as_labels(lib["name"]).matching(LIBRARY_SETUP)
                   & ((lib["end"] - lib["start"]) >= config["min_excess_us"] * 1e3))
    return [{"cause": "library-init", "what": f"{r['domain']} {r['name']}",
             "start": r["start"], "end": r["end"], "gtid": r["gtid"],
             "cost": r["end"] - r["start"], "calls": 1}
            for r in lib.records()]


def _items_first_iteration(trace: Trace, config: Mapping[str, float]) -> list[dict]:
    nv = trace.table("nvtx")
    if nv.empty:
        return []
    program = np.flatnonzero(~nv["library"])
    # Names and domains as the table's Labels (labelled once per trace), not labelled
    # again string by string for these rows.
    key = group_ids([nv["gtid"][program], nv.labels("domain").take(program),
                     nv.labels("name").take(program), nv["depth"][program]])
    firsts = _first_vs_typical(nv.rows(program), key,
                               config | {"min_calls": max(config["min_calls"], 3)})
    if firsts.empty:
        return []
    # A first outer range contains the first of each range nested in it: keep the
    # outermost so one warm-up is not counted twice.
    s, e, g = firsts["start"], firsts["end"], firsts["gtid"]
    nested = np.array([((s <= s[i]) & (e >= e[i]) & (g == g[i])).sum() > 1
                       for i in range(len(firsts))], dtype=bool)
    firsts = firsts.rows(~nested)
    loads = _module_load_inside(trace, firsts["start"], firsts["end"], firsts["gtid"])
    return [{"cause": "first-iteration", "what": f"first '{r['name']}' range",
             "start": r["start"], "end": r["end"], "gtid": r["gtid"],
             "cost": r["excess_ns"], "first_ns": r["first_ns"],
             "typical_ns": int(r["typical_ns"]), "calls": r["n"], "module_load_ns": ml}
            for r, ml in zip(firsts.records(), loads.tolist(), strict=True)]


def _thread_devices(trace: Trace) -> dict[int, int]:
    """The device each launching thread sends most of its kernels to (ties: the pair seen
    first), counted in batches of kernels."""
    k = trace.table("kernels")
    gtid, device = k["gtid"], k["device"]
    counts: dict[tuple[int, int], int] = {}             # (thread, device): in order seen

    def count(part: slice) -> None:
        g, d = gtid[part], device[part]
        known = g != NO_CALL
        g, d = g[known], d[known]
        if not g.size:
            return
        # A thread launches runs of kernels onto one device: the pairs are found among
        # the runs (a few), each counted by its length.
        runs = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (d[1:] != d[:-1])])
        kernels = np.diff(np.r_[runs, g.size])
        pair = group_ids([g[runs], d[runs]])
        firsts = runs[np.unique(pair, return_index=True)[1]]
        for at, n in zip(firsts.tolist(), np.bincount(pair, weights=kernels).tolist(),
                         strict=True):
            key = (int(g[at]), int(d[at]))
            counts[key] = counts.get(key, 0) + int(n)

    scan.each(len(k), count)
    best: dict[int, tuple[int, int]] = {}
    for (g, d), n in counts.items():
        if int(g) not in best or n > best[int(g)][1]:
            best[int(g)] = (d, n)
    return {g: d for g, (d, _) in best.items()}


def _by_cost(cost: np.ndarray) -> np.ndarray:
    """Positions of *cost* from the largest, in pandas' order (sort_values(ascending=
    False): a quicksort of the values reversed, reversed back), which orders ties."""
    backwards = np.arange(cost.size)[::-1]
    return backwards[cost[::-1].argsort(kind="quicksort")][::-1]


def _as_evidence(items: list[dict]) -> list[dict]:
    """The items as the evidence lists them: the fields in order of first appearance over
    all items, and a field that some items lack as a float (a table of the items held it
    as a float column, empty where missing; the reports' JSON keeps those numbers)."""
    fields = list(dict.fromkeys(k for item in items for k in item))
    partial = {k for k in fields if any(k not in item for item in items)}
    return [{k: float(item[k]) if k in partial else item[k] for k in fields if k in item}
            for item in items]


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    items = _items_module_load(trace, config) + _items_library_init(trace, config)
    items += _items_first_calls(trace, config) + _items_first_iteration(trace, config)
    if not items or not context.accounting.devices:
        return []
    thread_device = _thread_devices(trace)
    default = next(iter(context.accounting.devices))
    devices = np.array([thread_device.get(item["gtid"], default) for item in items],
                       dtype=np.int64)
    starts = np.array([item["start"] for item in items], dtype=np.int64)
    inside = np.flatnonzero(context.in_scope(devices, starts))
    if not inside.size:
        return []
    evidence = _as_evidence(items)
    items = [evidence[i] for i in inside.tolist()]
    devices, starts = devices[inside], starts[inside]
    causes = np.array([item["cause"] for item in items], dtype=object)
    phases = context.phases_of(devices, starts)
    ends = np.maximum(np.array([item["end"] for item in items], dtype=np.int64), starts)
    costs = np.array([item["cost"] for item in items], dtype=np.int64)
    findings = []
    for rows in rows_by_group(group_ids([causes, devices, phases])):
        rows = rows[_by_cost(costs[rows])]
        cause, device, phase = str(causes[rows[0]]), int(devices[rows[0]]), str(phases[rows[0]])
        g = [items[i] for i in rows.tolist()]
        worst = g[0]
        cost = int(costs[rows].sum())
        words = {"what": str(worst["what"]), "item_cost_ns": int(worst["cost"]),
                 "first_ns": int(worst.get("first_ns", 0)),
                 "typical_ns": int(worst.get("typical_ns", 0)), "calls": int(worst["calls"]),
                 "module_load_ns": int(worst.get("module_load_ns", 0)), "more": len(g) - 1}
        text = message(cause, cost_ns=cost, **words)
        start, end = starts[rows], ends[rows]
        # first-call / first-iteration: only the excess over a typical call is warm-up.
        share = np.where(np.isin(causes[rows], ["first-call", "first-iteration"]),
                         costs[rows].astype(np.float64) / np.maximum(end - start, 1), 1.0)
        weight = float(np.clip(np.average(share, weights=np.maximum(end - start, 1)), 0, 1))
        shown = g[:int(config["max_examples"])]
        findings.append(Finding(
            rule=RULE.id, cause=cause, severity=Severity.INFO,
            start_ns=int(start.min()), end_ns=int(end.max()), cost_ns=cost,
            at_ns=int(start.min()), message=text,
            fix=RULE.causes[cause].fix_for(context.framework),
            marks=_marks(shown),
            device=device, count=len(g), phase=phase,
            ranges=ranges_of(trace, start),
            claim=Claim(device, tl.union(start, end), IDLE_IDS, weight=weight),
            evidence={"items": shown}, pending=(cost, words)))
    return findings


def finish(trace: Trace, findings: list[Finding]) -> None:
    """Each message again with the settled cost: the GPU's idle time the warm-up caused
    that no other finding counted, beside what the items took (the GPU may have had work
    meanwhile, or another finding counted that time)."""
    for f in findings:
        took, words = f.pending
        f.pending = None
        f.message = message(f.cause, cost_ns=f.cost_ns, took_ns=took, **words)


def _marks(items: list[dict]) -> list[Mark]:
    """Each item's time on its thread: a first iteration on the NVTX lane (it is a range),
    the others on the CUDA API lane."""
    return [Span(int(r["start"]), int(r["end"]), int(r["gtid"]),
                 lane="nvtx" if r["cause"] == "first-iteration" else "api",
                 label=str(r["what"]))
            for r in items]


def message(cause: str, *, cost_ns: int, what: str, item_cost_ns: int, first_ns: int,
            typical_ns: int, calls: int, module_load_ns: int, more: int,
            took_ns: int | None = None) -> str:
    """The warm-up cost of a finding (its settled cost), with its costliest item (*what*,
    its cost; for first-call and first-iteration its first and typical time over
    *calls*) and how many *more* items it has; *took_ns*: what its items took in all,
    said where the settled cost is less."""
    detail = {
        "module-load": f"{fmt_ns(cost_ns if took_ns is None else took_ns)} loading "
                       f"modules ({what})",
        "library-init": f"{what} took {fmt_ns(item_cost_ns)}",
        "first-call": (f"{what} took {fmt_ns(first_ns)} vs {fmt_ns(typical_ns)} typical over "
                       f"{calls} calls"),
        "first-iteration": (f"{what} took {fmt_ns(first_ns)} vs {fmt_ns(typical_ns)} typical "
                            f"over {calls} instances"
                            + (f", {fmt_ns(module_load_ns)} of it loading modules"
                               if module_load_ns else "")),
    }[cause]
    others = f" (+{more} more)" if more > 0 else ""
    head = f"Warm-up cost {fmt_ns(cost_ns)}"
    if took_ns is not None and fmt_ns(took_ns) != fmt_ns(cost_ns):
        if cost_ns <= 0:
            head = (f"Warm-up that took {fmt_ns(took_ns)} but cost no GPU idle time of its "
                    "own (the GPU had work meanwhile, or another finding counts it)")
        else:
            head += (f" of GPU idle time, of the {fmt_ns(took_ns)} it took (the rest the "
                     "GPU had work for, or another finding counts)")
    return f"{head}: {detail}{others}."


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
    finish=finish,
    color="#0b84a5",
    priority=60,      # last: the module loading that launch-gap settles explains it
)
