"""When the program was compiling, from what compilers leave in the report.

- XLA (JAX): its own NVTX ranges around each compilation (``XlaCompile...`` in the
  domain TSL), on the thread that compiled.
- Compiler processes the program started (Triton and torch.compile's Inductor run
  ``ptxas``, and ``gcc``/``as``/``ld`` for their launchers; nvcc runs ``cicc``): from
  their first to their last OS-runtime call, when OS runtime calls were traced.
- Child processes a GPU process ran and waited for (a ``posix_spawn`` or ``fork``, then
  ``waitpid`` on the same thread), when nsys did not follow them: XLA runs ``ptxas`` so
  for every compilation, and Inductor its compilers. A program that runs other tools
  synchronously in its loop would show here too: the spans are named "child process".

Kernels a JIT built at run time (Triton's, Inductor's ``triton_*``) are recognised by
the accounting itself, gap by gap (gpugap.accounting.policy): a compilation that
left no span here (a warm compile cache, no OS-runtime trace) is still named there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gpugap.program import oscalls
from gpugap.program.nvtx import ranges
from gpugap.report.table import Table
from gpugap.report.trace import Trace

XLA_COMPILE = re.compile(r"^XlaCompile")
XLA_DOMAINS = ("TSL", "XLA")
COMPILER_PROCESS = re.compile(r"(?:^|/)(?:ptxas|cicc|nvcc|nvlink|fatbinary|gcc(?:-real)?|"
                              r"g\+\+|cc1(?:plus)?|as|ld(?:\.\w+)?|collect2|clang(?:\+\+)?)$")


@dataclass
class CompileSpans:
    """Host time spent compiling: ``start``/``end`` (int64 arrays, sorted by start),
    ``what`` (the compiler: 'XLA', 'ptxas'...), ``gtid`` (the compiling thread, -1 for
    a compiler process of its own)."""

    start: np.ndarray
    end: np.ndarray
    what: list[str]
    gtid: np.ndarray

    def __len__(self) -> int:
        return self.start.size

    def total_ns(self) -> int:
        """The union's length."""
        if not self.start.size:
            return 0
        order = np.argsort(self.start, kind="stable")
        s, e = self.start[order], np.maximum.accumulate(self.end[order])
        new = np.r_[True, s[1:] > e[:-1]]
        first = np.flatnonzero(new)
        last = np.r_[first[1:] - 1, s.size - 1]
        return int((e[last] - s[first]).sum())

    def summary(self) -> dict[str, dict[str, int]]:
        """{compiler: {count, ns}}."""
        out: dict[str, dict[str, int]] = {}
        for w, a, b in zip(self.what, self.start.tolist(), self.end.tolist(), strict=True):
            item = out.setdefault(w, {"count": 0, "ns": 0})
            item["count"] += 1
            item["ns"] += b - a
        return out


def _xla_ranges(trace: Trace) -> Table:
    nv = ranges(trace)
    if not len(nv):
        return nv
    mine = nv.labels("domain").isin(XLA_DOMAINS)
    if not mine.any():
        return nv.rows(mine)
    rows = nv.rows(mine)
    return rows.rows(rows.labels("name").matching(XLA_COMPILE))   # (anchored: ^)


def _compiler_processes(trace: Trace, process_names: dict[int, str]
                        ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """[first, last] OS-runtime call of each compiler process's threads."""
    compilers = {pid: re.sub(r"^.*/", "", name) for pid, name in process_names.items()
                 if COMPILER_PROCESS.search(name)}
    threads = trace.table("threads")
    if not compilers or not len(threads) or not trace.osrt_traced:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    gtids = threads["gtid"][np.isin(threads["pid"], list(compilers))].astype(np.int64)
    if not gtids.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    everything = (np.array([np.iinfo(np.int64).min // 2]),
                  np.array([np.iinfo(np.int64).max // 2]))
    calls = trace.osrt_calls_overlapping({g: everything for g in gtids.tolist()})
    if not len(calls):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    pid = calls["gtid"].astype(np.int64) >> 24 & 0xFFFFFF
    pids, inverse = np.unique(pid, return_inverse=True)
    start = np.full(pids.size, np.iinfo(np.int64).max)
    end = np.full(pids.size, np.iinfo(np.int64).min)
    np.minimum.at(start, inverse, calls["start"])
    np.maximum.at(end, inverse, calls["end"])
    return start, end, [compilers[p] for p in pids.tolist()]


CHILD_MAX_NS = 60_000_000_000      # a child waited for longer is no compiler run


def _child_runs(os_calls: Table | None, trace: Trace | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, gtid) of child processes a thread started and then waited for (from
    *os_calls*, gpugap.program.oscalls): each wait paired with the thread's latest start
    before it. A thread that made CUDA calls between the start and the wait went on
    working meanwhile (a data loader's worker processes, joined at the end of an epoch):
    no compiler run; with *trace*, those are left out. (The accounting keeps only the
    spans during which the device's work stopped: policy.compile_windows.)"""
    calls = oscalls.named(os_calls, re.compile(f"{oscalls.CHILD_START.pattern}|"
                                               f"{oscalls.CHILD_WAIT.pattern}"))
    if calls is None or not len(calls):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts, ends, gtids = [], [], []
    gtid = calls["gtid"]
    is_spawn = calls.labels("name").matching(oscalls.CHILD_START)
    for g in np.unique(gtid).tolist():
        mine = gtid == g
        spawn = is_spawn[mine]
        s = calls["start"][mine].astype(np.int64)
        e = calls["end"][mine].astype(np.int64)
        spawned = s[spawn]
        if not spawned.size:
            continue
        waits = np.flatnonzero(~spawn)
        k = np.searchsorted(spawned, s[waits], side="right") - 1
        ok = (k >= 0) & (e[waits] - spawned[np.maximum(k, 0)] <= CHILD_MAX_NS)
        if trace is not None and ok.any():
            api = trace.table("api")
            cuda = np.sort(api["start"][api["gtid"] == g]) if len(api) else np.zeros(0)
            between = (np.searchsorted(cuda, s[waits]) -
                       np.searchsorted(cuda, spawned[np.maximum(k, 0)], side="right"))
            ok &= between <= 0
        starts.append(spawned[k[ok]])
        ends.append(e[waits][ok])
        gtids.append(np.full(int(ok.sum()), int(g), dtype=np.int64))
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(gtids)


def spans(trace: Trace, process_names: dict[int, str],
          os_calls: Table | None = None) -> CompileSpans:
    """Every span of compilation the report shows (module doc), sorted by start;
    *os_calls*: the OS calls of the processes that drove GPUs (gpugap.program.oscalls),
    whose child runs count."""
    xla = _xla_ranges(trace)
    ps, pe, pwhat = _compiler_processes(trace, process_names)
    cs, ce, cg = _child_runs(os_calls, trace)
    start = np.r_[xla["start"].astype(np.int64), ps, cs]
    end = np.r_[xla["end"].astype(np.int64), pe, ce]
    what = ["XLA"] * len(xla) + pwhat + ["child process"] * cs.size
    gtid = np.r_[xla["gtid"].astype(np.int64), np.full(ps.size, -1, dtype=np.int64), cg]
    order = np.argsort(start, kind="stable")
    return CompileSpans(start[order].astype(np.int64), end[order].astype(np.int64),
                        [what[i] for i in order.tolist()], gtid[order])
