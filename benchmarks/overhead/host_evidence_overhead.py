#!/usr/bin/env python3
"""What recording the host's evidence costs the profiled program (issue 44), from pairs
of captures of one program made in the same run on the same GPU: a baseline with the
default tracing (no CPU samples) and one with the evidence (CPU samples with backtraces,
the GIL trace, Python samples and Python stacks of CUDA calls; the manifests beside the
captures give the exact nsys commands).

    python3 benchmarks/overhead/host_evidence_overhead.py BASELINE EVIDENCE [B E ...]

Each capture: an nsys SQLite export (.sqlite or .sqlite.xz). The step time is the host
duration of the program's NVTX 'step N' / 'request N' / 'batch N' ranges, the first 2
skipped (start-up); printed: steps, median and mean (ms), and the ratio evidence /
baseline of each. Plain sqlite3/numpy (no gpugap).

Part of the cost is nsys's Python sampler: a thread of its own ('NSys PySampling') in
the profiled process that takes the GIL to read the stacks, so it competes with the
program's Python threads for the interpreter.
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import sqlite3
import sys
import tempfile

import numpy as np

STEP = re.compile(r"^(step|request|batch) \d+$")
SKIP = 2


def connect(path: str) -> sqlite3.Connection:
    if path.endswith(".xz"):
        fd, tmp = tempfile.mkstemp(suffix=".sqlite")
        with lzma.open(path) as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst)
        db = sqlite3.connect(tmp)
        os.unlink(tmp)            # the open connection keeps the file
        return db
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def step_ns(path: str) -> np.ndarray:
    db = connect(path)
    rows = db.execute(
        "select e.start, e.end, coalesce(e.text, s.value) from NVTX_EVENTS e "
        "left join StringIds s on s.id = e.textId "
        "where e.eventType in (59, 60) and e.end is not null order by e.start").fetchall()
    return np.array([b - a for a, b, t in rows if t and STEP.match(t)], dtype=np.int64)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print("usage: host_evidence_overhead.py BASELINE EVIDENCE [BASELINE EVIDENCE ...]",
              file=sys.stderr)
        return 2
    print(f"{'capture':<40} {'steps':>5} {'median ms':>10} {'mean ms':>9} "
          f"{'x median':>8} {'x mean':>7}")
    for base_path, ev_path in zip(argv[::2], argv[1::2], strict=True):
        got = []
        for path in (base_path, ev_path):
            d = step_ns(path)[SKIP:]
            if not len(d):
                print(f"{path}: no NVTX step/request/batch ranges after the first {SKIP}",
                      file=sys.stderr)
                return 1
            got.append((len(d), np.median(d) / 1e6, d.mean() / 1e6))
        (nb, mb, ab), (ne, me, ae) = got
        print(f"{os.path.basename(base_path):<40} {nb:>5} {mb:>10.3f} {ab:>9.3f}")
        print(f"{os.path.basename(ev_path):<40} {ne:>5} {me:>10.3f} {ae:>9.3f} "
              f"{me / mb:>8.2f} {ae / ab:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
