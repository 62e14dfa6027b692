"""Truth figures for host-mallocasync-train (plain sqlite3/numpy through truthlib and truth_host, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

batch4/mallocasync_train.py: 30 NVTX 'step N' ranges on the cudaMallocAsync allocator, a healthy control.

Two parts:
* ``base``: the figures of the program's earlier capture's truth script
  (programs/ext-b4-mallocasync_train/truth.py), recomputed on this capture (same conventions).
* ``host``: what the host ran while the GPU idled (tests/corpus/truth_host.py, issue 44),
  over the GPU's idle intervals inside the steady window: NVTX 'step N' ranges after the first 2.
  CPU samples (COMPOSITE_EVENTS, nsys's --sample=process-tree) per process and thread,
  the stacks of the threads with most idle samples (SAMPLING_CALLCHAINS), the GIL trace
  of the launching thread, the Python sampler's marks. Plus, per thread of most idle
  samples and for the launching thread (``launching_thread_samples``),
  ``samples_per_idle_ms`` (samples are taken only while a thread runs; at
  nsys's sampling rate, ~1 a ms per running thread, ~1.0 means the thread ran through
  the idle time).
  The Python samples' frames are left out: their payloads do not decode to this
  capture's frames with the layout truth_host reads (the decoded "functions" are
  unrelated strings: thread names, kernel threads), so only their counts are kept
  (``python_samples.frames_note``).
The report's path is left out (the figures do not depend on where the file lies).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
import truth_host as th  # noqa: E402
from truthlib import ms, pct  # noqa: E402


def load_base():
    spec = importlib.util.spec_from_file_location(
        "base_truth", HERE.parent / "ext-b4-mallocasync_train" / "truth.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BASE = load_base()


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
    dropped = [k for k in ("first_stored_python_frames",
                           "python_functions_anywhere_on_stack") if k in py]
    for k in dropped:
        del py[k]
    if dropped:
        py["frames_note"] = ("payload frames left out: they do not decode to Python "
                             "frames with truth_host's layout (see the docstring)")
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


def steady(r, gpu):
    """NVTX ranges '^step \\d+$' after the first 2 (the base script's steady ranges)."""
    return th.steady_window(r, gpu, r"^step \d+$", 2)


def main(path: str) -> dict:
    return {"program": "host-mallocasync-train", "base": BASE.main(path),
            "host": host_figures(path, steady)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
