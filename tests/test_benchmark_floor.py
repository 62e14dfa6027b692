"""benchmarks/run.py's floor stays fair: it scans every column gpugap reads.

The floor of issue 25's benchmark is SQLite's own scan of the columns gpugap's answers
need; a column the loader starts reading must join it, or the ratio flatters gpugap.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

from gpugap.report.columns import SCHEMA

ROOT = Path(__file__).resolve().parent.parent


def _run_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("benchmark_run",
                                                      ROOT / "benchmarks" / "run.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_floor_columns_are_the_loaders():
    run = _run_module()
    assert run.READ_COLUMNS == {t: list(c) for t, c in SCHEMA.items()}
    assert run.FALLBACK[("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "deprecatedSyncType")] \
        == "syncType"


def test_floor_scans_kernel_heavy_shape_in_full():
    run = _run_module()
    source, _ = run.SHAPES["graph"]
    queries, data_bytes = run.floor_plan(source)
    kernel_sql = next(q for q in queries if '"CUPTI_ACTIVITY_KIND_KERNEL"' in q)
    for column in ("demangledName", "gridX", "registersPerThread", "graphNodeId"):
        assert f'total("{column}")' in kernel_sql
    # syncType is there, so its fallback is not read
    assert all("deprecatedSyncType" not in q for q in queries)
    with sqlite3.connect(source) as conn:
        (kernels,) = conn.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        assert conn.execute(kernel_sql).fetchone()[0] == kernels
    assert data_bytes >= kernels * len(run.READ_COLUMNS["CUPTI_ACTIVITY_KIND_KERNEL"]) * 8
