"""Truth figures for host-pub-pt-mnist (plain sqlite3/numpy through truthlib and truth_host, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

pytorch/examples mnist/main.py, one epoch: 200 training steps, a DataLoader with one worker.

Two parts:
* ``base``: the figures of the program's earlier capture's truth script
  (programs/pub-pt-mnist/truth.py), recomputed on this capture (same conventions).
* ``host``: what the host ran while the GPU idled (tests/corpus/truth_host.py, issue 44),
  over the GPU's idle intervals inside the steady window: from the 3rd training step's upload to the last's.
  (what is read: tests/corpus/truth_host_program.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_host as th  # noqa: E402,F401
from truth_host_program import load_base, program_truth  # noqa: E402

BASE = load_base("pub-pt-mnist")


def steady(r, gpu):
    """From the upload of the 3rd training step to the upload of the last, as
    programs/pub-pt-mnist/truth.py (no NVTX ranges of the program's own)."""
    ups, train = BASE.batch_steps(r, BASE.SIZES, r.devices()[0])
    steps = [m["start"] for m, t in zip(ups, train) if t]
    return (int(steps[BASE.SKIP]), int(steps[-1]),
            f"upload of training step {BASE.SKIP + 1} to the upload of the last "
            f"({len(steps) - 1 - BASE.SKIP} steps)")


def main(path: str) -> dict:
    return program_truth("host-pub-pt-mnist", "pub-pt-mnist", path, steady)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
