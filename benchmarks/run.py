#!/usr/bin/env python3
"""How fast is `gpugap analyze` next to the cost of reading the data, and next to nsys?

    python benchmarks/run.py                          # 200k, 1M and 10M kernels
    python benchmarks/run.py --sizes 200k,1M --repeat 5
    python benchmarks/run.py --sizes 10M --nsys none  # skip NVIDIA's nsys analyze

For each size, on the same file (built by make_large.py from a real report, cached in
benchmarks/data/), in one run:

- floor: SQLite's own scan of exactly the columns gpugap reads from each table it reads
  (``SELECT count(*), total(c1), total(c2), ... FROM t``: every value decoded, no row
  handed to Python), best of --repeat, page cache warm;
- gpugap: ``python -m gpugap analyze --json FILE`` as a fresh process (start-up and
  imports included, as a user pays them; gpugap byte-compiled first, as pip installs
  it): best wall time of --repeat, and its peak RSS;
- nsys: NVIDIA's ``nsys analyze`` with all its CUDA rules, where an nsys is found (and
  finishes within --nsys-timeout), same file.

Prints a table (times, ratios to the floor measured in this run, rows/s, peak memory),
the targets of issue #5 with pass/fail, and one JSON line with everything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_large  # noqa: E402

NSYS_RULES = ("cuda_memcpy_async,cuda_memcpy_sync,cuda_memset_sync,cuda_api_sync,"
              "gpu_gaps,gpu_time_util")
NSYS_CANDIDATES = ("/opt/gpugap-nsys/target-linux-x64/nsys",)

# The columns gpugap reads, per table (gpugap/report/loader.py). OSRT_API is scanned by
# the query that fetches the calls inside launch-gap example windows.
READ_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": [
        "start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
        "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
        "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "graphNodeId"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "correlationId", "nameId",
                                    "eventClass"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "contextId", "streamId",
                                   "correlationId", "globalPid", "bytes", "copyKind",
                                   "srcKind", "dstKind", "srcDeviceId", "dstDeviceId"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "deviceId", "contextId", "streamId",
                                   "correlationId", "globalPid", "bytes", "memKind"],
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ["start", "end", "deviceId", "contextId",
                                            "streamId", "correlationId", "globalPid",
                                            "syncType", "eventId"],
    "NVTX_EVENTS": ["start", "end", "eventType", "text", "textId", "domainId", "globalTid"],
    "OSRT_API": ["start", "end", "globalTid", "nameId"],
    "StringIds": ["id", "value"],
}
ROW_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "OSRT_API")


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def counts(path: Path) -> dict[str, int]:
    with connect(path) as conn:
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                for t in ROW_TABLES if t in have}


def floor_queries(path: Path) -> list[str]:
    out = []
    with connect(path) as conn:
        for table, wanted in READ_COLUMNS.items():
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            cols = [c for c in wanted if c in have]
            if cols:
                # total() (a float sum) never overflows, unlike sum() on globalPid.
                totals = ", ".join(f'total("{c}")' for c in cols)
                out.append(f'SELECT count(*), {totals} FROM "{table}"')
    return out


def measure_floor(path: Path, repeat: int) -> float:
    queries = floor_queries(path)
    best = float("inf")
    for _ in range(repeat):
        conn = connect(path)
        t0 = time.perf_counter()
        for q in queries:
            conn.execute(q).fetchone()
        best = min(best, time.perf_counter() - t0)
        conn.close()
    return best


def run_measured(cmd: list[str], timeout: float | None = None) -> dict:
    """Wall time, exit code, output and peak RSS of exactly this child (wait4)."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        deadline = None if timeout is None else t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"timeout": True, "seconds": time.perf_counter() - t0}
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"timeout": False, "seconds": wall, "rc": proc.returncode,
                "peak_rss_mb": usage.ru_maxrss / 1024, "stdout": out.read(),
                "stderr": err.read()}


