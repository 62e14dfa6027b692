"""The processes that drove the GPUs and the roles of their threads.

A thread's role comes from what it did: it *launched* GPU work (kernels, copies,
memsets, graph launches: their launching calls name it), and of the launching threads,
how long each spent blocked in the OS waiting on another thread (a queue, a lock, a
condition variable, a semaphore, poll or sleep: gpugap.program.oscalls.WAITS), which
says whether it was fed, or fed others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpugap.jsonout import Record
from gpugap.program import ops, oscalls
from gpugap.report.trace import NO_CALL, Trace

LAUNCHER_SHARE = 0.05       # of its process's launches: a thread that drives the GPU


@dataclass
class ThreadRole(Record):
    """A thread of a process that drove a GPU: ``launches`` (GPU ops it launched), its
    ``share`` of its process's, ``waits_ns`` (time in OS waits on other threads, None
    when the report has no OS-runtime trace)."""

    gtid: int
    pid: int
    tid: int
    name: str | None
    role: str                      # "launcher" | "helper" (launches a few ops)
    launches: int
    share: float
    waits_ns: int | None = None

    def to_dict(self) -> dict:
        return {"tid": self.tid, "name": self.name, "role": self.role,
                "launches": self.launches, "share": round(self.share, 4),
                "waits_ns": self.waits_ns}


@dataclass
class ProcessRole(Record):
    """A process that launched GPU work: its executable's ``name``, the ``devices`` its
    work ran on, its threads that launched work."""

    pid: int
    name: str | None
    devices: list[int]
    threads: list[ThreadRole] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"pid": self.pid, "name": self.name, "devices": self.devices,
                "threads": [t.to_dict() for t in self.threads]}


def _launch_counts(trace: Trace) -> pd.DataFrame:
    """(gtid, pid, device, launches) of every launching thread and device."""
    # Counted slice by slice: reports hold millions of ops, and a frame of them all
    # would be the largest transient of the whole analysis.
    parts = []
    for frame in (trace.kernels, trace.memcpys, trace.memsets, trace.graphs):
        for lo in range(0, len(frame), ops.CHUNK_OPS):
            piece = frame.iloc[lo:lo + ops.CHUNK_OPS]
            parts.append(piece.groupby(["gtid", "pid", "device"], dropna=True,
                                       observed=True).size())
    if not parts:
        return pd.DataFrame({"gtid": [], "pid": [], "device": [], "launches": []})
    counts = pd.concat(parts).groupby(level=[0, 1, 2]).sum().rename("launches")
    counts = counts.reset_index()
    counts = counts[counts["gtid"] != NO_CALL].reset_index(drop=True)   # no launch call
    counts["gtid"] = counts["gtid"].astype(np.int64)
    return counts


def _waits(calls: pd.DataFrame | None, gtids: list[int]) -> dict[int, int] | None:
    """Time each thread spent in OS waits on others (None: no OS-runtime trace)."""
    if calls is None:
        return None
    out = dict.fromkeys(gtids, 0)
    for g, ns in (calls["end"] - calls["start"]).groupby(calls["gtid"]).sum().items():
        out[int(g)] = int(ns)
    return out


def roles(trace: Trace, process_names: dict[int, str], os_calls: pd.DataFrame | None
          ) -> tuple[list[ProcessRole], pd.DataFrame | None]:
    """The processes that launched GPU work, each with its launching threads (most
    launches first); and those threads' waits on others, from *os_calls*
    (gpugap.program.oscalls: None without an OS runtime trace)."""
    counts = _launch_counts(trace)
    if counts.empty:
        return [], None
    names = {}
    if len(trace.threads):
        t = trace.threads
        names = dict(zip(t["gtid"].astype(np.int64).tolist(), t["name"].tolist(), strict=True))
    per_thread = counts.groupby(["gtid", "pid"])["launches"].sum().reset_index()
    per_process = per_thread.groupby("pid")["launches"].sum()
    gtids = per_thread["gtid"].astype(np.int64).tolist()
    calls = oscalls.of(os_calls, oscalls.WAITS)
    if calls is not None:
        calls = calls[calls["gtid"].isin(gtids)]
    waits = _waits(calls, gtids)
    out = []
    for pid, group in per_thread.groupby("pid"):
        devices = sorted(int(d) for d in pd.unique(counts.loc[counts["pid"] == pid, "device"]))
        proc = ProcessRole(int(pid), process_names.get(int(pid)), devices)
        total = int(per_process[pid])
        for row in group.sort_values("launches", ascending=False).itertuples():
            gtid = int(row.gtid)
            share = row.launches / total if total else 0.0
            proc.threads.append(ThreadRole(
                gtid, int(pid), gtid & 0xFFFFFF, names.get(gtid),
                "launcher" if share >= LAUNCHER_SHARE else "helper", int(row.launches),
                float(share), None if waits is None else waits.get(gtid, 0)))
        out.append(proc)
    return sorted(out, key=lambda p: (p.devices[:1], p.pid)), calls
