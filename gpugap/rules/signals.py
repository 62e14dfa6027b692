"""What a device's steady iteration does, counted: the evidence causes are read from.

A cause says why the GPU waited; the fix that fits comes from what the program did: which
kernel it launched how often and with which grid, which calls it made (synchronizations,
allocations, copies) and how many of each, what it copied (direction, memory kind,
size). :class:`Signals` counts them once per device over its steady iterations (the
median iteration: what recurs, not what happened once) and the catalogue of causes
(gpugap.rules.catalogue) matches its entries' signatures against them.

Without iterations the steady state is one window: counts are of it, as one iteration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gpugap.accounting import DeviceAccount
from gpugap.accounting.api_names import ALLOCATE, MEMCPY, MODULE_LOAD, SYNCHRONIZE
from gpugap.memory import isin
from gpugap.program import Program
from gpugap.report.table import as_labels
from gpugap.report.trace import Trace

GRAPH_LAUNCH = re.compile(r"GraphLaunch")
# A read-back of a scalar or a few values (.item(), .tolist() of a few, nonzero's count):
# a device-to-host copy of at most this many bytes.
SMALL_READ_BYTES = 64


@dataclass
class KernelCount:
    """A kernel's launches per steady iteration (median), its grid (median blocks) and its
    share of the iteration's launches."""

    name: str
    per_iteration: float
    blocks: float
    share: float
    api: str = ""          # the call that launched it (cudaLaunchKernel, cuLaunchKernelEx)


@dataclass
class Signals:
    """The counted evidence of one device's steady iterations (module doc)."""

    trace: Trace = field(repr=False)
    dev: DeviceAccount = field(repr=False)
    dev_program: Program | None = field(default=None, repr=False)   # its frameworks
    # (first, last) ns of the steady state (gpugap.accounting.scope.Scope.steady_span).
    steady_span: tuple[int, int] = (0, 0)

    @cached_property
    def windows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(GPU lo, GPU hi, host lo, host hi) of each steady iteration; one window of the
        steady state without iterations."""
        ph = self.dev.phases
        its = ph.steady_iterations
        if ph.iterations is not None and len(its):
            lo, hi = ph.iteration_windows(its)
            return lo, hi, ph.iterations.cpu_start[its], ph.iterations.cpu_end[its]
        a, b = self.steady_span
        w = np.array([a], dtype=np.int64), np.array([b], dtype=np.int64)
        return w[0], w[1], w[0], w[1]

    @property
    def iterations(self) -> int:
        return int(self.windows[0].size)

    def _per_iteration(self, times: np.ndarray, host: bool,
                       weights: np.ndarray | None = None) -> np.ndarray:
        lo, hi = self.windows[2:] if host else self.windows[:2]
        k = np.searchsorted(lo, times, side="right") - 1
        inside = (k >= 0) & (times < hi[np.maximum(k, 0)])
        return np.bincount(k[inside], weights=None if weights is None else weights[inside],
                           minlength=lo.size)

    @cached_property
    def kernels(self) -> list[KernelCount]:
        """The kernels launched in the steady iterations, most launched first."""
        k = self.trace.table("kernels")
        if not len(k):
            return []
        mine = (k["device"] == self.dev.device)
        start = k["start"][mine]
        lo, hi = self.windows[:2]
        inside = np.zeros(start.size, dtype=bool)
        j = np.searchsorted(lo, start, side="right") - 1
        inside = (j >= 0) & (start < hi[np.maximum(j, 0)])
        if not inside.any():
            return []
        names = as_labels(k["name"]).codes[mine][inside]
        blocks = (k["grid_x"].astype(np.float64) * k["grid_y"] * k["grid_z"])[mine][inside] \
            if "grid_x" in k else np.zeros(names.size)
        per_it = j[inside]
        labels = as_labels(k["name"]).categories
        apis = (as_labels(k["api_name"]).strings()[mine][inside] if "api_name" in k
                else np.full(names.size, "", dtype=object))
        out = []
        n = max(self.iterations, 1)
        total = names.size / n
        for code in np.unique(names).tolist():
            sel = names == code
            counts = np.bincount(per_it[sel], minlength=n)
            out.append(KernelCount(str(labels[code]), float(np.median(counts)),
                                   float(np.median(blocks[sel])),
                                   float(sel.sum() / n / max(total, 1e-9)),
                                   str(apis[np.flatnonzero(sel)[0]] or "")))
        return sorted(out, key=lambda c: (-c.per_iteration, c.name))

    @cached_property
    def launches(self) -> float:
        """Kernel launches per steady iteration (median)."""
        return float(sum(c.per_iteration for c in self.kernels))

    @cached_property
    def calls(self) -> dict[str, float]:
        """CUDA calls of the device's processes per steady iteration (median), by name."""
        api = self.trace.table("api")
        if not len(api):
            return {}
        mine = isin(api["pid"], self.dev.work.pids)
        names = api.labels("name")
        codes = names.codes[mine]
        start = api["start"][mine]
        out = {}
        for code in np.unique(codes[codes >= 0]).tolist():
            counts = self._per_iteration(start[codes == code], host=True)
            median = float(np.median(counts))
            if median > 0:
                out[str(names.categories[code])] = median
        return out

    def count(self, pattern: re.Pattern[str]) -> float:
        """Calls per iteration whose name matches *pattern* (sum of the medians)."""
        return float(sum(v for k, v in self.calls.items() if pattern.search(k)))

    @property
    def syncs(self) -> float:
        return self.count(SYNCHRONIZE)

    @property
    def allocations(self) -> float:
        return self.count(ALLOCATE)

    @property
    def module_loads(self) -> float:
        return self.count(MODULE_LOAD)

    @property
    def graph_launches(self) -> float:
        return self.count(GRAPH_LAUNCH)

    @property
    def memcpy_calls(self) -> float:
        return self.count(MEMCPY)

    @cached_property
    def copies(self) -> dict[tuple[str, str], tuple[float, float]]:
        """Per (direction, host memory kind): copies per steady iteration and their bytes
        (medians)."""
        m = self.trace.table("memcpys")
        if not len(m):
            return {}
        mine = m["device"] == self.dev.device
        kind = m.labels("kind").strings()[mine]
        src, dst = m.labels("src_kind").strings()[mine], m.labels("dst_kind").strings()[mine]
        host = np.where(kind == "Device-to-Host", dst, src)
        nbytes = m["bytes"][mine].astype(np.float64)
        start = m["start"][mine]
        out = {}
        for key in sorted({(str(a), str(b)) for a, b in zip(kind, host, strict=True)}):
            sel = (kind == key[0]) & (host == key[1])
            counts = self._per_iteration(start[sel], host=False)
            sizes = self._per_iteration(start[sel], host=False, weights=nbytes[sel])
            if float(np.median(counts)) > 0:
                out[key] = (float(np.median(counts)), float(np.median(sizes)))
        return out

    @cached_property
    def small_reads(self) -> float:
        """Device-to-host copies of at most SMALL_READ_BYTES per steady iteration."""
        m = self.trace.table("memcpys")
        if not len(m):
            return 0.0
        sel = ((m["device"] == self.dev.device) & (m["bytes"] <= SMALL_READ_BYTES)
               & (m.labels("kind").strings() == "Device-to-Host"))
        return float(np.median(self._per_iteration(m["start"][sel], host=False)))

    @property
    def frameworks(self) -> list[str]:
        program = self.dev_program
        return [] if program is None else program.frameworks

    @property
    def sm_count(self) -> int:
        row = self.trace.device_row(self.dev.device)
        return int(row["sm_count"]) if row and row.get("sm_count") else 132
