#!/usr/bin/env python3
"""The cost of a report's host evidence: `gpugap analyze --json` of a capture with CPU
samples, their stacks, the GIL trace and Python samples, against a copy of the same
report with that evidence dropped (COMPOSITE_EVENTS, SAMPLING_CALLCHAINS,
OSRT_CALLCHAINS, SCHED_EVENTS, and the NVTX rows of nsys's own domains: the GIL trace
and the Python samples), wall time, CPU and peak RSS of a fresh process each, best of
--rounds, alternating. The bar (issue 44): at most 1.3x the time and memory.

    python benchmarks/host_evidence.py /tmp/hostx/mnist.sqlite --rounds 3

The copy is written next to --work (default: a temporary directory) and removed after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpugap.report import schema as S  # noqa: E402

EVIDENCE_TABLES = (S.SAMPLES.name, S.SAMPLE_STACKS.name, S.OSRT_STACKS.name,
                   "SCHED_EVENTS")
BAR = 1.3


def without_evidence(report: Path, copy: Path) -> None:
    """*copy*: *report* with its host evidence dropped (module doc), vacuumed."""
    shutil.copyfile(report, copy)
    db = sqlite3.connect(copy)
    try:
        for t in EVIDENCE_TABLES:
            db.execute(f'DROP TABLE IF EXISTS "{t}"')
        names = ", ".join("'" + d + "'" for d in S.INSTRUMENTATION_DOMAINS)
        has = {r[1] for r in db.execute(f'PRAGMA table_info("{S.NVTX.name}")')}
        if {"domainId", "globalTid", "eventType"} <= has:
            create = 75          # ENUM_NSYS_EVENT_TYPE NvtxDomainCreate
            text = "coalesce(text, (SELECT value FROM StringIds WHERE id = textId))" \
                if "textId" in has else "text"
            key = "((globalTid >> 24) & 16777215) * 4294967296 + domainId"
            db.execute(f"DELETE FROM {S.NVTX.name} WHERE {key} IN (SELECT {key} FROM "
                       f"{S.NVTX.name} WHERE eventType = {create} AND {text} IN ({names}))")
        db.commit()
        db.execute("VACUUM")
    finally:
        db.close()


def run(report: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one analysis, in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpugap", "analyze", "--json",
                             "--no-config", str(report)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"analyze {report} failed")
    return (time.perf_counter() - began, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", type=Path, help=".sqlite exports with samples")
    p.add_argument("--rounds", type=int, default=3, help="runs of each (best kept)")
    p.add_argument("--work", type=Path, default=None, help="where the copies go")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(dir=args.work))
    failed = False
    try:
        print(f"{'report':28} {'wall with':>9} {'without':>8} {'ratio':>6} "
              f"{'RSS with':>9} {'without':>8} {'ratio':>6}")
        for report in args.reports:
            copy = work / f"{report.stem}.no-evidence.sqlite"
            without_evidence(report, copy)
            best: dict[str, tuple[float, float, float]] = {}
            for _ in range(args.rounds):
                for side, path in (("with", report), ("without", copy)):
                    got = run(path)
                    old = best.get(side)
                    best[side] = got if old is None else (
                        min(old[0], got[0]), min(old[1], got[1]), min(old[2], got[2]))
            (w1, _, m1), (w0, _, m0) = best["with"], best["without"]
            wall, rss = w1 / w0, m1 / m0
            failed |= wall > BAR or rss > BAR
            print(f"{report.name[:28]:28} {w1:8.2f}s {w0:7.2f}s {wall:5.2f}x "
                  f"{m1:7.0f}MB {m0:6.0f}MB {rss:5.2f}x")
            copy.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"bar: at most {BAR}x the time and memory of the report without its evidence"
          + (": NOT MET" if failed else ": met"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
