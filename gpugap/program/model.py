"""The program model: what gpugap understood a report's program to be, before it
accounts for a nanosecond of it. Printed first ("Program: ..."), carried in the JSON and
the Python API, so that a wrong verdict can be traced to a wrong understanding.

    program = understand(trace)
    program.line()           # 'JAX (XLA); 1 process, 1 GPU; 60 iterations: CUDA graph ...'
    program.devices[0].iterations
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gpugap import forkjoin
from gpugap.jsonout import Record
from gpugap.program import compilation, frameworks, iterations, oscalls, threads
from gpugap.program.compilation import CompileSpans
from gpugap.program.frameworks import Component
from gpugap.program.iterations import Iterations
from gpugap.program.nvtx import library_domains
from gpugap.program.ops import DeviceOps, device_ops, device_window, group_sums
from gpugap.program.threads import ProcessRole
from gpugap.report.table import Table
from gpugap.report.trace import Trace
from gpugap.units import fmt_ns

# The frameworks a fix speaks the API of (Program.framework), the first of them the
# program uses winning (a JAX program that also runs a few ATen kernels is told JAX's).
FIX_LANGUAGES = ("JAX", "PyTorch", "CuPy", "CUDA Python", "CUDA C++")


@dataclass
class DeviceLink(Record):
    """GPU ``dst`` waits on data from GPU ``src``: ``via`` what ('peer copies'), how many
    and how many bytes."""

    src: int
    dst: int
    via: str
    count: int
    bytes: int

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "via": self.via, "count": self.count,
                "bytes": self.bytes}


@dataclass
class DeviceProgram(Record):
    """One GPU as the program used it: its ops, its window (first call of its processes
    to its last op), its iterations (None: none found)."""

    device: int
    name: str | None
    ops: DeviceOps = field(repr=False)
    window: tuple[int, int]
    iterations: Iterations | None
    pids: list[int]

    @cached_property
    def driver(self) -> int:
        """The thread that drives the device (gpugap.program.iterations.driver), -1 for
        none; found when first asked for (it walks every op)."""
        return iterations.driver(self.ops)[0] if len(self.ops) else -1

    def to_dict(self) -> dict:
        return {"device": self.device, "name": self.name, "pids": self.pids,
                "window_ns": list(self.window),
                "iterations": None if self.iterations is None else self.iterations.to_dict()}


@dataclass
class Program(Record):
    """A report's program: the framework and library ``components`` seen, the
    ``processes`` that launched GPU work and their threads' roles, each GPU as it was
    used (``devices``), the ``links`` where one GPU waited on another, NVTX domains of
    libraries, and the time compilers ran."""

    components: list[Component]
    processes: list[ProcessRole]
    devices: dict[int, DeviceProgram]
    links: list[DeviceLink]
    library_domains: list[str]
    compile_spans: CompileSpans
    # The launching threads' OS waits on other threads (start, end, gtid, name; None:
    # no OS-runtime trace): the accounting tells waiting for work apart with them.
    waits: Table | None = field(default=None, repr=False)
    # The GPU processes' waits, child runs and file writes (gpugap.program.oscalls).
    os_calls: Table | None = field(default=None, repr=False)
    # What says the program is fed by a data loader (threads.data_loader), or None: its
    # launching thread's waits before a batch upload are then waits for input.
    data_loader: str | None = None

    _extra_keys = ("frameworks", "libraries", "framework")

    @property
    def frameworks(self) -> list[str]:
        return [c.name for c in self.components if c.framework]

    @property
    def libraries(self) -> list[str]:
        return [c.name for c in self.components if not c.framework]

    @property
    def framework(self) -> str | None:
        """The framework whose API a fix should speak: PyTorch, JAX, CuPy, CUDA C++..."""
        for name in FIX_LANGUAGES:
            if name in self.frameworks:
                return name
        return None

    def who(self, device: int) -> str:
        """'rank 1 (GPU 1)' where each process drove one GPU (ranks in the order of their
        GPUs, as torchrun assigns them on one node), else 'GPU 1'."""
        if len(self.processes) > 1 and all(len(p.devices) == 1 for p in self.processes):
            order = sorted(p.devices[0] for p in self.processes)
            if device in order:
                return f"rank {order.index(device)} (GPU {device})"
        return f"GPU {device}"

    def line(self) -> str:
        """One line: frameworks, processes and GPUs, iterations (how found), compiling."""
        names = self.frameworks
        shown = []
        for name in names:
            if name == "XLA" and "JAX" in names:
                continue
            shown.append("JAX (XLA)" if name == "JAX" else name)
        what = " + ".join(shown) or "unknown framework"
        if self.libraries:
            what += " with " + ", ".join(self.libraries)
        n_proc, n_dev = len(self.processes), len(self.devices)
        parts = [what, f"{n_proc} process{'es' if n_proc != 1 else ''}, "
                       f"{n_dev} GPU{'s' if n_dev != 1 else ''}"]
        its = {d: p.iterations for d, p in self.devices.items()}
        described = {_iterations_phrase(it) for it in its.values()}
        if len(described) == 1:
            parts.append(described.pop() + (" each" if n_dev > 1 and any(its.values())
                                             else ""))
        else:
            parts.append("; ".join(f"GPU {d}: {_iterations_phrase(it)}"
                                   for d, it in its.items()))
        pairs: dict[tuple[int, int], list[str]] = {}
        for link in self.links:
            pairs.setdefault((link.src, link.dst), []).append(link.via)
        for (src, dst), via in pairs.items():
            if (dst, src) in pairs:
                if src < dst:
                    both = sorted(set(via) | set(pairs[(dst, src)]))
                    parts.append(f"GPUs {src} and {dst} wait on each other "
                                 f"({', '.join(both)})")
            else:
                parts.append(f"GPU {dst} waits on GPU {src} ({', '.join(via)})")
        compiled = self.compile_spans.total_ns()
        if compiled:
            by = sorted(set(self.compile_spans.what))
            parts.append(f"compilers ran {fmt_ns(compiled)} ({', '.join(by)})")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"line": self.line(), "frameworks": self.frameworks,
                "libraries": self.libraries, "framework": self.framework,
                "components": [c.to_dict() for c in self.components],
                "processes": [p.to_dict() for p in self.processes],
                "devices": [d.to_dict() for d in self.devices.values()],
                "links": [link.to_dict() for link in self.links],
                "library_domains": self.library_domains,
                "data_loader": self.data_loader,
                "compilation": self.compile_spans.summary()}


def _iterations_phrase(it: Iterations | None) -> str:
    if it is None:
        return "no iterations found"
    what = {"nvtx": f"NVTX range '{it.name}'", "graph": "CUDA graph replays",
            "kernels": "repeating GPU work", "approximate": "repeating GPU work (drifting)"}
    out = f"{len(it)} iterations: {what.get(it.source, it.source)}"
    if it.processes > 1:
        out += f" in each of {it.processes} processes"
    out += f" inside '{it.within}'" if it.within else ""
    if it.loops:
        out += f", {len(it.loops)} loops in turn (" + " + ".join(map(str, it.loops)) + ")"
    if it.inner:
        out += (f", each {it.inner['count']} repetitions of {it.inner['period']} "
                f"operation{'s' if it.inner['period'] != 1 else ''}")
    return out + (f" (runner-up: {it.runner_up})" if it.runner_up else "")


def _links(trace: Trace) -> list[DeviceLink]:
    """GPUs that take data from others: peer copies (source -> destination) and streams
    waiting for an event another GPU recorded (recorder -> waiter)."""
    out = []
    m = trace.table("memcpys")
    if len(m) and "src_device" in m:
        src, dst = m["src_device"], m["dst_device"]
        peer = (src >= 0) & (dst >= 0) & (src != dst)
        pair, copies = group_sums([src[peer], dst[peer]])
        _, nbytes = group_sums([src[peer], dst[peer]], m["bytes"][peer])
        out += [DeviceLink(s, d, "peer copies", n, b) for s, d, n, b in zip(
            pair[0].tolist(), pair[1].tolist(), copies.tolist(), nbytes.tolist(), strict=True)]
    waits = trace.table("event_waits")
    if len(waits):
        pair, count = group_sums([waits["src_device"], waits["dst_device"]])
        out += [DeviceLink(s, d, "event waits", n, 0) for s, d, n in zip(
            pair[0].tolist(), pair[1].tolist(), count.tolist(), strict=True)]
    return out


def understand(trace: Trace, *, iteration: str | None = None) -> Program:
    """The program model of *trace*; *iteration*: the NVTX range that marks one iteration
    ('none': no iterations; None: found, gpugap.program.iterations)."""
    names = frameworks.process_names(trace)
    # The OS calls are read from the export by SQLite, which lets the other threads run:
    # read them while the devices' iterations are found (a plain thread: no import of
    # concurrent.futures and logging for it).
    reading = forkjoin.beside(oscalls.read, trace, frameworks.gpu_pids(trace),
                              name="gpugap-os-calls")
    devices = {}
    known = trace.table("devices")
    for device in trace.op_index.devices:
        ops = device_ops(trace, device)
        window = device_window(trace, ops)
        row = np.flatnonzero(known["device"] == device)[:1].tolist()
        devices[device] = DeviceProgram(
            device, str(known["name"][row[0]]) if row else None, ops, window,
            iterations.find(trace, ops, window, iteration=iteration),
            [int(p) for p in np.asarray(ops.pids).tolist()])
    components = frameworks.detect(trace)
    os_calls = reading()
    processes, waits = threads.roles(trace, names, os_calls)
    return Program(components, processes, devices, _links(trace), library_domains(trace),
                   compilation.spans(trace, names, os_calls), waits, os_calls,
                   threads.data_loader(trace, [p.pid for p in processes]))
