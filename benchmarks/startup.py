#!/usr/bin/env python3
"""Where a small report's CPU time goes before any analysis: each import step as a
fresh process, next to ``gpugap analyze --json`` of a 187-kernel report, same run.

    python benchmarks/startup.py            # best of 5 rounds
    python benchmarks/startup.py --repeat 9

Each step is a child process (`python -c ...`) measured with wait4: user + sys CPU,
best of --repeat rounds (each step once a round). numpy is imported with one OpenBLAS
thread, as the command line imports it. A step's "alone" is its CPU minus the step
above it (what it adds). The analysis imports no pandas (it reads Tables: issue 25);
pandas is measured apart, as what a user's DataFrames would add. The last line is the
whole command on tests/data/captures/gemm.sqlite, with the share of it that the imports
take.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL_REPORT = REPO / "tests" / "data" / "captures" / "gemm.sqlite"

# Each step imports what the one above it does, and more; pandas is not one of them.
# The last is what `gpugap analyze --json` of one report imports: not rich, which only the
# terminal view and messages use, nor the commands other than cli.root's.
STEPS = [
    ("python", "pass"),
    ("+ numpy", "import numpy"),
    ("+ typer", "import numpy, typer"),
    ("+ gpugap's modules", "import numpy, typer; "
                           "import gpugap.cli.root, gpugap.analysis.core, "
                           "gpugap.report.loader, gpugap.ci.config, "
                           "gpugap.render.documents"),
]
# What the users' DataFrames would add (not part of an analysis): measured apart.
PANDAS = ("(pandas, not imported)", "import numpy, pandas")


def cpu_of(cmd: list[str]) -> float:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}: {proc.stderr.read().decode()[-500:]}")
    proc.stderr.close()
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="rounds (best kept)")
    args = p.parse_args(argv)
    commands = {label: [sys.executable, "-c", code] for label, code in [*STEPS, PANDAS]}
    commands["analyze --json gemm.sqlite"] = [sys.executable, "-m", "gpugap", "analyze",
                                              "--json", str(SMALL_REPORT)]
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(args.repeat):
        for label, cmd in commands.items():
            best[label] = min(best[label], cpu_of(cmd))
    total = best["analyze --json gemm.sqlite"]
    print(f"CPU s (user + sys), best of {args.repeat}; load average "
          f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'step':28} {'CPU s':>7} {'alone':>7} {'of analyze':>10}")
    previous = 0.0
    for label in commands:
        if label == PANDAS[0]:
            alone = best[label] - best["+ numpy"]
        else:
            alone = best[label] - previous if label != "analyze --json gemm.sqlite" else None
        print(f"{label:28} {best[label]:7.3f} "
              f"{(f'{alone:7.3f}' if alone is not None else ''):>7} "
              f"{100 * best[label] / total:9.0f}%")
        if label != PANDAS[0]:
            previous = best[label]
    return 0


if __name__ == "__main__":
    sys.exit(main())
