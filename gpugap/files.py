"""Files gpugap reads and writes, handled the one safe way.

Inputs (reports, configs, baselines) are read only when they are regular files: a FIFO,
a device such as ``/dev/zero`` or a directory is a one-line error, never a hang or an
endless read. Configs and baselines are small by nature and read up to a size cap.

Outputs (``--junit``, ``--markdown``, ``-o``, ``--html``, ``--svg``, ``--png``) follow one
rule, :func:`validate_outputs` before any work and :func:`write_atomic` at the end:

* an output may never be, or resolve to, one of the command's inputs (not even with
  ``--force``), and two outputs may not be the same file;
* an existing file is replaced only with ``--force``; a directory, a FIFO or a device
  never; the directory must exist and take a new file (tried, not guessed);
* the data goes to a new temporary file beside the target (created exclusively, with an
  unpredictable name) and is renamed into place: a reader never sees half a file, and a
  symlink at the target is replaced, never followed.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpugap.errors import WRITE_FAILED_ERRNOS, ReportError, UsageError, WriteError, option
from gpugap.text import short_path

CONFIG_MAX_BYTES = 1 << 20          # 1 MiB: a gpugap.toml / pyproject.toml
BASELINE_MAX_BYTES = 64 << 20       # 64 MiB: a baseline of many runs and NVTX ranges

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """'a directory', 'a FIFO (named pipe)', ... for a non-regular st_mode."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path, what: str, *, error: type[Exception] = ReportError) -> int:
    """A read-only descriptor of *path*, or *error* (one line) when it is missing,
    unreadable or not a regular file. Opened non-blocking, so a FIFO cannot hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{path}: no such {what}; check the path") from None
    except IsADirectoryError:
        raise error(f"{path} is a directory, not a {what}; give a file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror}); check its "
                    "permissions") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise error(f"{path} is {kind_of(mode)}, not a {what}; give a regular file")
    return fd


def read_limited(path: Path, what: str, limit: int, *,
                 error: type[Exception] = ReportError) -> bytes:
    """The bytes of the regular file *path*, at most *limit* of them (else *error*)."""
    fd = open_regular(path, what, error=error)
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror})") from None
    if len(data) > limit:
        raise error(f"{path} is larger than {limit // (1 << 20)} MiB, too large for a "
                    f"{what}; check the path")
    return data


def read_text(path: Path, what: str, limit: int, *,
              error: type[Exception] = ReportError) -> str:
    """:func:`read_limited`, decoded as UTF-8 (else *error* naming the byte offset)."""
    data = read_limited(path, what, limit, error=error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not valid UTF-8 (byte {exc.start}); save the {what} as "
                    "UTF-8") from None


# --- outputs ------------------------------------------------------------------------

def _identity(path: Path) -> tuple[Path, tuple[int, int] | None]:
    """(resolved path, (device, inode) when it exists)."""
    try:
        st = path.stat()
        ident = (st.st_dev, st.st_ino)
    except OSError:
        ident = None
    return Path(os.path.realpath(path)), ident


def is_input(path: Path, inputs: Iterable[Path | None]) -> Path | None:
    """The input that *path* is, resolves to or is a hard link of; None if none."""
    out_real, out_id = _identity(path)
    lexical = Path(os.path.abspath(path))
    for source in inputs:
        if source is None:
            continue
        real, ident = _identity(Path(source))
        if out_real == real or lexical == Path(os.path.abspath(source)) or \
                (out_id is not None and out_id == ident):
            return Path(source)
    return None


# Outputs validated and not written yet, so that an interrupted run can say which ones
# it did not write (gpugap.cli.root.main).
_pending: dict[Path, str] = {}


def pending_outputs(*, forget: bool = False) -> list[Path]:
    """The outputs validated by :func:`validate_outputs` and not written since; *forget*
    starts afresh (a new command in the same process)."""
    pending = list(_pending)
    if forget:
        _pending.clear()
    return pending


def validate_outputs(outputs: Sequence[tuple[str, Path | None]],
                     inputs: Iterable[Path | None] = (), *, force: bool = False) -> None:
    """UsageError (one line) unless every output can be written as asked.

    *outputs* are (option, path) pairs such as ``("--junit", Path("j.xml"))``; None paths
    are skipped. Called before any work, so a clash fails fast.
    """
    inputs = list(inputs)
    seen: dict[Path, str] = {}
    for flag, path in outputs:
        if path is None:
            continue
        path = Path(path)
        source = is_input(path, inputs)
        if source is not None:
            raise UsageError(f"{flag} {path} would overwrite the input {source}; write "
                             "the output to another file")
        real = Path(os.path.realpath(path))
        if real in seen:
            raise UsageError(f"{path} is given for both {seen[real]} and {flag}; pick "
                             "one file per output")
        seen[real] = flag
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise UsageError(f"cannot write {path} ({exc.strerror})") from None
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise UsageError(f"{path} is a directory; give {flag} a file name")
            if stat.S_ISLNK(st.st_mode):
                # Replaced, not followed; but one leading to a device, FIFO or directory
                # (/dev/stdout) is not a file to replace.
                try:
                    st = os.stat(path)
                except OSError:
                    st = None               # dangling
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise UsageError(f"{path} is {kind_of(st.st_mode)}; give {flag} a "
                                 "regular file name")
            if not force:
                raise UsageError(f"{path} exists; pass {option('force')} to overwrite")
        parent = path.parent
        if not parent.is_dir():
            raise UsageError(f"cannot write {path}: directory {parent} does not exist")
        probe_writable(path)
    _pending.update((Path(path), flag) for flag, path in outputs if path is not None)


def probe_writable(path: Path, parent: Path | None = None) -> None:
    """UsageError unless a file can be created beside *path* (in *parent*, when given:
    the nearest existing directory above an output directory): one is, and removed
    (permissions, a read-only filesystem, /proc: only trying tells them all apart)."""
    parent = path.parent if parent is None else parent
    import tempfile  # here: a document to stdout writes no file (start-up)

    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name or 'gpugap'}.",
                                   suffix=".probe")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: no file can be created in {parent} "
                         f"({exc.strerror}); choose a writable directory") from None
    os.close(fd)
    os.unlink(tmp)


def write_atomic(path: Path, data: str | bytes, *, force: bool = False) -> Path:
    """Write *data* to *path* through a temporary file in its directory, renamed into
    place. Without *force* an existing *path* (a symlink too, dangling or not) is an
    error, checked again at the rename; with it, it is replaced (a symlink itself,
    never its target)."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if not force and os.path.lexists(path):
        raise UsageError(f"{path} exists; pass {option('force')} to overwrite")
    import tempfile  # here: a document to stdout writes no file (start-up)

    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.",
                                   suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror}); check that its "
                         "directory exists and is writable") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)       # mkstemp makes 0600; an output is the usual
        if force:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    except OSError as exc:
        error = WriteError if exc.errno in WRITE_FAILED_ERRNOS else UsageError
        raise error(f"cannot write {path} ({exc.strerror})") from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    _pending.pop(path, None)
    return path