def measure_gpugap(path: Path, repeat: int) -> dict:
    cmd = [sys.executable, "-m", "gpugap", "analyze", "--json", str(path)]
    runs = [run_measured(cmd) for _ in range(repeat)]
    for r in runs:
        if r["rc"] != 0:
            raise SystemExit(f"gpugap failed (exit {r['rc']}): {r['stderr'].decode()[-2000:]}")
    doc = json.loads(runs[0]["stdout"])
    best = min(runs, key=lambda r: r["seconds"])
    return {"seconds": best["seconds"], "all_seconds": [round(r["seconds"], 3) for r in runs],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "findings": len(doc["findings"]), "json_bytes": len(runs[0]["stdout"])}


def find_nsys(arg: str | None) -> str | None:
    if arg == "none":
        return None
    for cand in ([arg] if arg else []) + [os.environ.get("GPUGAP_NSYS")] + \
            list(NSYS_CANDIDATES) + [shutil.which("nsys")]:
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def measure_nsys(nsys: str, path: Path, repeat: int, timeout: float) -> dict:
    cmd = [nsys, "analyze", "-r", NSYS_RULES, str(path)]
    runs = []
    for _ in range(repeat):
        r = run_measured(cmd, timeout=timeout)
        if r["timeout"]:
            return {"timeout": True, "seconds": None, "limit_s": timeout}
        err = r["stderr"].decode(errors="replace")
        # nsys analyze reports failures on stderr and still exits 0.
        if r["rc"] != 0 or "ERROR" in err:
            return {"error": err.strip()[-1000:] or f"exit {r['rc']}", "seconds": None}
        runs.append(r)
    best = min(runs, key=lambda r: r["seconds"])
    version = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout
    return {"seconds": best["seconds"], "all_seconds": [round(r["seconds"], 3) for r in runs],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "version": version.strip(),
            "rules": NSYS_RULES}


