#!/usr/bin/env python3
"""Build a large, valid nsys SQLite export by tiling a real one in time.

    python benchmarks/make_large.py --kernels 1M            # -> benchmarks/data/<src>-x193.sqlite
    python benchmarks/make_large.py --tiles 3 -o /tmp/x3.sqlite SRC.sqlite

The source report (default: the densest captured one, tests/data/scenarios/
moe-experts-bad.sqlite, ~5200 kernels) is repeated N times one after another, as if the
program had run N times in one capture. Tile k is the original shifted by k x period,
where period = (last - first timestamp of the tiled tables) + gap, so tiles never
overlap and every boundary looks the same.

What is tiled (every copy consistent with the others):

- every event table with a ``start`` column: CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET
  / SYNCHRONIZATION / RUNTIME (and DRIVER, GRAPH_*, CUBLAS_EVENTS, ... when present),
  NVTX_EVENTS (ranges and marks; the definition rows, such as domain creation, stay
  once), OSRT_API (unless --no-osrt), PROFILER_OVERHEAD;
- CUPTI_ACTIVITY_KIND_CUDA_EVENT (no timestamps, but correlation and event ids).

In each copy: start/end/timestamp are shifted; correlationId is offset by k x (largest
correlation id of the report + 1), so ids stay unique per process and every GPU row
still joins its own API call; gridId, eventId, eventSyncId and NVTX rangeId are offset
the same way (CUPTI's "invalid" 0xFFFFFFFF and 0/NULL stay as they are).
ANALYSIS_DETAILS.stopTime/duration are extended. StringIds, TARGET_INFO_*, ENUM_*,
ThreadNames, PROCESSES, metadata and the other tables stay unchanged. The original's
page size is kept. Rows are written tile after tile in the original's order, so tables
stay sorted by time like real exports.

Everything is done by SQLite itself (INSERT ... SELECT over a recursive CTE of tile
numbers): 10 million kernels with their API rows take well under a minute.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_SOURCE = REPO / "tests" / "data" / "scenarios" / "moe-experts-bad.sqlite"
DEFAULT_DIR = HERE / "data"

INVALID_ID = 0xFFFFFFFF          # CUPTI_SYNCHRONIZATION_INVALID_VALUE and friends
TIME_COLUMNS = ("start", "end", "timestamp")
ID_COLUMNS = ("correlationId", "gridId", "eventId", "eventSyncId", "rangeId")
# Tables with timestamps that describe the capture, not the program: kept once.
KEEP_ONCE = {"DIAGNOSTIC_EVENT", "ANALYSIS_DETAILS", "TARGET_INFO_SESSION_START_TIME"}
# NVTX rows that define things (categories, thread/domain names) rather than mark time.
NVTX_DEFINITIONS = ("NvtxCategory", "NvtxThread", "NvtxDomainCreate", "NvtxDomainDestroy")


def parse_count(text: str) -> int:
    """'1M' -> 1_000_000, '200k' -> 200_000, '10000000' -> 10_000_000."""
    text = text.strip().lower().replace("_", "")
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(text[-1:], 1)
    number = text[:-1] if scale != 1 else text
    return int(float(number) * scale)


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({q(table)})")]


def tiled_tables(conn: sqlite3.Connection, osrt: bool) -> list[str]:
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY rowid")]
    out = []
    for t in names:
        if t in KEEP_ONCE or (t == "OSRT_API" and not osrt):
            continue
        cols = columns(conn, t)
        if "start" in cols or t == "CUPTI_ACTIVITY_KIND_CUDA_EVENT":
            out.append(t)
    return out


def nvtx_filter(conn: sqlite3.Connection) -> str:
    """WHERE clause keeping NVTX definition rows out of the copies."""
    ids = [r[0] for r in conn.execute(
        f"SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN "
        f"({', '.join('?' * len(NVTX_DEFINITIONS))})", NVTX_DEFINITIONS)] \
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'ENUM_NSYS_EVENT_TYPE'"
                        ).fetchone() else [33, 39, 75, 76]
    return f'WHERE "eventType" NOT IN ({", ".join(map(str, ids))})' if ids else ""


def plan(conn: sqlite3.Connection, tables: list[str]) -> tuple[int, int, dict[str, int]]:
    """(first timestamp, last timestamp, per-id-column offset per tile)."""
    lo, hi = None, None
    id_max: dict[str, int] = {c: 0 for c in ID_COLUMNS}
    for t in tables:
        cols = columns(conn, t)
        for c in TIME_COLUMNS:
            if c in cols:
                a, b = conn.execute(f"SELECT min({q(c)}), max({q(c)}) FROM {q(t)} "
                                    f"WHERE {q(c)} > 0").fetchone()
                if a is not None:
                    lo = a if lo is None else min(lo, a)
                    hi = b if hi is None else max(hi, b)
        for c in ID_COLUMNS:
            if c in cols:
                (m,) = conn.execute(f"SELECT max({q(c)}) FROM {q(t)} WHERE {q(c)} > 0 "
                                    f"AND {q(c)} < {INVALID_ID}").fetchone()
                if m is not None:
                    id_max[c] = max(id_max[c], int(m))
    if lo is None:
        raise SystemExit("make_large: the source has no timestamped events to tile")
    # Correlation ids are shared by the API and activity tables: one offset for all.
    return int(lo), int(hi), {c: m + 1 for c, m in id_max.items()}


def select_list(cols: list[str], period: int, offsets: dict[str, int]) -> str:
    exprs = []
    for c in cols:
        if c in TIME_COLUMNS:
            # 0 means "no timestamp" to CUPTI; NULL stays NULL.
            exprs.append(f"CASE WHEN {q(c)} > 0 THEN {q(c)} + tiles.k * {period} "
                         f"ELSE {q(c)} END")
        elif c in offsets:
            exprs.append(f"CASE WHEN {q(c)} > 0 AND {q(c)} < {INVALID_ID} "
                         f"THEN {q(c)} + tiles.k * {offsets[c]} ELSE {q(c)} END")
        else:
            exprs.append(q(c))
    return ", ".join(exprs)


def build(source: Path, output: Path, tiles: int, gap_ns: int, osrt: bool = True,
          quiet: bool = False) -> dict:
    if tiles < 1:
        raise SystemExit("make_large: --tiles must be at least 1")
    t0 = time.perf_counter()
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    shutil.copyfile(source, partial)
    conn = sqlite3.connect(partial, isolation_level=None)
    try:
        conn.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                           "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-262144;")
        tables = tiled_tables(conn, osrt)
        lo, hi, offsets = plan(conn, tables)
        period = hi - lo + gap_ns
        counts = {}
        conn.execute("BEGIN")
        for t in tables:
            cols = columns(conn, t)
            where = nvtx_filter(conn) if t == "NVTX_EVENTS" else ""
            conn.execute("DROP TABLE IF EXISTS temp.src")
            conn.execute(f"CREATE TEMP TABLE src AS SELECT * FROM main.{q(t)} {where} "
                         "ORDER BY rowid")
            if tiles > 1:
                # CROSS JOIN keeps the tile loop outermost: tile after tile, each in the
                # original's row order.
                conn.execute(
                    f"INSERT INTO main.{q(t)} ({', '.join(map(q, cols))}) "
                    f"WITH RECURSIVE tiles(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM tiles "
                    f"WHERE k < {tiles - 1}) "
                    f"SELECT {select_list(cols, period, offsets)} "
                    f"FROM tiles CROSS JOIN temp.src")
            (counts[t],) = conn.execute(f"SELECT count(*) FROM main.{q(t)}").fetchone()
        conn.execute("DROP TABLE IF EXISTS temp.src")
        extra = (tiles - 1) * period
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'ANALYSIS_DETAILS'").fetchone():
            conn.execute(f'UPDATE ANALYSIS_DETAILS SET "stopTime" = "stopTime" + {extra}, '
                         f'"duration" = "duration" + {extra}')
        conn.execute("COMMIT")
    finally:
        conn.close()
    os.replace(partial, output)
    info = {"source": str(source), "output": str(output), "tiles": tiles,
            "period_ns": period, "gap_ns": gap_ns, "rows": counts,
            "bytes": output.stat().st_size, "seconds": round(time.perf_counter() - t0, 2)}
    if not quiet:
        kernels = counts.get("CUPTI_ACTIVITY_KIND_KERNEL", 0)
        print(f"{output}: {tiles} tiles, {kernels:,} kernels, "
              f"{counts.get('CUPTI_ACTIVITY_KIND_RUNTIME', 0):,} API rows, "
              f"{info['bytes'] / 2**20:,.0f} MiB in {info['seconds']} s", file=sys.stderr)
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE,
                   help=f"real nsys SQLite export to tile (default {DEFAULT_SOURCE.name})")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--tiles", type=int, help="number of copies")
    size.add_argument("--kernels", type=parse_count,
                      help="at least this many kernels, e.g. 200k, 1M, 10M")
    p.add_argument("-o", "--output", type=Path, help="output file (default: "
                   "benchmarks/data/<source>-x<tiles>.sqlite)")
    p.add_argument("--gap-ms", type=float, default=1.0,
                   help="extra idle time between tiles (default 1 ms)")
    p.add_argument("--no-osrt", action="store_true", help="leave OSRT_API untiled")
    p.add_argument("--force", action="store_true", help="rebuild an existing output")
    args = p.parse_args(argv)
    source = args.source
    if not source.is_file():
        p.error(f"{source}: no such file")
    tiles = args.tiles
    if tiles is None:
        want = args.kernels or 1_000_000
        with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as c:
            (n,) = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        tiles = max(1, -(-want // max(n, 1)))
    output = args.output or DEFAULT_DIR / f"{source.stem}-x{tiles}.sqlite"
    if output.exists() and not args.force:
        print(f"{output} exists (use --force to rebuild)", file=sys.stderr)
        print(output)
        return 0
    build(source, output, tiles, int(args.gap_ms * 1e6), osrt=not args.no_osrt)
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
