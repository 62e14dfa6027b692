"""Truth figures for host-pub-jax-mnist-classifier (plain sqlite3/numpy through truthlib and
truth_host, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

JAX's examples/mnist_classifier.py, 3 epochs of 100 steps, captured with the host's own
evidence (CPU samples and Python samples at 250 Hz, the GIL).

Two parts:
* ``base``: the figures of the program's earlier capture's truth script
  (programs/pub-jax-mnist-classifier/truth.py), recomputed on this capture (same
  conventions).
* ``host``: what the host ran while the GPU idled (tests/corpus/truth_host.py, issue 44),
  over the GPU's idle intervals inside the base script's steady window: from the first
  step after the last module load or compiler run between steps to the last step
  (what is read: tests/corpus/truth_host_program.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_host as th  # noqa: E402,F401
import truth_jax as tj  # noqa: E402
from truth_host_program import program_truth  # noqa: E402


def steady(r, gpu):
    """The base script's steady window: the step graph's executions from the first step
    after the last module load or compiler run that falls between steps, to the last."""
    pid = tj.main_pid(r)
    execs = tj.graph_execs(r, 0)
    counts = tj.graph_counts(execs)
    gid = next(iter(counts))
    st = [e["start"] for e in execs if e["graph"] == gid]
    loads = [a for a, *_ in tj.api_rows(r, tj.MODULE_LOAD, pid)]
    runs = tj.compiler_runs(r, pid)
    inside = [a for a in loads if st[0] <= a < st[-1]] + \
             [x["end"] for x in runs if st[0] <= x["start"] < st[-1]]
    first = tj.steps_before(max(inside), st) if inside else 2
    return (int(st[first]), int(st[-1]),
            f"step graph execution {first} to the last ({len(st) - 1 - first} periods)")


def main(path: str) -> dict:
    return program_truth("host-pub-jax-mnist-classifier", "pub-jax-mnist-classifier",
                         path, steady)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
