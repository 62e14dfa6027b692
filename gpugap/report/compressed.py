"""Compressed exports (``.sqlite.xz``, ``.sqlite.gz``, ``.sqlite.zst``; a compressed
``.nsys-rep`` too), read directly: decompressed into a private temporary directory
(``$TMPDIR``, never beside the input), read from there, and removed once read.

Known by their first bytes, whatever their names: xz and gzip with Python's own lzma and
gzip, zstd with the ``zstandard`` module when it is installed (else one line saying how
to get it, or to decompress the file first).
"""

from __future__ import annotations

import os
import shutil
import weakref
from pathlib import Path
from typing import IO, Any

from gpugap.errors import WRITE_FAILED_ERRNOS, GpugapError, ReportError, WriteError

# The first bytes of each compression, and the command that undoes it by hand.
MAGIC = {"xz": b"\xfd7zXZ\x00", "gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd"}
DECOMPRESS = {"xz": "xz -dk", "gzip": "gzip -dk", "zstd": "zstd -d"}
CHUNK = 1 << 20


def kind_of(head: bytes) -> str | None:
    """'xz', 'gzip' or 'zstd' from a file's first bytes, else None."""
    return next((kind for kind, magic in MAGIC.items() if head.startswith(magic)), None)


def _opened(path: Path, kind: str) -> IO[bytes] | _ZstdStream:
    """A stream of *path*'s decompressed bytes."""
    if kind == "xz":
        import lzma

        return lzma.open(path)
    if kind == "gzip":
        import gzip

        return gzip.open(path)
    return _ZstdStream(path)


class _ZstdStream:
    """*path*'s zstd frames decompressed, read as a stream; EOFError where the last
    frame stops short (zstandard's own stream reader ends there quietly)."""

    def __init__(self, path: Path) -> None:
        try:
            import zstandard
        except ImportError:
            raise ReportError(f"{path} is zstd-compressed, and reading it needs the "
                              "zstandard module: pip install zstandard, or decompress it "
                              f"first ({DECOMPRESS['zstd']} {path})") from None
        self._new = zstandard.ZstdDecompressor
        self._file = open(path, "rb")
        self._frame = self._new().decompressobj()
        self._fed = False                   # the frame begun has been given bytes

    def read(self, size: int) -> bytes:
        while chunk := self._file.read(size):
            out = b""
            while chunk:
                self._fed = True
                out += self._frame.decompress(chunk)
                chunk = b""
                if self._frame.eof:         # the next frame, if any, starts anew
                    chunk = self._frame.unused_data
                    self._frame, self._fed = self._new().decompressobj(), False
            if out:
                return out
        if self._fed:
            raise EOFError("the last zstd frame stops before its end")
        return b""

    def __enter__(self) -> _ZstdStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._file.close()


def _corrupt(path: Path, kind: str, exc: BaseException) -> ReportError:
    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ReportError(f"{path} is {kind}-compressed but cannot be decompressed ({why}): "
                       "it is truncated or damaged; copy it again")


def decompress(path: Path, kind: str, target: Path) -> None:
    """*path* (compressed with *kind*) decompressed into *target*; ReportError (exit 2)
    for a damaged file, WriteError (exit 9) when the temporary directory has no room."""
    errors: tuple[type[BaseException], ...] = (EOFError,)
    if kind == "xz":
        import lzma

        errors += (lzma.LZMAError,)
    elif kind == "gzip":
        import gzip

        errors += (gzip.BadGzipFile,)
    try:
        source = _opened(path, kind)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror}); check its "
                          "permissions") from None
    if kind == "zstd":
        import zstandard

        errors += (zstandard.ZstdError,)
    with source, open(target, "wb") as out:
        try:
            while chunk := source.read(CHUNK):
                out.write(chunk)
        except errors as exc:
            raise _corrupt(path, kind, exc) from None
        except OSError as exc:
            if exc.errno in WRITE_FAILED_ERRNOS:
                raise WriteError(f"cannot decompress {path} into {target.parent} "
                                 f"({exc.strerror}): set TMPDIR to a directory with room, "
                                 f"or decompress it yourself ({DECOMPRESS[kind]} "
                                 f"{path})") from None
            if exc.errno is None:       # gzip's own errors: not a gzip stream, CRC
                raise _corrupt(path, kind, exc) from None
            raise


def _remove(directory: str, owner: int) -> None:
    if os.getpid() == owner:            # never a forked child's copy of the owner
        shutil.rmtree(directory, ignore_errors=True)


class Decompressed:
    """A compressed file's content (``path``) in a fresh private temporary directory,
    removed by :meth:`remove`, when this object is collected, or when the process that
    made it exits: whatever reads the file later (the loader's OS runtime calls, read on
    first use) holds it. A pickled copy (a forked worker's result) owns nothing."""

    def __init__(self, source: Path, kind: str) -> None:
        import tempfile

        try:
            directory = tempfile.mkdtemp(prefix="gpugap-decompressed-")
        except OSError as exc:
            raise WriteError(f"cannot make a temporary directory to decompress {source} "
                             f"in ({exc.strerror}): set TMPDIR to a writable "
                             "directory") from None
        self._finalizer: Any = weakref.finalize(self, _remove, directory, os.getpid())
        self.path = Path(directory) / Path(source.name).with_suffix("").name
        try:
            decompress(source, kind, self.path)
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def named(self, exc: GpugapError, source: Path) -> GpugapError:
        """*exc* (raised reading the copy) naming *source* where it named the copy."""
        message = exc.args[0] if exc.args else str(exc)
        if str(self.path) not in message:
            return exc
        return type(exc)(message.replace(str(self.path), f"{source} (decompressed)"),
                         exit_code=exc.exit_code)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._finalizer = None


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether *path* starts as a compressed file does (False when unreadable)."""
    try:
        with open(path, "rb") as fh:
            return kind_of(fh.read(8)) is not None
    except OSError:
        return False


__all__ = ["DECOMPRESS", "MAGIC", "Decompressed", "decompress", "is_compressed", "kind_of"]
