#!/usr/bin/env python3
"""What does the HTML timeline cost next to the analysis itself, at 1M and 10M kernels?

    python benchmarks/html_memory.py                    # 1M and 10M kernels
    python benchmarks/html_memory.py --sizes 1M --repeat 3

For each size, on the same file (built by make_large.py from a real report, cached in
benchmarks/data/, as benchmarks/run.py does), in one run and alternating:

- ``python -m gpugap analyze --json FILE``
- ``python -m gpugap analyze --json FILE --html OUT.html --force``

each as a fresh process, its peak RSS read from wait4 (run.run_measured). Prints both
peaks and times, --html's as ratios to --json's measured in this run, the page's size
and events drawn, the machine's load (os.getloadavg) before and after, the targets of
issues #24 (1M: --html within about --json's memory) and #25 (10M: --html within 3 GB)
with pass/fail, and one JSON line with everything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_large  # noqa: E402
from run import machine, run_measured, warm  # noqa: E402

# --html may take this much more memory than --json at 1M kernels and still count as
# "about the --json figure" (issue #24): the page's drawn events and its text.
RATIO_1M = 1.25
LIMIT_10M_MB = 3 * 1024


def report_for(size: str, source: Path, folder: Path) -> Path:
    want = make_large.parse_count(size)
    with sqlite3.connect(f"file:{source}?mode=ro&immutable=1", uri=True) as conn:
        (n,) = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    tiles = max(1, -(-want // n))
    path = folder / f"{source.stem}-x{tiles}.sqlite"
    if not path.exists():
        make_large.build(source, path, tiles, gap_ns=1_000_000)
    return path


def measure(cmd: list[str]) -> dict:
    load_before = os.getloadavg()[0]
    r = run_measured(cmd)
    if r["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r['rc']}): "
                         f"{r['stderr'].decode()[-2000:]}")
    return {"seconds": round(r["seconds"], 3), "peak_rss_mb": round(r["peak_rss_mb"]),
            "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "stderr": r["stderr"].decode(errors="replace")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1M,10M",
                   help="kernel counts, comma-separated (default 1M,10M)")
    p.add_argument("--source", type=Path, default=make_large.DEFAULT_SOURCE,
                   help="real report to tile (default: moe-experts-bad)")
    p.add_argument("--dir", type=Path, default=make_large.DEFAULT_DIR,
                   help="where the tiled reports are kept (default: benchmarks/data)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each command per size (peak: the largest, time: the best)")
    args = p.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "timeline.html"
        for size in args.sizes.split(","):
            path = report_for(size, args.source, args.dir)
            warm(path)
            base = [sys.executable, "-m", "gpugap", "analyze", "--json", str(path)]
            runs: dict[str, list[dict]] = {"json": [], "html": []}
            for _ in range(args.repeat):
                runs["json"].append(measure(base))
                runs["html"].append(measure([*base, "--html", str(page), "--force"]))
            drawn = re.search(r"\s([\d,]+) events ·", page.read_text()[:20000])
            row = {"size": size, "file": path.name, "page_kb": page.stat().st_size // 1024,
                   "drawn_events": int(drawn.group(1).replace(",", "")) if drawn else None}
            for kind, rs in runs.items():
                row[kind] = {"seconds": min(r["seconds"] for r in rs),
                             "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                             "load": [r["load"] for r in rs]}
            row["rss_ratio"] = round(row["html"]["peak_rss_mb"] / row["json"]["peak_rss_mb"], 3)
            row["time_ratio"] = round(row["html"]["seconds"] / row["json"]["seconds"], 3)
            print(f"[{size}] json {row['json']} html {row['html']}", file=sys.stderr,
                  flush=True)
            results.append(row)
    report(results)
    print(json.dumps({"benchmark": "gpugap-html-memory", "machine": machine(),
                      "cpus": os.cpu_count(), "results": results}, default=str))
    return 0


def report(results: list[dict]) -> None:
    head = (f"{'size':>5} {'json MB':>8} {'html MB':>8} {'html/json':>9} {'json s':>7} "
            f"{'html s':>7} {'html/json':>9} {'page KB':>8} {'drawn':>8}  load (1 min)")
    print(head)
    print("-" * len(head))
    for r in results:
        loads = [x for k in ("json", "html") for pair in r[k]["load"] for x in pair]
        print(f"{r['size']:>5} {r['json']['peak_rss_mb']:8,} {r['html']['peak_rss_mb']:8,} "
              f"{r['rss_ratio']:9.2f} {r['json']['seconds']:7.1f} {r['html']['seconds']:7.1f} "
              f"{r['time_ratio']:9.2f} {r['page_kb']:8,} {r['drawn_events'] or 0:8,}  "
              f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    print()
    by = {r["size"].lower(): r for r in results}
    checks = []
    if "1m" in by:
        r = by["1m"]
        checks.append((f"1M: --html peak <= {RATIO_1M}x --json's", r["rss_ratio"] <= RATIO_1M,
                       f"{r['rss_ratio']:.2f}x"))
    if "10m" in by:
        r = by["10m"]
        checks.append(("10M: --html peak <= 3 GB",
                       r["html"]["peak_rss_mb"] <= LIMIT_10M_MB,
                       f"{r['html']['peak_rss_mb']:,} MB"))
    for name, ok, value in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value}")


if __name__ == "__main__":
    sys.exit(main())
