"""The export cache: a .nsys-rep is exported once with nsys, into a private directory,
filed under its content; a .sqlite export is read where it is; a compressed one
(.sqlite.xz, .gz, .zst) from a temporary copy, decompressed while it is read
(:func:`sqlite_export`, gpugap.report.compressed)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from gpugap.errors import GpugapError, ReportError
from gpugap.files import open_regular
from gpugap.report.compressed import DECOMPRESS, MAGIC, Decompressed
from gpugap.report.database import sniff
from gpugap.report.nsys import export_sqlite, find_nsys


def cache_dir() -> Path:
    """Where exports of .nsys-rep files go: $GPUGAP_CACHE_DIR, else the XDG cache."""
    if os.environ.get("GPUGAP_CACHE_DIR"):
        return Path(os.environ["GPUGAP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpugap" / "exports"


def content_key(report: Path) -> str:
    """What a cached export is filed under: a BLAKE2b hash of the report's bytes and its
    size, so that a report replaced by another capture (whatever its mtime) or a copy of
    it elsewhere (same bytes) maps to the right export."""
    import hashlib  # here: only .nsys-rep reports need it (start-up)

    digest = hashlib.blake2b(digest_size=20)
    size = 0
    with os.fdopen(open_regular(report, "report"), "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return f"{digest.hexdigest()}-{size}"


def private_cache(directory: Path) -> Path:
    """*directory*, created (mode 0700) when missing; ReportError (exit 2) unless it is a
    directory owned by this user that neither group nor others can write: in a shared
    one, anyone could plant an export for gpugap to trust."""
    fix = "set GPUGAP_CACHE_DIR to a private directory (mkdir -m 700)"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = directory.stat()
    except OSError as exc:
        raise ReportError(f"cannot create the export cache {directory} ({exc.strerror}); "
                          f"{fix}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ReportError(f"the export cache {directory} is not a directory; {fix}")
    if st.st_uid != os.geteuid():
        raise ReportError(f"the export cache {directory} belongs to another user (uid "
                          f"{st.st_uid}); {fix}")
    if st.st_mode & 0o022:
        raise ReportError(f"the export cache {directory} is writable by group or others "
                          f"(mode {stat.S_IMODE(st.st_mode):03o}); chmod 700 it, or {fix}")
    return directory


def _trusted(entry: Path) -> bool:
    """A cache entry gpugap wrote: a regular file (not a symlink) owned by this user,
    holding an SQLite database. Anything else is exported again and replaced."""
    try:
        st = os.lstat(entry)
        return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_size > 0
                and sniff(entry) == "sqlite")
    except (OSError, ReportError):
        return False


def resolve_sqlite(report: Path, *, nsys: str | None = None, cache: Path | None = None,
                   status=None) -> Path:
    """The SQLite export to read for *report*.

    A .sqlite is read in place. A .nsys-rep is exported once with nsys into the cache
    (``cache``, else :func:`cache_dir`), filed under its content (:func:`content_key`):
    the entry is reused for the same bytes only, whatever the files' mtimes. An export
    beside the report (REPORT.sqlite) is never read in its place: nothing says it came
    from these bytes; pass it to gpugap directly to use it. Nothing is ever written
    beside the input. The export goes to a fresh private temporary directory in the
    cache and is renamed into place.
    """
    kind = sniff(report)
    if kind == "sqlite":
        return report
    if kind in MAGIC:
        raise ReportError(f"{report} is {kind}-compressed: read it through open_export, "
                          f"or decompress it first ({DECOMPRESS[kind]} {report})")
    if kind != "nsys-rep":
        raise ReportError(f"{report} is neither an nsys report (.nsys-rep) nor an SQLite "
                          "export; pass the file nsys profile wrote, or its "
                          "nsys export --type sqlite")
    directory = cache or cache_dir()
    key = content_key(report)
    target = directory / f"{key}.sqlite"
    if os.path.lexists(directory) and _trusted(private_cache(directory) / target.name):
        return target

    tool = find_nsys(nsys)
    private_cache(directory)            # created only now that there is work for it
    try:
        import tempfile  # here: only exports need it (start-up)

        work = Path(tempfile.mkdtemp(prefix=".export-", dir=directory))
    except OSError as exc:
        raise ReportError(f"cannot write to the export cache {directory} ({exc.strerror}); "
                          "set GPUGAP_CACHE_DIR to a writable directory") from None
    try:
        partial = work / "export.sqlite"
        if status is not None:
            with status(f"Exporting {report.name} to SQLite with nsys {tool.version}"):
                export_sqlite(tool, report, partial)
        else:
            export_sqlite(tool, report, partial)
        if content_key(report) != key:
            raise ReportError(f"{report} changed while nsys exported it; run gpugap again "
                              "once it is complete")
        try:
            os.replace(partial, target)
        except OSError as exc:
            raise ReportError(f"cannot store the export {target} ({exc.strerror}); remove "
                              "it, or set GPUGAP_CACHE_DIR to another directory") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def open_export(report: Path, *, nsys: str | None = None, cache: Path | None = None,
                status=None) -> tuple[Path, Decompressed | None]:
    """The SQLite export to read for *report*: as :func:`resolve_sqlite` finds it, or,
    for a compressed file (xz, gzip, zstd: a .sqlite.xz, a .nsys-rep.gz...), the export
    of what it holds, decompressed into a private temporary directory (never beside the
    input). Then also what holds that directory: the export is there as long as it is
    (None: nothing to hold)."""
    kind = sniff(report)
    if kind not in MAGIC:
        return resolve_sqlite(report, nsys=nsys, cache=cache, status=status), None
    with status(f"Decompressing {report.name}") if status is not None else nullcontext():
        held = Decompressed(report, kind)
    try:
        if sniff(held.path) not in ("sqlite", "nsys-rep"):
            raise ReportError(f"{report} is {kind}-compressed, and what it holds is "
                              "neither an nsys report (.nsys-rep) nor an SQLite export; "
                              "pass the file nsys profile wrote, or its nsys export "
                              "--type sqlite")
        export = resolve_sqlite(held.path, nsys=nsys, cache=cache, status=status)
    except GpugapError as exc:
        held.remove()
        raise held.named(exc, report) from None
    except BaseException:
        held.remove()
        raise
    if export != held.path:             # a .nsys-rep's export, kept in the cache
        held.remove()
        return export, None
    return export, held


@contextmanager
def sqlite_export(report: Path, *, nsys: str | None = None, cache: Path | None = None,
                  status=None) -> Iterator[Path]:
    """:func:`open_export`'s export for as long as the context lasts."""
    export, held = open_export(report, nsys=nsys, cache=cache, status=status)
    try:
        yield export
    finally:
        if held is not None:
            held.remove()
