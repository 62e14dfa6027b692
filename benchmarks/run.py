#!/usr/bin/env python3
"""How fast is `gpugap analyze` next to the cost of reading the data, and next to nsys?

    python benchmarks/run.py                          # both shapes: 200k, 1M, 10M kernels
    python benchmarks/run.py --shape graph --sizes 200k,1M --repeat 5
    python benchmarks/run.py --sizes 10M --nsys none  # skip NVIDIA's nsys

Two shapes of report, each tiled in time from a real capture by make_large.py (cached in
benchmarks/data/, which git ignores):

- ``moe``: API/NVTX/OS-runtime-heavy. tests/data/scenarios/moe-experts-bad.sqlite (an
  H200 MoE step): 5,184 kernels to 12,348 API calls and 16,487 OS-runtime calls, 0.18
  kernels per API/NVTX/OSRT row.
- ``graph``: kernel-heavy. tests/data/captures/small-graph-node.sqlite (PyTorch CUDA
  graph replays traced per node, ``--cuda-graph-trace=node``): each cudaGraphLaunch
  runs many kernels, 4,464 kernels to 2,612 API calls and 1,172 OS-runtime calls, 1.12
  kernels per API/NVTX/OSRT row, six times moe's. (The captures with graph-level trace,
  cpp-graph-replay and pt-graph-infer, have no kernel rows to count, or few: their
  replays are one GRAPH_TRACE row each.)

For each shape and size, on the same file, in one run, in rounds (each measurement once
a round, so that the best of each comes from the same stretch of time on a VM whose
speed drifts):

- floor: SQLite's own scan of every column gpugap's answers need, from every table it
  reads (``SELECT count(*), total(c1), total(c2), ... FROM t``: every value decoded, no
  row handed to Python), best of --repeat, page cache warm. The columns
  (READ_COLUMNS): every table and column gpugap reads, as gpugap.report.schema declares
  them (SCHEMA; the checkout's own), where the report has them; a name that stands in
  for another in older exports (deprecatedSyncType for syncType, smMajor for
  computeMajor) only where that one is absent. OSRT_API is scanned whole, though
  gpugap reads only the named calls and those in launch-gap windows. List them with

    python -c "from gpugap.report.schema import SCHEMA; print(*SCHEMA.items(), sep=chr(10))"

- gpugap: ``python -m gpugap analyze --json FILE`` as a fresh process (start-up and
  imports included, as a user pays them; gpugap byte-compiled first and the child run
  without PYTHONDONTWRITEBYTECODE, as pip installs it): best wall time of --repeat, and
  its peak RSS (wait4). Memory's floor: the columns above held once as 8-byte values
  (rows x columns x 8 bytes, "data MB"); "RSS/data" is gpugap's peak over it.
- nsys analyze: NVIDIA's ``nsys analyze`` with its CUDA rules, and nsys stats: ``nsys
  stats -r cuda_gpu_kern_sum`` (the per-kernel summary: a read of the same file that
  answers less), where an nsys is found (and finishes within --nsys-timeout).
- the machine's load: os.getloadavg() before and after each measurement (the
  benchmark's own process counts 1 while it runs).

Once per run: the CPU time (user + sys, wait4) of ``python -m gpugap analyze --json`` on
tests/data/captures/gemm.sqlite (187 kernels), best of --repeat.

Prints, per shape, a table against the floor and one against nsys, the targets of issue
25 with PASS/FAIL per shape (1M kernels in at most 3x the floor; 10M in at most 2.5 GB;
at least 5x faster than nsys analyze at each size; a 200-kernel report in at most 0.3 s
of CPU), and one JSON line with everything.
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
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO))         # the floor reads this checkout's gpugap

import make_large  # noqa: E402

from gpugap.report.schema import FALLBACKS, SCHEMA  # noqa: E402

# name -> (real report tiled, what it is)
SHAPES = {
    "moe": (make_large.DEFAULT_SOURCE, "API/NVTX/OS-runtime-heavy"),
    "graph": (REPO / "tests" / "data" / "captures" / "small-graph-node.sqlite",
              "kernel-heavy (CUDA graph replays, node trace)"),
}
SMALL_REPORT = REPO / "tests" / "data" / "captures" / "gemm.sqlite"   # 187 kernels

NSYS_RULES = ("cuda_memcpy_async,cuda_memcpy_sync,cuda_memset_sync,cuda_api_sync,"
              "gpu_gaps,gpu_time_util")
NSYS_STATS_REPORT = "cuda_gpu_kern_sum"
NSYS_CANDIDATES = ("/opt/gpugap-nsys/target-linux-x64/nsys",)

# Issue 25's targets.
FLOOR_RATIO_1M = 3.0
RSS_10M_MB = 2.5 * 1024
NSYS_SPEEDUP = 5.0
SMALL_CPU_S = 0.3

# Every column gpugap reads, per table, and those read only where the column they stand
# in for is absent: gpugap.report.schema's declarations.
READ_COLUMNS = {table: list(columns) for table, columns in SCHEMA.items()}
FALLBACK = {(table, alt): primary for table, alts in FALLBACKS.items()
            for alt, primary in alts.items()}
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


def floor_plan(path: Path) -> tuple[list[str], int]:
    """The floor's queries, and the bytes of every column read held as 8-byte values."""
    queries, data_bytes = [], 0
    with connect(path) as conn:
        for table, wanted in READ_COLUMNS.items():
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            cols = [c for c in wanted if c in have
                    and FALLBACK.get((table, c)) not in have]
            if cols:
                # total() (a float sum) never overflows, unlike sum() on globalPid.
                totals = ", ".join(f'total("{c}")' for c in cols)
                queries.append(f'SELECT count(*), {totals} FROM "{table}"')
                (rows,) = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
                data_bytes += rows * len(cols) * 8
    return queries, data_bytes


