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

from gpugap.jsonout import Record
from gpugap.program import ops, oscalls
from gpugap.report.table import Table
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


def _launch_counts(trace: Trace) -> Table:
    """(gtid, pid, device, launches) of every launching thread and device, sorted by
    (gtid, pid, device)."""
    # Counted kind by kind on the tables' own columns: reports hold millions of ops, and
    # a copy of their keys would be the largest transient of the whole analysis.
    keys, counted = [], []
    for kind in ("kernels", "memcpys", "memsets", "graphs"):
        launched = trace.table(kind)
        found, n = ops.group_sums([launched[c] for c in ("gtid", "pid", "device")])
        keys.append(found)
        counted.append(n)
    (gtid, pid, device), launches = ops.group_sums(
        [np.concatenate([k[i] for k in keys]).astype(np.int64) for i in range(3)],
        np.concatenate(counted))
    known = gtid != NO_CALL                                 # no launch call
    return Table({"gtid": gtid, "pid": pid, "device": device, "launches": launches}
                 ).rows(known)


def _waits(calls: Table | None, gtids: np.ndarray) -> dict[int, int] | None:
    """Time each thread spent in OS waits on others (None: no OS-runtime trace)."""
    if calls is None:
        return None
    (waiting,), ns = ops.group_sums([calls["gtid"]], calls["end"] - calls["start"])
    return dict.fromkeys(gtids.tolist(), 0) | dict(zip(waiting.tolist(), ns.tolist(),
                                                       strict=True))


def _most_first(launches: np.ndarray) -> np.ndarray:
    """The order of *launches* from most to fewest, ties as pandas' sort_values
    (ascending=False) leaves them: numpy's quicksort of the reversed values, reversed."""
    n = launches.size
    return (n - 1 - np.argsort(launches[::-1], kind="quicksort"))[::-1]


# A data loader's own threads and processes, by the names frameworks give them: PyTorch's
# DataLoader names its pin-memory thread 'pt_data_pin' and its worker processes
# 'pt_data_worker'.
LOADER_PIN, LOADER_WORKER = "pt_data_pin", "pt_data_worker"


def data_loader(trace: Trace, gpu_pids: list[int]) -> str | None:
    """What says the program is fed by a data loader, for people ("a DataLoader: 2
    worker processes, a pin-memory thread"), None when nothing does: a pin-memory thread
    in a process that launched GPU work, or worker processes. (A server's request thread
    is no loader: its waits are for work that has not arrived, not the next batch.)"""
    threads = trace.table("threads")
    if not len(threads) or not gpu_pids:
        return None
    gtid = threads["gtid"].astype(np.int64)
    pid = (gtid >> 24) & 0xFFFFFF
    names = threads.labels("name").strings()
    pin = bool(((names == LOADER_PIN) & np.isin(pid, np.asarray(gpu_pids))).any())
    workers = np.unique(pid[names == LOADER_WORKER]).size
    parts = ([f"{workers} worker process{'es' if workers != 1 else ''}"] if workers else []) \
        + (["a pin-memory thread"] if pin else [])
    return "a DataLoader: " + ", ".join(parts) if parts else None


def roles(trace: Trace, process_names: dict[int, str], os_calls: Table | None
          ) -> tuple[list[ProcessRole], Table | None]:
    """The processes that launched GPU work, each with its launching threads (most
    launches first); and those threads' waits on others, from *os_calls*
    (gpugap.program.oscalls: None without an OS runtime trace)."""
    counts = _launch_counts(trace)
    if counts.empty:
        return [], None
    threads = trace.table("threads")
    names = dict(zip(threads["gtid"].astype(np.int64).tolist(),
                     threads.labels("name").strings().tolist(), strict=True))
    # Per thread, by process (then thread): each process's threads one slice.
    (thread_pid, thread_gtid), thread_launches = ops.group_sums(
        [counts["pid"], counts["gtid"]], counts["launches"])
    calls = oscalls.named(os_calls, oscalls.WAITS)
    if calls is not None:
        calls = calls.rows(np.isin(calls["gtid"], thread_gtid))
    waits = _waits(calls, thread_gtid)
    out = []
    pids, first = np.unique(thread_pid, return_index=True)
    for pid, lo, hi in zip(pids.tolist(), first.tolist(), [*first[1:].tolist(),
                                                           thread_pid.size], strict=True):
        devices = np.unique(counts["device"][counts["pid"] == pid]).tolist()
        proc = ProcessRole(pid, process_names.get(pid), devices)
        order = lo + _most_first(thread_launches[lo:hi])
        total = int(thread_launches[lo:hi].sum())
        for gtid, n in zip(thread_gtid[order].tolist(), thread_launches[order].tolist(),
                           strict=True):
            share = n / total if total else 0.0
            proc.threads.append(ThreadRole(
                gtid, pid, gtid & 0xFFFFFF, names.get(gtid),
                "launcher" if share >= LAUNCHER_SHARE else "helper", n,
                float(share), None if waits is None else waits.get(gtid, 0)))
        out.append(proc)
    return sorted(out, key=lambda p: (p.devices[:1], p.pid)), calls
