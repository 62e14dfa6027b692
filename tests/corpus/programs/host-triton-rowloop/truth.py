"""Truth figures for host-triton-rowloop (plain sqlite3/numpy through truthlib and truth_host, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

batch4/triton_rowloop.py: 12 NVTX 'step N' ranges, each 4,096 launches of a one-row Triton kernel.

Two parts:
* ``base``: the figures of the program's earlier capture's truth script
  (programs/ext-b4-triton_rowloop/truth.py), recomputed on this capture (same conventions).
* ``host``: what the host ran while the GPU idled (tests/corpus/truth_host.py, issue 44),
  over the GPU's idle intervals inside the steady window: NVTX 'step N' ranges after the first 2.
  (what is read: tests/corpus/truth_host_program.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_host as th  # noqa: E402,F401
from truth_host_program import program_truth  # noqa: E402


def steady(r, gpu):
    """NVTX ranges '^step \\d+$' after the first 2 (the base script's steady ranges)."""
    return th.steady_window(r, gpu, r"^step \d+$", 2)


def main(path: str) -> dict:
    return program_truth("host-triton-rowloop", "ext-b4-triton_rowloop", path, steady)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