def floor_run(queries: list[str], path: Path) -> float:
    """One scan of the floor's columns: seconds."""
    conn = connect(path)
    try:
        t0 = time.perf_counter()
        for q in queries:
            conn.execute(q).fetchone()
        return time.perf_counter() - t0
    finally:
        conn.close()


def child_env() -> dict[str, str]:
    """The environment of an installed gpugap: bytecode read and written as usual."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_measured(cmd: list[str], timeout: float | None = None) -> dict:
    """Wall time, CPU time, exit code, output and peak RSS of exactly this child (wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=child_env())
        if timeout is None:
            # Blocking: the parent takes no CPU from the child it measures.
            _, status, usage = os.wait4(proc.pid, 0)
        else:
            deadline = t0 + timeout
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    proc.kill()
                    os.wait4(proc.pid, 0)
                    return {"timeout": True, "seconds": time.perf_counter() - t0}
                time.sleep(0.005)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return {"timeout": False, "seconds": wall, "rc": os.waitstatus_to_exitcode(status),
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_mb": usage.ru_maxrss / 1024, "stdout": out.read(),
                "stderr": err.read()}


def gpugap_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "gpugap", "analyze", "--json", str(path)]


def gpugap_run(path: Path) -> dict:
    """One ``analyze --json`` of *path* (a failure ends the benchmark)."""
    r = run_measured(gpugap_cmd(path))
    if r["rc"] != 0:
        raise SystemExit(f"gpugap failed (exit {r['rc']}): {r['stderr'].decode()[-2000:]}")
    return r


def gpugap_summary(path: Path, runs: list[dict], answers: Path | None = None) -> dict:
    """The best of gpugap's *runs* on *path*, the peak memory of all."""
    if answers is not None:            # kept to compare two versions' answers (--answers)
        answers.mkdir(parents=True, exist_ok=True)
        (answers / f"{path.stem}.json").write_bytes(runs[0]["stdout"])
    doc = json.loads(runs[0]["stdout"])
    best = min(runs, key=lambda r: r["seconds"])
    return {"seconds": best["seconds"], "all_seconds": [round(r["seconds"], 3) for r in runs],
            "cpu_s": round(best["cpu_s"], 3),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "findings": len(doc["findings"]), "json_bytes": len(runs[0]["stdout"])}


def measure_small_cpu(repeat: int) -> dict:
    """CPU time (user + sys) of analyze --json on a ~200-kernel report, best of repeat."""
    runs = [run_measured(gpugap_cmd(SMALL_REPORT)) for _ in range(max(repeat, 3))]
    bad = [r for r in runs if r["rc"] != 0]
    if bad:
        raise SystemExit(f"gpugap failed on {SMALL_REPORT.name} (exit {bad[0]['rc']})")
    with connect(SMALL_REPORT) as conn:
        (kernels,) = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    return {"file": SMALL_REPORT.name, "kernels": kernels,
            "cpu_s": min(r["cpu_s"] for r in runs),
            "all_cpu_s": [round(r["cpu_s"], 3) for r in runs],
            "wall_s": min(r["seconds"] for r in runs)}


