"""NVTX ranges as time windows on the GPU timeline.

An NVTX range marks CPU time, but the GPU work launched inside it runs later. A range's
*window* is therefore [range start, max(range end, end of the last GPU op its thread
launched inside the range)]; all instances of a name make one union of windows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpugap import timeline as tl
from gpugap.errors import UsageError
from gpugap.report.trace import Trace


@dataclass(frozen=True)
class RangeKey:
    name: str
    domain: str

    @property
    def label(self) -> str:
        return f"{self.domain}:{self.name}" if self.domain else self.name


def _slice_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, empty: np.ndarray
               ) -> np.ndarray:
    """max(values[lo[i]:hi[i]]) for every i (``empty[i]`` where the slice is empty),
    in one ``reduceat`` over interleaved bounds."""
    if values.size == 0:
        return empty
    padded = np.r_[values, np.iinfo(np.int64).min]
    bounds = np.empty(2 * lo.size, dtype=np.int64)
    bounds[0::2], bounds[1::2] = lo, hi
    out = np.maximum.reduceat(padded, bounds)[0::2]
    return np.where(hi > lo, out, empty)


def _launches_by_thread(trace: Trace) -> dict[int, list[tuple[np.ndarray, np.ndarray]]]:
    """Per launching thread (gtid), per kind of op: the launch times of its GPU ops
    (sorted) and their ends in that order. Built once per trace; when one thread launched
    every kernel in time order (the common case) these are views of the kernel columns,
    not copies."""
    cached = trace.__dict__.get("_launches_by_thread")
    if cached is not None:
        return cached
    out: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for f in (trace.kernels, trace.memcpys, trace.memsets):
        if not len(f):
            continue
        launch = f["api_start"].to_numpy(dtype=np.float64)
        gtid = f["gtid"].to_numpy(dtype=np.float64)
        end = f["end"].to_numpy(dtype=np.int64)
        known = ~np.isnan(launch)
        first = gtid[0]
        if (bool(known.all()) and bool((gtid == first).all())
                and bool((launch[1:] >= launch[:-1]).all())):
            out.setdefault(int(first), []).append((launch, end))
            continue
        for g in pd.unique(gtid[known]).tolist():
            mine = np.flatnonzero(known & (gtid == g))
            t, e = launch[mine].astype(np.int64), end[mine]
            if t.size > 1 and not bool((t[1:] >= t[:-1]).all()):
                order = np.argsort(t, kind="stable")
                t, e = t[order], e[order]
            out.setdefault(int(g), []).append((t, e))
    trace.__dict__["_launches_by_thread"] = out
    return out


def _projected_ends_of(trace: Trace, ranges: pd.DataFrame) -> np.ndarray:
    """_projected_ends computed for *ranges* (any frame of NVTX ranges)."""
    ends = ranges["end"].to_numpy(dtype=np.int64).copy()
    if ranges.empty or not trace.has_gpu_activity:
        return ends
    launches = _launches_by_thread(trace)
    starts = ranges["start"].to_numpy(dtype=np.int64)
    for gtid, idx in ranges.groupby("gtid").indices.items():
        own_ends = ends[idx].copy()
        for launch, op_end in launches.get(int(gtid), []):
            lo = np.searchsorted(launch, starts[idx], side="left")
            hi = np.searchsorted(launch, own_ends, side="right")
            ends[idx] = np.maximum(ends[idx], _slice_max(op_end, lo, hi, own_ends))
    return ends


def _projected_ends(trace: Trace, ranges: pd.DataFrame) -> np.ndarray:
    """For each range: max(its end, end of the GPU work its thread launched inside it).

    Computed once for every NVTX range of the trace and looked up for rows of it (as
    user_ranges/select/reported_ranges return them), so that the windows of many
    distinct ranges cost their instances, not a pass over the launches each."""
    nv = trace.nvtx
    index = ranges.index
    if (ranges.empty or not isinstance(nv.index, pd.RangeIndex) or nv.index.start != 0
            or nv.index.step != 1 or not pd.api.types.is_integer_dtype(index.dtype)):
        return _projected_ends_of(trace, ranges)
    pos = index.to_numpy()
    if int(pos.min()) < 0 or int(pos.max()) >= len(nv):
        return _projected_ends_of(trace, ranges)
    # Rows of trace.nvtx itself (same index, same times and thread), else computed here.
    for col in ("start", "end", "gtid"):
        if not np.array_equal(nv[col].to_numpy()[pos], ranges[col].to_numpy()):
            return _projected_ends_of(trace, ranges)
    cached = trace.__dict__.get("_nvtx_projected_ends")
    if cached is None or cached.size != len(nv):
        cached = trace.__dict__["_nvtx_projected_ends"] = _projected_ends_of(trace, nv)
    return cached[pos]


# NVTX domains that libraries register for their own ranges (CUB/Thrust/libcu++ as
# "CCCL", NCCL, NVSHMEM, ...): their ranges describe the library's work, not the program's.
LIBRARY_DOMAINS = frozenset({"CCCL", "CUB", "Thrust", "libcudacxx", "NCCL", "NVSHMEM",
                             "cuBLAS", "cuBLASLt", "cuDNN", "cuSPARSE", "cuFFT", "cuSOLVER",
                             "cuTENSOR", "cuRAND", "NPP", "nvJPEG", "TensorRT", "CUDA",
                             "cuda-python", "CuPy", "Triton", "TransformerEngine", "NVTE"})
# A C++-qualified name (cub::DeviceReduce::Sum, thrust::sort) in any domain is a library's.
_QUALIFIED = re.compile(r"^[A-Za-z_]\w*::\w")


def library_mask(nv: pd.DataFrame) -> np.ndarray:
    """Per NVTX row: made by a library rather than the program (nsys's own library ranges,
    a library's registered domain, or a C++-qualified name), decided per distinct value."""
    if nv.empty:
        return np.zeros(0, dtype=bool)
    lib = nv["library"].to_numpy(dtype=bool).copy()
    domain = nv["domain"].astype(str)
    lib |= domain.isin(LIBRARY_DOMAINS).to_numpy()
    names = nv["name"].astype(object)
    distinct = pd.unique(names)
    qualified = {n: bool(_QUALIFIED.match(str(n))) for n in distinct.tolist()}
    lib |= names.map(qualified).to_numpy(dtype=bool)
    return lib


def user_ranges(trace: Trace, all_domains: bool = False) -> pd.DataFrame:
    """NVTX ranges of the program: not the ones nsys makes for traced libraries, nor those
    libraries emit themselves (see library_mask); every range with *all_domains*."""
    nv = trace.nvtx
    if nv.empty or all_domains:
        return nv
    cached = trace.__dict__.get("_library_mask")
    if cached is None or cached.size != len(nv):
        cached = trace.__dict__["_library_mask"] = library_mask(nv)
    return nv[~cached]


def select(trace: Trace, name: str) -> pd.DataFrame:
    """Instances of the range called *name* (or ``domain:name``); UsageError if none."""
    nv = user_ranges(trace)
    match = nv[nv["name"] == name]
    if match.empty and ":" in name:
        domain, _, short = name.partition(":")
        match = nv[(nv["domain"] == domain) & (nv["name"] == short)]
    if match.empty:
        known = ", ".join(sorted(set(nv["name"].tolist()))[:12]) or "none"
        raise UsageError(f"no NVTX range named '{name}' in {trace.info.path} "
                         f"(ranges: {known}); pick one of those with --range")
    return match


def windows_of(trace: Trace, instances: pd.DataFrame) -> tl.Intervals:
    return tl.union(instances["start"].to_numpy(dtype=np.int64),
                    _projected_ends(trace, instances))


def window(trace: Trace, name: str) -> tl.Intervals:
    return windows_of(trace, select(trace, name))


def reported_ranges(trace: Trace, max_depth: int = 1, all_domains: bool = False
                    ) -> list[tuple[RangeKey, pd.DataFrame]]:
    """Distinct (domain, name) of user ranges at depth <= max_depth, in order of first
    appearance, each with its instances."""
    nv = user_ranges(trace, all_domains=all_domains)
    if nv.empty:
        return []
    shallow = nv[nv["depth"] <= max_depth]
    if shallow.empty:
        return []
    # Every row grouped by (domain, name) once: linear in the rows, not rows x names.
    keys = pd.MultiIndex.from_arrays([nv["domain"].astype(object).to_numpy(),
                                      nv["name"].astype(object).to_numpy()])
    codes, uniques = pd.factorize(keys)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    wanted = pd.unique(codes[(nv["depth"] <= max_depth).to_numpy()])
    out = []
    for code in wanted.tolist():
        if code < 0:                    # a missing name or domain matches nothing
            continue
        domain, name = uniques[code]
        every = nv.iloc[order[bounds[code]:bounds[code + 1]]]
        out.append((RangeKey(name=str(name), domain=str(domain)), every))
    out.sort(key=lambda item: int(item[1]["start"].min()))
    return out
