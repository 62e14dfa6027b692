#!/usr/bin/env python3
"""Ways of reading a report's kernel table, as ratios to gpugap's own reader, same run.

    python benchmarks/reader_variants.py benchmarks/data/small-graph-node-x225.sqlite
    python benchmarks/reader_variants.py REPORT --repeat 5

gpugap reads its big tables through the ADBC SQLite driver (gpugap.report.reader): in
CPU time about twice SQLite's own scan of the same columns. This measures, on one
report, in rounds (each variant once a round, best of --repeat, CPU seconds of this
process), the alternatives tried against it:

- ``reader``: gpugap.report.reader.read_columns of the kernel table's columns as the
  loader reads them (gpugap.report.columns.kernel_read), in one part.
- ``pairs, unguarded``: the int32 columns packed two to an SQL value (``a | (b << 31)``),
  so that the driver hands over fewer values. Wrong on a planted or damaged report: a
  negative, oversized, text or REAL value would be read as another number.
- ``pairs, BETWEEN``: the same, with each pair kept only when both values lie in
  [0, 2^31) (else -1, to read again unpacked). Still wrong on REAL and text values.
- ``pairs, typeof``: the same, with each value also checked to be an integer: reads
  every value as the reader does.
- ``hex text``: the columns as one hexadecimal text per column (``group_concat(printf(
  '%016x', c), '')``), decoded by bytes.fromhex and numpy.
- ``scan``: SQLite's ``total()`` of every column, no value handed over (the floor of
  benchmarks/run.py for this table).

Prints each variant's best CPU time and its ratio to ``reader``. Needs the ADBC driver
(``pip install adbc-driver-sqlite``), as gpugap's fast path does.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpugap.report import reader  # noqa: E402
from gpugap.report.columns import kernel_read  # noqa: E402
from gpugap.report.database import Database  # noqa: E402
from gpugap.report.reader import Col  # noqa: E402

INT31 = 2**31 - 1


def _pair(a: Col, b: Col, guard: str) -> Col:
    packed = f"({a.sql} | ({b.sql} << 31))"
    if guard == "none":
        return Col(f"{a.name}+{b.name}", packed)
    ok = f"{a.sql} BETWEEN 0 AND {INT31} AND {b.sql} BETWEEN 0 AND {INT31}"
    if guard == "typeof":
        ok = f"typeof({a.sql}) = 'integer' AND typeof({b.sql}) = 'integer' AND {ok}"
    return Col(f"{a.name}+{b.name}", f"CASE WHEN {ok} THEN {packed} ELSE -1 END")


def _paired(cols: list[Col], guard: str) -> list[Col]:
    wide = [c for c in cols if c.dtype == "int64"]
    narrow = [c for c in cols if c.dtype != "int64"]
    pairs = [_pair(narrow[i], narrow[i + 1], guard) for i in range(0, len(narrow) - 1, 2)]
    return wide + pairs + (narrow[-1:] if len(narrow) % 2 else [])


def _hex(path: Path, table: str, cols: list[Col]) -> None:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        for c in cols:
            (text,) = conn.execute(
                f"SELECT group_concat(printf('%016x', {c.sql}), '') FROM \"{table}\""
            ).fetchone()
            np.frombuffer(bytes.fromhex(text or ""), dtype=">i8")
    finally:
        conn.close()


def _scan(path: Path, table: str, cols: list[Col]) -> None:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        totals = ", ".join(f"total({c.sql})" for c in cols)
        conn.execute(f'SELECT {totals} FROM "{table}"').fetchone()
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", type=Path, help="an nsys SQLite export with many kernels")
    p.add_argument("--repeat", type=int, default=3, help="rounds (best kept)")
    args = p.parse_args(argv)
    if not reader.adbc_available():
        p.error("the ADBC SQLite driver is not installed (pip install adbc-driver-sqlite)")
    db = Database(args.report)
    read = kernel_read(db)
    if read is None:
        p.error(f"{args.report}: no usable kernel table")
    cols = list(read.cols)
    rows = reader.row_bound(db, read.table)

    def columns(variant: list[Col]):
        return lambda: reader.read_columns(db, read.table, variant, capacity=rows)

    variants = {
        "reader": (len(cols), columns(cols)),
        "pairs, unguarded": (len(_paired(cols, "none")), columns(_paired(cols, "none"))),
        "pairs, BETWEEN": (len(_paired(cols, "between")), columns(_paired(cols, "between"))),
        "pairs, typeof": (len(_paired(cols, "typeof")), columns(_paired(cols, "typeof"))),
        "hex text": (len(cols), lambda: _hex(args.report, read.table, cols)),
        "scan": (len(cols), lambda: _scan(args.report, read.table, cols)),
    }
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(args.repeat):
        for name, (_, run) in variants.items():
            t0 = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - t0)
    print(f"{args.report.name}: {read.table}, {rows:,} rows, best of {args.repeat} rounds "
          "(CPU s)")
    for name, (n, _) in variants.items():
        print(f"{name:18} {n:3d} SQL columns {best[name]:8.3f} s "
              f"{best[name] / best['reader']:6.2f}x reader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
