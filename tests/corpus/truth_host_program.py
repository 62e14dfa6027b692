"""What every host-* truth script computes (issue 44), shared: the base program's truth
recomputed on the new capture, and truth_host's readings over the GPU's idle intervals
inside the steady window a program's truth.py chooses. Plain sqlite3/numpy; no gpugap.

The host's readings:
  CPU samples (COMPOSITE_EVENTS, nsys's --sample=process-tree) per process and thread,
  the stacks of the threads with most idle samples (SAMPLING_CALLCHAINS), the GIL trace
  of the launching thread, the Python sampler's marks. Plus, per thread of most idle
  samples and for the launching thread (``launching_thread_samples``),
  ``samples_per_idle_ms`` (samples are taken only while a thread runs; at
  nsys's sampling rate, ~1 a ms per running thread, ~1.0 means the thread ran through
  the idle time).
  The Python samples' frames are decoded from their payloads (truth_host.sample_payload:
  the payload data entries nsys writes ahead of the schema's layout; until 2026-12-07
  these scripts read the layout from the blob's first byte, decoded unrelated strings
  and left the frames out).
  The report's path is left out (the figures do not depend on where the file lies).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import truth_host as th
from truthlib import ms, pct

PROGRAMS = Path(__file__).resolve().parent / "programs"


def load_base(name: str) -> ModuleType:
    """programs/NAME/truth.py, the base program's truth script, as a module."""
    spec = importlib.util.spec_from_file_location("base_truth", PROGRAMS / name / "truth.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def launcher_samples(r, idle, launcher: int, idle_ns: int, top: int) -> dict:
    """The launching thread's own CPU samples in the idle intervals (it may not be among
    the threads of most idle samples) and their stacks."""
    ev = r.arr("select id, start, globalTid from COMPOSITE_EVENTS", 3)
    ids = th.np.sort(ev[th.inside(idle, ev[:, 1]) & (ev[:, 2] == launcher), 0])
    n_idle = int(th.inside(idle, ev[:, 1]).sum())
    out = {"samples": len(ids), "pct_of_idle_samples": pct(len(ids), n_idle),
           "samples_per_idle_ms": round(len(ids) / (idle_ns / 1e6), 3) if idle_ns else None}
    if len(ids) and r.has("SAMPLING_CALLCHAINS"):
        out |= th.stack_shares(r, ids, top)
    return out


def host_figures(path: str, window, top: int = 10) -> dict:
    """truth_host's readings over the GPU idle intervals of *window* (a function of the
    HostReport and its GPU union giving lo, hi and how they were chosen)."""
    r = th.HostReport(path)
    gpu = r.gpu_union()
    lo, hi, how = window(r, gpu)
    idle = th.idle_of(gpu, lo, hi)
    lengths = idle[:, 1] - idle[:, 0]
    idle_ns = int(lengths.sum())
    tnames, pnames = r.thread_names(), r.process_names()
    launcher = th.launching_thread(r)
    cpu = th.cpu_samples(r, idle, 2, top, tnames, pnames)
    for t in cpu.get("per_thread", []):
        t["samples_per_idle_ms"] = round(t["samples"] / (idle_ns / 1e6), 3)
    if launcher and "samples_total" in cpu:
        cpu["launching_thread_samples"] = launcher_samples(r, idle, launcher, idle_ns, top)
    py = th.python_samples(r, idle, top, tnames, pnames)
    return {
        "window": {"how": how, "ms": ms(hi - lo)},
        "idle": {"intervals": len(idle), "ms": ms(idle_ns), "pct": pct(idle_ns, hi - lo),
                 "median_us": round(float(th.np.median(lengths)) / 1e3, 1)
                 if len(lengths) else None,
                 "longest_ms": ms(int(lengths.max())) if len(lengths) else None},
        "launching_thread": th.label(launcher, tnames, pnames) if launcher else None,
        "cpu_samples": cpu,
        "gil": th.gil(r, idle, launcher, top, tnames, pnames),
        "python_samples": py,
    }



def program_truth(program: str, base: str, path: str, window) -> dict:
    """The figures of host-* *program*: its *base* program's truth on this capture, and
    the host's readings over *window*'s idle intervals."""
    return {"program": program, "base": load_base(base).main(path),
            "host": host_figures(path, window)}
