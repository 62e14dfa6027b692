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

import unicodedata
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


__all__ = ["ELLIPSIS", "MESSAGE_LIMIT", "NAME_LIMIT", "one_line", "safe_rich", "safe_text"]