def find_nsys(arg: str | None) -> str | None:
    if arg == "none":
        return None
    for cand in ([arg] if arg else []) + [os.environ.get("GPUGAP_NSYS")] + \
            list(NSYS_CANDIDATES) + [shutil.which("nsys")]:
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def nsys_run(cmd: list[str], timeout: float) -> dict:
    """One nsys run: its measures, or {"timeout"} / {"error"} (then no more runs)."""
    r = run_measured(cmd, timeout=timeout)
    if r["timeout"]:
        return {"timeout": True, "seconds": None, "limit_s": timeout}
    err = r["stderr"].decode(errors="replace")
    # nsys reports failures on stderr and still exits 0.
    if r["rc"] != 0 or "ERROR" in err:
        return {"error": err.strip()[-1000:] or f"exit {r['rc']}", "seconds": None}
    return r


def nsys_summary(cmd: list[str], runs: list[dict]) -> dict:
    """The best of nsys's *runs*, or the first that failed."""
    failed = [r for r in runs if r.get("seconds") is None]
    if failed:
        return failed[0]
    best = min(runs, key=lambda r: r["seconds"])
    return {"seconds": best["seconds"], "all_seconds": [round(r["seconds"], 3) for r in runs],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "command": cmd[1:-1]}


def nsys_version(nsys: str) -> str:
    return subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout.strip()


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


def loaded(label: str, measure, log: dict[str, list[dict]], kind: str):
    """Run *measure*; the 1/5/15-minute load averages before and after it, printed and
    added to log[kind]."""
    before = os.getloadavg()
    value = measure()
    after = os.getloadavg()
    print(f"{label}  load {fmt_load(before)} -> {fmt_load(after)}", file=sys.stderr,
          flush=True)
    log.setdefault(kind, []).append({"before": [round(x, 2) for x in before],
                                     "after": [round(x, 2) for x in after]})
    return value


def fmt_load(avg) -> str:
    return "/".join(f"{x:.2f}" for x in avg)


