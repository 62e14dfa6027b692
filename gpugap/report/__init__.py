"""Loading a report: .nsys-rep -> (nsys export, cached: cache) -> .sqlite (database,
validated: validate; read by columns, reader, prefetch) -> typed Tables (loader, table,
trace).

    from gpugap.report import load
    trace = load("run.nsys-rep")

The names below are imported on first use (PEP 562): reading a report's big tables
starts before the loader and the analysis are imported (prefetch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # The same names for type checkers, which do not run __getattr__ (tests/test_types.py
    # keeps the two lists equal).
    from gpugap.report.cache import cache_dir as cache_dir
    from gpugap.report.cache import content_key as content_key
    from gpugap.report.cache import private_cache as private_cache
    from gpugap.report.cache import resolve_sqlite as resolve_sqlite
    from gpugap.report.database import Database as Database
    from gpugap.report.loader import load as load
    from gpugap.report.loader import load_database as load_database
    from gpugap.report.loader import load_sqlite as load_sqlite
    from gpugap.report.trace import ReportInfo as ReportInfo
    from gpugap.report.trace import Trace as Trace

_EXPORTS = {
    "Database": "gpugap.report.database", "ReportInfo": "gpugap.report.trace",
    "Trace": "gpugap.report.trace", "load": "gpugap.report.loader",
    "load_database": "gpugap.report.loader", "load_sqlite": "gpugap.report.loader",
    "cache_dir": "gpugap.report.cache", "content_key": "gpugap.report.cache",
    "private_cache": "gpugap.report.cache", "resolve_sqlite": "gpugap.report.cache",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