def machine() -> dict:
    info = {"nproc": os.cpu_count(), "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in fh
                                if ln.startswith("model name")), None)
        with open("/proc/meminfo") as fh:
            kb = int(next(ln.split()[1] for ln in fh if ln.startswith("MemTotal")))
            info["ram_gb"] = round(kb / 2**20, 1)
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("gpugap", "numpy", "pandas", "adbc-driver-sqlite", "adbc-driver-manager",
                "typer", "pydantic", "rich"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    return info


def warm(path: Path) -> None:
    with path.open("rb") as fh:
        while fh.read(1 << 24):
            pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="200k,1M,10M",
                   help="kernel counts, comma-separated (default 200k,1M,10M)")
    p.add_argument("--source", type=Path, default=make_large.DEFAULT_SOURCE,
                   help="real report to tile (default: moe-experts-bad)")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    p.add_argument("--nsys", help="nsys executable, or 'none' (default: look for one)")
    p.add_argument("--nsys-timeout", type=float, default=900,
                   help="give up on nsys analyze after this many seconds (default 900)")
    p.add_argument("--nsys-repeat", type=int, default=None,
                   help="nsys runs per size (default: --repeat up to 1M kernels, then 1)")
    args = p.parse_args(argv)
    nsys = find_nsys(args.nsys)
    # Byte-compile gpugap as an installed package is (pip does it at install time): an
    # editable checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile it on
    # every start.
    import compileall

    import gpugap

    compileall.compile_dir(Path(gpugap.__file__).parent, quiet=1)
    results = []
    for size in args.sizes.split(","):
        want = make_large.parse_count(size)
        with connect(args.source) as conn:
            (n,) = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        tiles = max(1, -(-want // n))
        path = make_large.DEFAULT_DIR / f"{args.source.stem}-x{tiles}.sqlite"
        if not path.exists():
            make_large.build(args.source, path, tiles, gap_ns=1_000_000)
        warm(path)
        rows = counts(path)
        row_total = sum(rows.values())
        print(f"[{size}] {path.name}: {rows.get('CUPTI_ACTIVITY_KIND_KERNEL', 0):,} kernels, "
              f"{row_total:,} rows", file=sys.stderr, flush=True)
        floor = measure_floor(path, args.repeat)
        print(f"[{size}] floor {floor:.3f} s", file=sys.stderr, flush=True)
        gg = measure_gpugap(path, args.repeat)
        print(f"[{size}] gpugap {gg['seconds']:.3f} s, {gg['peak_rss_mb']:.0f} MB",
              file=sys.stderr, flush=True)
        ns = None
        if nsys:
            reps = args.nsys_repeat or (args.repeat if want <= 1_000_000 else 1)
            ns = measure_nsys(nsys, path, reps, args.nsys_timeout)
            print(f"[{size}] nsys {ns}", file=sys.stderr, flush=True)
        results.append({"size": size, "file": path.name, "tiles": tiles, "rows": rows,
                        "kernels": rows.get("CUPTI_ACTIVITY_KIND_KERNEL", 0),
                        "row_total": row_total, "file_mb": round(path.stat().st_size / 2**20),
                        "floor_s": round(floor, 4), "gpugap": gg, "nsys": ns})
    report(results)
    print(json.dumps({"benchmark": "gpugap-analyze", "machine": machine(),
                      "results": results}, default=str))
    return 0


def report(results: list[dict]) -> None:
    head = (f"{'kernels':>11} {'rows':>12} {'floor s':>8} {'gpugap s':>9} {'x floor':>8} "
            f"{'gpugap rows/s':>14} {'RSS MB':>7} {'nsys s':>8} {'nsys/gpugap':>11} "
            f"{'nsys MB':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        g, n = r["gpugap"], r["nsys"] or {}
        ns = n.get("seconds")
        nsys_txt = (f"{ns:8.2f}" if ns else ("timeout" if n.get("timeout") else
                                           "error" if n.get("error") else "-").rjust(8))
        print(f"{r['kernels']:>11,} {r['row_total']:>12,} {r['floor_s']:8.3f} "
              f"{g['seconds']:9.3f} {g['seconds'] / r['floor_s']:8.2f} "
              f"{r['row_total'] / g['seconds']:14,.0f} {g['peak_rss_mb']:7.0f} {nsys_txt} "
              f"{(ns / g['seconds']) if ns else float('nan'):11.1f} "
              f"{n.get('peak_rss_mb', float('nan')):8.0f}")
    print()
    by = {r["size"].lower(): r for r in results}
    checks = []
    if "10m" in by:
        r = by["10m"]
        checks.append(("10M: gpugap <= 4x floor", r["gpugap"]["seconds"] <= 4 * r["floor_s"],
                       f"{r['gpugap']['seconds'] / r['floor_s']:.2f}x"))
        checks.append(("10M: peak RSS <= 2.5 GB", r["gpugap"]["peak_rss_mb"] <= 2.5 * 1024,
                       f"{r['gpugap']['peak_rss_mb']:.0f} MB"))
    if "1m" in by:
        r = by["1m"]
        checks.append(("1M: gpugap <= 3x floor", r["gpugap"]["seconds"] <= 3 * r["floor_s"],
                       f"{r['gpugap']['seconds'] / r['floor_s']:.2f}x"))
    if "10m" in by and "1m" in by:
        ratio = by["10m"]["gpugap"]["seconds"] / by["1m"]["gpugap"]["seconds"]
        checks.append(("10M/1M time ratio <= 11", ratio <= 11, f"{ratio:.2f}"))
    if "200k" in by:
        r = by["200k"]
        ns = (r["nsys"] or {}).get("seconds")
        checks.append(("200k: >= 5x faster than nsys analyze",
                       bool(ns) and ns >= 5 * r["gpugap"]["seconds"],
                       f"{ns / r['gpugap']['seconds']:.1f}x" if ns else "nsys not run"))
    for name, ok, value in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value}")


if __name__ == "__main__":
    sys.exit(main())