def _link_new(tmp: str, path: Path) -> None:
    """Put *tmp* at *path* only if nothing is there, atomically where the filesystem
    has hard links (os.link never replaces), else by a checked rename."""
    try:
        os.link(tmp, path, follow_symlinks=False)
        return
    except FileExistsError:
        raise UsageError(f"{path} exists; pass {option('force')} to overwrite") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                             errno.EMLINK):
            raise
    if os.path.lexists(path):
        raise UsageError(f"{path} exists; pass {option('force')} to overwrite")
    os.replace(tmp, path)


def check_appendable(path: Path, inputs: Iterable[Path | None] = ()) -> None:
    """Before any work: UsageError unless :func:`append_text` could append to *path*
    (not an input; a regular file that opens for writing, or a new one its directory
    takes). Nothing is written."""
    path = Path(path)
    source = is_input(path, inputs)
    if source is not None:
        raise UsageError(f"{path} (the job summary file) is the input {source}; "
                         "unset GITHUB_STEP_SUMMARY or check it")
    if not os.path.lexists(path):
        if not path.parent.is_dir():
            raise UsageError(f"cannot write {path}: directory {path.parent} does not "
                             "exist; check GITHUB_STEP_SUMMARY")
        probe_writable(path)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror}); check "
                         "GITHUB_STEP_SUMMARY") from None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path} is {kind_of(mode)}, not a file to append to; check "
                         "GITHUB_STEP_SUMMARY")


