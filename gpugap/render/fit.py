"""Tables and messages that stay readable in an 80-column terminal or CI log.

A CI log is no terminal: rich renders it at ``COLUMNS`` (80 when unset), and folds a
cell that does not fit its column wherever the column ends, which cut names such as
``findings.copy-compute-serialized.count`` into ``findings.copy-compute-serialized.c`` /
``ount``. Here every column but one holds short values (numbers, PASS, ``≥ 5%``) and is
never wrapped; the one *name* column gets the width that is left, and its names are
broken after a ``.``, ``-``, ``/`` or space (after ``_`` only where they must): where a
reader splits them too.
Messages (FAIL lines, warnings) wrap at spaces under a hanging label; a word longer than
the line (a path) breaks as a name does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

MIN_NAME_WIDTH = 16             # narrower than this, names are cut anyway
_PIECE = re.compile(r"[^./\- ]+[./\- ]*|[./\- ]+")
_UNDERSCORED = re.compile(r"[^_]+_*|_+")

Cell = str | Text


def _pieces(name: str, width: int) -> list[str]:
    """*name* cut after each '.', '-', '/' or ' '; a piece still longer than *width*
    after each '_' too, and one longer still into pieces of *width*."""
    pieces = []
    for piece in _PIECE.findall(name):
        for part in ([piece] if cell_len(piece) <= width else _UNDERSCORED.findall(piece)):
            while cell_len(part) > width:
                pieces.append(part[:width])
                part = part[width:]
            pieces.append(part)
    return pieces


def wrap_name(name: str, width: int) -> str:
    """*name* on lines of at most *width* cells, broken after '.', '-', '/' or ' ' (after
    '_' only inside a part that is too long on its own; cut where nothing else fits)."""
    if width <= 0 or cell_len(name) <= width:
        return name
    lines: list[str] = []
    line = ""
    for piece in _pieces(name, width):
        if line and cell_len(line) + cell_len(piece.rstrip(" ")) > width:
            lines.append(line.rstrip(" "))
            line = ""
        line += piece
    if line.strip(" "):
        lines.append(line.rstrip(" "))
    return "\n".join(lines)


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def text_width(cell: Cell) -> int:
    """Cells taken by the widest line of *cell*."""
    return max((cell_len(line) for line in _plain(cell).split("\n")), default=0)


def table_width(widths: Sequence[int]) -> int:
    """The width of a rich Table of the default box with columns of *widths*: a border
    and one space of padding on each side per column, and the closing border."""
    return sum(widths) + 3 * len(widths) + 1


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> list[int]:
    """Each column as wide as its header or widest value."""
    return [max([cell_len(h), *(text_width(r[i]) for r in rows)])
            for i, h in enumerate(headers)]


def leaves_room(width: int, headers: Sequence[str], rows: Sequence[Sequence[Cell]],
                name_column: int, need: int) -> bool:
    """Do the other columns leave *need* cells (or the widest name, if less) for the
    names in a table of *width*?"""
    widths = column_widths(headers, rows)
    widths[name_column] = min(widths[name_column], need)
    return table_width(widths) <= width


def fitted_table(width: int, headers: Sequence[str], rows: Sequence[Sequence[Cell]], *,
                 name_column: int, right: Sequence[int] = (),
                 title: Text | str | None = None) -> Table:
    """A rich Table of *rows* that fits *width* cells: the columns other than
    *name_column* as wide as their widest value, never wrapped; the names wrapped
    (:func:`wrap_name`) into what is left. Columns in *right* are right-aligned."""
    widths = column_widths(headers, rows)
    others = [w for i, w in enumerate(widths) if i != name_column]
    room = max(MIN_NAME_WIDTH, width - table_width([*others, 0]))
    table = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        table.add_column(header, justify="right" if i in right else "left", no_wrap=True,
                         min_width=min(widths[i], room) if i == name_column else None)
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            if i == name_column:
                style = cell.style if isinstance(cell, Text) else ""
                cell = Text(wrap_name(_plain(cell), room), style=style)
            cells.append(cell if isinstance(cell, Text) else Text(cell))
        table.add_row(*cells)
    return table


def print_labelled(console: Console, label: str, style: str, message: str) -> None:
    """'LABEL message', the message wrapped at spaces under a hanging indent (a word
    longer than the line, such as a path, broken as :func:`wrap_name` breaks a name)."""
    room = max(console.width - cell_len(label) - 1, MIN_NAME_WIDTH)
    message = " ".join(wrap_name(word, room) for word in message.split(" "))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(Text(label, style), Text(message))
    console.print(grid)


__all__ = ["MIN_NAME_WIDTH", "column_widths", "fitted_table", "leaves_room", "print_labelled",
           "table_width", "text_width", "wrap_name"]
