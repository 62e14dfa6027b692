"""Text from a report (or from a user's file names and arguments) made safe to display.

A report is data someone else may have written: its kernel, range and file names can hold
terminal escape sequences, newlines that forge extra output lines, bidi controls, or
strings of any length. Everything derived from it passes through :func:`safe_text` before
it reaches a terminal, a log, Markdown, JUnit XML or a GitHub annotation:

* every control or format character (Unicode categories Cc and Cf: C0, DEL, C1, ESC,
  zero-width and bidi controls), every line or paragraph separator (Zl, Zp) and every
  lone surrogate (Cs: the undecodable bytes of a file name) is shown as a visible escape,
  ``\\x1b``, ``\\u202e``: nothing is interpreted, nothing is lost;
* the result is cut to *limit* characters with an ellipsis (``…``).

:func:`safe_rich` builds a ``rich.text.Text``, which rich never parses for markup, so a
name like ``[bold]x[/]`` or ``[/oops]`` prints as itself.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

NAME_LIMIT = 200          # names: kernels, NVTX ranges, report files, gates
MESSAGE_LIMIT = 2000      # a whole message or error line
ELLIPSIS = "…"
_UNSAFE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe_text(text: object, limit: int | None = NAME_LIMIT) -> str:
    """*text* with control/format characters escaped visibly, at most *limit* characters
    long (None: no limit) with an ellipsis where it was cut."""
    text = str(text)
    if limit is not None and limit < 1:
        raise ValueError("limit must be at least 1")
    out: list[str] = []
    size = 0
    for ch in text:
        piece = _escape(ch) if unicodedata.category(ch) in _UNSAFE else ch
        if limit is not None and size + len(piece) > limit:
            # Room for the ellipsis: drop what does not fit with it.
            while out and size + 1 > limit:
                size -= len(out.pop())
            out.append(ELLIPSIS)
            return "".join(out)
        out.append(piece)
        size += len(piece)
    return "".join(out)


def short_path(path: object, limit: int = NAME_LIMIT) -> str:
    """A path for a message, its middle cut when longer than *limit* (its start says
    where, its end which file), so that what follows it (the reason) is never cut."""
    text = safe_text(path, None)
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + ELLIPSIS + text[len(text) - (limit - head - 1):]


# Where a path that is not under the working directory is shown by a suffix of it.
PATH_CUT = ELLIPSIS + "/"
# The reports the running command was given, as its output names them (name_paths).
_NAMED: dict[str, str] = {}


def _absolute(path: object) -> str:
    return os.path.abspath(os.fsdecode(path) if isinstance(path, (bytes, os.PathLike))
                           else str(path))


def shown_paths(paths: Iterable[object], *, relative: bool = True) -> list[str]:
    """*paths* as output names them: relative to the working directory when under it
    (unless not *relative*: a narrow column), else the shortest suffix of whole names
    (at least the file's) that no other of *paths* ends with, after ``…/``
    (``…/h2d-copy/h200-sample/bad.sqlite`` beside
    ``…/default-stream/h200-sample/bad.sqlite``). Never cut inside a name; made safe
    to display (:func:`safe_text`). The same path gives the same name."""
    full = [_absolute(p) for p in paths]
    try:
        here = os.getcwd()
    except OSError:                     # the working directory was removed
        here = None
    parts = {f: [n for n in f.split(os.sep) if n] for f in dict.fromkeys(full)}
    shown: dict[str, str] = {}
    outside = []
    for f in parts:
        if relative and here is not None and f.startswith(here.rstrip(os.sep) + os.sep):
            shown[f] = os.path.relpath(f, here)
        else:
            outside.append(f)
    for f in outside:
        others = [parts[o] for o in parts if o != f]
        mine = parts[f]
        k = 1
        while k < len(mine) and any(o[-k:] == mine[-k:] for o in others):
            k += 1
        shown[f] = (os.sep if k == len(mine) else PATH_CUT) + os.sep.join(mine[-k:])
    return [safe_text(shown[f], None) for f in full]


def name_paths(paths: Iterable[object]) -> None:
    """Name the running command's reports together (:func:`shown_paths`), so that every
    view and message of it (:func:`shown_path`) names each one alike."""
    given = list(paths)
    _NAMED.clear()
    _NAMED.update(zip((_absolute(p) for p in given), shown_paths(given), strict=True))


def shown_path(path: object) -> str:
    """*path* as output names it: as :func:`name_paths` named it with the command's other
    reports, else on its own (:func:`shown_paths`)."""
    return _NAMED.get(_absolute(path)) or shown_paths([path])[0]


def fit_path(shown: str, width: int) -> str:
    """A shown path (:func:`shown_path`) in at most *width* characters where it can be:
    whole leading names dropped for ``…/``, the file's name always kept whole."""
    if len(shown) <= width:
        return shown
    names = shown.removeprefix(PATH_CUT).split(os.sep)
    for k in range(len(names) - 1, 0, -1):
        cut = PATH_CUT + os.sep.join(names[-k:])
        if len(cut) <= width:
            return cut
    return PATH_CUT + names[-1] if len(names) > 1 else shown


def one_line(text: object, limit: int | None = NAME_LIMIT) -> str:
    """The first non-empty line of *text* (e.g. an SQLite error that quotes a schema),
    made safe with :func:`safe_text`; an ellipsis says when lines were dropped."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return ""
    first = safe_text(lines[0], limit)
    if len(lines) > 1 and not first.endswith(ELLIPSIS):
        first += " " + ELLIPSIS
    return first


def safe_rich(text: object, style: str = "", limit: int | None = NAME_LIMIT) -> Text:
    """A rich Text of :func:`safe_text` (never parsed as markup)."""
    from rich.text import Text

    return Text(safe_text(text, limit), style=style)


__all__ = ["ELLIPSIS", "MESSAGE_LIMIT", "NAME_LIMIT", "PATH_CUT", "fit_path", "name_paths",
           "one_line", "safe_rich", "safe_text", "shown_path", "shown_paths"]
