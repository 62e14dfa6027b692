#!/usr/bin/env python3
"""`gpugap analyze --json` by the code of two checkouts, alternating, on the same reports:
wall time, CPU (user + sys) and peak RSS of a fresh process each, best of --rounds.

    git worktree add /tmp/before <commit>
    python benchmarks/before_after.py /tmp/before . REPORT [REPORT ...] --rounds 3

Each run starts in its checkout's directory with PYTHONPATH set to it (``python -m``
puts the current directory first on sys.path, so that is the code that runs), in the
order before, after, before, after..., so that the machine's drift moves both alike.
The load average is printed after each round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def run(code: Path, report: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one analysis by the code in *code*."""
    env = dict(os.environ, PYTHONPATH=str(code))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpugap", "analyze", "--json",
                             "--no-config", report], cwd=code, env=env,
                            stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{code}: analyze {report} failed")
    return (time.perf_counter() - began, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", type=Path, help="checkout of the code before")
    p.add_argument("after", type=Path, help="checkout of the code after")
    p.add_argument("reports", nargs="+", help=".sqlite exports (absolute paths are safest)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each (best kept)")
    args = p.parse_args(argv)
    reports = [str(Path(r).resolve()) for r in args.reports]
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    best: dict[tuple[str, str], tuple[float, float, float]] = {}
    for n in range(args.rounds):
        for report in reports:
            for side, code in sides.items():
                got = run(code, report)
                old = best.get((report, side))
                best[(report, side)] = got if old is None else (
                    min(old[0], got[0]), min(old[1], got[1]), max(old[2], got[2]))
        print(f"round {n + 1}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(f"{'report':32} {'wall before':>11} {'after':>7} {'CPU before':>10} {'after':>7}"
          f" {'RSS MB':>13}")
    for report in reports:
        (wb, cb, mb), (wa, ca, ma) = best[(report, "before")], best[(report, "after")]
        print(f"{Path(report).name[:32]:32} {wb:11.3f} {wa:7.3f} {cb:10.3f} {ca:7.3f}"
              f" {mb:6.0f} {ma:6.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