def tiled(source: Path, want: int) -> tuple[Path, int]:
    with connect(source) as conn:
        (n,) = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    tiles = max(1, -(-want // max(n, 1)))
    path = make_large.DEFAULT_DIR / f"{source.stem}-x{tiles}.sqlite"
    if not path.exists():
        make_large.build(source, path, tiles, gap_ns=1_000_000)
    return path, tiles


def measure_size(shape: str, source: Path, size: str, args, nsys: str | None) -> dict:
    want = make_large.parse_count(size)
    path, tiles = tiled(source, want)
    warm(path)
    rows = counts(path)
    tag = f"[{shape} {size}]"
    print(f"{tag} {path.name}: {rows.get('CUPTI_ACTIVITY_KIND_KERNEL', 0):,} kernels, "
          f"{sum(rows.values()):,} rows", file=sys.stderr, flush=True)
    queries, data_bytes = floor_plan(path)
    # Round by round, each measurement once a round (floor, gpugap, nsys analyze, nsys
    # stats): the best of each comes from the same stretch of time, so the VM's speed,
    # which drifts by 10-30% over minutes, moves them together instead of the ratio.
    nsys_reps = (args.nsys_repeat or (args.repeat if want <= 1_000_000 else 1)) if nsys else 0
    analyze_cmd = [nsys, "analyze", "-r", NSYS_RULES, str(path)] if nsys else []
    stats_cmd = ([nsys, "stats", "-q", "-r", NSYS_STATS_REPORT, "-f", "csv", str(path)]
                 if nsys else [])
    load: dict[str, list[dict]] = {}
    floors: list[float] = []
    runs: dict[str, list[dict]] = {"gpugap": [], "nsys_analyze": [], "nsys_stats": []}
    for i in range(max(args.repeat, nsys_reps)):
        if i < args.repeat:
            floors.append(loaded(f"{tag} floor", lambda: floor_run(queries, path), load,
                                 "floor"))
            runs["gpugap"].append(loaded(f"{tag} gpugap", lambda: gpugap_run(path), load,
                                         "gpugap"))
            print(f"{tag} floor {floors[-1]:.3f} s, gpugap {runs['gpugap'][-1]['seconds']:.3f}"
                  f" s", file=sys.stderr, flush=True)
        for kind, cmd in (("nsys_analyze", analyze_cmd), ("nsys_stats", stats_cmd)):
            done = runs[kind]
            if i < nsys_reps and not any(r.get("seconds") is None for r in done):
                done.append(loaded(f"{tag} {kind}", lambda c=cmd: nsys_run(
                    c, args.nsys_timeout), load, kind))
                print(f"{tag} {kind.replace('_', ' ')} {done[-1].get('seconds')}",
                      file=sys.stderr, flush=True)
    floor = min(floors)
    gg = gpugap_summary(path, runs["gpugap"], args.answers)
    analyze = nsys_summary(analyze_cmd, runs["nsys_analyze"]) if nsys else None
    stats = nsys_summary(stats_cmd, runs["nsys_stats"]) if nsys else None
    return {"shape": shape, "size": size, "file": path.name, "tiles": tiles, "rows": rows,
            "kernels": rows.get("CUPTI_ACTIVITY_KIND_KERNEL", 0),
            "row_total": sum(rows.values()), "file_mb": round(path.stat().st_size / 2**20),
            "floor_s": round(floor, 4), "floor_all_s": [round(f, 4) for f in floors],
            "floor_queries": len(queries),
            "data_mb": round(data_bytes / 2**20, 1), "gpugap": gg,
            "nsys_analyze": analyze, "nsys_stats": stats, "load": load}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="both", choices=[*SHAPES, "both"],
                   help="report shape: moe (API/NVTX/OS-runtime-heavy), graph "
                        "(kernel-heavy) or both (default)")
    p.add_argument("--sizes", default="200k,1M,10M",
                   help="kernel counts, comma-separated (default 200k,1M,10M)")
    p.add_argument("--source", type=Path,
                   help="tile this real report instead of the shapes' own")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    p.add_argument("--nsys", help="nsys executable, or 'none' (default: look for one)")
    p.add_argument("--nsys-timeout", type=float, default=900,
                   help="give up on an nsys run after this many seconds (default 900)")
    p.add_argument("--answers", type=Path, default=None, metavar="DIR",
                   help="keep each report's analyze --json here (to compare versions)")
    p.add_argument("--nsys-repeat", type=int, default=None,
                   help="nsys runs per size (default: --repeat up to 1M kernels, then 1)")
    args = p.parse_args(argv)
    if args.source is not None and not args.source.is_file():
        p.error(f"--source {args.source}: no such file")
    if args.source is not None:
        shapes = {args.source.stem: (args.source, "given with --source")}
    else:
        shapes = SHAPES if args.shape == "both" else {args.shape: SHAPES[args.shape]}
    nsys = find_nsys(args.nsys)
    # Byte-compile gpugap as an installed package is (pip does it at install time): an
    # editable checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile it on
    # every start.
    import compileall

    import gpugap

    compileall.compile_dir(Path(gpugap.__file__).parent, quiet=1)
    start_load = os.getloadavg()
    small_load: dict[str, list[dict]] = {}
    small = loaded("[small] gpugap CPU", lambda: measure_small_cpu(args.repeat), small_load,
                   "small")
    small["load"] = small_load["small"][0]
    results = []
    for shape, (source, _what) in shapes.items():
        for size in args.sizes.split(","):
            results.append(measure_size(shape, source, size.strip(), args, nsys))
    end_load = os.getloadavg()
    version = nsys_version(nsys) if nsys else None
    report(shapes, results, small, version, start_load, end_load)
    print(json.dumps({"benchmark": "gpugap-analyze", "machine": machine(),
                      "nsys": version, "nsys_rules": NSYS_RULES,
                      "nsys_stats_report": NSYS_STATS_REPORT,
                      "load_start": start_load, "load_end": end_load,
                      "small": small, "results": results}, default=str))
    return 0


def _secs(m: dict | None) -> str:
    if not m:
        return "-"
    if m.get("seconds"):
        return f"{m['seconds']:.2f}"
    return "timeout" if m.get("timeout") else "error"


def _load_span(r: dict) -> str:
    """The 1-minute load average's lowest and highest over a size's measurements."""
    ones = [m[k][0] for runs in r["load"].values() for m in runs
            for k in ("before", "after")]
    return f"{min(ones):.1f}-{max(ones):.1f}"


def report(shapes: dict, results: list[dict], small: dict, version: str | None,
           start_load, end_load) -> None:
    print(f"load average (1/5/15 min): {fmt_load(start_load)} at start, "
          f"{fmt_load(end_load)} at end, {os.cpu_count()} cores")
    if version:
        print(f"nsys: {version}; analyze -r {NSYS_RULES}; stats -r {NSYS_STATS_REPORT}")
    for shape, (source, what) in shapes.items():
        rows = [r for r in results if r["shape"] == shape]
        print(f"\n{shape}: {what}, tiled from {source.name}")
        head = (f"{'kernels':>10} {'rows':>11} {'load':>8} {'floor s':>8} {'gpugap s':>9} "
                f"{'x floor':>7} {'RSS MB':>7} {'data MB':>7} {'x data':>6}")
        print(head)
        print("-" * len(head))
        for r in rows:
            g = r["gpugap"]
            print(f"{r['kernels']:>10,} {r['row_total']:>11,} {_load_span(r):>8} "
                  f"{r['floor_s']:8.3f} {g['seconds']:9.3f} "
                  f"{g['seconds'] / r['floor_s']:7.2f} {g['peak_rss_mb']:7.0f} "
                  f"{r['data_mb']:7.0f} {g['peak_rss_mb'] / max(r['data_mb'], 1):6.2f}")
        if any(r["nsys_analyze"] for r in rows):
            head = (f"{'kernels':>10} {'gpugap s':>9} {'analyze s':>10} {'x gpugap':>8} "
                    f"{'analyze MB':>10} {'stats s':>8} {'x gpugap':>8} {'stats MB':>8}")
            print()
            print(head)
            print("-" * len(head))
            for r in rows:
                g, a, s = r["gpugap"], r["nsys_analyze"] or {}, r["nsys_stats"] or {}
                nan = float("nan")
                print(f"{r['kernels']:>10,} {g['seconds']:9.3f} {_secs(a):>10} "
                      f"{(a.get('seconds') or nan) / g['seconds']:8.2f} "
                      f"{a.get('peak_rss_mb', nan):10.0f} {_secs(s):>8} "
                      f"{(s.get('seconds') or nan) / g['seconds']:8.2f} "
                      f"{s.get('peak_rss_mb', nan):8.0f}")
    print()
    for shape, name, ok, value in targets(shapes, results, small):
        print(f"{'PASS' if ok else 'FAIL'}  {shape + ': ' if shape else ''}{name}: {value}")


def targets(shapes: dict, results: list[dict], small: dict) -> list[tuple]:
    """Issue 25's targets, per shape where they depend on one: (shape, name, ok, value)."""
    out = []
    for shape in shapes:
        by = {r["size"].lower(): r for r in results if r["shape"] == shape}
        if "1m" in by:
            r = by["1m"]
            ratio = r["gpugap"]["seconds"] / r["floor_s"]
            out.append((shape, f"1M in <= {FLOOR_RATIO_1M:g}x floor",
                        ratio <= FLOOR_RATIO_1M, f"{ratio:.2f}x"))
        if "10m" in by:
            rss = by["10m"]["gpugap"]["peak_rss_mb"]
            out.append((shape, "10M --json in <= 2.5 GB", rss <= RSS_10M_MB,
                        f"{rss:.0f} MB"))
        for r in by.values():
            ns = (r["nsys_analyze"] or {}).get("seconds")
            if r["nsys_analyze"] is None:
                continue            # nsys not found or --nsys none: no claim either way
            speed = ns / r["gpugap"]["seconds"] if ns else None
            out.append((shape, f"{r['size']}: >= {NSYS_SPEEDUP:g}x faster than nsys analyze",
                        bool(speed) and speed >= NSYS_SPEEDUP,
                        f"{speed:.2f}x" if speed else "nsys analyze failed"))
    out.append(("", f"{small['kernels']}-kernel report ({small['file']}) in <= "
                    f"{SMALL_CPU_S:g} s CPU", small["cpu_s"] <= SMALL_CPU_S,
                f"{small['cpu_s']:.3f} s user+sys"))
    return out


if __name__ == "__main__":
    sys.exit(main())
