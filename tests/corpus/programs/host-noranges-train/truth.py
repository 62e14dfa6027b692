"""Truth figures for host-noranges-train (plain sqlite3/numpy through truthlib and truth_host, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

batch3/noranges_train.py: a conv net fed by a DataLoader without workers whose __getitem__ augments in numpy; no NVTX ranges.

Two parts:
* ``base``: the figures of the program's earlier capture's truth script
  (programs/ext-b3-noranges_train/truth.py), recomputed on this capture (same conventions).
* ``host``: what the host ran while the GPU idled (tests/corpus/truth_host.py, issue 44),
  over the GPU's idle intervals inside the steady window: from the 3rd batch upload to the last GPU work.
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
    """From the 3rd batch upload (host-to-device copy of 64x3x96x96 floats) to the last
    GPU work, as programs/ext-b3-noranges_train/truth.py (no NVTX ranges)."""
    up = sorted(c["start"] for c in r.memcpys(0)
                if c["kind"] == "Host-to-Device" and c["bytes"] == 64 * 3 * 96 * 96 * 4)
    return (int(up[2]), int(gpu[:, 1].max()),
            "from the 3rd batch upload to the last GPU work")


def main(path: str) -> dict:
    return program_truth("host-noranges-train", "ext-b3-noranges_train", path, steady)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
