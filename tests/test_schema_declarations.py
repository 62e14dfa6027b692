"""gpugap.report.schema drives every consumer of an nsys column: the reads, the frames
and their dtypes, validation, the in-memory builder and the benchmark's floor. Adding a
column is one line there (docs/architecture.md, "Adding an nsys column"): the last test
makes that edit in a copy of the package and follows the column everywhere."""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpugap.report import load
from gpugap.report import schema as S
from gpugap.report.builder import TraceBuilder
from gpugap.report.columns import table_read
from gpugap.report.database import Database
from gpugap.report.table import Table

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "data" / "captures"


def report_path(name: str) -> Path:
    return CAPTURES / f"{name}.sqlite"


@functools.cache
def load_report(name: str):
    return load(report_path(name))

# Each GPU table, the real capture that has rows of it, and the Trace frame it becomes.
GPU_TABLES = [(S.KERNEL, "gemm", "kernels"), (S.MEMCPY, "gemm", "memcpys"),
              (S.MEMSET, "gemm", "memsets"), (S.SYNC, "gemm", "syncs"),
              (S.GRAPH, "small-graph", "graphs")]


def _floor_columns() -> dict[str, list[str]]:
    spec = importlib.util.spec_from_file_location("benchmark_run",
                                                  ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module.READ_COLUMNS


def _built_columns(tmp_path: Path) -> dict[str, list[str]]:
    """The columns of each table the builder writes, for one op of each kind."""
    b = TraceBuilder()
    b.kernel("k", start_us=0, dur_us=1)
    b.memcpy("H2D", bytes=1, start_us=2, dur_us=1)
    b.memset(bytes=1, start_us=4, dur_us=1)
    b.sync(start_us=6, end_us=7)
    b.graph(1, start_us=8, dur_us=1)
    path = tmp_path / "built.sqlite"
    b._write(path)
    with sqlite3.connect(path) as conn:
        return {t.name: [r[1] for r in conn.execute(f'PRAGMA table_info("{t.name}")')]
                for t, *_ in GPU_TABLES}


@pytest.mark.parametrize(("table", "capture", "frame_name"), GPU_TABLES,
                         ids=[t.name for t, *_ in GPU_TABLES])
def test_every_declared_gpu_column_reaches_every_consumer(table, capture, frame_name,
                                                          tmp_path):
    declared = [c for c in table.columns if c.name]
    # Read by the loader: each column under its name, from nsys's column.
    db = Database(report_path(capture))
    try:
        cols = {c.name: c.sql for c in table_read(db, table).cols}
    finally:
        db.close()
    for c in declared:
        assert cols[c.read_as] in (f'"{n}"' for n in c.candidates) or c.kind == "pid"
    # In the frame of a real capture (and of an empty one) with its dtype, within bounds.
    frame = getattr(load_report(capture), frame_name)
    assert len(frame)
    empty = Table.empty_of(S.frame_columns(table))
    for c in declared:
        if not c.frame:
            assert c.name not in frame
            continue
        values = frame[c.name]
        if c.frame_dtype == "str":
            assert isinstance(values.dtype, pd.CategoricalDtype), c.name
        else:
            assert np.issubdtype(np.asarray(values).dtype, np.integer), c.name
            assert empty[c.name].dtype == np.int64
            if c.bounds is not None:
                assert values.min() >= c.bounds[0] and values.max() <= c.bounds[1]
    # Written by the builder under nsys's name, and scanned by the benchmark's floor.
    written = _built_columns(tmp_path)[table.name]
    floor = _floor_columns()[table.name]
    for c in table.columns:
        assert c.nsys in written and c.nsys in floor, c.nsys


def test_enum_fallbacks_are_the_ids_of_real_exports():
    """Every enum member the loader looks up by name has, as its fallback, the id a
    real export gives it."""
    with sqlite3.connect(f"file:{report_path('gemm')}?mode=ro", uri=True) as conn:
        for table, members in S.ENUMS.items():
            real = {n: i for i, n in conn.execute(f"SELECT id, name FROM {table}")}
            assert {n: real[n] for _, (n, _) in members.items()} == {
                n: i for i, (n, _) in members.items()}, table


NEW_LINE = ('    Column("sharedMemoryExecuted", "shared_executed", default=0, '
            'bounds=(0, 2**31 - 1)),\n')
FOLLOW = """
import importlib.util, json, sqlite3, sys
from gpugap.report import load
from gpugap.report.builder import TraceBuilder
from gpugap.report.loader import KERNEL_COLUMNS
from gpugap.report.columns import SCHEMA
capture = sys.argv[1]
kernels = load(capture).kernels
b = TraceBuilder()
b.kernel("given", start_us=0, dur_us=1, shared_executed=4096)
b.kernel("default", start_us=2, dur_us=1)
try:
    TraceBuilder().kernel("k", start_us=0, dur_us=1, shared_executed=-1)
    refused = ""
except ValueError as e:
    refused = str(e)
spec = importlib.util.spec_from_file_location("run", "benchmarks/run.py")
run = importlib.util.module_from_spec(spec)
sys.path.insert(0, "benchmarks")
spec.loader.exec_module(run)
print(json.dumps({
    "frame": sorted(int(v) for v in kernels["shared_executed"]),
    "dtype": KERNEL_COLUMNS["shared_executed"],
    "schema": SCHEMA["CUPTI_ACTIVITY_KIND_KERNEL"]["sharedMemoryExecuted"],
    "built": [int(v) for v in b.build().kernels["shared_executed"]],
    "refused": refused,
    "floor": "sharedMemoryExecuted" in run.READ_COLUMNS["CUPTI_ACTIVITY_KIND_KERNEL"]}))
"""


@pytest.mark.slow
def test_a_new_kernel_column_is_one_line(tmp_path):
    """Add nsys's sharedMemoryExecuted to the kernels with one line in a copy of
    schema.py: the loader reads it from a real capture into its frame, the builder
    writes it (given, or its default) and checks its bounds, the schema check and the
    benchmark's floor know it."""
    shutil.copytree(ROOT / "gpugap", tmp_path / "gpugap",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "benchmarks").mkdir()
    for name in ("run.py", "make_large.py"):
        shutil.copy(ROOT / "benchmarks" / name, tmp_path / "benchmarks" / name)
    schema = tmp_path / "gpugap" / "report" / "schema.py"
    before = schema.read_text()
    anchor = '    ), what="kernels",'
    assert before.count(anchor) == 1
    after = before.replace(anchor, NEW_LINE + anchor)
    schema.write_text(after)
    diff = [d for d in difflib.ndiff(before.splitlines(True), after.splitlines(True))
            if d[0] in "+-"]
    assert diff == ["+ " + NEW_LINE]                       # the one line

    capture = report_path("gemm")
    done = subprocess.run([sys.executable, "-c", FOLLOW, str(capture)], cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    with sqlite3.connect(f"file:{capture}?mode=ro", uri=True) as conn:
        want = sorted(v for (v,) in conn.execute(
            "SELECT sharedMemoryExecuted FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    assert got["frame"] == want and len(set(want)) > 1
    assert got["dtype"] == "int64" and got["schema"] == "int"
    assert got["built"] == [4096, 0]
    assert "shared_executed -1 is outside" in got["refused"]
    assert got["floor"] is True
