"""Loading a report: .nsys-rep -> (nsys export, cached) -> .sqlite -> typed frames."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from gpugap.errors import ReportError
from gpugap.report.database import sniff

# The loader and frames need pandas; they are imported on first use (PEP 562) so that
# reading a report can start before pandas is imported (gpugap.report.prefetch).
_LAZY = {"Database": "gpugap.report.database", "load_database": "gpugap.report.loader",
         "load_sqlite": "gpugap.report.loader", "ReportInfo": "gpugap.report.trace",
         "Trace": "gpugap.report.trace"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cache_dir() -> Path:
    """Where exports of .nsys-rep files go: $GPUGAP_CACHE_DIR, else the XDG cache."""
    if os.environ.get("GPUGAP_CACHE_DIR"):
        return Path(os.environ["GPUGAP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpugap" / "exports"


def _cache_file(report: Path, directory: Path) -> Path:
    key = hashlib.sha1(str(report.resolve()).encode()).hexdigest()[:12]
    return directory / f"{report.name.removesuffix('.nsys-rep')}-{key}.sqlite"


def _fresh(export: Path, report: Path) -> bool:
    try:
        return (export.is_file() and export.stat().st_size > 0
                and export.stat().st_mtime >= report.stat().st_mtime
                and sniff(export) == "sqlite")
    except ReportError:
        return False


def resolve_sqlite(report: Path, *, nsys: str | None = None, cache: Path | None = None,
                   status=None) -> Path:
    """The SQLite export to read for *report*.

    A .sqlite is read in place. For a .nsys-rep: an export of it beside it (made by the
    user, ``nsys export`` style) when newer than it; else gpugap's cached export when
    newer than it; else a new export into the cache. Nothing is ever written beside the
    input, and an existing file is never overwritten (only gpugap's own cache entries).
    """
    kind = sniff(report)
    if kind == "sqlite":
        return report
    if kind != "nsys-rep":
        raise ReportError(f"{report} is neither an nsys report (.nsys-rep) nor an SQLite "
                          "export; pass the file nsys profile wrote, or its "
                          "nsys export --type sqlite")
    beside = report.with_suffix(".sqlite")
    if _fresh(beside, report):
        return beside
    directory = cache or cache_dir()
    target = _cache_file(report, directory)
    if _fresh(target, report):
        return target

    from gpugap.nsys import export_sqlite, find_nsys

    tool = find_nsys(nsys)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the export cache {directory} ({exc.strerror}); "
                          "set GPUGAP_CACHE_DIR to a writable directory") from None
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial.sqlite")
    try:
        if status is not None:
            with status(f"Exporting {report.name} to SQLite with nsys {tool.version}"):
                export_sqlite(tool, report, partial)
        else:
            export_sqlite(tool, report, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def load(path: str | os.PathLike[str], *, nsys: str | None = None, cache: Path | None = None,
         status=None):
    """Load any nsys report (.nsys-rep or .sqlite) into a :class:`Trace`."""
    from gpugap.report.loader import load_sqlite

    report = Path(path)
    sqlite_path = resolve_sqlite(report, nsys=nsys, cache=cache, status=status)
    return load_sqlite(sqlite_path, shown_path=str(report))


__all__ = ["Database", "ReportInfo", "Trace", "cache_dir", "load", "load_database",
           "load_sqlite", "resolve_sqlite"]
