"""Truth figures for host-healthy-gemm (plain sqlite3/numpy through truthlib and truth_host, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

batch2/healthy_gemm.py: 40 NVTX 'step N' ranges of GEMMs, a healthy control.

Two parts:
* ``base``: the figures of the program's earlier capture's truth script
  (programs/ext-b2-healthy_gemm/truth.py), recomputed on this capture (same conventions).
* ``host``: what the host ran while the GPU idled (tests/corpus/truth_host.py, issue 44),
  over the GPU's idle intervals inside the steady window: the GPU window of NVTX 'step N' ranges 1-39 (as the base script).
  (what is read: tests/corpus/truth_host_program.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_host as th  # noqa: E402,F401
from truth_host_program import load_base, program_truth  # noqa: E402

BASE = load_base("ext-b2-healthy_gemm")


def steady(r, gpu):
    """The GPU window of steps 1-39, as programs/ext-b2-healthy_gemm/truth.py: from the
    first to the last GPU work launched inside them (the ranges themselves only enqueue
    the work: their host time is ~1.6 ms of the ~60 ms the GPU runs)."""
    lo, hi = BASE.gpu_window(r, BASE.steps_of(r, BASE.S)[1:], 0)["gpu_window"]
    return int(lo), int(hi), "GPU window of NVTX 'step N' ranges 1-39"


def main(path: str) -> dict:
    return program_truth("host-healthy-gemm", "ext-b2-healthy_gemm", path, steady)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