def append_text(path: Path, text: str, inputs: Iterable[Path | None] = ()) -> None:
    """Append to a file that is meant to grow (GitHub's job summary): never one of the
    *inputs*, never through anything but a regular file, never a hang on a FIFO."""
    source = is_input(path, inputs)
    if source is not None:
        raise UsageError(f"{path} (the job summary file) is the input {source}; "
                         "unset GITHUB_STEP_SUMMARY or check it")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror})") from None
    with os.fdopen(fd, "ab") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UsageError(f"{path} is {kind_of(os.fstat(fh.fileno()).st_mode)}, not a "
                             "file to append to; check GITHUB_STEP_SUMMARY")
        try:
            fh.write(text.encode("utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot write {path} ({exc.strerror})") from None


__all__ = ["BASELINE_MAX_BYTES", "COMPRESSED_SUFFIXES", "CONFIG_MAX_BYTES",
           "REPORT_SUFFIXES", "append_text", "check_appendable", "expand_reports",
           "folder_names", "folders_with_reports", "is_input", "kind_of", "natural_order",
           "open_regular", "pending_outputs", "probe_writable", "read_limited", "read_text",
           "report_kind", "validate_outputs", "write_atomic"]


REPORT_SUFFIXES = (".sqlite", ".nsys-rep")
# A report compressed whole (gpugap.report.compressed reads it): REPORT.sqlite.xz...
COMPRESSED_SUFFIXES = (".xz", ".gz", ".zst")


def report_kind(name: str) -> tuple[str, str] | None:
    """(stem, suffix) of a report's file name by its suffixes ('run.sqlite.xz' ->
    ('run', '.sqlite')), None for any other file."""
    for packed in ("", *COMPRESSED_SUFFIXES):
        if name.endswith(packed):
            plain = name[:len(name) - len(packed)]
            for suffix in REPORT_SUFFIXES:
                if plain.endswith(suffix) and len(plain) > len(suffix):
                    return plain[:-len(suffix)], suffix
    return None


def _reports_in(directory: Path) -> list[Path]:
    """The reports directly in *directory* (not in its subfolders), one per stem: the
    .sqlite export over its .nsys-rep, a plain file over its compressed copy."""
    best: dict[str, tuple[int, Path]] = {}
    for p in directory.iterdir():
        kind = report_kind(p.name)
        if kind is None or not p.is_file():
            continue
        stem, suffix = kind
        rank = (suffix != ".sqlite", p.name != stem + suffix)       # the best is lowest
        score = rank[0] * 2 + rank[1]
        if stem not in best or score < best[stem][0]:
            best[stem] = (score, p)
    return [p for _, p in best.values()]


def folder_names(folders: list[Path], limit: int = 3) -> str:
    """'captures, causes, cpu-only...' (at most *limit* named)."""
    return ", ".join(p.name for p in folders[:limit]) + ("..." if len(folders) > limit
                                                           else "")


def folders_with_reports(directory: Path, limit: int = 4) -> list[Path]:
    """Up to *limit* subfolders of *directory* that hold reports at any depth (what
    ``gpugap analyze DIR`` leaves out: it does not look into subfolders)."""
    found: list[Path] = []
    try:
        subfolders = sorted((p for p in directory.iterdir() if p.is_dir()),
                            key=lambda p: natural_order(p.name))
    except OSError:
        return found
    for sub in subfolders:
        for _, _, names in os.walk(sub):
            if any(report_kind(n) is not None for n in names):
                found.append(sub)
                break
        if len(found) == limit:
            break
    return found


# ---------------------------------------------------------------------------------------
# Finding the reports a command names (before pandas is imported: the read of the
# one report starts early, gpugap.report.prefetch)

def natural_order(text: str) -> list:
    """'rank10' after 'rank9'."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def _is_dir(path: Path) -> bool:
    """Path.is_dir, with a path the system refuses (a name longer than the filesystem
    allows, a path beyond PATH_MAX) said in one line instead of raised."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise UsageError(f"{exc.strerror}: {short_path(path)}; check the path (a name "
                         "has at most 255 bytes, a whole path 4,096)") from None


def expand_reports(items: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The reports named by *items*: files as given, every report (.sqlite, .nsys-rep,
    either compressed: .sqlite.xz...) directly in a directory (not in its subfolders),
    the matches of a glob pattern, in natural order ('rank10' after 'rank9'). A
    .nsys-rep whose .sqlite export lies beside it counts once (the export), so does a
    compressed copy beside its plain file."""
    out: list[Path] = []
    for item in items:
        path = Path(item)
        if _is_dir(path):
            found = _reports_in(path)
            if not found:
                inside = folders_with_reports(path)
                raise UsageError(
                    f"{item} is a directory without reports in it; pass a .nsys-rep or "
                    ".sqlite file, or a directory that holds them" + (
                        f" (gpugap does not look into subfolders: {folder_names(inside)} "
                        f"hold reports; pass {inside[0]} or the reports themselves)"
                        if inside else ""))
        elif not path.exists() and glob.has_magic(str(item)):
            found = [Path(p) for p in glob.glob(str(item)) if Path(p).is_file()]
            if not found:
                raise UsageError(f"no report matches '{item}'")
            stems = {p.with_suffix("") for p in found if p.suffix == ".sqlite"}
            found = [p for p in found
                     if p.suffix == ".sqlite" or p.with_suffix("") not in stems]
        else:
            out.append(path)
            continue
        out += sorted(found, key=lambda p: natural_order(p.name))
    return list(dict.fromkeys(out))
